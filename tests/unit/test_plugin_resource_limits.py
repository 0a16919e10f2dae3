"""NodeResourceLimits (v1.9 ResourceLimitsPriority): the upstream resource_limits_test.go table,
the SKIP for pods without limits, and the vector form against the per-node form."""

from __future__ import annotations

import numpy as np
import pytest
from builders import make_node, make_pod, node_info
from hypothesis import given, settings
from hypothesis import strategies as st

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Node, Pod
from kopf_scheduler.core.plugins.resource_limits import NodeResourceLimits, limits_score


def n(name: str, cpu_milli: int, memory: int) -> Node:
    return make_node(name).capacity(cpu=f"{cpu_milli}m", memory=str(memory), pods="32").obj()


NODES = [n("m1", 4000, 10000), n("m2", 4000, 0), n("m3", 0, 10000), n("m4", 0, 0)]


def limited(**limits: str) -> Pod:
    return make_pod("p").container().lim(**limits).obj()


def two_containers(cpu: tuple[str, str], memory: tuple[str, str]) -> Pod:
    b = make_pod("p").container().lim(cpu=cpu[0], memory=memory[0]).container().lim(cpu=cpu[1], memory=memory[1])
    return b.obj()


CASES = [
    # cpu limit 3000m fits m1, m2 (4000m); m3, m4 publish no cpu
    pytest.param(two_containers(("1000m", "2000m"), ("0", "0")), [1, 1, 0, 0], id="cpu only"),
    # memory 5000 fits m1, m3
    pytest.param(two_containers(("0", "0"), ("2000", "3000")), [1, 0, 1, 0], id="memory only"),
    # either limit satisfied is enough; m4 publishes nothing
    pytest.param(two_containers(("1000m", "2000m"), ("2000", "3000")), [1, 1, 1, 0], id="cpu and memory"),
    # cpu 5000m exceeds 4000m; memory 20000 exceeds 10000
    pytest.param(limited(cpu="5000m", memory="20000"), [0, 0, 0, 0], id="limits exceed allocatable"),
    # cpu too big, memory fits -> still 1 where memory fits
    pytest.param(limited(cpu="5000m", memory="10000"), [1, 0, 1, 0], id="one limit enough"),
    # a cpu limit alone, 1000m <= 4000m
    pytest.param(make_pod("p").container().lim(cpu="1000m").obj(), [1, 1, 0, 0], id="single container cpu limit"),
]


@pytest.mark.parametrize("p, want", CASES)
def test_score(p: Pod, want: list[int]) -> None:
    infos = [node_info(nd) for nd in NODES]
    plugin = NodeResourceLimits()
    snap = Snapshot.of(infos)
    state = CycleState()
    assert plugin.pre_score(state, p, infos, snap).is_success
    per_node = [plugin.score(state, p, i) for i in infos]
    assert per_node == want
    assert [limits_score(p, i) for i in infos] == want
    assert plugin.score_nodes(state, p, snap.table, np.arange(4, dtype=np.intp)).tolist() == want


def test_init_container_limit_by_max() -> None:
    body = make_pod("p").container().lim(cpu="1000m").raw()
    body["spec"]["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": {"cpu": "5000m"}}}]
    from kopf_scheduler.core.model.parsing import parse_pod

    p = parse_pod(body)
    # max(1000m, 5000m) = 5000m > 4000m everywhere
    assert [limits_score(p, node_info(nd)) for nd in NODES] == [0, 0, 0, 0]


@pytest.mark.parametrize(
    "p",
    [
        pytest.param(make_pod("p").obj(), id="no containers"),
        pytest.param(make_pod("p").container().req(cpu="1").obj(), id="requests but no limits"),
        pytest.param(limited(ephemeral_storage="1Gi"), id="only a storage limit"),
    ],
)
def test_pre_score_skips_pods_without_cpu_or_memory_limits(p: Pod) -> None:
    infos = [node_info(nd) for nd in NODES]
    assert NodeResourceLimits().pre_score(CycleState(), p, infos, Snapshot.of(infos)).code is Code.SKIP
    # the skip is sound: every node would have scored the same 0
    assert {limits_score(p, i) for i in infos} == {0}


def test_names_and_args() -> None:
    assert NodeResourceLimits().name == NodeResourceLimits.NAME == "NodeResourceLimits"
    assert NodeResourceLimits(name="ResourceLimitsPriority").name == "ResourceLimitsPriority"
    with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
        NodeResourceLimits.new({"x": 1})


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=6),
    st.integers(0, 25),
    st.integers(0, 25),
)
def test_vector_form_agrees(nodes: list[tuple[int, int]], cpu: int, mem: int) -> None:
    infos: list[NodeInfo] = [node_info(n(f"n{k}", c, m)) for k, (c, m) in enumerate(nodes)]
    p = limited(cpu=f"{cpu}m", memory=str(mem))
    snap = Snapshot.of(infos)
    plugin = NodeResourceLimits()
    index = np.arange(len(infos), dtype=np.intp)[::-1].copy()
    assert plugin.score_nodes(CycleState(), p, snap.table, index).tolist() == [
        plugin.score(CycleState(), p, infos[k]) for k in index
    ]
