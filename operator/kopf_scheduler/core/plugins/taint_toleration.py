"""TaintToleration: NoSchedule / NoExecute taints must be tolerated; untolerated PreferNoSchedule
taints lower the score.

Follows today's upstream ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``
(v1.9: ``PodToleratesNodeTaints`` and ``TaintTolerationPriority``):

- Filter: a node taint with effect NoSchedule or NoExecute that no toleration tolerates rejects
  the node, UnschedulableAndUnresolvable, with the one reason ``node(s) had untolerated taint(s)``
  (v1.37 no longer names the taint, so the "0/N nodes" message counts all such nodes together).
- Score: the number of PreferNoSchedule taints not tolerated by the pod's tolerations whose effect
  is empty or PreferNoSchedule; NormalizeScore is DefaultNormalizeScore reversed (fewest wins).

Upstream's PreFilter and PreScore never skip. Our PreFilter skips where the outcome is provably
the same: when every distinct taint set of the snapshot passes (every node passes). PreScore does
not skip even when no node has an untolerated PreferNoSchedule taint: every node then scores 100
after the reversed normalisation, as upstream's (a constant that cannot change the ranking, but
it is part of the totals and the per-plugin scores users compare).

Vector forms evaluate the pod's tolerations once per distinct taint tuple
(``NodeTable.taint_sets``) and map the result onto node positions.

Requeueing (upstream ``EventsToRegister``): a node added, or updated, whose NoSchedule / NoExecute
taints the pod now tolerates and did not before (``isSchedulableAfterNodeChange``). The pod's own
tolerations changing is an update of its own, which moves it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics, interface
from ..framework.arguments import NoArgs
from ..framework.basics import CycleState, StateKey, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import PREFER_NO_SCHEDULE, Node, Pod, Taint, Toleration, tolerates_all
from ..toolkit import batching
from ..toolkit.node_matching import find_untolerated

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

#: upstream Filter's reason for every node with an untolerated NoSchedule / NoExecute taint
ERR_REASON_UNTOLERATED: Final = "node(s) had untolerated taint(s)"
#: upstream ``ErrReasonNotMatch``, which its Filter no longer uses; ours gives it for a NodeInfo
#: without its Node (which a snapshot never holds)
ERR_REASON_NOT_MATCH: Final = "node(s) had taints that the pod didn't tolerate"

_UNTOLERATED: Final = basics.unresolvable(ERR_REASON_UNTOLERATED)

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def prefer_no_schedule_tolerations(tolerations: Iterable[Toleration]) -> tuple[Toleration, ...]:
    """Tolerations that can tolerate a PreferNoSchedule taint (effect empty or PreferNoSchedule)."""
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> int:
    """Upstream ``countIntolerableTaintsPreferNoSchedule`` (``tolerations`` already narrowed)."""
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerates_all(tolerations, t))


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    """The filter's verdict for one node, without cycle state."""
    node = node_info.node
    if node is None:
        return basics.unresolvable(ERR_REASON_NOT_MATCH)
    if find_untolerated(node.taints, pod.tolerations) is None:
        return basics.SUCCESS
    return _UNTOLERATED


@dataclass(frozen=True, slots=True)
class _FilterState:
    """Per distinct taint tuple of ``table``: does the pod pass it."""

    table: NodeTable
    passes: BoolArray


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """Per distinct taint tuple of ``table``: the untolerated PreferNoSchedule count."""

    table: NodeTable
    counts: IntArray
    tolerations: tuple[Toleration, ...]


class TaintToleration(
    PreFilterPlugin, VectorFilter, PreScorePlugin, VectorScore, NormalizeScorePlugin, EnqueueExtensions, SignPlugin
):
    NAME = "TaintToleration"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: verdicts and scores depend on the pod's tolerations."""
        return batching.tolerations(pod)

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._filter_key = StateKey[_FilterState](f"PreFilter{self.name}")
        self._score_key = StateKey[_ScoreState](f"PreScore{self.name}")

    # ---- filter

    @staticmethod
    def _filter_lut(pod: Pod, table: NodeTable) -> BoolArray:
        """Per distinct taint tuple: does the pod pass it."""
        _, sets = table.taint_sets()
        tol = pod.tolerations
        return np.fromiter((find_untolerated(s, tol) is None for s in sets), dtype=np.bool_, count=len(sets))

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        table = snapshot.table
        lut = self._filter_lut(pod, table)
        if lut.all() and table.has_node.all():
            return basics.SKIP
        state.write(self._filter_key, _FilterState(table, lut))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits(pod, node)

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        cached = state.read(self._filter_key)
        lut = cached.passes if cached is not None and cached.table is table else self._filter_lut(pod, table)
        ids, _ = table.taint_sets()
        result: BoolArray = lut[ids[index]] & table.has_node[index]
        return result

    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> tuple[list[Status], npt.NDArray[np.intp]]:
        """An untolerated taint, or (a NodeInfo without its Node) no node to match."""
        return [_UNTOLERATED, basics.unresolvable(ERR_REASON_NOT_MATCH)], (~table.has_node[index]).astype(np.intp)

    # ---- score

    @staticmethod
    def _score_lut(pod: Pod, table: NodeTable) -> IntArray:
        _, sets = table.taint_sets()
        tol = prefer_no_schedule_tolerations(pod.tolerations)
        return np.fromiter(
            (count_intolerable_prefer_no_schedule(s, tol) for s in sets), dtype=np.int64, count=len(sets)
        )

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        table = snapshot.table
        lut = self._score_lut(pod, table)
        state.write(self._score_key, _ScoreState(table, lut, prefer_no_schedule_tolerations(pod.tolerations)))
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        cached = state.read(self._score_key)
        tol = cached.tolerations if cached is not None else prefer_no_schedule_tolerations(pod.tolerations)
        return count_intolerable_prefer_no_schedule(node.node.taints, tol)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        cached = state.read(self._score_key)
        lut = cached.counts if cached is not None and cached.table is table else self._score_lut(pod, table)
        ids, _ = table.taint_sets()
        return np.asarray(lut[ids[index]], dtype=np.int64)

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        return interface.default_normalize(scores, reverse=True)

    # ---- requeueing

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, after_node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, after_node_change),
        )


def after_node_change(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterNodeChange``: the pod tolerates the node's taints now and did not before."""
    if not isinstance(new, Node):
        return QueueingHint.QUEUE
    if find_untolerated(new.taints, pod.tolerations) is not None:
        return QueueingHint.QUEUE_SKIP
    if isinstance(old, Node) and find_untolerated(old.taints, pod.tolerations) is None:
        return QueueingHint.QUEUE_SKIP
    return QueueingHint.QUEUE
