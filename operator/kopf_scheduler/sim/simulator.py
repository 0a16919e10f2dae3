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

A policy's extenders are called through ``extender_factory`` (``simulate`` passes the HTTP
client, ``kopf_scheduler.extender_client.HTTPExtender``); the simulated bind never calls them.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..core.algorithm import GenericScheduler
from ..core.cache import SchedulerCache
from ..core.diagnosis import Diagnosis, NodeScore
from ..core.extenders import Extender, ExtenderConfig
from ..core.framework import Code
from ..core.objects import Pod
from ..core.profile import Profile
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

    def evaluate(self, pod: Pod) -> Placement:
        """Decide where ``pod`` would go in the current state, without placing it."""
        self.cache.update_snapshot(self.snapshot)
        result = self.algorithm.schedule(pod, self.snapshot, rng=self.rng, explain=self.explain)
        explanation = Explanation(result.diagnosis, tuple(result.scores)) if self.explain else None
        if result.node is None:
            return Placement(pod.key, None, result.message, explanation)
        return Placement(pod.key, result.node, "", explanation)

    def schedule_one(self, pod: Pod) -> Placement:
        if pod.node_name:
            # Already bound in the pods file: count it, as the watch would.
            self.cache.add_pod(pod)
            return Placement(pod.key, pod.node_name, "")
        if self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{self.cache.pod_count()}")
        placement = self.evaluate(pod)
        if placement.node is not None:
            placed = self.cache.assume(pod, placement.node)
            self.cache.add_pod(placed)  # the simulated bind is confirmed at once
        return placement

    def run(self, pods: list[Pod]) -> SimulationResult:
        out = SimulationResult()
        start = time.perf_counter()
        for pod in pods:
            out.placements.append(self.schedule_one(pod))
        out.seconds = time.perf_counter() - start
        return out
