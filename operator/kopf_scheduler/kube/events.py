"""Scheduled / FailedScheduling / Preempted events (core/v1 Events, written as plain JSON).

reportingController ``kopf-scheduler``, reportingInstance the process identity, action
``Scheduling`` or ``Binding``, involvedObject with the pod's uid. The body is ``kube/bodies.event``:
``firstTimestamp``/``lastTimestamp`` as metav1.Time, ``eventTime`` as MicroTime with exactly six
fractional digits (the official client would drop them when the microseconds are 0).

A Scheduled event goes out from the bind's own task (``kube/binding.py``), right after the bind. A
process killed between the two loses it, so a new leader (or a restarted process) writes the
Scheduled events of our recently bound pods that have none (``recover_scheduled``: pods whose
PodScheduled condition turned True in the last ``RECOVERY_WINDOW`` seconds, against one list of
our Scheduled events). Which binds are whose is not told by the clock: the bind task names each pod
it binds in ``App.binding_here`` while a recovery runs, and everything else bound to a served name
is another process's (the killed one's, or a former leader's). Their last events may still be in
the API server's hands when this process starts leading, so the list is taken ``IN_FLIGHT_GRACE``
seconds after. (An earlier cut at "bound before leading, less two seconds of clock skew" missed the
pods a killed process bound in its last two seconds when its successor started that fast.)

An event's name is drawn once, before its first try: a create whose answer was lost is sent again
(``Api.request``'s retries) and a 409 (AlreadyExists) then says the first try landed, which counts as
written, as client-go's recorder counts it. No event is dropped for a reset, and none is doubled.

Repeats: the core's ``RepeatLimiter`` (``core/framework/recording.py``) decides whether a FailedScheduling
event goes out (at most one per pod, action and stage per ``REPEAT_INTERVAL`` seconds, whatever its
message; a rejection at Permit is a stage of its own).

Why core/v1 and not events.k8s.io/v1 (upstream's recorder): measured on the local control plane
(3000 Scheduled events, 16 in flight, twice each), neither is cheaper: our CPU 149-168 against
161-172 us an event, the API server's 787-830 against 757-923 us. Distinct pods' Scheduled events
cannot be aggregated (upstream's EventSeries only folds repeats of the same event), and the API
has no batch create, so it is one request per pod either way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

from ..core.model import paths
from ..core.model.objects import Pod
from ..core.toolkit.preemption import IN_MEMORY
from . import bodies
from .app import App
from .bodies import Preemptor

__all__ = [
    "ACTION_BINDING",
    "ACTION_PREEMPTING",
    "ACTION_SCHEDULING",
    "RECOVERY_WINDOW",
    "REPORTING_CONTROLLER",
    "failed_scheduling",
    "preempted",
    "record",
    "recover_scheduled",
    "scheduled",
]

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "kopf-scheduler"
ACTION_SCHEDULING: Final = "Scheduling"
ACTION_BINDING: Final = "Binding"
ACTION_PREEMPTING: Final = "Preempting"
#: seconds back that a new leader looks for bound pods of ours whose Scheduled event is missing
RECOVERY_WINDOW: Final = 600.0
#: seconds after starting to lead before the recovery lists our Scheduled events: the writes a former
#: holder sent before its term ended have landed by then
IN_FLIGHT_GRACE: Final = 2.0


async def record(
    app: App,
    *,
    namespace: str,
    name: str,
    uid: str,
    type_: str,
    reason: str,
    action: str,
    message: str,
    related: Pod | Mapping[str, Any] | None = None,
    pipelined: bool = False,
) -> None:
    """One Event about the pod `namespace/name` (`uid`); `related` names a second object (upstream's related
    object: a pod, or a reference as it is). `pipelined`: the caller's own slot bounds the writes in flight (a
    bind's), so the event does not queue for a write slot."""
    body = bodies.event(
        namespace=namespace,
        name=name,
        uid=uid,
        type_=type_,
        reason=reason,
        action=action,
        message=message,
        controller=REPORTING_CONTROLLER,
        instance=app.identity,
        now=datetime.now(UTC),
        suffix=os.urandom(8).hex(),
        related=related,
    )
    path = paths.collection("v1", "events", namespace=namespace)
    if pipelined:
        response = await app.api.request("POST", path, body, decode=False, retry=True)
    else:
        async with app.write_slots:
            response = await app.api.request("POST", path, body, decode=False, retry=True)
    if not response.ok and not response.fenced and not response.conflict:  # 409: a lost answer's event exists
        logger.warning("cannot record %s event for %s/%s: %s", reason, namespace, name, response.describe())


