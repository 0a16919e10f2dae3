"""One scheduling cycle as a value: upstream ``ScheduleOne`` (pkg/scheduler/schedule_one.go).

The one conductor of the cycle: every step (filter, score, PostFilter/preemption, nomination,
Reserve, Permit, the gang waits, PreBind, the choice of binder) is decided here, and two executors
carry out the outcomes: the operator (``kube/loop.py``, ``kube/binding.py``: the API server through
its client, events, metrics) and ``simulate`` (``sim/simulator.py``: its in-memory state stands for
the API server). The queue and the cache are pure core objects, so the cycle moves the pod between
them itself:

- ``Skip``: the pod is being deleted, already bound, or already in the cache (assumed or
  confirmed; upstream ``skipPodSchedule``); it leaves the queue;
- ``Bind``: the algorithm chose a node and the pod is assumed there (``cache.assume``), the
  Reserve plugins reserved and the Permit plugins allowed it; it stays in flight in the queue until
  its binding cycle (``core/scheduling/binding.py``) ends in ``binding_succeeded`` or ``binding_failed``. Its
  ``BindingPlan`` says how it is bound. The PreBind plugins' pre-flights (``run_pre_bind_pre_flights``)
  ran: when one has work, ``nominated_node`` is the node, written into the pod's
  ``status.nominatedNodeName`` at the start of the binding cycle (upstream's
  NominatedNodeNameForExpectation; the bind clears it: the API server's
  ClearingNominatedNodeNameAfterBinding); a pre-flight error is an ``Error`` (the attempt undone);
- ``Wait``: as Bind, but a Permit plugin answered WAIT: the pod stays assumed and in flight, held
  in ``WaitingPods`` (upstream ``WaitOnPermit``), nominated to its node meanwhile (``nominated_node``).
  ``settle_waiting`` later turns it into an ``Allowed`` (bind it now, with its plan) or a
  ``Rejected`` (every Reserve plugin's ``unreserve`` ran, the assumption is forgotten, the pod
  waits in the unschedulable pool); a rejected gang rests there together: the move its released room causes
  (an AssignedPodDelete, ``Settled.keep``) leaves its members alone;
- ``Unschedulable``: every node was rejected; the pod waits in the unschedulable pool (or in
  backoff, when a cluster event arrived during the attempt) with the rejecting plugins. When
  preemption (the PostFilter stage) found room, the outcome carries the nominated node and the
  victims to evict, and the queue's nominator holds the pod there at once, so lower-priority
  pods do not take the room while the victims go; lower-priority pods nominated to that node
  lose their nomination (upstream ``prepareCandidate``);
- ``Error``: the algorithm or the assumption failed; the pod backs off;
- ``Group``: a Workload-API gang's pod-group cycle (``schedule_pod_group``, upstream
  ``scheduleOnePodGroup``): the popped member and the gang's other pending members are decided
  together, each member's own outcome one of the above; a gang that cannot reach minCount keeps no
  reservation past the cycle, and its pod group PostFilter (DefaultPreemption's pod-group preemption)
  may nominate its members and name victims (``Group.victims``), which the executor evicts once, for the
  PodGroup.

Gang PostFilters (``gangs.GangPostFilter``, Coscheduling's) run in ``conclude`` after preemption
found nothing: they may reject the gang's waiting members at once (the executor's next
``settle_waiting`` releases them) and hold the gang in the queue's backoff.

``nominated_node`` on Unschedulable and Error is upstream's NominatingInfo for the pod's
``status.nominatedNodeName``: None leaves it, "" clears it, a name sets it. As upstream, a failure
without a PostFilter verdict (no PostFilter plugin, or an error) clears the nomination.

``schedule_one`` is three steps, written once: ``prepare`` (skip, or bring the snapshot up to date),
``decide`` (the algorithm alone: it reads only the snapshot and the scheduler) and ``conclude``
(assume, Reserve and Permit, or put the pod back in the queue). ``begin_cycle`` takes the first and
hands back a ``Decision`` whose ``run`` is the second and ``finish`` the third, so that the operator
can run the algorithm in a worker thread (a profile with HTTP extenders, whose calls block) while
watch events change the cache and the queue, and still take the same steps as ``simulate``.

A Reserve or Permit plugin that rejects makes the attempt ``Unschedulable`` (error: ``Error``)
after every ``unreserve`` ran and the assumption was forgotten (upstream ``schedulingCycle``).

The binding cycle (upstream ``bindingCycle``) follows the ``BindingPlan``: the PreBind plugins
(``run_pre_bind_plugins``), then the binder extenders interested in the pod, else the Bind plugins
until one does not answer SKIP (``run_bind_plugins``; DefaultBinder, last, POSTs pods/binding). The
plugins are coroutines that talk to the API server through the ``ApiClient`` the executor lends;
nothing here awaits anything else. ``core/scheduling/binding.py`` sequences those steps, once for both
executors; a failure anywhere is ``binding_failed``: unreserve, forget, back off (upstream
``handleBindingCycleError``; PreBind and Bind failures never make a pod unschedulable, as upstream says).

``next_wait`` says how long the loop may sleep before it pops again (a waiting pod's deadline
counts). Time (``now``, any monotonic origin) and randomness (``rng``, for the tie-break) are
arguments: the executor's ``CycleContext`` carries them, with the scheduler, cache, queue and waiting
pods a cycle works with.
"""

from __future__ import annotations

import dataclasses
import random
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..config.extenders import Extender
from ..config.profile import Profile
from ..framework import instrumentation as ins
from ..framework.basics import SKIP, SUCCESS, Code, CycleState, QueuedPodInfo, Status
from ..framework.interface import ApiClient, BindPlugin, Candidate, PermitHandle, PostFilterResult, PreBindPlugin
from ..framework.snapshot import ClusterObjects, Snapshot
from ..framework.waiting import WaitingPod, WaitingPods, timeout_message
from ..model.objects import Pod, PodGroup
from ..state.cache import PodState, SchedulerCache
from ..state.queueing import Nominator, SchedulingQueue, pod_group_order
from ..toolkit import gangs
from ..toolkit.pod_group_preemption import Assignment, GroupTrial, PodGroupPostFilterPlugin, PodGroupPreemption
from .algorithm import GenericScheduler, ScheduleResult, Turn

__all__ = [
    "Allowed",
    "Bind",
    "BindingPlan",
    "CycleContext",
    "Decision",
    "Error",
    "Group",
    "Outcome",
    "Parked",
    "Rejected",
    "Settled",
    "Single",
    "Skip",
    "Unschedulable",
    "Wait",
    "begin_cycle",
    "binding_failed",
    "binding_plan",
    "binding_succeeded",
    "conclude",
    "decide",
    "next_wait",
    "pod_group_of",
    "prepare",
    "run_bind_plugins",
    "run_pre_bind_plugins",
    "run_pre_bind_pre_flights",
    "schedule_one",
    "schedule_pod_group",
    "settle_waiting",
]


