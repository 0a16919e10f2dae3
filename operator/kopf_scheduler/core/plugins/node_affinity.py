"""NodeAffinity: nodeSelector and required node affinity as a filter, preferred terms as a score.

Follows today's upstream ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`` with
the matching rules of ``component-helpers/scheduling/corev1/nodeaffinity`` (v1.9:
``MatchNodeSelector`` and ``NodeAffinityPriority``):

- Filter: every ``spec.nodeSelector`` pair must be a node label; if required node affinity is
  set, at least one of its terms must match (expressions and fields of a term are ANDed; a term
  with neither matches nothing; an empty term list matches no node). A failure is
  UnschedulableAndUnresolvable. The optional ``addedAffinity`` argument (scheduler-enforced
  affinity) is checked first, with its own reason.
- PreFilter returns SKIP when the pod has neither a nodeSelector nor required node affinity and
  there is no added required affinity, as upstream. When every required term pins node names
  (``matchFields metadata.name In``), it admits only the union of those names
  (``CycleState.admit_only``, upstream's ``PreFilterResult``): the algorithm filters just those
  nodes and counts the others as "node(s) didn't satisfy plugin(s) [NodeAffinity]"; when that
  union is empty it rejects the pod with "pod affinity terms conflict".
- Score: the sum of the weights of the matching preferred terms (pod's and added), terms of weight
  0 or without requirements ignored; DefaultNormalizeScore. PreScore returns SKIP when there is no
  such term, as upstream.

Vector forms evaluate each requirement once per distinct label value (``NodeTable.label_column``)
and index the result by node position; the matching rules live in ``core/toolkit/node_matching.py``, shared
with TaintToleration and PodTopologySpread. Limits: a requirement upstream rejects as malformed (In /
NotIn without values, Gt / Lt with a non-integer) is evaluated by ``objects`` semantics instead of
failing its term; the API server rejects such pods anyway. ``addedAffinity`` is validated here.

Requeueing (upstream ``EventsToRegister``): a node added, or updated, that matches the pod's
nodeSelector, required terms and the added terms now and did not before
(``isSchedulableAfterNodeChange``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics, interface
from ..framework.arguments import PluginArgsError
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
from ..model.objects import Node, NodeSelectorTerm, Pod, PreferredSchedulingTerm, go_int64
from ..model.parsing import ObjectError, parse_affinity
from ..toolkit import batching
from ..toolkit.node_matching import (
    OBJECT_NAME_FIELD,
    matches_required,
    matches_required_affinity,
    matches_selector,
    pod_required_terms,
    required_mask,
    selector_mask,
    term_mask,
)

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON_POD: Final = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED: Final = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT: Final = "pod affinity terms conflict"

_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
_LABEL_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- per-node matching


def effective_preferred(terms: tuple[PreferredSchedulingTerm, ...]) -> tuple[PreferredSchedulingTerm, ...]:
    """Upstream ``NewPreferredSchedulingTerms``: weight-0 and requirement-less terms never count."""
    return tuple(t for t in terms if t.weight != 0 and (t.preference.match_expressions or t.preference.match_fields))


def preferred_score(terms: tuple[PreferredSchedulingTerm, ...], node: Node) -> int:
    return sum(t.weight for t in terms if t.preference.matches(node))


def _pod_preferred(pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
    a = pod.affinity
    if a is None or a.node_affinity is None:
        return ()
    return effective_preferred(a.node_affinity.preferred)


def fits(pod: Pod, node_info: NodeInfo, *, added: tuple[NodeSelectorTerm, ...] | None = None) -> Status:
    """The filter's verdict for one node (``added``: the plugin's added required terms)."""
    node = node_info.node
    if added is not None and (node is None or not matches_required(added, node)):
        return basics.unresolvable(ERR_REASON_ENFORCED)
    if (
        node is None
        or not matches_selector(pod.node_selector, node)
        or not matches_required(pod_required_terms(pod), node)
    ):
        return basics.unresolvable(ERR_REASON_POD)
    return basics.SUCCESS


def pinned_node_names(terms: tuple[NodeSelectorTerm, ...]) -> set[str] | None:
    """Upstream PreFilter's node-name narrowing: the union over terms of the intersection of their
    ``metadata.name In`` values, or ``None`` when some term does not pin names (any node may match)."""
    names: set[str] = set()
    for term in terms:
        pinned: set[str] | None = None
        for req in term.match_fields:
            if req.key == OBJECT_NAME_FIELD and req.operator == "In":
                pinned = set(req.values) if pinned is None else pinned & set(req.values)
        if pinned is None:
            return None
        names |= pinned
    return names


# --------------------------------------------------------------------------- arguments


def _validate_requirements(raw: Any, where: str, *, fields: bool) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        raise PluginArgsError(where, "must be a list")
    for i, req in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(req, Mapping):
            raise PluginArgsError(w, "must be an object with key, operator and values")
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if not isinstance(key, str) or not key:
            raise PluginArgsError(f"{w}.key", "must be a non-empty string")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise PluginArgsError(f"{w}.values", "must be a list of strings")
        if fields:
            if key != OBJECT_NAME_FIELD:
                raise PluginArgsError(
                    f"{w}.key", f"not a valid field selector key: only {OBJECT_NAME_FIELD} is supported"
                )
            if op not in ("In", "NotIn"):
                raise PluginArgsError(f"{w}.operator", f"{op!r}: must be In or NotIn for a field selector")
            if len(values) != 1:
                raise PluginArgsError(f"{w}.values", "must have exactly one value for a field selector")
            continue
        if op not in _LABEL_OPERATORS:
            raise PluginArgsError(f"{w}.operator", f"{op!r}: not a valid node selector operator")
        if op in ("In", "NotIn") and not values:
            raise PluginArgsError(f"{w}.values", f"must be specified when operator is {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise PluginArgsError(f"{w}.values", f"may not be specified when operator is {op}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise PluginArgsError(f"{w}.values", f"must have exactly one value when operator is {op}")
            if go_int64(values[0]) is None:
                raise PluginArgsError(f"{w}.values[0]", f"{values[0]!r}: must be an integer")


def _validate_term(raw: Any, where: str) -> None:
    if not isinstance(raw, Mapping):
        raise PluginArgsError(where, "must be a node selector term")
    for key in raw:
        if key not in ("matchExpressions", "matchFields"):
            raise PluginArgsError(f"{where}.{key}", "unknown field")
    _validate_requirements(raw.get("matchExpressions"), f"{where}.matchExpressions", fields=False)
    _validate_requirements(raw.get("matchFields"), f"{where}.matchFields", fields=True)


def parse_added_affinity(raw: Any) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredSchedulingTerm, ...]]:
    """``addedAffinity`` (a NodeAffinity object) -> (required terms or None, preferred terms)."""
    where = "addedAffinity"
    if raw is None:
        return None, ()
    if not isinstance(raw, Mapping):
        raise PluginArgsError(where, "must be a node affinity object")
    for key in raw:
        if key not in (_REQUIRED, _PREFERRED):
            raise PluginArgsError(f"{where}.{key}", "unknown field")
    req = raw.get(_REQUIRED)
    if req is not None:
        w = f"{where}.{_REQUIRED}"
        if not isinstance(req, Mapping):
            raise PluginArgsError(w, "must be a node selector object")
        terms = req.get("nodeSelectorTerms")
        if not isinstance(terms, list) or not terms:
            raise PluginArgsError(f"{w}.nodeSelectorTerms", "must have at least one node selector term")
        for i, t in enumerate(terms):
            _validate_term(t, f"{w}.nodeSelectorTerms[{i}]")
    prefs = raw.get(_PREFERRED)
    if prefs is not None:
        w = f"{where}.{_PREFERRED}"
        if not isinstance(prefs, list):
            raise PluginArgsError(w, "must be a list")
        for i, p in enumerate(prefs):
            pw = f"{w}[{i}]"
            if not isinstance(p, Mapping):
                raise PluginArgsError(pw, "must be an object with weight and preference")
            weight = p.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                raise PluginArgsError(f"{pw}.weight", f"{weight!r}: must be in the range 1-100")
            _validate_term(p.get("preference", {}), f"{pw}.preference")
    try:
        affinity = parse_affinity({"nodeAffinity": dict(raw)}, where)
    except ObjectError as exc:  # pragma: no cover - the checks above come first
        raise PluginArgsError(where, str(exc)) from None
    assert affinity is not None and affinity.node_affinity is not None
    return affinity.node_affinity.required, effective_preferred(affinity.node_affinity.preferred)


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    """Upstream ``NodeAffinityArgs``: ``addedAffinity`` is a NodeAffinity in API form, applied to every pod.

    Validated and parsed once here (upstream ``ValidateNodeAffinityArgs``), so typed construction
    is checked too; the plugin reads ``added_required`` / ``added_preferred``.
    """

    added_affinity: Mapping[str, Any] | None = None
    #: the added required terms; None when there are none (every node matches)
    added_required: tuple[NodeSelectorTerm, ...] | None = field(init=False, default=None, repr=False, compare=False)
    #: the added preferred terms that count (weight > 0, with requirements)
    added_preferred: tuple[PreferredSchedulingTerm, ...] = field(init=False, default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        required, preferred = parse_added_affinity(self.added_affinity)
        object.__setattr__(self, "added_required", required)
        object.__setattr__(self, "added_preferred", preferred)


# --------------------------------------------------------------------------- the plugin


@dataclass(frozen=True, slots=True)
class _FilterState:
    selector: Mapping[str, str]
    required: tuple[NodeSelectorTerm, ...] | None


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """The preferred terms that count for this pod: the added ones, then the pod's."""

    terms: tuple[PreferredSchedulingTerm, ...]


