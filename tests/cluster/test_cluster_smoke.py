"""The local control plane is a real Kubernetes API: smoke tests of everything the project relies on."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_helpers import create_nodes, delete_all_nodes, make_pod_body, wait_for
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kopf_scheduler.cluster import ControlPlane, GoNotFoundError, Kwok, PortInUseError, ensure_binaries, ensure_kwok
from kopf_scheduler.cluster.controlplane import _proc_start_time
from kopf_scheduler.cluster.kwok import KWOK_NODE_ANNOTATION, POD_CIDR

pytestmark = pytest.mark.cluster

OPERATOR_DIR = Path(__file__).resolve().parents[2] / "operator"


@pytest.fixture
def nodes(api: client.ApiClient, kwok: Kwok) -> Iterator[list[str]]:
    """Two KWOK nodes in two zones, Ready, removed afterwards (nodes are cluster-wide)."""
    names = create_nodes(api, 2, zones=["zone-a", "zone-b"], name_prefix=f"smoke-{uuid.uuid4().hex[:4]}-", kwok=True)
    try:
        kwok.wait_nodes_ready(names, timeout=30)
        yield names
    finally:
        delete_all_nodes(api)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `kopf-scheduler ARGS` in a fresh interpreter (as a user would) and capture its output."""
    environ = dict(os.environ if env is None else env)
    environ["PYTHONPATH"] = str(OPERATOR_DIR)
    return subprocess.run(
        [sys.executable, "-m", "kopf_scheduler.commands", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_readyz_via_our_kubectl(control_plane: ControlPlane) -> None:
    assert control_plane.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.37.2"


def test_kwok_makes_nodes_ready_as_created(api: client.ApiClient, nodes: list[str]) -> None:
    """KWOK's node-initialize stage writes a kubelet's conditions once and keeps what the node was created with."""
    core = client.CoreV1Api(api)
    for i, (name, zone) in enumerate(zip(nodes, ["zone-a", "zone-b"])):
        node = core.read_node(name)
        assert node.metadata.annotations[KWOK_NODE_ANNOTATION[0]] == KWOK_NODE_ANNOTATION[1]
        assert node.metadata.labels["topology.kubernetes.io/zone"] == zone
        assert node.status.allocatable == {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        assert node.status.capacity == node.status.allocatable
        conditions = {c.type: (c.status, c.reason) for c in node.status.conditions}
        assert conditions["Ready"] == ("True", "KubeletReady")
        assert {conditions[k][0] for k in ("MemoryPressure", "DiskPressure", "PIDPressure")} == {"False"}
        assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [f"10.128.0.{i + 1}"]
        assert not node.spec.taints  # TaintNodesByCondition is off: no not-ready taint that nobody would lift


def test_kwok_leaves_other_nodes_alone(api: client.ApiClient, nodes: list[str]) -> None:
    """Only annotated nodes are KWOK's: a node created NotReady by a test stays NotReady."""
    core = client.CoreV1Api(api)
    [other] = create_nodes(api, 1, conditions={"Ready": "False"}, name_prefix=f"smoke-other-{uuid.uuid4().hex[:4]}-")
    wait_for(lambda: all(_ready(core, n) for n in nodes), timeout=10)  # KWOK has been at work meanwhile
    assert not _ready(core, other)
    # (the controller manager's TTL controller annotates every node: node.alpha.kubernetes.io/ttl)
    assert KWOK_NODE_ANNOTATION[0] not in (core.read_node(other).metadata.annotations or {})


def _ready(core: client.CoreV1Api, name: str) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in core.read_node(name).status.conditions or [])


def test_bind_pod_with_custom_scheduler_name(api: client.ApiClient, namespace: str, nodes: list[str]) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, make_pod_body("p", scheduler_name="kopf-scheduler-smoke"))
    assert core.read_namespaced_pod("p", namespace).spec.node_name is None

    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[1]},
    }
    # _preload_content=False: the client cannot deserialize the Status that binding returns.
    response = core.create_namespaced_pod_binding("p", namespace, body, _preload_content=False)
    assert response.status == 201
    assert core.read_namespaced_pod("p", namespace).spec.node_name == nodes[1]

    # KWOK's pod-ready stage plays the kubelet: Running, Ready, an IP on the node, the containers started
    pod = wait_for(lambda: _running(core, "p", namespace), timeout=10, message="KWOK runs the bound pod")
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    assert pod.status.host_ip == "10.128.0.2"  # the node's InternalIP
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(POD_CIDR)
    assert [(c.name, c.ready, c.state.running is not None) for c in pod.status.container_statuses] == [
        ("c0", True, True)
    ]


def test_kwok_finishes_a_deleted_pod(api: client.ApiClient, namespace: str, nodes: list[str]) -> None:
    """A running pod deleted with a grace period goes away (KWOK's pod-delete stage), as after its kubelet's
    confirmation; without a kubelet it would stay Terminating for good."""
    core = client.CoreV1Api(api)
    pod = make_pod_body("graceful")
    pod["spec"]["nodeName"] = nodes[0]
    pod["spec"]["terminationGracePeriodSeconds"] = 30
    core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: _running(core, "graceful", namespace), timeout=10, message="KWOK runs the pod")
    core.delete_namespaced_pod("graceful", namespace)
    wait_for(lambda: _gone(core, "graceful", namespace), timeout=10, message="KWOK deletes the terminating pod")


