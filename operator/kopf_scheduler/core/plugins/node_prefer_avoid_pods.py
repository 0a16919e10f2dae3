"""NodePreferAvoidPods: avoid nodes whose annotation asks to keep this pod's controller away.

v1.9 semantics (``priorities.CalculateNodePreferAvoidPodsPriorityMap``), scored 0..100 as
upstream's v1.18-v1.22 framework plugin
``pkg/scheduler/framework/plugins/nodepreferavoidpods/node_prefer_avoid_pods.go`` did (removed in
v1.23). A node scores 100, except 0 when the pod's controller owner reference is a
ReplicationController or ReplicaSet and the node annotation
``scheduler.alpha.kubernetes.io/preferAvoidPods`` (JSON ``{"preferAvoidPods": [{"podSignature":
{"podController": {"kind", "uid", ...}}, ...}]}``) lists the same kind and uid. An annotation that
does not parse gives 100. No normalisation; the v1.9 default weight is 10000.

PreScore returns SKIP when every node would score 100 (a constant): the pod has no RC/RS
controller, or no node of the snapshot lists that controller. ``score_nodes`` starts from 100 and
zeroes the annotated nodes that list the controller (a cached column of parsed annotations).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.basics import MAX_NODE_SCORE, CycleState, Status
from ..framework.interface import PreScorePlugin, VectorScore
from ..framework.nodeinfo import NodeInfo
from ..model.objects import ANNOTATION_PREFER_AVOID_PODS, Node, Pod

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

#: the only controller kinds the annotation is honoured for
CONTROLLER_KINDS: Final = frozenset(("ReplicationController", "ReplicaSet"))

IntArray = npt.NDArray[np.int64]
#: (kind, uid) of a controller a node asks to avoid
Signature = tuple[str, str]
_COLUMN: Final = ("NodePreferAvoidPods", "avoid")


class AnnotationError(ValueError):
    """The annotation is not a valid AvoidPods object."""


def parse_avoid_pods(value: str) -> frozenset[Signature]:
    """The (kind, uid) pairs of an annotation value; raises ``AnnotationError`` like Go's Unmarshal would."""
    try:
        doc = json.loads(value)
    except ValueError as exc:
        raise AnnotationError(str(exc)) from None
    if doc is None:
        return frozenset()
    if not isinstance(doc, dict):
        raise AnnotationError("expected an object")
    entries = doc.get("preferAvoidPods")
    if entries is None:
        return frozenset()
    if not isinstance(entries, list):
        raise AnnotationError("preferAvoidPods: expected a list")
    out = set()
    for entry in entries:
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise AnnotationError("preferAvoidPods[]: expected an object")
        sig = entry.get("podSignature")
        if sig is None:
            continue
        if not isinstance(sig, dict):
            raise AnnotationError("podSignature: expected an object")
        ctl = sig.get("podController")
        if ctl is None:
            continue  # no controller named: matches no pod
        if not isinstance(ctl, dict):
            raise AnnotationError("podController: expected an object")
        kind, uid = ctl.get("kind", ""), ctl.get("uid", "")
        if not isinstance(kind, str) or not isinstance(uid, str):
            raise AnnotationError("podController: kind and uid must be strings")
        out.add((kind, uid))
    return frozenset(out)


def node_avoids(node: Node) -> frozenset[Signature]:
    """What the node asks to avoid; nothing when unannotated or unparsable (then it scores 100)."""
    raw = node.annotations.get(ANNOTATION_PREFER_AVOID_PODS)
    if raw is None:
        return frozenset()
    try:
        return parse_avoid_pods(raw)
    except AnnotationError:
        return frozenset()


def pod_signature(pod: Pod) -> Signature | None:
    """(kind, uid) of the pod's controller when it is an RC or RS, else None."""
    ref = pod.controller_ref
    if ref is None or ref.kind not in CONTROLLER_KINDS:
        return None
    return (ref.kind, ref.uid)


def score_node(pod: Pod, node: Node) -> int:
    sig = pod_signature(pod)
    if sig is None:
        return MAX_NODE_SCORE
    return 0 if sig in node_avoids(node) else MAX_NODE_SCORE


def _avoid_column(table: NodeTable) -> dict[Signature, npt.NDArray[np.intp]]:
    """Controller signature -> positions of the nodes that ask to avoid it."""

    def build(infos: list[NodeInfo]) -> dict[Signature, npt.NDArray[np.intp]]:
        acc: dict[Signature, list[int]] = {}
        for k, info in enumerate(infos):
            node = info.node
            if node is None or ANNOTATION_PREFER_AVOID_PODS not in node.annotations:
                continue
            for sig in node_avoids(node):
                acc.setdefault(sig, []).append(k)
        return {sig: np.asarray(ks, dtype=np.intp) for sig, ks in acc.items()}

    return table.derived(_COLUMN, build)  # type: ignore[return-value]


class NodePreferAvoidPods(PreScorePlugin, VectorScore):
    NAME = "NodePreferAvoidPods"
    #: v1.9 DefaultProvider weight of NodePreferAvoidPodsPriority (upstream v1.19-v1.22 kept it)
    DEFAULT_WEIGHT = 10000

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        sig = pod_signature(pod)
        if sig is None or sig not in _avoid_column(snapshot.table):
            return basics.SKIP  # 100 on every node: a constant
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return MAX_NODE_SCORE if node.node is None else score_node(pod, node.node)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        out = np.full(len(index), MAX_NODE_SCORE, dtype=np.int64)
        sig = pod_signature(pod)
        if sig is None:
            return out
        avoided = _avoid_column(table).get(sig)
        if avoided is not None:
            out[np.isin(index, avoided)] = 0
        return out
