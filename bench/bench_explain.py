"""What recording attempts for ``kopf-scheduler explain`` costs the scheduling loop, and what it holds.

    python bench/bench_explain.py                    # 5000 nodes, 2000 pods, 12 paired rounds
    python bench/bench_explain.py --nodes 500 --rounds 20
    python bench/bench_explain.py --memory           # also what the kept records hold (tracemalloc)

Each round runs the operator loop's core path (``bench_core.run_loop_path``: pop, schedule_one, bind,
confirm; scheduler_perf's node-default and pod-default) twice on a fresh cache, with and without the
loop's ``AttemptLog``, in alternating order, and compares their CPU time: paired rounds cancel most of
what other processes do to the machine. It also times the ``record`` calls themselves, before the
bound pool is full and after (when each call frees the oldest record). ``--memory`` compares the log's
byte estimate with what freeing it releases. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from bench_core import basic_pod, node_body, run_loop_path

from kopf_scheduler.core.framework.basics import QueuedPodInfo
from kopf_scheduler.core.model.objects import Node, Pod
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.attempts import AttemptLog
from kopf_scheduler.core.scheduling.cycle import Outcome
from kopf_scheduler.core.state.cache import SchedulerCache


class TimedLog(AttemptLog):
    """An AttemptLog that times its record calls, apart before and after its first eviction."""

    def __init__(self) -> None:
        super().__init__()
        self.filling: list[float] = []
        self.full: list[float] = []

    def record(self, info: QueuedPodInfo, outcome: Outcome, *, scheduler_name: str, now: float) -> None:
        before = len(self)
        start = time.perf_counter()
        super().record(info, outcome, scheduler_name=scheduler_name, now=now)
        (self.full if len(self) <= before else self.filling).append(time.perf_counter() - start)


def one_run(nodes: list[Node], pods: list[Pod], log: AttemptLog | None) -> float:
    cache = SchedulerCache()
    for node in nodes:
        cache.add_node(node)
    gc.collect()
    start = time.process_time()
    run_loop_path(cache, pods, 0, log)
    return time.process_time() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument(
        "--memory",
        action="store_true",
        help="also measure what the kept records hold (one more run, under tracemalloc)",
    )
    args = ap.parse_args()
    nodes = [parse_node(node_body(i)) for i in range(args.nodes)]
    pods = [parse_pod(basic_pod(i)) for i in range(args.pods)]
    plain: list[float] = []
    recording: list[float] = []
    filling: list[float] = []
    full: list[float] = []
    for r in range(args.rounds):
        log = TimedLog()
        if r % 2:
            recording.append(one_run(nodes, pods, log))
            plain.append(one_run(nodes, pods, None))
        else:
            plain.append(one_run(nodes, pods, None))
            recording.append(one_run(nodes, pods, log))
        filling += log.filling
        full += log.full
    slower = [b / a - 1 for a, b in zip(plain, recording)]
    n = args.pods
    print(f"{args.nodes} nodes, {n} pods, {args.rounds} paired rounds (CPU time):")
    print(f"  without the log: median {n / statistics.median(plain):.0f} pods/s")
    low, _, high = statistics.quantiles(slower)
    print(f"  with the log:    median {n / statistics.median(recording):.0f} pods/s; "
          f"paired: median {100 * statistics.median(slower):+.1f}% "
          f"(quartiles {100 * low:+.1f}% .. {100 * high:+.1f}%)")  # fmt: skip
    once_full = f", {1e6 * statistics.median(full):.1f} us once full (freeing the oldest record)" if full else ""
    print(f"  record call: {1e6 * statistics.median(filling):.1f} us while the pools fill{once_full}")
    if args.memory:
        tracemalloc.start()
        log = AttemptLog()
        one_run(nodes, pods, log)
        kept, estimate = len(log), log.bytes
        held = tracemalloc.get_traced_memory()[0]
        del log
        gc.collect()
        freed = held - tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(
            f"  records kept: {kept}, estimated {estimate / 2**20:.1f} MiB, "
            f"measured {freed / 2**20:.1f} MiB (what freeing the log released)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
