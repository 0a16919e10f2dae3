"""``kopf-scheduler simulate``: schedule PODS.yaml onto CLUSTER.yaml offline and print the placements.

Exit status: 0 when every pod was read (placed or not); 1 when some pod could not be read (it is
listed as not placed, with the reason, and the others are scheduled all the same); 2 when the
cluster file, the pods file as a whole or the policy cannot be used.

The policy's HTTP extenders are called as the operator calls them (they must be reachable), unless
``--without-extenders`` leaves them out.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..core.profile import Profile
from ..entry_points import installed_registry
from ..extender_client import HTTPExtender, setup_problems
from .loader import ManifestError, load_cluster, load_pods, read_documents
from .report import to_json, to_table
from .simulator import Simulation

DEFAULT_SCHEDULER_NAME = "kopf-scheduler"


class PolicyFileError(ValueError):
    pass


def load_policy(path: str | Path | None, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    """A Profile from a SchedulingPolicy manifest or a legacy v1.9 Policy (JSON/YAML); today's default profile if None."""
    from ..core import legacy, policy

    if path is None:
        return policy.default_profile(scheduler_name)
    p = Path(path)
    try:
        raw: Any = yaml.safe_load(p.read_text())  # JSON is YAML
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyFileError(f"{p}: cannot read policy: {exc}") from None
    if not isinstance(raw, Mapping):
        raise PolicyFileError(f"{p}: a policy must be an object")
    kind = raw.get("kind")
    if kind == "SchedulingPolicy":
        spec = raw.get("spec") or {}
    elif kind in ("Policy", "ConfigMap") or "predicates" in raw or "priorities" in raw:
        converted = legacy.import_policy(raw, scheduler_name=scheduler_name)
        if isinstance(converted, list):
            raise PolicyFileError(f"{p}: not a valid v1.9 Policy:\n" + "\n".join(f"  {e.path}: {e.message}" for e in converted))
        spec = converted
    else:
        raise PolicyFileError(f"{p}: expected kind SchedulingPolicy or Policy, got {kind!r}")
    profile = policy.validate_policy(spec, registry=installed_registry())
    if isinstance(profile, list):
        raise PolicyFileError(f"{p}: invalid policy:\n" + "\n".join(f"  {e.path}: {e.message}" for e in profile))
    return profile


def run(args: argparse.Namespace) -> int:
    try:
        loaded = load_cluster(read_documents(args.cluster), source=str(args.cluster))
        pods = load_pods(read_documents(args.pods), source=str(args.pods), priority_classes=loaded.priority_classes)
        profile = load_policy(args.policy)
        if args.without_extenders:
            profile = dataclasses.replace(profile, extenders=())
        elif problems := setup_problems(profile.extenders):
            raise PolicyFileError(f"{args.policy}: cannot call its extenders:\n" + "\n".join(f"  {e.path}: {e.message}" for e in problems))
    except (ManifestError, PolicyFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sim = Simulation(loaded.cache, profile, seed=args.seed, explain=args.explain, extender_factory=HTTPExtender)
    result = sim.run(pods)
    if args.output == "json":
        print(to_json(result))
    else:
        print(to_table(result, loaded.cache))
        if loaded.ignored:
            ignored = ", ".join(f"{n} {k}" for k, n in sorted(loaded.ignored.items()))
            print(f"(ignored from {args.cluster}: {ignored})")
    if result.unreadable:
        print(f"error: {result.unreadable} pod(s) could not be read; the others were scheduled (see their messages)", file=sys.stderr)
        return 1
    return 0


def add_parser(subparsers: Any, name: str, help: str) -> None:
    p = subparsers.add_parser(name, help=help, description=__doc__)
    p.add_argument(
        "--cluster", required=True, type=Path, help="nodes, bound pods, services, volumes, PDBs, PriorityClasses... (YAML, multi-document or kind: List)"
    )
    p.add_argument("--pods", required=True, type=Path, help="pending pods, scheduled in file order")
    p.add_argument("--policy", type=Path, help="a SchedulingPolicy manifest or a v1.9 Policy JSON/YAML (default: upstream v1.37's default profile)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random tie-break (default 0)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument(
        "--explain",
        action="store_true",
        help="per pod: the feasible nodes, each filtered node's plugin and reasons, each feasible node's per-plugin scores and total",
    )
    p.add_argument("--without-extenders", action="store_true", help="leave the policy's HTTP extenders out (offline, or when they are unreachable)")
    p.set_defaults(func=run)



