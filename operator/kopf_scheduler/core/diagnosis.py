"""Why a pod did or did not fit: per-node statuses, the upstream FitError text, explanations.

The message format is upstream's ``FitError.Error()`` (pkg/scheduler/framework/types.go)::

    0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.

Each reason is counted over the nodes that were evaluated and failed (nodes with no status of
their own count with ``absent_nodes_status``'s reasons, upstream ``NodeToStatus``: set by a
pre-filter rejection, or when a PreFilterResult narrowed the nodes), the
``"<count> <reason>"`` strings are sorted as strings (so "10 x" sorts before "2 y"), and a
pre-filter rejection, when there is one, replaces them. The PostFilter (preemption) message is
appended as it is, with no period of its own::

    0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .framework import Code, Status

NO_NODES_AVAILABLE: Final = "no nodes available to schedule pods"
#: Upstream truncates event messages to this many bytes.
MAX_EVENT_MESSAGE_BYTES: Final = 1024


#: upstream ``NewDefaultNodeToStatus``: a node without a status of its own cannot be helped
UNRESOLVABLE: Final = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


@dataclass(slots=True)
class Diagnosis:
    num_all_nodes: int = 0
    #: node name -> the status of the filter that rejected it (only evaluated, failed nodes; when a
    #: node was found, the vector filters' rejections are left out unless the attempt explains)
    node_to_status: dict[str, Status] = field(default_factory=dict)
    #: the status of every node not in ``node_to_status`` (upstream ``NodeToStatus.AbsentNodesStatus``):
    #: a pre-filter's rejection, or the nodes a PreFilterResult left out
    absent_nodes_status: Status = UNRESOLVABLE
    #: a pre-filter rejection's message, which applies to every node
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    #: plugins that rejected at least one node (what cluster events can fix)
    unschedulable_plugins: set[str] = field(default_factory=set)

    def status_of(self, node_name: str) -> Status:
        return self.node_to_status.get(node_name, self.absent_nodes_status)

    def histogram(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for status in self.node_to_status.values():
            for reason in status.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        absent = self.num_all_nodes - len(self.node_to_status)
        if absent > 0:
            for reason in self.absent_nodes_status.reasons:
                counts[reason] = counts.get(reason, 0) + absent
        return counts

    def message(self) -> str:
        """The FitError text, e.g. ``0/3 nodes are available: 3 Insufficient cpu.``"""
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            parts = sorted(f"{count} {reason}" for reason, count in self.histogram().items())
            if parts:
                msg += f" {', '.join(parts)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"
        return msg


def truncate_message(message: str, limit: int = MAX_EVENT_MESSAGE_BYTES) -> str:
    """Upstream ``truncateMessage``: at most ``limit`` bytes, ending in `` ...`` when cut."""
    data = message.encode()
    if len(data) <= limit:
        return message
    suffix = " ..."
    cut = data[: limit - len(suffix)].decode(errors="ignore")
    return cut + suffix


@dataclass(frozen=True, slots=True)
class NodeScore:
    """One feasible node's total and its per-plugin weighted parts (for explanations)."""

    node: str
    total: int
    parts: tuple[tuple[str, int, int], ...] = ()  # (plugin, normalised score, weight)


def explain(pod_key: str, node: str | None, diagnosis: Diagnosis, scores: list[NodeScore], *, top: int = 5) -> str:
    """A readable account of one decision: the verdict, why nodes failed, and how the best ones scored."""
    lines = [f"pod {pod_key}: " + (f"scheduled to {node}" if node else "unschedulable")]
    if node is None:
        lines.append("  " + diagnosis.message())
    elif diagnosis.node_to_status:
        lines.append(f"  {len(diagnosis.node_to_status)} node(s) filtered out: " + diagnosis.message().split(": ", 1)[1])
    for s in sorted(scores, key=lambda s: (-s.total, s.node))[:top]:
        detail = ", ".join(f"{name} {score}x{weight}" for name, score, weight in s.parts)
        lines.append(f"  {s.node}: total {s.total}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)
