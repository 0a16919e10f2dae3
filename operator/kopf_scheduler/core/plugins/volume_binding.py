"""VolumeBinding: the pod's claims must be bound to PVs the node can reach, or be bindable there.

Follows today's upstream ``pkg/scheduler/framework/plugins/volumebinding/volume_binding.go`` and
the static checks of its ``binder.go`` (``GetPodVolumeClaims``, ``FindPodVolumes``,
``checkBoundClaims``, ``findMatchingVolumes``, ``checkVolumeProvisions``) and of
``component-helpers/storage/volume`` (``FindMatchingVolume``, ``CheckNodeAffinity``); v1.9:
``CheckVolumeBinding``.

PreFilter (SKIP for a pod with no ``persistentVolumeClaim`` and no generic ephemeral volume, as
upstream): every claim must exist (UnschedulableAndUnresolvable ``persistentvolumeclaim "<name>" not
found``, or for an ephemeral volume ``waiting for ephemeral volume controller to create the
persistentvolumeclaim "<pod>-<volume>"``) and not be Lost. Claims are then bound, unbound with
delayed binding (a ``WaitForFirstConsumer`` class, no ``volumeName``), or unbound immediate
(anything else, including claims pre-bound to a PV but not yet bound), which fails the pod with
UnschedulableAndUnresolvable "pod has unbound immediate PersistentVolumeClaims".

Filter, per node, collecting upstream's reasons in upstream's order (UnschedulableAndUnresolvable):

- each bound claim's PV must exist ("node(s) unavailable due to one or more pvc(s) bound to
  non-existent pv(s)") and its required node affinity must match the node's labels
  ("node(s) didn't match PersistentVolume's node affinity"); an in-tree PV of a migrated plugin (EBS, GCE PD,
  Azure Disk, Cinder, Portworx) that the node's CSINode lists in its ``storage.alpha.kubernetes.io/migrated-plugins``
  annotation is checked as its CSI translation (``core/model/csi_translation.py``: the zone affinity, or the zone label,
  becomes the driver's topology key), and one that does not translate is an error (upstream
  ``tryTranslatePVToCSI``);
- delayed claims, smallest request first, each take the smallest PV of their class that is
  pre-bound to them, or else is Available, not claimed by another claim, not chosen for an
  earlier claim, large enough, has every access mode the claim asks for, matches the claim's
  selector and whose node affinity matches the node. Claims left over must be provisionable: a
  class with a provisioner other than ``kubernetes.io/no-provisioner`` whose ``allowedTopologies``
  (none = anywhere) match the node. Otherwise "node(s) didn't find available persistent volumes
  to bind".

Claims left to provision whose class's provisioner is a CSIDriver with ``storageCapacity: true`` must fit
a CSIStorageCapacity of that class whose ``nodeTopology`` selects the node (``maximumVolumeSize`` if given,
else ``capacity``, at least the request; upstream ``hasEnoughCapacity``), else "node(s) did not have enough
free storage". Upstream takes the first such object its lister returns (no defined order); we take the first
by namespace/name.

Score (upstream ``volume_binding.go`` ``Score`` and ``scorer.go``, StorageCapacityScoring beta and on in
v1.37): a node with static bindings (delayed claims matched to existing PVs) scores them: per PV storage
class, the claims' requests summed against the PVs' capacities summed. A node without scores its dynamic
provisions that found a CSIStorageCapacity: per claim class, the requests summed against that object's
``capacity`` (set, not summed). Each class scores ``shape`` at utilization ``requested * 100 / capacity``
(100 when over capacity or the capacity is 0); the classes are averaged (rounded half up). PreScore SKIPs
a pod without delayed claims (upstream scores such a pod 0 on every node).

``filter_nodes`` loops over the nodes; what Filter and Score find on each node is kept for the cycle
(``PodVolumeClaims.by_node``, upstream ``podVolumesByNode``).

Reserve and PreBind (upstream ``AssumePodVolumes`` and ``BindPodVolumes``' ``bindAPIUpdate``): for the chosen
node, each delayed claim matched to a PV gets it (the PV's ``claimRef`` set to the claim, with its uid and
resourceVersion, and ``pv.kubernetes.io/bound-by-controller: "yes"`` when the PV was not bound to it before),
and each claim to provision is told the node (``volume.kubernetes.io/selected-node``); the PersistentVolume
controller and the provisioners do the rest. Each write is a merge patch preconditioned on the resourceVersion
the cycle read, so a PV another pod's PreBind took meanwhile answers 409 and this pod tries again (upstream
settles that race in its assume cache; nothing is assumed here, and a write that would change nothing is not
sent). ``PreBindPreFlight`` says there is work when there are writes, so the pod is nominated to its node before
PreBind, as upstream nominates it. Upstream's PreBind then polls until every claim is bound and fails the pod when
a provisioner gave the node back; this one returns once its writes are accepted (the kubelet waits for the
claim), so a provisioning that fails for that node leaves the pod there.

Arguments (upstream ``VolumeBindingArgs``): ``bindTimeoutSeconds`` (default 600, not negative) is
accepted so upstream configurations carry over; PreBind does not wait for the bindings, so it bounds
nothing. ``shape``: the capacity score's broken-linear function, points (utilization 0..100 increasing,
score 0..10); absent or empty it is upstream's default with the gate on, ``[{0, 10}, {100, 0}]`` (prefer
PVs the claims fill least).

Limits of the objects: "bound" means ``volumeName`` set and phase Bound (upstream: the
``pv.kubernetes.io/bind-completed`` annotation); claim deletion, volume modes, volume attributes classes and the
beta storage-class annotation are not kept, so those checks are not made.

Requeueing (upstream ``EventsToRegister``): a StorageClass, PV or CSINode added or changed, a claim of
the pod added or changed, a node added or relabelled, a CSIStorageCapacity added or raised, a CSIDriver of
one of the pod's inline ``csi`` volumes that stops tracking capacity; deletions help no pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import PluginArgsError
from ..framework.basics import MAX_NODE_SCORE, CycleState, StateKey, Status
from ..framework.interface import (
    ApiClient,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PermitHandle,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..model import paths
from ..model.csi_translation import IN_TREE_PLUGINS, Untranslatable, translated_node_affinity
from ..model.objects import (
    ANNOTATION_BOUND_BY_CONTROLLER,
    ANNOTATION_SELECTED_NODE,
    CSIDriver,
    CSIStorageCapacity,
    Node,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from ..toolkit import batching
from ..toolkit.scoring import MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, Shape, UtilizationShapePoint, broken_linear

if TYPE_CHECKING:
    from ..framework.snapshot import ClusterObjects, NodeTable, Snapshot

ERR_REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT: Final = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"

WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
NOT_SUPPORTED_PROVISIONER: Final = "kubernetes.io/no-provisioner"
PHASE_BOUND: Final = "Bound"
PHASE_LOST: Final = "Lost"
PV_AVAILABLE: Final = "Available"

DEFAULT_BIND_TIMEOUT_SECONDS: Final = 600


# --------------------------------------------------------------------------- helpers


def claim_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def _term_matches_labels(term: NodeSelectorTerm, labels: Mapping[str, str]) -> bool:
    """A node selector term against a node known only by its labels (upstream builds such a node)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not req.matches(labels.get(req.key)):
            return False
    for req in term.match_fields:
        if not req.matches("" if req.key == "metadata.name" else None):
            return False
    return True


