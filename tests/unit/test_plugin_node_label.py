"""NodeLabel: presence filter, preference score, NodeLabelArgs validation, SKIPs, vector agreement.

The v1.9 rows use the arguments core/config/registry.py translates ``labelsPresence`` / ``labelPreference`` into:
``{labels, presence: true}`` -> ``presentLabels``, ``presence: false`` (or absent) -> ``absentLabels``;
``{label, presence}`` -> a one-item ``presentLabelsPreference`` / ``absentLabelsPreference``.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_label import ERR_REASON_PRESENCE_VIOLATED, NodeLabel, NodeLabelArgs

NODE = make_node("n1").label(zone="a", retiring="2026-01-01").obj()


@pytest.mark.parametrize(
    "args, fit",
    [
        pytest.param({"presentLabels": ["zone"]}, True, id="v1.9 present"),
        pytest.param({"presentLabels": ["zone", "gpu"]}, False, id="v1.9 one missing"),
        pytest.param({"absentLabels": ["retiring"]}, False, id="v1.9 must be absent"),
        pytest.param({"absentLabels": ["gpu"]}, True, id="v1.9 presence defaults to false"),
        pytest.param({"presentLabels": []}, True, id="v1.9 nothing listed"),
        pytest.param({"presentLabels": ["zone"], "absentLabels": ["gpu"]}, True, id="framework both satisfied"),
        pytest.param({"presentLabels": ["zone"], "absentLabels": ["retiring"]}, False, id="framework absent violated"),
        pytest.param(
            {"presentLabels": ["zone"], "presentLabelsPreference": ["gpu"]},
            True,
            id="framework, score keys ignored by the filter",
        ),
        pytest.param({}, True, id="no arguments"),
    ],
)
def test_presence(args, fit):
    status = NodeLabel.new(args).filter(CycleState(), make_pod().obj(), node_info(NODE))
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON_PRESENCE_VIOLATED,) == ("node(s) didn't have the requested labels",)


def test_node_less_info_fails_the_filter():
    status = NodeLabel(NodeLabelArgs(absent_labels=("gpu",))).filter(CycleState(), make_pod().obj(), NodeInfo(None))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (ERR_REASON_PRESENCE_VIOLATED,)


@pytest.mark.parametrize(
    "args, score",
    [
        pytest.param({"presentLabelsPreference": ["zone"]}, 100, id="v1.9 present and wanted"),
        pytest.param({"absentLabelsPreference": ["zone"]}, 0, id="v1.9 present, unwanted"),
        pytest.param({"absentLabelsPreference": ["gpu"]}, 100, id="v1.9 absent, unwanted"),
        pytest.param({"presentLabelsPreference": ["gpu"]}, 0, id="v1.9 absent, wanted"),
        # 2 of 3 satisfied: 200 // 3 = 66
        pytest.param(
            {"presentLabelsPreference": ["zone", "gpu"], "absentLabelsPreference": ["ssd"]}, 66, id="framework average"
        ),
        pytest.param(
            {"presentLabelsPreference": ["zone"], "absentLabelsPreference": ["retiring"]}, 50, id="framework half"
        ),
        pytest.param({"presentLabels": ["zone"]}, 0, id="framework, no preferences"),
    ],
)
def test_preference(args, score):
    assert NodeLabel.new(args).score(CycleState(), make_pod().obj(), node_info(NODE)) == score


CONFLICT = (
    "detecting at least one label (e.g., 'a') that exist in both the present['b', 'a'] and absent['a'] label list"
)


@pytest.mark.parametrize(
    "args, field, message",
    [
        pytest.param(
            {"presentLabels": "zone"}, "presentLabels", "must be a list, not a string", id="labels not a list"
        ),
        pytest.param(
            {"absentLabelsPreference": [None]},
            "absentLabelsPreference[0]",
            "must be a string, not null",
            id="v1.9 label missing",
        ),
        pytest.param(
            {"presentLabelsPreference": [3]},
            "presentLabelsPreference[0]",
            "must be a string, not a number",
            id="label not a string",
        ),
        pytest.param(
            {"presentLabels": ["b", "a"], "absentLabels": ["a"]}, "presentLabels", CONFLICT, id="present and absent"
        ),
        pytest.param(
            {"presentLabelsPreference": ["b", "a"], "absentLabelsPreference": ["a"]},
            "presentLabelsPreference",
            CONFLICT,
            id="score pair checked too",
        ),
        pytest.param(
            {"labels": ["a"], "presence": True},
            "labels",
            "unknown field",
            id="v1.9 shape is the registry's, not the plugin's",
        ),
        pytest.param({"bogus": 1}, "bogus", "unknown field", id="unknown field"),
    ],
)
def test_bad_args(args, field, message):
    with pytest.raises(PluginArgsError) as exc:
        NodeLabel.new(args)
    assert exc.value.field == field
    assert exc.value.message.startswith(message)


@pytest.mark.parametrize(
    "pairs, field",
    [
        pytest.param({"present_labels": ("a",), "absent_labels": ("a",)}, "presentLabels", id="filter pair"),
        pytest.param(
            {"present_labels_preference": ("a",), "absent_labels_preference": ("a",)},
            "presentLabelsPreference",
            id="score pair",
        ),
    ],
)
def test_typed_args_are_validated(pairs, field):
    with pytest.raises(PluginArgsError) as exc:
        NodeLabelArgs(**pairs)
    assert exc.value.field == field


def test_a_label_may_be_in_both_pairs():
    # required present by the filter, preferred absent by the score: no conflict within either pair
    args = NodeLabelArgs(present_labels=("a",), absent_labels_preference=("a",))
    assert NodeLabel.new({"presentLabels": ["a"], "absentLabelsPreference": ["a"]}).args == args


def test_names():
    assert NodeLabel().name == NodeLabel.NAME == "NodeLabel"
    assert NodeLabel.new({"presentLabels": ["a"]}, name="zoned").name == "zoned"
    assert NodeLabel.new({"presentLabels": ["a"]}).args == NodeLabelArgs(present_labels=("a",))


def test_pre_steps_skip_when_nothing_can_differ():
    snap = Snapshot.of(
        [node_info(make_node("a").label(zone="1").obj()), node_info(make_node("b").label(zone="2").obj())]
    )
    pod = make_pod().obj()
    assert NodeLabel().pre_filter(CycleState(), pod, snap).is_skip
    assert NodeLabel.new({"presentLabels": ["zone"]}).pre_filter(CycleState(), pod, snap).is_skip  # all pass
    assert NodeLabel.new({"presentLabels": ["gpu"]}).pre_filter(CycleState(), pod, snap).is_success
    assert (
        NodeLabel.new({"presentLabelsPreference": ["zone"]}).pre_score(CycleState(), pod, snap.node_infos, snap).is_skip
    )  # 100 everywhere
    assert NodeLabel.new({"presentLabels": ["zone"]}).pre_score(CycleState(), pod, snap.node_infos, snap).is_skip
    mixed = Snapshot.of([node_info(make_node("a").label(gpu="1").obj()), node_info(make_node("b").obj())])
    assert (
        NodeLabel.new({"presentLabelsPreference": ["gpu"]})
        .pre_score(CycleState(), pod, mixed.node_infos, mixed)
        .is_success
    )
    # each pre-step reads only its own pair: a filter-only instance skips the score, and back
    assert NodeLabel.new({"presentLabels": ["gpu"]}).pre_score(CycleState(), pod, mixed.node_infos, mixed).is_skip
    assert NodeLabel.new({"presentLabelsPreference": ["gpu"]}).pre_filter(CycleState(), pod, mixed).is_skip
    both = NodeLabel.new({"presentLabels": ["gpu"], "presentLabelsPreference": ["gpu"]})
    assert (
        both.pre_filter(CycleState(), pod, mixed).is_success
        and both.pre_score(CycleState(), pod, mixed.node_infos, mixed).is_success
    )


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    keys = ["a", "b", "c", "d"]
    snap = Snapshot.of(
        [node_info(make_node(f"n{i}").labels({k: "x" for k in keys if rng.random() < 0.5}).obj()) for i in range(30)]
    )
    pod = make_pod().obj()
    for _ in range(5):
        present = rng.sample(keys, rng.randint(0, 2))
        absent = rng.sample([k for k in keys if k not in present], rng.randint(0, 2))
        plugin = NodeLabel(NodeLabelArgs(tuple(present), tuple(absent), tuple(absent), tuple(present)))
        index = np.array(rng.sample(range(30), 20), dtype=np.intp)
        assert plugin.filter_nodes(CycleState(), pod, snap.table, index).tolist() == [
            plugin.filter(CycleState(), pod, snap.node_infos[k]).is_success for k in index.tolist()
        ]
        assert plugin.score_nodes(CycleState(), pod, snap.table, index).tolist() == [
            plugin.score(CycleState(), pod, snap.node_infos[k]) for k in index.tolist()
        ]
