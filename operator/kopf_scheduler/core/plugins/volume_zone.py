"""VolumeZone: the zone/region labels of the pod's bound PersistentVolumes must match the node's.

Follows today's upstream ``pkg/scheduler/framework/plugins/volumezone/volume_zone.go`` (v1.9:
``NoVolumeZoneConflict``). Only ``persistentVolumeClaim`` volumes are looked at (not inline or
generic ephemeral volumes, as upstream).

PreFilter resolves each claim to its PersistentVolume and collects the PV's topology labels
(``failure-domain.beta.kubernetes.io/zone|region`` and ``topology.kubernetes.io/zone|region``); a
value may list several zones separated by ``__`` (a value with an empty element is ignored, as
upstream ignores a label it cannot parse). Unbound claims of a ``WaitForFirstConsumer`` storage
class are skipped. Everything else that is missing is UnschedulableAndUnresolvable, with
upstream's texts: a claim with no name ("PersistentVolumeClaim had no name"), a missing claim
(``persistentvolumeclaim "<name>" not found``), an unbound claim without a class ("PersistentVolumeClaim
had no pv name and storageClass name"), a missing class (``storageclass.storage.k8s.io "<name>" not
found``), an unbound claim of an Immediate class ("PersistentVolume had no name") and a missing PV
(``persistentvolume "<name>" not found``). With no topology labels to check, PreFilter returns SKIP.

Filter: a node with none of the four labels passes (single-zone clusters); otherwise for each
collected label the node's value of that key (for a beta key, the GA key when the beta one is
absent) must be in the PV's set, else UnschedulableAndUnresolvable "node(s) had no available
volume zone". ``filter_nodes`` loops over the nodes with a per-call cache by label values.

Limits: a claim's class is ``spec.storageClassName`` only; the objects do not keep the deprecated
``volume.beta.kubernetes.io/storage-class`` annotation that upstream reads first.

Requeueing (upstream ``EventsToRegister``): a WaitForFirstConsumer StorageClass added, a node added
or relabelled, a claim of the pod or a PV added or changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import NoArgs
from ..framework.basics import CycleState, StateKey, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PreFilterPlugin,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import (
    LABEL_REGION,
    LABEL_REGION_BETA,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
    Node,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import ClusterObjects, NodeTable, Snapshot

ERR_REASON_CONFLICT: Final = "node(s) had no available volume zone"
ERR_CLAIM_NO_NAME: Final = "PersistentVolumeClaim had no name"
ERR_CLAIM_NO_PV_NO_CLASS: Final = "PersistentVolumeClaim had no pv name and storageClass name"
ERR_PV_NO_NAME: Final = "PersistentVolume had no name"

WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
#: separator of several zones in one PV label value (upstream ``LabelMultiZoneDelimiter``)
MULTI_ZONE_DELIMITER: Final = "__"

#: the PV labels checked, in upstream's order
TOPOLOGY_LABELS: Final = (LABEL_ZONE_BETA, LABEL_REGION_BETA, LABEL_ZONE, LABEL_REGION)
_TO_GA: Final = {LABEL_ZONE_BETA: LABEL_ZONE, LABEL_REGION_BETA: LABEL_REGION}


def not_found(resource: str, name: str) -> str:
    """The API's NotFound text (``<resource>[.<group>] "<name>" not found``)."""
    return f'{resource} "{name}" not found'


