"""``Api``: the asyncio HTTP client every request of the operator to the API server goes through.

Lists, watches, binds, events, pod conditions, evictions, policy and PodGroup statuses and the
leader-election Lease all use the process's one ``Credentials`` (``edge/credentials.py``), the same
ones Kopf logs in with. Bodies are plain JSON built by the callers (``kube/bodies.py``), so
timestamps go out exactly as formatted (the official client re-serialises MicroTime without the zero
fraction the API server requires).

**One status rule.** Every request returns a ``ApiResponse`` (``edge/transport.py``): ``ok`` is 2xx,
``gone`` is 404, ``conflict`` is 409; ``status`` 0 means no answer came (a transport failure, a
timeout, or a write this replica was fenced from sending). Callers never raise on HTTP errors and
never compare codes.

**Fencing.** ``Api`` takes a ``fence``: a callable asked before every write (any method but GET).
When it says no, nothing is sent and the response is ``fenced``. The leader elector's own Lease
writes pass ``fence=False``, and so do the secure port's TokenReviews and SubjectAccessReviews
(``kube/serving.py``: they change nothing); everything else is fenced, so no write path can forget
the check (``kube/leader.py`` says when a term is valid).

**Requests** go through the edge's own HTTP/1.1 keep-alive ``Pool`` (``edge/transport.py``: its
idle-age, timeout and resend rules): a bind or an event is a few hundred bytes each way, and
aiohttp's general-purpose request machinery cost twice the CPU of the whole exchange
(``bench/bench_client.py``). A POST lost on a reused connection is never sent again by the pool (a
create twice is a second event or a 409 on our own bind); other methods are.

**Retries.** A request that gets no answer (a reset, a body cut short, a timeout) or is turned away
by an overloaded server (429, 503, 504) is sent again after ``RETRY_PAUSES`` when it is idempotent,
as client-go's request retries resend: GET, PUT, PATCH and DELETE by default, a POST only when its
caller says it may be repeated (``retry=True``: a bind, a create with a fixed name). The fence is
asked again before each try. A response that needed more than one try says so (``retried``): a 404
or 409 may then answer our own first try, which landed (a DELETE that already happened, an event
that already exists, a pod already bound to the node we chose), and the caller counts it as done.

**Watches** stream through aiohttp (imported at the first watch) on a fresh connection each (a
long-lived response read in chunks, where per-request cost does not matter; aiohttp is in the
process for Kopf anyway). The
server ends a watch after its ``timeoutSeconds``; the client gives up on a stream that delivered
nothing, not even a bookmark, for ``idle_timeout`` seconds (the API server sends a bookmark every
minute), so a silently stalled connection is noticed, and drops the pool's idle connections (they
went through the same network). An HTTP error becomes one ``ERROR`` event carrying its code (as the
API server reports a 410 inside a stream); a transport failure or the idle deadline one with code 0
and a ``reason`` that tells the informer what happened: ``UNREACHABLE`` (no connection could be made:
refused, or no answer to the connect), ``NO_ANSWER`` (connected, but nothing came back: reset or
timed out before the response began), ``BROKEN`` (the stream began and was cut: a reset, a truncated
chunk, an idle close by a middlebox) or ``IDLE`` (the deadline above).

**Metrics.** ``observe``, when set, is told of every request sent (``method``, status, seconds; status
0 when no answer came, seconds -1 for a watch, which is counted but not timed): client-go's
``rest_client_requests_total`` and ``rest_client_request_duration_seconds``, with ``metrics_host``
(the server's host:port, client-go's ``host`` label). The operator points it at its
``SchedulerMetrics``; a fenced write, never sent, is not counted.

A kubeconfig's ``proxy-url`` is honoured by requests (a CONNECT tunnel, ``transport.Pool``) and
watches (aiohttp's ``proxy``) alike.

The bearer token comes from the credentials' ``TokenSource``: one that is about to expire (an exec
plugin's, an OIDC id-token) is refreshed first, off the event loop; a 401 refreshes it at once and,
if it changed, the request is sent once more.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlencode, urlsplit

import orjson

from ..core.framework.interface import ApiResponse
from .credentials import Credentials, ssl_context
from .transport import CONNECTION_LIMIT, MAX_IDLE_AGE, Fenced, Pool, ResponseParser

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "BROKEN",
    "CONNECTION_LIMIT",
    "IDLE",
    "LIST_PAGE",
    "MAX_IDLE_AGE",
    "NO_ANSWER",
    "UNREACHABLE",
    "WATCH_IDLE_TIMEOUT",
    "Api",
    "ApiResponse",
    "ResponseParser",
    "dumps",
    "loads",
]

#: seconds a watch may deliver nothing, not even a bookmark, before it is given up: the API server
#: sends a bookmark every 60 s to a watch that asked for them, so twice that means it is stalled
WATCH_IDLE_TIMEOUT: Final = 120.0
#: items per page of ``Api.list_each``
LIST_PAGE: Final = 500
#: pauses (seconds, each drawn up to twice as long) before an idempotent request is sent again
RETRY_PAUSES: Final = (0.1, 0.4, 1.0)
#: answers of a server that is overloaded or restarting: an idempotent request is sent again
RETRY_STATUSES: Final = frozenset({429, 503, 504})
#: the ``reason`` of a watch's synthetic ERROR (code 0): no connection could be made (refused, a connect timeout)
UNREACHABLE: Final = "Unreachable"
#: connected, but nothing came back before the response began
NO_ANSWER: Final = "NoAnswer"
#: the stream began, then was cut (a reset, a truncated chunk, a connection closed by a middlebox)
BROKEN: Final = "StreamBroken"
#: the stream delivered nothing, not even a bookmark, for the idle deadline
IDLE: Final = "Idle"


class Api:
    """A minimal async Kubernetes API client; see the module docstring.

    `fence` is asked before every write (None: writes are always allowed); `user_agent` goes on
    every request this process makes itself (audit logs tell replicas apart by it); `clock` ages the
    pool's idle connections (``Pool``'s: ``time.monotonic`` unless a test moves its own).
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        timeout: float = 15.0,
        connections: int = CONNECTION_LIMIT,
        user_agent: str = "kopf-scheduler",
        fence: Callable[[], bool] | None = None,
        max_idle_age: float = MAX_IDLE_AGE,
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.credentials = credentials
        self.host = credentials.server
        self.fence = fence
        self.watch_idle_timeout = watch_idle_timeout
        #: (method, status, seconds) of each request sent; see the module docstring
        self.observe: Callable[[str, int, float], None] | None = None
        url = urlsplit(credentials.server)
        self._tls = ssl_context(credentials) if url.scheme == "https" else None
        self._server_hostname = (credentials.tls_server_name or url.hostname) if self._tls else None
        self._prefix = url.path.rstrip("/")
        authority = url.netloc.rpartition("@")[2]
        self.metrics_host = authority
        self.user_agent = user_agent
        self._head = f"Host: {authority}\r\nAccept: application/json\r\nUser-Agent: {user_agent}\r\n"
        self._timeout = timeout
        self._pool = Pool(
            url.hostname or "localhost",
            url.port or (443 if url.scheme == "https" else 80),
            timeout=timeout,
            tls=self._tls,
            server_hostname=self._server_hostname,
            connections=connections,
            max_idle_age=max_idle_age,
            proxy=credentials.proxy_url,
            clock=clock,
        )
        self._session: aiohttp.ClientSession | None = None
        self._refreshing: asyncio.Lock | None = None

    def may_write(self) -> bool:
        return self.fence is None or self.fence()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        fence: bool = True,
        accept: str | None = None,
        decode: bool = True,
        retry: bool | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """One request; `fence=False` only for the Lease itself and for reviews, which change nothing (see
        the module docstring); `headers` go with it (the kubectl plugin's token for the operator). With
        `decode` False a successful answer's body is not parsed (a created Event, a bind's Status:
        nobody reads them, and parsing them cost more than the rest of the exchange). `retry`: whether
        it may be sent again after no answer or an overloaded server's (default: every method but POST)."""
        data = None if body is None else dumps(body)
        if headers and any("\r" in h or "\n" in h for item in headers.items() for h in item):
            raise ValueError("a header name or value holds a line break")
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        pauses = RETRY_PAUSES if (method != "POST" if retry is None else retry) else ()
        tries = 0
        while True:
            if fence and method != "GET" and not self.may_write():
                return ApiResponse(0, fenced=True, retried=tries > 0)
            response = await self._once(method, path, data, content_type, accept, decode, fence, extra)
            if tries >= len(pauses) or response.fenced or (response.status and response.status not in RETRY_STATUSES):
                return replace(response, retried=True) if tries else response
            await asyncio.sleep(pauses[tries] * (1.0 + random.random()))
            tries += 1

    async def _once(
        self,
        method: str,
        path: str,
        data: bytes | None,
        content_type: str,
        accept: str | None,
        decode: bool,
        fence: bool,
        extra: str = "",
    ) -> ApiResponse:
        """One try: a stale token refreshed first, a 401 with a token that changed on refresh sent once more."""
        await self._fresh_token()
        response = await self._send(method, path, data, content_type, accept, decode, fence, extra)
        token = self.credentials.token
        if response.unauthorized and token is not None and await self._refresh_token():
            response = await self._send(method, path, data, content_type, accept, decode, fence, extra)
        return response

    async def _fresh_token(self) -> None:
        token = self.credentials.token
        if token is not None and token.stale():
            await self._refresh_token()

    async def _refresh_token(self) -> bool:
        """Refresh the token off the event loop (an exec plugin runs); one refresh at a time."""
        token = self.credentials.token
        if token is None:
            return False
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        before = token.current()
        async with self._refreshing:
            if token.current() != before:  # another request refreshed it meanwhile
                return True
            return await asyncio.to_thread(token.refresh)

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        content_type: str,
        accept: str | None,
        decode: bool,
        fence: bool,
        extra: str = "",
    ) -> ApiResponse:
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._head}{self._authorization()}{extra}"
        if accept is not None:
            head = head.replace("Accept: application/json\r\n", f"Accept: {accept}\r\n", 1)
        if data is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        request = (head + "\r\n").encode("latin-1") + (data or b"")
        guard = self.fence if fence and method != "GET" else None
        observe = self.observe
        started = time.perf_counter() if observe is not None else 0.0
        try:
            status, raw = await self._pool.send(request, replayable=method != "POST", guard=guard)
        except Fenced:
            return ApiResponse(0, fenced=True)
        except TimeoutError:
            if observe is not None:
                observe(method, 0, time.perf_counter() - started)
            return ApiResponse(0, error=f"TimeoutError: no answer within {self._timeout:g}s")
        except (OSError, ssl.SSLError, ValueError) as exc:
            if observe is not None:
                observe(method, 0, time.perf_counter() - started)
            return ApiResponse(0, error=f"{type(exc).__name__}: {exc}")
        if observe is not None:
            observe(method, status, time.perf_counter() - started)
        answer = ApiResponse(status)
        if not raw or (not decode and answer.ok):
            return answer
        try:
            return ApiResponse(status, loads(raw))
        except ValueError:
            return ApiResponse(status, raw.decode("utf-8", "replace"))

    async def list_each(
        self,
        path: str,
        visit: Callable[[Any], None],
        *,
        query: str = "",
        accept: str | None = None,
        limit: int = LIST_PAGE,
    ) -> ApiResponse | None:
        """A one-off paged list: `visit` every item of every page (``limit`` at a time, the next page asked for
        with the last one's continue token). `query` is more of the query string, already encoded
        (``&fieldSelector=...``). None when every page came; else the answer that was not a list page (a
        failure, or an expired continue token): the caller says why and gives up.

        The informers list on their own (``informer.py``: the next page is asked for before a page is applied,
        and a failure is retried), and so does ``snapshot.py`` on the blocking client."""
        token = ""
        while True:
            page = f"?limit={limit}{query}" + (f"&continue={quote(token)}" if token else "")
            response = await self.request("GET", path + page, accept=accept)
            if not response.ok or not isinstance(response.body, dict):
                return response
            for item in response.body.get("items") or ():
                visit(item)
            token = str((response.body.get("metadata") or {}).get("continue") or "")
            if not token:
                return None

    def _authorization(self) -> str:
        token = self.credentials.token
        return f"Authorization: Bearer {token.current()}\r\n" if token is not None else ""

    async def watch(self, path: str, params: Mapping[str, str], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """The events of ``GET path?watch=1&...`` until the server ends it (after `timeout` seconds),
        the connection fails or nothing arrives for ``watch_idle_timeout`` seconds."""
        import aiohttp  # here: the commands that only list (edge/blocking.py) start without it

        query = urlencode({**params, "watch": "1", "timeoutSeconds": str(int(timeout))})
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout, sock_read=self.watch_idle_timeout
        )
        await self._fresh_token()
        opened = False
        for attempt in range(2):
            try:
                async with self._watch_session().get(
                    f"{self.host}{path}?{query}",
                    headers=self._watch_headers(),
                    timeout=client_timeout,
                    server_hostname=self._server_hostname if self._tls is not None else None,
                    proxy=self.credentials.proxy_url,
                ) as resp:
                    if self.observe is not None:
                        self.observe("GET", resp.status, -1.0)
                    answer = ApiResponse(resp.status)
                    if answer.unauthorized and attempt == 0 and await self._refresh_token():
                        continue
                    if not answer.ok:
                        text = await resp.text()
                        yield {"type": "ERROR", "object": {"code": resp.status, "message": text[:300]}}
                        return
                    opened = True
                    buffer = b""
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        if b"\n" not in chunk:
                            continue
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            if line:
                                yield loads(line)
                    return
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                if self.observe is not None:
                    self.observe("GET", 0, -1.0)
                yield _watch_failure(UNREACHABLE, f"{type(exc).__name__}: {exc}")
                return
            except TimeoutError:
                self._pool.drop_idle()  # a silent stall: the pooled connections opened before it are likely as dead
                if opened:
                    yield _watch_failure(IDLE, f"nothing received for {self.watch_idle_timeout:g}s")
                else:
                    yield _watch_failure(NO_ANSWER, "TimeoutError: the watch was not answered in time")
                return
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                if self.observe is not None and not opened:
                    self.observe("GET", 0, -1.0)
                yield _watch_failure(BROKEN if opened else NO_ANSWER, f"{type(exc).__name__}: {exc}")
                return

    def _watch_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            # a fresh connection per watch: never a pooled one that may have died while idle
            connector = aiohttp.TCPConnector(
                ssl=self._tls if self._tls is not None else False, limit=0, force_close=True
            )
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"Accept": "application/json", "User-Agent": self.user_agent}
            )
        return self._session

    def _watch_headers(self) -> dict[str, str]:
        token = self.credentials.token
        return {"Authorization": f"Bearer {token.current()}"} if token is not None else {}

    async def close(self) -> None:
        self._pool.close()
        if self._session is not None:
            await self._session.close()
            self._session = None


def _watch_failure(reason: str, message: str) -> dict[str, Any]:
    """The synthetic ERROR event of a watch that ended without an answer of the server's (code 0)."""
    return {"type": "ERROR", "object": {"code": 0, "reason": reason, "message": message}}


def loads(raw: bytes) -> Any:
    """A JSON body or watch line: orjson's parse (twice as fast as json's on API objects: 11 against 22 us a
    node of a 500-node list page here), json's for whatever orjson refuses (invalid UTF-8, an integer past
    64 bits); ValueError when it is not JSON at all."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8", "replace"))


def dumps(body: Any) -> bytes:
    """A request body, compact: orjson's, json's for what orjson refuses (an integer past 64 bits)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, separators=(",", ":")).encode()
