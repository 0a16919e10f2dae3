"""The demo's simulated cluster and workload: API bodies (``cluster.bodies``), no I/O.

Nodes spread round-robin over three zones with 4/8/16 CPUs; roughly one in ten is a GPU node (tainted
``dedicated=gpu:NoSchedule``, offering ``nvidia.com/gpu``), one in five publishes DRA devices
(:data:`ACCELERATOR_DRIVER`: a ResourceSlice of :data:`ACCELERATORS_PER_NODE` accelerators, as a DRA
driver's kubelet plugin would: no driver runs on KWOK) and one node is cordoned.

The workload is what users run, made into pods by kube-controller-manager's controllers
(:func:`demo_workloads`): Deployments (web servers of three sizes, one per zone pinned by a node
selector, a cache at most one per host, GPU pods, inference pods whose accelerators come from
ResourceClaims the resourceclaim controller makes from a ResourceClaimTemplate, and two that fit
nowhere on purpose), a Job, a StatefulSet whose volume claims the PersistentVolume controller
provisions (the in-tree hostPath provisioner, StorageClass ``demo-hostpath``) and binds, and a
DaemonSet with a pod on every node. The demo creates them in :attr:`Workload.wave` order, each wave placed
before the next: the node agents first (clusters install them before applications), then the pods with
somewhere particular to go (a zone, a host of their own, a GPU, an accelerator, a volume), then the web
servers and the Job, which fit anywhere. Created all at once, the web servers could fill the one usable
node of a small zone before its pinned pods arrive, and those would rightly stay pending.
Every pod template names ``schedulerName``; each carries the label ``demo.kopf.dev/kind`` with what it
exercises, and the kinds in :data:`UNSCHEDULABLE_KINDS` are unschedulable on purpose, every other pod
must be placed.

The StorageClass waits for the first consumer (``volumeBindingMode: WaitForFirstConsumer``, what most
clouds' default classes say): a claim is provisioned once kopf-scheduler's VolumeBinding PreBind has told it
the node its pod goes to (the ``volume.kubernetes.io/selected-node`` annotation), then bound.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
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
    "ACCELERATOR_CLASS",
    "ACCELERATOR_DRIVER",
    "CONSTRAINED_KINDS",
    "GPU_RESOURCE",
    "KIND_LABEL",
    "STORAGE_CLASS",
    "UNSCHEDULABLE_KINDS",
    "ZONES",
    "DemoNode",
    "Workload",
    "demo_cluster_objects",
    "demo_node_body",
    "demo_nodes",
    "demo_workloads",
    "pod_requests",
]

ZONES = ("zone-a", "zone-b", "zone-c")
GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_NODE = 2
ACCELERATOR_DRIVER = "accelerator.demo.kopf.dev"
ACCELERATOR_CLASS = "accelerator.demo.kopf.dev"
ACCELERATORS_PER_NODE = 4
STORAGE_CLASS = "demo-hostpath"
KIND_LABEL = "demo.kopf.dev/kind"
UNSCHEDULABLE_KINDS = frozenset({"too-big", "no-match"})
#: the kinds placed in the second wave: each has few nodes it may go to (see :attr:`Workload.wave`)
CONSTRAINED_KINDS = frozenset({"zonal", "cache", "gpu", "inference", "db"})
_CPU_SIZES = (4, 8, 16)
_CLAIM_TEMPLATE = "one-accelerator"
_API = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
}


@dataclass(frozen=True)
class DemoNode:
    name: str
    zone: str
    cpu: int
    memory_gi: int
    gpu: bool = False
    cordoned: bool = False
    #: DRA devices its ResourceSlice publishes
    accelerators: int = 0

    @property
    def note(self) -> str:
        notes = (
            ("gpu (tainted)", self.gpu),
            (f"{self.accelerators} DRA accelerators", self.accelerators > 0),
            ("cordoned", self.cordoned),
        )
        return ", ".join(n for n, on in notes if on)


def demo_nodes(n: int) -> list[DemoNode]:
    """`n` nodes: zones and sizes round-robin, every 10th (from the 4th) a GPU node, every 5th (from the 2nd)
    a node with DRA accelerators, the last cordoned."""
    gpu = {i for i in range(n) if i % 10 == 3} or ({0} if n >= 2 else set())
    cordoned = n - 1 if n >= 3 else None
    nodes = []
    for i in range(n):
        cpu = _CPU_SIZES[(i // len(ZONES)) % len(_CPU_SIZES)]  # every zone gets every size
        accelerators = ACCELERATORS_PER_NODE if i % 5 == 1 and i not in gpu and i != cordoned else 0
        nodes.append(
            DemoNode(
                name=f"demo-node-{i:02d}",
                zone=ZONES[i % len(ZONES)],
                cpu=cpu,
                memory_gi=cpu * 4,
                gpu=i in gpu,
                cordoned=i == cordoned,
                accelerators=accelerators,
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


def demo_cluster_objects(nodes: list[DemoNode], namespace: str) -> list[dict[str, Any]]:
    """What the workload needs besides nodes, in creation order: the StorageClass, the accelerators'
    DeviceClass and ResourceSlices (one per node that has them), the ResourceClaimTemplate and the
    StatefulSet's headless Service (in `namespace`)."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS},
            "provisioner": "kubernetes.io/host-path",
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": ACCELERATOR_CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{ACCELERATOR_DRIVER}"'}}]},
        },
    ]
    for node in nodes:
        if node.accelerators:
            devices = [
                {"name": f"accel-{k}", "attributes": {"model": {"string": "demo-a1"}}} for k in range(node.accelerators)
            ]
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{node.name}-accelerators"},
                    "spec": {
                        "driver": ACCELERATOR_DRIVER,
                        "nodeName": node.name,
                        "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices,
                    },
                }
            )
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": _CLAIM_TEMPLATE, "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "accelerator", "exactly": {"deviceClassName": ACCELERATOR_CLASS}}]
                    }
                }
            },
        }
    )
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"name": "db", "port": 5432}]},
        }
    )
    return objects


