"""``Api``: the asyncio HTTP client every request of the operator goes through, and its one ``Response``.

Lists, watches, binds, events, pod conditions, evictions, policy and PodGroup statuses and the
leader-election Lease all use the process's one ``Credentials`` (``edge/credentials.py``), the same
ones Kopf logs in with. Bodies are plain JSON built by the callers, so timestamps go out exactly as
formatted (the official client re-serialises MicroTime without the zero fraction the API server
requires).

**One status rule.** Every request returns a ``Response``: ``ok`` is 2xx, ``gone`` is 404,
``conflict`` is 409; ``status`` 0 means no answer came (a transport failure, a timeout, or a write
this replica was fenced from sending). Callers never raise on HTTP errors and never compare codes.

**Fencing.** ``Api`` takes a ``fence``: a callable asked before every write (any method but GET).
When it says no, nothing is sent and the response is ``fenced``. The leader elector's own Lease
writes pass ``fence=False``; everything else is fenced, so no write path can forget the check
(``kube/leader.py`` says when a term is valid).

**Requests** speak HTTP/1.1 over a pool of keep-alive connections (``_Connection``, an asyncio
protocol, one request at a time each; at most ``CONNECTION_LIMIT`` open): a bind or an event is a
few hundred bytes each way, and aiohttp's general-purpose request machinery cost twice the CPU of
the whole exchange (``bench/bench_client.py``). ``ResponseParser`` reads what the API server sends:
a status line, headers, a body by Content-Length or chunked, and ``Connection: close``. A pooled
connection idle for longer than ``MAX_IDLE_AGE`` is closed instead of reused (a middlebox may have
forgotten it, and a request on it would wait out the timeout), and a request that times out, or a
watch given up at its idle deadline, drops every idle connection (they went through the same
network). A request on a reused connection that is lost before any answer arrived is sent once more
on a new one, unless it is a POST: the server may have read it and acted (Go's transport resends only
what is idempotent or surely unread), and a create twice is a second event or a 409 on our own bind.

**Watches** stream through aiohttp on a fresh connection each (a long-lived response read in
chunks, where per-request cost does not matter; aiohttp is in the process for Kopf anyway). The
server ends a watch after its ``timeoutSeconds``; the client gives up on a stream that delivered
nothing, not even a bookmark, for ``idle_timeout`` seconds (the API server sends a bookmark every
minute), so a silently stalled connection is noticed. An HTTP error becomes one ``ERROR`` event
carrying its code (as the API server reports a 410 inside a stream), a transport failure or the idle
deadline one with code 0.

The bearer token comes from the credentials' ``TokenSource``: one that is about to expire (an exec
plugin's, an OIDC id-token) is refreshed first, off the event loop; a 401 refreshes it at once and,
if it changed, the request is sent once more.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast
from urllib.parse import urlencode, urlsplit

import aiohttp

from .credentials import Credentials, ssl_context

__all__ = ["CONNECTION_LIMIT", "MAX_IDLE_AGE", "WATCH_IDLE_TIMEOUT", "Api", "Response", "ResponseParser"]

#: pooled connections: more than the binds and writes in flight at once (64 + 16), so a Lease
#: renewal or a policy status never waits behind them for a connection
CONNECTION_LIMIT: Final = 128
#: seconds a pooled connection may sit idle and still be reused (Go's transport: 90 s)
MAX_IDLE_AGE: Final = 30.0
#: seconds a watch may deliver nothing, not even a bookmark, before it is given up: the API server
#: sends a bookmark every 60 s to a watch that asked for them, so twice that means it is stalled
WATCH_IDLE_TIMEOUT: Final = 120.0
_NO_BODY: Final = frozenset({204, 304})
_FENCED: Final = "not sent: this replica is not the leader (its term ended or may have ended)"


@dataclass(frozen=True, slots=True)
class Response:
    """What came back: the HTTP status and the decoded body (JSON, text or None).

    ``status`` 0 means no answer: `error` says why (a transport failure, a timeout), or `fenced` is
    set (a write this replica may not send).
    """

    status: int
    body: Any = None
    error: str = ""
    fenced: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        """404: the object (or the API) does not exist."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: already exists, modified meanwhile, a failed uid precondition, or already bound."""
        return self.status == 409

    def detail(self, limit: int = 300) -> str:
        """For logs and messages: the Status message of an error, or the text, or why nothing came."""
        if self.status == 0:
            return self.error or (_FENCED if self.fenced else "no answer")
        body = self.body
        text = str(body.get("message", body)) if isinstance(body, dict) else str(body)
        return text[:limit]

    def describe(self) -> str:
        """``HTTP 409 <message>``, for log lines."""
        return f"HTTP {self.status} {self.detail()}" if self.status else self.detail()


