"""Hand-made cases against upstream kube-scheduler v1.37.2, through the differential harness.

The random clusters of ``test_differential.py`` draw no pod-level resources, no in-place resize,
no host port on a sidecar and no ``metadata.name`` pin; these pods have them, in one cluster, one
at a time, and each must decide exactly as upstream does: same verdict, same feasible nodes, our
node in upstream's best set, every per-plugin score equal, and the whole unschedulable text up to
the " preemption: ..." tail (which we do not write yet).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import differential as dh
import pytest

from kopf_scheduler.cluster import bodies
from kopf_scheduler.sim.loader import load_policy

PAUSE = bodies.PAUSE_IMAGE


def node(name: str, cpu: str, memory: str, zone: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = bodies.node_body(name).hostname().zone(zone)
    body.capacity(cpu=cpu, memory=memory, ephemeral_storage="100Gi", pods="110").ready(reason="KubeletReady")
    return body.manifest(), body.status()


def pod(name: str) -> bodies.PodBody:
    body = bodies.pod_body(name, dh.NAMESPACE).label(kind="solo")
    return body.automount_service_account_token(False).termination_grace_period(0)


def pinned(body: bodies.PodBody, *nodes: str) -> bodies.PodBody:
    """One term per name: upstream's NodeAffinity PreFilter admits their union."""
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in nodes]
    return body.required_node_terms(*terms)


NODES = [
    node("n0", "4", "8Gi", "a"),
    node("n1", "8", "16Gi", "a"),
    node("n2", "16", "16Gi", "b"),
    node("n3", "2", "4Gi", "b"),
]
#: (pod, resize after it is bound: the cpu it then runs with)
PODS: list[tuple[dict[str, Any], str]] = [
    (
        pod("pod-level").container("main", PAUSE, cpu="500m", memory="256Mi").pod_requests(cpu="3", memory="2Gi").obj(),
        "",
    ),
    (pod("resized").container("main", PAUSE, cpu="1", memory="1Gi").obj(), "3"),
    (pod("after-resize").container("main", PAUSE, cpu="1", memory="1Gi").obj(), ""),
    (
        pod("sidecar-port")
        .container("main", PAUSE, cpu="100m")
        .init_container("proxy", PAUSE, restartable=True, host_port=8080, cpu="100m")
        .obj(),
        "",
    ),
    (pod("same-port").container("main", PAUSE, cpu="100m").host_port(8080).obj(), ""),
    (pinned(pod("pinned-too-small").container("main", PAUSE, cpu="3"), "n3", "gone").obj(), ""),
    (pinned(pod("pinned-two").container("main", PAUSE, cpu="1", memory="512Mi"), "n0", "n2").obj(), ""),
    (pod("pod-level-memory").container("main", PAUSE, cpu="200m").pod_requests(memory="3Gi").obj(), ""),
    (pod("plain").container("main", PAUSE, cpu="1", memory="1Gi").obj(), ""),
]


def resize(h: dh.Harness, name: str, cpu: str) -> None:
    """What the kubelet reports after resizing the pod's one container in place to ``cpu``."""
    status = {
        "name": "main",
        "image": PAUSE,
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "allocatedResources": {"cpu": cpu, "memory": "1Gi"},
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
    }
    h.core.patch_namespaced_pod_status(name, dh.NAMESPACE, {"status": {"containerStatuses": [status]}})
    time.sleep(2)  # the harness waits for pod adds and deletes in upstream's log; a status update it does not track


@pytest.fixture(scope="module")
def cases() -> Iterator[list[dh.PodCase]]:
    dh.ensure_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-semantics-") as tmp,
        dh.Harness(Path(tmp), load_policy(None)) as h,
    ):
        h.reset()
        h.setup(dh.Scenario(0, [], [], NODES, []))
        out = []
        for i, (body, cpu) in enumerate(PODS):
            case = h.one_pod(0, i, body)
            if cpu:
                assert case.upstream.node is not None, case.pod
                resize(h, body["metadata"]["name"], cpu)
            out.append(case)
        yield out


@pytest.mark.parametrize("index", range(len(PODS)), ids=[body["metadata"]["name"] for body, _ in PODS])
def test_decides_as_upstream(cases: list[dh.PodCase], index: int) -> None:
    case = cases[index]
    c = dh.compare(case)
    up, ours = case.upstream, case.ours
    assert c.fits and c.feasible, (up, ours)
    if up.node is not None:
        assert c.best, (up.best, ours.node)
    else:
        assert ours.message == up.message  # the whole FitError text, preemption tail included
    assert [p for p in c.pairs if p.ours != p.upstream] == []


def test_the_cases_test_what_they_say(cases: list[dh.PodCase]) -> None:
    by_name = {c.pod.split("/")[1]: c for c in cases}
    pinned = by_name["pinned-too-small"].upstream
    assert pinned.node is None and "3 node(s) didn't satisfy plugin(s) [NodeAffinity]" in pinned.message
    assert by_name["same-port"].upstream.node != by_name["sidecar-port"].upstream.node  # the sidecar's port is taken
    assert by_name["pod-level"].upstream.scored and by_name["after-resize"].upstream.scored
