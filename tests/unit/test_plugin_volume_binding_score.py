"""VolumeBinding's capacity score (StorageCapacityScoring, beta and on in v1.37): upstream's numbers.

Cases from upstream v1.37.2 ``volumebinding/scorer_test.go`` (``TestScore``) and ``volume_binding_test.go``
(``TestVolumeBinding``'s ``wantScores`` with ``EnableStorageCapacityScoring: true``).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.interface import ClusterEvent, QueueingHint
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import PersistentVolume, PersistentVolumeClaim
from kopf_scheduler.core.model.parsing import (
    parse_csi_driver,
    parse_csi_storage_capacity,
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kopf_scheduler.core.plugins.volume_binding import (
    DEFAULT_SHAPE,
    VolumeBinding,
    VolumeBindingArgs,
    capacity_score,
)
from kopf_scheduler.core.toolkit.scoring import UtilizationShapePoint

HOST = "kubernetes.io/hostname"
DEFAULT = VolumeBindingArgs().scaled_shape


def classes(*resources: tuple[str, int, int]) -> list[tuple[PersistentVolumeClaim, PersistentVolume]]:
    """One static binding per (class, requested, capacity)."""
    return [
        (
            PersistentVolumeClaim("default", f"c{i}", request=req),
            PersistentVolume(f"pv{i}", storage_class=sc, capacity=cap),
        )
        for i, (sc, req, cap) in enumerate(resources)
    ]


@pytest.mark.parametrize(
    "resources, score",
    [
        # default shape, single class
        ((("hdd", 0, 100),), 100),
        ((("hdd", 30, 100),), 70),
        ((("hdd", 50, 100),), 50),
        ((("hdd", 100, 100),), 0),
        # default shape, multiple classes
        ((("hdd", 0, 100), ("ssd", 0, 100)), 100),
        ((("hdd", 0, 100), ("ssd", 30, 100)), 85),
        ((("hdd", 30, 100), ("ssd", 30, 100)), 70),
        ((("hdd", 30, 100), ("ssd", 60, 100)), 55),
        ((("hdd", 50, 100), ("ssd", 50, 100)), 50),
        ((("hdd", 50, 100), ("ssd", 100, 100)), 25),
        ((("hdd", 100, 100), ("ssd", 100, 100)), 0),
        # over capacity, no capacity: utilization 100
        ((("hdd", 101, 100),), 0),
        ((("hdd", 1, 0),), 0),
        # two claims of one class: requests and capacities summed
        ((("hdd", 30, 100), ("hdd", 20, 100)), 75),
    ],
)
def test_default_shape(resources, score):
    assert capacity_score(DEFAULT, classes(*resources)) == score


@pytest.mark.parametrize(
    "resources, score",
    [
        ((("hdd", 0, 100), ("ssd", 0, 100)), 0),
        ((("hdd", 0, 100), ("ssd", 30, 100)), 0),
        ((("hdd", 30, 100), ("ssd", 30, 100)), 0),
        ((("hdd", 30, 100), ("ssd", 60, 100)), 5),
        ((("hdd", 50, 100), ("ssd", 100, 100)), 25),
        ((("hdd", 90, 100), ("ssd", 90, 100)), 40),
        ((("hdd", 100, 100), ("ssd", 100, 100)), 50),
    ],
)
def test_custom_shape(resources, score):
    """scorer_test.go "custom shape, multiple classes": points (50, 0), (80, 30), (100, 50), already scaled."""
    assert capacity_score(((50, 0), (80, 30), (100, 50)), classes(*resources)) == score


def test_no_static_binding_scores_zero():
    assert capacity_score(DEFAULT, []) == 0


def test_default_args_are_upstreams_with_the_gate_on():
    assert VolumeBindingArgs().shape is None
    assert DEFAULT_SHAPE == (UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0))
    assert DEFAULT == ((0, 100), (100, 0))
    assert VolumeBinding.new({"shape": []}).args.scaled_shape == DEFAULT  # an empty shape is defaulted too
    custom = VolumeBinding.new({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})
    assert custom.args.scaled_shape == ((0, 0), (100, 100))


# --------------------------------------------------------------------------- through the plugin


def pv(name: str, sc: str, size: str, node: str) -> PersistentVolume:
    return parse_persistent_volume(
        {
            "metadata": {"name": name},
            "spec": {
                "storageClassName": sc,
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/d"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}]
                    }
                },
            },
            "status": {"phase": "Available"},
        }
    )


def pvc(name: str, sc: str, size: str) -> PersistentVolumeClaim:
    return parse_persistent_volume_claim(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "storageClassName": sc,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
            },
        }
    )


def wait_class(name: str, provisioner: str = "kubernetes.io/no-provisioner") -> Any:
    return parse_storage_class(
        {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}
    )


def scores(plugin: VolumeBinding, claims: list[str], objs: ClusterObjects, nodes: list[str]) -> list[int | None]:
    """Each node's score, None where the node is infeasible."""
    b = make_pod("pod-a")
    for c in claims:
        b.volume({"name": c, "persistentVolumeClaim": {"claimName": c}})
    pod = b.obj()
    infos = [node_info(make_node(n).obj()) for n in nodes]
    state = CycleState()
    snap = Snapshot.of(infos, objs)
    assert plugin.pre_filter(state, pod, snap).is_success
    feasible = [i for i in infos if plugin.filter(state, pod, i).is_success]
    assert plugin.pre_score(state, pod, feasible, snap).is_success
    return [plugin.score(state, pod, i) if i in feasible else None for i in infos]


def objects(pvs, pvcs, scs) -> ClusterObjects:
    return ClusterObjects(
        persistent_volumes={p.name: p for p in pvs},
        persistent_volume_claims={c.key: c for c in pvcs},
        storage_classes={s.name: s for s in scs},
    )


def test_local_volumes_with_close_capacity_are_preferred():
    objs = objects(
        [
            pv("pv-a-0", "wait", "200Gi", "node-a"),
            pv("pv-a-1", "wait", "200Gi", "node-a"),
            pv("pv-b-0", "wait", "100Gi", "node-b"),
            pv("pv-b-1", "wait", "100Gi", "node-b"),
        ],
        [pvc("pvc-a", "wait", "50Gi")],
        [wait_class("wait")],
    )
    assert scores(VolumeBinding(), ["pvc-a"], objs, ["node-a", "node-b", "node-c"]) == [75, 50, None]


def test_local_volumes_with_close_capacity_are_preferred_multiple_pvcs():
    objs = objects(
        [pv(f"pv-a-{i}", "wait" if i < 2 else "wait-hdd", "200Gi", "node-a") for i in range(4)]
        + [pv(f"pv-b-{i}", "wait" if i < 2 else "wait-hdd", "100Gi", "node-b") for i in range(4)],
        [pvc("pvc-0", "wait", "50Gi"), pvc("pvc-1", "wait-hdd", "100Gi")],
        [wait_class("wait"), wait_class("wait-hdd")],
    )
    assert scores(VolumeBinding(), ["pvc-0", "pvc-1"], objs, ["node-a", "node-b", "node-c"]) == [63, 25, None]


def test_static_binds_decide_even_with_a_dynamic_claim():
    """volume_binding_test.go "storage capacity score with static binds": the static binding alone scores."""
    objs = objects(
        [pv(f"pv-static-{n}", "wait", "100Gi", f"node-{n}") for n in "abc"],
        [pvc("pvc-dynamic", "wait-capacity", "10Gi"), pvc("pvc-static", "wait", "50Gi")],
        [wait_class("wait"), wait_class("wait-capacity", "csi.example.com")],
    )
    got = scores(VolumeBinding(), ["pvc-dynamic", "pvc-static"], objs, ["node-a", "node-b", "node-c"])
    assert got == [50, 50, 50]


def test_custom_shape_through_args():
    objs = objects(
        [pv("pv-a", "wait", "200Gi", "node-a"), pv("pv-b", "wait", "100Gi", "node-b")],
        [pvc("pvc-a", "wait", "50Gi")],
        [wait_class("wait")],
    )
    plugin = VolumeBinding.new({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})
    assert scores(plugin, ["pvc-a"], objs, ["node-a", "node-b"]) == [25, 50]


def test_pre_score_skips_without_delayed_claims():
    plugin = VolumeBinding()
    pod = make_pod("p").obj()
    snap = Snapshot.of([node_info(make_node("n").obj())], ClusterObjects())
    state = CycleState()
    assert plugin.pre_filter(state, pod, snap).is_skip
    assert plugin.pre_score(state, pod, [], snap).is_skip


def test_the_default_profile_scores_volume_capacity_with_weight_1():
    profile = validate_policy({"schedulerName": "s"})
    assert isinstance(profile, Profile)
    assert ("VolumeBinding", 1) in profile.score_names


# --------------------------------------------------------------------------- dynamic provisioning, CSIStorageCapacity

CAPACITY_CLASS = "wait-sc-with-storage-capacity"
CAPACITY_DRIVER = "driver-with-storage-capacity"


def capacity(node: str | None, size: str | None, max_size: str | None = None, sc: str = CAPACITY_CLASS):
    body: dict[str, Any] = {"metadata": {"name": f"cap-{node}", "namespace": "kube-system"}, "storageClassName": sc}
    if node is not None:
        body["nodeTopology"] = {"matchLabels": {HOST: node}}
    if size is not None:
        body["capacity"] = size
    if max_size is not None:
        body["maximumVolumeSize"] = max_size
    return parse_csi_storage_capacity(body)


