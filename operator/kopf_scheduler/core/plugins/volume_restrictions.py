"""VolumeRestrictions: disk conflicts with pods already on the node, and ReadWriteOncePod claims.

Follows today's upstream ``pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go``
(v1.9: ``NoDiskConflict``). Two checks:

- **Disk conflicts** (per node). A volume of the incoming pod conflicts with a volume of a pod on
  the node when both are of the same source and name the same disk:
  GCE PD with the same ``pdName`` unless both mounts are read-only; AWS EBS with the same
  ``volumeID`` even when both are read-only; iSCSI with the same IQN unless both are read-only;
  RBD with at least one shared monitor and the same pool and image unless both are read-only.
  Other sources never conflict. Reason "node(s) had no available disk", Unschedulable.
- **ReadWriteOncePod** (cluster-wide, as upstream). Every ``persistentVolumeClaim`` volume's claim
  must exist (else UnschedulableAndUnresolvable ``persistentvolumeclaim "<name>" not found``, from
  PreFilter); a claim with the ``ReadWriteOncePod`` access mode that a scheduled pod anywhere in the
  snapshot already uses (``NodeInfo.pvc_ref_counts``) makes every node Unschedulable with the
  reason below. Generic ephemeral volumes are not part of this check, as upstream.

PreFilter returns SKIP for a pod without volumes, and (as upstream) when it has no disk of the
four sources and no in-use ReadWriteOncePod claim. ``filter_nodes`` loops over the nodes (pods
come and go, so there is nothing to cache); it exists so a pod with such volumes still takes the
vectorised path for the other filters.

PreFilter extensions (upstream ``AddPod`` / ``RemovePod``): a what-if that adds or removes a pod
adjusts, per ReadWriteOncePod claim of the incoming pod, the number of volumes using it. Upstream
keeps one number (claims in use at PreFilter, then plus or minus the volumes of each pod added or
removed), which drifts from a recount when two pods use one claim; per-claim counts stay equal to
a recount. Unlike upstream, which compares claim names only, the pod must be in the incoming
pod's namespace (a same-named claim elsewhere is another claim).
Disk conflicts need no state: Filter reads the pods of the NodeInfo it is given.
``fits(pod, node_info, snapshot)`` recounts with ``node_info`` standing in for its node.

Requeueing (upstream ``EventsToRegister`` and its hints): a bound pod of the namespace deleted whose
disks conflicted with the pod's or that used one of its claims; a node added; a claim of the pod
added. Volumes cannot change on a pod, so no update helps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
    PreFilterExtensions,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import PersistentVolumeClaim, Pod, Volume
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON_DISK_CONFLICT: Final = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: Final = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)

READ_WRITE_ONCE_POD: Final = "ReadWriteOncePod"

GCE_PD: Final = "gcePersistentDisk"
AWS_EBS: Final = "awsElasticBlockStore"
ISCSI: Final = "iscsi"
RBD: Final = "rbd"
PVC: Final = "persistentVolumeClaim"
#: the volume sources whose disks can conflict
CONFLICT_KINDS: Final = frozenset({GCE_PD, AWS_EBS, ISCSI, RBD})


def claim_not_found(name: str) -> str:
    """The API's NotFound text for a claim, as upstream passes it on."""
    return f'persistentvolumeclaim "{name}" not found'


def volume_conflict(v: Volume, other: Volume) -> bool:
    """Whether ``v`` (incoming) and ``other`` (on the node) name the same disk in a way that conflicts."""
    kind = v.kind
    if kind != other.kind or v.ident != other.ident:
        return False
    if kind == AWS_EBS:
        return True
    if kind == GCE_PD or kind == ISCSI:
        return not (v.read_only and other.read_only)
    if kind == RBD:
        # ident is "pool/image"; the image must also be reachable through a shared monitor
        return not v.monitors.isdisjoint(other.monitors) and not (v.read_only and other.read_only)
    return False


def conflict_volumes(pod: Pod) -> tuple[Volume, ...]:
    """The pod's volumes that can conflict with another pod's (the four disk sources)."""
    return tuple(v for v in pod.volumes if v.kind in CONFLICT_KINDS)


def has_disk_conflict(volumes: Iterable[Volume], node_info: NodeInfo) -> bool:
    """Whether any of ``volumes`` conflicts with a volume of a pod on the node."""
    wanted = tuple(volumes)
    if not wanted:
        return False
    for existing in node_info.pods.values():
        others = existing.volumes
        if not others:
            continue
        for v in wanted:
            for other in others:
                if volume_conflict(v, other):
                    return True
    return False


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """What Filter needs: the disk volumes to check and how much the pod's RWOP claims are in use."""

    volumes: tuple[Volume, ...]
    #: each of the pod's ReadWriteOncePod claim names -> volumes of scheduled pods using it
    rwop_uses: Mapping[str, int]

    @property
    def rwop_in_use(self) -> bool:
        """Some scheduled pod uses one of the pod's ReadWriteOncePod claims."""
        return any(n > 0 for n in self.rwop_uses.values())


def read_write_once_pod_claims(pod: Pod, claims: Mapping[str, PersistentVolumeClaim]) -> frozenset[str] | Status:
    """The pod's claim names with the ReadWriteOncePod mode, or the unresolvable status of a missing claim."""
    out = set()
    for v in pod.volumes:
        if v.kind != PVC:
            continue
        pvc = claims.get(f"{pod.namespace}/{v.ident}")
        if pvc is None:
            return basics.unresolvable(claim_not_found(v.ident))
        if READ_WRITE_ONCE_POD in pvc.access_modes:
            out.add(pvc.name)
    return frozenset(out)


