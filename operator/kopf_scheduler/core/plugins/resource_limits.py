"""NodeResourceLimits (v1.9 ResourceLimitsPriority): a tie-breaker for nodes that can hold the pod's limits.

Follows v1.9 ``plugin/pkg/scheduler/algorithm/priorities/resource_limits.go`` and its framework port
``pkg/scheduler/framework/plugins/noderesources/resource_limits.go`` (v1.18-v1.21, since removed):
a node scores 1 when the pod's cpu limit, or its memory limit, is non-zero and at most the node's
allocatable (which must be non-zero too); otherwise 0. The framework port kept the raw 1 on the
0..100 scale (no NormalizeScore; "the lowest score of 1 ... to break ties"), and so do we.

Limits come from ``Pod.limits`` (containers summed, init containers by the max rule).

PreScore returns SKIP when the pod sets neither a cpu nor a memory limit: every node would score 0,
a constant that cannot change the ranking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework.basics import SKIP, SUCCESS, CycleState, Status
from ..framework.interface import PreScorePlugin, VectorScore

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import NodeTable, Snapshot
    from ..model.objects import Pod

#: the score of a node that satisfies a limit (upstream returns 1, deliberately the lowest)
SATISFIED_SCORE: Final = 1


def _within(limit: int, allocatable: int) -> bool:
    return limit != 0 and allocatable != 0 and limit <= allocatable


def limits_score(pod: Pod, node_info: NodeInfo) -> int:
    """1 if the node's allocatable holds the pod's cpu limit or its memory limit, else 0."""
    alloc = node_info.allocatable
    lim = pod.limits
    return SATISFIED_SCORE if _within(lim.milli_cpu, alloc.milli_cpu) or _within(lim.memory, alloc.memory) else 0


class NodeResourceLimits(PreScorePlugin, VectorScore):
    """Score 1 on nodes whose allocatable covers the pod's cpu or memory limit."""

    NAME = "NodeResourceLimits"

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        lim = pod.limits
        if lim.milli_cpu == 0 and lim.memory == 0:
            return SKIP  # every node would score 0
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return limits_score(pod, node)

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        lim = pod.limits
        hit = np.zeros(len(index), dtype=np.bool_)
        for limit, column in ((lim.milli_cpu, table.alloc_cpu), (lim.memory, table.alloc_mem)):
            if limit != 0:
                a = column[index]
                hit |= (a != 0) & (limit <= a)
        return hit.astype(np.int64) * SATISFIED_SCORE
