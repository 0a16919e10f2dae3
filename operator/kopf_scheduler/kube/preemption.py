"""What preemption does to the cluster once the core chose (``core/toolkit/preemption.py``,
``core/scheduling/cycle.py``).

Upstream ``framework/preemption/executor.go`` (``PreemptPod``, ``clearNominatedNodeName``) and
``updatePod`` in schedule_one.go, as plain JSON requests through ``app.api``:

- lower-priority pods nominated to the same node lose their nomination first (pods/status strategic
  merge patches);
- a victim waiting at Permit (a gang member) is preempted in memory, as upstream's ``waitingPod.Preempt``:
  not deleted, its wait ends with "preempted", it backs off and is tried again, and its Preempted event
  says "(in kube-scheduler memory).";
- each other victim not already being deleted gets the ``DisruptionTarget`` condition (reason
  ``PreemptionByScheduler``, message ``<schedulerName>: preempting to accommodate a higher
  priority pod``), is deleted with its uid as a precondition (so a pod recreated under the same
  name is never hit), and gets a Normal ``Preempted`` event ``Preempted by pod <uid> on node
  <node>``; a victim already gone (404, or 409 for another uid) is skipped silently;
- ``status.nominatedNodeName`` is set on the preemptor (the loop's status patch).

A Workload-API gang's preemption (``core/toolkit/pod_group_preemption.py``, ``preempt_for_pod_group``) evicts its
victims the same way for its PodGroup, as upstream's executor does for a pod group: the DisruptionTarget
condition says ``... a higher priority podgroup``, the Preempted event ``Preempted by podgroup <PodGroup
uid> on node cluster`` with the PodGroup as related object, and no nomination is cleared (upstream looks
for lower-priority pods nominated to its candidate's name, ``cluster``, which no node has).

Right before evicting, the preemptor is looked at once more (``_still_wanted``): still pending in
our pending index, unbound and uncached, and still nominated to that node in its queue (a gang: every
member its preemption nominated); a preemptor that another replica bound meanwhile, or that was deleted,
evicts nothing. Every request is fenced
(``edge/client.py``): a replica whose term may have ended evicts nothing either.

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
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..core.framework.interface import ApiResponse
from ..core.model import paths
from ..core.model.objects import Pod, PodGroup
from ..core.plugins.default_preemption import DefaultPreemption
from ..core.scheduling import routing
from ..core.toolkit.preemption import PREEMPTED
from . import bodies, events
from .app import App
from .bodies import Preemptor

__all__ = ["CLUSTER", "evict", "patch_pod_status", "preempt", "preempt_for_pod_group"]

#: the candidate upstream's pod-group preemption names where a pod's names a node (its whole-cluster domain)
CLUSTER = "cluster"

logger = logging.getLogger(__name__)


async def preempt(
    app: App, preemptor: Pod, node: str, victims: Sequence[Pod], clear_nominations: Sequence[Pod]
) -> None:
    """Clear the lower nominations on `node`, then evict `victims` for `preemptor` there (concurrently), as
    upstream's ``prepareCandidateAsync`` orders them; a victim waiting at Permit is preempted in memory."""
    if not _still_wanted(app, preemptor, node):
        logger.info(
            "not preempting on %s for %s: it is no longer pending here or no longer nominated there",
            node,
            preemptor.key,
        )
        return
    for other in clear_nominations:
        if other.nominated_node_name:
            await patch_pod_status(app, other, nominated_node="")
    await _evict_all(app, victims, Preemptor.of_pod(preemptor), node)


async def preempt_for_pod_group(
    app: App, group: PodGroup, nominated: Sequence[tuple[Pod, str]], victims: Sequence[Pod]
) -> None:
    """Evict `victims` for the gang of `group`, whose members `nominated` (each with its node) its preemption
    placed (upstream ``actuatePodGroupPreemption``); nothing when one of them is no longer pending here or
    no longer nominated there."""
    for member, node in nominated:
        if not _still_wanted(app, member, node):
            logger.info(
                "not preempting for %s/%s: %s is no longer pending here or no longer nominated to %s",
                group.namespace,
                group.name,
                member.key,
                node,
            )
            return
    scheduler_name = nominated[0][0].scheduler_name if nominated else ""
    await _evict_all(app, victims, Preemptor.of_pod_group(group, scheduler_name), CLUSTER)


