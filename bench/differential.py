"""Differential test against upstream kube-scheduler v1.37.2: same cluster, same pods, pod by pod.

    python bench/differential.py --seeds 5                          # 40 nodes, 60 pods per seed
    python bench/differential.py --seeds 3 --nodes 20 --pods 30 --seed-start 7 --json out.json
    python bench/differential.py --seeds 5 --policy deploy/policies/bin-packing.yaml

For each seed, ``generate`` draws a random cluster and a list of pods (its knobs are the ``Knobs`` class below). One
local control plane (etcd + kube-apiserver) and one upstream kube-scheduler (its default profile, ``-v=10``) serve the
whole run. It runs no kube-controller-manager: the harness makes each state by hand and both sides must decide on
exactly that state, which controllers would change under them (the ReplicaSet controller would delete the pods that
name a ReplicaSet of 0 replicas as their owner, taint eviction would evict pods that tolerate a NoExecute taint for
a while, the garbage collector would delete what outlives its owner).

Per seed the previous seed's pods and nodes are deleted and the new nodes created; then the pods are
created ONE AT A TIME, and for each:

1. the state (nodes, services, replica sets, the pods upstream bound so far) is read from the API server;
2. the pod is created and upstream decides, as its log tells: it binds the pod ("Successfully bound pod to node"),
   or finds it unschedulable ("Unable to schedule pod; no fit; waiting", with the whole FitError text it also
   writes to the pod's PodScheduled=False condition and FailedScheduling event). Its per-plugin and total scores,
   and a preemption's target node and victims, come from the same log (the log, not the pod's condition, because
   after a preemption upstream may retry the pod and overwrite the condition before the harness reads it);
3. our algorithm decides for the same pod (as the API server stored it: admission filled in its priority) in the
   same state, through the simulator's Python API (``Simulation(explain=True).evaluate``: one attempt through
   ``core.scheduling.cycle.schedule_one``, prepare, decide and conclude as the operator runs them) with our default
   profile
   (what ``kopf-scheduler simulate`` runs without ``--policy``) or ``--policy``;
4. an unschedulable pod is deleted so it changes nothing later; if upstream preempted for it, its victims are
   gone for good (upstream deletes them; they have no grace period, and the harness force-deletes any left):
   the next pod sees the cluster without them, on both sides, and without the preemptor even if upstream
   managed to bind it in the meantime.

Before each pod the harness waits until upstream's log shows that its informers saw every node and pod change of
the step before, so both sides decide on the same state.

What is compared, per pod (``compare``):

- fits: both bind the pod, or both find it unschedulable (over all pods);
- best node: our chosen node is one of upstream's best-scoring nodes (over pods upstream bound; upstream breaks
  ties by heap order, we at random, so any member of the best set counts);
- feasible set: the same nodes pass the filters (over all pods);
- plugin scores: per (pod, node, plugin), the normalised score 0..100 of each score plugin both sides run
  (``PLUGIN_PEERS`` maps our names to upstream's), over pods upstream scored and nodes both found feasible. A plugin
  whose PreScore skipped the pod scores 0 on that side (it adds nothing to the total). Plugins only one side runs
  are listed apart, with how often they scored non-zero;
- messages: our unschedulable text equals upstream's whole FitError text, including any " preemption: ..." tail,
  or the error's text when the attempt ended in an error (over pods upstream found unschedulable);
- devices (``--dra``: ResourceSlices on some nodes, a ResourceClaim on some pods): the devices our Reserve
  allocated equal those upstream's PreBind wrote into the claim (over pods with a claim both bound to one node);
  with ``--dra-gates`` also into the claim it created for the pod's extended resources (DRAExtendedResource: the
  DeviceClass serves example.com/gpu, some pods ask for its implicit resource), DeviceTaintRules on some pools and
  tolerations on some claims;
- extended claims (``--dra-gates``): the claim our PreBind creates for the pod's extended resources (name prefix,
  annotations, owner, finalizers, requests, devices by request, consumers) and the pod's
  ``status.extendedResourceClaimStatus`` equal upstream's (over such pods both bound to one node).

Upstream's scores come from two kube-scheduler log lines at verbosity 10 (pkg/scheduler/schedule_one.go,
``prioritizeNodes``): "Plugin scored node for pod" (pod, plugin, node, score) and "Calculated node's final score
for pod" (pod, node, score). The plugin score logged is the WEIGHTED normalised score: ``RunScorePlugins``
(framework/runtime/framework.go, ``normalizeScores``) replaces each ``PluginScore.Score`` with score x weight
before prioritizeNodes logs it, so the harness divides by the plugin's weight, read from the "Using component
config" line the same process logs at startup (a weight of 0 means 1, ``getValidScoreWeights``). A plugin whose
PreScore returned Skip is absent from the lines (``nonSkippedScorePlugins``). With exactly one feasible node
upstream does not score at all (``schedulePod``): its best set is that node, and the pod adds no plugin comparisons.

Upstream runs with ``--feature-gates=OpportunisticBatching=false``: that beta optimisation (on by default in v1.37,
framework/runtime/batch.go) reuses the previous pod's scores as a "hint" for the next pod with the same
signature and then neither filters all nodes nor logs scores, which would hide the decision we want to compare.
It is meant to decide the same; nothing else of the default profile is changed.

Figures are agreement percentages. Best-node misses are attributed to causes by a counterfactual
(``counterfactual_best``: every plugin scores as upstream's except one kept from our side, or our weights); the worst
disagreements are printed with the pod, the node and the plugin.

Runs of the same seeds differ a little: upstream breaks score ties by heap order over the output of a parallel
filter, so the states drift apart after the first tie. Keep ``--nodes`` below 100: above, both sides score only a
sample of the feasible nodes (percentageOfNodesToScore), and the samples differ.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))  # when run as a script

from kubernetes import client, config

from kopf_scheduler.cluster import ControlPlane, bodies, ensure_binaries
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.model.parsing import parse_pod
from kopf_scheduler.core.model.resources import format_quantity, to_milli, to_units
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.edge.plugins import installed_registry
from kopf_scheduler.sim.loader import load_cluster, load_policy, load_scheduler_config
from kopf_scheduler.sim.simulator import Simulation

T = TypeVar("T")

NAMESPACE: Final = "diff"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
HOSTNAME: Final = "kubernetes.io/hostname"
GPU: Final = "example.com/gpu"

# =============================================================================================== the generator


@dataclass(frozen=True)
class Knobs:
    """Everything ``generate`` draws from. Probabilities are per node or per pod; every draw uses the seed's RNG."""

    nodes: int = 40
    pods: int = 60
    # --- nodes
    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")  # round-robin; zone-a/b in region-1, zone-c in region-2
    node_cpus: tuple[str, ...] = ("2", "4", "8", "16")
    node_memories: tuple[str, ...] = ("4Gi", "8Gi", "16Gi", "32Gi", "64Gi")
    p_node_unschedulable: float = 0.05  # spec.unschedulable (cordoned)
    p_node_few_pods: float = 0.05  # allocatable pods 3 instead of 110 ("Too many pods")
    p_node_gpu: float = 0.15  # allocatable example.com/gpu 1..4
    p_node_taint: float = 0.3  # then 1..2 taints from TAINTS, effect NoSchedule / PreferNoSchedule / NoExecute
    images_per_node: tuple[int, int] = (0, 4)  # how many of IMAGES a node has pulled (ImageLocality)
    # --- pods
    apps: int = 6  # app-0..: a ReplicaSet each (owner of its pods); every other app also has a Service
    p_app: float = 0.6  # the pod belongs to an app (label app=..., ownerReference to its ReplicaSet)
    p_no_requests: float = 0.15  # containers request nothing (scorers use the non-zero defaults)
    p_init_container: float = 0.15  # an init container, sometimes bigger than the containers
    p_sidecar: float = 0.05  # an init container with restartPolicy Always (counted with the containers)
    p_extended: float = 0.08  # requests example.com/gpu 1..2
    p_large: float = 0.08  # requests 60..95% of a node size: may need preemption
    p_huge: float = 0.04  # requests more cpu than any node has: unschedulable
    p_node_selector: float = 0.15
    p_required_node_affinity: float = 0.15
    p_preferred_node_affinity: float = 0.3
    p_pod_affinity: float = 0.12  # required or preferred, hostname or zone, selecting an app's pods
    p_pod_anti_affinity: float = 0.15
    p_tolerations: float = 0.4  # tolerate some of TAINTS
    p_tolerate_everything: float = 0.03  # [{operator: Exists}] as DaemonSets do (also tolerates cordoned nodes)
    p_spread: float = 0.2  # 1..2 topologySpreadConstraints over an app's pods
    p_host_port: float = 0.08
    # --- DynamicResources (off unless set: drawn from a second RNG, so the other draws of a seed stay the same)
    p_node_devices: float = 0.0  # a ResourceSlice of 1..3 devices of DRA_DRIVER (attribute model a / b) on the node
    p_claim: float = 0.0  # a ResourceClaim for 1..2 devices of the class, sometimes of model a only
    # DRAExtendedResource: the class serves example.com/gpu (the device plugins' resource: a node without it in its
    # allocatable gets DRA devices for it), and a pod without a claim asks 1..2 of the class's implicit resource
    p_dra_extended: float = 0.0
    # DRADeviceTaintRules: a DeviceTaintRule on a node's pool (a device, or all of it: NoSchedule, None or
    # NoExecute); a claim tolerates the taint key with p_claim_toleration
    p_taint_rule: float = 0.0
    p_claim_toleration: float = 0.0
    # --- storage (drawn from a second RNG, so the draws above make the same cluster and pods as before)
    p_node_csinode: float = 0.5  # a CSINode limiting the EBS (1..3) and GCE PD (1..2) CSI drivers, in-tree migrated
    p_csi_topology_label: float = 0.7  # a node with a CSINode has the EBS driver's zone label (migrated PVs need it)
    local_pvs_per_node: tuple[int, int] = (0, 2)  # local PVs (WaitForFirstConsumer class, 10..100Gi) per node
    p_inline_disk: float = 0.1  # 1..2 inline awsElasticBlockStore / gcePersistentDisk volumes (CSI migration)
    p_intree_claim: float = 0.06  # a claim bound to an in-tree EBS PV (counted against the EBS CSI driver)
    p_local_claim: float = 0.1  # 1..2 claims of the local class: VolumeBinding matches PVs and scores capacity
    p_immediate_claim: float = 0.01  # an unbound claim of an Immediate class: unresolvable
    p_node_capacity: float = 0.6  # a CSIStorageCapacity of the dynamic class for the node (20..200Gi)
    p_dynamic_claim: float = 0.08  # a claim of a WaitForFirstConsumer class whose CSI driver tracks capacity
    # --- several profiles and bursts (off unless set; drawn from RNGs of their own, so the draws above stay)
    scheduler_names: tuple[str, ...] = ()  # each pod names one (a KubeSchedulerConfiguration's profiles)
    burst: int = 0  # after a seed's pods: this many identical pods created at once (pending together upstream)
    priority_classes: tuple[tuple[str | None, float], ...] = (
        (None, 0.55),
        ("diff-low", 0.15),
        ("diff-mid", 0.1),
        ("diff-high", 0.15),
        ("diff-high-never", 0.05),
    )


#: name -> (value, preemptionPolicy)
PRIORITY_CLASSES: Final = {
    "diff-low": (10, "PreemptLowerPriority"),
    "diff-mid": (1000, "PreemptLowerPriority"),
    "diff-high": (100000, "PreemptLowerPriority"),
    "diff-high-never": (100000, "Never"),
}
#: taint key -> values
TAINTS: Final = {"dedicated": ("gpu", "infra"), "example.com/spot": ("true",), "example.com/flaky": ("",)}
#: image name -> size in MB (ImageLocality counts 23 MB .. 1000 MB per container)
IMAGES: Final = {
    "registry.example/web:1.0": 40,
    "registry.example/api:2.3": 180,
    "registry.example/batch:0.9": 650,
    "registry.example/ml:5": 1400,
    "registry.example/cache:7": 90,
    "registry.example/tiny:1": 5,
    "registry.example/db:15": 380,
    "registry.example/proxy:1.25": 60,
}
EBS_DRIVER: Final = "ebs.csi.aws.com"
EBS_ZONE: Final = "topology.ebs.csi.aws.com/zone"
MIGRATED_PLUGINS_ANNOTATION: Final = "storage.alpha.kubernetes.io/migrated-plugins"
MIGRATED_PLUGINS: Final = ",".join(
    f"kubernetes.io/{p}"
    for p in ("aws-ebs", "azure-disk", "azure-file", "cinder", "gce-pd", "portworx-volume", "vsphere-volume")
)
GCE_PD_DRIVER: Final = "pd.csi.storage.gke.io"
LOCAL_CLASS: Final = "diff-local"
DYNAMIC_CLASS: Final = "diff-dynamic"
DYNAMIC_DRIVER: Final = "diff.csi.example.com"
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
#: created once per run: the CSI driver of the dynamic class publishes CSIStorageCapacity
CSI_DRIVER: Final = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": DYNAMIC_DRIVER},
    "spec": {"storageCapacity": True, "attachRequired": False},
}
IMMEDIATE_CLASS: Final = "diff-immediate"
#: created once per run (cluster-scoped, the same for every seed)
STORAGE_CLASSES: Final = (
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": LOCAL_CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": DYNAMIC_CLASS},
        "provisioner": DYNAMIC_DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": IMMEDIATE_CLASS},
        "provisioner": "kubernetes.io/aws-ebs",
        "volumeBindingMode": "Immediate",
    },
)
LOCAL_PV_SIZES: Final = ("10Gi", "20Gi", "50Gi", "100Gi")
CLAIM_SIZES: Final = ("5Gi", "10Gi", "20Gi", "40Gi")
ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
CPU_REQUESTS: Final = ("50m", "100m", "250m", "500m", "1", "2")
MEMORY_REQUESTS: Final = ("64Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")


