"""NodeResourcesFit: filter reasons and codes (after upstream fit_test.go), scores per strategy
(least_allocated_test.go, most_allocated_test.go, requested_to_capacity_ratio_test.go), args,
and the vector forms against the per-node forms."""

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
from kopf_scheduler.core.plugins.node_resources_fit import (
    REASON_INSUFFICIENT_CPU,
    REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
    REASON_INSUFFICIENT_MEMORY,
    REASON_TOO_MANY_PODS,
    NodeResourcesFit,
    fits,
)

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
KUBE_EXT = "kubernetes.io/something"
HUGE_A = "hugepages-2Mi"


def pod(**req: str) -> Pod:
    b = make_pod("p")
    if req:
        b = b.req(**req)
    return b.obj()


def node(cpu: str = "10m", memory: str = "20", pods: str = "32", **extra: str) -> Node:
    return make_node("n1").capacity(cpu=cpu, memory=memory, pods=pods, **extra).obj()


def run_filter(plugin: NodeResourcesFit, p: Pod, info: NodeInfo) -> Any:
    state = CycleState()
    assert plugin.pre_filter(state, p, Snapshot.of([info])).is_success
    return plugin.filter(state, p, info)


# Node allocatable: 10m cpu, 20 bytes memory, 32 pods (upstream makeAllocatableResources(10, 20, 32, ...)).
FILTER_CASES = [
    pytest.param(pod(), [pod(cpu="10m", memory="20")], {}, Code.SUCCESS, (), id="no resources requested always fits"),
    pytest.param(
        pod(cpu="1m", memory="1"),
        [pod(cpu="10m", memory="20")],
        {},
        Code.UNSCHEDULABLE,
        (REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY),
        id="too many resources fails",
    ),
    pytest.param(
        pod(cpu="1m", memory="1"), [pod(cpu="9m", memory="19")], {}, Code.SUCCESS, (), id="both resources fit"
    ),
    pytest.param(
        pod(cpu="2m", memory="1"),
        [pod(cpu="9m", memory="5")],
        {},
        Code.UNSCHEDULABLE,
        (REASON_INSUFFICIENT_CPU,),
        id="one resource memory fits",
    ),
    pytest.param(
        pod(cpu="1m", memory="2"),
        [pod(cpu="5m", memory="19")],
        {},
        Code.UNSCHEDULABLE,
        (REASON_INSUFFICIENT_MEMORY,),
        id="one resource cpu fits",
    ),
    # 5 + 5 = 10 and 19 + 1 = 20: exactly full is fine
    pytest.param(pod(cpu="5m", memory="1"), [pod(cpu="5m", memory="19")], {}, Code.SUCCESS, (), id="equal edge case"),
    # the request alone exceeds allocatable: preemption cannot help
    pytest.param(
        pod(cpu="11m", memory="1"),
        [],
        {},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (REASON_INSUFFICIENT_CPU,),
        id="larger than the node is unresolvable",
    ),
    pytest.param(
        pod(cpu="1m", memory="1", ephemeral_storage="25"),
        [],
        {},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (REASON_INSUFFICIENT_EPHEMERAL_STORAGE,),
        id="storage ephemeral local storage request exceeds allocatable",
    ),
    pytest.param(
        pod(cpu="1m", memory="1", ephemeral_storage="10"),
        [pod(ephemeral_storage="10")],
        {},
        Code.SUCCESS,
        (),
        id="ephemeral storage fits",
    ),
    pytest.param(
        pod(**{EXT_A: "1"}),
        [pod(**{EXT_A: "5"})],
        {},
        Code.UNSCHEDULABLE,
        (f"Insufficient {EXT_A}",),
        id="extended resource allocatable enforced",
    ),
    pytest.param(
        pod(**{EXT_A: "10"}),
        [],
        {},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (f"Insufficient {EXT_A}",),
        id="extended resource capacity enforced",
    ),
    pytest.param(pod(**{EXT_A: "4"}), [pod(**{EXT_A: "1"})], {}, Code.SUCCESS, (), id="extended resource fits"),
    pytest.param(
        pod(**{EXT_B: "1"}),
        [],
        {},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (f"Insufficient {EXT_B}",),
        id="extended resource the node lacks",
    ),
    pytest.param(
        pod(**{EXT_B: "1"}),
        [],
        {"ignoredResources": [EXT_B]},
        Code.SUCCESS,
        (),
        id="skip checking ignored extended resource",
    ),
    pytest.param(
        pod(**{EXT_B: "1"}),
        [],
        {"ignoredResourceGroups": ["example.com"]},
        Code.SUCCESS,
        (),
        id="skip checking ignored extended resource via resource groups",
    ),
    pytest.param(
        pod(**{KUBE_EXT: "1"}),
        [],
        {"ignoredResources": [KUBE_EXT]},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (f"Insufficient {KUBE_EXT}",),
        id="kubernetes.io resources cannot be ignored",
    ),
    pytest.param(
        pod(cpu="1m", memory="1", **{EXT_B: "0"}),
        [],
        {},
        Code.SUCCESS,
        (),
        id="skip checking resource request with quantity zero",
    ),
    pytest.param(
        pod(**{HUGE_A: "10"}),
        [],
        {},
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        (f"Insufficient {HUGE_A}",),
        id="hugepages capacity enforced",
    ),
    pytest.param(pod(**{HUGE_A: "3"}), [pod(**{HUGE_A: "2"})], {}, Code.SUCCESS, (), id="hugepages fits"),
    # a zero-cpu pod passes cpu even on an overcommitted node (upstream checks cpu only when requested)
    pytest.param(pod(memory="1"), [pod(cpu="20m")], {}, Code.SUCCESS, (), id="unrequested resource not checked"),
]


