"""Informers: a kind is LISTed, then WATCHed, through the process's ``Api``, with client-go's reflector semantics.

Upstream kube-scheduler's informers (client-go ``tools/cache/reflector.go``: list, then watch from the
list's resourceVersion) feed ``pkg/scheduler/eventhandlers.go``; here an ``Informer`` feeds the thin
functions of ``kube/handlers.py``, which convert and call ``core.routing``.

One informer, one kind (a ``Feed``):

- **List** in pages (``limit``/``continue``, no resourceVersion: a consistent read), hand every item to
  ``apply`` as an add, then the keys of everything listed to ``relisted``: what the list lacks was
  deleted while nobody watched and goes with all it implies (client-go's ``Replace``). Then the
  kind is **synced** (``on_sync(kind, True)``).
- **Watch** from the list's resourceVersion, with ``allowWatchBookmarks`` and a ``timeoutSeconds``
  drawn between 5 and 10 minutes (as the reflector does, so watches of many clients do not end
  together); each ADDED / MODIFIED / DELETED goes to ``apply``. When the server ends the watch
  after its timeout, the informer watches again from the last resourceVersion it saw and the kind
  stays synced.
- **Anything else breaks the kind**: a 410 Gone (the resourceVersion is older than the server keeps),
  an expired continue token, an error status, a dropped connection, or a watch that delivered
  nothing, not even a bookmark, for the client's idle deadline (``Api.watch_idle_timeout``). The kind
  is **unsynced** at once (``on_sync(kind, False)``: the loop schedules nothing until every kind is
  synced again), then listed again after a backoff (0.8 s doubling to 30 s, as the reflector's).
  Listing again rather than resuming the watch is deliberate: a resumed watch cannot say when it
  has replayed what was missed, a completed list can.
- ``resync()`` breaks the kind on purpose (the process was frozen: whatever it holds may be stale).

An optional kind (a CRD that may not be installed, an API group a feature gate may switch off)
that the server does not serve (404) counts as synced and empty, and is looked for again every
``ABSENT_RETRY`` seconds, so installing it later takes effect without a restart.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from .client import Api

__all__ = ["ABSENT_RETRY", "LIST_PAGE", "Feed", "Informer"]

logger = logging.getLogger(__name__)

#: objects per list page (client-go's reflector asks for 500)
LIST_PAGE: Final = 500
#: the server ends a watch after a timeout drawn from [MIN, 2 x MIN) seconds (client-go: 5 to 10 minutes)
MIN_WATCH_TIMEOUT: Final = 300.0
#: events applied back to back before the informer lets other tasks run
YIELD_EVERY: Final = 64
BACKOFF_FIRST: Final = 0.8
BACKOFF_MAX: Final = 30.0
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


class _End(enum.Enum):
    TIMEOUT = "the server ended the watch"  # watch again from the last resourceVersion
    EXPIRED = "410 Gone"  # list again
    BROKEN = "broken"  # list again, after a backoff


class Informer:
    """Lists and watches one ``Feed`` forever (cancel the task to stop); see the module docstring."""

    def __init__(
        self,
        api: Api,
        feed: Feed,
        *,
        on_sync: Callable[[str, bool], None],
        page: int = LIST_PAGE,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.feed = feed
        self.page = page
        self.synced = False
        self._on_sync = on_sync
        self._rng = rng or random.Random()
        self._backoff = BACKOFF_FIRST
        self._resync = asyncio.Event()
        self._query = f"&fieldSelector={quote(feed.field_selector)}" if feed.field_selector else ""

    async def run(self) -> None:
        version: str | None = None
        while True:
            if version is None:
                version = await self._list()
                if version is None:
                    await self._back_off()
                    continue
            end, version = await self._watch(version)
            if end is _End.TIMEOUT:
                continue
            self._set_synced(False)
            if end is _End.BROKEN:
                await self._back_off()
            version = None

    def resync(self) -> None:
        """Break the kind now: unsynced at once, listed again (see the module docstring)."""
        self._resync.set()
        self._set_synced(False)

    def _set_synced(self, synced: bool) -> None:
        if synced != self.synced:
            self.synced = synced
            if not synced:
                logger.warning(
                    "%s: the watch broke; nothing is scheduled until the kind is listed again", self.feed.kind
                )
            self._on_sync(self.feed.kind, synced)

    async def _back_off(self) -> None:
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

    async def _list(self) -> str | None:
        """Every object, page by page, applied; the list's resourceVersion, or None on failure."""
        feed, keys, token = self.feed, set(), ""
        self._resync.clear()  # a list is what a resync asks for
        while True:
            query = f"?limit={self.page}{self._query}" + (f"&continue={quote(token)}" if token else "")
            response = await self.api.request("GET", feed.path + query)
            if response.gone and feed.optional:
                await self._absent()
                return None
            page = response.body
            if not response.ok or not isinstance(page, dict):
                logger.warning("cannot list %s: %s", feed.path, response.describe())
                self._set_synced(False)
                return None
            for item in page.get("items") or ():
                keys.add(feed.key(item))
                self._apply("ADDED", item)
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                break
        try:
            feed.relisted(keys)
        except Exception:  # as in _apply
            logger.exception("applying the list of %s failed", feed.kind)
        self._backoff = BACKOFF_FIRST
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
            await asyncio.wait_for(self._resync.wait(), ABSENT_RETRY - BACKOFF_FIRST)  # run() backs off the rest
        except TimeoutError:
            pass

    async def _watch(self, version: str) -> tuple[_End, str]:
        """Apply events until the stream ends or a resync is asked for."""
        if self._resync.is_set():
            return _End.EXPIRED, version
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
        return _End.EXPIRED, version

    async def _stream(self, version: str) -> tuple[_End, str]:
        apply = self._apply
        params = {"resourceVersion": version, "allowWatchBookmarks": "true"}
        if self.feed.field_selector:
            params["fieldSelector"] = self.feed.field_selector
        timeout = MIN_WATCH_TIMEOUT * (1.0 + self._rng.random())
        applied = 0
        async for event in self.api.watch(self.feed.path, params, timeout=timeout):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    logger.info("%s: resourceVersion %s is too old (410 Gone); listing again", self.feed.kind, version)
                    return _End.EXPIRED, version
                logger.warning("watching %s failed: %s", self.feed.path, str(obj.get("message", obj))[:300])
                return _End.BROKEN, version
            self._backoff = BACKOFF_FIRST
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("resourceVersion"):
                version = str(meta["resourceVersion"])
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                apply(kind, obj)
                applied += 1
                if applied % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a burst of buffered events must not starve the loops
        return _End.TIMEOUT, version

    def _apply(self, kind: str, body: dict[str, Any]) -> None:
        try:
            self.feed.apply(kind, body)
        except Exception:  # a bug must not end the informer: the next events still count
            logger.exception("applying %s %s failed", kind, self.feed.kind)