@dataclass(frozen=True, slots=True)
class BindingPlan:
    """How an assumed pod that passed Permit is bound (upstream ``bindingCycle`` after WaitOnPermit).

    In order: every PreBind plugin (``run_pre_bind_plugins``; the first failure ends the binding
    cycle); then, when `extenders` is not empty, the binder extenders interested in the pod (upstream
    ``extendersBinding``, ``core.config.extenders.bind_with_extenders``: the first that answers binds, an
    ignorable one's failure passes the pod on); otherwise, or when each of them passed it on, the Bind
    plugins in order until one does not answer SKIP (``run_bind_plugins``; DefaultBinder is last).
    """

    pre_binders: tuple[PreBindPlugin, ...]
    #: binder extenders interested in the pod, in the scheduler's order (ignorable ones last)
    extenders: tuple[Extender, ...]
    binders: tuple[BindPlugin, ...]


#: each scheduler's plugins of the binding cycle, found once: a scheduler's profile never changes
#: (a policy edit makes a new scheduler), and asking every plugin per pod cost 7 us of each attempt
_PLANS: Final[weakref.WeakKeyDictionary[GenericScheduler, BindingPlan]] = weakref.WeakKeyDictionary()


def binding_plan(scheduler: GenericScheduler, pod: Pod) -> BindingPlan:
    """The binding cycle of `pod` under `scheduler`'s profile and extenders."""
    plan = _PLANS.get(scheduler)
    if plan is None:
        profile = scheduler.profile
        plan = _PLANS[scheduler] = BindingPlan(tuple(profile.pre_binders), (), tuple(profile.binders))
    if scheduler.extenders:
        binders = tuple(e for e in scheduler.extenders if e.is_binder and e.is_interested(pod))
        if binders:
            return dataclasses.replace(plan, extenders=binders)
    return plan


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to schedule: why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Bind:
    """Bind `pod` (as assumed: its ``node_name`` is `node`) as `plan` says; `state` is its cycle's."""

    pod: Pod
    node: str
    state: CycleState
    plan: BindingPlan
    #: the algorithm's result, for explanations (``core/scheduling/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)
    #: the pod's nomination before binding: `node` when a PreBind plugin has work (its pre-flight said
    #: so; upstream's NominatedNodeNameForExpectation), written before the binding cycle when the pod
    #: does not carry it already; None leaves it
    nominated_node: str | None = None


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
    #: the algorithm's result, for explanations (``core/scheduling/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Error:
    """The attempt failed for another reason; `exception` when the algorithm raised (a bug: log it)."""

    message: str
    exception: Exception | None = None
    #: the pod's nomination, as on Unschedulable ("" clears it, None leaves it)
    nominated_node: str | None = None
    #: the algorithm's result when it returned one, for explanations (``core/scheduling/attempts.py``)
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Wait:
    """`pod` is assumed on `node` and waits at Permit for `plugins` until ``settle_waiting`` settles it."""

    pod: Pod
    node: str
    plugins: tuple[str, ...]
    #: the algorithm's result, for explanations
    result: ScheduleResult | None = field(default=None, compare=False, repr=False)
    #: `node`: a pod that waits at Permit is nominated there meanwhile (upstream's
    #: NominatedNodeNameForExpectation), written when the pod does not carry it already
    nominated_node: str | None = None


#: the outcome of one pod's attempt
Single = Skip | Bind | Wait | Unschedulable | Error


@dataclass(frozen=True, slots=True)
class Group:
    """A pod-group cycle (upstream ``scheduleOnePodGroup``): the gang's pending members were tried
    together; each member's own outcome (carried out as if it had been popped alone), and the gang's
    verdict: `rejection` is "" when it was placed, else what its members and its PodGroup read."""

    key: str
    members: tuple[tuple[QueuedPodInfo, Single], ...]
    rejection: str = ""
    #: the pod group PostFilter's verdict (DefaultPreemption's pod-group preemption) when the gang was not
    #: placed; None when none ran
    preemption: PodGroupPreemption | None = None
    #: the gang's PodGroup: the preemptor its victims' Preempted events name
    pod_group: PodGroup | None = None

    @property
    def victims(self) -> tuple[Pod, ...]:
        """The pods to evict for the gang (most important victim first): preemption found it room."""
        p = self.preemption
        return p.victims if p is not None and p.status.is_success else ()


Outcome = Single | Group


@dataclass(slots=True)
class Parked:
    """What a waiting pod needs to be finished: its queue entry, cycle state, profile, queue and binding plan."""

    info: QueuedPodInfo
    state: CycleState
    profile: Profile
    #: where it goes back when rejected
    queue: SchedulingQueue
    plan: BindingPlan
    #: its Reserve plugins' ``unreserve`` already ran (a timeout runs it before the rejection)
    unreserved: bool = False
    #: the node it was nominated to while it waits (``Wait.nominated_node``)
    nominated: str = ""


@dataclass(frozen=True, slots=True)
class CycleContext:
    """What a scheduling cycle works with besides the pod and the snapshot, made by the executor once per cycle
    (upstream hangs them off its ``Scheduler`` and the profile's ``framework.Framework``): the profile's
    algorithm, the cache the pod is assumed in, the queue it came from and goes back to, the pods waiting at
    Permit, the randomness that breaks ties and the clock's reading (any monotonic origin)."""

    scheduler: GenericScheduler
    cache: SchedulerCache
    queue: SchedulingQueue
    waiting: WaitingPods[Parked]
    rng: random.Random
    now: float


@dataclass(frozen=True, slots=True)
class Allowed:
    """Every waiting plugin allowed the pod: bind it as `plan` says (it is still assumed and in flight)."""

    scheduler_name: str
    info: QueuedPodInfo
    pod: Pod
    node: str
    state: CycleState
    plan: BindingPlan
    #: the node it was nominated to while it waited ("" when not): cleared should its binding fail
    nominated: str = ""


@dataclass(frozen=True, slots=True)
class Rejected:
    """The wait was rejected or timed out: the pod is forgotten and back in its queue (unless deleted meanwhile)."""

    scheduler_name: str
    info: QueuedPodInfo
    pod: Pod
    node: str
    status: Status
    #: PodGroup keys the pod belongs to (``core/toolkit/gangs.py``), for their status
    gangs: tuple[str, ...] = ()
    #: "" when the pod's nomination is to be cleared (it carried one, or was nominated while it waited:
    #: upstream's failure handler clears it), None when it has none
    nominated_node: str | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """What ``settle_waiting`` decided; the executor broadcasts AssignedPodDelete for the released room."""

    allowed: tuple[Allowed, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    #: uids of the pods the move must leave in the unschedulable pool: the rejected gangs' members
    keep: frozenset[str] = field(default_factory=frozenset)


class CacheHandle:
    """The ``PermitHandle`` the runtime lends Reserve and Permit plugins: the cache and the waiting pods."""

    __slots__ = ("_cache", "_waiting")

    def __init__(self, cache: SchedulerCache, waiting: WaitingPods[Parked]) -> None:
        self._cache, self._waiting = cache, waiting

    @property
    def objects(self) -> ClusterObjects:
        return self._cache.objects

    @property
    def cache(self) -> SchedulerCache:
        return self._cache

    def iterate_waiting_pods(self) -> Iterable[WaitingPod[Any]]:
        return iter(self._waiting)

    def get_waiting_pod(self, uid: str) -> WaitingPod[Any] | None:
        return self._waiting.get(uid)

    def allow(self, uid: str, plugin: str) -> None:
        self._waiting.allow(uid, plugin)

    def reject(self, uid: str, plugin: str, message: str) -> None:
        self._waiting.reject(uid, plugin, message)

    def is_placed(self, uid: str) -> bool:
        return self._cache.get_pod(uid) is not None


class _Submitting(CacheHandle):
    """The pod-group cycle's handle for Permit: a member of the cycle holds a node only once it is submitted
    (upstream ``submitPodGroupAlgorithmResult`` assumes and permits the members one after another, so the
    first of a gang wait at GangScheduling's Permit until the member that completes minCount allows them)."""

    __slots__ = ("unsubmitted",)

    def __init__(self, cache: SchedulerCache, waiting: WaitingPods[Parked], unsubmitted: set[str]) -> None:
        super().__init__(cache, waiting)
        self.unsubmitted = unsubmitted

    def is_placed(self, uid: str) -> bool:
        return uid not in self.unsubmitted and super().is_placed(uid)


def schedule_one(
    info: QueuedPodInfo, snapshot: Snapshot, ctx: CycleContext, *, explain: bool = False, batching: bool = True
) -> Outcome:
    """Decide for the popped pod `info` with `ctx`'s scheduler (its profile); `snapshot` is brought up to date
    first. `explain`: see ``decide``. Without `batching` the pod is decided on its own (a one-off evaluation):
    no hint from, and no ranking kept for, the next pods (``core/toolkit/batching.py``). The executors that
    run the algorithm elsewhere (the operator, in a worker thread for extenders) take the same steps
    through ``begin_cycle``."""
    step = begin_cycle(info, snapshot, ctx, explain=explain, batching=batching)
    if not isinstance(step, Decision):
        return step
    return step.finish(step.run(), ctx.now)


@dataclass(frozen=True, slots=True)
class Decision:
    """A scheduling cycle between its preparation and its conclusion (``begin_cycle``): ``run`` is the
    algorithm, which reads only the snapshot, the scheduler, the randomness and the turn (so an executor may
    carry it to a worker thread); ``finish`` carries its result into the cache and the queue, on the caller's
    thread, with the clock read again."""

    info: QueuedPodInfo
    snapshot: Snapshot
    ctx: CycleContext
    turn: Turn
    explain: bool
    state: CycleState | None

    def run(self) -> ScheduleResult | Error:
        return decide(self.info, self.snapshot, self.ctx, turn=self.turn, explain=self.explain, state=self.state)

    def finish(self, decided: ScheduleResult | Error, now: float) -> Single:
        ctx = self.ctx if now == self.ctx.now else dataclasses.replace(self.ctx, now=now)
        return conclude(self.info, decided, ctx)


def begin_cycle(
    info: QueuedPodInfo,
    snapshot: Snapshot,
    ctx: CycleContext,
    *,
    explain: bool = False,
    batching: bool = True,
    detached: bool = False,
    state: CycleState | None = None,
) -> Outcome | Decision:
    """``schedule_one``'s steps up to the algorithm: the pod skipped (it leaves the queue), a pod group decided
    whole (on the caller's thread: each member sees the others' room), or the ``Decision`` to run. `detached`:
    the algorithm will run while watch events change the cache and the queue (a worker thread), so the
    snapshot gets its own copy of the cluster objects and the turn a copy of the nominated pods. `state`: the
    cycle state carrying the edge's timings (see ``decide``)."""
    queue = ctx.queue
    skip = prepare(info, snapshot, cache=ctx.cache, queue=queue, private_objects=detached)
    if skip is not None:
        return skip
    cycle = queue.scheduling_cycle if batching else None
    group = pod_group_of(info, ctx.scheduler, ctx.cache)
    if group is not None:
        return schedule_pod_group(info, group, snapshot, ctx, explain=explain, cycle=cycle)
    nominator = queue.nominator.copy() if detached else queue.nominator
    return Decision(info, snapshot, ctx, Turn(nominator, cycle, ctx.now), explain, state)


def prepare(
    info: QueuedPodInfo,
    snapshot: Snapshot,
    *,
    cache: SchedulerCache,
    queue: SchedulingQueue,
    private_objects: bool = False,
) -> Skip | None:
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
    info: QueuedPodInfo,
    snapshot: Snapshot,
    ctx: CycleContext,
    *,
    turn: Turn | None = None,
    explain: bool = False,
    state: CycleState | None = None,
    post_filter: bool = True,
) -> ScheduleResult | Error:
    """The algorithm's result, or an ``Error`` when it raised (a bug: the plugin runtime turns plugin
    errors into statuses, this is the last resort). Of `ctx` it reads only the scheduler and the
    randomness, so it may run in a worker thread; there, `turn` must carry a copy of the queue's nominator
    (``Nominator.copy``), which watch events change. `turn`: what the queue says of the attempt
    (``algorithm.Turn``: the nominated pods, the scheduling cycle opportunistic batching needs, the clock;
    None: no nominated pods, the pod decided on its own). With `explain` a single feasible node is scored
    too, so that its scores can be read (``simulate --explain``, the differential harness); the chosen node
    is the same, and `state` is ignored. `state`: a fresh cycle state carrying the edge's timings
    (``core/framework/instrumentation.py``: its recorder and whether plugin calls are sampled), kept for Reserve,
    Permit, PreBind and Bind. Without `post_filter` no PostFilter runs on a failure (a member of a
    pod-group cycle: the pod group's own verdict follows)."""
    try:
        return ctx.scheduler.schedule(
            info.pod,
            snapshot,
            rng=ctx.rng,
            explain=explain,
            state=None if explain else state,
            post_filter=post_filter,
            turn=turn,
        )
    except Exception as exc:
        return Error(f"internal error: {exc!r}", exc)


