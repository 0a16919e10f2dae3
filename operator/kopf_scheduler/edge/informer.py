"""Informers: a kind is LISTed, then WATCHed, through the process's ``Api``, with client-go's reflector semantics.

Upstream kube-scheduler's informers (client-go ``tools/cache/reflector.go``: list, then watch from the
list's resourceVersion) feed ``pkg/scheduler/eventhandlers.go``; here an ``Informer`` feeds the thin
functions of ``kube/handlers.py``, which convert and call ``core.scheduling.routing``.

One informer, one kind (a ``Feed``):

- **List** in pages (``limit``/``continue``, no resourceVersion: a consistent read), hand every item to
  ``apply`` as an add, then the keys of everything listed to ``relisted``: what the list lacks was
  deleted while nobody watched and goes with all it implies (client-go's ``Replace``). Then the
  kind is **synced** (``on_sync(kind, True)``). A page that fails (no answer, a reset, a 5xx) is asked
  for again after a backoff, with the same continue token; an expired token (410) starts the list over.
- **Watch** from the list's resourceVersion, with ``allowWatchBookmarks`` and a ``timeoutSeconds``
  drawn between 5 and 10 minutes (as the reflector does, so watches of many clients do not end
  together); each ADDED / MODIFIED / DELETED goes to ``apply``.
- **A watch that ends is resumed, not relisted**, whatever ended it but lost history: the server's
  timeout, a reset, a truncated chunk, an idle close by a load balancer, a 5xx, or a stream that
  delivered nothing, not even a bookmark, for the client's idle deadline (``Api.watch_idle_timeout``,
  so a stalled watch cannot go unnoticed). The informer watches again from the last resourceVersion
  it saw, after a short jittered pause, and the kind **stays synced**: the API server's watch cache
  replays whatever happened meanwhile, as client-go's reflector relies on. The pause is 50 ms, doubling
  to 2 s while streams are cut within a second of opening with nothing delivered (a middlebox that
  closes every connection at once costs a request every 2 s, not a busy loop); a watch the server
  refused or did not answer at all backs off 0.8 s doubling to 30 s (the reflector's backoff manager).
  Every pause is jittered ([x, 2x)), so the watches of many kinds cut by one event do not come back
  together.
- **Only lost history relists**: a 410 Gone (the resourceVersion is older than the server keeps, in the
  stream or as the answer), a ``resync()`` (the process was frozen), or ``RELIST_AFTER`` watches in a
  row that failed to start at all (no answer, or an error status; said in a log line and
  ``on_restart``). A kind whose feed ``pauses`` (pods and nodes: a pod must never be bound on a view
  that may hold a deleted node or miss a bound pod) is **unsynced** until that list is in
  (``on_sync(kind, False)``, the loop schedules nothing meanwhile); any other kind relists while
  scheduling goes on, as upstream's do.
- **A kind that pauses cannot stay blind**: when the server cannot be reached at all (a connection
  refused or not made: an outage, a partition) or its watch has not been streaming for ``BLIND_LIMIT``
  seconds (a stall past the idle deadline), whatever happened meanwhile may be a deleted node, so it
  is unsynced at once and listed again instead of resumed: this keeps the one guarantee client-go does
  not give, that no pod is bound on a view of nodes that went stale while nobody could see. Nothing
  can be bound while the server is unreachable anyway; the list is retried every 1 to 2 s while the
  kind is unsynced, so the pause ends about when the server is back. A stream cut after it began
  (resets, truncated chunks, idle closes) never counts: it resumes.

Every restart is reported to ``on_restart(kind, action, reason)``: action ``resume`` (reason ``timeout``,
``broken``, ``idle``, ``no-answer``, ``unreachable`` or ``error``) or ``relist`` (``expired``,
``unreachable``, ``blind``, ``watch-failures``, ``resync`` or ``failure``: an unexpected error, logged with
its traceback, after which the informer lists again instead of ending), for the operator's metrics.

An optional kind (a CRD that may not be installed, an API group a feature gate may switch off)
that the server does not serve (404) counts as synced and empty, and is looked for again every
``ABSENT_RETRY`` seconds, so installing it later takes effect without a restart.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from ..core.framework.interface import ApiResponse
from .client import BROKEN, IDLE, NO_ANSWER, UNREACHABLE, Api

__all__ = ["ABSENT_RETRY", "LIST_PAGE", "RELIST_AFTER", "Feed", "Informer"]

logger = logging.getLogger(__name__)

#: objects per list page (client-go's reflector asks for 500)
LIST_PAGE: Final = 500
#: the server ends a watch after a timeout drawn from [MIN, 2 x MIN) seconds (client-go: 5 to 10 minutes)
MIN_WATCH_TIMEOUT: Final = 300.0
#: events applied back to back before the informer lets other tasks run
YIELD_EVERY: Final = 64
BACKOFF_FIRST: Final = 0.8
BACKOFF_MAX: Final = 30.0
#: the pause before resuming a watch that the network ended, doubling to RESUME_PAUSE_MAX while the
#: streams are cut short in a row (each pause is drawn from [x, 2x))
RESUME_PAUSE: Final = 0.05
RESUME_PAUSE_MAX: Final = 2.0
#: a watch that ran this long, or delivered anything, was healthy: its end resets both pauses
HEALTHY_WATCH: Final = 1.0
#: seconds a kind that pauses may go without a streaming watch before it is listed again (unsynced)
BLIND_LIMIT: Final = 5.0
#: the longest backoff of a list while its kind is unsynced (the loops wait for it)
UNSYNCED_BACKOFF_MAX: Final = 1.0
#: watches in a row that failed to start (no answer, or an error status) before the kind is listed again
RELIST_AFTER: Final = 5
#: seconds between looks for an optional kind the server does not serve
ABSENT_RETRY: Final = 60.0


@dataclass(frozen=True, slots=True)
class Feed:
    """A watched kind and what its events do."""

    kind: str
    #: the collection's path, e.g. /api/v1/pods or /apis/apps/v1/replicasets
    path: str
    #: one event: ``(type, body)``, type "ADDED" for listed items (never raises: bad bodies are logged)
    apply: Callable[[str, Mapping[str, Any]], None]
    #: the key `relisted` receives for a body
    key: Callable[[Mapping[str, Any]], str]
    #: after a list: the keys it held (whatever else is known of the kind is gone)
    relisted: Callable[[set[str]], None]
    #: the server may not serve the kind (404): then it counts as listed and empty
    optional: bool = False
    #: a fieldSelector for the list and the watch ("" for none), e.g. ``spec.nodeName!=``
    field_selector: str = ""
    #: the kind is unsynced while it relists after lost history (the loop pauses): pods and nodes
    pauses: bool = False


class _End(enum.Enum):
    """How a watch ended, and so what comes next."""

    RESUME = "resume"  # watch again from the last resourceVersion
    EXPIRED = "expired"  # 410: list again
    RESYNC = "resync"  # resync() was asked for: list again


@dataclass(slots=True)
class _Watched:
    """One watch's outcome: how it ended, why, where it got to, and whether it was healthy."""

    end: _End
    reason: str
    version: str
    #: the server streamed (a watch it refused or never answered does not count)
    opened: bool = True
    healthy: bool = False
    #: when the stream was last known to be alive (its end, or its last event after a silent stall)
    alive_at: float | None = None


