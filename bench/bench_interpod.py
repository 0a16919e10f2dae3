"""InterPodAffinity cost per pod: pre_filter + filter_nodes on a growing anti-affinity cluster.

    python bench/bench_interpod.py                 # 1000 nodes, place 1000 pods
    python bench/bench_interpod.py --nodes 1000 --pods 1000 --every 100

Workload after upstream scheduler_perf SchedulingPodAntiAffinity: every pod has
required anti-affinity on kubernetes.io/hostname against the pods' own labels.
Each pod is checked against all nodes, then placed on the first feasible node
through a SchedulerCache, so the snapshot is updated incrementally as in the
scheduling loop. Prints the mean µs/pod per window of placed pods. A figure,
not a pass/fail test (the end-to-end goal, all plugins, is >= 300 pods/s).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.plugins.inter_pod_affinity import InterPodAffinity
from kopf_scheduler.core.state.cache import SchedulerCache

ZONES = ("zone-a", "zone-b", "zone-c")


def node_body(i: int) -> dict:
    node = bodies.node_body(f"node-{i}").hostname().zone(ZONES[i % 3])
    return node.allocatable(cpu="4", memory="32Gi", pods="110").ready().obj()


def pod_body(i: int) -> dict:
    res = {"cpu": "100m", "memory": "500Mi"}
    pod = bodies.pod_body(f"pod-{i}", "bench").uid(f"uid-{i}").label(color="green")
    pod.container("pause", "pause").req(res).lim(res)
    return pod.pod_affinity(bodies.HOSTNAME_LABEL, {"color": "green"}, anti=True).obj()


def run(nodes: int, pods: int, every: int) -> None:
    cache = SchedulerCache()
    for i in range(nodes):
        cache.add_node(parse_node(node_body(i)))
    snap = Snapshot()
    plugin = InterPodAffinity()
    pending = [parse_pod(pod_body(i)) for i in range(pods)]
    window: list[float] = []
    total = 0.0
    for i, pod in enumerate(pending):
        cache.update_snapshot(snap)
        start = time.perf_counter()
        state = CycleState()
        plugin.pre_filter(state, pod, snap)
        mask = plugin.filter_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
        took = time.perf_counter() - start
        window.append(took)
        total += took
        feasible = np.flatnonzero(mask)
        if feasible.size == 0:
            print(f"pod {i}: no feasible node")
            break
        cache.assume(pod, snap.node_infos[int(feasible[0])].name)
        if (i + 1) % every == 0:
            print(f"placed {i + 1 - every:5d}..{i:5d}: {1e6 * sum(window) / len(window):7.1f} µs/pod")
            window = []
    print(
        f"mean over {len(pending)} pods: {1e6 * total / len(pending):.1f} µs/pod "
        f"({len(pending) / total:.0f} pods/s for this plugin)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--every", type=int, default=100)
    args = ap.parse_args()
    run(args.nodes, args.pods, args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
