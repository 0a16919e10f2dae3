"""The differential harness's own logic (bench/differential.py), without a cluster: log parsing, weights,
upstream's decision from its log, the comparison of two hand-made decisions, and the generator.

The run against upstream kube-scheduler is tests/cluster/test_differential.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import differential as dh
import pytest

from kopf_scheduler.cluster.bodies import NodeBody, node_body, pod_body

# Lines as kube-scheduler v1.37.2 writes them at -v=10 (klog text format), trimmed to what matters.
LOG = (Path(__file__).parent / "fixtures" / "kube-scheduler-v10.log").read_text()


def records() -> list[dh.LogRecord]:
    return dh.parse_log(LOG.splitlines(keepends=True))


def test_log_lines_become_records_and_multi_line_values_are_joined() -> None:
    recs = records()
    assert [r.msg for r in recs][:3] == [dh.MSG_CONFIG, dh.MSG_ATTEMPT, dh.MSG_PLUGIN_SCORE]  # the HTTP dump is skipped
    assert recs[0].values["config"].startswith("apiVersion: kubescheduler.config.k8s.io/v1\nkind:")
    assert recs[2].values == {"pod": "d/p3", "plugin": "TaintToleration", "node": "n0", "score": "300"}
    no_fit = next(r for r in recs if r.msg == dh.MSG_NO_FIT)
    assert no_fit.values["err"].endswith("preempting 1 victims")


def test_the_tail_indexes_records_fed_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "kube-scheduler.log"
    path.write_text("")
    tail = dh.KlogTail(path)
    cut = LOG.index("apiVersion") + 20  # the config block and a line are split between two polls
    with path.open("a") as f:
        f.write(LOG[:cut])
        f.flush()
        tail.poll()
        assert tail.config == ""
        f.write(LOG[cut:])
    tail.poll()
    assert "TaintToleration" in tail.config
    assert [r.msg for r in tail.by_pod["d/big"]][-2:] == [
        dh.MSG_PREEMPTED_VICTIM,
        dh.MSG_PREEMPTION_DONE,
    ]  # by preemptor
    assert tail.pod_events[("Delete event for scheduled pod", "d/p3")] == 1
    assert tail.node_events[("Add event for node", "n2")] == 1


def test_score_weights_follow_upstream_rules() -> None:
    config = """
profiles:
- plugins:
    score:
      enabled: [{name: NodeAffinity, weight: 5}]
      disabled: [{name: ImageLocality}]
    multiPoint:
      enabled: [{name: NodeAffinity, weight: 2}, {name: VolumeBinding, weight: 0}, {name: ImageLocality, weight: 1}]
