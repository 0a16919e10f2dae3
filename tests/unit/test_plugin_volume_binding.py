"""VolumeBinding (static checks): bound PV node affinity, WaitForFirstConsumer matching, provisioning topology."""

from __future__ import annotations

import random
from typing import Any

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
from kopf_scheduler.core.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    VolumeBinding,
    VolumeBindingArgs,
    fits,
)
from kopf_scheduler.core.toolkit.scoring import UtilizationShapePoint

HOST = "kubernetes.io/hostname"


def affinity(key: str, *values: str, op: str = "In") -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}]
        }
    }


def pv(
    name: str,
    *,
    sc: str = "local",
    size: str = "10Gi",
    modes=("ReadWriteOnce",),
    claim: str = "",
    phase: str = "Available",
    node_affinity: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
):
    spec: dict[str, Any] = {
        "storageClassName": sc,
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "local": {"path": "/d"},
    }
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    if node_affinity is not None:
        spec["nodeAffinity"] = node_affinity
    return parse_persistent_volume(
        {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": {"phase": phase}}
    )


def pvc(
    name: str,
    *,
    sc: str | None = "local",
    size: str = "5Gi",
    modes=("ReadWriteOnce",),
    volume: str = "",
    phase: str = "",
    selector: dict[str, Any] | None = None,
):
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    status = {"phase": phase or ("Bound" if volume else "Pending")}
    return parse_persistent_volume_claim(
        {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": status}
    )


def sc(
    name: str,
    provisioner: str,
    mode: str = "WaitForFirstConsumer",
    topologies: list[dict[str, list[str]]] | None = None,
):
    body: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if topologies is not None:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": v} for k, v in t.items()]} for t in topologies
        ]
    return parse_storage_class(body)


CLASSES = [
    sc("local", "kubernetes.io/no-provisioner"),
    sc("dyn", "csi.example.com"),
    sc("dyn-zoned", "csi.example.com", topologies=[{"zone": ["a", "b"]}]),
    sc("dyn-empty-term", "csi.example.com", topologies=[{}]),
    sc("now", "csi.example.com", mode="Immediate"),
]


def objects(pvs=(), pvcs=()) -> ClusterObjects:
    return ClusterObjects(
        persistent_volumes={p.name: p for p in pvs},
        persistent_volume_claims={c.key: c for c in pvcs},
        storage_classes={s.name: s for s in CLASSES},
    )


def pod_claims(*claims: str):
    b = make_pod("p")
    for c in claims:
        b.pvc(c)
    return b.obj()


def evaluate(pod, objs, node):
    """PreFilter then Filter on one node; returns the PreFilter status when it does not succeed."""
    info = node_info(node)
    plugin = VolumeBinding()
    state = CycleState()
    pre = plugin.pre_filter(state, pod, Snapshot.of([info], objs))
    if not pre.is_success:
        return pre
    status = plugin.filter(state, pod, info)
    assert fits(pod, info, objs) == status
    return status


N1 = make_node("n1").label(zone="a").obj()
N2 = make_node("n2").label(zone="c").obj()


@pytest.mark.parametrize(
    "pvs, pvcs, node, reasons",
    [
        # ---- bound claims
        pytest.param([pv("pv1", claim="c", phase="Bound")], [pvc("c", volume="pv1")], N1, (), id="bound, no affinity"),
        pytest.param(
            [pv("pv1", claim="c", phase="Bound", node_affinity=affinity(HOST, "n1"))],
            [pvc("c", volume="pv1")],
            N1,
            (),
            id="bound, affinity matches",
        ),
        pytest.param(
            [pv("pv1", claim="c", phase="Bound", node_affinity=affinity(HOST, "n1"))],
            [pvc("c", volume="pv1")],
            N2,
            (ERR_REASON_NODE_CONFLICT,),
            id="bound, affinity to another node",
        ),
        pytest.param([], [pvc("c", volume="ghost")], N1, (ERR_REASON_PV_NOT_EXIST,), id="bound to a missing pv"),
        pytest.param(
            [pv("pv1", claim="c", phase="Bound", node_affinity={"required": {"nodeSelectorTerms": []}})],
            [pvc("c", volume="pv1")],
            N1,
            (ERR_REASON_NODE_CONFLICT,),
            id="bound, empty required terms match nothing",
        ),
        # ---- WaitForFirstConsumer, static PVs
        pytest.param(
            [pv("pv1", node_affinity=affinity(HOST, "n1"))], [pvc("c")], N1, (), id="wffc, available pv on this node"
        ),
        pytest.param(
            [pv("pv1", node_affinity=affinity(HOST, "n1"))],
            [pvc("c")],
            N2,
            (ERR_REASON_BIND_CONFLICT,),
            id="wffc, pv on another node",
        ),
        pytest.param(
            [pv("pv1", size="1Gi")], [pvc("c")], N1, (ERR_REASON_BIND_CONFLICT,), id="wffc, pv too small (1Gi < 5Gi)"
        ),
        pytest.param(
            [pv("pv1", modes=("ReadOnlyMany",))],
            [pvc("c")],
            N1,
            (ERR_REASON_BIND_CONFLICT,),
            id="wffc, access modes not a superset",
        ),
        pytest.param(
            [pv("pv1", modes=("ReadWriteOnce", "ReadOnlyMany"))], [pvc("c")], N1, (), id="wffc, access modes a superset"
        ),
        pytest.param(
            [pv("pv1", sc="other")], [pvc("c")], N1, (ERR_REASON_BIND_CONFLICT,), id="wffc, pv of another class"
        ),
        pytest.param(
            [pv("pv1", phase="Released")], [pvc("c")], N1, (ERR_REASON_BIND_CONFLICT,), id="wffc, pv not Available"
        ),
        pytest.param(
            [pv("pv1", claim="someone-else")],
            [pvc("c")],
            N1,
            (ERR_REASON_BIND_CONFLICT,),
            id="wffc, pv claimed by another claim",
        ),
        pytest.param(
            [pv("pv1", claim="c", phase="Released")], [pvc("c")], N1, (), id="wffc, pv pre-bound to this claim"
        ),
        pytest.param(
            [pv("pv1", claim="c", node_affinity=affinity(HOST, "n2")), pv("pv2")],
            [pvc("c")],
            N1,
            (ERR_REASON_BIND_CONFLICT,),
            id="wffc, pre-bound pv elsewhere: no other pv is tried",
        ),
        pytest.param(
            [pv("pv1", labels={"tier": "gold"})],
            [pvc("c", selector={"matchLabels": {"tier": "gold"}})],
            N1,
            (),
            id="wffc, selector matches",
        ),
        pytest.param(
            [pv("pv1", labels={"tier": "iron"})],
            [pvc("c", selector={"matchLabels": {"tier": "gold"}})],
            N1,
            (ERR_REASON_BIND_CONFLICT,),
            id="wffc, selector does not match",
        ),
        pytest.param(
            [pv("pv1")], [pvc("c1"), pvc("c2")], N1, (ERR_REASON_BIND_CONFLICT,), id="wffc, two claims, one pv"
        ),
        pytest.param([pv("pv1"), pv("pv2")], [pvc("c1"), pvc("c2")], N1, (), id="wffc, two claims, two pvs"),
        pytest.param(
            [pv("big", size="20Gi"), pv("small", size="6Gi")],
            [pvc("c1", size="15Gi"), pvc("c2", size="5Gi")],
            N1,
            (),
            id="smallest claim first takes the smallest fitting pv",
        ),
        # ---- dynamic provisioning
        pytest.param([], [pvc("c", sc="dyn")], N1, (), id="provisioner, no topology"),
        pytest.param([], [pvc("c", sc="dyn-zoned")], N1, (), id="provisioner, topology matches (zone a)"),
        pytest.param(
            [],
            [pvc("c", sc="dyn-zoned")],
            N2,
            (ERR_REASON_BIND_CONFLICT,),
            id="provisioner, topology does not match (zone c)",
        ),
        pytest.param(
            [], [pvc("c", sc="dyn-empty-term")], N1, (ERR_REASON_BIND_CONFLICT,), id="provisioner, empty topology term"
        ),
        pytest.param([], [pvc("c")], N1, (ERR_REASON_BIND_CONFLICT,), id="no-provisioner and no pv"),
        # ---- both kinds of reason together
        pytest.param(
            [pv("pv1", claim="b", phase="Bound", node_affinity=affinity(HOST, "n2"))],
            [pvc("b", volume="pv1"), pvc("c")],
            N1,
            (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT),
            id="affinity conflict and nothing to bind",
        ),
    ],
)
def test_filter(pvs, pvcs, node, reasons):
    pod = pod_claims(*(c.name for c in pvcs))
    status = evaluate(pod, objects(pvs, pvcs), node)
    if not reasons:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == reasons


def test_reason_strings():
    assert ERR_REASON_NODE_CONFLICT == "node(s) didn't match PersistentVolume's node affinity"
    assert ERR_REASON_BIND_CONFLICT == "node(s) didn't find available persistent volumes to bind"
    assert ERR_REASON_UNBOUND_IMMEDIATE == "pod has unbound immediate PersistentVolumeClaims"
    assert ERR_REASON_PV_NOT_EXIST == "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@pytest.mark.parametrize(
    "pod, pvcs, reason",
    [
        pytest.param(pod_claims("nope"), [], 'persistentvolumeclaim "nope" not found', id="missing claim"),
        pytest.param(
            make_pod("p").volume({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}).obj(),
            [],
            'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
            id="missing ephemeral claim",
        ),
        pytest.param(pod_claims("c"), [pvc("c", sc="now")], ERR_REASON_UNBOUND_IMMEDIATE, id="unbound immediate"),
        pytest.param(pod_claims("c"), [pvc("c", sc=None)], ERR_REASON_UNBOUND_IMMEDIATE, id="unbound without class"),
        pytest.param(
            pod_claims("c"), [pvc("c", sc="ghost")], ERR_REASON_UNBOUND_IMMEDIATE, id="unbound, class missing"
        ),
        pytest.param(
            pod_claims("c"),
            [pvc("c", volume="pv1", phase="Pending")],
            ERR_REASON_UNBOUND_IMMEDIATE,
            id="pre-bound, not bound yet",
        ),
        pytest.param(
            pod_claims("c"),
            [pvc("c", volume="pv1", phase="Lost")],
            'persistentvolumeclaim "c" bound to non-existent persistentvolume "pv1"',
            id="lost claim",
        ),
    ],
)
def test_pre_filter_rejections(pod, pvcs, reason):
    status = VolumeBinding().pre_filter(CycleState(), pod, Snapshot.of([node_info(N1)], objects((), pvcs)))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (reason,)


