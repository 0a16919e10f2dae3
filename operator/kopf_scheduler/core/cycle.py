"""One scheduling cycle as a value: upstream ``ScheduleOne`` (pkg/scheduler/schedule_one.go).

``schedule_one`` takes a pod the queue just popped and decides; the operator executes the
outcome (``kube/loop.py``: spawn the bind, record events, set the PodScheduled condition, count
metrics). The queue and the cache are pure core objects, so the cycle moves the pod between
them itself:

- ``Skip``: the pod is being deleted, already bound, or already in the cache (assumed or
  confirmed; upstream ``skipPodSchedule``); it leaves the queue;
- ``Bind``: the algorithm chose a node and the pod is assumed there (``cache.assume``); it stays
  in flight in the queue until ``binding_succeeded`` or ``binding_failed``;
- ``Unschedulable``: every node was rejected; the pod waits in the unschedulable pool (or in
  backoff, when a cluster event arrived during the attempt) with the rejecting plugins. When
  preemption (the PostFilter stage) found room, the outcome carries the nominated node and the
  victims to evict, and the queue's nominator holds the pod there at once, so lower-priority
  pods do not take the room while the victims go; lower-priority pods nominated to that node
  lose their nomination (upstream ``prepareCandidate``);
- ``Error``: the algorithm or the assumption failed; the pod backs off.

``nominated_node`` on Unschedulable and Error is upstream's NominatingInfo for the pod's
``status.nominatedNodeName``: None leaves it, "" clears it, a name sets it. As upstream, a failure
without a PostFilter verdict (no PostFilter plugin, or an error) clears the nomination.

``schedule_one`` is three steps, which the operator also runs apart when a profile has extenders
(their HTTP calls block, so the algorithm runs in a worker thread): ``prepare`` (skip, or bring the
snapshot up to date), ``decide`` (the algorithm alone: it reads only the snapshot and the
scheduler, so it may run off the event loop while watch events change the cache and the queue)
and ``conclude`` (assume, or put the pod back in the queue).

``next_wait`` says how long the loop may sleep before it pops again. Time (``now``, any monotonic
origin) and randomness (``rng``, for the tie-break) are arguments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .algorithm import GenericScheduler, ScheduleResult
from .cache import PodState, SchedulerCache
from .objects import Pod
from .queueing import Nominator, QueuedPodInfo, SchedulingQueue
from .snapshot import Snapshot

__all__ = [
    "Bind",
    "Error",
    "Outcome",
    "Skip",
    "Unschedulable",
    "binding_failed",
    "binding_succeeded",
    "conclude",
    "decide",
    "next_wait",
    "prepare",
    "schedule_one",
]


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to schedule: why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Bind:
    """Bind `pod` (as assumed: its ``node_name`` is `node`)."""

    pod: Pod
    node: str
    #: the algorithm's result, for explanations (``core/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """No node fits: the FitError text and the plugins that rejected nodes; with preemption's verdict."""

    message: str
    plugins: frozenset[str]
    #: the pod's nomination: None leaves it, "" clears it, a node name sets it
    nominated_node: str | None = None
    #: pods to evict so that the pod fits its nominated node (most important first)
    victims: tuple[Pod, ...] = ()
    #: lower-priority pods nominated to that node, whose nomination is to be cleared
    clear_nominations: tuple[Pod, ...] = ()
    #: the PostFilter stage (preemption) ran for this attempt
    post_filtered: bool = False
    #: the algorithm's result, for explanations (``core/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Error:
    """The attempt failed for another reason; `exception` when the algorithm raised (a bug: log it)."""

    message: str
    exception: Exception | None = None
    #: the pod's nomination, as on Unschedulable ("" clears it, None leaves it)
    nominated_node: str | None = None
    #: the algorithm's result when it returned one, for explanations (``core/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)


Outcome = Skip | Bind | Unschedulable | Error


def schedule_one(
    info: QueuedPodInfo,
    snapshot: Snapshot,
    scheduler: GenericScheduler,
    *,
    cache: SchedulerCache,
    queue: SchedulingQueue,
    rng: random.Random,
    now: float,
) -> Outcome:
    """Decide for the popped pod `info` with `scheduler`'s profile; `snapshot` is brought up to date first."""
    skip = prepare(info, snapshot, cache=cache, queue=queue)
    if skip is not None:
        return skip
    return conclude(info, decide(info, snapshot, scheduler, rng=rng, nominator=queue.nominator), cache=cache, queue=queue, now=now)