def zones_of(value: str) -> frozenset[str] | None:
    """A PV label value as a set of zones; ``None`` when an element is empty (upstream ignores the label)."""
    out = set()
    for part in value.split(MULTI_ZONE_DELIMITER):
        zone = part.strip()
        if not zone:
            return None
        out.add(zone)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pod: Pod, objects: ClusterObjects) -> tuple[PVTopology, ...] | Status:
    """The topology labels of the PVs behind the pod's claims, or the status of what is missing."""
    out: list[PVTopology] = []
    claims = objects.persistent_volume_claims
    for v in pod.volumes:
        if v.kind != "persistentVolumeClaim":
            continue
        if not v.ident:
            return basics.unresolvable(ERR_CLAIM_NO_NAME)
        pvc = claims.get(f"{pod.namespace}/{v.ident}")
        if pvc is None:
            return basics.unresolvable(not_found("persistentvolumeclaim", v.ident))
        pv_name = pvc.volume_name
        if not pv_name:
            class_name = pvc.storage_class or ""
            if not class_name:
                return basics.unresolvable(ERR_CLAIM_NO_PV_NO_CLASS)
            sc = objects.storage_classes.get(class_name)
            if sc is None:
                return basics.unresolvable(not_found("storageclass.storage.k8s.io", class_name))
            if sc.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return basics.unresolvable(ERR_PV_NO_NAME)
        pv = objects.persistent_volumes.get(pv_name)
        if pv is None:
            return basics.unresolvable(not_found("persistentvolume", pv_name))
        for key in TOPOLOGY_LABELS:
            value = pv.labels.get(key)
            if value is None:
                continue
            zones = zones_of(value)
            if zones is not None:
                out.append(PVTopology(pv.name, key, zones))
    return tuple(out)


def check(topologies: tuple[PVTopology, ...], node: Node | None) -> Status:
    """The filter's verdict for a node given the PVs' topology labels."""
    if node is None:
        return basics.error("node not found")
    labels = node.labels
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return basics.SUCCESS  # a node without topology labels takes any volume
    for t in topologies:
        value = labels.get(t.key)
        if value is None and t.key in _TO_GA:
            value = labels.get(_TO_GA[t.key])
        if value is None or value not in t.values:
            return basics.unresolvable(ERR_REASON_CONFLICT)
    return basics.SUCCESS


def fits(pod: Pod, node_info: NodeInfo, objects: ClusterObjects) -> Status:
    """The plugin's verdict for ``pod`` on ``node_info`` (PreFilter and Filter together)."""
    if not pod.volumes:
        return basics.SUCCESS
    topologies = pv_topologies(pod, objects)
    if isinstance(topologies, Status):
        return topologies
    return check(topologies, node_info.node)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    """The topology labels of the pod's PVs (never empty: PreFilter skips otherwise)."""

    topologies: tuple[PVTopology, ...]


class VolumeZone(PreFilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "VolumeZone"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's volumes."""
        return batching.volumes(pod)

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[_PreFilterState](f"PreFilter{self.name}")

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``EventsToRegister``: a WaitForFirstConsumer class added, a node added or relabelled,
        a claim of the pod or a PV added or changed."""
        return (
            ClusterEventWithHint(ClusterEvent.STORAGE_CLASS_CHANGE, _delayed_class_added),
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, _relabelled),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CLAIM_CHANGE, _own_claim_added_or_changed),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CHANGE, _added_or_changed),
        )

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if not pod.volumes:
            return basics.SKIP
        topologies = pv_topologies(pod, snapshot.objects)
        if isinstance(topologies, Status):
            return topologies
        if not topologies:
            return basics.SKIP
        state.write(self._key, _PreFilterState(topologies))
        return basics.SUCCESS

    def _topologies(self, state: CycleState) -> tuple[PVTopology, ...]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(f"reading {self._key.label!r} from cycle state: not found")
        return s.topologies

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod.volumes:
            return basics.SUCCESS
        s = state.read(self._key)
        if s is None:
            return basics.error(f"reading {self._key.label!r} from cycle state: not found")
        return check(s.topologies, node.node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        topologies = self._topologies(state)
        out = np.empty(len(index), dtype=np.bool_)
        seen: dict[tuple[str | None, ...], bool] = {}
        for i, k in enumerate(index.tolist()):
            node = table.info(k).node
            if node is None:
                out[i] = False
                continue
            labels = node.labels
            values = tuple(labels.get(key) for key in TOPOLOGY_LABELS)
            verdict = seen.get(values)
            if verdict is None:
                verdict = seen[values] = check(topologies, node).is_success
            out[i] = verdict
        return out


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


def _delayed_class_added(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterStorageClassAdded``: only a new WaitForFirstConsumer class helps."""
    if old is None and isinstance(new, StorageClass) and new.volume_binding_mode == "WaitForFirstConsumer":
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def _relabelled(pod: Pod, old: object, new: object) -> QueueingHint:
    if isinstance(old, Node) and isinstance(new, Node) and old.labels == new.labels:
        return QueueingHint.QUEUE_SKIP
    return QueueingHint.QUEUE
