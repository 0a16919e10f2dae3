"""Core throughput benchmark: the simulation path, one process, no API server.

    python bench/bench_core.py                       # both workloads, defaults below
    python bench/bench_core.py --workload basic --nodes 5000 --pods 10000
    python bench/bench_core.py --workload anti-affinity --nodes 1000 --pods 1000
    python bench/bench_core.py --workload topology-spread --nodes 5000   # also node-affinity, preferred-affinity
    python bench/bench_core.py --workload unschedulable   # 1000 pods that fit none of 5000 nodes: the FitError's cost
    python bench/bench_core.py --workload no-match        # the same with a nodeSelector no node matches
    python bench/bench_core.py --profile out.prof    # also write a cProfile
    python bench/bench_core.py --path loop           # the operator loop's core path (bench_explain.py: + attempt log)

Workloads follow upstream scheduler_perf templates: node-default (4 cpu, 32Gi,
110 pods, zones a..c), pod-default (100m / 500Mi requests and limits),
pod-with-pod-anti-affinity (required anti-affinity on kubernetes.io/hostname
against the pods' own labels), pod-with-node-affinity (zone In [a, b]),
pod-with-topology-spreading (zone, maxSkew 5) and a preferred pod affinity on
the zone. Policy: today's default profile.
Prints pods/s; the goals are >= 2000 pods/s (basic, 5000 nodes) and >= 300
pods/s (anti-affinity, 1000 nodes). A figure, not a pass/fail test.

``--path loop`` runs what ``kube/loop.py`` runs per pod without the I/O: queue pop,
``core.scheduling.cycle.schedule_one``, the bind's success, the watch's confirmation (``run_loop_path``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.cluster.bodies import HOSTNAME_LABEL, ZONE_LABEL
from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.attempts import AttemptLog
from kopf_scheduler.core.scheduling.cycle import Bind, CycleContext, Parked, binding_succeeded, schedule_one
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import SchedulingQueue
from kopf_scheduler.sim.simulator import Simulation

ZONES = ("zone-a", "zone-b", "zone-c")


def node_body(i: int) -> dict:
    node = bodies.node_body(f"node-{i}").hostname().zone(ZONES[i % 3])
    return node.capacity(cpu="4", memory="32Gi", pods="110").ready().obj()


def _basic(i: int) -> bodies.PodBody:
    res = {"cpu": "100m", "memory": "500Mi"}
    pod = bodies.pod_body(f"pod-{i}", "bench").uid(f"uid-{i}").scheduler("kopf-scheduler")
    return pod.container("pause", "registry.k8s.io/pause:3.10").port(80).req(res).lim(res)


def basic_pod(i: int) -> dict:
    return _basic(i).obj()


def anti_affinity_pod(i: int) -> dict:
    return _basic(i).label(color="green").pod_affinity(HOSTNAME_LABEL, {"color": "green"}, anti=True).obj()


def run_loop_path(cache: SchedulerCache, pending: list[Pod], seed: int, log: AttemptLog | None = None) -> int:
    """The operator loop's core work per pod, as kube/loop.py does it minus the I/O, recording each attempt
    in `log` when given (as the loop does for ``explain``); returns the pods bound."""
    profile = default_profile("kopf-scheduler")
    scheduler, queue, snapshot = GenericScheduler(profile), SchedulingQueue(), Snapshot(cache.objects)
    rng = random.Random(seed)
    parked: WaitingPods[Parked] = WaitingPods()  # pods a Permit plugin holds (none: no gangs here)
    now = 0.0
    for pod in pending:
        queue.add(pod, now)
    scheduled = 0
    while (info := queue.pop(now)) is not None:
        outcome = schedule_one(info, snapshot, CycleContext(scheduler, cache, queue, parked, rng, now))
        if log is not None:
            log.record(info, outcome, scheduler_name=profile.scheduler_name, now=now)
        if isinstance(outcome, Bind):
            binding_succeeded(outcome.pod, cache=cache, queue=queue, now=now)
            cache.add_pod(outcome.pod)  # the watch confirms the bind
            scheduled += 1
        now += 0.001
    return scheduled


def node_affinity_pod(i: int) -> dict:
    return _basic(i).node_affinity_in(ZONE_LABEL, *ZONES[:2]).obj()


def topology_spread_pod(i: int) -> dict:
    return (
        _basic(i).label(color="blue").spread(5, ZONE_LABEL, "DoNotSchedule", {"matchLabels": {"color": "blue"}}).obj()
    )


def preferred_affinity_pod(i: int) -> dict:
    return _basic(i).label(color="red").pod_affinity(ZONE_LABEL, {"color": "red"}, weight=10).obj()


def too_big_pod(i: int) -> dict:
    return _basic(i).req(cpu="64").lim(cpu="64").obj()  # fits no node-default node


def no_match_pod(i: int) -> dict:
    return _basic(i).node_selector(disk="nvme").obj()  # no node has the label


#: workload -> (pod shape, default nodes, default pods); scheduler_perf's templates, and pods that fit nowhere
WORKLOADS = {
    "basic": (basic_pod, 5000, 10000),
    "anti-affinity": (anti_affinity_pod, 1000, 1000),
    "node-affinity": (node_affinity_pod, 5000, 5000),
    "topology-spread": (topology_spread_pod, 5000, 5000),
    "preferred-affinity": (preferred_affinity_pod, 5000, 5000),
    "unschedulable": (too_big_pod, 5000, 1000),
    "no-match": (no_match_pod, 5000, 1000),
}


def run(
    workload: str, nodes: int, pods: int, seed: int, profile_path: str | None, *, path: str = "simulation"
) -> float:
    cache = SchedulerCache()
    for i in range(nodes):
        cache.add_node(parse_node(node_body(i)))
    make = WORKLOADS[workload][0]
    pending = [parse_pod(make(i)) for i in range(pods)]
    prof = cProfile.Profile() if profile_path else None
    if prof:
        prof.enable()
    start = time.perf_counter()
    if path == "loop":
        scheduled = run_loop_path(cache, pending, seed)
    else:
        scheduled = Simulation(cache, default_profile("kopf-scheduler"), seed=seed).run(pending).scheduled
    seconds = time.perf_counter() - start
    if prof:
        prof.disable()
        prof.dump_stats(profile_path)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    rate = pods / seconds
    what = f"{workload} ({path} path): {nodes} nodes, {pods} pods"
    print(f"{what}: {scheduled} scheduled in {seconds:.2f}s = {rate:.0f} pods/s")
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=(*WORKLOADS, "all"), default="all", help="all: basic and anti-affinity")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--pods", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", help="write a cProfile to this file and print the top entries")
    ap.add_argument(
        "--path",
        choices=("simulation", "loop"),
        default="simulation",
        help="the simulator, or the operator loop's core path",
    )
    args = ap.parse_args()
    for workload in ("basic", "anti-affinity") if args.workload == "all" else (args.workload,):
        _, nodes, pods = WORKLOADS[workload]
        run(workload, args.nodes or nodes, args.pods or pods, args.seed, args.profile, path=args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
