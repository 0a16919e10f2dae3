"""The demo's simulated cluster and workload: API bodies (``cluster.bodies``), no I/O.

Nodes spread round-robin over three zones with 4/8/16 CPUs; roughly one in ten
is a GPU node (tainted ``dedicated=gpu:NoSchedule``, offering ``nvidia.com/gpu``)
and one node is cordoned. Pods are labelled ``demo.kopf.dev/kind`` with what
they exercise; the kinds in :data:`UNSCHEDULABLE_KINDS` are unschedulable on
purpose, every other pod must be placed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..cluster.bodies import (
    HOSTNAME_LABEL,
    PAUSE_IMAGE,
    ZONE_LABEL,
    NodeBody,
    PodBody,
    fake_node_ip,
    node_body,
    pod_body,
)
from ..cluster.kwok import kwok_node

__all__ = [
    "GPU_RESOURCE",
    "KIND_LABEL",
    "UNSCHEDULABLE_KINDS",
    "ZONES",
    "DemoNode",
    "demo_node_body",
    "demo_nodes",
    "demo_pods",
    "pod_requests",
]

ZONES = ("zone-a", "zone-b", "zone-c")
GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_NODE = 2
KIND_LABEL = "demo.kopf.dev/kind"
UNSCHEDULABLE_KINDS = frozenset({"too-big", "no-match"})
_CPU_SIZES = (4, 8, 16)


@dataclass(frozen=True)
class DemoNode:
    name: str
    zone: str
    cpu: int
    memory_gi: int
    gpu: bool = False
    cordoned: bool = False

    @property
    def note(self) -> str:
        return ", ".join(n for n, on in (("gpu (tainted)", self.gpu), ("cordoned", self.cordoned)) if on)


def demo_nodes(n: int) -> list[DemoNode]:
    """`n` nodes: zones and sizes round-robin, every 10th (from the 4th) a GPU node, the last cordoned."""
    gpu = {i for i in range(n) if i % 10 == 3} or ({0} if n >= 2 else set())
    cordoned = n - 1 if n >= 3 else None
    nodes = []
    for i in range(n):
        cpu = _CPU_SIZES[(i // len(ZONES)) % len(_CPU_SIZES)]  # every zone gets every size
        nodes.append(
            DemoNode(
                name=f"demo-node-{i:02d}",
                zone=ZONES[i % len(ZONES)],
                cpu=cpu,
                memory_gi=cpu * 4,
                gpu=i in gpu,
                cordoned=i == cordoned,
            )
        )
    return nodes


def demo_node_body(node: DemoNode, index: int) -> NodeBody:
    """The node as the demo creates it (``obj()``, status included), for KWOK to run: its labels,
    taints, capacity, address and nodeInfo, no conditions; KWOK's node-initialize stage makes it
    Ready (no pressure) once."""
    body = node_body(node.name).hostname().zone(node.zone).platform()
    if node.gpu:
        body.taint("dedicated", "gpu", "NoSchedule").labels({"demo.kopf.dev/accelerator": "gpu"})
    if node.cordoned:
        body.unschedulable()
    resources = {"cpu": str(node.cpu), "memory": f"{node.memory_gi}Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    if node.gpu:
        resources[GPU_RESOURCE] = str(GPUS_PER_NODE)
    body.capacity(resources).address(fake_node_ip(index)).node_info(osImage="kopf-scheduler demo")
    return kwok_node(body)


def _pod(name: str, kind: str, scheduler_name: str, *, cpu: str, memory: str, gpus: int = 0) -> PodBody:
    pod = pod_body(name).labels({KIND_LABEL: kind, "app": kind}).scheduler(scheduler_name)
    pod.automount_service_account_token(False).termination_grace_period(0)
    pod.container("main", PAUSE_IMAGE).req(cpu=cpu, memory=memory)
    if gpus:  # extended resources need limits == requests
        pod.req({GPU_RESOURCE: gpus}).lim({GPU_RESOURCE: gpus})
    return pod


def demo_pods(count: int, nodes: list[DemoNode], scheduler_name: str, seed: int = 1) -> list[dict[str, Any]]:
    """`count` mixed pods. Roughly 5% are unschedulable on purpose; GPU and anti-affinity pods
    are capped so that they all fit on `nodes`."""
    rng = random.Random(seed)
    usable = [n for n in nodes if not n.cordoned]
    gpu_capacity = GPUS_PER_NODE * sum(1 for n in usable if n.gpu)
    plain_nodes = sum(1 for n in usable if not n.gpu)
    zones_with_plain = sorted({n.zone for n in usable if not n.gpu})

    n_bad = max(1, round(count * 0.05)) if count >= 10 else 0
    n_gpu = min(max(1, round(count * 0.04)), gpu_capacity) if count >= 10 else 0
    n_cache = min(max(1, round(count * 0.05)), plain_nodes) if count >= 10 else 0
    n_zonal = round(count * 0.25)
    kinds = (["too-big", "no-match"] * n_bad)[:n_bad] + ["gpu"] * n_gpu + ["cache"] * n_cache
    kinds += ["zonal"] * n_zonal
    kinds += ["web"] * max(0, count - len(kinds))
    kinds = kinds[:count]
    rng.shuffle(kinds)

    pods = []
    for i, kind in enumerate(kinds):
        name = f"{kind}-{i:04d}"
        if kind == "web":
            cpu = rng.choice(("100m", "200m", "250m", "500m"))
            memory = rng.choice(("128Mi", "256Mi", "512Mi"))
            pod = _pod(name, kind, scheduler_name, cpu=cpu, memory=memory)
            # Preferred spreading of web pods over hosts (soft pod anti-affinity).
            pod.pod_affinity(HOSTNAME_LABEL, {"app": "web"}, anti=True, weight=50)
        elif kind == "zonal":
            zone = zones_with_plain[i % len(zones_with_plain)] if zones_with_plain else ZONES[0]
            pod = _pod(name, kind, scheduler_name, cpu=rng.choice(("250m", "500m")), memory="512Mi")
            pod.node_selector_map({ZONE_LABEL: zone})
        elif kind == "gpu":
            pod = _pod(name, kind, scheduler_name, cpu="500m", memory="1Gi", gpus=1)
            pod.toleration("dedicated", "gpu", "NoSchedule")
        elif kind == "cache":
            # At most one cache pod per host (required pod anti-affinity).
            pod = _pod(name, kind, scheduler_name, cpu="500m", memory="1Gi")
            pod.pod_affinity(HOSTNAME_LABEL, {"app": "cache"}, anti=True)
        elif kind == "too-big":
            pod = _pod(name, kind, scheduler_name, cpu="64", memory="256Gi")
        else:  # no-match
            pod = _pod(name, kind, scheduler_name, cpu="100m", memory="128Mi")
            pod.node_selector_map({"demo.kopf.dev/disk": "nvme"})  # no node has this label
        pods.append(pod.obj())
    return pods


_CPU_SUFFIX = {"m": 1e-3}
_MEM_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
}


def parse_quantity(value: str | int | float, *, memory: bool = False) -> float:
    """A Kubernetes quantity as a float (cores for cpu, bytes for memory); enough for the demo's values."""
    text = str(value)
    for suffix, factor in sorted(
        (_MEM_SUFFIX if memory else {**_CPU_SUFFIX, **_MEM_SUFFIX}).items(), key=lambda kv: -len(kv[0])
    ):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def pod_requests(pod: dict[str, Any]) -> tuple[float, float]:
    """(cpu cores, memory bytes) requested by a pod's containers (JSON as served by the apiserver)."""
    cpu = mem = 0.0
    for c in pod.get("spec", {}).get("containers", []):
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(req.get("cpu", 0))
        mem += parse_quantity(req.get("memory", 0), memory=True)
    return cpu, mem
