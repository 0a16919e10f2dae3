"""Schedule pending pods one after another against a loaded cluster, as the operator would.

Each placement is assumed and confirmed in the cache before the next pod is
scheduled, so every decision sees the ones before it. The random tie-break
comes from ``random.Random(seed)``: the same inputs and seed give the same
placements.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field

from ..core.algorithm import GenericScheduler
from ..core.cache import SchedulerCache
from ..core.objects import Pod
from ..core.profile import Profile
from ..core.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str  # ns/name
    node: str | None
    message: str  # "" when placed; the FitError text or the error otherwise


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
    def __init__(self, cache: SchedulerCache, profile: Profile, *, seed: int = 0) -> None:
        self.cache = cache
        self.profile = profile
        self.algorithm = GenericScheduler(profile)
        self.rng = random.Random(seed)
        self.snapshot = Snapshot(cache.objects)

    def schedule_one(self, pod: Pod) -> Placement:
        if pod.node_name:
            # Already bound in the pods file: count it, as the watch would.
            self.cache.add_pod(pod)
            return Placement(pod.key, pod.node_name, "")
        if self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{self.cache.pod_count()}")
        self.cache.update_snapshot(self.snapshot)
        result = self.algorithm.schedule(pod, self.snapshot, rng=self.rng)
        if result.node is None:
            return Placement(pod.key, None, result.message)
        placed = self.cache.assume(pod, result.node)
        self.cache.add_pod(placed)  # the simulated bind is confirmed at once
        return Placement(pod.key, result.node, "")

    def run(self, pods: list[Pod]) -> SimulationResult:
        out = SimulationResult()
        start = time.perf_counter()
        for pod in pods:
            out.placements.append(self.schedule_one(pod))
        out.seconds = time.perf_counter() - start
        return out
