"""An in-process fake of kube-apiserver that speaks its wire format, for unit tests of the operator's edge.

``FakeApiServer`` listens on 127.0.0.1 (plain HTTP, a free port) inside the test's event loop, so a
client that works against it works against the real server. What it does to objects is
``kopf_scheduler.sim.kubeapi.KubeApi``'s, the one implementation of kube-apiserver's object
semantics the project has (``simulate`` serves its plugins with it too): list (``limit``/``continue``,
field and label selectors, consistent snapshots), create, replace, merge / strategic-merge / JSON
patch, delete (finalizers, pods' graceful deletion), the ``status`` subresource, ``pods/binding`` and
``pods/eviction``, with the real Status bodies and messages (its docstring says what it leaves out).
This module adds what only a server on the wire has: discovery, watch (replay from a
resourceVersion, synthetic ADDED events when none is given, bookmarks, ``timeoutSeconds``, 410
inside the stream), a list at a future resourceVersion that waits for it, and faults. It was checked
against kube-apiserver v1.37.2 (its source in the Go module cache, the cacher's
``convertToWatchEvent`` and ``nextBookmarkTime``, and the binary itself on loopback). Where the
behaviour is surprising, the real one won:

- a watch without a resourceVersion, or with "0", starts with an ADDED event per existing object;
- a no-op write sends no event (etcd skips it);
- deleting a pod marks it first (MODIFIED with ``deletionTimestamp``), then deletes it (DELETED)
  when it is unbound, or when ``delete()`` stands for its kubelet;
- paths outside any served group-version answer a plain-text "404 page not found".

Bookmarks carry the latest revision every ``bookmark_interval`` and 2 s before a watch's deadline,
as on a real cluster, whose revision always moves (its own Leases); a quiet real server with
nothing written since the watch began sends at most one.

Faults to inject: ``stall_watches`` / ``stall_connections`` (silence, not closure), ``end_watches``
(what a watch's deadline does, now), ``drop_watches``,
``cut_watches`` (a chunk cut short, a reset, an idle close by a middlebox), ``lose_answers`` (the
request is carried out, then its answer is reset or cut short), ``compact``, ``fail``, ``delay``,
``hold`` (a delay until ``release``),
``require_token``; ``requests`` records what clients sent, ``open_watches`` counts the streams open.
``second`` is how long one of the server's seconds lasts for watch deadlines (``timeoutSeconds``, the
default timeout, the bookmark before the deadline): 1.0 real second unless a test shortens it.

Limits beyond ``KubeApi``'s: no aggregated discovery (clients fall back to the legacy documents),
no TLS, no authentication beyond the optional bearer token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from aiohttp import web

from kopf_scheduler.sim.kubeapi import (
    BUILTIN_RESOURCES,
    WATCH_TRUE,
    ApiError,
    Change,
    Filter,
    KubeApi,
    ResourceType,
    Target,
    is_watch,
    not_allowed,
    parse_int,
    status_body,
    with_rv,
)

__all__ = ["BUILTIN_RESOURCES", "FakeApiServer", "RecordedRequest", "ResourceType"]

Body = dict[str, Any]

#: messages of injected failures (``fail`` without a body), as the real server words them
_FAILURE_MESSAGES: Final[Mapping[int, str]] = {
    410: "The resourceVersion for the provided list is too old.",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request",
    504: "Timeout: request did not complete within the allotted timeout",
}

_DEFAULT_WATCH_TIMEOUT: Final = 1800.0  # the real server picks 30 to 60 minutes when no timeoutSeconds is given
_PRE_TIMEOUT_BOOKMARK: Final = 2.0  # cacher: the last bookmark goes 2 s before the watch's deadline
_TOO_LARGE_RV_WAIT: Final = 3.0  # a list at a resourceVersion the server has not reached waits this long, then 504
_ALL_VERBS: Final = ("create", "delete", "get", "list", "patch", "update", "watch")


#: GET /version: the release this fake was checked against
_VERSION: Final[Body] = {
    "major": "1", "minor": "37", "emulationMajor": "1", "emulationMinor": "37", "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36", "gitVersion": "v1.37.2", "gitCommit": "fakeapi", "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64",
}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Watchers


class _Watcher:
    """One watch stream's pending events, converted by the cacher's rule as the changes happen."""

    def __init__(self, rt: ResourceType, selection: Filter, start_rv: int) -> None:
        self.rt = rt
        self.selection = selection
        self.start_rv = start_rv
        self.pending: deque[Body] = deque()
        self.wake = asyncio.Event()
        self.dropped = False
        self.transport: asyncio.Transport | None = None

    def offer(self, change: Change) -> None:
        """The cacher's convertToWatchEvent: starts matching -> ADDED, keeps matching -> MODIFIED,
        stops matching -> DELETED with the old content and the new resourceVersion."""
        if change.resource.key != self.rt.key or change.rv <= self.start_rv:
            return
        now_matches = change.type != "DELETED" and self.selection.matches(change.obj)
        was_matching = change.prev is not None and self.selection.matches(change.prev)
        if now_matches:
            self.push({"type": "MODIFIED" if was_matching else "ADDED", "object": change.obj})
        elif was_matching and change.prev is not None:
            self.push({"type": "DELETED", "object": with_rv(change.prev, change.rv)})

    def push(self, event: Body) -> None:
        self.pending.append(event)
        self.wake.set()


# --------------------------------------------------------------------------------------------
# Faults and records


@dataclass(slots=True)
class RecordedRequest:
    """A request as the server received it; ``status`` is None until it is answered."""

    time: float  # time.monotonic() at arrival
    method: str
    path: str
    query: dict[str, str]
    body: Any  # the parsed JSON body, or None
    headers: dict[str, str]  # names in canonical case: User-Agent, Authorization...
    status: int | None = None


@dataclass(slots=True)
class _Rule:
    method: str
    path: re.Pattern[str]
    watch: bool | None
    status: int = 0
    times: int = 0
    body: Body | None = None
    seconds: float = 0.0
    #: ``hold``: matching requests wait until it is set (``release``)
    gate: asyncio.Event | None = None
    #: ``lose_answers``: "reset" (no answer), "truncated" (half of it, then the connection closes)
    lost: str = ""

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            self.method in ("*", method)
            and self.path.search(path) is not None
            and (self.watch is None or self.watch == watch)
        )


_RECORD: Final = web.RequestKey("fakeapi.record", RecordedRequest)


def _canonical_header(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close a connection with a TCP RST (SO_LINGER 0), as a crashed peer or a middlebox does."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error_response(error: ApiError) -> web.Response:
    return _json_response(error.body, error.code, error.headers)


# --------------------------------------------------------------------------------------------
# The server


class FakeApiServer(KubeApi):
    """kube-apiserver's wire behaviour on 127.0.0.1:<free port>, with faults to inject; see the module docstring.

    Use as ``async with FakeApiServer() as server:``; arrange and assert with ``KubeApi``'s ``add``,
    ``get``, ``update``, ``delete``, ``objects`` and ``register`` (they make the same watch events as
    API writes) and ``requests``. Every method is called from the event loop the server runs on.
    """

    def __init__(self, *, bookmark_interval: float = 60.0, history_limit: int = 10_000, second: float = 1.0) -> None:
        if second <= 0:
            raise ValueError(f"second must be positive, not {second}")
        self._watchers: set[_Watcher] = set()
        self.second = second
        self._changed = asyncio.Event()
        super().__init__(history_limit=history_limit, changed=self._offer)
        self.bookmark_interval = bookmark_interval
        self.requests: list[RecordedRequest] = []
        self._watches_flowing = asyncio.Event()
        self._watches_flowing.set()
        self._connections_flowing = asyncio.Event()
        self._connections_flowing.set()
        self._failures: list[_Rule] = []
        self._delays: list[_Rule] = []
        self._token: str | None = None
        self._in_flight: dict[asyncio.Transport, set[asyncio.Task[Any]]] = {}
        self._runner: web.AppRunner | None = None
        self._port = 0

    # ---- lifecycle

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen on a free port, or again on the port it had (after ``stop``: a server back from an outage)."""
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._route)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Close every connection (hung, stalled or streaming) and stop listening: new connections are
        refused until ``start`` (the objects and their history are kept, as etcd keeps them)."""
        if self._runner is None:
            return
        for transport, tasks in list(self._in_flight.items()):
            transport.abort()
            for task in tasks:
                task.cancel()
        await self._runner.cleanup()
        self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    def kubeconfig(self, path: str | Path, token: str = "t") -> Path:
        """Write a kubeconfig for this server (a static bearer token user); JSON, which is YAML too."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakeapi", "cluster": {"server": self.url}}],
            "users": [{"name": "fakeapi", "user": {"token": token}}],
            "contexts": [
                {"name": "fakeapi", "context": {"cluster": "fakeapi", "user": "fakeapi", "namespace": "default"}}
            ],
            "current-context": "fakeapi",
        }
        target = Path(path)
        target.write_text(json.dumps(config, indent=2))
        return target

    def _offer(self, change: Change) -> None:
        """Every change stored: to the open watches, and to whoever waits for a resourceVersion."""
        for watcher in self._watchers:
            watcher.offer(change)
        self._changed.set()
        self._changed = asyncio.Event()

    async def _reach(self, rv: int, timeout: float) -> bool:
        """Wait until the store is at `rv` or later (a list at a future resourceVersion waits, then fails)."""
        deadline = time.monotonic() + timeout
        while self.store.rv < rv:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    # ---- faults

    def stall_watches(self) -> None:
        """Every watch stream, open or new, sends nothing (events are withheld, in order) until resumed."""
        self._watches_flowing.clear()

    def resume_watches(self) -> None:
        self._watches_flowing.set()
        self._wake_watchers()

    def stall_connections(self) -> None:
        """Every request, on existing or new connections, hangs unanswered until resumed; streams go silent."""
        self._connections_flowing.clear()

    def resume_connections(self) -> None:
        self._connections_flowing.set()
        self._wake_watchers()

    @property
    def open_watches(self) -> int:
        """How many watch streams are open and still take new events."""
        return len(self._watchers)

    def end_watches(self) -> int:
        """End every open watch stream cleanly, as its deadline (``timeoutSeconds``) would: the events
        already due are sent, then the terminating chunk, no error; returns how many streams end.
        Events written after this call go to no ended stream (a client resumes from what it saw)."""
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.dropped = True  # _stream sends what is pending, then returns: the clean end
            self._watchers.discard(watcher)
            watcher.wake.set()
        return len(watchers)

    def drop_watches(self) -> int:
        """Close every open watch connection abruptly (no terminating chunk); returns how many."""
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.dropped = True
            watcher.pending.clear()
            self._watchers.discard(watcher)
            if watcher.transport is not None:
                watcher.transport.abort()
            watcher.wake.set()
        return len(watchers)

    def cut_watches(self, how: str) -> int:
        """End every open watch connection as a flaky network does; returns how many. `how`:
        "truncated" (a chunk announced in full but sent in part, then the connection closes: the client
        reads "not enough data to satisfy transfer length"), "reset" (a TCP RST) or "closed" (a clean
        close without the terminating chunk: what a load balancer does to a connection it finds idle)."""
        if how not in ("truncated", "reset", "closed"):
            raise ValueError(f"unknown cut {how!r}")
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.dropped = True
            watcher.pending.clear()
            self._watchers.discard(watcher)
            transport = watcher.transport
            if transport is not None and not transport.is_closing():
                if how == "truncated":
                    event = {"type": "BOOKMARK", "object": self._bookmark(watcher.rt, self.store.rv)}
                    data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
                    transport.write(b"%x\r\n" % len(data) + data[: len(data) // 2])
                    transport.close()
                elif how == "reset":
                    _reset(transport)
                else:
                    transport.close()
            watcher.wake.set()
        return len(watchers)

    def lose_answers(
        self, method: str, path_regex: str, times: int = 1, *, truncated: bool = False, watch: bool | None = False
    ) -> None:
        """The next `times` matching requests are carried out, but their answer is lost: the connection is
        reset before it (a write that landed and a client that cannot know), or, `truncated`, half of it
        arrives and the connection closes (a body cut short: a client reads "not enough data")."""
        rule = _Rule(
            method.upper(), re.compile(path_regex), watch, times=times, lost="truncated" if truncated else "reset"
        )
        self._failures.append(rule)

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        body: Body | None = None,
        *,
        watch: bool | None = None,
    ) -> None:
        """The next `times` requests whose path matches answer `status` (a Status body unless `body` is given).

        `method` may be "*"; `watch` restricts the rule to watches (True) or to the rest (False).
        """
        self._failures.append(
            _Rule(method.upper(), re.compile(path_regex), watch, status=status, times=times, body=body)
        )

    def delay(self, method: str, path_regex: str, seconds: float, *, watch: bool | None = None) -> None:
        """Requests whose path matches wait `seconds` before being served (until ``clear_faults``)."""
        self._delays.append(_Rule(method.upper(), re.compile(path_regex), watch, seconds=seconds))

    def hold(self, method: str, path_regex: str, *, watch: bool | None = None) -> None:
        """Requests whose path matches wait, after they are recorded in ``requests``, until ``release``
        (or ``clear_faults``): a delay that ends when the test says so, not after some time."""
        self._delays.append(_Rule(method.upper(), re.compile(path_regex), watch, gate=asyncio.Event()))

    def release(self) -> None:
        """Let the requests ``hold`` keeps go on, and hold no later ones."""
        for rule in list(self._delays):
            if rule.gate is not None:
                rule.gate.set()
                self._delays.remove(rule)

    def clear_faults(self) -> None:
        """Forget injected failures, delays and holds (held requests go on); resume stalled watches and
        connections."""
        self.release()
        self._failures.clear()
        self._delays.clear()
        self.resume_watches()
        self.resume_connections()

    def require_token(self, token: str | None) -> None:
        """Answer 401 to requests without ``Authorization: Bearer <token>`` (None: accept anything)."""
        self._token = token

    # ---- the HTTP edge

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Record, then apply the faults in the order a real path would meet them, then serve."""
        raw = await request.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        record = RecordedRequest(
            time.monotonic(),
            request.method,
            request.path,
            dict(request.query),
            parsed,
            {_canonical_header(k): v for k, v in request.headers.items()},
        )
        self.requests.append(record)
        request[_RECORD] = record  # a watch sets its status once its headers are out
        transport = request.transport
        task = asyncio.current_task()
        if transport is not None and task is not None:
            self._in_flight.setdefault(transport, set()).add(task)
        try:
            response = await self._serve(request, handler)
        finally:
            if transport is not None and task is not None:
                tasks = self._in_flight.get(transport, set())
                tasks.discard(task)
                if not tasks:
                    self._in_flight.pop(transport, None)
        record.status = response.status
        return response

    async def _serve(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        await self._connections_flowing.wait()
        if self._token is not None and request.headers.get("Authorization") != f"Bearer {self._token}":
            return _json_response(status_body(401, "Unauthorized"), 401)
        watch = is_watch(request.query)
        for rule in list(self._delays):  # a copy: release() removes holds while requests wait
            if rule.matches(request.method, request.path, watch):
                if rule.gate is not None:
                    await rule.gate.wait()
                else:
                    await asyncio.sleep(rule.seconds)
        for rule in self._failures:
            if rule.matches(request.method, request.path, watch):
                rule.times -= 1
                if rule.times <= 0:
                    self._failures.remove(rule)
                if rule.lost:
                    return await self._lose_answer(request, handler, rule.lost)
                return self._injected_failure(rule)
        try:
            return await handler(request)
        except ApiError as error:
            return _error_response(error)

    @staticmethod
    async def _lose_answer(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]], how: str
    ) -> web.StreamResponse:
        """Carry the request out, then lose its answer (see ``lose_answers``)."""
        try:
            response = await handler(request)
        except ApiError as error:
            response = _error_response(error)
        transport = request.transport
        if transport is None or transport.is_closing():
            return response
        body = response.body if isinstance(response, web.Response) and isinstance(response.body, bytes) else b""
        if how == "truncated":
            head = (
                f"HTTP/1.1 {response.status} {response.reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            transport.write(head.encode() + body[: len(body) // 2])
            transport.close()
        else:
            _reset(transport)
        return response  # aiohttp drops what is written to a closed transport

    @staticmethod
    def _injected_failure(rule: _Rule) -> web.Response:
        headers = {"Retry-After": "1"} if rule.status == 429 else {}
        if rule.body is not None:
            return _json_response(rule.body, rule.status, headers)
        details = {"retryAfterSeconds": 1} if rule.status == 429 else None
        message = _FAILURE_MESSAGES.get(rule.status, f"injected failure {rule.status}")
        return _json_response(status_body(rule.status, message, details=details), rule.status, headers)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        """Discovery documents, or a resource target and its method."""
        parts = [p for p in request.path.split("/") if p]
        discovery = self._discovery(parts)
        if discovery is not None:
            return _json_response(discovery) if request.method == "GET" else _error_response(not_allowed())
        target = self.target(parts)
        if target is None:
            return web.Response(status=404, text="404 page not found\n")
        body = await request.read()
        return await self._dispatch(request, target, body)

    def _discovery(self, parts: list[str]) -> Body | None:
        groups: dict[str, list[str]] = {}
        for group, version, _ in self.resources:
            if group and version not in groups.setdefault(group, []):
                groups[group].append(version)
        match parts:
            case ["version"]:
                return _VERSION
            case ["api"]:
                return {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self._port}"}
                    ],
                }
            case ["api", "v1"]:
                return {"kind": "APIResourceList", "groupVersion": "v1", "resources": self._resource_entries("", "v1")}
            case ["apis"]:
                return {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [_group_entry(g, vs) for g, vs in groups.items()],
                }
            case ["apis", group] if group in groups:
                return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, groups[group])}
            case ["apis", group, version] if version in groups.get(group, []):
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}",
                    "resources": self._resource_entries(group, version),
                }
        return None

    def _resource_entries(self, group: str, version: str) -> list[Body]:
        entries: list[Body] = []
        for rt in self.resources.values():
            if (rt.group, rt.version) != (group, version):
                continue
            entry: Body = {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_ALL_VERBS),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            entries.append(entry)
            for sub in rt.subresources:
                sub_entry: Body = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
                if sub == "binding":
                    sub_entry.update(kind="Binding", verbs=["create"])
                elif sub == "eviction":
                    sub_entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
                else:
                    sub_entry.update(kind=rt.kind, verbs=["get", "patch", "update"])
                entries.append(sub_entry)
        return entries

    async def _dispatch(self, request: web.Request, target: Target | Body, raw: bytes) -> web.StreamResponse:
        """A watch streams from here; anything else is ``KubeApi.serve``'s (a list at a resourceVersion not
        reached yet first waits a while for it, as the real server does)."""
        if not isinstance(target, Target):
            return _json_response(target, 404)
        query: Mapping[str, str] = request.query
        if request.method == "GET" and target.name is None:
            if is_watch(query):
                return await self._watch(request, target.rt, target.namespace, query)
            requested_rv = query.get("resourceVersion", "")
            if not query.get("continue") and requested_rv not in ("", "0"):
                rv = parse_int(requested_rv, "resource version")
                if rv > self.store.rv:
                    await self._reach(rv, _TOO_LARGE_RV_WAIT)
        code, body = self.serve(request.method, target, query, raw, request.content_type)
        return _json_response(body, code)

    # ---- watches

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None, query: Mapping[str, str]
    ) -> web.StreamResponse:
        """A chunked stream of events: replayed after a resourceVersion, or the current state as ADDED, then live."""
        selection = self.selection(rt, ns, query)
        bookmarks = query.get("allowWatchBookmarks", "") in WATCH_TRUE
        timeout = self.second * (
            float(parse_int(query["timeoutSeconds"], "timeoutSeconds"))
            if query.get("timeoutSeconds")
            else _DEFAULT_WATCH_TIMEOUT
        )
        initial = self._initial_events_wanted(query, bookmarks)
        requested_rv = query.get("resourceVersion", "")
        if requested_rv not in ("", "0"):
            start_rv = parse_int(requested_rv, "resource version")
        else:
            start_rv = self.store.rv
            if initial is None:
                initial = True  # no resourceVersion or "0": "Get State and Start at Most Recent"
        watcher = _Watcher(rt, selection, start_rv)
        if start_rv < self.store.horizon:
            message = f"too old resource version: {start_rv} ({self.store.horizon})"
            watcher.push({"type": "ERROR", "object": status_body(410, message)})
            watcher.dropped = True  # ends the stream after the error, cleanly
        else:
            if initial:
                # no await between this snapshot and the registration below: nothing can fall in between
                start_rv = max(start_rv, self.store.rv)
                watcher.start_rv = start_rv
                bucket = self.store.bucket(rt)
                for key in sorted(bucket):
                    if selection.matches(bucket[key]):
                        watcher.push({"type": "ADDED", "object": bucket[key]})
                if query.get("sendInitialEvents", "") in WATCH_TRUE:
                    annotations = {"k8s.io/initial-events-end": "true"}
                    watcher.push({"type": "BOOKMARK", "object": self._bookmark(rt, start_rv, annotations)})
            else:
                for change in self.store.history:
                    watcher.offer(change)
            self._watchers.add(watcher)
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        )
        response.enable_chunked_encoding()
        watcher.transport = request.transport
        try:
            await response.prepare(request)
            request[_RECORD].status = response.status
            await self._stream(watcher, response, timeout, bookmarks)
            if request.transport is not None and not request.transport.is_closing():
                await response.write_eof()  # the terminating chunk: a clean end
        except ConnectionResetError:
            pass  # dropped (drop_watches) or the client went away
        finally:
            self._watchers.discard(watcher)
        return response

    def _initial_events_wanted(self, query: Mapping[str, str], bookmarks: bool) -> bool | None:
        """sendInitialEvents, validated as the real server does (it needs bookmarks and NotOlderThan)."""
        if "sendInitialEvents" not in query:
            return None
        if not bookmarks:
            raise ApiError(
                status_body(
                    422,
                    'ListOptions.meta.k8s.io "" is invalid: allowWatchBookmarks: Forbidden: '
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                )
            )
        if query.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError(
                status_body(
                    422,
                    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        return query["sendInitialEvents"] in WATCH_TRUE

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, annotations: Mapping[str, str] | None = None) -> Body:
        metadata: Body = {"resourceVersion": str(rv)}
        if annotations:
            metadata["annotations"] = dict(annotations)
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """cacher's nextBookmarkTime: every interval, the last one 2 s before the deadline, none after it."""
        at = min(now + self.bookmark_interval, deadline - _PRE_TIMEOUT_BOOKMARK * self.second)
        return None if at < now else at

    async def _stream(self, watcher: _Watcher, response: web.StreamResponse, timeout: float, bookmarks: bool) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = self._next_bookmark(loop.time(), deadline) if bookmarks else None
        while not watcher.dropped or watcher.pending:
            if not self._flowing:
                watcher.wake.clear()
                await watcher.wake.wait()  # set by new events (withheld), a resume or a drop
                continue
            if watcher.pending:
                await response.write(json.dumps(watcher.pending.popleft(), separators=(",", ":")).encode() + b"\n")
                continue
            now = loop.time()
            if now >= deadline:
                return
            if next_bookmark is not None and now >= next_bookmark:
                if self.store.rv >= watcher.start_rv:
                    bookmark = {"type": "BOOKMARK", "object": self._bookmark(watcher.rt, self.store.rv)}
                    await response.write(json.dumps(bookmark, separators=(",", ":")).encode() + b"\n")
                next_bookmark = self._next_bookmark(loop.time(), deadline)
                continue
            watcher.wake.clear()
            wake_at = deadline if next_bookmark is None else min(deadline, next_bookmark)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.wake.wait(), wake_at - now)

    @property
    def _flowing(self) -> bool:
        """Whether watch streams may send: neither the watches nor the connections are stalled."""
        return self._watches_flowing.is_set() and self._connections_flowing.is_set()

    def _wake_watchers(self) -> None:
        for watcher in self._watchers:
            watcher.wake.set()

    # ---- writes


def _group_entry(group: str, versions: Iterable[str]) -> Body:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}
