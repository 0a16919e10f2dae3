"""Which nodes a pod's hard node rules admit: nodeSelector with required node affinity, and taints.

Shared by the NodeAffinity, TaintToleration and PodTopologySpread plugins (plugins never import each
other), as upstream shares ``component-helpers/scheduling/corev1``: ``nodeaffinity.RequiredNodeAffinity``
(``GetRequiredNodeAffinity(pod).Match(node)``: every nodeSelector pair is a node label, and, when
required node affinity is set, one of its terms matches) and ``FindMatchingUntoleratedTaint`` with
``DoNotScheduleTaintsFilterFunc`` (the first NoSchedule / NoExecute taint no toleration tolerates).

Each rule has a scalar form over one ``Node`` and a vector form over the snapshot's ``NodeTable``
that evaluates a requirement once per distinct label value (``NodeTable.label_column``) or a
pod's tolerations once per distinct taint tuple (``NodeTable.taint_sets``). The matching itself is
``objects``' (``NodeSelectorRequirement.matches``, ``Toleration.tolerates``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..model.objects import (
    NO_EXECUTE,
    NO_SCHEDULE,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
    tolerates_all,
)

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable

__all__ = [
    "DO_NOT_SCHEDULE_EFFECTS",
    "OBJECT_NAME_FIELD",
    "find_untolerated",
    "matches_required",
    "matches_required_affinity",
    "matches_selector",
    "pod_required_terms",
    "required_affinity_mask",
    "required_mask",
    "selector_mask",
    "term_mask",
    "tolerated_mask",
]

#: the one field a node selector term may match on
OBJECT_NAME_FIELD: Final = "metadata.name"
#: the taint effects that keep a pod off a node (upstream ``DoNotScheduleTaintsFilterFunc``)
DO_NOT_SCHEDULE_EFFECTS: Final = frozenset((NO_SCHEDULE, NO_EXECUTE))

BoolArray = npt.NDArray[np.bool_]


# --------------------------------------------------------------------------- one node


def pod_required_terms(pod: Pod) -> tuple[NodeSelectorTerm, ...] | None:
    """The pod's required node affinity terms; ``None`` when it sets none (every node matches)."""
    a = pod.affinity
    if a is None or a.node_affinity is None:
        return None
    return a.node_affinity.required


def matches_required(terms: tuple[NodeSelectorTerm, ...] | None, node: Node) -> bool:
    """Required node affinity: ``None`` (absent) matches; otherwise any term must match."""
    if terms is None:
        return True
    return any(t.matches(node) for t in terms)


def matches_selector(selector: Mapping[str, str], node: Node) -> bool:
    labels = node.labels
    return all(labels.get(k) == v for k, v in selector.items())


def matches_required_affinity(pod: Pod, node: Node) -> bool:
    """Upstream ``GetRequiredNodeAffinity(pod).Match(node)``: the nodeSelector and the required terms."""
    return matches_selector(pod.node_selector, node) and matches_required(pod_required_terms(pod), node)


def find_untolerated(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """Upstream ``FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc``."""
    for taint in taints:
        if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerates_all(tolerations, taint):
            return taint
    return None


# --------------------------------------------------------------------------- many nodes


def _requirement_mask(req: NodeSelectorRequirement, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    ids, vocab = table.label_column(req.key)
    # lut[0] is "label absent", lut[v + 1] the value with id v
    op = req.operator
    if op == "In" or op == "NotIn":
        lut = np.zeros(len(vocab) + 1, dtype=np.bool_)
        for v in req.values:
            vid = vocab.get(v)
            if vid is not None:
                lut[vid + 1] = True
        if op == "NotIn":
            lut = ~lut
    elif op == "Exists":
        lut = np.ones(len(vocab) + 1, dtype=np.bool_)
        lut[0] = False
    elif op == "DoesNotExist":
        lut = np.zeros(len(vocab) + 1, dtype=np.bool_)
        lut[0] = True
    else:
        lut = np.zeros(len(vocab) + 1, dtype=np.bool_)
        lut[0] = req.matches(None)
        for value, vid in vocab.items():
            lut[vid + 1] = req.matches(value)
    return lut[ids[index] + 1]


def _field_mask(req: NodeSelectorRequirement, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    if req.key != OBJECT_NAME_FIELD:
        return np.zeros(len(index), dtype=np.bool_)
    if req.operator in ("In", "NotIn"):
        positions = [k for k in (table.position.get(v) for v in req.values) if k is not None]
        hit = (
            np.isin(index, np.asarray(positions, dtype=np.intp)) if positions else np.zeros(len(index), dtype=np.bool_)
        )
        return hit if req.operator == "In" else ~hit
    names = table.names
    return np.fromiter((req.matches(names[k]) for k in index.tolist()), dtype=np.bool_, count=len(index))


def term_mask(term: NodeSelectorTerm, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    if not term.match_expressions and not term.match_fields:
        return np.zeros(len(index), dtype=np.bool_)
    mask = np.ones(len(index), dtype=np.bool_)
    for req in term.match_expressions:
        mask &= _requirement_mask(req, table, index)
    for req in term.match_fields:
        mask &= _field_mask(req, table, index)
    return mask


def required_mask(
    terms: tuple[NodeSelectorTerm, ...] | None, table: NodeTable, index: npt.NDArray[np.intp]
) -> BoolArray:
    if terms is None:
        return np.ones(len(index), dtype=np.bool_)
    mask = np.zeros(len(index), dtype=np.bool_)
    for t in terms:
        mask |= term_mask(t, table, index)
    return mask


def selector_mask(selector: Mapping[str, str], table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    mask = np.ones(len(index), dtype=np.bool_)
    for key, value in selector.items():
        ids, vocab = table.label_column(key)
        vid = vocab.get(value)
        if vid is None:
            return np.zeros(len(index), dtype=np.bool_)
        mask &= ids[index] == vid
    return mask


def required_affinity_mask(pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    """``matches_required_affinity`` for the nodes ``index`` (rows without a Node never match)."""
    mask: BoolArray = table.has_node[index].copy()
    if pod.node_selector:
        mask &= selector_mask(pod.node_selector, table, index)
    terms = pod_required_terms(pod)
    if terms is not None:
        mask &= required_mask(terms, table, index)
    return mask


def tolerated_mask(tolerations: tuple[Toleration, ...], table: NodeTable, index: npt.NDArray[np.intp]) -> BoolArray:
    """Per node ``index``: whether ``find_untolerated`` finds nothing (each distinct taint tuple checked once)."""
    ids, sets = table.taint_sets()
    lut = np.fromiter((find_untolerated(s, tolerations) is None for s in sets), dtype=np.bool_, count=len(sets))
    result: BoolArray = lut[ids[index]]
    return result
