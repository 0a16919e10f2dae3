"""PodTopologySpread: spread a pod's group evenly over topology domains (zones, nodes...).

Follows upstream v1.37 ``pkg/scheduler/framework/plugins/podtopologyspread/`` (common.go,
filtering.go, scoring.go, plugin.go), with ``helper.DefaultSelector`` (helper/spread.go) for the
default constraints and ``ValidatePodTopologySpreadArgs`` for the arguments:

- Constraints: the pod's own ``topologySpreadConstraints``; a pod with none gets the default
  constraints (``defaultingType: System``: hostname maxSkew 3 and zone maxSkew 5, both
  ScheduleAnyway; ``List``: ``defaultConstraints``), whose selector is deduced from the Services,
  ReplicationController, ReplicaSet or StatefulSet the pod belongs to (no selector: no defaults).
  ``matchLabelKeys`` add ``key In (the pod's value)`` to the selector (the API server also merges
  them at admission since v1.34; merging twice selects the same pods). A constraint without a
  ``labelSelector`` selects nothing; an empty one selects every pod for the pod's own match but
  counts no existing pod (upstream ``countPodsMatchSelector``: an empty selector counts 0).
- Counting: pods in the pod's namespace that are not being deleted (upstream) and not terminal
  (upstream's informer never lists those), on nodes that carry every constraint's topology key and
  pass the constraint's ``nodeAffinityPolicy`` (Honor by default: the pod's nodeSelector and required
  node affinity) and ``nodeTaintsPolicy`` (Ignore by default; Honor: no untolerated
  NoSchedule/NoExecute taint).
- Filter (DoNotSchedule constraints): a node without a constraint's topology key is
  UnschedulableAndUnresolvable ``node(s) didn't match pod topology spread constraints (missing
  required label)``; otherwise ``matching pods in the node's domain + 1 if the pod matches its own
  selector - global minimum`` must not exceed maxSkew, else Unschedulable ``node(s) didn't match pod
  topology spread constraints``. The global minimum is 0 while fewer domains than ``minDomains``
  exist. As upstream, the minimum is tracked as two "critical paths" that AddPod / RemovePod
  update in place of a recount (exact for removals; after additions it can exceed the true minimum,
  which upstream accepts).
- Score (ScheduleAnyway constraints): per constraint, ``count * log(domains + 2) + maxSkew - 1``
  summed and rounded half away from zero, where ``count`` is the node's own matching pods for the
  hostname key and its domain's (over every node) otherwise, and ``domains`` the number of distinct
  values among the scored nodes (the scored nodes themselves for the hostname key). Scored nodes
  missing a topology key score 0 (except under system defaulting, where only present keys count);
  NormalizeScore maps ``s`` to ``100 * (max + min - s) // max`` (100 when every score is 0).

PreFilter / PreScore return SKIP when the pod has no constraint of their kind, so the plugin costs
nothing for most pods. Matching-pod counts per node are cached per (namespace, selector) and
refreshed only for nodes whose NodeInfo generation moved, so a pod's pre-steps cost O(nodes) numpy
plus the pods of the nodes that changed; per node, filter and score are O(constraints). The vector
forms use ``NodeTable.label_column`` and agree with the per-node ones.

Limits: upstream rejects a selector that does not convert (e.g. ``In`` without values) with an
error; the API server refuses such pods, and here they match by ``objects`` semantics. The owner
reference's API version is not compared (upstream only follows ``v1`` / ``apps/v1`` owners).

Requeueing (upstream ``EventsToRegister`` and its hints, for the DoNotSchedule constraints): a bound
pod of the namespace added or deleted that a constraint selects, or relabelled into or out of one;
a node added with every topology key, or updated into or out of having them, or changing a topology
value or its taints. A node deleted raises no event here (upstream's Node/Delete): such a pod waits
for another event or the queue's 5-minute flush.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal

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
from ..model.objects import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    TopologySpreadConstraint,
)
from ..toolkit.node_matching import find_untolerated, matches_required_affinity, required_affinity_mask, tolerated_mask

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import ClusterObjects, NodeTable, Snapshot

ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
SYSTEM_DEFAULTING: Final = "System"
LIST_DEFAULTING: Final = "List"

#: upstream ``systemDefaultConstraints``
SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
)

#: the critical paths' "no domain yet" count (upstream ``math.MaxInt32``)
_NO_DOMAIN: Final = 2**31 - 1
#: how many (namespace, selector) count columns the plugin keeps
_COUNT_CACHE_SIZE: Final = 128

_LABEL_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- arguments


def _label_name_problem(key: str) -> str | None:
    """Upstream ``ValidateLabelName`` (a qualified name), or None when ``key`` is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"invalid label name {key!r}: the prefix must be a DNS-1123 subdomain"
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f"invalid label name {key!r}: the name part must be at most 63 characters, alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """One ``defaultConstraints`` entry: a topologySpreadConstraint without a selector (deduced per pod)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    #: accepted only to be refused with upstream's reason
    label_selector: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.max_skew <= 0:
            raise PluginArgsError("maxSkew", f"invalid value {self.max_skew}: not in valid range (0, inf)")
        if not self.topology_key:
            raise PluginArgsError("topologyKey", "can not be empty")
        problem = _label_name_problem(self.topology_key)
        if problem is not None:
            raise PluginArgsError("topologyKey", problem)
        if not self.when_unsatisfiable:
            raise PluginArgsError("whenUnsatisfiable", "can not be empty")
        if self.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise PluginArgsError(
                "whenUnsatisfiable",
                f"unsupported value {self.when_unsatisfiable!r}:"
                f" supported values: {DO_NOT_SCHEDULE!r}, {SCHEDULE_ANYWAY!r}",
            )
        if self.label_selector is not None:
            raise PluginArgsError(
                "labelSelector", "constraint must not define a selector, as they deduced for each pod"
            )

    def as_constraint(self) -> TopologySpreadConstraint:
        return TopologySpreadConstraint(
            max_skew=self.max_skew,
            topology_key=self.topology_key,
            when_unsatisfiable=self.when_unsatisfiable,
            min_domains=self.min_domains,
            node_affinity_policy=self.node_affinity_policy,
            node_taints_policy=self.node_taints_policy,
        )


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    """Upstream ``PodTopologySpreadArgs``: ``System`` uses the built-in defaults, ``List`` the given ones
    (maybe none)."""

    default_constraints: tuple[DefaultConstraint, ...] = ()
    defaulting_type: Literal["System", "List"] = SYSTEM_DEFAULTING

    def __post_init__(self) -> None:
        if self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            raise PluginArgsError(
                "defaultingType", f"invalid value {SYSTEM_DEFAULTING!r}: when .defaultConstraints are not empty"
            )
        for i, c in enumerate(self.default_constraints):
            for other in self.default_constraints[:i]:
                if (c.topology_key, c.when_unsatisfiable) == (other.topology_key, other.when_unsatisfiable):
                    raise PluginArgsError(
                        f"defaultConstraints[{i}]", f"duplicate value: {{{c.topology_key}, {c.when_unsatisfiable}}}"
                    )


