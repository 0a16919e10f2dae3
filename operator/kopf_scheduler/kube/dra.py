"""The DRA writes the synchronous points decided: sent to the API server (the operator's executor).

DynamicResources' Unreserve (remove the pod from a claim's ``reservedFor``) and PostFilter
(deallocate a claim reserved for nobody) cannot await; they queue ``ApiWrite`` values in the
tracker's outbox (``core/dra/tracker.py``). ``flush`` drains it after every cycle, settlement and
failed binding, and sends each write in the background, as upstream's plugin does from those points;
the writes a write carries in ``then`` (deleting a claim once its finalizer is gone) follow it in
order, once it succeeded. A write that fails is logged: the claim's watch event, or the next
attempt, sets things right.
"""

from __future__ import annotations

import logging

from ..core.dra.tracker import ApiWrite
from .app import App

__all__ = ["flush"]

logger = logging.getLogger(__name__)


def flush(app: App) -> None:
    """Send the queued DRA writes (nothing to do, the usual case, costs one list swap)."""
    tracker = app.cache.objects.dra
    if not tracker.outbox:
        return
    for write in tracker.drain():
        app.spawn(_send(app, write))


async def _send(app: App, write: ApiWrite) -> None:
    response = await app.api.request(write.method, write.path, write.body, content_type=write.content_type)
    if response.ok:
        logger.info("%s: done", write.purpose)
        for after in write.then:
            await _send(app, after)
    elif not response.gone:  # a claim deleted meanwhile needs nothing more
        logger.warning("%s: %s", write.purpose, response.describe())