async def scheduled(app: App, *, namespace: str, name: str, uid: str, node: str, pipelined: bool = False) -> None:
    await record(
        app,
        namespace=namespace,
        name=name,
        uid=uid,
        type_="Normal",
        reason="Scheduled",
        action=ACTION_BINDING,
        message=f"Successfully assigned {namespace}/{name} to {node}",
        pipelined=pipelined,
    )


def recover_scheduled(
    app: App,
    *,
    window: float = RECOVERY_WINDOW,
    grace: float = IN_FLIGHT_GRACE,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Coroutine[Any, Any, int]:
    """Called as this process starts leading (its binds are named in ``app.binding_here`` from this
    call on, before any of them can start); the coroutine, once the cache is current, writes the
    missing Scheduled events of pods another process bound to a served scheduler name in the last
    `window` seconds (see the module docstring). It returns how many. `sleep` waits out what is left
    of the `grace` (tests give one that ends when they say)."""
    if app.binding_here is None:
        app.binding_here = set()
    app.recoveries += 1
    return _recover_scheduled(app, leading_since=time.time(), window=window, grace=grace, sleep=sleep)


async def _recover_scheduled(
    app: App, *, leading_since: float, window: float, grace: float, sleep: Callable[[float], Awaitable[None]]
) -> int:
    try:
        await app.synced.wait()
        for _ in range(60):  # Kopf hands the policies over soon after start
            if app.states:
                break
            await asyncio.sleep(0.5)
        await sleep(max(0.0, leading_since + grace - time.time()))
        ours = app.binding_here or set()
        cutoff = leading_since - window
        candidates = [
            p
            for p in app.cache.pods()
            if p.scheduler_name in app.states
            and p.node_name
            and p.scheduled_at is not None
            and p.scheduled_at >= cutoff
            and p.uid not in ours
            and not app.cache.is_assumed(p)
        ]
        if not candidates:
            return 0
        recorded = await _scheduled_event_uids(app)
        if recorded is None:
            return 0
        missing = [p for p in candidates if p.uid not in recorded]
        for pod in missing:
            await scheduled(app, namespace=pod.namespace, name=pod.name, uid=pod.uid, node=pod.node_name)
        if missing:
            logger.info("wrote the %d missing Scheduled event(s) of pods another process bound", len(missing))
        return len(missing)
    finally:
        app.recoveries -= 1
        if not app.recoveries:
            app.binding_here = None


async def _scheduled_event_uids(app: App) -> set[str] | None:
    """The involved pods' uids of every Scheduled event we wrote (one paged list, filtered by the server)."""
    selector = quote(f"reason=Scheduled,source={REPORTING_CONTROLLER}")
    uids: set[str] = set()

    def visit(item: Any) -> None:
        involved = item.get("involvedObject") if isinstance(item, dict) else None
        if isinstance(involved, dict) and involved.get("uid"):
            uids.add(str(involved["uid"]))

    failed = await app.api.list_each(paths.collection("v1", "events"), visit, query=f"&fieldSelector={selector}")
    if failed is not None:
        logger.warning("cannot list our Scheduled events: %s", failed.describe())
        return None
    return uids


async def failed_scheduling(
    app: App, *, namespace: str, name: str, uid: str, message: str, action: str = ACTION_SCHEDULING, stage: str = ""
) -> None:
    """A Warning FailedScheduling event, unless one of this action and `stage` ("", or "Permit" for a
    rejection at Permit) went out for this pod recently."""
    if not app.failed_scheduling_limiter.allow(uid, action, app.now(), stage=stage):
        logger.debug("repeated FailedScheduling for %s/%s suppressed", namespace, name)
        return
    await record(
        app,
        namespace=namespace,
        name=name,
        uid=uid,
        type_="Warning",
        reason="FailedScheduling",
        action=action,
        message=message,
    )


async def preempted(app: App, victim: Pod, *, preemptor: Pod | Preemptor, node: str, in_memory: bool = False) -> None:
    """The Normal Preempted event on a victim, upstream's text: ``Preempted by <kind> <uid> on node <node>``
    (``pod``, or ``podgroup`` on node ``cluster`` for a gang's preemption), with `` (in kube-scheduler
    memory).`` for a victim that waited at Permit (not deleted); the preemptor is its related object."""
    who = preemptor if isinstance(preemptor, Preemptor) else Preemptor.of_pod(preemptor)
    await record(
        app,
        namespace=victim.namespace,
        name=victim.name,
        uid=victim.uid,
        type_="Normal",
        reason="Preempted",
        action=ACTION_PREEMPTING,
        message=f"Preempted by {who.kind} {who.uid} on node {node}{IN_MEMORY if in_memory else ''}",
        related=who.related,
    )