def claim_uses(
    pod: Pod, rwop_claims: frozenset[str], snapshot: Snapshot, *, stand_in: NodeInfo | None = None
) -> dict[str, int]:
    """Per claim of the pod, the volumes of scheduled pods using it (upstream ``IsPVCUsedByPods``, counted).

    ``stand_in`` replaces the snapshot's NodeInfo of the same name (a preemption what-if).
    """
    if not rwop_claims:
        return {}
    replaced = snapshot.get(stand_in.name) if stand_in is not None else None
    out: dict[str, int] = {}
    for c in rwop_claims:
        key = f"{pod.namespace}/{c}"
        uses = snapshot.pvc_uses(key)
        if stand_in is not None:
            uses += stand_in.pvc_ref_counts.get(key, 0) - (
                replaced.pvc_ref_counts.get(key, 0) if replaced is not None else 0
            )
        out[c] = uses
    return out


def _state_for(pod: Pod, snapshot: Snapshot, stand_in: NodeInfo | None = None) -> PreFilterState | Status:
    """The PreFilter outcome: SKIP, a rejection, or the state Filter reads."""
    if not pod.volumes:
        return basics.SKIP
    volumes = conflict_volumes(pod)
    has_claims = any(v.kind == PVC for v in pod.volumes)
    if not volumes and not has_claims:
        return basics.SKIP
    rwop = read_write_once_pod_claims(pod, snapshot.objects.persistent_volume_claims)
    if isinstance(rwop, Status):
        return rwop
    s = PreFilterState(volumes, claim_uses(pod, rwop, snapshot, stand_in=stand_in))
    if not volumes and not s.rwop_in_use:
        return basics.SKIP
    return s


def check(s: PreFilterState, node_info: NodeInfo) -> Status:
    """The filter's verdict for one node given the pre-filter state."""
    if has_disk_conflict(s.volumes, node_info):
        return basics.unschedulable(ERR_REASON_DISK_CONFLICT)
    if s.rwop_in_use:
        return basics.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
    return basics.SUCCESS


def fits(pod: Pod, node_info: NodeInfo, snapshot: Snapshot) -> Status:
    """The plugin's verdict for ``pod`` on ``node_info`` (which may be a what-if copy of a snapshot node)."""
    s = _state_for(pod, snapshot, node_info)
    if isinstance(s, Status):
        return basics.SUCCESS if s.is_skip else s
    return check(s, node_info)


def with_pod(s: PreFilterState, pod: Pod, other: Pod, sign: int) -> PreFilterState:
    """``s`` as if ``other`` were added (``sign`` 1) or removed (-1); ``s`` itself when it changes nothing."""
    if other.namespace != pod.namespace or not s.rwop_uses:
        return s
    uses = dict(s.rwop_uses)
    changed = False
    for v in other.volumes:
        if v.kind == PVC and v.ident in uses:
            uses[v.ident] += sign
            changed = True
    return PreFilterState(s.volumes, uses) if changed else s


class VolumeRestrictions(PreFilterExtensions, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "VolumeRestrictions"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's volumes."""
        return batching.volumes(pod)

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``EventsToRegister``: a bound pod deleted that held a conflicting disk or one of the
        pod's claims; a node added (no hint); a claim of the pod added."""
        return (
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, after_pod_deleted),
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
            ClusterEventWithHint(ClusterEvent.PERSISTENT_VOLUME_CLAIM_CHANGE, after_claim_added),
        )

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[PreFilterState](f"PreFilter{self.name}")

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        s = _state_for(pod, snapshot)
        if isinstance(s, Status):
            return s
        state.write(self._key, s)
        return basics.SUCCESS

    def _not_found(self) -> str:
        return f"cannot read {self._key.label!r} from cycle state"

    def _update(self, state: CycleState, pod: Pod, other: Pod, sign: int) -> Status:
        s = state.read(self._key)
        if s is None:
            return basics.error(self._not_found())
        updated = with_pod(s, pod, other, sign)
        if updated is not s:
            state.write(self._key, updated)
        return basics.SUCCESS

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, added, 1)

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, removed, -1)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s = state.read(self._key)
        if s is None:
            if has_disk_conflict(conflict_volumes(pod), node):
                return basics.unschedulable(ERR_REASON_DISK_CONFLICT)
            return basics.error(self._not_found())
        return check(s, node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = state.read(self._key)
        if s is None:
            raise LookupError(self._not_found())
        if s.rwop_in_use:
            return np.zeros(len(index), dtype=np.bool_)
        info = table.info
        volumes = s.volumes
        return np.fromiter(
            (not has_disk_conflict(volumes, info(k)) for k in index.tolist()), dtype=np.bool_, count=len(index)
        )


def _claims(pod: Pod) -> frozenset[str]:
    return frozenset(v.ident for v in pod.volumes if v.kind == PVC)


def after_pod_deleted(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterAssignedPodDeleted``."""
    if not isinstance(old, Pod):
        return QueueingHint.QUEUE
    if old.namespace != pod.namespace:
        return QueueingHint.QUEUE_SKIP
    theirs = conflict_volumes(old)
    if any(volume_conflict(v, other) for v in conflict_volumes(pod) for other in theirs):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if _claims(pod) & _claims(old) else QueueingHint.QUEUE_SKIP


def after_claim_added(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterPersistentVolumeClaimAdded``: a claim the pod names, created."""
    if old is None and isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace:
        return QueueingHint.QUEUE if new.name in _claims(pod) else QueueingHint.QUEUE_SKIP
    return QueueingHint.QUEUE_SKIP
