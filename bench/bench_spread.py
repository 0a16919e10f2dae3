"""PodTopologySpread cost per pod: its pre-steps and vector forms on a large, incrementally updated cluster.

    python bench/bench_spread.py                         # 5000 nodes, 10000 placed pods, 500 measured pods
    python bench/bench_spread.py --nodes 500 --existing 1000 --pods 200

Workloads after upstream scheduler_perf's TopologySpreading / PreferredTopologySpreading and the
default profile's system defaults:

- ``hard``: every pod has ``zone`` DoNotSchedule maxSkew 1 and ``hostname`` ScheduleAnyway
  maxSkew 1 on its own label (filter and score both run);
- ``defaults``: pods without constraints owned by a ReplicaSet (system default constraints: the
  score only, with the selector deduced from the owner).

Each measured pod runs pre_filter + filter_nodes over all nodes (when the pod has hard
constraints) and pre_score + score_nodes + normalize over the feasible nodes the algorithm would
score (adaptive percentageOfNodesToScore), then is assumed on the best node through a
SchedulerCache, so the snapshot changes by one node per pod as in the scheduling loop. ``--cold``
builds a fresh plugin per pod (no per-node count cache) to show what the cache saves. Prints µs per
pod; a figure, not a pass/fail test.
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
from kopf_scheduler.core.model.parsing import parse_controller, parse_node, parse_pod
from kopf_scheduler.core.plugins.pod_topology_spread import PodTopologySpread
from kopf_scheduler.core.scheduling.algorithm import num_feasible_nodes_to_find
from kopf_scheduler.core.state.cache import SchedulerCache

ZONES = ("zone-a", "zone-b", "zone-c")
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node_body(i: int) -> dict:
    node = bodies.node_body(f"node-{i}").hostname().zone(ZONES[i % 3])
    return node.allocatable(cpu="64", memory="256Gi", pods="110").ready().obj()


def pod_body(i: int, workload: str, node: str = "") -> dict:
    app = f"app-{i % 10}"
    pod = bodies.pod_body(f"pod-{i}", "bench").uid(f"uid-{i}").label(app=app).container("pause", "pause")
    if node:
        pod.node(node)
    if workload == "hard":
        selector = {"matchLabels": {"app": app}}
        pod.spread(1, ZONE, "DoNotSchedule", selector).spread(1, HOST, "ScheduleAnyway", selector)
    else:
        pod.owner("ReplicaSet", f"rs-{app}", f"rs-{app}", api_version="apps/v1")
    return pod.obj()


def run(nodes: int, existing: int, pods: int, workload: str, cold: bool) -> None:
    cache = SchedulerCache()
    for i in range(nodes):
        cache.add_node(parse_node(node_body(i)))
    for i in range(existing):
        cache.add_pod(parse_pod(pod_body(i, workload, node=f"node-{(i * 7) % nodes}")))
    for k in range(10):
        rs = {
            "kind": "ReplicaSet",
            "metadata": {"namespace": "bench", "name": f"rs-app-{k}"},
            "spec": {"selector": {"matchLabels": {"app": f"app-{k}"}}},
        }
        cache.objects.controllers[f"ReplicaSet/bench/rs-app-{k}"] = parse_controller(rs)
    snap = Snapshot(cache.objects)
    plugin = PodTopologySpread()
    want = num_feasible_nodes_to_find(nodes)
    took: list[float] = []
    filter_s = score_s = 0.0
    for i in range(existing, existing + pods):
        pod = parse_pod(pod_body(i, workload))
        cache.update_snapshot(snap)
        if cold:
            plugin = PodTopologySpread()
        state = CycleState()
        everything = np.arange(len(snap), dtype=np.intp)
        start = time.perf_counter()
        if plugin.pre_filter(state, pod, snap).is_success:
            feasible = np.flatnonzero(plugin.filter_nodes(state, pod, snap.table, everything))[:want]
        else:
            feasible = everything[:want]
        mid = time.perf_counter()
        infos = [snap.node_infos[k] for k in feasible.tolist()]
        best = int(feasible[0]) if feasible.size else -1
        if infos and plugin.pre_score(state, pod, infos, snap).is_success:
            raw = plugin.score_nodes(state, pod, snap.table, feasible)
            scores = plugin.normalize_scores(state, pod, raw)
            best = int(feasible[int(np.argmax(scores))])
        end = time.perf_counter()
        filter_s += mid - start
        score_s += end - mid
        took.append(end - start)
        if best < 0:
            print(f"pod {i}: no feasible node")
            break
        cache.assume(pod, snap.node_infos[best].name)
    print(
        f"{workload:8s} {'cold' if cold else 'warm'}: {nodes} nodes, {existing} pods placed, {pods} measured: "
        f"filter {1e6 * filter_s / pods:8.1f} µs/pod, score {1e6 * score_s / pods:8.1f} µs/pod "
        f"(median {1e6 * float(np.median(took)):.1f} µs; {pods / (filter_s + score_s):.0f} pods/s for this plugin)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--existing", type=int, default=10000)
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--workload", choices=("hard", "defaults", "both"), default="both")
    ap.add_argument("--cold", action="store_true", help="a fresh plugin per pod: no count cache")
    args = ap.parse_args()
    for workload in ("hard", "defaults") if args.workload == "both" else (args.workload,):
        run(args.nodes, args.existing, args.pods, workload, args.cold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
