"""``kubectl kopf-scheduler``: the kubectl plugin (the ``kubectl-kopf_scheduler`` console script).

    kubectl kopf-scheduler explain NAMESPACE/POD [--output json] [--operator-namespace kopf-scheduler]
    kubectl kopf-scheduler policies

``explain`` says why a pod went where it went, or why it is pending, with no port-forward: it finds
the leading replica through its leader-election Lease (the holder identity is the pod's hostname,
i.e. its name, then ``_`` and a random suffix; ``--lease`` for a ``--policy`` shard's Lease) and
reads that pod's ``/debug/attempts/NAMESPACE/NAME`` through the API server's pod proxy
(``pods/proxy``, the same RBAC as ``kubectl port-forward`` users need). A single replica without
leader election has no Lease: then the one running pod labelled ``app.kubernetes.io/name=kopf-scheduler``
is asked. With neither (``kopf run -m kopf_scheduler.kube.main`` or ``kopf-scheduler run`` on this machine
during development), the local operator's port is asked (``--endpoint``, default
``$KOPF_SCHEDULER_ENDPOINT`` or ``http://127.0.0.1:10259``), once its ``/debug/about`` says it schedules
for the API server this kubeconfig names. The table is ``kopf-scheduler explain``'s
(``core/explanation.py``).

``policies`` lists the SchedulingPolicies with the scheduler name each serves, whether it is
accepted, and why not.

Credentials and client are the operator's (``edge/credentials.py``: ``--kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config``, in-cluster; exec plugins included; ``edge/client.Api`` through ``edge/blocking.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any, Final

from ..core.explanation import from_json, render
from ..edge.blocking import BlockingApi
from ..edge.credentials import Credentials, CredentialsError, load_credentials
from .explain import DEFAULT_ENDPOINT, attempt_path

__all__ = ["LEADER_LABEL", "leader_pod", "main"]

DEFAULT_NAMESPACE: Final = "kopf-scheduler"
DEFAULT_LEASE: Final = "kopf-scheduler"
METRICS_PORT: Final = 10259
#: the label deploy/ and the Helm chart put on the operator's pods
LEADER_LABEL: Final = "app.kubernetes.io/name=kopf-scheduler"


class PluginError(Exception):
    """What went wrong, for the user; exit status 1."""


class NoOperatorPod(PluginError):
    """Neither a Lease names a leader nor does an operator pod run: maybe a local operator (kopf run)."""


def _get(client: BlockingApi, path: str) -> tuple[int, Any]:
    """GET `path` as the user: (status, decoded JSON or the text)."""
    response = client.get(path)
    if response.status == 0:
        raise PluginError(f"cannot reach the API server: {response.detail()}")
    return response.status, response.body


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("error") or body.get("message") or body)[:300]
    return str(body).strip()[:300]


def leader_pod(client: BlockingApi, *, namespace: str, lease: str) -> str:
    """The name of the pod that leads (or the only operator pod when there is no Lease)."""
    status, record = _get(client, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}")
    if status not in (200, 404):
        raise PluginError(f"cannot read Lease {namespace}/{lease}: HTTP {status} {_detail(record)}")
    holder = str(((record.get("spec") or {}) if status == 200 else {}).get("holderIdentity") or "")
    if holder:
        return holder.rpartition("_")[0] or holder
    selector = urllib.parse.quote(LEADER_LABEL)
    status, pods = _get(client, f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
    if status != 200:
        raise PluginError(f"cannot list the operator's pods in {namespace}: HTTP {status} {_detail(pods)}")
    running = [
        str(p["metadata"]["name"]) for p in pods.get("items") or () if (p.get("status") or {}).get("phase") == "Running"
    ]
    if len(running) == 1:
        return running[0]
    if not running:
        raise NoOperatorPod(f"no leader in Lease {namespace}/{lease} and no running pod labelled {LEADER_LABEL}")
    raise PluginError(
        f"no leader in Lease {namespace}/{lease}, and {len(running)} operator pods run: {', '.join(running)}"
    )


def _attempt(client: BlockingApi, *, namespace: str, pod: str, port: int, target: str) -> Any:
    """The operator pod's JSON explanation of `target` (NAMESPACE/NAME), through the pod proxy."""
    target_ns, target_name = target.split("/")
    path = (
        f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/debug/attempts/"
        f"{urllib.parse.quote(target_ns, safe='')}/{urllib.parse.quote(target_name, safe='')}"
    )
    status, data = _get(client, path)
    if not 200 <= status < 300:
        raise PluginError(f"{namespace}/{pod}:{port} answered HTTP {status}: {_detail(data)}")
    if not isinstance(data, dict):
        raise PluginError(f"{namespace}/{pod}:{port} answered something that is not JSON: {str(data)[:200]!r}")
    return data


