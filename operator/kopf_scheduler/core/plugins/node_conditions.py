"""The v1.9 node-condition predicates, removed upstream when conditions became taints.

Follows v1.9 ``plugin/pkg/scheduler/algorithm/predicates/predicates.go`` (reasons from
``error.go``, in their v1.10+ humanized form). Upstream replaced these with the
TaintNodesByCondition taints (``node.kubernetes.io/not-ready`` ...) handled by TaintToleration;
we keep them for v1.9 policies. Every failure is UnschedulableAndUnresolvable (v1.9 listed all
these reasons as ones preemption cannot resolve).

- ``CheckNodeCondition`` (mandatory in v1.9): one reason per condition, in the node's condition
  order: Ready present and not True; OutOfDisk present and not False; NetworkUnavailable present
  and not False; then ``spec.unschedulable``. A missing condition passes.
- ``CheckNodeMemoryPressure``: only BestEffort pods (v1.9 QoS: no regular container requests or
  limits cpu or memory above zero; init containers ignored) fail on MemoryPressure=True.
- ``CheckNodeDiskPressure`` / ``CheckNodePIDPressure``: any pod fails on DiskPressure / PIDPressure
  = True.
- ``PodToleratesNodeNoExecuteTaints``: every NoExecute taint must be tolerated (v1.9 had it as a
  function only, used by the DaemonSet controller; the v1.10+ Policy registered the name).

PreFilter returns SKIP when no node of the snapshot can fail for this pod (one cached column of
per-node flags, built from the node conditions). Vector forms index those flags.

Requeueing (ours: upstream no longer has these): a node added, or updated, that the pod passes now
and did not before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

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
    FilterPlugin,
    PreFilterPlugin,
    QueueingHint,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import NO_EXECUTE, Node, Pod, Taint, Toleration, tolerates_all

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON_NOT_READY: Final = "node(s) were not ready"
ERR_REASON_OUT_OF_DISK: Final = "node(s) were out of disk space"
ERR_REASON_NETWORK_UNAVAILABLE: Final = "node(s) had unavailable network"
ERR_REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
ERR_REASON_UNKNOWN_CONDITION: Final = "node(s) had unknown conditions"
ERR_REASON_MEMORY_PRESSURE: Final = "node(s) had memory pressure"
ERR_REASON_DISK_PRESSURE: Final = "node(s) had disk pressure"
ERR_REASON_PID_PRESSURE: Final = "node(s) had pid pressure"
ERR_REASON_TAINTS_NOT_TOLERATED: Final = "node(s) had taints that the pod didn't tolerate"

# Condition types and the status a schedulable node must have (CheckNodeCondition).
READY: Final = "Ready"
OUT_OF_DISK: Final = "OutOfDisk"
NETWORK_UNAVAILABLE: Final = "NetworkUnavailable"
MEMORY_PRESSURE: Final = "MemoryPressure"
DISK_PRESSURE: Final = "DiskPressure"
PID_PRESSURE: Final = "PIDPressure"
_WANTED: Final = {
    READY: ("True", ERR_REASON_NOT_READY),
    OUT_OF_DISK: ("False", ERR_REASON_OUT_OF_DISK),
    NETWORK_UNAVAILABLE: ("False", ERR_REASON_NETWORK_UNAVAILABLE),
}

BoolArray = npt.NDArray[np.bool_]
_FLAGS: Final = ("node_conditions", "flags")
#: the flag column of CheckNodeCondition (the pressure checks key theirs by condition type)
_CONDITIONS: Final = "conditions"


# --------------------------------------------------------------------------- pure checks


def condition_reasons(node: Node | None) -> tuple[str, ...]:
    """CheckNodeCondition's reasons for one node (empty when it passes)."""
    if node is None:
        return (ERR_REASON_UNKNOWN_CONDITION,)
    reasons = []
    for kind, status in node.conditions.items():
        wanted = _WANTED.get(kind)
        if wanted is not None and status != wanted[0]:
            reasons.append(wanted[1])
    if node.unschedulable:
        reasons.append(ERR_REASON_UNSCHEDULABLE)
    return tuple(reasons)


def is_best_effort_v19(pod: Pod) -> bool:
    """v1.9 ``GetPodQOS(pod) == BestEffort``: regular containers only, cpu and memory only."""
    for c in pod.containers:
        if c.requests.milli_cpu > 0 or c.requests.memory > 0 or c.limits.milli_cpu > 0 or c.limits.memory > 0:
            return False
    return True


def _pressure(node: Node | None, kind: str) -> bool:
    return node is not None and node.conditions.get(kind) == "True"


