"""NodeName: spec.nodeName against the node name; SKIP without nodeName; vector agreement."""

from __future__ import annotations

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_name import ERR_REASON, NodeName, fits


def test_reason_text():
    assert ERR_REASON == "node(s) didn't match the requested node name"


@pytest.mark.parametrize(
    "node_name, code",
    [
        pytest.param("", Code.SUCCESS, id="no nodeName fits every node"),
        pytest.param("n1", Code.SUCCESS, id="same name"),
        pytest.param("n2", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, id="other name"),
        pytest.param("N1", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, id="names are case-sensitive"),
    ],
)
def test_filter(node_name, code):
    pod = make_pod().node(node_name).obj() if node_name else make_pod().obj()
    status = NodeName().filter(CycleState(), pod, node_info(make_node("n1").obj()))
    assert status.code is code
    assert status.reasons == ((ERR_REASON,) if code is not Code.SUCCESS else ())
    assert fits(pod, node_info(make_node("n1").obj())) == status


def test_pre_filter_skips_without_node_name_and_admits_only_the_named_node():
    snap = Snapshot.of([node_info(make_node("n1").obj())])
    assert NodeName().pre_filter(CycleState(), make_pod().obj(), snap).is_skip
    state = CycleState()
    # upstream node_name.go PreFilter: PreFilterResult{NodeNames: {nodeName}}
    assert NodeName().pre_filter(state, make_pod().node("n1").obj(), snap).is_success
    assert state.node_names == {"NodeName": frozenset({"n1"})}


@pytest.mark.parametrize("node_name", ["", "n3", "n7", "missing"])
def test_vector_agrees_with_filter(node_name):
    snap = Snapshot.of([node_info(make_node(f"n{i}").obj()) for i in range(10)])
    pod = make_pod().node(node_name).obj() if node_name else make_pod().obj()
    index = np.array([9, 3, 1, 7, 0], dtype=np.intp)
    plugin = NodeName()
    got = plugin.filter_nodes(CycleState(), pod, snap.table, index)
    assert got.tolist() == [plugin.filter(CycleState(), pod, snap.node_infos[k]).is_success for k in index.tolist()]


def test_args_and_name():
    assert NodeName().name == NodeName.NAME == "NodeName"
    assert NodeName(name="HostName").name == "HostName"
    with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
        NodeName.new({"x": 1})
