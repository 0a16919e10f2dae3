"""The Kubernetes objects the scheduler reads, as frozen dataclasses: only the fields scheduling needs.

``core/model/parsing.py`` builds them once from API bodies (``parse_pod``, ``parse_node`` ...), with
quantities already parsed; everything else in the core reads these types. Nothing here does I/O.

Nodes and unbound pods also keep their ``source``: the body as read, without
``metadata.managedFields`` (as upstream's informers trim it), because HTTP
extenders are sent the API objects themselves. It is shared, never mutated.
Bound pods drop it: the scheduler never sends them anywhere, and there are many.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .resources import ZERO_RESOURCES, Resources

EMPTY_LABELS: Final[Mapping[str, str]] = {}

# Taint effects and well-known keys.
NO_SCHEDULE: Final = "NoSchedule"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
NO_EXECUTE: Final = "NoExecute"
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"
LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"

ANNOTATION_PREFER_AVOID_PODS: Final = "scheduler.alpha.kubernetes.io/preferAvoidPods"
#: on a claim of a WaitForFirstConsumer class: the node its volume is to be provisioned for (VolumeBinding's PreBind)
ANNOTATION_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
#: on a PV: the binding to its claim was made by a controller (or the scheduler), not by the PV's author
ANNOTATION_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"

# Pod preemption (spec.preemptionPolicy values; the DisruptionTarget condition preemption sets on victims).
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"
CONDITION_DISRUPTION_TARGET: Final = "DisruptionTarget"
CONDITION_POD_SCHEDULED: Final = "PodScheduled"
#: the Workload API PodGroup's condition the scheduler sets (True once the gang was first scheduled)
CONDITION_POD_GROUP_INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"
REASON_PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``metav1.LabelSelector``. An empty selector matches everything; ``None`` (absent) nothing."""

    match_labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        for req in self.match_expressions:
            if not req.matches(labels):
                return False
        return True

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a label (or field) value satisfies this requirement; ``None`` means absent."""
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None or len(self.values) != 1:
                return False
            have, want = go_int64(value), go_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


_INT64_RE: Final = re.compile(r"[+-]?[0-9]+")


def go_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: an optional sign and digits, in int64 range; else None.

    Python's ``int`` would also take spaces and underscores, which label selectors do not.
    """
    if _INT64_RE.fullmatch(text) is None:
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions are ANDed. A term with no expressions and no fields matches no node."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node: "Node") -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        labels = node.labels
        for req in self.match_expressions:
            if not req.matches(labels.get(req.key)):
                return False
        for req in self.match_fields:
            if req.key != "metadata.name" or not req.matches(node.name):
                return False
        return True


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    #: ``None`` when ``requiredDuringSchedulingIgnoredDuringExecution`` is absent; terms are ORed.
    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def selects(self, pod: "Pod", owner_namespace: str, namespace_labels: Mapping[str, str] | None = None) -> bool:
        """Whether ``pod`` is selected by this term, which belongs to a pod in ``owner_namespace``.

        Namespaces: the listed ones, plus those matched by the namespace selector;
        neither given means the owner's namespace (upstream ``GetNamespacesFromPodAffinityTerm``).
        """
        if self.label_selector is None or not self.label_selector.matches(pod.labels):
            return False
        if not self.namespaces and self.namespace_selector is None:
            return pod.namespace == owner_namespace
        if pod.namespace in self.namespaces:
            return True
        if self.namespace_selector is not None:
            if self.namespace_selector.is_empty:
                return True
            return namespace_labels is not None and self.namespace_selector.matches(namespace_labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# --------------------------------------------------------------------------- taints


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}: }}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Upstream ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