"""
    # score.enabled comes first and wins; a weight of 0 means 1 (getValidScoreWeights)
    assert dh.score_weights(config) == {"NodeAffinity": 5, "VolumeBinding": 1}
    assert dh.score_weights(records()[0].values["config"]) == {
        "TaintToleration": 3,
        "NodeResourcesFit": 1,
        "ImageLocality": 1,
        "InterPodAffinity": 2,
    }


def test_upstream_decision_unweights_the_logged_scores() -> None:
    recs = [r for r in records() if r.values.get("pod") == "d/p3" and r.msg != "Delete event for scheduled pod"]
    weights = dh.score_weights(records()[0].values["config"])
    d = dh.upstream_decision(recs, weights, weights)
    assert d.node == "n1" and d.scored and d.feasible == {"n0", "n1"}
    assert d.scores == {
        "TaintToleration": {"n0": 100, "n1": 100},
        "NodeResourcesFit": {"n0": 80, "n1": 84},
        "ImageLocality": {"n0": 0, "n1": 7},
    }
    assert d.skipped == {"InterPodAffinity"}  # in the profile, absent from the lines: its PreScore skipped the pod
    assert d.totals == {"n0": 380, "n1": 391} and d.best == {"n1"}
    # the totals are the weighted sums: n1 = 100x3 + 84x1 + 7x1 = 391
    assert all(sum(d.scores[p][n] * weights[p] for p in d.scores) == d.totals[n] for n in d.feasible)


def test_upstream_decision_without_scores_is_the_one_feasible_node() -> None:
    recs = [
        dh.LogRecord(dh.MSG_ATTEMPT, {"pod": "d/x"}),
        dh.LogRecord(dh.MSG_BOUND, {"pod": "d/x", "node": "n4", "feasibleNodes": "1"}),
    ]
    d = dh.upstream_decision(recs, {"NodeResourcesFit": 1}, ["NodeResourcesFit"])
    assert (d.node, d.scored, d.feasible, d.best, d.skipped) == ("n4", False, {"n4"}, {"n4"}, frozenset())


def test_upstream_decision_reads_the_first_attempt_and_the_victims() -> None:
    recs = [r for r in records() if r.values.get("pod") == "d/big" or r.values.get("preemptor") == "d/big"]
    recs.append(dh.LogRecord(dh.MSG_ATTEMPT, {"pod": "d/big"}))  # a later retry
    recs.append(dh.LogRecord(dh.MSG_BOUND, {"pod": "d/big", "node": "n0"}))
    d = dh.upstream_decision(recs, {}, [])
    assert d.node is None and d.attempts == 2 and d.victims == ("d/p3",) and d.nominated_node == "n0"
    assert d.message == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: found a potential placement for pod on node n0, preempting 1 victims"
    )


def test_a_weighted_score_that_is_not_a_multiple_of_the_weight_is_a_parse_error() -> None:
    recs = [
        dh.LogRecord(dh.MSG_ATTEMPT, {"pod": "d/x"}),
        dh.LogRecord(dh.MSG_PLUGIN_SCORE, {"pod": "d/x", "plugin": "TaintToleration", "node": "n0", "score": "100"}),
        dh.LogRecord(dh.MSG_TOTAL_SCORE, {"pod": "d/x", "node": "n0", "score": "100"}),
    ]
    with pytest.raises(ValueError, match="not a multiple of its weight 3"):
        dh.upstream_decision(recs, {"TaintToleration": 3}, ["TaintToleration"])


def hand_made_case() -> dh.PodCase:
    """Upstream: a and b tie at the top, c lower; ImageLocality only upstream, InterPodAffinity skipped upstream.
    Ours: picks b; NodePreferAvoidPods only ours; our BalancedAllocation differs on a."""
    up = dh.Decision(
        node="a",
        feasible=frozenset("abc"),
        scored=True,
        totals={"a": 300, "b": 300, "c": 250},
        scores={
            "NodeResourcesBalancedAllocation": {"a": 90, "b": 80, "c": 50},
            "ImageLocality": {"a": 0, "b": 10, "c": 0},
        },
        weights={"NodeResourcesBalancedAllocation": 1, "ImageLocality": 1, "InterPodAffinity": 2},
        skipped=frozenset({"InterPodAffinity"}),
    )
    ours = dh.Decision(
        node="b",
        feasible=frozenset("bcd"),
        scored=True,
        totals={"b": 280, "c": 250, "d": 100},
        scores={
            "NodeResourcesBalancedAllocation": {"b": 80, "c": 60, "d": 0},
            "InterPodAffinity": {"b": 0, "c": 0, "d": 0},
            "NodePreferAvoidPods": {"b": 100, "c": 100, "d": 100},
        },
        weights={"NodeResourcesBalancedAllocation": 1, "InterPodAffinity": 1, "NodePreferAvoidPods": 10000},
    )
    return dh.PodCase(seed=1, pod="diff/p", summary="cpu=1", upstream=up, ours=ours)


def test_a_hand_made_case_compares_as_expected() -> None:
    c = dh.compare(hand_made_case())
    assert c.fits is True  # both bound it
    assert c.best is True  # b is in upstream's best set {a, b}
    assert c.best_sets_equal is False  # ours is {b}
    assert c.feasible is False  # a only upstream, d only ours
    assert c.message is None  # upstream bound it: no message to compare
    # pairs: plugins both sides run (InterPodAffinity skipped upstream counts 0) on nodes both found feasible (b, c)
    assert {(p.plugin, p.node): (p.ours, p.upstream, p.upstream_skipped) for p in c.pairs} == {
        ("InterPodAffinity", "b"): (0, 0, True),
        ("InterPodAffinity", "c"): (0, 0, True),
        ("NodeResourcesBalancedAllocation", "b"): (80, 80, False),
        ("NodeResourcesBalancedAllocation", "c"): (60, 50, False),
    }
    assert c.only_upstream == {"ImageLocality": [("b", 10)]}
    assert c.only_ours == {"NodePreferAvoidPods": [("b", 100), ("c", 100)]}


def test_a_report_counts_agreement_and_renders() -> None:
    unschedulable = dh.PodCase(
        seed=1,
        pod="diff/q",
        summary="cpu=64",
        upstream=dh.Decision(
            node=None,
            message="0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        ),
        ours=dh.Decision(
            node=None, message="0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
        ),
    )
    report = dh.build_report([dh.compare(hand_made_case()), dh.compare(unschedulable)])
    m = report.metrics()
    assert (m["fits"]["agree"], m["fits"]["of"]) == (2, 2)
    assert (m["best_node"]["agree"], m["best_node"]["of"]) == (1, 1)
    assert (m["messages"]["agree"], m["messages"]["of"]) == (0, 1)
    assert (m["plugin_scores"]["agree"], m["plugin_scores"]["of"]) == (3, 4)
    t = report.plugins["NodeResourcesBalancedAllocation"]
    assert (t.equal, t.compared, t.pods_constant_offset, t.worst[0].node) == (1, 2, 0, "c")
    assert report.only_upstream == {"ImageLocality": (1, 1)}  # non-zero in one pod, and not on every node
    assert report.only_ours == {"NodePreferAvoidPods": (1, 0)}  # 100 everywhere: cannot change a choice
    assert report.message_categories == Counter(
        {
            "reason only ours: node(s) had untolerated taint {a: b}": 1,
            "reason only upstream: node(s) had untolerated taint(s)": 1,
            "preemption tail: upstream 'N/N nodes are available: N Preemption is not helpful for scheduling.', "
            "ours none": 1,
        }
    )
    text = dh.render(report)
    assert "our node in upstream's best set" in text and "MESSAGE DIFFERENCES" in text
    json.dumps(dh.report_json(report, run={"seeds": [1]}))


@pytest.mark.parametrize(
    "ours, upstream, expected",
    [
        pytest.param(
            "",
            "0/2 nodes are available: 2 Insufficient cpu.",
            ["ours: scheduled"],
            id="we placed what upstream could not",
        ),
        pytest.param(
            "0/2 nodes are available: 1 Insufficient cpu.",
            "0/2 nodes are available: 2 Insufficient cpu.",
            ["count differs: Insufficient cpu"],
            id="same reason, other count",
        ),
        pytest.param(
            "0/2 nodes are available: 2 Insufficient cpu.",
            "0/2 nodes are available: 2 Insufficient cpu",
            ["same reasons and counts, different text (order or punctuation)"],
            id="punctuation only",
        ),
    ],
)
def test_message_differences(ours: str, upstream: str, expected: list[str]) -> None:
    assert dh.message_differences(ours, upstream) == expected


def test_the_generator_is_deterministic_and_exercises_every_knob() -> None:
    knobs = dh.Knobs()
    assert dh.generate(7, knobs) == dh.generate(7, knobs)
    scenarios = [dh.generate(seed, knobs) for seed in range(1, 6)]
    pods = [p for s in scenarios for p in s.pods]
    nodes = [n for s in scenarios for n, _ in s.nodes]
    statuses = [st["status"] for s in scenarios for _, st in s.nodes]
    text = json.dumps(pods)
    summaries = " ".join(dh.describe_pod(p) for p in pods)
    for needle in (
        "init:init",
        "sidecar",
        "hostPort",
        "nodeSelector=",
        "nodeAffinity:required",
        "nodeAffinity:preferred",
        "podAffinity:req",
        "podAffinity:pref",
        "antiAffinity:req",
        "antiAffinity:pref",
        "spread:DNS",
        "spread:SA",
        "/host/",
        "/zone/",
        "tolerations",
        "priority=diff-high",
        "owner=",
        "no-requests",
        "example.com/gpu=",
        "volumes:ebs",
        "volumes:gcepd",
        "claim",
    ):
        assert needle in summaries, needle
    for needle in ('"cpu": "64"', '"minDomains"', '"operator": "Exists"}]', '"tolerationSeconds"'):
        assert needle in text, needle
    effects = {t["effect"] for n in nodes for t in n["spec"].get("taints") or ()}
    assert effects == {"NoSchedule", "PreferNoSchedule", "NoExecute"}
    assert any(n["spec"].get("unschedulable") for n in nodes)
    assert any(st["allocatable"]["pods"] == "3" for st in statuses) and any(
        dh.GPU in st["allocatable"] for st in statuses
    )
    assert any(st["images"] for st in statuses)
    storage = [body for s in scenarios for body, _ in s.storage]
    kinds = Counter(body["kind"] for body in storage)
    assert kinds["CSINode"] and kinds["PersistentVolume"] and kinds["PersistentVolumeClaim"], kinds
    classes = {body["spec"].get("storageClassName") for body in storage if body["kind"] == "PersistentVolumeClaim"}
    assert classes == {"", dh.LOCAL_CLASS, dh.DYNAMIC_CLASS, dh.IMMEDIATE_CLASS}
    assert kinds["CSIStorageCapacity"], kinds
    assert '"aws://zone-a/vol-' in text
    # the storage draws come from their own RNG: without them the seed makes the cluster and pods it made before
    quiet = dh.Knobs(p_inline_disk=0, p_intree_claim=0, p_local_claim=0, p_immediate_claim=0, p_dynamic_claim=0)
    assert [p for p in dh.generate(7, quiet).pods if "volumes" in p["spec"]] == []


def image_locality_case() -> dh.PodCase:
    """Upstream picks b only thanks to ImageLocality, which we do not run; our BalancedAllocation agrees, our
    TaintToleration weight is 1 where upstream's is 3."""
    up = dh.Decision(
        node="b",
        feasible=frozenset("bc"),
        scored=True,
        # b: 50x1 + 10x1 + 100x3 = 360; c: 55x1 + 0x1 + 100x3 = 355
        totals={"b": 360, "c": 355},
        scores={
            "NodeResourcesBalancedAllocation": {"b": 50, "c": 55},
            "ImageLocality": {"b": 10, "c": 0},
            "TaintToleration": {"b": 100, "c": 100},
        },
        weights={"NodeResourcesBalancedAllocation": 1, "ImageLocality": 1, "TaintToleration": 3},
    )
    ours = dh.Decision(
        node="c",
        feasible=frozenset("bc"),
        scored=True,
        totals={"b": 150, "c": 155},
        scores={"NodeResourcesBalancedAllocation": {"b": 50, "c": 55}, "TaintToleration": {"b": 100, "c": 100}},
        weights={"NodeResourcesBalancedAllocation": 1, "TaintToleration": 1},
    )
    return dh.PodCase(seed=1, pod="diff/img", summary="cpu=1", upstream=up, ours=ours)


