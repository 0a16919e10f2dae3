"""``kopf-scheduler explain NAMESPACE/POD``: the pod's last scheduling attempt in a running operator.

Asks the operator's read-only debug endpoint, ``GET /debug/attempts/NAMESPACE/NAME`` (``--endpoint``,
default ``$KOPF_SCHEDULER_ENDPOINT`` or ``https://127.0.0.1:10259``; through the edge's own client,
``edge/client.Api``, and its ``ApiResponse``), and prints every node's verdict: the plugin that rejected
it and why, or its per-plugin raw, normalised and weighted scores and total; the chosen node; for a
preemption, the candidates and victims considered. ``--output json`` prints the endpoint's JSON as it
is (``core/scheduling/explanation.py`` documents it).

The operator's port is HTTPS with authentication, as kube-scheduler's 10259: to an ``https://``
endpoint the command presents the kubeconfig's own credentials (``--kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config``, in-cluster: its bearer token or client certificate), and the operator asks the API
server whether that user may ``get`` the path (ClusterRole ``kopf-scheduler-debug-reader``). The
operator's certificate is self-signed unless it was given one: verify it with
``--certificate-authority``, or take it unverified with ``--insecure-skip-tls-verify`` (e.g. through
``kubectl port-forward`` to 127.0.0.1). To an ``http://`` endpoint (``run --insecure-port``, the
development mode) no credentials are sent.

Only the replica that leads schedules, so only it has attempts. The kubectl plugin finds it and asks
it through the API server's pod proxy (``kubectl kopf-scheduler explain``); or fetch the JSON some
other way and give it to ``--input -`` (README, "Explain a decision").
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import urllib.parse
from typing import Any, Final

from ..core.framework.interface import ApiResponse
from ..core.scheduling.explanation import from_json, render
from ..edge.client import Api
from ..edge.credentials import Credentials, CredentialsError, load_credentials

__all__ = ["DEFAULT_ENDPOINT", "add_parser", "attempt_path", "endpoint_credentials", "fetch", "run"]

DEFAULT_ENDPOINT: Final = "https://127.0.0.1:10259"
TIMEOUT_SECONDS: Final = 10.0


def attempt_path(namespace: str, name: str) -> str:
    """The endpoint's path for one pod (``telemetry/health.py`` serves it)."""
    return f"/debug/attempts/{urllib.parse.quote(namespace, safe='')}/{urllib.parse.quote(name, safe='')}"


def endpoint_credentials(
    endpoint: str, user: Credentials | None, *, ca_file: str | None = None, insecure: bool = False
) -> Credentials:
    """What to connect to `endpoint` with: over https, `user`'s token and client certificate (the
    operator reviews them) and the endpoint's own CA or none; over http, nothing at all (a token sent in
    clear text is a token given away)."""
    base = Credentials(server=endpoint.rstrip("/"), source="--endpoint")
    if not endpoint.startswith("https://"):
        return base
    if user is not None:
        base = dataclasses.replace(
            base,
            certificate_path=user.certificate_path,
            certificate_data=user.certificate_data,
            private_key_path=user.private_key_path,
            private_key_data=user.private_key_data,
            token=user.token,
        )
    return dataclasses.replace(base, ca_path=ca_file, insecure=insecure)


def fetch(endpoint: str, namespace: str, name: str, credentials: Credentials) -> tuple[Any, str]:
    """The endpoint's JSON for the pod, or None and why not."""
    endpoint = endpoint.rstrip("/")
    if not endpoint.startswith(("http://", "https://")):
        return None, f"--endpoint {endpoint}: expected an http:// or https:// URL"
    path = attempt_path(namespace, name)
    response = asyncio.run(_get(credentials, path))
    if response.status == 0:
        hint = (
            " (a self-signed certificate: --insecure-skip-tls-verify, or --certificate-authority)"
            if "CERTIFICATE_VERIFY_FAILED" in response.detail()
            else "; is it running, and is this its address?"
        )
        return None, f"cannot reach the operator at {endpoint} ({response.detail()}){hint}"
    if not response.ok:
        body = response.body
        detail = str(body.get("error") or body.get("message") or body) if isinstance(body, dict) else response.detail()
        if response.status in (401, 403) and endpoint.startswith("https://"):
            detail += ' (the operator asked the API server about your credentials: README, "The secure port")'
        return None, f"{endpoint}{path}: HTTP {response.status}: {detail}"
    if not isinstance(response.body, dict):
        return None, f"{endpoint}{path}: the answer is not JSON: {response.detail(200)}"
    return response.body, ""


async def _get(credentials: Credentials, path: str) -> ApiResponse:
    api = Api(credentials, timeout=TIMEOUT_SECONDS, user_agent="kopf-scheduler")
    try:
        return await api.request("GET", path)
    finally:
        await api.close()


def _user(args: argparse.Namespace) -> Credentials | None:
    """The kubeconfig's credentials to present over https, or None when there are none."""
    if not args.endpoint.startswith("https://"):
        return None
    try:
        return load_credentials(args.kubeconfig)
    except CredentialsError:
        if args.kubeconfig:
            raise
        return None


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
        try:
            user = _user(args)
        except CredentialsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        credentials = endpoint_credentials(
            args.endpoint, user, ca_file=args.certificate_authority, insecure=args.insecure_skip_tls_verify
        )
        data, problem = fetch(args.endpoint, namespace, name, credentials)
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
        help=f"the operator's port as a URL (default: $KOPF_SCHEDULER_ENDPOINT or {DEFAULT_ENDPOINT})",
    )
    p.add_argument(
        "--kubeconfig",
        help="whose credentials to present over https (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("--certificate-authority", metavar="FILE", help="verify the operator's certificate with this CA")
    p.add_argument("--insecure-skip-tls-verify", action="store_true", help="take the operator's certificate unverified")
    p.add_argument(
        "--input",
        metavar="FILE",
        help="render this endpoint JSON instead of asking ('-': stdin), e.g. from the API server's pod proxy",
    )
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)
