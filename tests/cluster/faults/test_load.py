"""Load, at the size CI affords: 500 nodes and 3000 pending pods (300 of which fit nowhere) before the
operator starts. The issue's size (5000 nodes, 20k pods) is ``python bench/bench_load.py``, which runs
the same code in about 2 minutes on 2 cores; its last figures are in the README (Robustness).

KWOK plays the nodes' kubelets (no heartbeats): the nodes become Ready through it, and every pod
the operator binds goes Running, so the operator's informer of assigned pods takes in the status
updates real kubelets cause while it drains.

The queue drains (every schedulable pod bound, every other one with a FailedScheduling event, no pod
left active or in backoff), every bound pod goes Running, the peak RSS stays under a generous bound,
and no pod gets the same FailedScheduling message twice within the repeat interval. The figures are
printed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench_load import run_load
from scenario import log

from kopf_scheduler.cluster import ControlPlane

NODES, PODS, UNSCHEDULABLE = 500, 3000, 0.1
RSS_BOUND_MIB = 1024


def test_thousands_of_pending_pods_drain(tmp_path: Path) -> None:
    with ControlPlane(tmp_path / "cp", die_with_parent=True) as cp:  # its own: these nodes would slow the other tests
        result = asyncio.run(run_load(cp, tmp_path, nodes=NODES, pods=PODS, unschedulable=UNSCHEDULABLE, timeout=240))
    log(f"load: {result.summary()}")
    assert result.error is None, f"{result.error}\n{(tmp_path / 'operator.log').read_text()[-3000:]}"
    assert result.bound == PODS - result.unschedulable
    assert result.running == result.bound  # KWOK ran every bound pod
    assert result.reported_unschedulable == result.unschedulable
    assert result.pending_at_end.get("active") == 0 and result.pending_at_end.get("backoff") == 0
    assert result.pending_at_end.get("unschedulable") == result.unschedulable
    assert result.peak_rss_mib is not None and result.peak_rss_mib < RSS_BOUND_MIB
    assert result.repeats_within_limit == 0
