"""`kopf-scheduler cluster ...`: build, start, inspect and stop the local control plane.

``up`` starts etcd, kube-apiserver and kube-controller-manager (Deployments, Jobs, StatefulSets,
DaemonSets, volume binding, claims from templates, garbage collection...: what a real cluster runs;
``--no-controller-manager`` leaves it out).
``up --nodes N`` also starts KWOK (its process recorded beside etcd's, so ``down`` stops it) and
creates N simulated nodes it makes Ready: a cluster for ``kopf run`` during development, with no
kubelet anywhere.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..cluster import e2e as e2e_module
from ..cluster.build import BuildError, ensure_binaries
from ..cluster.controlplane import ControlPlane, ControlPlaneError
from ..cluster.kwok import Kwok, create_simulated_nodes

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

    up = with_workdir(
        commands.add_parser("up", help="start etcd + kube-apiserver + kube-controller-manager in the background")
    )
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each component (default: 60)")
    up.add_argument("--port", type=int, default=None, help="kube-apiserver port on 127.0.0.1 (default: a free one)")
    up.add_argument(
        "--nodes",
        type=int,
        default=0,
        metavar="N",
        help="also start KWOK and create N simulated nodes kwok-node-0..N-1 (default: 0, no KWOK)",
    )
    up.add_argument("--node-cpu", default="4", help="each simulated node's CPU capacity (default: 4)")
    up.add_argument("--node-memory", default="16Gi", help="each simulated node's memory capacity (default: 16Gi)")
    up.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="leave kube-controller-manager out: no ReplicaSet, Job, namespace... controllers, nothing creates pods",
    )
    up.set_defaults(func=_up)
    with_workdir(commands.add_parser("down", help="stop the control plane and wait for its processes")).set_defaults(
        func=_down
    )
    with_workdir(commands.add_parser("status", help="show processes and readiness; exit 1 unless ready")).set_defaults(
        func=_status
    )
    e2e = commands.add_parser(
        "e2e",
        help="run upstream's [sig-scheduling] e2e tests (e2e.test v1.37.2) against kopf-scheduler on a fresh cluster",
        description=e2e_module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e2e.add_argument(
        "--workdir", type=Path, default=Path(".work/e2e"), help="logs and reports, one folder per scheduler"
    )
    e2e.add_argument(
        "--scheduler",
        choices=(*e2e_module.SCHEDULERS, "both"),
        default="kopf-scheduler",
        help="the scheduler serving default-scheduler; both: kube-scheduler too, for the reference column",
    )
    e2e.add_argument(
        "--tests",
        choices=("conformance", "sig-scheduling", "ci"),
        default="conformance",
        help="the [Conformance] specs of [sig-scheduling] (default), every [sig-scheduling] spec, or what CI runs "
        "(every one but the known failures)",
    )
    e2e.add_argument("--focus", help="ginkgo's --ginkgo.focus instead of --tests' (a regular expression)")
    e2e.add_argument("--skip", default="", help="ginkgo's --ginkgo.skip (a regular expression)")
    e2e.add_argument("--nodes", type=int, default=e2e_module.NODES, help=f"KWOK nodes (default {e2e_module.NODES})")
    e2e.add_argument("--verbose", action="store_true", help="kopf-scheduler logs verbosely; e2e.test's output echoed")
    e2e.set_defaults(func=_e2e)
    commands.add_parser(
        "build", help="build (or find cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl"
    ).set_defaults(func=_build)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    if args.nodes < 0:
        return _fail(ValueError(f"--nodes must be 0 or more, not {args.nodes}"))
    cp = ControlPlane(
        args.workdir, apiserver_port=args.port, ready_timeout=args.timeout, controller_manager=args.controller_manager
    )
    if cp.pids():
        print(f"already running in {cp.workdir}", file=sys.stderr)
    else:
        started = time.monotonic()
        try:
            cp.up()
        except (BuildError, ControlPlaneError) as exc:
            return _fail(exc)
        with_cm = "with kube-controller-manager" if cp.controller_manager else "without kube-controller-manager"
        print(
            f"control plane ready at {cp.server} ({with_cm}) in {time.monotonic() - started:.1f}s; "
            f"logs in {cp.workdir}; stop with: kopf-scheduler cluster down --workdir {args.workdir}",
            file=sys.stderr,
        )
    if args.nodes:
        try:
            _simulated_nodes(cp, args.nodes, cpu=args.node_cpu, memory=args.node_memory, timeout=args.timeout)
        except (BuildError, ControlPlaneError, OSError) as exc:
            return _fail(exc)
    print(f"KUBECONFIG={cp.kubeconfig}")
    return 0


def _simulated_nodes(cp: ControlPlane, count: int, *, cpu: str, memory: str, timeout: float) -> None:
    """KWOK running (started unless it is), and `count` Ready nodes ``kwok-node-<i>`` (those that
    exist are kept as they are), spread over three zones."""
    kwok = Kwok(cp, log_level="WARN")
    if kwok.pid is None:
        kwok.start()
        print(f"KWOK plays the simulated nodes' kubelets (log {kwok.log})", file=sys.stderr)
    names, created = create_simulated_nodes(cp, count, cpu=cpu, memory=memory)
    seconds = kwok.wait_nodes_ready(names, timeout=timeout)
    print(f"{count} simulated node(s) Ready ({created} created) in {seconds:.1f}s", file=sys.stderr)


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


def _e2e(args: argparse.Namespace) -> int:
    """Run the selection against each scheduler asked for; print the table (markdown, the README's); exit 0
    when every spec that ran passed with kopf-scheduler, less those failing for the environment and, with
    ``both``, less those the reference failed too."""
    base = {"conformance": e2e_module.CONFORMANCE, "sig-scheduling": e2e_module.SCHEDULING, "ci": e2e_module.CI}[
        args.tests
    ]
    selection = e2e_module.Selection(base.name, args.focus or base.focus, args.skip or base.skip)
    schedulers = e2e_module.SCHEDULERS if args.scheduler == "both" else (args.scheduler,)
    columns: dict[str, list[e2e_module.SpecResult]] = {}
    for scheduler in schedulers:
        print(f"--- {selection.name} against {scheduler} (logs in {args.workdir / scheduler})", file=sys.stderr)
        started = time.monotonic()
        try:
            results = e2e_module.run_suite(
                args.workdir / scheduler,
                scheduler,
                selection,
                nodes=args.nodes,
                echo=(lambda line: print(line, file=sys.stderr)) if args.verbose else None,
                verbose=args.verbose,
            )
        except (BuildError, ControlPlaneError) as exc:
            return _fail(exc)
        ran = [r for r in results if r.ran]
        passed = sum(r.passed for r in ran)
        print(
            f"    {passed} of {len(ran)} specs passed in {time.monotonic() - started:.0f}s with {scheduler}",
            file=sys.stderr,
        )
        for r in ran:
            if not r.passed:
                print(f"    {r.state.upper()}: {r.name}\n      " + r.failure.replace("\n", "\n      "), file=sys.stderr)
        columns[scheduler] = results
    rows = e2e_module.table(columns)
    print("| test | " + " | ".join(columns) + " | note |")
    print("|---|" + "---|" * len(columns) + "---|")
    for name, cells in rows:
        note = e2e_module.ENVIRONMENT.get(name) or next(
            (why for known, why in e2e_module.KNOWN_FAILURES.items() if known in name), ""
        )
        print(f"| {name} | " + " | ".join(cells[c] for c in columns) + f" | {note} |")
    ours = {name: cells["kopf-scheduler"] for name, cells in rows if "kopf-scheduler" in cells}
    reference = {name: cells["kube-scheduler"] for name, cells in rows if "kube-scheduler" in cells}
    regressions = [
        name
        for name, cell in ours.items()
        if cell not in ("passed", "-")
        and name not in e2e_module.ENVIRONMENT
        and reference.get(name, "passed") == "passed"
    ]
    for name in regressions:
        print(f"error: kopf-scheduler fails {name}", file=sys.stderr)
    return 1 if regressions else 0