@dataclass
class Scenario:
    """One seed's objects, in creation order. Pods name their ReplicaSet owner by name; uids are filled at creation."""

    seed: int
    services: list[dict[str, Any]]
    replica_sets: list[dict[str, Any]]
    nodes: list[tuple[dict[str, Any], dict[str, Any]]]  # (Node body, status patch)
    pods: list[dict[str, Any]]
    #: DynamicResources: cluster-scoped DeviceClasses and ResourceSlices, and pod name -> its ResourceClaim
    device_objects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: CSINodes, PersistentVolumes and PersistentVolumeClaims, with the status each is given (None: none)
    storage: list[tuple[dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)
    #: pods created at once after the others (``Knobs.burst``), each burst in creation order
    bursts: list[list[dict[str, Any]]] = field(default_factory=list)


def generate(seed: int, knobs: Knobs) -> Scenario:
    """A random cluster and pod list; the same seed and knobs give the same objects."""
    rng = random.Random(seed)
    prefix = f"s{seed}"
    apps = [f"{prefix}-app{i}" for i in range(knobs.apps)]
    services = [_service(app) for i, app in enumerate(apps) if i % 2 == 0]
    replica_sets = [_replica_set(app) for app in apps]
    nodes = [_node(rng, knobs, f"{prefix}-n{i:02d}", i) for i in range(knobs.nodes)]
    node_names = [body["metadata"]["name"] for body, _ in nodes]
    pods = [_pod(rng, knobs, f"{prefix}-p{i:03d}", apps, node_names) for i in range(knobs.pods)]
    storage = _storage(random.Random(f"storage-{seed}"), knobs, nodes, pods)
    scenario = Scenario(seed, services, replica_sets, nodes, pods, storage=storage)
    if knobs.p_node_devices or knobs.p_claim or knobs.p_dra_extended:
        _devices(random.Random(seed * 7919 + 1), knobs, scenario, prefix)
    if knobs.scheduler_names:
        pick = random.Random(f"profiles-{seed}")
        for pod in pods:
            pod["spec"]["schedulerName"] = pick.choice(knobs.scheduler_names)
    if knobs.burst:
        scenario.bursts = [_burst(random.Random(f"burst-{seed}"), knobs, f"{prefix}-b")]
    return scenario


def _burst(rng: random.Random, knobs: Knobs, prefix: str) -> list[dict[str, Any]]:
    """`knobs.burst` replicas of one pod (a Deployment scaled up): its requests, image, and maybe a host port
    (then they go one per node), a preferred node affinity and tolerations; none of what makes a pod
    unsignable (pod affinity, spread constraints), so a profile that batches may batch them. With several
    profiles, the replicas name one, and one pod naming another comes in the middle (it breaks the run of
    consecutive cycles, as upstream's one queue would see it)."""
    body = bodies.pod_body(f"{prefix}00", NAMESPACE).labels({"kind": "replica"})
    body.automount_service_account_token(False).termination_grace_period(0)
    body.container("main", rng.choice(sorted(IMAGES)), **(_requests(rng, knobs) or {"cpu": "100m"}))
    if rng.random() < 0.5:
        body.host_port(8080)
    if rng.random() < 0.5:
        body.affinity(
            {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [_node_selector_requirement(rng, knobs)]}},
                        {"weight": 1, "preference": {"matchExpressions": [_node_selector_requirement(rng, knobs)]}},
                    ]
                }
            }
        )
    if tolerations := _tolerations(rng, knobs):
        body.tolerations(tolerations)
    template = body.obj()
    names = knobs.scheduler_names
    if names:
        template["spec"]["schedulerName"] = rng.choice(names)
    replicas = []
    for i in range(knobs.burst):
        replica = json.loads(json.dumps(template))
        replica["metadata"]["name"] = f"{prefix}{i:02d}"
        replicas.append(replica)
    others = [n for n in names if n != template["spec"].get("schedulerName")]
    if others and len(replicas) > 2:
        intruder = json.loads(json.dumps(template))
        intruder["metadata"]["name"] = f"{prefix}x"
        intruder["spec"]["schedulerName"] = rng.choice(others)
        replicas.insert(len(replicas) // 2, intruder)
    return replicas


#: the driver of the generated devices, and the class that selects them
DRA_DRIVER: Final = "gpu.diff.example.com"
DRA_API: Final = ("resource.k8s.io", "v1")
#: the implicit extended resource name of a DeviceClass (DRAExtendedResource)
IMPLICIT_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
TAINT_KEY: Final = "example.com/broken"
#: the cluster-scoped DRA kinds the harness lists for our side (plural, kind)
DRA_CLUSTER_KINDS: Final = (
    ("deviceclasses", "DeviceClass"),
    ("resourceslices", "ResourceSlice"),
    ("devicetaintrules", "DeviceTaintRule"),
)


def with_dra_gates(knobs: Knobs) -> Knobs:
    """``--dra-gates``: DRA as ``--dra`` draws it, and what v1.37 turns on by default for it (see ``Knobs``)."""
    return dataclasses.replace(
        knobs, p_node_devices=0.3, p_claim=0.3, p_dra_extended=0.3, p_taint_rule=0.3, p_claim_toleration=0.3
    )


def _devices(rng: random.Random, knobs: Knobs, scenario: Scenario, prefix: str) -> None:
    """DeviceClass, ResourceSlices and claims (DynamicResources) into `scenario`; each pod with a claim names it."""
    api = "resource.k8s.io/v1"
    device_class = f"{prefix}-gpu"
    cel = {"expression": f'device.driver == "{DRA_DRIVER}"'}
    class_spec: dict[str, Any] = {"selectors": [{"cel": cel}]}
    if knobs.p_dra_extended:
        class_spec["extendedResourceName"] = GPU
    scenario.device_objects.append(
        ("deviceclasses", {"apiVersion": api, "kind": "DeviceClass", "metadata": {"name": device_class},
                           "spec": class_spec})
    )  # fmt: skip
    for body, _ in scenario.nodes:
        if rng.random() >= knobs.p_node_devices:
            continue
        node = body["metadata"]["name"]
        devices = [
            {"name": f"gpu-{i}", "attributes": {"model": {"string": rng.choice("ab")}}}
            for i in range(rng.randint(1, 3))
        ]
        spec = {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        }
        scenario.device_objects.append(
            ("resourceslices", {"apiVersion": api, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                                "spec": {**spec, "devices": devices}})
        )  # fmt: skip
    for pod in scenario.pods:
        if rng.random() >= knobs.p_claim:
            continue
        name = pod["metadata"]["name"]
        exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount"}
        exactly["count"] = rng.randint(1, 2)
        if rng.random() < 0.3:
            exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{DRA_DRIVER}"].model == "a"'}}]
        if knobs.p_dra_extended and _requests_resource(pod, GPU):
            # upstream fails PreBind for a pod with a claim of its own whose extended resources a device plugin
            # serves (it creates the extended-resource claim with no request mapped): no claim for such a pod
            continue
        scenario.claims[name] = {
            "apiVersion": api,
            "kind": "ResourceClaim",
            "metadata": {"name": f"{name}-gpu", "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    # the draws of the knobs added since: after the ones above, so those make the same objects as before
    slices = [body for plural, body in scenario.device_objects if plural == "resourceslices"]
    for body in slices:
        if rng.random() >= knobs.p_taint_rule:
            continue
        pool = body["spec"]["pool"]["name"]
        selector: dict[str, str] = {"driver": DRA_DRIVER, "pool": pool}
        if rng.random() < 0.7:
            selector["device"] = rng.choice(body["spec"]["devices"])["name"]
        effect = rng.choice(("NoSchedule", "NoSchedule", "None", "NoExecute"))
        scenario.device_objects.append(
            ("devicetaintrules", {"apiVersion": api, "kind": "DeviceTaintRule", "metadata": {"name": f"{pool}-taint"},
                                  "spec": {"deviceSelector": selector, "taint": {"key": TAINT_KEY, "effect": effect}}})
        )  # fmt: skip
    for claim in scenario.claims.values():
        if rng.random() < knobs.p_claim_toleration:
            claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
                {"key": TAINT_KEY, "operator": "Exists"}
            ]
    for pod in scenario.pods:
        if rng.random() >= knobs.p_dra_extended or pod["metadata"]["name"] in scenario.claims:
            continue
        containers = pod["spec"]["containers"]
        where = containers[rng.randrange(len(containers))]
        if pod["spec"].get("initContainers") and rng.random() < 0.3:
            where = pod["spec"]["initContainers"][0]
        amount = str(rng.randint(1, 2))
        resources = where.setdefault("resources", {})
        for kind in ("requests", "limits"):
            resources.setdefault(kind, {})[IMPLICIT_PREFIX + device_class] = amount


def _requests_resource(pod: Mapping[str, Any], resource: str) -> bool:
    spec = pod["spec"]
    return any(
        resource in ((c.get("resources") or {}).get("requests") or {})
        for c in (*spec.get("initContainers", ()), *spec["containers"])
    )


def _storage(
    rng: random.Random, knobs: Knobs, nodes: Sequence[tuple[dict[str, Any], dict[str, Any]]], pods: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """CSINodes and local PVs for the nodes; volumes for some pods (added to their bodies) and the claims and
    in-tree PVs they need. Nothing is provisioned: upstream's PreBind would wait for a provisioner."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for body, _ in nodes:
        name = body["metadata"]["name"]
        if rng.random() < knobs.p_node_csinode:
            drivers = [(EBS_DRIVER, rng.randint(1, 3)), (GCE_PD_DRIVER, rng.randint(1, 2))]
            out.append((_csi_node(name, drivers), None))
            if rng.random() < knobs.p_csi_topology_label:
                labels = body["metadata"]["labels"]
                labels[EBS_ZONE] = labels[ZONE]
        for j in range(rng.randint(*knobs.local_pvs_per_node)):
            out.append(_local_pv(f"{name}-lpv{j}", name, rng.choice(LOCAL_PV_SIZES)))
        if rng.random() < knobs.p_node_capacity:
            size = rng.choice(("20Gi", "50Gi", "100Gi", "200Gi"))
            out.append((_capacity(name, size, rng.choice((None, None, "30Gi"))), None))
    for pod in pods:
        name = pod["metadata"]["name"]
        volumes = pod["spec"].setdefault("volumes", [])
        if rng.random() < knobs.p_inline_disk:
            for k in range(rng.randint(1, 2)):
                volumes.append({"name": f"disk{k}", **_inline_disk(rng)})
        if rng.random() < knobs.p_intree_claim:
            volume_id = f"vol-{rng.randrange(100, 130)}"
            zone = rng.choice((None, "zone-a", "zone-b"))
            out.append(_intree_pv(f"{name}-ebs", volume_id, zone, as_affinity=rng.random() < 0.5))
            out.append(_claim(f"{name}-ebs", "", "10Gi", volume=f"{name}-ebs"))
            volumes.append({"name": "ebs", "persistentVolumeClaim": {"claimName": f"{name}-ebs"}})
        if rng.random() < knobs.p_local_claim:
            for k in range(rng.randint(1, 2)):
                out.append(_claim(f"{name}-data{k}", LOCAL_CLASS, rng.choice(CLAIM_SIZES)))
                volumes.append({"name": f"data{k}", "persistentVolumeClaim": {"claimName": f"{name}-data{k}"}})
        if rng.random() < knobs.p_dynamic_claim:
            out.append(_claim(f"{name}-dyn", DYNAMIC_CLASS, rng.choice(CLAIM_SIZES)))
            volumes.append({"name": "dyn", "persistentVolumeClaim": {"claimName": f"{name}-dyn"}})
        if rng.random() < knobs.p_immediate_claim:
            out.append(_claim(f"{name}-imm", IMMEDIATE_CLASS, "1Gi"))
            volumes.append({"name": "imm", "persistentVolumeClaim": {"claimName": f"{name}-imm"}})
        if not volumes:
            del pod["spec"]["volumes"]
    return out


def _csi_node(node: str, drivers: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """A CSINode as a kubelet writes it: with the in-tree plugins it migrated in the annotation."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node, "annotations": {MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS}},
        "spec": {"drivers": [{"name": d, "nodeID": node, "allocatable": {"count": n}} for d, n in drivers]},
    }


def _capacity(node: str, size: str, max_size: str | None) -> dict[str, Any]:
    """What the dynamic class's driver can still provision on ``node`` (the harness lowers it as it provisions)."""
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": f"{node}-capacity", "namespace": NAMESPACE},
        "storageClassName": DYNAMIC_CLASS,
        "nodeTopology": {"matchLabels": {HOSTNAME: node}},
        "capacity": size,
    }
    if max_size is not None:
        body["maximumVolumeSize"] = max_size
    return body


def _inline_disk(rng: random.Random) -> dict[str, Any]:
    """An in-tree disk from a small pool, so pods share some (VolumeRestrictions) and nodes fill up (limits)."""
    i = rng.randrange(12)
    if rng.random() < 0.6:
        volume_id = f"aws://zone-a/vol-{i:02d}" if rng.random() < 0.25 else f"vol-{i:02d}"
        return {"awsElasticBlockStore": {"volumeID": volume_id}}
    return {"gcePersistentDisk": {"pdName": f"pd-{i:02d}", "readOnly": rng.random() < 0.5}}


def _local_pv(name: str, node: str, size: str) -> tuple[dict[str, Any], dict[str, Any]]:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": LOCAL_CLASS,
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }
    return body, {"status": {"phase": "Available"}}  # the PV controller's first step (no controller runs here)


