"""`kubectl kopf-scheduler` against the real control plane: the leader found through its Lease, its
attempt log read on its secure port through the API server's pod proxy (no port-forward), RBAC deciding
at both ends, the policies listed.

There is no kubelet here, so the operator runs as a local process and a Pod object stands for it:
named as the operator's identity says (``$POD_NAME``), bound to a node of its own, its
``status.podIP`` this machine's address (the API server refuses to proxy to loopback), where the
operator's secure port listens on every interface. deploy/rbac.yaml's explain ServiceAccount and Role
are created in the operator's namespace as the Helm chart would create them there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import ROOT, Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane

POLICY = "e2e-kubectl"


def host_address() -> str:
    """This machine's first non-loopback IPv4 address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = str(s.getsockname()[0])
    assert not address.startswith("127."), "the pod proxy needs a non-loopback address"
    return address


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def explain_rbac(namespace: str) -> list[dict[str, Any]]:
    """deploy/rbac.yaml's explain ServiceAccount, its ClusterRoleBinding and Role, moved to `namespace`."""
    wanted = {("ServiceAccount", "kopf-scheduler-explain"), ("Role", "kopf-scheduler-explain")}
    wanted.add(("ClusterRoleBinding", "kopf-scheduler-explain"))
    found = []
    for obj in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()):
        if (obj["kind"], obj["metadata"]["name"]) in wanted:
            if obj["kind"] == "ClusterRoleBinding":
                obj["metadata"]["name"] = f"{namespace}-explain"
                obj["subjects"][0]["namespace"] = namespace
            else:
                obj["metadata"]["namespace"] = namespace
            found.append(obj)
    assert len(found) == 3
    return found


