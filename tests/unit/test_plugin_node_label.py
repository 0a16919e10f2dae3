"""NodeLabel: v1.9 labelsPresence / labelPreference and the framework argument shape; vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework import Code, CycleState
from kopf_scheduler.core.arguments import PluginArgsError
from kopf_scheduler.core.plugins.node_label import ERR_REASON_PRESENCE_VIOLATED, CheckNodeLabelPresence, NodeLabelPriority
from kopf_scheduler.core.snapshot import Snapshot

NODE = make_node("n1").label(zone="a", retiring="2026-01-01").obj()


@pytest.mark.parametrize(
    "args, fit",
    [
        pytest.param({"labels": ["zone"], "presence": True}, True, id="v1.9 present"),
        pytest.param({"labels": ["zone", "gpu"], "presence": True}, False, id="v1.9 one missing"),
        pytest.param({"labels": ["retiring"], "presence": False}, False, id="v1.9 must be absent"),
        pytest.param({"labels": ["gpu"]}, True, id="v1.9 presence defaults to false"),
        pytest.param({"labels": [], "presence": True}, True, id="v1.9 nothing listed"),
        pytest.param({"presentLabels": ["zone"], "absentLabels": ["gpu"]}, True, id="framework both satisfied"),
        pytest.param({"presentLabels": ["zone"], "absentLabels": ["retiring"]}, False, id="framework absent violated"),
        pytest.param({"presentLabels": ["zone"], "presentLabelsPreference": ["gpu"]}, True, id="framework, score keys ignored by the filter"),
        pytest.param({}, True, id="no arguments"),
    ],
)
def test_presence(args, fit):
    status = CheckNodeLabelPresence(args).filter(CycleState(), make_pod().obj(), node_info(NODE))
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON_PRESENCE_VIOLATED,) == ("node(s) didn't have the requested labels",)


@pytest.mark.parametrize(
    "args, score",
    [
        pytest.param({"label": "zone", "presence": True}, 100, id="v1.9 present and wanted"),
        pytest.param({"label": "zone", "presence": False}, 0, id="v1.9 present, unwanted"),
        pytest.param({"label": "gpu", "presence": False}, 100, id="v1.9 absent, unwanted"),
        pytest.param({"label": "gpu", "presence": True}, 0, id="v1.9 absent, wanted"),
        # 2 of 3 satisfied: 200 // 3 = 66
        pytest.param({"presentLabelsPreference": ["zone", "gpu"], "absentLabelsPreference": ["ssd"]}, 66, id="framework average"),
        pytest.param({"presentLabelsPreference": ["zone"], "absentLabelsPreference": ["retiring"]}, 50, id="framework half"),
        pytest.param({"presentLabels": ["zone"]}, 0, id="framework, no preferences"),
    ],
)
def test_preference(args, score):
    assert NodeLabelPriority(args).score(CycleState(), make_pod().obj(), node_info(NODE)) == score


@pytest.mark.parametrize(
    "cls, args, field",
    [
        pytest.param(CheckNodeLabelPresence, {"labels": "zone"}, "labels", id="labels not a list"),
        pytest.param(CheckNodeLabelPresence, {"labels": ["a"], "presence": "yes"}, "presence", id="presence not a bool"),
        pytest.param(CheckNodeLabelPresence, {"labels": ["a"], "presentLabels": ["b"]}, "presentLabels", id="shapes mixed"),
        pytest.param(CheckNodeLabelPresence, {"presentLabels": ["a"], "absentLabels": ["a"]}, "presentLabels", id="present and absent"),
        pytest.param(CheckNodeLabelPresence, {"presentLabelsPreference": ["a"], "absentLabelsPreference": ["a"]}, "presentLabelsPreference", id="score pair checked too"),
        pytest.param(CheckNodeLabelPresence, {"bogus": 1}, "bogus", id="unknown field"),
        pytest.param(NodeLabelPriority, {"presence": True}, "label", id="label missing"),
        pytest.param(NodeLabelPriority, {"label": 3, "presence": True}, "label", id="label not a string"),
        pytest.param(NodeLabelPriority, {"label": "a", "labels": ["b"]}, "labels", id="v1.9 shape, unknown field"),
    ],
)
def test_bad_args(cls, args, field):
    with pytest.raises(PluginArgsError) as exc:
        cls(args)
    assert exc.value.field == field


def test_names():
    assert CheckNodeLabelPresence().name == "CheckNodeLabelPresence"
    assert NodeLabelPriority({"label": "a"}).name == "NodeLabelPriority"
    assert CheckNodeLabelPresence({"labels": ["a"]}, name="zoned").name == "zoned"


def test_pre_steps_skip_when_nothing_can_differ():
    snap = Snapshot.of([node_info(make_node("a").label(zone="1").obj()), node_info(make_node("b").label(zone="2").obj())])
    pod = make_pod().obj()
    assert CheckNodeLabelPresence().pre_filter(CycleState(), pod, snap).is_skip
    assert CheckNodeLabelPresence({"labels": ["zone"], "presence": True}).pre_filter(CycleState(), pod, snap).is_skip  # all pass
    assert CheckNodeLabelPresence({"labels": ["gpu"], "presence": True}).pre_filter(CycleState(), pod, snap).is_success
    assert NodeLabelPriority({"label": "zone", "presence": True}).pre_score(CycleState(), pod, snap.node_infos, snap).is_skip  # 100 everywhere
    assert NodeLabelPriority({"presentLabels": ["zone"]}).pre_score(CycleState(), pod, snap.node_infos, snap).is_skip
    mixed = Snapshot.of([node_info(make_node("a").label(gpu="1").obj()), node_info(make_node("b").obj())])
    assert NodeLabelPriority({"label": "gpu", "presence": True}).pre_score(CycleState(), pod, mixed.node_infos, mixed).is_success


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    keys = ["a", "b", "c", "d"]
    snap = Snapshot.of([node_info(make_node(f"n{i}").labels({k: "x" for k in keys if rng.random() < 0.5}).obj()) for i in range(30)])
    pod = make_pod().obj()
    for _ in range(5):
        present = rng.sample(keys, rng.randint(0, 2))
        absent = rng.sample([k for k in keys if k not in present], rng.randint(0, 2))
        f = CheckNodeLabelPresence({"presentLabels": present, "absentLabels": absent})
        s = NodeLabelPriority({"presentLabelsPreference": present, "absentLabelsPreference": absent})
        index = np.array(rng.sample(range(30), 20), dtype=np.intp)
        assert f.filter_nodes(CycleState(), pod, snap.table, index).tolist() == [
            f.filter(CycleState(), pod, snap.node_infos[k]).is_success for k in index.tolist()
        ]
        assert s.score_nodes(CycleState(), pod, snap.table, index).tolist() == [s.score(CycleState(), pod, snap.node_infos[k]) for k in index.tolist()]
