"""Informers: every kind the scheduler reads is LISTed, then WATCHed, through our own ``Api``.

Upstream kube-scheduler's informers (client-go's reflector: list, then watch from the list's
resourceVersion) feed ``pkg/scheduler/eventhandlers.go``; here an ``Informer`` feeds the thin
functions of ``kube/handlers.py``, which convert and call ``core.routing``. Kopf watches only
SchedulingPolicies: its per-event machinery (a worker task per object, per-object loggers,
diff-base deep copies, cause detection) cost more than the whole scheduling of a pod did
(bench/bench_e2e.py, see the README), and it says nothing when an initial list is complete.

One informer, one kind:

- list in pages (``limit``/``continue``); hand every item to ``apply`` as an add, then the
  keys of everything listed to ``relisted``, so objects deleted while nobody watched go away
  (client-go's ``Replace``); then ``listed`` (the App counts kinds towards its cache sync:
  no pod is scheduled and /readyz says not ready until every kind listed once, upstream's
  ``WaitForCacheSync``);
- watch from the list's resourceVersion, with bookmarks; each ADDED / MODIFIED / DELETED goes
  to ``apply``; the server's timeout or a dropped connection watches again from the last
  resourceVersion; a 410 Gone lists again; a failed list or watch backs off (0.8 s, doubling to
  30 s, as the reflector) and tries again (a dropped connection watches from where it was, an
  error status lists again).

An optional kind (a CRD that may not be installed, an API group a feature gate may switch off)
that the server does not serve (404) counts as listed and empty, and is looked for again every
``ABSENT_RETRY`` seconds, so installing it later takes effect without a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from .client import Api

__all__ = ["ABSENT_RETRY", "LIST_PAGE", "WATCH_TIMEOUT", "Feed", "Informer"]

logger = logging.getLogger(__name__)

#: objects per list page (client-go's reflector asks for 500)
LIST_PAGE: Final = 500
#: seconds the server keeps one watch open (client-go picks 5 to 10 minutes)
WATCH_TIMEOUT: Final = 300.0
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


class Informer:
    """Lists and watches one ``Feed`` forever (cancel the task to stop)."""

    def __init__(self, api: Api, feed: Feed, *, listed: Callable[[str], None], page: int = LIST_PAGE) -> None:
        self.api = api
        self.feed = feed
        self.page = page
        self._listed = listed
        self._backoff = BACKOFF_FIRST

    async def run(self) -> None:
        version: str | None = None
        while True:
            if version is None:
                version = await self._list()
                if version is None:
                    await self._back_off()
                    continue
                self._listed(self.feed.kind)
            version = await self._watch(version)

    async def _back_off(self) -> None:
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)

    async def _list(self) -> str | None:
        """Every object, page by page, applied; the list's resourceVersion, or None on failure."""
        feed, keys, token = self.feed, set(), ""
        while True:
            query = f"?limit={self.page}" + (f"&continue={quote(token)}" if token else "")
            code, page = await self.api.request("GET", feed.path + query)
            if code == 404 and feed.optional:
                await self._absent()
                return None
            if code != 200 or not isinstance(page, dict):
                logger.warning("cannot list %s: HTTP %s %s", feed.path, code, str(page)[:300])
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
        return str(meta.get("resourceVersion") or "")

    async def _absent(self) -> None:
        """The server does not serve this optional kind: nothing of it exists (until it is served)."""
        logger.debug("%s is not served; looking again in %.0fs", self.feed.path, ABSENT_RETRY)
        try:
            self.feed.relisted(set())
        except Exception:  # as in _apply
            logger.exception("applying the absence of %s failed", self.feed.kind)
        self._listed(self.feed.kind)
        self._backoff = BACKOFF_FIRST
        await asyncio.sleep(ABSENT_RETRY - BACKOFF_FIRST)  # run() backs off the rest

    async def _watch(self, version: str) -> str | None:
        """Apply events until the stream ends; the resourceVersion to go on from (None: list again)."""
        apply = self._apply
        params = {"resourceVersion": version, "allowWatchBookmarks": "true"}
        applied = 0
        async for event in self.api.watch(self.feed.path, params, timeout=WATCH_TIMEOUT):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    return None
                logger.warning("watching %s failed: %s", self.feed.path, str(obj)[:300])
                await self._back_off()
                return version if code == 0 else None
            self._backoff = BACKOFF_FIRST
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("resourceVersion"):
                version = str(meta["resourceVersion"])
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                apply(kind, obj)
                applied += 1
                if applied % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a burst of buffered events must not starve the loops
        return version

    def _apply(self, kind: str, body: dict[str, Any]) -> None:
        try:
            self.feed.apply(kind, body)
        except Exception:  # a bug must not end the informer: the next events still count
            logger.exception("applying %s %s failed", kind, self.feed.kind)