@pytest.mark.parametrize("p, existing, args, code, reasons", FILTER_CASES)
def test_filter(p: Pod, existing: list[Pod], args: dict[str, Any], code: Code, reasons: tuple[str, ...]) -> None:
    n = node(ephemeral_storage="20", **{EXT_A: "5", HUGE_A: "5", KUBE_EXT: "0"})
    info = node_info(n, *existing)
    status = run_filter(NodeResourcesFit.new(args), p, info)
    assert (status.code, status.reasons) == (code, reasons)


@pytest.mark.parametrize(
    "p, existing, reasons",
    [
        # 1 existing pod, node allows 1: no room, whatever the request
        pytest.param(pod(), [pod()], (REASON_TOO_MANY_PODS,), id="even without requests"),
        pytest.param(
            pod(cpu="1m", memory="1"),
            [pod(cpu="10m", memory="20")],
            (REASON_TOO_MANY_PODS, REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY),
            id="pod count first, then resources",
        ),
        pytest.param(
            pod(cpu="1m", memory="1"), [pod(cpu="5m", memory="5")], (REASON_TOO_MANY_PODS,), id="only the count"
        ),
    ],
)
def test_filter_pod_count(p: Pod, existing: list[Pod], reasons: tuple[str, ...]) -> None:
    info = node_info(node(pods="1"), *existing)
    status = run_filter(NodeResourcesFit(), p, info)
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, reasons)


def test_filter_zero_pods_allowed_rejects_everything() -> None:
    assert run_filter(NodeResourcesFit(), pod(), node_info(node(pods="0"))).reasons == (REASON_TOO_MANY_PODS,)


def test_init_container_counts_by_max() -> None:
    # containers 1m; init container 3m: effective request 3m; 8m used of 10m -> Insufficient cpu
    p = make_pod("p").req(cpu="1m", memory="1").init_container(cpu="3m", memory="1").obj()
    status = run_filter(NodeResourcesFit(), p, node_info(node(), pod(cpu="8m", memory="19")))
    assert status.reasons == (REASON_INSUFFICIENT_CPU,)


