"""Micro-benchmark: the resource plugins' vector paths on a 5000-node table, per pod.

    python bench/bench_resources.py                 # 5000 nodes, 2000 pods
    python bench/bench_resources.py --nodes 1000 --pods 500 --score-all

For each pod it runs what the algorithm runs for NodeResourcesFit, NodeResourcesBalancedAllocation
and NodeResourceLimits: pre_filter + filter_nodes over every node (rotated order, as the algorithm
passes it), then pre_score + score_nodes over the feasible nodes the adaptive search would keep
(10% of 5000 = 500; ``--score-all`` scores every feasible node instead). Nodes follow
scheduler_perf's node-default (4 cpu, 32Gi, 110 pods) with 0-20 pods already on them; pods are
pod-default (100m / 500Mi requests and limits), with one in eight requesting nothing.
Prints microseconds per pod; a figure, not a pass/fail test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster.bodies import node_body, pod_body
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.plugins.balanced_allocation import NodeResourcesBalancedAllocation
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.resource_limits import NodeResourceLimits
from kopf_scheduler.core.scheduling.algorithm import num_feasible_nodes_to_find


def node(i: int) -> NodeInfo:
    return NodeInfo(parse_node(node_body(f"node-{i}").capacity(cpu="4", memory="32Gi", pods="110").obj()))


def pod(i: int, *, empty: bool = False) -> Pod:
    body = pod_body(f"p{i}", "default").uid(f"u{i}").container("c", "pause")
    if not empty:
        r = {"cpu": "100m", "memory": "500Mi"}
        body.req(r).lim(r)
    return parse_pod(body.obj())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--score-all", action="store_true", help="score every feasible node, not the adaptive 10%%")
    args = ap.parse_args()

    rng = random.Random(1)
    infos = [node(i) for i in range(args.nodes)]
    existing = [pod(10**6 + k) for k in range(50)]
    for info in infos:
        for k in range(rng.randrange(21)):
            info.add_pod(existing[k].with_node(info.name))
    snap = Snapshot.of(infos)
    table = snap.table
    pods = [pod(i, empty=(i % 8 == 0)) for i in range(args.pods)]

    fit, balanced, limits = NodeResourcesFit(), NodeResourcesBalancedAllocation(), NodeResourceLimits()
    scorers = (fit, balanced, limits)
    want = args.nodes if args.score_all else num_feasible_nodes_to_find(args.nodes)
    n = len(table)
    t_filter = 0.0
    t_score = {p.name: 0.0 for p in scorers}
    for i, p in enumerate(pods):
        state = CycleState()
        order = np.roll(np.arange(n, dtype=np.intp), -(i * 37 % n))
        t0 = time.perf_counter()
        fit.pre_filter(state, p, snap)
        mask = fit.filter_nodes(state, p, table, order)
        feasible = order[mask][:want]
        t1 = time.perf_counter()
        t_filter += t1 - t0
        for plugin in scorers:
            t0 = time.perf_counter()
            if plugin.pre_score(state, p, [], snap).code is not Code.SKIP:
                plugin.score_nodes(state, p, table, feasible)
            t_score[plugin.name] += time.perf_counter() - t0

    per = 1e6 / len(pods)
    total = t_filter + sum(t_score.values())
    print(f"{args.nodes} nodes, {len(pods)} pods, scoring {want} feasible nodes per pod")
    print(f"  NodeResourcesFit filter (pre_filter + filter_nodes): {t_filter * per:7.1f} us/pod")
    for name, t in t_score.items():
        print(f"  {name} score (pre_score + score_nodes): {t * per:7.1f} us/pod")
    print(f"  total filter + score: {total * per:7.1f} us/pod")


if __name__ == "__main__":
    main()
