"""Render a simulation: JSON for machines, a table plus per-node utilisation for people."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..core.cache import SchedulerCache
from ..core.diagnosis import explain
from ..core.resources import format_quantity
from .simulator import Explanation, Placement, SimulationResult


def explanation_json(e: Explanation) -> dict[str, Any]:
    """``feasible`` nodes; ``filtered`` nodes with plugin, code and reasons; per feasible node its ``total`` and
    ``plugins`` (normalised ``score`` 0..100 and ``weight``; total = sum of score x weight); ``preFilter`` when a
    pre-filter rejected the pod on every node."""
    d = e.diagnosis
    return {
        "feasible": list(e.feasible),
        "filtered": [{"node": f.node, "plugin": f.plugin, "code": f.code, "reasons": list(f.reasons)} for f in e.filtered],
        "preFilter": {"plugins": sorted(d.unschedulable_plugins), "message": d.pre_filter_msg} if d.pre_filter_msg else None,
        "scores": [
            {"node": s.node, "total": s.total, "plugins": [{"plugin": name, "score": score, "weight": weight} for name, score, weight in s.parts]}
            for s in sorted(e.scores, key=lambda s: (-s.total, s.node))
        ],
    }


def placement_json(p: Placement) -> dict[str, Any]:
    out: dict[str, Any] = {"pod": p.pod, "node": p.node, "message": p.message, "nominatedNode": p.nominated_node or None, "victims": list(p.victims)}
    if p.explanation is not None:
        out["explain"] = explanation_json(p.explanation)
    return out


def to_json(result: SimulationResult) -> str:
    return json.dumps({"placements": [placement_json(p) for p in result.placements]}, indent=2)


def _table(rows: Iterable[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    rows = list(rows)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def utilization_rows(cache: SchedulerCache) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(cache.node_names()):
        info = cache.get_node_info(name)
        assert info is not None
        a, r = info.allocatable, info.requested

        def pct(used: int, total: int) -> str:
            return f"{100 * used // total}%" if total else "-"

        rows.append(
            (
                name,
                str(len(info.pods)),
                f"{format_quantity(r.milli_cpu, 'cpu')}/{format_quantity(a.milli_cpu, 'cpu')} ({pct(r.milli_cpu, a.milli_cpu)})",
                f"{format_quantity(r.memory, 'memory')}/{format_quantity(a.memory, 'memory')} ({pct(r.memory, a.memory)})",
            )
        )
    return rows


def to_table(result: SimulationResult, cache: SchedulerCache) -> str:
    if any(p.victims for p in result.placements):
        rows: Iterable[tuple[str, ...]] = (
            (p.pod, p.node or "<none>", ", ".join(p.victims) or "-", p.message) for p in result.placements
        )
        lines = _table(rows, ("POD", "NODE", "PREEMPTED", "MESSAGE"))
    else:
        lines = _table(((p.pod, p.node or "<none>", p.message) for p in result.placements), ("POD", "NODE", "MESSAGE"))
    lines.append("")
    explained = [p for p in result.placements if p.explanation is not None]
    for p in explained:
        assert p.explanation is not None
        lines.append(explain(p.pod, p.node, p.explanation.diagnosis, list(p.explanation.scores)))
    if explained:
        lines.append("")
    lines.extend(_table(utilization_rows(cache), ("NODE", "PODS", "CPU REQUESTED", "MEMORY REQUESTED")))
    lines.append("")
    preempted = sum(len(p.victims) for p in result.placements)
    lines.append(
        f"{result.scheduled}/{len(result.placements)} pods scheduled, "
        f"{len(result.placements) - result.scheduled} unschedulable, "
        + (f"{preempted} preempted, " if preempted else "")
        + f"in {result.seconds:.3f}s"
    )
    return "\n".join(lines)
