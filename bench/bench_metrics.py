"""What the framework timings and the request metrics cost on the hot path.

    python bench/bench_metrics.py                     # 1000 nodes, 2000 cycles per variant
    python bench/bench_metrics.py --nodes 5000 --cycles 1000

Runs the default profile's algorithm (``GenericScheduler.schedule``) for one pod over a fixed snapshot
(nothing is assumed, so every cycle does the same work) four ways, interleaved in rounds so drift on a
shared machine hits each alike: no recorder; the operator's recorder (``SchedulerMetrics.framework_recorder``)
in cycles that are not sampled; in cycles that all are; and sampled as the operator samples (10 %).
Then the per-request cost of ``SchedulerMetrics.observe_request`` (what ``Api`` calls once per request).
Prints microseconds per cycle (the best round of each, as timeit does) and the overhead against no recorder.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.instrumentation import PLUGIN_METRICS_SAMPLE_PERCENT
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.telemetry.metrics import SchedulerMetrics

ZONES = ("zone-a", "zone-b", "zone-c")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=2000, help="cycles per variant, over all rounds")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    from kopf_scheduler.core.framework.nodeinfo import NodeInfo

    infos = []
    for i in range(args.nodes):
        body = bodies.node_body(f"node-{i}").hostname().zone(ZONES[i % 3]).capacity(cpu="4", memory="32Gi", pods="110")
        infos.append(NodeInfo(parse_node(body.ready().obj())))
    snapshot = Snapshot.of(infos)
    pod = parse_pod(bodies.pod_body("p").req(cpu="100m", memory="500Mi").obj())
    scheduler = GenericScheduler(default_profile("bench"))
    metrics = SchedulerMetrics(process=False)
    recorder = metrics.framework_recorder("bench")
    draw = random.Random(1)

    variants: dict[str, Callable[[random.Random], object]] = {
        "no recorder": lambda rng: scheduler.schedule(pod, snapshot, rng=rng),
        "recorder, not sampled": lambda rng: scheduler.schedule(pod, snapshot, rng=rng, state=CycleState(recorder)),
        "recorder, every cycle sampled": lambda rng: scheduler.schedule(
            pod, snapshot, rng=rng, state=CycleState(recorder, sample_plugins=True)
        ),
        f"recorder, {PLUGIN_METRICS_SAMPLE_PERCENT}% sampled (the operator)": lambda rng: scheduler.schedule(
            pod,
            snapshot,
            rng=rng,
            state=CycleState(recorder, sample_plugins=draw.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT),
        ),
    }
    per_round = max(1, args.cycles // args.rounds)
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(args.rounds):
        for name, run in variants.items():
            rng = random.Random(0)
            started = time.perf_counter()
            for _ in range(per_round):
                run(rng)
            best[name] = min(best[name], (time.perf_counter() - started) / per_round)
    base = best["no recorder"]
    print(f"{args.nodes} nodes, default profile, {per_round} cycles x {args.rounds} rounds (best round):")
    for name, seconds in best.items():
        print(f"  {name:<44} {seconds * 1e6:9.1f} us/cycle  {100 * (seconds / base - 1):+6.2f} %")

    n = 100_000
    started = time.perf_counter()
    for _ in range(n):
        metrics.observe_request("10.0.0.1:6443", "POST", 201, 0.002)
    print(f"  observe_request (one per API request)        {(time.perf_counter() - started) / n * 1e6:9.2f} us/request")


if __name__ == "__main__":
    main()
