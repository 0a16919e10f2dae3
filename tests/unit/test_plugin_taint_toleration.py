"""TaintToleration: the filter's one reason for untolerated taints, PreferNoSchedule scoring, the PreFilter SKIP,
vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.taint_toleration import TaintToleration, fits


def node(*taints):
    b = make_node("n1")
    for key, value, effect in taints:
        b.taint(key, value, effect)
    return b.obj()


# v1.37 taint_toleration.go: one reason whatever the taint
UNTOLERATED = "node(s) had untolerated taint(s)"


@pytest.mark.parametrize(
    "taints, pod, reason",
    [
        pytest.param([], make_pod().obj(), None, id="no taints"),
        pytest.param([("dedicated", "user1", "NoSchedule")], make_pod().obj(), UNTOLERATED, id="NoSchedule"),
        pytest.param([("k", "", "NoExecute")], make_pod().obj(), UNTOLERATED, id="NoExecute, empty value"),
        pytest.param([("k", "v", "PreferNoSchedule")], make_pod().obj(), None, id="PreferNoSchedule never filters"),
        pytest.param(
            [("dedicated", "user1", "NoSchedule")],
            make_pod().toleration("dedicated", "user1", "NoSchedule").obj(),
            None,
            id="tolerated by key, value and effect",
        ),
        pytest.param(
            [("dedicated", "user1", "NoSchedule")],
            make_pod().toleration("dedicated", "user2", "NoSchedule").obj(),
            UNTOLERATED,
            id="other value",
        ),
        pytest.param(
            [("dedicated", "user1", "NoSchedule")],
            make_pod().toleration("dedicated", operator="Exists").obj(),
            None,
            id="Exists, any effect",
        ),
        pytest.param(
            [("dedicated", "user1", "NoSchedule")],
            make_pod().toleration("dedicated", operator="Exists", effect="NoExecute").obj(),
            UNTOLERATED,
            id="Exists, wrong effect",
        ),
        pytest.param(
            [("a", "1", "NoSchedule"), ("b", "2", "NoExecute")],
            make_pod().toleration("a", "1").obj(),
            UNTOLERATED,
            id="one of two untolerated",
        ),
        pytest.param(
            [("a", "1", "NoSchedule"), ("b", "2", "NoExecute")],
            make_pod().obj(),
            UNTOLERATED,
            id="two untolerated, one reason",
        ),
        pytest.param(
            [("a", "1", "NoSchedule")], make_pod().toleration(operator="Exists").obj(), None, id="tolerate everything"
        ),
    ],
)
def test_filter(taints, pod, reason):
    info = node_info(node(*taints))
    status = TaintToleration().filter(CycleState(), pod, info)
    if reason is None:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (reason,)
    assert fits(pod, info) == status


def _snapshot(*nodes):
    return Snapshot.of([node_info(n) for n in nodes])


def test_pre_filter_skips_when_every_taint_set_passes():
    plain = make_node("a").obj()
    soft = make_node("b").taint("k", "v", "PreferNoSchedule").obj()
    hard = make_node("c").taint("k", "v", "NoSchedule").obj()
    plugin = TaintToleration()
    assert plugin.pre_filter(CycleState(), make_pod().obj(), _snapshot(plain, soft)).is_skip
    assert plugin.pre_filter(CycleState(), make_pod().obj(), _snapshot(plain, hard)).is_success
    assert plugin.pre_filter(CycleState(), make_pod().toleration("k", "v").obj(), _snapshot(plain, hard)).is_skip


def score_all(pod, nodes):
    infos = [node_info(n) for n in nodes]
    snap = Snapshot.of(infos)
    plugin = TaintToleration()
    state = CycleState()
    assert plugin.pre_score(state, pod, infos, snap).is_success  # upstream's PreScore never skips
    raw = np.array([plugin.score(state, pod, i) for i in infos], dtype=np.int64)
    assert plugin.score_nodes(state, pod, snap.table, np.arange(len(infos), dtype=np.intp)).tolist() == raw.tolist()
    return raw.tolist(), plugin.normalize_scores(state, pod, raw.copy()).tolist()


def test_score_counts_untolerated_prefer_no_schedule():
    nodes = [
        make_node("a").obj(),  # 0
        make_node("b").taint("cpu", "high", "PreferNoSchedule").obj(),  # tolerated: 0
        make_node("c").taint("mem", "high", "PreferNoSchedule").taint("disk", "slow", "PreferNoSchedule").obj(),  # 2
        make_node("d")
        .taint("mem", "high", "PreferNoSchedule")
        .taint("x", "y", "NoSchedule")
        .obj(),  # 1 (NoSchedule ignored)
    ]
    pod = make_pod().toleration("cpu", "high", "PreferNoSchedule").obj()
    raw, normalized = score_all(pod, nodes)
    assert raw == [0, 0, 2, 1]
    # reversed: 100 - 100 * s // max -> 100, 100, 0, 100 - 50 = 50
    assert normalized == [100, 100, 0, 50]


def test_score_only_considers_prefer_no_schedule_or_empty_effect_tolerations():
    nodes = [make_node("a").taint("k", "v", "PreferNoSchedule").obj(), make_node("b").obj()]
    noschedule_only = make_pod().toleration("k", "v", "NoSchedule").obj()
    assert score_all(noschedule_only, nodes) == ([1, 0], [0, 100])
    any_effect = make_pod().toleration("k", "v").obj()
    assert score_all(any_effect, nodes) == ([0, 0], [100, 100])  # tolerated everywhere


def test_every_node_scores_100_without_prefer_no_schedule_taints():
    # upstream DefaultNormalizeScore reversed, all counts 0: every node gets the maximum
    assert score_all(make_pod().obj(), [make_node("a").obj(), make_node("b").taint("k", "v", "NoSchedule").obj()]) == (
        [0, 0],
        [100, 100],
    )


def test_names_and_args():
    assert TaintToleration().name == TaintToleration.NAME == "TaintToleration"
    with pytest.raises(PluginArgsError):
        TaintToleration.new({"x": 1})


_TAINTS = [
    (k, v, e) for k in ("a", "b", "c") for v in ("", "1") for e in ("NoSchedule", "NoExecute", "PreferNoSchedule")
]


@pytest.mark.parametrize("seed", range(6))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    nodes = []
    for i in range(40):
        b = make_node(f"n{i}")
        for key, value, effect in rng.sample(_TAINTS, rng.randint(0, 3)):
            b.taint(key, value, effect)
        nodes.append(b.obj())
    infos = [node_info(x) for x in nodes]
    snap = Snapshot.of(infos)
    plugin = TaintToleration()
    for _ in range(8):
        b = make_pod()
        for _ in range(rng.randint(0, 3)):
            key, value, effect = rng.choice(_TAINTS)
            op = rng.choice(["Equal", "Exists"])
            b.toleration(
                rng.choice([key, ""]) if op == "Exists" else key,
                value if op == "Equal" else "",
                rng.choice([effect, ""]),
                op,
            )
        pod = b.obj()
        index = np.array(rng.sample(range(40), 25), dtype=np.intp)
        state = CycleState()
        if not plugin.pre_filter(state, pod, snap).is_skip:
            assert plugin.filter_nodes(state, pod, snap.table, index).tolist() == [
                plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index.tolist()
            ]
        else:
            assert all(plugin.filter(state, pod, i).is_success for i in infos)
        assert plugin.pre_score(state, pod, infos, snap).is_success
        assert plugin.score_nodes(state, pod, snap.table, index).tolist() == [
            plugin.score(state, pod, snap.node_infos[k]) for k in index.tolist()
        ]
