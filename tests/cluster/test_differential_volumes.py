"""Hand-made volume cases against upstream kube-scheduler v1.37.2, through the differential harness.

CSI migration (NodeVolumeLimits counts in-tree EBS volumes against ``ebs.csi.aws.com`` on nodes with a CSINode;
VolumeBinding checks a bound in-tree PV as its CSI translation where the CSINode lists the plugin as migrated)
and VolumeBinding's capacity score (StorageCapacityScoring, on in v1.37). Each pod must decide exactly as
upstream does: same verdict, same feasible nodes, our node in upstream's best set, every per-plugin score equal,
and the whole unschedulable text.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import differential as dh
import pytest

from kopf_scheduler.cluster import bodies
from kopf_scheduler.sim.loader import load_policy

PAUSE = bodies.PAUSE_IMAGE
HOSTNAME = "kubernetes.io/hostname"


def node(name: str, zone: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = bodies.node_body(name).hostname().zone(zone)
    body.capacity(cpu="8", memory="16Gi", ephemeral_storage="100Gi", pods="110").ready(reason="KubeletReady")
    return body.manifest(), body.status()


NODES = [node("v0", "a"), node("v1", "a"), node("v2", "b"), node("v3", "b")]
STORAGE: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
    (dh._csi_node("v0", [(dh.EBS_DRIVER, 1)]), None),
    (dh._csi_node("v1", [(dh.EBS_DRIVER, 3)]), None),  # no EBS zone label on v1: a migrated zonal PV misses it
    dh._local_pv("lpv-v0", "v0", "100Gi"),
    dh._local_pv("lpv-v1", "v1", "20Gi"),
    dh._local_pv("lpv-v2", "v2", "50Gi"),
    dh._claim("data", dh.LOCAL_CLASS, "10Gi"),
    dh._intree_pv("ebs-zonal", "vol-77", "a", as_affinity=False),
    dh._claim("ebs-zonal", "", "10Gi", volume="ebs-zonal"),
    (dh._capacity("v0", "100Gi", None), None),
    (dh._capacity("v1", "20Gi", None), None),
    (dh._capacity("v2", "100Gi", "5Gi"), None),  # a big pool, but no volume over 5Gi
    dh._claim("dyn", dh.DYNAMIC_CLASS, "10Gi"),
    dh._claim("dyn-again", dh.DYNAMIC_CLASS, "15Gi"),
]


def pod(name: str, *volumes: dict[str, Any], host: str = "") -> dict[str, Any]:
    body = bodies.pod_body(name, dh.NAMESPACE).label(kind="solo").container("main", PAUSE, cpu="100m")
    body.automount_service_account_token(False).termination_grace_period(0)
    for i, v in enumerate(volumes):
        body.volume({"name": f"v{i}", **v})
    if host:
        body.node_selector_map({HOSTNAME: host})
    return body.obj()


def ebs(volume_id: str) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": volume_id}}


def claim(name: str) -> dict[str, Any]:
    return {"persistentVolumeClaim": {"claimName": name}}


PODS = [
    pod("local-capacity", claim("data")),  # 10Gi of 100 / 20 / 50Gi local PVs: VolumeBinding scores 90 / 50 / 80
    pod("ebs-first", ebs("vol-1"), host="v0"),  # fills v0's EBS limit of 1
    pod("ebs-second", ebs("aws://a/vol-2")),  # v0 is full: feasible everywhere else
    pod("ebs-full", ebs("vol-3"), host="v0"),  # nowhere
    pod("ebs-same", ebs("vol-1"), host="v0"),  # the attached volume again: within the limit, but a disk conflict
    pod("ebs-zonal", claim("ebs-zonal")),  # v0 full, v1 misses the CSI zone label, v2/v3 the wrong zone
    pod("dynamic", claim("dyn")),  # 10Gi: v0 scores 90, v1 50; v2 (max 5Gi) and v3 (no capacity) lack storage
    pod("dynamic-again", claim("dyn-again")),  # 15Gi after the harness provisioned 10Gi out of the chosen pool
]


@pytest.fixture(scope="module")
def cases() -> Iterator[list[dh.PodCase]]:
    dh.ensure_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-volumes-") as tmp,
        dh.Harness(Path(tmp), load_policy(None)) as h,
    ):
        h.reset()
        h.setup(dh.Scenario(0, [], [], NODES, [], storage=STORAGE))
        yield [h.one_pod(0, i, body) for i, body in enumerate(PODS)]


@pytest.mark.parametrize("index", range(len(PODS)), ids=[body["metadata"]["name"] for body in PODS])
def test_decides_as_upstream(cases: list[dh.PodCase], index: int) -> None:
    case = cases[index]
    c = dh.compare(case)
    up, ours = case.upstream, case.ours
    assert c.fits and c.feasible, (up, ours)
    if up.node is not None:
        assert c.best, (up.best, ours.node)
    else:
        assert ours.message == up.message
    assert [p for p in c.pairs if p.ours != p.upstream] == []


def test_the_cases_test_what_they_say(cases: list[dh.PodCase]) -> None:
    by_name = {c.pod.split("/")[1]: c.upstream for c in cases}
    assert by_name["local-capacity"].scores["VolumeBinding"] == {"v0": 90, "v1": 50, "v2": 80}
    assert by_name["ebs-first"].node == "v0"
    assert by_name["ebs-second"].feasible == {"v1", "v2", "v3"}
    assert by_name["ebs-full"].node is None and "1 node(s) exceed max volume count" in by_name["ebs-full"].message
    same = by_name["ebs-same"]
    assert same.node is None and "1 node(s) had no available disk" in same.message
    assert "exceed max volume count" not in same.message
    zonal = by_name["ebs-zonal"]
    assert zonal.node is None
    dynamic = by_name["dynamic"]
    assert dynamic.scores["VolumeBinding"] == {"v0": 90, "v1": 50}
    assert dynamic.feasible == {"v0", "v1"}
    for reason in (
        "1 node(s) exceed max volume count",
        "1 node(s) didn't match PersistentVolume's node affinity",
        "2 node(s) had no available volume zone",
    ):
        assert reason in zonal.message, zonal.message
