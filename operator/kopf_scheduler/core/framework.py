"""The plugin framework: statuses, cycle state and the extension points plugins implement.

Mirrors upstream ``pkg/scheduler/framework/interface.go`` in our own shape:

- ``Status`` is a value: a ``Code``, the reasons a user reads, and the plugin
  that produced it (stamped by the runtime, not by the plugin).
- A plugin is a plain object with a ``name`` and any of the methods below. The
  algorithm discovers extension points with ``hasattr``; nothing registers by
  import side effect (the one list of plugins is ``registry.py``).
- Two shapes per point: the reference per-node method (``filter``, ``score``)
  that states the semantics, and an optional vectorised one over the snapshot's
  ``NodeTable`` (``filter_nodes``, ``score_nodes``) that must agree with it and
  exists because a Python loop over thousands of nodes per pod is too slow.
  Tests check the two against each other.

Scores are integers in ``0..MAX_NODE_SCORE`` after normalisation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .nodeinfo import NodeInfo
    from .objects import Pod
    from .snapshot import NodeTable, Snapshot

MAX_NODE_SCORE: Final = 100
MIN_NODE_SCORE: Final = 0
#: Extender scores are 0..10 and scaled by MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY.
MAX_EXTENDER_PRIORITY: Final = 10


class Code(enum.IntEnum):
    """Upstream ``framework.Code``; the order matters only for ``Status.merge``."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    #: no preemption on this node can help (e.g. node selector mismatch)
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_rejected(self) -> bool:
        """Unschedulable in either flavour (not an error)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> "Status":
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    def __str__(self) -> str:
        who = f"{self.plugin}: " if self.plugin else ""
        return f"{who}{self.code.name}({self.message})"


SUCCESS: Final = Status()
SKIP: Final = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(message: str) -> Status:
    return Status(Code.ERROR, (message,))


@dataclass(slots=True)
class CycleState:
    """Per-pod scratch space shared by one plugin's pre_filter and filter (or pre_score and score).

    Keys are plugin names by convention; ``skip_filter`` / ``skip_score`` hold
    the plugins whose pre-step returned SKIP for this pod.
    """

    data: dict[str, Any] = field(default_factory=dict)
    skip_filter: set[str] = field(default_factory=set)
    skip_score: set[str] = field(default_factory=set)

    def read(self, key: str) -> Any:
        return self.data.get(key)

    def write(self, key: str, value: Any) -> None:
        self.data[key] = value


class Plugin(Protocol):
    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: "Pod", snapshot: "Snapshot") -> Status:
        """Compute per-pod data; SKIP disables this plugin's filter for the pod; a rejection fails every node."""


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: "Pod", node: "NodeInfo") -> Status: ...


@runtime_checkable
class VectorFilterPlugin(Plugin, Protocol):
    def filter_nodes(self, state: CycleState, pod: "Pod", table: "NodeTable", index: "npt.NDArray[np.intp]") -> "npt.NDArray[np.bool_]":
        """The feasibility of the nodes ``index`` (positions in the table), equal to ``filter(...).is_success``."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: "Pod", nodes: "list[NodeInfo]", snapshot: "Snapshot") -> Status:
        """SKIP disables this plugin's score for the pod (every node scores 0 for it)."""


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: "Pod", node: "NodeInfo") -> int: ...


@runtime_checkable
class VectorScorePlugin(Plugin, Protocol):
    def score_nodes(self, state: CycleState, pod: "Pod", table: "NodeTable", index: "npt.NDArray[np.intp]") -> "npt.NDArray[np.int64]": ...


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_scores(self, state: CycleState, pod: "Pod", scores: "npt.NDArray[np.int64]") -> "npt.NDArray[np.int64]":
        """Map raw scores of the feasible nodes onto 0..MAX_NODE_SCORE (may work in place)."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: "Pod", node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: "Pod", node_name: str) -> None: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: "Pod", b: "Pod") -> bool: ...


def default_normalize(scores: "npt.NDArray[np.int64]", *, reverse: bool = False) -> "npt.NDArray[np.int64]":
    """Upstream ``helper.DefaultNormalizeScore``: scale to 0..100 by the maximum; optionally reversed.

    All-zero scores stay 0, or become 100 each when reversed.
    """
    import numpy as np

    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top == 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return scores
    out = (scores * MAX_NODE_SCORE) // top
    if reverse:
        out = MAX_NODE_SCORE - out
    return np.asarray(out, dtype=np.int64)