@pytest.fixture
def operator_pod(
    api: client.ApiClient,
    kubeconfig: Path,
    sa_kubeconfig: Path,  # applies deploy/rbac.yaml: the reader ClusterRoles
    control_plane: ControlPlane,
    custom: client.CustomObjectsApi,
    tmp_path: Path,
) -> Iterator[tuple[Operator, str, str]]:
    """A leader-elected operator serving securely (admin: its Lease is in a namespace of its own), and
    the Pod object that stands for it there."""
    core = client.CoreV1Api(api)
    namespace = f"kubectl-plugin-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    rbac = tmp_path / "explain-rbac.yaml"
    rbac.write_text(yaml.safe_dump_all(explain_rbac(namespace)))
    control_plane.kubectl("apply", "-f", str(rbac))
    pod_name = f"kopf-scheduler-{uuid.uuid4().hex[:6]}"
    port = free_port()
    env = {
        **os.environ,
        "POD_NAME": pod_name,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["--policy", POLICY, "--leader-elect", "--lease-namespace", namespace, "--secure-port", str(port)]
    op = Operator(tmp_path / "operator.log", args, kubeconfig, env=env)
    with Group(api) as group:
        node = group.nodes(1)[0]
        body = {
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "kopf-scheduler"},
            },
            "spec": {"nodeName": node, "containers": [{"name": "operator", "image": "kopf-scheduler"}]},
        }
        core.create_namespaced_pod(namespace, body)
        address = host_address()
        status = {"status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}]}}
        core.patch_namespaced_pod_status(pod_name, namespace, status)
        try:
            create_policy(custom, POLICY, {"schedulerName": POLICY})
            wait_accepted(custom, POLICY, op)
            yield op, namespace, str(port)
        finally:
            delete_policy(custom, POLICY)
            op.stop()
            client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(f"{namespace}-explain")
            core.delete_namespace(namespace)


def plugin(kubeconfig: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script as kubectl runs it (``kubectl kopf-scheduler ...``)."""
    script = shutil.which("kubectl-kopf_scheduler")
    command = [script] if script else [sys.executable, "-m", "kopf_scheduler.commands.kubectl"]
    return subprocess.run(
        [*command, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in (env or os.environ).items() if k != "KOPF_SCHEDULER_ENDPOINT"},
    )


def test_explain_finds_the_leader_and_reads_its_attempt_through_the_pod_proxy(
    operator_pod: tuple[Operator, str, str], api: client.ApiClient, kubeconfig: Path, namespace: str
) -> None:
    op, operator_namespace, port = operator_pod
    where = ["--operator-namespace", operator_namespace]
    with Group(api, scheduler=POLICY) as group:
        group.nodes(2, labels={"kubectl-plugin": group.id})
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(namespace, group.pod("picky", node_selector={"kubectl-plugin": group.id}))
        core.create_namespaced_pod(namespace, group.pod("nowhere", node_selector={"kubectl-plugin": "none"}))

        def explained(*pod: str) -> str | None:
            done = plugin(kubeconfig, *where, "explain", "--port", port, *pod)
            return done.stdout if done.returncode == 0 else None

        placed = wait(op, lambda: explained(f"{namespace}/picky"), timeout=60, message="explain answers")
        assert f"pod {namespace}/picky: scheduled to " in placed
        pending = wait(op, lambda: explained("-n", namespace, "nowhere"), timeout=60, message="pending explained")
        assert "didn't match Pod's node affinity/selector" in pending
        assert (explained("-n", namespace, "pod/nowhere") or "").splitlines()[0] == pending.splitlines()[0]

        as_json = plugin(kubeconfig, *where, "explain", f"{namespace}/picky", "-o", "json", "--port", port)
        assert as_json.returncode == 0 and json.loads(as_json.stdout)["outcome"] == "scheduled"
        as_yaml = plugin(kubeconfig, *where, "-n", namespace, "explain", "picky", "-o", "yaml", "--port", port)
        ageless = [{**d, "ageSeconds": 0} for d in (yaml.safe_load(as_yaml.stdout), json.loads(as_json.stdout))]
        assert as_yaml.returncode == 0 and ageless[0] == ageless[1]
        wide = plugin(kubeconfig, *where, "explain", "-n", namespace, "picky", "-o", "wide", "--port", port)
        assert wide.returncode == 0 and f"answered by pod {operator_namespace}/kopf-scheduler-" in wide.stdout

    missing = plugin(kubeconfig, *where, "explain", f"{namespace}/never-created", "--port", port)
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr and "no scheduling attempt" in missing.stderr


def test_rbac_decides_who_may_explain_at_the_api_server_and_at_the_operator(
    operator_pod: tuple[Operator, str, str], control_plane: ControlPlane, api: client.ApiClient
) -> None:
    """A user needs the explain Role in the operator's namespace (leases, pods/proxy, the token); the
    explain account needs the debug reader, which the operator asks the API server about."""
    op, operator_namespace, port = operator_pod
    user = f"bob-{uuid.uuid4().hex[:6]}"
    bob = control_plane.user_kubeconfig(user)
    where = ["--operator-namespace", operator_namespace, "explain", "--port", port, "default/anything"]
    refused = plugin(bob, *where)
    assert refused.returncode == 1 and "forbidden" in refused.stderr and user in refused.stderr

    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role_binding(operator_namespace, {
        "metadata": {"name": "bob-explains"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kopf-scheduler-explain"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })  # fmt: skip
    # bob now reaches the operator, which answers that it keeps no attempt of that pod
    answered = wait(op, lambda: (d := plugin(bob, *where)).returncode == 1 and "HTTP 404" in d.stderr and d)
    assert "no scheduling attempt of default/anything" in answered.stderr

    # an account the operator's reviews do not let read /debug: 403 from the operator itself
    client.CoreV1Api(api).create_namespaced_service_account(operator_namespace, {"metadata": {"name": "nobody"}})
    forbidden = plugin(control_plane.kubeconfig, *where[:5], "--explain-account", "nobody", "default/x")
    assert forbidden.returncode == 1 and "HTTP 403" in forbidden.stderr
    assert f'User "system:serviceaccount:{operator_namespace}:nobody" cannot get path' in forbidden.stderr


def test_endpoint_asks_a_url_with_the_users_own_credentials(
    operator_pod: tuple[Operator, str, str], kubeconfig: Path, control_plane: ControlPlane
) -> None:
    """No Lease or pod to find (an operator under `kopf run`, or through a port-forward): the URL is
    asked directly, over https with the kubeconfig's own credentials."""
    op, _, port = operator_pod
    url = f"https://127.0.0.1:{port}"
    admin = plugin(kubeconfig, "explain", "default/none", "--endpoint", url, "--endpoint-insecure")
    assert admin.returncode == 1 and "HTTP 404" in admin.stderr  # system:masters reads /debug
    unverified = plugin(kubeconfig, "explain", "default/none", "--endpoint", url)
    assert unverified.returncode == 1 and "--insecure-skip-tls-verify" in unverified.stderr
    stranger = control_plane.user_kubeconfig(f"carol-{uuid.uuid4().hex[:6]}")
    env = {**os.environ, "KOPF_SCHEDULER_ENDPOINT": url}
    script = shutil.which("kubectl-kopf_scheduler") or "kubectl-kopf_scheduler"
    refused = subprocess.run(
        [script, "--kubeconfig", str(stranger), "explain", "default/none", "--endpoint-insecure"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert refused.returncode == 1 and "HTTP 403" in refused.stderr and "cannot get path" in refused.stderr


def test_policies_lists_scheduler_names_and_their_state(
    operator_pod: tuple[Operator, str, str], kubeconfig: Path
) -> None:
    listed = plugin(kubeconfig, "policies")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(f"{POLICY} "))
    assert row.split()[:3] == [POLICY, POLICY, "True"]
    assert listed.stdout.splitlines()[0].split() == ["NAME", "SCHEDULER", "ACCEPTED", "REASON", "MESSAGE"]
    one = plugin(kubeconfig, "policies", POLICY, "-o", "yaml")
    assert one.returncode == 0 and yaml.safe_load(one.stdout)["spec"]["schedulerName"] == POLICY
    unknown = plugin(kubeconfig, "policies", "no-such-policy")
    assert unknown.returncode == 1 and '"no-such-policy" not found' in unknown.stderr


def test_a_missing_operator_is_said_plainly(kubeconfig: Path, namespace: str) -> None:
    done = plugin(kubeconfig, "--operator-namespace", namespace, "explain", "default/anything")
    assert done.returncode == 1
    assert "no leader in Lease" in done.stderr and "no running pod labelled" in done.stderr
    assert "--endpoint URL" in done.stderr
