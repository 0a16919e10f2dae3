"""``kopf-scheduler simulate``: schedule pending pods onto a cluster as the operator would, and count what fits.

The cluster is a CLUSTER.yaml (``--cluster``) or a read-only snapshot of a live one (``--from-cluster``,
``edge/snapshot.py``). The pods are PODS.yaml (``--pods``), scheduled in file order, or else the
cluster's own pending pods whose schedulerName is ``--scheduler-name`` (default: the policy's).
``--config FILE.yaml`` reads kube-scheduler's own KubeSchedulerConfiguration instead of ``--policy`` (see
``core/config/scheduler_config.py``) and runs every profile of it at once, as kube-scheduler does: one cache,
each pod scheduled by the profile its ``schedulerName`` names (a pod naming none of them by the first),
in the order one queue for all of them gives (``--scheduler-name`` runs that profile alone).
``--max-replicas POD.yaml`` then counts how many copies of that pod fit, where they go and what stops
the next one. ``--explain`` explains every pod in short, ``--explain NAMESPACE/POD`` one pod in full.

Nothing is written anywhere: the simulation runs the core (``sim/``) on the objects read. The
policy's HTTP extenders are called as the operator calls them (they must be reachable), unless
``--without-extenders`` leaves them out.

Exit status: 0 when every pod was read (placed or not); 1 when some pod could not be read (it is
listed as not placed, with the reason, and the others are scheduled all the same); 2 when the
cluster, the pods file as a whole or the policy cannot be used.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from ..core.config.profile import Profile
from ..edge.extenders import HTTPExtender, setup_problems
from ..edge.plugins import installed_registry
from ..edge.snapshot import ClusterReadError, LiveSnapshot, read_cluster
from ..sim.loader import (
    ManifestError,
    PolicyFileError,
    load_cluster,
    load_pods,
    load_policy,
    load_scheduler_config,
    read_documents,
)
from ..sim.report import EVERY_POD, report_json, report_table
from ..sim.simulator import Simulation, SimulationResult, UnreadablePod

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    note = ""
    misuse = ""
    if args.max_limit < 0:
        misuse = "--max-limit must be 0 (no limit) or more"
    elif args.max_limit and args.max_replicas is None:
        misuse = "--max-limit counts --max-replicas copies: give --max-replicas"
    elif args.kubeconfig and not args.from_cluster:
        misuse = "--kubeconfig is read with --from-cluster only"
    if misuse:
        print(f"error: {misuse}", file=sys.stderr)
        return 2
    try:
        if args.config is not None:
            profiles = load_scheduler_config(args.config, registry=installed_registry())
        else:
            profiles = [load_policy(args.policy, registry=installed_registry())]
        if args.from_cluster:
            snapshot = read_cluster(args.kubeconfig)
            source = f"the cluster at {snapshot.server}"
            loaded = load_cluster(snapshot.documents, source=source)
            note = _left_out(snapshot)
        else:
            source = str(args.cluster)
            loaded = load_cluster(read_documents(args.cluster), source=source)
        chosen = _choose(profiles, args)
        if args.pods is not None:
            pods = load_pods(read_documents(args.pods), source=str(args.pods), priority_classes=loaded.priority_classes)
        else:
            names = {args.scheduler_name} if args.scheduler_name else {p.scheduler_name for p in chosen}
            pods = [p for p in loaded.pending_in_cluster if p.scheduler_name in names]
        scheduler_name = args.scheduler_name or ", ".join(p.scheduler_name for p in chosen)
        chosen = [_with_usable_extenders(p, args) for p in chosen]
        template = None
        if args.max_replicas is not None:
            templates = load_pods(
                read_documents(args.max_replicas),
                source=str(args.max_replicas),
                priority_classes=loaded.priority_classes,
            )
            if len(templates) != 1:
                raise ManifestError(
                    f"{args.max_replicas}: expected one pod, not bound to a node; found {len(templates)} pod(s)"
                )
            if isinstance(templates[0], UnreadablePod):
                raise ManifestError(f"{args.max_replicas}: {templates[0].message}")
            if templates[0].node_name:
                raise ManifestError(
                    f"{args.max_replicas}: expected one pod, not bound to a node;"
                    f" it is bound to {templates[0].node_name}"
                )
            template = templates[0]
        if args.explain not in (None, EVERY_POD) and args.explain not in {p.key for p in pods}:
            raise ManifestError(f"--explain {args.explain}: no such pod among the {len(pods)} pending pod(s) simulated")
    except (ManifestError, PolicyFileError, ClusterReadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sim = Simulation(
        loaded.cache, chosen, seed=args.seed, explain=args.explain is not None, extender_factory=HTTPExtender
    )
    result = sim.run(pods)
    capacity = sim.max_replicas(template, limit=args.max_limit) if template is not None else None
    if args.output == "json":
        print(report_json(result, explained=args.explain, capacity=capacity))
        return _exit_status(result)
    print(report_table(result, loaded.cache, explained=args.explain, capacity=capacity))
    if args.pods is None:
        print(f"({len(pods)} pending pod(s) with schedulerName {scheduler_name} in {source})")
    if loaded.ignored:
        print(f"(ignored from {source}: {', '.join(f'{n} {k}' for k, n in sorted(loaded.ignored.items()))})")
    if note:
        print(note)
    return _exit_status(result)


def _with_usable_extenders(profile: Profile, args: argparse.Namespace) -> Profile:
    """`profile` without its extenders (``--without-extenders``), or as it is when they can be called."""
    if args.without_extenders:
        return dataclasses.replace(profile, extenders=())
    if problems := setup_problems(profile.extenders):
        raise PolicyFileError(
            f"{args.config or args.policy}: cannot call its extenders:\n"
            + "\n".join(f"  {e.path}: {e.message}" for e in problems)
        )
    return profile


def _choose(profiles: list[Profile], args: argparse.Namespace) -> list[Profile]:
    """The profiles that run: the ``--scheduler-name`` one of a ``--config`` file, else every one of it
    (kube-scheduler runs them all: each pod goes to the one its ``schedulerName`` names), else the policy."""
    by_name = {p.scheduler_name: p for p in profiles}
    if args.scheduler_name and args.config is not None:
        if args.scheduler_name not in by_name:
            raise PolicyFileError(
                f"{args.config}: no profile named {args.scheduler_name!r} (profiles: {', '.join(by_name)})"
            )
        return [by_name[args.scheduler_name]]
    return profiles


def _exit_status(result: SimulationResult) -> int:
    if result.unreadable:
        print(
            f"error: {result.unreadable} pod(s) could not be read; the others were scheduled (see their messages)",
            file=sys.stderr,
        )
        return 1
    return 0


def add_parser(subparsers: Any, name: str, help: str) -> None:
    p = subparsers.add_parser(name, help=help, description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--cluster",
        type=Path,
        help="nodes, bound pods, services, volumes, PDBs, PriorityClasses... (YAML, multi-document or kind: List)",
    )
    where.add_argument(
        "--from-cluster",
        action="store_true",
        help="snapshot a live cluster, read-only (lists only), instead of --cluster",
    )
    p.add_argument(
        "--kubeconfig",
        help="with --from-cluster: the kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)",
    )
    p.add_argument(
        "--pods",
        type=Path,
        help="pending pods, scheduled in file order (default: the cluster's own pending pods of --scheduler-name)",
    )
    p.add_argument(
        "--scheduler-name",
        help="without --pods: simulate the cluster's pending pods with this schedulerName (default: the policy's)",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--policy",
        type=Path,
        help="a SchedulingPolicy manifest or a v1.9 Policy JSON/YAML (default: upstream v1.37's default profile)",
    )
    which.add_argument(
        "--config",
        type=Path,
        metavar="FILE.yaml",
        help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), as kube-scheduler's --config: every "
        "profile at once, each pod scheduled by the one its schedulerName names (--scheduler-name: that one alone)",
    )
    p.add_argument(
        "--max-replicas",
        type=Path,
        metavar="POD.yaml",
        help="after the pods: how many copies of this pod fit, where, and what stops the next one",
    )
    p.add_argument(
        "--max-limit",
        type=int,
        default=0,
        metavar="N",
        help="with --max-replicas: stop after N copies (default 0: until one does not fit)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random tie-break (default 0)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument(
        "--explain",
        nargs="?",
        const=EVERY_POD,
        metavar="NAMESPACE/POD",
        help="alone: every pod's feasible nodes, rejections and best scores in short; with a pod: that pod in full "
        "(every node's verdict, per-plugin raw, normalised and weighted scores, what preemption considered)",
    )
    p.add_argument(
        "--without-extenders",
        action="store_true",
        help="leave the policy's HTTP extenders out (offline, or when they are unreachable)",
    )
    p.set_defaults(func=run)


def _left_out(snapshot: LiveSnapshot) -> str:
    """What the live snapshot could not read, said once ("" when it read every kind)."""
    notes = []
    if snapshot.missing:
        notes.append(f"not served by {snapshot.server}, left out: {', '.join(snapshot.missing)}")
    if snapshot.forbidden:
        notes.append(f"not readable with these credentials, left out: {', '.join(snapshot.forbidden)}")
    return f"({'; '.join(notes)})" if notes else ""
