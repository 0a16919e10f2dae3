"""Explanations of attempts (core/scheduling/explanation.py): every node's verdict, raw and normalised scores,
the tables, the JSON."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.policy import default_profile, validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, ScheduleResult
from kopf_scheduler.core.scheduling.explanation import (
    CHOSEN,
    FEASIBLE,
    FILTERED,
    REJECTED,
    UNRESOLVABLE,
    Explanation,
    NodeVerdict,
    PreemptionNode,
    Victim,
    error_explanation,
    explanation_of,
    from_json,
    render,
    summary,
    to_json,
)
from kopf_scheduler.sim.loader import load_cluster, load_pods, read_documents
from kopf_scheduler.sim.simulator import Simulation

EXAMPLES = Path(__file__).resolve().parents[2] / "operator" / "kopf_scheduler" / "sim" / "examples"


def profile(spec: dict[str, object]) -> Profile:
    built = validate_policy({"schedulerName": "t", **spec})
    assert not isinstance(built, list), built
    return built


#: filters NodeResourcesFit, TaintToleration; scores NodeAffinity x2 (normalised by the maximum), NodeResourcesFit x1
AFFINITY_AND_FIT = {
    "predicates": [{"name": "NodeResourcesFit"}, {"name": "TaintToleration"}],
    "priorities": [{"name": "NodeAffinity", "weight": 2}, {"name": "NodeResourcesFit", "weight": 1}],
}


def four_nodes() -> list[NodeInfo]:
    return [
        node_info(make_node("a").capacity(cpu="4", memory="8Gi", pods="110").label(disk="ssd").obj()),
        node_info(make_node("b").capacity(cpu="4", memory="8Gi", pods="110").label(disk="hdd").obj()),
        node_info(make_node("c").capacity(cpu="4", memory="8Gi", pods="110").taint("dedicated", "gpu").obj()),
        node_info(
            make_node("d").capacity(cpu="2", memory="8Gi", pods="110").obj(), make_pod("resident").req(cpu="1").obj()
        ),
    ]


def web() -> Pod:
    return (
        make_pod("web")
        .req(cpu="2", memory="1Gi")
        .preferred_node_term(10, {"key": "disk", "operator": "In", "values": ["ssd"]})
        .preferred_node_term(5, {"key": "disk", "operator": "In", "values": ["ssd", "hdd"]})
        .obj()
    )


def attempt(prof: Profile, pod: Pod, infos: list[NodeInfo], *, explain: bool = False) -> ScheduleResult:
    return GenericScheduler(prof).schedule(pod, Snapshot.of(infos), rng=random.Random(0), explain=explain)


def test_a_scheduled_pod_shows_raw_normalised_and_weighted_scores_and_every_rejection() -> None:
    e = explanation_of(
        web(), attempt(profile(AFFINITY_AND_FIT), web(), four_nodes(), explain=True), scheduler_name="t", attempts=2
    )
    assert (e.outcome, e.node, e.num_nodes, e.evaluated_nodes, e.not_evaluated) == ("scheduled", "a", 4, 4, ())
    assert [(v.node, v.result, v.total) for v in e.nodes] == [
        ("a", CHOSEN, 268),
        ("b", FEASIBLE, 134),
        ("c", UNRESOLVABLE, None),
        ("d", REJECTED, None),
    ]
    # NodeAffinity raw: a matches both terms (10 + 5 = 15), b only the second (5); normalised by the maximum:
    # a 15*100/15 = 100, b 5*100/15 = 33. NodeResourcesFit (least allocated) on 4 cpu, 8Gi: cpu (4-2)/4 -> 50,
    # memory (8-1)/8 -> 87, mean 68 on both. Totals: a 100*2 + 68 = 268, b 33*2 + 68 = 134.
    assert render(e) == "\n".join(
        [
            "pod default/web: scheduled to a",
            "  scheduler t, attempt 2",
            "  4 nodes: 2 feasible, 2 rejected",
            "",
            "NODE  RESULT    TOTAL  PLUGIN            RAW  SCORE  WEIGHT  WEIGHTED",
            "a     chosen      268  NodeAffinity       15    100       2       200",
            "                       NodeResourcesFit   68     68       1        68",
            "b     feasible    134  NodeAffinity        5     33       2        66",
            "                       NodeResourcesFit   68     68       1        68",
            "",
            "NODE  RESULT         PLUGIN            REASONS",
            # the taint can only be tolerated, not preempted away; d's cpu would free up if its pod went
            "c     unresolvable   TaintToleration   node(s) had untolerated taint(s)",
            "d     unschedulable  NodeResourcesFit  Insufficient cpu",
        ]
    )
    assert summary(e).splitlines() == [
        "pod default/web: scheduled to a",
        "  2 node(s) filtered out: 1 Insufficient cpu, 1 node(s) had untolerated taint(s).",
        "  a: total 268 (NodeAffinity 100x2, NodeResourcesFit 68x1)",
        "  b: total 134 (NodeAffinity 33x2, NodeResourcesFit 68x1)",
    ]


def test_without_explain_a_scheduled_pods_rejections_name_the_plugin_but_not_its_reasons() -> None:
    # the operator's attempts: the filters are not asked why once a node is found (a Python call per node)
    e = explanation_of(web(), attempt(profile(AFFINITY_AND_FIT), web(), four_nodes()), scheduler_name="t")
    assert (e.outcome, e.node, e.evaluated_nodes, e.not_evaluated) == ("scheduled", "a", 4, ())
    assert [(v.node, v.result, v.plugin, v.reasons) for v in e.rejected] == [
        ("c", FILTERED, "TaintToleration", ()),
        ("d", FILTERED, "NodeResourcesFit", ()),
    ]
    assert render(e).splitlines()[-3:] == [
        "NODE  RESULT    PLUGIN            REASONS",
        "c     filtered  TaintToleration   (not asked: the pod was scheduled)",
        "d     filtered  NodeResourcesFit  (not asked: the pod was scheduled)",
    ]
    assert (
        summary(e).splitlines()[1]
        == "  2 node(s) filtered out: 1 rejected by NodeResourcesFit, 1 rejected by TaintToleration."
    )
    assert from_json(to_json(e)) == e


def test_the_json_form_reads_back_to_the_same_explanation() -> None:
    e = explanation_of(
        web(), attempt(profile(AFFINITY_AND_FIT), web(), four_nodes(), explain=True), scheduler_name="t", attempts=2
    )
    data = to_json(e)
    assert data["nodes"][1] == {
        "node": "b", "result": "feasible", "total": 134,
        "scores": [
            {"plugin": "NodeAffinity", "raw": 5, "score": 33, "weight": 2, "weighted": 66},
            {"plugin": "NodeResourcesFit", "raw": 68, "score": 68, "weight": 1, "weighted": 68},
        ],
    }  # fmt: skip
    assert data["nodes"][3] == {
        "node": "d",
        "result": "unschedulable",
        "plugin": "NodeResourcesFit",
        "code": "Unschedulable",
        "reasons": ["Insufficient cpu"],
    }
    assert from_json(data) == e


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({}, id="empty"),
        pytest.param({"pod": "a/b", "outcome": "scheduled", "numNodes": "many"}, id="a count that is no number"),
        pytest.param(
            {"pod": "a/b", "outcome": "scheduled", "numNodes": 1, "nodes": [{"result": "chosen"}]},
            id="a node without its name",
        ),
    ],
)
def test_malformed_json_is_a_value_error(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not an explanation"):
        from_json(data)


def test_one_feasible_node_is_chosen_unscored_unless_explain_asks() -> None:
    pod = make_pod("big").req(cpu="3").obj()
    infos = [
        node_info(make_node("a").capacity(cpu="4", memory="8Gi", pods="110").obj()),
        node_info(make_node("b").capacity(cpu="2", memory="8Gi", pods="110").obj()),
    ]
    e = explanation_of(pod, attempt(profile(AFFINITY_AND_FIT), pod, infos))
    assert e.nodes[0] == NodeVerdict("a", CHOSEN)
    assert render(e).splitlines()[:3] == [
        "pod default/big: scheduled to a",
        "  2 nodes: 1 feasible, 1 rejected",
        "  a: the only feasible node, bound without scoring (as upstream)",
    ]
    scored = explanation_of(pod, attempt(profile(AFFINITY_AND_FIT), pod, infos, explain=True))
    # NodeAffinity has no preferences to score (skipped); NodeResourcesFit: cpu (4-3)/4 -> 25, memory with the
    # scoring default of 200Mi (8192-200)/8192 -> 97; mean 61
    assert [(v.node, v.total, [(s.plugin, s.raw, s.score) for s in v.scores]) for v in scored.scored] == [
        ("a", 61, [("NodeResourcesFit", 61, 61)])
    ]


def test_a_pre_filter_rejection_stands_for_every_node() -> None:
    pod = make_pod("claims").pvc("data").obj()
    e = explanation_of(pod, attempt(default_profile("t"), pod, [node_info(make_node(n).obj()) for n in "abc"]))
    assert e.outcome == "unschedulable" and e.pre_filter == 'persistentvolumeclaim "data" not found'
    assert {(v.node, v.result, v.plugin, v.reasons) for v in e.nodes} == {
        (n, UNRESOLVABLE, "VolumeRestrictions", ('persistentvolumeclaim "data" not found',)) for n in "abc"
    }
    assert e.message.startswith('0/3 nodes are available: persistentvolumeclaim "data" not found.')


def test_nodes_a_pre_filter_left_out_get_its_status_not_not_evaluated() -> None:
    pod = (
        make_pod("pinned")
        .required_node_terms({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]})
        .obj()
    )
    e = explanation_of(pod, attempt(default_profile("t"), pod, [node_info(make_node(n).obj()) for n in "abc"]))
    assert e.node == "b" and e.not_evaluated == ()
    assert [(v.node, v.result, v.reasons) for v in e.rejected] == [
        (n, UNRESOLVABLE, ("node(s) didn't satisfy plugin(s) [NodeAffinity]",)) for n in "ac"
    ]


def test_nodes_past_the_search_limit_are_not_evaluated() -> None:
    # 200 nodes: upstream looks for max(200 * (50 - 200/125) / 100, 100) = 100 feasible nodes, then scores them
    infos = [node_info(make_node(f"n{i:03}").obj()) for i in range(200)]
    pod = make_pod("p").req(cpu="1").obj()
    e = explanation_of(pod, attempt(default_profile("t"), pod, infos))
    assert (e.evaluated_nodes, len(e.scored), len(e.rejected), len(e.not_evaluated)) == (100, 100, 0, 100)
    assert e.not_evaluated == tuple(f"n{i:03}" for i in range(100, 200))  # the search started at the first node
    assert "  200 nodes: 100 feasible, 0 rejected, 100 not evaluated" in render(e)


def preemption_placements(explained: bool = True) -> dict[str, Explanation]:
    loaded = load_cluster(read_documents(EXAMPLES / "preemption-cluster.yaml"))
    pods = load_pods(read_documents(EXAMPLES / "preemption-pods.yaml"), priority_classes=loaded.priority_classes)
    result = Simulation(loaded.cache, default_profile("kopf-scheduler"), explain=explained).run(pods)
    return {p.pod: p.explanation for p in result.placements if p.explanation is not None}


def test_a_preemption_lists_the_candidates_and_victims_considered() -> None:
    e = preemption_placements()["default/api"]
    assert e.node == "node-b" and e.preemption is not None
    p = e.preemption
    assert (p.plugin, p.nominated_node, p.victims) == ("DefaultPreemption", "node-b", (Victim("default/report", 100),))
    # both nodes could make room; db-0's PodDisruptionBudget allows no disruption, so node-a costs a violation
    assert p.nodes == (
        PreemptionNode("node-b", (Victim("default/report", 100),)),
        PreemptionNode("node-a", (Victim("default/db-0", 100),), pdb_violations=1),
    )
    assert render(e).split("\n\n")[2:] == [
        "preemption (DefaultPreemption): found a potential placement for pod on node node-b, preempting 1 victims\n"
        "  nominated node-b; victims default/report (priority 100)",
        "NODE    CANDIDATE  VICTIMS / REASONS\n"
        "node-b  chosen     default/report (priority 100)\n"
        "node-a  candidate  default/db-0 (priority 100); 1 PDB violation(s)",
    ]
    assert from_json(to_json(e)) == e


def test_a_preemption_that_finds_nothing_says_why_per_node() -> None:
    e = preemption_placements()["default/batch-2"]
    assert e.outcome == "unschedulable" and e.preemption is not None
    assert e.preemption.nodes == tuple(
        PreemptionNode(n, reasons=("No preemption victims found for incoming pod",)) for n in ("node-a", "node-b")
    )
    assert (
        e.preemption.message == "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_an_error_before_any_node_was_looked_at() -> None:
    pod = make_pod("p").obj()
    e = error_explanation(pod, "internal error: KeyError('x')", scheduler_name="s", attempts=3)
    assert render(e).splitlines() == [
        "pod default/p: error",
        "  scheduler s, attempt 3",
        "  internal error: KeyError('x')",
        "  0 nodes: 0 feasible, 0 rejected",
    ]
    assert from_json(to_json(e)) == e


def test_a_tie_at_the_top_says_the_choice_was_random() -> None:
    infos = [node_info(make_node(n).capacity(cpu="4", memory="8Gi", pods="110").obj()) for n in ("a", "b")]
    pod = make_pod("p").req(cpu="1", memory="1Gi").obj()
    e = explanation_of(pod, attempt(profile(AFFINITY_AND_FIT), pod, infos))
    # both empty 4-cpu nodes: cpu (4-1)/4 -> 75, memory (8-1)/8 -> 87; mean 81 each
    assert [v.total for v in e.scored] == [81, 81]
    assert (
        "  2 nodes tied at the top total 81: the chosen one was drawn at random (as upstream)" in render(e).splitlines()
    )