# --------------------------------------------------------------------------- constraints


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A constraint as the plugin applies it (upstream ``topologySpreadConstraint``).

    ``selector`` None selects nothing (upstream ``labels.Nothing()``); an empty one selects every
    pod but, as upstream, counts no existing pod.
    """

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    def selects(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)

    @property
    def counts_pods(self) -> bool:
        return self.selector is not None and not self.selector.is_empty

    def includes(self, pod: Pod, node: Node) -> bool:
        """Upstream ``matchNodeInclusionPolicies``: whether ``node`` counts for ``pod`` under this constraint."""
        if self.honor_node_affinity and not matches_required_affinity(pod, node):
            return False
        return not (self.honor_node_taints and find_untolerated(node.taints, pod.tolerations) is not None)


def _with_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], labels: Mapping[str, str]
) -> LabelSelector | None:
    """Upstream ``mergeLabelSetWithSelector``: ``key In (value)`` for each key the pod has; nothing stays nothing."""
    if selector is None or not keys:
        return selector
    added = tuple(LabelSelectorRequirement(k, "In", frozenset((labels[k],))) for k in keys if k in labels)
    if not added:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + added)


def select_constraints(
    constraints: Iterable[TopologySpreadConstraint], labels: Mapping[str, str], action: str
) -> tuple[SpreadConstraint, ...]:
    """Upstream ``filterTopologySpreadConstraints``: those with ``action``, their selectors built."""
    return tuple(
        SpreadConstraint(
            max_skew=c.max_skew,
            topology_key=c.topology_key,
            selector=_with_match_label_keys(c.label_selector, c.match_label_keys, labels),
            min_domains=1 if c.min_domains is None else c.min_domains,
            honor_node_affinity=c.node_affinity_policy is None or c.node_affinity_policy == HONOR,
            honor_node_taints=c.node_taints_policy == HONOR,
        )
        for c in constraints
        if c.when_unsatisfiable == action
    )


def default_selector(pod: Pod, objects: ClusterObjects) -> LabelSelector:
    """Upstream ``helper.DefaultSelector``: the selectors of the pod's Services and controller, ANDed.

    Services' and a ReplicationController's selectors are label maps merged into one map (the
    controller's wins on a shared key); a ReplicaSet's or StatefulSet's selector adds its requirements.
    """
    labels: dict[str, str] = {}
    for svc in objects.services_of(pod):
        labels.update(svc.selector)
    extra: tuple[LabelSelectorRequirement, ...] = ()
    owner = objects.owning_controller(pod)
    if owner is not None and owner.selector is not None:
        if owner.kind == "ReplicationController":
            labels.update(owner.selector.match_labels)
        else:
            sel = owner.selector
            extra = (
                tuple(LabelSelectorRequirement(k, "In", frozenset((v,))) for k, v in sel.match_labels.items())
                + sel.match_expressions
            )
    return LabelSelector(labels, extra)


def count_matching(pods: Iterable[Pod], constraint: SpreadConstraint, namespace: str) -> int:
    """Upstream ``countPodsMatchSelector``: the constraint's pods in ``namespace``, not deleting (nor terminal)."""
    selector = constraint.selector
    if selector is None or selector.is_empty:
        return 0
    return sum(
        1
        for p in pods
        if p.namespace == namespace and not p.deleting and not p.is_terminal and selector.matches(p.labels)
    )


def _selector_key(selector: LabelSelector) -> tuple[object, ...]:
    return (tuple(sorted(selector.match_labels.items())), frozenset(selector.match_expressions))


@dataclass(frozen=True, slots=True)
class _CountColumn:
    generations: IntArray
    counts: IntArray


class _CountCache:
    """Matching pods per table row for one (namespace, selector), recounted only where the row's generation moved.

    A NodeInfo's generation names its content (a process-wide counter bumped on every change, kept
    by clones), so a row whose generation is unchanged holds the same pods whatever table it sits
    in; a table of another length is counted afresh. Columns are never written after they are
    handed out (a change makes a new one), so a cycle state holding one stays true to its snapshot.
    """

    __slots__ = ("_columns",)

    def __init__(self) -> None:
        self._columns: dict[tuple[object, ...], _CountColumn] = {}

    def column(self, table: NodeTable, constraint: SpreadConstraint, namespace: str) -> IntArray:
        selector = constraint.selector
        if selector is None or selector.is_empty:
            return np.zeros(len(table), dtype=np.int64)
        key = (namespace, _selector_key(selector))
        cached = self._columns.pop(key, None)
        if cached is None or len(cached.counts) != len(table):
            counts = np.fromiter(
                (count_matching(table.info(k).pods.values(), constraint, namespace) for k in range(len(table))),
                dtype=np.int64,
                count=len(table),
            )
            cached = _CountColumn(table.generation.copy(), counts)
        else:
            moved = np.flatnonzero(cached.generations != table.generation)
            if moved.size:
                counts = cached.counts.copy()
                for k in moved.tolist():
                    counts[k] = count_matching(table.info(k).pods.values(), constraint, namespace)
                cached = _CountColumn(table.generation.copy(), counts)
        cached.counts.flags.writeable = False
        self._columns[key] = cached
        while len(self._columns) > _COUNT_CACHE_SIZE:
            del self._columns[next(iter(self._columns))]
        return cached.counts


# --------------------------------------------------------------------------- filter state


@dataclass(frozen=True, slots=True)
class CriticalPaths:
    """Upstream ``criticalPaths``: the domain with the fewest matching pods first, and one with at least as many."""

    first_value: str = ""
    first_num: int = _NO_DOMAIN
    second_value: str = ""
    second_num: int = _NO_DOMAIN

    def update(self, value: str, num: int) -> CriticalPaths:
        """Upstream ``criticalPaths.update``, returning the new paths."""
        if value == self.first_value or value == self.second_value:
            if value == self.first_value:
                out = replace(self, first_num=num)
            else:
                out = replace(self, second_num=num)
            if out.first_num > out.second_num:
                out = CriticalPaths(out.second_value, out.second_num, out.first_value, out.first_num)
            return out
        if num < self.first_num:
            return CriticalPaths(value, num, self.first_value, self.first_num)
        if num < self.second_num:
            return replace(self, second_value=value, second_num=num)
        return self


@dataclass(frozen=True, slots=True)
class Domains:
    """One constraint's domains: matching pods per topology value, and the critical paths.

    Values are ids of the table's label vocabulary ``vocab``; ``extra`` holds domains whose value
    the table does not have (AddPod on a node outside the snapshot).
    """

    vocab: Mapping[str, int]
    counts: IntArray
    present: BoolArray
    extra: Mapping[str, int]
    size: int
    paths: CriticalPaths

    def count(self, value: str) -> int:
        vid = self.vocab.get(value)
        return int(self.counts[vid]) if vid is not None else self.extra.get(value, 0)

    def min_match(self, min_domains: int) -> int:
        """Upstream ``minMatchNum``: the global minimum, 0 while there are fewer domains than ``min_domains``."""
        return 0 if self.size < min_domains else self.paths.first_num

    def with_delta(self, value: str, delta: int) -> Domains:
        """The domains after ``delta`` matching pods joined ``value`` (upstream ``updateWithPod``)."""
        vid = self.vocab.get(value)
        if vid is not None:
            counts = self.counts.copy()
            counts[vid] += delta
            num = int(counts[vid])
            counts.flags.writeable = False
            present, size = self.present, self.size
            if not present[vid]:
                present = present.copy()
                present[vid] = True
                present.flags.writeable = False
                size += 1
            return Domains(self.vocab, counts, present, self.extra, size, self.paths.update(value, num))
        extra = dict(self.extra)
        num = extra.get(value, 0) + delta
        size = self.size + (value not in extra)
        extra[value] = num
        return Domains(self.vocab, self.counts, self.present, extra, size, self.paths.update(value, num))

    @classmethod
    def of(cls, vocab: Mapping[str, int], ids: npt.NDArray[np.int32], rows: IntArray) -> Domains:
        """The domains of the rows ``ids`` (value ids, all >= 0) holding ``rows`` matching pods each."""
        counts = (
            np.bincount(ids, weights=rows, minlength=len(vocab)).astype(np.int64)
            if len(vocab)
            else np.zeros(0, dtype=np.int64)
        )
        present = np.zeros(len(vocab), dtype=np.bool_)
        present[ids] = True
        listed = np.flatnonzero(present)
        # Sequential updates over the domains in vocabulary order keep the two smallest by (count, order).
        order = listed[np.argsort(counts[listed], kind="stable")[:2]].tolist()
        values = list(vocab) if order else []
        paths = CriticalPaths()
        for vid in order:
            paths = paths.update(values[vid], int(counts[vid]))
        counts.flags.writeable = False
        present.flags.writeable = False
        return cls(vocab, counts, present, {}, len(listed), paths)


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """Upstream ``preFilterState``: the DoNotSchedule constraints, their domains, and whether the pod counts itself."""

    table: NodeTable
    constraints: tuple[SpreadConstraint, ...]
    domains: tuple[Domains, ...]
    self_match: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """Upstream ``preScoreState``, with what the vector score reads.

    ``ignored`` is aligned with the nodes PreScore was given (the ones NormalizeScore receives);
    ``domain_counts[i]`` is indexed by value id, the last slot (or the id of ``""``) standing for a
    node without the key, which upstream reads as the value ``""``.
    """

    table: NodeTable
    constraints: tuple[SpreadConstraint, ...]
    require_all_keys: bool
    ignored: BoolArray
    ignored_names: frozenset[str]
    weights: tuple[float, ...]
    vocabs: tuple[Mapping[str, int], ...]
    domain_counts: tuple[IntArray, ...]
    #: per hostname constraint: matching pods per table row (other constraints: empty)
    row_counts: tuple[IntArray, ...]


def satisfies_constraints(spread: PreFilterState, node_info: NodeInfo) -> Status:
    """Upstream ``Filter`` for one node, from the pod's PreFilter state (after any AddPod / RemovePod)."""
    labels = node_info.node.labels if node_info.node is not None else {}
    for c, d, own in zip(spread.constraints, spread.domains, spread.self_match):
        value = labels.get(c.topology_key)
        if value is None:
            return basics.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
        if d.count(value) + own - d.min_match(c.min_domains) > c.max_skew:
            return basics.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
    return basics.SUCCESS


def _round_half_away(x: float) -> int:
    """Go's ``math.Round`` for x >= 0."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


# --------------------------------------------------------------------------- the plugin


class PodTopologySpread(
    PreFilterExtensions[PodTopologySpreadArgs],
    VectorFilter,
    PreScorePlugin,
    VectorScore,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    NAME = "PodTopologySpread"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: spreading depends on where other pods are, not on the pod and the node
        alone: a pod with constraints, or any pod while default constraints apply, cannot be signed."""
        if pod.topology_spread_constraints:
            return basics.unschedulable("pods with topology constraints are not signable")
        if self.default_constraints:
            return basics.unschedulable("pods with default topology constraints are not signable")
        return ()

    def __init__(self, args: PodTopologySpreadArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.system_defaulted = self.args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS
            if self.system_defaulted
            else tuple(c.as_constraint() for c in self.args.default_constraints)
        )
        self._filter_key = StateKey[PreFilterState](f"PreFilter{self.name}")
        self._score_key = StateKey[PreScoreState](f"PreScore{self.name}")
        self._counts = _CountCache()

    def constraints(self, pod: Pod, action: str, objects: ClusterObjects) -> tuple[SpreadConstraint, ...]:
        """The pod's constraints with ``action``, or the default ones when it has none (upstream ``getConstraints``)."""
        if pod.topology_spread_constraints:
            return select_constraints(pod.topology_spread_constraints, pod.labels, action)
        defaults = select_constraints(self.default_constraints, pod.labels, action)
        if not defaults:
            return ()
        selector = default_selector(pod, objects)
        if selector.is_empty:
            return ()
        return tuple(replace(c, selector=selector) for c in defaults)

    def _inclusion(
        self, pod: Pod, table: NodeTable, constraint: SpreadConstraint, masks: dict[str, BoolArray]
    ) -> BoolArray:
        """Per table row: whether the constraint's node inclusion policies count the node (masks memoised
        in ``masks``)."""
        rows = np.arange(len(table), dtype=np.intp)
        mask = table.has_node.copy()
        if constraint.honor_node_affinity:
            if "affinity" not in masks:
                masks["affinity"] = required_affinity_mask(pod, table, rows)
            mask &= masks["affinity"]
        if constraint.honor_node_taints:
            if "taints" not in masks:
                masks["taints"] = tolerated_mask(pod.tolerations, table, rows)
            mask &= masks["taints"]
        return mask

    # ---- filter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        constraints = self.constraints(pod, DO_NOT_SCHEDULE, snapshot.objects)
        if not constraints:
            return basics.SKIP
        table = snapshot.table
        columns = [table.label_column(c.topology_key) for c in constraints]
        all_keys = table.has_node.copy()
        for ids, _ in columns:
            all_keys &= ids >= 0
        masks: dict[str, BoolArray] = {}
        domains = []
        for c, (ids, vocab) in zip(constraints, columns):
            counted = all_keys & self._inclusion(pod, table, c, masks)
            rows = self._counts.column(table, c, pod.namespace)
            domains.append(Domains.of(vocab, ids[counted], rows[counted]))
        self_match = tuple(int(c.selects(pod.labels)) for c in constraints)
        state.write(self._filter_key, PreFilterState(table, constraints, tuple(domains), self_match))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s = state.read(self._filter_key)
        if s is None:
            return basics.error(f"reading {self._filter_key.label!r} from cycle state: PreFilter did not run")
        return satisfies_constraints(s, node)

    def filter_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
        s = state.read(self._filter_key)
        if s is None:
            raise RuntimeError(f"reading {self._filter_key.label!r} from cycle state: PreFilter did not run")
        ok: BoolArray = table.has_node[index].copy()
        for c, d, own in zip(s.constraints, s.domains, s.self_match):
            ids, vocab = table.label_column(c.topology_key)
            if table is not s.table or vocab is not d.vocab:  # not the snapshot PreFilter saw: ask per node
                return np.fromiter(
                    (self.filter(state, pod, table.info(k)).is_success for k in index.tolist()),
                    dtype=np.bool_,
                    count=len(index),
                )
            at = ids[index]
            has = at >= 0
            if not len(vocab):
                return np.zeros(len(index), dtype=np.bool_)
            counts = d.counts[np.where(has, at, 0)]
            ok &= has & (counts + own - d.min_match(c.min_domains) <= c.max_skew)
        return ok

    # ---- pre-filter extensions

    def _update(self, state: CycleState, pod: Pod, other: Pod, node: NodeInfo, delta: int) -> Status:
        """Upstream ``updateWithPod``: ``other`` joins (delta 1) or leaves (-1) ``node`` in a what-if."""
        s = state.read(self._filter_key)
        n = node.node
        if s is None or other.namespace != pod.namespace or n is None:
            return basics.SUCCESS
        if not all(c.topology_key in n.labels for c in s.constraints):
            return basics.SUCCESS
        domains = list(s.domains)
        for i, c in enumerate(s.constraints):
            if c.selects(other.labels) and c.includes(pod, n):
                domains[i] = domains[i].with_delta(n.labels[c.topology_key], delta)
        state.write(self._filter_key, replace(s, domains=tuple(domains)))
        return basics.SUCCESS

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, added, node, 1)

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return self._update(state, pod, removed, node, -1)

    # ---- score

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        if not len(snapshot):
            return basics.SKIP
        constraints = self.constraints(pod, SCHEDULE_ANYWAY, snapshot.objects)
        if not constraints:
            return basics.SKIP
        table = snapshot.table
        # Only the system defaults spare nodes without every key (hostname spreading without zones).
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        where = table.position
        positions = np.fromiter((where[info.name] for info in nodes), dtype=np.intp, count=len(nodes))
        columns = [table.label_column(c.topology_key) for c in constraints]
        counted_rows = table.has_node.copy()
        if require_all:
            for ids, _ in columns:
                counted_rows &= ids >= 0
        ignored = ~counted_rows[positions] if require_all else np.zeros(len(nodes), dtype=np.bool_)
        scored = positions[~ignored]
        masks: dict[str, BoolArray] = {}
        weights, domain_counts, row_counts = [], [], []
        for c, (ids, vocab) in zip(constraints, columns):
            rows = self._counts.column(table, c, pod.namespace)
            if c.topology_key == LABEL_HOSTNAME:
                weights.append(math.log(len(scored) + 2))
                domain_counts.append(np.zeros(0, dtype=np.int64))
                row_counts.append(rows)
                continue
            # a missing key reads as the value "" (upstream indexes the node's label map)
            domain = np.where(ids >= 0, ids, vocab.get("", len(vocab)))
            tracked = np.zeros(len(vocab) + 1, dtype=np.bool_)
            tracked[domain[scored]] = True
            counted = counted_rows & self._inclusion(pod, table, c, masks)
            sums = np.bincount(domain[counted], weights=rows[counted], minlength=len(vocab) + 1).astype(np.int64)
            sums[~tracked] = 0
            weights.append(math.log(int(tracked.sum()) + 2))
            domain_counts.append(sums)
            row_counts.append(np.zeros(0, dtype=np.int64))
        names = frozenset(nodes[k].name for k in np.flatnonzero(ignored).tolist())
        state.write(
            self._score_key,
            PreScoreState(
                table,
                constraints,
                require_all,
                ignored,
                names,
                tuple(weights),
                tuple(v for _, v in columns),
                tuple(domain_counts),
                tuple(row_counts),
            ),
        )
        return basics.SUCCESS

    def _score_state(self, state: CycleState) -> PreScoreState:
        s = state.read(self._score_key)
        if s is None:
            raise RuntimeError(f"reading {self._score_key.label!r} from cycle state: PreScore did not run")
        return s

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s = self._score_state(state)
        if node.node is None or node.name in s.ignored_names:
            return 0
        labels = node.node.labels
        total = 0.0
        for c, w, vocab, sums in zip(s.constraints, s.weights, s.vocabs, s.domain_counts):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = count_matching(node.pods.values(), c, pod.namespace)
            else:
                vid = vocab.get(value, len(vocab) if value == "" else None)
                count = int(sums[vid]) if vid is not None else 0
            total += count * w + (c.max_skew - 1)
        return _round_half_away(total)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        s = self._score_state(state)
        if table is not s.table or any(
            table.label_column(c.topology_key)[1] is not v for c, v in zip(s.constraints, s.vocabs)
        ):
            return np.fromiter(
                (self.score(state, pod, table.info(k)) for k in index.tolist()), dtype=np.int64, count=len(index)
            )
        total = np.zeros(len(index), dtype=np.float64)
        counted = table.has_node[index].copy()
        for c, w, sums, rows in zip(s.constraints, s.weights, s.domain_counts, s.row_counts):
            ids, vocab = table.label_column(c.topology_key)
            at = ids[index]
            has = at >= 0
            if s.require_all_keys:
                counted &= has
            if c.topology_key == LABEL_HOSTNAME:
                count = rows[index]
            else:
                count = sums[np.where(has, at, len(vocab))]
            total += np.where(has, count * w + (c.max_skew - 1), 0.0)
        whole = np.floor(total)
        out = whole.astype(np.int64) + (total - whole >= 0.5)
        out[~counted] = 0
        return out

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> IntArray:
        s = self._score_state(state)
        if s.ignored.shape != scores.shape:
            raise RuntimeError(f"{self.name}: {scores.size} scores for the {s.ignored.size} nodes PreScore saw")
        valid = ~s.ignored
        out = np.zeros_like(scores)
        if not valid.any():
            return out
        kept = scores[valid]
        top, bottom = max(int(kept.max()), 0), int(kept.min())
        out[valid] = MAX_NODE_SCORE if top == 0 else MAX_NODE_SCORE * (top + bottom - kept) // top
        return out

    # ---- requeueing

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``EventsToRegister``: bound pods added, relabelled or deleted; nodes added or changed."""

        def pod_change(pod: Pod, old: object, new: object) -> QueueingHint:
            return self._after_assigned_pod_change(handle, pod, old, new)

        def node_change(pod: Pod, old: object, new: object) -> QueueingHint:
            return self._after_node_change(handle, pod, old, new)

        return (
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_ADD, pod_change),
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_UPDATE, pod_change),
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, pod_change),
            ClusterEventWithHint(ClusterEvent.NODE_ADD, node_change),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, node_change),
        )

    def _after_assigned_pod_change(self, handle: EnqueueHandle, pod: Pod, old: object, new: object) -> QueueingHint:
        """Upstream ``isSchedulableAfterAssignedPodChange``: a bound (or nominated) pod of the pod's namespace
        added or deleted that a constraint selects, or relabelled into or out of a constraint's selector."""
        if not isinstance(old, Pod | None) or not isinstance(new, Pod | None) or (old is None and new is None):
            return QueueingHint.QUEUE
        for other in (old, new):
            if other is not None and (
                (not other.node_name and not other.nominated_node_name) or other.namespace != pod.namespace
            ):
                return QueueingHint.QUEUE_SKIP
        constraints = self.constraints(pod, DO_NOT_SCHEDULE, handle.objects)
        if not constraints:
            return QueueingHint.QUEUE  # nothing of ours holds it back any more
        if old is not None and new is not None:
            moved = old.labels != new.labels and any(
                c.selects(old.labels) != c.selects(new.labels) for c in constraints
            )
        else:
            other = new if new is not None else old
            assert other is not None
            moved = any(c.selects(other.labels) for c in constraints)
        return QueueingHint.QUEUE if moved else QueueingHint.QUEUE_SKIP

    def _after_node_change(self, handle: EnqueueHandle, pod: Pod, old: object, new: object) -> QueueingHint:
        """Upstream ``isSchedulableAfterNodeChange``: a node added with every constraint's topology key, or
        updated into or out of having them all, or (having them) with a topology value or its taints changed."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        constraints = self.constraints(pod, DO_NOT_SCHEDULE, handle.objects)
        if not constraints:
            return QueueingHint.QUEUE
        keys = [c.topology_key for c in constraints]
        now_in = all(k in new.labels for k in keys)
        if not isinstance(old, Node):
            return QueueingHint.QUEUE if now_in else QueueingHint.QUEUE_SKIP
        if now_in != all(k in old.labels for k in keys):
            return QueueingHint.QUEUE
        if now_in and (any(old.labels.get(k) != new.labels.get(k) for k in keys) or old.taints != new.taints):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP
