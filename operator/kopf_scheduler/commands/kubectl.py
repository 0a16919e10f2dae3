"""``kubectl kopf-scheduler``: the kubectl plugin (console scripts ``kubectl-kopf_scheduler`` and, for
shell completion, ``kubectl_complete-kopf_scheduler``).

    kubectl kopf-scheduler explain [-n NAMESPACE] POD | pod/POD | NAMESPACE/POD [-o wide|json|yaml]
    kubectl kopf-scheduler policies [NAME ...] [-o wide|json|yaml]

As kubectl: ``-n/--namespace`` (before or after the command), else the kubeconfig context's namespace,
else ``default``; ``pod/NAME`` (``pods/``, ``po/``) names a pod; any other ``PREFIX/NAME`` is a
namespace and its pod (one that contradicts ``-n`` is refused); ``-o json|yaml`` prints the object,
``-o wide`` more of it; every error exits 1 with ``error: ...`` on stderr (usage errors too: kubectl's
cobra does the same), success 0. Completion: kubectl (v1.26+) asks ``kubectl_complete-kopf_scheduler``
on PATH for the plugin's commands, flags, namespaces, pods and policies.

``explain`` says why a pod went where it went, or why it is pending, with no port-forward: it finds
the leading replica through its leader-election Lease (the holder identity is the pod's hostname,
i.e. its name, then ``_`` and a random suffix; ``--lease`` for a ``--policy`` shard's Lease), or else
the one running pod labelled ``app.kubernetes.io/name=kopf-scheduler``, and asks that pod's
``/debug/attempts/NAMESPACE/NAME`` on its secure port through the API server's pod proxy
(``/api/v1/namespaces/NS/pods/https:POD:10259/proxy/...``). The proxy authenticates and authorizes the
user (``get pods/proxy``) and forwards the request with no identity, so the plugin first requests, as
the user, a ten-minute token of ServiceAccount ``kopf-scheduler-explain`` for the audience
``kopf-scheduler`` (``create serviceaccounts/token``: the Role ``kopf-scheduler-explain`` grants all the
plugin needs) and sends it in ``Kopf-Scheduler-Authorization``; the operator reviews it for that audience
and asks whether the account may read /debug (``telemetry/access.py``). RBAC decides at both ends; the
token is useless against the API server.

``--endpoint URL`` (or ``$KOPF_SCHEDULER_ENDPOINT``) asks that URL instead, with no Lease or pod to find
(an operator started by ``kopf run``, one reached through ``kubectl port-forward``): over https with the
user's own credentials, as ``kopf-scheduler explain --endpoint`` does (``commands/explain.py``).

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn

from ..core.model import paths

if TYPE_CHECKING:
    from ..edge.blocking import BlockingApi
    from ..edge.credentials import Credentials

# The client (the Kubernetes client's kubeconfig loader, aiohttp), the explanation's renderer and yaml are
# imported where they are used: a usage error or a completion of the plugin's own words (every TAB of the
# user's shell) answers in a tenth of the second those imports take.

__all__ = ["LEADER_LABEL", "complete", "leader_pod", "main", "parser", "target"]

DEFAULT_NAMESPACE: Final = "kopf-scheduler"
DEFAULT_LEASE: Final = "kopf-scheduler"
DEFAULT_ACCOUNT: Final = "kopf-scheduler-explain"
SECURE_PORT: Final = 10259
#: the label deploy/ and the Helm chart put on the operator's pods
LEADER_LABEL: Final = "app.kubernetes.io/name=kopf-scheduler"
#: kubectl's names of the pod resource, as a TYPE/ prefix
POD_TYPES: Final = frozenset({"pod", "pods", "po"})
ENDPOINT_ENV: Final = "KOPF_SCHEDULER_ENDPOINT"
#: seconds the minted token lives: the API server's minimum
TOKEN_SECONDS: Final = 600
OUTPUTS: Final = ("wide", "json", "yaml")


class PluginError(Exception):
    """What went wrong, for the user; exit status 1."""


@dataclass(frozen=True, slots=True)
class Target:
    namespace: str
    name: str


def target(argument: str, *, flag_namespace: str | None, context_namespace: str | None) -> Target:
    """The pod an argument names, kubectl's way (see the module docstring)."""
    parts = argument.split("/")
    if len(parts) > 2 or not all(parts):
        raise PluginError(f"{argument!r}: give the pod as POD, pod/POD or NAMESPACE/POD")
    if len(parts) == 1 or parts[0] in POD_TYPES:
        return Target(flag_namespace or context_namespace or "default", parts[-1])
    if flag_namespace and flag_namespace != parts[0]:
        raise PluginError(f"{argument!r} is in namespace {parts[0]}, but -n says {flag_namespace}")
    return Target(parts[0], parts[1])


