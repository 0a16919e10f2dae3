"""``kopf-scheduler config import FILE.yaml``: a KubeSchedulerConfiguration as SchedulingPolicy manifests.

Reads the file kube-scheduler takes with ``--config`` (``kubescheduler.config.k8s.io/v1``) and prints one
SchedulingPolicy per profile, as a YAML stream ready for ``kubectl apply -f -``: upstream's defaults
applied, plugins and their ``pluginConfig`` translated (``core/config/scheduler_config.py``), every policy
validated as the operator will validate it (plugin names through the installed registry, out-of-tree
plugins included). Ignored process settings (leaderElection, clientConnection...) are noted on stderr.

Exit status: 0 with the manifests; 2 when the file cannot be read or holds something this scheduler
cannot honour (every such field is listed with its path, nothing is printed on stdout).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from ..core.config import scheduler_config
from ..core.config.policy import validate_policy
from ..core.model.specs import FieldError
from ..edge.plugins import installed_registry

__all__ = ["add_parser", "run_import"]


def run_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        raw: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        print(f"error: {path}: cannot read configuration: {exc}", file=sys.stderr)
        return 2
    registry = installed_registry()
    translated = scheduler_config.translate(raw, registry=registry)
    errors = translated if isinstance(translated, list) else []
    if not isinstance(translated, list):
        for i, manifest in enumerate(translated.policies):
            result = validate_policy(manifest["spec"], registry=registry)
            if isinstance(result, list):
                errors.extend(FieldError(translated.config_path(i, e.path), e.message) for e in result)
    if errors or isinstance(translated, list):
        print(f"error: {path}: not a usable KubeSchedulerConfiguration:", file=sys.stderr)
        for e in errors:
            print(f"  {e.path}: {e.message}" if e.path else f"  {e.message}", file=sys.stderr)
        return 2
    for warning in translated.warnings:
        print(f"{path}: {warning}", file=sys.stderr)
    print(yaml.safe_dump_all(translated.policies, sort_keys=False), end="")
    return 0


def add_parser(subparsers: Any, name: str, help: str) -> None:
    p = subparsers.add_parser(name, help=help, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    imp = sub.add_parser(
        "import",
        help="print a KubeSchedulerConfiguration's profiles as SchedulingPolicy manifests",
        description=__doc__.split("\n\n")[1],
    )
    imp.add_argument("file", metavar="FILE.yaml", help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)")
    imp.set_defaults(func=run_import)