def tolerates_no_execute(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    return all(tolerates_all(tolerations, t) for t in taints if t.effect == NO_EXECUTE)


def fits_condition(pod: Pod, node_info: NodeInfo) -> Status:
    reasons = condition_reasons(node_info.node)
    return basics.unresolvable(*reasons) if reasons else basics.SUCCESS


def fits_memory_pressure(pod: Pod, node_info: NodeInfo) -> Status:
    if is_best_effort_v19(pod) and _pressure(node_info.node, MEMORY_PRESSURE):
        return basics.unresolvable(ERR_REASON_MEMORY_PRESSURE)
    return basics.SUCCESS


def fits_disk_pressure(pod: Pod, node_info: NodeInfo) -> Status:
    if _pressure(node_info.node, DISK_PRESSURE):
        return basics.unresolvable(ERR_REASON_DISK_PRESSURE)
    return basics.SUCCESS


def fits_pid_pressure(pod: Pod, node_info: NodeInfo) -> Status:
    if _pressure(node_info.node, PID_PRESSURE):
        return basics.unresolvable(ERR_REASON_PID_PRESSURE)
    return basics.SUCCESS


def fits_no_execute(pod: Pod, node_info: NodeInfo) -> Status:
    node = node_info.node
    if node is None or tolerates_no_execute(node.taints, pod.tolerations):
        return basics.SUCCESS
    return basics.unresolvable(ERR_REASON_TAINTS_NOT_TOLERATED)


# --------------------------------------------------------------------------- the cached column


def node_flags(table: NodeTable) -> dict[str, tuple[BoolArray, bool]]:
    """Per check, a bool per node position (True = fails) and whether any node fails."""

    def build(infos: list[NodeInfo]) -> dict[str, tuple[BoolArray, bool]]:
        nodes = [i.node for i in infos]
        n = len(nodes)
        cols = {
            _CONDITIONS: np.fromiter((bool(condition_reasons(x)) for x in nodes), dtype=np.bool_, count=n),
            MEMORY_PRESSURE: np.fromiter((_pressure(x, MEMORY_PRESSURE) for x in nodes), dtype=np.bool_, count=n),
            DISK_PRESSURE: np.fromiter((_pressure(x, DISK_PRESSURE) for x in nodes), dtype=np.bool_, count=n),
            PID_PRESSURE: np.fromiter((_pressure(x, PID_PRESSURE) for x in nodes), dtype=np.bool_, count=n),
        }
        return {k: (v, bool(v.any())) for k, v in cols.items()}

    return table.derived(_FLAGS, build)  # type: ignore[return-value]


# --------------------------------------------------------------------------- the plugins


class _NodeOnly(FilterPlugin, EnqueueExtensions):
    """A filter that reads nothing but the node: a node added, or updated, that it passes now and did
    not before may help (ours: these v1.9 predicates have no upstream declaration today)."""

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, self._after_node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, self._after_node_change),
        )

    def _after_node_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        if not isinstance(new, Node):
            return QueueingHint.QUEUE

        def passes(node: Node) -> bool:
            return self.filter(CycleState(), pod, NodeInfo(node)).is_success

        if passes(new) and not (isinstance(old, Node) and passes(old)):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


class _FlagFilter(PreFilterPlugin, VectorFilter, _NodeOnly):
    """A filter whose failures are one cached per-node column of ``node_flags``."""

    _column: ClassVar[str]

    def _applies(self, pod: Pod) -> bool:
        return True

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if not self._applies(pod) or not node_flags(snapshot.table)[self._column][1]:
            return basics.SKIP  # no node can fail: every node passes
        return basics.SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        if not self._applies(pod):
            return np.ones(len(index), dtype=np.bool_)
        return ~node_flags(table)[self._column][0][index]


class CheckNodeCondition(_FlagFilter):
    NAME = "CheckNodeCondition"
    _column = _CONDITIONS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_condition(pod, node)


class CheckNodeMemoryPressure(_FlagFilter):
    NAME = "CheckNodeMemoryPressure"
    _column = MEMORY_PRESSURE

    def _applies(self, pod: Pod) -> bool:
        return is_best_effort_v19(pod)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_memory_pressure(pod, node)


class CheckNodeDiskPressure(_FlagFilter):
    NAME = "CheckNodeDiskPressure"
    _column = DISK_PRESSURE

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_disk_pressure(pod, node)


class CheckNodePIDPressure(_FlagFilter):
    NAME = "CheckNodePIDPressure"
    _column = PID_PRESSURE

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_pid_pressure(pod, node)


@dataclass(frozen=True, slots=True)
class _NoExecuteState:
    """Per distinct taint tuple of ``table``: does the pod tolerate its NoExecute taints."""

    table: NodeTable
    tolerated: BoolArray


class PodToleratesNodeNoExecuteTaints(PreFilterPlugin, VectorFilter, _NodeOnly):
    NAME = "PodToleratesNodeNoExecuteTaints"

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[_NoExecuteState](f"PreFilter{self.name}")

    @staticmethod
    def _lut(pod: Pod, table: NodeTable) -> BoolArray:
        """Per distinct taint tuple: does the pod tolerate its NoExecute taints."""
        _, sets = table.taint_sets()
        return np.fromiter((tolerates_no_execute(s, pod.tolerations) for s in sets), dtype=np.bool_, count=len(sets))

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        table = snapshot.table
        lut = self._lut(pod, table)
        if lut.all():
            return basics.SKIP  # every taint set is tolerated: every node passes
        state.write(self._key, _NoExecuteState(table, lut))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_no_execute(pod, node)

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        cached = state.read(self._key)
        lut = cached.tolerated if cached is not None and cached.table is table else self._lut(pod, table)
        ids, _ = table.taint_sets()
        result: BoolArray = lut[ids[index]]
        return result
