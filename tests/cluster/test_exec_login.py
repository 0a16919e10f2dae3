"""``simulate --from-cluster`` logged in by an ``exec`` plugin, as kubectl logs in to EKS, GKE or AKS.

The kubeconfig holds no credential of its own: its user is a plugin that asks the API server for a
token of the kopf-scheduler ServiceAccount (TokenRequest, with the admin's certificate, as
``aws eks get-token`` asks AWS) and prints it as an ExecCredential. The ServiceAccount has the
ClusterRole of deploy/rbac.yaml (fixture ``sa_kubeconfig``) plus ``list`` on PriorityClasses, which
``simulate`` reads and the operator does not.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_helpers import Group
from kubernetes import client

from kopf_scheduler.cli import main
from kopf_scheduler.cluster import ControlPlane

SERVICE_ACCOUNT = ("kopf-scheduler", "kopf-scheduler")  # namespace, name: deploy/

PLUGIN = textwrap.dedent('''\
    """An exec credential plugin: a TokenRequest for a ServiceAccount, printed as an ExecCredential.
    argv: server, CA, admin certificate, admin key, namespace, name, runs file, and "bad-first" or "good"."""
    import json, pathlib, ssl, sys, urllib.request
    server, ca, cert, key, namespace, name, runs, mode = sys.argv[1:]
    n = int(pathlib.Path(runs).read_text()) + 1 if pathlib.Path(runs).exists() else 1
    pathlib.Path(runs).write_text(str(n))
    if mode == "bad-first" and n == 1:
        status = {"token": "not-a-token-the-api-server-knows"}  # no expiry: only a 401 makes the client ask again
    else:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
        body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}).encode()
        request = urllib.request.Request(
            f"{server}/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            data=body, method="POST", headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=ctx, timeout=10) as response:
            answer = json.load(response)["status"]
        status = {"token": answer["token"], "expirationTimestamp": answer["expirationTimestamp"]}
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
''')

EXTRA_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kopf-scheduler-test-simulate}
rules:
  - {apiGroups: [scheduling.k8s.io], resources: [priorityclasses], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kopf-scheduler-test-simulate}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kopf-scheduler-test-simulate}
subjects:
  - {kind: ServiceAccount, name: kopf-scheduler, namespace: kopf-scheduler}
"""


@pytest.fixture(scope="module")
def service_account(sa_kubeconfig: Path, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The deploy/ ServiceAccount with its RBAC, and list on PriorityClasses for simulate."""
    rbac = tmp_path_factory.mktemp("rbac") / "simulate.yaml"
    rbac.write_text(EXTRA_RBAC)
    control_plane.kubectl("apply", "-f", str(rbac))
    try:
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", str(rbac))


class ExecUser:
    """A kubeconfig whose user is the plugin, and how often the plugin ran."""

    def __init__(self, folder: Path, control_plane: ControlPlane, *, mode: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plugin.py").write_text(PLUGIN)
        self.runs_path = folder / "runs"
        args = [
            str(folder / "plugin.py"), control_plane.server, str(control_plane.ca_cert),
            str(control_plane.pki_dir / "admin.crt"), str(control_plane.pki_dir / "admin.key"), *SERVICE_ACCOUNT, str(self.runs_path), mode,
        ]  # fmt: skip
        self.kubeconfig = folder / "kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "exec",
            "clusters": [{"name": "local", "cluster": {"server": control_plane.server, "certificate-authority": str(control_plane.ca_cert)}}],
            "users": [{"name": "sa-by-plugin", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never", "command": sys.executable, "args": args,
            }}}],
            "contexts": [{"name": "exec", "context": {"cluster": "local", "user": "sa-by-plugin"}}],
        }))  # fmt: skip

    @property
    def runs(self) -> int:
        return int(self.runs_path.read_text()) if self.runs_path.exists() else 0


def simulate_pending(capsys: pytest.CaptureFixture[str], user: ExecUser, api: client.ApiClient, namespace: str) -> tuple[list[tuple[str, bool]], str]:
    """A pending pod for a scheduler nobody runs, simulated from the cluster as the plugin's user:
    [(pod, placed on this test's node)], and stderr."""
    with Group(api) as group:
        (node,) = group.nodes(1)
        queue = f"e2e-exec-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(api).create_namespaced_pod(namespace, group.pod("pending", queue))
        rc = main(["simulate", "--from-cluster", "--kubeconfig", str(user.kubeconfig), "--scheduler-name", queue, "--output", "json"])
        out = capsys.readouterr()
        assert rc == 0, out.err
        return [(p["pod"], p["node"] == node) for p in json.loads(out.out)["placements"]], out.err


def test_simulate_from_cluster_logs_in_through_an_exec_plugin(
    service_account: None, control_plane: ControlPlane, api: client.ApiClient, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = ExecUser(tmp_path, control_plane, mode="good")
    placements, _ = simulate_pending(capsys, user, api, namespace)
    assert placements == [(f"{namespace}/pending", True)]  # it listed the nodes and the pending pod
    assert user.runs == 1  # once, at login: the token lasts 10 minutes


def test_a_401_runs_the_plugin_again_and_the_list_is_asked_once_more(
    service_account: None, control_plane: ControlPlane, api: client.ApiClient, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = ExecUser(tmp_path, control_plane, mode="bad-first")
    placements, _ = simulate_pending(capsys, user, api, namespace)
    assert placements == [(f"{namespace}/pending", True)]
    assert user.runs == 2  # the first token got a 401 on the first list; the second run's token listed everything
