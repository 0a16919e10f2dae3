"""ServiceAffinity: keep a Service's pods on nodes with equal label values; spread them by a label.

v1.9 ``checkServiceAffinity`` (``plugin/pkg/scheduler/algorithm/predicates/predicates.go``)
and ``ServiceAntiAffinity`` (``algorithm/priorities/selector_spreading.go``), shaped
like the v1.18-1.21 framework plugin that merged them
(``pkg/scheduler/framework/plugins/serviceaffinity/service_affinity.go``), which is
also the reference for the 0..100 scaling.

Arguments: upstream's ``ServiceAffinityArgs`` (``affinityLabels``, ``antiAffinityLabelsPreference``);
registry.py translates the v1.9 ``serviceAffinity {labels}`` / ``serviceAntiAffinity {label}``.

Filter (``affinityLabels``): start from the configured
labels present in the pod's ``nodeSelector``; if some are missing, the pod has a
Service, and some pod in its namespace matches the pod's own labels (every pod
when the pod has none), copy the missing values from the node of the first such
pod. The node must carry every resulting key=value; an empty map fits any node.
"First" is snapshot order (node order, then the order pods were added); upstream's
was the pod lister's, which is unordered.

Score (``antiAffinityLabelsPreference``): a node's raw score
counts its pods in the pod's namespace matched by the selector of the pod's first
Service (v1.9 counts pods being deleted too). For each label L, with ``total`` the
raw sum over the feasible nodes and ``count(v)`` the sum over feasible nodes with
``L=v``, a node with ``L=v`` gets ``100 * (total - count(v)) / total`` (100 when
total is 0) divided by the number of labels; a node without L gets 0 for it.

PreFilter SKIPs when no affinity label is configured or the resolved map is
empty without looking at pods (every node fits); PreScore SKIPs when no anti-
affinity label is configured (every node scores 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    PreFilterPlugin,
    PreScorePlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import NodeTable, Snapshot
from ..model.objects import Pod

ERR_REASON: Final = "node(s) didn't match service affinity"


def affinity_selector(
    pod: Pod, labels: Sequence[str], snapshot: Snapshot, node: NodeInfo | None = None
) -> dict[str, str]:
    """The key=value map a node must carry (upstream Filter steps 1 and 2, before matching).

    ``node``, when given, is the NodeInfo being checked: a pod bound to it but absent from
    it (removed in a what-if) is not used as the example (upstream ``FilterOutPods``).
    """
    wanted = {k: pod.node_selector[k] for k in labels if k in pod.node_selector}
    if len(wanted) < len(labels) and snapshot.objects.services_of(pod):
        example = _first_matching_pod(pod, snapshot, node)
        if example is not None:
            info = snapshot.get(example.node_name)
            if info is not None and info.node is not None:
                for k in labels:
                    if k not in wanted and k in info.node.labels:
                        wanted[k] = info.node.labels[k]
    return wanted


def _first_matching_pod(pod: Pod, snapshot: Snapshot, node: NodeInfo | None) -> Pod | None:
    own = pod.labels
    for info in snapshot.node_infos:
        for p in info.pods.values():
            if p.namespace != pod.namespace or any(p.labels.get(k) != v for k, v in own.items()):
                continue
            if node is not None and p.node_name == node.name and p.uid not in node.pods:
                continue
            return p
    return None


def fits(pod: Pod, node: NodeInfo, labels: Sequence[str], snapshot: Snapshot) -> Status:
    """checkServiceAffinity for one node."""
    if not labels:
        return basics.SUCCESS
    if node.node is None:
        return basics.error("node not found")
    wanted = affinity_selector(pod, labels, snapshot, node)
    node_labels = node.node.labels
    if all(node_labels.get(k) == v for k, v in wanted.items()):
        return basics.SUCCESS
    return basics.unschedulable(ERR_REASON)


def normalize(counts: npt.NDArray[np.int64], values: list[list[str | None]]) -> npt.NDArray[np.int64]:
    """Upstream NormalizeScore; ``values[j][i]`` is node i's value of the j-th label (None when absent)."""
    result = [0.0] * counts.size
    top = float(MAX_NODE_SCORE)
    raw = counts.tolist()
    total = sum(raw)
    for column in values:
        per_value: dict[str, int] = {}
        for v, c in zip(column, raw):
            if v is not None:
                per_value[v] = per_value.get(v, 0) + c
        for i, v in enumerate(column):
            if v is None:
                continue
            f = top
            if total > 0:
                f = top * (float(total - per_value[v]) / float(total))
            result[i] += f / float(len(values))
    return np.array([int(x) for x in result], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ServiceAffinityArgs:
    """Upstream (v1.18-1.21) ``ServiceAffinityArgs``."""

    #: label keys a Service's pods must share values of (the filter)
    affinity_labels: tuple[str, ...] = ()
    #: label keys to spread a Service's pods over (the score; each counts equally)
    anti_affinity_labels_preference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key, labels in (
            ("affinityLabels", self.affinity_labels),
            ("antiAffinityLabelsPreference", self.anti_affinity_labels_preference),
        ):
            for i, label in enumerate(labels):
                if not label:
                    raise PluginArgsError(f"{key}[{i}]", "must be a non-empty label key")


def _not_found(label: str) -> str:
    return f"reading {label!r} from cycle state: not found"


@dataclass(frozen=True, slots=True)
class _FilterState:
    """The key=value map nodes must carry, resolved against ``snapshot``."""

    wanted: Mapping[str, str]
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """The selector of the pod's first Service (None: no Service) and the feasible nodes, in score order."""

    selector: Mapping[str, str] | None
    nodes: Sequence[NodeInfo]


class ServiceAffinity(PreFilterPlugin, VectorFilter, PreScorePlugin, NormalizeScorePlugin, EnqueueExtensions):
    """Filter on ``affinityLabels``, score on ``antiAffinityLabelsPreference``; see the module docstring."""

    NAME = "ServiceAffinity"
    Args = ServiceAffinityArgs

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Ours (upstream v1.22 registered Pod and Service events): the first pod of a service placed,
        moved or gone, a service changed, a node added or relabelled; no hints."""
        return tuple(
            ClusterEventWithHint(event)
            for event in (
                ClusterEvent.ASSIGNED_POD_ADD,
                ClusterEvent.ASSIGNED_POD_UPDATE,
                ClusterEvent.ASSIGNED_POD_DELETE,
                ClusterEvent.SERVICE_CHANGE,
                ClusterEvent.NODE_ADD,
                ClusterEvent.NODE_UPDATE,
            )
        )

    def __init__(self, args: ServiceAffinityArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.args: ServiceAffinityArgs
        self._filter_key = StateKey[_FilterState](f"PreFilter{self.name}")
        self._score_key = StateKey[_ScoreState](f"PreScore{self.name}")

    # ------------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        labels = self.args.affinity_labels
        if not labels:
            return basics.SKIP
        wanted = affinity_selector(pod, labels, snapshot)
        if not wanted and (not snapshot.objects.services_of(pod) or _first_matching_pod(pod, snapshot, None) is None):
            # No label from the nodeSelector and no example pod: the map is empty for every
            # node, what-if nodes included (hiding pods cannot add an example), so all fit.
            return basics.SKIP
        state.write(self._filter_key, _FilterState(wanted, snapshot))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s = state.read(self._filter_key)
        if s is None:
            return basics.error(_not_found(self._filter_key.label))
        if node.node is None:
            return basics.error("node not found")
        wanted = s.wanted
        if s.snapshot.get(node.name) is not node:
            # A NodeInfo outside the snapshot (a what-if): resolve the map against it.
            wanted = affinity_selector(pod, self.args.affinity_labels, s.snapshot, node)
        labels = node.node.labels
        if all(labels.get(k) == v for k, v in wanted.items()):
            return basics.SUCCESS
        return basics.unschedulable(ERR_REASON)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = state.read(self._filter_key)
        if s is None:
            raise LookupError(_not_found(self._filter_key.label))
        ok = np.ones(index.size, dtype=np.bool_)
        for k, v in s.wanted.items():
            ids, vocab = table.label_column(k)
            want = vocab.get(v)
            if want is None:
                return np.zeros(index.size, dtype=np.bool_)
            ok &= ids[index] == want
        return ok

    # ------------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        if not self.args.anti_affinity_labels_preference:
            return basics.SKIP  # reduceResult stays 0 for every node
        services = snapshot.objects.services_of(pod)
        selector = dict(services[0].selector) if services else None
        state.write(self._score_key, _ScoreState(selector, nodes))
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s = state.read(self._score_key)
        if s is None or s.selector is None:
            return 0
        sel = s.selector
        n = 0
        for p in node.pods.values():
            if p.namespace == pod.namespace and all(p.labels.get(k) == v for k, v in sel.items()):
                n += 1
        return n

    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        s = state.read(self._score_key)
        if s is None or scores.size == 0:
            return scores
        columns = [
            [i.node.labels.get(label) if i.node is not None else None for i in s.nodes]
            for label in self.args.anti_affinity_labels_preference
        ]
        return normalize(scores, columns)
