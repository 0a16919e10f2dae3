"""Schedule pending pods one after another against a loaded cluster, as the operator does: its second executor.

The core conducts every attempt (``core.scheduling.cycle``: ``schedule_one``, ``settle_waiting``, the binding
plan; ``core.scheduling.binding``: the binding cycle's steps and its conclusion, for the operator too); this
module carries out the outcomes the way the operator's loop and its watches would, with its in-memory
state standing for the API server (``sim/apiserver.py``) and a virtual clock:

- the pods of PODS.yaml enter a real ``SchedulingQueue`` in file order, each once the queue has
  settled the one before (nothing is ready and nothing waits out a backoff), so each placement counts
  for the next. When nothing is ready but a pod backs off, the clock jumps to ``next_ready_at``;
- ``Bind``: the binding cycle (``core.scheduling.binding.run_binding_cycle``: PreBind plugins, binder extenders,
  Bind plugins) runs against the in-memory API server (``_SimulatedPort``; DefaultBinder's pods/binding
  POST binds the pod there); the binding then reaches the cache and the queues through ``core.scheduling.routing``
  as the watch of assigned pods would bring it;
- ``Unschedulable`` with victims: the nomination is written (the pod's ``nominatedNodeName``), the
  victims are deleted from the simulated cluster and their deletion routed as the watch would (an
  AssignedPodDelete move), so the nominated pod backs off and is tried again; a victim waiting at
  Permit is preempted in memory (not deleted: it backs off and is tried again, as upstream's);
- ``Group`` (a Workload-API gang's pod-group cycle): each member's outcome is carried out as its own;
  when the gang's preemption found room, its victims are evicted once (as above), and every member it
  nominated reports them. A gang turned down leaves its message in ``rejections`` (its PodGroup's
  condition). A gang's pending members enter the queue together, with its first member in the file (a pod
  group is one entity in upstream's queue), so its cycle tries them all;
- ``Wait`` (gangs): the member holds its node until its gang has its minimum placed, then every
  member is bound. Every pod of the pods file counts as a member from the start (they are all
  pending at once). Members still waiting when the file ends are released (their timeout: nothing in
  a simulation would make room later) and read how many of their gang fit; later pods of the file
  see the waiting members' nodes as taken, as they would within the operator's timeout;
- a waiting pod, and a pod whose PreBind plugins have work (``Bind.nominated_node``), is nominated
  to its node before it is bound (``status.nominatedNodeName`` in the in-memory API server, upstream's
  NominatedNodeNameForExpectation); the bind clears it, as the API server does
  (ClearingNominatedNodeNameAfterBinding), and the placement says it (``nominated_before_binding``);
- an attempt or a binding cycle that fails with an error backs off and is tried again, at most
  ``MAX_ERROR_RETRIES`` times in a row (the operator goes on every 10 s; a simulation would repeat
  the same error forever); the placement then reports the error.

A pod's placement is its last outcome: bound (the node), or not (the message), with the node its
preemption nominated and the victims it evicted. Pods that failed may be tried again when a later
event makes room for them, as in the operator. The random tie-break comes from
``random.Random(seed)``: the same inputs and seed give the same placements.

With ``explain=True`` every placement carries an ``Explanation`` (``core/scheduling/explanation.py``):
every node's verdict, the rejecting plugin and reasons, the per-plugin raw and normalised scores,
weights and totals, what preemption considered (``simulate --explain``; the differential harness in
``bench/differential.py`` compares the scores with upstream's through ``evaluate``). Scoring then
runs even when one node is feasible, so its scores can be read; the chosen node is the same either way.

A policy's extenders are called through ``extender_factory`` (``simulate`` passes the HTTP
client, ``kopf_scheduler.edge.extenders.HTTPExtender``) to filter and prioritize; a binder
extender's bind is simulated (the pod is bound in the in-memory state), never sent.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..core.config.extenders import (
    Extender,
    ExtenderBinding,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
    bind_with_extenders,
)
from ..core.config.profile import Profile
from ..core.dra.objects import ResourceClaim
from ..core.dra.tracker import ApiWrite
from ..core.framework.basics import CycleState, QueuedPodInfo, Status
from ..core.framework.nodeinfo import NodeInfo
from ..core.framework.snapshot import Snapshot
from ..core.framework.waiting import WaitingPods
from ..core.model import paths
from ..core.model.objects import WORKLOAD_API, Node, Pod
from ..core.plugins.default_preemption import DefaultPreemption
from ..core.scheduling import routing
from ..core.scheduling.algorithm import GenericScheduler, ScheduleResult
from ..core.scheduling.binding import BindingCycle, Bound, Refusal, conclude_binding, run_binding_cycle
from ..core.scheduling.cycle import (
    Bind,
    BindingPlan,
    CacheHandle,
    CycleContext,
    Error,
    Group,
    Parked,
    Single,
    Skip,
    Unschedulable,
    Wait,
    binding_failed,
    schedule_one,
    settle_waiting,
)
from ..core.scheduling.dra_routing import route_dra_object
from ..core.scheduling.explanation import Explanation, explanation_of, preemption_of
from ..core.state.cache import PodState, SchedulerCache
from ..core.state.queueing import BACKOFF, SchedulingQueue, first_ready
from ..core.toolkit import gangs
from ..core.toolkit.preemption import PREEMPTED
from .apiserver import InMemoryApi, drive
from .dra import devices_of, stamp_claims

__all__ = ["MAX_ERROR_RETRIES", "Capacity", "Lane", "Placement", "Simulation", "SimulationResult", "UnreadablePod"]

#: attempts in a row that end in an error (a plugin's, a failed binding cycle) before the pod is given up on
MAX_ERROR_RETRIES: Final = 3
#: upstream's PodScheduled=False message for a pod with scheduling gates (reason SchedulingGated)
GATED_MESSAGE: Final = "Scheduling is blocked due to non-empty scheduling gates"


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str  # ns/name
    node: str | None
    message: str  # "" when placed; the FitError text or the error otherwise
    explanation: Explanation | None = None  # with Simulation(explain=True)
    #: preemption: the node the pod was nominated to ("" when it preempted nothing)
    nominated_node: str = ""
    #: preemption: the pods evicted for it (ns/name)
    victims: tuple[str, ...] = ()
    #: the pod could not be read (``message`` says why); it was not scheduled
    unreadable: bool = False
    #: DynamicResources: the devices each of the pod's claims got (``claim: driver/pool/device, ...``)
    devices: tuple[str, ...] = ()
    #: the node its ``status.nominatedNodeName`` named before it was bound, while it waited at Permit or a
    #: PreBind plugin had work (upstream's NominatedNodeNameForExpectation; the bind cleared it); "" if none
    nominated_before_binding: str = ""
    #: opportunistic batching placed it on the hint the previous identical pod left (unscored)
    batched: bool = False
    #: the text of every attempt that did not place it, in order (the FailedScheduling events a scheduler
    #: writes; a preemptor's first one, a gang member's the gang's)
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UnreadablePod:
    """A pod document that cannot be read, or that the API server would refuse: reported as not
    placed with the reason (the operator likewise records a FailedScheduling event and goes on)."""

    key: str  # ns/name, or "document N" when the body names nothing readable
    problem: str

    @property
    def message(self) -> str:
        return f"cannot read the pod: {self.problem}"


@dataclass(frozen=True, slots=True)
class Capacity:
    """How many copies of one pod fit (cluster-capacity's question), where they went, what stops the next."""

    pod: str  # ns/name of the template
    replicas: int
    #: node -> copies placed there
    nodes: Mapping[str, int]
    #: the FitError text (or the error) of the first copy that did not fit; "" when ``limit`` ended the count
    stopped_by: str
    #: the most copies tried (0: no limit)
    limit: int = 0


@dataclass(slots=True)
class SimulationResult:
    placements: list[Placement] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def scheduled(self) -> int:
        return sum(1 for p in self.placements if p.node)

    @property
    def unreadable(self) -> int:
        return sum(1 for p in self.placements if p.unreadable)

    @property
    def pods_per_second(self) -> float:
        return len(self.placements) / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class _Record:
    """What became of one pod of the simulation so far."""

    pod: Pod
    node: str | None = None
    message: str = ""
    nominated_node: str = ""
    victims: list[str] = field(default_factory=list)
    #: the last attempt's result, and the attempt whose preemption chose the victims
    result: ScheduleResult | None = None
    preempted: ScheduleResult | None = None
    #: attempts in a row that ended in an error
    errors: int = 0
    #: the devices its claims got when it was bound (``Placement.devices``)
    devices: tuple[str, ...] = ()
    #: ``Placement.nominated_before_binding`` of its last placement
    expected: str = ""
    #: ``Placement.failures``
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Lane:
    """One profile of the simulated scheduler: its algorithm (and batching state) and its queue."""

    profile: Profile
    scheduler: GenericScheduler
    queue: SchedulingQueue


class Simulation:
    """One simulated scheduler: a cache, a queue per profile, the pods waiting at Permit and the in-memory API
    server. Several profiles (a KubeSchedulerConfiguration's) share the cache and take pods by their
    ``schedulerName`` (a pod naming none of them goes to the first), one at a time in the order one queue
    for all of them would give (upstream's single queue, sorted by the first profile's QueueSort; pods
    submitted at the same moment in the order they were submitted)."""

    def __init__(
        self,
        cache: SchedulerCache,
        profile: Profile | Sequence[Profile],
        *,
        seed: int = 0,
        explain: bool = False,
        extender_factory: Callable[[ExtenderConfig], Extender] | None = None,
    ) -> None:
        profiles = [profile] if isinstance(profile, Profile) else list(profile)
        if not profiles:
            raise ValueError("a simulation needs a profile")
        self.cache = cache
        self.rng = random.Random(seed)
        self.snapshot = Snapshot(cache.objects)
        self.explain = explain
        #: the virtual clock, in seconds
        self.clock = 0.0
        self.pending = routing.PendingPods()
        #: scheduler name -> its profile's lane, in the order given
        self.lanes: dict[str, Lane] = {}
        for p in profiles:
            share = next((lane.queue for lane in self.lanes.values()), None)  # one count of scheduling cycles
            queue = routing.serve(p, None, pending=self.pending, now=self.clock, cluster=cache, share=share)
            self.lanes[p.scheduler_name] = Lane(p, GenericScheduler(p, extender_factory=extender_factory), queue)
        first = next(iter(self.lanes.values()))
        #: the first profile's (the only one's, usually)
        self.profile, self.scheduler, self.queue = first.profile, first.scheduler, first.queue
        #: pods assumed and waiting at Permit (gangs)
        self.waiting: WaitingPods[Parked] = WaitingPods()
        self.api = InMemoryApi(
            cache, lambda: self.clock, claim_changed=self._claim_changed, volume_changed=self._volume_changed
        )
        if cache.objects.dra.clock is None:  # DynamicResources' filterTimeout runs on real time, as the operator's
            cache.objects.dra.clock = time.monotonic
        self._served: Mapping[str, routing.Queued] = self.lanes
        #: PodGroup key -> the message its gang was last turned down with (what a ``scheduling.k8s.io``
        #: PodGroup's PodGroupInitiallyScheduled=False condition reads in a cluster)
        self.rejections: dict[str, str] = {}
        self._records: dict[str, _Record] = {}
        #: uid -> when it was submitted (the order of pods submitted at the same moment)
        self._arrival: dict[str, int] = {}
        self._extender_factory = extender_factory

    def lane(self, pod: Pod) -> Lane:
        """The profile that schedules `pod`: the one its ``schedulerName`` names, else the first."""
        return self.lanes.get(pod.scheduler_name) or next(iter(self.lanes.values()))

    # ------------------------------------------------------------------ the questions asked

    def evaluate(self, pod: Pod) -> Placement:
        """One attempt at `pod` in the current state, as the executors run it (``core.scheduling.cycle.schedule_one``:
        prepare, decide, conclude), on a queue of its own; its outcome is not carried out: no bind, no
        eviction, and an assumption is undone (the differential harness compares this first decision)."""
        lane = self.lane(pod)
        queue = SchedulingQueue()
        queue.nominator = lane.queue.nominator.copy()
        queue.add(pod, self.clock)
        info = queue.pop(self.clock)
        assert info is not None
        waiting: WaitingPods[Parked] = WaitingPods()
        ctx = CycleContext(lane.scheduler, self.cache, queue, waiting, self.rng, self.clock)
        outcome = schedule_one(info, self.snapshot, ctx, explain=self.explain, batching=False)
        if isinstance(outcome, Group):  # its own queue holds no sibling: the pod is the only member tried
            outcome = outcome.members[0][1]
        match outcome:
            case Bind(placed, node, state, _, result):
                devices = devices_of(placed, self.cache.objects.dra)  # Reserve's allocations, before Unreserve
                self._undo(info, placed, state, queue, waiting)
                self.cache.objects.dra.drain()  # not carried out
                return Placement(pod.key, node, "", self._explanation(pod, result), devices=devices)
            case Wait(placed, node, _, result):
                parked = waiting.remove(placed.uid)
                self._undo(info, placed, parked.payload.state if parked is not None else CycleState(), queue, waiting)
                return Placement(pod.key, node, "", self._explanation(pod, result))
            case Unschedulable(message, _, nominated, victims, result=result):
                self.cache.objects.dra.drain()  # a PostFilter deallocation: not carried out
                keys = tuple(v.key for v in victims)
                return Placement(pod.key, None, message, self._explanation(pod, result), nominated or "", keys)
            case Error(message, result=result):
                return Placement(pod.key, None, message, self._explanation(pod, result))
            case Skip(reason):
                return Placement(pod.key, pod.node_name or None, f"not scheduled: {reason}")

    def _undo(
        self, info: QueuedPodInfo, placed: Pod, state: CycleState, queue: SchedulingQueue, waiting: WaitingPods[Parked]
    ) -> None:
        """Take back an assumption as a failed binding cycle does: every ``unreserve``, then forget."""
        binding_failed(
            info,
            placed,
            handle=CacheHandle(self.cache, waiting),
            queue=queue,
            now=self.clock,
            profile=self.lane(placed).profile,
            state=state,
        )

    def schedule_one(self, pod: Pod) -> Placement:
        """Add `pod` to the simulated cluster (bound: as the watch of assigned pods brings it; pending:
        to the queue) and run the scheduler until the queue has settled it; its placement so far."""
        if pod.node_name:
            self.api.hold(pod)
            routing.route_assigned_pod(
                pod, deleted=False, cache=self.cache, pending=self.pending, served=self._served, now=self.clock
            )
            return Placement(pod.key, pod.node_name, "")
        pod = self._submit(pod)
        self._drain()
        return self._placement(pod.uid)

    def max_replicas(self, template: Pod, *, limit: int = 0) -> Capacity:
        """Place copies of `template` (``<name>-<i>``) one after another, each counting for the next, until one
        does not fit or `limit` copies (0: no limit) are placed. Copies never preempt: the question is how
        many fit in the room there is, as cluster-capacity asks it."""
        lane = self.lane(template)
        copies = GenericScheduler(
            dataclasses.replace(lane.profile, post_filters=()), extender_factory=self._extender_factory
        )
        placed: dict[str, int] = {}
        count = 0
        while not limit or count < limit:
            copy = dataclasses.replace(
                template, name=f"{template.name}-{count}", uid=f"{template.uid}-copy-{count}", nominated_node_name=""
            )
            copy = self._submit(copy)
            self._drain({lane.profile.scheduler_name: copies})
            held = self.cache.get_pod(copy.uid)  # bound, or assumed while it waits at Permit
            if held is None:
                lane.queue.delete(copy)  # the question is answered: it does not fit
                return Capacity(template.key, count, placed, self._records[copy.uid].message, limit)
            placed[held.node_name] = placed.get(held.node_name, 0) + 1
            count += 1
        return Capacity(template.key, count, placed, "", limit)

    def run(self, pods: Sequence[Pod | UnreadablePod], *, burst: bool = False) -> SimulationResult:
        """Schedule `pods` in order; an unreadable one is reported as not placed and the next goes on. With
        `burst` they are all pending at once before the first is tried (N replicas created together), as
        a scheduler sees a burst; otherwise each is submitted once the one before settled."""
        out = SimulationResult()
        start = time.perf_counter()
        readable = [pod for pod in pods if isinstance(pod, Pod)]
        for pod in readable:  # all pending at once: every one counts in its gang from the start
            gangs.update_members(self.cache.objects.gang_members, pod, present=True)
        placements: list[Placement | str] = []
        together = self._pod_groups(readable)
        submitted: dict[str, str] = {}
        for entry in pods:
            if isinstance(entry, UnreadablePod):
                placements.append(Placement(entry.key, None, entry.message, unreadable=True))
            elif entry.node_name:
                placements.append(self.schedule_one(entry))
            elif entry.uid in submitted:  # went in with the first member of its gang
                placements.append(submitted[entry.uid])
            else:
                for sibling in together.get(entry.uid, ()):
                    submitted[sibling.uid] = self._submit(sibling).uid
                placements.append(self._submit(entry).uid)
                if not burst:
                    self._drain()
        self._drain()
        self._time_out_waits()  # the file is over: whoever still waits times out
        for record in self._records.values():  # and nothing more is tried
            self.lane(record.pod).queue.delete(record.pod)
        out.placements = [p if isinstance(p, Placement) else self._placement(p) for p in placements]
        out.seconds = time.perf_counter() - start
        return out

    # ------------------------------------------------------------------ watch events, as a replay brings them

    def node_changed(self, node: Node | None, name: str = "") -> None:
        """A node was added or changed (`node`), or deleted (None and its `name`), as the node watch
        reports it (``core.scheduling.routing``); pods it makes schedulable are tried."""
        self.api.node_changed(node, name)
        if node is None:
            routing.route_node_deleted(name, cache=self.cache)
        else:
            routing.route_node(node, cache=self.cache, served=self._served, now=self.clock)
        self._drain()

    def assigned_pod_changed(self, pod: Pod, *, deleted: bool) -> None:
        """The watch of assigned pods saw `pod` (bound by someone else, or deleted: any pod the
        simulation holds with its uid goes, wherever the simulation placed it)."""
        if deleted:
            pod = self.cache.get_pod(pod.uid) or pod
            self.api.drop(pod)
        else:
            self.api.hold(pod)
        routing.route_assigned_pod(
            pod, deleted=deleted, cache=self.cache, pending=self.pending, served=self._served, now=self.clock
        )
        self._drain()

    def pending_pod_deleted(self, uid: str) -> None:
        """A pending pod of the simulation was deleted before it was placed: it is tried no more."""
        record = self._records.get(uid)
        if record is None or self.cache.get_pod(uid) is not None:
            return
        self.waiting.remove(uid)
        routing.route_unassigned_pod(
            record.pod, gone=True, cache=self.cache, pending=self.pending, served=self._served, now=self.clock
        )
        self.lane(record.pod).queue.delete(record.pod)

    def placement(self, uid: str) -> Placement:
        """The placement so far of the pod submitted with `uid`."""
        return self._placement(uid)

    def _pod_groups(self, pods: Sequence[Pod]) -> dict[str, list[Pod]]:
        """For the first pending member of each gang the profile schedules in pod-group cycles, the
        gang's later pending members: they enter the queue with it, as one pod group."""
        first: dict[str, Pod] = {}
        out: dict[str, list[Pod]] = {}
        for pod in pods:
            key = gangs.gang_key(pod, WORKLOAD_API)
            if not key or pod.node_name:
                continue
            if not any(isinstance(p, gangs.PodGroupCycle) for p in self.lane(pod).profile.permitters):
                continue
            if key in first:
                out.setdefault(first[key].uid, []).append(pod)
            else:
                first[key] = pod
        return out

    # ------------------------------------------------------------------ the executor

    def _submit(self, pod: Pod) -> Pod:
        """A pending pod is created: the API server holds it and the queue gets it (Kopf's watch)."""
        if pod.uid in self._records or self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{len(self._records)}")
        pod = stamp_claims(pod, self.cache.objects.dra, self.api.create_claim)  # the resourceclaim controller's part
        self._records[pod.uid] = _Record(pod)
        self._arrival[pod.uid] = len(self._arrival)
        self.api.hold(pod)
        self.pending.put(pod)
        self.lane(pod).queue.add(pod, self.clock)
        return pod

    def _drain(self, instead: Mapping[str, GenericScheduler] | None = None) -> None:
        """Attempt pods until none is ready and none backs off (the clock jumps over backoffs), the next
        from whichever profile's queue one queue for all would pop first. `instead`: another algorithm
        for a profile (``max_replicas``' copies never preempt)."""
        budget = 1000 + 100 * len(self._records)  # a bound no settling run comes near: a bug otherwise
        lanes = list(self.lanes.values())
        queues = {id(lane.queue): lane for lane in lanes}
        less = self.profile.queue_sort.less
        while budget:
            budget -= 1
            ready = first_ready([lane.queue for lane in lanes], self.clock, less=less, arrival=self._arrived)
            if ready is None:
                backing_off = [lane.queue for lane in lanes if lane.queue.pending_counts()[BACKOFF]]
                if not backing_off:
                    return
                ready_at = min(at for q in backing_off if (at := q.next_ready_at(self.clock)) is not None)
                self.clock = max(self.clock, ready_at)
                self._settle()
                continue
            lane = queues[id(ready)]
            info = ready.pop(self.clock)
            assert info is not None
            scheduler = (instead or {}).get(lane.profile.scheduler_name, lane.scheduler)
            self._carry_out(info, lane, scheduler)
            self._settle()
            self._send_dra_writes()
        raise RuntimeError("the simulation does not settle: a pod was tried over and over")

    def _arrived(self, info: QueuedPodInfo) -> int:
        return self._arrival.get(info.uid, 0)

    def _carry_out(self, info: QueuedPodInfo, lane: Lane, scheduler: GenericScheduler) -> None:
        """One attempt, and its outcome carried out as the operator's loop does (``kube/loop.py``)."""
        ctx = CycleContext(scheduler, self.cache, lane.queue, self.waiting, self.rng, self.clock)
        outcome = schedule_one(info, self.snapshot, ctx, explain=self.explain and scheduler is lane.scheduler)
        if isinstance(outcome, Group):  # a pod-group cycle: each member's outcome, as if popped alone
            for member, own in outcome.members:
                self._carry_out_one(member, own)
            if outcome.rejection:
                self.rejections[outcome.key] = outcome.rejection
            victims = outcome.victims
            if victims:  # the gang's preemption: evicted once, for the members it nominated
                for member, own in outcome.members:
                    if isinstance(own, Unschedulable) and own.nominated_node:
                        self._records[member.uid].victims.extend(v.key for v in victims)
                for victim in victims:
                    self._evict(victim)
            return
        self._carry_out_one(info, outcome)

    def _carry_out_one(self, info: QueuedPodInfo, outcome: Single) -> None:
        record = self._records[info.uid]
        _remember(record, outcome)
        match outcome:
            case Bind(placed, node, state, plan):
                self._bind(info, placed, node, state, plan, outcome.nominated_node)
            case Wait(placed, node):
                if outcome.nominated_node and outcome.nominated_node != placed.nominated_node_name:
                    self._expect(record, placed, outcome.nominated_node)
            case Unschedulable(_, _, nominated, victims, clear_nominations):
                pod = info.pod
                if nominated is not None and nominated != pod.nominated_node_name:
                    self._write_nomination(pod, nominated)
                if victims and nominated:
                    for other in clear_nominations:
                        if other.nominated_node_name:
                            self._write_nomination(other, "")
                    for victim in victims:
                        self._evict(victim)
            case Error(_, _, nominated):
                if nominated == "" and info.pod.nominated_node_name:
                    self._write_nomination(info.pod, "")
                self._error(record)

    def _bind(
        self,
        info: QueuedPodInfo,
        placed: Pod,
        node: str,
        state: CycleState,
        plan: BindingPlan,
        nominate: str | None = None,
        nominated: str = "",
    ) -> None:
        """The binding cycle as ``core.scheduling.binding`` sequences it (for the operator too), against the in-memory
        API server: the nomination for expectation first (`nominate`), then PreBind, then the bind. A failure
        clears the nomination (`nominated`: the one written while the pod waited at Permit)."""
        record = self._records[placed.uid]
        lane = self.lane(placed)
        job = BindingCycle(info, placed, state, plan, lane.profile, lane.queue, nominate=nominate, nominated=nominated)
        verdict = drive(run_binding_cycle(job, _SimulatedPort(self, record, placed)))
        if isinstance(verdict, Bound) and not self.api.is_bound(placed):
            self.api.bind(placed, node)  # a binder that reported success without the pods/binding POST
        unbound = conclude_binding(job, verdict, cache=self.cache, waiting=self.waiting, now=self.clock)
        if unbound is not None:
            if unbound.clear_nomination:
                self._patch_nomination(placed, "")
            record.node, record.message = None, unbound.message
            record.failures.append(record.message)
            self._error(record)
            return
        routing.route_assigned_pod(
            placed, deleted=False, cache=self.cache, pending=self.pending, served=self._served, now=self.clock
        )
        record.node, record.message, record.errors = node, "", 0
        record.devices = devices_of(placed, self.cache.objects.dra)

    def _claim_changed(self, key: str, new: ResourceClaim | None) -> None:
        """A claim written (None: deleted) through the in-memory API server: its watch event, as the operator
        gets it."""
        route_dra_object("ResourceClaim", key, new, cache=self.cache, served=self._served, now=self.clock)

    def _volume_changed(self, kind: str, key: str, new: object) -> None:
        """A PV or claim VolumeBinding's PreBind wrote through the in-memory API server: its watch event, as the
        operator gets it."""
        routing.route_object(kind, key, new, cache=self.cache, served=self._served, now=self.clock)

    def _send_dra_writes(self) -> None:
        """DynamicResources' Unreserve and PostFilter writes (the tracker's outbox), as the operator sends them:
        each write's ``then`` after it, once it succeeded."""
        tracker = self.cache.objects.dra
        if tracker.outbox:
            for write in tracker.drain():
                self._send_dra_write(write)

    def _send_dra_write(self, write: ApiWrite) -> None:
        answer = drive(self.api.request(write.method, write.path, write.body, content_type=write.content_type))
        if answer.ok:
            for after in write.then:
                self._send_dra_write(after)

    def _settle(self) -> None:
        """Pods whose wait at Permit is over (the loop's ``_settle``): bind the allowed, release the rejected."""
        if not len(self.waiting):
            return
        settled = settle_waiting(self.waiting, cache=self.cache, now=self.clock)
        for allowed in settled.allowed:
            self._bind(
                allowed.info, allowed.pod, allowed.node, allowed.state, allowed.plan, nominated=allowed.nominated
            )
        for rejected in settled.rejected:
            record = self._records[rejected.pod.uid]
            record.node, record.message = None, rejected.status.message
            record.failures.append(record.message)
            if rejected.nominated_node is not None:
                self._patch_nomination(rejected.pod, rejected.nominated_node)
        if settled.rejected:
            routing.broadcast(routing.EVENT_ASSIGNED_POD_DELETE, self._served, self.clock, keep=settled.keep)

    def _time_out_waits(self) -> None:
        """The clock jumps to each waiting pod's deadline in turn: they are all released."""
        while (deadline := self.waiting.next_deadline()) is not None:
            self.clock = max(self.clock, deadline)
            self._settle()

    def _expect(self, record: _Record, placed: Pod, node: str) -> None:
        """The assumed pod is nominated to its node before binding (its watch event changes nothing:
        an assumed pod's updates are ignored)."""
        self._patch_nomination(placed, node)
        record.expected = node

    def _patch_nomination(self, pod: Pod, node: str) -> None:
        """A pods/status write of ``nominatedNodeName`` ("" clears it) to the in-memory API server only."""
        self.api.answer("PATCH", paths.pod(pod.namespace, pod.name, "status"),
                        {"status": {"nominatedNodeName": node or None}},
                        content_type="application/merge-patch+json")  # fmt: skip

    def _write_nomination(self, pod: Pod, node: str) -> None:
        """A pods/status write of ``nominatedNodeName``, back through the watch as an update of the pending pod."""
        queue = self.lane(pod).queue
        info = queue.get(pod)
        if info is None:
            return
        self._patch_nomination(pod, node)
        queue.update(info.pod, dataclasses.replace(info.pod, nominated_node_name=node), self.clock)

    def _evict(self, victim: Pod) -> None:
        """A preemption victim is deleted, and its deletion routed as the watches would see it; one waiting at
        Permit is preempted in memory instead (upstream ``waitingPod.Preempt``): the next settle releases it
        and it backs off."""
        if self.waiting.preempt(victim.uid, DefaultPreemption.NAME, PREEMPTED):
            return
        self.api.drop(victim)
        served, pending, now = self._served, self.pending, self.clock
        if self.cache.state_of(victim) is PodState.ADDED:
            routing.route_assigned_pod(victim, deleted=True, cache=self.cache, pending=pending, served=served, now=now)
            return
        # assumed and being bound: first its deletion mark, then its DELETED
        record = self._records.get(victim.uid)
        if record is not None:
            record.node, record.message = None, "deleted: a preemption victim while it was being bound"
        deleting = dataclasses.replace(victim, node_name="", deleting=True)
        routing.route_unassigned_pod(deleting, gone=False, cache=self.cache, pending=pending, served=served, now=now)
        routing.route_unassigned_pod(deleting, gone=True, cache=self.cache, pending=pending, served=served, now=now)
        self.lane(victim).queue.done(victim)

    def _error(self, record: _Record) -> None:
        """An attempt ended in an error: after ``MAX_ERROR_RETRIES`` in a row the pod is given up on."""
        record.errors += 1
        if record.errors >= MAX_ERROR_RETRIES:
            self.lane(record.pod).queue.delete(record.pod)

    # ------------------------------------------------------------------ reading the outcome

    def _placement(self, uid: str) -> Placement:
        r = self._records[uid]
        message = r.message
        if r.result is None and r.node is None and not message and r.pod.scheduling_gates:
            message = GATED_MESSAGE  # never popped: the queue holds it until its gates are removed
        elif r.result is None and r.node is None and not message:
            refused = self.lane(r.pod).queue.hints.pre_enqueue(r.pod)  # never popped: a PreEnqueue plugin holds it
            if refused is not None:
                message = f"waiting for PreEnqueue plugin {refused.plugin}: {refused.message}"
        explanation = self._explanation(r.pod, r.result, r.preempted)
        return Placement(
            r.pod.key,
            r.node,
            message,
            explanation,
            r.nominated_node,
            tuple(r.victims),
            devices=r.devices,
            nominated_before_binding=r.expected,
            batched=r.node is not None and r.result is not None and r.result.hinted and r.result.node == r.node,
            failures=tuple(r.failures),
        )

    def _explanation(
        self, pod: Pod, result: ScheduleResult | None, preempted: ScheduleResult | None = None
    ) -> Explanation | None:
        """With ``explain``: `result`'s explanation; after a preemption, `preempted` (the attempt that chose the
        victims) says what preemption considered."""
        if not self.explain or result is None:
            return None
        e = explanation_of(pod, result, scheduler_name=self.lane(pod).profile.scheduler_name)
        if preempted is not None and preempted is not result and preempted.post_filter is not None:
            e = dataclasses.replace(e, preemption=preemption_of(preempted.post_filter))
        return e


def _remember(record: _Record, outcome: Single) -> None:
    """What an attempt's outcome says of the pod's placement (a bind's is known once it is bound)."""
    match outcome:
        case Bind(result=result) | Wait(result=result):
            record.result, record.node, record.message, record.expected = result, None, "", ""
        case Unschedulable(message, _, nominated, victims, result=result):
            record.result, record.node, record.message, record.errors = result, None, message, 0
            record.failures.append(message)
            if nominated:
                record.nominated_node, record.preempted = nominated, result
                record.victims.extend(v.key for v in victims)
        case Error(message, result=result):
            record.node, record.message = None, message
            record.failures.append(message)
            record.result = result if result is not None else record.result


class _SimulatedPort:
    """Simulate's ``core.scheduling.binding.BindingPort``: the in-memory API server answers at once, so nothing is ever
    called off and there is no wait to finish; binder extenders bind there too; a failure is the step's."""

    __slots__ = ("_placed", "_record", "_sim")

    def __init__(self, sim: Simulation, record: _Record, placed: Pod) -> None:
        self._sim, self._record, self._placed = sim, record, placed

    @property
    def client(self) -> InMemoryApi:
        return self._sim.api

    async def permit_over(self) -> None:
        return None  # the nomination written while it waited is in the in-memory API server already

    def called_off(self) -> Refusal | None:
        return None

    async def nominate(self, node: str) -> bool:
        self._sim._expect(self._record, self._placed, node)
        return True

    async def bind_with_extenders(self, extenders: Sequence[Extender], pod: Pod, node: str) -> ExtenderBinding:
        return bind_with_extenders([_SimulatedBinder(e, self._sim.api) for e in extenders], pod, node)

    def judge(self, point: str, status: Status) -> Refusal:
        return Refusal(status.message)


class _SimulatedBinder(Extender):
    """A binder extender whose bind the in-memory API server carries out (nothing is sent)."""

    def __init__(self, extender: Extender, api: InMemoryApi) -> None:
        super().__init__(extender.config)
        self._extender, self._api = extender, api

    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        return self._extender.filter(pod, nodes)

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderPrioritizeResult:
        return self._extender.prioritize(pod, nodes)

    def bind(self, pod: Pod, node: str) -> str:
        answer = self._api.bind(pod, node)
        return "" if answer.ok else answer.detail()