def _local_attempt(endpoint: str, server: str, target: str, why: str) -> Any:
    """A local operator's JSON explanation of `target`, if its /debug/about says it schedules for `server`."""
    hint = (
        f"{why}; nor does a local operator answer at {endpoint} (kopf run serves explain on "
        "127.0.0.1:$KOPF_SCHEDULER_METRICS_PORT, default 10259; kopf-scheduler run on --metrics-port: give --endpoint)"
    )
    with BlockingApi(Credentials(server=endpoint, source="--endpoint")) as local:
        about = local.get("/debug/about")
        if about.status == 0 or not about.ok or not isinstance(about.body, dict):
            raise PluginError(hint)
        theirs = str(about.body.get("server") or "")
        if theirs.rstrip("/") != server.rstrip("/"):
            raise PluginError(f"{why}; the operator at {endpoint} schedules for {theirs}, not {server}")
        target_ns, target_name = target.split("/")
        answer = local.get(attempt_path(target_ns, target_name))
    if not answer.ok:
        raise PluginError(f"{endpoint} answered HTTP {answer.status}: {_detail(answer.body)}")
    if not isinstance(answer.body, dict):
        raise PluginError(f"{endpoint} answered something that is not JSON: {answer.detail(200)}")
    return answer.body


def explain(args: argparse.Namespace, client: BlockingApi) -> int:
    if args.pod.count("/") != 1 or not all(args.pod.split("/")):
        raise PluginError("give the pod as NAMESPACE/NAME")
    try:
        pod = leader_pod(client, namespace=args.operator_namespace, lease=args.lease)
    except NoOperatorPod as exc:
        data = _local_attempt(args.endpoint, client.server, args.pod, str(exc))
    else:
        data = _attempt(client, namespace=args.operator_namespace, pod=pod, port=args.port, target=args.pod)
    if args.output == "json":
        print(json.dumps(data, indent=2))
    else:
        try:
            print(render(from_json(data)))
        except ValueError as exc:
            raise PluginError(f"the operator answered something that is not an explanation: {exc}") from exc
    return 0


def policies(args: argparse.Namespace, client: BlockingApi) -> int:
    status, found = _get(client, "/apis/scheduling.kopf.dev/v1alpha1/schedulingpolicies")
    if status != 200:
        raise PluginError(f"cannot list SchedulingPolicies: HTTP {status} {_detail(found)}")
    rows = [("NAME", "SCHEDULER", "ACCEPTED", "REASON", "MESSAGE")]
    for item in sorted(found.get("items") or (), key=lambda i: i["metadata"]["name"]):
        accepted: dict[str, Any] = next(
            (c for c in (item.get("status") or {}).get("conditions") or () if c.get("type") == "Accepted"), {}
        )
        message = str(accepted.get("message") or "")
        rows.append(
            (
                item["metadata"]["name"],
                str((item.get("spec") or {}).get("schedulerName") or ""),
                str(accepted.get("status") or "Unknown"),
                str(accepted.get("reason") or ""),
                message if len(message) <= 80 else message[:77] + "...",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kubectl kopf-scheduler", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument(
        "--operator-namespace", default=DEFAULT_NAMESPACE, help="where the operator runs (default kopf-scheduler)"
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    e = sub.add_parser("explain", help="why a pod went where it went, or is pending (the leader's last attempt)")
    e.add_argument("pod", metavar="NAMESPACE/POD")
    e.add_argument("--output", "-o", choices=("table", "json"), default="table")
    e.add_argument("--lease", default=DEFAULT_LEASE, help="the leader-election Lease (default kopf-scheduler)")
    e.add_argument(
        "--port", type=int, default=METRICS_PORT, help=f"the operator's metrics port (default {METRICS_PORT})"
    )
    e.add_argument(
        "--endpoint",
        default=os.environ.get("KOPF_SCHEDULER_ENDPOINT") or DEFAULT_ENDPOINT,
        help="a local operator's port (kopf run during development), asked when no Lease names a leader and no "
        f"operator pod runs (default: $KOPF_SCHEDULER_ENDPOINT or {DEFAULT_ENDPOINT})",
    )
    e.set_defaults(func=explain)
    sub.add_parser(
        "policies", help="the SchedulingPolicies, the scheduler names they serve and their state"
    ).set_defaults(func=policies)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        client = BlockingApi(load_credentials(args.kubeconfig))
    except CredentialsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args, client))
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