def _intree_pv(
    name: str, volume_id: str, zone: str | None, *, as_affinity: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An in-tree EBS PV bound to the claim ``name``, its zone (if any) a label or a required node affinity."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {ZONE: zone} if zone and not as_affinity else {}},
        "spec": {
            "storageClassName": "",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "awsElasticBlockStore": {"volumeID": volume_id},
            "claimRef": {"namespace": NAMESPACE, "name": name},
        },
    }
    if zone and as_affinity:
        term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
        body["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return body, {"status": {"phase": "Bound"}}


def _claim(name: str, storage_class: str, size: str, *, volume: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """A claim; with ``volume`` it is created bound to it (as the PV controller would have left it)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }
    if volume:
        body["metadata"]["annotations"] = {ANN_BIND_COMPLETED: "yes"}
        body["spec"]["volumeName"] = volume
        return body, {"status": {"phase": "Bound", "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"]}}
    return body, {"status": {"phase": "Pending"}}


def _service(app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": app, "namespace": NAMESPACE},
        "spec": {"clusterIP": "None", "selector": {"app": app}, "ports": [{"port": 80}]},
    }


def _replica_set(app: str) -> dict[str, Any]:
    labels = {"app": app}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": app, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 0,  # nothing runs it; it exists so that default spreading finds the pods' owner
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.example/web:1.0"}]},
            },
        },
    }


def _node(rng: random.Random, knobs: Knobs, name: str, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Node to create, its status to patch); the draws in a fixed order, so a seed makes one cluster."""
    zone = knobs.zones[index % len(knobs.zones)]
    cpu = rng.choice(knobs.node_cpus)
    node = bodies.node_body(name).hostname().platform()
    node.zone(zone, "region-2" if zone == knobs.zones[-1] else "region-1")
    node.labels(
        {
            "disktype": rng.choice(("ssd", "hdd")),
            "tier": rng.choice(("gold", "silver", "bronze")),
            "example.com/cores": cpu,
        }
    )
    if rng.random() < knobs.p_node_unschedulable:
        node.unschedulable()
    if rng.random() < knobs.p_node_taint:
        for key in rng.sample(sorted(TAINTS), rng.randint(1, 2)):
            node.taint(key, rng.choice(TAINTS[key]), rng.choice(("NoSchedule", "PreferNoSchedule", "NoExecute")))
    allocatable = {
        "cpu": cpu,
        "memory": rng.choice(knobs.node_memories),
        "ephemeral-storage": "100Gi",
        "pods": "3" if rng.random() < knobs.p_node_few_pods else "110",
    }
    if rng.random() < knobs.p_node_gpu:
        allocatable[GPU] = str(rng.randint(1, 4))
    node.capacity(allocatable).ready(reason="KubeletReady").conditions(bodies.NO_PRESSURE, reason="Fake")
    node.set("status.images", [])  # listed even when empty, as a kubelet that pulled nothing reports it
    for image in rng.sample(sorted(IMAGES), rng.randint(*knobs.images_per_node)):
        node.image(IMAGES[image] * 1024 * 1024, image)
    node.node_info()
    return node.manifest(), node.status()


def _requests(rng: random.Random, knobs: Knobs) -> dict[str, str]:
    if rng.random() < knobs.p_no_requests:
        return {}
    out = {"cpu": rng.choice(CPU_REQUESTS)}
    if rng.random() < 0.85:  # sometimes cpu only: memory takes the scoring default
        out["memory"] = rng.choice(MEMORY_REQUESTS)
    return out


def _selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _node_selector_requirement(rng: random.Random, knobs: Knobs) -> dict[str, Any]:
    kind = rng.randrange(6)
    if kind == 0:
        return {"key": "disktype", "operator": "In", "values": [rng.choice(("ssd", "hdd"))]}
    if kind == 1:
        return {"key": ZONE, "operator": "NotIn", "values": [rng.choice(knobs.zones)]}
    if kind == 2:
        return {"key": "tier", "operator": "In", "values": rng.sample(("gold", "silver", "bronze"), 2)}
    if kind == 3:
        return {
            "key": "example.com/cores",
            "operator": rng.choice(("Gt", "Lt")),
            "values": [rng.choice(("3", "7", "12"))],
        }
    if kind == 4:
        return {"key": "disktype", "operator": "Exists"}
    return {"key": "example.com/no-such-label", "operator": "DoesNotExist"}


def _pod_affinity_term(rng: random.Random, apps: Sequence[str]) -> dict[str, Any]:
    return {"labelSelector": _selector(rng.choice(apps)), "topologyKey": rng.choice((HOSTNAME, ZONE))}


def _affinity(rng: random.Random, knobs: Knobs, apps: Sequence[str]) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    node: dict[str, Any] = {}
    if rng.random() < knobs.p_required_node_affinity:
        terms = [
            {"matchExpressions": [_node_selector_requirement(rng, knobs) for _ in range(rng.randint(1, 2))]}
            for _ in range(rng.randint(1, 2))
        ]
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if rng.random() < knobs.p_preferred_node_affinity:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": rng.randint(1, 100),
                "preference": {"matchExpressions": [_node_selector_requirement(rng, knobs)]},
            }
            for _ in range(rng.randint(1, 3))
        ]
    if node:
        affinity["nodeAffinity"] = node
    for key, p in (("podAffinity", knobs.p_pod_affinity), ("podAntiAffinity", knobs.p_pod_anti_affinity)):
        if rng.random() < p:
            if rng.random() < 0.4:
                affinity[key] = {"requiredDuringSchedulingIgnoredDuringExecution": [_pod_affinity_term(rng, apps)]}
            else:
                affinity[key] = {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": rng.randint(1, 100), "podAffinityTerm": _pod_affinity_term(rng, apps)}
                        for _ in range(rng.randint(1, 2))
                    ]
                }
    return affinity


def _tolerations(rng: random.Random, knobs: Knobs) -> list[dict[str, Any]]:
    if rng.random() < knobs.p_tolerate_everything:
        return [{"operator": "Exists"}]
    if rng.random() >= knobs.p_tolerations:
        return []
    out: list[dict[str, Any]] = []
    for key in rng.sample(sorted(TAINTS), rng.randint(1, len(TAINTS))):
        if rng.random() < 0.5:
            t: dict[str, Any] = {"key": key, "operator": "Exists"}
        else:
            t = {"key": key, "operator": "Equal", "value": rng.choice(TAINTS[key])}
        effect = rng.choice(("", "NoSchedule", "PreferNoSchedule", "NoExecute"))
        if effect:
            t["effect"] = effect
            if effect == "NoExecute" and rng.random() < 0.3:
                t["tolerationSeconds"] = 300
        out.append(t)
    return out


def _spread(rng: random.Random, app: str, pod: bodies.PodBody) -> None:
    for key in rng.sample((ZONE, HOSTNAME), rng.randint(1, 2)):
        max_skew, when = rng.randint(1, 3), rng.choice(("DoNotSchedule", "ScheduleAnyway"))
        min_domains = rng.randint(2, 4) if when == "DoNotSchedule" and rng.random() < 0.2 else None
        affinity_policy = rng.choice(("Honor", "Ignore")) if rng.random() < 0.15 else None
        taints_policy = rng.choice(("Honor", "Ignore")) if rng.random() < 0.15 else None
        pod.spread(
            max_skew,
            key,
            when,
            _selector(app),
            min_domains=min_domains,
            node_affinity_policy=affinity_policy,
            node_taints_policy=taints_policy,
        )


def _pod(rng: random.Random, knobs: Knobs, name: str, apps: Sequence[str], node_names: Sequence[str]) -> dict[str, Any]:
    """A pod; the draws in a fixed order (the images after the requests), so a seed makes one pod list."""
    app = rng.choice(apps) if rng.random() < knobs.p_app else None
    pod = bodies.pod_body(name, NAMESPACE).labels({"app": app} if app else {"kind": "solo"})
    if app:
        pod.owner("ReplicaSet", app, "", api_version="apps/v1")
    pod.automount_service_account_token(False).termination_grace_period(0)
    requests = _requests(rng, knobs)
    if rng.random() < knobs.p_large:
        cores = int(rng.choice(knobs.node_cpus))
        requests = {"cpu": f"{int(cores * 1000 * rng.uniform(0.6, 0.95))}m", "memory": "1Gi"}
    if rng.random() < knobs.p_huge:
        requests = {"cpu": "64", "memory": "1Gi"}
    pod.container("main", rng.choice(sorted(IMAGES)), **requests)
    helper = (_requests(rng, knobs), rng.choice(sorted(IMAGES))) if rng.random() < 0.25 else None
    if rng.random() < knobs.p_extended:
        gpus = str(rng.randint(1, 2))
        pod.req({GPU: gpus}).lim({GPU: gpus})
    if rng.random() < knobs.p_host_port:
        pod.host_port(rng.choice((8080, 9090)))
    if helper is not None:
        pod.container("helper", helper[1], **helper[0])
    if rng.random() < knobs.p_init_container:
        init = {"cpu": rng.choice(CPU_REQUESTS), "memory": rng.choice(MEMORY_REQUESTS)}
        pod.init_container("init", rng.choice(sorted(IMAGES)), **init)
    if rng.random() < knobs.p_sidecar:
        pod.init_container("sidecar", rng.choice(sorted(IMAGES)), restartable=True, cpu="100m", memory="64Mi")
    if rng.random() < knobs.p_node_selector:
        pick = rng.randrange(4)
        pod.node_selector_map(
            {"disktype": "ssd"}
            if pick == 0
            else {ZONE: rng.choice(knobs.zones)}
            if pick == 1
            else {"tier": "gold"}
            if pick == 2
            else {HOSTNAME: rng.choice(node_names)}
        )
    if affinity := _affinity(rng, knobs, apps):
        pod.affinity(affinity)
    if tolerations := _tolerations(rng, knobs):
        pod.tolerations(tolerations)
    if rng.random() < knobs.p_spread:
        _spread(rng, app or rng.choice(apps), pod)
    r, acc = rng.random(), 0.0
    for pc, weight in knobs.priority_classes:
        acc += weight
        if r < acc:
            if pc:
                pod.priority_class(pc)
            break
    return pod.obj()


_VOLUME_SHORT: Final = {"awsElasticBlockStore": "ebs", "gcePersistentDisk": "gcepd", "persistentVolumeClaim": "claim"}


def describe_pod(body: Mapping[str, Any]) -> str:
    """A one-line summary of what a pod asks for, to read next to a disagreement."""
    spec, meta = body.get("spec") or {}, body.get("metadata") or {}
    req: Counter[str] = Counter()
    for c in spec.get("containers") or ():
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            req[k] += _quantity(k, v)
    parts = [",".join(f"{k}={format_quantity(v, k)}" for k, v in sorted(req.items())) or "no-requests"]
    if spec.get("initContainers"):
        parts.append(
            "init:"
            + ",".join("sidecar" if c.get("restartPolicy") == "Always" else "init" for c in spec["initContainers"])
        )
    if any(p.get("hostPort") for c in spec.get("containers") or () for p in c.get("ports") or ()):
        parts.append("hostPort")
    if spec.get("nodeSelector"):
        parts.append("nodeSelector=" + ",".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in spec["nodeSelector"].items()))
    aff = spec.get("affinity") or {}
    na = aff.get("nodeAffinity") or {}
    if na.get("requiredDuringSchedulingIgnoredDuringExecution"):
        parts.append("nodeAffinity:required")
    if na.get("preferredDuringSchedulingIgnoredDuringExecution"):
        parts.append(f"nodeAffinity:preferred x{len(na['preferredDuringSchedulingIgnoredDuringExecution'])}")
    for key, short in (("podAffinity", "podAffinity"), ("podAntiAffinity", "antiAffinity")):
        for kind, terms in (aff.get(key) or {}).items():
            for t in terms:
                term = t.get("podAffinityTerm", t)
                topo = "host" if term["topologyKey"] == HOSTNAME else "zone"
                app = (term.get("labelSelector") or {}).get("matchLabels", {}).get("app", "?")
                parts.append(f"{short}:{'req' if kind.startswith('required') else 'pref'}/{topo}/{app}")
    for c in spec.get("topologySpreadConstraints") or ():
        topo = "host" if c["topologyKey"] == HOSTNAME else "zone"
        mode = "DNS" if c["whenUnsatisfiable"] == "DoNotSchedule" else "SA"
        parts.append(
            f"spread:{mode}/{topo}/skew{c['maxSkew']}" + (f"/minDomains{c['minDomains']}" if "minDomains" in c else "")
        )
    if spec.get("volumes"):
        kinds = [next((k for k in v if k != "name"), "?") for v in spec["volumes"]]
        parts.append("volumes:" + ",".join(_VOLUME_SHORT.get(k, k) for k in kinds))
    if spec.get("tolerations"):
        parts.append(f"tolerations x{len(spec['tolerations'])}")
    if spec.get("priorityClassName"):
        parts.append(f"priority={spec['priorityClassName']}")
    if meta.get("ownerReferences"):
        parts.append(f"owner={meta['ownerReferences'][0]['name']}")
    return " ".join(parts)


