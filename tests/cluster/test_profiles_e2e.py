"""Several profiles at once: the operator serving every profile of an imported KubeSchedulerConfiguration agrees
with ``simulate --config`` on the same pods.

``kopf-scheduler config import`` turns tests/cluster/fixtures/kube-scheduler-two-profiles.yaml (renamed here:
``e2e-spread`` with upstream's defaults, ``e2e-pack`` packing) into one SchedulingPolicy per profile, applied
to the real API server; ``kopf-scheduler run`` serves both. Eight 1-cpu pods naming the two in turn are
created while the operator is stopped (SIGSTOP), so both of its queues hold them when it resumes, on nodes of
2, 3 and 4 cpu where the order the pods are tried in changes where they go. kube-scheduler would try them in
the order of its one queue (creation order); the operator's two policy loops must too, and
``simulate --config`` with the same file, nodes and pods must place every pod where the operator did.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import Group, Operator, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.commands import main

pytestmark = pytest.mark.cluster

FIXTURE = Path(__file__).parent / "fixtures" / "kube-scheduler-two-profiles.yaml"
SPREAD, PACK = "e2e-spread", "e2e-pack"
ORDER = [PACK, SPREAD, PACK, PACK, SPREAD, SPREAD, PACK, SPREAD]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = FIXTURE.read_text()
    text = text.replace("schedulerName: default-scheduler", f"schedulerName: {SPREAD}")
    text = text.replace("schedulerName: bin-packing", f"schedulerName: {PACK}")
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    config: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["config", "import", str(config)]) == 0
    policies = tmp_path_factory.mktemp("policies") / "policies.yaml"
    policies.write_text(printed.getvalue())
    control_plane.kubectl("apply", "-f", str(policies))
    op = Operator(
        tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", SPREAD, "--policy", PACK], sa_kubeconfig
    )
    try:
        for name in (SPREAD, PACK):
            wait_accepted(custom, name, op)
        yield op
    finally:
        for name in (SPREAD, PACK):
            delete_policy(custom, name)
        op.stop()


def raw(call: Any, *args: Any, **kwargs: Any) -> Any:
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def test_the_operator_serving_both_profiles_places_pods_as_simulate_config_does(
    operator: Operator,
    api: client.ApiClient,
    namespace: str,
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    core = client.CoreV1Api(api)
    with Group(api) as group:
        nodes = [group.nodes(1, cpu=cpu, memory="8Gi")[0] for cpu in ("2", "3", "4")]
        names = [f"p{i}-{scheduler.removeprefix('e2e-')}" for i, scheduler in enumerate(ORDER)]
        os.kill(operator.proc.pid, signal.SIGSTOP)  # well under its 5 s freeze detection
        try:
            for name, scheduler in zip(names, ORDER, strict=True):
                core.create_namespaced_pod(namespace, group.pod(name, scheduler, cpu="1", memory="256Mi"))
                time.sleep(0.01)  # distinct creation times: one queue's order is theirs
        finally:
            os.kill(operator.proc.pid, signal.SIGCONT)
        wait(
            operator,
            lambda: all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names),
            timeout=30,
            message="the operator bound every pod",
        )
        ours = {n: core.read_namespaced_pod(n, namespace).spec.node_name for n in names}
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(
            yaml.safe_dump_all([{**raw(core.read_node, n), "kind": "Node", "apiVersion": "v1"} for n in nodes])
        )
        bodies = []
        for name in names:
            body = raw(core.read_namespaced_pod, name, namespace)
            body.update(apiVersion="v1", kind="Pod")
            body["spec"].pop("nodeName", None)
            body.pop("status", None)
            bodies.append(body)
        pods = tmp_path / "pods.yaml"
        pods.write_text(yaml.safe_dump_all(bodies))
    capsys.readouterr()
    rc = main(["simulate", "--cluster", str(cluster), "--pods", str(pods), "--config", str(config), "--output", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    simulated = {p["pod"].split("/")[1]: p["node"] for p in json.loads(out)["placements"]}
    assert simulated == ours, operator.tail()
    assert len(set(ours.values())) == 3, ours  # the order mattered: the three nodes were used