def conclude(info: QueuedPodInfo, decided: ScheduleResult | Error, ctx: CycleContext) -> Single:
    """Carry a decision into `ctx`'s cache and queue: assume the pod on its node and run the
    profile's Reserve and Permit plugins, or put it back (nominated to the node preemption made room
    on, when it did)."""
    cache, queue, now = ctx.cache, ctx.queue, ctx.now
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
        placed = cache.assume(pod, decided.node)
        state = decided.state if decided.state is not None else CycleState()
        return _reserve_and_permit(info, placed, state, ctx, decided)
    if decided.error is not None:
        queue.add_backoff(info, now)
        return Error(decided.error, None, _clear(queue, pod), decided)
    plugins = frozenset(decided.diagnosis.unschedulable_plugins)
    verdict = decided.post_filter
    nominated = verdict.nominated_node if verdict is not None else ""
    if not nominated and (verdict is None or verdict.status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
        _gang_post_filter(pod, decided, ctx.scheduler, CacheHandle(cache, ctx.waiting), queue=queue, now=now)
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
    return Unschedulable(
        decided.message, plugins, nominated, verdict.victims, lower, post_filtered=True, result=decided
    )


def _gang_post_filter(
    pod: Pod,
    decided: ScheduleResult,
    scheduler: GenericScheduler,
    handle: CacheHandle,
    *,
    queue: SchedulingQueue,
    now: float,
) -> None:
    """The gang PostFilters (``gangs.GangPostFilter``, after preemption, as scheduler-plugins runs
    Coscheduling's): a gang out of reach has its waiting members rejected at once (the executor's
    next ``settle_waiting`` releases them), the pod's FitError gains the plugin's text, and the
    members are held back for the PodGroup's backoff."""
    for plugin in _gang_plugins(scheduler)[1]:
        try:
            rejection = plugin.reject_gang(pod, handle)
        except Exception:  # a plugin bug must not take the scheduler down: the gang stands
            continue
        if rejection is None:
            continue
        diagnosis = decided.diagnosis
        diagnosis.post_filter_msg = ", ".join(m for m in (diagnosis.post_filter_msg, rejection.status.message) if m)
        if rejection.backoff_seconds > 0:
            queue.hold(rejection.members, now + rejection.backoff_seconds)


def _reserve_and_permit(
    info: QueuedPodInfo, placed: Pod, state: CycleState, ctx: CycleContext, decided: ScheduleResult
) -> Bind | Wait | Unschedulable | Error:
    """Upstream ``RunReservePluginsReserve`` then ``RunPermitPlugins`` for the assumed pod `placed`:
    the first rejection or error undoes the attempt (requeued in `ctx`'s queue); WAITs are collected and
    the pod waits when no plugin rejected it."""
    handle = CacheHandle(ctx.cache, ctx.waiting)
    status = _run_reserve(ctx.scheduler.profile, state, placed, handle)
    if not status.is_success:
        return _undo(info, placed, state, status, "Reserve", ctx=ctx, handle=handle)
    return _run_permit(info, placed, state, ctx, decided, handle=handle)


def _run_reserve(profile: Profile, state: CycleState, placed: Pod, handle: PermitHandle) -> Status:
    """Upstream ``RunReservePluginsReserve``: SUCCESS, or the first failure (the caller undoes the attempt)."""
    point = ins.point_started(state) if profile.reservers else None
    for reserver in profile.reservers:
        began = ins.plugin_started(state)
        try:
            status = _stamped(reserver.reserve(state, placed, placed.node_name, handle), reserver.name)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            status = _raised(exc, reserver.name)
        ins.plugin_done(state, began, ins.RESERVE, reserver.name, status.code)
        if not status.is_success:
            ins.point_done(state, point, ins.RESERVE, status.code)
            return status
    ins.point_done(state, point, ins.RESERVE, Code.SUCCESS)
    return SUCCESS


def _run_permit(
    info: QueuedPodInfo,
    placed: Pod,
    state: CycleState,
    ctx: CycleContext,
    decided: ScheduleResult,
    *,
    handle: CacheHandle,
) -> Bind | Wait | Unschedulable | Error:
    """Upstream ``RunPermitPlugins`` for the reserved pod `placed` (`handle` is what the Permit plugins
    get): a rejection or error undoes the attempt; WAITs are collected and the pod waits when no plugin
    rejected it."""
    scheduler, queue, now = ctx.scheduler, ctx.queue, ctx.now
    profile = scheduler.profile
    node = placed.node_name
    timeouts: dict[str, float] = {}
    point = ins.point_started(state) if profile.permitters else None
    for permitter in profile.permitters:
        began = ins.plugin_started(state)
        try:
            result = permitter.permit(state, placed, node, handle)
            status = _stamped(result.status, permitter.name)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            status = _raised(exc, permitter.name)
        ins.plugin_done(state, began, ins.PERMIT, permitter.name, status.code)
        if status.code is Code.WAIT:
            timeouts[permitter.name] = result.timeout
        elif not status.is_success:
            ins.point_done(state, point, ins.PERMIT, status.code)
            return _undo(info, placed, state, status, "Permit", ctx=ctx, handle=handle)
    ins.point_done(state, point, ins.PERMIT, Code.WAIT if timeouts else Code.SUCCESS)
    plan = binding_plan(scheduler, placed)
    # upstream bindingCycle, before WaitOnPermit: the pre-flights, then the nomination for expectation
    flight = run_pre_bind_pre_flights(plan, state, placed, node)
    if flight.code is Code.ERROR:
        _unreserve(profile, state, placed, node, handle)
        if ctx.cache.is_assumed(placed):
            ctx.cache.forget(placed)
        queue.add_backoff(info, now)
        return Error(flight.message, nominated_node=_clear(queue, info.pod))
    if not timeouts:
        return Bind(placed, node, state, plan, decided, node if flight.is_success else None)
    ctx.waiting.add(placed, node, Parked(info, state, profile, queue, plan, nominated=node), timeouts, now=now)
    return Wait(placed, node, tuple(timeouts), decided, node)


def _raised(exc: Exception, plugin: str) -> Status:
    """A plugin that raised: an ERROR naming the exception (the runtime's promise, so no plugin takes the loop down)."""
    return Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",), plugin)


def _unreserve(profile: Profile, state: CycleState, pod: Pod, node: str, handle: PermitHandle) -> None:
    """Upstream ``RunReservePluginsUnreserve``: every Reserve plugin, in reverse order; exceptions are swallowed."""
    for plugin in reversed(profile.reservers):
        try:
            plugin.unreserve(state, pod, node, handle)
        except Exception:
            pass


def _undo(
    info: QueuedPodInfo,
    placed: Pod,
    state: CycleState,
    status: Status,
    point: str,
    *,
    ctx: CycleContext,
    handle: PermitHandle,
) -> Unschedulable | Error:
    """A Reserve or Permit plugin said no: unreserve, forget, and requeue (unschedulable, or backoff on an error)."""
    cache, queue, now = ctx.cache, ctx.queue, ctx.now
    _unreserve(ctx.scheduler.profile, state, placed, placed.node_name, handle)
    if cache.is_assumed(placed):
        cache.forget(placed)
    if status.is_rejected:
        plugins = frozenset({status.plugin})
        queue.add_unschedulable(info, now, plugins=plugins)
        return Unschedulable(status.message, plugins)
    queue.add_backoff(info, now)
    return Error(_running(point, status))


def _running(point: str, status: Status) -> str:
    """Upstream's wrapping of a plugin's failure: ``running <point> plugin "<name>": <message>``."""
    return f"running {point} plugin {status.plugin!r}: {status.message}"


def settle_waiting(waiting: WaitingPods[Parked], *, cache: SchedulerCache, now: float) -> Settled:
    """The waiting pods whose wait is over: allowed ones to bind; rejected and timed-out ones
    unreserved, forgotten and requeued as unschedulable (a timed-out pod is unreserved before it is
    rejected, so its gang's plugin rejects every waiting member with the gang's message first)."""
    handle = CacheHandle(cache, waiting)
    for w, plugin, seconds in waiting.expired(now):
        if w.waiting:
            w.payload.unreserved = True
            _unreserve(w.payload.profile, w.payload.state, w.pod, w.node_name, handle)
            waiting.reject(w.pod.uid, plugin, timeout_message(seconds, plugin))
    allowed: list[Allowed] = []
    rejected: list[Rejected] = []
    keep: set[str] = set()
    while settled := waiting.take_settled():  # an unreserve may reject more waiting pods
        for w in settled:
            parked = w.payload
            assert w.outcome is not None
            name = parked.profile.scheduler_name
            if w.outcome.is_success:
                allowed.append(
                    Allowed(name, parked.info, w.pod, w.node_name, parked.state, parked.plan, parked.nominated)
                )
                continue
            if not parked.unreserved:
                _unreserve(parked.profile, parked.state, w.pod, w.node_name, handle)
            if cache.is_assumed(w.pod):
                cache.forget(w.pod)
            outcome = w.outcome
            if outcome.code is Code.ERROR:  # preempted (upstream's WaitOnPermit error): back off, try again
                parked.queue.add_backoff(parked.info, now)
                outcome = Status(Code.ERROR, (f"waiting on permit for pod: {outcome.message}",), outcome.plugin)
            else:
                parked.queue.add_unschedulable(parked.info, now, plugins=frozenset({outcome.plugin}))
            keys = gangs.member_keys(w.pod)
            for key in keys:
                keep |= cache.objects.gang_members.get(key, frozenset())
            keep.add(w.pod.uid)
            clear = "" if parked.nominated or w.pod.nominated_node_name else None
            rejected.append(Rejected(name, parked.info, w.pod, w.node_name, outcome, keys, clear))
    return Settled(tuple(allowed), tuple(rejected), frozenset(keep))


def _clear(queue: SchedulingQueue, pod: Pod) -> str:
    """Clear the pod's nomination in the queue (upstream's clearNominatedNode): "" for the outcome."""
    queue.delete_nominated_pod(pod)
    return ""


def next_wait(queue: SchedulingQueue, now: float, *, longest: float, waiting: WaitingPods[Parked]) -> float:
    """Seconds the loop may sleep before it pops: 0 when a pod is ready, else until the earliest
    backoff expiry, unschedulable-leftover deadline or waiting pod's deadline, at most `longest`
    (a handler's wake-up, or a pod that nothing but an event will make ready, is waited for that long)."""
    ready_at = queue.next_ready_at(now)
    deadline = waiting.next_deadline()
    if deadline is not None:
        ready_at = deadline if ready_at is None else min(ready_at, deadline)
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


# --------------------------------------------------------------------------- the pod-group cycle


#: each scheduler's gang plugins: (its PodGroupCycle ones, its GangPostFilter ones), found once per scheduler
_GANGS: Final[
    weakref.WeakKeyDictionary[
        GenericScheduler, tuple[tuple[gangs.PodGroupCycle, ...], tuple[gangs.GangPostFilter, ...]]
    ]
] = weakref.WeakKeyDictionary()


def _gang_plugins(
    scheduler: GenericScheduler,
) -> tuple[tuple[gangs.PodGroupCycle, ...], tuple[gangs.GangPostFilter, ...]]:
    found = _GANGS.get(scheduler)
    if found is None:
        plugins = scheduler.profile.plugins
        found = _GANGS[scheduler] = (
            tuple(p for p in plugins if isinstance(p, gangs.PodGroupCycle)),
            tuple(p for p in plugins if isinstance(p, gangs.GangPostFilter)),
        )
    return found


def pod_group_of(info: QueuedPodInfo, scheduler: GenericScheduler, cache: SchedulerCache) -> PodGroup | None:
    """The gang the popped pod is tried with in one pod-group cycle (a ``gangs.PodGroupCycle``
    plugin of the profile names it: GangScheduling for Workload-API gangs), or None: alone."""
    for plugin in _gang_plugins(scheduler)[0]:
        group = plugin.pod_group(info.pod, cache.objects)
        if group is not None:
            return group
    return None


@dataclass(slots=True)
class _Tried:
    """One member in a pod-group cycle: the algorithm's answer, and where it is assumed and reserved."""

    info: QueuedPodInfo
    decided: ScheduleResult | Error
    placed: Pod | None = None
    state: CycleState = field(default_factory=CycleState)
    #: its outcome when it failed on its own (a Reserve plugin said no)
    failed: Unschedulable | Error | None = None


def schedule_pod_group(
    info: QueuedPodInfo,
    group: PodGroup,
    snapshot: Snapshot,
    ctx: CycleContext,
    *,
    explain: bool = False,
    cycle: int | None = None,
) -> Group:
    """Upstream ``podGroupCycle`` (schedule_one_podgroup.go, the default algorithm without placements):
    the gang's pending members leave the queue with `info` and are tried in upstream's member order
    (``queueing.pod_group_order``); each in turn is decided, assumed and
    reserved (so the next sees its room), and PlacementFeasible (``gangs.placement_feasible``) is
    asked after each: the cycle stops as soon as minCount is out of reach. A feasible gang (one that
    placed at least one member) has its members go on to Permit in that order, each counting as placed
    there only once it got there (upstream's ``submitPodGroupAlgorithmResult``): the first wait at
    GangScheduling's Permit until the one that completes minCount allows them and is bound first;
    otherwise every reservation is undone before the cycle ends (nothing is held at Permit), the pod
    group PostFilters run (DefaultPreemption's pod-group preemption, ``core/toolkit/pod_group_preemption.py``)
    and every member is unschedulable, those that fit reading the gang's message, those that did not
    their own. When preemption found room, the members it placed are nominated to their nodes and the
    outcome carries the victims to evict (``Group.victims``). Runs on the loop: `snapshot` is brought up
    to date before each member."""
    scheduler, cache, queue, waiting, now = ctx.scheduler, ctx.cache, ctx.queue, ctx.waiting, ctx.now
    key = group.key
    handle = CacheHandle(cache, waiting)
    others = [uid for uid in cache.objects.gang_members.get(key, ()) if uid != info.uid]
    outcomes: dict[str, Single] = {}
    popped = sorted([info, *queue.pop_members(others, now)], key=pod_group_order)
    members = []
    for member in popped:
        reason = _skip_reason(member.pod, cache) if member is not info else ""
        if reason:
            queue.done(member.pod)
            outcomes[member.uid] = Skip(reason)
        else:
            members.append(member)
    # the members' nominations before the cycle (an assumption drops a member's from the queue's nominator)
    nominated = {m.uid: m.pod.nominated_node_name or queue.nominated_node_of(m.pod) or "" for m in members}
    scheduled = gangs.placed_members(key, cache.objects, handle.is_placed)
    remaining = len(members)
    verdict = gangs.placement_feasible(group.min_count, scheduled, remaining)
    tried: list[_Tried] = []
    turn = Turn(queue.nominator, cycle, now)  # one cycle for the whole pod group, as upstream counts it
    for member in members if verdict.code is not Code.UNSCHEDULABLE else ():
        cache.update_snapshot(snapshot)
        decided = decide(member, snapshot, ctx, turn=turn, explain=explain, post_filter=False)
        t = _Tried(member, decided)
        tried.append(t)
        if not isinstance(t.decided, Error) and t.decided.node is not None:
            _assume_and_reserve(t, ctx, handle)
        remaining -= 1
        scheduled += t.placed is not None
        verdict = gangs.placement_feasible(group.min_count, scheduled, remaining)
        if verdict.code is Code.UNSCHEDULABLE:
            break
    # upstream: the framework wants at least one member placed in the cycle for a gang to succeed
    feasible = verdict.is_success and any(t.placed is not None for t in tried)
    if not feasible:
        for t in reversed(tried):  # upstream revertFns: last in, first out
            if t.placed is not None:
                _unreserve(scheduler.profile, t.state, t.placed, t.placed.node_name, handle)
                cache.forget(t.placed)
    # upstream's texts: the gang's status is PlacementFeasible's (after "pod group is unschedulable" when no
    # member was tried, or alone when the quorum stood but no member was placed); the members left untried
    # read it as it is, before the pod group's PostFilter adds its own reason, which the PodGroup's condition
    # and the members that fit (after the error's text, unless they wait for victims) read
    reasons = _gang_reasons(verdict, feasible=feasible, tried=bool(tried))
    untried = ", ".join(reasons)
    errored = any(isinstance(t.decided, Error) or t.decided.error is not None for t in tried)
    preemption: PodGroupPreemption | None = None
    if not feasible and not errored:
        cache.update_snapshot(snapshot)
        trial = _GroupTrial(group, members, ctx)
        preemption = _run_pod_group_post_filters(
            group, trial, snapshot, scheduler, rng=ctx.rng, nominator=queue.nominator, nominated=nominated
        )
    # upstream applyPodGroupPostFilterResult: room found, the members wait for it with their nominations; an
    # error is the gang's (and every member's) status; otherwise the PostFilter's reason is appended
    waiting_on_preemption = failed = False
    message = ", ".join(reasons)
    nominations: Mapping[str, str] = {}
    if preemption is not None:
        post = preemption.status
        waiting_on_preemption, failed = post.is_success, post.code is Code.ERROR
        message = post.message if failed else ", ".join([*reasons, post.message])
        nominations = preemption.nominations if waiting_on_preemption else {}
    plugin = _gang_plugins(scheduler)[0][0].name
    done = {t.info.uid: t for t in tried}
    # upstream assumes the members in the cache one by one when it submits the cycle's result, each then
    # going to Permit: a member counts as placed there only once it is submitted (the first ones wait)
    submitting = _Submitting(cache, waiting, {t.info.uid for t in tried if t.placed is not None})
    for member in members:
        m = done.get(member.uid)
        result = m.decided if m is not None and isinstance(m.decided, ScheduleResult) else None
        if result is not None and preemption is not None:
            result.post_filter = _as_post_filter_result(preemption, nominations.get(member.uid))
        if failed and not (m is not None and isinstance(m.failed, Error)):
            # upstream: the PostFilter's error is every member's (unless a member failed with its own error)
            queue.add_backoff(member, now)
            outcomes[member.uid] = Error(message, None, _clear(queue, member.pod), result)
        elif m is not None and m.failed is not None:
            outcomes[member.uid] = m.failed
        elif m is not None and (m.placed is None or feasible):
            if m.placed is None:
                outcomes[member.uid] = _member_failed(
                    member, m.decided, queue=queue, now=now, nominate=nominations.get(member.uid)
                )
            else:
                assert isinstance(m.decided, ScheduleResult)
                submitting.unsubmitted.discard(member.uid)
                outcomes[member.uid] = _run_permit(member, m.placed, m.state, ctx, m.decided, handle=submitting)
        elif m is not None:  # it fit but the gang did not
            queued = queue.add_unschedulable(member, now, plugins=frozenset({plugin}))
            if waiting_on_preemption:  # upstream hands it the gang's status as it is, and its nomination
                nominate = _nominate(queue, member.pod, nominations.get(member.uid), queued=queued)
                outcomes[member.uid] = Unschedulable(message, frozenset({plugin}), nominate, result=result)
            else:
                outcomes[member.uid] = Unschedulable(
                    f"{ERR_POD_GROUP_UNSCHEDULABLE}, {message}",
                    frozenset({plugin}),
                    _clear(queue, member.pod),
                    result=result,
                )
        else:  # the cycle stopped before it: upstream's nil nomination (unless preemption gave it one)
            queued = queue.add_unschedulable(member, now, plugins=frozenset({plugin}))
            nominate = _nominate(queue, member.pod, nominations.get(member.uid), queued=queued)
            outcomes[member.uid] = Unschedulable(untried, frozenset({plugin}), nominate)
    return Group(key, tuple((m, outcomes[m.uid]) for m in popped), message, preemption, group)


#: upstream ``errPodGroupUnschedulable``: what a gang's members read before the gang's status
ERR_POD_GROUP_UNSCHEDULABLE: Final = "pod group is unschedulable"


def _gang_reasons(verdict: Status, *, feasible: bool, tried: bool) -> list[str]:
    """The reasons of the gang's status after its cycle (upstream ``podGroupSchedulingDefaultAlgorithm`` and
    ``runRootSchedulingAlgorithm``): none when it was placed; the error's text alone when its quorum stood but
    no member was placed; else PlacementFeasible's, after the error's text when no member was tried."""
    if feasible:
        return []
    if verdict.is_success:
        return [ERR_POD_GROUP_UNSCHEDULABLE]
    return [*([ERR_POD_GROUP_UNSCHEDULABLE] if not tried else []), *verdict.reasons]


def _nominate(queue: SchedulingQueue, pod: Pod, node: str | None, *, queued: bool) -> str | None:
    """A member's nomination from its gang's preemption (None: none, its nomination stays; "": cleared): the
    queue's nominator holds it at once, as for a pod that preempted (``conclude``)."""
    if node is None:
        return None
    if not node:
        return _clear(queue, pod)
    if queued:
        queue.add_nominated_pod(pod, node)
    return node


def _as_post_filter_result(preemption: PodGroupPreemption, node: str | None) -> PostFilterResult:
    """What a member's attempt shows of its gang's preemption (explanations): the verdict, the member's
    nomination, the victims (all the gang's), the one cluster-wide candidate."""
    candidates = (Candidate(node, preemption.victims, preemption.num_pdb_violations),) if node else ()
    return PostFilterResult(preemption.status, node, preemption.victims, candidates)


def _member_failed(
    member: QueuedPodInfo,
    decided: ScheduleResult | Error,
    *,
    queue: SchedulingQueue,
    now: float,
    nominate: str | None = None,
) -> Unschedulable | Error:
    """A member that fit nowhere in a pod-group cycle: its own FitError (no PostFilter ran for it) and
    its nomination left as it is (upstream's nil NominatingInfo) unless its gang's preemption nominated
    it (`nominate`); an error backs off."""
    if isinstance(decided, Error):
        queue.add_backoff(member, now)
        return Error(decided.message, decided.exception, _clear(queue, member.pod))
    if decided.error is not None:
        queue.add_backoff(member, now)
        return Error(decided.error, None, _clear(queue, member.pod), decided)
    plugins = frozenset(decided.diagnosis.unschedulable_plugins)
    queued = queue.add_unschedulable(member, now, plugins=plugins)
    nominated = _nominate(queue, member.pod, nominate, queued=queued)
    return Unschedulable(decided.message, plugins, nominated, result=decided)


def _run_pod_group_post_filters(
    group: PodGroup,
    trial: _GroupTrial,
    snapshot: Snapshot,
    scheduler: GenericScheduler,
    *,
    rng: random.Random,
    nominator: Nominator,
    nominated: dict[str, str],
) -> PodGroupPreemption:
    """Upstream ``RunPodGroupPostFilterPlugins``: the first plugin that succeeds or finds the gang
    unresolvable decides; an error ends it (``error in "X" PodGroupPostFilter plugins: ...``); otherwise
    the rejections add up (none, without such a plugin: an empty reason, which upstream appends all the
    same)."""
    reasons: list[str] = []
    members = [m.pod for m in trial.members]
    handle = scheduler.handle(rng, nominator)
    for plugin in scheduler.profile.post_filters:
        if not isinstance(plugin, PodGroupPostFilterPlugin):
            continue
        try:
            answer = plugin.pod_group_post_filter(group, members, snapshot, trial, handle, nominated=nominated)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            answer = PodGroupPreemption(Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",)))
        status = answer.status.with_plugin(plugin.name)
        if status.is_success or status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return dataclasses.replace(answer, status=status)
        if status.code is Code.UNSCHEDULABLE:
            reasons.extend(status.reasons)
            continue
        text = f'error in "{plugin.name}" PodGroupPostFilter plugins: {status.message}'
        return PodGroupPreemption(Status(Code.ERROR, (text,), plugin.name))
    return PodGroupPreemption(Status(Code.UNSCHEDULABLE, tuple(reasons)))


class _GroupTrial:
    """Upstream's ``PodGroupSchedulingFunc`` for the pod group PostFilter (``GroupAlgorithm``): the gang's
    members tried again in the cycle's order on a snapshot preemption changed, each placed one added to it
    and reserved for the next; everything is taken back before it returns (upstream's revert)."""

    def __init__(self, group: PodGroup, members: list[QueuedPodInfo], ctx: CycleContext) -> None:
        self.group, self.members, self.ctx = group, members, ctx
        self.scheduler, self.cache = ctx.scheduler, ctx.cache
        self.handle = CacheHandle(ctx.cache, ctx.waiting)

    def schedule(self, snapshot: Snapshot) -> GroupTrial:
        group, profile = self.group, self.scheduler.profile
        scheduled = gangs.placed_members(group.key, self.cache.objects, self.handle.is_placed)
        remaining = len(self.members)
        verdict = gangs.placement_feasible(group.min_count, scheduled, remaining)
        if verdict.code is Code.UNSCHEDULABLE:
            return GroupTrial((), Status(Code.UNSCHEDULABLE, (ERR_POD_GROUP_UNSCHEDULABLE, *verdict.reasons)))
        placed: list[Assignment] = []
        try:
            for member in self.members:
                turn = Turn(self.ctx.queue.nominator, None, self.ctx.now)
                decided = decide(member, snapshot, self.ctx, turn=turn, post_filter=False)
                if isinstance(decided, Error) or decided.error is not None:
                    problem = decided.message if isinstance(decided, Error) else decided.error
                    text = f"failed to schedule other pod from a pod group: {problem}"
                    return GroupTrial(tuple(placed), Status(Code.ERROR, (text,)))
                if decided.node is not None:
                    a = Assignment(member.pod.with_node(decided.node), decided.state or CycleState())
                    snapshot.add_pod(a.pod)
                    if _run_reserve(profile, a.state, a.pod, self.handle).is_success:
                        placed.append(a)
                    else:
                        _unreserve(profile, a.state, a.pod, a.node, self.handle)
                        snapshot.remove_pod(a.pod)
                remaining -= 1
                verdict = gangs.placement_feasible(group.min_count, scheduled + len(placed), remaining)
                if verdict.code is Code.UNSCHEDULABLE:
                    return GroupTrial(tuple(placed), Status(Code.UNSCHEDULABLE, verdict.reasons))
            if verdict.code is Code.WAIT:
                return GroupTrial(
                    tuple(placed), Status(Code.UNSCHEDULABLE, (ERR_POD_GROUP_UNSCHEDULABLE, *verdict.reasons))
                )
            if not placed:
                return GroupTrial((), Status(Code.UNSCHEDULABLE, (ERR_POD_GROUP_UNSCHEDULABLE,)))
            return GroupTrial(tuple(placed), SUCCESS)
        finally:
            for a in reversed(placed):
                _unreserve(profile, a.state, a.pod, a.node, self.handle)
                snapshot.remove_pod(a.pod)

    def reserve(self, assignment: Assignment) -> None:
        _run_reserve(self.scheduler.profile, assignment.state, assignment.pod, self.handle)

    def unreserve(self, assignment: Assignment) -> None:
        _unreserve(self.scheduler.profile, assignment.state, assignment.pod, assignment.node, self.handle)


def _assume_and_reserve(t: _Tried, ctx: CycleContext, handle: CacheHandle) -> None:
    """Upstream ``assumeAndReserveWithRevert``: assume the member on its node and run the Reserve
    plugins; a failure undoes it at once (its own outcome, requeued)."""
    assert isinstance(t.decided, ScheduleResult) and t.decided.node is not None
    ctx.queue.delete_nominated_pod(t.info.pod)  # upstream assume: the cache holds it now, not the nominator
    placed = ctx.cache.assume(t.info.pod, t.decided.node)
    t.state = t.decided.state if t.decided.state is not None else CycleState()
    status = _run_reserve(ctx.scheduler.profile, t.state, placed, handle)
    if status.is_success:
        t.placed = placed
        return
    t.failed = _undo(t.info, placed, t.state, status, "Reserve", ctx=ctx, handle=handle)


# --------------------------------------------------------------------------- the binding cycle


def _stamped(status: Status, plugin: str) -> Status:
    """`status` with the plugin's name, but SUCCESS and SKIP themselves (nobody reads whose they were)."""
    return status if status is SUCCESS or status is SKIP else status.with_plugin(plugin)


def run_pre_bind_pre_flights(plan: BindingPlan, state: CycleState, pod: Pod, node: str) -> Status:
    """Upstream ``RunPreBindPreFlights`` (framework/runtime/framework.go): every PreBind plugin's
    pre-flight. SUCCESS when one of them has work for the pod on `node`, SKIP when none has (or there
    are no PreBind plugins), else an ERROR naming the plugin (``running PreBindPreFlight "X": ...``;
    a code other than SUCCESS, SKIP and ERROR is unsupported, as upstream says). The plugins that
    answered SKIP are kept in ``state.skip_pre_bind``: their PreBind is not called."""
    point = ins.point_started(state)
    verdict = SKIP
    skipped: set[str] = set()
    for plugin in plan.pre_binders:
        began = ins.plugin_started(state)
        try:
            status = _stamped(plugin.pre_bind_pre_flight(state, pod, node), plugin.name)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            status = _raised(exc, plugin.name)
        ins.plugin_done(state, began, ins.PRE_BIND_PRE_FLIGHT, plugin.name, status.code)
        if status.is_success:
            verdict = SUCCESS
        elif status.is_skip:
            skipped.add(plugin.name)
        else:
            if status.code is Code.ERROR:
                message = f'running PreBindPreFlight "{plugin.name}": {status.message}'
            else:
                message = (
                    f'PreBindPreFlight {plugin.name} returned "{ins.STATUS_LABELS[status.code]}", which is '
                    "unsupported. It is supposed to return Success, Skip, or Error status"
                )
            ins.point_done(state, point, ins.PRE_BIND_PRE_FLIGHT, Code.ERROR)
            return Status(Code.ERROR, (message,), plugin.name)
    state.skip_pre_bind = frozenset(skipped)
    ins.point_done(state, point, ins.PRE_BIND_PRE_FLIGHT, verdict.code)
    return verdict


async def run_pre_bind_plugins(plan: BindingPlan, state: CycleState, pod: Pod, node: str, client: ApiClient) -> Status:
    """Upstream ``RunPreBindPlugins``: each PreBind plugin in order, awaited with `client`, but those
    whose pre-flight answered SKIP (``run_pre_bind_pre_flights``). SUCCESS when every one answered
    SUCCESS or SKIP (nothing to do for this pod); else the first failure, its plugin named in the
    message (``running PreBind plugin 'X': ...``), a raised exception as an ERROR."""
    point = ins.point_started(state) if plan.pre_binders else None
    for plugin in plan.pre_binders:
        if plugin.name in state.skip_pre_bind:
            continue
        began = ins.plugin_started(state)
        try:
            status = (await plugin.pre_bind(state, pod, node, client)).with_plugin(plugin.name)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            status = _raised(exc, plugin.name)
        ins.plugin_done(state, began, ins.PRE_BIND, plugin.name, status.code)
        if not status.is_success and not status.is_skip:
            ins.point_done(state, point, ins.PRE_BIND, status.code)
            return Status(status.code, (_running("PreBind", status),), plugin.name)
    ins.point_done(state, point, ins.PRE_BIND, Code.SUCCESS)
    return SUCCESS


async def run_bind_plugins(plan: BindingPlan, state: CycleState, pod: Pod, node: str, client: ApiClient) -> Status:
    """Upstream ``RunBindPlugins``: the Bind plugins in order until one does not answer SKIP. SUCCESS
    (naming the plugin that bound the pod) or that plugin's failure (``running Bind plugin 'X': ...``);
    an ERROR when every one skipped (a profile without DefaultBinder)."""
    point = ins.point_started(state)
    for plugin in plan.binders:
        began = ins.plugin_started(state)
        try:
            status = (await plugin.bind(state, pod, node, client)).with_plugin(plugin.name)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            status = _raised(exc, plugin.name)
        ins.plugin_done(state, began, ins.BIND, plugin.name, status.code)
        if status.is_skip:
            continue
        ins.point_done(state, point, ins.BIND, status.code)
        if status.is_success:
            return status
        return Status(status.code, (_running("Bind", status),), plugin.name)
    ins.point_done(state, point, ins.BIND, Code.ERROR)
    return Status(Code.ERROR, ("no Bind plugin bound the pod: every one answered SKIP",))


def binding_succeeded(placed: Pod, *, cache: SchedulerCache, queue: SchedulingQueue, now: float) -> None:
    """The pod is bound: start the assumption's TTL (unless the watch confirmed or removed the pod
    first) and let the pod leave the queue."""
    if cache.state_of(placed) is PodState.ASSUMED:
        cache.finish_binding(placed, now)
    queue.done(placed)


def binding_failed(
    info: QueuedPodInfo,
    placed: Pod,
    *,
    handle: CacheHandle,
    queue: SchedulingQueue,
    now: float,
    profile: Profile,
    state: CycleState,
) -> bool:
    """The binding cycle failed (a PreBind plugin, an extender, a Bind plugin, or the bind called off):
    `profile`'s Reserve plugins unreserve with `handle` (the cache and the waiting pods; upstream
    ``handleBindingCycleError``), the assumption is undone in the handle's cache (unless the watch already
    settled the pod) and the pod backs off. Returns whether the pod was requeued (False: deleted or bound
    meanwhile)."""
    cache = handle.cache
    _unreserve(profile, state, placed, placed.node_name, handle)
    if cache.is_assumed(placed):
        cache.forget(placed)
    return queue.add_backoff(info, now)
