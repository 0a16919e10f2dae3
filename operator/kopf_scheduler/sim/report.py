"""Render a simulation: JSON for machines, a table plus per-node utilisation for people."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..core.cache import SchedulerCache
from ..core.resources import format_quantity
from .simulator import SimulationResult


def to_json(result: SimulationResult) -> str:
    return json.dumps(
        {
            "placements": [
                {"pod": p.pod, "node": p.node, "message": p.message, "nominatedNode": p.nominated_node or None, "victims": list(p.victims)}
                for p in result.placements
            ]
        },
        indent=2,
    )


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
