"""The differential harness with DynamicResources (bench/differential.py ``--dra``): ResourceSlices on some of the
random nodes, a ResourceClaim on some of the pods, upstream kube-scheduler v1.37.2 beside us.

Measured (`python bench/differential.py --seeds 4 --nodes 15 --pods 40 --dra --seed-start 31`): fits, best node,
feasible sets, whole messages, plugin scores and allocated devices all 100% (18/18 claims got the same devices).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import differential as dh
import pytest

from kopf_scheduler.sim.loader import load_policy

SEEDS = (31, 32)
KNOBS = dataclasses.replace(dh.Knobs(nodes=15, pods=40), p_node_devices=0.3, p_claim=0.3)


@pytest.fixture(scope="module")
def report() -> Iterator[dh.Report]:
    cases = dh.run(SEEDS, KNOBS, load_policy(None))
    yield dh.build_report([dh.compare(c) for c in cases])


def test_claims_were_drawn_and_allocated() -> None:
    scenarios = [dh.generate(seed, KNOBS) for seed in SEEDS]
    assert all(s.claims for s in scenarios) and all(
        any(plural == "resourceslices" for plural, _ in s.device_objects) for s in scenarios
    )


@pytest.mark.parametrize("metric", ["fits", "best_node", "feasible_sets_equal", "messages", "devices"])
def test_agrees_with_upstream(report: dh.Report, metric: str) -> None:
    got = report.metrics()[metric]
    assert got["of"] > 0, f"nothing to compare for {metric}"
    assert got["percent"] == 100.0, f"{metric}: {got}\n\n{dh.render(report)}"