def dynamic(capacities, *, tracked: bool = True, pvcs=None) -> ClusterObjects:
    objs = objects(
        [],
        pvcs or [pvc("pvc-dynamic", CAPACITY_CLASS, "10Gi")],
        [wait_class(CAPACITY_CLASS, CAPACITY_DRIVER)],
    )
    objs.csi_drivers[CAPACITY_DRIVER] = parse_csi_driver(
        {"metadata": {"name": CAPACITY_DRIVER}, "spec": {"storageCapacity": tracked}}
    )
    for c in capacities:
        objs.csi_storage_capacities[f"{c.namespace}/{c.name}"] = c
    return objs


NODES3 = ["node-a", "node-b", "node-c"]


def test_storage_capacity_score():
    objs = dynamic([capacity("node-a", "100Gi"), capacity("node-b", "50Gi"), capacity("node-c", "10Gi")])
    assert scores(VolumeBinding(), ["pvc-dynamic"], objs, NODES3) == [90, 80, 0]


def test_prefer_node_with_least_allocatable():
    objs = dynamic([capacity("node-a", "100Gi"), capacity("node-b", "20Gi"), capacity("node-c", "10Gi")])
    plugin = VolumeBinding.new({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]})
    assert scores(plugin, ["pvc-dynamic"], objs, NODES3) == [10, 50, 100]


def test_prefer_node_with_maximum_allocatable():
    objs = dynamic([capacity("node-a", "100Gi"), capacity("node-b", "20Gi"), capacity("node-c", "10Gi")])
    assert scores(VolumeBinding(), ["pvc-dynamic"], objs, NODES3) == [90, 50, 0]


def test_two_claims_of_one_class_draw_on_one_pool():
    """The class's capacity is set, not summed: 2 x 25Gi of 100Gi is 50% (upstream's comment in Score)."""
    claims = [pvc("d0", CAPACITY_CLASS, "25Gi"), pvc("d1", CAPACITY_CLASS, "25Gi")]
    objs = dynamic([capacity("node-a", "100Gi")], pvcs=claims)
    assert scores(VolumeBinding(), ["d0", "d1"], objs, ["node-a"]) == [50]


def test_not_enough_free_storage():
    objs = dynamic([capacity("node-a", "5Gi"), capacity("node-b", "100Gi", max_size="5Gi"), capacity(None, "1Ti")])
    objs.csi_storage_capacities["kube-system/big-c"] = capacity("node-c", "1Gi", max_size="20Gi")
    plugin = VolumeBinding()
    b = make_pod("pod-a").volume({"name": "d", "persistentVolumeClaim": {"claimName": "pvc-dynamic"}})
    pod = b.obj()
    infos = [node_info(make_node(n).obj()) for n in NODES3]
    state = CycleState()
    assert plugin.pre_filter(state, pod, Snapshot.of(infos, objs)).is_success
    got = [plugin.filter(state, pod, i) for i in infos]
    assert [s.reasons for s in got[:2]] == [("node(s) did not have enough free storage",)] * 2
    assert got[0].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got[2].is_success  # maximumVolumeSize, not capacity, is what must hold the claim
    # but the score reads its capacity: 10Gi of 1Gi is over capacity, utilization 100, score 0
    assert plugin.score(state, pod, infos[2]) == 0


def test_drivers_that_do_not_track_capacity_are_not_checked():
    objs = dynamic([], tracked=False)
    assert scores(VolumeBinding(), ["pvc-dynamic"], objs, NODES3) == [0, 0, 0]
    objs.csi_drivers.clear()  # no CSIDriver object at all
    assert scores(VolumeBinding(), ["pvc-dynamic"], objs, NODES3) == [0, 0, 0]


def test_requeue_on_capacity_added_or_raised_and_on_tracking_stopped():
    hints = {e.event: e.hint for e in VolumeBinding().events_to_register(None)}  # type: ignore[arg-type]
    cap_hint, driver_hint = hints[ClusterEvent.CSI_STORAGE_CAPACITY_CHANGE], hints[ClusterEvent.CSI_DRIVER_CHANGE]
    pod = make_pod("p").volume({"name": "c", "csi": {"driver": CAPACITY_DRIVER}}).obj()
    small, big = capacity("node-a", "10Gi"), capacity("node-a", "20Gi")
    assert cap_hint is not None and driver_hint is not None
    assert cap_hint(pod, None, small) is QueueingHint.QUEUE
    assert cap_hint(pod, small, big) is QueueingHint.QUEUE
    assert cap_hint(pod, big, small) is QueueingHint.QUEUE_SKIP
    assert cap_hint(pod, big, None) is QueueingHint.QUEUE_SKIP
    on = parse_csi_driver({"metadata": {"name": CAPACITY_DRIVER}, "spec": {"storageCapacity": True}})
    off = parse_csi_driver({"metadata": {"name": CAPACITY_DRIVER}, "spec": {}})
    assert driver_hint(pod, on, off) is QueueingHint.QUEUE
    assert driver_hint(pod, off, on) is QueueingHint.QUEUE_SKIP
    assert driver_hint(make_pod("q").obj(), on, off) is QueueingHint.QUEUE_SKIP  # upstream looks at inline csi only
