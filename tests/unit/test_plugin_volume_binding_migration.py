"""VolumeBinding and CSI migration: a bound in-tree PV is checked as its CSI translation on nodes whose CSINode
lists the plugin in ``storage.alpha.kubernetes.io/migrated-plugins`` (upstream ``tryTranslatePVToCSI``).

Cases from upstream v1.37.2 ``volumebinding/binder_test.go`` ``TestFindPodVolumesWithCSIMigration`` and the
topology rules of ``k8s.io/csi-translation-lib`` v0.37.2 (``translateTopologyFromInTreeToCSI``).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.basics import Code
from kopf_scheduler.core.framework.snapshot import ClusterObjects
from kopf_scheduler.core.model.csi_translation import translated_node_affinity
from kopf_scheduler.core.model.objects import NodeSelectorRequirement, NodeSelectorTerm
from kopf_scheduler.core.model.parsing import parse_csi_node, parse_persistent_volume, parse_persistent_volume_claim
from kopf_scheduler.core.plugins.volume_binding import ERR_REASON_NODE_CONFLICT, fits

ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
GKE_ZONE = "topology.gke.io/zone"
ZONE1_LABELS = {ZONE_BETA: "us-east-1", REGION_BETA: "us-east-1a"}


def pv(source: dict[str, Any], labels: dict[str, str], affinity: list[dict[str, Any]] | None = None):
    spec: dict[str, Any] = {"capacity": {"storage": "1G"}, "claimRef": {"namespace": "default", "name": "c"}, **source}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": affinity}}
    return parse_persistent_volume(
        {"metadata": {"name": "pv-migration-bound", "labels": labels}, "spec": spec, "status": {"phase": "Bound"}}
    )


def csi_node(plugins: str):
    meta: dict[str, Any] = {"name": "node1"}
    if plugins:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": plugins}
    return parse_csi_node({"metadata": meta, "spec": {"drivers": []}})


def verdict(the_pv, node_labels: dict[str, str], plugins: str | None):
    claim = parse_persistent_volume_claim(
        {
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"volumeName": the_pv.name, "storageClassName": "wait"},
            "status": {"phase": "Bound"},
        }
    )
    objs = ClusterObjects(
        persistent_volumes={the_pv.name: the_pv},
        persistent_volume_claims={claim.key: claim},
        csi_nodes={} if plugins is None else {"node1": csi_node(plugins)},
    )
    pod = make_pod("test-pod").volume({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}).obj()
    node = make_node("node1").label(**node_labels).obj() if node_labels else make_node("node1").obj()
    return fits(pod, node_info(node), objs)


GCE = {"gcePersistentDisk": {"pdName": "test-disk", "fsType": "ext4"}}


@pytest.mark.parametrize(
    "zone, plugins, ok",
    [
        pytest.param("us-east-1", "kubernetes.io/gce-pd", True, id="pvc-bound"),
        pytest.param("us-east-1", "", True, id="pvc-bound,csinode-not-migrated"),
        pytest.param("us-east-1", None, True, id="pvc-bound,missing-csinode"),
        pytest.param("us-east-2", "kubernetes.io/gce-pd", False, id="pvc-bound,node-different-zone"),
        pytest.param("us-east-2", "kubernetes.io/aws-ebs,kubernetes.io/cinder", True, id="another plugin migrated"),
    ],
)
def test_find_pod_volumes_with_csi_migration(zone, plugins, ok):
    status = verdict(pv(GCE, ZONE1_LABELS), {GKE_ZONE: zone}, plugins)
    if ok:
        assert status.is_success, status
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON_NODE_CONFLICT,)


def test_untranslated_zone_affinity_on_a_node_without_the_csi_topology_label():
    """The in-tree zone affinity becomes the driver's key: a node with only the Kubernetes zone label fails it."""
    affinity = [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]
    ebs = pv({"awsElasticBlockStore": {"volumeID": "vol-1"}}, {}, affinity)
    labels = {"topology.kubernetes.io/zone": "a"}
    assert verdict(ebs, labels, "").is_success
    assert verdict(ebs, labels, "kubernetes.io/aws-ebs").reasons == (ERR_REASON_NODE_CONFLICT,)
    assert verdict(ebs, {**labels, "topology.ebs.csi.aws.com/zone": "a"}, "kubernetes.io/aws-ebs").is_success


def test_a_pv_that_does_not_translate_is_an_error():
    bad = pv({"awsElasticBlockStore": {"volumeID": "aws://z/nope"}}, {})
    status = verdict(bad, {}, "kubernetes.io/aws-ebs")
    assert status.code is Code.ERROR
    assert status.reasons == (
        "could not translate pv: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://z/nope)",
    )
    assert verdict(bad, {}, "").is_success  # not migrated on this node: not translated


def test_a_regional_gce_pd_across_regions_does_not_translate():
    bad = pv(GCE, {"topology.kubernetes.io/zone": "us-c1-a__eu-w1-b"})
    status = verdict(bad, {}, "kubernetes.io/gce-pd")
    assert status.code is Code.ERROR
    assert status.reasons == (
        "could not translate pv: failed to get region from zones: multiple or no regions gotten from zones, "
        "got: map[eu-w1:{} us-c1:{}]",
    )


def req(key: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, "In", values)


@pytest.mark.parametrize(
    "source, labels, affinity, expected",
    [
        pytest.param(
            GCE, ZONE1_LABELS, None, (NodeSelectorTerm((req(GKE_ZONE, "us-east-1"),)),), id="zone label -> new term"
        ),
        pytest.param(
            GCE,
            {"topology.kubernetes.io/zone": "us-c1-b__us-c1-a"},
            [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["x"]}]}],
            (NodeSelectorTerm((req("disk", "x"), req(GKE_ZONE, "us-c1-a", "us-c1-b"))),),
            id="multi-zone label joins every term, sorted",
        ),
        pytest.param(
            {"cinder": {"volumeID": "c"}},
            {"topology.kubernetes.io/zone": "z9"},
            [
                {
                    "matchExpressions": [
                        {"key": ZONE_BETA, "operator": "In", "values": ["z1"]},
                        {"key": REGION_BETA, "operator": "In", "values": ["r1"]},
                    ]
                }
            ],
            (
                NodeSelectorTerm(
                    (req("topology.cinder.csi.openstack.org/zone", "z1"), req("topology.kubernetes.io/region", "r1"))
                ),
            ),
            id="beta affinity wins over a GA label; beta region becomes GA",
        ),
        pytest.param({"portworxVolume": {"volumeID": "p"}}, {"topology.kubernetes.io/zone": "a"}, None, None, id="px"),
        pytest.param(
            {"azureDisk": {"diskName": "d", "diskURI": "u", "kind": "Managed"}},
            {"topology.kubernetes.io/zone": "a"},
            None,
            None,
            id="azure disk keeps its topology",
        ),
    ],
)
def test_translated_node_affinity(source, labels, affinity, expected):
    assert translated_node_affinity(pv(source, labels, affinity)) == expected