def _quantity(resource: str, value: Any) -> int:
    return to_milli(value) if resource == "cpu" else to_units(value)


# =============================================================================================== upstream's log


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One structured kube-scheduler (klog text format) log line: its message and key/value pairs."""

    msg: str
    values: Mapping[str, str]


#: the messages the harness reads (pkg/scheduler/schedule_one.go, eventhandlers.go, framework/preemption/,
#: cmd/kube-scheduler/app/options/configfile.go); every other line is skipped unparsed
MSG_ATTEMPT: Final = "Attempting to schedule pod"
MSG_PLUGIN_SCORE: Final = "Plugin scored node for pod"
MSG_TOTAL_SCORE: Final = "Calculated node's final score for pod"
MSG_BOUND: Final = "Successfully bound pod to node"
MSG_NO_FIT: Final = "Unable to schedule pod; no fit; waiting"
MSG_ERROR: Final = "Error scheduling pod; retrying"
MSG_PREEMPTION_TARGET: Final = "the target node for the preemption is determined"
MSG_PREEMPTED_VICTIM: Final = "Preemptor Pod preempted victim Pod"
MSG_PREEMPTION_DONE: Final = "Async Preemption finished completely"
MSG_CONFIG: Final = "Using component config"
MSG_HINT: Final = "OpportunisticBatch provided node hint"
NODE_EVENTS: Final = ("Add event for node", "Update event for node", "Delete event for node")
POD_DELETE_EVENTS: Final = ("Delete event for scheduled pod", "Delete event for unscheduled pod")
POD_ADD_EVENTS: Final = ("Add event for scheduled pod", "Add event for unscheduled pod")
_WANTED: Final = frozenset(
    (
        MSG_ATTEMPT,
        MSG_PLUGIN_SCORE,
        MSG_TOTAL_SCORE,
        MSG_BOUND,
        MSG_NO_FIT,
        MSG_ERROR,
        MSG_PREEMPTION_TARGET,
        MSG_PREEMPTED_VICTIM,
        MSG_PREEMPTION_DONE,
        MSG_CONFIG,
        MSG_HINT,
        *NODE_EVENTS,
        *POD_DELETE_EVENTS,
        *POD_ADD_EVENTS,
    )
)
_HEADER: Final = re.compile(r'^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] "((?:[^"\\]|\\.)*)"(.*)$')
_PAIR: Final = re.compile(r'\s([\w.-]+)=("(?:[^"\\]|\\.)*"|<|\S+)')


def _unquote(raw: str) -> str:
    if raw.startswith('"'):
        try:
            return str(json.loads(raw))  # Go's %q is JSON for the ASCII text these lines carry
        except ValueError:
            return raw[1:-1]
    return raw


class LogParser:
    """Turns klog text lines into the wanted records, fed in chunks of whole lines.

    A value written as ``key=<`` continues on the following tab-indented lines up to a line starting with `` >``
    (which may carry more pairs); only the component config needs one, but any wanted line may have one.
    """

    def __init__(self) -> None:
        self._open: tuple[str, dict[str, str], str, list[str]] | None = None  # msg, values, key, lines so far

    def feed(self, lines: Iterable[str]) -> Iterator[LogRecord]:
        for line in lines:
            if self._open is not None:
                msg, values, key, block = self._open
                if line.startswith("\t"):
                    block.append(line[1:])
                    continue
                self._open = None
                values[key] = "".join(block)
                if line.startswith(" >"):
                    for k, raw in _PAIR.findall(line[2:]):
                        values.setdefault(k, _unquote(raw))
                    yield LogRecord(msg, values)
                    continue
                yield LogRecord(msg, values)
            m = _HEADER.match(line)
            if m is None:
                continue
            msg = _unquote(f'"{m.group(1)}"')
            if msg not in _WANTED:
                continue
            values = {}
            opened = False
            for k, raw in _PAIR.findall(m.group(2)):
                if raw == "<":
                    self._open, opened = (msg, values, k, []), True
                    break
                values.setdefault(k, _unquote(raw))
            if not opened:
                yield LogRecord(msg, values)


def parse_log(lines: Iterable[str]) -> list[LogRecord]:
    """The wanted records of complete klog text lines."""
    return list(LogParser().feed(lines))


class KlogTail:
    """Follows a growing kube-scheduler log file and indexes the records the harness waits on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""
        self.by_pod: dict[str, list[LogRecord]] = defaultdict(list)  # "ns/name" -> its records, in order
        self.node_events: Counter[tuple[str, str]] = Counter()  # (message, node) -> count
        self.pod_events: Counter[tuple[str, str]] = Counter()  # (message, "ns/name") -> count
        self.config = ""
        self._parser = LogParser()

    def poll(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        if not data:
            return
        self._offset += len(data)
        text = self._partial + data.decode(errors="replace")
        cut = text.rfind("\n") + 1  # an unfinished last line waits for the next poll
        text, self._partial = text[:cut], text[cut:]
        for rec in self._parser.feed(text.splitlines(keepends=True)):
            self._index(rec)

    def _index(self, rec: LogRecord) -> None:
        v = rec.values
        if rec.msg == MSG_CONFIG:
            self.config = v.get("config", "")
        elif rec.msg in NODE_EVENTS:
            self.node_events[(rec.msg, v.get("node", ""))] += 1
        elif rec.msg in POD_DELETE_EVENTS or rec.msg in POD_ADD_EVENTS:
            self.pod_events[(rec.msg, v.get("pod", ""))] += 1
        elif rec.msg == MSG_PREEMPTED_VICTIM or rec.msg == MSG_PREEMPTION_DONE:
            self.by_pod[v.get("preemptor", "")].append(rec)
        else:
            self.by_pod[v.get("pod", "")].append(rec)

    def wait(self, what: str, ready: Callable[[], T], timeout: float = 30.0) -> T:
        """Poll the log until ``ready()`` is truthy; TimeoutError naming ``what`` otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            result = ready()
            if result:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"upstream kube-scheduler: no {what} in {self.path} after {timeout:.0f}s")
            time.sleep(0.003)


def score_weights(config_yaml: str, scheduler_name: str | None = None) -> dict[str, int]:
    """Score plugin weights of one profile of a logged KubeSchedulerConfiguration (0 means 1, as upstream): the
    one named `scheduler_name`, else the first."""
    import yaml

    profiles = yaml.safe_load(config_yaml).get("profiles") or [{}]
    profile = next((p for p in profiles if p.get("schedulerName") == scheduler_name), profiles[0])
    plugins = profile.get("plugins") or {}
    weights: dict[str, int] = {}
    disabled = {p["name"] for p in (plugins.get("score") or {}).get("disabled") or ()}
    for entry in [
        *((plugins.get("score") or {}).get("enabled") or ()),
        *((plugins.get("multiPoint") or {}).get("enabled") or ()),
    ]:
        if entry["name"] not in weights and entry["name"] not in disabled:
            weights[entry["name"]] = int(entry.get("weight") or 0) or 1
    return weights


# =============================================================================================== both sides' decisions


@dataclass
class Decision:
    """One scheduler's decision for one pod, in the shape both sides fill.

    ``scores[plugin][node]`` is the normalised 0..100 score (upstream plugin names on both sides); a plugin of the
    profile that skipped the pod is in ``skipped`` and absent from ``scores``. ``scored`` is False when upstream
    took its one-feasible-node shortcut.
    """

    node: str | None
    message: str = ""
    feasible: frozenset[str] = frozenset()
    scored: bool = False
    totals: dict[str, int] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    skipped: frozenset[str] = frozenset()
    error: str = ""
    # upstream only
    nominated_node: str = ""
    victims: tuple[str, ...] = ()
    attempts: int = 1
    # ours only: node -> "<plugin>: <reasons>" for filtered nodes
    filtered: dict[str, str] = field(default_factory=dict)
    #: DynamicResources: the devices the pod's claims got ("<pool>/<device>", in allocation order)
    devices: tuple[str, ...] = ()
    #: DRAExtendedResource: the claim made for the pod's extended resources (``extended_summary``)
    extended: tuple[tuple[str, ...], ...] = ()
    #: opportunistic batching placed it on the hint it got, unscored
    hinted: bool = False

    @property
    def best(self) -> frozenset[str]:
        if self.scored and self.totals:
            top = max(self.totals.values())
            return frozenset(n for n, t in self.totals.items() if t == top)
        return frozenset({self.node}) if self.node else frozenset()

    def score(self, plugin: str, node: str) -> int:
        """The normalised score, 0 for a plugin that skipped the pod."""
        return self.scores.get(plugin, {}).get(node, 0)


#: our score plugin name -> the upstream plugin that plays its part (identical names need no entry). The legacy
#: resource priorities are NodeResourcesFit scoring strategies upstream; SelectorSpread's role (spreading a
#: Service's / controller's pods) is played by PodTopologySpread's system default constraints since v1.24.
PLUGIN_PEERS: Final = {
    "NodeResourcesLeastAllocated": "NodeResourcesFit",
    "NodeResourcesMostAllocated": "NodeResourcesFit",
    "RequestedToCapacityRatio": "NodeResourcesFit",
    "SelectorSpread": "PodTopologySpread",
    "ServiceSpreading": "PodTopologySpread",
}
#: upstream v1.37's default plugins that implement Score (apis/config/v1/default_plugins.go; each plugin's Score)
UPSTREAM_SCORE_PLUGINS: Final = frozenset(
    (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    )
)


def compared_names(ours: Iterable[str]) -> dict[str, str]:
    """Our score plugin name -> the name it is compared under: its upstream peer, unless an earlier plugin of the
    same profile took that peer already (a policy with two resource priorities), then its own."""
    out: dict[str, str] = {}
    for name in ours:
        peer = PLUGIN_PEERS.get(name, name)
        out[name] = peer if peer not in out.values() else name
    return out


def upstream_decision(
    records: Sequence[LogRecord], weights: Mapping[str, int], score_plugins: Iterable[str]
) -> Decision:
    """Upstream's decision from one pod's log records: its FIRST scheduling attempt (later ones, if any, are only
    counted in ``attempts``: after a preemption upstream may retry the pod before the harness deletes it)."""
    starts = [i for i, r in enumerate(records) if r.msg == MSG_ATTEMPT]
    if not starts:
        raise ValueError("no scheduling attempt in the records")
    end = starts[1] if len(starts) > 1 else len(records)
    attempt = records[starts[0] : end]
    scores: dict[str, dict[str, int]] = defaultdict(dict)
    totals: dict[str, int] = {}
    d = Decision(node=None, attempts=len(starts), weights=dict(weights))
    hint = ""
    for r in attempt:
        v = r.values
        if r.msg == MSG_PLUGIN_SCORE:
            weight = weights.get(v["plugin"], 1)
            weighted = int(v["score"])
            if weighted % weight:
                raise ValueError(f"{v['plugin']} logged {weighted}, not a multiple of its weight {weight}")
            scores[v["plugin"]][v["node"]] = weighted // weight
        elif r.msg == MSG_TOTAL_SCORE:
            totals[v["node"]] = int(v["score"])
        elif r.msg == MSG_BOUND:
            d.node = v["node"]
        elif r.msg == MSG_NO_FIT:
            d.message = v["err"]  # the FitError text, as written to the PodScheduled condition and the event
        elif r.msg == MSG_PREEMPTION_TARGET:
            d.nominated_node = v["node"]  # what PostFilter returns, and the pod's status.nominatedNodeName
        elif r.msg == MSG_ERROR:
            d.error = v.get("err", "error")
        elif r.msg == MSG_HINT:
            d.hinted = v.get("hint", "") != ""  # bound there, checked below
            hint = v.get("hint", "")
    if d.hinted and d.node != hint:
        d.hinted = False  # the hint failed its filters: scored as usual
    d.victims = tuple(r.values["victim"] for r in records if r.msg == MSG_PREEMPTED_VICTIM)
    if d.node is None and not d.message and d.error:
        d.message = d.error  # an error (a plugin's): its text is the FailedScheduling message, as ours is
    d.scored = bool(totals)
    d.totals = totals
    d.scores = dict(scores)
    if d.scored:
        d.feasible = frozenset(totals)
        d.skipped = frozenset(p for p in score_plugins if p not in scores)
    elif d.node is not None:
        bound = next(r for r in attempt if r.msg == MSG_BOUND)
        if bound.values.get("feasibleNodes", "1") != "1":  # e.g. a batching hint: the decision is not in the log
            raise ValueError(f"bound without scores although feasibleNodes={bound.values['feasibleNodes']}")
        d.feasible = frozenset({d.node})  # one feasible node: upstream binds it without scoring
    return d


def our_decision(
    state: Sequence[Mapping[str, Any]],
    pod_body: Mapping[str, Any],
    profile: Profile | Sequence[Profile],
    *,
    seed: int,
) -> tuple[Decision, dict[str, str]]:
    """Our algorithm's decision for ``pod_body`` on the cluster ``state`` (API objects), and a one-line summary per
    node of that state (for reports). With several profiles, the one the pod's schedulerName names decides."""
    loaded = load_cluster(state, source="state")
    sim = Simulation(loaded.cache, profile, seed=seed, explain=True)
    pod = parse_pod(pod_body)
    placement = sim.evaluate(pod)
    e = placement.explanation
    assert e is not None
    profile = sim.lane(pod).profile
    names = compared_names(name for name, _ in profile.score_names)
    scores: dict[str, dict[str, int]] = defaultdict(dict)
    for v in e.scored:
        for part in v.scores:
            scores[names[part.plugin]][v.node] = part.score
    ours_names = {names[name]: w for name, w in profile.score_names}
    d = Decision(
        node=placement.node,
        message=placement.message if placement.node is None else "",
        feasible=frozenset(v.node for v in e.scored),
        scored=bool(e.scored),
        totals={v.node: v.total for v in e.scored if v.total is not None},
        scores=dict(scores),
        weights=ours_names,
        skipped=frozenset(p for p in ours_names if p not in scores) if e.scored else frozenset(),
        filtered={v.node: f"{v.plugin}: {'; '.join(v.reasons)}" for v in e.rejected},
        devices=tuple(
            "/".join(device.split("/")[1:])
            for line in placement.devices
            for device in line.split(": ", 1)[1].split(", ")
        ),
    )
    if placement.node is not None and any(line.startswith("<extended-resources>: ") for line in placement.devices):
        d.extended = our_extended_writes(state, pod_body, profile, seed=seed)
    return d, node_summaries(loaded.cache)


def our_extended_writes(
    state: Sequence[Mapping[str, Any]], pod_body: Mapping[str, Any], profile: Profile, *, seed: int
) -> tuple[tuple[str, ...], ...]:
    """What our PreBind writes for a pod with extended resources backed by DRA (the claim it creates, the pod's
    ``status.extendedResourceClaimStatus``): the same decision as ``our_decision``'s (a fresh copy of the state,
    the same seed) carried out against the simulation's API server."""
    sim = Simulation(load_cluster(state, source="state").cache, profile, seed=seed)
    pod = parse_pod(pod_body)
    if sim.schedule_one(pod).node is None:
        return ()
    got = sim.api.answer("GET", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
    ext = (got.body.get("status") or {}).get("extendedResourceClaimStatus") if got.ok else None
    if not ext:
        return ()
    claim = sim.cache.objects.dra.get_claim(pod.namespace, ext["resourceClaimName"])
    if claim is None or claim.source is None:
        return ()
    return extended_summary(claim.source, ext["requestMappings"], pod.name)


def extended_summary(
    claim: Mapping[str, Any], mappings: Sequence[Mapping[str, str]], pod: str
) -> tuple[tuple[str, ...], ...]:
    """What is compared of the claim made for a pod's extended resources: its name (less the random suffix),
    annotations, owner, finalizers, requests, devices by request, consumers; and the pod's request mappings."""
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    owners = [(o.get("kind"), o.get("name"), str(o.get("controller"))) for o in meta.get("ownerReferences") or ()]
    requests = [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"].get("allocationMode", ""), str(r["exactly"]["count"]))
        for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()
    ]
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
    return (
        (meta.get("name", "")[:-5], meta.get("generateName", "")),
        tuple(f"{k}={v}" for k, v in sorted((meta.get("annotations") or {}).items())),
        tuple("/".join(str(x) for x in o) for o in owners),
        tuple(meta.get("finalizers") or ()),
        tuple("/".join(r) for r in requests),
        tuple(f"{r['request']}={r['pool']}/{r['device']}" for r in results),
        tuple(f"{r.get('resource')}/{r.get('name')}" for r in status.get("reservedFor") or ()),
        tuple(f"{m['containerName']}/{m['resourceName']}/{m['requestName']}" for m in mappings),
    )


def our_burst(
    state: Sequence[Mapping[str, Any]],
    pod_bodies: Sequence[Mapping[str, Any]],
    profile: Profile | Sequence[Profile],
    *,
    seed: int,
) -> list[Decision]:
    """Our decisions for pods pending at once on the cluster ``state``: one simulation of the burst
    (``Simulation.run(burst=True)``), each pod's node or message and whether batching placed it on a hint."""
    loaded = load_cluster(state, source="state")
    sim = Simulation(loaded.cache, profile, seed=seed)
    result = sim.run([parse_pod(b) for b in pod_bodies], burst=True)
    return [
        Decision(node=p.node, message=p.message if p.node is None else "", hinted=p.batched) for p in result.placements
    ]


def node_summaries(cache: SchedulerCache) -> dict[str, str]:
    out = {}
    for name in cache.node_names():
        info = cache.get_node_info(name)
        if info is None or info.node is None:
            continue
        a, r, n = info.allocatable, info.requested, info.node
        labels = n.labels
        taints = ",".join(f"{t.key.rsplit('/', 1)[-1]}={t.value}:{t.effect}" for t in n.taints)
        out[name] = (
            f"cpu {format_quantity(r.milli_cpu, 'cpu')}/{format_quantity(a.milli_cpu, 'cpu')} "
            f"mem {format_quantity(r.memory, 'memory')}/{format_quantity(a.memory, 'memory')} "
            f"pods {len(info.pods)}/{info.allowed_pod_number} "
            f"{labels.get(ZONE, '-')} {labels.get('disktype', '-')} {labels.get('tier', '-')}"
            + (f" gpu {a.get(GPU)}" if a.get(GPU) else "")
            + (f" taints {taints}" if taints else "")
            + (" cordoned" if n.unschedulable else "")
            + f" images {len(n.images)}"
        )
    return out


# =============================================================================================== comparing


@dataclass
class PodCase:
    """One pod: what it asked for, and both decisions in the same state."""

    seed: int
    pod: str
    summary: str
    upstream: Decision
    ours: Decision
    nodes: dict[str, str] = field(default_factory=dict)  # node -> summary of the state both decided on
    bound: frozenset[str] = frozenset()  # the pods bound in that state ("ns/name")
    #: 0, or the number of the burst the pod came in (``compare_burst`` compares those)
    burst: int = 0


@dataclass(frozen=True)
class ScorePair:
    pod: str
    node: str
    plugin: str
    ours: int
    upstream: int
    upstream_skipped: bool
    ours_skipped: bool


@dataclass
class PodComparison:
    case: PodCase
    fits: bool
    feasible: bool
    best: bool | None  # None: upstream did not bind the pod
    best_sets_equal: bool | None
    message: bool | None  # None: upstream bound the pod
    pairs: list[ScorePair]
    #: plugin -> [(node, score)] for plugins only one side ran, where the score is not 0
    only_upstream: dict[str, list[tuple[str, int]]]
    only_ours: dict[str, list[tuple[str, int]]]
    #: DynamicResources: the same devices allocated (None: no claim, or not bound to the same node)
    devices: bool | None = None
    #: DRAExtendedResource: the same claim and pod status written (None: no such claim, or not the same node)
    extended: bool | None = None


def compare(case: PodCase) -> PodComparison:
    up, ours = case.upstream, case.ours
    bound = up.node is not None
    pairs: list[ScorePair] = []
    only_up: dict[str, list[tuple[str, int]]] = {}
    only_ours: dict[str, list[tuple[str, int]]] = {}
    if up.scored and ours.scored:
        nodes = sorted(up.feasible & ours.feasible)
        up_plugins = set(up.scores) | set(up.skipped)
        our_plugins = set(ours.scores) | set(ours.skipped)
        for plugin in sorted(up_plugins & our_plugins):
            for node in nodes:
                pairs.append(
                    ScorePair(
                        case.pod,
                        node,
                        plugin,
                        ours.score(plugin, node),
                        up.score(plugin, node),
                        plugin in up.skipped,
                        plugin in ours.skipped,
                    )
                )
        for plugin in sorted(up_plugins - our_plugins):
            nonzero = [(n, up.score(plugin, n)) for n in nodes if up.score(plugin, n)]
            only_up[plugin] = nonzero
        for plugin in sorted(our_plugins - up_plugins):
            nonzero = [(n, ours.score(plugin, n)) for n in nodes if ours.score(plugin, n)]
            only_ours[plugin] = nonzero
    return PodComparison(
        case=case,
        fits=bound == (ours.node is not None),
        feasible=up.feasible == ours.feasible,
        best=(ours.node in up.best) if bound else None,
        best_sets_equal=(ours.best == up.best) if bound else None,
        message=(ours.message == up.message) if not bound else None,
        pairs=pairs,
        only_upstream=only_up,
        only_ours=only_ours,
        devices=(ours.devices == up.devices) if bound and up.devices and ours.node == up.node else None,
        extended=(ours.extended == up.extended) if bound and up.extended and ours.node == up.node else None,
    )


@dataclass
class BurstReport:
    """Pods created at once (``Knobs.burst``): placements pod by pod, and what batching did on both sides."""

    cases: list[PodCase]

    def metrics(self) -> dict[str, dict[str, float | int]]:
        def rate(ok: int, n: int) -> dict[str, float | int]:
            return {"agree": ok, "of": n, "percent": round(100.0 * ok / n, 2) if n else 100.0}

        bursts: dict[int, list[PodCase]] = defaultdict(list)
        for c in self.cases:
            bursts[c.seed * 1000 + c.burst].append(c)
        unplaced = [c for c in self.cases if c.upstream.node is None]
        return {
            "burst_nodes": rate(sum(c.ours.node == c.upstream.node for c in self.cases), len(self.cases)),
            "burst_node_multisets": rate(
                sum(
                    sorted(str(c.ours.node) for c in b) == sorted(str(c.upstream.node) for c in b)
                    for b in bursts.values()
                ),
                len(bursts),
            ),
            "burst_messages": rate(sum(c.ours.message == c.upstream.message for c in unplaced), len(unplaced)),
            "burst_hinted": rate(sum(c.ours.hinted == c.upstream.hinted for c in self.cases), len(self.cases)),
        }


def render_burst(report: BurstReport) -> str:
    m = report.metrics()
    labels = {
        "burst_nodes": "burst: the same node, pod by pod",
        "burst_node_multisets": "burst: the same nodes taken, as a whole (ties may swap pods)",
        "burst_messages": "burst: unschedulable message, whole text",
        "burst_hinted": "burst: placed on a batching hint, unscored, alike",
    }
    lines = ["", "BURSTS (identical pods pending at once)"]
    lines += _table(
        [(labels[k], f"{v['agree']}/{v['of']}", _pct(int(v["agree"]), int(v["of"]))) for k, v in m.items()],
        ("METRIC", "AGREE", "%"),
    )
    hinted = (sum(c.upstream.hinted for c in report.cases), sum(c.ours.hinted for c in report.cases))
    lines.append(f"upstream placed {hinted[0]} of {len(report.cases)} burst pods on a hint, we {hinted[1]}")
    for c in [c for c in report.cases if c.ours.node != c.upstream.node][:5]:
        up, ours = c.upstream, c.ours
        lines.append(
            f"  {c.pod} [{c.summary}] upstream {up.node or 'unschedulable'}{' (hint)' if up.hinted else ''}"
            f" ours {ours.node or 'unschedulable'}{' (hint)' if ours.hinted else ''}"
        )
    return "\n".join(lines)


def message_parts(message: str) -> tuple[Counter[str], str]:
    """A FitError text as (reason -> node count, the ' preemption: ...' tail with its numbers as N)."""
    main, _, tail = message.partition(" preemption: ")
    body = main.split(": ", 1)[1] if ": " in main else main
    reasons: Counter[str] = Counter()
    for part in re.split(r", (?=\d+ )", body.rstrip(".")):
        count, _, reason = part.partition(" ")
        if count.isdigit():
            reasons[reason] += int(count)
        elif part:
            reasons[part] += 0  # a PreFilter message: no count
    return reasons, re.sub(r"\d+", "N", tail)


def message_differences(ours: str, upstream: str) -> list[str]:
    """Why two FitError texts differ, as category strings (numbers replaced by N) to tally across pods."""
    if not ours:
        return ["ours: scheduled"]
    o, o_tail = message_parts(ours)
    u, u_tail = message_parts(upstream)
    out = [f"reason only ours: {r}" for r in sorted(o.keys() - u.keys())]
    out += [f"reason only upstream: {r}" for r in sorted(u.keys() - o.keys())]
    out += [f"count differs: {r}" for r in sorted(o.keys() & u.keys()) if o[r] != u[r]]
    if o_tail != u_tail:
        out.append(f"preemption tail: upstream '{u_tail}'" + (f" vs ours '{o_tail}'" if o_tail else ", ours none"))
    if not out:
        out.append("same reasons and counts, different text (order or punctuation)")
    return out


WEIGHTS: Final = "weights"


def counterfactual_best(case: PodCase, keep_ours: str | None) -> frozenset[str]:
    """The best nodes (among those both sides found feasible) if every score plugin scored as upstream's, with
    upstream's weights, except ``keep_ours``: a plugin that keeps our scores (0 if we do not run it; our weight if
    upstream does not run it), or ``WEIGHTS`` (our weights for the plugins both run, on upstream's scores).

    If this set leaves upstream's best set, ``keep_ours`` alone is enough to make us miss: that is how the report
    attributes best-node misses to causes.
    """
    up, ours = case.upstream, case.ours
    nodes = up.feasible & ours.feasible
    plugins = set(up.scores) | set(up.skipped) | set(ours.scores) | set(ours.skipped)
    totals: dict[str, int] = {}
    for node in nodes:
        total = 0
        for plugin in plugins:
            side = ours if plugin == keep_ours else up
            upstream_runs = plugin in up.scores or plugin in up.skipped
            if keep_ours == WEIGHTS and (plugin in ours.scores or plugin in ours.skipped):
                weight = ours.weights.get(plugin, 1)
            elif upstream_runs:
                weight = up.weights.get(plugin, 1)
            else:
                weight = ours.weights.get(plugin, 1) if plugin == keep_ours else 0
            total += side.score(plugin, node) * weight
        totals[node] = total
    if not totals:
        return frozenset()
    top = max(totals.values())
    return frozenset(n for n, t in totals.items() if t == top)


@dataclass
class PluginTally:
    compared: int = 0
    equal: int = 0
    upstream_skipped: int = 0  # pairs where upstream skipped (0) ...
    upstream_skipped_equal: int = 0  # ... and we agreed
    abs_diff: int = 0
    pods: int = 0
    pods_all_equal: int = 0
    pods_constant_offset: int = 0  # the difference is the same on every node: it cannot change a decision
    worst: list[ScorePair] = field(default_factory=list)  # the biggest difference of each of the worst pods


@dataclass
class Report:
    """Every figure the harness prints, from a list of pod comparisons."""

    comparisons: list[PodComparison]
    plugins: dict[str, PluginTally]
    only_upstream: dict[
        str, tuple[int, int]
    ]  # plugin -> (pods where it scored non-zero somewhere, pods it varied over nodes)
    only_ours: dict[str, tuple[int, int]]
    message_categories: Counter[str]
    #: cause -> pods upstream scored where that cause alone (everything else as upstream) makes us miss its best set;
    #: "" is the baseline: nothing kept from our side, only the feasible sets differ
    miss_causes: dict[str, int]

    def rate(self, attr: str) -> tuple[int, int]:
        values = [getattr(c, attr) for c in self.comparisons if getattr(c, attr) is not None]
        return sum(1 for v in values if v), len(values)

    def metrics(self) -> dict[str, dict[str, float | int]]:
        out: dict[str, dict[str, float | int]] = {}
        for name, attr in (
            ("fits", "fits"),
            ("best_node", "best"),
            ("best_sets_equal", "best_sets_equal"),
            ("feasible_sets_equal", "feasible"),
            ("messages", "message"),
            ("devices", "devices"),
            ("extended_claims", "extended"),
        ):
            ok, n = self.rate(attr)
            out[name] = {"agree": ok, "of": n, "percent": round(100.0 * ok / n, 2) if n else 100.0}
        compared = sum(t.compared for t in self.plugins.values())
        equal = sum(t.equal for t in self.plugins.values())
        out["plugin_scores"] = {
            "agree": equal,
            "of": compared,
            "percent": round(100.0 * equal / compared, 2) if compared else 100.0,
        }
        return out


def build_report(comparisons: list[PodComparison], *, worst: int = 5) -> Report:
    plugins: dict[str, PluginTally] = defaultdict(PluginTally)
    only_up: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    only_ours: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    categories: Counter[str] = Counter()
    for c in comparisons:
        by_plugin: dict[str, list[ScorePair]] = defaultdict(list)
        for p in c.pairs:
            by_plugin[p.plugin].append(p)
        for plugin, pairs in by_plugin.items():
            t = plugins[plugin]
            t.pods += 1
            diffs = {p.ours - p.upstream for p in pairs}
            if diffs == {0}:
                t.pods_all_equal += 1
            elif len(diffs) == 1:
                t.pods_constant_offset += 1
            for p in pairs:
                t.compared += 1
                t.equal += p.ours == p.upstream
                t.upstream_skipped += p.upstream_skipped
                t.upstream_skipped_equal += p.upstream_skipped and p.ours == p.upstream
                t.abs_diff += abs(p.ours - p.upstream)
            differing = [p for p in pairs if p.ours != p.upstream]
            if differing:  # one example per pod, the pods with the biggest differences first
                t.worst.append(max(differing, key=lambda p: abs(p.ours - p.upstream)))
                t.worst = sorted(t.worst, key=lambda p: -abs(p.ours - p.upstream))[:worst]
        for side, acc in ((c.only_upstream, only_up), (c.only_ours, only_ours)):
            for plugin, nonzero in side.items():
                acc[plugin][0] += bool(nonzero)
                scores = [s for _, s in nonzero]
                n_nodes = len(c.case.upstream.feasible & c.case.ours.feasible)
                acc[plugin][1] += bool(nonzero) and (len(set(scores)) > 1 or len(scores) < n_nodes)
        if c.message is False:
            categories.update(set(message_differences(c.case.ours.message, c.case.upstream.message)))
    causes: Counter[str] = Counter()
    for c in comparisons:
        up, ours = c.case.upstream, c.case.ours
        if up.node is None or not up.scored or not ours.scored:
            continue
        for cause in ["", WEIGHTS, *sorted(set(up.scores) | set(up.skipped) | set(ours.scores) | set(ours.skipped))]:
            if not counterfactual_best(c.case, cause or None) <= up.best:
                causes[cause] += 1
    return Report(
        comparisons,
        dict(plugins),
        {k: (v[0], v[1]) for k, v in only_up.items()},
        {k: (v[0], v[1]) for k, v in only_ours.items()},
        categories,
        dict(causes),
    )


# =============================================================================================== rendering


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def _pct(ok: int, n: int) -> str:
    return f"{100.0 * ok / n:.1f}%" if n else "-"


def _plugin_gap(c: PodComparison) -> str:
    """Per plugin, how upstream's pick beat our node upstream, and how ours beat it ours (weighted points)."""
    up, ours = c.case.upstream, c.case.ours
    b, o = up.node, ours.node
    if b is None or o is None or b == o:
        return ""
    parts = []
    for plugin in sorted(set(up.scores) | set(ours.scores)):
        du = (up.score(plugin, b) - up.score(plugin, o)) * up.weights.get(plugin, 1) if o in up.feasible else None
        do = (
            (ours.score(plugin, o) - ours.score(plugin, b)) * ours.weights.get(plugin, 1)
            if b in ours.feasible
            else None
        )
        if du or do:
            parts.append(
                f"{plugin} up{du:+d}/ours{do:+d}" if du is not None and do is not None else f"{plugin} up{du}/ours{do}"
            )
    return ", ".join(parts)


def render(report: Report, *, worst: int = 5) -> str:
    m = report.metrics()
    lines = ["AGREEMENT WITH UPSTREAM kube-scheduler v1.37.2", ""]
    labels = {
        "fits": "fits or not (all pods)",
        "best_node": "our node in upstream's best set (pods upstream bound)",
        "best_sets_equal": "  best sets equal (stricter)",
        "feasible_sets_equal": "feasible node sets equal (all pods)",
        "plugin_scores": "per-plugin normalised scores (pod, node, plugin)",
        "messages": "unschedulable message, whole text (pods upstream could not bind)",
        "devices": "DRA: the same devices allocated (pods with claims bound to the same node)",
        "extended_claims": "DRA: the same extended-resource claim and pod status written (same node)",
    }
    lines += _table(
        [(labels[k], f"{v['agree']}/{v['of']}", _pct(int(v["agree"]), int(v["of"]))) for k, v in m.items()],
        ("METRIC", "AGREE", "%"),
    )

    lines += ["", "PER PLUGIN (both sides run it; upstream-skipped counts as 0)"]
    rows = []
    for plugin, t in sorted(report.plugins.items(), key=lambda kv: kv[1].equal / max(kv[1].compared, 1)):
        rows.append(
            (
                plugin,
                f"{t.equal}/{t.compared}",
                _pct(t.equal, t.compared),
                f"{t.abs_diff / max(t.compared, 1):.1f}",
                f"{t.pods_all_equal}/{t.pods}",
                f"{t.pods_constant_offset}",
                f"{t.upstream_skipped_equal}/{t.upstream_skipped}",
            )
        )
    lines += _table(
        rows,
        ("PLUGIN", "EQUAL", "%", "MEAN|DIFF|", "PODS ALL EQUAL", "PODS CONST OFFSET", "UPSTREAM SKIPPED: WE AGREE"),
    )
    for side, acc in (("upstream", report.only_upstream), ("ours", report.only_ours)):
        for plugin, (nonzero, varied) in sorted(acc.items()):
            lines.append(
                f"only {side} runs {plugin}: non-zero in {nonzero} pods, "
                f"varying over nodes (can change the choice) in {varied}"
            )

    misses = [c for c in report.comparisons if c.best is False]
    if misses:
        lines += [
            "",
            f"CAUSES OF BEST-NODE MISSES ({len(misses)} misses): with every plugin scoring as upstream's and "
            "upstream's weights, keeping only this one of ours, this many pods would miss upstream's best set",
            "(a counterfactual per cause: each row includes the first, and a row may exceed the real misses, "
            "where causes mix)",
        ]
        causes = [
            ("(nothing: feasible sets differ)" if cause == "" else cause, str(n))
            for cause, n in sorted(report.miss_causes.items(), key=lambda kv: (kv[0] != "", -kv[1]))
        ]
        lines += _table(causes, ("KEPT FROM OURS", "PODS MISSING"))

    bad = [c for c in report.comparisons if c.fits is False]
    if bad:
        lines += ["", f"FITS DISAGREEMENTS ({len(bad)})"]
        for c in bad[:worst]:
            lines += _case_lines(c)
    if misses:
        lines += [
            "",
            f"BEST-NODE MISSES ({len(misses)}, first {min(worst, len(misses))}; "
            "'up+N/ours+M': points upstream's pick led by upstream, ours led by ours)",
        ]
        for c in misses[:worst]:
            lines += _case_lines(c)
            up, ours = c.case.upstream, c.case.ours
            assert up.node is not None and ours.node is not None
            lines.append(
                f"    upstream totals: its pick {up.totals.get(up.node, '-')}, our node {_total(up, ours.node)}"
                f"; ours: our node {ours.totals.get(ours.node, '-')}, its pick {_total(ours, up.node)}"
            )
            gap = _plugin_gap(c)
            if gap:
                lines.append(f"    by plugin: {gap}")
    feas = [c for c in report.comparisons if not c.feasible and c.fits]
    if feas:
        lines += ["", f"FEASIBLE-SET DIFFERENCES ({len(feas)}, first {min(worst, len(feas))})"]
        for c in feas[:worst]:
            lines += _case_lines(c)
            up, ours = c.case.upstream, c.case.ours
            if up.scored:
                for n in sorted(ours.feasible - up.feasible)[:3]:
                    lines.append(f"    only ours feasible: {n} [{c.case.nodes.get(n, '')}]")
                for n in sorted(up.feasible - ours.feasible)[:3]:
                    lines.append(
                        f"    only upstream feasible: {n} [{c.case.nodes.get(n, '')}] ours: {ours.filtered.get(n, '?')}"
                    )
            else:
                lines.append("    (upstream did not score: feasible set known only as its bound node)")

    lines += ["", "WORST PLUGIN-SCORE DISAGREEMENTS"]
    by_pod = {c.case.pod: c.case for c in report.comparisons}
    for plugin, t in sorted(report.plugins.items()):
        for p in t.worst[:worst]:
            case = by_pod[p.pod]
            our_score = f"{p.ours}{' (skipped)' if p.ours_skipped else ''}"
            upstream_score = f"{p.upstream}{' (skipped)' if p.upstream_skipped else ''}"
            lines.append(
                f"  {plugin} on {p.node}: ours {our_score}, upstream {upstream_score}  "
                f"pod {p.pod} [{case.summary}] node [{case.nodes.get(p.node, '')}]"
            )

    lines += _allocation_differences(report, worst)
    if report.message_categories:
        lines += ["", "MESSAGE DIFFERENCES (pods per category)"]
        lines += [f"  {n:4d}  {cat}" for cat, n in report.message_categories.most_common(15)]
        wrong = [c for c in report.comparisons if c.message is False]
        for c in wrong[: min(worst, 3)]:
            lines += [
                f"  {c.case.pod} [{c.case.summary}]",
                f"    ours:     {c.case.ours.message}",
                f"    upstream: {c.case.upstream.message}",
            ]
    return "\n".join(lines)


def _allocation_differences(report: Report, worst: int) -> list[str]:
    """The pods whose devices, or whose extended-resource claim and pod status, differ from upstream's."""
    lines: list[str] = []
    for attr, title in (("devices", "DEVICES DIFFER"), ("extended", "EXTENDED-RESOURCE CLAIMS DIFFER")):
        differ = [c for c in report.comparisons if getattr(c, attr) is False]
        if differ:
            lines += ["", f"{title} ({len(differ)})"]
            for c in differ[:worst]:
                lines += [
                    f"  {c.case.pod} [{c.case.summary}] on {c.case.upstream.node}",
                    f"    ours:     {getattr(c.case.ours, attr)}",
                    f"    upstream: {getattr(c.case.upstream, attr)}",
                ]
    return lines


def _case_lines(c: PodComparison) -> list[str]:
    up, ours = c.case.upstream, c.case.ours
    return [
        f"  {c.case.pod} [{c.case.summary}]",
        f"    upstream: {_choice(up)}"
        f"{' nominated ' + up.nominated_node if up.nominated_node else ''}"
        f"{' victims ' + ','.join(up.victims) if up.victims else ''}"
        f"  ours: {_choice(ours)}",
    ]


def _choice(d: Decision) -> str:
    """Where a side put the pod, with (the first of) its best nodes and how many were feasible."""
    best = f"{sorted(d.best)[:4]}{'...' if len(d.best) > 4 else ''}"
    return f"{d.node or 'unschedulable'} (best {best}, {len(d.feasible)} feasible)"


def _total(d: Decision, node: str) -> object:
    """A side's total score for `node`, or why it has none."""
    return d.totals.get(node, "not feasible" if node not in d.feasible else "-")


def report_json(report: Report, *, run: Mapping[str, Any]) -> dict[str, Any]:
    def decision(d: Decision) -> dict[str, Any]:
        out = {"node": d.node, "best": sorted(d.best), "feasible": len(d.feasible), "message": d.message}
        if d.nominated_node or d.victims:
            out.update(nominated=d.nominated_node, victims=list(d.victims))
        return out

    return {
        "run": dict(run),
        "metrics": report.metrics(),
        "plugins": {
            k: {**{f: v for f, v in asdict(t).items() if f != "worst"}, "worst": [asdict(p) for p in t.worst]}
            for k, t in report.plugins.items()
        },
        "only_upstream": {k: {"pods_nonzero": a, "pods_varying": b} for k, (a, b) in report.only_upstream.items()},
        "only_ours": {k: {"pods_nonzero": a, "pods_varying": b} for k, (a, b) in report.only_ours.items()},
        "message_categories": dict(report.message_categories.most_common()),
        "miss_causes": report.miss_causes,
        "pods": [
            {
                "seed": c.case.seed,
                "pod": c.case.pod,
                "summary": c.case.summary,
                "fits": c.fits,
                "best": c.best,
                "feasible_equal": c.feasible,
                "message": c.message,
                "upstream": decision(c.case.upstream),
                "ours": decision(c.case.ours),
            }
            for c in report.comparisons
        ],
    }


# =============================================================================================== running upstream


class Harness:
    """One control plane and one upstream kube-scheduler for a whole run; ``run_seed`` per seed."""

    core: client.CoreV1Api
    apps: client.AppsV1Api

    def __init__(
        self,
        workdir: Path,
        profile: Profile | Sequence[Profile],
        *,
        timeout: float = 30.0,
        scheduler_config: Mapping[str, Any] | None = None,
        batching: bool = False,
    ) -> None:
        """`scheduler_config`: a KubeSchedulerConfiguration upstream runs with (its profiles, pluginConfig...;
        the harness sets clientConnection and leaderElection); None: upstream's defaults. `profile` is ours (or
        ours, one per profile of the configuration: each pod goes to the one its schedulerName names).
        Upstream runs without OpportunisticBatching unless `batching` (bursts need it: it is on by default)."""
        self.workdir = workdir
        self.profile = profile
        self.batching = batching
        self.scheduler_config = dict(scheduler_config or {})
        self.timeout = timeout
        self.cp = ControlPlane(workdir, die_with_parent=True, controller_manager=False)  # see the module docstring
        self.log: KlogTail | None = None
        self.weights: dict[str, int] = {}
        #: scheduler name -> its profile's score weights, as upstream logged its configuration
        self.weights_by_name: dict[str, dict[str, int]] = {}
        self._previous: list[str] = []  # node names of the last seed
        self._claims: dict[str, dict[str, Any]] = {}  # pod name -> its ResourceClaim (this seed)
        self._logged_plugins: set[str] = set()

    def __enter__(self) -> Harness:
        self.cp.up()
        try:
            cfg, kubeconfig = self.workdir / "kube-scheduler-config.yaml", self.workdir / "kube-scheduler.kubeconfig"
            import yaml

            written = {
                **self.scheduler_config,
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                # the default client limits (qps 50) would make upstream wait on itself between our pods
                "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000},
                "leaderElection": {"leaderElect": False},
            }
            cfg.write_text(yaml.safe_dump(written, sort_keys=False))
            gates = [] if self.batching else ["--feature-gates=OpportunisticBatching=false"]
            self.cp.start_kube_scheduler(extra_args=[f"--config={cfg}", "-v=10", *gates])
            self.log = KlogTail(self.workdir / "kube-scheduler.log")
            self.log.wait("component config line", lambda: self.log.config if self.log else "", self.timeout)
            self.weights = score_weights(self.log.config)
            profiles = [self.profile] if isinstance(self.profile, Profile) else list(self.profile)
            self.weights_by_name = {
                p.scheduler_name: score_weights(self.log.config, p.scheduler_name) for p in profiles
            }
            api = config.new_client_from_config(config_file=str(self.cp.kubeconfig))
            self.core = client.CoreV1Api(api)
            self.apps = client.AppsV1Api(api)
            self.custom = client.CustomObjectsApi(api)
            self.core.create_namespace({"metadata": {"name": NAMESPACE}})
            self.storage = client.StorageV1Api(api)
            for sc in STORAGE_CLASSES:
                self.storage.create_storage_class(sc)
            self.storage.create_csi_driver(CSI_DRIVER)
            scheduling = client.SchedulingV1Api(api)
            for name, (value, policy) in PRIORITY_CLASSES.items():
                scheduling.create_priority_class(
                    {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy}
                )
        except BaseException:
            self.cp.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cp.down()

    # ----------------------------------------------------------------------------- API helpers (raw JSON)

    @staticmethod
    def _json(response: Any) -> Any:
        return json.loads(response.data)

    def _list(self, fn: Callable[..., Any], *args: Any, kind: str) -> list[dict[str, Any]]:
        items = self._json(fn(*args, _preload_content=False))["items"]
        for item in items:
            item["kind"] = kind
        return list(items)

    def state(self) -> list[dict[str, Any]]:
        """The cluster both sides decide on: nodes, services, replica sets, bound pods."""
        pods = [
            p
            for p in self._list(self.core.list_namespaced_pod, NAMESPACE, kind="Pod")
            if (p.get("spec") or {}).get("nodeName")
        ]
        return [
            *self._list(self.core.list_node, kind="Node"),
            *self._list(self.core.list_namespaced_service, NAMESPACE, kind="Service"),
            *self._list(self.apps.list_namespaced_replica_set, NAMESPACE, kind="ReplicaSet"),
            *self._list(self.storage.list_storage_class, kind="StorageClass"),
            *self._list(self.storage.list_csi_node, kind="CSINode"),
            *self._list(self.storage.list_csi_driver, kind="CSIDriver"),
            *self._list(self.storage.list_namespaced_csi_storage_capacity, NAMESPACE, kind="CSIStorageCapacity"),
            *self._list(self.core.list_persistent_volume, kind="PersistentVolume"),
            *self._list(self.core.list_namespaced_persistent_volume_claim, NAMESPACE, kind="PersistentVolumeClaim"),
            *pods,
            *self._devices(),
        ]

    def _devices(self) -> list[dict[str, Any]]:
        """DeviceClasses, ResourceSlices and the namespace's ResourceClaims (as upstream allocated them)."""
        out = []
        for plural, kind in DRA_CLUSTER_KINDS:
            out += [{**o, "kind": kind} for o in self.custom.list_cluster_custom_object(*DRA_API, plural)["items"]]
        claims = self.custom.list_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims")["items"]
        return out + [{**o, "kind": "ResourceClaim"} for o in claims]

    def _delete_devices(self) -> None:
        """The previous seed's claims (their finalizer dropped first: no controller here would) and device objects."""
        for claim in self.custom.list_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims")["items"]:
            name = claim["metadata"]["name"]
            if claim["metadata"].get("finalizers"):
                patch = {"metadata": {"finalizers": None}}
                self.custom.patch_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims", name, patch)
            self.custom.delete_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims", name)
        for plural in ("devicetaintrules", "resourceslices", "deviceclasses"):
            for o in self.custom.list_cluster_custom_object(*DRA_API, plural)["items"]:
                self.custom.delete_cluster_custom_object(*DRA_API, plural, o["metadata"]["name"])

    def bind_claims(self) -> None:
        """Play the PV controller (none runs here) for the PVs upstream's PreBind gave a claim: mark the claim bound
        (``volumeName`` and the bind-completed annotation, what upstream waits for) and both phases Bound. And
        play the dynamic class's provisioner for the claims upstream's PreBind gave a selected node."""
        self._provision()
        for pv in self._list(self.core.list_persistent_volume, kind="PersistentVolume"):
            ref = pv["spec"].get("claimRef") or {}
            if ref.get("namespace") != NAMESPACE or (pv.get("status") or {}).get("phase") == "Bound":
                continue
            name, claim = pv["metadata"]["name"], ref["name"]
            self.core.patch_namespaced_persistent_volume_claim(
                claim,
                NAMESPACE,
                {"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": name}},
            )
            status = {"phase": "Bound", "capacity": pv["spec"]["capacity"], "accessModes": pv["spec"]["accessModes"]}
            self.core.patch_namespaced_persistent_volume_claim_status(claim, NAMESPACE, {"status": status})
            self.core.patch_persistent_volume_status(name, {"status": {"phase": "Bound"}})

    def _provision(self) -> None:
        """A PV on the selected node for each claim of the dynamic class that has one; the node's capacity shrinks."""
        claims = self._list(self.core.list_namespaced_persistent_volume_claim, NAMESPACE, kind="")
        for claim in claims:
            meta, spec = claim["metadata"], claim["spec"]
            node = (meta.get("annotations") or {}).get(ANN_SELECTED_NODE)
            if not node or spec.get("volumeName") or spec.get("storageClassName") != DYNAMIC_CLASS:
                continue
            name, size = meta["name"], spec["resources"]["requests"]["storage"]
            term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
            pv = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"pvc-{name}"},
                "spec": {
                    "storageClassName": DYNAMIC_CLASS,
                    "capacity": {"storage": size},
                    "accessModes": spec["accessModes"],
                    "csi": {"driver": DYNAMIC_DRIVER, "volumeHandle": f"{NAMESPACE}-{name}"},
                    "claimRef": {"namespace": NAMESPACE, "name": name, "uid": meta["uid"]},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                },
            }
            self.core.create_persistent_volume(pv)
            self.core.patch_persistent_volume_status(f"pvc-{name}", {"status": {"phase": "Bound"}})
            self.core.patch_namespaced_persistent_volume_claim(
                name,
                NAMESPACE,
                {"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": f"pvc-{name}"}},
            )
            status = {"phase": "Bound", "capacity": {"storage": size}, "accessModes": spec["accessModes"]}
            self.core.patch_namespaced_persistent_volume_claim_status(name, NAMESPACE, {"status": status})
            try:
                cap = self._json(
                    self.storage.read_namespaced_csi_storage_capacity(
                        f"{node}-capacity", NAMESPACE, _preload_content=False
                    )
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            left = max(0, to_units(cap["capacity"]) - to_units(size))
            self.storage.patch_namespaced_csi_storage_capacity(f"{node}-capacity", NAMESPACE, {"capacity": str(left)})

    # ----------------------------------------------------------------------------- seeds

    def reset(self) -> None:
        """Delete the previous seed's pods, nodes, services and replica sets; wait until upstream saw it."""
        assert self.log is not None
        log = self.log
        pods = [p["metadata"]["name"] for p in self._list(self.core.list_namespaced_pod, NAMESPACE, kind="Pod")]
        self.core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        self.core.delete_collection_node()
        for svc in self._list(self.core.list_namespaced_service, NAMESPACE, kind="Service"):
            self.core.delete_namespaced_service(svc["metadata"]["name"], NAMESPACE)
        self.apps.delete_collection_namespaced_replica_set(NAMESPACE)
        self._delete_devices()
        # no controller removes the protection finalizers here: drop them, so the objects go at once
        for claim in self._list(self.core.list_namespaced_persistent_volume_claim, NAMESPACE, kind=""):
            patch = {"metadata": {"finalizers": None}}
            self.core.patch_namespaced_persistent_volume_claim(claim["metadata"]["name"], NAMESPACE, patch)
        self.core.delete_collection_namespaced_persistent_volume_claim(NAMESPACE)
        for pv in self._list(self.core.list_persistent_volume, kind=""):
            self.core.patch_persistent_volume(pv["metadata"]["name"], {"metadata": {"finalizers": None}})
        self.core.delete_collection_persistent_volume()
        self.storage.delete_collection_csi_node()
        self.storage.delete_collection_namespaced_csi_storage_capacity(NAMESPACE)
        log.wait(
            "delete events of the previous seed",
            lambda: (
                all(_deleted(log, f"{NAMESPACE}/{p}") for p in pods)
                and all(log.node_events[("Delete event for node", n)] for n in self._previous)
            ),
            self.timeout,
        )

    def setup(self, scenario: Scenario) -> None:
        assert self.log is not None
        log = self.log
        for svc in scenario.services:
            self.core.create_namespaced_service(NAMESPACE, svc)
        uids = {}
        for rs in scenario.replica_sets:
            uids[rs["metadata"]["name"]] = self._json(
                self.apps.create_namespaced_replica_set(NAMESPACE, rs, _preload_content=False)
            )["metadata"]["uid"]
        for pod in scenario.pods:
            for ref in pod["metadata"].get("ownerReferences") or ():
                ref["uid"] = uids[ref["name"]]
        for body, status in scenario.storage:  # before the nodes: their events give upstream time to see these
            name = body["metadata"]["name"]
            if body["kind"] == "CSINode":
                self.storage.create_csi_node(body)
            elif body["kind"] == "CSIStorageCapacity":
                self.storage.create_namespaced_csi_storage_capacity(NAMESPACE, body)
            elif body["kind"] == "PersistentVolume":
                self.core.create_persistent_volume(body)
                if status is not None:
                    self.core.patch_persistent_volume_status(name, status)
            else:
                self.core.create_namespaced_persistent_volume_claim(NAMESPACE, body)
                if status is not None:
                    self.core.patch_namespaced_persistent_volume_claim_status(name, NAMESPACE, status)
        for body, status in scenario.nodes:
            self.core.create_node(body)
            self.core.patch_node_status(body["metadata"]["name"], status)
        for plural, body in scenario.device_objects:
            self.custom.create_cluster_custom_object(*DRA_API, plural, body)
        self._claims = scenario.claims
        names = [body["metadata"]["name"] for body, _ in scenario.nodes]
        self._previous = names
        log.wait(
            "add and status-update events of the new nodes",
            lambda: all(
                log.node_events[("Add event for node", n)] and log.node_events[("Update event for node", n)]
                for n in names
            ),
            self.timeout,
        )

    def run_seed(self, scenario: Scenario, *, progress: Callable[[str], None] = lambda _: None) -> list[PodCase]:
        self.reset()
        self.setup(scenario)
        cases = []
        for i, body in enumerate(scenario.pods):
            cases.append(self.one_pod(scenario.seed, i, body))
            progress(f"seed {scenario.seed}: pod {i + 1}/{len(scenario.pods)}")
        for number, bodies_ in enumerate(scenario.bursts, 1):
            cases += self.burst(scenario.seed, number, bodies_)
        return cases

    def one_pod(self, seed: int, index: int, body: dict[str, Any]) -> PodCase:
        assert self.log is not None
        log = self.log
        claim = self._claims.get(body["metadata"]["name"])
        if claim is not None:
            self.custom.create_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims", claim)
        state = self.state()
        created = self._json(self.core.create_namespaced_pod(NAMESPACE, body, _preload_content=False))
        key = f"{NAMESPACE}/{created['metadata']['name']}"

        claims = any("persistentVolumeClaim" in v for v in body["spec"].get("volumes") or ())
        last_bind = [0.0]

        def outcome() -> bool:
            if claims and time.monotonic() - last_bind[0] > 0.2:  # upstream's PreBind may wait for a bound claim
                last_bind[0] = time.monotonic()
                self.bind_claims()
            return any(r.msg in (MSG_BOUND, MSG_NO_FIT, MSG_ERROR) for r in log.by_pod.get(key, ()))

        log.wait(f"decision for {key}", outcome, self.timeout)
        up = self._upstream(key, created)
        if up.node is not None:  # PreBind wrote the allocations before the bind
            up.devices, up.extended = self._upstream_devices(claim, created["metadata"]["name"])
        if up.node is None:
            self._remove_unschedulable(key, created["metadata"]["name"], up)
        ours, nodes = our_decision(state, created, self.profile, seed=seed * 100_000 + index)
        bound = frozenset(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in state if o["kind"] == "Pod")
        return PodCase(seed, key, describe_pod(created), up, ours, nodes, bound)

    def _upstream_devices(
        self, claim: Mapping[str, Any] | None, pod: str
    ) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """The devices (``pool/device``) upstream's PreBind wrote into the pod's claim, then into the claim it
        created for the pod's extended resources; and that claim's requests and the pod's request mappings."""
        names = [claim["metadata"]["name"]] if claim is not None else []
        status = self._json(self.core.read_namespaced_pod_status(pod, NAMESPACE, _preload_content=False))
        ext = (status.get("status") or {}).get("extendedResourceClaimStatus")
        if ext:
            names.append(ext["resourceClaimName"])
        devices: list[str] = []
        extended: tuple[tuple[str, ...], ...] = ()
        for name in names:
            got = self.custom.get_namespaced_custom_object(*DRA_API, NAMESPACE, "resourceclaims", name)
            results = (((got.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
            devices += [f"{r['pool']}/{r['device']}" for r in results]
            if ext and name == ext["resourceClaimName"]:
                extended = extended_summary(got, ext["requestMappings"], pod)
        return tuple(devices), extended

    def _upstream(self, key: str, created: Mapping[str, Any]) -> Decision:
        """Upstream's decision for the pod `key` from its log, with the weights of the profile it names."""
        assert self.log is not None
        log = self.log
        weights = self.weights_by_name.get(created["spec"].get("schedulerName", "default-scheduler"), self.weights)
        self._logged_plugins |= {r.values["plugin"] for r in log.by_pod[key] if r.msg == MSG_PLUGIN_SCORE}
        score_plugins = (UPSTREAM_SCORE_PLUGINS | self._logged_plugins) & set(weights)
        return upstream_decision(log.by_pod[key], weights, score_plugins)

    def burst(self, seed: int, number: int, pod_bodies: Sequence[dict[str, Any]]) -> list[PodCase]:
        """Create `pod_bodies` at once while upstream kube-scheduler is stopped (SIGSTOP), so that its queue
        holds them all when it resumes (N replicas created together), and compare each placement with ours:
        one simulation of the same pods pending at once on the same state. Then delete the unschedulable ones."""
        assert self.log is not None
        log = self.log
        state = self.state()
        pid = self.cp.pids()["kube-scheduler"]
        os.kill(pid, signal.SIGSTOP)
        try:
            created = [
                self._json(self.core.create_namespaced_pod(NAMESPACE, body, _preload_content=False))
                for body in pod_bodies
            ]
        finally:
            os.kill(pid, signal.SIGCONT)
        keys = [f"{NAMESPACE}/{c['metadata']['name']}" for c in created]
        log.wait(
            f"decisions for the burst of {len(keys)}",
            lambda: all(any(r.msg in (MSG_BOUND, MSG_NO_FIT, MSG_ERROR) for r in log.by_pod.get(k, ())) for k in keys),
            self.timeout,
        )
        ups = [self._upstream(k, c) for k, c in zip(keys, created, strict=True)]
        ours = our_burst(state, created, self.profile, seed=seed * 100_000 + 99_999)
        bound = frozenset(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in state if o["kind"] == "Pod")
        cases = [
            PodCase(seed, k, describe_pod(c), up, our, bound=bound, burst=number)
            for k, c, up, our in zip(keys, created, ups, ours, strict=True)
        ]
        for k, c, up in zip(keys, created, ups, strict=True):
            if up.node is None:
                self._remove_unschedulable(k, c["metadata"]["name"], up)
        return cases

    def _remove_unschedulable(self, key: str, name: str, up: Decision) -> None:
        """Delete an unschedulable pod, and for good any victims upstream preempted for it; wait until upstream saw it.

        Upstream may already have retried the pod and bound it (its victims' grace period is 0, so the room frees at
        once): it is deleted all the same, so what comes next never depends on that race.
        """
        assert self.log is not None
        log = self.log
        self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        gone = [key]
        if up.nominated_node:
            log.wait(
                f"end of preemption for {key}",
                lambda: any(r.msg == MSG_PREEMPTION_DONE for r in log.by_pod[key]),
                self.timeout,
            )
            up.victims = tuple(r.values["victim"] for r in log.by_pod[key] if r.msg == MSG_PREEMPTED_VICTIM)
            for victim in up.victims:
                ns, _, victim_name = victim.partition("/")
                try:
                    self.core.delete_namespaced_pod(victim_name, ns, grace_period_seconds=0)
                except Exception as exc:
                    if getattr(exc, "status", None) != 404:  # 404: upstream's own delete already removed it
                        raise
            gone += list(up.victims)
        log.wait(f"delete events for {', '.join(gone)}", lambda: all(_deleted(log, p) for p in gone), self.timeout)


def _deleted(log: KlogTail, pod: str) -> bool:
    return any(log.pod_events[(msg, pod)] for msg in POD_DELETE_EVENTS)


# =============================================================================================== main


def run(
    seeds: Sequence[int],
    knobs: Knobs,
    profile: Profile | Sequence[Profile],
    *,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
    scheduler_config: Mapping[str, Any] | None = None,
) -> list[PodCase]:
    """Every pod of every seed, compared-ready (``compare`` for those one at a time, ``BurstReport`` for those of a
    burst: ``PodCase.burst``). Starts and stops its own control plane (in ``workdir`` if given); upstream runs
    `scheduler_config` (None: its defaults), with OpportunisticBatching when the knobs ask for bursts."""
    ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="kopf-scheduler-diff-") as tmp:
        with Harness(Path(workdir or tmp), profile, scheduler_config=scheduler_config, batching=bool(knobs.burst)) as h:
            cases: list[PodCase] = []
            for seed in seeds:
                cases += h.run_seed(generate(seed, knobs), progress=progress)
            return cases


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="how many seeds (random clusters) to run")
    ap.add_argument("--seed-start", type=int, default=1, help="the first seed; seeds are consecutive")
    ap.add_argument(
        "--nodes",
        type=int,
        default=Knobs.nodes,
        help="nodes per cluster (keep below 100: above, both sides score only a sample)",
    )
    ap.add_argument("--pods", type=int, default=Knobs.pods, help="pods per seed, created one at a time")
    ap.add_argument(
        "--dra",
        action="store_true",
        help="also ResourceSlices on 30%% of the nodes and ResourceClaims on 30%% of the pods",
    )
    ap.add_argument(
        "--dra-gates",
        action="store_true",
        help="with --dra: the DeviceClass serves example.com/gpu and 30%% of the pods without a claim ask for its "
        "implicit resource (DRAExtendedResource); DeviceTaintRules on 30%% of the pools, tolerated by 30%% of the "
        "claims (DRADeviceTaintRules)",
    )
    which = ap.add_mutually_exclusive_group()
    which.add_argument(
        "--policy", type=Path, help="our side runs this SchedulingPolicy / v1.9 Policy (default: our default profile)"
    )
    which.add_argument(
        "--config",
        type=Path,
        help="a KubeSchedulerConfiguration both sides run (every profile; the pods name them at random)",
    )
    ap.add_argument(
        "--burst",
        type=int,
        default=0,
        help="after each seed's pods, this many identical pods created at once (upstream batches them)",
    )
    ap.add_argument("--json", type=Path, help="also write every figure and every pod's outcome here")
    ap.add_argument("--worst", type=int, default=5, help="how many disagreements to print per category")
    ap.add_argument("--workdir", type=Path, help="keep the control plane's files (kube-scheduler.log) here")
    args = ap.parse_args(argv)
    knobs = Knobs(nodes=args.nodes, pods=args.pods, burst=args.burst)
    if args.dra:
        knobs = dataclasses.replace(knobs, p_node_devices=0.3, p_claim=0.3)
    if args.dra_gates:
        knobs = with_dra_gates(knobs)
    config_doc = None
    profile: Profile | list[Profile]
    if args.config is not None:
        import yaml

        config_doc = yaml.safe_load(args.config.read_text())
        profile = load_scheduler_config(args.config, registry=installed_registry())
        knobs = dataclasses.replace(knobs, scheduler_names=tuple(p.scheduler_name for p in profile))
    else:
        profile = load_policy(args.policy, registry=installed_registry())
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    start = time.monotonic()

    def progress(text: str) -> None:
        if sys.stderr.isatty():
            print(f"\r{text} ({time.monotonic() - start:.0f}s)", end="", file=sys.stderr, flush=True)
        elif text.endswith(f"{args.pods}/{args.pods}"):
            print(f"{text} ({time.monotonic() - start:.0f}s)", file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    cases = run(seeds, knobs, profile, workdir=args.workdir, progress=progress, scheduler_config=config_doc)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    report = build_report([compare(c) for c in cases if not c.burst], worst=args.worst)
    seconds = time.monotonic() - start
    ours = str(args.config) if args.config else (profile.source if isinstance(profile, Profile) else "")
    print(
        f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), {args.nodes} nodes, {args.pods} pods each"
        f"{f', bursts of {args.burst}' if args.burst else ''}; ours: {ours or 'default profile'}; {seconds:.0f}s\n"
    )
    print(render(report, worst=args.worst))
    if args.burst:
        print(render_burst(BurstReport([c for c in cases if c.burst])))
    if args.json:
        run_info = {
            "seeds": seeds,
            "nodes": args.nodes,
            "pods": args.pods,
            "policy": str(args.policy or ""),
            "seconds": round(seconds, 1),
        }
        args.json.write_text(json.dumps(report_json(report, run=run_info), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