@pytest.mark.parametrize(
    "kept, best",
    [
        pytest.param(None, {"b"}, id="nothing kept from ours: upstream's own choice"),
        pytest.param("ImageLocality", {"c"}, id="our ImageLocality (none) alone flips it: b 50+0+300 < c 55+0+300"),
        pytest.param("NodeResourcesBalancedAllocation", {"b"}, id="our BalancedAllocation agrees"),
        pytest.param(dh.WEIGHTS, {"b"}, id="our weights: b 50+10+100 = 160 > c 155"),
    ],
)
def test_counterfactual_best_isolates_one_cause(kept: str | None, best: set[str]) -> None:
    assert dh.counterfactual_best(image_locality_case(), kept) == best


def test_the_report_attributes_misses_to_their_causes() -> None:
    report = dh.build_report([dh.compare(image_locality_case())])
    assert report.metrics()["best_node"]["agree"] == 0
    assert report.miss_causes == {"ImageLocality": 1}
    assert "CAUSES OF BEST-NODE MISSES" in dh.render(report)


def test_our_plugin_names_map_to_upstream_peers_once() -> None:
    assert dh.compared_names(
        ["NodeResourcesLeastAllocated", "NodeResourcesMostAllocated", "SelectorSpread", "ImageLocality"]
    ) == {
        "NodeResourcesLeastAllocated": "NodeResourcesFit",
        "NodeResourcesMostAllocated": "NodeResourcesMostAllocated",  # NodeResourcesFit is taken: compared as itself
        "SelectorSpread": "PodTopologySpread",
        "ImageLocality": "ImageLocality",
    }