def test_pod_level_requests_are_filtered() -> None:
    # upstream fit.go computePodResourceRequest with PodLevelResources (beta, on in v1.37):
    # containers ask 1m, the pod 4m; 8m used of 10m -> Insufficient cpu
    p = make_pod("p").req(cpu="1m", memory="1").pod_requests(cpu="4m").obj()
    status = run_filter(NodeResourcesFit(), p, node_info(node(), pod(cpu="8m", memory="19")))
    assert status.reasons == (REASON_INSUFFICIENT_CPU,)


def test_score_ignores_pod_level_requests() -> None:
    # upstream's Fit scorer is built without the PodLevelResources flag (fit.go getScorer), so the
    # incoming pod scores with its containers' requests: cpu 1000 of 10000 -> 90, mem 0 -> 100 -> 95,
    # not with the pod-level 5000 (which would give (50 + 100) / 2 = 75)
    p = make_pod("p").req(cpu="1", memory="0").pod_requests(cpu="5").obj()
    assert scores(NodeResourcesFit(), p, [node_info(n("n1", "10", "20000"))]) == [95]


def test_score_counts_pod_level_requests_of_bound_pods() -> None:
    # the node's non-zero sum uses the bound pod's pod-level 5 cpu: (10000 - 6000) * 100 / 10000 = 40, mem 100 -> 70
    bound = make_pod("b").req(cpu="1", memory="0").pod_requests(cpu="5").obj()
    assert scores(NodeResourcesFit(), pod(cpu="1", memory="0"), [node_info(n("n1", "10", "20000"), bound)]) == [70]


def test_fits_helper_names_the_shortfalls() -> None:
    info = node_info(node(pods="1"), pod(cpu="10m", memory="20"))
    assert fits(pod(cpu="1m", memory="1"), info).reasons == ("Too many pods", "Insufficient cpu", "Insufficient memory")
    assert fits(pod(cpu="1m"), node_info(node())).is_success


def test_name_and_override() -> None:
    assert NodeResourcesFit().name == NodeResourcesFit.NAME == "NodeResourcesFit"
    assert NodeResourcesFit(name="PodFitsResources").name == "PodFitsResources"


# ----------------------------------------------------------------------------- score


def scores(plugin: NodeResourcesFit, p: Pod, infos: list[NodeInfo]) -> list[int]:
    state = CycleState()
    assert plugin.pre_score(state, p, infos, Snapshot.of(infos)).is_success
    per_node = [plugin.score(state, p, i) for i in infos]
    snap = Snapshot.of(infos)
    vector = plugin.score_nodes(state, p, snap.table, np.arange(len(infos), dtype=np.intp)).tolist()
    assert vector == per_node
    return per_node


def n(name: str, cpu: str, memory: str, **extra: str) -> Node:
    return make_node(name).capacity(cpu=cpu, memory=memory, pods="32", **extra).obj()


