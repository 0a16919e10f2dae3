"""VolumeZone: PV topology labels against node labels, WaitForFirstConsumer skip, upstream error texts."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.parsing import (
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kopf_scheduler.core.plugins.volume_zone import ERR_REASON_CONFLICT, VolumeZone, fits, zones_of

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
GA_ZONE = "topology.kubernetes.io/zone"
GA_REGION = "topology.kubernetes.io/region"


def pv_labels(name: str, labels: dict[str, str]):
    return parse_persistent_volume({"metadata": {"name": name, "labels": labels}, "spec": {}})


def pvc(name: str, volume: str = "", sc: str | None = None):
    spec: dict = {"volumeName": volume} if volume else {}
    if sc is not None:
        spec["storageClassName"] = sc
    return parse_persistent_volume_claim({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def cluster() -> ClusterObjects:
    pvs = [
        pv_labels("pv-beta-a", {BETA_ZONE: "us-a"}),
        pv_labels("pv-beta-ab", {BETA_ZONE: "us-a__us-b"}),
        pv_labels("pv-ga-a", {GA_ZONE: "us-a"}),
        pv_labels("pv-region", {GA_REGION: "us"}),
        pv_labels("pv-zone-region", {BETA_ZONE: "us-a", BETA_REGION: "us"}),
        pv_labels("pv-plain", {"other": "x"}),
        pv_labels("pv-bad", {GA_ZONE: "us-a__"}),
    ]
    claims = [pvc(f"c-{p.name}", p.name) for p in pvs] + [
        pvc("wffc", sc="late"),
        pvc("immediate", sc="now"),
        pvc("no-class"),
        pvc("missing-class", sc="ghost"),
        pvc("missing-pv", "ghost-pv"),
    ]
    classes = [
        parse_storage_class(
            {"metadata": {"name": "late"}, "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer"}
        ),
        parse_storage_class({"metadata": {"name": "now"}, "provisioner": "p"}),
    ]
    return ClusterObjects(
        persistent_volumes={p.name: p for p in pvs},
        persistent_volume_claims={c.key: c for c in claims},
        storage_classes={s.name: s for s in classes},
    )


def node_with(labels: dict[str, str]):
    return make_node("n1").labels(labels).obj()


@pytest.mark.parametrize(
    "claims, labels, fit",
    [
        pytest.param(["c-pv-beta-a"], {BETA_ZONE: "us-a"}, True, id="beta label matches"),
        pytest.param(["c-pv-beta-a"], {BETA_ZONE: "us-b"}, False, id="beta label differs"),
        pytest.param(["c-pv-beta-a"], {GA_ZONE: "us-a"}, True, id="beta pv label, ga node label"),
        pytest.param(["c-pv-ga-a"], {BETA_ZONE: "us-a"}, False, id="ga pv label is not translated back to beta"),
        pytest.param(["c-pv-ga-a"], {GA_ZONE: "us-a", BETA_ZONE: "us-a"}, True, id="ga label matches"),
        pytest.param(["c-pv-beta-ab"], {BETA_ZONE: "us-b"}, True, id="multi-zone value"),
        pytest.param(["c-pv-beta-ab"], {BETA_ZONE: "us-c"}, False, id="multi-zone value, other zone"),
        pytest.param(["c-pv-beta-a"], {"other": "x"}, True, id="node without topology labels takes anything"),
        pytest.param(["c-pv-region"], {GA_ZONE: "us-a"}, False, id="node lacks the region key"),
        pytest.param(["c-pv-zone-region"], {BETA_ZONE: "us-a", BETA_REGION: "eu"}, False, id="zone ok, region not"),
        pytest.param(["c-pv-zone-region"], {BETA_ZONE: "us-a", GA_REGION: "us"}, True, id="zone and region ok"),
        pytest.param(["c-pv-beta-a", "c-pv-ga-a"], {GA_ZONE: "us-a"}, True, id="two pvs, both ok"),
        pytest.param(["c-pv-beta-a", "c-pv-beta-ab"], {BETA_ZONE: "us-b"}, False, id="two pvs, one not"),
    ],
)
def test_filter(claims, labels, fit):
    b = make_pod("p")
    for c in claims:
        b.pvc(c)
    pod = b.obj()
    objs = cluster()
    info = node_info(node_with(labels))
    plugin = VolumeZone()
    state = CycleState()
    assert plugin.pre_filter(state, pod, Snapshot.of([info], objs)).is_success
    status = plugin.filter(state, pod, info)
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON_CONFLICT,) == ("node(s) had no available volume zone",)
    assert fits(pod, info, objs) == status


@pytest.mark.parametrize(
    "volume, reason",
    [
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": ""}},
            "PersistentVolumeClaim had no name",
            id="claim without name",
        ),
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": "nope"}},
            'persistentvolumeclaim "nope" not found',
            id="missing claim",
        ),
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": "no-class"}},
            "PersistentVolumeClaim had no pv name and storageClass name",
            id="unbound without class",
        ),
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": "missing-class"}},
            'storageclass.storage.k8s.io "ghost" not found',
            id="missing class",
        ),
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": "immediate"}},
            "PersistentVolume had no name",
            id="unbound immediate",
        ),
        pytest.param(
            {"name": "v", "persistentVolumeClaim": {"claimName": "missing-pv"}},
            'persistentvolume "ghost-pv" not found',
            id="missing pv",
        ),
    ],
)
def test_pre_filter_errors_are_unresolvable(volume, reason):
    pod = make_pod("p").volume(volume).obj()
    status = VolumeZone().pre_filter(CycleState(), pod, Snapshot.of([node_info(make_node("n1").obj())], cluster()))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (reason,)


@pytest.mark.parametrize(
    "volumes",
    [
        pytest.param([], id="no volumes"),
        pytest.param([{"name": "e", "emptyDir": {}}], id="no claims"),
        pytest.param(
            [{"name": "v", "persistentVolumeClaim": {"claimName": "wffc"}}], id="unbound wait-for-first-consumer"
        ),
        pytest.param(
            [{"name": "v", "persistentVolumeClaim": {"claimName": "c-pv-plain"}}], id="pv without topology labels"
        ),
        pytest.param(
            [{"name": "v", "persistentVolumeClaim": {"claimName": "c-pv-bad"}}], id="unparsable label is ignored"
        ),
        pytest.param([{"name": "g", "gcePersistentDisk": {"pdName": "x"}}], id="inline volumes are not checked"),
    ],
)
def test_pre_filter_skips(volumes):
    b = make_pod("p")
    for v in volumes:
        b.volume(v)
    assert (
        VolumeZone()
        .pre_filter(CycleState(), b.obj(), Snapshot.of([node_info(make_node("n1").obj())], cluster()))
        .is_skip
    )


def test_zones_of():
    assert zones_of("a") == {"a"}
    assert zones_of("a__b") == {"a", "b"}
    assert zones_of(" a __ b ") == {"a", "b"}
    assert zones_of("a____b") is None
    assert zones_of("") is None


def test_filter_without_state_is_an_error():
    pod = make_pod("p").pvc("c-pv-ga-a").obj()
    assert VolumeZone().filter(CycleState(), pod, node_info(make_node("n1").obj())).code is Code.ERROR


def test_vector_agrees_with_filter():
    rng = random.Random(3)
    objs = cluster()
    values = [None, "us-a", "us-b", "us-c"]
    infos = []
    for n in range(60):
        labels = {}
        for key in (BETA_ZONE, GA_ZONE, BETA_REGION, GA_REGION):
            v = rng.choice(values)
            if v is not None:
                labels[key] = v if "zone" in key else "us"
        infos.append(node_info(make_node(f"n{n}").labels(labels).obj()))
    snap = Snapshot.of(infos, objs)
    plugin = VolumeZone()
    bound = [c.name for c in objs.persistent_volume_claims.values() if c.name.startswith("c-")]
    for t in range(20):
        b = make_pod(f"p{t}")
        for c in rng.sample(bound, rng.randrange(1, 3)):
            b.pvc(c)
        pod = b.obj()
        state = CycleState()
        if not plugin.pre_filter(state, pod, snap).is_success:
            continue
        index = np.array(rng.sample(range(len(infos)), 30), dtype=np.intp)
        mask = plugin.filter_nodes(state, pod, snap.table, index)
        assert mask.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index]


def test_args_and_name():
    assert VolumeZone().name == VolumeZone.NAME == "VolumeZone"
    assert VolumeZone(name="zones").name == "zones"
    with pytest.raises(PluginArgsError) as err:
        VolumeZone.new({"x": 1})
    assert err.value.field == "x"
