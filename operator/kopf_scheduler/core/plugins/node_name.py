"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Follows today's upstream ``pkg/scheduler/framework/plugins/nodename/node_name.go`` (v1.9: the
``HostName`` predicate, also registered as ``PodFitsHost``): the pod fits when its nodeName is
empty or equals the node's name; otherwise the node is UnschedulableAndUnresolvable.

PreFilter admits only the named node (``CycleState.admit_only``, upstream's ``PreFilterResult``),
so the algorithm counts every other node as "node(s) didn't satisfy plugin(s) [NodeName]"; it
returns SKIP for a pod without nodeName, which is exactly "every node passes". ``filter_nodes``
compares node positions, not strings. Requeueing: a node added (upstream registers Node/Add
without a hint).
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
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import Pod
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON: Final = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    """Upstream ``Fits`` as a Status."""
    if not pod.node_name or pod.node_name == node_info.name:
        return basics.SUCCESS
    return basics.unresolvable(ERR_REASON)


class NodeName(PreFilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "NodeName"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the verdict depends on the pod's ``spec.nodeName``."""
        return batching.fragment(batching.NODE_NAME_SIGNER, pod.node_name)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        if not pod.node_name:
            return basics.SKIP
        state.admit_only(self.name, (pod.node_name,))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits(pod, node)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        if not pod.node_name:
            return np.ones(len(index), dtype=np.bool_)
        k = table.position.get(pod.node_name)
        if k is None:
            return np.zeros(len(index), dtype=np.bool_)
        return np.asarray(index == k, dtype=np.bool_)

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return (ClusterEventWithHint(ClusterEvent.NODE_ADD),)
