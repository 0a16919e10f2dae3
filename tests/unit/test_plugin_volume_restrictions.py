"""VolumeRestrictions: disk conflicts per source, ReadWriteOncePod claims, SKIPs, vector agreement."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.parsing import parse_persistent_volume_claim
from kopf_scheduler.core.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
    fits,
)


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"name": f"gce-{pd}", "gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def ebs(vid: str, ro: bool = False) -> dict[str, Any]:
    return {"name": f"ebs-{vid}", "awsElasticBlockStore": {"volumeID": vid, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"name": f"iscsi-{iqn}", "iscsi": {"iqn": iqn, "targetPortal": "10.0.0.1:3260", "lun": 0, "readOnly": ro}}


def rbd(monitors: list[str], pool: str, image: str, ro: bool = False) -> dict[str, Any]:
    return {"name": f"rbd-{image}", "rbd": {"monitors": monitors, "pool": pool, "image": image, "readOnly": ro}}


def pod_with(*volumes: dict[str, Any], name: str = "p", ns: str = "default"):
    b = make_pod(name, ns)
    for v in volumes:
        b.volume(v)
    return b.obj()


def claim(name: str, *modes: str, ns: str = "default"):
    return parse_persistent_volume_claim(
        {"metadata": {"name": name, "namespace": ns}, "spec": {"accessModes": list(modes) or ["ReadWriteOnce"]}}
    )


def objects_with(*claims) -> ClusterObjects:
    return ClusterObjects(persistent_volume_claims={c.key: c for c in claims})


@pytest.mark.parametrize(
    "new, existing, conflict",
    [
        pytest.param([], [gce("a")], False, id="no volumes"),
        pytest.param([gce("a")], [], False, id="nothing on the node"),
        pytest.param([gce("a")], [gce("a")], True, id="gce same pd"),
        pytest.param([gce("a")], [gce("b")], False, id="gce other pd"),
        pytest.param([gce("a", ro=True)], [gce("a", ro=True)], False, id="gce both read-only"),
        pytest.param([gce("a", ro=True)], [gce("a")], True, id="gce one read-write"),
        pytest.param([ebs("v1")], [ebs("v1")], True, id="ebs same id"),
        pytest.param([ebs("v1", ro=True)], [ebs("v1", ro=True)], True, id="ebs both read-only still conflict"),
        pytest.param([ebs("v1")], [ebs("v2")], False, id="ebs other id"),
        pytest.param([iscsi("iqn.a")], [iscsi("iqn.a")], True, id="iscsi same iqn"),
        pytest.param([iscsi("iqn.a", ro=True)], [iscsi("iqn.a", ro=True)], False, id="iscsi both read-only"),
        pytest.param([iscsi("iqn.a")], [iscsi("iqn.b")], False, id="iscsi other iqn"),
        pytest.param([rbd(["m1", "m2"], "p", "img")], [rbd(["m2", "m3"], "p", "img")], True, id="rbd shared monitor"),
        pytest.param([rbd(["m1"], "p", "img")], [rbd(["m3"], "p", "img")], False, id="rbd no shared monitor"),
        pytest.param([rbd(["m1"], "p", "img")], [rbd(["m1"], "q", "img")], False, id="rbd other pool"),
        pytest.param([rbd(["m1"], "p", "img")], [rbd(["m1"], "p", "img2")], False, id="rbd other image"),
        pytest.param(
            [rbd(["m1"], "p", "img", ro=True)], [rbd(["m1"], "p", "img", ro=True)], False, id="rbd both read-only"
        ),
        pytest.param([gce("a")], [ebs("a")], False, id="same name, other sources"),
        pytest.param([gce("x"), ebs("v1")], [gce("y"), ebs("v1")], True, id="second volume conflicts"),
    ],
)
def test_disk_conflicts(new, existing, conflict):
    pod = pod_with(*new)
    info = node_info(make_node("n1").obj(), pod_with(*existing, name="old"))
    snap = Snapshot.of([info])
    plugin = VolumeRestrictions()
    state = CycleState()
    pre = plugin.pre_filter(state, pod, snap)
    assert pre.is_skip is (not new)  # no claims here: SKIP exactly when there is no disk to check
    if pre.is_skip:
        return
    status = plugin.filter(state, pod, info)
    if conflict:
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON_DISK_CONFLICT,) == ("node(s) had no available disk",)
    else:
        assert status.is_success
    assert fits(pod, info, snap) == status


def test_rbd_pool_defaults_to_rbd():
    a = pod_with({"name": "r", "rbd": {"monitors": ["m"], "image": "img"}})
    b = pod_with({"name": "r", "rbd": {"monitors": ["m"], "pool": "rbd", "image": "img"}}, name="old")
    info = node_info(make_node("n1").obj(), b)
    assert fits(a, info, Snapshot.of([info])).reasons == (ERR_REASON_DISK_CONFLICT,)


def test_missing_claim_is_unresolvable_in_pre_filter():
    pod = make_pod("p").pvc("data").obj()
    info = node_info(make_node("n1").obj())
    status = VolumeRestrictions().pre_filter(CycleState(), pod, Snapshot.of([info]))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ('persistentvolumeclaim "data" not found',)


@pytest.mark.parametrize(
    "modes, user_on, expect",
    [
        # the claim is used by "old" on n2 (or nobody); RWOP counts cluster-wide, as upstream
        pytest.param(["ReadWriteOncePod"], "n2", "conflict", id="rwop in use on another node"),
        pytest.param(["ReadWriteOncePod"], "n1", "conflict", id="rwop in use on this node"),
        pytest.param(["ReadWriteOncePod"], None, "skip", id="rwop unused"),
        pytest.param(["ReadWriteOnce"], "n2", "skip", id="rwo in use: not this plugin's business"),
        pytest.param(["ReadWriteMany", "ReadWriteOncePod"], "n2", "conflict", id="rwop among other modes"),
    ],
)
def test_read_write_once_pod(modes, user_on, expect):
    objs = objects_with(claim("data", *modes))
    n1, n2 = make_node("n1").obj(), make_node("n2").obj()
    old = make_pod("old").pvc("data").obj()
    infos = [
        node_info(n1, old) if user_on == "n1" else node_info(n1),
        node_info(n2, old) if user_on == "n2" else node_info(n2),
    ]
    snap = Snapshot.of(infos, objs)
    pod = make_pod("p").pvc("data").obj()
    plugin = VolumeRestrictions()
    state = CycleState()
    pre = plugin.pre_filter(state, pod, snap)
    if expect == "skip":
        assert pre.is_skip
        return
    assert pre.is_success
    for info in infos:
        status = plugin.filter(state, pod, info)
        assert status.code is Code.UNSCHEDULABLE  # preemption may evict the other user
        assert status.reasons == (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,)
    assert ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT == (
        "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
        "already in-use by another pod"
    )
    mask = plugin.filter_nodes(state, pod, snap.table, np.arange(2, dtype=np.intp))
    assert not mask.any()


def test_rwop_claim_in_other_namespace_does_not_count():
    objs = objects_with(claim("data", "ReadWriteOncePod"), claim("data", "ReadWriteOncePod", ns="other"))
    old = make_pod("old", "other").pvc("data").obj()
    snap = Snapshot.of([node_info(make_node("n1").obj(), old)], objs)
    assert VolumeRestrictions().pre_filter(CycleState(), make_pod("p").pvc("data").obj(), snap).is_skip


def test_fits_with_a_what_if_node_info():
    """Preemption removes the other user from its node: fits() honours the stand-in NodeInfo."""
    objs = objects_with(claim("data", "ReadWriteOncePod"))
    node = make_node("n1").obj()
    old = make_pod("old").pvc("data").obj().with_node("n1")
    snap = Snapshot.of([node_info(node, old)], objs)
    pod = make_pod("p").pvc("data").obj()
    assert fits(pod, snap.get("n1"), snap).reasons == (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,)
    what_if = snap.get("n1").clone()
    what_if.remove_pod(old)
    assert fits(pod, what_if, snap).is_success


def _verdicts(plugin: VolumeRestrictions, state: CycleState, pod, infos) -> list[tuple[Code, tuple[str, ...]]]:
    return [(s.code, s.reasons) for s in (plugin.filter(state, pod, i) for i in infos)]


@pytest.mark.parametrize(
    "user_ns, volumes, want_count",
    [
        pytest.param("default", ["data"], 1, id="the user of the RWOP claim"),
        pytest.param("default", ["data", "other"], 1, id="only the RWOP claim counts"),
        pytest.param("default", ["other"], 0, id="a pod using another claim"),
        pytest.param("other", ["data"], 0, id="a same-named claim in another namespace is another claim"),
    ],
)
def test_add_and_remove_pod_adjust_the_rwop_count(user_ns, volumes, want_count):
    """Removing the claim's only user equals a snapshot without it; adding it back equals the original."""
    objs = objects_with(
        claim("data", "ReadWriteOncePod"),
        claim("other"),
        claim("data", "ReadWriteOncePod", ns="other"),
        claim("other", ns="other"),
    )
    user = make_pod("user", user_ns)
    for c in volumes:
        user.pvc(c)
    old = user.obj().with_node("n2")
    blocker = make_pod("blocker").pvc("data").obj().with_node("n1")  # keeps the state from SKIPping
    n1, n2 = make_node("n1").obj(), make_node("n2").obj()
    with_user = Snapshot.of([node_info(n1, blocker), node_info(n2, old)], objs)
    pod = make_pod("p").pvc("data").obj()
    plugin = VolumeRestrictions()
    state = CycleState()
    assert plugin.pre_filter(state, pod, with_user).is_success
    before = _verdicts(plugin, state, pod, with_user.node_infos)

    # remove the blocker: only the user (if it counts) is left
    without_blocker = Snapshot.of([node_info(n1), node_info(n2, old)], objs)
    removed = state.clone()
    assert plugin.remove_pod(removed, pod, blocker, with_user.get("n1")).is_success
    fresh = CycleState()
    if plugin.pre_filter(fresh, pod, without_blocker).is_skip:
        assert want_count == 0
        assert _verdicts(plugin, removed, pod, without_blocker.node_infos) == [(Code.SUCCESS, ())] * 2
    else:
        assert want_count == 1
        assert _verdicts(plugin, removed, pod, without_blocker.node_infos) == _verdicts(
            plugin, fresh, pod, without_blocker.node_infos
        )
    # the original cycle still reads its own entry
    assert _verdicts(plugin, state, pod, with_user.node_infos) == before

    # add the blocker back onto the what-if: the original verdicts again
    assert plugin.add_pod(removed, pod, blocker, without_blocker.get("n1")).is_success
    assert _verdicts(plugin, removed, pod, with_user.node_infos) == before


