"""``kopf-scheduler explain NAMESPACE/POD``: the pod's last scheduling attempt in a running operator.

Asks the operator's read-only debug endpoint, ``GET /debug/attempts/NAMESPACE/NAME`` on its metrics
port (``--endpoint``, default ``$KOPF_SCHEDULER_ENDPOINT`` or ``http://127.0.0.1:10259``; through the
edge's own client, ``edge/client.Api``, and its ``Response``), and prints
every node's verdict: the plugin that rejected it and why, or its per-plugin raw, normalised and
weighted scores and total; the chosen node; for a preemption, the candidates and victims considered.
``--output json`` prints the endpoint's JSON as it is (``core/explanation.py`` documents it).

Only the replica that leads schedules, so only it has attempts. Without a port-forward: run the
command inside the leader's pod (``kubectl exec``), or fetch the JSON through the API server's pod
proxy and give it to ``--input -`` (README, "Explain a decision").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.parse
from typing import Any, Final

from ..core.explanation import from_json, render
from ..edge.client import Api, Response
from ..edge.credentials import Credentials

__all__ = ["DEFAULT_ENDPOINT", "add_parser", "attempt_path", "run"]

DEFAULT_ENDPOINT: Final = "http://127.0.0.1:10259"
TIMEOUT_SECONDS: Final = 10.0


def attempt_path(namespace: str, name: str) -> str:
    """The endpoint's path for one pod (``telemetry/health.py`` serves it)."""
    return f"/debug/attempts/{urllib.parse.quote(namespace, safe='')}/{urllib.parse.quote(name, safe='')}"


def _fetch(endpoint: str, namespace: str, name: str) -> tuple[Any, str]:
    """The endpoint's JSON for the pod, or None and why not."""
    endpoint = endpoint.rstrip("/")
    if not endpoint.startswith(("http://", "https://")):
        return None, f"--endpoint {endpoint}: expected an http:// or https:// URL"
    path = attempt_path(namespace, name)
    response = asyncio.run(_get(endpoint, path))
    if response.status == 0:
        return (
            None,
            f"cannot reach the operator at {endpoint} ({response.detail()}); "
            "is it running with --metrics-port, and is this its address?",
        )
    if not response.ok:
        body = response.body
        detail = str(body.get("error") or body) if isinstance(body, dict) else response.detail()
        return None, f"{endpoint}{path}: HTTP {response.status}: {detail}"
    if not isinstance(response.body, dict):
        return None, f"{endpoint}{path}: the answer is not JSON: {response.detail(200)}"
    return response.body, ""


async def _get(endpoint: str, path: str) -> Response:
    api = Api(Credentials(server=endpoint, source="--endpoint"), timeout=TIMEOUT_SECONDS, user_agent="kopf-scheduler")
    try:
        return await api.request("GET", path)
    finally:
        await api.close()


def run(args: argparse.Namespace) -> int:
    if args.input is not None:
        try:
            if args.input == "-":
                data = json.load(sys.stdin)
            else:
                with open(args.input) as f:
                    data = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"error: {args.input}: {exc}", file=sys.stderr)
            return 2
    else:
        if args.pod is None or args.pod.count("/") != 1 or not all(args.pod.split("/")):
            print("error: give the pod as NAMESPACE/NAME (or the JSON with --input)", file=sys.stderr)
            return 2
        namespace, name = args.pod.split("/")
        data, problem = _fetch(args.endpoint, namespace, name)
        if data is None:
            print(f"error: {problem}", file=sys.stderr)
            return 1
    try:
        explanation = from_json(data)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(data, indent=2))
    else:
        print(render(explanation))
    return 0


def add_parser(subparsers: Any, name: str, help: str) -> None:
    p = subparsers.add_parser(name, help=help, description=__doc__.split("\n\n")[0])
    p.add_argument("pod", nargs="?", metavar="NAMESPACE/POD")
    p.add_argument(
        "--endpoint",
        default=os.environ.get("KOPF_SCHEDULER_ENDPOINT") or DEFAULT_ENDPOINT,
        help=f"the operator's metrics port as a URL (default: $KOPF_SCHEDULER_ENDPOINT or {DEFAULT_ENDPOINT})",
    )
    p.add_argument(
        "--input",
        metavar="FILE",
        help="render this endpoint JSON instead of asking ('-': stdin), e.g. from the API server's pod proxy",
    )
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)