LEAST_CASES = [
    # no containers: no non-zero defaults; both nodes fully free -> 100
    pytest.param(
        pod(),
        [n("n1", "4", "10000"), n("n2", "4", "10000")],
        [[], []],
        [100, 100],
        id="nothing scheduled, nothing requested",
    ),
    # n1: cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 -> 37
    # n2: cpu (6000-3000)*100/6000 = 50, mem 50 -> 50
    pytest.param(
        pod(cpu="3", memory="5000"),
        [n("n1", "4", "10000"), n("n2", "6", "10000")],
        [[], []],
        [37, 50],
        id="differently sized nodes",
    ),
    # n1: cpu (10-6)/10 = 40, mem 100 -> 70;  n2: cpu 40, mem (20000-5000)/20000 = 75 -> 57
    pytest.param(
        pod(),
        [n("n1", "10", "20000"), n("n2", "10", "20000")],
        [[pod(cpu="3", memory="0"), pod(cpu="3", memory="0")], [pod(cpu="3", memory="0"), pod(cpu="3", memory="5000")]],
        [70, 57],
        id="no resources requested, pods scheduled with resources",
    ),
    # n1: cpu (4000-6000) < 0 -> 0, mem 100 -> 50;  n2: cpu 0, mem 50 -> 25
    pytest.param(
        pod(cpu="3", memory="0"),
        [n("n1", "4", "10000"), n("n2", "4", "10000")],
        [[pod(cpu="3", memory="0")], [pod(cpu="3", memory="5000")]],
        [50, 25],
        id="requested resources exceed node capacity",
    ),
    pytest.param(
        pod(),
        [n("n1", "0", "0"), n("n2", "0", "0")],
        [[pod(cpu="3", memory="0")], []],
        [0, 0],
        id="zero node resources",
    ),
    # a container without requests counts 100m / 200Mi: cpu (1000-100)*100/1000 = 90, mem (1Gi-200Mi)*100/1Gi = 80 -> 85
    pytest.param(
        make_pod("p").container().obj(), [n("n1", "1", "1Gi")], [[]], [85], id="non-zero defaults for absent requests"
    ),
]


@pytest.mark.parametrize("p, nodes, existing, want", LEAST_CASES)
def test_score_least_allocated(p: Pod, nodes: list[Node], existing: list[list[Pod]], want: list[int]) -> None:
    infos = [node_info(nd, *ex) for nd, ex in zip(nodes, existing)]
    assert scores(NodeResourcesFit(), p, infos) == want


def _strategy(
    kind: str, resources: list[dict[str, Any]] | None = None, shape: list[dict[str, int]] | None = None
) -> dict[str, Any]:
    s: dict[str, Any] = {"type": kind}
    if resources is not None:
        s["resources"] = resources
    if shape is not None:
        s["requestedToCapacityRatio"] = {"shape": shape}
    return {"scoringStrategy": s}


