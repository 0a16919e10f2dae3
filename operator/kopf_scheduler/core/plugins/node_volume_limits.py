"""Volume-count limits: NodeVolumeLimits (CSI, today's upstream) and the v1.9 cloud-disk counters.

**NodeVolumeLimits** follows today's upstream ``pkg/scheduler/framework/plugins/nodevolumelimits/csi.go``
(``CSILimits``; v1.9 Policy alias ``MaxCSIVolumeCountPred`` from v1.11+). The per-driver limits are
the CSINode's ``spec.drivers[].allocatable.count`` (``snapshot.objects.csi_nodes[node].limits``); a
node without a CSINode, or without a limit for a driver, does not limit that driver. Volumes
counted, for the incoming pod and every pod on the node: ``persistentVolumeClaim`` and generic
ephemeral volumes (claim ``<pod>-<volume>``), through claim -> PV -> ``csi.driver`` and
``csi.volumeHandle``. A claim not bound to a PV (or whose PV is missing) counts as one volume of
its storage class's provisioner, keyed by the claim; a claim without a class, with a missing
class, or bound to a non-CSI PV does not count. The same driver/handle used by several pods counts
once. Fails, Unschedulable "node(s) exceed max volume count", when for some driver
``attached + new-not-yet-attached > limit``. A missing claim of the incoming pod is
UnschedulableAndUnresolvable ``looking up PVC <ns>/<name>: persistentvolumeclaim "<name>" not found``;
missing claims of pods already on the node are not counted; a claim with no name is an error.

**EBSLimits / GCEPDLimits / AzureDiskLimits** (v1.9 ``MaxEBSVolumeCount`` / ``MaxGCEPDVolumeCount``
/ ``MaxAzureDiskVolumeCount``; removed upstream in v1.32) follow v1.9
``plugin/pkg/scheduler/algorithm/predicates/predicates.go`` (``MaxPDVolumeCountChecker``): the
unique volume IDs of one type (EBS ``volumeID``, GCE ``pdName``, Azure ``diskName``) among the
pod's inline volumes and the PVs bound to its claims; a claim that is missing, unbound or bound to
a missing PV counts as one volume keyed by the claim. Fails when ``existing + new-not-on-node >
maxVolumes`` (defaults 39 / 16 / 16). ``KUBE_MAX_PD_VOLS`` is not read here: the caller passes
its value as the ``maxVolumes`` argument (a positive integer).

All four return SKIP from PreFilter when the pod brings no volume that would count (no volumes,
no claims, or claims that resolve to nothing countable), which is exactly when Filter would pass
every node. ``filter_nodes`` loops over the nodes (pods come and go); it exists so a pod with
volumes still takes the vectorised path for the other filters.

Limits: no CSI migration of in-tree volumes (the objects keep no CSINode
``storage.alpha.kubernetes.io/migrated-plugins`` annotation), so in-tree EBS/GCE PD/Azure
volumes never count towards CSI limits; inline ``csi:`` volumes are not attachable and never
count (as upstream); limits from Node ``attachable-volumes-*`` allocatable are not read; the
generic-ephemeral claim's ownership by the pod is not checked (the objects keep no claim owner
references); the claim's storage class is ``spec.storageClassName`` only.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from .. import framework
from ..framework import CycleState, Status
from ..nodeinfo import NodeInfo
from ..objects import Pod, Volume
from ..arguments import PluginArgsError

if TYPE_CHECKING:
    from ..snapshot import ClusterObjects, NodeTable, Snapshot

NAME: Final = "NodeVolumeLimits"
#: v1.11+ Policy name of the CSI check.
FILTER_ALIASES: Final = ("MaxCSIVolumeCountPred",)

EBS_LIMITS_NAME: Final = "EBSLimits"
GCEPD_LIMITS_NAME: Final = "GCEPDLimits"
AZURE_DISK_LIMITS_NAME: Final = "AzureDiskLimits"
EBS_ALIASES: Final = ("MaxEBSVolumeCount",)
GCEPD_ALIASES: Final = ("MaxGCEPDVolumeCount",)
AZURE_DISK_ALIASES: Final = ("MaxAzureDiskVolumeCount",)

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: Final = "node(s) exceed max volume count"
ERR_CLAIM_NO_NAME: Final = "PersistentVolumeClaim had no name"

DEFAULT_MAX_EBS_VOLUMES: Final = 39
DEFAULT_MAX_GCEPD_VOLUMES: Final = 16
DEFAULT_MAX_AZURE_DISK_VOLUMES: Final = 16
#: the argument that carries ``KUBE_MAX_PD_VOLS``
MAX_VOLUMES_ARG: Final = "maxVolumes"

PVC: Final = "persistentVolumeClaim"
EPHEMERAL: Final = "ephemeral"
_CLAIM_KINDS: Final = frozenset({PVC, EPHEMERAL})

#: a unique volume: (driver, handle) for a real CSI volume, (driver, "", "ns/claim") for one to be provisioned
VolumeKey = tuple[str, ...]


def claim_name(pod: Pod, v: Volume) -> str:
    """The claim behind a claim or generic ephemeral volume (``<pod>-<volume>`` for the latter)."""
    return f"{pod.name}-{v.name}" if v.kind == EPHEMERAL else v.ident


# =========================================================================== CSI


class _Missing(Exception):
    """A claim of the incoming pod is missing (becomes UnschedulableAndUnresolvable)."""


def csi_volumes(pod: Pod, objects: "ClusterObjects", *, new_pod: bool) -> dict[VolumeKey, str]:
    """The pod's countable CSI volumes: unique key -> driver (upstream ``filterAttachableVolumes``).

    Raises ``_Missing`` for a missing claim of a new pod and ``ValueError`` for a claim with no name.
    """
    out: dict[VolumeKey, str] = {}
    claims = objects.persistent_volume_claims
    for v in pod.volumes:
        if v.kind not in _CLAIM_KINDS:
            continue  # inline volumes: only migrated in-tree ones would count, and we do not migrate
        name = claim_name(pod, v)
        if not name:
            raise ValueError(ERR_CLAIM_NO_NAME)
        pvc = claims.get(f"{pod.namespace}/{name}")
        if pvc is None:
            if new_pod:
                raise _Missing(f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found')
            continue
        pv = objects.persistent_volumes.get(pvc.volume_name) if pvc.volume_name else None
        if pv is not None:
            if pv.kind != "csi" or not pv.driver or not pv.ident:
                continue
            out[(pv.driver, pv.ident)] = pv.driver
            continue
        # Unbound, or bound to a PV we cannot see: count it against its class's provisioner.
        class_name = pvc.storage_class or ""
        sc = objects.storage_classes.get(class_name) if class_name else None
        if sc is None or not sc.provisioner:
            continue
        out[(sc.provisioner, "", pvc.key)] = sc.provisioner
    return out


@dataclass(frozen=True, slots=True)
class CSIState:
    #: the incoming pod's volumes, or the status every node gets (a missing claim, an error)
    new_volumes: Mapping[VolumeKey, str]
    status: Status | None = None


def csi_state(pod: Pod, objects: "ClusterObjects") -> CSIState | Status:
    """SKIP when nothing of the pod counts; otherwise what Filter needs."""
    if not any(v.kind in _CLAIM_KINDS for v in pod.volumes):
        return framework.SKIP
    try:
        new = csi_volumes(pod, objects, new_pod=True)
    except _Missing as exc:
        return CSIState({}, framework.unresolvable(str(exc)))
    except ValueError as exc:
        return CSIState({}, framework.error(str(exc)))
    if not new:
        return framework.SKIP
    return CSIState(new)


def csi_check(s: CSIState, node_info: NodeInfo, objects: "ClusterObjects") -> Status:
    """The CSI filter's verdict for one node."""
    if s.status is not None:
        return s.status
    csi_node = objects.csi_nodes.get(node_info.name)
    limits = csi_node.limits if csi_node is not None else None
    if not limits:
        return framework.SUCCESS
    if not any(driver in limits for driver in s.new_volumes.values()):
        return framework.SUCCESS
    attached: dict[VolumeKey, str] = {}
    for existing in node_info.pods.values():
        if existing.volumes:
            try:
                attached.update(csi_volumes(existing, objects, new_pod=False))
            except ValueError as exc:
                return framework.error(str(exc))
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
            return framework.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
    return framework.SUCCESS