def test_our_decision_runs_the_simulator_on_api_objects() -> None:
    from kopf_scheduler.core.config.policy import validate_policy

    profile = validate_policy(
        {
            "schedulerName": "x",
            "predicates": [{"name": "PodFitsResources"}, {"name": "PodToleratesNodeTaints"}],
            "priorities": [
                {"name": "LeastRequestedPriority", "weight": 2},
                {"name": "NodeAffinityPriority", "weight": 1},
            ],
        }
    )
    assert not isinstance(profile, list)

    def node(name: str, cpu: str) -> NodeBody:
        return node_body(name).hostname().allocatable(cpu=cpu, memory="8Gi", pods="110").ready()

    state = [node("a", "2").obj(), node("b", "4").obj(), node("c", "4").taint("k", "v", "NoSchedule").obj()]
    pod = pod_body("p", "diff").uid("u1").container("c", "x", cpu="1", memory="1Gi").obj()
    d, nodes = dh.our_decision(state, pod, profile, seed=0)
    assert d.node == "b" and d.feasible == {"a", "b"} and d.scored
    assert d.filtered == {"c": "TaintToleration: node(s) had untolerated taint(s)"}
    # LeastRequestedPriority is compared as upstream's NodeResourcesFit: b (75+87)/2 = 81, a (50+87)/2 = 68
    assert d.scores == {"NodeResourcesFit": {"a": 68, "b": 81}}
    assert d.skipped == {"NodeAffinity"} and d.weights == {"NodeResourcesFit": 2, "NodeAffinity": 1}
    assert d.totals == {"a": 136, "b": 162} and d.best == {"b"}
    assert set(nodes) == {"a", "b", "c"} and nodes["a"].startswith("cpu 0/2 mem 0/8Gi pods 0/110")


def test_a_bind_without_scores_must_be_the_one_feasible_node_shortcut() -> None:
    recs = [
        dh.LogRecord(dh.MSG_ATTEMPT, {"pod": "d/x"}),
        dh.LogRecord(dh.MSG_BOUND, {"pod": "d/x", "node": "n4", "feasibleNodes": "7"}),
    ]
    with pytest.raises(ValueError, match="feasibleNodes=7"):
        dh.upstream_decision(recs, {}, [])
