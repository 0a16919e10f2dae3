"""SelectorSpread / ServiceSpreading: selectors, counting rules, node and zone normalisation, SKIP, vector form."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import Controller, LabelSelector, Pod, Service
from kopf_scheduler.core.plugins.selector_spread import (
    SelectorSpread,
    SelectorSpreadArgs,
    normalize,
)

SVC = {"default/web": Service("default", "web", {"app": "web"})}
RS = {"ReplicaSet/default/rs": Controller("ReplicaSet", "default", "rs", "u1", LabelSelector({"tier": "front"}))}


def web(name: str = "w", ns: str = "default", **extra: str) -> Any:
    return make_pod(name, ns).label(app="web", **extra)


def run(
    plugin: SelectorSpread, pod: Pod, nodes: list[Any], placement: dict[str, list[Pod]], objects: ClusterObjects
) -> tuple[Code, list[int], list[int]]:
    snap = Snapshot.of([node_info(n, *placement.get(n.name, [])) for n in nodes], objects)
    state = CycleState()
    pre = plugin.pre_score(state, pod, list(snap.node_infos), snap)
    if pre.is_skip:
        return pre.code, [], []
    raw = [plugin.score(state, pod, i) for i in snap.node_infos]
    norm_scalar = plugin.normalize_scores(state, pod, np.array(raw, dtype=np.int64)).tolist()
    vec = plugin.score_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert vec.tolist() == raw
    norm_vec = plugin.normalize_scores(state, pod, vec).tolist()
    assert norm_vec == norm_scalar
    return pre.code, raw, norm_vec


PLAIN = [make_node("n1").obj(), make_node("n2").obj(), make_node("n3").obj()]
ZONED = [
    make_node("n1").zone("z1").obj(),
    make_node("n2").zone("z1").obj(),
    make_node("n3").zone("z2").obj(),
    make_node("n4").obj(),
]


@pytest.mark.parametrize(
    "args, pod, nodes, placement, objects, want_raw, want",
    [
        pytest.param(
            {},
            web().obj(),
            PLAIN,
            {"n1": [web().obj()]},
            ClusterObjects(),
            None,
            None,
            id="no service or controller: skip",
        ),
        pytest.param(
            {},
            web().obj(),
            PLAIN,
            {"n1": [web().obj(), web().obj()], "n3": [web().obj()]},
            ClusterObjects(services=dict(SVC)),
            # maxNode 2: 100*(2-2)/2=0, 100*(2-0)/2=100, 100*(2-1)/2=50
            [2, 0, 1],
            [0, 100, 50],
            id="service, no zones",
        ),
        pytest.param(
            {},
            web().obj(),
            PLAIN,
            {
                "n1": [web().terminating().obj(), web("x", "other").obj(), make_pod("db").label(app="db").obj()],
                "n2": [web().obj()],
            },
            ClusterObjects(services=dict(SVC)),
            # deleting, other-namespace and unselected pods do not count: 0, 1, 0 -> 100, 0, 100
            [0, 1, 0],
            [100, 0, 100],
            id="deleting, other namespace and unmatched pods ignored",
        ),
        pytest.param(
            {},
            web(tier="front").obj(),
            PLAIN,
            {"n1": [web().obj()], "n2": [make_pod("f").label(tier="front").obj()]},
            ClusterObjects(services=dict(SVC), controllers=dict(RS)),
            # v1.9: a pod counts when ANY selector matches: n1 (service), n2 (replica set)
            [1, 1, 0],
            [0, 0, 100],
            id="selectors ORed across service and replica set",
        ),
        pytest.param(
            {"servicesOnly": True},
            web(tier="front").obj(),
            PLAIN,
            {"n1": [web().obj()], "n2": [make_pod("f").label(tier="front").obj()]},
            ClusterObjects(services=dict(SVC), controllers=dict(RS)),
            [1, 0, 0],
            [0, 100, 100],
            id="servicesOnly ignores controllers",
        ),
        pytest.param(
            {"servicesOnly": True},
            make_pod("f").label(tier="front").obj(),
            PLAIN,
            {"n2": [make_pod("f").label(tier="front").obj()]},
            ClusterObjects(controllers=dict(RS)),
            None,
            None,
            id="servicesOnly with only a controller: skip",
        ),
        pytest.param(
            {},
            web().obj(),
            ZONED,
            {"n1": [web().obj(), web().obj()], "n3": [web().obj()], "n4": [web().obj()]},
            ClusterObjects(services=dict(SVC)),
            # counts n1 2, n2 0, n3 1, n4 1; maxNode 2; zones z1 2, z2 1, maxZone 2
            # n1: 0/3 + 2/3*0 = 0; n2: 100/3 + 0 = 33; n3: 50/3 + 2/3*50 = 50; n4 unzoned: node part only, 50
            [2, 0, 1, 1],
            [0, 33, 50, 50],
            id="zone weighting 2/3",
        ),
    ],
)
def test_score(
    args: dict[str, Any],
    pod: Pod,
    nodes: list[Any],
    placement: dict[str, list[Pod]],
    objects: ClusterObjects,
    want_raw: Any,
    want: Any,
) -> None:
    code, raw, norm = run(SelectorSpread.new(args), pod, nodes, placement, objects)
    if want is None:
        assert code is Code.SKIP
        return
    assert code is Code.SUCCESS
    assert raw == want_raw
    assert norm == want


@pytest.mark.parametrize(
    "counts, zones, want",
    [
        pytest.param([0, 0], ["", ""], [100, 100], id="all zero, no zones: max score"),
        pytest.param([0, 0], ["z1", "z2"], [100, 100], id="all zero with zones: max score"),
        # one zone holds every pod: its zone term is 0, so only a third of the node term remains
        # n1: 100*(3-3)/3 = 0 -> 0; n2: 100*(3-1)/3 = 66.6 -> 66.6/3 + 2/3 * 100*(4-4)/4 = 22.2 -> 22
        pytest.param([3, 1], ["z1", "z1"], [0, 22], id="one zone: zone term 0"),
        # unzoned nodes keep the node term even when others have zones: z1 holds 2 -> n1 0; n2 100*(2-0)/2 = 100
        pytest.param([2, 0], ["z1", ""], [0, 100], id="unzoned node keeps node term"),
    ],
)
def test_normalize(counts: list[int], zones: list[str], want: list[int]) -> None:
    assert normalize(np.array(counts, dtype=np.int64), zones).tolist() == want


def test_names_and_args() -> None:
    assert SelectorSpread().name == SelectorSpread.NAME == "SelectorSpread"
    assert not SelectorSpread().args.services_only
    # how registry.py builds v1.9 ServiceSpreadingPriority
    svc = SelectorSpread.new({"servicesOnly": True}, name="ServiceSpreading")
    assert svc.name == "ServiceSpreading" and svc.args == SelectorSpreadArgs(services_only=True)
    with pytest.raises(PluginArgsError) as exc:
        SelectorSpread.new({"servicesOnly": "yes"})
    assert exc.value.field == "servicesOnly"
    with pytest.raises(PluginArgsError) as exc:
        SelectorSpread.new({"other": 1})
    assert exc.value.field == "other"


@pytest.mark.parametrize("seed", range(6))
def test_vector_agrees_and_index_follows_changes(seed: int) -> None:
    rng = random.Random(seed)
    objects = ClusterObjects(services=dict(SVC), controllers=dict(RS))
    nodes = [
        make_node(f"n{k}").zone(rng.choice(["z1", "z2"])).obj() if rng.random() < 0.7 else make_node(f"n{k}").obj()
        for k in range(6)
    ]
    placement: dict[str, list[Pod]] = {n.name: [] for n in nodes}
    kept = SelectorSpread()
    for i in range(15):
        b = make_pod(f"p{i}", rng.choice(["default", "default", "other"])).label(app=rng.choice(["web", "db"]))
        if rng.random() < 0.3:
            b.label(tier="front")
        if rng.random() < 0.2:
            b.terminating()
        placement[rng.choice(nodes).name].append(b.obj())
        snap = Snapshot.of([node_info(n, *placement[n.name]) for n in nodes], objects)
        pod = web(tier="front").obj()
        index = np.array(sorted(rng.sample(range(len(nodes)), 4)), dtype=np.intp)
        state, fresh_state = CycleState(), CycleState()
        infos = [snap.node_infos[k] for k in index]
        assert kept.pre_score(state, pod, infos, snap).code is Code.SUCCESS
        fresh = SelectorSpread()
        fresh.pre_score(fresh_state, pod, infos, snap)
        raw = [kept.score(state, pod, n) for n in infos]
        assert raw == [fresh.score(fresh_state, pod, n) for n in infos]
        vec = kept.score_nodes(state, pod, snap.table, index)
        assert vec.tolist() == raw
        assert (
            kept.normalize_scores(state, pod, vec).tolist()
            == fresh.normalize_scores(fresh_state, pod, np.array(raw)).tolist()
        )
