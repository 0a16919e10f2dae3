"""The demo's workload (commands/demo_workload.py): what the controllers are asked to make, and that it fits."""

from __future__ import annotations

import collections

import pytest

from kopf_scheduler.cluster.bodies import ZONE_LABEL
from kopf_scheduler.commands.demo_workload import (
    ACCELERATOR_DRIVER,
    GPUS_PER_NODE,
    KIND_LABEL,
    STORAGE_CLASS,
    demo_cluster_objects,
    demo_nodes,
    demo_workloads,
)


@pytest.mark.parametrize(("nodes", "pods"), [(6, 30), (30, 300), (3, 5), (12, 1000)])
def test_the_workloads_make_the_pods_asked_for_plus_one_per_node(nodes: int, pods: int) -> None:
    cluster = demo_nodes(nodes)
    workloads = demo_workloads(pods, cluster, "kopf-scheduler")
    daemon = [w for w in workloads if w.kind == "DaemonSet"]
    assert [w.pods for w in daemon] == [nodes]
    assert sum(w.pods for w in workloads) == pods + nodes
    for w in workloads:
        template = w.body["spec"]["template"]
        assert template["spec"]["schedulerName"] == "kopf-scheduler"
        assert template["metadata"]["labels"][KIND_LABEL] == w.label
        assert w.body["metadata"]["labels"] == template["metadata"]["labels"]
        if w.kind in ("Deployment", "StatefulSet", "DaemonSet"):  # the selector selects the template
            selector = w.body["spec"]["selector"]["matchLabels"]
            assert selector.items() <= template["metadata"]["labels"].items()
        if w.kind == "Job":
            assert w.body["spec"]["parallelism"] == w.body["spec"]["completions"] == w.pods
            assert template["spec"]["restartPolicy"] == "Never"


def test_capped_kinds_fit_the_nodes_that_can_take_them() -> None:
    cluster = demo_nodes(30)
    by_name = {w.name: w for w in demo_workloads(300, cluster, "kopf-scheduler")}
    usable = [n for n in cluster if not n.cordoned]
    assert by_name["gpu"].pods <= GPUS_PER_NODE * sum(n.gpu for n in usable)
    assert by_name["cache"].pods <= sum(1 for n in usable if not n.gpu)  # one per host
    assert 0 < by_name["inference"].pods <= sum(n.accelerators for n in usable)
    assert not by_name["too-big"].schedulable and not by_name["no-match"].schedulable
    unschedulable = by_name["too-big"].pods + by_name["no-match"].pods
    assert unschedulable == round(300 * 0.05)


def test_the_cluster_objects_back_the_claims_of_the_workloads() -> None:
    cluster = demo_nodes(12)
    objects = demo_cluster_objects(cluster, "demo")
    kinds = collections.Counter(o["kind"] for o in objects)
    assert kinds["StorageClass"] == 1 and kinds["DeviceClass"] == 1 and kinds["ResourceClaimTemplate"] == 1
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    assert {s["spec"]["nodeName"] for s in slices} == {n.name for n in cluster if n.accelerators}
    assert all(s["spec"]["driver"] == ACCELERATOR_DRIVER for s in slices)
    (storage,) = [o for o in objects if o["kind"] == "StorageClass"]
    assert storage["metadata"]["name"] == STORAGE_CLASS and storage["provisioner"] == "kubernetes.io/host-path"
    (template,) = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    workloads = {w.name: w for w in demo_workloads(60, cluster, "kopf-scheduler")}
    pod = workloads["inference"].body["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "accelerator", "resourceClaimTemplateName": template["metadata"]["name"]}]
    db = workloads["db"].body["spec"]
    assert db["volumeClaimTemplates"][0]["spec"]["storageClassName"] == STORAGE_CLASS


def _cpu(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize(("nodes", "pods"), [(6, 30), (30, 300), (3, 5), (12, 1000)])
def test_pods_with_few_places_to_go_come_in_a_wave_before_those_that_fit_anywhere(nodes: int, pods: int) -> None:
    """The demo places each wave before creating the next: a constrained pod created together with the
    web servers could find its zone's one usable node already full (a CI failure: zone-c's node filled)."""
    cluster = demo_nodes(nodes)
    workloads = demo_workloads(pods, cluster, "kopf-scheduler")
    for w in workloads:
        spec = w.body["spec"]["template"]["spec"]
        constrained = (
            "nodeSelector" in spec
            or "podAntiAffinity" in (spec.get("affinity") or {})
            and "requiredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["podAntiAffinity"]
            or any(t.get("key") == "dedicated" for t in spec.get("tolerations") or ())
            or "resourceClaims" in spec
            or "volumeClaimTemplates" in w.body["spec"]
        )
        expected = 0 if w.kind == "DaemonSet" else 1 if constrained and w.schedulable else 2
        assert w.wave == expected, w.name
    if pods > 10 * nodes:
        return  # denser than the demo runs (at most 10 pods per node): zones overflow whatever the order
    # the zone-pinned pods of the first two waves fit their zone's usable plain nodes
    for zone in {n.zone for n in cluster}:
        room = sum(n.cpu for n in cluster if n.zone == zone and not n.cordoned and not n.gpu)
        pinned = [
            w
            for w in workloads
            if w.wave == 1 and w.body["spec"]["template"]["spec"].get("nodeSelector", {}).get(ZONE_LABEL) == zone
        ]
        wanted = sum(
            w.pods * _cpu(w.body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
            for w in pinned
        )
        agents = 0.05 * sum(1 for n in cluster if n.zone == zone and not n.cordoned and not n.gpu)
        assert wanted + agents <= room, zone
