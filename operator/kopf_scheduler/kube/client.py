"""``Api``: the asyncio HTTP client the operator's informers and writes go through.

The informers' lists and watches (``kube/informer.py``), binds, events, pod conditions,
SchedulingPolicy statuses and the leader-election Lease all use the process's one
``Credentials`` (``kube/credentials.py``), the same ones Kopf's policy watch logs in with. Bodies
are plain JSON we build ourselves, so timestamps go out exactly as formatted (the official client
re-serialises MicroTime without the zero fraction the API server requires).

``request`` speaks HTTP/1.1 itself over a pool of keep-alive connections (``_Connection``, an
asyncio protocol, one request at a time each; at most ``CONNECTION_LIMIT`` open): a bind or an
event is a few hundred bytes each way, and aiohttp's general-purpose request machinery cost twice
the CPU of the whole exchange (``bench/bench_client.py``: about 220 against 100 us of our CPU per
request). The parser (``ResponseParser``) reads what the API server sends: a status line, headers,
a body by Content-Length or chunked, and ``Connection: close``. A connection the server closed
while idle is noticed by the pool and dropped; a request sent on a reused connection that is lost
before any answer arrived is sent once more on a new one (the server never read it: this is how
Go's transport treats a server closing an idle connection).

``watch`` streams through aiohttp (a long-lived response read in chunks, where per-request cost
does not matter): its events come as decoded dicts until the server's timeout ends the stream; an
HTTP error becomes one ``ERROR`` event carrying its code (as the API server reports a 410 inside
a stream), a transport failure one with code 0.

Requests never raise for HTTP errors: they return (status, decoded body); a transport failure
or a timeout returns status 0 and the error text. The bearer token is taken from its
``TokenSource`` for every request (a token file is looked at at most once a second); a 401 makes
it re-read the token at once and, if the token changed, the request is sent once more.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp

from .credentials import Credentials, ssl_context

__all__ = ["CONNECTION_LIMIT", "Api", "ResponseParser"]

#: pooled connections: more than the binds and writes in flight at once (64 + 16), so a Lease
#: renewal or a policy status never waits behind them for a connection
CONNECTION_LIMIT: Final = 128
#: a watch that sends nothing (not even a bookmark) for this long past its own timeout is dead
WATCH_READ_SLACK: Final = 30.0
_NO_BODY: Final = frozenset({204, 304})


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
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

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


class Api:
    """A minimal async Kubernetes API client; see the module docstring."""

    def __init__(self, credentials: Credentials, *, timeout: float = 15.0, connections: int = CONNECTION_LIMIT) -> None:
        self.credentials = credentials
        self.host = credentials.server
        url = urlsplit(credentials.server)
        self._tls = ssl_context(credentials) if url.scheme == "https" else None
        self._address = (url.hostname or "localhost", url.port or (443 if url.scheme == "https" else 80))
        self._prefix = url.path.rstrip("/")
        authority = url.netloc.rpartition("@")[2]
        self._head = f"Host: {authority}\r\nAccept: application/json\r\nUser-Agent: kopf-scheduler\r\n"
        self._timeout = timeout
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[_Connection] = []
        self._session: aiohttp.ClientSession | None = None

    async def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        status, answer = await self._send(method, path, data, content_type)
        token = self.credentials.token
        if status == 401 and token is not None and token.refresh():
            status, answer = await self._send(method, path, data, content_type)
        return status, answer

    async def _send(self, method: str, path: str, data: bytes | None, content_type: str) -> tuple[int, Any]:
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._head}{self._authorization()}"
        if data is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        request = (head + "\r\n").encode("latin-1") + (data or b"")
        try:
            async with self._slots, asyncio.timeout(self._timeout):
                try:
                    status, raw = await self._exchange(request, fresh=False)
                except _Lost:
                    status, raw = await self._exchange(request, fresh=True)
        except (TimeoutError, OSError, ssl.SSLError, ValueError, _Lost) as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        if not raw:
            return status, None
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    async def _exchange(self, request: bytes, *, fresh: bool) -> tuple[int, bytes]:
        conn = None if fresh else self._reuse()
        reused = conn is not None
        if conn is None:
            conn = await self._connect()
        try:
            status, raw, keep_alive = await conn.send(request)
        except BaseException as exc:
            lost_early = conn.closed and conn.parser.idle and not isinstance(exc, (asyncio.CancelledError, TimeoutError))
            if conn.transport is not None:
                conn.transport.close()  # an answer may still be on its way: never reuse this one
            conn.closed = True
            if reused and lost_early:
                raise _Lost(str(exc)) from exc
            raise
        if keep_alive and not conn.closed:
            self._idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()
        return status, raw

    def _reuse(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    async def _connect(self) -> _Connection:
        host, port = self._address
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, host, port, ssl=self._tls, server_hostname=host if self._tls else None)
        return conn

    def _authorization(self) -> str:
        token = self.credentials.token
        return f"Authorization: Bearer {token.current()}\r\n" if token is not None else ""

    async def watch(self, path: str, params: Mapping[str, str], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """The events of ``GET path?watch=1&...`` (the server ends it after `timeout` seconds)."""
        query = urlencode({**params, "watch": "1", "timeoutSeconds": str(int(timeout))})
        client_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout, sock_read=timeout + WATCH_READ_SLACK)
        for attempt in range(2):
            try:
                async with self._watch_session().get(f"{self.host}{path}?{query}", headers=self._watch_headers(), timeout=client_timeout) as resp:
                    if resp.status == 401 and attempt == 0 and self.credentials.token is not None and self.credentials.token.refresh():
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
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                yield {"type": "ERROR", "object": {"code": 0, "message": f"{type(exc).__name__}: {exc}"}}
                return

    def _watch_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else False, limit=0)
            self._session = aiohttp.ClientSession(connector=connector, headers={"Accept": "application/json", "User-Agent": "kopf-scheduler"})
        return self._session

    def _watch_headers(self) -> dict[str, str]:
        token = self.credentials.token
        return {"Authorization": f"Bearer {token.current()}"} if token is not None else {}

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            if conn.transport is not None:
                conn.transport.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
