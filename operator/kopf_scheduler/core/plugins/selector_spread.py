"""SelectorSpread: spread the pods of one Service / controller across nodes and zones.

v1.9 ``SelectorSpreadPriority`` (``plugin/pkg/scheduler/algorithm/priorities/selector_spreading.go``,
``CalculateSpreadPriorityMap/Reduce``) with the 0..100 scaling of the v1.18-1.21
framework plugin (``pkg/scheduler/framework/plugins/selectorspread/selector_spread.go``):

- The selectors are those of the Services, ReplicationControllers, ReplicaSets
  and StatefulSets in the pod's namespace that select the pod
  (``ClusterObjects.services_of`` / ``controllers_of``); with ``servicesOnly``
  (``SelectorSpreadArgs``; registry.py builds v1.9 ``ServiceSpreadingPriority`` as the instance
  ``ServiceSpreading`` with it, like the v1.18 framework plugin) only Services.
- A node's raw score counts its pods in the pod's namespace, not being deleted,
  that match *any* of the selectors (v1.9; the framework plugin later ANDed them).
- Normalisation: ``100 * (maxNode - count) / maxNode`` (100 when maxNode is 0);
  when some feasible node has a zone (``objects.zone_key``), a zoned node's score
  becomes ``1/3 * nodeScore + 2/3 * 100 * (maxZone - zoneCount) / maxZone``.
  Float arithmetic in upstream's order, truncated.

PreScore returns SKIP when no selector applies: every node then counts 0 and
normalises to the same score, and a constant added to every node does not change
the ranking. Unlike the framework plugin (v1.18+), pods with topology spread
constraints are not skipped: v1.9 had no such constraints.

Speed: existing pods are indexed by (namespace, labels) with per-node counts,
kept in step with the snapshot by NodeInfo generation; a selector is matched
once per distinct label set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.basics import MAX_NODE_SCORE, CycleState, StateKey, Status
from ..framework.interface import NormalizeScorePlugin, PreScorePlugin, VectorScore
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import NodeTable, Snapshot
from ..model.objects import LabelSelector, Pod, zone_key

ZONE_WEIGHTING: Final = 2.0 / 3.0

_CONTROLLER_KINDS: Final = ("ReplicationController", "ReplicaSet", "StatefulSet")


def selectors_of(pod: Pod, snapshot: Snapshot, *, services_only: bool = False) -> list[LabelSelector]:
    """The selectors of the Services (and, unless ``services_only``, controllers) selecting ``pod``."""
    objects = snapshot.objects
    out = [LabelSelector(dict(svc.selector)) for svc in objects.services_of(pod)]
    if not services_only:
        out.extend(c.selector for c in objects.controllers_of(pod, _CONTROLLER_KINDS) if c.selector is not None)
    return out


def count_matching(pod: Pod, selectors: list[LabelSelector], node: NodeInfo) -> int:
    """Pods on ``node`` in ``pod``'s namespace, not being deleted, matched by any selector (the raw score)."""
    if not selectors:
        return 0
    n = 0
    for p in node.pods.values():
        if p.namespace == pod.namespace and not p.deleting and any(s.matches(p.labels) for s in selectors):
            n += 1
    return n


def normalize(counts: npt.NDArray[np.int64], zones: list[str]) -> npt.NDArray[np.int64]:
    """Upstream CalculateSpreadPriorityReduce over the feasible nodes; ``zones[i]`` is "" when unzoned."""
    top = float(MAX_NODE_SCORE)
    max_node = int(counts.max()) if counts.size else 0
    by_zone: dict[str, int] = {}
    for z, c in zip(zones, counts.tolist()):
        if z:
            by_zone[z] = by_zone.get(z, 0) + c
    max_zone = max(by_zone.values(), default=0)
    out = np.empty(counts.size, dtype=np.int64)
    for i, c in enumerate(counts.tolist()):
        f = top
        if max_node > 0:
            f = top * (float(max_node - c) / float(max_node))
        z = zones[i]
        if by_zone and z:
            zs = top
            if max_zone > 0:
                zs = top * (float(max_zone - by_zone[z]) / float(max_zone))
            f = f * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zs
        out[i] = int(f)
    return out


class _Groups:
    """Non-deleting pods by (namespace, labels): per node counts, in step with one snapshot."""

    def __init__(self) -> None:
        self.by_ns: dict[str, dict[tuple[tuple[str, str], ...], dict[str, int]]] = {}
        self._nodes: dict[str, tuple[int, list[tuple[str, tuple[tuple[str, str], ...]]], list[int]]] = {}
        self._table: NodeTable | None = None
        self._gens: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def sync(self, snap: Snapshot) -> None:
        """Catch up with ``snap``: recount only the nodes whose generation moved (a numpy pass finds them)."""
        infos = snap.node_infos
        table = snap.table
        if table is self._table and len(table.generation) == len(self._gens):
            for k in np.flatnonzero(table.generation != self._gens).tolist():
                self._refresh(infos[k])
            self._gens = table.generation.copy()
            return
        for info in infos:
            self._refresh(info)
        live = {i.name for i in infos if i.node is not None}
        for name in [n for n in self._nodes if n not in live]:
            self._drop(name)
        self._table, self._gens = table, table.generation.copy()

    def _drop(self, name: str) -> None:
        _, keys, counts = self._nodes.pop(name)
        for (ns, lk), _n in zip(keys, counts):
            groups = self.by_ns[ns]
            per_node = groups[lk]
            del per_node[name]
            if not per_node:
                del groups[lk]
                if not groups:
                    del self.by_ns[ns]

    def _refresh(self, info: NodeInfo) -> None:
        name = info.name
        old = self._nodes.get(name)
        if old is not None:
            if old[0] == info.generation:
                return
            self._drop(name)
        if info.node is None:
            return
        counts: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        for p in info.pods.values():
            if not p.deleting:
                k = (p.namespace, tuple(sorted(p.labels.items())))
                counts[k] = counts.get(k, 0) + 1
        for (ns, lk), n in counts.items():
            self.by_ns.setdefault(ns, {}).setdefault(lk, {})[name] = n
        self._nodes[name] = (info.generation, list(counts), list(counts.values()))

    def counts(self, namespace: str, selectors: list[LabelSelector]) -> dict[str, int]:
        """Node name -> matching pods (namespace, not deleting, any selector)."""
        out: dict[str, int] = {}
        for lk, per_node in self.by_ns.get(namespace, {}).items():
            labels = dict(lk)
            if any(s.matches(labels) for s in selectors):
                for name, n in per_node.items():
                    out[name] = out.get(name, 0) + n
        return out


@dataclass(frozen=True, slots=True)
class SelectorSpreadArgs:
    #: spread by Services only, not by controllers (v1.9 ``ServiceSpreadingPriority``)
    services_only: bool = False


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """Node name -> matching pods (nodes without any are absent), and the feasible nodes in score order."""

    counts: Mapping[str, int]
    nodes: Sequence[NodeInfo]


class SelectorSpread(PreScorePlugin, VectorScore, NormalizeScorePlugin):
    """Score plugin; see the module docstring."""

    NAME = "SelectorSpread"
    Args = SelectorSpreadArgs

    def __init__(self, args: SelectorSpreadArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.args: SelectorSpreadArgs
        self._key = StateKey[_ScoreState](f"PreScore{self.name}")
        self._groups = _Groups()

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        selectors = selectors_of(pod, snapshot, services_only=self.args.services_only)
        if not selectors:
            return basics.SKIP  # every node would score the same
        self._groups.sync(snapshot)
        counts = self._groups.counts(pod.namespace, selectors)
        state.write(self._key, _ScoreState(counts, nodes))
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s = state.read(self._key)
        if s is None:
            return 0
        return s.counts.get(node.name, 0)

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        s = state.read(self._key)
        if s is None or not s.counts:
            return np.zeros(index.size, dtype=np.int64)
        column = np.zeros(len(table), dtype=np.int64)
        position = table.position
        for name, n in s.counts.items():
            k = position.get(name)
            if k is not None:
                column[k] = n
        return column[index]

    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        s = state.read(self._key)
        if s is None or scores.size == 0:
            return scores
        zones = [zone_key(i.node.labels) if i.node is not None else "" for i in s.nodes]
        return normalize(scores, zones)
