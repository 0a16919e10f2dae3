"""Why a pod did or did not fit: per-node statuses, the upstream FitError text, per-node scores.

The message format is upstream's ``FitError.Error()`` (pkg/scheduler/framework/types.go)::

    0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.

Each reason is counted over the nodes that were evaluated and failed (nodes with no status of
their own count with ``absent_nodes_status``'s reasons, upstream ``NodeToStatus``: set by a
pre-filter rejection, or when a PreFilterResult narrowed the nodes), the
``"<count> <reason>"`` strings are sorted as strings (so "10 x" sorts before "2 y"), and a
pre-filter rejection, when there is one, replaces them. The PostFilter (preemption) message is
appended as it is, with no period of its own (one line, cut here)::

    0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available:
    2 No preemption victims found for incoming pod.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from .basics import Code, Status

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
    #: plugin -> snapshot positions it rejected without being asked why (a node was found and the
    #: attempt did not explain: a Python call per rejected node would cost more than the attempt);
    #: explanations show these nodes as filtered by that plugin, without reasons
    unasked: dict[str, Iterable[int]] = field(default_factory=dict)

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
class PluginScore:
    """One score plugin's part of a node's total: ``score`` (normalised) x ``weight``."""

    plugin: str
    #: what the plugin's Score returned, before NormalizeScore (an extender's 0..10)
    raw: int
    #: after NormalizeScore: 0..MAX_NODE_SCORE (an extender's raw x 10)
    score: int
    weight: int
    #: what the plugin said it used (a load-aware plugin's utilisation), for ``explain``
    note: str = ""

    @property
    def weighted(self) -> int:
        return self.score * self.weight


@dataclass(frozen=True, slots=True)
class NodeScore:
    """One scored node's total and its per-plugin parts (for explanations)."""

    node: str
    total: int
    parts: tuple[PluginScore, ...] = ()
