"""``simulate --from-cluster``, ``kopf-scheduler run`` and ``kopf run -m kopf_scheduler.kube.main`` logged
in by an ``exec`` plugin, as kubectl logs in to EKS, GKE or AKS (one loader for every command).

The kubeconfig holds no credential of its own: its user is a plugin that asks the API server for a
token of the kopf-scheduler ServiceAccount (TokenRequest, with the admin's certificate, as
``aws eks get-token`` asks AWS) and prints it as an ExecCredential. The ServiceAccount has the
ClusterRole of deploy/rbac.yaml (fixture ``sa_kubeconfig``) plus ``list`` on PriorityClasses, which
``simulate`` reads and the operator does not. The operator's two entries become ready and bind a pod
through it: Kopf's watches, the informers and every write log in with the plugin's token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_helpers import (
    ROOT,
    Group,
    Operator,
    create_policy,
    delete_policy,
    make_pod_body,
    wait,
    wait_accepted,
    wait_for,
)
from kubernetes import client, config

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.cluster.controlplane import free_port
from kopf_scheduler.commands import main

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
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}
        body = json.dumps(request).encode()
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
def service_account(
    sa_kubeconfig: Path, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
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
            str(control_plane.pki_dir / "admin.crt"), str(control_plane.pki_dir / "admin.key"), *SERVICE_ACCOUNT,
            str(self.runs_path), mode,
        ]  # fmt: skip
        self.kubeconfig = folder / "kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "exec",
            "clusters": [{"name": "local", "cluster": {
                "server": control_plane.server, "certificate-authority": str(control_plane.ca_cert),
            }}],
            "users": [{"name": "sa-by-plugin", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never",
                "command": sys.executable, "args": args,
            }}}],
            "contexts": [{"name": "exec", "context": {"cluster": "local", "user": "sa-by-plugin"}}],
        }))  # fmt: skip

    @property
    def runs(self) -> int:
        return int(self.runs_path.read_text()) if self.runs_path.exists() else 0


def simulate_pending(
    capsys: pytest.CaptureFixture[str], user: ExecUser, api: client.ApiClient, namespace: str
) -> tuple[list[tuple[str, bool]], str]:
    """A pending pod for a scheduler nobody runs, simulated from the cluster as the plugin's user:
    [(pod, placed on this test's node)], and stderr."""
    with Group(api) as group:
        (node,) = group.nodes(1)
        queue = f"e2e-exec-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(api).create_namespaced_pod(namespace, group.pod("pending", queue))
        rc = main(
            [
                "simulate",
                "--from-cluster",
                "--kubeconfig",
                str(user.kubeconfig),
                "--scheduler-name",
                queue,
                "--output",
                "json",
            ]
        )
        out = capsys.readouterr()
        assert rc == 0, out.err
        return [(p["pod"], p["node"] == node) for p in json.loads(out.out)["placements"]], out.err


def test_simulate_from_cluster_logs_in_through_an_exec_plugin(
    service_account: None,
    control_plane: ControlPlane,
    api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = ExecUser(tmp_path, control_plane, mode="good")
    placements, _ = simulate_pending(capsys, user, api, namespace)
    assert placements == [(f"{namespace}/pending", True)]  # it listed the nodes and the pending pod
    assert user.runs == 1  # once, at login: the token lasts 10 minutes


def test_a_401_runs_the_plugin_again_and_the_list_is_asked_once_more(
    service_account: None,
    control_plane: ControlPlane,
    api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = ExecUser(tmp_path, control_plane, mode="bad-first")
    placements, _ = simulate_pending(capsys, user, api, namespace)
    assert placements == [(f"{namespace}/pending", True)]
    assert user.runs == 2  # the first token got a 401 on the first list; the second run's token listed everything


def readyz(port: int) -> str:
    """The operator's /readyz text ("" while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as exc:
        return str(exc.read().decode())
    except OSError:
        return ""


def test_kopf_scheduler_run_logs_in_through_an_exec_plugin(
    service_account: None,
    control_plane: ControlPlane,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    tmp_path: Path,
) -> None:
    user = ExecUser(tmp_path / "exec", control_plane, mode="good")
    name = f"e2e-exec-{uuid.uuid4().hex[:6]}"
    port = free_port()
    with Group(api, scheduler=name) as group:
        group.nodes(2)
        create_policy(custom, name, {"schedulerName": name})
        op = Operator(tmp_path / "operator.log", ["--policy", name, "--insecure-port", str(port)], user.kubeconfig)
        try:
            wait_accepted(custom, name, op)  # Kopf watched the policy, the Api wrote its status
            wait(
                op, lambda: readyz(port).startswith("ok"), timeout=30, message="the operator is ready"
            )  # the informers listed
            core = client.CoreV1Api(api)
            core.create_namespaced_pod(namespace, group.pod("pending"))
            node = wait(
                op,
                lambda: core.read_namespaced_pod("pending", namespace).spec.node_name,
                timeout=30,
                message="the pod is bound",
            )
            assert node in group.names
            text = op.text()
            assert (
                f"credentials from --kubeconfig {user.kubeconfig}" in text
            )  # the start-up line says where they came from
            assert "Traceback" not in text
            assert user.runs >= 1
        finally:
            op.stop()
            delete_policy(custom, name)


def test_kopf_run_logs_in_through_an_exec_plugin(tmp_path: Path) -> None:
    """The development entry with KUBECONFIG naming the plugin's kubeconfig; on a control plane of its
    own, as tests/cluster/test_kopf_run.py (it serves every policy it sees)."""
    with ControlPlane(tmp_path / "cp", die_with_parent=True) as cp:
        cp.kubectl("apply", "-f", str(ROOT / "crds" / "schedulingpolicy.yaml"))
        cp.kubectl("wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=60s")
        for manifest in ("namespace.yaml", "rbac.yaml"):
            cp.kubectl("apply", "-f", str(ROOT / "deploy" / manifest))
        user = ExecUser(tmp_path / "exec", cp, mode="good")
        api = config.new_client_from_config(str(cp.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        nodes = Group(api).nodes(2)
        create_policy(custom, "dev", {"schedulerName": "dev"})
        path = os.pathsep.join([str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "KUBECONFIG": str(user.kubeconfig), "PYTHONPATH": path}
        log = tmp_path / "kopf-run.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", "-m", "kopf_scheduler.kube.main", "-A", "--standalone"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            )  # fmt: skip
        try:
            wait_accepted(custom, "dev", None)
            core.create_namespaced_pod("default", make_pod_body("p", scheduler_name="dev"))
            node = wait_for(
                lambda: core.read_namespaced_pod("p", "default").spec.node_name, timeout=30, message="p bound"
            )
            assert node in nodes
            text = log.read_text(errors="replace")
            assert "credentials from $KUBECONFIG" in text and "Traceback" not in text
            assert user.runs >= 1
        except BaseException:
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
            api.close()
