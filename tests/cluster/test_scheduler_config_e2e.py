"""A held-out KubeSchedulerConfiguration, run by upstream kube-scheduler v1.37.2 and read by ``simulate --config``.

Upstream runs with tests/cluster/fixtures/kube-scheduler-binpack.yaml (bin packing with custom resource weights,
reweighted and disabled scores, NodePorts disabled, percentageOfNodesToScore); the differential harness gives
each pod to upstream and asks our core, with the profile ``simulate --config`` loads from the same file, for its
decision on the same state: same verdict, same feasible nodes, our node in upstream's best set, every per-plugin
score equal (upstream's weights are read from the configuration it logs). Then ``kopf-scheduler simulate
--config`` itself, on the same nodes and pods in the same order, must place every pod where upstream did.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import differential as dh
import pytest
import yaml

from kopf_scheduler.cluster import ControlPlane, bodies
from kopf_scheduler.commands import main
from kopf_scheduler.sim.loader import load_scheduler_config

CONFIG = Path(__file__).parent / "fixtures" / "kube-scheduler-binpack.yaml"
PAUSE = bodies.PAUSE_IMAGE


def node(name: str, cpu: str, memory: str, zone: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = bodies.node_body(name).hostname().zone(zone)
    body.capacity(cpu=cpu, memory=memory, ephemeral_storage="100Gi", pods="110").ready(reason="KubeletReady")
    return body.manifest(), body.status()


def pod(name: str, cpu: str, memory: str = "512Mi") -> bodies.PodBody:
    body = bodies.pod_body(name, dh.NAMESPACE).automount_service_account_token(False).termination_grace_period(0)
    return body.container("main", PAUSE, cpu=cpu, memory=memory)


NODES = [
    node("n0", "4", "8Gi", "a"),
    node("n1", "8", "16Gi", "a"),
    node("n2", "16", "32Gi", "b"),
    node("n3", "6", "10Gi", "b"),
]
PODS: list[dict[str, Any]] = [
    pod("first", "1").label(app="web").obj(),
    pod("second", "1").label(app="web").obj(),
    # NodePorts is disabled: the same host port twice still packs onto one node
    pod("port-a", "500m").host_port(8080).obj(),
    pod("port-b", "500m").host_port(8080).obj(),
    pod("big", "5", "4Gi").obj(),
    pod("near-web", "500m").pod_affinity("kubernetes.io/hostname", {"app": "web"}, weight=50).obj(),
    pod("zone-b", "1")
    .required_node_terms(
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}
    )
    .obj(),
    pod("filler", "2", "1Gi").obj(),
    pod("too-big", "20").obj(),
]


@pytest.fixture(scope="module")
def cases() -> Iterator[list[dh.PodCase]]:
    dh.ensure_binaries()
    (profile,) = load_scheduler_config(CONFIG)
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-ksconfig-") as tmp,
        dh.Harness(Path(tmp), profile, scheduler_config=yaml.safe_load(CONFIG.read_text())) as h,
    ):
        h.reset()
        h.setup(dh.Scenario(0, [], [], NODES, []))
        yield [h.one_pod(0, i, body) for i, body in enumerate(PODS)]


@pytest.mark.parametrize("index", range(len(PODS)), ids=[body["metadata"]["name"] for body in PODS])
def test_decides_as_upstream_with_the_same_configuration(cases: list[dh.PodCase], index: int) -> None:
    case = cases[index]
    c = dh.compare(case)
    up, ours = case.upstream, case.ours
    assert c.fits and c.feasible, (up, ours)
    if up.node is not None:
        assert c.best, (up.best, ours.node)
    assert [p for p in c.pairs if p.ours != p.upstream] == []
    assert ours.weights == {k: v for k, v in up.weights.items() if k in ours.weights}


def test_the_configuration_is_what_upstream_ran(cases: list[dh.PodCase]) -> None:
    by_name = {c.pod.split("/")[1]: c.upstream for c in cases}
    assert by_name["port-a"].node == by_name["port-b"].node  # NodePorts off upstream too
    assert by_name["first"].node == by_name["second"].node == "n0"  # MostAllocated: the smallest node first
    assert by_name["too-big"].node is None
    weights = by_name["first"].weights
    assert weights["NodeResourcesFit"] == 6 and weights["InterPodAffinity"] == 4
    assert "NodeResourcesBalancedAllocation" not in weights and "ImageLocality" not in weights


def test_simulate_config_places_every_pod_where_upstream_did(
    cases: list[dh.PodCase], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([{**body, **status} for body, status in NODES]))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all(PODS))
    rc = main(["simulate", "--cluster", str(cluster), "--pods", str(pods), "--config", str(CONFIG), "--output", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    ours = {p["pod"]: p["node"] for p in json.loads(out)["placements"]}
    assert ours == {c.pod: c.upstream.node for c in cases}


def test_config_import_output_applies_to_the_real_api_server(
    control_plane: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`config import FILE | kubectl apply -f -`: the CRD's schema and rules accept what the import writes."""
    root = Path(__file__).resolve().parents[2]
    control_plane.kubectl("apply", "-f", str(root / "crds" / "schedulingpolicy.yaml"))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=30s"
    )
    assert main(["config", "import", str(CONFIG)]) == 0
    imported = tmp_path / "policies.yaml"
    imported.write_text(capsys.readouterr().out)
    control_plane.kubectl("apply", "-f", str(imported))
    got = json.loads(control_plane.kubectl("get", "schedulingpolicy", "default-scheduler", "-o", "json").stdout)
    assert got["spec"] == yaml.safe_load(imported.read_text())["spec"]  # nothing pruned, pluginConfig args kept
    control_plane.kubectl("delete", "-f", str(imported))
