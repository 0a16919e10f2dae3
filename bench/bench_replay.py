"""Replay speed against live speed, and what recording costs the loop.

    python bench/bench_replay.py                          # synthetic: 5000 nodes, 10k decisions
    python bench/bench_replay.py --nodes 500 --pods 2000  # smaller
    python bench/bench_replay.py --trace DIR              # a recorded trace (run --record, demo --record)

Synthetic (the default): recording 10k live decisions on 5000 nodes through the real control
plane takes longer than this machine allows a benchmark, so the "live" scheduler is the core's
simulation of today's default profile (the loop's core path, no API server), fed to a real
``Recorder`` as the operator's handlers and loop feed it: each pod's arrival, its decision (with
the tie-break draws) and its binding, on 5000 nodes of bench_core's node-default (4 cpu, 32Gi, zones
a..c) with pod-default pods (100m / 500Mi). The trace's timestamps are that live run's wall clock,
so "live time" is the core's own decision time, a lower bound of an operator's (which also
parses watch events and binds through the API server): the ratio printed is an upper bound.

It prints: live pods/s without and with the recorder (best of ``--rounds``, alternated: the
recorder's cost to the loop, its hot-path calls and the writer thread's share of the GIL), the
trace's size, then the replay with
the recorded policy (replay seconds / live seconds, and ``differing``, which must be 0).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.cycle import Unschedulable, Wait
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.edge.recorder import DrawLog, Recorder
from kopf_scheduler.sim.replay import read_trace, recorded_profile, replay
from kopf_scheduler.sim.simulator import Simulation

ZONES = ("zone-a", "zone-b", "zone-c")
NAME = "kopf-scheduler"


def node_body(i: int) -> dict:
    node = bodies.node_body(f"node-{i}").hostname().zone(ZONES[i % 3])
    return node.capacity(cpu="4", memory="32Gi", pods="110").ready().obj()


def pod_body(i: int) -> dict:
    res = {"cpu": "100m", "memory": "500Mi"}
    pod = bodies.pod_body(f"pod-{i}", "bench").uid(f"uid-{i}").scheduler(NAME)
    return pod.container("c0", "registry.k8s.io/pause:3.10", **res).lim(**res).obj()


def live(nodes: int, pods: int, recorder: Recorder | None) -> tuple[float, float]:
    """Schedule `pods` onto `nodes` as the live scheduler; with `recorder`, record as the operator does. Wall
    seconds, and CPU seconds of this thread (the loop's: the writer thread's CPU is ``recorder.writer_seconds``)."""
    node_bodies = [node_body(i) for i in range(nodes)]
    pod_bodies = [pod_body(i) for i in range(pods)]
    sim = Simulation(SchedulerCache(), default_profile(NAME))
    sim.rng = rng = DrawLog(1)
    if recorder is not None:
        recorder.start()
        recorder.policy("default", 1, NAME, {"schedulerName": NAME})
    for body in node_bodies:
        if recorder is not None:
            recorder.node("ADDED", body)
        sim.node_changed(parse_node(body))
    start, cpu = time.perf_counter(), time.thread_time()
    for body in pod_bodies:
        pod = parse_pod(body)
        if recorder is not None:
            recorder.pod("ADDED", body)
        placed = sim.schedule_one(pod)
        if recorder is not None:
            outcome = Wait(pod, placed.node, ()) if placed.node else Unschedulable(placed.message, frozenset())
            recorder.decision(pod.key, pod.uid, NAME, outcome, rng.take())
            if placed.node:
                recorder.pod("DELETED", body)
                recorder.pod("ADDED", {**body, "spec": {**body["spec"], "nodeName": placed.node}})
        else:
            rng.take()
    seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
    if recorder is not None:
        recorder.close()
    return seconds, cpu


def replay_dir(directory: Path) -> None:
    t0 = time.perf_counter()
    t = read_trace(directory)
    read_s = time.perf_counter() - t0
    names = t.scheduler_names()
    if len(names) != 1:
        sys.exit(f"the trace has decisions of {names}: expected one scheduler name")
    profile, policy = recorded_profile(t, names[0])
    result = replay(t, profile, scheduler_name=names[0])
    ratio = result.replay_seconds / result.live_seconds if result.live_seconds else float("inf")
    print(f"trace: {sum(f.stat().st_size for f in t.files) / 2**20:.1f} MiB in {len(t.files)} segment(s), "
          f"{len(t.records)} records, read in {read_s:.2f}s")  # fmt: skip
    print(f"replay with the recorded policy ({policy}): {result.decisions} decisions, {len(result.pods)} pods, "
          f"differing {result.differing}, {result.followed_draws} tie-break draws followed")  # fmt: skip
    print(f"live {result.live_seconds:.2f}s (first to last decision in the trace), replay {result.replay_seconds:.2f}s"
          f" (loading the checkpoint included): replay / live = {ratio:.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2, help="live runs with and without recording, alternated")
    ap.add_argument("--trace", type=Path, help="replay this recorded trace instead of a synthetic one")
    args = ap.parse_args()
    if args.trace is not None:
        replay_dir(args.trace)
        return
    bare: list[tuple[float, float]] = []
    recorded: list[tuple[float, float]] = []
    writer: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):  # alternated: the machine's load changes under us
            bare.append(live(args.nodes, args.pods, None))
            directory = Path(d) / f"round-{r}"
            recorder = Recorder(directory)
            recorded.append(live(args.nodes, args.pods, recorder))
            writer.append(recorder.writer_seconds)
        (b, b_cpu), (w, w_cpu) = min(bare), min(recorded)
        print(f"live, best of {args.rounds}: {args.pods} pods on {args.nodes} nodes in {b:.2f}s "
              f"({args.pods / b:.0f} pods/s) without recording, {w:.2f}s ({args.pods / w:.0f} pods/s) with: "
              f"{100 * (w / b - 1):+.1f}%")  # fmt: skip
        print(f"CPU: the loop {b_cpu:.2f}s without, {w_cpu:.2f}s with (hot-path calls); the writer thread "
              f"{min(writer):.2f}s ({100 * min(writer) / b_cpu:.1f}% of the loop's CPU)")  # fmt: skip
        replay_dir(directory)


if __name__ == "__main__":
    main()
