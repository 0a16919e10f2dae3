"""`kubectl kopf-scheduler` against the real control plane: the leader found through its Lease, its
attempt log read through the API server's pod proxy (no port-forward), the policies listed.

There is no kubelet here, so the operator runs as a local process and a Pod object stands for it:
named as the operator's identity says (``$POD_NAME``), bound to a node of its own, its
``status.podIP`` this machine's address (the API server refuses to proxy to loopback), where the
operator's metrics port listens on every interface.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

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


@pytest.fixture
def operator_pod(
    api: client.ApiClient,
    kubeconfig: Path,
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    tmp_path: Path,
) -> Iterator[tuple[Operator, str, str]]:
    """A leader-elected operator (admin: its Lease is in a namespace of its own; `sa_kubeconfig` installs
    the CRD), and the Pod object that stands for it there."""
    core = client.CoreV1Api(api)
    namespace = f"kubectl-plugin-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    pod_name = f"kopf-scheduler-{uuid.uuid4().hex[:6]}"
    port = free_port()
    env = {
        **os.environ,
        "POD_NAME": pod_name,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2] / "operator"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    args = ["--policy", POLICY, "--leader-elect", "--lease-namespace", namespace, "--metrics-port", str(port)]
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
            core.delete_namespace(namespace)


def plugin(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script as kubectl runs it (``kubectl kopf-scheduler ...``)."""
    script = shutil.which("kubectl-kopf_scheduler")
    command = [script] if script else [sys.executable, "-m", "kopf_scheduler.commands.kubectl"]
    return subprocess.run(
        [*command, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60
    )


def test_explain_finds_the_leader_and_reads_its_attempt_through_the_pod_proxy(
    operator_pod: tuple[Operator, str, str], api: client.ApiClient, kubeconfig: Path, namespace: str
) -> None:
    op, operator_namespace, port = operator_pod
    with Group(api, scheduler=POLICY) as group:
        group.nodes(2, labels={"kubectl-plugin": group.id})
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(namespace, group.pod("picky", node_selector={"kubectl-plugin": group.id}))
        core.create_namespaced_pod(namespace, group.pod("nowhere", node_selector={"kubectl-plugin": "none"}))

        def explained(pod: str) -> str | None:
            done = plugin(
                kubeconfig, "--operator-namespace", operator_namespace, "explain", f"{namespace}/{pod}", "--port", port
            )
            return done.stdout if done.returncode == 0 else None

        placed = wait(op, lambda: explained("picky"), timeout=60, message="kubectl kopf-scheduler explain answers")
        assert f"pod {namespace}/picky: scheduled to " in placed
        pending = wait(op, lambda: explained("nowhere"), timeout=60, message="the pending pod is explained")
        assert "didn't match Pod's node affinity/selector" in pending

        as_json = plugin(
            kubeconfig,
            "--operator-namespace",
            operator_namespace,
            "explain",
            f"{namespace}/picky",
            "-o",
            "json",
            "--port",
            port,
        )
        assert as_json.returncode == 0 and '"outcome": "scheduled"' in as_json.stdout

    missing = plugin(
        kubeconfig, "--operator-namespace", operator_namespace, "explain", f"{namespace}/never-created", "--port", port
    )
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr and "no scheduling attempt" in missing.stderr


def test_policies_lists_scheduler_names_and_their_state(
    operator_pod: tuple[Operator, str, str], kubeconfig: Path
) -> None:
    listed = plugin(kubeconfig, "policies")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(f"{POLICY} "))
    assert row.split()[:3] == [POLICY, POLICY, "True"]
    assert listed.stdout.splitlines()[0].split() == ["NAME", "SCHEDULER", "ACCEPTED", "REASON", "MESSAGE"]


def test_a_missing_operator_is_said_plainly(kubeconfig: Path, namespace: str) -> None:
    done = plugin(kubeconfig, "--operator-namespace", namespace, "explain", "default/anything")
    assert done.returncode == 1
    assert "no leader in Lease" in done.stderr and "no running pod labelled" in done.stderr
