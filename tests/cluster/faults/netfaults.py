"""Network faults for the fault suite, made on loopback: a TCP proxy that stalls or cuts the connections
open through it, an HTTP proxy that behaves like a flaky load balancer, a kubeconfig that goes through
either, and a physical compaction of etcd.

``StallProxy`` is a byte pipe (TLS passes through untouched) in front of the API server, run by an
event loop in a thread of its own so that synchronous tests can drive it::

    with StallProxy(cp.server) as proxy:
        config = proxied_kubeconfig(sa_kubeconfig, proxy, tmp_path / "proxied.kubeconfig")
        ...                      # an operator started with `config` opens its watches through the proxy
        proxy.stall()            # those watches go silent: no events, no bookmarks, no error, no close
        ...                      # a connection opened now works: a client that reconnects recovers
        proxy.resume()           # what was held is delivered, in order
        proxy.cut()              # every open connection is reset (RST), both sides
        proxy.block()            # cut, and refuse new connections (as a server that is down) until unblock()

``ChaosProxy`` is what a flaky load balancer in front of the API server does to HTTP, all the time: it
ends TLS with the API server's own serving certificate (so the client's checks pass), opens TLS to
the API server, and on the way back cuts half of the server's chunks into pieces of 1 to 16 bytes (a
client's parser meets every split), resets about 2% of them part-way (RST), closes every connection
idle for 0.3 to 3 s (a watch of a quiet kind included, as a load balancer's idle timeout does), and
cuts short a share of the discovery answers (``/api``, ``/apis`` and their group versions: the
answer Kopf's start-up scan reads). Seeded, so a failing run can be repeated; ``stats`` counts what
it did. Clients authenticate with bearer tokens through it (a client certificate ends at the proxy)::

    with ChaosProxy(cp) as chaos:
        config = proxied_kubeconfig(sa_kubeconfig, chaos, tmp_path / "chaos.kubeconfig")

A stalled connection keeps reading on both sides and holds what it reads in memory, so the kernel
keeps ACKing and its window stays open: neither end can tell the stall from a quiet peer, TCP
keepalives included (a stall that stopped reading would show as a zero window to both ends). Nothing
bounds what is held: fine for the minutes a test lasts.

``compact_etcd`` compacts etcd at its current revision through the v3 JSON gateway of its plain-HTTP
client URL, as the API server's own compactor does every five minutes. That alone does not make a
resumed watch fail: the API server's watch cache still serves it (see the function).
``expire_resource_versions`` does: it compacts and restarts kube-apiserver, so every watch resumed
from a version handed out before gets 410 Gone and must relist. A disconnection that ends in 410s::

    proxy.block()                          # the operator is cut off, and cannot reconnect
    ...                                    # delete nodes and their pods, as admin (not through the proxy)
    expire_resource_versions(control_plane)
    proxy.unblock()                        # it reconnects; its watches get 410 Gone
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import random
import re
import socket
import ssl
import struct
import threading
import time
import urllib.request
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import yaml

if TYPE_CHECKING:
    from kopf_scheduler.cluster import ControlPlane

__all__ = [
    "ChaosProxy",
    "StallProxy",
    "compact_etcd",
    "etcd_revision",
    "expire_resource_versions",
    "proxied_kubeconfig",
]

LOOPBACK: Final = "127.0.0.1"
#: bytes read at a time from either side
CHUNK: Final = 64 * 1024
#: how long a call into the proxy's loop may take before the caller gives up
CALL_TIMEOUT: Final = 10.0
#: where kube-apiserver's compactor records the revision it compacted (storage/etcd3/compact.go)
COMPACT_REV_KEY: Final = "compact_rev_key"

T = TypeVar("T")


# --------------------------------------------------------------------------- the proxy


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client's side, the upstream side, and what a stall holds for each."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    stalled: bool = False
    #: chunks read while stalled, per direction ("up": client -> upstream, "down": upstream -> client); b"" is an EOF
    held: dict[str, list[bytes]] = field(default_factory=lambda: {"up": [], "down": []})
    #: set when nothing is held any more (a link whose both sides ended while stalled waits for it to close)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def writer(self, direction: str) -> asyncio.StreamWriter | None:
        return self.upstream if direction == "up" else self.client

    def send(self, direction: str, data: bytes) -> None:
        writer = self.writer(direction)
        if writer is None or writer.is_closing():
            return
        if data:
            writer.write(data)
        elif writer.can_write_eof():
            writer.write_eof()

    def release(self) -> int:
        """Deliver what was held, in order, and forward from now on; returns the bytes delivered."""
        delivered = 0
        for direction, chunks in self.held.items():
            for data in chunks:
                self.send(direction, data)
                delivered += len(data)
            chunks.clear()
        self.stalled = False
        self.released.set()
        return delivered

    def reset(self) -> None:
        """Close both sides at once with a TCP RST (SO_LINGER 0), as a crashed peer or middlebox would."""
        for writer in (self.client, self.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self.released.set()


class StallProxy:
    """A TCP proxy on 127.0.0.1:<free port> in front of `target` (an ``https://host:port`` URL or a
    (host, port) pair) whose open connections can be stalled, resumed and cut; see the module docstring.

    ``connections`` counts the connections open now, ``accepted`` every connection since the start (a
    client that reconnected after a stall shows there).
    """

    def __init__(self, target: str | tuple[str, int], *, port: int = 0) -> None:
        if isinstance(target, str):
            parts = urlsplit(target)
            if parts.hostname is None or parts.port is None:
                raise ValueError(f"{target!r} is not a URL with a host and a port")
            self.scheme = parts.scheme
            self.target: tuple[str, int] = (parts.hostname, parts.port)
        else:
            self.scheme, self.target = "https", (target[0], int(target[1]))
        self.host, self.port = LOOPBACK, port
        self.accepted = 0
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        """The proxy's address in the target's scheme, e.g. ``https://127.0.0.1:41234``."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def connections(self) -> int:
        return len(self._links)

    @property
    def held(self) -> int:
        """Bytes held by stalled connections right now (both directions)."""
        return sum(
            len(data) for link in list(self._links) for chunks in list(link.held.values()) for data in list(chunks)
        )

    # ---- lifecycle

    def start(self) -> StallProxy:
        if self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stall-proxy", daemon=True)
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, self.host, self.port))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def close(self) -> None:
        """Stop listening and reset every open connection; the loop and its thread end."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._call(self._shutdown())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CALL_TIMEOUT)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> StallProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- faults

    def stall(self) -> int:
        """Stop forwarding on every connection open now, in both directions, holding what arrives;
        connections opened afterwards are forwarded. Returns how many connections were stalled."""

        async def stall() -> int:
            for link in self._links:
                link.stalled = True
                link.released.clear()
            return len(self._links)

        return self._call(stall())

    def resume(self) -> int:
        """Deliver what the stalled connections held and forward again; returns the bytes delivered."""

        async def resume() -> int:
            return sum(link.release() for link in self._links if link.stalled)

        return self._call(resume())

    def cut(self) -> int:
        """Reset (RST) both sides of every open connection, stalled or not; returns how many."""

        async def cut() -> int:
            return self._reset_all()

        return self._call(cut())

    def block(self) -> int:
        """A disconnection: cut every open connection and stop listening, so that new ones are refused
        (ECONNREFUSED, as from a server that is down) until :meth:`unblock`. Returns how many were cut."""

        async def block() -> int:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
                self._server = None
            return self._reset_all()

        return self._call(block())

    def unblock(self) -> None:
        """Listen again, on the same port."""

        async def unblock() -> None:
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, self.host, self.port)

        self._call(unblock())

    @property
    def blocked(self) -> bool:
        return self._loop is not None and self._server is None

    # ---- inside the loop

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the proxy is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(CALL_TIMEOUT)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(writer)
        link.released.set()
        self._links.add(link)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            try:
                up_reader, link.upstream = await asyncio.open_connection(*self.target)
            except OSError:
                link.reset()
                return
            await asyncio.gather(self._pump(link, reader, "up"), self._pump(link, up_reader, "down"))
            await link.released.wait()  # both sides ended while stalled: deliver first, then close
            for side in (link.client, link.upstream):
                side.close()
        finally:
            self._links.discard(link)
            if task is not None:
                self._tasks.discard(task)

    async def _pump(self, link: _Link, reader: asyncio.StreamReader, direction: str) -> None:
        """Read one side until its EOF; forward each chunk, or hold it while the link is stalled."""
        try:
            while True:
                data = await reader.read(CHUNK)
                if link.stalled:
                    link.held[direction].append(data)
                else:
                    link.send(direction, data)
                    writer = link.writer(direction)
                    if data and writer is not None and not writer.is_closing():
                        await writer.drain()
                if not data:
                    return
        except OSError:  # reset by a peer (or by cut()): the other side is reset too
            link.reset()

    def _reset_all(self) -> int:
        links = list(self._links)
        for link in links:
            link.reset()
        return len(links)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._reset_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


# --------------------------------------------------------------------------- the chaos proxy

#: a request line, at the start of what the client sent
_REQUEST_LINE = re.compile(rb"^(GET|POST|PUT|PATCH|DELETE|HEAD) (\S+) HTTP/1\.1\r\n")
#: discovery documents: /api, /apis, /api/v1, /apis/GROUP/VERSION (no resource after them)
_DISCOVERY = re.compile(r"^/(api|apis|api/v1|apis/[^/?]+/[^/?]+)/?(\?.*)?$")
#: bytes of a chunk cut into tiny pieces (the rest follows in one piece: a list of megabytes in
#: 1-16 byte TLS records would measure the proxy, not the client)
_SPLIT_HEAD = 256


@dataclass
class ChaosStats:
    """What a ChaosProxy did so far."""

    connections: int = 0
    chunks: int = 0
    split: int = 0
    resets: int = 0
    idle_closes: int = 0
    discovery: int = 0
    discovery_cut: int = 0

    def line(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in vars(self).items())


@dataclass(eq=False)
class _ChaosLink:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    last: float = field(default_factory=time.monotonic)
    idle_after: float = 1.0
    #: the answer to the request just seen is cut short (a discovery document)
    cut_next: bool = False
    closed: bool = False


class ChaosProxy:
    """A flaky load balancer in front of `cp`'s API server on 127.0.0.1:<free port>; see the module
    docstring. The rates may be changed while it runs (``reset``, ``split``, ``discovery_cut``; ``idle``
    is the (min, max) idle timeout, None for none; ``enabled`` False forwards untouched)."""

    def __init__(
        self,
        cp: ControlPlane,
        *,
        seed: int = 1,
        split: float = 0.5,
        reset: float = 0.02,
        idle: tuple[float, float] | None = (0.3, 3.0),
        discovery_cut: float = 0.05,
    ) -> None:
        server = urlsplit(cp.server)
        assert server.hostname is not None and server.port is not None
        self.target = (server.hostname, server.port)
        self.split, self.reset, self.idle, self.discovery_cut = split, reset, idle, discovery_cut
        self.enabled = True
        self.stats = ChaosStats()
        self.host, self.port = LOOPBACK, 0
        self._rng = random.Random(seed)
        self._serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._serving.load_cert_chain(cp.pki_dir / "apiserver.crt", cp.pki_dir / "apiserver.key")
        self._serving.set_alpn_protocols(["http/1.1"])
        self._upstream = ssl.create_default_context(cafile=str(cp.ca_cert))
        self._upstream.set_alpn_protocols(["http/1.1"])
        self._links: set[_ChaosLink] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._reaper: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def start(self) -> ChaosProxy:
        if self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy", daemon=True)
        self._thread.start()

        async def open_() -> asyncio.Server:
            self._reaper = asyncio.create_task(self._reap_idle())
            return await asyncio.start_server(self._serve, self.host, self.port, ssl=self._serving)

        self._server = self._call(open_())
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shut() -> None:
            if self._reaper is not None:
                self._reaper.cancel()
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                self._abort(link)

        try:
            self._call(shut())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(CALL_TIMEOUT)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the proxy is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(CALL_TIMEOUT)

    # ---- inside the loop

    def _touch(self, link: _ChaosLink) -> None:
        link.last = time.monotonic()
        if self.idle is not None:
            link.idle_after = self._rng.uniform(*self.idle)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        link = _ChaosLink(writer)
        self._touch(link)
        self._links.add(link)
        try:
            try:
                up_reader, link.upstream = await asyncio.open_connection(
                    *self.target, ssl=self._upstream, server_hostname=self.target[0]
                )
            except OSError:
                self._abort(link)
                return
            await asyncio.gather(self._requests(link, reader), self._answers(link, up_reader))
        finally:
            self._links.discard(link)
            self._close(link)

    async def _requests(self, link: _ChaosLink, reader: asyncio.StreamReader) -> None:
        """Client to server, untouched; a discovery request may have its answer cut short."""
        try:
            while not link.closed:
                data = await reader.read(CHUNK)
                if not data or link.upstream is None:
                    break
                self._touch(link)
                line = _REQUEST_LINE.match(data)
                if line and self.enabled and line[1] == b"GET" and _DISCOVERY.match(line[2].decode("latin-1")):
                    self.stats.discovery += 1
                    link.cut_next = self._rng.random() < self.discovery_cut
                link.upstream.write(data)
                await link.upstream.drain()
        except (OSError, ssl.SSLError):
            self._abort(link)
        finally:
            self._close(link)

    async def _answers(self, link: _ChaosLink, reader: asyncio.StreamReader) -> None:
        """Server to client, with the chaos of the module docstring."""
        client = link.client
        try:
            while not link.closed:
                data = await reader.read(CHUNK)
                if not data:
                    break
                self._touch(link)
                self.stats.chunks += 1
                if not self.enabled:
                    client.write(data)
                    await client.drain()
                    continue
                if link.cut_next:
                    self.stats.discovery_cut += 1
                    client.write(data[: max(1, len(data) // 3)])
                    await client.drain()
                    self._close(link)  # a clean close before the body's end: "not enough data"
                    return
                if self._rng.random() < self.reset:
                    self.stats.resets += 1
                    client.write(data[: self._rng.randrange(len(data))])
                    with contextlib.suppress(OSError, ssl.SSLError):
                        await client.drain()
                    self._abort(link)
                    return
                if self._rng.random() < self.split:
                    self.stats.split += 1
                    head, rest = data[:_SPLIT_HEAD], data[_SPLIT_HEAD:]
                    while head:
                        size = self._rng.randint(1, 16)
                        client.write(head[:size])
                        head = head[size:]
                        await client.drain()
                    data = rest
                if data:
                    client.write(data)
                    await client.drain()
        except (OSError, ssl.SSLError):
            self._abort(link)
        finally:
            self._close(link)

    async def _reap_idle(self) -> None:
        """Close every connection idle for longer than its drawn timeout, as a load balancer does."""
        while True:
            await asyncio.sleep(0.05)
            if self.idle is None or not self.enabled:
                continue
            now = time.monotonic()
            for link in list(self._links):
                if not link.closed and now - link.last > link.idle_after:
                    self.stats.idle_closes += 1
                    self._close(link)

    @staticmethod
    def _close(link: _ChaosLink) -> None:
        """A clean close of both sides (TLS close_notify, then FIN)."""
        link.closed = True
        for writer in (link.client, link.upstream):
            if writer is not None and not writer.is_closing():
                writer.close()

    @staticmethod
    def _abort(link: _ChaosLink) -> None:
        """Both sides reset (RST)."""
        link.closed = True
        for writer in (link.client, link.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


def proxied_kubeconfig(kubeconfig: Path, proxy: StallProxy | ChaosProxy, path: Path) -> Path:
    """Copy `kubeconfig` to `path` with every cluster that points at the proxy's target pointing at the
    proxy instead; credentials and CA are kept.

    The serving certificate still verifies: the proxy listens on 127.0.0.1, which the control plane's
    serving certificate names (cluster/certs.py: SERVING_IPS), and ports are no part of a SAN. A target
    named by DNS (``localhost``, a real cluster) is kept as ``tls-server-name`` so the name checked
    stays the one the certificate was issued for.
    """
    config = yaml.safe_load(kubeconfig.read_text())  # JSON is YAML: ours are JSON, users' may be YAML
    host, port = proxy.target
    changed = 0
    for entry in config.get("clusters") or []:
        cluster = entry.get("cluster") or {}
        server = urlsplit(cluster.get("server", ""))
        if (server.hostname, server.port or 443) != (host, port):
            continue
        cluster["server"] = f"{server.scheme}://{proxy.host}:{proxy.port}{server.path}"
        if not _is_ip(host) and "tls-server-name" not in cluster:
            cluster["tls-server-name"] = host
        changed += 1
    if not changed:
        raise ValueError(f"no cluster of {kubeconfig} points at {host}:{port}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)  # it holds the credentials
    return path


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- etcd


def _etcd(control_plane: ControlPlane, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    port = control_plane.port("etcd")
    if port is None:
        raise RuntimeError(f"no etcd is recorded in {control_plane.workdir}")
    request = urllib.request.Request(
        f"http://{LOOPBACK}:{port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(json.load(response))


def etcd_revision(control_plane: ControlPlane, *, timeout: float = 10.0) -> int:
    """etcd's current revision (the resourceVersion of the last write the API server made)."""
    key = base64.b64encode(b"/kopf-scheduler/faults/revision").decode()  # no such key: the answer is its header
    answer = _etcd(control_plane, "/v3/kv/range", {"key": key, "count_only": True}, timeout)
    return int(answer["header"]["revision"])  # int64 comes as a JSON string


