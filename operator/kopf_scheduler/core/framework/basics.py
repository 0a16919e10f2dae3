"""The values every layer of the core shares, in a leaf module: a ``Status`` and its ``Code``, the typed
``CycleState`` a cycle's plugins share (and the ``FrameworkRecorder`` it may carry), node score bounds, and the
``QueuedPodInfo`` a pending pod travels in with the queue's default order.

Everything above the model imports these (the extension points in ``interface.py``, the snapshot and usage,
the queue, the plugins, the algorithm), so this module imports nothing of the core but ``model/``: that is what
keeps the package free of import cycles (upstream keeps them in ``pkg/scheduler/framework/interface.go``,
``cycle_state.go`` and ``types.go``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ..model.objects import Pod

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "SKIP",
    "SUCCESS",
    "Code",
    "CycleState",
    "FrameworkRecorder",
    "QueuedPodInfo",
    "StateKey",
    "Status",
    "error",
    "priority_sort_less",
    "unresolvable",
    "unschedulable",
]

MAX_NODE_SCORE: Final = 100
MIN_NODE_SCORE: Final = 0
#: Extender scores are 0..10 and scaled by MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY.
MAX_EXTENDER_PRIORITY: Final = 10

T = TypeVar("T")


class Code(enum.IntEnum):
    """Upstream ``framework.Code``; the order matters only where one node's rejections are merged (the
    greater code wins: ``core/scheduling/algorithm.py``'s filters with ``alwaysCheckAllPredicates``)."""

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

    def with_plugin(self, plugin: str) -> Status:
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


# --------------------------------------------------------------------------- cycle state


class StateKey(Generic[T]):
    """A typed key into ``CycleState``. Plugins make one per instance (``StateKey[Foo](f"PreFilter{self.name}")``).

    Keys compare by identity, so two instances of one class never read each other's entries.
    """

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"StateKey({self.label!r})"


class CycleState:
    """Per-pod scratch space shared by a plugin's pre-step and its per-node step.

    Values should be immutable: ``clone`` (used by preemption's what-ifs) copies the mapping, not
    the values, so a ``PreFilterExtensions`` hook replaces its entry instead of mutating it.
    ``skip_filter`` holds the names of the filter plugins whose PreFilter returned SKIP, ``skip_pre_bind``
    those of the PreBind plugins whose pre-flight did (their PreBind is not called).
    ``node_names`` holds, per plugin, the only nodes its PreFilter admits (``admit_only``).
    ``recorder`` times the extension points when the edge lends one, and each plugin call too when
    ``sample_plugins`` (upstream ``SetRecordPluginMetrics``; ``core/framework/instrumentation.py``).
    """

    __slots__ = ("_data", "skip_filter", "skip_pre_bind", "node_names", "recorder", "sample_plugins")

    def __init__(self, recorder: FrameworkRecorder | None = None, *, sample_plugins: bool = False) -> None:
        self._data: dict[StateKey[Any], Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_pre_bind: frozenset[str] = frozenset()
        self.node_names: dict[str, frozenset[str]] = {}
        self.recorder = recorder
        self.sample_plugins = sample_plugins and recorder is not None

    def admit_only(self, plugin: str, names: Iterable[str]) -> None:
        """Upstream ``PreFilterResult.NodeNames``, from a PreFilter: the pod can fit no other node.

        The algorithm then filters only those nodes (of all plugins' sets, their intersection) and
        counts every other node as "node(s) didn't satisfy plugin(s) [<plugin>]".
        """
        self.node_names[plugin] = frozenset(names)

    def read(self, key: StateKey[T]) -> T | None:
        value: T | None = self._data.get(key)
        return value

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def clone(self) -> CycleState:
        out = CycleState(self.recorder, sample_plugins=self.sample_plugins)
        out._data = dict(self._data)
        out.skip_filter = set(self.skip_filter)
        out.skip_pre_bind = self.skip_pre_bind
        out.node_names = dict(self.node_names)
        return out


class FrameworkRecorder(Protocol):
    """What the edge lends a cycle: a monotonic clock in seconds and the two histograms' observers
    (the profile label is the recorder's own: one recorder per profile)."""

    def clock(self) -> float: ...

    def extension_point(self, point: str, code: Code, seconds: float) -> None: ...

    def plugin(self, point: str, plugin: str, code: Code, seconds: float) -> None: ...


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pending pod and its queueing history (upstream ``framework.QueuedPodInfo``)."""

    pod: Pod
    #: enqueue time, the QueueSort tie-breaker: set on add, refreshed when the pod
    #: comes back after a failed attempt (so a retried pod queues behind newer ones)
    timestamp: float
    #: when the queue first saw the pod (never changes)
    added_at: float
    #: scheduling attempts so far (incremented by ``pop``)
    attempts: int = 0
    #: plugins that rejected the pod in its last attempt
    unschedulable_plugins: frozenset[str] = frozenset()
    #: when the last attempt failed; the backoff counts from here
    last_failure_at: float | None = None
    #: when the pod first became poppable (not gated): the start of the SLI latency
    initial_attempt_timestamp: float | None = None
    #: the PreEnqueue plugin's status that keeps the pod gated (None: not gated by a plugin)
    pre_enqueue: Status | None = None

    @property
    def uid(self) -> str:
        return self.pod.uid


def priority_sort_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's order (``plugins/priority_sort.py``), the queue's default: higher priority
    first, then the earlier enqueue time."""
    if a.pod.priority != b.pod.priority:
        return a.pod.priority > b.pod.priority
    return a.timestamp < b.timestamp