def pv_node_affinity_matches(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """Upstream ``CheckNodeAffinity``: no required affinity matches everything; terms are ORed."""
    terms = pv.node_affinity
    if terms is None:
        return True
    return any(_term_matches_labels(t, labels) for t in terms)


def topology_matches(sc: StorageClass, labels: Mapping[str, str]) -> bool:
    """Upstream ``MatchTopologySelectorTerms``: no terms match everything; an empty term matches nothing."""
    terms = sc.allowed_topologies
    if not terms:
        return True
    return any(_term_matches_labels(t, labels) for t in terms)


def claim_class(pvc: PersistentVolumeClaim) -> str:
    return pvc.storage_class or ""


def is_fully_bound(pvc: PersistentVolumeClaim) -> bool:
    return bool(pvc.volume_name) and pvc.phase == PHASE_BOUND


def is_delay_binding(pvc: PersistentVolumeClaim, objects: ClusterObjects) -> bool:
    """Upstream ``IsDelayBindingMode``: a class that exists and says WaitForFirstConsumer."""
    name = claim_class(pvc)
    if not name:
        return False
    sc = objects.storage_classes.get(name)
    return sc is not None and sc.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


def bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """Upstream ``IsVolumeBoundToClaim``: the PV's ``claimRef`` names the claim (and its uid, when it has one)."""
    return pv.claim_ref == pvc.key and (not pv.claim_uid or pv.claim_uid == pvc.uid)


def access_modes_satisfied(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    modes = pv.access_modes
    return all(m in modes for m in pvc.access_modes)


def find_matching_volume(
    pvc: PersistentVolumeClaim, pvs: Iterable[PersistentVolume], labels: Mapping[str, str], excluded: set[str]
) -> PersistentVolume | None:
    """Upstream ``FindMatchingVolume`` on the scheduler path (a node given, delayed binding)."""
    best: PersistentVolume | None = None
    wanted_class = claim_class(pvc)
    selector = pvc.selector
    for pv in pvs:
        if pv.name in excluded:
            continue
        if pv.claim_ref and not bound_to_claim(pv, pvc):
            continue
        if pv.capacity < pvc.request:
            continue
        affinity_ok = pv_node_affinity_matches(pv, labels)
        if bound_to_claim(pv, pvc):
            # pre-bound to this claim: it is this PV or nothing
            return pv if affinity_ok else None
        if pv.phase != PV_AVAILABLE:
            continue
        if selector is not None and not selector.matches(pv.labels):
            continue
        if pv.storage_class != wanted_class or not affinity_ok:
            continue
        if not access_modes_satisfied(pvc, pv):
            continue
        if best is None or pv.capacity < best.capacity:
            best = pv
    return best


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    bound: tuple[PersistentVolumeClaim, ...]
    #: unbound claims of WaitForFirstConsumer classes, smallest request first (stable)
    delayed: tuple[PersistentVolumeClaim, ...]
    #: class name -> the PVs of that class, for the delayed claims
    pvs_by_class: Mapping[str, tuple[PersistentVolume, ...]]
    objects: ClusterObjects
    #: the CSIStorageCapacity objects by namespace/name, for the delayed claims to provision
    capacities: tuple[CSIStorageCapacity, ...] = ()
    #: node name -> ``node_volumes`` for it, filled as the cycle filters and scores (upstream
    #: ``podVolumesByNode``): Reserve takes the chosen node's static bindings and provisions from here
    by_node: dict[str, NodeVolumes] = field(default_factory=dict)


def pod_volume_claims(pod: Pod, objects: ClusterObjects) -> PodVolumeClaims | Status:
    """PreFilter: SKIP, a rejection, or the pod's claims sorted into bound and delayed."""
    claims = objects.persistent_volume_claims
    found: list[PersistentVolumeClaim] = []
    for v in pod.volumes:
        if v.kind == "persistentVolumeClaim":
            name, ephemeral = v.ident, False
        elif v.kind == "ephemeral":
            name, ephemeral = f"{pod.name}-{v.name}", True
        else:
            continue
        pvc = claims.get(f"{pod.namespace}/{name}")
        if pvc is None:
            if ephemeral:
                return basics.unresolvable(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                )
            return basics.unresolvable(claim_not_found(name))
        if pvc.phase == PHASE_LOST:
            return basics.unresolvable(
                f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume "{pvc.volume_name}"'
            )
        found.append(pvc)
    if not found:
        return basics.SKIP
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate = False
    for pvc in found:
        if is_fully_bound(pvc):
            bound.append(pvc)
        elif not pvc.volume_name and is_delay_binding(pvc, objects):
            delayed.append(pvc)
        else:
            immediate = True
    if immediate:
        return basics.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)
    pvs_by_class: dict[str, tuple[PersistentVolume, ...]] = {}
    if delayed:
        classes = {claim_class(c) for c in delayed}
        grouped: dict[str, list[PersistentVolume]] = {c: [] for c in classes}
        for pv in objects.persistent_volumes.values():
            group = grouped.get(pv.storage_class)
            if group is not None:
                group.append(pv)
        pvs_by_class = {c: tuple(g) for c, g in grouped.items()}
        delayed.sort(key=lambda c: c.request)
    capacities: tuple[CSIStorageCapacity, ...] = ()
    if delayed and objects.csi_storage_capacities:
        stored = objects.csi_storage_capacities
        capacities = tuple(stored[k] for k in sorted(stored))
    return PodVolumeClaims(tuple(bound), tuple(delayed), pvs_by_class, objects, capacities)


def match_delayed(
    claims: PodVolumeClaims, labels: Mapping[str, str]
) -> tuple[list[tuple[PersistentVolumeClaim, PersistentVolume]], list[PersistentVolumeClaim]]:
    """Upstream ``findMatchingVolumes``: the static bindings (claim, PV) for a node and the claims left over."""
    chosen: set[str] = set()
    bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]] = []
    leftover: list[PersistentVolumeClaim] = []
    for pvc in claims.delayed:
        pv = find_matching_volume(pvc, claims.pvs_by_class.get(claim_class(pvc), ()), labels, chosen)
        if pv is None:
            leftover.append(pvc)
        else:
            chosen.add(pv.name)
            bindings.append((pvc, pv))
    return bindings, leftover


