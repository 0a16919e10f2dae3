"""NodeResourcesBalancedAllocation: upstream balanced_allocation_test.go tables, the best-effort
SKIP, args, and the vector form against the per-node form."""

from __future__ import annotations

from typing import Any

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
from kopf_scheduler.core.plugins.balanced_allocation import NodeResourcesBalancedAllocation

GPU = "nvidia.com/gpu"
WITH_GPU = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}


def cpu_only() -> Pod:
    return make_pod("cpu-only").req(cpu="1000m", memory="0").container(cpu="2000m", memory="0").obj()


def cpu_and_memory() -> Pod:
    return make_pod("cpu-mem").req(cpu="1000m", memory="2000").container(cpu="2000m", memory="3000").obj()


def cpu_memory_gpu() -> Pod:
    return make_pod("cpu-mem-gpu").req(cpu="3000m", memory="5000", **{GPU: "3"}).obj()


def n(name: str, cpu_milli: int, memory: int, **extra: str) -> Node:
    return make_node(name).capacity(cpu=f"{cpu_milli}m", memory=str(memory), pods="32", **extra).obj()


def run(plugin: NodeResourcesBalancedAllocation, p: Pod, infos: list[NodeInfo]) -> list[int]:
    snap = Snapshot.of(infos)
    state = CycleState()
    status = plugin.pre_score(state, p, infos, snap)
    assert status.is_success
    per_node = [plugin.score(state, p, i) for i in infos]
    assert plugin.score_nodes(state, p, snap.table, np.arange(len(infos), dtype=np.intp)).tolist() == per_node
    return per_node


# Upstream v1.37 scores the change in balance: with and without the pod, each
# int((1 - std) * 100), then 50 + (50 + with - without) / 2 (Go integer division).
CASES = [
    # n1: cpu 0 -> 3000/4000, mem 0 -> 5000/10000: with 87, without 100 -> 50 + 37/2 = 68
    # n2: cpu 0 -> 3000/6000, mem 0 -> 5000/10000: with 100, without 100 -> 75
    pytest.param(
        cpu_and_memory(),
        [(n("n1", 4000, 10000), []), (n("n2", 6000, 10000), [])],
        {},
        [68, 75],
        id="nothing scheduled, differently sized nodes",
    ),
    # n1 holds cpu-only: cpu 0.3 -> 0.6, mem 0 -> 0.25: with 82, without 85 -> 50 + 47/2 = 73
    # n2 holds cpu+mem: cpu 0.3 -> 0.6, mem 0.25 -> 0.5: with 95, without 97 -> 50 + 48/2 = 74
    pytest.param(
        cpu_and_memory(),
        [(n("n1", 10000, 20000), [cpu_only()]), (n("n2", 10000, 20000), [cpu_and_memory()])],
        {},
        [73, 74],
        id="pods scheduled with resources",
    ),
    # n2: cpu 0.3 -> 0.6, mem 0.1 -> 0.2: with 80, without 90 -> 50 + 40/2 = 70
    pytest.param(
        cpu_and_memory(),
        [(n("n1", 10000, 20000), [cpu_only()]), (n("n2", 10000, 50000), [cpu_and_memory()])],
        {},
        [73, 70],
        id="pods scheduled, differently sized nodes",
    ),
    # a memory-only pod. n1 holds cpu 3000/3000: cpu 1 -> 1, mem 0 -> 1: with 100, without 50 -> 100
    # n2 is empty: cpu 0, mem 0 -> 1: with 50, without 100 -> 50
    pytest.param(
        make_pod("mem").req(memory="2000").container(memory="3000").obj(),
        [(n("n1", 3000, 5000), [cpu_only()]), (n("n2", 3000, 5000), [])],
        {},
        [100, 50],
        id="nodes reaching the maximum and minimum score",
    ),
    # n1: cpu 0.5 -> 1, mem 0 -> 0: with 50, without 75 -> 50 + 25/2 = 62
    # n2: cpu 0.5 -> 1, mem 0.5 -> 0.5: with 75, without 100 -> 62
    pytest.param(
        cpu_only(),
        [(n("n1", 6000, 10000), [cpu_only()]), (n("n2", 6000, 10000), [cpu_and_memory()])],
        {},
        [62, 62],
        id="requested resources at node capacity",
    ),
    # over capacity caps at 1: cpu 1 -> 1 (9000/6000), mem 0 -> 0: with 50, without 50 -> 75
    pytest.param(cpu_only(), [(n("n1", 6000, 10000), [cpu_only(), cpu_only()])], {}, [75], id="fraction capped at one"),
    # three resources. n1 holds cpu+mem+gpu(3): cpu 3000/3500 = 0.857, mem 5000/40000 = 0.125,
    #   gpu 3/8 -> 4/8: with 70, without 69 -> 50 + 51/2 = 75
    # n2 holds cpu+mem: 0.857, 0.125, gpu 0 -> 1/8: with 65, without 62 -> 50 + 53/2 = 76
    pytest.param(
        make_pod("gpu").req(memory="0", **{GPU: "1"}).obj(),
        [
            (n("n1", 3500, 40000, **{GPU: "8"}), [cpu_memory_gpu()]),
            (n("n2", 3500, 40000, **{GPU: "8"}), [cpu_and_memory()]),
        ],
        WITH_GPU,
        [75, 76],
        id="include scalar resource",
    ),
    # the pod does not request the gpu: it takes no part -> cpu 0 -> 0.857, mem 0 -> 0.125:
    # with 63, without 100 -> 50 + 13/2 = 56 on both
    pytest.param(
        cpu_and_memory(),
        [(n("n1", 3500, 40000, **{GPU: "8"}), []), (n("n2", 3500, 40000), [])],
        WITH_GPU,
        [56, 56],
        id="scalar resource not requested is skipped",
    ),
    # real requests, not the 100m/200Mi defaults: a container asking only memory has cpu 0.
    # cpu 0, mem 0 -> 500/1000: with 75, without 100 -> 50 + 25/2 = 62
    pytest.param(
        make_pod("m").req(memory="500").obj(),
        [(n("n1", 1000, 1000), [])],
        {},
        [62],
        id="real requests not non-zero defaults",
    ),
]


