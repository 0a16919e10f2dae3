"""NodeLabel: require / prefer the presence or absence of node label keys (values are ignored).

v1.9 semantics (``predicates.NewNodeLabelPredicate`` and ``priorities.NewNodeLabelPriority``),
scored 0..100 as upstream's v1.18-v1.21 framework plugin
``pkg/scheduler/framework/plugins/nodelabel/node_label.go`` did; the plugin was removed in v1.22.

Two classes, both accepting both argument shapes:

- ``CheckNodeLabelPresence`` (filter): v1.9 ``labelsPresence`` ``{labels: [...], presence: bool}``
  or the framework's ``{presentLabels: [...], absentLabels: [...]}``. Every present label must
  exist and no absent label may exist, else UnschedulableAndUnresolvable
  ``node(s) didn't have the requested labels``.
- ``NodeLabelPriority`` (score): v1.9 ``labelPreference`` ``{label, presence}`` or the framework's
  ``{presentLabelsPreference: [...], absentLabelsPreference: [...]}``. Each satisfied preference
  is worth 100 and the score is the average over the preferences (integer division), so one v1.9
  preference gives 100 or 0 (v1.9: 10 or 0). No normalisation.

The framework shape carries the filter's and the score's lists together; each class reads its own
pair and validates all four like upstream ``ValidateNodeLabelArgs`` (a label may not be both
present and absent within one pair). The arguments are fixed per instance, so the verdicts and
scores are whole-table cached columns; pre-steps SKIP when the plugin has nothing to check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from .. import framework
from ..framework import MAX_NODE_SCORE, CycleState, Status
from ..nodeinfo import NodeInfo
from ..objects import Node, Pod
from ..arguments import PluginArgsError

if TYPE_CHECKING:
    from ..snapshot import NodeTable, Snapshot

#: the framework plugin name (v1.18-v1.21); the two v1.9 names below are its filter and score
NAME: Final = "NodeLabel"
CHECK_NODE_LABEL_PRESENCE: Final = "CheckNodeLabelPresence"
NODE_LABEL_PRIORITY: Final = "NodeLabelPriority"

ERR_REASON_PRESENCE_VIOLATED: Final = "node(s) didn't have the requested labels"

_FRAMEWORK_KEYS: Final = ("presentLabels", "absentLabels", "presentLabelsPreference", "absentLabelsPreference")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- arguments


def _label_list(args: Mapping[str, Any], key: str) -> tuple[str, ...]:
    raw = args.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)) or not all(isinstance(v, str) for v in raw):
        raise PluginArgsError(key, "must be a list of label keys")
    return tuple(raw)


def _presence(args: Mapping[str, Any]) -> bool:
    raw = args.get("presence", False)
    if not isinstance(raw, bool):
        raise PluginArgsError("presence", f"{raw!r}: must be a boolean")
    return raw


def _check_pair(args: Mapping[str, Any], present_key: str, absent_key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    present, absent = _label_list(args, present_key), _label_list(args, absent_key)
    both = sorted(set(present) & set(absent))
    if both:
        raise PluginArgsError(
            present_key, f"detecting at least one label (e.g., {both[0]!r}) that exist in both the present{list(present)} and absent{list(absent)} label list"
        )
    return present, absent


def _framework_args(args: Mapping[str, Any]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {
        "filter": _check_pair(args, "presentLabels", "absentLabels"),
        "score": _check_pair(args, "presentLabelsPreference", "absentLabelsPreference"),
    }


def _reject_unknown(args: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in args:
        if key not in allowed:
            raise PluginArgsError(str(key), f"unknown field (expected one of {', '.join(allowed)})")


def parse_presence_args(args: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """CheckNodeLabelPresence arguments (either shape) -> (present labels, absent labels)."""
    args = args or {}
    if "labels" in args or "presence" in args:
        _reject_unknown(args, ("labels", "presence"))
        labels, presence = _label_list(args, "labels"), _presence(args)
        return (labels, ()) if presence else ((), labels)
    _reject_unknown(args, _FRAMEWORK_KEYS)
    return _framework_args(args)["filter"]


def parse_preference_args(args: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """NodeLabelPriority arguments (either shape) -> (present preferences, absent preferences)."""
    args = args or {}
    if "label" in args or "presence" in args:
        _reject_unknown(args, ("label", "presence"))
        label = args.get("label")
        if not isinstance(label, str):
            raise PluginArgsError("label", "must be a label key (a string)")
        return ((label,), ()) if _presence(args) else ((), (label,))
    _reject_unknown(args, _FRAMEWORK_KEYS)
    return _framework_args(args)["score"]


# --------------------------------------------------------------------------- pure checks


def fits_labels(present: Sequence[str], absent: Sequence[str], node: Node | None) -> bool:
    if node is None:
        return False
    labels = node.labels
    return all(k in labels for k in present) and not any(k in labels for k in absent)


def label_score(present: Sequence[str], absent: Sequence[str], node: Node) -> int:
    size = len(present) + len(absent)
    if size == 0:
        return 0
    labels = node.labels
    hits = sum(1 for k in present if k in labels) + sum(1 for k in absent if k not in labels)
    return hits * MAX_NODE_SCORE // size


def _has_label(table: "NodeTable", key: str) -> BoolArray:
    ids, _ = table.label_column(key)
    return ids >= 0


# --------------------------------------------------------------------------- the plugins


class CheckNodeLabelPresence:
    NAME: ClassVar[str] = CHECK_NODE_LABEL_PRESENCE

    def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
        self.present, self.absent = parse_presence_args(args)
        self.name = name or CHECK_NODE_LABEL_PRESENCE
        self._column = (NAME, "filter", self.present, self.absent)

    def fits(self, pod: Pod, node_info: NodeInfo) -> Status:
        if fits_labels(self.present, self.absent, node_info.node):
            return framework.SUCCESS
        return framework.unresolvable(ERR_REASON_PRESENCE_VIOLATED)

    def _mask(self, table: "NodeTable") -> tuple[BoolArray, bool]:
        def build(infos: list[NodeInfo]) -> tuple[BoolArray, bool]:
            ok = table.has_node.copy()
            for k in self.present:
                ok &= _has_label(table, k)
            for k in self.absent:
                ok &= ~_has_label(table, k)
            return ok, bool(ok.all())

        return table.derived(self._column, build)  # type: ignore[return-value]

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        # The verdicts do not depend on the pod: skip when every node passes (always, with no labels).
        return framework.SKIP if self._mask(snapshot.table)[1] else framework.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return self.fits(pod, node)

    def filter_nodes(self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]) -> BoolArray:
        return self._mask(table)[0][index]


class NodeLabelPriority:
    NAME: ClassVar[str] = NODE_LABEL_PRIORITY

    def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
        self.present, self.absent = parse_preference_args(args)
        self.name = name or NODE_LABEL_PRIORITY
        self._column = (NAME, "score", self.present, self.absent)

    def _scores(self, table: "NodeTable") -> tuple[IntArray, bool]:
        def build(infos: list[NodeInfo]) -> tuple[IntArray, bool]:
            hits = np.zeros(len(infos), dtype=np.int64)
            for k in self.present:
                hits += _has_label(table, k)
            for k in self.absent:
                hits += ~_has_label(table, k)
            size = len(self.present) + len(self.absent)
            scores = hits * MAX_NODE_SCORE // size if size else hits
            scores[~table.has_node] = 0
            return scores, bool(scores.size == 0 or (scores == scores[0]).all())

        return table.derived(self._column, build)  # type: ignore[return-value]

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: "Snapshot") -> Status:
        # Scores do not depend on the pod; the same score on every node cannot change the ranking.
        if not self.present and not self.absent:
            return framework.SKIP
        return framework.SKIP if self._scores(snapshot.table)[1] else framework.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        return label_score(self.present, self.absent, node.node)

    def score_nodes(self, state: CycleState, pod: Pod, table: "NodeTable", index: npt.NDArray[np.intp]) -> IntArray:
        return self._scores(table)[0][index]
