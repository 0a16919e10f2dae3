"""The generic algorithm with fake plugins: filtering order, diagnosis text, scoring, tie-break, errors."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import SKIP, SUCCESS, Code, Status, unresolvable, unschedulable
from kopf_scheduler.core.framework.diagnosis import Diagnosis, truncate_message
from kopf_scheduler.core.framework.interface import FilterPlugin, PreFilterPlugin, ScorePlugin, VectorFilter
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, num_feasible_nodes_to_find, select_host


@dataclass(eq=False)
class RejectNodes(FilterPlugin):
    """Rejects the named nodes with ``reason``; counts calls."""

    NAME = "RejectNodes"

    reject: set[str]
    reason: str = "fake rejection"
    name: str = "RejectNodes"
    calls: list[str] = field(default_factory=list)

    def filter(self, state: Any, pod: Any, node: Any) -> Status:
        self.calls.append(node.name)
        return unschedulable(self.reason) if node.name in self.reject else SUCCESS


@dataclass(eq=False)
class VectorRejectNodes(RejectNodes, VectorFilter):
    name: str = "VectorRejectNodes"

    def filter_nodes(self, state: Any, pod: Any, table: Any, index: np.ndarray) -> np.ndarray:
        return np.array([table.names[k] not in self.reject for k in index.tolist()], dtype=bool)


@dataclass(eq=False)
class ScoreByName(ScorePlugin):
    NAME = "ScoreByName"
    scores: dict[str, int]
    name: str = "ScoreByName"

    def score(self, state: Any, pod: Any, node: Any) -> int:
        return self.scores.get(node.name, 0)


class Raises(FilterPlugin):
    NAME = "Raises"

    def filter(self, state: Any, pod: Any, node: Any) -> Status:
        raise KeyError("boom")


class PreFilterRejects(PreFilterPlugin, FilterPlugin):
    NAME = "PreFilterRejects"

    def pre_filter(self, state: Any, pod: Any, snapshot: Any) -> Status:
        return unresolvable("pod has unbound immediate PersistentVolumeClaims")

    def filter(self, state: Any, pod: Any, node: Any) -> Status:  # pragma: no cover - never reached
        raise AssertionError


class PreFilterSkips(RejectNodes, PreFilterPlugin):
    def pre_filter(self, state: Any, pod: Any, snapshot: Any) -> Status:
        return SKIP


@dataclass(eq=False)
class PreFilterAdmits(RejectNodes, PreFilterPlugin):
    """A pre-filter that admits only ``admit`` (upstream PreFilterResult.NodeNames)."""

    admit: frozenset[str] = frozenset()

    def pre_filter(self, state: Any, pod: Any, snapshot: Any) -> Status:
        state.admit_only(self.name, self.admit)
        return SUCCESS


@dataclass(eq=False)
class PreFilterSays(PreFilterPlugin, FilterPlugin):
    """A pre-filter returning ``status`` (its filter passes every node)."""

    status: Status
    name: str = "PreFilterSays"
    NAME = "PreFilterSays"

    def pre_filter(self, state: Any, pod: Any, snapshot: Any) -> Status:
        return self.status

    def filter(self, state: Any, pod: Any, node: Any) -> Status:
        return SUCCESS


def snapshot_of(n: int) -> Snapshot:
    return Snapshot.of(node_info(make_node(f"n{i}").obj()) for i in range(n))


def run(profile: Profile, snap: Snapshot, seed: int = 0, **kw: Any):  # type: ignore[no-untyped-def]
    return GenericScheduler(profile).schedule(make_pod("p").obj(), snap, rng=random.Random(seed), **kw)


@pytest.mark.parametrize(
    "nodes, pct, want",
    [
        pytest.param(10, 0, 10, id="below 100 nodes: all"),
        pytest.param(100, 0, 100, id="100 nodes: 50% floored at 100"),
        pytest.param(500, 0, 230, id="500 nodes: 46%"),
        pytest.param(5000, 0, 500, id="5000 nodes: 10%"),
        pytest.param(6000, 0, 300, id="6000 nodes: floor 5%"),
        pytest.param(1000, 30, 300, id="explicit 30%"),
        pytest.param(1000, 5, 100, id="explicit 5% floored at 100"),
        pytest.param(1000, 100, 1000, id="explicit 100%"),
    ],
)
def test_num_feasible_nodes_to_find(nodes: int, pct: int, want: int) -> None:
    assert num_feasible_nodes_to_find(nodes, pct) == want


@pytest.mark.parametrize("plugin_cls", [RejectNodes, VectorRejectNodes], ids=["scalar", "vector"])
def test_fit_error_histogram_is_sorted_as_strings(plugin_cls: type) -> None:
    a = plugin_cls(reject={f"n{i}" for i in range(10)}, reason="x reason", name="A")
    b = plugin_cls(reject={"n10", "n11"}, reason="y reason", name="B")
    result = run(Profile("s", filters=(a, b)), snapshot_of(12))
    assert result.unschedulable
    # "10 x reason" sorts before "2 y reason" as strings.
    assert result.message == "0/12 nodes are available: 10 x reason, 2 y reason."
    assert result.diagnosis.unschedulable_plugins == {"A", "B"}


def test_first_failing_filter_decides_unless_check_all() -> None:
    a = RejectNodes(reject={"n0"}, reason="first", name="A")
    b = RejectNodes(reject={"n0"}, reason="second", name="B")
    assert run(Profile("s", filters=(a, b)), snapshot_of(1)).message == "0/1 nodes are available: 1 first."
    result = run(Profile("s", filters=(a, b), always_check_all_predicates=True), snapshot_of(1))
    assert result.message == "0/1 nodes are available: 1 first, 1 second."


def test_single_feasible_node_is_chosen_without_scoring() -> None:
    scorer = ScoreByName({})
    scorer.score = lambda *a: (_ for _ in ()).throw(AssertionError("scored"))  # type: ignore[method-assign]
    f = RejectNodes(reject={"n0", "n2"})
    result = run(Profile("s", filters=(f,), scorers=((scorer, 1),)), snapshot_of(3))
    assert result.node == "n1" and result.feasible_nodes == 1


def test_highest_weighted_score_wins() -> None:
    s1 = ScoreByName({"n0": 10, "n1": 50, "n2": 40}, name="S1")
    s2 = ScoreByName({"n0": 100, "n1": 0, "n2": 20}, name="S2")
    # totals: n0 = 10*1 + 100*1 = 110; n1 = 50 + 0 = 50; n2 = 40 + 20 = 60
    assert run(Profile("s", scorers=((s1, 1), (s2, 1))), snapshot_of(3)).node == "n0"
    # with weight 5 on S1: n0 = 50 + 100 = 150; n1 = 250; n2 = 200 + 20 = 220
    assert run(Profile("s", scorers=((s1, 5), (s2, 1))), snapshot_of(3)).node == "n1"


def test_ties_are_broken_at_random_but_reproducibly() -> None:
    scorer = ScoreByName({})  # all nodes score 0
    profile = Profile("s", scorers=((scorer, 1),))
    picks = {run(profile, snapshot_of(4), seed=s).node for s in range(40)}
    assert picks == {"n0", "n1", "n2", "n3"}
    assert run(profile, snapshot_of(4), seed=7).node == run(profile, snapshot_of(4), seed=7).node


def test_select_host_uniform_over_ties() -> None:
    rng = random.Random(1)
    counts = [0, 0, 0]
    for _ in range(3000):
        counts[select_host(np.array([5, 9, 9, 9, 1])[1:4], rng)] += 1
    assert all(900 < c < 1100 for c in counts)


def test_plugin_exception_becomes_error_not_crash() -> None:
    result = run(Profile("s", filters=(Raises(),)), snapshot_of(2))
    assert result.node is None and result.error is not None
    assert "Raises" in result.error and "KeyError" in result.error


def test_pre_filter_rejection_applies_to_all_nodes() -> None:
    result = run(Profile("s", filters=(PreFilterRejects(),)), snapshot_of(3))
    assert result.message == "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_pre_filter_skip_disables_the_filter() -> None:
    f = PreFilterSkips(reject={"n0", "n1"})
    result = run(Profile("s", filters=(f,)), snapshot_of(2))
    assert result.node is not None and f.calls == []


def test_no_nodes() -> None:
    assert run(Profile("s"), Snapshot()).message == "no nodes available to schedule pods"


def test_search_stops_at_enough_feasible_nodes_and_rotates_start() -> None:
    f = RejectNodes(reject=set())
    sched = GenericScheduler(
        Profile("s", filters=(f,), scorers=((ScoreByName({}), 1),), percentage_of_nodes_to_score=10)
    )
    snap = snapshot_of(1000)
    sched.schedule(make_pod("a").obj(), snap, rng=random.Random(0))
    assert len(f.calls) == 100 and f.calls[0] == "n0"
    assert sched.next_start_node_index == 100
    f.calls.clear()
    sched.schedule(make_pod("b").obj(), snap, rng=random.Random(0))
    assert f.calls[0] == "n100"


def test_vector_search_matches_scalar_search() -> None:
    reject = {f"n{i}" for i in range(0, 1000, 3)}
    scalar, vector = RejectNodes(reject), VectorRejectNodes(reject)
    snap = snapshot_of(1000)
    s1 = GenericScheduler(Profile("s", filters=(scalar,), scorers=((ScoreByName({}), 1),)))
    s2 = GenericScheduler(Profile("s", filters=(vector,), scorers=((ScoreByName({}), 1),)))
    for i in range(5):
        r1 = s1.schedule(make_pod(f"p{i}").obj(), snap, rng=random.Random(i), explain=True)
        r2 = s2.schedule(make_pod(f"p{i}").obj(), snap, rng=random.Random(i), explain=True)
        assert (r1.node, r1.evaluated_nodes, r1.feasible_nodes) == (r2.node, r2.evaluated_nodes, r2.feasible_nodes)
        assert r1.diagnosis.node_to_status.keys() == r2.diagnosis.node_to_status.keys()
        assert s1.next_start_node_index == s2.next_start_node_index


def test_the_vector_search_asks_why_nodes_failed_only_when_nothing_fits_or_to_explain() -> None:
    # 1000 nodes, every third rejected: a node is found; without explain the per-node form is not
    # called for the rejected ones (a Python call each), only the rejecting plugin is remembered
    vector = VectorRejectNodes({f"n{i}" for i in range(0, 1000, 3)})
    found = GenericScheduler(Profile("s", filters=(vector,), scorers=((ScoreByName({}), 1),))).schedule(
        make_pod("p").obj(), snapshot_of(1000), rng=random.Random(0)
    )
    assert found.node is not None and found.diagnosis.node_to_status == {} and vector.calls == []
    assert found.diagnosis.unschedulable_plugins == {vector.name}
    everything = VectorRejectNodes({f"n{i}" for i in range(10)})  # nothing fits: every node's reason is needed
    unfit = GenericScheduler(Profile("s", filters=(everything,))).schedule(
        make_pod("p").obj(), snapshot_of(10), rng=random.Random(0)
    )
    assert unfit.node is None and len(unfit.diagnosis.node_to_status) == 10


def test_nominated_node_is_tried_first() -> None:
    f = RejectNodes(reject=set())
    snap = snapshot_of(5)
    pod = make_pod("p").obj()

    pod = dataclasses.replace(pod, nominated_node_name="n3")
    result = GenericScheduler(Profile("s", filters=(f,), scorers=((ScoreByName({"n0": 100}), 1),))).schedule(
        pod, snap, rng=random.Random(0)
    )
    assert result.node == "n3" and f.calls == ["n3"]


@pytest.mark.parametrize("plugin_cls", [RejectNodes, VectorRejectNodes], ids=["scalar", "vector"])
def test_an_exhaustive_scheduler_visits_every_node_and_scores_every_feasible_one(plugin_cls: type) -> None:
    # 300 nodes, every third rejected: upstream would stop at 150 feasible nodes (50% of 300) with a
    # scorer, at the first one without, and try the nominated node alone
    f = plugin_cls(reject={f"n{i}" for i in range(0, 300, 3)})
    pod = dataclasses.replace(make_pod("p").obj(), nominated_node_name="n1")
    scored = GenericScheduler(Profile("s", filters=(f,), scorers=((ScoreByName({"n2": 7}), 1),)), exhaustive=True)
    result = scored.schedule(pod, snapshot_of(300), rng=random.Random(0))
    assert (result.node, result.evaluated_nodes, result.feasible_nodes) == ("n2", 300, 200)
    assert len(result.scores) == 200 and len(result.diagnosis.node_to_status) == 100
    assert result.diagnosis.status_of("n3") == Status(Code.UNSCHEDULABLE, ("fake rejection",), f.name)
    alone = GenericScheduler(Profile("s", filters=(f,)), exhaustive=True)
    result = alone.schedule(pod, snapshot_of(300), rng=random.Random(0))
    assert (result.evaluated_nodes, result.feasible_nodes, len(result.diagnosis.node_to_status)) == (300, 200, 100)
    one = GenericScheduler(Profile("s", filters=(f,), scorers=((ScoreByName({"n1": 5}), 1),)), exhaustive=True)
    result = one.schedule(make_pod("q").obj(), snapshot_of(2), rng=random.Random(0))
    assert result.node == "n1" and [(s.node, s.total) for s in result.scores] == [("n1", 5)]  # scored, not just bound


def test_explain_lists_every_scored_node() -> None:
    s = ScoreByName({"n0": 3, "n1": 7})
    result = run(Profile("s", scorers=((s, 2),)), snapshot_of(2), explain=True)
    assert {(x.node, x.total) for x in result.scores} == {("n0", 6), ("n1", 14)}


def test_truncate_message() -> None:
    assert truncate_message("abc", 10) == "abc"
    cut = truncate_message("x" * 2000)
    assert len(cut.encode()) == 1024 and cut.endswith(" ...")


def test_diagnosis_without_failures() -> None:
    assert Diagnosis(num_all_nodes=0).message() == "0/0 nodes are available:"
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE > Code.UNSCHEDULABLE


def test_pre_filter_result_visits_only_the_admitted_nodes() -> None:
    f = PreFilterAdmits(reject={"n3"}, admit=frozenset({"n1", "n3", "gone"}), name="Pin")
    result = run(Profile("s", filters=(f,), scorers=((ScoreByName({}), 1),)), snapshot_of(5))
    assert result.node == "n1" and sorted(f.calls) == ["n1", "n3"]
    assert (result.evaluated_nodes, result.feasible_nodes) == (2, 1)


def test_nodes_left_out_by_a_pre_filter_result_are_counted_in_the_message() -> None:
    # upstream schedule_one.go findNodesThatFitPod: the absent nodes' status names the plugins
    f = PreFilterAdmits(reject={"n1", "n3"}, reason="fake rejection", admit=frozenset({"n1", "n3"}), name="Pin")
    result = run(Profile("s", filters=(f,)), snapshot_of(5))
    assert result.message == "0/5 nodes are available: 2 fake rejection, 3 node(s) didn't satisfy plugin(s) [Pin]."
    assert result.diagnosis.absent_nodes_status is not None
    assert result.diagnosis.absent_nodes_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.diagnosis.unschedulable_plugins == {"Pin"}


def test_pre_filter_results_intersect() -> None:
    a = PreFilterAdmits(reject=set(), admit=frozenset({"n1", "n2"}), name="A")
    b = PreFilterAdmits(reject={"n2"}, admit=frozenset({"n2", "n3"}), name="B")
    result = run(Profile("s", filters=(a, b)), snapshot_of(4))
    assert result.message == "0/4 nodes are available: 1 fake rejection, 3 node(s) didn't satisfy plugin(s) [A B]."


@pytest.mark.parametrize(
    "admits, message",
    [
        # upstream framework.go RunPreFilterPlugins: one plugin, or several "simultaneously"
        pytest.param(
            {"A": frozenset()},
            "0/3 nodes are available: node(s) didn't satisfy plugin A.",
            id="one plugin admits nothing",
        ),
        pytest.param(
            {"A": frozenset({"n0"}), "B": frozenset({"n1"})},
            "0/3 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously.",
            id="disjoint sets",
        ),
    ],
)
def test_pre_filter_results_without_common_nodes_reject(admits: dict[str, frozenset[str]], message: str) -> None:
    plugins = tuple(PreFilterAdmits(reject=set(), admit=names, name=name) for name, names in admits.items())
    result = run(Profile("s", filters=plugins), snapshot_of(3))
    assert result.message == message


def test_unschedulable_pre_filter_lets_the_others_run() -> None:
    # upstream RunPreFilterPlugins: Unschedulable is kept (the last one is reported) while the rest run
    first = PreFilterSays(unschedulable("first"), name="First")
    second = PreFilterSays(unschedulable("second"), name="Second")
    assert run(Profile("s", filters=(first, second)), snapshot_of(2)).message == "0/2 nodes are available: second."
    # ... and an UnschedulableAndUnresolvable one after it stops everything with its own message
    hard = PreFilterSays(unresolvable("hard"), name="Hard")
    result = run(Profile("s", filters=(first, hard)), snapshot_of(2))
    assert result.message == "0/2 nodes are available: hard."
    assert result.diagnosis.unschedulable_plugins == {"Hard"}
