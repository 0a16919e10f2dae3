"""Render a simulation: JSON for machines, a table plus per-node utilisation for people.

Explanations (``core/scheduling/explanation.py``) come in two sizes: every pod's ``summary`` (``--explain``), or one
pod's full ``render`` (``--explain NAMESPACE/POD``); in JSON, the same pods carry the ``explain`` object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..core.model.resources import format_quantity
from ..core.scheduling.explanation import render, summary, table, to_json
from ..core.state.cache import SchedulerCache
from .simulator import Capacity, Placement, SimulationResult

#: ``explained`` value: explain every pod (in short)
EVERY_POD = "*"


def _explained(p: Placement, explained: str | None) -> bool:
    return p.explanation is not None and explained is not None and explained in (EVERY_POD, p.pod)


def placement_json(p: Placement, *, explain: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pod": p.pod,
        "node": p.node,
        "message": p.message,
        "nominatedNode": p.nominated_node or None,
        "victims": list(p.victims),
    }
    if p.nominated_before_binding:
        out["nominatedBeforeBinding"] = p.nominated_before_binding
    if p.devices:
        out["devices"] = list(p.devices)
    if explain and p.explanation is not None:
        out["explain"] = to_json(p.explanation)
    return out


def capacity_json(c: Capacity) -> dict[str, Any]:
    return {
        "pod": c.pod,
        "replicas": c.replicas,
        "nodes": dict(sorted(c.nodes.items())),
        "stoppedBy": c.stopped_by,
        "limit": c.limit,
    }


def report_json(result: SimulationResult, *, explained: str | None = None, capacity: Capacity | None = None) -> str:
    """The placements (``explain`` on the `explained` pod, or on each with ``EVERY_POD``) and ``maxReplicas``."""
    out: dict[str, Any] = {
        "placements": [placement_json(p, explain=_explained(p, explained)) for p in result.placements]
    }
    if capacity is not None:
        out["maxReplicas"] = capacity_json(capacity)
    return json.dumps(out, indent=2)


def utilization_rows(cache: SchedulerCache) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(cache.node_names()):
        info = cache.get_node_info(name)
        assert info is not None
        a, r = info.allocatable, info.requested

        def used(requested: int, allocatable: int, kind: str) -> str:
            share = f"{100 * requested // allocatable}%" if allocatable else "-"
            return f"{format_quantity(requested, kind)}/{format_quantity(allocatable, kind)} ({share})"

        rows.append(
            (name, str(len(info.pods)), used(r.milli_cpu, a.milli_cpu, "cpu"), used(r.memory, a.memory, "memory"))
        )
    return rows


def capacity_lines(c: Capacity) -> list[str]:
    """``N copies of POD fit``, the copies per node, and the FitError text of the first one that did not."""
    lines = [
        f"{c.replicas} {'copy' if c.replicas == 1 else 'copies'} of {c.pod} fit"
        + (f" (stopped at --max-limit {c.limit})" if not c.stopped_by else "")
    ]
    if c.nodes:
        lines += table([(node, str(n)) for node, n in sorted(c.nodes.items())], ("NODE", "COPIES"), right=(1,))
    if c.stopped_by:
        lines.append(f"the next copy does not fit: {c.stopped_by}")
    return lines


def report_table(
    result: SimulationResult, cache: SchedulerCache, *, explained: str | None = None, capacity: Capacity | None = None
) -> str:
    lines: list[str] = []
    if result.placements:
        evicting = any(p.victims for p in result.placements)
        expected = any(p.nominated_before_binding for p in result.placements)
        header = ("POD", "NODE", *(("PREEMPTED",) if evicting else ()), *(("NOMINATED",) if expected else ()))
        rows: Iterable[tuple[str, ...]] = (
            (
                p.pod,
                p.node or "<none>",
                *((", ".join(p.victims) or "-",) if evicting else ()),
                *((p.nominated_before_binding or "-",) if expected else ()),
                p.message,
            )
            for p in result.placements
        )
        lines += table(list(rows), (*header, "MESSAGE"))
        lines.append("")
    for p in result.placements:
        if _explained(p, explained):
            assert p.explanation is not None
            lines += [summary(p.explanation) if explained == EVERY_POD else render(p.explanation)]
            lines += [f"  devices: {d}" for d in p.devices] + [""]
    if capacity is not None:
        lines += capacity_lines(capacity) + [""]
    lines += table(utilization_rows(cache), ("NODE", "PODS", "CPU REQUESTED", "MEMORY REQUESTED"))
    lines.append("")
    preempted = len({v for p in result.placements for v in p.victims})  # a gang's victims are every member's
    lines.append(
        f"{result.scheduled}/{len(result.placements)} pods scheduled, "
        f"{len(result.placements) - result.scheduled} unschedulable, "
        + (f"{preempted} preempted, " if preempted else "")
        + f"in {result.seconds:.3f}s"
    )
    return "\n".join(lines)
