"""What bench/bench_e2e.py shows and writes: progress on stderr, summaries, text, Markdown, JSON, PNG.

Figures per contender are the median and the range over the rounds; ratios ours/upstream are
taken per round first (both ran on the same control plane minutes apart), then summarised the
same way, so noise common to a round cancels. A results file written before a figure existed
(the Scheduled-event ones came later) shows "-" for it.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Mapping, Sequence, Sized
from pathlib import Path
from types import TracebackType
from typing import Any

# (JSON key, column heading, decimals) of the figures shown per contender
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("pods_per_s", "pods/s", 0),
    ("pods_per_s_to_event", "pods/s to last event", 0),
    ("cpu_s_per_1000", "CPU-s/1000 pods", 2),
    ("cpu_s_per_1000_to_event", "CPU-s/1000 to last event", 2),
    ("event_lag_p50_ms", "event lag p50 ms", 0),
    ("event_lag_p99_ms", "event lag p99 ms", 0),
    ("event_lag_max_ms", "event lag max ms", 0),
    ("events_missing", "events missing", 0),
    ("peak_rss_mib", "peak RSS MiB", 0),
    ("apiserver_cpu_s_per_1000", "apiserver CPU-s/1000", 2),
    ("first_bind_s", "first bind after s", 2),
    ("longest_gap_s", "longest pause s", 2),
    ("ready_s", "ready after s", 1),
    ("nodes_used", "nodes used", 0),
    ("other_cores", "others' load (cores)", 2),
)
STEADY_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("latency_p50_ms", "p50 ms", 0),
    ("latency_p90_ms", "p90 ms", 0),
    ("latency_p99_ms", "p99 ms", 0),
)
# ours/upstream per round: (name, metric, how to read it)
RATIOS: tuple[tuple[str, str, str], ...] = (
    ("throughput", "pods_per_s", "higher is better for ours"),
    ("throughput to last event", "pods_per_s_to_event", "higher is better for ours"),
    ("CPU per pod", "cpu_s_per_1000", "lower is better for ours"),
    ("CPU per pod to last event", "cpu_s_per_1000_to_event", "lower is better for ours"),
    ("p99 event lag", "event_lag_p99_ms", "lower is better for ours"),
    ("peak RSS", "peak_rss_mib", ""),
)
STEADY_RATIOS: tuple[tuple[str, str, str], ...] = (("p99 latency", "latency_p99_ms", "lower is better for ours"),)
# ours/raw-events per round: the share of the physical limit (a raw binder writing one Scheduled event per pod)
RAW_RATIOS: tuple[tuple[str, str, str], ...] = (
    ("throughput to last event", "pods_per_s_to_event", "higher is better for ours"),
)
# ours-chaos/ours per round (the same scheduler through a flaky load balancer, and without it)
CHAOS_RATIOS: tuple[tuple[str, str, str], ...] = (
    ("throughput to last event", "pods_per_s_to_event", "the issue asks >= 0.5"),
    ("longest pause", "longest_gap_s", ""),
)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of already sorted values."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


def machine() -> dict[str, Any]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")
    )
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg_start": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
    }


def _package(frame: str) -> str:
    """'f (kopf_scheduler/core/state/cache.py)' -> 'kopf_scheduler.core'; 'g (aiohttp/client.py)' -> 'aiohttp';
    'h (ssl.py)' -> 'ssl'."""
    path = frame[frame.rfind("(") + 1 : -1]
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:2]) if parts[0] == "kopf_scheduler" and len(parts) > 1 else parts[0]


def profile_summary(collapsed: str, top: int = 25) -> str:
    """Where the samples of py-spy's collapsed stacks ("f1 (file);f2 (file) COUNT" lines) went: by
    package and by function of the innermost frame (self), and by function anywhere on the stack
    (inclusive; frames on nearly every stack, the entry point and the event loop, are left out)."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    packages: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = [f for f in stack.split(";") if f]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        packages[_package(frames[-1])] = packages.get(_package(frames[-1]), 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
    if not total:
        return "no samples\n"

    def table(title: str, counts: dict[str, int], limit: int) -> list[str]:
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:limit]
        return ["", title, *(f"{100 * n / total:5.1f}  {name}" for name, n in ranked)]

    lines = [f"{total} samples (py-spy, on-CPU only)"]
    lines += table("self %  package", packages, 12)
    lines += table("self %  function", own, top)
    lines += table("incl %  function", {f: n for f, n in inclusive.items() if n < 0.85 * total}, top)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- progress