def test_score_least_allocated_weights_and_extended() -> None:
    # cpu 25 * 1 + mem 50 * 2 = 125 / 3 = 41;  n2: 50 + 100 = 150 / 3 = 50
    plugin = NodeResourcesFit.new(
        _strategy("LeastAllocated", [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}])
    )
    infos = [node_info(n("n1", "4", "10000")), node_info(n("n2", "6", "10000"))]
    assert scores(plugin, pod(cpu="3", memory="5000"), infos) == [41, 50]
    ext = NodeResourcesFit.new(
        _strategy(
            "LeastAllocated",
            [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": EXT_A, "weight": 1}],
        )
    )
    infos = [node_info(n("n1", "6", "10000", **{EXT_A: "4"})), node_info(n("n2", "6", "10000", **{EXT_A: "10"}))]
    # pod without the extended resource: it is bypassed -> (50 + 50) / 2 = 50 on both
    assert scores(ext, pod(cpu="3", memory="5000"), infos) == [50, 50]
    # requesting 2: n1 (4-2)/4 = 50 -> 150/3 = 50; n2 (10-2)/10 = 80 -> 180/3 = 60
    assert scores(ext, pod(cpu="3", memory="5000", **{EXT_A: "2"}), infos) == [50, 60]


MOST_CASES = [
    # n1: cpu 3000/4000 = 75, mem 5000/10000 = 50 -> 62;  n2: cpu 50, mem 50 -> 50
    pytest.param(
        pod(cpu="3", memory="5000"),
        [n("n1", "4", "10000"), n("n2", "6", "10000")],
        [[], []],
        [62, 50],
        id="differently sized nodes",
    ),
    # cpu 6000 > 4000 clamps to 100, mem 0 -> 50;  n2: cpu 100, mem 50 -> 75
    pytest.param(
        pod(cpu="3", memory="0"),
        [n("n1", "4", "10000"), n("n2", "4", "10000")],
        [[pod(cpu="3", memory="0")], [pod(cpu="3", memory="5000")]],
        [50, 75],
        id="requested over capacity clamps",
    ),
    pytest.param(pod(), [n("n1", "4", "10000")], [[]], [0], id="nothing requested"),
]


@pytest.mark.parametrize("p, nodes, existing, want", MOST_CASES)
def test_score_most_allocated(p: Pod, nodes: list[Node], existing: list[list[Pod]], want: list[int]) -> None:
    infos = [node_info(nd, *ex) for nd, ex in zip(nodes, existing)]
    assert scores(NodeResourcesFit.new({"scoringStrategy": {"type": "MostAllocated"}}), p, infos) == want


def test_score_requested_to_capacity_ratio() -> None:
    # shape 0 -> 0, 100 -> 10 (x10: 100): utilization cpu 75, mem 50 -> round(62.5) = 63
    plugin = NodeResourcesFit.new(
        _strategy("RequestedToCapacityRatio", shape=[{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}])
    )
    infos = [node_info(n("n1", "4", "10000")), node_info(n("n2", "6", "10000"))]
    # n2: cpu 50, mem 50 -> 50
    assert scores(plugin, pod(cpu="3", memory="5000"), infos) == [63, 50]
    # least-like shape: n1 cpu 25 mem 50 -> round(37.5) = 38; n2 50 50 -> 50
    least = NodeResourcesFit.new(
        _strategy("RequestedToCapacityRatio", shape=[{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}])
    )
    assert scores(least, pod(cpu="3", memory="5000"), infos) == [38, 50]


@pytest.mark.parametrize(
    "args, field",
    [
        pytest.param({"scoringStrategy": {"type": "Nope"}}, "scoringStrategy.type", id="unknown type"),
        pytest.param(
            _strategy("LeastAllocated", [{"name": "cpu", "weight": -1}]),
            "scoringStrategy.resources[0].weight",
            id="negative weight",
        ),
        pytest.param(
            _strategy("LeastAllocated", [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}]),
            "scoringStrategy.resources[1].weight",
            id="zero weight",
        ),
        pytest.param(
            _strategy("MostAllocated", [{"name": "cpu", "weight": 101}]),
            "scoringStrategy.resources[0].weight",
            id="weight over 100",
        ),
        pytest.param(
            _strategy("RequestedToCapacityRatio"), "scoringStrategy.requestedToCapacityRatio", id="rtcr without shape"
        ),
        pytest.param(
            _strategy("RequestedToCapacityRatio", shape=[]),
            "scoringStrategy.requestedToCapacityRatio.shape",
            id="empty shape",
        ),
        pytest.param(
            _strategy(
                "RequestedToCapacityRatio", shape=[{"utilization": 60, "score": 1}, {"utilization": 50, "score": 2}]
            ),
            "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
            id="shape not increasing",
        ),
        pytest.param(
            _strategy("RequestedToCapacityRatio", shape=[{"utilization": 60, "score": 11}]),
            "scoringStrategy.requestedToCapacityRatio.shape[0].score",
            id="shape score over 10",
        ),
        pytest.param({"ignoredResourceGroups": ["example.com/x"]}, "ignoredResourceGroups[0]", id="group with slash"),
        pytest.param({"surprise": 1}, "surprise", id="unknown field"),
    ],
)
def test_args_rejected(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        NodeResourcesFit.new(args)
    assert exc.value.field == field


def test_args_defaults() -> None:
    plugin = NodeResourcesFit.new({"scoringStrategy": {"type": "MostAllocated"}})
    assert plugin.strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in plugin.strategy.resources] == [("cpu", 1), ("memory", 1)]
    assert NodeResourcesFit().strategy.type == "LeastAllocated"


# ----------------------------------------------------------------------------- vector == scalar, fits property

_RESOURCES = ("cpu", "memory", "ephemeral_storage", EXT_A, HUGE_A)


