"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that tolerate it.

Follows today's upstream ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``:
a node with ``spec.unschedulable: true`` rejects the pod (UnschedulableAndUnresolvable) unless
one of its tolerations tolerates the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (the
taint the node lifecycle controller puts on cordoned nodes). A NodeInfo without its Node gives
"node(s) had unknown conditions".

Requeueing (upstream ``EventsToRegister``): a node added schedulable, or uncordoned
(``isSchedulableAfterNodeChange``; ours also queues a cordoned node the pod tolerates).

Upstream has no PreFilter; ours returns SKIP when the pod tolerates the taint or when no node of
the snapshot is cordoned, both of which mean every node passes. ``filter_nodes`` reads one cached
column (cordoned or node-less, per node position).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.basics import CycleState, Status
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
from ..model.objects import NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE, Node, Pod, Taint, tolerates_all
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
ERR_REASON_UNKNOWN_CONDITION: Final = "node(s) had unknown conditions"

UNSCHEDULABLE_TAINT: Final = Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE)

_COLUMN: Final = ("NodeUnschedulable", "blocked")


def tolerates_unschedulable(pod: Pod) -> bool:
    """Whether the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``."""
    return tolerates_all(pod.tolerations, UNSCHEDULABLE_TAINT)


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    """The filter's verdict for one node, without cycle state."""
    node = node_info.node
    if node is None:
        return basics.unresolvable(ERR_REASON_UNKNOWN_CONDITION)
    if node.unschedulable and not tolerates_unschedulable(pod):
        return basics.unresolvable(ERR_REASON_UNSCHEDULABLE)
    return basics.SUCCESS


def _blocked_column(table: NodeTable) -> tuple[npt.NDArray[np.bool_], bool]:
    """Per node position: cordoned or without a Node object; and whether any node is."""

    def build(infos: list[NodeInfo]) -> tuple[npt.NDArray[np.bool_], bool]:
        col = np.fromiter((i.node is None or i.node.unschedulable for i in infos), dtype=np.bool_, count=len(infos))
        return col, bool(col.any())

    return table.derived(_COLUMN, build)  # type: ignore[return-value]


class NodeUnschedulable(PreFilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "NodeUnschedulable"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the verdict depends on the pod's tolerations."""
        return batching.tolerations(pod)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        # SKIP is exact here: a tolerating pod passes every node, and so does any pod when no
        # node is cordoned (node-less NodeInfos count as blocked, so they are never skipped over).
        if tolerates_unschedulable(pod) or not _blocked_column(snapshot.table)[1]:
            return basics.SKIP
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits(pod, node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        if tolerates_unschedulable(pod):
            # a tolerating pod still cannot go to a NodeInfo without its Node
            return np.array(table.has_node[index], dtype=np.bool_)
        blocked, _ = _blocked_column(table)
        return ~blocked[index]

    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> tuple[list[Status], npt.NDArray[np.intp]]:
        """Cordoned, or (a NodeInfo without its Node) unknown conditions."""
        statuses = [
            basics.unresolvable(ERR_REASON_UNSCHEDULABLE),
            basics.unresolvable(ERR_REASON_UNKNOWN_CONDITION),
        ]
        return statuses, (~table.has_node[index]).astype(np.intp)

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, after_node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, after_node_change),
        )


def after_node_change(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterNodeChange``: the node takes the pod now and did not before."""
    if not isinstance(new, Node):
        return QueueingHint.QUEUE

    def takes(node: Node) -> bool:
        return not node.unschedulable or tolerates_unschedulable(pod)

    if takes(new) and not (isinstance(old, Node) and takes(old)):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP
