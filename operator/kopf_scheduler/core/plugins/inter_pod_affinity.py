"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred terms as a score.

Follows today's upstream ``pkg/scheduler/framework/plugins/interpodaffinity/``
(``filtering.go``, ``scoring.go``, ``plugin.go``):

- PreFilter counts, per topology pair (key, value), the existing pods whose
  required anti-affinity terms select the incoming pod; the existing pods that
  match *all* the incoming pod's required affinity terms; and those matching
  each of its required anti-affinity terms. It returns SKIP when the pod has no
  required terms and no existing pod's anti-affinity selects it.
- Filter checks, in upstream's order: affinity (UnschedulableAndUnresolvable),
  the pod's anti-affinity, then existing pods' anti-affinity (both Unschedulable).
  A pod whose affinity terms match no pod anywhere passes on a node carrying all
  the topology keys if it matches its own terms (the first pod of a group).
- Score sums, per topology pair, the incoming pod's preferred terms against
  existing pods and the existing pods' required affinity (``hardPodAffinityWeight``),
  preferred affinity and preferred anti-affinity terms against the incoming pod;
  NormalizeScore maps min..max over the feasible nodes onto 0..100.

Speed: upstream walks every pod of the cluster for every incoming pod. We keep,
per plugin instance, an index synchronised with the snapshot by NodeInfo
generation: existing pods grouped by (namespace, labels), with per-node counts
and per-topology-key value counts, and the distinct (anti-)affinity terms of
existing pods with their topology value counts. Matching is then done once per
distinct label set or term, and the filter is a few dict lookups per node (or
a boolean lookup table over ``NodeTable.label_column`` in ``filter_nodes``).
The filter state copies the index's value counts it uses (the index changes
them as it follows the snapshot), so a state never changes under its reader.

PreFilter extensions (upstream ``AddPod`` / ``RemovePod``, ``updateWithPod``):
a what-if that adds or removes a pod on a node moves the three counts by that
pod, at the node's topology values, and writes a new state (the counts are
copied where they change, never mutated). Filter reads nothing but the state
and the node's labels, so the verdict then equals a fresh PreFilter on a
snapshot with (or without) that pod. A SKIPped PreFilter still writes its
(empty) state, so a what-if may add pods to it.

Arguments: upstream's ``InterPodAffinityArgs`` (``hardPodAffinityWeight``
0..100, default 1; ``ignorePreferredTermsOfExistingPods``). Namespace
selectors read ``snapshot.objects.namespace_labels`` (an unknown namespace has
no labels, so only an empty selector matches it).

Requeueing (upstream ``EventsToRegister`` and its hints): a bound pod added or relabelled that
matches every required affinity term, one relabelled or deleted that no longer matches a required
anti-affinity term, one deleted whose own anti-affinity the pod matched; a node added or relabelled
whose value of an affinity term's topology key appeared or changed (for anti-affinity: any node
added, or a value that changed or vanished); ours also: a namespace relabelled (namespace selectors
read the labels; upstream registers no such event). The hints read the cache's namespace labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import PluginArgsError
from ..framework.basics import MAX_NODE_SCORE, CycleState, StateKey, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    NormalizeScorePlugin,
    PreFilterExtensions,
    PreScorePlugin,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import NodeTable, Snapshot
from ..model.objects import LabelSelector, Node, Pod, PodAffinityTerm
from ..toolkit import batching

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: Final = "node(s) didn't match pod anti-affinity rules"

DEFAULT_HARD_POD_AFFINITY_WEIGHT: Final = 1
MIN_HARD_POD_AFFINITY_WEIGHT: Final = 0
MAX_HARD_POD_AFFINITY_WEIGHT: Final = 100

# Kinds of terms carried by existing pods.
_REQUIRED_ANTI: Final = 0
_REQUIRED_AFFINITY: Final = 1
_PREFERRED_AFFINITY: Final = 2
_PREFERRED_ANTI: Final = 3

#: topology value -> count (only positive counts are stored)
Values = dict[str, int]
#: topology key -> values with a positive count (keys without any are absent); read-only
PairSet = Mapping[str, Mapping[str, int]]


# --------------------------------------------------------------------------- the index


def _selector_key(sel: LabelSelector | None) -> object:
    if sel is None:
        return None
    return (tuple(sorted(sel.match_labels.items())), sel.match_expressions)


def _term_key(term: PodAffinityTerm) -> object:
    return (
        term.topology_key,
        _selector_key(term.label_selector),
        term.namespaces,
        _selector_key(term.namespace_selector),
    )


def _terms_of(pod: Pod) -> Iterator[tuple[int, int, PodAffinityTerm]]:
    """(kind, weight, term) for every pod (anti-)affinity term of an existing pod."""
    a = pod.affinity
    if a is None:
        return
    if a.pod_anti_affinity is not None:
        for t in a.pod_anti_affinity.required:
            yield _REQUIRED_ANTI, 0, t
        for w in a.pod_anti_affinity.preferred:
            yield _PREFERRED_ANTI, w.weight, w.term
    if a.pod_affinity is not None:
        for t in a.pod_affinity.required:
            yield _REQUIRED_AFFINITY, 0, t
        for w in a.pod_affinity.preferred:
            yield _PREFERRED_AFFINITY, w.weight, w.term


class _Group:
    """Existing pods sharing a namespace and a label set."""

    __slots__ = ("probe", "per_node", "topo")

    def __init__(self, probe: Pod) -> None:
        self.probe = probe  # any one of them: matching reads only namespace and labels
        self.per_node: dict[str, int] = {}
        self.topo: dict[str, Values] = {}  # topology key -> value -> pods, built on first use


class _ExistingTerm:
    """One distinct term carried by existing pods, and where those pods are."""

    __slots__ = ("term", "owner_namespace", "weight", "values")

    def __init__(self, term: PodAffinityTerm, owner_namespace: str, weight: int) -> None:
        self.term = term
        self.owner_namespace = owner_namespace
        self.weight = weight
        self.values: Values = {}  # value of term.topology_key -> pods carrying the term there


@dataclass(slots=True)
class _NodeEntry:
    generation: int
    node: object
    labels: Mapping[str, str]
    groups: dict[object, int]
    terms: list[tuple[int, object, str]]  # (kind, term signature, topology value)


def _add(values: Values, key: str, n: int) -> None:
    left = values.get(key, 0) + n
    if left > 0:
        values[key] = left
    else:
        values.pop(key, None)


class _Index:
    """Existing pods of one snapshot, kept in step with it by NodeInfo generation."""

    def __init__(self) -> None:
        self.nodes: dict[str, _NodeEntry] = {}
        self.groups: dict[object, _Group] = {}
        self.terms: tuple[dict[object, _ExistingTerm], ...] = ({}, {}, {}, {})
        self._table: NodeTable | None = None
        self._gens: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def sync(self, snap: Snapshot) -> None:
        """Catch up with ``snap``: re-index only the nodes whose NodeInfo generation moved (found
        by comparing the table's generation column with the one last seen: a numpy pass)."""
        infos = snap.node_infos
        table = snap.table
        if table is self._table and len(table.generation) == len(self._gens):
            moved = np.flatnonzero(table.generation != self._gens)
            if not moved.size:
                return
            for k in moved.tolist():
                self._refresh(infos[k])
            self._gens = table.generation.copy()
            return
        nodes = self.nodes
        current = 0
        for info in infos:
            if info.node is not None:
                current += 1
                self._refresh(info)
        if current != len(nodes):
            live = {i.name for i in infos if i.node is not None}
            for name in [n for n in nodes if n not in live]:
                self._remove(name, nodes.pop(name))
        self._table, self._gens = table, table.generation.copy()

    def _refresh(self, info: NodeInfo) -> None:
        node = info.node
        name = info.name
        entry = self.nodes.get(name)
        if entry is not None:
            if entry.generation == info.generation and entry.node is node:
                return
            self._remove(name, self.nodes.pop(name))
        if node is not None:
            self._insert(info)

    def _insert(self, info: NodeInfo) -> None:
        name = info.name
        labels = info.node.labels  # type: ignore[union-attr]
        counts: dict[object, int] = {}
        probes: dict[object, Pod] = {}
        for pod in info.pods.values():
            gk = (pod.namespace, tuple(sorted(pod.labels.items())))
            if gk in counts:
                counts[gk] += 1
            else:
                counts[gk] = 1
                probes[gk] = pod
        for key_of_group, n in counts.items():
            group = self.groups.get(key_of_group)
            if group is None:
                group = self.groups[key_of_group] = _Group(probes[key_of_group])
            group.per_node[name] = n
            for key, values in group.topo.items():
                v = labels.get(key)
                if v is not None:
                    _add(values, v, n)
        contributions: list[tuple[int, object, str]] = []
        for uid in info.pods_with_affinity:
            pod = info.pods[uid]
            for kind, weight, term in _terms_of(pod):
                v = labels.get(term.topology_key)
                if v is None:
                    continue
                sig = (weight, pod.namespace, _term_key(term))
                table = self.terms[kind]
                et = table.get(sig)
                if et is None:
                    et = table[sig] = _ExistingTerm(term, pod.namespace, weight)
                _add(et.values, v, 1)
                contributions.append((kind, sig, v))
        self.nodes[name] = _NodeEntry(info.generation, info.node, labels, counts, contributions)

    def _remove(self, name: str, entry: _NodeEntry) -> None:
        labels = entry.labels
        for gk, n in entry.groups.items():
            group = self.groups[gk]
            del group.per_node[name]
            if not group.per_node:
                del self.groups[gk]
                continue
            for key, values in group.topo.items():
                v = labels.get(key)
                if v is not None:
                    _add(values, v, -n)
        for kind, sig, v in entry.terms:
            table = self.terms[kind]
            et = table[sig]
            _add(et.values, v, -1)
            if not et.values:
                del table[sig]

    def topology(self, group: _Group, key: str) -> Values:
        """Value -> number of the group's pods on nodes with that value of ``key``."""
        values = group.topo.get(key)
        if values is None:
            values = group.topo[key] = {}
            nodes = self.nodes
            for name, n in group.per_node.items():
                v = nodes[name].labels.get(key)
                if v is not None:
                    values[v] = values.get(v, 0) + n
        return values


def _union(parts: list[Values]) -> Values:
    """One value dict for a key, owned by the caller (the index's dicts change as it syncs)."""
    if len(parts) == 1:
        return dict(parts[0])
    out: Values = {}
    for p in parts:
        for v, n in p.items():
            out[v] = out.get(v, 0) + n
    return out


def _pair_set(parts: dict[str, list[Values]]) -> PairSet:
    return {key: _union(vs) for key, vs in parts.items() if any(vs)}


def _moved(counts: PairSet, keys: Iterable[str], labels: Mapping[str, str], sign: int) -> PairSet:
    """``counts`` with ``sign`` added at the node's value of each key in ``keys`` (once per occurrence).

    Upstream ``topologyToMatchedTermCount.update``: keys the node lacks are ignored. Returns
    ``counts`` itself when nothing moves, else a new mapping sharing only the untouched keys.
    """
    out: dict[str, Mapping[str, int]] | None = None
    for key in keys:
        v = labels.get(key)
        if v is None:
            continue
        if out is None:
            out = dict(counts)
        values = dict(out.get(key, {}))
        _add(values, v, sign)
        if values:
            out[key] = values
        else:
            out.pop(key, None)
    return counts if out is None else out


# --------------------------------------------------------------------------- cycle state


@dataclass(frozen=True, slots=True)
class _FilterState:
    """Upstream's preFilterState: the incoming pod's required terms and the three topology pair counts.

    The count mappings are never mutated; ``add_pod`` / ``remove_pod`` write a new state.
    """

    #: the pod's required affinity terms, in order
    affinity_terms: tuple[PodAffinityTerm, ...]
    #: existing pods matching all of ``affinity_terms``, per topology pair of each term
    affinity: PairSet
    #: the pod matches all of its own required affinity terms (and has some)
    self_affinity: bool
    anti_affinity_terms: tuple[PodAffinityTerm, ...]
    #: existing pods matching each of ``anti_affinity_terms``, per topology pair
    anti_affinity: PairSet
    #: existing pods' required anti-affinity terms selecting the pod, per topology pair
    existing_anti_affinity: PairSet
    #: namespace -> labels, to match the terms of pods a what-if adds or removes
    namespace_labels: Mapping[str, Mapping[str, str]]

    @property
    def first_of_group(self) -> bool:
        """No existing pod matches the affinity terms, and the pod matches its own (upstream's self-affinity rule)."""
        return self.self_affinity and not self.affinity


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """Topology key -> value -> summed weight (upstream's preScoreState.topologyScore), zeros dropped."""

    scores: Mapping[str, Mapping[str, int]]


# --------------------------------------------------------------------------- the plugin


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    """Upstream ``InterPodAffinityArgs``."""

    #: score weight of an existing pod's required affinity term that selects the incoming pod
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    #: without preferred terms of its own, the incoming pod ignores existing pods' preferred terms
    ignore_preferred_terms_of_existing_pods: bool = False

    def __post_init__(self) -> None:
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= self.hard_pod_affinity_weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise PluginArgsError(
                "hardPodAffinityWeight",
                f"not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]",
            )


class InterPodAffinity(
    PreFilterExtensions[InterPodAffinityArgs],
    VectorFilter,
    PreScorePlugin,
    VectorScore,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    """Filter, score and normalise on pod (anti-)affinity; see the module docstring."""

    NAME = "InterPodAffinity"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: a pod with (anti-)affinity terms cannot be signed; otherwise its labels
        (existing pods' terms may select it), unless existing pods' preferred terms are ignored."""
        affinity = pod.affinity
        if affinity is not None and (affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None):
            return basics.unschedulable("pods with InterPodAffinity are not signable")
        if self.args.ignore_preferred_terms_of_existing_pods:
            return ()
        return batching.fragment(batching.LABELS_SIGNER, batching.labels_value(pod.labels))

    def __init__(self, args: InterPodAffinityArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._filter_key = StateKey[_FilterState](f"PreFilter{self.name}")
        self._score_key = StateKey[_ScoreState](f"PreScore{self.name}")
        self._index = _Index()
        self._statuses = tuple(st.with_plugin(self.name) for st in _STATUSES)

    # ------------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        req_aff, req_anti = _required_terms(pod)
        if not req_aff and not req_anti and not snapshot.any_pods_with_required_anti_affinity:
            state.write(self._filter_key, _FilterState((), {}, False, (), {}, {}, snapshot.objects.namespace_labels))
            return basics.SKIP
        s = self.filter_state(pod, snapshot)
        state.write(self._filter_key, s)
        if not req_aff and not req_anti and not s.existing_anti_affinity:
            return basics.SKIP
        return basics.SUCCESS

    def _not_found(self) -> str:
        return f"reading {self._filter_key.label!r} from cycle state: not found"

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, added, node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, removed, node, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, node: NodeInfo, sign: int) -> Status:
        s = state.read(self._filter_key)
        if s is None:
            return basics.error(self._not_found())
        if node.node is None:
            return basics.error("node not found")
        updated = with_pod(s, pod, other, node.node.labels, sign)
        if updated is not s:
            state.write(self._filter_key, updated)
        return basics.SUCCESS

    def filter_state(self, pod: Pod, snapshot: Snapshot) -> _FilterState:
        """The three topology pair counts of upstream's preFilterState, as value sets per key."""
        idx = self._index
        idx.sync(snapshot)
        ns_labels = snapshot.objects.namespace_labels
        own_labels = ns_labels.get(pod.namespace)
        req_aff, req_anti = _required_terms(pod)

        existing: dict[str, list[Values]] = {}
        for et in idx.terms[_REQUIRED_ANTI].values():
            if et.term.selects(pod, et.owner_namespace, own_labels):
                existing.setdefault(et.term.topology_key, []).append(et.values)

        affinity: dict[str, list[Values]] = {}
        anti: dict[str, list[Values]] = {}
        if req_aff or req_anti:
            for group in idx.groups.values():
                probe = group.probe
                probe_labels = ns_labels.get(probe.namespace)
                if req_aff and all(t.selects(probe, pod.namespace, probe_labels) for t in req_aff):
                    for t in req_aff:
                        affinity.setdefault(t.topology_key, []).append(idx.topology(group, t.topology_key))
                for t in req_anti:
                    if t.selects(probe, pod.namespace, probe_labels):
                        anti.setdefault(t.topology_key, []).append(idx.topology(group, t.topology_key))
        return _FilterState(
            affinity_terms=req_aff,
            affinity=_pair_set(affinity),
            self_affinity=bool(req_aff) and all(t.selects(pod, pod.namespace, own_labels) for t in req_aff),
            anti_affinity_terms=req_anti,
            anti_affinity=_pair_set(anti),
            existing_anti_affinity=_pair_set(existing),
            namespace_labels=ns_labels,
        )

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        # Called once per rejected node to explain it, so kept lean: statuses come pre-stamped.
        s = state.read(self._filter_key)
        if s is None:
            return basics.error(self._not_found())
        n = node.node
        if n is None:
            return basics.error("node not found")
        return self._statuses[_verdict(s, n.labels)]

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = state.read(self._filter_key)
        if s is None:
            raise LookupError(self._not_found())
        ok = np.ones(index.size, dtype=np.bool_)
        if s.affinity_terms:
            present = np.ones(index.size, dtype=np.bool_)
            exist = np.ones(index.size, dtype=np.bool_)
            for t in s.affinity_terms:
                key = t.topology_key
                ids = table.label_column(key)[0][index]
                present &= ids >= 0
                exist &= _hits(table, key, s.affinity.get(key), ids)
            ok = present & (exist | s.first_of_group)
        if s.anti_affinity:
            for t in s.anti_affinity_terms:
                key = t.topology_key
                ids = table.label_column(key)[0][index]
                ok &= ~_hits(table, key, s.anti_affinity.get(key), ids)
        for key, values in s.existing_anti_affinity.items():
            ids = table.label_column(key)[0][index]
            ok &= ~_hits(table, key, values, ids)
        return ok

    # ------------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        if not nodes:
            return basics.SKIP
        a = pod.affinity
        pref_aff = a.pod_affinity.preferred if a is not None and a.pod_affinity is not None else ()
        pref_anti = a.pod_anti_affinity.preferred if a is not None and a.pod_anti_affinity is not None else ()
        has_constraints = bool(pref_aff or pref_anti)
        if not has_constraints and (
            self.args.ignore_preferred_terms_of_existing_pods or not snapshot.any_pods_with_affinity
        ):
            return basics.SKIP
        scores = self.topology_scores(pod, snapshot)
        # Upstream skips when no pair was scored; a map whose entries are all 0 also scores
        # every node 0, and a constant score normalises to 0 everywhere: the same result.
        if not scores:
            return basics.SKIP
        state.write(self._score_key, _ScoreState(scores))
        return basics.SUCCESS

    def topology_scores(self, pod: Pod, snapshot: Snapshot) -> dict[str, dict[str, int]]:
        """Topology key -> value -> summed weight (upstream's preScoreState.topologyScore), zeros dropped."""
        idx = self._index
        idx.sync(snapshot)
        ns_labels = snapshot.objects.namespace_labels
        a = pod.affinity
        pref_aff = a.pod_affinity.preferred if a is not None and a.pod_affinity is not None else ()
        pref_anti = a.pod_anti_affinity.preferred if a is not None and a.pod_anti_affinity is not None else ()
        out: dict[str, dict[str, int]] = {}

        def add(key: str, values: Values, weight: int) -> None:
            target = out.setdefault(key, {})
            for v, n in values.items():
                target[v] = target.get(v, 0) + n * weight

        if pref_aff or pref_anti:
            for group in idx.groups.values():
                probe = group.probe
                probe_labels = ns_labels.get(probe.namespace)
                for w in pref_aff:
                    if w.term.selects(probe, pod.namespace, probe_labels):
                        add(w.term.topology_key, idx.topology(group, w.term.topology_key), w.weight)
                for w in pref_anti:
                    if w.term.selects(probe, pod.namespace, probe_labels):
                        add(w.term.topology_key, idx.topology(group, w.term.topology_key), -w.weight)
        own_labels = ns_labels.get(pod.namespace)
        kinds: list[tuple[int, int]] = [(_PREFERRED_AFFINITY, 1), (_PREFERRED_ANTI, -1)]
        hard_weight = self.args.hard_pod_affinity_weight
        if hard_weight > 0:
            kinds.append((_REQUIRED_AFFINITY, 1))
        for kind, sign in kinds:
            for et in idx.terms[kind].values():
                if et.term.selects(pod, et.owner_namespace, own_labels):
                    weight = hard_weight if kind == _REQUIRED_AFFINITY else et.weight
                    add(et.term.topology_key, et.values, sign * weight)
        for key in list(out):
            values = {v: n for v, n in out[key].items() if n != 0}
            if values:
                out[key] = values
            else:
                del out[key]
        return out

    def _scores(self, state: CycleState) -> Mapping[str, Mapping[str, int]]:
        s = state.read(self._score_key)
        return s.scores if s is not None else {}

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        scores = self._scores(state)
        if node.node is None:
            return 0
        labels = node.node.labels
        total = 0
        for key, values in scores.items():
            v = labels.get(key)
            if v is not None:
                total += values.get(v, 0)
        return total

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        scores = self._scores(state)
        total = np.zeros(index.size, dtype=np.int64)
        for key, values in scores.items():
            ids, vocab = table.label_column(key)
            lut = np.zeros(len(vocab) + 1, dtype=np.int64)
            for v, n in values.items():
                i = vocab.get(v)
                if i is not None:
                    lut[i + 1] = n
            total += lut[ids[index] + 1]
        return total

    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if scores.size == 0 or not self._scores(state):
            return scores
        return normalize(scores)

    # ---- requeueing

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        return _events(handle)


# --------------------------------------------------------------------------- pure helpers


_PASS: Final = 0
_AFFINITY_FAIL: Final = 1
_ANTI_AFFINITY_FAIL: Final = 2
_EXISTING_FAIL: Final = 3
_STATUSES: Final = (
    basics.SUCCESS,
    basics.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    basics.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    basics.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
)


def _required_terms(pod: Pod) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
    """The pod's required affinity and anti-affinity terms."""
    a = pod.affinity
    if a is None:
        return (), ()
    req_aff = a.pod_affinity.required if a.pod_affinity is not None else ()
    req_anti = a.pod_anti_affinity.required if a.pod_anti_affinity is not None else ()
    return req_aff, req_anti


def with_pod(s: _FilterState, pod: Pod, other: Pod, labels: Mapping[str, str], sign: int) -> _FilterState:
    """``s`` as if ``other`` were added (``sign`` 1) to, or removed (-1) from, a node with ``labels``.

    Upstream ``preFilterState.updateWithPod`` (without the hostname fast path): ``other``'s
    required anti-affinity terms that select ``pod``; ``pod``'s affinity terms when ``other``
    matches them all; each of ``pod``'s anti-affinity terms ``other`` matches. ``s`` itself when
    nothing moves.
    """
    ns_labels = s.namespace_labels
    existing = s.existing_anti_affinity
    _, other_anti = _required_terms(other)
    if other_anti:
        own = ns_labels.get(pod.namespace)
        existing = _moved(
            existing, (t.topology_key for t in other_anti if t.selects(pod, other.namespace, own)), labels, sign
        )
    affinity, anti = s.affinity, s.anti_affinity
    if s.affinity_terms or s.anti_affinity_terms:
        theirs = ns_labels.get(other.namespace)
        if s.affinity_terms and all(t.selects(other, pod.namespace, theirs) for t in s.affinity_terms):
            affinity = _moved(affinity, (t.topology_key for t in s.affinity_terms), labels, sign)
        anti = _moved(
            anti,
            (t.topology_key for t in s.anti_affinity_terms if t.selects(other, pod.namespace, theirs)),
            labels,
            sign,
        )
    if existing is s.existing_anti_affinity and affinity is s.affinity and anti is s.anti_affinity:
        return s
    return _FilterState(
        affinity_terms=s.affinity_terms,
        affinity=affinity,
        self_affinity=s.self_affinity,
        anti_affinity_terms=s.anti_affinity_terms,
        anti_affinity=anti,
        existing_anti_affinity=existing,
        namespace_labels=ns_labels,
    )


def _verdict(s: _FilterState, labels: Mapping[str, str]) -> int:
    """Upstream Filter on one node's labels: affinity, then anti-affinity, then existing pods' anti-affinity."""
    if s.affinity_terms:
        exist = True
        for t in s.affinity_terms:
            key = t.topology_key
            v = labels.get(key)
            if v is None:  # every topology key of the terms must be on the node
                return _AFFINITY_FAIL
            values = s.affinity.get(key)
            if values is None or v not in values:
                exist = False
        if not exist and not s.first_of_group:
            return _AFFINITY_FAIL
    if s.anti_affinity:
        for t in s.anti_affinity_terms:
            key = t.topology_key
            v = labels.get(key)
            if v is not None:
                values = s.anti_affinity.get(key)
                if values is not None and v in values:
                    return _ANTI_AFFINITY_FAIL
    for key, values in s.existing_anti_affinity.items():
        v = labels.get(key)
        if v is not None and v in values:
            return _EXISTING_FAIL
    return _PASS


def check(s: _FilterState, labels: Mapping[str, str]) -> Status:
    """The filter's Status for a node with ``labels``, given the pre-filter state ``s``."""
    return _STATUSES[_verdict(s, labels)]


def fits(pod: Pod, node: NodeInfo, snapshot: Snapshot) -> Status:
    """Whether ``pod`` passes InterPodAffinity on ``node`` against the pods of ``snapshot`` (for preemption, tests)."""
    plugin = InterPodAffinity()
    state = CycleState()
    status = plugin.pre_filter(state, pod, snapshot)
    if status.is_skip:
        return basics.SUCCESS
    return plugin.filter(state, pod, node)


def normalize(scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Upstream NormalizeScore: ``100 * (s - min) / (max - min)`` truncated; all 0 when max == min."""
    lo, hi = int(scores.min()), int(scores.max())
    diff = hi - lo
    if diff <= 0:
        return np.zeros(scores.size, dtype=np.int64)
    out = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))
    return out.astype(np.int64)


def _hits(
    table: NodeTable, key: str, values: Mapping[str, int] | None, ids: npt.NDArray[np.int32]
) -> npt.NDArray[np.bool_]:
    """Per node of ``ids`` (label value ids of ``key``), whether its value is among ``values``."""
    if not values:
        return np.zeros(ids.size, dtype=np.bool_)
    vocab = table.label_column(key)[1]
    lut = np.zeros(len(vocab) + 1, dtype=np.bool_)
    if len(values) <= len(vocab):
        pos = [vocab[v] + 1 for v in values if v in vocab]
    else:
        pos = [i + 1 for v, i in vocab.items() if v in values]
    lut[pos] = True
    return lut[ids + 1]


# --------------------------------------------------------------------------- requeueing


def _events(handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
    """Upstream ``EventsToRegister``: bound pods added, relabelled or deleted; nodes added or relabelled."""

    def pod_change(pod: Pod, old: object, new: object) -> QueueingHint:
        return after_assigned_pod_change(handle, pod, old, new)

    return (
        ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_ADD, pod_change),
        ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_UPDATE, pod_change),
        ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, pod_change),
        ClusterEventWithHint(ClusterEvent.NODE_ADD, after_node_change),
        ClusterEventWithHint(ClusterEvent.NODE_UPDATE, after_node_change),
        # ours: namespace selectors read namespace labels (upstream registers no Namespace event)
        ClusterEventWithHint(ClusterEvent.NAMESPACE_CHANGE),
    )


def _selects_all(terms: tuple[PodAffinityTerm, ...], owner: Pod, other: Pod, labels: Mapping[str, str] | None) -> bool:
    """Upstream ``podMatchesAllAffinityTerms``: some terms, and each selects `other`."""
    return bool(terms) and all(t.selects(other, owner.namespace, labels) for t in terms)


def _selects_any(terms: tuple[PodAffinityTerm, ...], owner: Pod, other: Pod, labels: Mapping[str, str] | None) -> bool:
    return any(t.selects(other, owner.namespace, labels) for t in terms)


def after_assigned_pod_change(handle: EnqueueHandle, pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterAssignedPodChange``: a bound pod now matches all the pod's required
    affinity terms (added, or relabelled), no longer matches its anti-affinity (relabelled, deleted), or
    was deleted with an anti-affinity of its own that the pod matched."""
    if not isinstance(old, Pod | None) or not isinstance(new, Pod | None) or (old is None and new is None):
        return QueueingHint.QUEUE
    if any(p is not None and not p.node_name and not p.nominated_node_name for p in (old, new)):
        return QueueingHint.QUEUE_SKIP
    affinity, anti = _required_terms(pod)
    namespaces = handle.objects.namespace_labels
    if new is not None:
        labels = namespaces.get(new.namespace)
        if old is None:
            return QueueingHint.QUEUE if _selects_all(affinity, pod, new, labels) else QueueingHint.QUEUE_SKIP
        if not _selects_all(affinity, pod, old, labels) and _selects_all(affinity, pod, new, labels):
            return QueueingHint.QUEUE
        if _selects_any(anti, pod, old, labels) and not _selects_any(anti, pod, new, labels):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
    assert old is not None
    if _selects_any(anti, pod, old, namespaces.get(old.namespace)):
        return QueueingHint.QUEUE
    _, theirs = _required_terms(old)
    if _selects_any(theirs, old, pod, namespaces.get(pod.namespace)):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def after_node_change(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterNodeChange``: a node added with an affinity term's topology key (with
    anti-affinity: any node added), or a node whose topology value changed, appeared or (anti) vanished."""
    if not isinstance(new, Node):
        return QueueingHint.QUEUE
    affinity, anti = _required_terms(pod)
    before = old.labels if isinstance(old, Node) else None
    after = new.labels
    for term in affinity:
        key = term.topology_key
        if before is None:
            if key in after:
                return QueueingHint.QUEUE
        elif key in after and before.get(key) != after[key]:
            return QueueingHint.QUEUE
    for term in anti:
        key = term.topology_key
        if before is None or (key in before and before.get(key) != after.get(key)):
            return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP
