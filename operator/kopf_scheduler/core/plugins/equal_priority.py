"""EqualPriority: every node scores 1.

v1.9 ``priorities.EqualPriorityMap`` (a constant 1, kept as is, not scaled to 0..100). Upstream
dropped it with the framework: the v1.18-v1.22 legacy Policy code skipped the name
("Skip registering priority: EqualPriority"), and with no score plugins at all every node scores 1
(what our algorithm does too). A constant cannot change the ranking, so this plugin only shows up
in explanations as ``weight x 1`` per node; it is kept for v1.9 policies that list it.

No PreScore: skipping would change nothing but the explanation, and ``score_nodes`` is one
``numpy.full``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework.basics import CycleState
from ..framework.interface import VectorScore

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import NodeTable
    from ..model.objects import Pod

SCORE: Final = 1


class EqualPriority(VectorScore):
    NAME = "EqualPriority"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return SCORE

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        return np.full(len(index), SCORE, dtype=np.int64)