class Progress:
    """One line on stderr, redrawn a few times a second on a terminal; plain lines otherwise."""

    def __init__(self, total_runs: int) -> None:
        self.total = total_runs
        self.done = 0
        self.current: tuple[str, Mapping[str, float], Sized, int, float] | None = (
            None  # label, bound, events, expected, since
        )
        self.tty = sys.stderr.isatty()
        self._task: asyncio.Task[None] | None = None

    def __enter__(self) -> Progress:
        if self.tty:
            self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
        self._clear()

    async def _tick(self) -> None:
        while True:
            self._draw()
            await asyncio.sleep(0.25)

    def _clear(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _draw(self) -> None:
        if self.current is None:
            return
        label, bound, events, expected, since = self.current
        width = 24
        filled = width * len(bound) // max(1, expected)
        bar = "#" * filled + "." * (width - filled)
        line = (
            f"[{self.done + 1:>2}/{self.total}] {label} [{bar}] {len(bound)}/{expected} bound, "
            f"{len(events)} Scheduled events, {time.monotonic() - since:.0f}s"
        )
        cols = shutil.get_terminal_size((100, 20)).columns
        sys.stderr.write("\r\033[K" + line[: cols - 1])
        sys.stderr.flush()

    def run_started(
        self, workload: str, round_: int, contender: str, expected: int, bound: Mapping[str, float], events: Sized
    ) -> None:
        self.current = (f"{workload} r{round_} {contender}", bound, events, expected, time.monotonic())

    def run_finished(self) -> None:
        self.current = None
        self.done += 1

    def note(self, text: str) -> None:
        self._clear()
        print(text, file=sys.stderr, flush=True)

    def report(self, run: Any) -> None:
        rate = f"{run.pods_per_s:.0f} pods/s" if run.pods_per_s else "-"
        cpu = f"{run.cpu_s_per_1000:.2f} CPU-s/1000" if run.cpu_s_per_1000 is not None else "-"
        rss = f"{run.peak_rss_mib:.0f} MiB" if run.peak_rss_mib else "-"
        extra = f", p99 {run.latency_ms['p99']:.0f} ms" if run.latency_ms else ""
        if run.events_missing is not None:
            to_event = f"{run.pods_per_s_to_event:.0f} pods/s" if run.pods_per_s_to_event else "-"
            lag = f"{run.event_lag_ms['p99']:.0f} ms" if run.event_lag_ms else "-"
            extra += f"; to last event {to_event}, event lag p99 {lag}, {run.events_missing} events missing"
        error = f"  ERROR {run.error}" if run.error else ""
        self.note(
            f"  [{self.done}/{self.total}] r{run.round} {run.contender}: {run.bound}/{run.pods} bound, "
            f"{rate}, {cpu}, {rss}, first bind {run.first_bind_s or 0:.2f}s, "
            f"ready {run.ready_s or 0:.1f}s{extra}{error}"
        )


# --------------------------------------------------------------------------- summaries


def _stat(values: Sequence[float | None]) -> dict[str, float] | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"median": statistics.median(present), "min": min(present), "max": max(present), "n": len(present)}


def _value(run: Mapping[str, Any], key: str) -> float | None:
    """A run's figure by column key; None if the run's file predates it."""
    for prefix in ("latency_", "event_lag_"):
        if key.startswith(prefix):
            value = run.get(prefix + "ms", {}).get(key.removeprefix(prefix).removesuffix("_ms"))
            break
    else:
        value = run.get(key)
    return None if value is None else float(value)


def _per_round(
    results: Mapping[str, Any], by_round: Mapping[tuple[str, int], Any], a_key: str, b_key: str, metric: str
) -> dict[str, float] | None:
    """The statistics of a/b over the rounds where both ran without error."""
    per_round = []
    for round_ in range(1, results["rounds"] + 1):
        a_run, b_run = by_round.get((a_key, round_)), by_round.get((b_key, round_))
        a = _value(a_run, metric) if a_run else None
        b = _value(b_run, metric) if b_run else None
        if a is not None and b:
            per_round.append(a / b)
    return _stat(per_round)


def summarise(results: dict[str, Any]) -> None:
    """Add per-contender statistics and per-round ratios to every workload of `results`."""
    for workload in results["workloads"]:
        keys = [k for k, _, _ in COLUMNS + STEADY_COLUMNS]
        summary: dict[str, dict[str, Any]] = {}
        for contender in results["contenders"]:
            runs = [r for r in workload["runs"] if r["contender"] == contender]
            summary[contender] = {k: _stat([_value(r, k) for r in runs]) for k in keys}
        workload["summary"] = summary
        ratios: dict[str, Any] = {}
        by_round = {(r["contender"], r["round"]): r for r in workload["runs"] if not r["error"]}
        for name, key, _ in RATIOS + (STEADY_RATIOS if workload["steady"] else ()):
            if (stat := _per_round(results, by_round, "ours", "upstream", key)) is not None:
                ratios[name] = stat
        workload["ratios"] = ratios
        workload["raw_ratios"] = {
            name: stat
            for name, key, _ in RAW_RATIOS
            if (stat := _per_round(results, by_round, "ours", "raw-events", key)) is not None
        }
        chaos: dict[str, Any] = {}
        for name, key, _ in CHAOS_RATIOS:
            if (stat := _per_round(results, by_round, "ours-chaos", "ours", key)) is not None:
                chaos[name] = stat
        workload["chaos_ratios"] = chaos


def _fmt(stat: Mapping[str, float] | None, digits: int) -> str:
    if stat is None:
        return "-"
    if stat["n"] == 1 or round(stat["min"], digits) == round(stat["max"], digits):
        return f"{stat['median']:.{digits}f}"
    return f"{stat['median']:.{digits}f} [{stat['min']:.{digits}f}-{stat['max']:.{digits}f}]"


def _heading(workload: Mapping[str, Any]) -> str:
    size = workload["size"]
    init = f" + {size['init_pods']} bound init pods" if size["init_pods"] else ""
    steady = f", created at {workload['rate']:.0f} pods/s" if workload["steady"] else ""
    return f"{workload['title']}: {size['nodes']} nodes, {size['pods']} pods{init}{steady}  [{workload['name']}]"


