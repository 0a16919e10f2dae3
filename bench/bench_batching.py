"""Opportunistic batching on the core path (``core/toolkit/batching.py``): replicas that go one per node,
with and without.

    python bench/bench_batching.py                  # 1000 nodes, 500 replicas; then 5000 nodes, 1000 replicas
    python bench/bench_batching.py --nodes 5000 --pods 2000

Each replica requests 100m / 500Mi and holds host port 8080 (one per node, as upstream's batching wants them);
the profile is today's default with PodTopologySpread's ``defaultingType: List`` (no spread defaults: pods are
signable). "on" passes the scheduling cycle (the next pod gets the previous one's next best node as a hint,
filtered alone and taken unscored); "off" schedules each pod on its own (filter and score every node). The
clock does not move (no 500 ms expiry). Prints pods/s both ways and how many pods took a hint. A figure, not a
pass/fail test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, Turn
from kopf_scheduler.core.state.cache import SchedulerCache

SPEC = {"schedulerName": "s", "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}


def run(nodes: int, pods: int, *, batching: bool) -> tuple[float, int]:
    cache = SchedulerCache()
    for i in range(nodes):
        body = bodies.node_body(f"n{i:05d}").hostname().zone("abc"[i % 3])
        body.capacity(cpu=str(4 + i % 4), memory="32Gi", pods="110").ready()
        cache.add_node(parse_node({**body.manifest(), **body.status()}))
    profile = validate_policy(SPEC)
    assert isinstance(profile, Profile), profile
    scheduler, snapshot, rng = GenericScheduler(profile), Snapshot(cache.objects), random.Random(1)
    replicas = [
        parse_pod(
            bodies.pod_body(f"r{i}", "default").container("c", "x", cpu="100m", memory="500Mi").host_port(8080).obj()
        )
        for i in range(pods)
    ]
    started = time.perf_counter()
    for cycle, pod in enumerate(replicas, 1):
        cache.update_snapshot(snapshot)
        result = scheduler.schedule(pod, snapshot, rng=rng, turn=Turn(cycle=cycle if batching else None))
        assert result.node is not None, result.message
        cache.assume(pod, result.node)
    return pods / (time.perf_counter() - started), scheduler.batch.batched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--pods", type=int)
    args = ap.parse_args()
    sizes = [(args.nodes, args.pods)] if args.nodes and args.pods else [(1000, 500), (5000, 1000)]
    for nodes, pods in sizes:
        on, hinted = run(nodes, pods, batching=True)
        off, _ = run(nodes, pods, batching=False)
        print(
            f"{nodes} nodes, {pods} replicas: batching on {on:.0f} pods/s ({hinted} on a hint), "
            f"off {off:.0f} pods/s: {on / off:.1f}x"
        )


if __name__ == "__main__":
    main()
