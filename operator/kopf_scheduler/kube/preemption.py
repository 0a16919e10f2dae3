"""What preemption does to the cluster once the core chose (``core/preemption.py``, ``core/cycle.py``).

Upstream ``framework/preemption/executor.go`` (``PreemptPod``, ``clearNominatedNodeName``) and
``updatePod`` in schedule_one.go, as plain JSON requests through ``app.api``:

- each victim not already being deleted gets the ``DisruptionTarget`` condition (reason
  ``PreemptionByScheduler``, message ``<schedulerName>: preempting to accommodate a higher
  priority pod``), is deleted with its uid as a precondition (so a pod recreated under the same
  name is never hit), and gets a Normal ``Preempted`` event ``Preempted by pod <uid> on node
  <node>``; a victim already gone (404, or 409 for another uid) is skipped silently;
- ``status.nominatedNodeName`` is set on the preemptor and cleared on lower-priority pods that
  were nominated to the same node (pods/status strategic merge patches).

Decisions: the victims are evicted before the loop pops the next pod (upstream's synchronous
``prepareCandidate``; v1.37 evicts from a goroutine and holds the preemptor back with PreEnqueue
until it is done). The outcome is the same, a preemptor never retries while its own deletions
are in flight, and victims are few, each eviction one round trip. A victim whose condition cannot
be written is still deleted (upstream gives up on it); a failed deletion is logged and the
preemptor retries on the next cluster event or after the unschedulable timeout (upstream
re-activates it at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..core.objects import CONDITION_DISRUPTION_TARGET, REASON_PREEMPTION_BY_SCHEDULER, Pod
from ..core.timestamps import rfc3339
from . import events
from .app import App

__all__ = ["evict", "patch_pod_status", "preempt"]

logger = logging.getLogger(__name__)


async def preempt(app: App, preemptor: Pod, node: str, victims: Sequence[Pod], clear_nominations: Sequence[Pod]) -> None:
    """Evict `victims` for `preemptor` on `node` (concurrently), then clear the lower nominations."""
    await asyncio.gather(*(evict(app, victim, preemptor=preemptor, node=node) for victim in victims if not victim.deleting))
    for other in clear_nominations:
        if other.nominated_node_name:
            await patch_pod_status(app, other, nominated_node="")


async def evict(app: App, victim: Pod, *, preemptor: Pod, node: str) -> bool:
    """DisruptionTarget, DELETE (uid precondition), Preempted event. False when the victim was gone."""
    condition = {
        "type": CONDITION_DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": rfc3339(datetime.now(UTC)),
    }
    path = f"/api/v1/namespaces/{victim.namespace}/pods/{victim.name}"
    async with app.write_slots:
        code, answer = await app.api.request(
            "PATCH", f"{path}/status", {"metadata": {"uid": victim.uid}, "status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
    if code == 404:
        return False
    if not 200 <= code < 300:
        logger.warning("cannot mark %s as a preemption victim: HTTP %s %s", victim.key, code, str(answer)[:300])
    delete = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
    async with app.write_slots:
        code, answer = await app.api.request("DELETE", path, delete)
    if code in (404, 409):
        return False
    if not 200 <= code < 300:
        logger.warning("cannot delete preemption victim %s: HTTP %s %s", victim.key, code, str(answer)[:300])
        return False
    logger.info("preempted %s on %s for %s", victim.key, node, preemptor.key)
    await events.preempted(app, victim, preemptor=preemptor, node=node)
    return True


async def patch_pod_status(app: App, pod: Pod, *, condition: dict[str, Any] | None = None, nominated_node: str | None = None) -> int:
    """One pods/status patch: a condition (merged by type) and/or ``nominatedNodeName`` ("" removes it).

    Returns the HTTP status (0 on a transport failure); anything but 2xx and 404 is logged.
    """
    status: dict[str, Any] = {}
    if condition is not None:
        status["conditions"] = [condition]
    if nominated_node is not None:
        status["nominatedNodeName"] = nominated_node or None
    async with app.write_slots:
        code, answer = await app.api.request(
            "PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status", {"metadata": {"uid": pod.uid}, "status": status},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
    if not 200 <= code < 300 and code != 404:
        logger.warning("cannot patch the status of %s: HTTP %s %s", pod.key, code, str(answer)[:300])
    return code
