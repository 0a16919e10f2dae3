"""Why one scheduling attempt went as it did: every node's verdict, its scores, and preemption's choice.

``explanation_of`` reads a ``ScheduleResult`` (what the algorithm saw, not a re-computation):

- the chosen node and every other scored node, with each score plugin's raw score (what Score
  returned), normalised score (0..100 after NormalizeScore) and weight, and the total;
- every rejected node with the plugin that rejected it, upstream's code (``Unschedulable``: removing
  pods could help; ``UnschedulableAndUnresolvable``: it cannot) and its reasons; a node that no
  filter visited because a pre-filter rejected the pod or narrowed the nodes gets that status;
- the nodes never evaluated (upstream stops looking once ``percentageOfNodesToScore`` feasible nodes
  are found; one feasible node is bound without scoring, as upstream);
- for a pod that fits nowhere, what preemption considered: each candidate node with the victims it
  would take and their PDB violations, the victims chosen, why the other nodes tried gave none.

``to_json``/``from_json`` are the wire form: the operator's ``/debug/attempts/NAMESPACE/NAME``
serves it, ``kopf-scheduler explain`` reads it back, ``--output json`` prints it. ``render`` is the
table for people; ``summary`` the short form ``simulate --explain`` prints for every pod.
Only scheduling data goes in: names, plugin names, reasons, scores, priorities; never a pod's spec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..framework.basics import Code, Status
from ..framework.diagnosis import PluginScore
from ..framework.interface import PostFilterResult
from ..framework.usage import SCORE_NOTES
from ..model.objects import Pod
from .algorithm import ScheduleResult

__all__ = [
    "CODE_NAMES",
    "FILTERED",
    "Explanation",
    "NodeVerdict",
    "Preemption",
    "PreemptionNode",
    "Victim",
    "error_explanation",
    "explanation_of",
    "from_json",
    "preemption_of",
    "render",
    "summary",
    "to_json",
]

#: upstream's ``framework.Code`` spellings (``Code.String()``)
CODE_NAMES: Final[Mapping[Code, str]] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

SCHEDULED: Final = "scheduled"
UNSCHEDULABLE: Final = "unschedulable"
ERROR: Final = "error"

#: a node's result: the one chosen, another scored one, or rejected (preemption could help or not)
CHOSEN: Final = "chosen"
FEASIBLE: Final = "feasible"
REJECTED: Final = "unschedulable"
UNRESOLVABLE: Final = "unresolvable"
#: rejected by the plugin named, which was not asked why: the pod was scheduled and the operator
#: keeps the filters' reasons only for pods that fit nowhere (``simulate --explain`` keeps them all)
FILTERED: Final = "filtered"
_RESULT_OF_CODE: Final[Mapping[Code, str]] = {
    Code.UNSCHEDULABLE: REJECTED,
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: UNRESOLVABLE,
}


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One evaluated node: scored (``total`` and ``scores``; ``total`` None when it was the only feasible
    node and bound unscored) or rejected (``plugin``, ``code``, ``reasons``)."""

    node: str
    result: str  # CHOSEN, FEASIBLE, REJECTED, UNRESOLVABLE, FILTERED or "error"
    total: int | None = None
    scores: tuple[PluginScore, ...] = ()
    plugin: str = ""
    code: str = ""  # a CODE_NAMES value
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Victim:
    pod: str  # namespace/name
    priority: int


@dataclass(frozen=True, slots=True)
class PreemptionNode:
    """A node preemption tried: a candidate (``victims``, ``pdb_violations``) or why it gave none (``reasons``)."""

    node: str
    victims: tuple[Victim, ...] = ()
    pdb_violations: int = 0
    reasons: tuple[str, ...] = ()

    @property
    def candidate(self) -> bool:
        return bool(self.victims)