@dataclass(frozen=True)
class Workload:
    """One workload object and what the demo expects of its pods."""

    kind: str  #: Deployment, Job, StatefulSet, DaemonSet
    name: str
    #: the pods it makes (a DaemonSet: one per node)
    pods: int
    body: dict[str, Any] = field(repr=False)

    @property
    def label(self) -> str:
        """Its pods' ``demo.kopf.dev/kind``."""
        return str(self.body["metadata"]["labels"][KIND_LABEL])

    @property
    def schedulable(self) -> bool:
        return self.label not in UNSCHEDULABLE_KINDS

    @property
    def wave(self) -> int:
        """When the demo creates it: 0 the node agents, 1 the pods with few places to go, 2 the rest."""
        if self.kind == "DaemonSet":
            return 0
        return 1 if self.label in CONSTRAINED_KINDS else 2


def _template(kind: str, scheduler_name: str, *, cpu: str, memory: str, gpus: int = 0) -> PodBody:
    pod = pod_body("template").labels({KIND_LABEL: kind, "app": kind}).scheduler(scheduler_name)
    pod.automount_service_account_token(False).termination_grace_period(0)
    pod.container("main", PAUSE_IMAGE).req(cpu=cpu, memory=memory)
    if gpus:  # extended resources need limits == requests
        pod.req({GPU_RESOURCE: gpus}).lim({GPU_RESOURCE: gpus})
    return pod


def _workload(kind: str, name: str, replicas: int, template: PodBody, **spec: Any) -> Workload:
    pod = template.obj()
    labels = pod["metadata"]["labels"]
    body: dict[str, Any] = {
        "apiVersion": _API[kind],
        "kind": kind,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": {"app": labels["app"]}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod["spec"]},
            **spec,
        },
    }
    if kind == "Job":  # a Job selects its pods by its own uid label
        del body["spec"]["selector"]
        body["spec"].update(parallelism=replicas, completions=replicas, backoffLimit=0)
    elif kind != "DaemonSet":
        body["spec"]["replicas"] = replicas
    return Workload(kind, name, replicas, body)