def bound_pv_affinity(pv: PersistentVolume, migrated_plugins: frozenset[str]) -> tuple[NodeSelectorTerm, ...] | None:
    """Upstream ``tryTranslatePVToCSI``: the node affinity a bound PV is checked with. An in-tree PV of a
    migrated plugin the node's CSINode lists in its migrated-plugins annotation is checked as its CSI
    translation (zone key -> the driver's topology key). Raises ``Untranslatable``."""
    plugin = IN_TREE_PLUGINS.get(pv.kind)
    if plugin is None or plugin not in migrated_plugins:
        return pv.node_affinity
    return translated_node_affinity(pv)


def _affinity_matches(terms: tuple[NodeSelectorTerm, ...] | None, labels: Mapping[str, str]) -> bool:
    return terms is None or any(_term_matches_labels(t, labels) for t in terms)


def capacity_sufficient(capacity: CSIStorageCapacity, size: int) -> bool:
    """Upstream ``capacitySufficient``: ``maximumVolumeSize`` if given, else ``capacity``, holds ``size``."""
    limit = capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity
    return limit is not None and limit >= size


def enough_capacity(
    claims: PodVolumeClaims, provisioner: str, pvc: PersistentVolumeClaim, sc: StorageClass, labels: Mapping[str, str]
) -> tuple[bool, CSIStorageCapacity | None]:
    """Upstream ``hasEnoughCapacity``: only for a CSIDriver with ``storageCapacity: true``; then some
    CSIStorageCapacity of the class whose node topology selects the node must hold the claim's request.
    Upstream takes the first match of its lister's (unordered) list; we take the first by namespace/name."""
    driver = claims.objects.csi_drivers.get(provisioner)
    if driver is None or not driver.storage_capacity:
        return True, None
    for capacity in claims.capacities:
        if (
            capacity.storage_class == sc.name
            and capacity_sufficient(capacity, pvc.request)
            and capacity.node_topology is not None
            and capacity.node_topology.matches(labels)
        ):
            return True, capacity
    return False, None


