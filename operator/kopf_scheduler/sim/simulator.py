"""Schedule pending pods one after another against a loaded cluster, as the operator would.

Each placement is assumed and confirmed in the cache before the next pod is
scheduled, so every decision sees the ones before it. The random tie-break
comes from ``random.Random(seed)``: the same inputs and seed give the same
placements.

Preemption happens as in the operator, with the evictions done at once: when no node fits and
the profile's preemption chooses a node, the victims leave the simulated cluster, the pod is
nominated to that node and tried again right away (the operator retries it when the victims'
deletions arrive). A pod that still does not fit stays nominated, so later pods of lower
priority do not take its room.
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
from ..core.queueing import Nominator
from ..core.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str  # ns/name
    node: str | None
    message: str  # "" when placed; the FitError text or the error otherwise
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
    def __init__(self, cache: SchedulerCache, profile: Profile, *, seed: int = 0) -> None:
        self.cache = cache
        self.profile = profile
        self.algorithm = GenericScheduler(profile)
        self.rng = random.Random(seed)
        self.snapshot = Snapshot(cache.objects)
        self.nominator = Nominator()

    def schedule_one(self, pod: Pod) -> Placement:
        if pod.node_name:
            # Already bound in the pods file: count it, as the watch would.
            self.cache.add_pod(pod)
            return Placement(pod.key, pod.node_name, "")
        if self.cache.get_pod(pod.uid) is not None:
            pod = dataclasses.replace(pod, uid=f"{pod.uid}#{self.cache.pod_count()}")
        self.cache.update_snapshot(self.snapshot)
        result = self.algorithm.schedule(pod, self.snapshot, rng=self.rng, nominator=self.nominator)
        if result.node is not None:
            return self._place(pod, result.node)
        verdict = result.post_filter
        if verdict is None or not verdict.nominated_node:
            if verdict is None or verdict.nominated_node == "":
                self.nominator.delete(pod.uid)
            return Placement(pod.key, None, result.message)
        node = verdict.nominated_node
        for victim in verdict.victims:
            self.cache.remove_pod(victim)
        for other in self.nominator.pods_for_node(node):
            if other.priority < pod.priority:
                self.nominator.delete(other.uid)
        victims = tuple(v.key for v in verdict.victims)
        nominated = dataclasses.replace(pod, nominated_node_name=node)
        self.nominator.add(nominated)
        self.cache.update_snapshot(self.snapshot)
        retry = self.algorithm.schedule(nominated, self.snapshot, rng=self.rng, nominator=self.nominator)
        if retry.node is None:
            return Placement(pod.key, None, retry.message, node, victims)
        return self._place(nominated, retry.node, node, victims)

    def _place(self, pod: Pod, node: str, nominated_node: str = "", victims: tuple[str, ...] = ()) -> Placement:
        self.nominator.delete(pod.uid)
        placed = self.cache.assume(pod, node)
        self.cache.add_pod(placed)  # the simulated bind is confirmed at once
        return Placement(pod.key, node, "", nominated_node, victims)

    def run(self, pods: list[Pod]) -> SimulationResult:
        out = SimulationResult()
        start = time.perf_counter()
        for pod in pods:
            out.placements.append(self.schedule_one(pod))
        out.seconds = time.perf_counter() - start
        return out
