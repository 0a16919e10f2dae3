"""InterPodAffinity: filter reasons and codes, first-pod rule, namespaces, scores, SKIPs, vector forms, index."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from builders import PodBuilder, make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import parse_pod
from kopf_scheduler.core.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
    InterPodAffinityArgs,
    fits,
)
from kopf_scheduler.core.state.cache import SchedulerCache

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
OK = (Code.SUCCESS, ())
AFF = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,))
ANTI = (Code.UNSCHEDULABLE, (ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,))
EXISTING = (Code.UNSCHEDULABLE, (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,))


def nodes3() -> list[Any]:
    # n1, n2 in zone a; n3 in zone b; n4 has no zone label
    return [
        make_node("n1").zone("a").obj(),
        make_node("n2").zone("a").obj(),
        make_node("n3").zone("b").obj(),
        make_node("n4").obj(),
    ]


def snapshot_of(placement: dict[str, list[Pod]], ns_labels: dict[str, dict[str, str]] | None = None) -> Snapshot:
    objects = ClusterObjects(namespace_labels=dict(ns_labels or {}))
    return Snapshot.of([node_info(n, *placement.get(n.name, [])) for n in nodes3()], objects)


def run_filter(
    pod: Pod, snap: Snapshot, plugin: InterPodAffinity | None = None
) -> tuple[Code, list[tuple[Code, tuple[str, ...]]]]:
    plugin = plugin or InterPodAffinity()
    state = CycleState()
    pre = plugin.pre_filter(state, pod, snap)
    if pre.is_skip:
        return pre.code, []
    statuses = [plugin.filter(state, pod, i) for i in snap.node_infos]
    mask = plugin.filter_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert mask.tolist() == [s.is_success for s in statuses]
    return pre.code, [(s.code, s.reasons) for s in statuses]


def term_ns_selector(pod_body: dict[str, Any], kind: str, selector: dict[str, str]) -> dict[str, Any]:
    """Give every required term of ``kind`` a namespaceSelector matchLabels ``selector``."""
    for t in pod_body["spec"]["affinity"][kind]["requiredDuringSchedulingIgnoredDuringExecution"]:
        t["namespaceSelector"] = {"matchLabels": selector}
    return pod_body


def web(name: str = "w", ns: str = "default") -> PodBuilder:
    return make_pod(name, ns).label(app="web")


@pytest.mark.parametrize(
    "pod, placement, ns_labels, want_pre, want",
    [
        pytest.param(make_pod("p").obj(), {}, None, Code.SKIP, [], id="no terms anywhere: skip"),
        pytest.param(
            make_pod("p").obj(),
            {"n1": [web().obj()]},
            None,
            Code.SKIP,
            [],
            id="existing pods without anti-affinity: skip",
        ),
        pytest.param(
            make_pod("p").label(app="db").obj(),
            {"n1": [web().pod_affinity(HOST, {"app": "other"}, anti=True).obj()]},
            None,
            Code.SKIP,
            [],
            id="existing anti-affinity not selecting the pod: skip",
        ),
        pytest.param(
            make_pod("p").pod_affinity(HOST, {"app": "web"}, anti=True).obj(),
            {"n1": [web().obj()]},
            None,
            Code.SUCCESS,
            [ANTI, OK, OK, OK],
            id="anti-affinity on hostname rejects the node holding a match",
        ),
        pytest.param(
            make_pod("p").pod_affinity(ZONE, {"app": "web"}, anti=True).obj(),
            {"n1": [web().obj()]},
            None,
            Code.SUCCESS,
            [ANTI, ANTI, OK, OK],
            id="anti-affinity on zone rejects the whole zone; unzoned node passes",
        ),
        pytest.param(
            make_pod("p").label(app="db").obj(),
            {"n3": [web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj()]},
            None,
            Code.SUCCESS,
            [OK, OK, EXISTING, OK],
            id="existing pod's anti-affinity selects the incoming pod",
        ),
        pytest.param(
            make_pod("p", "other").label(app="db").obj(),
            {"n3": [web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj()]},
            None,
            Code.SKIP,
            [],
            id="existing anti-affinity is for its own namespace only",
        ),
        pytest.param(
            make_pod("p").pod_affinity(ZONE, {"app": "web"}).obj(),
            {"n2": [web().obj()]},
            None,
            Code.SUCCESS,
            [OK, OK, AFF, AFF],
            id="affinity on zone: zone a passes, zone b and unzoned fail unresolvable",
        ),
        pytest.param(
            make_pod("p").pod_affinity(ZONE, {"app": "web"}).obj(),
            {"n2": [web("w", "elsewhere").obj()]},
            None,
            Code.SUCCESS,
            [AFF, AFF, AFF, AFF],
            id="affinity: matching pod in another namespace does not count",
        ),
        pytest.param(
            make_pod("p").label(app="web").pod_affinity(ZONE, {"app": "web"}).obj(),
            {},
            None,
            Code.SUCCESS,
            [OK, OK, OK, AFF],
            id="first pod of a group matches its own term: passes where the key exists",
        ),
        pytest.param(
            make_pod("p").label(app="db").pod_affinity(ZONE, {"app": "web"}).obj(),
            {},
            None,
            Code.SUCCESS,
            [AFF, AFF, AFF, AFF],
            id="no matching pod and not matching its own term: fails everywhere",
        ),
        pytest.param(
            make_pod("p").label(app="web").pod_affinity(ZONE, {"app": "web"}).pod_affinity(HOST, {"app": "web"}).obj(),
            {"n1": [web().obj()]},
            None,
            Code.SUCCESS,
            [OK, AFF, AFF, AFF],
            id="two affinity terms: both pairs must hold pods",
        ),
        pytest.param(
            make_pod("p")
            .label(app="web")
            .pod_affinity(ZONE, {"app": "web"})
            .pod_affinity(ZONE, {"app": "web"}, anti=True)
            .obj(),
            {"n3": [web().obj()]},
            None,
            Code.SUCCESS,
            [AFF, AFF, ANTI, AFF],
            id="affinity is checked before anti-affinity",
        ),
        pytest.param(
            parse_pod(
                term_ns_selector(
                    make_pod("p").pod_affinity(HOST, {"app": "web"}, anti=True).raw(), "podAntiAffinity", {"team": "a"}
                )
            ),
            {"n1": [web("w1", "team-a").obj()], "n2": [web("w2", "team-b").obj()]},
            {"team-a": {"team": "a"}, "team-b": {"team": "b"}},
            Code.SUCCESS,
            [ANTI, OK, OK, OK],
            id="namespaceSelector picks the namespaces by their labels",
        ),
        pytest.param(
            make_pod("p").pod_affinity(HOST, {"app": "web"}, anti=True, namespaces=["x"]).obj(),
            {"n1": [web("w1", "x").obj()], "n2": [web("w2").obj()]},
            None,
            Code.SUCCESS,
            [ANTI, OK, OK, OK],
            id="listed namespaces replace the pod's own",
        ),
    ],
)
def test_filter(pod: Pod, placement: dict[str, list[Pod]], ns_labels: Any, want_pre: Code, want: list[Any]) -> None:
    snap = snapshot_of(placement, ns_labels)
    pre, statuses = run_filter(pod, snap)
    assert pre is want_pre
    assert statuses == want
    for info, (code, _reasons) in zip(snap.node_infos, want):
        assert fits(pod, info, snap).code is code


def test_existing_anti_affinity_namespace_selector_reads_incoming_namespace_labels() -> None:
    body = term_ns_selector(web().pod_affinity(HOST, {"app": "db"}, anti=True).raw(), "podAntiAffinity", {"team": "a"})
    existing = parse_pod(body)
    snap = snapshot_of({"n1": [existing]}, {"team-a": {"team": "a"}})
    assert run_filter(make_pod("p", "team-a").label(app="db").obj(), snap)[1] == [EXISTING, OK, OK, OK]
    assert run_filter(make_pod("p", "team-b").label(app="db").obj(), snap)[0] is Code.SKIP


# ----------------------------------------------------------------------------- score


def run_score(pod: Pod, snap: Snapshot, plugin: InterPodAffinity | None = None) -> tuple[Code, list[int], list[int]]:
    plugin = plugin or InterPodAffinity()
    state = CycleState()
    pre = plugin.pre_score(state, pod, list(snap.node_infos), snap)
    if pre.is_skip:
        return pre.code, [], []
    raw = [plugin.score(state, pod, i) for i in snap.node_infos]
    vec = plugin.score_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert vec.tolist() == raw
    norm = plugin.normalize_scores(state, pod, np.array(raw, dtype=np.int64)).tolist()
    return pre.code, raw, norm


def preferred(pod: Any, kind: str, weight: int, key: str, labels: dict[str, str]) -> Any:
    return pod.pod_affinity(key, labels, anti=(kind == "anti"), weight=weight)


@pytest.mark.parametrize(
    "plugin_args, pod, placement, want_raw, want",
    [
        pytest.param({}, make_pod("p").obj(), {"n1": [web().obj()]}, None, None, id="no affinity anywhere: skip"),
        pytest.param(
            {},
            preferred(make_pod("p"), "aff", 5, ZONE, {"app": "web"}).obj(),
            {"n1": [web().obj()]},
            # zone a holds one match: n1, n2 = 5; n3, n4 = 0 -> 100 * (s - 0) / 5
            [5, 5, 0, 0],
            [100, 100, 0, 0],
            id="preferred affinity on zone",
        ),
        pytest.param(
            {},
            preferred(make_pod("p"), "anti", 4, HOST, {"app": "web"}).obj(),
            {"n1": [web().obj(), web("w2").obj()]},
            # n1 holds two matches: -8; others 0 -> min -8, max 0: n1 0, others 100 * 8 / 8
            [-8, 0, 0, 0],
            [0, 100, 100, 100],
            id="preferred anti-affinity on hostname, min below zero",
        ),
        pytest.param(
            {},
            preferred(preferred(make_pod("p"), "aff", 10, ZONE, {"app": "web"}), "anti", 5, HOST, {"app": "web"}).obj(),
            {"n1": [web().obj()], "n3": [web().obj(), web().obj()]},
            # n1: +10 (zone a) -5 (host) = 5; n2: +10; n3: +20 -10 = 10; n4: 0 -> min 0, max 10
            [5, 10, 10, 0],
            [50, 100, 100, 0],
            id="affinity and anti-affinity combine",
        ),
        pytest.param(
            {},
            make_pod("p").label(app="db").obj(),
            {"n3": [web().pod_affinity(ZONE, {"app": "db"}).obj()]},
            # existing pod's required affinity selects the pod: hardPodAffinityWeight 1 on zone b
            [0, 0, 1, 0],
            [0, 0, 100, 0],
            id="existing required affinity with the default hard weight",
        ),
        pytest.param(
            {"hardPodAffinityWeight": 0},
            make_pod("p").label(app="db").obj(),
            {"n3": [web().pod_affinity(ZONE, {"app": "db"}).obj()]},
            None,
            None,
            id="hard weight 0 ignores existing required affinity: skip",
        ),
        pytest.param(
            {},
            make_pod("p").label(app="db").obj(),
            {
                "n3": [web().pod_affinity(ZONE, {"app": "db"}, weight=7).obj()],
                "n1": [web().pod_affinity(HOST, {"app": "db"}, anti=True, weight=3).obj()],
            },
            # n3 zone b +7; n1 host -3 -> min -3, max 7: n1 0, n2 100*3/10=30, n3 100, n4 30
            [-3, 0, 7, 0],
            [0, 30, 100, 30],
            id="existing pods' preferred terms",
        ),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": True},
            make_pod("p").label(app="db").obj(),
            {"n3": [web().pod_affinity(ZONE, {"app": "db"}, weight=7).obj()]},
            None,
            None,
            id="ignorePreferredTermsOfExistingPods with no own terms: skip",
        ),
        pytest.param(
            {},
            preferred(make_pod("p"), "aff", 5, ZONE, {"app": "nothing"}).obj(),
            {"n1": [web().obj()]},
            None,
            None,
            id="preferred term matching nothing: skip (no pair scored)",
        ),
    ],
)
def test_score(
    plugin_args: dict[str, Any], pod: Pod, placement: dict[str, list[Pod]], want_raw: Any, want: Any
) -> None:
    code, raw, norm = run_score(pod, snapshot_of(placement), InterPodAffinity.new(plugin_args))
    if want is None:
        assert code is Code.SKIP
    else:
        assert code is Code.SUCCESS
        assert raw == want_raw
        assert norm == want


@pytest.mark.parametrize(
    "args, field",
    [
        pytest.param({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight", id="below range"),
        pytest.param({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight", id="above range"),
        pytest.param({"hardPodAffinityWeight": "1"}, "hardPodAffinityWeight", id="not an integer"),
        pytest.param(
            {"ignorePreferredTermsOfExistingPods": 1}, "ignorePreferredTermsOfExistingPods", id="not a boolean"
        ),
        pytest.param({"bogus": 1}, "bogus", id="unknown field"),
    ],
)
def test_args_errors(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        InterPodAffinity.new(args)
    assert exc.value.field == field


@pytest.mark.parametrize("weight", [-1, 101], ids=["below range", "above range"])
def test_typed_args_check_the_range(weight: int) -> None:
    with pytest.raises(PluginArgsError) as exc:
        InterPodAffinityArgs(hard_pod_affinity_weight=weight)
    assert (exc.value.field, exc.value.message) == ("hardPodAffinityWeight", "not in valid range [0-100]")


def test_names() -> None:
    assert InterPodAffinity().name == InterPodAffinity.NAME == "InterPodAffinity"
    assert InterPodAffinity(name="MatchInterPodAffinity").name == "MatchInterPodAffinity"
    assert InterPodAffinity.new({"hardPodAffinityWeight": 100}).args.hard_pod_affinity_weight == 100
    assert InterPodAffinity().args == InterPodAffinityArgs(
        hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=False
    )
    assert InterPodAffinity.new(
        {"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}
    ).args == InterPodAffinityArgs(0, True)


# ----------------------------------------------------------------------------- PreFilter extensions


def verdicts(
    plugin: InterPodAffinity, state: CycleState, pod: Pod, snap: Snapshot
) -> list[tuple[Code, tuple[str, ...]]]:
    """Filter on every node of ``snap`` with ``state``; filter_nodes must agree."""
    statuses = [plugin.filter(state, pod, i) for i in snap.node_infos]
    mask = plugin.filter_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert mask.tolist() == [st.is_success for st in statuses]
    return [(st.code, st.reasons) for st in statuses]


def fresh_verdicts(pod: Pod, snap: Snapshot) -> list[tuple[Code, tuple[str, ...]]]:
    """The verdicts a new cycle gives on ``snap`` (every node passes when PreFilter skips)."""
    pre, statuses = run_filter(pod, snap)
    return [OK] * len(snap) if pre is Code.SKIP else statuses


@pytest.mark.parametrize(
    "pod, others, blocker, node, with_blocker",
    [
        pytest.param(
            make_pod("p").label(app="db").obj(),
            {},
            web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj(),
            "n3",
            [OK, OK, EXISTING, OK],
            id="an existing pod's anti-affinity, the only one: PreFilter would skip without it",
        ),
        pytest.param(
            make_pod("p").label(app="db").obj(),
            {"n1": [web("w2").pod_affinity(HOST, {"app": "db"}, anti=True).obj()]},
            web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj(),
            "n3",
            [EXISTING, OK, EXISTING, OK],
            id="an existing pod's anti-affinity beside another's",
        ),
        pytest.param(
            make_pod("p").pod_affinity(ZONE, {"app": "web"}, anti=True).obj(),
            {"n3": [make_pod("d").label(app="db").obj()]},
            web().obj(),
            "n1",
            [ANTI, ANTI, OK, OK],
            id="the only pod the incoming pod's anti-affinity matches",
        ),
        pytest.param(
            make_pod("p")
            .pod_affinity(ZONE, {"app": "web"}, anti=True)
            .pod_affinity(HOST, {"app": "web"}, anti=True)
            .obj(),
            {"n2": [web("w2").obj()]},
            web().obj(),
            "n3",
            [ANTI, ANTI, ANTI, OK],
            id="two anti-affinity terms, a second matching pod elsewhere",
        ),
        pytest.param(
            make_pod("p").label(app="web").pod_affinity(ZONE, {"app": "web"}).obj(),
            {},
            web().obj(),
            "n3",
            # without it the pod is the first of its group again: passes wherever the key exists
            [AFF, AFF, OK, AFF],
            id="the only pod the affinity matches, pod matching its own terms",
        ),
        pytest.param(
            make_pod("p").label(app="db").pod_affinity(ZONE, {"app": "web"}).obj(),
            {},
            web().obj(),
            "n1",
            # without it no node passes: the pod does not match its own terms
            [OK, OK, AFF, AFF],
            id="the only pod the affinity matches, pod not matching its own terms",
        ),
        pytest.param(
            make_pod("p").label(app="web").pod_affinity(ZONE, {"app": "web"}).pod_affinity(HOST, {"app": "web"}).obj(),
            {"n3": [web("w2").obj()]},
            web().obj(),
            "n1",
            [OK, AFF, OK, AFF],
            id="two affinity terms, another match in another zone",
        ),
        pytest.param(
            make_pod("p", "other").label(app="db").obj(),
            {"n1": [web("w1", "other").pod_affinity(HOST, {"app": "db"}, anti=True).obj()]},
            web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj(),
            "n3",
            [EXISTING, OK, OK, OK],
            id="an anti-affinity term for another namespace moves nothing",
        ),
        pytest.param(
            make_pod("p", "team-a").label(app="db").obj(),
            {},
            parse_pod(
                term_ns_selector(
                    web("w", "team-b").pod_affinity(ZONE, {"app": "db"}, anti=True).raw(),
                    "podAntiAffinity",
                    {"team": "a"},
                )
            ),
            "n1",
            [EXISTING, EXISTING, OK, OK],
            id="an existing pod's namespaceSelector reads the incoming pod's namespace labels",
        ),
        pytest.param(
            parse_pod(
                term_ns_selector(
                    make_pod("p", "team-a").pod_affinity(HOST, {"app": "web"}, anti=True).raw(),
                    "podAntiAffinity",
                    {"team": "b"},
                )
            ),
            {"n2": [web("w2", "team-a").obj()]},
            web("w", "team-b").obj(),
            "n3",
            [OK, OK, ANTI, OK],
            id="the incoming pod's namespaceSelector reads the other pod's namespace labels",
        ),
    ],
)
def test_remove_and_add_pod_match_a_snapshot_without_and_with_it(
    pod: Pod, others: dict[str, list[Pod]], blocker: Pod, node: str, with_blocker: list[Any]
) -> None:
    placed = blocker.with_node(node)
    teams = {"team-a": {"team": "a"}, "team-b": {"team": "b"}}
    with_it = snapshot_of({**others, node: [*others.get(node, []), placed]}, teams)
    without = snapshot_of(others, teams)
    plugin = InterPodAffinity()
    assert fresh_verdicts(pod, with_it) == with_blocker

    state = CycleState()
    plugin.pre_filter(state, pod, with_it)
    removed = state.clone()
    assert plugin.remove_pod(removed, pod, placed, with_it.get(node)).is_success  # type: ignore[arg-type]
    assert verdicts(plugin, removed, pod, without) == fresh_verdicts(pod, without)
    assert verdicts(plugin, state, pod, with_it) == with_blocker  # the original cycle's entry is untouched

    state = CycleState()
    plugin.pre_filter(state, pod, without)  # writes its state even when it skips
    added = state.clone()
    assert plugin.add_pod(added, pod, placed, without.get(node)).is_success  # type: ignore[arg-type]
    assert verdicts(plugin, added, pod, with_it) == with_blocker
    assert verdicts(plugin, state, pod, without) == fresh_verdicts(pod, without)


def test_add_pod_on_a_node_without_the_topology_key_moves_nothing() -> None:
    pod = make_pod("p").label(app="db").obj()
    snap = snapshot_of({"n1": [web("w2").pod_affinity(HOST, {"app": "db"}, anti=True).obj()]})
    plugin = InterPodAffinity()
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    before = verdicts(plugin, state, pod, snap)
    # n4 has no zone label: a zone-scoped anti-affinity term there selects no topology pair
    assert plugin.add_pod(
        state, pod, web().pod_affinity(ZONE, {"app": "db"}, anti=True).obj().with_node("n4"), snap.get("n4")
    ).is_success  # type: ignore[arg-type]
    assert verdicts(plugin, state, pod, snap) == before == [EXISTING, OK, OK, OK]


def test_extensions_without_pre_filter_state_are_errors() -> None:
    plugin = InterPodAffinity()
    info = node_info(nodes3()[0])
    assert plugin.add_pod(CycleState(), make_pod("p").obj(), web().obj(), info).code is Code.ERROR
    assert plugin.remove_pod(CycleState(), make_pod("p").obj(), web().obj(), info).code is Code.ERROR
    with pytest.raises(LookupError):
        plugin.filter_nodes(CycleState(), make_pod("p").obj(), snapshot_of({}).table, np.arange(4, dtype=np.intp))


# ----------------------------------------------------------------------------- randomised agreement


def random_pod(rng: random.Random, i: int) -> Pod:
    b = make_pod(f"p{i}", rng.choice(["default", "other"])).label(app=rng.choice(["a", "b", "c"]))
    for _ in range(rng.randrange(3)):
        key = rng.choice([HOST, ZONE, "rack"])
        labels = {"app": rng.choice(["a", "b", "c"])}
        kind = rng.randrange(4)
        if kind < 2:
            b.pod_affinity(key, labels, anti=bool(kind))
        else:
            b.pod_affinity(key, labels, anti=kind == 3, weight=rng.randint(1, 100))
    return b.obj()


def reference_filter(pod: Pod, snap: Snapshot, info: Any) -> Code:
    """Upstream semantics transcribed naively: every pod of the cluster, every term, every time."""
    nsl = snap.objects.namespace_labels
    labels = info.node.labels
    a = pod.affinity
    req_aff = a.pod_affinity.required if a and a.pod_affinity else ()
    req_anti = a.pod_anti_affinity.required if a and a.pod_anti_affinity else ()
    placed = [(p, i.node.labels) for i in snap.node_infos for p in i.pods.values()]
    aff_pairs = {
        (t.topology_key, nl[t.topology_key])
        for p, nl in placed
        if req_aff and all(u.selects(p, pod.namespace, nsl.get(p.namespace)) for u in req_aff)
        for t in req_aff
        if t.topology_key in nl
    }
    anti_pairs = {
        (t.topology_key, nl[t.topology_key])
        for p, nl in placed
        for t in req_anti
        if t.topology_key in nl and t.selects(p, pod.namespace, nsl.get(p.namespace))
    }
    existing = {
        (t.topology_key, nl[t.topology_key])
        for p, nl in placed
        if p.affinity and p.affinity.pod_anti_affinity
        for t in p.affinity.pod_anti_affinity.required
        if t.topology_key in nl and t.selects(pod, p.namespace, nsl.get(pod.namespace))
    }
    if req_aff:
        if any(t.topology_key not in labels for t in req_aff):
            return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if not all((t.topology_key, labels[t.topology_key]) in aff_pairs for t in req_aff):
            first = not aff_pairs and all(t.selects(pod, pod.namespace, nsl.get(pod.namespace)) for t in req_aff)
            if not first:
                return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    if any(t.topology_key in labels and (t.topology_key, labels[t.topology_key]) in anti_pairs for t in req_anti):
        return Code.UNSCHEDULABLE
    if any((k, v) in existing for k, v in labels.items()):
        return Code.UNSCHEDULABLE
    return Code.SUCCESS


def reference_score(pod: Pod, snap: Snapshot, info: Any, hard: int = 1) -> int:
    nsl = snap.objects.namespace_labels
    a = pod.affinity
    pref_aff = a.pod_affinity.preferred if a and a.pod_affinity else ()
    pref_anti = a.pod_anti_affinity.preferred if a and a.pod_anti_affinity else ()
    labels = info.node.labels
    total = 0
    for other in snap.node_infos:
        nl = other.node.labels
        for p in other.pods.values():
            terms = [(w.term, w.weight, p, pod.namespace) for w in pref_aff] + [
                (w.term, -w.weight, p, pod.namespace) for w in pref_anti
            ]
            pa = p.affinity
            if pa and pa.pod_affinity:
                terms += [(t, hard, pod, p.namespace) for t in pa.pod_affinity.required]
                terms += [(w.term, w.weight, pod, p.namespace) for w in pa.pod_affinity.preferred]
            if pa and pa.pod_anti_affinity:
                terms += [(w.term, -w.weight, pod, p.namespace) for w in pa.pod_anti_affinity.preferred]
            for term, weight, target, owner in terms:
                k = term.topology_key
                if (
                    k in nl
                    and k in labels
                    and nl[k] == labels[k]
                    and term.selects(target, owner, nsl.get(target.namespace))
                ):
                    total += weight
    return total


@pytest.mark.parametrize("seed", range(12))
def test_vector_matches_per_node_and_index_matches_fresh(seed: int) -> None:
    """Incremental index vs a fresh plugin vs a naive reference; filter_nodes vs filter; score_nodes vs score."""
    rng = random.Random(seed)
    cache = SchedulerCache()
    node_bodies = []
    for k in range(8):
        b = make_node(f"n{k}")
        if rng.random() < 0.8:
            b.zone(rng.choice(["z1", "z2"]))
        if rng.random() < 0.5:
            b.label(rack=rng.choice(["r1", "r2", "r3"]))
        node_bodies.append(b)
        cache.add_node(b.obj())
    snap = Snapshot()
    kept = InterPodAffinity()
    placed: list[Pod] = []
    for i in range(30):
        cache.update_snapshot(snap)
        pod = random_pod(rng, i)
        index = np.arange(len(snap), dtype=np.intp)
        results = []
        for plugin in (kept, InterPodAffinity()):
            state = CycleState()
            pre = plugin.pre_filter(state, pod, snap)
            if pre.is_skip:
                mask = [True] * len(snap)
                codes: list[Any] = []
            else:
                codes = [(s.code, s.reasons) for s in (plugin.filter(state, pod, n) for n in snap.node_infos)]
                mask = plugin.filter_nodes(state, pod, snap.table, index).tolist()
                assert mask == [c == Code.SUCCESS for c, _ in codes]
            ps = plugin.pre_score(state, pod, list(snap.node_infos), snap)
            scores = [0] * len(snap)
            if not ps.is_skip:
                scores = [plugin.score(state, pod, n) for n in snap.node_infos]
                assert plugin.score_nodes(state, pod, snap.table, index).tolist() == scores
            results.append((pre.code, codes, mask, scores))
        assert results[0] == results[1]
        assert [reference_filter(pod, snap, n) for n in snap.node_infos] == [
            Code.SUCCESS if ok else c
            for ok, (c, _) in zip(results[0][2], results[0][1] or [(Code.SUCCESS, ())] * len(snap))
        ]
        ref_scores = [reference_score(pod, snap, n) for n in snap.node_infos]
        if len(set(ref_scores)) > 1:  # a constant score may be skipped
            assert results[0][3] == ref_scores
        feasible = [k for k, ok in enumerate(results[0][2]) if ok]
        target = snap.node_infos[rng.choice(feasible)].name if feasible else snap.node_infos[0].name
        placed.append(cache.assume(pod, target))
        if placed and rng.random() < 0.2:
            cache.forget(placed.pop(rng.randrange(len(placed))))
        if rng.random() < 0.1:
            k = rng.randrange(len(node_bodies))
            cache.update_node(node_bodies[k].label(rack=rng.choice(["r1", "r2", "r4"])).obj())


@pytest.mark.parametrize("seed", range(10))
def test_extensions_equal_a_fresh_pre_filter(seed: int) -> None:
    """Random clusters: removing (adding) a placed pod gives the state, and the verdicts, of a fresh PreFilter
    without (with) it."""
    rng = random.Random(1000 + seed)
    nodes = []
    for k in range(6):
        b = make_node(f"n{k}")
        if rng.random() < 0.8:
            b.zone(rng.choice(["z1", "z2"]))
        if rng.random() < 0.5:
            b.label(rack=rng.choice(["r1", "r2"]))
        nodes.append(b.obj())
    placement: dict[str, list[Pod]] = {n.name: [] for n in nodes}
    for i in range(12):
        n = rng.choice(nodes).name
        placement[n].append(random_pod(rng, 100 + i).with_node(n))
    nsl = {"default": {"team": "a"}, "other": {"team": "b"}}

    def snap_of(pl: dict[str, list[Pod]]) -> Snapshot:
        return Snapshot.of([node_info(n, *pl[n.name]) for n in nodes], ClusterObjects(namespace_labels=dict(nsl)))

    def counts(plugin: InterPodAffinity, state: CycleState) -> tuple[Any, ...]:
        s = state.read(plugin._filter_key)
        assert s is not None
        return (dict(s.affinity), dict(s.anti_affinity), dict(s.existing_anti_affinity), s.first_of_group)

    full = snap_of(placement)
    plugin = InterPodAffinity()
    for t in range(8):
        pod = random_pod(rng, t)
        node = rng.choice([n for n in nodes if placement[n.name]]).name
        victim = rng.choice(placement[node])
        less = snap_of({**placement, node: [p for p in placement[node] if p is not victim]})

        state, fresh = CycleState(), CycleState()
        plugin.pre_filter(state, pod, full)
        plugin.pre_filter(fresh, pod, less)
        removed = state.clone()
        assert plugin.remove_pod(removed, pod, victim, full.get(node)).is_success  # type: ignore[arg-type]
        assert counts(plugin, removed) == counts(plugin, fresh)
        assert verdicts(plugin, removed, pod, less) == verdicts(plugin, fresh, pod, less)

        added = fresh.clone()
        assert plugin.add_pod(added, pod, victim, less.get(node)).is_success  # type: ignore[arg-type]
        assert counts(plugin, added) == counts(plugin, state)
        assert verdicts(plugin, added, pod, full) == verdicts(plugin, state, pod, full)
