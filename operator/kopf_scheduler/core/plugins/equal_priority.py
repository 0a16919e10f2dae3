"""EqualPriority: every node scores 1.

v1.9 ``priorities.EqualPriorityMap`` (a constant 1, kept as is, not scaled to 0..100). Upstream
dropped it with the framework: the v1.18-v1.22 legacy Policy code skipped the name
("Skip registering priority: EqualPriority"), and with no score plugins at all every node scores 1
(what our algorithm does too). A constant cannot change the ranking, so this plugin only shows up
in explanations as ``weight x 1`` per node; it is kept for v1.9 policies that list it.

No PreScore: skipping would change nothing but the explanation, and ``score_nodes`` is one
``numpy.ones``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from ..framework import CycleState
from ..nodeinfo import NodeInfo
from ..objects import Pod
from ..arguments import PluginArgsError

if TYPE_CHECKING:
    from ..snapshot import NodeTable

NAME: Final = "EqualPriority"
SCORE: Final = 1


class EqualPriority:
    NAME: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
        for key in args or {}:
            raise PluginArgsError(str(key), "EqualPriority takes no arguments")
        self.name = name or NAME

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return SCORE

    def score_nodes(self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        return np.full(len(index), SCORE, dtype=np.int64)
