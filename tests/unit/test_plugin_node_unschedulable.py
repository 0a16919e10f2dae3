"""NodeUnschedulable: cordoned nodes, the unschedulable toleration, SKIP, vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_unschedulable import (
    ERR_REASON_UNKNOWN_CONDITION,
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
    fits,
)

UNSCHED_KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    "pod, unschedulable, code, reasons",
    [
        pytest.param(make_pod().obj(), False, Code.SUCCESS, (), id="schedulable node"),
        pytest.param(
            make_pod().obj(), True, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_UNSCHEDULABLE,), id="cordoned node"
        ),
        pytest.param(
            make_pod().toleration(UNSCHED_KEY, effect="NoSchedule", operator="Exists").obj(),
            True,
            Code.SUCCESS,
            (),
            id="tolerates the taint",
        ),
        pytest.param(make_pod().toleration(operator="Exists").obj(), True, Code.SUCCESS, (), id="tolerates everything"),
        pytest.param(
            make_pod().toleration(UNSCHED_KEY).obj(), True, Code.SUCCESS, (), id="Equal with empty value, any effect"
        ),
        pytest.param(
            make_pod().toleration(UNSCHED_KEY, effect="NoExecute", operator="Exists").obj(),
            True,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON_UNSCHEDULABLE,),
            id="wrong effect",
        ),
        pytest.param(
            make_pod().toleration(UNSCHED_KEY, value="x", effect="NoSchedule").obj(),
            True,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (ERR_REASON_UNSCHEDULABLE,),
            id="wrong value",
        ),
    ],
)
def test_filter(pod, unschedulable, code, reasons):
    info = node_info(make_node("n1").unschedulable(unschedulable).obj())
    status = NodeUnschedulable().filter(CycleState(), pod, info)
    assert (status.code, status.reasons) == (code, reasons)
    assert fits(pod, info) == status


def test_node_less_info_has_unknown_conditions():
    status = fits(make_pod().obj(), NodeInfo(None))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (ERR_REASON_UNKNOWN_CONDITION,)


@pytest.mark.parametrize(
    "cordoned, tolerate, skip",
    [
        pytest.param(False, False, True, id="no cordoned node: skip"),
        pytest.param(True, False, False, id="a cordoned node: run"),
        pytest.param(True, True, True, id="tolerating pod: skip"),
    ],
)
def test_pre_filter_skip(cordoned, tolerate, skip):
    snap = Snapshot.of([node_info(make_node("a").obj()), node_info(make_node("b").unschedulable(cordoned).obj())])
    pod = make_pod().toleration(operator="Exists").obj() if tolerate else make_pod().obj()
    assert NodeUnschedulable().pre_filter(CycleState(), pod, snap).is_skip is skip


def test_args_and_name():
    assert NodeUnschedulable().name == NodeUnschedulable.NAME == "NodeUnschedulable"
    assert NodeUnschedulable(name="CheckNodeUnschedulable").name == "CheckNodeUnschedulable"
    with pytest.raises(PluginArgsError) as exc:
        NodeUnschedulable.new({"foo": 1})
    assert exc.value.field == "foo"


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_filter(seed):
    rng = random.Random(seed)
    infos = [node_info(make_node(f"n{i}").unschedulable(rng.random() < 0.3).obj()) for i in range(40)]
    snap = Snapshot.of(infos)
    plugin = NodeUnschedulable()
    for pod in (make_pod().obj(), make_pod().toleration(UNSCHED_KEY, effect="NoSchedule", operator="Exists").obj()):
        index = np.array(rng.sample(range(40), 25), dtype=np.intp)
        state = CycleState()
        plugin.pre_filter(state, pod, snap)
        got = plugin.filter_nodes(state, pod, snap.table, index)
        want = [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index.tolist()]
        assert got.tolist() == want
