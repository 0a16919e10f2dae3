"""Volume-count limits: NodeVolumeLimits (CSI, today's upstream) and the v1.9 cloud-disk counters.

**NodeVolumeLimits** follows today's upstream ``pkg/scheduler/framework/plugins/nodevolumelimits/csi.go``
(``CSILimits``; v1.9 Policy alias ``MaxCSIVolumeCountPred`` from v1.11+). The per-driver limits are
the CSINode's ``spec.drivers[].allocatable.count`` (``snapshot.objects.csi_nodes[node].limits``); a
node without a CSINode, or without a limit for a driver, does not limit that driver. Volumes
counted, for the incoming pod and every pod on the node: ``persistentVolumeClaim`` and generic
ephemeral volumes (claim ``<pod>-<volume>``), through claim -> PV -> ``csi.driver`` and
``csi.volumeHandle``. A claim not bound to a PV (or whose PV is missing) counts as one volume of
its storage class's provisioner, keyed by the claim; a claim without a class, with a missing
class, or bound to a PV neither CSI nor migrated (below) does not count. The same driver/handle
used by several pods counts once. Fails, Unschedulable "node(s) exceed max volume count", when for some driver
``attached + new-not-yet-attached > limit``. A missing claim of the incoming pod is
UnschedulableAndUnresolvable ``looking up PVC <ns>/<name>: persistentvolumeclaim "<name>" not found``;
missing claims of pods already on the node are not counted; a claim with no name is an error.

**EBSLimits / GCEPDLimits / AzureDiskLimits** (v1.9 ``MaxEBSVolumeCount`` / ``MaxGCEPDVolumeCount``
/ ``MaxAzureDiskVolumeCount``; removed upstream in v1.32) follow v1.9
``plugin/pkg/scheduler/algorithm/predicates/predicates.go`` (``MaxPDVolumeCountChecker``): the
unique volume IDs of one type (EBS ``volumeID``, GCE ``pdName``, Azure ``diskName``) among the
pod's inline volumes and the PVs bound to its claims; a claim that is missing, unbound or bound to
a missing PV counts as one volume keyed by the claim. Fails when ``existing + new-not-on-node >
maxVolumes`` (``EBSLimitsArgs`` / ``GCEPDLimitsArgs`` / ``AzureDiskLimitsArgs``, defaults 39 / 16 /
16). v1.9's ``KUBE_MAX_PD_VOLS`` environment override is not read (the core reads no
environment): a policy lists the plugin by name (``EBSLimits``...) with ``argument: {maxVolumes: N}``.

All four return SKIP from PreFilter when the pod brings no volume that would count (no volumes,
no claims, or claims that resolve to nothing countable), which is exactly when Filter would pass
every node. ``filter_nodes`` loops over the nodes (pods come and go); it exists so a pod with
volumes still takes the vectorised path for the other filters.

CSI migration (upstream ``utils.go`` ``isCSIMigrationOn``; ``core/model/csi_translation.py``): on a node
that has a CSINode, in-tree AWS EBS, GCE PD, Azure Disk, Cinder and Portworx volumes count against their CSI
driver (``ebs.csi.aws.com``, ``pd.csi.storage.gke.io``, ``disk.csi.azure.com``, ``cinder.csi.openstack.org``,
``pxd.portworx.com``): inline volumes, PVs of those types, and unbound claims whose class has the in-tree
provisioner (``kubernetes.io/aws-ebs``...), keyed by the translated volume handle (EBS: the id, ``aws://zone/``
stripped; GCE PD: ``projects/UNSPECIFIED/zones/<zone>/disks/<pd>``, the zone from a PV's zone label or
``UNSPECIFIED``, ``regions/<region>`` for a multi-zone label; Azure Disk: the disk URI, and only ``kind: Managed``
translates, the API default ``Shared`` does not; Cinder/Portworx: the volume id). An inline volume that does not
translate is an error, a PV that does not is not counted. Azure File and vSphere translate upstream but their
migration is off: not counted. A node without a CSINode counts nothing.

Limits: VolumeAttachments are not read (not watched), nor CSIDriver objects (``preventPodSchedulingIfMissing``);
inline ``csi:`` volumes are not attachable and never count (as upstream); limits from Node
``attachable-volumes-*`` allocatable are not read; the generic-ephemeral claim's ownership by the pod is not
checked (the objects keep no claim owner references); the claim's storage class is ``spec.storageClassName`` only.

Requeueing (upstream ``CSILimits.EventsToRegister``): a CSINode added or changed, a bound pod with
volumes deleted, a claim of the pod added; the v1.9 counters also take a node or a PV added.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import NoArgs, PluginArgsError
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
from ..model.csi_translation import (
    MIGRATED_DRIVERS,
    MIGRATED_PROVISIONERS,
    UNMIGRATED_PROVISIONERS,
    Untranslatable,
    inline_handle,
    pv_handle,
)
from ..model.objects import PersistentVolumeClaim, Pod, Volume
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import ClusterObjects, NodeTable, Snapshot

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: Final = "node(s) exceed max volume count"
ERR_CLAIM_NO_NAME: Final = "PersistentVolumeClaim had no name"

DEFAULT_MAX_EBS_VOLUMES: Final = 39
DEFAULT_MAX_GCEPD_VOLUMES: Final = 16
DEFAULT_MAX_AZURE_DISK_VOLUMES: Final = 16

PVC: Final = "persistentVolumeClaim"
EPHEMERAL: Final = "ephemeral"
_CLAIM_KINDS: Final = frozenset({PVC, EPHEMERAL})

#: a unique volume: (driver, handle) for a real CSI volume, (driver, "", "ns/claim") for one to be provisioned
VolumeKey = tuple[str, ...]


def _not_found(label: str) -> str:
    return f"reading {label!r} from cycle state: not found"


def claim_name(pod: Pod, v: Volume) -> str:
    """The claim behind a claim or generic ephemeral volume (``<pod>-<volume>`` for the latter)."""
    return f"{pod.name}-{v.name}" if v.kind == EPHEMERAL else v.ident


# =========================================================================== CSI


class _Missing(Exception):
    """A claim of the incoming pod is missing (becomes UnschedulableAndUnresolvable)."""


def _claim_volume(pvc: PersistentVolumeClaim, objects: ClusterObjects, migrate: bool) -> tuple[str, str] | None:
    """Upstream ``getCSIDriverInfo``: (driver, handle) of a claim's volume, or None when it does not count."""
    pv = objects.persistent_volumes.get(pvc.volume_name) if pvc.volume_name else None
    if pv is not None:
        if pv.kind == "csi":
            return (pv.driver, pv.ident) if pv.driver and pv.ident else None
        driver = MIGRATED_DRIVERS.get(pv.kind)
        if driver is None or not migrate:
            return None
        try:
            handle = pv_handle(pv)
        except Untranslatable:
            return None  # upstream logs it and does not count the volume
        return (driver, handle) if handle else None
    # Unbound, or bound to a PV we cannot see: count it against its class's provisioner.
    class_name = pvc.storage_class or ""
    sc = objects.storage_classes.get(class_name) if class_name else None
    if sc is None or not sc.provisioner:
        return None
    provisioner = sc.provisioner
    if provisioner in UNMIGRATED_PROVISIONERS:
        return None
    migrated = MIGRATED_PROVISIONERS.get(provisioner)
    if migrated is not None:
        if not migrate:
            return None
        provisioner = migrated
    return (provisioner, "\x00" + pvc.key)  # upstream: a random prefix, so it never equals a real handle