@dataclass(frozen=True, slots=True)
class NodeVolumes:
    """Upstream ``FindPodVolumes``' result for one node: the verdict, the static bindings (claim, PV) and
    the dynamic provisions (claim, the CSIStorageCapacity it was checked against, None when unchecked)."""

    status: Status
    static: tuple[tuple[PersistentVolumeClaim, PersistentVolume], ...] = ()
    provisions: tuple[tuple[PersistentVolumeClaim, CSIStorageCapacity | None], ...] = ()


def _check_bound(claims: PodVolumeClaims, node: Node) -> tuple[bool, bool] | Status:
    """Upstream ``checkBoundClaims``: (node affinity satisfied, PVs found), or an error."""
    objects = claims.objects
    csi_node = objects.csi_nodes.get(node.name)
    migrated = csi_node.migrated_plugins if csi_node is not None else frozenset()
    for pvc in claims.bound:
        pv = objects.persistent_volumes.get(pvc.volume_name)
        if pv is None:
            return True, False
        try:
            terms = bound_pv_affinity(pv, migrated)
        except Untranslatable as exc:
            return basics.error(f"could not translate pv: {exc}")
        if not _affinity_matches(terms, node.labels):
            return False, True
    return True, True


def node_volumes(claims: PodVolumeClaims, node: Node) -> NodeVolumes:
    """Upstream ``FindPodVolumes`` for ``node``: bound claims, then matching PVs, then provisioning."""
    objects = claims.objects
    labels = node.labels
    bound_ok = pvs_found = unbound_ok = sufficient = True
    if claims.bound:
        checked = _check_bound(claims, node)
        if isinstance(checked, Status):
            return NodeVolumes(checked)
        bound_ok, pvs_found = checked
    static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = []
    provisions: list[tuple[PersistentVolumeClaim, CSIStorageCapacity | None]] = []
    if claims.delayed:
        static, leftover = match_delayed(claims, labels)
        # Claims without a PV pass if they can all be provisioned (upstream ``checkVolumeProvisions``).
        for pvc in leftover:
            name = claim_class(pvc)
            if not name:
                return NodeVolumes(basics.error(f'no class for claim "{pvc.key}"'))
            sc = objects.storage_classes.get(name)
            if sc is None:
                return NodeVolumes(basics.error(f'failed to find storage class "{name}"'))
            if not sc.provisioner or sc.provisioner == NOT_SUPPORTED_PROVISIONER or not topology_matches(sc, labels):
                unbound_ok = False
                provisions = []
                break
            enough, capacity = enough_capacity(claims, sc.provisioner, pvc, sc, labels)
            if not enough:
                sufficient = False
                provisions = []
                break
            provisions.append((pvc, capacity))
    reasons = []
    if not bound_ok:
        reasons.append(ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_REASON_BIND_CONFLICT)
    if not sufficient:
        reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
    if not pvs_found:
        reasons.append(ERR_REASON_PV_NOT_EXIST)
    status = basics.unresolvable(*reasons) if reasons else basics.SUCCESS
    return NodeVolumes(status, tuple(static), tuple(provisions))


