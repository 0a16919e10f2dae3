"""Schedule pending pods one after another against a loaded cluster, as the operator would.

Each placement is assumed and confirmed in the cache before the next pod is
scheduled, so every decision sees the ones before it. The random tie-break
comes from ``random.Random(seed)``: the same inputs and seed give the same
placements.

With ``explain=True`` every placement carries an :class:`Explanation`: the
feasible nodes, each filtered node's plugin and reasons, and each feasible
node's per-plugin normalised scores, weights and total (``simulate --explain``;
the differential harness in ``bench/differential.py`` compares them with
upstream's). Scoring then runs even when one node is feasible, so its scores
can be read; the chosen node is the same either way.

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
client, ``kopf_scheduler.extender_client.HTTPExtender``); the simulated bind never calls them.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..core import gangs
from ..core.algorithm import GenericScheduler, ScheduleResult
from ..core.cache import SchedulerCache
from ..core.cycle import Bind, Error, Parked, Unschedulable, Wait, reserve_and_permit, settle_waiting
from ..core.diagnosis import Diagnosis, NodeScore
from ..core.extenders import Extender, ExtenderConfig
from ..core.framework import Code, CycleState
from ..core.objects import Pod
from ..core.profile import Profile
from ..core.queueing import Nominator, QueuedPodInfo
from ..core.snapshot import Snapshot
from ..core.waiting import WaitingPods

#: upstream's ``framework.Code`` spellings (``Code.String()``), for explanations
CODE_NAMES: Final[Mapping[Code, str]] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(frozen=True, slots=True)
class FilteredNode:
    """A node a filter rejected: the first rejecting plugin, and its reasons (with ``alwaysCheckAllPredicates``, the
    reasons of every rejecting plugin)."""

    node: str
    plugin: str
    code: str  # a CODE_NAMES value
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why one pod went where it went: what the algorithm saw, not a re-computation.

    Nodes left unevaluated (``percentageOfNodesToScore`` on big clusters) are neither feasible nor filtered.
    """

    diagnosis: Diagnosis
    scores: tuple[NodeScore, ...] = ()

    @property
    def feasible(self) -> tuple[str, ...]:
        return tuple(sorted(s.node for s in self.scores))

    @property
    def filtered(self) -> tuple[FilteredNode, ...]:
        return tuple(
            FilteredNode(node, status.plugin, CODE_NAMES[status.code], status.reasons)
            for node, status in sorted(self.diagnosis.node_to_status.items())
        )


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


@dataclass(slots=True)
class SimulationResult:
    placements: list[Placement] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def scheduled(self) -> int:
        return sum(1 for p in self.placements if p.node)

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

    def _decide(self, pod: Pod) -> ScheduleResult:
        self.cache.update_snapshot(self.snapshot)
        return self.algorithm.schedule(pod, self.snapshot, rng=self.rng, explain=self.explain, nominator=self.nominator)

    def _explanation(self, result: ScheduleResult) -> Explanation | None:
        return Explanation(result.diagnosis, tuple(result.scores)) if self.explain else None

    def evaluate(self, pod: Pod) -> Placement:
        """Decide where ``pod`` would go in the current state, without placing it or preempting for it."""
        result = self._decide(pod)
        if result.node is not None:
            return Placement(pod.key, result.node, "", self._explanation(result))
        verdict = result.post_filter
        nominated = verdict.nominated_node or "" if verdict is not None else ""
        victims = tuple(v.key for v in verdict.victims) if verdict is not None else ()
        return Placement(pod.key, None, result.message, self._explanation(result), nominated, victims)

    def schedule_one(self, pod: Pod) -> Placement:
        if pod.node_name:
            # Already bound in the pods file: count it, as the watch would.
            self.cache.add_pod(pod)
            return Placement(pod.key, pod.node_name, "")
        if self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{self.cache.pod_count()}")
        result = self._decide(pod)
        if result.node is not None:
            return self._place(pod, result.node, explanation=self._explanation(result), state=result.state)
        verdict = result.post_filter
        if verdict is None or not verdict.nominated_node:
            if verdict is None or verdict.nominated_node == "":
                self.nominator.delete(pod.uid)
            return Placement(pod.key, None, result.message, self._explanation(result))
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
            return Placement(pod.key, None, retry.message, self._explanation(retry), node, victims)
        return self._place(nominated, retry.node, node, victims, explanation=self._explanation(retry), state=retry.state)

    def _place(
        self, pod: Pod, node: str, nominated_node: str = "", victims: tuple[str, ...] = (), *,
        explanation: Explanation | None = None, state: CycleState | None = None,
    ) -> Placement:
        """Assume `pod` on `node`, run the Reserve and Permit plugins, and confirm it (the simulated
        bind), or hold it waiting for its gang, or undo it when a plugin says no."""
        self.nominator.delete(pod.uid)
        placed = self.cache.assume(pod, node)
        info = QueuedPodInfo(pod, timestamp=0.0, added_at=0.0)
        outcome = reserve_and_permit(
            info, placed, state or CycleState(), self.profile, cache=self.cache, queue=None, now=0.0, waiting=self.waiting
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

    def run(self, pods: list[Pod]) -> SimulationResult:
        out = SimulationResult()
        start = time.perf_counter()
        for pod in pods:  # all pending at once: every one counts in its gang from the start
            gangs.update_members(self.cache.objects.gang_members, pod, present=True)
        for pod in pods:
            out.placements.append(self.schedule_one(pod))
        self._settle(now=math.inf)  # the file is over: whoever still waits times out
        out.placements = [self._held.get(pod.uid, p) if p.node is None and not p.message else p for pod, p in zip(pods, out.placements, strict=True)]
        out.seconds = time.perf_counter() - start
        return out