@pytest.mark.parametrize("p, nodes, args, want", CASES)
def test_score(p: Pod, nodes: list[tuple[Node, list[Pod]]], args: dict[str, Any], want: list[int]) -> None:
    infos = [node_info(nd, *pods) for nd, pods in nodes]
    assert run(NodeResourcesBalancedAllocation.new(args), p, infos) == want


@pytest.mark.parametrize(
    "p",
    [
        pytest.param(make_pod("be").obj(), id="no containers"),
        pytest.param(make_pod("be").container().obj(), id="container without requests"),
        pytest.param(make_pod("be").req(**{GPU: "1"}).obj(), id="only an unconfigured resource"),
    ],
)
def test_pre_score_skips_best_effort(p: Pod) -> None:
    infos = [node_info(n("n1", 4000, 10000))]
    assert NodeResourcesBalancedAllocation().pre_score(CycleState(), p, infos, Snapshot.of(infos)).code is Code.SKIP


def test_score_without_pre_score_matches() -> None:
    infos = [node_info(n("n1", 10000, 20000), cpu_only())]
    # cpu 0.3 -> 0.6, mem 0 -> 0.25: with 82, without 85 -> 73
    assert NodeResourcesBalancedAllocation().score(CycleState(), cpu_and_memory(), infos[0]) == 73


def test_pod_level_requests_count() -> None:
    # upstream enables PodLevelResources for this plugin (balanced_allocation.go NewBalancedAllocation):
    # the pod-level 5000m, not the container's 1000m: cpu 0 -> 0.5, mem 0 -> 0.5: with 100, without 100 -> 75
    # (with the container's request: cpu 0.1, mem 0.5 -> with 80 -> 50 + 30/2 = 65)
    p = make_pod("p").req(cpu="1", memory="5000").pod_requests(cpu="5").obj()
    assert run(NodeResourcesBalancedAllocation(), p, [node_info(n("n1", 10000, 10000))]) == [75]


@pytest.mark.parametrize(
    "args, field",
    [
        pytest.param({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight", id="weight must be 1"),
        pytest.param({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name", id="duplicate"),
        pytest.param({"nope": True}, "nope", id="unknown field"),
    ],
)
def test_args_rejected(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        NodeResourcesBalancedAllocation.new(args)
    assert exc.value.field == field


def test_name() -> None:
    assert (
        NodeResourcesBalancedAllocation().name
        == NodeResourcesBalancedAllocation.NAME
        == "NodeResourcesBalancedAllocation"
    )
    assert NodeResourcesBalancedAllocation(name="BalancedResourceAllocation").name == "BalancedResourceAllocation"


@st.composite
def _cluster(draw: st.DrawFn) -> tuple[list[NodeInfo], Pod]:
    def req(top: int) -> dict[str, str]:
        out = {}
        for r in ("cpu", "memory", "ephemeral_storage", GPU):
            if draw(st.booleans()):
                v = draw(st.integers(min_value=0, max_value=top))
                out[r] = f"{v}m" if r == "cpu" else str(v)
        return out

    infos = []
    for k in range(draw(st.integers(min_value=1, max_value=5))):
        raw = {r: str(draw(st.integers(min_value=0, max_value=30))) for r in ("memory", "ephemeral_storage", GPU)}
        nd = make_node(f"n{k}").capacity(cpu=f"{draw(st.integers(min_value=0, max_value=30))}m", pods="10", **raw).obj()
        pods = [
            make_pod(f"e{i}").container().req(**req(12)).obj()
            for i in range(draw(st.integers(min_value=0, max_value=3)))
        ]
        infos.append(node_info(nd, *pods))
    return infos, make_pod("p").container().req(**req(20)).obj()


_ARGS = [
    {},
    WITH_GPU,
    {"resources": [{"name": "cpu"}, {"name": "ephemeral-storage"}, {"name": GPU}, {"name": "memory"}]},
]


@settings(max_examples=60, deadline=None)
@given(_cluster(), st.sampled_from(_ARGS))
def test_vector_form_agrees(cluster: tuple[list[NodeInfo], Pod], args: dict[str, Any]) -> None:
    infos, p = cluster
    plugin = NodeResourcesBalancedAllocation.new(args)
    snap = Snapshot.of(infos)
    state = CycleState()
    plugin.pre_score(state, p, infos, snap)
    index = np.arange(len(infos), dtype=np.intp)[::-1].copy()
    assert plugin.score_nodes(state, p, snap.table, index).tolist() == [plugin.score(state, p, infos[k]) for k in index]
