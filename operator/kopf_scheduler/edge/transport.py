"""HTTP/1.1 for the requests this process makes itself: a sans-I/O ``ResponseParser``, ``Pool`` (keep-alive
connections to one origin, on an asyncio loop) and ``LoopBridge`` (the same pool for blocking callers).

Two clients use it: ``Api`` (``client.py``: requests to the API server) and ``HTTPExtender``
(``extenders.py``: calls to a policy's extenders). Each owns one ``Pool``; the rules below are the
pool's, so they hold for both.

**The pool.** At most ``connections`` open at once, one request at a time each (``_Connection``, an
asyncio protocol). A request and its answer must fit in ``timeout`` seconds (connecting included;
waiting for a free connection is not). A connection idle for longer than ``max_idle_age`` is closed
instead of reused (a middlebox may have forgotten it, and a request on it would wait out the
timeout); a request that times out drops every idle connection (they went through the same
network). A request on a reused connection that is lost before any answer arrived is sent once more
on a new one only when the caller says it is ``replayable``: the server may have read it and acted
(Go's transport resends only what is idempotent or surely unread). A connection that cannot be made
is a ``ConnectError`` worded as Go's dialer words it (``dial tcp HOST:PORT: connect: connection
refused``); TLS failures keep ``ssl``'s text (``CERTIFICATE_VERIFY_FAILED``...).

**Through a proxy.** With ``proxy`` (a kubeconfig's ``proxy-url``, ``http://[user:password@]host:port``)
each connection is a tunnel: ``CONNECT host:port`` to the proxy, then TLS (or plain HTTP) inside it, as
Go's transport does for an https server (for plain http it would send absolute URIs instead; an API
server behind a proxy speaks https). A proxy that refuses answers a ``ConnectError`` with its status
line; an ``https://`` or ``socks5://`` proxy is a ``ValueError`` when the pool is made.

**Blocking callers** (the extender calls of an attempt decided in a worker thread, and ``simulate``)
reach a pool through ``LoopBridge``: the coroutine is submitted to the operator's event loop
(``asyncio.run_coroutine_threadsafe``), or, where no loop runs, the caller runs it on a private loop.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar, cast
from urllib.parse import unquote, urlsplit

__all__ = [
    "CONNECTION_LIMIT",
    "MAX_IDLE_AGE",
    "ConnectError",
    "Fenced",
    "LoopBridge",
    "LostConnection",
    "Pool",
    "ResponseParser",
]

T = TypeVar("T")

#: pooled connections: more than the binds and writes in flight at once (64 + 16), so a Lease
#: renewal or a policy status never waits behind them for a connection
CONNECTION_LIMIT: Final = 128
#: seconds a pooled connection may sit idle and still be reused (Go's transport: 90 s)
MAX_IDLE_AGE: Final = 30.0
_NO_BODY: Final = frozenset({204, 304})


class ResponseParser:
    """Incremental HTTP/1.1 response parser: ``feed`` bytes, get the responses they complete.

    A response is ``(status, body, keep_alive)``. Bodies come by Content-Length, chunked transfer
    encoding (trailers skipped), or not at all (1xx answers are skipped, 204 and 304 have none).
    A response delimited only by the connection's end is not supported: neither the API server nor
    an extender sends one to an HTTP/1.1 request. Malformed input raises ``ValueError``.
    """

    __slots__ = ("_buffer", "_status", "_keep_alive", "_length", "_chunked", "_body", "_parts", "_have")

    def __init__(self) -> None:
        self._buffer = bytearray()  # the head being read, or chunked data
        self._status = 0  # 0: reading the head
        self._keep_alive = True
        self._length = 0  # Content-Length, or the size of the chunk being read
        self._chunked = False
        self._body = bytearray()  # a chunked body so far
        self._parts: list[bytes] = []  # a Content-Length body so far, as it came (joined once: bodies may be MBs)
        self._have = 0  # bytes in _parts

    @property
    def idle(self) -> bool:
        """Nothing of a response has arrived yet."""
        return self._status == 0 and not self._buffer

    def feed(self, data: bytes) -> list[tuple[int, bytes, bool]]:
        done: list[tuple[int, bytes, bool]] = []
        while True:
            if self._status == 0:
                self._buffer += data
                if not self._read_head():
                    return done
                data = b"" if self._chunked else bytes(self._buffer)  # what followed the head
                if not self._chunked:
                    self._buffer.clear()
            if self._chunked:
                self._buffer += data
                if not self._read_chunks():
                    return done
                body = bytes(self._body)
                data = bytes(self._buffer)
                self._buffer.clear()
            else:
                need = self._length - self._have
                if len(data) < need:
                    self._parts.append(data)
                    self._have += len(data)
                    return done
                self._parts.append(data[:need])
                data = data[need:]
                body = b"".join(self._parts)
            done.append((self._status, body, self._keep_alive))
            self._status, self._body, self._parts, self._have = 0, bytearray(), [], 0
            if not data:
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


class ConnectError(OSError):
    """No connection could be made (refused, unreachable, no such host); worded as Go's dialer."""

    def __str__(self) -> str:
        return str(self.strerror)


