"""NodeVolumeLimits and CSI migration: in-tree volumes count against their CSI driver on nodes with a CSINode.

The cases follow upstream v1.37.2 ``nodevolumelimits/csi_test.go`` ("Tests for in-tree volume migration",
"mixed volumes") and the volume handles of ``k8s.io/csi-translation-lib`` v0.37.2.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.csi_translation import inline_handle, pv_handle
from kopf_scheduler.core.model.objects import CSINode
from kopf_scheduler.core.model.parsing import (
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_pod,
    parse_storage_class,
)
from kopf_scheduler.core.plugins.node_volume_limits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NodeVolumeLimits,
    fits,
)

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
AZURE = "disk.csi.azure.com"
CINDER = "cinder.csi.openstack.org"
PORTWORX = "pxd.portworx.com"


def pv(name: str, source: dict[str, Any], labels: dict[str, str] | None = None):
    return parse_persistent_volume({"metadata": {"name": name, "labels": labels or {}}, "spec": source})


def claim(name: str, volume: str = "", sc: str | None = None):
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if sc is not None:
        spec["storageClassName"] = sc
    return parse_persistent_volume_claim({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def cluster(limits: dict[str, int] | None, node: str = "n1") -> ClusterObjects:
    pvs = [
        pv("ebs-0", {"awsElasticBlockStore": {"volumeID": "vol-0"}}),
        pv("ebs-1", {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
        pv("ebs-2", {"awsElasticBlockStore": {"volumeID": "vol-2"}}),
        pv("csi-ebs-0", {"csi": {"driver": EBS, "volumeHandle": "vol-0"}}),  # the same disk as ebs-0
        pv("csi-ebs-3", {"csi": {"driver": EBS, "volumeHandle": "vol-3"}}),
        pv("csi-ebs-4", {"csi": {"driver": EBS, "volumeHandle": "vol-4"}}),
        pv("host", {"hostPath": {"path": "/tmp"}}),
        pv("gce-zonal", {"gcePersistentDisk": {"pdName": "pd"}}, {"topology.kubernetes.io/zone": "us-c1-a"}),
        pv("azure-managed", {"azureDisk": {"diskName": "d", "diskURI": "/subs/x/disks/d", "kind": "Managed"}}),
        pv("azure-shared", {"azureDisk": {"diskName": "d2", "diskURI": "/subs/x/disks/d2"}}),
    ]
    claims = [claim(p.name, p.name) for p in pvs] + [
        claim("pending-ebs", sc="intree-ebs"),
        claim("pending-azure-file", sc="intree-azure-file"),
    ]
    classes = [
        parse_storage_class({"metadata": {"name": "intree-ebs"}, "provisioner": "kubernetes.io/aws-ebs"}),
        parse_storage_class({"metadata": {"name": "intree-azure-file"}, "provisioner": "kubernetes.io/azure-file"}),
    ]
    return ClusterObjects(
        persistent_volumes={p.name: p for p in pvs},
        persistent_volume_claims={c.key: c for c in claims},
        storage_classes={s.name: s for s in classes},
        csi_nodes={} if limits is None else {node: CSINode(node, limits)},
    )


def pod(name: str, *volumes: str | dict[str, Any]):
    """A pod with claims (a str names the claim) and inline volumes (a dict is the volume source)."""
    b = make_pod(name)
    for i, v in enumerate(volumes):
        if isinstance(v, str):
            b.volume({"name": f"v{i}", "persistentVolumeClaim": {"claimName": v}})
        else:
            b.volume({"name": f"v{i}", **v})
    return b.obj()


def run(p, info, objs):
    plugin = NodeVolumeLimits()
    state = CycleState()
    pre = plugin.pre_filter(state, p, Snapshot.of([info], objs))
    if pre.is_skip:
        return pre
    assert pre.is_success, pre
    status = plugin.filter(state, p, info)
    assert fits(p, info, objs).code is status.code
    return status


EBS_INLINE = {"awsElasticBlockStore": {"volumeID": "vol-9"}}
#: upstream's fixtures: inTreeOneVolPod (one in-tree EBS claim), inTreeTwoVolPod (two), csiEBSTwoVolPod (two CSI)
IN_TREE_ONE = ("ebs-0",)
IN_TREE_TWO = ("ebs-1", "ebs-2")
CSI_TWO = ("csi-ebs-3", "csi-ebs-4")


@pytest.mark.parametrize(
    "new, existing, limits, fit",
    [
        pytest.param(IN_TREE_ONE, [IN_TREE_TWO], {EBS: 2}, False, id="should count in-tree volumes"),
        pytest.param((EBS_INLINE,), [IN_TREE_TWO], None, True, id="nil csi node"),
        pytest.param(("pending-ebs",), [IN_TREE_TWO], {EBS: 2}, False, id="should count unbound in-tree volumes"),
        pytest.param(IN_TREE_ONE, [IN_TREE_TWO], {}, True, id="volume used does not report limits"),
        pytest.param(("host",), [CSI_TWO], {EBS: 2}, True, id="should not count non-migratable in-tree volumes"),
        pytest.param((EBS_INLINE,), [IN_TREE_TWO], {EBS: 2}, False, id="should count in-tree inline volumes"),
        pytest.param(IN_TREE_ONE, [CSI_TWO], {EBS: 2}, False, id="in-tree and csi (scheduling in-tree)"),
        pytest.param((EBS_INLINE,), [CSI_TWO, IN_TREE_ONE], {EBS: 3}, False, id="in-tree, inline and csi"),
        pytest.param(
            ({"awsElasticBlockStore": {"volumeID": "vol-0"}},),
            [CSI_TWO, IN_TREE_ONE],
            {EBS: 3},
            True,
            id="inline with the same volume ID as an attached in-tree PV",
        ),
        pytest.param(("csi-ebs-3",), [IN_TREE_TWO], {EBS: 2}, False, id="in-tree and csi (scheduling csi)"),
        pytest.param(("csi-ebs-0",), [IN_TREE_ONE, ("csi-ebs-3",)], {EBS: 2}, True, id="CSI PV = migrated PV"),
        pytest.param(("ebs-1",), [("csi-ebs-3", "csi-ebs-4")], {GCE: 0}, True, id="another driver's limit"),
        pytest.param(("pending-azure-file",), [], {EBS: 0}, True, id="azure-file: migration off, not counted"),
        pytest.param(("azure-managed",), [], {AZURE: 0}, False, id="managed Azure Disk PV counts"),
        pytest.param(("azure-shared",), [], {AZURE: 0}, True, id="Shared Azure Disk PV does not translate"),
        pytest.param(("gce-zonal",), [], {GCE: 0}, False, id="GCE PD PV counts"),
        pytest.param(({"cinder": {"volumeID": "c"}},), [], {CINDER: 0}, False, id="inline Cinder counts"),
        pytest.param(({"portworxVolume": {"volumeID": "x"}},), [], {PORTWORX: 0}, False, id="inline Portworx counts"),
        pytest.param(({"vsphereVolume": {"volumePath": "p"}},), [], {EBS: 0}, True, id="vSphere: migration off"),
    ],
)
def test_migrated_volumes_count(new, existing, limits, fit):
    objs = cluster(limits)
    info = node_info(make_node("n1").obj(), *(pod(f"e{i}", *vs) for i, vs in enumerate(existing)))
    status = run(pod("p", *new), info, objs)
    if fit:
        assert status.is_success or status.is_skip
    else:
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


def test_a_node_at_its_limit_is_infeasible_only_with_a_csinode():
    """The miss the differential found: an in-tree EBS pod on a node whose EBS CSI driver is full."""
    objs = cluster({EBS: 2})
    objs.csi_nodes["n1"] = CSINode("n1", {EBS: 2})
    full = node_info(make_node("n1").obj(), pod("e0", *IN_TREE_TWO))
    no_csinode = node_info(make_node("n2").obj(), pod("e1", *IN_TREE_TWO))
    new = pod("p", EBS_INLINE)
    assert run(new, full, objs).code is Code.UNSCHEDULABLE
    assert run(new, no_csinode, objs).is_success


def test_inline_volume_that_does_not_translate_is_an_error_on_nodes_with_a_csinode():
    objs = cluster({EBS: 5})
    bad = pod("p", {"awsElasticBlockStore": {"volumeID": "aws://zone/not-a-volume"}}, "nope")
    status = run(bad, node_info(make_node("n1").obj()), objs)
    assert status.code is Code.ERROR
    assert status.reasons == (
        "converting volume(v0) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://zone/not-a-volume)",
    )
    # without a CSINode the inline volume is not translated; the missing claim decides
    status = run(bad, node_info(make_node("n2").obj()), objs)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # an existing pod's bad volume fails the node too (upstream returns the error from Filter)
    shared = pod("e", {"azureDisk": {"diskName": "d", "diskURI": "u"}})
    status = run(pod("p2", "ebs-0"), node_info(make_node("n1").obj(), shared), objs)
    assert status.code is Code.ERROR
    assert status.reasons == (
        "converting volume(v0) from inline to csi: kind(Shared) is not supported in csi migration",
    )


@pytest.mark.parametrize(
    "source, labels, handle",
    [
        ({"awsElasticBlockStore": {"volumeID": "vol-1"}}, {}, "vol-1"),
        ({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}, {}, "vol-1"),
        ({"gcePersistentDisk": {"pdName": "pd"}}, {}, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
        (
            {"gcePersistentDisk": {"pdName": "pd"}},
            {"topology.kubernetes.io/zone": "us-central1-a"},
            "projects/UNSPECIFIED/zones/us-central1-a/disks/pd",
        ),
        (
            {"gcePersistentDisk": {"pdName": "pd"}},
            {"failure-domain.beta.kubernetes.io/zone": "us-central1-a__us-central1-c"},
            "projects/UNSPECIFIED/regions/us-central1/disks/pd",
        ),
        ({"azureDisk": {"diskName": "d", "diskURI": "uri", "kind": "managed"}}, {}, "uri"),
        ({"cinder": {"volumeID": "c1"}}, {}, "c1"),
        ({"portworxVolume": {"volumeID": "px"}}, {}, "px"),
    ],
)
def test_translated_handles(source, labels, handle):
    """csi-translation-lib's ``TranslateInTreePVToCSI`` volume handles (and the inline ones where they agree)."""
    assert pv_handle(pv("x", source, labels)) == handle
    if not labels:
        inline = parse_pod({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", **source}]}}).volumes[0]
        assert inline_handle(inline) == handle


def test_gce_inline_ignores_zones():
    inline = parse_pod(
        {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "gcePersistentDisk": {"pdName": "pd"}}]}}
    ).volumes[0]
    assert inline_handle(inline) == "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"


def test_pre_filter_does_not_skip_inline_migratable_volumes():
    """Upstream "don't skip Filter when the pod has inline migratable volumes"."""
    p = pod("p", {"configMap": {"name": "c"}}, EBS_INLINE)
    snap = Snapshot.of([node_info(make_node("n1").obj())], cluster({EBS: 1}))
    assert NodeVolumeLimits().pre_filter(CycleState(), p, snap).is_success
