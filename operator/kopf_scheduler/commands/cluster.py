"""`kopf-scheduler cluster ...`: build, start, inspect and stop the local control plane."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..cluster.build import BuildError, ensure_binaries
from ..cluster.controlplane import ControlPlane, ControlPlaneError

__all__ = ["add_parser"]

DEFAULT_WORKDIR = Path(".work/cluster")


def add_parser(subparsers: Any, name: str, help: str) -> None:
    """Register the `cluster` command and its subcommands on the top-level parser."""
    parser = subparsers.add_parser(name, help=help, description=__doc__)
    commands = parser.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND", required=True)

    def with_workdir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--workdir",
            type=Path,
            default=DEFAULT_WORKDIR,
            help=f"state, certificates and logs (default: {DEFAULT_WORKDIR})",
        )
        return p

    up = with_workdir(commands.add_parser("up", help="start etcd + kube-apiserver in the background"))
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each component (default: 60)")
    up.add_argument("--port", type=int, default=None, help="kube-apiserver port on 127.0.0.1 (default: a free one)")
    up.set_defaults(func=_up)
    with_workdir(commands.add_parser("down", help="stop the control plane and wait for its processes")).set_defaults(
        func=_down
    )
    with_workdir(commands.add_parser("status", help="show processes and readiness; exit 1 unless ready")).set_defaults(
        func=_status
    )
    commands.add_parser(
        "build", help="build (or find cached) etcd, kube-apiserver, kube-scheduler, kubectl"
    ).set_defaults(func=_build)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    cp = ControlPlane(args.workdir, apiserver_port=args.port, ready_timeout=args.timeout)
    if cp.pids():
        print(f"already running in {cp.workdir}", file=sys.stderr)
    else:
        started = time.monotonic()
        try:
            cp.up()
        except (BuildError, ControlPlaneError) as exc:
            return _fail(exc)
        print(
            f"control plane ready at {cp.server} in {time.monotonic() - started:.1f}s; "
            f"logs in {cp.workdir}; stop with: kopf-scheduler cluster down --workdir {args.workdir}",
            file=sys.stderr,
        )
    print(f"KUBECONFIG={cp.kubeconfig}")
    return 0


def _down(args: argparse.Namespace) -> int:
    cp = ControlPlane(args.workdir)
    try:
        cp.down()
    except ControlPlaneError as exc:
        return _fail(exc)
    print(f"stopped the control plane in {cp.workdir}", file=sys.stderr)
    return 0


def _status(args: argparse.Namespace) -> int:
    status = ControlPlane(args.workdir).status()
    if not status["processes"]:
        print(f"not running (workdir {status['workdir']})")
        return 1
    print(f"server: {status['server']}\nkubeconfig: {status['kubeconfig']}\nready: {status['ready']}")
    for name, proc in status["processes"].items():
        print(f"{name}: pid {proc['pid']} {'running' if proc['alive'] else 'DEAD'} (log {proc['log']})")
    return 0 if status["ready"] else 1


def _build(args: argparse.Namespace) -> int:
    try:
        print(ensure_binaries())
    except BuildError as exc:
        return _fail(exc)
    return 0