class Informer:
    """Lists and watches one ``Feed`` forever (cancel the task to stop); see the module docstring."""

    def __init__(
        self,
        api: Api,
        feed: Feed,
        *,
        on_sync: Callable[[str, bool], None],
        on_restart: Callable[[str, str, str], None] | None = None,
        page: int = LIST_PAGE,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.feed = feed
        self.page = page
        self.synced = False
        self._on_sync = on_sync
        self._on_restart = on_restart
        self._rng = rng or random.Random()
        self._backoff = BACKOFF_FIRST
        self._resume_pause = RESUME_PAUSE
        self._failed_watches = 0
        #: when the kind was last known current: a list, or a stream that was alive
        self._alive_at = time.monotonic()
        self._resync = asyncio.Event()
        self._query = f"&fieldSelector={quote(feed.field_selector)}" if feed.field_selector else ""

    async def run(self) -> None:
        """List and watch until cancelled. Nothing else ends it: an error nobody expected (a bug, an
        exception a library raised that the client does not convert) is logged and the kind is listed
        again after a backoff, unsynced meanwhile when it pauses, as after lost history. An informer
        that died would leave its kind counted synced while nothing of it arrives any more."""
        while True:
            try:
                await self._list_and_watch()
            except Exception:
                logger.exception("%s: the informer failed; listing again", self.feed.kind)
                self._restarted("relist", "failure")
                if self.feed.pauses:
                    self._set_synced(False)
                await self._back_off()

    async def _list_and_watch(self) -> None:
        version = await self._list()
        while True:
            watched = await self._watch(version)
            version = watched.version
            if watched.alive_at is not None:
                self._alive_at = watched.alive_at
            if watched.end is _End.RESUME and self.feed.pauses and watched.reason == "unreachable":
                logger.warning("%s: the server cannot be reached; listing again once it can", self.feed.kind)
                self._restarted("relist", "unreachable")
                self._set_synced(False)
            elif watched.end is _End.RESUME:
                self._restarted("resume", watched.reason)
                await self._before_resume(watched)
                blind = time.monotonic() - self._alive_at
                if self.feed.pauses and blind > BLIND_LIMIT:
                    logger.warning(
                        "%s: not watched for %.1fs (%s); listing again", self.feed.kind, blind, watched.reason
                    )
                    self._restarted("relist", "blind")
                    self._set_synced(False)
                elif self._failed_watches < RELIST_AFTER:
                    continue
                else:
                    logger.warning(
                        "%s: %d watches in a row failed (%s); listing again",
                        self.feed.kind,
                        self._failed_watches,
                        watched.reason,
                    )
                    self._restarted("relist", "watch-failures")
                    if self.feed.pauses:  # as blind: what it missed meanwhile is unknown
                        self._set_synced(False)
            else:
                self._restarted("relist", watched.end.value)
                if self.feed.pauses:
                    self._set_synced(False)
            version = await self._list()

    def resync(self) -> None:
        """List the kind again (see the module docstring); a kind that pauses is unsynced at once."""
        self._resync.set()
        if self.feed.pauses:
            self._set_synced(False)

    def _set_synced(self, synced: bool) -> None:
        if synced != self.synced:
            self.synced = synced
            self._on_sync(self.feed.kind, synced)

    def _restarted(self, action: str, reason: str) -> None:
        if self._on_restart is not None:
            self._on_restart(self.feed.kind, action, reason)

    async def _back_off(self) -> None:
        backoff = self._backoff if self.synced else min(self._backoff, UNSYNCED_BACKOFF_MAX)
        await asyncio.sleep(backoff * (1.0 + self._rng.random()))
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

    async def _before_resume(self, watched: _Watched) -> None:
        """The pause before watching again (see the module docstring)."""
        if not watched.opened:
            self._failed_watches += 1
            await self._back_off()
            return
        self._failed_watches = 0
        if watched.healthy:
            self._backoff, self._resume_pause = BACKOFF_FIRST, RESUME_PAUSE
        pause = self._resume_pause
        self._resume_pause = min(pause * 2, RESUME_PAUSE_MAX)
        await asyncio.sleep(pause * (1.0 + self._rng.random()))

    async def _list(self) -> str:
        """Every object, page by page, applied; the list's resourceVersion. Retries until it has one.

        The next page is asked for as soon as a page's continue token is read, before its items are
        applied: the server prepares it while this process parses (the pages are still applied in order)."""
        ahead: list[asyncio.Future[ApiResponse]] = []
        try:
            return await self._pages(ahead)
        finally:
            for task in ahead:
                task.cancel()

    def _ask(self, token: str) -> asyncio.Future[ApiResponse]:
        query = f"?limit={self.page}{self._query}" + (f"&continue={quote(token)}" if token else "")
        return asyncio.ensure_future(self.api.request("GET", self.feed.path + query))

    async def _pages(self, ahead: list[asyncio.Future[ApiResponse]]) -> str:
        """``_list``'s pages; `ahead` holds the request of the next page while it is in flight."""
        feed, keys, token = self.feed, set[str](), ""
        self._resync.clear()  # a list is what a resync asks for
        while True:
            response = await (ahead.pop() if ahead else self._ask(token))
            if response.gone and feed.optional:
                await self._absent()
                keys, token = set(), ""
                continue
            page = response.body
            if not response.ok or not isinstance(page, dict):
                if response.status == 410 and token:
                    logger.info("%s: the list's continue token expired (410 Gone); listing from the start", feed.kind)
                    keys, token = set(), ""
                    continue
                logger.warning("cannot list %s: %s", feed.path, response.describe())
                await self._back_off()
                continue
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if token:
                ahead.append(self._ask(token))
                await asyncio.sleep(0)  # it goes out now, not after this page is applied
            for item in page.get("items") or ():
                keys.add(feed.key(item))
                self._apply("ADDED", item)
            if not token:
                break
        try:
            feed.relisted(keys)
        except Exception:  # as in _apply
            logger.exception("applying the list of %s failed", feed.kind)
        self._backoff = BACKOFF_FIRST
        self._failed_watches = 0
        self._alive_at = time.monotonic()
        self._set_synced(True)
        return str(meta.get("resourceVersion") or "")

    async def _absent(self) -> None:
        """The server does not serve this optional kind: nothing of it exists (until it is served)."""
        logger.debug("%s is not served; looking again in %.0fs", self.feed.path, ABSENT_RETRY)
        try:
            self.feed.relisted(set())
        except Exception:  # as in _apply
            logger.exception("applying the absence of %s failed", self.feed.kind)
        self._set_synced(True)
        self._backoff = BACKOFF_FIRST
        try:
            await asyncio.wait_for(self._resync.wait(), ABSENT_RETRY)
        except TimeoutError:
            pass
        self._resync.clear()

    async def _watch(self, version: str) -> _Watched:
        """Apply events until the stream ends or a resync is asked for."""
        if self._resync.is_set():
            return _Watched(_End.RESYNC, "resync", version)
        stream = asyncio.ensure_future(self._stream(version))
        resync = asyncio.ensure_future(self._resync.wait())
        try:
            done, _ = await asyncio.wait({stream, resync}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (stream, resync):
                task.cancel()
        if stream in done:
            return stream.result()
        await asyncio.gather(stream, return_exceptions=True)  # closes the connection
        logger.info("%s: listing again on request", self.feed.kind)
        return _Watched(_End.RESYNC, "resync", version)

    async def _stream(self, version: str) -> _Watched:
        apply = self._apply
        params = {"resourceVersion": version, "allowWatchBookmarks": "true"}
        if self.feed.field_selector:
            params["fieldSelector"] = self.feed.field_selector
        timeout = MIN_WATCH_TIMEOUT * (1.0 + self._rng.random())
        started = last = time.monotonic()
        delivered = applied = 0
        async for event in self.api.watch(self.feed.path, params, timeout=timeout):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                return self._ended_by(obj, version, delivered, started, last)
            delivered += 1
            last = time.monotonic()
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("resourceVersion"):
                version = str(meta["resourceVersion"])
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                apply(kind, obj)
                applied += 1
                if applied % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a burst of buffered events must not starve the loops
        return _Watched(_End.RESUME, "timeout", version, healthy=True, alive_at=time.monotonic())

    def _ended_by(
        self, status: Mapping[str, Any], version: str, delivered: int, started: float, last: float
    ) -> _Watched:
        """What an ERROR event (the server's, or the client's synthetic one with code 0) means."""
        code, reason = status.get("code"), status.get("reason")
        if code == 410:
            logger.info("%s: resourceVersion %s is too old (410 Gone); listing again", self.feed.kind, version)
            return _Watched(_End.EXPIRED, "expired", version)
        healthy = delivered > 0 or time.monotonic() - started >= HEALTHY_WATCH
        message = str(status.get("message", status))[:300]
        if code == 0 and reason in (BROKEN, IDLE):
            logger.debug("%s: the watch ended (%s); resuming from %s", self.feed.kind, message, version)
            if reason == IDLE:  # silent since its last event: that is when it was last alive
                return _Watched(_End.RESUME, "idle", version, healthy=healthy, alive_at=last)
            return _Watched(_End.RESUME, "broken", version, healthy=healthy, alive_at=time.monotonic())
        logger.warning("watching %s failed (%s); resuming from %s", self.feed.path, message, version)
        why = {NO_ANSWER: "no-answer", UNREACHABLE: "unreachable"}.get(str(reason), "error") if code == 0 else "error"
        opened = delivered > 0
        return _Watched(_End.RESUME, why, version, opened=opened, alive_at=last if opened else None)

    def _apply(self, kind: str, body: dict[str, Any]) -> None:
        try:
            self.feed.apply(kind, body)
        except Exception:  # a bug must not end the informer: the next events still count
            logger.exception("applying %s %s failed", kind, self.feed.kind)
