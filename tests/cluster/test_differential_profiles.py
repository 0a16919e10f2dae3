"""Two profiles in one scheduler against upstream kube-scheduler v1.37.2, through the differential harness.

Both sides run tests/cluster/fixtures/kube-scheduler-two-profiles.yaml (``default-scheduler`` with upstream's
defaults, and ``bin-packing``); each random pod names one of the two (``Knobs.scheduler_names``), and ours
decides it with the profile it names, on the state both share. After each seed's pods, a burst of six
identical replicas is created at once (upstream stops while they are created: its queue holds them all) with
OpportunisticBatching on, as upstream runs by default.

Measured (``python bench/differential.py --seeds 2 --nodes 15 --pods 25 --seed-start 11 --burst 6
--config tests/cluster/fixtures/kube-scheduler-two-profiles.yaml``): fits, best node, best sets, feasible sets,
whole messages and plugin scores 100% (2928/2928); bursts: the same nodes taken 2/2, hints alike 14/14, pod
by pod 12/14 (two replicas swapped between two nodes of equal score: upstream breaks ties by its heap, we at
random).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import differential as dh
import pytest
import yaml

from kopf_scheduler.sim.loader import load_scheduler_config

CONFIG = Path(__file__).parent / "fixtures" / "kube-scheduler-two-profiles.yaml"
SEEDS = (11, 12)
THRESHOLDS = {"fits": 100.0, "best_node": 98.0, "plugin_scores": 99.0, "messages": 80.0}


@pytest.fixture(scope="module")
def cases() -> Iterator[list[dh.PodCase]]:
    profiles = load_scheduler_config(CONFIG)
    knobs = dh.Knobs(nodes=15, pods=25, burst=6, scheduler_names=tuple(p.scheduler_name for p in profiles))
    yield dh.run(SEEDS, knobs, profiles, scheduler_config=yaml.safe_load(CONFIG.read_text()))


@pytest.fixture(scope="module")
def report(cases: list[dh.PodCase]) -> dh.Report:
    return dh.build_report([dh.compare(c) for c in cases if not c.burst])


def test_the_pods_name_both_profiles_and_upstream_ran_both(cases: list[dh.PodCase]) -> None:
    named = {c.pod: c for c in cases if not c.burst}
    assert len(named) == len(SEEDS) * 25
    weights = {tuple(sorted(c.upstream.weights.items())) for c in named.values() if c.upstream.weights}
    assert len(weights) == 2  # each pod's scores were read with its own profile's weights
    assert any("NodeResourcesBalancedAllocation" in w for w in map(dict, weights))  # default-scheduler's
    assert any("NodeResourcesBalancedAllocation" not in w for w in map(dict, weights))  # bin-packing's


@pytest.mark.parametrize("metric", sorted(THRESHOLDS))
def test_agreement_is_at_least_the_threshold(report: dh.Report, metric: str) -> None:
    got = report.metrics()[metric]
    assert got["of"] > 0, f"nothing to compare for {metric}"
    assert got["percent"] >= THRESHOLDS[metric], f"{metric}: {got}\n\n{dh.render(report)}"


def test_bursts_take_the_same_nodes_with_the_same_hints(cases: list[dh.PodCase]) -> None:
    bursts = [c for c in cases if c.burst]
    assert len(bursts) >= len(SEEDS) * 6
    m = dh.BurstReport(bursts).metrics()
    text = dh.render_burst(dh.BurstReport(bursts))
    assert m["burst_node_multisets"]["percent"] == 100.0, text
    assert m["burst_hinted"]["percent"] == 100.0, text
    assert m["burst_nodes"]["percent"] >= 80.0, text  # a tie may swap two replicas
    assert m["burst_messages"]["percent"] == 100.0, text
