"""What extenders cost, and what their support costs the attempts that have none. One process, no API server.

    python bench/bench_extenders.py                      # all three parts, defaults below
    python bench/bench_extenders.py --part cycle --nodes 5000 --pods 5000
    python bench/bench_extenders.py --part extender --nodes 1000 --pods 200

- ``cycle``: the operator's per-pod path without extenders, in-process: ``parse_pod`` of a pending
  pod's watch body, then ``core.scheduling.cycle.schedule_one`` (assume included) with the DefaultProvider on
  node-default nodes; then, to see small changes through a busy machine's noise, the best of 25
  timings of ``parse_pod`` alone and of the cycle's own overhead (an empty profile, one node).
  Run it on two checkouts to compare (the script uses only what both have).
- ``hop``: one ``run_in_executor`` round trip from an asyncio loop to a worker thread and back,
  the price a threaded attempt pays on top of its algorithm; why attempts without extenders stay
  on the loop.
- ``extender``: attempts through a local HTTP extender (``http.server`` in another process, keep-alive)
  with a filter and a prioritize verb, node-cache capable (names only) or not (whole Node objects),
  so the per-attempt price of the calls and of encoding the nodes shows.

Prints per-pod microseconds or milliseconds (wall time, and for ``extender`` also this process's CPU
time: the rest is the extender's own work, which a real extender does in its own language); figures,
not pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import sys
import time
import timeit
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.config.policy import default_profile, validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling.cycle import Bind, CycleContext, schedule_one
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import SchedulingQueue

ZONES = ("zone-a", "zone-b", "zone-c")
#: this process's CPU seconds in the last run_cycles
_CPU = 0.0


#: the nodeInfo of a containerd node, as much of it as the extenders get
NODE_INFO = {
    "kubeletVersion": "v1.37.2",
    "containerRuntimeVersion": "containerd://2.0",
    "operatingSystem": "linux",
    "architecture": "amd64",
}


def node_body(i: int) -> dict[str, Any]:
    """node-default, with the status a kubelet reports (images, addresses...), so encoding it costs what it costs."""
    name = f"node-{i}"
    node = bodies.node_body(name).uid(f"uid-node-{i}").set("metadata.resourceVersion", str(1000 + i))
    node.hostname().platform(arch=None).zone(ZONES[i % 3]).set("spec.podCIDR", f"10.244.{i % 250}.0/24")
    node.capacity(cpu="4", memory="32Gi", pods="110", ephemeral_storage="100Gi")
    node.conditions({"Ready": "True", **bodies.NO_PRESSURE}, reason="Kubelet{type}", heartbeat="2024-01-01T00:00:00Z")
    node.address(f"10.0.{i // 250}.{i % 250}").address(name, "Hostname")
    for k in range(20):
        node.image(
            100_000_000 + k, f"registry.example/team/app-{k}@sha256:{k:064x}", f"registry.example/team/app-{k}:v{k}"
        )
    return node.node_info(NODE_INFO).obj()


def pod_body(i: int) -> dict[str, Any]:
    res = {"cpu": "100m", "memory": "500Mi"}
    pod = bodies.pod_body(f"pod-{i}", "bench").uid(f"uid-{i}").label(app="bench")
    pod.set("metadata.managedFields", [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}])
    pod.scheduler("kopf-scheduler").container("pause", "registry.k8s.io/pause:3.10").req(res).lim(res)
    return pod.phase("Pending").obj()


def cache_of(nodes: int) -> SchedulerCache:
    cache = SchedulerCache()
    for i in range(nodes):
        cache.add_node(parse_node(node_body(i)))
    return cache


def run_cycles(cache: SchedulerCache, scheduler: Any, pods: int) -> float:
    """Seconds for `pods` parse + schedule_one cycles (each bind confirmed at once, as the watch would)."""
    queue = SchedulingQueue()
    snapshot = Snapshot(cache.objects)
    rng = random.Random(0)
    bodies = [pod_body(i) for i in range(pods)]
    start, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        queue.add(parse_pod(body), 0.0)
        info = queue.pop(0.0)
        assert info is not None
        outcome = schedule_one(info, snapshot, CycleContext(scheduler, cache, queue, WaitingPods(), rng, 0.0))
        placed = getattr(outcome, "pod", None)
        if placed is not None:
            cache.add_pod(placed)
            queue.done(placed)
    global _CPU
    _CPU = time.process_time() - cpu
    return time.perf_counter() - start


def part_cycle(nodes: int, pods: int, rounds: int) -> None:
    from kopf_scheduler.core.scheduling.algorithm import GenericScheduler

    best = min(
        run_cycles(cache_of(nodes), GenericScheduler(default_profile("kopf-scheduler")), pods) for _ in range(rounds)
    )
    per_pod = f"{best / pods * 1e6:.0f} us/pod ({pods / best:.0f} pods/s)"
    print(f"cycle: {nodes} nodes, {pods} pods, best of {rounds}: {per_pod}")
    body = pod_body(0)
    parse = min(timeit.repeat(lambda: parse_pod(body), number=2000, repeat=25)) / 2000
    cache, queue, rng = cache_of(1), SchedulingQueue(), random.Random(0)
    scheduler, snapshot = GenericScheduler(Profile("s")), Snapshot(cache.objects)
    waiting = iter([parse_pod(pod_body(i)) for i in range(25 * 2000)])

    def one() -> None:
        queue.add(next(waiting), 0.0)
        info = queue.pop(0.0)
        assert info is not None
        outcome = schedule_one(info, snapshot, CycleContext(scheduler, cache, queue, WaitingPods(), rng, 0.0))
        assert isinstance(outcome, Bind)
        cache.forget(outcome.pod)
        queue.done(outcome.pod)

    overhead = min(timeit.repeat(one, number=2000, repeat=25)) / 2000
    print(
        f"cycle: parse_pod {parse * 1e6:.1f} us; "
        f"queue + schedule_one + forget, empty profile, 1 node: {overhead * 1e6:.1f} us (best of 25)"
    )


def part_hop(calls: int) -> None:
    pool = ThreadPoolExecutor(max_workers=4)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        for _ in range(calls):
            await loop.run_in_executor(pool, int)
        return time.perf_counter() - start

    seconds = asyncio.run(main())
    pool.shutdown()
    print(f"hop: run_in_executor round trip {seconds / calls * 1e6:.0f} us (mean of {calls})")


class _Extender(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        args = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        names = (
            args["NodeNames"]
            if args["NodeNames"] is not None
            else [n["metadata"]["name"] for n in args["Nodes"]["items"]]
        )
        if self.path.endswith("/filter"):
            keep = names[1:]
            answer: Any = (
                {"NodeNames": keep}
                if args["NodeNames"] is not None
                else {"Nodes": {"items": args["Nodes"]["items"][1:]}}
            )
            answer["FailedNodes"] = {names[0]: "first node refused"} if names else {}
        else:
            answer = [{"Host": n, "Score": len(n) % 11} for n in names]
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(ports: multiprocessing.Queue[int]) -> None:
    """The extender, in a process of its own so that its JSON work does not share our GIL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Extender)
    ports.put(int(server.server_address[1]))
    server.serve_forever()