def demo_workloads(count: int, nodes: list[DemoNode], scheduler_name: str, seed: int = 1) -> list[Workload]:
    """Workloads making `count` pods, plus the DaemonSet's pod on each node. Roughly 5% of the pods
    are unschedulable on purpose; GPU, accelerator and one-per-host pods are capped so that they all fit
    on `nodes`. `seed` draws the web servers' sizes and how the web pods split among them."""
    rng = random.Random(seed)
    usable = [n for n in nodes if not n.cordoned]
    plain = [n for n in usable if not n.gpu]
    gpu_capacity = GPUS_PER_NODE * sum(1 for n in usable if n.gpu)
    accelerators = sum(n.accelerators for n in usable)
    zones_with_plain = sorted({n.zone for n in plain}) or list(ZONES[:1])

    def share(fraction: float, cap: int | None = None) -> int:
        wanted = max(1, round(count * fraction)) if count >= 10 else 0
        return min(wanted, cap) if cap is not None else wanted

    n_bad = share(0.05)
    n_gpu = share(0.04, gpu_capacity)
    n_cache = share(0.05, len(plain))
    n_inference = share(0.04, accelerators)
    n_batch = share(0.08)
    n_db = share(0.03)
    n_zonal = round(count * 0.2)
    n_web = max(0, count - n_bad - n_gpu - n_cache - n_inference - n_batch - n_db - n_zonal)

    out: list[Workload] = []

    def add(workload: Workload) -> None:
        if workload.pods or workload.kind == "DaemonSet":
            out.append(workload)

    # web servers of three sizes, spread softly over hosts (preferred pod anti-affinity)
    cuts = sorted(rng.randint(0, n_web) for _ in range(2))
    for size, replicas in zip(("s", "m", "l"), (cuts[0], cuts[1] - cuts[0], n_web - cuts[1]), strict=True):
        cpu = {"s": rng.choice(("100m", "200m")), "m": "250m", "l": rng.choice(("500m", "750m"))}[size]
        memory = {"s": "128Mi", "m": "256Mi", "l": "512Mi"}[size]
        tpl = _template("web", scheduler_name, cpu=cpu, memory=memory)
        tpl.labels({"app": f"web-{size}"}).pod_affinity(HOSTNAME_LABEL, {KIND_LABEL: "web"}, anti=True, weight=50)
        add(_workload("Deployment", f"web-{size}", replicas, tpl))
    # one per zone, pinned there by a node selector
    for k, zone in enumerate(zones_with_plain):
        replicas = n_zonal // len(zones_with_plain) + (1 if k < n_zonal % len(zones_with_plain) else 0)
        tpl = _template("zonal", scheduler_name, cpu=rng.choice(("250m", "500m")), memory="512Mi")
        tpl.labels({"app": f"zonal-{zone}"}).node_selector_map({ZONE_LABEL: zone})
        add(_workload("Deployment", f"zonal-{zone}", replicas, tpl))
    # at most one cache pod per host (required pod anti-affinity)
    tpl = _template("cache", scheduler_name, cpu="500m", memory="1Gi")
    tpl.pod_affinity(HOSTNAME_LABEL, {"app": "cache"}, anti=True)
    add(_workload("Deployment", "cache", n_cache, tpl))
    # GPUs as an extended resource, on the tainted GPU nodes
    tpl = _template("gpu", scheduler_name, cpu="500m", memory="1Gi", gpus=1)
    tpl.toleration("dedicated", "gpu", "NoSchedule")
    add(_workload("Deployment", "gpu", n_gpu, tpl))
    # accelerators through DRA: each pod's claim made from the template by the resourceclaim controller
    tpl = _template("inference", scheduler_name, cpu="250m", memory="512Mi")
    tpl.set("spec.resourceClaims", [{"name": "accelerator", "resourceClaimTemplateName": _CLAIM_TEMPLATE}])
    tpl.body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "accelerator"}]
    add(_workload("Deployment", "inference", n_inference, tpl))
    # a batch Job: KWOK completes its pods once they run
    tpl = _template("batch", scheduler_name, cpu="250m", memory="256Mi")
    tpl.set("spec.restartPolicy", "Never")
    add(_workload("Job", "batch", n_batch, tpl))
    # a StatefulSet whose claims the PersistentVolume controller provisions and binds
    tpl = _template("db", scheduler_name, cpu="500m", memory="1Gi")
    tpl.body["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/var/lib/db"}]
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    add(
        _workload(
            "StatefulSet",
            "db",
            n_db,
            tpl,
            serviceName="db",
            podManagementPolicy="Parallel",
            volumeClaimTemplates=[claim],
        )
    )
    # a DaemonSet: one small pod on every node, GPU-tainted and cordoned ones included
    tpl = _template("agent", scheduler_name, cpu="50m", memory="64Mi")
    tpl.tolerations([{"operator": "Exists"}])
    add(_workload("DaemonSet", "node-agent", len(nodes), tpl))
    # unschedulable on purpose: bigger than any node, and a node label no node has
    too_big, no_match = (n_bad + 1) // 2, n_bad // 2
    add(_workload("Deployment", "too-big", too_big, _template("too-big", scheduler_name, cpu="64", memory="256Gi")))
    tpl = _template("no-match", scheduler_name, cpu="100m", memory="128Mi")
    tpl.node_selector_map({"demo.kopf.dev/disk": "nvme"})
    add(_workload("Deployment", "no-match", no_match, tpl))
    return out


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
