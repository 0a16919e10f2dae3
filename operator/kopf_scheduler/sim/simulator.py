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

A policy's extenders are called through ``extender_factory`` (``simulate`` passes the HTTP
client, ``kopf_scheduler.extender_client.HTTPExtender``); the simulated bind never calls them.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..core.algorithm import GenericScheduler, ScheduleResult
from ..core.cache import SchedulerCache
from ..core.diagnosis import Diagnosis, NodeScore
from ..core.extenders import Extender, ExtenderConfig
from ..core.framework import Code
from ..core.objects import Pod
from ..core.profile import Profile
from ..core.queueing import Nominator
from ..core.snapshot import Snapshot

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
            return self._place(pod, result.node, explanation=self._explanation(result))
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
        return self._place(nominated, retry.node, node, victims, explanation=self._explanation(retry))

    def _place(
        self, pod: Pod, node: str, nominated_node: str = "", victims: tuple[str, ...] = (), *, explanation: Explanation | None = None
    ) -> Placement:
        self.nominator.delete(pod.uid)
        placed = self.cache.assume(pod, node)
        self.cache.add_pod(placed)  # the simulated bind is confirmed at once
        return Placement(pod.key, node, "", explanation, nominated_node, victims)

    def run(self, pods: Sequence[Pod | UnreadablePod]) -> SimulationResult:
        """Schedule `pods` in order; an unreadable one is reported as not placed and the next goes on."""
        out = SimulationResult()
        start = time.perf_counter()
        for pod in pods:
            if isinstance(pod, UnreadablePod):
                out.placements.append(Placement(pod.key, None, pod.message, unreadable=True))
            else:
                out.placements.append(self.schedule_one(pod))
        out.seconds = time.perf_counter() - start
        return out