def fits(pod: Pod, node_info: NodeInfo, objects: "ClusterObjects") -> Status:
    """NodeVolumeLimits' verdict for ``pod`` on ``node_info``."""
    s = csi_state(pod, objects)
    if isinstance(s, Status):
        return framework.SUCCESS if s.is_skip else s
    return csi_check(s, node_info, objects)


class NodeVolumeLimits:
    NAME: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
        for key in args or {}:
            raise PluginArgsError(str(key), "NodeVolumeLimits takes no arguments")
        self.name = name or NAME
        self._key = f"PreFilter{self.name}"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        s = csi_state(pod, snapshot.objects)
        if isinstance(s, Status):
            return s
        state.write(self._key, (s, snapshot.objects))
        return framework.SUCCESS

    def _state(self, state: CycleState) -> tuple[CSIState, "ClusterObjects"]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(f"reading {self._key!r} from cycle state: not found")
        return s  # type: ignore[no-any-return]

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod.volumes:
            return framework.SUCCESS
        s = state.read(self._key)
        if s is None:
            return framework.error(f"reading {self._key!r} from cycle state: not found")
        return csi_check(s[0], node, s[1])

    def filter_nodes(self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        s, objects = self._state(state)
        info = table.info
        return np.fromiter((csi_check(s, info(k), objects).is_success for k in index.tolist()), dtype=np.bool_, count=len(index))


# =========================================================================== v1.9 cloud-disk counters


def legacy_volume_ids(pod: Pod, kind: str, objects: "ClusterObjects", into: set[Hashable]) -> None:
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
    new_volumes: frozenset[Hashable]
    status: Status | None = None


def legacy_state(pod: Pod, kind: str, objects: "ClusterObjects") -> LegacyState | Status:
    if not any(v.kind == kind or v.kind == PVC for v in pod.volumes):
        return framework.SKIP
    new: set[Hashable] = set()
    try:
        legacy_volume_ids(pod, kind, objects, new)
    except ValueError as exc:
        return LegacyState(frozenset(), framework.error(str(exc)))
    if not new:
        return framework.SKIP
    return LegacyState(frozenset(new))


def legacy_check(s: LegacyState, node_info: NodeInfo, kind: str, max_volumes: int, objects: "ClusterObjects") -> Status:
    """The v1.9 predicate for one node: existing unique volumes + the new ones not already there."""
    if s.status is not None:
        return s.status
    existing: set[Hashable] = set()
    for p in node_info.pods.values():
        if p.volumes:
            try:
                legacy_volume_ids(p, kind, objects, existing)
            except ValueError as exc:
                return framework.error(str(exc))
    new = sum(1 for k in s.new_volumes if k not in existing)
    if len(existing) + new > max_volumes:
        return framework.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
    return framework.SUCCESS


class _LegacyVolumeCount:
    """One v1.9 MaxPDVolumeCountChecker for the in-tree volume type ``KIND``."""

    NAME: ClassVar[str]
    KIND: ClassVar[str]
    DEFAULT_MAX_VOLUMES: ClassVar[int]

    def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
        args = dict(args or {})
        max_volumes = args.pop(MAX_VOLUMES_ARG, None)
        for key in args:
            raise PluginArgsError(str(key), "unknown field")
        if max_volumes is None:
            max_volumes = self.DEFAULT_MAX_VOLUMES
        elif isinstance(max_volumes, bool) or not isinstance(max_volumes, int) or max_volumes <= 0:
            raise PluginArgsError(MAX_VOLUMES_ARG, f"must be a positive integer, got {max_volumes!r}")
        self.max_volumes: int = max_volumes
        self.name = name or self.NAME
        self._key = f"PreFilter{self.name}"

    def fits(self, pod: Pod, node_info: NodeInfo, objects: "ClusterObjects") -> Status:
        """This counter's verdict for ``pod`` on ``node_info``."""
        s = legacy_state(pod, self.KIND, objects)
        if isinstance(s, Status):
            return framework.SUCCESS if s.is_skip else s
        return legacy_check(s, node_info, self.KIND, self.max_volumes, objects)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        s = legacy_state(pod, self.KIND, snapshot.objects)
        if isinstance(s, Status):
            return s
        state.write(self._key, (s, snapshot.objects))
        return framework.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod.volumes:
            return framework.SUCCESS
        s = state.read(self._key)
        if s is None:
            return framework.error(f"reading {self._key!r} from cycle state: not found")
        return legacy_check(s[0], node, self.KIND, self.max_volumes, s[1])

    def filter_nodes(self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(f"reading {self._key!r} from cycle state: not found")
        ls, objects = s
        info, kind, top = table.info, self.KIND, self.max_volumes
        return np.fromiter(
            (legacy_check(ls, info(k), kind, top, objects).is_success for k in index.tolist()), dtype=np.bool_, count=len(index)
        )


class EBSLimits(_LegacyVolumeCount):
    NAME: ClassVar[str] = EBS_LIMITS_NAME
    KIND: ClassVar[str] = "awsElasticBlockStore"
    DEFAULT_MAX_VOLUMES: ClassVar[int] = DEFAULT_MAX_EBS_VOLUMES


class GCEPDLimits(_LegacyVolumeCount):
    NAME: ClassVar[str] = GCEPD_LIMITS_NAME
    KIND: ClassVar[str] = "gcePersistentDisk"
    DEFAULT_MAX_VOLUMES: ClassVar[int] = DEFAULT_MAX_GCEPD_VOLUMES


class AzureDiskLimits(_LegacyVolumeCount):
    NAME: ClassVar[str] = AZURE_DISK_LIMITS_NAME
    KIND: ClassVar[str] = "azureDisk"
    DEFAULT_MAX_VOLUMES: ClassVar[int] = DEFAULT_MAX_AZURE_DISK_VOLUMES