class ResponseParser:
    """Incremental HTTP/1.1 response parser: ``feed`` bytes, get the responses they complete.

    A response is ``(status, body, keep_alive)``. Bodies come by Content-Length, chunked transfer
    encoding (trailers skipped), or not at all (1xx answers are skipped, 204 and 304 have none).
    A response delimited only by the connection's end is not supported: the API server never sends
    one to an HTTP/1.1 request. Malformed input raises ``ValueError``.
    """

    __slots__ = ("_buffer", "_status", "_keep_alive", "_length", "_chunked", "_body")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._status = 0  # 0: reading the head
        self._keep_alive = True
        self._length = 0  # Content-Length left, or the size of the chunk being read
        self._chunked = False
        self._body = bytearray()

    @property
    def idle(self) -> bool:
        """Nothing of a response has arrived yet."""
        return self._status == 0 and not self._buffer

    def feed(self, data: bytes) -> list[tuple[int, bytes, bool]]:
        self._buffer += data
        done: list[tuple[int, bytes, bool]] = []
        while self._buffer or self._status:
            if self._status == 0 and not self._read_head():
                return done
            if self._chunked:
                if not self._read_chunks():
                    return done
            else:
                if len(self._buffer) < self._length:
                    return done
                self._body += self._buffer[: self._length]
                del self._buffer[: self._length]
            done.append((self._status, bytes(self._body), self._keep_alive))
            self._status, self._body = 0, bytearray()
        return done

    def _read_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = bytes(self._buffer[:end]).split(b"\r\n")
        del self._buffer[: end + 4]
        version, _, rest = lines[0].partition(b" ")
        status = int(rest[:3])
        if not version.startswith(b"HTTP/1.") or not 100 <= status <= 999:
            raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        if status < 200:  # 100 Continue and friends: the real answer follows
            return self._read_head()
        length, chunked, keep_alive = 0, False, version != b"HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                keep_alive = b"close" not in value.lower()
        self._status, self._keep_alive, self._chunked = status, keep_alive, chunked
        self._length = 0 if status in _NO_BODY else length
        if chunked and status not in _NO_BODY:
            self._length = -1  # the next chunk's size line is to be read
        else:
            self._chunked = False
        return True

    def _read_chunks(self) -> bool:
        """Read chunks until the last one (then True) or until the data runs out (False)."""
        buffer = self._buffer
        while True:
            if self._length == -1:
                eol = buffer.find(b"\r\n")
                if eol < 0:
                    return False
                size = int(bytes(buffer[:eol]).split(b";")[0], 16)
                del buffer[: eol + 2]
                if size == 0:
                    self._length = -2  # trailers until an empty line
                else:
                    self._length = size
            if self._length == -2:
                eol = buffer.find(b"\r\n")
                if eol < 0:
                    return False
                del buffer[: eol + 2]
                if eol == 0:
                    self._chunked = False
                    return True
                continue
            if len(buffer) < self._length + 2:
                return False
            self._body += buffer[: self._length]
            del buffer[: self._length + 2]
            self._length = -1