class LostConnection(ConnectionError):
    """A reused connection ended before any byte of the answer: the request may be sent again."""


class Fenced(Exception):
    """The guard said no right before the request was sent: nothing was sent."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

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
        self._fail(exc or ConnectionResetError("the server closed the connection"))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes, bool]]:
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.answer


class Pool:
    """Keep-alive HTTP/1.1 connections to one origin (see the module docstring); used on one event loop.

    `tls` None speaks plain HTTP; `server_hostname` is the name the certificate is checked against
    (and sent as SNI) when it is not the host's. `clock` is the monotonic clock idle connections are
    aged by (``time.monotonic``; a test passes one it moves itself instead of waiting out the age).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        connections: int = CONNECTION_LIMIT,
        max_idle_age: float = MAX_IDLE_AGE,
        proxy: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self._clock = clock
        self._proxy = _proxy_address(proxy) if proxy else None
        self._address = (host, port)
        self._tls = tls
        self._server_name = server_hostname or host
        self._max_idle_age = max_idle_age
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[tuple[_Connection, float]] = []
        self._closed = False

    def use_tls(self, tls: ssl.SSLContext) -> None:
        """New TLS material (a rotated CA or client certificate): idle connections made with the old go."""
        if tls is not self._tls:
            self._tls = tls
            self.drop_idle()

    async def send(
        self, request: bytes, *, replayable: bool, guard: Callable[[], bool] | None = None
    ) -> tuple[int, bytes]:
        """Send `request` (the whole message, head and body) and read its answer: ``(status, body)``.

        `guard` is asked right before the bytes go (``Fenced`` when it says no). Raises
        ``TimeoutError`` (after dropping the idle connections), ``OSError`` (``ConnectError``,
        ``LostConnection``, ``ssl.SSLError``...) or ``ValueError`` (an answer that is not HTTP)."""
        try:
            async with self._slots, asyncio.timeout(self.timeout):
                try:
                    return await self._exchange(request, fresh=False, guard=guard)
                except LostConnection:
                    if not replayable:  # maybe read and done: never twice (a second event, a 409 on our own bind)
                        raise
                    return await self._exchange(request, fresh=True, guard=guard)
        except TimeoutError:
            self.drop_idle()  # they went through the same network: do not wait out the timeout on each
            raise

    async def _exchange(self, request: bytes, *, fresh: bool, guard: Callable[[], bool] | None) -> tuple[int, bytes]:
        conn = None if fresh else self._reuse()
        reused = conn is not None
        if conn is None:
            conn = await self._connect()
        if guard is not None and not guard():  # asked again right before the bytes go: waits above may be long
            self._idle.append((conn, self._clock()))
            raise Fenced
        try:
            status, raw, keep_alive = await conn.send(request)
        except BaseException as exc:
            lost_early = (
                conn.closed and conn.parser.idle and not isinstance(exc, (asyncio.CancelledError, TimeoutError))
            )
            conn.close()  # an answer may still be on its way: never reuse this one
            if reused and lost_early:
                raise LostConnection(str(exc)) from exc
            raise
        if keep_alive and not conn.closed and not self._closed:
            self._idle.append((conn, self._clock()))
        else:
            conn.close()
        return status, raw

    def _reuse(self) -> _Connection | None:
        """The most recently used idle connection that is open and young enough; older ones are closed."""
        oldest = self._clock() - self._max_idle_age
        while self._idle:
            conn, since = self._idle.pop()
            if since < oldest:
                conn.close()
                self.drop_idle()  # everything below is older still
                return None
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    async def _connect(self) -> _Connection:
        host, port = self._address
        loop = asyncio.get_running_loop()
        server_name = self._server_name if self._tls else None
        if self._proxy is not None:
            sock = await self._tunnel()
            _, conn = await loop.create_connection(_Connection, sock=sock, ssl=self._tls, server_hostname=server_name)
            return conn
        try:
            _, conn = await loop.create_connection(_Connection, host, port, ssl=self._tls, server_hostname=server_name)
        except (TimeoutError, ssl.SSLError):
            raise
        except socket.gaierror as exc:
            raise ConnectError(exc.errno, f"dial tcp: lookup {host}: {exc.strerror or exc}") from exc
        except OSError as exc:  # asyncio words a refusal "Connect call failed (...)": say it as the OS does
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ConnectError(exc.errno, f"dial tcp {host}:{port}: connect: {reason.lower()}") from exc
        return conn

    async def _tunnel(self) -> socket.socket:
        """A socket connected through the proxy to the origin (``CONNECT``), ready for TLS or HTTP."""
        assert self._proxy is not None
        (proxy_host, proxy_port), authorization = self._proxy
        host, port = self._address
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(proxy_host, proxy_port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ConnectError(exc.errno, f"proxyconnect tcp: dial tcp: lookup {proxy_host}: {exc.strerror}") from exc
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            try:
                await loop.sock_connect(sock, address)
            except OSError as exc:
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                raise ConnectError(
                    exc.errno, f"proxyconnect tcp: dial tcp {proxy_host}:{proxy_port}: connect: {reason.lower()}"
                ) from exc
            authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{authorization}\r\n"
            await loop.sock_sendall(sock, head.encode("latin-1"))
            answer = b""
            while b"\r\n\r\n" not in answer:  # the proxy's answer ends its head; nothing follows before we speak
                chunk = await loop.sock_recv(sock, 4096)
                if not chunk or len(answer) > 65536:
                    raise ConnectError(0, f"proxy {proxy_host}:{proxy_port} closed the connection during CONNECT")
                answer += chunk
            status = answer.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            if status.split(" ")[1:2] != ["200"]:
                raise ConnectError(0, f"proxy {proxy_host}:{proxy_port} refused CONNECT {authority}: {status}")
        except BaseException:
            sock.close()
            raise
        return sock

    def drop_idle(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their answer is in."""
        self._closed = True
        self.drop_idle()


def _proxy_address(url: str) -> tuple[tuple[str, int], str]:
    """``(host, port)`` of an ``http://`` proxy and its ``Proxy-Authorization`` header line ("" without one)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy {url!r}: only http:// proxies are supported (CONNECT tunnels)")
    authorization = ""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = f"Proxy-Authorization: Basic {base64.b64encode(pair).decode()}\r\n"
    return (parts.hostname, parts.port or 80), authorization


class LoopBridge:
    """Runs a pool's coroutines for blocking callers (see the module docstring).

    With `loop` (the operator's running loop) a call is submitted to it and the calling thread, one
    of the operator's workers, waits for the result. Without one (``simulate``, tests, benchmarks)
    the caller drives a private loop itself, one call at a time: there is no other thread to hop to
    (a loop in a thread of its own cost ~100 us more a call, measured with bench/bench_extenders.py's
    extender). Between two calls that loop does not run, so a connection the server closed meanwhile
    is found closed only when it is used (a replayable request is then sent again).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._own: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float) -> T:
        """The coroutine's result, or its exception. ``TimeoutError`` when the operator's loop gave no
        result within `timeout` seconds (the coroutine is then cancelled); ``RuntimeError`` when called
        on a thread whose loop runs (it would wait for itself) or when the loop is closed."""
        try:
            if self._loop is None:
                with self._lock:
                    if self._own is None:
                        self._own = asyncio.new_event_loop()
                    return self._own.run_until_complete(coro)
            if _running_loop() is self._loop:
                raise RuntimeError("a blocking call on its own event loop's thread")
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:
            coro.close()  # never started: no "never awaited" warning
            raise
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def close(self, cleanup: Callable[[], object]) -> None:
        """Run `cleanup` on the loop (from any thread, the loop's own included); a private loop is then
        closed. Nothing happens to a loop that is closed already."""
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(cleanup)
            except RuntimeError:  # closed
                pass
            return
        with self._lock:
            own, self._own = self._own, None
            if own is None:
                return
            cleanup()
            try:
                own.run_until_complete(asyncio.sleep(0))  # the transports' close callbacks
            except RuntimeError:  # a loop runs on this thread: the sockets close when collected
                pass
            own.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
