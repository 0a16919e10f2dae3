"""The `kopf-scheduler` command.

Each subcommand lives in its own module, imported only when that subcommand
runs (so `kopf-scheduler cluster up` never imports Kopf). To add one, add a
line to SUBCOMMANDS; its module defines ``add_parser(subparsers, name, help)``
that registers an argparse parser with ``set_defaults(func=callable)``, where
``func(args)`` returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NamedTuple

from .. import __version__

__all__ = ["SUBCOMMANDS", "Subcommand", "main"]


class Subcommand(NamedTuple):
    module: str  # imported lazily, only when this subcommand is chosen
    add_parser: str  # name of the function in `module` that registers the parser
    help: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "cluster": Subcommand(
        "kopf_scheduler.commands.cluster", "add_parser", "the local control plane (etcd + kube-apiserver)"
    ),
    "run": Subcommand(
        "kopf_scheduler.commands.run", "add_parser", "run the scheduler operator against a cluster (production entry)"
    ),
    "demo": Subcommand(
        "kopf_scheduler.commands.demo",
        "add_parser",
        "local control plane + simulated nodes + demo workload, ending in a summary",
    ),
    "simulate": Subcommand(
        "kopf_scheduler.commands.simulate",
        "add_parser",
        "schedule pods onto a cluster (YAML or a live snapshot), offline; count what fits",
    ),
    "config": Subcommand(
        "kopf_scheduler.commands.config",
        "add_parser",
        "import a KubeSchedulerConfiguration: its profiles as SchedulingPolicy manifests",
    ),
    "replay": Subcommand(
        "kopf_scheduler.commands.replay",
        "add_parser",
        "replay a trace recorded by run --record with a candidate policy; compare with what happened",
    ),
    "explain": Subcommand(
        "kopf_scheduler.commands.explain",
        "add_parser",
        "why a pod went where it went, or is pending: its last attempt in a running operator",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the chosen subcommand, return its exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="kopf-scheduler", description="A Kubernetes scheduler written in Python as a Kopf operator."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    for name, sub in SUBCOMMANDS.items():
        if name == chosen:
            getattr(importlib.import_module(sub.module), sub.add_parser)(subparsers, name, sub.help)
        else:  # listed in --help without importing its module
            subparsers.add_parser(name, help=sub.help)
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # `kopf-scheduler replay ... | head`: the reader left, which is no error of ours
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot raise too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a writer killed by SIGPIPE (128 + 13)


if __name__ == "__main__":
    sys.exit(main())
