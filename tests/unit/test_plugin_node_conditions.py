"""The v1.9 node-condition predicates: reasons in condition order, BestEffort rule, SKIPs, vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_conditions import (
    ERR_REASON_DISK_PRESSURE,
    ERR_REASON_MEMORY_PRESSURE,
    ERR_REASON_NETWORK_UNAVAILABLE,
    ERR_REASON_NOT_READY,
    ERR_REASON_OUT_OF_DISK,
    ERR_REASON_PID_PRESSURE,
    ERR_REASON_TAINTS_NOT_TOLERATED,
    ERR_REASON_UNKNOWN_CONDITION,
    ERR_REASON_UNSCHEDULABLE,
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
    PodToleratesNodeNoExecuteTaints,
    is_best_effort_v19,
)


def test_reason_texts():
    assert (ERR_REASON_NOT_READY, ERR_REASON_OUT_OF_DISK, ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_UNSCHEDULABLE) == (
        "node(s) were not ready",
        "node(s) were out of disk space",
        "node(s) had unavailable network",
        "node(s) were unschedulable",
    )
    assert (ERR_REASON_MEMORY_PRESSURE, ERR_REASON_DISK_PRESSURE, ERR_REASON_PID_PRESSURE) == (
        "node(s) had memory pressure",
        "node(s) had disk pressure",
        "node(s) had pid pressure",
    )
    assert ERR_REASON_TAINTS_NOT_TOLERATED == "node(s) had taints that the pod didn't tolerate"


@pytest.mark.parametrize(
    "conditions, unschedulable, reasons",
    [
        pytest.param([("Ready", "True")], False, (), id="ready"),
        pytest.param([], False, (), id="no conditions at all pass"),
        pytest.param([("Ready", "False")], False, (ERR_REASON_NOT_READY,), id="not ready"),
        pytest.param([("Ready", "Unknown")], False, (ERR_REASON_NOT_READY,), id="ready unknown"),
        pytest.param([("Ready", "True"), ("OutOfDisk", "True")], False, (ERR_REASON_OUT_OF_DISK,), id="out of disk"),
        pytest.param(
            [("Ready", "True"), ("OutOfDisk", "Unknown")], False, (ERR_REASON_OUT_OF_DISK,), id="out of disk unknown"
        ),
        pytest.param(
            [("Ready", "True"), ("NetworkUnavailable", "True")], False, (ERR_REASON_NETWORK_UNAVAILABLE,), id="network"
        ),
        pytest.param([("Ready", "True"), ("MemoryPressure", "True")], False, (), id="pressure is not this predicate's"),
        pytest.param([("Ready", "True")], True, (ERR_REASON_UNSCHEDULABLE,), id="cordoned"),
        pytest.param(
            [("NetworkUnavailable", "True"), ("Ready", "False")],
            True,
            (ERR_REASON_NETWORK_UNAVAILABLE, ERR_REASON_NOT_READY, ERR_REASON_UNSCHEDULABLE),
            id="every reason, in condition order, unschedulable last",
        ),
    ],
)
def test_check_node_condition(conditions, unschedulable, reasons):
    b = make_node("n1").no_conditions().unschedulable(unschedulable)
    for kind, status in conditions:
        b.condition(kind, status)
    status = CheckNodeCondition().filter(CycleState(), make_pod().obj(), node_info(b.obj()))
    if reasons:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == reasons
    else:
        assert status.is_success


def test_node_less_info_has_unknown_conditions():
    status = CheckNodeCondition().filter(CycleState(), make_pod().obj(), NodeInfo(None))
    assert status.reasons == (ERR_REASON_UNKNOWN_CONDITION,)


@pytest.mark.parametrize(
    "pod, best_effort",
    [
        pytest.param(make_pod().obj(), True, id="no requests"),
        pytest.param(make_pod().req(cpu="0").obj(), True, id="zero request"),
        pytest.param(make_pod().req(cpu="100m").obj(), False, id="cpu request"),
        pytest.param(make_pod().lim(memory="1Gi").obj(), False, id="memory limit"),
        pytest.param(make_pod().req(ephemeral_storage="1Gi").obj(), True, id="other resources do not count"),
        pytest.param(make_pod().init_container(cpu="1").obj(), True, id="v1.9 ignores init containers"),
    ],
)
def test_best_effort_v19(pod, best_effort):
    assert is_best_effort_v19(pod) is best_effort


@pytest.mark.parametrize(
    "plugin, kind, pod, reason",
    [
        pytest.param(
            CheckNodeMemoryPressure(),
            "MemoryPressure",
            make_pod().obj(),
            ERR_REASON_MEMORY_PRESSURE,
            id="memory, best effort",
        ),
        pytest.param(
            CheckNodeMemoryPressure(),
            "MemoryPressure",
            make_pod().req(memory="1Gi").obj(),
            None,
            id="memory, burstable passes",
        ),
        pytest.param(
            CheckNodeDiskPressure(),
            "DiskPressure",
            make_pod().req(cpu="1").obj(),
            ERR_REASON_DISK_PRESSURE,
            id="disk, any pod",
        ),
        pytest.param(
            CheckNodePIDPressure(),
            "PIDPressure",
            make_pod().req(cpu="1").obj(),
            ERR_REASON_PID_PRESSURE,
            id="pid, any pod",
        ),
    ],
)
def test_pressure(plugin, kind, pod, reason):
    pressured = node_info(make_node("p").condition(kind, "True").obj())
    calm = node_info(make_node("c").condition(kind, "False").obj())
    unknown = node_info(make_node("u").obj())  # condition absent
    status = plugin.filter(CycleState(), pod, pressured)
    if reason is None:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (reason,)
    assert plugin.filter(CycleState(), pod, calm).is_success
    assert plugin.filter(CycleState(), pod, unknown).is_success
    # SKIP exactly when no node of the snapshot can fail for this pod
    assert plugin.pre_filter(CycleState(), pod, Snapshot.of([calm, unknown])).is_skip
    assert plugin.pre_filter(CycleState(), pod, Snapshot.of([calm, pressured])).is_skip is (reason is None)


@pytest.mark.parametrize(
    "taints, tolerations, fit",
    [
        pytest.param([], [], True, id="no taints"),
        pytest.param([("k", "v", "NoSchedule")], [], True, id="NoSchedule is not checked"),
        pytest.param([("k", "v", "NoExecute")], [], False, id="NoExecute untolerated"),
        pytest.param([("k", "v", "NoExecute")], [("k", "v", "NoExecute", "Equal")], True, id="NoExecute tolerated"),
        pytest.param(
            [("k", "v", "NoExecute")], [("k", "", "NoSchedule", "Exists")], False, id="toleration for another effect"
        ),
    ],
)
def test_no_execute_taints(taints, tolerations, fit):
    b = make_node("n1")
    for key, value, effect in taints:
        b.taint(key, value, effect)
    p = make_pod()
    for key, value, effect, op in tolerations:
        p.toleration(key, value, effect, op)
    status = PodToleratesNodeNoExecuteTaints().filter(CycleState(), p.obj(), node_info(b.obj()))
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (
            ERR_REASON_TAINTS_NOT_TOLERATED,
        )


def test_check_node_condition_skips_on_a_healthy_cluster():
    healthy = Snapshot.of([node_info(make_node("a").obj()), node_info(make_node("b").obj())])
    assert CheckNodeCondition().pre_filter(CycleState(), make_pod().obj(), healthy).is_skip
    sick = Snapshot.of([node_info(make_node("a").obj()), node_info(make_node("b").condition("Ready", "False").obj())])
    assert CheckNodeCondition().pre_filter(CycleState(), make_pod().obj(), sick).is_success


PLUGINS = (
    CheckNodeCondition,
    CheckNodeMemoryPressure,
    CheckNodeDiskPressure,
    CheckNodePIDPressure,
    PodToleratesNodeNoExecuteTaints,
)


def test_names_and_args():
    assert (
        [c.NAME for c in PLUGINS]
        == [c().name for c in PLUGINS]
        == [
            "CheckNodeCondition",
            "CheckNodeMemoryPressure",
            "CheckNodeDiskPressure",
            "CheckNodePIDPressure",
            "PodToleratesNodeNoExecuteTaints",
        ]
    )
    assert CheckNodeCondition(name="mine").name == "mine"
    for cls in PLUGINS:
        with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
            cls.new({"x": 1})


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    nodes = []
    for i in range(40):
        b = make_node(f"n{i}").no_conditions().unschedulable(rng.random() < 0.1)
        for kind in ("Ready", "OutOfDisk", "NetworkUnavailable", "MemoryPressure", "DiskPressure", "PIDPressure"):
            if rng.random() < 0.5:
                b.condition(kind, rng.choice(["True", "False", "Unknown"]))
        if rng.random() < 0.3:
            b.taint(rng.choice(["a", "b"]), "", rng.choice(["NoExecute", "NoSchedule"]))
        nodes.append(b.obj())
    snap = Snapshot.of([node_info(x) for x in nodes])
    pods = [make_pod().obj(), make_pod().req(cpu="1").obj(), make_pod().toleration("a", operator="Exists").obj()]
    for plugin in (
        CheckNodeCondition(),
        CheckNodeMemoryPressure(),
        CheckNodeDiskPressure(),
        CheckNodePIDPressure(),
        PodToleratesNodeNoExecuteTaints(),
    ):
        for pod in pods:
            index = np.array(rng.sample(range(40), 30), dtype=np.intp)
            state = CycleState()
            skipped = plugin.pre_filter(state, pod, snap).is_skip
            want = [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index.tolist()]
            if skipped:
                assert all(want)
            assert plugin.filter_nodes(state, pod, snap.table, index).tolist() == want