def test_kwok_keeps_a_pod_with_a_pre_stop_hook_terminating_for_its_grace_period(
    api: client.ApiClient, namespace: str, nodes: list[str]
) -> None:
    """A kubelet runs a preStop hook for up to the grace period: KWOK's pod-delete-after-pre-stop stage keeps
    such a pod Terminating until its deletionTimestamp, which a second delete with a shorter grace moves."""
    core = client.CoreV1Api(api)
    pod = make_pod_body("hooked")
    pod["spec"]["nodeName"] = nodes[0]
    pod["spec"]["terminationGracePeriodSeconds"] = 60
    pod["spec"]["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 59}}}
    core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: _running(core, "hooked", namespace), timeout=10, message="KWOK runs the pod")
    core.delete_namespaced_pod("hooked", namespace)
    time.sleep(3)
    assert core.read_namespaced_pod("hooked", namespace).metadata.deletion_timestamp is not None  # Terminating
    core.delete_namespaced_pod("hooked", namespace, grace_period_seconds=2)
    wait_for(lambda: _gone(core, "hooked", namespace), timeout=10, message="KWOK deletes it when the grace ends")


def _running(core: client.CoreV1Api, name: str, namespace: str) -> client.V1Pod | None:
    pod = core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == "Running" else None


def _gone(core: client.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        return exc.status == 404
    return False


def test_upstream_kube_scheduler_schedules_default_pods(
    control_plane: ControlPlane, api: client.ApiClient, namespace: str, nodes: list[str]
) -> None:
    core = client.CoreV1Api(api)
    control_plane.start_kube_scheduler(name="kube-scheduler-smoke")
    try:
        core.create_namespaced_pod(namespace, make_pod_body("web"))
        node = wait_for(lambda: core.read_namespaced_pod("web", namespace).spec.node_name, timeout=30)
        assert node in nodes
        assert core.read_namespaced_pod("web", namespace).spec.scheduler_name == "default-scheduler"
        # port() is where its probes answer; /readyz needs no credentials (bench/bench_e2e.py polls it)
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        url = f"https://127.0.0.1:{control_plane.port('kube-scheduler-smoke')}/readyz"
        with urllib.request.urlopen(url, timeout=5, context=insecure) as resp:
            assert resp.read() == b"ok"
    finally:
        control_plane.stop_process("kube-scheduler-smoke")
    assert "kube-scheduler-smoke" not in control_plane.pids()
    assert control_plane.port("kube-scheduler-smoke") is None


def test_crd_is_served(control_plane: ControlPlane, api: client.ApiClient, namespace: str, tmp_path: Path) -> None:
    group = f"smoke{uuid.uuid4().hex[:6]}.kopf-scheduler.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                        }
                    },
                }
            ],
        },
    }
    manifest = tmp_path / "crd.json"
    manifest.write_text(json.dumps(crd))
    control_plane.kubectl("apply", "-f", str(manifest))
    try:
        control_plane.kubectl("wait", "--for=condition=Established", f"crd/widgets.{group}", "--timeout=30s")
        objects = client.CustomObjectsApi(api)
        body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}
        # Discovery can lag Established by a moment.
        wait_for(lambda: _try_create(objects, group, namespace, body), timeout=15)
        got = objects.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
        assert got["spec"] == {"size": 3}
        assert "w" in control_plane.kubectl("get", "widgets", "-n", namespace, "-o", "name").stdout
    finally:
        control_plane.kubectl("delete", "-f", str(manifest), "--wait=false")