@st.composite
def _request(draw: st.DrawFn, top: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in _RESOURCES:
        if draw(st.booleans()):
            v = draw(st.integers(min_value=0, max_value=top))
            out[r] = f"{v}m" if r == "cpu" else str(v)
    return out


def _pod_of(req: dict[str, str]) -> Pod:
    b = make_pod("p").container()
    if req:
        b = b.req(**req)
    return b.obj()


@st.composite
def _cluster(draw: st.DrawFn) -> tuple[list[NodeInfo], Pod]:
    infos = []
    for k in range(draw(st.integers(min_value=1, max_value=5))):
        cap = {r: draw(st.integers(min_value=0, max_value=40)) for r in _RESOURCES}
        raw = {r: (f"{v}m" if r == "cpu" else str(v)) for r, v in cap.items() if v or draw(st.booleans())}
        nd = make_node(f"n{k}").capacity(pods=str(draw(st.integers(min_value=0, max_value=4))), **raw).obj()
        existing = [_pod_of(draw(_request(15))) for _ in range(draw(st.integers(min_value=0, max_value=3)))]
        infos.append(node_info(nd, *existing))
    return infos, _pod_of(draw(_request(25)))


_STRATEGIES = [
    {},
    _strategy("MostAllocated", [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 3}]),
    _strategy("LeastAllocated", [{"name": "memory", "weight": 7}, {"name": "cpu", "weight": 2}]),
    {"ignoredResources": [EXT_A]},
    {"ignoredResourceGroups": ["example.com"]},
    _strategy(
        "MostAllocated", [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}, {"name": EXT_A, "weight": 2}]
    ),
    _strategy(
        "LeastAllocated",
        [{"name": "ephemeral-storage", "weight": 1}, {"name": HUGE_A, "weight": 5}, {"name": "cpu", "weight": 1}],
    ),
    _strategy(
        "RequestedToCapacityRatio",
        [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 2},
            {"name": EXT_A, "weight": 1},
            {"name": "pods", "weight": 1},
        ],
        [{"utilization": 0, "score": 10}, {"utilization": 30, "score": 2}, {"utilization": 80, "score": 9}],
    ),
]


@settings(max_examples=60, deadline=None)
@given(_cluster(), st.sampled_from(_STRATEGIES))
def test_vector_forms_agree(cluster: tuple[list[NodeInfo], Pod], args: dict[str, Any]) -> None:
    infos, p = cluster
    plugin = NodeResourcesFit.new(args)
    snap = Snapshot.of(infos)
    state = CycleState()
    plugin.pre_filter(state, p, snap)
    index = np.arange(len(infos), dtype=np.intp)[::-1].copy()
    want = [plugin.filter(state, p, snap.node_infos[k]).is_success for k in index]
    assert plugin.filter_nodes(state, p, snap.table, index).tolist() == want
    rejected = index[~np.array(want, dtype=bool)]
    batch = plugin.filter_statuses(state, p, snap.table, rejected)
    assert batch is not None
    distinct, which = batch
    assert [distinct[i] for i in which.tolist()] == [plugin.filter(state, p, snap.node_infos[k]) for k in rejected]
    plugin.pre_score(state, p, snap.node_infos, snap)
    want_scores = [plugin.score(state, p, snap.node_infos[k]) for k in index]
    assert plugin.score_nodes(state, p, snap.table, index).tolist() == want_scores
    assert all(0 <= s <= 100 for s in want_scores)


@settings(max_examples=80, deadline=None)
@given(_cluster())
def test_a_pod_that_fits_never_overfills(cluster: tuple[list[NodeInfo], Pod]) -> None:
    infos, p = cluster
    for info in infos:
        if not fits(p, info).is_success:
            continue
        before = info.requested
        after = info.clone()
        after.add_pod(p.with_node(info.name))
        alloc = info.allocatable
        assert len(after.pods) <= info.allowed_pod_number
        for name in ("cpu", "memory", "ephemeral-storage", EXT_A, HUGE_A):
            if p.requests.get(name) > 0:
                assert after.requested.get(name) <= alloc.get(name), (name, before, p.requests)