def compact_etcd(control_plane: ControlPlane, *, timeout: float = 10.0) -> int:
    """Compact etcd physically at its current revision, as the API server's own compactor does (which
    also records the revision under ``compact_rev_key``, where the API server learns it); returns it.

    What it takes away, measured on v1.37.2: list requests at an older resourceVersion (a stale
    ``continue`` token, ``resourceVersionMatch=Exact``) fail with 410 Gone once the API server has
    learned the revision (its cache checks every 15 s). A *watch* from an older resourceVersion does
    not: the API server's watch cache serves it, with the DELETED events, for as long as its window
    holds that version (at least 75 s, and 100 events per resource). :func:`expire_resource_versions`
    makes every resumed watch fail with 410.
    """
    revision = etcd_revision(control_plane, timeout=timeout)
    key, value = (base64.b64encode(text.encode()).decode() for text in (COMPACT_REV_KEY, str(revision)))
    _etcd(control_plane, "/v3/kv/put", {"key": key, "value": value}, timeout)
    _etcd(control_plane, "/v3/kv/compaction", {"revision": str(revision), "physical": True}, timeout)
    return revision


def expire_resource_versions(control_plane: ControlPlane) -> int:
    """Make every resourceVersion handed out so far too old: compact etcd (:func:`compact_etcd`), then
    SIGKILL and restart kube-apiserver, whose watch caches start again from etcd's current revision.
    A watch resumed from any older version then gets 410 Gone (``Expired: too old resource version:
    233 (243)``) and must relist. Returns the compacted revision.

    Clients see the restart as a disconnection: run it while their connections are down (a
    :meth:`StallProxy.block`) and they see only the 410s when they come back.
    """
    revision = compact_etcd(control_plane)
    control_plane.kill("kube-apiserver")
    control_plane.restart("kube-apiserver")
    return revision