def prepare(info: QueuedPodInfo, snapshot: Snapshot, *, cache: SchedulerCache, queue: SchedulingQueue, private_objects: bool = False) -> Skip | None:
    """Skip the pod (it leaves the queue), or bring `snapshot` up to date for ``decide``. With
    `private_objects` the snapshot gets its own copy of the cluster objects, for a ``decide`` run
    while watch events change the cache's."""
    reason = _skip_reason(info.pod, cache)
    if reason:
        queue.done(info.pod)
        return Skip(reason)
    cache.update_snapshot(snapshot, private_objects=private_objects)
    return None


def decide(
    info: QueuedPodInfo, snapshot: Snapshot, scheduler: GenericScheduler, *, rng: random.Random, nominator: Nominator | None = None
) -> ScheduleResult | Error:
    """The algorithm's result, or an ``Error`` when it raised (a bug: the plugin runtime turns plugin
    errors into statuses, this is the last resort). Touches only its arguments: off the event loop,
    pass a copy of the queue's `nominator` (``Nominator.copy``), which watch events change."""
    try:
        return scheduler.schedule(info.pod, snapshot, rng=rng, nominator=nominator)
    except Exception as exc:
        return Error(f"internal error: {exc!r}", exc)


def conclude(info: QueuedPodInfo, decided: ScheduleResult | Error, *, cache: SchedulerCache, queue: SchedulingQueue, now: float) -> Outcome:
    """Carry a decision into the cache and the queue: assume the pod on its node, or put it back
    (nominated to the node preemption made room on, when it did)."""
    pod = info.pod
    if isinstance(decided, Error):
        queue.add_backoff(info, now)
        return Error(decided.message, decided.exception, _clear(queue, pod))
    if decided.node is not None:
        reason = _skip_reason(pod, cache)
        if reason:  # only when decide ran off the loop: the watch saw the pod bound or deleted meanwhile
            queue.done(pod)
            return Skip(reason)
        queue.delete_nominated_pod(pod)  # upstream assume: the cache holds it now, not the nominator
        return Bind(cache.assume(pod, decided.node), decided.node, decided)
    if decided.error is not None:
        queue.add_backoff(info, now)
        return Error(decided.error, None, _clear(queue, pod), decided)
    plugins = frozenset(decided.diagnosis.unschedulable_plugins)
    verdict = decided.post_filter
    nominated = verdict.nominated_node if verdict is not None else ""
    queued = queue.add_unschedulable(info, now, plugins=plugins)
    if not nominated:
        cleared = _clear(queue, pod) if nominated == "" else None
        return Unschedulable(decided.message, plugins, cleared, post_filtered=verdict is not None, result=decided)
    assert verdict is not None
    lower = tuple(p for p in queue.nominator.pods_for_node(nominated) if p.priority < pod.priority)
    for other in lower:
        queue.delete_nominated_pod(other)
    if queued:
        queue.add_nominated_pod(info.pod, nominated)
    return Unschedulable(decided.message, plugins, nominated, verdict.victims, lower, post_filtered=True, result=decided)


def _clear(queue: SchedulingQueue, pod: Pod) -> str:
    """Clear the pod's nomination in the queue (upstream's clearNominatedNode): "" for the outcome."""
    queue.delete_nominated_pod(pod)
    return ""


def next_wait(queue: SchedulingQueue, now: float, *, longest: float) -> float:
    """Seconds the loop may sleep before it pops: 0 when a pod is ready, else until the earliest
    backoff expiry or unschedulable-leftover deadline, at most `longest` (a handler's wake-up, or
    a pod that nothing but an event will make ready, is waited for that long)."""
    ready_at = queue.next_ready_at(now)
    if ready_at is None:
        return longest
    return min(longest, max(ready_at - now, 0.0))


def _skip_reason(pod: Pod, cache: SchedulerCache) -> str:
    if pod.deleting:
        return "being deleted"
    if pod.node_name:
        return f"already bound to {pod.node_name}"
    state = cache.state_of(pod)
    if state is PodState.ADDED:
        return "already bound (the watch confirmed it)"
    if state is not None:
        return "already assumed"
    return ""


def binding_succeeded(placed: Pod, *, cache: SchedulerCache, queue: SchedulingQueue, now: float) -> None:
    """The bind call returned 2xx: start the assumption's TTL (unless the watch confirmed or removed
    the pod first) and let the pod leave the queue."""
    if cache.state_of(placed) is PodState.ASSUMED:
        cache.finish_binding(placed, now)
    queue.done(placed)


def binding_failed(info: QueuedPodInfo, placed: Pod, *, cache: SchedulerCache, queue: SchedulingQueue, now: float) -> bool:
    """The bind call failed: undo the assumption (unless the watch already settled the pod) and back
    off. Returns whether the pod was requeued (False: deleted or bound meanwhile)."""
    if cache.is_assumed(placed):
        cache.forget(placed)
    return queue.add_backoff(info, now)
