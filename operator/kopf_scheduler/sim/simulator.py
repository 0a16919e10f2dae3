"""Schedule pending pods one after another against a loaded cluster, as the operator would.

Each placement is assumed and confirmed in the cache before the next pod is
scheduled, so every decision sees the ones before it. The random tie-break
comes from ``random.Random(seed)``: the same inputs and seed give the same
placements.

With ``explain=True`` every placement carries an ``Explanation`` (``core/explanation.py``):
every node's verdict, the rejecting plugin and reasons, the per-plugin raw and normalised scores,
weights and totals, what preemption considered (``simulate --explain``; the differential harness in
``bench/differential.py`` compares the scores with upstream's). Scoring then runs even when one
node is feasible, so its scores can be read; the chosen node is the same either way.

Preemption happens as in the operator, with the evictions done at once: when no node fits and
the profile's preemption chooses a node, the victims leave the simulated cluster, the pod is
nominated to that node and tried again right away (the operator retries it when the victims'
deletions arrive). A pod that still does not fit stays nominated, so later pods of lower
priority do not take its room.

Gangs (PodGroups of either API in the cluster file) are scheduled as in the operator: every pod of
the pods file counts as a member from the start (they are all pending at once); a member that
fits is held on its node, waiting, until its gang has its minimum placed, then every member is
placed; members still waiting when the file ends are released (their timeout: nothing in a
simulation would make room later) and read how many of their gang fit. Later pods of the file see
the waiting members' nodes as taken, as they would within the operator's timeout.

A policy's extenders are called through ``extender_factory`` (``simulate`` passes the HTTP
client, ``kopf_scheduler.edge.extenders.HTTPExtender``); the simulated bind never calls them.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core import gangs
from ..core.algorithm import GenericScheduler, ScheduleResult
from ..core.cache import SchedulerCache
from ..core.cycle import Bind, Error, Parked, Unschedulable, Wait, reserve_and_permit, settle_waiting
from ..core.explanation import Explanation, explanation_of, preemption_of
from ..core.extenders import Extender, ExtenderConfig
from ..core.framework import CycleState
from ..core.objects import Pod
from ..core.profile import Profile
from ..core.queueing import Nominator, QueuedPodInfo
from ..core.snapshot import Snapshot
from ..core.waiting import WaitingPods


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


class Simulation:
    def __init__(
        self,
        cache: SchedulerCache,
        profile: Profile,
        *,
        seed: int = 0,
        explain: bool = False,
        extender_factory: Callable[[ExtenderConfig], Extender] | None = None,
    ) -> None:
        self.cache = cache
        self.profile = profile
        self.algorithm = GenericScheduler(profile, extender_factory=extender_factory)
        self.rng = random.Random(seed)
        self.snapshot = Snapshot(cache.objects)
        self.explain = explain
        self.nominator = Nominator()
        #: gang members placed and waiting for the rest of their gang (``core/gangs.py``)
        self.waiting: WaitingPods[Parked] = WaitingPods()
        #: placements decided later (gang members), by pod uid
        self._held: dict[str, Placement] = {}
        self._extender_factory = extender_factory

    def _decide(self, pod: Pod) -> ScheduleResult:
        self.cache.update_snapshot(self.snapshot)
        return self.algorithm.schedule(pod, self.snapshot, rng=self.rng, explain=self.explain, nominator=self.nominator)

    def _explanation(
        self, pod: Pod, result: ScheduleResult, preempted: ScheduleResult | None = None
    ) -> Explanation | None:
        """With ``explain``: `result`'s explanation; after a preemption, `preempted` (the attempt that chose the
        victims) says what preemption considered."""
        if not self.explain:
            return None
        e = explanation_of(pod, result, scheduler_name=self.profile.scheduler_name)
        if preempted is not None and preempted.post_filter is not None:
            e = dataclasses.replace(e, preemption=preemption_of(preempted.post_filter))
        return e

    def evaluate(self, pod: Pod) -> Placement:
        """Decide where ``pod`` would go in the current state, without placing it or preempting for it."""
        result = self._decide(pod)
        if result.node is not None:
            return Placement(pod.key, result.node, "", self._explanation(pod, result))
        verdict = result.post_filter
        nominated = verdict.nominated_node or "" if verdict is not None else ""
        victims = tuple(v.key for v in verdict.victims) if verdict is not None else ()
        return Placement(pod.key, None, result.message, self._explanation(pod, result), nominated, victims)

    def schedule_one(self, pod: Pod) -> Placement:
        if pod.node_name:
            # Already bound in the pods file: count it, as the watch would.
            self.cache.add_pod(pod)
            return Placement(pod.key, pod.node_name, "")
        if self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{self.cache.pod_count()}")
        result = self._decide(pod)
        if result.node is not None:
            return self._place(pod, result.node, explanation=self._explanation(pod, result), state=result.state)
        verdict = result.post_filter
        if verdict is None or not verdict.nominated_node:
            if verdict is None or verdict.nominated_node == "":
                self.nominator.delete(pod.uid)
            return Placement(pod.key, None, result.message, self._explanation(pod, result))
        node = verdict.nominated_node
        for victim in verdict.victims:
            self.cache.remove_pod(victim)
        for other in self.nominator.pods_for_node(node):
            if other.priority < pod.priority:
                self.nominator.delete(other.uid)
        victims = tuple(v.key for v in verdict.victims)
        nominated = dataclasses.replace(pod, nominated_node_name=node)
        self.nominator.add(nominated)
        retry = self._decide(nominated)
        if retry.node is None:
            return Placement(pod.key, None, retry.message, self._explanation(pod, retry, result), node, victims)
        return self._place(
            nominated, retry.node, node, victims, explanation=self._explanation(pod, retry, result), state=retry.state
        )

    def _place(
        self,
        pod: Pod,
        node: str,
        nominated_node: str = "",
        victims: tuple[str, ...] = (),
        *,
        explanation: Explanation | None = None,
        state: CycleState | None = None,
    ) -> Placement:
        """Assume `pod` on `node`, run the Reserve and Permit plugins, and confirm it (the simulated
        bind), or hold it waiting for its gang, or undo it when a plugin says no."""
        self.nominator.delete(pod.uid)
        placed = self.cache.assume(pod, node)
        info = QueuedPodInfo(pod, timestamp=0.0, added_at=0.0)
        outcome = reserve_and_permit(
            info,
            placed,
            state or CycleState(),
            self.profile,
            cache=self.cache,
            queue=None,
            now=0.0,
            waiting=self.waiting,
        )
        match outcome:
            case Bind():
                self.cache.add_pod(placed)
            case Wait():
                held = Placement(pod.key, None, "", explanation, nominated_node, victims)
                self._held[pod.uid] = held
                return held
            case Unschedulable(message) | Error(message):
                return Placement(pod.key, None, message, explanation, nominated_node, victims)
        self._settle(now=0.0)
        return Placement(pod.key, node, "", explanation, nominated_node, victims)

    def _settle(self, *, now: float) -> None:
        """Gang members whose wait is over: allowed ones are placed, rejected ones released."""
        settled = settle_waiting(self.waiting, cache=self.cache, now=now)
        for allowed in settled.allowed:
            self.cache.add_pod(allowed.pod)
            held = self._held.pop(allowed.pod.uid)
            self._held[allowed.pod.uid] = dataclasses.replace(held, node=allowed.node)
        for rejected in settled.rejected:
            held = self._held.pop(rejected.pod.uid)
            self._held[rejected.pod.uid] = dataclasses.replace(held, message=rejected.status.message)

    def max_replicas(self, template: Pod, *, limit: int = 0) -> Capacity:
        """Place copies of `template` (``<name>-<i>``) one after another, each counting for the next, until one
        does not fit or `limit` copies (0: no limit) are placed. Copies never preempt: the question is how
        many fit in the room there is, as cluster-capacity asks it."""
        algorithm = GenericScheduler(
            dataclasses.replace(self.profile, post_filters=()), extender_factory=self._extender_factory
        )
        placed: dict[str, int] = {}
        count = 0
        while not limit or count < limit:
            copy = dataclasses.replace(
                template, name=f"{template.name}-{count}", uid=f"{template.uid}-copy-{count}", nominated_node_name=""
            )
            self.cache.update_snapshot(self.snapshot)
            result = algorithm.schedule(copy, self.snapshot, rng=self.rng, nominator=self.nominator)
            if result.node is None:
                return Capacity(template.key, count, placed, result.message, limit)
            self._place(copy, result.node)
            placed[result.node] = placed.get(result.node, 0) + 1
            count += 1
        return Capacity(template.key, count, placed, "", limit)

    def run(self, pods: Sequence[Pod | UnreadablePod]) -> SimulationResult:
        """Schedule `pods` in order; an unreadable one is reported as not placed and the next goes on."""
        out = SimulationResult()
        start = time.perf_counter()
        readable = [pod for pod in pods if isinstance(pod, Pod)]
        for pod in readable:  # all pending at once: every one counts in its gang from the start
            gangs.update_members(self.cache.objects.gang_members, pod, present=True)
        for entry in pods:
            if isinstance(entry, UnreadablePod):
                out.placements.append(Placement(entry.key, None, entry.message, unreadable=True))
            else:
                out.placements.append(self.schedule_one(entry))
        self._settle(now=math.inf)  # the file is over: whoever still waits times out
        out.placements = [
            self._held.get(entry.uid, p) if isinstance(entry, Pod) and p.node is None and not p.message else p
            for entry, p in zip(pods, out.placements, strict=True)
        ]
        out.seconds = time.perf_counter() - start
        return out