@dataclass(frozen=True, slots=True)
class Preemption:
    """What the PostFilter stage decided: its message, the nomination and victims, the nodes it tried."""

    #: the PostFilter plugin that decided (DefaultPreemption)
    plugin: str
    message: str
    nominated_node: str | None
    victims: tuple[Victim, ...]
    #: candidates in the dry run's order, then the nodes that gave none, by name
    nodes: tuple[PreemptionNode, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """One attempt of one pod. ``scheduler_name``, ``attempts`` and ``age_seconds`` describe the attempt
    when a live operator recorded it (empty offline)."""

    pod: str  # namespace/name
    outcome: str  # SCHEDULED, UNSCHEDULABLE or ERROR
    node: str | None
    #: the FitError text or the error ("" when scheduled)
    message: str
    num_nodes: int
    evaluated_nodes: int
    #: chosen first, the other scored nodes by total (highest first), then the rejected ones by name
    nodes: tuple[NodeVerdict, ...] = ()
    not_evaluated: tuple[str, ...] = ()
    #: a pre-filter's rejection, which stands for every node
    pre_filter: str = ""
    preemption: Preemption | None = None
    scheduler_name: str = ""
    attempts: int = 0
    age_seconds: float | None = None
    #: opportunistic batching placed it on the hint the previous pod with its signature left (unscored)
    hinted: bool = False

    @property
    def scored(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.nodes if v.result in (CHOSEN, FEASIBLE))

    @property
    def rejected(self) -> tuple[NodeVerdict, ...]:
        return tuple(v for v in self.nodes if v.result not in (CHOSEN, FEASIBLE))


# --------------------------------------------------------------------------- building


def explanation_of(pod: Pod, result: ScheduleResult, *, scheduler_name: str = "", attempts: int = 0) -> Explanation:
    """The explanation of `result`, the attempt to schedule `pod` (O(nodes): build it when asked for)."""
    names = result.node_names
    scored: list[NodeVerdict] = []
    seen: set[str] = set()
    if result.totals is not None:
        notes = result.state.read(SCORE_NOTES) if result.state is not None else None
        for s in sorted(result.scores, key=lambda s: (s.node != result.node, -s.total, s.node)):
            parts = _with_notes(s.node, s.parts, notes) if notes else s.parts
            scored.append(NodeVerdict(s.node, CHOSEN if s.node == result.node else FEASIBLE, s.total, parts))
            seen.add(s.node)
    elif result.node is not None:
        scored.append(NodeVerdict(result.node, CHOSEN))
        seen.add(result.node)
    diagnosis = result.diagnosis
    rejected = {name: status for name, status in diagnosis.node_to_status.items() if name not in seen}
    filtered = {names[k]: plugin for plugin, positions in diagnosis.unasked.items() for k in positions}
    for name in (*seen, *rejected):
        filtered.pop(name, None)
    not_evaluated: list[str] = []
    # A node without a status of its own was left out by the pre-filters (the absent status: a rejection
    # of the pod, or the nodes a PreFilterResult did not admit), or the search stopped before it (a node
    # fitted; an error). An unschedulable pod was tried on every node the pre-filters left.
    absent = diagnosis.absent_nodes_status
    admitted = frozenset(names[k] for k in result.admitted.tolist()) if result.admitted is not None else None
    for name in names:
        if name in seen or name in rejected or name in filtered:
            continue
        if result.unschedulable or (admitted is not None and name not in admitted):
            rejected[name] = absent
        else:
            not_evaluated.append(name)
    verdicts = scored + sorted(
        [_rejection(name, status) for name, status in rejected.items()]
        + [NodeVerdict(name, FILTERED, plugin=plugin) for name, plugin in filtered.items()],
        key=lambda v: v.node,
    )
    if result.node is not None:
        outcome, message = SCHEDULED, ""
    elif result.error is not None:
        outcome, message = ERROR, result.error
    else:
        outcome, message = UNSCHEDULABLE, diagnosis.message()
    return Explanation(
        pod=pod.key,
        outcome=outcome,
        node=result.node,
        message=message,
        num_nodes=len(names),
        evaluated_nodes=result.evaluated_nodes,
        nodes=tuple(verdicts),
        not_evaluated=tuple(sorted(not_evaluated)),
        pre_filter=diagnosis.pre_filter_msg,
        preemption=preemption_of(result.post_filter) if result.post_filter is not None else None,
        scheduler_name=scheduler_name,
        attempts=attempts,
        hinted=result.hinted,
    )


def _with_notes(
    node: str, parts: tuple[PluginScore, ...], notes: Mapping[tuple[str, str], object]
) -> tuple[PluginScore, ...]:
    """`parts` with the notes the plugins left on `node` (``core.framework.usage.SCORE_NOTES``: texts, or objects
    whose ``str`` is the text, formatted only now)."""
    return tuple(
        dataclasses.replace(p, note=str(note)) if (note := notes.get((p.plugin, node))) is not None else p
        for p in parts
    )


def error_explanation(pod: Pod, message: str, *, scheduler_name: str = "", attempts: int = 0) -> Explanation:
    """An attempt that ended in an error before the algorithm could say anything about the nodes."""
    return Explanation(pod.key, ERROR, None, message, 0, 0, scheduler_name=scheduler_name, attempts=attempts)


def _rejection(name: str, status: Status) -> NodeVerdict:
    return NodeVerdict(
        name,
        _RESULT_OF_CODE.get(status.code, ERROR),
        plugin=status.plugin,
        code=CODE_NAMES[status.code],
        reasons=status.reasons,
    )


def _victims(pods: Iterable[Pod]) -> tuple[Victim, ...]:
    return tuple(Victim(p.key, p.priority) for p in pods)


def preemption_of(verdict: PostFilterResult) -> Preemption:
    """What the PostFilter stage considered and decided."""
    tried = [PreemptionNode(c.node, _victims(c.victims), c.num_pdb_violations) for c in verdict.candidates]
    tried += [PreemptionNode(name, reasons=status.reasons) for name, status in sorted(verdict.node_statuses.items())]
    return Preemption(
        verdict.status.plugin, verdict.status.message, verdict.nominated_node, _victims(verdict.victims), tuple(tried)
    )


# --------------------------------------------------------------------------- the wire form


def to_json(e: Explanation) -> dict[str, Any]:
    """The JSON form (camelCase keys, as the Kubernetes API writes them); ``from_json`` reads it back."""
    out: dict[str, Any] = {
        "pod": e.pod,
        "outcome": e.outcome,
        "node": e.node,
        "message": e.message,
        "schedulerName": e.scheduler_name,
        "attempts": e.attempts,
        "ageSeconds": e.age_seconds,
        "numNodes": e.num_nodes,
        "evaluatedNodes": e.evaluated_nodes,
        "preFilter": e.pre_filter,
        "nodes": [_verdict_json(v) for v in e.nodes],
        "notEvaluated": list(e.not_evaluated),
        "preemption": None,
        "hinted": e.hinted,
    }
    if e.preemption is not None:
        p = e.preemption
        out["preemption"] = {
            "plugin": p.plugin,
            "message": p.message,
            "nominatedNode": p.nominated_node,
            "victims": [_victim_json(v) for v in p.victims],
            "nodes": [
                {
                    "node": n.node,
                    "victims": [_victim_json(v) for v in n.victims],
                    "pdbViolations": n.pdb_violations,
                    "reasons": list(n.reasons),
                }
                for n in p.nodes
            ],
        }
    return out


def _verdict_json(v: NodeVerdict) -> dict[str, Any]:
    if v.result in (CHOSEN, FEASIBLE):
        return {
            "node": v.node,
            "result": v.result,
            "total": v.total,
            "scores": [
                {"plugin": s.plugin, "raw": s.raw, "score": s.score, "weight": s.weight, "weighted": s.weighted}
                | ({"note": s.note} if s.note else {})
                for s in v.scores
            ],
        }
    return {"node": v.node, "result": v.result, "plugin": v.plugin, "code": v.code, "reasons": list(v.reasons)}


def _victim_json(v: Victim) -> dict[str, Any]:
    return {"pod": v.pod, "priority": v.priority}


def from_json(data: Mapping[str, Any]) -> Explanation:
    """Read ``to_json``'s form back; ``ValueError`` naming what is missing or malformed."""
    try:
        preemption = None
        if data.get("preemption") is not None:
            p = data["preemption"]
            preemption = Preemption(
                str(p.get("plugin") or ""),
                str(p["message"]),
                p.get("nominatedNode"),
                tuple(_victim(v) for v in p.get("victims") or ()),
                tuple(
                    PreemptionNode(
                        str(n["node"]),
                        tuple(_victim(v) for v in n.get("victims") or ()),
                        int(n.get("pdbViolations", 0)),
                        tuple(n.get("reasons") or ()),
                    )
                    for n in p.get("nodes") or ()
                ),
            )
        return Explanation(
            pod=str(data["pod"]),
            outcome=str(data["outcome"]),
            node=data.get("node"),
            message=str(data.get("message") or ""),
            num_nodes=int(data["numNodes"]),
            evaluated_nodes=int(data.get("evaluatedNodes", 0)),
            nodes=tuple(_verdict(v) for v in data.get("nodes") or ()),
            not_evaluated=tuple(str(n) for n in data.get("notEvaluated") or ()),
            pre_filter=str(data.get("preFilter") or ""),
            preemption=preemption,
            scheduler_name=str(data.get("schedulerName") or ""),
            attempts=int(data.get("attempts") or 0),
            age_seconds=float(data["ageSeconds"]) if data.get("ageSeconds") is not None else None,
            hinted=bool(data.get("hinted", False)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not an explanation: {type(exc).__name__}: {exc}") from None


def _verdict(d: Mapping[str, Any]) -> NodeVerdict:
    scores = tuple(
        PluginScore(str(s["plugin"]), int(s["raw"]), int(s["score"]), int(s["weight"]), str(s.get("note") or ""))
        for s in d.get("scores") or ()
    )
    total = d.get("total")
    return NodeVerdict(
        str(d["node"]), str(d["result"]), int(total) if total is not None else None, scores,
        str(d.get("plugin") or ""), str(d.get("code") or ""), tuple(str(r) for r in d.get("reasons") or ()),
    )  # fmt: skip


def _victim(d: Mapping[str, Any]) -> Victim:
    return Victim(str(d["pod"]), int(d["priority"]))


# --------------------------------------------------------------------------- for people


def render(e: Explanation) -> str:
    """Tables for people: the verdict, the scored nodes (a row per plugin), the rejected ones, preemption."""
    lines = [f"pod {e.pod}: " + (f"scheduled to {e.node}" if e.outcome == SCHEDULED else e.outcome)]
    context = [f"scheduler {e.scheduler_name}"] if e.scheduler_name else []
    if e.attempts:
        context.append(f"attempt {e.attempts}")
    if e.age_seconds is not None:
        context.append(f"{e.age_seconds:.1f}s ago")
    if context:
        lines.append("  " + ", ".join(context))
    if e.message:
        lines.append("  " + e.message)
    scored, rejected = e.scored, e.rejected
    counts = [f"{len(scored)} feasible", f"{len(rejected)} rejected"]
    if e.not_evaluated:
        counts.append(
            f"{len(e.not_evaluated)} not evaluated"
            " (the search stopped: enough feasible nodes found, or the nominated node fitted)"
        )
    lines.append(f"  {e.num_nodes} nodes: " + ", ".join(counts))
    if e.hinted:
        lines.append(
            f"  {e.node}: opportunistic batching's hint (the previous pod with the same signature scored it next"
            " best), feasible: placed there without looking at another node (as upstream)"
        )
    elif any(v.total is None for v in scored):
        lines.append(f"  {e.node}: the only feasible node, bound without scoring (as upstream)")
    elif scored and (tied := sum(1 for v in scored if v.total == scored[0].total)) > 1:
        lines.append(
            f"  {tied} nodes tied at the top total {scored[0].total}: the chosen one was drawn at random (as upstream)"
        )
    rows: list[tuple[str, ...]] = []
    for v in scored:
        if v.total is None:
            continue
        first = (v.node, v.result, str(v.total))
        for i, s in enumerate(v.scores or (None,)):
            head = first if i == 0 else ("", "", "")
            rows.append(
                head
                + (
                    (s.plugin, str(s.raw), str(s.score), str(s.weight), str(s.weighted))
                    if s is not None
                    else ("", "", "", "", "")
                )
            )
    if rows:
        lines += [""] + table(
            rows, ("NODE", "RESULT", "TOTAL", "PLUGIN", "RAW", "SCORE", "WEIGHT", "WEIGHTED"), right=(2, 4, 5, 6, 7)
        )
        noted = [(v.node, s.plugin, s.note) for v in scored for s in v.scores if s.note]
        if noted:
            lines += ["", "what the scores used:"] + [f"  {n} {plugin}: {text}" for n, plugin, text in noted]
    if rejected:
        rows = [
            (v.node, v.result, v.plugin or "-", "; ".join(v.reasons) or _NOT_ASKED * (v.result == FILTERED))
            for v in rejected
        ]
        lines += [""] + table(rows, ("NODE", "RESULT", "PLUGIN", "REASONS"))
    p = e.preemption
    if p is not None:
        lines += ["", f"preemption ({p.plugin or 'PostFilter'}): " + (p.message.removeprefix("preemption: ") or "-")]
        if p.victims:
            lines.append(f"  nominated {p.nominated_node}; victims " + ", ".join(_victim_text(v) for v in p.victims))
        if p.nodes:
            rows = []
            for n in p.nodes:
                if n.candidate:
                    chosen = n.node == p.nominated_node and n.victims == p.victims
                    what = ", ".join(_victim_text(v) for v in n.victims) + (
                        f"; {n.pdb_violations} PDB violation(s)" if n.pdb_violations else ""
                    )
                    rows.append((n.node, "chosen" if chosen else "candidate", what))
                else:
                    rows.append((n.node, "none", "; ".join(n.reasons)))
            lines += [""] + table(rows, ("NODE", "CANDIDATE", "VICTIMS / REASONS"))
    return "\n".join(lines)


_NOT_ASKED: Final = "(not asked: the pod was scheduled)"


def summary(e: Explanation, *, top: int = 5) -> str:
    """A few lines: the verdict, the rejections counted, the best `top` scored nodes."""
    lines = [f"pod {e.pod}: " + (f"scheduled to {e.node}" if e.outcome == SCHEDULED else e.outcome)]
    if e.message:
        lines.append("  " + e.message)
    else:
        counts: dict[str, int] = {}
        for v in e.rejected:
            for reason in v.reasons or ((f"rejected by {v.plugin}",) if v.result == FILTERED else ()):
                counts[reason] = counts.get(reason, 0) + 1
        if counts:
            lines.append(
                f"  {len(e.rejected)} node(s) filtered out: "
                + ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
                + "."
            )
    for v in e.scored[:top]:
        if v.total is None:
            what = "opportunistic batching's hint" if e.hinted else "the only feasible node"
            lines.append(f"  {v.node}: {what} (not scored)")
            continue
        detail = ", ".join(f"{s.plugin} {s.score}x{s.weight}" for s in v.scores)
        lines.append(f"  {v.node}: total {v.total}" + (f" ({detail})" if detail else ""))
        lines += [f"    {s.plugin}: {s.note}" for s in v.scores if s.note]
    return "\n".join(lines)


def _victim_text(v: Victim) -> str:
    return f"{v.pod} (priority {v.priority})"


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...], *, right: tuple[int, ...] = ()) -> list[str]:
    """Aligned columns, two spaces apart; the columns in `right` aligned right."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(header)] + [line(r) for r in rows]