class NodeAffinity(
    PreFilterPlugin[NodeAffinityArgs],
    VectorFilter,
    PreScorePlugin,
    VectorScore,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    NAME = "NodeAffinity"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's node affinity and node selector."""
        affinity = pod.affinity.node_affinity if pod.affinity is not None else None
        return (
            SignFragment(batching.NODE_AFFINITY_SIGNER, affinity),
            SignFragment(batching.NODE_SELECTOR_SIGNER, batching.labels_value(pod.node_selector)),
        )

    def __init__(self, args: NodeAffinityArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._filter_key = StateKey[_FilterState](f"PreFilter{self.name}")
        self._score_key = StateKey[_ScoreState](f"PreScore{self.name}")

    # ---- filter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        required = pod_required_terms(pod)
        if required is None and self.args.added_required is None and not pod.node_selector:
            return basics.SKIP
        state.write(self._filter_key, _FilterState(pod.node_selector, required))
        if required:
            names = pinned_node_names(required)
            if names is not None:
                if not names:
                    return basics.unresolvable(ERR_REASON_CONFLICT)
                state.admit_only(self.name, names)
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return fits(pod, node, added=self.args.added_required)

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        s = state.read(self._filter_key)
        if s is None:
            s = _FilterState(pod.node_selector, pod_required_terms(pod))
        mask: BoolArray = table.has_node[index].copy()
        if self.args.added_required is not None:
            mask &= required_mask(self.args.added_required, table, index)
        if s.selector:
            mask &= selector_mask(s.selector, table, index)
        if s.required is not None:
            mask &= required_mask(s.required, table, index)
        return mask

    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> tuple[list[Status], npt.NDArray[np.intp]]:
        """Two statuses: the added terms failed (checked first), or the pod's own did."""
        pod_failed, enforced_failed = (
            basics.unresolvable(ERR_REASON_POD),
            basics.unresolvable(ERR_REASON_ENFORCED),
        )
        if self.args.added_required is None:
            return [pod_failed], np.zeros(len(index), dtype=np.intp)
        enforced = ~(table.has_node[index] & required_mask(self.args.added_required, table, index))
        return [pod_failed, enforced_failed], enforced.astype(np.intp)

    # ---- score

    def _preferred(self, state: CycleState, pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
        cached = state.read(self._score_key)
        return cached.terms if cached is not None else self.args.added_preferred + _pod_preferred(pod)

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        terms = self.args.added_preferred + _pod_preferred(pod)
        if not terms:
            return basics.SKIP  # every node would score 0
        state.write(self._score_key, _ScoreState(terms))
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        return preferred_score(self._preferred(state, pod), node.node)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        out = np.zeros(len(index), dtype=np.int64)
        for t in self._preferred(state, pod):
            out += t.weight * term_mask(t.preference, table, index)
        out[~table.has_node[index]] = 0
        return out

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        return interface.default_normalize(scores)

    # ---- requeueing

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, self._after_node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, self._after_node_change),
        )

    def _matches(self, pod: Pod, node: Node) -> bool:
        added = self.args.added_required
        return (added is None or matches_required(added, node)) and matches_required_affinity(pod, node)

    def _after_node_change(self, pod: Pod, old: object, new: object) -> QueueingHint:
        """Upstream ``isSchedulableAfterNodeChange``: the node matches now and did not before."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        if self._matches(pod, new) and not (isinstance(old, Node) and self._matches(pod, old)):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