def tolerates_all(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any toleration tolerates ``taint``."""
    return any(t.tolerates(taint) for t in tolerations)


# --------------------------------------------------------------------------- containers, volumes


@dataclass(frozen=True, slots=True)
class ContainerPort:
    host_port: int
    container_port: int = 0
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str = ""
    #: the spec's requests (limits stand in for absent requests, as the API server defaults them)
    requests: Resources = ZERO_RESOURCES
    limits: Resources = ZERO_RESOURCES
    ports: tuple[ContainerPort, ...] = ()
    restartable: bool = False  # an init container with restartPolicy: Always (a sidecar)
    #: the names in the spec's requests (with the limits standing in), zero amounts included: DRA
    #: numbers a container's extended-resource requests by their place among these, sorted
    request_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Volume:
    """One pod volume; ``kind`` names its source (``persistentVolumeClaim``, ``gcePersistentDisk``...).

    ``ident`` is the identity conflicts are checked on (PD name, EBS volume id,
    iSCSI IQN, RBD pool/image, claim name, CSI driver/handle).
    """

    name: str
    kind: str
    ident: str = ""
    read_only: bool = False
    #: RBD monitors (a conflict needs a shared monitor)
    monitors: frozenset[str] = frozenset()
    #: CSI driver name for ephemeral CSI volumes
    driver: str = ""
    #: Azure Disk only: ``diskURI`` and ``kind`` (API default ``Shared``), what CSI migration translates
    disk_uri: str = ""
    disk_kind: str = ""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    match_label_keys: tuple[str, ...] = ()
    #: Honor | Ignore; None means the default (affinity: Honor, taints: Ignore)
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None


# --------------------------------------------------------------------------- pods


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """An entry of a pod's ``spec.resourceClaims``."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod's ``spec.resourceClaims`` and its ``status.resourceClaimStatuses`` (the claims generated from
    templates: pod claim name -> claim name, None when the controller decided to create none)."""

    claims: tuple[PodResourceClaim, ...] = ()
    statuses: Mapping[str, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.claims)


NO_POD_CLAIMS: Final = PodClaims()


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    """A pod as the scheduler sees it. Identity is ``uid``; equality is identity of object."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    phase: str = "Pending"
    priority: int = 0
    #: ``spec.preemptionPolicy``: PreemptLowerPriority (the API default) or Never
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    deleting: bool = False
    resource_version: str = ""
    #: ``metadata.generation`` (the API server counts the spec's changes; 0: not given)
    generation: int = 0
    owner_references: tuple[OwnerReference, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: Resources = ZERO_RESOURCES
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    volumes: tuple[Volume, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    #: ``spec.schedulingGroup.podGroupName``: the ``scheduling.k8s.io`` PodGroup the pod belongs to ("" for none)
    scheduling_group: str = ""
    nominated_node_name: str = ""
    #: ``status.startTime`` in seconds since the epoch; None until a kubelet starts the pod
    start_time: float | None = None
    #: the reason of a True ``DisruptionTarget`` condition ("" when there is none)
    disruption_target: str = ""
    #: when a bound pod's ``PodScheduled`` condition turned True, in seconds since the epoch (None: unknown)
    scheduled_at: float | None = None
    #: the effective request (upstream ``PodInfo.CalculateResource``: ``PodRequests`` with pod-level
    #: resources and, for resized pods, the largest of spec / allocated / actuated requests): what
    #: NodeInfo sums and filters compare against allocatable
    requests: Resources = ZERO_RESOURCES
    #: ``requests`` with the scoring defaults (100m cpu, 200Mi memory) for cpu / memory that no
    #: container names (with pod-level requests: that neither the pod nor a container names);
    #: NodeInfo's non-zero sums
    non_zero_requests: Resources = ZERO_RESOURCES
    #: the containers' requests with the scoring defaults, ignoring pod-level resources and status:
    #: what NodeResourcesFit scores the incoming pod with (upstream's Fit scorer skips pod-level resources)
    container_non_zero_requests: Resources = ZERO_RESOURCES
    #: init-container-max rule applied to limits (ResourceLimitsPriority)
    limits: Resources = ZERO_RESOURCES
    #: host ports of the sidecar (restartable init) containers, then of the containers (upstream ``GetHostPorts``)
    host_ports: tuple[ContainerPort, ...] = ()
    #: ``spec.resourceClaims`` and ``status.resourceClaimStatuses`` of an unbound pod (DynamicResources)
    resource_claims: PodClaims = NO_POD_CLAIMS
    #: the API body of an unbound pod (see the module docstring); None for bound pods
    source: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """``namespace/name``, the way events and messages name a pod."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def terminating_by_preemption(self) -> bool:
        """Being deleted because a scheduler preempted it (upstream ``PodTerminatingByPreemption``)."""
        return self.deleting and self.disruption_target == REASON_PREEMPTION_BY_SCHEDULER

    @property
    def controller_ref(self) -> OwnerReference | None:
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None

    @property
    def has_required_anti_affinity(self) -> bool:
        a = self.affinity
        return a is not None and a.pod_anti_affinity is not None and bool(a.pod_anti_affinity.required)

    @property
    def has_pod_affinity(self) -> bool:
        """Any pod affinity or anti-affinity term, required or preferred."""
        a = self.affinity
        return a is not None and (
            (a.pod_affinity is not None and bool(a.pod_affinity.required or a.pod_affinity.preferred))
            or (a.pod_anti_affinity is not None and bool(a.pod_anti_affinity.required or a.pod_anti_affinity.preferred))
        )

    @property
    def is_best_effort(self) -> bool:
        """QoS BestEffort: no container (regular or init) requests or limits cpu or memory."""
        for c in self.containers + self.init_containers:
            for r in (c.requests, c.limits):
                if r.milli_cpu or r.memory:
                    return False
        return True

    def with_node(self, node_name: str) -> "Pod":
        """A copy bound to ``node_name`` (what ``assume`` stores), made field by field: half the
        cost of ``dataclasses.replace``, which looks the fields up again for every call."""
        values = list(_pod_fields(self))
        values[_POD_NODE_NAME] = node_name
        return Pod(*values)

    def __repr__(self) -> str:
        return f"Pod({self.key}{' on ' + self.node_name if self.node_name else ''})"


_pod_fields: Final = operator.attrgetter(*(f.name for f in dataclasses.fields(Pod)))
_POD_NODE_NAME: Final = [f.name for f in dataclasses.fields(Pod)].index("node_name")


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class ImageState:
    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    #: condition type -> status ("True" / "False" / "Unknown")
    conditions: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    allocatable: Resources = ZERO_RESOURCES
    allowed_pod_number: int = 0
    capacity: Resources = ZERO_RESOURCES
    images: tuple[ImageState, ...] = ()
    resource_version: str = ""
    #: the API body (see the module docstring)
    source: Mapping[str, Any] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Node({self.name})"


def zone_key(labels: Mapping[str, str]) -> str:
    """Region and zone of a node as one key (upstream ``utilnode.GetZoneKey``); "" when unlabelled."""
    region = labels.get(LABEL_REGION) or labels.get(LABEL_REGION_BETA) or ""
    zone = labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA) or ""
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


# --------------------------------------------------------------------------- storage, workloads


@dataclass(frozen=True, slots=True, eq=False)
class PersistentVolume:
    name: str
    kind: str = ""  # source type: gcePersistentDisk, awsElasticBlockStore, azureDisk, csi, ...
    ident: str = ""  # PD name / EBS id / disk name / CSI volume handle
    driver: str = ""  # CSI driver
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    storage_class: str = ""
    capacity: int = 0
    access_modes: tuple[str, ...] = ()
    claim_ref: str = ""  # "ns/name" when bound or pre-bound
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    phase: str = "Available"
    #: Azure Disk only: ``diskURI`` and ``kind`` (API default ``Shared``), what CSI migration translates
    disk_uri: str = ""
    disk_kind: str = ""
    #: the uid in ``claimRef`` ("" when pre-bound by name only); what VolumeBinding's PreBind writes against
    claim_uid: str = ""
    resource_version: str = ""
    #: the API body (what simulate's API server serves PreBind's writes from)
    source: Mapping[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, eq=False)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""
    storage_class: str | None = None
    access_modes: tuple[str, ...] = ()
    request: int = 0
    phase: str = "Pending"
    selector: LabelSelector | None = None
    #: what VolumeBinding's PreBind writes against: the claim's uid, its resourceVersion, and the node its
    #: ``volume.kubernetes.io/selected-node`` annotation names ("" when it has none)
    uid: str = ""
    resource_version: str = ""
    selected_node: str = ""
    #: the API body (what simulate's API server serves PreBind's writes from)
    source: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class StorageClass:
    name: str
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"  # or WaitForFirstConsumer
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class Service:
    namespace: str
    name: str
    selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)


@dataclass(frozen=True, slots=True, eq=False)
class Controller:
    """A ReplicationController, ReplicaSet or StatefulSet: what selector spreading needs of it."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True, eq=False)
class PodDisruptionBudget:
    """What preemption reads of a PDB (upstream ``FilterVictimsWithPDBViolation``)."""

    namespace: str
    name: str
    #: None or empty matches no pod (as upstream's preemption reads it)
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    #: ``status.disruptedPods``: names of pods whose eviction the API server already counted
    disrupted_pods: frozenset[str] = frozenset()

    def selects(self, pod: Pod) -> bool:
        return (
            self.namespace == pod.namespace
            and self.selector is not None
            and not self.selector.is_empty
            and self.selector.matches(pod.labels)
        )


#: the two PodGroup APIs (their API groups): upstream's Workload API and scheduler-plugins' coscheduling CRD
WORKLOAD_API: Final = "scheduling.k8s.io"
COSCHEDULING_API: Final = "scheduling.x-k8s.io"
#: scheduler-plugins' pod label naming a coscheduling PodGroup of the pod's namespace
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"


@dataclass(frozen=True, slots=True, eq=False)
class PodGroup:
    """A PodGroup of either API, as gang scheduling reads it (``core/toolkit/gangs.py``).

    ``scheduling.k8s.io/v1beta1``: ``spec.schedulingPolicy.gang.minCount`` (a ``basic`` policy is no
    gang: ``gang`` False), and what preemption reads (``core/toolkit/preemption.py``,
    ``core/toolkit/pod_group_preemption.py``):
    ``spec.priority`` (the API server's Priority admission resolves ``priorityClassName`` into it; unset: 0,
    upstream ``PodGroupPriority``) and ``spec.disruptionMode`` (``all``: its members are evicted together;
    ``single``, the default: one by one). ``scheduling.x-k8s.io/v1alpha1``: ``spec.minMember`` and
    ``spec.scheduleTimeoutSeconds`` (None: the plugin's default); no priority or disruption mode of its own.
    """

    api: str
    namespace: str
    name: str
    uid: str = ""
    gang: bool = True
    min_count: int = 1
    schedule_timeout_seconds: int | None = None
    generation: int = 0
    #: the Workload API's PodGroupInitiallyScheduled condition status ("True", "False" or "")
    initially_scheduled: str = ""
    #: the Workload API's ``spec.priority`` (0 when unset)
    priority: int = 0
    #: the Workload API's ``spec.disruptionMode.all``: a victim of preemption only as a whole
    disrupted_together: bool = False

    @property
    def key(self) -> str:
        """``<api group>/<namespace>/<name>``: the ClusterObjects key, one space for both APIs."""
        return f"{self.api}/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class PriorityClass:
    """``scheduling.k8s.io/v1`` PriorityClass: what the API server's Priority admission gives a pod."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY


#: the classes every API server creates (``scheduling.SystemPriorityClasses``)
SYSTEM_PRIORITY_CLASSES: Final = (
    PriorityClass("system-node-critical", 2_000_001_000),
    PriorityClass("system-cluster-critical", 2_000_000_000),
)


@dataclass(frozen=True, slots=True)
class CSIDriver:
    """``storage.k8s.io/v1`` CSIDriver: whether the driver publishes CSIStorageCapacity for scheduling."""

    name: str
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class CSIStorageCapacity:
    """``storage.k8s.io/v1`` CSIStorageCapacity: what one storage class can still provision for the nodes its
    ``nodeTopology`` selects (``None``: no node). Sizes are ``Quantity.Value()`` bytes, ``None`` when absent."""

    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector | None = None
    capacity: int | None = None
    maximum_volume_size: int | None = None


@dataclass(frozen=True, slots=True, eq=False)
class CSINode:
    """Per-node CSI attach limits (``storage.k8s.io/v1`` CSINode): driver -> allocatable count."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)
    #: the ``storage.alpha.kubernetes.io/migrated-plugins`` annotation's in-tree plugins (VolumeBinding translates
    #: those PVs' node affinity to CSI topology)
    migrated_plugins: frozenset[str] = frozenset()
