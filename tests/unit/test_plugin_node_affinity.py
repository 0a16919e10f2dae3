"""NodeAffinity: nodeSelector, required and preferred node affinity, addedAffinity, vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    NodeAffinityArgs,
    fits,
)
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler


def expr(key, op, *values):
    e = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(*exprs, fields=()):
    t = {"matchExpressions": list(exprs)}
    if fields:
        t["matchFields"] = list(fields)
    return t


NODE = make_node("n1").label(zone="a", disk="ssd", cores="8", odd="1_0").obj()


@pytest.mark.parametrize(
    "pod, fit",
    [
        pytest.param(make_pod().obj(), True, id="nothing asked"),
        pytest.param(make_pod().node_selector(zone="a").obj(), True, id="selector matches"),
        pytest.param(make_pod().node_selector(zone="a", disk="hdd").obj(), False, id="selector value differs"),
        pytest.param(make_pod().node_selector(gpu="yes").obj(), False, id="selector key missing"),
        pytest.param(make_pod().required_node_terms(term(expr("zone", "In", "a", "b"))).obj(), True, id="In"),
        pytest.param(make_pod().required_node_terms(term(expr("zone", "In", "b"))).obj(), False, id="In, other value"),
        pytest.param(make_pod().required_node_terms(term(expr("zone", "NotIn", "b"))).obj(), True, id="NotIn"),
        pytest.param(
            make_pod().required_node_terms(term(expr("gpu", "NotIn", "x"))).obj(), True, id="NotIn, label absent"
        ),
        pytest.param(make_pod().required_node_terms(term(expr("disk", "Exists"))).obj(), True, id="Exists"),
        pytest.param(
            make_pod().required_node_terms(term(expr("disk", "DoesNotExist"))).obj(), False, id="DoesNotExist"
        ),
        pytest.param(make_pod().required_node_terms(term(expr("cores", "Gt", "4"))).obj(), True, id="Gt"),
        pytest.param(make_pod().required_node_terms(term(expr("cores", "Lt", "4"))).obj(), False, id="Lt"),
        pytest.param(
            make_pod().required_node_terms(term(expr("zone", "Gt", "4"))).obj(), False, id="Gt on a non-integer label"
        ),
        # Go's strconv.ParseInt: no underscores or spaces (Python's int() would read "1_0" as 10)
        pytest.param(
            make_pod().required_node_terms(term(expr("odd", "Gt", "4"))).obj(), False, id="Gt parses labels as Go does"
        ),
        pytest.param(
            make_pod().required_node_terms(term(expr("zone", "In", "a"), expr("disk", "In", "hdd"))).obj(),
            False,
            id="expressions are ANDed",
        ),
        pytest.param(
            make_pod().required_node_terms(term(expr("zone", "In", "b")), term(expr("disk", "In", "ssd"))).obj(),
            True,
            id="terms are ORed",
        ),
        pytest.param(make_pod().required_node_terms().obj(), False, id="empty term list matches nothing"),
        pytest.param(make_pod().required_node_terms(term()).obj(), False, id="empty term matches nothing"),
        pytest.param(
            make_pod().node_selector(zone="b").required_node_terms(term(expr("zone", "Exists"))).obj(),
            False,
            id="selector and affinity both apply",
        ),
        pytest.param(
            make_pod().required_node_terms(term(fields=[expr("metadata.name", "In", "n1")])).obj(),
            True,
            id="matchFields name",
        ),
        pytest.param(
            make_pod().required_node_terms(term(fields=[expr("metadata.name", "In", "n2")])).obj(),
            False,
            id="matchFields other name",
        ),
        pytest.param(
            make_pod().required_node_terms(term(fields=[expr("metadata.name", "NotIn", "n2")])).obj(),
            True,
            id="matchFields NotIn",
        ),
        pytest.param(
            make_pod().preferred_node_term(5, expr("zone", "In", "b")).obj(), True, id="preferred terms never filter"
        ),
    ],
)
def test_filter(pod, fit):
    status = NodeAffinity().filter(CycleState(), pod, node_info(NODE))
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (ERR_REASON_POD,) == ("node(s) didn't match Pod's node affinity/selector",)
    assert fits(pod, node_info(NODE)) == status


@pytest.mark.parametrize(
    "pod, skip",
    [
        pytest.param(make_pod().obj(), True, id="plain pod"),
        pytest.param(make_pod().preferred_node_term(1, expr("zone", "In", "a")).obj(), True, id="preferred only"),
        pytest.param(make_pod().node_selector(zone="a").obj(), False, id="selector"),
        pytest.param(make_pod().required_node_terms(term(expr("zone", "In", "a"))).obj(), False, id="required"),
    ],
)
def test_pre_filter_skip(pod, skip):
    snap = Snapshot.of([node_info(NODE)])
    assert NodeAffinity().pre_filter(CycleState(), pod, snap).is_skip is skip


def test_pre_filter_skip_never_with_added_affinity():
    plugin = NodeAffinity.new(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "Exists"))]}
            }
        }
    )
    assert plugin.pre_filter(CycleState(), make_pod().obj(), Snapshot.of([node_info(NODE)])).is_success


def test_pre_filter_conflicting_node_names():
    # each term pins names, the intersections are empty: no node can match
    pod = (
        make_pod()
        .required_node_terms(
            term(fields=[expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")]),
            term(fields=[expr("metadata.name", "In", "n3"), expr("metadata.name", "In", "n4")]),
        )
        .obj()
    )
    status = NodeAffinity().pre_filter(CycleState(), pod, Snapshot.of([node_info(NODE)]))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (ERR_REASON_CONFLICT,)
    # one term without a name pin: any node may match, no conflict
    pod = (
        make_pod()
        .required_node_terms(term(fields=[expr("metadata.name", "In", "n9")]), term(expr("zone", "Exists")))
        .obj()
    )
    assert NodeAffinity().pre_filter(CycleState(), pod, Snapshot.of([node_info(NODE)])).is_success


def test_pre_filter_admits_the_pinned_names():
    # upstream PreFilter: the union over terms of each term's intersection of metadata.name In values
    pod = (
        make_pod()
        .required_node_terms(
            term(fields=[expr("metadata.name", "In", "n1")]),
            term(expr("zone", "Exists"), fields=[expr("metadata.name", "In", "n2")]),
        )
        .obj()
    )
    state = CycleState()
    assert NodeAffinity().pre_filter(state, pod, Snapshot.of([node_info(NODE)])).is_success
    assert state.node_names == {"NodeAffinity": frozenset({"n1", "n2"})}
    # one term without a pin: no narrowing
    pod = (
        make_pod()
        .required_node_terms(term(fields=[expr("metadata.name", "In", "n1")]), term(expr("zone", "Exists")))
        .obj()
    )
    state = CycleState()
    NodeAffinity().pre_filter(state, pod, Snapshot.of([node_info(NODE)]))
    assert state.node_names == {}


def test_pinned_pod_message_counts_the_other_nodes():
    # 4 nodes, the pod pins n1 (too small) and n9 (absent): n1 is filtered, the other 3 are left out
    nodes = [node_info(make_node(f"n{i}").capacity(cpu="1", memory="1Gi", pods="10").obj()) for i in range(4)]
    pod = (
        make_pod()
        .req(cpu="2")
        .required_node_terms(
            term(fields=[expr("metadata.name", "In", "n1")]), term(fields=[expr("metadata.name", "In", "n9")])
        )
        .obj()
    )
    profile = Profile("s", filters=(NodeResourcesFit(), NodeAffinity()))
    result = GenericScheduler(profile).schedule(pod, Snapshot.of(nodes), rng=random.Random(0))
    assert (
        result.message
        == "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    assert result.evaluated_nodes == 1


def test_added_affinity_is_checked_first():
    plugin = NodeAffinity.new(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "In", "b"))]}
            }
        }
    )
    pod = make_pod().node_selector(gpu="yes").obj()
    status = plugin.filter(CycleState(), pod, node_info(NODE))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (ERR_REASON_ENFORCED,) == ("node(s) didn't match scheduler-enforced node affinity",)
    ok = NodeAffinity.new(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "In", "a"))]}
            }
        }
    )
    assert ok.filter(CycleState(), pod, node_info(NODE)).reasons == (ERR_REASON_POD,)


@pytest.mark.parametrize(
    "args, field",
    [
        pytest.param({"foo": 1}, "foo", id="unknown top-level field"),
        pytest.param({"addedAffinity": []}, "addedAffinity", id="not an object"),
        pytest.param({"addedAffinity": {"bogus": 1}}, "addedAffinity.bogus", id="unknown affinity field"),
        pytest.param(
            {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            id="no terms",
        ),
        pytest.param(
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [term(expr("k", "Near", "x"))]
                    }
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
            id="bad operator",
        ),
        pytest.param(
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("k", "In"))]}
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
            id="In without values",
        ),
        pytest.param(
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [term(expr("k", "Gt", "x"))]
                    }
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
            id="Gt not an integer",
        ),
        pytest.param(
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [term(fields=[expr("spec.x", "In", "a")])]
                    }
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key",
            id="unsupported field key",
        ),
        pytest.param(
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "preference": term(expr("k", "Exists"))}
                    ]
                }
            },
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            id="weight out of range",
        ),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as exc:
        NodeAffinity.new(args)
    assert exc.value.field == field


REQUIRED = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def required(*terms):
    return {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(
    "args, field, message",
    [
        pytest.param(
            {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            REQUIRED,
            "must be a node selector object",
            id="required not an object",
        ),
        pytest.param(required(3), f"{REQUIRED}.nodeSelectorTerms[0]", "must be a node selector term", id="term"),
        pytest.param(
            required({"matchLabels": {}}),
            f"{REQUIRED}.nodeSelectorTerms[0].matchLabels",
            "unknown field",
            id="unknown term field",
        ),
        pytest.param(
            required({"matchExpressions": {}}),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions",
            "must be a list",
            id="expressions not a list",
        ),
        pytest.param(
            required({"matchExpressions": ["k"]}),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0]",
            "must be an object with key, operator and values",
            id="expression not an object",
        ),
        pytest.param(
            required(term(expr("", "Exists"))),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key",
            "must be a non-empty string",
            id="empty key",
        ),
        pytest.param(
            required({"matchExpressions": [{"key": "k", "operator": "In", "values": [1]}]}),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "must be a list of strings",
            id="values not strings",
        ),
        pytest.param(
            required(term(fields=[expr("metadata.name", "Exists")])),
            f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].operator",
            "'Exists': must be In or NotIn for a field selector",
            id="field operator",
        ),
        pytest.param(
            required(term(fields=[expr("metadata.name", "In", "a", "b")])),
            f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values",
            "must have exactly one value for a field selector",
            id="field values",
        ),
        pytest.param(
            required(term(expr("k", "Exists", "x"))),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "may not be specified when operator is Exists",
            id="Exists with values",
        ),
        pytest.param(
            required(term(expr("k", "Lt", "1", "2"))),
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values",
            "must have exactly one value when operator is Lt",
            id="Lt with two values",
        ),
        pytest.param(
            {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {}}},
            PREFERRED,
            "must be a list",
            id="preferred not a list",
        ),
        pytest.param(
            {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [1]}},
            f"{PREFERRED}[0]",
            "must be an object with weight and preference",
            id="preferred term not an object",
        ),
        pytest.param(
            {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": True}]}},
            f"{PREFERRED}[0].weight",
            "True: must be in the range 1-100",
            id="weight a bool",
        ),
    ],
)
def test_bad_added_affinity_says_what_is_wrong(args, field, message):
    with pytest.raises(PluginArgsError) as exc:
        NodeAffinity.new(args)
    assert (exc.value.field, exc.value.message) == (field, message)


def test_typed_args_are_validated_and_parsed():
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "In", "a"))]}}
    args = NodeAffinityArgs(added_affinity=added)
    assert args == NodeAffinity.new({"addedAffinity": added}).args
    assert args.added_required is not None and [t.match_expressions[0].key for t in args.added_required] == ["zone"]
    assert args.added_preferred == ()
    assert NodeAffinity(args).filter(CycleState(), make_pod().obj(), node_info(NODE)).is_success
    assert NodeAffinityArgs().added_required is None  # no added affinity: every node matches
    with pytest.raises(PluginArgsError) as exc:
        NodeAffinityArgs(added_affinity={"bogus": 1})
    assert exc.value.field == "addedAffinity.bogus"


def test_names():
    assert NodeAffinity().name == NodeAffinity.NAME == "NodeAffinity"
    assert NodeAffinity(name="MatchNodeSelector").name == "MatchNodeSelector"


def score_all(plugin, pod, nodes):
    infos = [node_info(n) for n in nodes]
    snap = Snapshot.of(infos)
    state = CycleState()
    pre = plugin.pre_score(state, pod, infos, snap)
    if pre.is_skip:
        return None
    raw = np.array([plugin.score(state, pod, i) for i in infos], dtype=np.int64)
    vec = plugin.score_nodes(state, pod, snap.table, np.arange(len(infos), dtype=np.intp))
    assert vec.tolist() == raw.tolist()
    return raw.tolist(), plugin.normalize_scores(state, pod, raw.copy()).tolist()


def test_score_weights_and_normalisation():
    nodes = [
        make_node("a").obj(),  # 0
        make_node("b").label(zone="z1").obj(),  # 2
        make_node("c").label(zone="z1", disk="ssd").obj(),  # 2 + 3 = 5
        make_node("d").label(disk="ssd").obj(),  # 3
    ]
    pod = (
        make_pod().preferred_node_term(2, expr("zone", "In", "z1")).preferred_node_term(3, expr("disk", "Exists")).obj()
    )
    raw, normalized = score_all(NodeAffinity(), pod, nodes)
    assert raw == [0, 2, 5, 3]
    # 100 * s // max: 0, 200//5 = 40, 100, 300//5 = 60
    assert normalized == [0, 40, 100, 60]


def test_score_ignores_weight_zero_and_empty_terms_and_adds_added_preferences():
    added = {
        "addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 4, "preference": term(expr("disk", "Exists"))}
            ]
        }
    }
    pod = make_pod().preferred_node_term(0, expr("zone", "Exists")).preferred_node_term(7).obj()
    nodes = [make_node("a").label(zone="z", disk="x").obj(), make_node("b").label(zone="z").obj()]
    assert score_all(NodeAffinity(), pod, nodes) is None  # nothing effective: SKIP
    raw, normalized = score_all(NodeAffinity.new(added), pod, nodes)
    assert raw == [4, 0] and normalized == [100, 0]


def test_all_zero_scores_stay_zero():
    pod = make_pod().preferred_node_term(2, expr("zone", "In", "nowhere")).obj()
    raw, normalized = score_all(NodeAffinity(), pod, [make_node("a").obj(), make_node("b").obj()])
    assert raw == [0, 0] and normalized == [0, 0]


# ----------------------------------------------------------------------------- vector vs per node

_KEYS = ["zone", "disk", "rack", "cores"]
_VALUES = {
    "zone": ["a", "b", "c"],
    "disk": ["ssd", "hdd"],
    "rack": ["r1", "r2", "r3", "r4"],
    "cores": ["2", "4", "8", "16"],
}


def _random_expr(rng):
    key = rng.choice(_KEYS)
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Exists", "DoesNotExist"):
        return expr(key, op)
    if op in ("Gt", "Lt"):
        return expr(key, op, rng.choice(["3", "8"]))
    return expr(key, op, *rng.sample(_VALUES[key], rng.randint(1, 2)))


def _random_term(rng, n_nodes):
    fields = []
    if rng.random() < 0.2:
        fields = [expr("metadata.name", rng.choice(["In", "NotIn"]), f"n{rng.randrange(n_nodes)}")]
    return term(*[_random_expr(rng) for _ in range(rng.randint(0 if fields else 1, 2))], fields=fields)


@pytest.mark.parametrize("seed", range(8))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    n = 40
    nodes = []
    for i in range(n):
        labels = {k: rng.choice(_VALUES[k]) for k in _KEYS if rng.random() < 0.7}
        nodes.append(make_node(f"n{i}").labels(labels).obj())
    infos = [node_info(x) for x in nodes]
    snap = Snapshot.of(infos)
    added = None
    if rng.random() < 0.3:
        added = {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_random_term(rng, n)]}
            }
        }
    plugin = NodeAffinity.new(added)
    for _ in range(10):
        b = make_pod()
        if rng.random() < 0.5:
            b.node_selector_map({k: rng.choice(_VALUES[k]) for k in rng.sample(_KEYS, rng.randint(1, 2))})
        if rng.random() < 0.7:
            b.required_node_terms(*[_random_term(rng, n) for _ in range(rng.randint(1, 3))])
        for _ in range(rng.randint(0, 3)):
            b.preferred_node_term(rng.randint(1, 100), *[_random_expr(rng) for _ in range(rng.randint(1, 2))])
        pod = b.obj()
        index = np.array(rng.sample(range(n), 30), dtype=np.intp)
        state = CycleState()
        if not plugin.pre_filter(state, pod, snap).is_skip:
            got = plugin.filter_nodes(state, pod, snap.table, index)
            assert got.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index.tolist()]
        if not plugin.pre_score(state, pod, infos, snap).is_skip:
            got_s = plugin.score_nodes(state, pod, snap.table, index)
            assert got_s.tolist() == [plugin.score(state, pod, snap.node_infos[k]) for k in index.tolist()]