async def _evict_all(app: App, victims: Sequence[Pod], preemptor: Preemptor, node: str) -> None:
    """Each victim concurrently: one waiting at Permit is preempted in memory, one already being deleted is left."""
    evicted = []
    for victim in victims:
        if app.waiting.preempt(victim.uid, DefaultPreemption.NAME, PREEMPTED):  # released by the loop's next settle
            logger.info("preempted %s waiting at Permit on %s for %s (in memory)", victim.key, node, preemptor.key)
            app.spawn(events.preempted(app, victim, preemptor=preemptor, node=node, in_memory=True))
        elif not victim.deleting:
            evicted.append(evict(app, victim, preemptor=preemptor, node=node))
    await asyncio.gather(*evicted)


def _still_wanted(app: App, preemptor: Pod, node: str) -> bool:
    """The preemptor is pending, unbound, not in the cache, and its queue still nominates it to `node`."""
    if not app.current() or app.cache.get_pod(preemptor.uid) is not None:
        return False
    pending = app.pending.get(preemptor.scheduler_name, preemptor.uid)
    state = app.states.get(preemptor.scheduler_name)
    if pending is None or pending.node_name or pending.deleting or state is None:
        return False
    return state.queue.nominated_node_of(preemptor) == node


async def evict(app: App, victim: Pod, *, preemptor: Pod | Preemptor, node: str) -> bool:
    """DisruptionTarget, DELETE (uid precondition), Preempted event. False when the victim was gone."""
    if isinstance(preemptor, Pod):
        preemptor = Preemptor.of_pod(preemptor)
    condition = bodies.disruption_target_condition(
        preemptor.scheduler_name, datetime.now(UTC), preemptor=preemptor.kind
    )
    path = paths.pod(victim.namespace, victim.name)
    async with app.write_slots:
        response = await app.api.request(
            "PATCH",
            f"{path}/status",
            bodies.pod_status_patch(victim.uid, condition=condition),
            content_type=bodies.STRATEGIC_MERGE_PATCH,
        )
    if response.gone or response.fenced:
        return False
    if not response.ok:
        logger.warning("cannot mark %s as a preemption victim: %s", victim.key, response.describe())
    async with app.write_slots:
        response = await app.api.request("DELETE", path, bodies.delete_options(victim.uid))
    if (response.gone and not response.retried) or response.conflict or response.fenced:
        return False  # a 404 to a retry is our first try, whose answer was lost: the victim is gone
    if not response.ok:
        logger.warning("cannot delete preemption victim %s: %s", victim.key, response.describe())
        return False
    logger.info("preempted %s on %s for %s", victim.key, node, preemptor.key)
    await events.preempted(app, victim, preemptor=preemptor, node=node)
    return True


async def patch_pod_status(
    app: App, pod: Pod, *, condition: Mapping[str, Any] | None = None, nominated_node: str | None = None
) -> ApiResponse:
    """One pods/status patch: a condition (merged by type) and/or ``nominatedNodeName`` ("" removes it).

    Anything but 2xx, 404 and a fenced write is logged; a 404 for a pending pod drops it
    (``core.scheduling.routing.route_pod_vanished``).
    """
    async with app.write_slots:
        response = await app.api.request(
            "PATCH",
            paths.pod(pod.namespace, pod.name, "status"),
            bodies.pod_status_patch(pod.uid, condition=condition, nominated_node=nominated_node),
            content_type=bodies.STRATEGIC_MERGE_PATCH,
        )
    if response.gone and not pod.node_name:
        app.perform(
            routing.route_pod_vanished(pod, cache=app.cache, pending=app.pending, served=app.states, now=app.now())
        )
    elif not response.ok and not response.gone and not response.fenced:
        logger.warning("cannot patch the status of %s: %s", pod.key, response.describe())
    return response