def _try_create(objects: client.CustomObjectsApi, group: str, namespace: str, body: dict[str, object]) -> bool:
    try:
        objects.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_service_account_token_kubeconfig(control_plane: ControlPlane, namespace: str) -> None:
    path = control_plane.service_account_kubeconfig(namespace, "robot")
    whoami = json.loads(control_plane.kubectl("--kubeconfig", str(path), "auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:robot"
    denied = control_plane.kubectl("--kubeconfig", str(path), "get", "nodes", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()  # RBAC is on


def test_cli_up_down_round_trip_leaves_no_process(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    try:
        up = run_cli("cluster", "up", "--workdir", str(workdir), "--timeout", "60")
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"KUBECONFIG={workdir / 'kubeconfig'}"
        state = json.loads((workdir / "state.json").read_text())
        procs = {name: (rec["pid"], rec["start_time"]) for name, rec in state["processes"].items()}
        assert set(procs) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        assert "with kube-controller-manager" in up.stderr
        assert all(_proc_start_time(pid) == start for pid, start in procs.values())  # alive after `up` returned

        status = run_cli("cluster", "status", "--workdir", str(workdir))
        assert status.returncode == 0 and "ready: True" in status.stdout, status.stdout + status.stderr

        down = run_cli("cluster", "down", "--workdir", str(workdir))
        assert down.returncode == 0, down.stderr
        # Gone means no /proc entry or a zombie awaiting its (re)parent's reaping: either way it is no process.
        for name, (pid, _) in procs.items():
            assert _proc_start_time(pid) is None, f"{name} (pid {pid}) survived `cluster down`"
        assert not (workdir / "state.json").exists()
        assert run_cli("cluster", "status", "--workdir", str(workdir)).returncode == 1
    finally:
        ControlPlane(workdir).down()  # whatever happened above, leave nothing running


def test_cli_up_with_nodes_runs_kwok_until_down(tmp_path: Path) -> None:
    """``up --nodes N``: KWOK starts detached beside the control plane and makes N nodes Ready; a second
    ``up`` keeps what exists and adds the rest; ``down`` stops KWOK with the rest."""
    workdir = tmp_path / "cluster"
    try:
        up = run_cli("cluster", "up", "--workdir", str(workdir), "--nodes", "3", "--node-cpu", "8", timeout=300)
        assert up.returncode == 0, up.stderr
        assert "3 simulated node(s) Ready (3 created)" in up.stderr
        cp = ControlPlane(workdir)
        assert set(cp.pids()) == {"etcd", "kube-apiserver", "kube-controller-manager", "kwok"}
        kwok_pid = cp.pids()["kwok"]
        nodes = {n["metadata"]["name"]: n for n in cp.request("GET", "/api/v1/nodes")["items"]}
        assert sorted(nodes) == ["kwok-node-0", "kwok-node-1", "kwok-node-2"]
        for node in nodes.values():
            assert node["metadata"]["annotations"][KWOK_NODE_ANNOTATION[0]] == KWOK_NODE_ANNOTATION[1]
            assert node["status"]["allocatable"]["cpu"] == "8"
            assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"

        again = run_cli("cluster", "up", "--workdir", str(workdir), "--nodes", "4", timeout=120)
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr and "4 simulated node(s) Ready (1 created)" in again.stderr
        assert cp.pids()["kwok"] == kwok_pid  # the same KWOK

        assert run_cli("cluster", "down", "--workdir", str(workdir)).returncode == 0
        assert _proc_start_time(kwok_pid) is None
    finally:
        ControlPlane(workdir).down()


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]

        cp = ControlPlane(tmp_path / "cp", apiserver_port=port)
        with pytest.raises(PortInUseError, match=f"127.0.0.1:{port} is already in use"):
            cp.up()
        assert cp.pids() == {}

        cli = run_cli("cluster", "up", "--workdir", str(tmp_path / "cli"), "--port", str(port))
        assert cli.returncode == 1
        assert f"127.0.0.1:{port} is already in use" in cli.stderr


def _path_without_go(farm: Path) -> str:
    """A PATH holding only the tools build.sh needs before it looks for Go."""
    farm.mkdir()
    for tool in ("bash", "dirname", "awk", "cat", "sha256sum", "cut", "mkdir"):
        found = shutil.which(tool)
        assert found, tool
        (farm / tool).symlink_to(found)
    return str(farm)


def test_missing_go_is_a_clear_error(tmp_path: Path) -> None:
    env = {"PATH": _path_without_go(tmp_path / "bin"), "HOME": str(tmp_path)}
    with pytest.raises(GoNotFoundError, match="Go is not installed"):
        ensure_binaries(tmp_path / "cache", env=env, echo=False)

    cli = run_cli("cluster", "build", env={**env, "KOPF_SCHEDULER_CACHE": str(tmp_path / "cli-cache")})
    assert cli.returncode == 1
    assert "error: cannot build the control plane: Go is not installed" in cli.stderr

    with pytest.raises(GoNotFoundError, match="cannot build KWOK: Go is not installed"):
        ensure_kwok(tmp_path / "kwok-cache", env=env, echo=False)


def test_kwok_makes_an_extended_resource_of_the_capacity_allocatable(api: client.ApiClient, nodes: list[str]) -> None:
    """As a kubelet's node status sync: an extended resource added to a node's capacity becomes allocatable,
    one removed from it leaves allocatable; cpu and memory keep their allocatable (a kubelet's reservations)."""
    core = client.CoreV1Api(api)
    core.patch_node_status(nodes[0], {"status": {"capacity": {"example.com/widget": "7"}}})
    wait_for(
        lambda: (core.read_node(nodes[0]).status.allocatable or {}).get("example.com/widget") == "7",
        timeout=10,
        message="the widget allocatable",
    )
    core.patch_node_status(nodes[0], {"status": {"capacity": {"example.com/widget": None}}})
    wait_for(
        lambda: "example.com/widget" not in (core.read_node(nodes[0]).status.allocatable or {}),
        timeout=10,
        message="the widget gone from allocatable",
    )
    assert core.read_node(nodes[0]).status.allocatable["cpu"] == "4"
