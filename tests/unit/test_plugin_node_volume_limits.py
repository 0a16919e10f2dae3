"""NodeVolumeLimits (CSI) and the v1.9 EBS / GCE PD / Azure Disk counters: counting rules, SKIPs, vector agreement."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import CSINode
from kopf_scheduler.core.model.parsing import (
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kopf_scheduler.core.plugins.node_volume_limits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    AzureDiskLimits,
    AzureDiskLimitsArgs,
    EBSLimits,
    EBSLimitsArgs,
    GCEPDLimits,
    GCEPDLimitsArgs,
    NodeVolumeLimits,
    fits,
)

DRIVER = "ebs.csi.aws.com"
OTHER = "pd.csi.storage.gke.io"


def csi_pv(name: str, handle: str, driver: str = DRIVER):
    return parse_persistent_volume(
        {"metadata": {"name": name}, "spec": {"csi": {"driver": driver, "volumeHandle": handle}}}
    )


def intree_pv(name: str, kind: str, ident: str):
    key = {"awsElasticBlockStore": "volumeID", "gcePersistentDisk": "pdName", "azureDisk": "diskName"}[kind]
    return parse_persistent_volume({"metadata": {"name": name}, "spec": {kind: {key: ident}}})


def claim(name: str, volume: str = "", sc: str | None = None, ns: str = "default"):
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if sc is not None:
        spec["storageClassName"] = sc
    return parse_persistent_volume_claim({"metadata": {"name": name, "namespace": ns}, "spec": spec})


def cluster(limits: dict[str, int] | None = None) -> ClusterObjects:
    pvs = [csi_pv(f"pv{i}", f"h{i}") for i in range(6)] + [
        csi_pv("pv-other", "h0", OTHER),
        intree_pv("pv-ebs1", "awsElasticBlockStore", "vol-1"),
        intree_pv("pv-ebs2", "awsElasticBlockStore", "vol-2"),
        intree_pv("pv-gce", "gcePersistentDisk", "pd-1"),
        parse_persistent_volume({"metadata": {"name": "pv-nfs"}, "spec": {"nfs": {"server": "s", "path": "/"}}}),
    ]
    claims = [claim(f"c{i}", f"pv{i}") for i in range(6)] + [
        claim("c0-again", "pv0"),  # a second claim on the same PV: one volume
        claim("c-other", "pv-other"),
        claim("c-ebs1", "pv-ebs1"),
        claim("c-ebs2", "pv-ebs2"),
        claim("c-gce", "pv-gce"),
        claim("c-nfs", "pv-nfs"),
        claim("unbound", sc="csi-late"),
        claim("unbound2", sc="csi-late"),
        claim("unbound-noclass"),
        claim("unbound-ghostclass", sc="ghost"),
        claim("lost-pv", "ghost-pv", sc="csi-late"),
        claim("p-eph"),  # the claim of pod "p"'s ephemeral volume "eph"
    ]
    classes = [
        parse_storage_class(
            {"metadata": {"name": "csi-late"}, "provisioner": DRIVER, "volumeBindingMode": "WaitForFirstConsumer"}
        )
    ]
    return ClusterObjects(
        persistent_volumes={p.name: p for p in pvs},
        persistent_volume_claims={c.key: c for c in claims},
        storage_classes={s.name: s for s in classes},
        csi_nodes={"n1": CSINode("n1", limits if limits is not None else {DRIVER: 2})},
    )


def pod_claims(*claims: str, name: str = "p"):
    b = make_pod(name)
    for c in claims:
        b.volume({"name": f"v-{c}", "persistentVolumeClaim": {"claimName": c}})
    return b.obj()


def run(plugin, pod, info, objs):
    state = CycleState()
    pre = plugin.pre_filter(state, pod, Snapshot.of([info], objs))
    if pre.is_skip:
        return pre
    assert pre.is_success
    return plugin.filter(state, pod, info)


# =========================================================================== CSI


@pytest.mark.parametrize(
    "new, existing, limits, fit",
    [
        # limit 2 for DRIVER on n1
        pytest.param(["c0"], [], None, True, id="0 attached + 1 new <= 2"),
        pytest.param(["c0", "c1"], [], None, True, id="0 + 2 <= 2"),
        pytest.param(["c0", "c1", "c2"], [], None, False, id="0 + 3 > 2"),
        pytest.param(["c2"], [["c0"], ["c1"]], None, False, id="2 attached + 1 new > 2"),
        pytest.param(["c0"], [["c0"], ["c1"]], None, True, id="2 attached, the new one already attached"),
        pytest.param(["c0-again"], [["c0"], ["c1"]], None, True, id="another claim on an attached PV"),
        pytest.param(["c2"], [["c0", "c0-again"]], None, True, id="one PV used twice counts once"),
        pytest.param(["c-other"], [["c0"], ["c1"]], None, True, id="other driver has no limit"),
        pytest.param(["c-other"], [["c0"]], {OTHER: 0}, False, id="other driver limit 0"),
        pytest.param(["c2"], [["c0"], ["c1"]], {}, True, id="no limits on the CSINode"),
        pytest.param(["unbound"], [["c0"], ["c1"]], None, False, id="unbound claim counts against its provisioner"),
        pytest.param(["unbound"], [["c0"], ["unbound"]], None, True, id="the same unbound claim is one volume"),
        pytest.param(["unbound", "unbound2"], [], None, True, id="two unbound claims: 2 <= 2"),
        pytest.param(["lost-pv"], [["c0"], ["c1"]], None, False, id="missing PV falls back to the class"),
        pytest.param(["c2"], [["c0", "nope"], ["c1"]], None, False, id="missing claims of existing pods are skipped"),
        pytest.param(["c-ebs1", "c2"], [["c0"]], None, False, id="in-tree EBS PV counts against the EBS CSI driver"),
        pytest.param(["c-nfs", "c2"], [["c0"]], None, True, id="a PV neither CSI nor migratable does not count"),
    ],
)
def test_csi_filter(new, existing, limits, fit):
    objs = cluster(limits)
    pods = [pod_claims(*cs, name=f"e{i}") for i, cs in enumerate(existing)]
    info = node_info(make_node("n1").obj(), *pods)
    pod = pod_claims(*new)
    status = run(NodeVolumeLimits(), pod, info, objs)
    if fit:
        assert status.is_success or status.is_skip
    else:
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,) == ("node(s) exceed max volume count",)
    assert fits(pod, info, objs).is_success is (status.is_success or status.is_skip)


def test_csi_ephemeral_volume_counts_through_its_claim():
    objs = cluster()
    objs.persistent_volume_claims["default/p-eph"] = claim("p-eph", "pv2")
    info = node_info(make_node("n1").obj(), pod_claims("c0", "c1", name="old"))
    pod = make_pod("p").volume({"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}).obj()
    # 2 attached + 1 (pv2 via claim "p-eph") > 2
    assert run(NodeVolumeLimits(), pod, info, objs).reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


def test_csi_node_without_csinode_is_unlimited():
    objs = cluster()
    info = node_info(make_node("n2").obj(), pod_claims("c0", "c1", "c2", name="old"))
    assert run(NodeVolumeLimits(), pod_claims("c3"), info, objs).is_success


def test_csi_missing_claim_of_new_pod_is_unresolvable_on_every_node():
    objs = cluster()
    info = node_info(make_node("n1").obj())
    status = run(NodeVolumeLimits(), pod_claims("nope"), info, objs)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p").obj(), id="no volumes"),
        pytest.param(make_pod("p").volume({"name": "e", "emptyDir": {}}).obj(), id="no claims"),
        pytest.param(
            make_pod("p").volume({"name": "c", "csi": {"driver": DRIVER}}).obj(), id="inline csi is not attachable"
        ),
        pytest.param(pod_claims("c-nfs"), id="claim on an NFS PV"),
        pytest.param(pod_claims("unbound-noclass", "unbound-ghostclass"), id="unbound claims without a usable class"),
    ],
)
def test_csi_pre_filter_skips(pod):
    assert (
        NodeVolumeLimits()
        .pre_filter(CycleState(), pod, Snapshot.of([node_info(make_node("n1").obj())], cluster()))
        .is_skip
    )


def test_csi_vector_agrees_with_filter():
    rng = random.Random(11)
    names = [f"c{i}" for i in range(6)] + ["c0-again", "c-other", "unbound", "unbound2", "c-ebs1"]
    objs = cluster()
    infos = []
    for n in range(30):
        name = f"n{n}"
        objs.csi_nodes[name] = CSINode(name, {DRIVER: rng.randrange(4), OTHER: rng.randrange(2)})
        pods = [pod_claims(*rng.sample(names, rng.randrange(3)), name=f"e{n}-{j}") for j in range(rng.randrange(3))]
        infos.append(node_info(make_node(name).obj(), *pods))
    snap = Snapshot.of(infos, objs)
    plugin = NodeVolumeLimits()
    for t in range(25):
        pod = pod_claims(*rng.sample(names, rng.randrange(1, 4)), name=f"p{t}")
        state = CycleState()
        if plugin.pre_filter(state, pod, snap).is_skip:
            continue
        index = np.arange(len(infos), dtype=np.intp)
        mask = plugin.filter_nodes(state, pod, snap.table, index)
        assert mask.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index]


# =========================================================================== v1.9 counters


def ebs(vid: str) -> dict[str, Any]:
    return {"name": f"ebs-{vid}", "awsElasticBlockStore": {"volumeID": vid}}


def pvc_vol(c: str) -> dict[str, Any]:
    return {"name": f"pvc-{c}", "persistentVolumeClaim": {"claimName": c}}


def pod_vols(*volumes: dict[str, Any], name: str = "p"):
    b = make_pod(name)
    for v in volumes:
        b.volume(v)
    return b.obj()


@pytest.mark.parametrize(
    "new, existing, max_volumes, fit",
    [
        # maxVolumes 2 unless said otherwise
        pytest.param([ebs("a")], [], 2, True, id="0 + 1 <= 2"),
        pytest.param([ebs("a"), ebs("b"), ebs("c")], [], 2, False, id="0 + 3 > 2"),
        pytest.param([ebs("c")], [[ebs("a"), ebs("b")]], 2, False, id="2 + 1 > 2"),
        pytest.param([ebs("a")], [[ebs("a"), ebs("b")]], 2, True, id="new volume already on the node"),
        pytest.param([ebs("c")], [[ebs("a")], [ebs("a")]], 2, True, id="same id on two pods counts once: 1 + 1"),
        pytest.param([pvc_vol("c-ebs2")], [[ebs("vol-1"), ebs("x")]], 2, False, id="bound PV of the type counts"),
        pytest.param(
            [pvc_vol("c-ebs1")], [[ebs("vol-1"), ebs("x")]], 2, True, id="bound PV with an id already on the node"
        ),
        pytest.param([ebs("c")], [[pvc_vol("c-gce"), ebs("a")]], 2, True, id="PV of another type does not count"),
        pytest.param([ebs("c")], [[pvc_vol("nope"), ebs("a")]], 2, False, id="missing claim counts as one"),
        pytest.param([ebs("c")], [[pvc_vol("unbound"), ebs("a")]], 2, False, id="unbound claim counts as one"),
        pytest.param([ebs("c")], [[pvc_vol("lost-pv"), ebs("a")]], 2, False, id="claim of a missing PV counts as one"),
        pytest.param(
            [pvc_vol("nope")], [[pvc_vol("nope"), ebs("a")]], 2, True, id="the same missing claim counts once"
        ),
        pytest.param([pvc_vol("c0")], [[ebs("a"), ebs("b"), ebs("c")]], 2, True, id="a CSI PV is nothing new"),
        pytest.param([ebs("c")], [[ebs("a"), ebs("b")]], 3, True, id="maxVolumes 3: 2 + 1 <= 3"),
    ],
)
def test_ebs_counter(new, existing, max_volumes, fit):
    objs = cluster()
    info = node_info(make_node("n1").obj(), *(pod_vols(*vs, name=f"e{i}") for i, vs in enumerate(existing)))
    pod = pod_vols(*new)
    plugin = EBSLimits.new({"maxVolumes": max_volumes})
    status = run(plugin, pod, info, objs)
    if fit:
        assert status.is_success or status.is_skip
    else:
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)
    assert plugin.fits(pod, info, objs).is_success is (status.is_success or status.is_skip)


@pytest.mark.parametrize(
    "cls, kind, key, default",
    [
        pytest.param(EBSLimits, "awsElasticBlockStore", "volumeID", 39, id="ebs"),
        pytest.param(GCEPDLimits, "gcePersistentDisk", "pdName", 16, id="gce pd"),
        pytest.param(AzureDiskLimits, "azureDisk", "diskName", 16, id="azure disk"),
    ],
)
def test_default_limits(cls, kind, key, default):
    def vol(i: int) -> dict[str, Any]:
        return {"name": f"d{i}", kind: {key: f"disk-{i}"}}

    objs = ClusterObjects()
    plugin = cls()
    assert plugin.args.max_volumes == default
    info = node_info(make_node("n1").obj(), pod_vols(*(vol(i) for i in range(default - 1)), name="old"))
    assert run(plugin, pod_vols(vol(1000)), info, objs).is_success  # (default - 1) + 1 == default
    assert run(plugin, pod_vols(vol(1000), vol(1001)), info, objs).reasons == (
        ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    )  # + 2 > default
    # other types never count
    other = {"name": "o", "emptyDir": {}}
    assert cls().pre_filter(CycleState(), pod_vols(other), Snapshot.of([info], objs)).is_skip


def test_legacy_claim_without_name_is_an_error():
    status = run(
        GCEPDLimits(),
        pod_vols({"name": "v", "persistentVolumeClaim": {"claimName": ""}}),
        node_info(make_node("n1").obj()),
        cluster(),
    )
    assert status.code is Code.ERROR
    assert status.reasons == ("PersistentVolumeClaim had no name",)


def test_legacy_skips_when_no_volume_counts():
    snap = Snapshot.of([node_info(make_node("n1").obj())], cluster())
    assert (
        EBSLimits()
        .pre_filter(CycleState(), pod_vols({"name": "g", "gcePersistentDisk": {"pdName": "x"}}), snap)
        .is_skip
    )
    assert EBSLimits().pre_filter(CycleState(), pod_vols(pvc_vol("c-gce")), snap).is_skip
    assert not EBSLimits().pre_filter(CycleState(), pod_vols(pvc_vol("unbound")), snap).is_skip


def test_legacy_vector_agrees_with_filter():
    rng = random.Random(5)
    objs = cluster()
    choices = [
        ebs("a"),
        ebs("b"),
        ebs("c"),
        ebs("d"),
        pvc_vol("c-ebs1"),
        pvc_vol("c-ebs2"),
        pvc_vol("nope"),
        pvc_vol("c-gce"),
    ]

    def some() -> list[dict[str, Any]]:
        return rng.sample(choices, rng.randrange(4))

    infos = [
        node_info(make_node(f"n{n}").obj(), *(pod_vols(*some(), name=f"e{n}-{j}") for j in range(rng.randrange(3))))
        for n in range(30)
    ]
    snap = Snapshot.of(infos, objs)
    plugin = EBSLimits(EBSLimitsArgs(max_volumes=3))
    for t in range(25):
        pod = pod_vols(*some(), name=f"p{t}")
        state = CycleState()
        if plugin.pre_filter(state, pod, snap).is_skip:
            continue
        index = np.arange(len(infos), dtype=np.intp)
        mask = plugin.filter_nodes(state, pod, snap.table, index)
        assert mask.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index]


def test_names_and_args():
    assert NodeVolumeLimits().name == NodeVolumeLimits.NAME == "NodeVolumeLimits"
    assert (EBSLimits().name, GCEPDLimits().name, AzureDiskLimits().name) == (
        "EBSLimits",
        "GCEPDLimits",
        "AzureDiskLimits",
    )
    assert (EBSLimits.NAME, GCEPDLimits.NAME, AzureDiskLimits.NAME) == ("EBSLimits", "GCEPDLimits", "AzureDiskLimits")
    assert EBSLimits(name="MaxEBSVolumeCount").name == "MaxEBSVolumeCount"
    assert AzureDiskLimits.new({"maxVolumes": 5}).args == AzureDiskLimitsArgs(max_volumes=5)
    assert GCEPDLimits.new({}).args == GCEPDLimitsArgs() == GCEPDLimitsArgs(max_volumes=16)
    for bad in (0, -1, "5", True, 1.5):
        with pytest.raises(PluginArgsError) as err:
            EBSLimits.new({"maxVolumes": bad})
        assert err.value.field == "maxVolumes"
    with pytest.raises(PluginArgsError) as err:
        GCEPDLimits.new({"other": 1})
    assert err.value.field == "other"
    with pytest.raises(PluginArgsError) as err:
        NodeVolumeLimits.new({"x": 1})
    assert err.value.field == "x"


@pytest.mark.parametrize("bad", [0, -1], ids=["zero", "negative"])
def test_typed_max_volumes_is_validated(bad):
    with pytest.raises(PluginArgsError) as err:
        EBSLimitsArgs(max_volumes=bad)
    assert (err.value.field, err.value.message) == ("maxVolumes", f"must be a positive integer, got {bad}")


def test_args_of_one_counter_are_not_another_counters():
    with pytest.raises(TypeError):
        GCEPDLimits(EBSLimitsArgs())  # type: ignore[arg-type]