def find_pod_volumes(claims: PodVolumeClaims, node: Node) -> Status:
    """VolumeBinding's Filter verdict for ``node`` (kept in ``claims.by_node`` with what it found there)."""
    return volumes_on(claims, node).status


def volumes_on(claims: PodVolumeClaims, node: Node) -> NodeVolumes:
    """``node_volumes`` for ``node``, computed once a cycle: what it finds depends on the node's labels and the
    storage objects, never on the pods there (a preemption's dry run finds the same)."""
    found = claims.by_node.get(node.name)
    if found is None:
        found = claims.by_node[node.name] = node_volumes(claims, node)
    return found


# --------------------------------------------------------------------------- Reserve and PreBind


@dataclass(frozen=True, slots=True)
class VolumeWrite:
    """One write of PreBind (upstream ``bindAPIUpdate``): a merge patch of a PV or a claim, preconditioned on
    the resourceVersion the cycle read (a PV another pod's PreBind took meanwhile answers 409)."""

    path: str
    body: Mapping[str, object]


def bind_volume_write(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> VolumeWrite | None:
    """Upstream ``GetBindVolumeToClaim``: the PV's ``claimRef`` set to the claim, and the bound-by-controller
    annotation when the PV was not bound to it already; None when the PV says so already (upstream writes
    the unchanged PV anyway)."""
    bound = bound_to_claim(pv, pvc)
    if bound and pv.claim_uid == pvc.uid:
        return None
    meta: dict[str, object] = {}
    if pv.resource_version:
        meta["resourceVersion"] = pv.resource_version
    if not bound:
        meta["annotations"] = {ANNOTATION_BOUND_BY_CONTROLLER: "yes"}
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": pvc.namespace, "name": pvc.name}
    if pvc.uid:
        ref["uid"] = pvc.uid
    if pvc.resource_version:
        ref["resourceVersion"] = pvc.resource_version
    return VolumeWrite(
        paths.item("v1", "persistentvolumes", pv.name),
        {"metadata": meta, "spec": {"claimRef": ref}},
    )


def select_node_write(pvc: PersistentVolumeClaim, node_name: str) -> VolumeWrite | None:
    """Upstream ``AssumePodVolumes`` for a claim to provision: its selected-node annotation names the node (the
    PV controller or the CSI provisioner provisions for that node); None when it does already."""
    if pvc.selected_node == node_name:
        return None
    meta: dict[str, object] = {"annotations": {ANNOTATION_SELECTED_NODE: node_name}}
    if pvc.resource_version:
        meta["resourceVersion"] = pvc.resource_version
    return VolumeWrite(
        paths.item("v1", "persistentvolumeclaims", pvc.name, namespace=pvc.namespace),
        {"metadata": meta},
    )


def volume_writes(found: NodeVolumes, node_name: str) -> tuple[VolumeWrite, ...]:
    """The writes PreBind makes for the node Reserve took: the static bindings first, then the provisions,
    as upstream's ``bindAPIUpdate`` orders them."""
    writes = [bind_volume_write(pv, pvc) for pvc, pv in found.static]
    writes += [select_node_write(pvc, node_name) for pvc, _ in found.provisions]
    return tuple(w for w in writes if w is not None)


# --------------------------------------------------------------------------- capacity score


def class_score(shape: Shape, requested: int, capacity: int) -> int:
    """Upstream ``buildScorerFunction``'s per-class score: the shape at ``requested * 100 / capacity``."""
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, MAX_UTILIZATION)
    return broken_linear(shape, requested * MAX_UTILIZATION // capacity)


def _average(shape: Shape, by_class: Mapping[str, list[int]]) -> int:
    if not by_class:
        return 0
    total = sum(class_score(shape, requested, capacity) for requested, capacity in by_class.values())
    return (2 * total + len(by_class)) // (2 * len(by_class))  # math.Round of the mean


def capacity_score(shape: Shape, bindings: Iterable[tuple[PersistentVolumeClaim, PersistentVolume]]) -> int:
    """Upstream ``VolumeBinding.Score`` over a node's static bindings: per PV storage class, the claims'
    requests summed against the PVs' capacities summed; the classes' scores averaged (``math.Round``)."""
    by_class: dict[str, list[int]] = {}
    for pvc, pv in bindings:
        resource = by_class.setdefault(pv.storage_class, [0, 0])
        resource[0] += pvc.request
        resource[1] += pv.capacity
    return _average(shape, by_class)


def provision_score(shape: Shape, provisions: Iterable[tuple[PersistentVolumeClaim, CSIStorageCapacity | None]]) -> int:
    """Upstream ``VolumeBinding.Score`` over a node's dynamic provisions (no static binding): per claim
    class, the requests summed against the capacity of the CSIStorageCapacity found (set, not summed: two
    claims of one class draw on one pool); provisions without one do not count."""
    by_class: dict[str, list[int]] = {}
    for pvc, capacity in provisions:
        if capacity is None:
            continue
        resource = by_class.setdefault(claim_class(pvc), [0, 0])
        resource[1] = capacity.capacity or 0
        resource[0] += pvc.request
    return _average(shape, by_class)


def fits(pod: Pod, node_info: NodeInfo, objects: ClusterObjects) -> Status:
    """VolumeBinding's verdict for ``pod`` on ``node_info`` (PreFilter and Filter together)."""
    claims = pod_volume_claims(pod, objects)
    if isinstance(claims, Status):
        return basics.SUCCESS if claims.is_skip else claims
    if node_info.node is None:
        return basics.error("node not found")
    return find_pod_volumes(claims, node_info.node)


# --------------------------------------------------------------------------- plugin


#: upstream ``SetDefaults_VolumeBindingArgs`` with StorageCapacityScoring on: the emptier the PVs, the better
DEFAULT_SHAPE: Final = (
    UtilizationShapePoint(utilization=0, score=MAX_CUSTOM_PRIORITY_SCORE),
    UtilizationShapePoint(utilization=MAX_UTILIZATION, score=0),
)


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    """Upstream ``VolumeBindingArgs``; see the module docstring. An absent or empty ``shape`` is the default."""

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[UtilizationShapePoint, ...] | None = None

    def __post_init__(self) -> None:
        if self.bind_timeout_seconds < 0:
            raise PluginArgsError("bindTimeoutSeconds", "invalid BindTimeoutSeconds, should not be a negative value")
        shape = self.shape or DEFAULT_SHAPE
        for i in range(1, len(shape)):
            if shape[i - 1].utilization >= shape[i].utilization:
                raise PluginArgsError(f"shape[{i}].utilization", "values must be sorted in increasing order")
        for i, point in enumerate(shape):
            if not 0 <= point.utilization <= MAX_UTILIZATION:
                raise PluginArgsError(f"shape[{i}].utilization", f"not in valid range [0, {MAX_UTILIZATION}]")
            if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
                raise PluginArgsError(f"shape[{i}].score", f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")

    @property
    def scaled_shape(self) -> Shape:
        """(utilization, score x 10) points, as upstream's ``New`` builds the scorer."""
        factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        return tuple((p.utilization, p.score * factor) for p in self.shape or DEFAULT_SHAPE)


class VolumeBinding(
    PreFilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    NAME = "VolumeBinding"
    Args = VolumeBindingArgs

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's volumes."""
        return batching.volumes(pod)

    def __init__(self, args: VolumeBindingArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.args: VolumeBindingArgs
        self._key = StateKey[PodVolumeClaims](f"PreFilter{self.name}")
        self._writes = StateKey[tuple[VolumeWrite, ...]](f"Reserve{self.name}")
        self._shape = self.args.scaled_shape

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``EventsToRegister``: classes, claims (the pod's own), volumes and CSINodes added or
        changed; nodes added or relabelled; a CSIStorageCapacity added or raised; a CSIDriver that stops
        tracking capacity (upstream looks for it among the pod's inline ``csi`` volumes)."""
        return (
            ClusterEventWithHint(ClusterEvent.STORAGE_CLASS_CHANGE, _added_or_changed),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CLAIM_CHANGE, _own_claim_added_or_changed),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CHANGE, _added_or_changed),
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, _relabelled),
            ClusterEventWithHint(ClusterEvent.CSI_NODE_CHANGE, _added_or_changed),
            ClusterEventWithHint(ClusterEvent.CSI_STORAGE_CAPACITY_CHANGE, _capacity_added_or_raised),
            ClusterEventWithHint(ClusterEvent.CSI_DRIVER_CHANGE, _capacity_tracking_stopped),
        )

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if not pod.volumes:
            return basics.SKIP
        claims = pod_volume_claims(pod, snapshot.objects)
        if isinstance(claims, Status):
            return claims
        state.write(self._key, claims)
        return basics.SUCCESS

    def _not_found(self) -> str:
        return f"reading {self._key.label!r} from cycle state: not found"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s = state.read(self._key)
        if s is None:
            return basics.error(self._not_found())
        if node.node is None:
            return basics.error("node not found")
        return find_pod_volumes(s, node.node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        claims = state.read(self._key)
        if claims is None:
            raise LookupError(self._not_found())
        info = table.info
        return np.fromiter((_node_verdict(claims, info(k)) for k in index.tolist()), dtype=np.bool_, count=len(index))

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        """SKIP when no node can have a static binding (no delayed claims): upstream scores 0 everywhere then."""
        claims = state.read(self._key)
        return basics.SUCCESS if claims is not None and claims.delayed else basics.SKIP

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        """Upstream ``Score`` with StorageCapacityScoring on: the node's static bindings by PV capacity, or
        else its dynamic provisions by their CSIStorageCapacity."""
        claims = state.read(self._key)
        if claims is None or not claims.delayed or node.node is None:
            return 0
        found = volumes_on(claims, node.node)
        if found.static:
            return capacity_score(self._shape, found.static)
        return provision_score(self._shape, found.provisions)

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        """Upstream ``Reserve`` (``AssumePodVolumes``): the writes PreBind is to make for the chosen node's delayed
        claims. Nothing for a pod whose claims are all bound, or a node the cycle did not filter (upstream:
        ``allBound``)."""
        claims = state.read(self._key)
        found = claims.by_node.get(node_name) if claims is not None and claims.delayed else None
        writes = volume_writes(found, node_name) if found is not None else ()
        if writes:
            state.write(self._writes, writes)
        return basics.SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        """Upstream ``Unreserve`` forgets its assumed PVs and claims; nothing is assumed here (a PV two pods
        both chose is settled by the resourceVersion of PreBind's write), and writes already made stay, as
        upstream's do."""

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Upstream ``PreBindPreFlight``: work when Reserve left writes."""
        return basics.SUCCESS if state.read(self._writes) else basics.SKIP

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        """Upstream ``PreBind`` (``BindPodVolumes``' ``bindAPIUpdate``): each PV bound to its claim, each claim
        to provision told its node; the first refused write fails the binding cycle (the pod backs off and
        is scheduled again from the claims as they are then).

        Upstream then polls, each second up to ``bindTimeoutSeconds``, until the PV controller has bound
        every claim, and fails the pod when a provisioner gave its node back (the annotation removed); this
        PreBind returns once the writes are accepted: the pod is bound while its volume is provisioned, and
        a provisioning that fails for that node leaves the pod there (the kubelet waits for the claim)."""
        for write in state.read(self._writes) or ():
            answer = await client.request(
                "PATCH", write.path, write.body, content_type="application/merge-patch+json", decode=False
            )
            if not answer.ok:  # upstream returns the client's error as it is: the Status message
                return basics.error(answer.detail(limit=1000))
        return basics.SUCCESS


def _node_verdict(claims: PodVolumeClaims, node_info: NodeInfo) -> bool:
    node = node_info.node
    return node is not None and find_pod_volumes(claims, node).is_success


def _claims(pod: Pod) -> frozenset[str]:
    """The claims the pod's volumes name (a generic ephemeral volume's is ``<pod>-<volume>``)."""
    return frozenset(
        f"{pod.name}-{v.name}" if v.kind == "ephemeral" else v.ident
        for v in pod.volumes
        if v.kind in ("persistentVolumeClaim", "ephemeral")
    )


def _is_own_claim(pod: Pod, claim: object) -> bool:
    return isinstance(claim, PersistentVolumeClaim) and claim.namespace == pod.namespace and claim.name in _claims(pod)


def _added_or_changed(pod: Pod, old: object, new: object) -> QueueingHint:
    return QueueingHint.QUEUE if new is not None else QueueingHint.QUEUE_SKIP


def _own_claim_added_or_changed(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterPersistentVolumeClaimChange``: a claim the pod uses."""
    return QueueingHint.QUEUE if _is_own_claim(pod, new) else QueueingHint.QUEUE_SKIP


def _volume_limit(capacity: CSIStorageCapacity) -> int | None:
    return capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity


def _capacity_added_or_raised(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterCSIStorageCapacityChange``: created, or its volume limit grew."""
    if not isinstance(new, CSIStorageCapacity):
        return QueueingHint.QUEUE_SKIP  # deleted: not registered upstream
    if not isinstance(old, CSIStorageCapacity):
        return QueueingHint.QUEUE
    old_limit, new_limit = _volume_limit(old), _volume_limit(new)
    raised = new_limit is not None and (old_limit is None or new_limit > old_limit)
    return QueueingHint.QUEUE if raised else QueueingHint.QUEUE_SKIP


def _capacity_tracking_stopped(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterCSIDriverChange`` (updates only): the driver of one of the pod's inline
    ``csi`` volumes stopped tracking storage capacity."""
    if not isinstance(old, CSIDriver) or not isinstance(new, CSIDriver):
        return QueueingHint.QUEUE_SKIP
    if old.storage_capacity and not new.storage_capacity:
        if any(v.kind == "csi" and v.driver == new.name for v in pod.volumes):
            return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def _relabelled(pod: Pod, old: object, new: object) -> QueueingHint:
    if isinstance(old, Node) and isinstance(new, Node) and old.labels == new.labels:
        return QueueingHint.QUEUE_SKIP
    return QueueingHint.QUEUE