def _rows(results: Mapping[str, Any], workload: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    columns = COLUMNS + (STEADY_COLUMNS if workload["steady"] else ())
    header = ["contender", *(title for _, title, _ in columns)]
    rows = []
    for key, info in results["contenders"].items():
        stats = workload["summary"][key]
        errors = any(r["error"] or r.get("events_missing") for r in workload["runs"] if r["contender"] == key)
        row = [info["label"], *(_fmt(stats[k], d) for k, _, d in columns)]
        if errors:
            row[0] += " (!)"
        if any(r["profile"] for r in workload["runs"] if r["contender"] == key):
            row[0] += " (under py-spy)"
        rows.append(row)
    return header, rows


def parity(stat: Mapping[str, float] | None) -> bool:
    """A per-round ratio whose range crosses 1.0: the rounds do not tell the two apart."""
    return stat is not None and stat["n"] > 1 and stat["min"] < 1.0 < stat["max"]


def _spread(stat: Mapping[str, float] | None, digits: int) -> str:
    """A contender's own figure over the rounds and how far its rounds lie apart, relative to its median."""
    if stat is None:
        return "-"
    if stat["n"] < 2 or not stat["median"]:
        return _fmt(stat, digits)
    return f"{_fmt(stat, digits)}, spread {100 * (stat['max'] - stat['min']) / stat['median']:.0f}%"


def _ratio_lines(workload: Mapping[str, Any]) -> list[str]:
    out = []
    upstream = workload["summary"].get("upstream", {})
    for name, key, hint in RATIOS + STEADY_RATIOS:
        stat = workload["ratios"].get(name)
        if stat is not None:
            verdict = " = parity (its range crosses 1.0)" if parity(stat) else ""
            digits = next((d for k, _, d in COLUMNS + STEADY_COLUMNS if k == key), 2)
            own = f"; upstream's own rounds: {_spread(upstream.get(key), digits)}" if upstream.get(key) else ""
            out.append(f"ours/upstream {name}: {_fmt(stat, 2)}x{verdict}" + (f" ({hint})" if hint else "") + own)
    for name, _, hint in RAW_RATIOS:
        stat = workload.get("raw_ratios", {}).get(name)
        if stat is not None:
            out.append(f"ours/raw binder + events {name}: {_fmt(stat, 2)}x" + (f" ({hint})" if hint else ""))
    for name, _, hint in CHAOS_RATIOS:
        stat = workload.get("chaos_ratios", {}).get(name)
        if stat is not None:
            out.append(f"ours-chaos/ours {name}: {_fmt(stat, 2)}x" + (f" ({hint})" if hint else ""))
    return out


def _errors(workload: Mapping[str, Any]) -> list[str]:
    """Failed runs, and runs whose Scheduled events did not all come (with the first pods that got none)."""
    out = []
    for r in workload["runs"]:
        if r["error"]:
            out.append(f"round {r['round']} {r['contender']}: {r['error']}")
        if r.get("events_missing"):
            names = ", ".join(r.get("events_missing_pods", []))
            more = "..." if r["events_missing"] > len(r.get("events_missing_pods", [])) else ""
            out.append(
                f"round {r['round']} {r['contender']}: {r['events_missing']} of {r['bound']} bound pods "
                f"got no Scheduled event: {names}{more}"
            )
    return out


def _preamble(results: Mapping[str, Any]) -> list[str]:
    m = results["machine"]
    return [
        f"{results['date']}, {m['cores']} cores ({m['cpu']}), load average at start {m['load_avg_start'][0]:.2f}, "
        f"at end {m.get('load_avg_end', [0])[0]:.2f}; {results['rounds']} round(s), {results.get('minutes', '?')} min",
        f"command: {results['command']}",
        f"ours: {results['ours']}",
        f"upstream: {results['upstream']}",
        "control plane: etcd, kube-apiserver"
        + (
            " and kube-controller-manager (its controllers beside the contenders on the cores)"
            if results.get("controller_manager")
            else ", no kube-controller-manager"
            + (" (--no-controller-manager)" if "controller_manager" in results else " (runs before it was added)")
        ),
        "figures: median [min-max] over rounds; pods/s from first to last bind seen by one pod watch; CPU of the "
        "contender process between those binds, per 1000 pods; RSS = VmHWM; others' load = cores busy meanwhile "
        "outside the contender, the apiserver, etcd and the benchmark (other users of a shared machine)",
        'events: "to last event" = the same from the first bind to the last pod\'s Scheduled event seen by one event '
        "watch (pods with an event / that window; CPU until then); event lag = a pod's event seen minus its bind seen; "
        "events missing = bound pods with no Scheduled event within the wait; first bind and ready after = s since "
        'the contender\'s process started; "-" = not measured (a contender that writes no events, or an older file)',
    ]


def render_text(results: Mapping[str, Any]) -> str:
    lines = _preamble(results)
    for workload in results["workloads"]:
        header, rows = _rows(results, workload)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines += ["", _heading(workload)]
        for row in [header, *rows]:
            lines.append(
                "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            )
        lines += _ratio_lines(workload) + [f"(!) {e}" for e in _errors(workload)]
    return "\n".join(lines)


def _median(stat: Mapping[str, float] | None, digits: int) -> str:
    return "-" if stat is None else f"{stat['median']:.{digits}f}"


def _times(stat: Mapping[str, float] | None) -> str:
    return "-" if stat is None else f"{stat['median']:.2f}x"


def _overview_cell(workload: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    cell = f"{_median(stats['pods_per_s'], 0)} pods/s, {_median(stats['cpu_s_per_1000'], 2)} CPU-s"
    if workload["steady"]:
        cell = f"p99 {_median(stats['latency_p99_ms'], 0)} ms, {_median(stats['cpu_s_per_1000'], 2)} CPU-s"
    if workload.get("memory"):
        cell = f"{_median(stats['peak_rss_mib'], 0)} MiB, " + cell
    first = f", first bind after {_median(stats['first_bind_s'], 2)} s" if stats.get("first_bind_s") else ""
    if stats["event_lag_p99_ms"] is None:  # no Scheduled events measured (none written, or an older file)
        return cell + "; events -" + first
    if not workload["steady"]:  # in steady arrival, pods/s is the arrival rate
        cell += f"; {_fmt(stats['pods_per_s_to_event'], 0)} pods/s to last event,"
    else:
        cell += ";"
    return cell + f" lag p99 {_median(stats['event_lag_p99_ms'], 0)} ms" + first


def _overview_ratio_cell(workload: Mapping[str, Any]) -> str:
    ratios = workload["ratios"]
    first = ("p99 latency", "p99") if workload["steady"] else ("throughput", "pods/s")
    cell = f"{_times(ratios.get(first[0]))} {first[1]}, {_times(ratios.get('CPU per pod'))} CPU"
    if workload.get("memory"):
        cell = f"{_times(ratios.get('peak RSS'))} RSS, " + cell
    if not workload["steady"]:
        to_event = ratios.get("throughput to last event")
        verdict = " (parity)" if parity(to_event) else ""
        cell += f"; {_fmt(to_event, 2)}x{verdict} to last event,"
    else:
        cell += ";"
    cell += f" {_times(ratios.get('p99 event lag'))} lag p99"
    raw = workload.get("raw_ratios", {}).get("throughput to last event")
    return cell + (f"; {_times(raw)} of raw binder + events" if raw is not None else "")


def overview_markdown(results: Mapping[str, Any]) -> str:
    """One row per workload, medians only: pods/s and CPU-s per 1000 pods of each contender (p99
    latency in steady arrival; peak RSS first in a memory workload), pods/s to the last Scheduled
    event and the p99 bind-to-event lag, then ours/upstream. The table README.md quotes."""
    contenders = results["contenders"]
    header = ["workload", *(info["label"] for info in contenders.values())]
    if "ours" in contenders and "upstream" in contenders:
        header.append("ours/upstream")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for workload in results["workloads"]:
        size = workload["size"]
        row = [f"{workload['title'].split(' (')[0]}, {size['nodes']} nodes, {size['pods']} pods"]
        row += [_overview_cell(workload, workload["summary"][key]) for key in contenders]
        if len(header) > len(row):
            row.append(_overview_ratio_cell(workload))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(results: Mapping[str, Any], pngs: Mapping[str, str]) -> str:
    lines = ["# End-to-end scheduling benchmark", ""] + [f"- {line}" for line in _preamble(results)]
    lines += [
        "",
        "Medians (CPU-s = CPU seconds of the contender per 1000 pods, first to last bind; to last event = pods/s "
        "from the first bind to the last Scheduled event; lag = bind to its Scheduled event; "
        'ours/upstream = the median of the per-round ratios, [min-max] over the rounds; "parity" when that range '
        "crosses 1.0, the rounds cannot tell the two apart; first bind after = s from the process start; "
        "x of raw binder + events = ours/raw-events pods/s to last event, per round):",
        "",
        overview_markdown(results).rstrip(),
    ]
    for workload in results["workloads"]:
        header, rows = _rows(results, workload)
        lines += ["", f"## {_heading(workload)}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        extra = _ratio_lines(workload) + [f"(!) {e}" for e in _errors(workload)]
        if extra:
            lines += [""] + [f"{line}  " for line in extra]
        if workload["name"] in pngs:
            lines += ["", f"![bound pods over time]({pngs[workload['name']]})"]
    return "\n".join(lines) + "\n"


def plot(results: Mapping[str, Any], workload: Mapping[str, Any], path: Path) -> bool:
    """Bound pods (solid) and Scheduled events (dashed) over time since each contender started, one colour
    per contender; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4), dpi=72)
    for i, (key, info) in enumerate(results["contenders"].items()):
        colour = f"C{i}"
        for j, run in enumerate(r for r in workload["runs"] if r["contender"] == key):
            if run["timeline"]:
                xs, ys = zip(*run["timeline"])
                ax.plot(xs, ys, color=colour, linewidth=1.2, alpha=0.8, label=info["label"] if j == 0 else None)
            if run.get("event_timeline"):
                xs, ys = zip(*run["event_timeline"])
                ax.plot(xs, ys, color=colour, linewidth=1.0, alpha=0.8, linestyle="--")
    ax.set_xlabel("seconds since the contender process started")
    ax.set_ylabel("pods bound (solid), Scheduled events (dashed)")
    ax.set_title(_heading(workload), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _rounded(value: Any) -> Any:
    """Floats to 4 decimals, everywhere inside `value` (more digits are noise, not information)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _dump(results: Mapping[str, Any]) -> str:
    """Indented JSON, but each run on one line (72 runs of 20 fields read better as rows)."""
    results = _rounded(results)
    rows: list[str] = []

    def placeholder(run: Mapping[str, Any]) -> str:
        rows.append(json.dumps(run))
        return f"@run{len(rows) - 1}@"

    shallow = {
        **results,
        "workloads": [{**w, "runs": [placeholder(r) for r in w["runs"]]} for w in results["workloads"]],
    }
    text = json.dumps(shallow, indent=1)
    return re.sub(r'"@run(\d+)@"', lambda m: rows[int(m.group(1))], text) + "\n"


def render_files(results: Mapping[str, Any], json_path: Path) -> list[Path]:
    """Write `json_path`, the Markdown beside it (same stem) and a PNG per workload (<stem>-<workload>.png)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    pngs: dict[str, str] = {}
    for workload in results["workloads"]:
        png = json_path.with_name(f"{json_path.stem}-{workload['name']}.png")
        if plot(results, workload, png):
            pngs[workload["name"]] = png.name
            written.append(png)
    if results["workloads"] and not pngs:
        print("no PNG: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
    json_path.write_text(_dump(results))
    json_path.with_suffix(".md").write_text(render_markdown(results, pngs))
    return [*written, json_path, json_path.with_suffix(".md")]


def write(results: Mapping[str, Any], out: Path) -> list[Path]:
    """e2e-<stamp>.json/.md/-<workload>.png in `out`, and the same as latest* (latest-quick* for a
    --quick run, so that it does not replace the full run README quotes); returns the paths written."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    latest = "latest-quick" if results["quick"] else "latest"
    return render_files(results, out / f"e2e-{stamp}.json") + render_files(results, out / f"{latest}.json")


def main() -> int:
    """Draw the Markdown and PNGs of a results JSON again (after a change to this module), beside it."""
    if len(sys.argv) != 2:
        print("usage: python bench/e2e_report.py RESULTS.json", file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    results = json.loads(path.read_text())
    summarise(results)
    for written in render_files(results, path):
        print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
