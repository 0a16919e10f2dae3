"""The demo's simulated cluster and workload: plain manifests (dicts), no I/O.

Nodes spread round-robin over three zones with 4/8/16 CPUs; roughly one in ten
is a GPU node (tainted ``dedicated=gpu:NoSchedule``, offering ``nvidia.com/gpu``)
and one node is cordoned. Pods are labelled ``demo.kopf.dev/kind`` with what
they exercise; the kinds in :data:`UNSCHEDULABLE_KINDS` are unschedulable on
purpose, every other pod must be placed.
"""

from __future__ import annotations

import datetime as _dt
import random
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GPU_RESOURCE",
    "KIND_LABEL",
    "UNSCHEDULABLE_KINDS",
    "ZONES",
    "DemoNode",
    "demo_nodes",
    "demo_pods",
    "node_manifest",
    "node_status",
    "pod_requests",
]

ZONES = ("zone-a", "zone-b", "zone-c")
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
GPUS_PER_NODE = 2
KIND_LABEL = "demo.kopf.dev/kind"
UNSCHEDULABLE_KINDS = frozenset({"too-big", "no-match"})
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
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


def node_manifest(node: DemoNode) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node.gpu:
        spec["taints"] = [dict(GPU_TAINT)]
    if node.cordoned:
        spec["unschedulable"] = True
    labels = {
        HOSTNAME_LABEL: node.name,
        ZONE_LABEL: node.zone,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if node.gpu:
        labels["demo.kopf.dev/accelerator"] = "gpu"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": labels}, "spec": spec}


def node_status(node: DemoNode, index: int) -> dict[str, Any]:
    """The status a kubelet would report (written through the status subresource): Ready, no pressure."""
    resources = {"cpu": str(node.cpu), "memory": f"{node.memory_gi}Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    if node.gpu:
        resources[GPU_RESOURCE] = str(GPUS_PER_NODE)
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = {"Ready": "True", "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}
    return {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": t, "status": s, "reason": f"Demo{t}", "lastHeartbeatTime": now, "lastTransitionTime": now}
                for t, s in conditions.items()
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.128.{index // 250}.{index % 250 + 1}"}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.37.2",
                "containerRuntimeVersion": "fake://0",
                "kernelVersion": "",
                "osImage": "kopf-scheduler demo",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
    }


def _pod(
    name: str,
    kind: str,
    scheduler_name: str,
    *,
    cpu: str,
    memory: str,
    extra: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    limits = {k: v for k, v in requests.items() if k == GPU_RESOURCE}  # extended resources need limits == requests
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {KIND_LABEL: kind, "app": kind, **(labels or {})}},
        "spec": {
            "schedulerName": scheduler_name,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": resources}],
            **spec,
        },
    }


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
            # Preferred spreading of web pods over hosts (soft pod anti-affinity).
            affinity = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 50,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "web"}},
                                "topologyKey": HOSTNAME_LABEL,
                            },
                        }
                    ]
                }
            }
            pods.append(_pod(name, kind, scheduler_name, cpu=cpu, memory=memory, affinity=affinity))
        elif kind == "zonal":
            zone = zones_with_plain[i % len(zones_with_plain)] if zones_with_plain else ZONES[0]
            pods.append(
                _pod(
                    name,
                    kind,
                    scheduler_name,
                    cpu=rng.choice(("250m", "500m")),
                    memory="512Mi",
                    nodeSelector={ZONE_LABEL: zone},
                )
            )
        elif kind == "gpu":
            pods.append(
                _pod(
                    name,
                    kind,
                    scheduler_name,
                    cpu="500m",
                    memory="1Gi",
                    extra={GPU_RESOURCE: "1"},
                    tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                )
            )
        elif kind == "cache":
            # At most one cache pod per host (required pod anti-affinity).
            affinity = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOSTNAME_LABEL},
                    ]
                }
            }
            pods.append(_pod(name, kind, scheduler_name, cpu="500m", memory="1Gi", affinity=affinity))
        elif kind == "too-big":
            pods.append(_pod(name, kind, scheduler_name, cpu="64", memory="256Gi"))
        else:  # no-match
            pods.append(
                _pod(
                    name, kind, scheduler_name, cpu="100m", memory="128Mi", nodeSelector={"demo.kopf.dev/disk": "nvme"}
                )
            )  # no node has this label
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