def test_ephemeral_volume_uses_its_claim():
    objs = objects([pv("pv1", node_affinity=affinity(HOST, "n1"))], [pvc("p-scratch")])
    pod = make_pod("p").volume({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}).obj()
    assert evaluate(pod, objs, N1).is_success
    assert evaluate(pod, objs, N2).reasons == (ERR_REASON_BIND_CONFLICT,)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p").obj(), id="no volumes"),
        pytest.param(make_pod("p").volume({"name": "e", "emptyDir": {}}).obj(), id="no claims"),
    ],
)
def test_pre_filter_skips(pod):
    assert VolumeBinding().pre_filter(CycleState(), pod, Snapshot.of([node_info(N1)], objects())).is_skip


def test_filter_without_state_is_an_error():
    assert VolumeBinding().filter(CycleState(), pod_claims("c"), node_info(N1)).code is Code.ERROR


def test_vector_agrees_with_filter():
    rng = random.Random(13)
    pvs = [
        pv(f"pv{i}", size=f"{rng.randrange(1, 20)}Gi", node_affinity=affinity(HOST, f"n{rng.randrange(20)}"))
        for i in range(15)
    ]
    pvs.append(pv("bound-pv", claim="b", phase="Bound", node_affinity=affinity("zone", "a")))
    pvcs = [pvc(f"c{i}", size=f"{rng.randrange(1, 10)}Gi") for i in range(5)] + [
        pvc("b", volume="bound-pv"),
        pvc("d", sc="dyn-zoned"),
    ]
    objs = objects(pvs, pvcs)
    infos = [node_info(make_node(f"n{n}").label(zone=rng.choice("abc")).obj()) for n in range(20)]
    snap = Snapshot.of(infos, objs)
    plugin = VolumeBinding()
    names = [c.name for c in pvcs]
    for _t in range(25):
        pod = pod_claims(*rng.sample(names, rng.randrange(1, 4)))
        state = CycleState()
        if not plugin.pre_filter(state, pod, snap).is_success:
            continue
        index = np.arange(len(infos), dtype=np.intp)
        mask = plugin.filter_nodes(state, pod, snap.table, index)
        assert mask.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index]