def test_add_and_remove_pod_without_pre_filter_state_are_errors():
    plugin = VolumeRestrictions()
    pod, other = make_pod("p").pvc("data").obj(), make_pod("o").pvc("data").obj()
    info = node_info(make_node("n1").obj())
    assert plugin.add_pod(CycleState(), pod, other, info).code is Code.ERROR
    assert plugin.remove_pod(CycleState(), pod, other, info).code is Code.ERROR


def test_disk_and_rwop_together_disk_reason_first():
    objs = objects_with(claim("data", "ReadWriteOncePod"))
    old = pod_with(gce("a"), {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}, name="old")
    info = node_info(make_node("n1").obj(), old)
    snap = Snapshot.of([info], objs)
    pod = pod_with(gce("a"), {"name": "d", "persistentVolumeClaim": {"claimName": "data"}})
    assert fits(pod, info, snap).reasons == (ERR_REASON_DISK_CONFLICT,)


def test_filter_without_pre_filter_state_is_an_error():
    pod = pod_with(gce("a"))
    info = node_info(make_node("n1").obj())
    assert VolumeRestrictions().filter(CycleState(), pod, info).code is Code.ERROR


def test_vector_agrees_with_filter():
    rng = random.Random(7)
    sources = [
        lambda i: gce(f"pd{i}", rng.random() < 0.5),
        lambda i: ebs(f"v{i}"),
        lambda i: iscsi(f"q{i}", rng.random() < 0.5),
        lambda i: rbd([f"m{rng.randrange(3)}"], "p", f"img{i}", rng.random() < 0.5),
    ]

    def random_volumes() -> list[dict[str, Any]]:
        out = {}
        for _ in range(rng.randrange(3)):
            v = rng.choice(sources)(rng.randrange(4))
            out[v["name"]] = v
        return list(out.values())

    infos = []
    for n in range(40):
        pods = [pod_with(*random_volumes(), name=f"e{n}-{j}") for j in range(rng.randrange(4))]
        infos.append(node_info(make_node(f"n{n}").obj(), *pods))
    snap = Snapshot.of(infos)
    plugin = VolumeRestrictions()
    for t in range(30):
        pod = pod_with(*random_volumes(), name=f"p{t}")
        state = CycleState()
        if plugin.pre_filter(state, pod, snap).is_skip:
            continue
        index = np.arange(len(infos), dtype=np.intp)[::-1].copy()
        mask = plugin.filter_nodes(state, pod, snap.table, index)
        assert mask.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index]


def test_args_and_name():
    assert VolumeRestrictions().name == VolumeRestrictions.NAME == "VolumeRestrictions"
    assert VolumeRestrictions(name="NoDiskConflict").name == "NoDiskConflict"
    with pytest.raises(PluginArgsError) as err:
        VolumeRestrictions.new({"x": 1})
    assert err.value.field == "x"