class _Connection(asyncio.Protocol):
    """One keep-alive connection to the API server; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.answer: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        try:
            responses = self.parser.feed(data)
        except ValueError as exc:
            self._fail(exc)
            return
        for response in responses:
            if self.answer is not None and not self.answer.done():
                self.answer.set_result(response)
            self.answer = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionResetError("the API server closed the connection"))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes, bool]]:
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.answer


class _Lost(Exception):
    """A reused connection ended before any byte of the answer: the request may be sent again."""


class _Fenced(Exception):
    """The fence said no right before the request was sent: nothing was sent."""


class Api:
    """A minimal async Kubernetes API client; see the module docstring.

    `fence` is asked before every write (None: writes are always allowed); `user_agent` goes on
    every request this process makes itself (audit logs tell replicas apart by it).
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
    ) -> None:
        self.credentials = credentials
        self.host = credentials.server
        self.fence = fence
        self.watch_idle_timeout = watch_idle_timeout
        url = urlsplit(credentials.server)
        self._tls = ssl_context(credentials) if url.scheme == "https" else None
        self._server_hostname = (credentials.tls_server_name or url.hostname) if self._tls else None
        self._address = (url.hostname or "localhost", url.port or (443 if url.scheme == "https" else 80))
        self._prefix = url.path.rstrip("/")
        authority = url.netloc.rpartition("@")[2]
        self.user_agent = user_agent
        self._head = f"Host: {authority}\r\nAccept: application/json\r\nUser-Agent: {user_agent}\r\n"
        self._timeout = timeout
        self._max_idle_age = max_idle_age
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[tuple[_Connection, float]] = []
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
    ) -> Response:
        """One request; `fence=False` only for the Lease itself (see the module docstring). With
        `decode` False a successful answer's body is not parsed (a created Event, a bind's Status:
        nobody reads them, and parsing them cost more than the rest of the exchange)."""
        if fence and method != "GET" and not self.may_write():
            return Response(0, fenced=True)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        await self._fresh_token()
        response = await self._send(method, path, data, content_type, accept, decode, fence)
        token = self.credentials.token
        if response.status == 401 and token is not None and await self._refresh_token():
            response = await self._send(method, path, data, content_type, accept, decode, fence)
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
    ) -> Response:
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._head}{self._authorization()}"
        if accept is not None:
            head = head.replace("Accept: application/json\r\n", f"Accept: {accept}\r\n", 1)
        if data is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        request = (head + "\r\n").encode("latin-1") + (data or b"")
        guard = self.fence if fence and method != "GET" else None
        try:
            async with self._slots, asyncio.timeout(self._timeout):
                try:
                    status, raw = await self._exchange(request, fresh=False, guard=guard)
                except _Lost:
                    if method == "POST":  # maybe read and done: never twice (a second event, a 409 on our own bind)
                        raise
                    status, raw = await self._exchange(request, fresh=True, guard=guard)
        except _Fenced:
            return Response(0, fenced=True)
        except TimeoutError:
            self._drop_idle()  # they went through the same network: do not wait out the timeout on each
            return Response(0, error=f"TimeoutError: no answer within {self._timeout:g}s")
        except (OSError, ssl.SSLError, ValueError, _Lost) as exc:
            return Response(0, error=f"{type(exc).__name__}: {exc}")
        if not raw or (not decode and 200 <= status < 300):
            return Response(status)
        text = raw.decode("utf-8", "replace")
        try:
            return Response(status, json.loads(text))
        except ValueError:
            return Response(status, text)

    async def _exchange(self, request: bytes, *, fresh: bool, guard: Callable[[], bool] | None) -> tuple[int, bytes]:
        conn = None if fresh else self._reuse()
        reused = conn is not None
        if conn is None:
            conn = await self._connect()
        if guard is not None and not guard():  # asked again right before the bytes go: waits above may be long
            self._idle.append((conn, time.monotonic()))
            raise _Fenced
        try:
            status, raw, keep_alive = await conn.send(request)
        except BaseException as exc:
            lost_early = (
                conn.closed and conn.parser.idle and not isinstance(exc, (asyncio.CancelledError, TimeoutError))
            )
            if conn.transport is not None:
                conn.transport.close()  # an answer may still be on its way: never reuse this one
            conn.closed = True
            if reused and lost_early:
                raise _Lost(str(exc)) from exc
            raise
        if keep_alive and not conn.closed:
            self._idle.append((conn, time.monotonic()))
        elif conn.transport is not None:
            conn.transport.close()
        return status, raw

    def _reuse(self) -> _Connection | None:
        """The most recently used idle connection that is open and young enough; older ones are closed."""
        oldest = time.monotonic() - self._max_idle_age
        while self._idle:
            conn, since = self._idle.pop()
            if since < oldest:
                self._close_all_idle(also=conn)  # everything below is older still
                return None
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    def _close_all_idle(self, *, also: _Connection | None = None) -> None:
        idle, self._idle = self._idle, []
        for conn in [c for c, _ in idle] + ([also] if also is not None else []):
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()

    def _drop_idle(self) -> None:
        self._close_all_idle()

    async def _connect(self) -> _Connection:
        host, port = self._address
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            _Connection, host, port, ssl=self._tls, server_hostname=self._server_hostname
        )
        return conn

    def _authorization(self) -> str:
        token = self.credentials.token
        return f"Authorization: Bearer {token.current()}\r\n" if token is not None else ""

    async def watch(self, path: str, params: Mapping[str, str], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """The events of ``GET path?watch=1&...`` until the server ends it (after `timeout` seconds),
        the connection fails or nothing arrives for ``watch_idle_timeout`` seconds."""
        query = urlencode({**params, "watch": "1", "timeoutSeconds": str(int(timeout))})
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout, sock_read=self.watch_idle_timeout
        )
        await self._fresh_token()
        for attempt in range(2):
            try:
                async with self._watch_session().get(
                    f"{self.host}{path}?{query}",
                    headers=self._watch_headers(),
                    timeout=client_timeout,
                    server_hostname=self._server_hostname if self._tls is not None else None,
                ) as resp:
                    if resp.status == 401 and attempt == 0 and await self._refresh_token():
                        continue
                    if resp.status != 200:
                        text = await resp.text()
                        yield {"type": "ERROR", "object": {"code": resp.status, "message": text[:300]}}
                        return
                    buffer = b""
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        if b"\n" not in chunk:
                            continue
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            if line:
                                yield json.loads(line)
                    return
            except TimeoutError:
                self._drop_idle()  # a silent stall: the pooled connections opened before it are likely as dead
                yield {
                    "type": "ERROR",
                    "object": {"code": 0, "message": f"nothing received for {self.watch_idle_timeout:g}s"},
                }
                return
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                yield {"type": "ERROR", "object": {"code": 0, "message": f"{type(exc).__name__}: {exc}"}}
                return

    def _watch_session(self) -> aiohttp.ClientSession:
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
        self._close_all_idle()
        if self._session is not None:
            await self._session.close()
            self._session = None
