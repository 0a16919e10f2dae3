"""NodeInfo: one node, the pods on it, and the sums the plugins read.

Upstream ``pkg/scheduler/framework/types.go`` (``NodeInfo``). The cache owns
mutable NodeInfos and bumps ``generation`` on every change; a snapshot keeps
clones and re-clones only those whose generation moved, so building the view
for a scheduling cycle costs what changed since the last one.

``requested`` is the sum of the pods' effective requests (what filters
compare with allocatable); ``non_zero_requested`` applies the scoring defaults
for absent cpu/memory requests (what scorers use). Both take each pod as
upstream ``PodInfo.CalculateResource`` does (``Pod.requests`` / ``Pod.non_zero_requests``):
with pod-level resources, and for a pod resized in place the larger of what its
spec asks and what its status says is allocated or running. A NodeInfo may exist
without its Node object (pods were seen before the node, or the node was
deleted while pods remain): then ``node`` is ``None`` and no pod is placed on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from ..model.objects import Node, Pod
from ..model.resources import ZERO_RESOURCES, Resources

_generations: Final = itertools.count(1)


def next_generation() -> int:
    """A process-wide increasing counter (upstream ``nextGeneration``); not a clock."""
    return next(_generations)


#: A host port in use: (protocol, host IP, port).
PortKey = tuple[str, str, int]


@dataclass(slots=True)
class NodeInfo:
    node: Node | None
    pods: dict[str, Pod] = field(default_factory=dict)  # uid -> pod
    requested: Resources = ZERO_RESOURCES
    non_zero_requested: Resources = ZERO_RESOURCES
    #: (protocol, host ip, port) -> number of pods using it
    used_ports: dict[PortKey, int] = field(default_factory=dict)
    #: uids of pods with any pod (anti-)affinity term / with required anti-affinity
    pods_with_affinity: set[str] = field(default_factory=set)
    pods_with_required_anti_affinity: set[str] = field(default_factory=set)
    #: "ns/claim" -> number of pods on this node using that PVC
    pvc_ref_counts: dict[str, int] = field(default_factory=dict)
    generation: int = field(default_factory=next_generation)

    @property
    def name(self) -> str:
        return self.node.name if self.node is not None else ""

    @property
    def allocatable(self) -> Resources:
        return self.node.allocatable if self.node is not None else ZERO_RESOURCES

    @property
    def allowed_pod_number(self) -> int:
        return self.node.allowed_pod_number if self.node is not None else 0

    def __len__(self) -> int:
        return len(self.pods)

    def iter_pods(self) -> Iterator[Pod]:
        return iter(self.pods.values())

    def set_node(self, node: Node) -> None:
        self.node = node
        self.generation = next_generation()

    def add_pod(self, pod: Pod) -> None:
        """Count a pod on this node. Adding a uid already present replaces it."""
        if pod.uid in self.pods:
            self.remove_pod(pod)
        self.pods[pod.uid] = pod
        self.requested = self.requested + pod.requests
        self.non_zero_requested = self.non_zero_requested + _cpu_mem(pod.non_zero_requests)
        for p in pod.host_ports:
            key = (p.protocol, p.host_ip, p.host_port)
            self.used_ports[key] = self.used_ports.get(key, 0) + 1
        if pod.has_pod_affinity:
            self.pods_with_affinity.add(pod.uid)
        if pod.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.add(pod.uid)
        for v in pod.volumes:
            if v.kind == "persistentVolumeClaim":
                claim = f"{pod.namespace}/{v.ident}"
                self.pvc_ref_counts[claim] = self.pvc_ref_counts.get(claim, 0) + 1
        self.generation = next_generation()

    def remove_pod(self, pod: Pod) -> bool:
        """Stop counting a pod (by uid). Returns False, changing nothing, when it is not here."""
        old = self.pods.pop(pod.uid, None)
        if old is None:
            return False
        self.requested = self.requested - old.requests
        self.non_zero_requested = self.non_zero_requested - _cpu_mem(old.non_zero_requests)
        for p in old.host_ports:
            key = (p.protocol, p.host_ip, p.host_port)
            left = self.used_ports.get(key, 0) - 1
            if left > 0:
                self.used_ports[key] = left
            else:
                self.used_ports.pop(key, None)
        self.pods_with_affinity.discard(old.uid)
        self.pods_with_required_anti_affinity.discard(old.uid)
        for v in old.volumes:
            if v.kind == "persistentVolumeClaim":
                claim = f"{old.namespace}/{v.ident}"
                left = self.pvc_ref_counts.get(claim, 0) - 1
                if left > 0:
                    self.pvc_ref_counts[claim] = left
                else:
                    self.pvc_ref_counts.pop(claim, None)
        self.generation = next_generation()
        return True

    def clone(self) -> "NodeInfo":
        return NodeInfo(
            node=self.node,
            pods=dict(self.pods),
            requested=self.requested,
            non_zero_requested=self.non_zero_requested,
            used_ports=dict(self.used_ports),
            pods_with_affinity=set(self.pods_with_affinity),
            pods_with_required_anti_affinity=set(self.pods_with_required_anti_affinity),
            pvc_ref_counts=dict(self.pvc_ref_counts),
            generation=self.generation,
        )

    def __repr__(self) -> str:
        return f"NodeInfo({self.name or '<no node>'}, pods={len(self.pods)}, gen={self.generation})"


def _cpu_mem(r: Resources) -> Resources:
    """Only cpu and memory have non-zero defaults; the rest is tracked in ``requested``."""
    if not r.ephemeral_storage and not r.scalar:
        return r
    return Resources(r.milli_cpu, r.memory)


def node_info_of(node: Node, *pods: Pod) -> NodeInfo:
    """A NodeInfo for tests and the simulator: the node with ``pods`` on it."""
    info = NodeInfo(node)
    for p in pods:
        info.add_pod(p)
    return info
