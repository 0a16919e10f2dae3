"""NodeLabel: require / prefer the presence or absence of node label keys (values are ignored).

Follows upstream's v1.18-v1.21 framework plugin ``pkg/scheduler/framework/plugins/nodelabel/node_label.go``
(removed in v1.22), which carried v1.9's ``predicates.NewNodeLabelPredicate`` and
``priorities.NewNodeLabelPriority``:

- Filter: every label of ``presentLabels`` must exist on the node and none of ``absentLabels`` may,
  else UnschedulableAndUnresolvable ``node(s) didn't have the requested labels``.
- Score: each satisfied preference (a ``presentLabelsPreference`` label the node has, an
  ``absentLabelsPreference`` label it lacks) is worth 100; the score is their average (integer
  division). No normalisation. v1.9 scored one preference 10 or 0; on our 0..100 scale it is 100 or 0.
- Arguments are upstream ``NodeLabelArgs``, checked like ``ValidateNodeLabelArgs``: a label may not
  be both present and absent within one pair. The v1.9 argument styles (``labelsPresence``,
  ``labelPreference``, each under a name of the user's) are translated into these by
  ``core/config/registry.py``.

Upstream has neither PreFilter nor PreScore. The verdicts and scores depend only on the arguments and
the node labels, so they are whole-table cached columns, and the pre-steps SKIP where the outcome is
provably the same: when the pair they use is empty, when every node passes the filter, and when every
node gets the same score (a constant cannot change the ranking).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import PluginArgsError
from ..framework.basics import MAX_NODE_SCORE, CycleState, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    VectorFilter,
    VectorScore,
)
from ..framework.nodeinfo import NodeInfo
from ..model.objects import Node, Pod

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON_PRESENCE_VIOLATED: Final = "node(s) didn't have the requested labels"

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- arguments


def _check_no_conflict(present: tuple[str, ...], absent: tuple[str, ...], present_key: str) -> None:
    both = sorted(set(present) & set(absent))
    if both:
        raise PluginArgsError(
            present_key,
            f"detecting at least one label (e.g., {both[0]!r}) that exist in both"
            f" the present{list(present)} and absent{list(absent)} label list",
        )


@dataclass(frozen=True, slots=True)
class NodeLabelArgs:
    """Upstream ``NodeLabelArgs``: the filter's pair of label lists and the score's pair."""

    present_labels: tuple[str, ...] = ()
    absent_labels: tuple[str, ...] = ()
    present_labels_preference: tuple[str, ...] = ()
    absent_labels_preference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_no_conflict(self.present_labels, self.absent_labels, "presentLabels")
        _check_no_conflict(self.present_labels_preference, self.absent_labels_preference, "presentLabelsPreference")


# --------------------------------------------------------------------------- pure checks


def fits_labels(present: Sequence[str], absent: Sequence[str], node_info: NodeInfo) -> Status:
    """The filter's verdict for one node: every ``present`` label exists, no ``absent`` label does."""
    node = node_info.node
    if node is not None:
        labels = node.labels
        if all(k in labels for k in present) and not any(k in labels for k in absent):
            return basics.SUCCESS
    return basics.unresolvable(ERR_REASON_PRESENCE_VIOLATED)


def label_score(present: Sequence[str], absent: Sequence[str], node: Node) -> int:
    """The average over the preferences of 100 per satisfied one; 0 when there are none."""
    size = len(present) + len(absent)
    if size == 0:
        return 0
    labels = node.labels
    hits = sum(1 for k in present if k in labels) + sum(1 for k in absent if k not in labels)
    return hits * MAX_NODE_SCORE // size


def _has_label(table: NodeTable, key: str) -> BoolArray:
    ids, _ = table.label_column(key)
    return ids >= 0


# --------------------------------------------------------------------------- the plugin


class NodeLabel(PreFilterPlugin[NodeLabelArgs], VectorFilter, PreScorePlugin, VectorScore, EnqueueExtensions):
    NAME = "NodeLabel"

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Ours (upstream removed the plugin): a node added, or relabelled, that has the labels now."""
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, self._after_node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, self._after_node_change),
        )

    def _after_node_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        if not isinstance(new, Node):
            return QueueingHint.QUEUE

        def passes(node: Node) -> bool:
            return fits_labels(self.args.present_labels, self.args.absent_labels, NodeInfo(node)).is_success

        if passes(new) and not (isinstance(old, Node) and passes(old)):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def __init__(self, args: NodeLabelArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        a = self.args
        # table-cache keys: instances with equal lists share a column
        self._filter_column = (self.NAME, "filter", a.present_labels, a.absent_labels)
        self._score_column = (self.NAME, "score", a.present_labels_preference, a.absent_labels_preference)

    # ---- filter

    def _mask(self, table: NodeTable) -> tuple[BoolArray, bool]:
        """Per node position: does it pass; and whether every node does."""

        def build(infos: list[NodeInfo]) -> tuple[BoolArray, bool]:
            ok = table.has_node.copy()
            for k in self.args.present_labels:
                ok &= _has_label(table, k)
            for k in self.args.absent_labels:
                ok &= ~_has_label(table, k)
            return ok, bool(ok.all())

        return table.derived(self._filter_column, build)  # type: ignore[return-value]

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if not self.args.present_labels and not self.args.absent_labels:
            return basics.SKIP  # nothing to check
        return basics.SKIP if self._mask(snapshot.table)[1] else basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits_labels(self.args.present_labels, self.args.absent_labels, node)

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        return self._mask(table)[0][index]

    # ---- score

    def _scores(self, table: NodeTable) -> tuple[IntArray, bool]:
        """Per node position: its score; and whether every node scores the same."""

        def build(infos: list[NodeInfo]) -> tuple[IntArray, bool]:
            present, absent = self.args.present_labels_preference, self.args.absent_labels_preference
            hits = np.zeros(len(infos), dtype=np.int64)
            for k in present:
                hits += _has_label(table, k)
            for k in absent:
                hits += ~_has_label(table, k)
            size = len(present) + len(absent)
            scores = hits * MAX_NODE_SCORE // size if size else hits
            scores[~table.has_node] = 0
            return scores, bool(scores.size == 0 or (scores == scores[0]).all())

        return table.derived(self._score_column, build)  # type: ignore[return-value]

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        if not self.args.present_labels_preference and not self.args.absent_labels_preference:
            return basics.SKIP  # no preference: 0 everywhere
        return basics.SKIP if self._scores(snapshot.table)[1] else basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        return label_score(self.args.present_labels_preference, self.args.absent_labels_preference, node.node)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        return self._scores(table)[0][index]