def _get(client: BlockingApi, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET `path` as the user: (status, decoded JSON or the text)."""
    response = client.get(path, headers=headers)
    if response.status == 0:
        raise PluginError(f"cannot reach the API server: {response.detail()}")
    return response.status, response.body


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("error") or body.get("message") or body)[:300]
    return str(body).strip()[:300]


def leader_pod(client: BlockingApi, *, namespace: str, lease: str) -> str:
    """The name of the pod that leads (or the only operator pod when there is no Lease)."""
    status, record = _get(client, paths.item("coordination.k8s.io/v1", "leases", lease, namespace=namespace))
    if status not in (200, 404):
        raise PluginError(f"cannot read Lease {namespace}/{lease}: HTTP {status} {_detail(record)}")
    holder = str(((record.get("spec") or {}) if status == 200 else {}).get("holderIdentity") or "")
    if holder:
        return holder.rpartition("_")[0] or holder
    selector = urllib.parse.quote(LEADER_LABEL)
    status, pods = _get(client, paths.collection("v1", "pods", namespace=namespace) + f"?labelSelector={selector}")
    if status != 200:
        raise PluginError(f"cannot list the operator's pods in {namespace}: HTTP {status} {_detail(pods)}")
    running = [
        str(p["metadata"]["name"]) for p in pods.get("items") or () if (p.get("status") or {}).get("phase") == "Running"
    ]
    if len(running) == 1:
        return running[0]
    if not running:
        raise PluginError(
            f"no leader in Lease {namespace}/{lease} and no running pod labelled {LEADER_LABEL};"
            f" an operator outside the cluster (kopf run, a port-forward): --endpoint URL or ${ENDPOINT_ENV}"
        )
    raise PluginError(
        f"no leader in Lease {namespace}/{lease}, and {len(running)} operator pods run: {', '.join(running)}"
    )


def _token(client: BlockingApi, *, namespace: str, account: str) -> str:
    """A short-lived token of the explain ServiceAccount for the audience the operator takes, requested as the user."""
    from ..telemetry.access import DELEGATED_AUDIENCE

    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [DELEGATED_AUDIENCE], "expirationSeconds": TOKEN_SECONDS},
    }
    response = client.post(paths.item("v1", "serviceaccounts", account, namespace=namespace, subresource="token"), body)
    if response.status == 0:
        raise PluginError(f"cannot reach the API server: {response.detail()}")
    if not response.ok or not isinstance(response.body, dict):
        hint = {
            403: f" (Role {DEFAULT_ACCOUNT} in {namespace} grants it: kubectl -n {namespace} create rolebinding"
            f" NAME --role {DEFAULT_ACCOUNT} --user YOU)",
            404: " (deploy/rbac.yaml and the chart create it; --explain-account names another)",
        }.get(response.status, "")
        raise PluginError(
            f"cannot request a token of ServiceAccount {namespace}/{account}: HTTP {response.status}"
            f" {_detail(response.body)}{hint}"
        )
    return str((response.body.get("status") or {}).get("token") or "")


def _attempt_through_proxy(args: argparse.Namespace, client: BlockingApi, pod: Target) -> tuple[Any, str]:
    """The leader's JSON explanation of `pod`, through the API server's pod proxy, and which pod answered."""
    from ..telemetry.access import DELEGATED_HEADER
    from .explain import attempt_path

    namespace = args.operator_namespace
    leader = leader_pod(client, namespace=namespace, lease=args.lease)
    headers = None
    if args.scheme == "https":
        headers = {DELEGATED_HEADER: f"Bearer {_token(client, namespace=namespace, account=args.explain_account)}"}
    path = paths.pod(namespace, f"{args.scheme}:{leader}:{args.port}", "proxy") + attempt_path(pod.namespace, pod.name)
    status, data = _get(client, path, headers)
    where = f"{namespace}/{leader}:{args.port}"
    if not 200 <= status < 300:
        raise PluginError(f"{where} answered HTTP {status}: {_detail(data)}")
    if not isinstance(data, dict):
        raise PluginError(f"{where} answered something that is not JSON: {str(data)[:200]!r}")
    return data, f"pod {where}"


def _attempt_at_endpoint(args: argparse.Namespace, credentials: Credentials, pod: Target) -> tuple[Any, str]:
    from .explain import endpoint_credentials, fetch

    endpoint = endpoint_credentials(
        args.endpoint, credentials, ca_file=args.endpoint_certificate_authority, insecure=args.endpoint_insecure
    )
    data, problem = fetch(args.endpoint, pod.namespace, pod.name, endpoint)
    if data is None:
        raise PluginError(problem)
    return data, args.endpoint


def explain(args: argparse.Namespace, client: BlockingApi, credentials: Credentials) -> int:
    pod = target(args.pod, flag_namespace=args.namespace, context_namespace=credentials.namespace)
    if args.endpoint:
        data, where = _attempt_at_endpoint(args, credentials, pod)
    else:
        data, where = _attempt_through_proxy(args, client, pod)
    if args.output in ("json", "yaml"):
        _dump(data, args.output)
        return 0
    from ..core.scheduling.explanation import from_json, render

    try:
        explanation = from_json(data)
    except ValueError as exc:
        raise PluginError(f"the operator answered something that is not an explanation: {exc}") from exc
    print(render(explanation))
    if args.output == "wide":
        if explanation.not_evaluated:
            print("\nnot evaluated (the search stopped early): " + ", ".join(explanation.not_evaluated))
        print(f"\nanswered by {where}")
    return 0


def _dump(data: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(data, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())


def policies(args: argparse.Namespace, client: BlockingApi, credentials: Credentials) -> int:
    status, found = _get(client, paths.collection("scheduling.kopf.dev/v1alpha1", "schedulingpolicies"))
    if status != 200:
        raise PluginError(f"cannot list SchedulingPolicies: HTTP {status} {_detail(found)}")
    items = sorted(found.get("items") or (), key=lambda i: i["metadata"]["name"])
    if args.names:
        known = {i["metadata"]["name"] for i in items}
        missing = [n for n in args.names if n not in known]
        if missing:
            raise PluginError(f'schedulingpolicies.scheduling.kopf.dev "{missing[0]}" not found')
        items = [i for i in items if i["metadata"]["name"] in args.names]
    if args.output in ("json", "yaml"):
        listed = items[0] if len(args.names) == 1 else {"apiVersion": "v1", "kind": "List", "items": items}
        _dump(listed, args.output)
        return 0
    wide = args.output == "wide"
    header = ("NAME", "SCHEDULER", "ACCEPTED", "REASON", "MESSAGE") + (("GENERATION", "ACTIVE") if wide else ())
    rows: list[tuple[str, ...]] = [header]
    for item in items:
        accepted: dict[str, Any] = next(
            (c for c in (item.get("status") or {}).get("conditions") or () if c.get("type") == "Accepted"), {}
        )
        message = str(accepted.get("message") or "")
        row: tuple[str, ...] = (
            str(item["metadata"]["name"]),
            str((item.get("spec") or {}).get("schedulerName") or ""),
            str(accepted.get("status") or "Unknown"),
            str(accepted.get("reason") or ""),
            message if wide or len(message) <= 80 else message[:77] + "...",
        )
        if wide:
            active = (item.get("status") or {}).get("activeGeneration")
            row += (str(item["metadata"].get("generation") or ""), "" if active is None else str(active))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


# --------------------------------------------------------------------------- the command line


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 with ``error: ...``, as kubectl's do."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message}\nSee '{self.prog} --help' for usage.\n")


def _common(suppress: bool) -> _Parser:
    """The flags that go before or after the command (kubectl's global flags); on the commands their
    default is left out, so one given before the command is not reset by the command's parser."""
    default = argparse.SUPPRESS if suppress else None
    p = _Parser(add_help=False)
    p.add_argument("--kubeconfig", default=default, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument(
        "-n", "--namespace", default=default, help="the pod's namespace (default: the context's, else default)"
    )
    p.add_argument(
        "--operator-namespace",
        default=argparse.SUPPRESS if suppress else DEFAULT_NAMESPACE,
        help=f"where the operator runs (default {DEFAULT_NAMESPACE})",
    )
    return p


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kubectl kopf-scheduler",
        description=__doc__.split("\n\n")[0],
        parents=[_common(suppress=False)],
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    common = _common(suppress=True)
    e = sub.add_parser(
        "explain",
        parents=[common],
        help="why a pod went where it went, or is pending (the leader's last attempt)",
        description="Why a pod went where it went, or is pending: the leading operator's last attempt.",
    )
    e.add_argument("pod", metavar="POD", help="POD, pod/POD or NAMESPACE/POD")
    e.add_argument("-o", "--output", choices=OUTPUTS, help="wide, json or yaml (default: the tables)")
    e.add_argument("--lease", default=DEFAULT_LEASE, help=f"the leader-election Lease (default {DEFAULT_LEASE})")
    e.add_argument(
        "--explain-account",
        default=DEFAULT_ACCOUNT,
        metavar="NAME",
        help=f"the ServiceAccount whose token the operator is asked with (default {DEFAULT_ACCOUNT})",
    )
    e.add_argument("--port", type=int, default=SECURE_PORT, help=f"the operator's secure port (default {SECURE_PORT})")
    e.add_argument(
        "--scheme", choices=("https", "http"), default="https", help="http for an operator run with --insecure-port"
    )
    e.add_argument(
        "--endpoint",
        default=os.environ.get(ENDPOINT_ENV) or None,
        metavar="URL",
        help=f"ask this URL, not a pod found in the cluster (default ${ENDPOINT_ENV})",
    )
    e.add_argument(
        "--endpoint-certificate-authority", metavar="FILE", help="with an https --endpoint: verify it with this CA"
    )
    e.add_argument(
        "--endpoint-insecure", action="store_true", help="with an https --endpoint: take its certificate unverified"
    )
    e.set_defaults(func=explain)
    pol = sub.add_parser(
        "policies",
        parents=[common],
        help="the SchedulingPolicies, the scheduler names they serve and their state",
        description="The SchedulingPolicies, the scheduler names they serve and their state.",
    )
    pol.add_argument("names", nargs="*", metavar="NAME")
    pol.add_argument("-o", "--output", choices=OUTPUTS, help="wide, json or yaml (default: the table)")
    pol.set_defaults(func=policies)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from ..edge.blocking import BlockingApi
    from ..edge.credentials import CredentialsError, load_credentials

    try:
        credentials = load_credentials(args.kubeconfig)
    except CredentialsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    client = BlockingApi(credentials)
    try:
        return int(args.func(args, client, credentials))
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()


# --------------------------------------------------------------------------- completion

#: cobra's ShellCompDirectiveNoFileComp: offer no file names
NO_FILES: Final = ":4"
#: seconds a completion waits for the API server
COMPLETION_TIMEOUT: Final = 5.0


def completions(words: Sequence[str], lookup: Any) -> list[str]:
    """What to offer for the last of `words` (the plugin's arguments; the last is being typed), kubectl's
    plugin completion protocol. `lookup(kind, namespace)` lists names ("namespaces", "pods", "policies")."""
    *before, word = words or [""]
    flags_with_values = {"-n", "--namespace", "--operator-namespace", "-o", "--output", "--kubeconfig"}
    flags_with_values |= {"--lease", "--explain-account", "--port", "--scheme", "--endpoint"}
    flags_with_values |= {"--endpoint-certificate-authority"}
    previous = before[-1] if before else ""
    if previous in ("-o", "--output"):
        return [o for o in OUTPUTS if o.startswith(word)]
    if previous in ("-n", "--namespace", "--operator-namespace"):
        return [n for n in lookup("namespaces", "") if n.startswith(word)]
    if previous == "--scheme":
        return [s for s in ("https", "http") if s.startswith(word)]
    if previous in flags_with_values:
        return []
    positional: list[str] = []
    namespace = ""
    skip = False
    for i, w in enumerate(before):
        if skip:
            skip = False
            continue
        if w in flags_with_values:
            skip = True
            if w in ("-n", "--namespace") and i + 1 < len(before):
                namespace = before[i + 1]
            continue
        if not w.startswith("-"):
            positional.append(w)
    command = positional[0] if positional else ""
    if not command:
        if word.startswith("-"):
            return [f for f in ("--kubeconfig", "--namespace", "--operator-namespace") if f.startswith(word)]
        return [c for c in ("explain", "policies") if c.startswith(word)]
    if word.startswith("-"):
        flags = ["--kubeconfig", "--namespace", "--operator-namespace", "--output"]
        if command == "explain":
            flags += ["--lease", "--explain-account", "--port", "--scheme", "--endpoint"]
            flags += ["--endpoint-certificate-authority", "--endpoint-insecure"]
        return [f for f in flags if f.startswith(word)]
    if command == "policies":
        return [p for p in lookup("policies", "") if p.startswith(word) and p not in positional[1:]]
    if command == "explain" and len(positional) == 1:
        prefix, slash, partial = word.rpartition("/")
        if not slash:
            return [p for p in lookup("pods", namespace) if p.startswith(word)]
        if prefix in POD_TYPES:
            return [f"{prefix}/{p}" for p in lookup("pods", namespace) if p.startswith(partial)]
        return [f"{prefix}/{p}" for p in lookup("pods", prefix) if p.startswith(partial)]
    return []


def complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-kopf_scheduler WORD...``: one candidate a line, then cobra's directive."""
    words = list(sys.argv[1:] if argv is None else argv)
    kubeconfig = next((words[i + 1] for i, w in enumerate(words[:-2]) if w == "--kubeconfig"), None)
    state: dict[str, Any] = {}

    def lookup(kind: str, namespace: str) -> list[str]:
        from ..edge.blocking import BlockingApi
        from ..edge.credentials import CredentialsError, load_credentials

        try:
            if "client" not in state:
                credentials = load_credentials(kubeconfig)
                state["namespace"] = credentials.namespace or "default"
                state["client"] = BlockingApi(credentials, timeout=COMPLETION_TIMEOUT)
            client: BlockingApi = state["client"]
            path = {
                "namespaces": paths.collection("v1", "namespaces"),
                "pods": paths.collection("v1", "pods", namespace=namespace or state["namespace"]),
                "policies": paths.collection("scheduling.kopf.dev/v1alpha1", "schedulingpolicies"),
            }[kind]
            response = client.get(path)
        except (CredentialsError, OSError, ValueError):
            return []
        if not response.ok or not isinstance(response.body, dict):
            return []
        return sorted(str(i["metadata"]["name"]) for i in response.body.get("items") or ())

    try:
        for candidate in completions(words, lookup):
            print(candidate)
        print(NO_FILES)
    finally:
        if "client" in state:
            state["client"].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