def csi_volumes(pod: Pod, objects: ClusterObjects, *, new_pod: bool, migrate: bool) -> dict[VolumeKey, str]:
    """The pod's countable CSI volumes: unique key -> driver (upstream ``filterAttachableVolumes``).

    ``migrate``: the node has a CSINode, so the in-tree volumes of ``MIGRATED_DRIVERS`` (inline, PVs and
    classes of their provisioners) count against their CSI driver. Raises ``_Missing`` for a missing claim
    of a new pod, ``ValueError`` for a claim with no name or an inline volume that does not translate.
    """
    out: dict[VolumeKey, str] = {}
    claims = objects.persistent_volume_claims
    for v in pod.volumes:
        if v.kind not in _CLAIM_KINDS:
            driver = MIGRATED_DRIVERS.get(v.kind)
            if driver is not None and migrate:
                try:
                    out[(driver, inline_handle(v))] = driver
                except Untranslatable as exc:
                    raise ValueError(f"converting volume({v.name}) from inline to csi: {exc}") from None
            continue  # other inline volumes (and inline csi:) are not counted, as upstream
        name = claim_name(pod, v)
        if not name:
            raise ValueError(ERR_CLAIM_NO_NAME)
        pvc = claims.get(f"{pod.namespace}/{name}")
        if pvc is None:
            if new_pod:
                raise _Missing(f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found')
            continue
        found = _claim_volume(pvc, objects, migrate)
        if found is not None:
            out[found] = found[0]
    return out


def _new_volumes(pod: Pod, objects: ClusterObjects, migrate: bool) -> tuple[Mapping[VolumeKey, str], Status | None]:
    try:
        return csi_volumes(pod, objects, new_pod=True, migrate=migrate), None
    except _Missing as exc:
        return {}, basics.unresolvable(str(exc))
    except ValueError as exc:
        return {}, basics.error(str(exc))


@dataclass(frozen=True, slots=True)
class CSIState:
    """The incoming pod's countable volumes and the objects they (and the node's pods' claims) resolve in.

    Two views, because CSI migration is on exactly on the nodes that have a CSINode."""

    #: for a node with a CSINode (in-tree volumes migrated)
    new_volumes: Mapping[VolumeKey, str]
    objects: ClusterObjects
    #: the status every node with a CSINode gets instead (a missing claim, a claim with no name, a bad volume)
    status: Status | None = None
    #: the status every node without a CSINode gets instead (such a node limits nothing)
    status_without_csi_node: Status | None = None


def csi_state(pod: Pod, objects: ClusterObjects) -> CSIState | Status:
    """SKIP when nothing of the pod counts on any node; otherwise what Filter needs."""
    if not any(v.kind in _CLAIM_KINDS or v.kind in MIGRATED_DRIVERS for v in pod.volumes):
        return basics.SKIP
    new, status = _new_volumes(pod, objects, True)
    _, status_without = _new_volumes(pod, objects, False)
    if not new and status is None and status_without is None:
        return basics.SKIP
    return CSIState(new, objects, status, status_without)


def csi_check(s: CSIState, node_info: NodeInfo) -> Status:
    """The CSI filter's verdict for one node."""
    objects = s.objects
    csi_node = objects.csi_nodes.get(node_info.name)
    if csi_node is None:
        return s.status_without_csi_node or basics.SUCCESS
    if s.status is not None:
        return s.status
    limits = csi_node.limits
    if not s.new_volumes or not limits:
        return basics.SUCCESS
    attached: dict[VolumeKey, str] = {}
    for existing in node_info.pods.values():
        if existing.volumes:
            try:
                attached.update(csi_volumes(existing, objects, new_pod=False, migrate=True))
            except ValueError as exc:
                return basics.error(str(exc))
    attached_count: dict[str, int] = {}
    for driver in attached.values():
        attached_count[driver] = attached_count.get(driver, 0) + 1
    new_count: dict[str, int] = {}
    for key, driver in s.new_volumes.items():
        if key not in attached:
            new_count[driver] = new_count.get(driver, 0) + 1
    for driver, count in new_count.items():
        limit = limits.get(driver)
        if limit is not None and attached_count.get(driver, 0) + count > limit:
            return basics.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
    return basics.SUCCESS


def fits(pod: Pod, node_info: NodeInfo, objects: ClusterObjects) -> Status:
    """NodeVolumeLimits' verdict for ``pod`` on ``node_info``."""
    s = csi_state(pod, objects)
    if isinstance(s, Status):
        return basics.SUCCESS if s.is_skip else s
    return csi_check(s, node_info)


class NodeVolumeLimits(PreFilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "NodeVolumeLimits"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's volumes."""
        return batching.volumes(pod)

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``CSILimits.EventsToRegister``: a CSINode added or changed, a bound pod with volumes
        deleted, a claim of the pod added. (No VolumeAttachment: it is not watched.)"""
        return _VOLUME_EVENTS

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[CSIState](f"PreFilter{self.name}")

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        s = csi_state(pod, snapshot.objects)
        if isinstance(s, Status):
            return s
        state.write(self._key, s)
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod.volumes:
            return basics.SUCCESS
        s = state.read(self._key)
        if s is None:
            return basics.error(_not_found(self._key.label))
        return csi_check(s, node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(_not_found(self._key.label))
        info = table.info
        return np.fromiter((csi_check(s, info(k)).is_success for k in index.tolist()), dtype=np.bool_, count=len(index))


# =========================================================================== v1.9 cloud-disk counters


def legacy_volume_ids(pod: Pod, kind: str, objects: ClusterObjects, into: set[Hashable]) -> None:
    """Add the pod's unique volumes of in-tree type ``kind`` to ``into`` (v1.9 ``filterVolumes``).

    ``("id", <volume id>)`` for an inline volume or bound PV of that type; ``("claim", "ns/name")``
    for a claim that is missing, unbound or bound to a missing PV. Raises ``ValueError`` for a
    claim with no name.
    """
    claims = objects.persistent_volume_claims
    for v in pod.volumes:
        if v.kind == kind:
            into.add(("id", v.ident))
            continue
        if v.kind != PVC:
            continue
        if not v.ident:
            raise ValueError(ERR_CLAIM_NO_NAME)
        key = f"{pod.namespace}/{v.ident}"
        pvc = claims.get(key)
        pv = objects.persistent_volumes.get(pvc.volume_name) if pvc is not None and pvc.volume_name else None
        if pv is None:
            into.add(("claim", key))  # cannot tell its type: assume it counts, as v1.9 did
        elif pv.kind == kind:
            into.add(("id", pv.ident))


@dataclass(frozen=True, slots=True)
class LegacyState:
    """The incoming pod's unique volumes of one type and the objects the node's pods' claims resolve in."""

    new_volumes: frozenset[Hashable]
    objects: ClusterObjects
    #: the status every node gets instead (a claim with no name)
    status: Status | None = None


def legacy_state(pod: Pod, kind: str, objects: ClusterObjects) -> LegacyState | Status:
    if not any(v.kind == kind or v.kind == PVC for v in pod.volumes):
        return basics.SKIP
    new: set[Hashable] = set()
    try:
        legacy_volume_ids(pod, kind, objects, new)
    except ValueError as exc:
        return LegacyState(frozenset(), objects, basics.error(str(exc)))
    if not new:
        return basics.SKIP
    return LegacyState(frozenset(new), objects)


def legacy_check(s: LegacyState, node_info: NodeInfo, kind: str, max_volumes: int) -> Status:
    """The v1.9 predicate for one node: existing unique volumes + the new ones not already there."""
    if s.status is not None:
        return s.status
    objects = s.objects
    existing: set[Hashable] = set()
    for p in node_info.pods.values():
        if p.volumes:
            try:
                legacy_volume_ids(p, kind, objects, existing)
            except ValueError as exc:
                return basics.error(str(exc))
    new = sum(1 for k in s.new_volumes if k not in existing)
    if len(existing) + new > max_volumes:
        return basics.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
    return basics.SUCCESS


def _check_max_volumes(max_volumes: int) -> None:
    if max_volumes <= 0:
        raise PluginArgsError("maxVolumes", f"must be a positive integer, got {max_volumes!r}")


@dataclass(frozen=True, slots=True)
class MaxVolumesArgs:
    """The arguments of a v1.9 cloud-disk counter; each counter's subclass gives the default."""

    #: the most volumes of the counter's type a node may have (v1.9 ``KUBE_MAX_PD_VOLS``)
    max_volumes: int

    def __post_init__(self) -> None:
        _check_max_volumes(self.max_volumes)


@dataclass(frozen=True, slots=True)
class EBSLimitsArgs(MaxVolumesArgs):
    max_volumes: int = DEFAULT_MAX_EBS_VOLUMES


@dataclass(frozen=True, slots=True)
class GCEPDLimitsArgs(MaxVolumesArgs):
    max_volumes: int = DEFAULT_MAX_GCEPD_VOLUMES


@dataclass(frozen=True, slots=True)
class AzureDiskLimitsArgs(MaxVolumesArgs):
    max_volumes: int = DEFAULT_MAX_AZURE_DISK_VOLUMES


class _LegacyVolumeCount(PreFilterPlugin[MaxVolumesArgs], VectorFilter, EnqueueExtensions):
    """One v1.9 MaxPDVolumeCountChecker for the in-tree volume type ``KIND``."""

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """As NodeVolumeLimits (upstream v1.22's EBSLimits & co. registered Node/Add and Pod/Delete), and
        a PV added or changed (a claim's volume the count could not resolve)."""
        return (
            *_VOLUME_EVENTS,
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CHANGE, _added_or_changed),
        )

    KIND: ClassVar[str]
    Args: ClassVar[type[MaxVolumesArgs]]

    def __init__(self, args: MaxVolumesArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[LegacyState](f"PreFilter{self.name}")

    def fits(self, pod: Pod, node_info: NodeInfo, objects: ClusterObjects) -> Status:
        """This counter's verdict for ``pod`` on ``node_info``."""
        s = legacy_state(pod, self.KIND, objects)
        if isinstance(s, Status):
            return basics.SUCCESS if s.is_skip else s
        return legacy_check(s, node_info, self.KIND, self.args.max_volumes)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        s = legacy_state(pod, self.KIND, snapshot.objects)
        if isinstance(s, Status):
            return s
        state.write(self._key, s)
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod.volumes:
            return basics.SUCCESS
        s = state.read(self._key)
        if s is None:
            return basics.error(_not_found(self._key.label))
        return legacy_check(s, node, self.KIND, self.args.max_volumes)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(_not_found(self._key.label))
        info, kind, top = table.info, self.KIND, self.args.max_volumes
        return np.fromiter(
            (legacy_check(s, info(k), kind, top).is_success for k in index.tolist()), dtype=np.bool_, count=len(index)
        )


class EBSLimits(_LegacyVolumeCount):
    NAME = "EBSLimits"
    KIND = "awsElasticBlockStore"
    Args = EBSLimitsArgs


class GCEPDLimits(_LegacyVolumeCount):
    NAME = "GCEPDLimits"
    KIND = "gcePersistentDisk"
    Args = GCEPDLimitsArgs


class AzureDiskLimits(_LegacyVolumeCount):
    NAME = "AzureDiskLimits"
    KIND = "azureDisk"
    Args = AzureDiskLimitsArgs


def _added_or_changed(pod: Pod, old: object, new: object) -> QueueingHint:
    return QueueingHint.QUEUE if new is not None else QueueingHint.QUEUE_SKIP


def after_pod_deleted(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterAssignedPodDeleted``: a bound pod that had volumes counted on its node."""
    if not isinstance(old, Pod):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if old.node_name and old.volumes else QueueingHint.QUEUE_SKIP


def after_claim_added(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterPVCAdded``: a claim the pod uses, created."""
    if old is None and isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace:
        names = {claim_name(pod, v) for v in pod.volumes}
        return QueueingHint.QUEUE if new.name in names else QueueingHint.QUEUE_SKIP
    return QueueingHint.QUEUE_SKIP


_VOLUME_EVENTS: Final = (
    ClusterEventWithHint(ClusterEvent.CSI_NODE_CHANGE, _added_or_changed),
    ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, after_pod_deleted),
    ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CLAIM_CHANGE, after_claim_added),
)
