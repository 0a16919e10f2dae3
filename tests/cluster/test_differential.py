"""The differential harness against upstream kube-scheduler v1.37.2, on a small seed set (bench/differential.py).

One run (module fixture) of a few small random clusters; the tests then check (a) what holds today, with the
thresholds that do not hold yet in ONE table below, and (b) the harness itself: upstream's scores were read for
every pod it scored, they add up to its logged totals, and both sides saw the same nodes.
"""

from __future__ import annotations

from collections.abc import Iterator

import differential as dh
import pytest

from kopf_scheduler.sim.loader import load_policy

SEEDS = (11, 13)  # 13 has a preemption since the generator draws volumes too (12 no longer has one)
KNOBS = dh.Knobs(nodes=15, pods=25)

# =====================================================================================================
# AGREEMENT THRESHOLDS in percent (issue 10, "Done when": fits 100, best node 98, plugin scores 99, messages 95).
# Measured with upstream v1.37's default profile as ours, preemption included: `python bench/differential.py
# --seeds 5` (40 nodes, 60 pods): fits 100, best node 100, feasible sets 100, plugin scores 100, whole messages
# 100 (24/24, " preemption: ..." tail included). Upstream breaks score ties by its own heap order, so the best-node
# threshold keeps a margin below what is measured; and it breaks ties between equally good preemption candidates
# by the order its parallel dry run returns them ("found a potential placement for pod on node X" may name
# another X), which in this small sample (about 6 unschedulable pods) can cost one message: hence 80.
THRESHOLDS = {
    "fits": 100.0,
    "best_node": 98.0,
    "plugin_scores": 99.0,
    "messages": 80.0,
}
# =====================================================================================================


@pytest.fixture(scope="module")
def cases() -> Iterator[list[dh.PodCase]]:
    yield dh.run(SEEDS, KNOBS, load_policy(None))


@pytest.fixture(scope="module")
def report(cases: list[dh.PodCase]) -> dh.Report:
    return dh.build_report([dh.compare(c) for c in cases])


@pytest.mark.parametrize("metric", sorted(THRESHOLDS))
def test_agreement_is_at_least_the_threshold(report: dh.Report, metric: str) -> None:
    got = report.metrics()[metric]
    assert got["of"] > 0, f"nothing to compare for {metric}"
    assert got["percent"] >= THRESHOLDS[metric], f"{metric}: {got}\n\n{dh.render(report)}"


def test_every_pod_was_decided_by_both_sides(cases: list[dh.PodCase]) -> None:
    assert len(cases) == len(SEEDS) * KNOBS.pods
    for c in cases:
        assert c.upstream.attempts >= 1 and not c.upstream.error and not c.ours.error, c.pod
        if c.upstream.node is None:  # unschedulable: upstream's whole FitError text was read
            assert c.upstream.message.startswith(f"0/{KNOBS.nodes} nodes are available: "), (c.pod, c.upstream.message)


def test_upstream_scores_were_read_for_every_pod_it_scored(cases: list[dh.PodCase]) -> None:
    scored = [c for c in cases if c.upstream.node is not None and len(c.upstream.feasible) > 1]
    assert scored, "no pod had two feasible nodes: the sample tests nothing"
    for c in cases:
        up = c.upstream
        if up.node is None:
            continue
        assert up.scored == (c in scored), c.pod  # not scored exactly when one node was feasible
        assert up.node in up.best, c.pod
        if not up.scored:
            continue
        assert set(up.totals) == up.feasible, c.pod
        assert up.scores, c.pod
        for plugin, by_node in up.scores.items():
            assert set(by_node) == up.feasible, (c.pod, plugin)
        # the logged plugin scores, divided by the logged weights, add back up to the logged totals
        for node in up.feasible:
            assert sum(up.score(p, node) * up.weights[p] for p in up.scores) == up.totals[node], (c.pod, node)


def test_both_sides_saw_the_same_nodes(cases: list[dh.PodCase]) -> None:
    for c in cases:
        seen = c.ours.feasible | set(c.ours.filtered)
        assert len(seen) == KNOBS.nodes and set(c.nodes) == seen, c.pod
        assert c.upstream.feasible <= seen, c.pod


def test_with_every_score_as_upstreams_only_feasible_set_differences_miss(report: dh.Report) -> None:
    """The counterfactual behind "CAUSES OF BEST-NODE MISSES": keeping nothing of ours reproduces upstream's choice."""
    feasible_differs = sum(1 for c in report.comparisons if c.best is False and not c.feasible)
    assert report.miss_causes.get("", 0) <= feasible_differs


def test_each_pod_saw_the_pods_bound_before_it_minus_preemption_victims(cases: list[dh.PodCase]) -> None:
    """The state both sides decide on follows upstream exactly: its binds stay, unschedulable pods and the victims
    of its preemptions are gone."""
    assert any(c.upstream.victims for c in cases), "the sample no longer exercises a preemption: choose SEEDS that do"
    for before, after in zip(cases, cases[1:]):
        if before.seed != after.seed:
            assert after.bound == frozenset(), after.pod  # a new seed starts empty
            continue
        expected = (before.bound | ({before.pod} if before.upstream.node else set())) - set(before.upstream.victims)
        assert after.bound == expected, after.pod
