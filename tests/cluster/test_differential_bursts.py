"""Bursts of identical pods against upstream kube-scheduler v1.37.2, with OpportunisticBatching on (its default).

Upstream runs a KubeSchedulerConfiguration of two profiles (``default-scheduler``, upstream's defaults, and
``bin-packing``: MostAllocated, PodTopologySpread without default constraints, so its pods are signable and
batched); ours loads the same file (every profile in one simulation). The harness stops upstream (SIGSTOP),
creates the replicas, resumes it: its queue holds them all at once, as after a Deployment scaled up
(``Harness.burst``); our simulation runs the same pods pending at once on the same state.

The cluster is made so that batching and scoring afresh disagree: three 4-cpu nodes, ``n1`` labelled gold,
``n2`` silver, ``n3`` plain and half used; the replicas hold host port 8080 (one per node) and prefer gold
(weight 100), then silver (weight 1). The first replica is scored and goes to gold. Batching keeps that
ranking, where silver's 1 was normalised against gold's 100 (worth 1), so the next replica is hinted to
``n3`` (packed fuller); scored afresh without n1, silver's 1 would be the maximum, worth 100, and ``n2``
would win. Upstream places them n1, n3, n2, the last two unscored on hints; so must we. Under
``default-scheduler`` (whose spread defaults make every pod unsignable) nothing is batched: n1, n2, n3. A
``default-scheduler`` pod between two bin-packing replicas breaks the run of consecutive cycles: the next
replica is scored afresh.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import differential as dh
import pytest
import yaml

from kopf_scheduler.cluster import bodies
from kopf_scheduler.sim.loader import load_scheduler_config

CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {
            "schedulerName": "bin-packing",
            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
                {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
            ],
        },
    ],
}


def node(name: str, **labels: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = bodies.node_body(name).hostname().labels(labels)
    body.capacity(cpu="4", memory="8Gi", ephemeral_storage="100Gi", pods="110").ready(reason="KubeletReady")
    return body.manifest(), body.status()


NODES = [node("n1", gold="1"), node("n2", silver="1"), node("n3")]


def replica(name: str, scheduler: str) -> dict[str, Any]:
    body = bodies.pod_body(name, dh.NAMESPACE).label(app="replica").automount_service_account_token(False)
    body.termination_grace_period(0).container("main", bodies.PAUSE_IMAGE, cpu="100m", memory="100Mi")
    body.host_port(8080).affinity(
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": {"matchExpressions": [{"key": "gold", "operator": "Exists"}]}},
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "silver", "operator": "Exists"}]}},
                ]
            }
        }
    )
    out = body.obj()
    out["spec"]["schedulerName"] = scheduler
    return out


BURSTS = {
    "bin-packing": [replica(f"pack-{i}", "bin-packing") for i in range(3)],
    "default": [replica(f"spread-{i}", "default-scheduler") for i in range(3)],
    "interrupted": [
        replica("pack-a", "bin-packing"),
        replica("between", "default-scheduler"),
        replica("pack-b", "bin-packing"),
    ],
}


def half_used_n3(h: dh.Harness) -> None:
    """A bound pod using 2 cpu of n3, once upstream's informer has it."""
    assert h.log is not None
    log = h.log
    body = bodies.pod_body("load", dh.NAMESPACE).container("main", bodies.PAUSE_IMAGE, cpu="2", memory="1Gi").obj()
    body["spec"]["nodeName"] = "n3"
    body["spec"]["terminationGracePeriodSeconds"] = 0
    h.core.create_namespaced_pod(dh.NAMESPACE, body)
    log.wait("the load pod", lambda: log.pod_events[("Add event for scheduled pod", f"{dh.NAMESPACE}/load")], 30)


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[dh.PodCase]]]:
    dh.ensure_binaries()
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    profiles = load_scheduler_config(path)
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-bursts-") as tmp,
        dh.Harness(Path(tmp), profiles, scheduler_config=CONFIG, batching=True) as h,
    ):
        out = {}
        for number, (name, pods) in enumerate(BURSTS.items(), 1):
            h.reset()
            h.setup(dh.Scenario(0, [], [], NODES, []))
            half_used_n3(h)
            out[name] = h.burst(0, number, pods)
        yield out


def placements(cases: list[dh.PodCase]) -> list[tuple[str | None, bool]]:
    return [(c.upstream.node, c.upstream.hinted) for c in cases]


def test_upstream_batches_the_bin_packing_replicas_where_scoring_afresh_would_differ(
    cases: dict[str, list[dh.PodCase]],
) -> None:
    """What the module docstring says upstream does: the test tests what it says."""
    assert placements(cases["bin-packing"]) == [("n1", False), ("n3", True), ("n2", True)]
    assert placements(cases["default"]) == [("n1", False), ("n2", False), ("n3", False)]
    assert [h for _, h in placements(cases["interrupted"])] == [False, False, False]


@pytest.mark.parametrize("burst", sorted(BURSTS))
def test_a_burst_is_placed_as_upstream_places_it(cases: dict[str, list[dh.PodCase]], burst: str) -> None:
    got = cases[burst]
    assert [(c.ours.node, c.ours.hinted) for c in got] == placements(got), [(c.pod, c.ours) for c in got]
    report = dh.BurstReport(got).metrics()
    assert report["burst_nodes"]["percent"] == 100.0 and report["burst_hinted"]["percent"] == 100.0
