"""``replay``'s report: recorded against replayed, as JSON (for scripts) or Markdown (for a person or a PR).

JSON's top-level ``differing`` is the number of pods placed differently from the recording (a pod
placed in one and not the other counts). Fragmentation is the largest CPU and the largest memory
still free on any one node: the largest pod that still fits is bounded by both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

from .replay import NodeUse, PodOutcome, ReplayResult

__all__ = ["report_json", "report_markdown", "summary"]

#: rows of each Markdown table at most (the JSON has them all)
MARKDOWN_ROWS: Final = 15


def _side(pods: Sequence[PodOutcome], nodes: Sequence[NodeUse], *, recorded: bool) -> dict[str, Any]:
    placed = [p for p in pods if (p.recorded_node if recorded else p.replayed_node)]
    cpu = sum(n.cpu for n in nodes)
    memory = sum(n.memory for n in nodes)
    used_cpu = sum(n.recorded_cpu if recorded else n.replayed_cpu for n in nodes)
    used_memory = sum(n.recorded_memory if recorded else n.replayed_memory for n in nodes)
    free_cpu = [n.cpu - (n.recorded_cpu if recorded else n.replayed_cpu) for n in nodes]
    free_memory = [n.memory - (n.recorded_memory if recorded else n.replayed_memory) for n in nodes]
    used_nodes = sum(1 for n in nodes if (n.recorded_pods if recorded else n.replayed_pods) > 0)
    victims = [p.recorded_victims if recorded else p.replayed_victims for p in pods]
    return {
        "placed": len(placed),
        "unschedulable": len(pods) - len(placed),
        "cpu_utilisation": round(used_cpu / cpu, 4) if cpu else 0.0,
        "memory_utilisation": round(used_memory / memory, 4) if memory else 0.0,
        "nodes_with_pods": used_nodes,
        "largest_free_cpu_millis": max(free_cpu, default=0),
        "largest_free_memory_bytes": max(free_memory, default=0),
        "preemptions": sum(1 for v in victims if v),
        "victims": sum(len(v) for v in victims),
    }


def _gangs(pods: Iterable[PodOutcome]) -> list[dict[str, Any]]:
    table: dict[str, list[int]] = {}
    for p in pods:
        for g in p.gangs:
            row = table.setdefault(g, [0, 0, 0])
            row[0] += 1
            row[1] += bool(p.recorded_node)
            row[2] += bool(p.replayed_node)
    return [
        {"gang": g, "members": m, "recorded_placed": r, "replayed_placed": s} for g, (m, r, s) in sorted(table.items())
    ]


def summary(result: ReplayResult) -> dict[str, Any]:
    pods, nodes = result.pods, result.nodes
    return {
        "differing": result.differing,
        "scheduler_name": result.scheduler_name,
        "policy": result.policy,
        "pods": len(pods),
        "decisions": result.decisions,
        "recorded": _side(pods, nodes, recorded=True),
        "replayed": _side(pods, nodes, recorded=False),
        "live_seconds": round(result.live_seconds, 3),
        "replay_seconds": round(result.replay_seconds, 3),
        "followed_draws": result.followed_draws,
    }


def report_json(result: ReplayResult) -> str:
    out = summary(result)
    out["placed_differently"] = [
        {
            "pod": p.pod,
            "recorded": p.recorded_node,
            "replayed": p.replayed_node,
            "recorded_reason": p.recorded_reason,
            "replayed_reason": p.replayed_reason,
        }
        for p in result.pods
        if p.differs
    ]
    out["only_recorded_placed"] = [p.pod for p in result.pods if p.recorded_node and not p.replayed_node]
    out["only_replayed_placed"] = [p.pod for p in result.pods if p.replayed_node and not p.recorded_node]
    out["preemptions"] = [
        {"pod": p.pod, "recorded_victims": list(p.recorded_victims), "replayed_victims": list(p.replayed_victims)}
        for p in result.pods
        if p.recorded_victims or p.replayed_victims
    ]
    out["gangs"] = _gangs(result.pods)
    out["nodes"] = [
        {
            "node": n.node,
            "allocatable": {"cpu_millis": n.cpu, "memory_bytes": n.memory},
            "recorded": {"cpu_millis": n.recorded_cpu, "memory_bytes": n.recorded_memory, "pods": n.recorded_pods},
            "replayed": {"cpu_millis": n.replayed_cpu, "memory_bytes": n.replayed_memory, "pods": n.replayed_pods},
        }
        for n in result.nodes
    ]
    out["series"] = [
        {"t": round(s[0], 3), "recorded_cpu": round(s[1], 4), "replayed_cpu": round(s[2], 4),
         "recorded_memory": round(s[3], 4), "replayed_memory": round(s[4], 4),
         "recorded_nodes_with_pods": round(s[5], 4), "replayed_nodes_with_pods": round(s[6], 4)}
        for s in result.series
    ]  # fmt: skip
    out["skipped"] = result.skipped
    return json.dumps(out, indent=2)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _gib(b: int) -> str:
    return f"{b / 2**30:.1f}Gi"


def report_markdown(result: ReplayResult) -> str:
    s = summary(result)
    rec, rep = s["recorded"], s["replayed"]
    lines = [
        f"## Replay of schedulerName `{result.scheduler_name}` with {result.policy}",
        "",
        f"**{result.differing}** of {len(result.pods)} pods placed differently from the recording"
        f" ({result.decisions} recorded decisions over {result.live_seconds:.1f} s live;"
        f" replayed in {result.replay_seconds:.2f} s).",
        "",
        "| | recorded | replayed |",
        "|---|---:|---:|",
        f"| pods placed | {rec['placed']} | {rep['placed']} |",
        f"| pods unschedulable | {rec['unschedulable']} | {rep['unschedulable']} |",
        f"| CPU requested / allocatable | {_pct(rec['cpu_utilisation'])} | {_pct(rep['cpu_utilisation'])} |",
        f"| memory requested / allocatable | {_pct(rec['memory_utilisation'])} | {_pct(rep['memory_utilisation'])} |",
        f"| nodes holding these pods | {rec['nodes_with_pods']} | {rep['nodes_with_pods']} |",
        f"| largest free CPU on one node | {rec['largest_free_cpu_millis']}m | {rep['largest_free_cpu_millis']}m |",
        f"| largest free memory on one node | {_gib(rec['largest_free_memory_bytes'])}"
        f" | {_gib(rep['largest_free_memory_bytes'])} |",
        f"| preemptions (victims) | {rec['preemptions']} ({rec['victims']})"
        f" | {rep['preemptions']} ({rep['victims']}) |",
    ]
    differ = [p for p in result.pods if p.differs]
    if differ:
        lines += ["", "### Pods placed differently", "", "| pod | recorded | replayed |", "|---|---|---|"]
        for p in differ[:MARKDOWN_ROWS]:
            lines.append(f"| {p.pod} | {p.recorded_node or 'unschedulable'} | {p.replayed_node or 'unschedulable'} |")
        if len(differ) > MARKDOWN_ROWS:
            lines.append(f"| ... {len(differ) - MARKDOWN_ROWS} more | | |")
    changed = sorted(
        (n for n in result.nodes if (n.recorded_cpu, n.recorded_memory) != (n.replayed_cpu, n.replayed_memory)),
        key=lambda n: -abs(n.recorded_cpu - n.replayed_cpu),
    )
    if changed:
        lines += ["", "### Node utilisation (CPU requested / allocatable)", "", "| node | recorded | replayed |"]
        lines.append("|---|---:|---:|")
        for n in changed[:MARKDOWN_ROWS]:
            lines.append(
                f"| {n.node} | {_pct(n.recorded_cpu / n.cpu if n.cpu else 0)}"
                f" | {_pct(n.replayed_cpu / n.cpu if n.cpu else 0)} |"
            )
        if len(changed) > MARKDOWN_ROWS:
            lines.append(f"| ... {len(changed) - MARKDOWN_ROWS} more | | |")
    gang_rows = _gangs(result.pods)
    if gang_rows:
        lines += [
            "",
            "### Gangs (members placed)",
            "",
            "| gang | members | recorded | replayed |",
            "|---|---:|---:|---:|",
        ]
        for g in gang_rows[:MARKDOWN_ROWS]:
            lines.append(f"| {g['gang']} | {g['members']} | {g['recorded_placed']} | {g['replayed_placed']} |")
    if result.skipped:
        lines += ["", f"{len(result.skipped)} recorded pod(s) not replayed: " + "; ".join(result.skipped[:5])]
    return "\n".join(lines)