def part_extender(nodes: int, pods: int) -> None:
    from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
    from kopf_scheduler.edge.extenders import HTTPExtender

    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=10)}/ext"
    try:
        base = run_cycles(cache_of(nodes), GenericScheduler(default_profile("kopf-scheduler")), pods)
        print(f"extender: {nodes} nodes, {pods} pods, no extender:{' ' * 34}{base / pods * 1e3:7.2f} ms/pod")
        for cache_capable in (True, False):
            extender = {"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize"}
            spec = {"schedulerName": "kopf-scheduler", "algorithmProvider": "DefaultProvider",
                    "extenders": [{**extender, "nodeCacheCapable": cache_capable}]}  # fmt: skip
            profile = validate_policy(spec)
            assert not isinstance(profile, list), profile
            seconds = run_cycles(cache_of(nodes), GenericScheduler(profile, extender_factory=HTTPExtender), pods)
            what = "node names (nodeCacheCapable)" if cache_capable else "whole Node objects        "
            cpu = _CPU
            print(
                f"extender: {nodes} nodes, {pods} pods, filter+prioritize, {what}: {seconds / pods * 1e3:7.2f} ms/pod, "
                f"{cpu / pods * 1e3:6.2f} ms/pod of our CPU"
            )
    finally:
        server.terminate()
        server.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("cycle", "hop", "extender", "all"), default="all")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--pods", type=int)
    ap.add_argument("--rounds", type=int, default=3, help="cycle: best of this many runs")
    args = ap.parse_args()
    if args.part in ("cycle", "all"):
        part_cycle(args.nodes or 1000, args.pods or 2000, args.rounds)
    if args.part in ("hop", "all"):
        part_hop(2000)
    if args.part in ("extender", "all"):
        for n in (args.nodes,) if args.nodes else (100, 1000):
            part_extender(n, args.pods or 200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
