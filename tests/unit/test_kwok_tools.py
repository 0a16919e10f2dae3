"""tools/kwok and cluster/kwok.py without Go or KWOK: the pin, how a KWOK process is started (its command
line) and which nodes are KWOK's.

build.sh's stamp, lock and stage copy (with a fake `go`) are tests/tools/test_kwok_build.py; the real build
and the real KWOK run in tests/cluster (the demo, the smoke tests, the load test).
"""

from __future__ import annotations

import re
from pathlib import Path

from kopf_scheduler.cluster.bodies import node_body
from kopf_scheduler.cluster.controlplane import ControlPlane
from kopf_scheduler.cluster.kwok import (
    HEARTBEAT_STAGES,
    KWOK_NODE_ANNOTATION,
    LIFECYCLE_STAGES,
    NODE_ALLOCATABLE_STAGE,
    POD_DELETE_STAGES,
    Kwok,
    KwokInstall,
    kwok_node,
)
from kopf_scheduler.commands.demo_workload import demo_node_body, demo_nodes

ROOT = Path(__file__).resolve().parents[2]


def test_tools_kwok_pins_kwok() -> None:
    go_mod = (ROOT / "tools" / "kwok" / "go.mod").read_text()
    assert re.search(r"^require sigs\.k8s\.io/kwok v0\.8\.0$", go_mod, re.M), go_mod
    assert '_ "sigs.k8s.io/kwok/cmd/kwok"' in (ROOT / "tools" / "kwok" / "tools.go").read_text()
    assert "sigs.k8s.io/kwok v0.8.0 h1:" in (ROOT / "tools" / "kwok" / "go.sum").read_text()


# --- what KWOK is started with, and which nodes are its own ----------------------------------


def test_kwok_command_line(tmp_path: Path) -> None:
    install = KwokInstall(tmp_path / "kwok-v0.8.0")
    kubeconfig = tmp_path / "kwok.kubeconfig"
    argv = Kwok(ControlPlane(tmp_path / "cp")).argv(install, kubeconfig, 4321)
    assert argv[0] == str(install.binary)
    assert f"--kubeconfig={kubeconfig}" in argv
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in argv
    configs = [a for a in argv if a.startswith("--config=")]
    assert configs == [f"--config={install.stage(s)}" for s in LIFECYCLE_STAGES] + [
        f"--config={tmp_path / 'cp' / 'kwok-home' / 'kubelet-stages.yaml'}"
    ]
    assert "--node-lease-duration-seconds=0" in argv  # no Leases: nothing periodic
    assert "--server-address=127.0.0.1:4321" in argv
    assert not [a for a in argv if "manage-all-nodes" in a]

    beating = Kwok(ControlPlane(tmp_path / "cp"), heartbeat=True, log_level="WARN").argv(install, kubeconfig, 1)
    assert f"--config={install.stage(HEARTBEAT_STAGES[0])}" in beating
    assert "--node-lease-duration-seconds=40" in beating and "-v=WARN" in beating


def test_kwok_node_has_the_annotation_no_conditions_and_both_addresses() -> None:
    body = node_body("n1").capacity(cpu="4", memory="8Gi", pods=110).ready().address("10.128.0.1")
    obj = kwok_node(body).obj()
    assert obj["metadata"]["annotations"] == {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]}
    assert "conditions" not in obj["status"]  # KWOK's node-initialize only plays on a node not Ready
    assert obj["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.128.0.1"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert obj["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}


def test_the_demo_nodes_are_kwok_nodes() -> None:
    nodes = demo_nodes(12)
    bodies = [demo_node_body(n, i).obj() for i, n in enumerate(nodes)]
    for body in bodies:
        assert body["metadata"]["annotations"][KWOK_NODE_ANNOTATION[0]] == KWOK_NODE_ANNOTATION[1]
        assert "conditions" not in body["status"]
        assert {a["type"] for a in body["status"]["addresses"]} == {"InternalIP", "Hostname"}
        assert "kubeProxyVersion" in body["status"]["nodeInfo"]  # the client's V1Node refuses a create without
    gpu = next(b for n, b in zip(nodes, bodies) if n.gpu)
    assert gpu["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "2"


def test_a_deleted_pod_goes_at_once_unless_a_pre_stop_hook_takes_its_grace_period() -> None:
    at_once, after_hook = POD_DELETE_STAGES
    assert at_once["spec"]["next"] == after_hook["spec"]["next"] == {"delete": True}
    assert "delay" not in at_once["spec"]
    hook = {"key": ".spec.containers[].lifecycle.preStop"}
    assert {**hook, "operator": "DoesNotExist"} in at_once["spec"]["selector"]["matchExpressions"]
    assert {**hook, "operator": "Exists"} in after_hook["spec"]["selector"]["matchExpressions"]
    # until the deletionTimestamp: the end of the grace period, moved earlier by a shorter second delete
    assert after_hook["spec"]["delay"]["durationFrom"] == {"expressionFrom": ".metadata.deletionTimestamp"}


def test_extended_resources_of_the_capacity_are_made_allocatable() -> None:
    spec = NODE_ALLOCATABLE_STAGE["spec"]
    assert spec["resourceRef"] == {"apiGroup": "v1", "kind": "Node"}
    (selector,) = spec["selector"]["matchExpressions"]
    assert selector["operator"] == "Exists" and "$c[.] != $a[.]" in selector["key"]
    template = spec["next"]["statusTemplate"]
    assert template.startswith("allocatable:") and ": null" in template  # added, and removed