def test_args_and_name():
    assert VolumeBinding().name == VolumeBinding.NAME == "VolumeBinding"
    assert VolumeBinding(name="CheckVolumeBinding").name == "CheckVolumeBinding"
    assert VolumeBinding().args.bind_timeout_seconds == 600
    assert VolumeBinding.new({"bindTimeoutSeconds": 30}).args == VolumeBindingArgs(bind_timeout_seconds=30)


@pytest.mark.parametrize(
    "args, field, message",
    [
        pytest.param(
            {"bindTimeoutSeconds": -1},
            "bindTimeoutSeconds",
            "invalid BindTimeoutSeconds, should not be a negative value",
            id="negative timeout",
        ),
        pytest.param(
            {"bindTimeoutSeconds": "10"},
            "bindTimeoutSeconds",
            "must be an integer, not '10'",
            id="timeout not an integer",
        ),
        pytest.param(
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]},
            "shape[1].utilization",
            "values must be sorted in increasing order",
            id="shape not increasing",
        ),
        pytest.param(
            {"shape": [{"utilization": 101, "score": 1}]},
            "shape[0].utilization",
            "not in valid range [0, 100]",
            id="utilization out of range",
        ),
        pytest.param(
            {"shape": [{"utilization": 0, "score": 11}]}, "shape[0].score", "not in valid range [0, 10]", id="score"
        ),
        pytest.param({"nope": 1}, "nope", None, id="unknown field"),
    ],
)
def test_args_rejected(args, field, message):
    with pytest.raises(PluginArgsError) as err:
        VolumeBinding.new(args)
    assert err.value.field == field
    if message is not None:
        assert err.value.message == message


def test_typed_args_are_validated():
    with pytest.raises(PluginArgsError) as err:
        VolumeBindingArgs(bind_timeout_seconds=-5)
    assert err.value.field == "bindTimeoutSeconds"
    with pytest.raises(PluginArgsError) as err:
        VolumeBindingArgs(shape=(UtilizationShapePoint(0, 20),))
    assert err.value.field == "shape[0].score"
