"""``kopf-scheduler replay DIR``: run a recorded trace's arrivals through a candidate policy, side by side.

    kopf-scheduler replay DIR [--policy CANDIDATE.yaml] [--scheduler-name NAME]
                              [--output markdown|json] [--png FILE] [--seed 0]

DIR is a trace written by ``kopf-scheduler run --record DIR`` (or ``demo --record DIR``). The same
arrivals go through the same cycle as ``simulate`` (``sim/replay.py``) with the candidate policy
(a SchedulingPolicy manifest or a v1.9 Policy; default: the recorded policy itself, whose replay
reproduces the recorded placements), and the report compares: pods placed differently, placed vs
unschedulable, per-node utilisation, fragmentation (the largest CPU and memory still free on one
node), preemptions and gangs. ``--png FILE`` draws over time the cluster's CPU utilisation
(recorded blue, replayed orange) and the share of nodes holding the replayed pods (recorded green,
replayed red); a replayed line is drawn thin over its recorded twin, so both show where they agree.

Exit status: 0 when the report was made (whatever it says); 2 when the trace or the policy cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..edge.plugins import installed_registry
from ..sim.loader import PolicyFileError, load_policy
from ..sim.png import line_chart
from ..sim.replay import TraceError, read_trace, recorded_profile, replay
from ..sim.replay_report import report_json, report_markdown

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    try:
        trace = read_trace(args.trace)
        names = trace.scheduler_names()
        if args.scheduler_name:
            scheduler_name = args.scheduler_name
            if scheduler_name not in names:
                raise TraceError(f"no decisions of schedulerName {scheduler_name} in the trace (it has: {names})")
        elif len(names) == 1:
            scheduler_name = names[0]
        else:
            raise TraceError(f"the trace has decisions of {len(names)} scheduler names {names}: give --scheduler-name")
        registry = installed_registry()
        if args.policy is not None:
            profile = load_policy(args.policy, registry=registry)
            policy = str(args.policy)
        else:
            profile, policy = recorded_profile(trace, scheduler_name, registry=registry)
            policy = f"the recorded policy ({policy})"
        result = replay(trace, profile, scheduler_name=scheduler_name, seed=args.seed, follow_draws=args.policy is None)
    except (TraceError, PolicyFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result.policy = policy
    if args.png is not None:
        lines = [[(s[0], s[k]) for s in result.series] for k in (1, 2, 5, 6)]
        args.png.write_bytes(line_chart(lines, widths=(4, 1, 4, 1)))
    print(report_json(result) if args.output == "json" else report_markdown(result))
    if args.png is not None and args.output != "json":
        print(
            f"\nOver time in {args.png}: CPU utilisation recorded blue, replayed orange;"
            " nodes holding these pods recorded green, replayed red."
        )
    return 0


def add_parser(subparsers: Any, name: str, help: str) -> None:
    p = subparsers.add_parser(name, help=help, description=__doc__.split("\n\n")[0])
    p.add_argument("trace", type=Path, metavar="DIR", help="a trace directory written by run --record")
    p.add_argument(
        "--policy",
        type=Path,
        help="the candidate: a SchedulingPolicy manifest or a v1.9 Policy"
        " (default: the policy that recorded the trace)",
    )
    p.add_argument("--scheduler-name", help="replay this scheduler name's pods (needed when the trace has several)")
    p.add_argument("--output", choices=("markdown", "json"), default="markdown")
    p.add_argument("--png", type=Path, metavar="FILE", help="write CPU utilisation over time as a PNG line chart")
    p.add_argument("--seed", type=int, default=0, help="seed of the random tie-break past the recorded draws")
    p.set_defaults(func=run)
