"""Load: thousands of nodes and tens of thousands of pending pods at once; peak RSS, FailedScheduling
events per second, and whether the queue drains.

    python bench/bench_load.py                              # 5000 nodes, 20000 pending pods: the issue's size
    python bench/bench_load.py --nodes 500 --pods 3000      # what CI runs (tests/cluster/faults/test_load.py)
    python bench/bench_load.py --no-kwok                    # nodes created Ready, bound pods left Pending
    python bench/bench_load.py --no-controller-manager      # no kube-controller-manager beside the API server

On a fresh local control plane: ``--nodes`` nodes of scheduler_perf's node-default (4 cpu, 32Gi,
110 pods) that KWOK (``cluster.Kwok``: no heartbeats, no Leases) makes Ready, then ``--pods``
pending pods of pod-default (100m, 500Mi), of which ``--unschedulable`` (a fraction, default 10%)
ask for 64 cpu and fit nowhere. Only then is the operator started (``kopf-scheduler run``, not
verbose, admin credentials, today's default profile), so its queue starts with every pod. KWOK
runs each pod once it is bound (a status write, and an update event the operator's informer of
assigned pods takes in, as with real kubelets). The run has drained when every schedulable pod is
bound, every unschedulable one has a FailedScheduling event, and the operator's /metrics say its
active and backoff queues are empty.

Reported: the times (creating, the nodes Ready, the operator ready, drained, every bound pod
Running), the pods bound and Running, the FailedScheduling
events (in all, per second over the drain, the busiest second, the most any one pod got), the
operator's peak RSS (VmHWM) and its scheduler_pending_pods at the end. FailedScheduling events are
limited per pod (``core/framework/recording.py``: one per pod per 30 s, whatever the message) and in flight
(``kube/app.py`` WRITE_CONCURRENCY writes at once); there is no cluster-wide events/s cap.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_e2e import (
    CRD_FILE,
    NAMESPACE,
    BindWatch,
    Kube,
    _poll_http,
    _popen,
    _stopper,
    node_body,
    peak_rss_mib,
    pod_body,
)

from kopf_scheduler.cluster import bodies
from kopf_scheduler.cluster.controlplane import ControlPlane, free_port
from kopf_scheduler.cluster.kwok import Kwok, kwok_node
from kopf_scheduler.core.framework.recording import REPEAT_INTERVAL

SCHEDULER = "load"
#: pod-default (100m) on node-default (4 cpu): cpu is what fills a node first (memory: 65, pods: 110)
PODS_PER_NODE = 40
GROUP, VERSION, PLURAL = "scheduling.kopf.dev", "v1alpha1", "schedulingpolicies"


@dataclass
class LoadResult:
    nodes: int
    pods: int
    unschedulable: int
    kwok: bool = True  # KWOK made the nodes Ready and runs the bound pods
    controller_manager: bool = True  # kube-controller-manager ran beside the API server
    setup_s: float = 0.0  # creating the nodes and the pods
    nodes_ready_s: float = 0.0  # KWOK: the nodes created -> every one Ready
    ready_s: float = 0.0  # operator start -> /readyz 200
    drained_s: float = 0.0  # operator start -> drained (see the module docstring)
    last_bind_s: float = 0.0  # operator start -> the last schedulable pod bound
    bound: int = 0
    running: int = 0  # KWOK: bound pods seen Running
    last_running_s: float = 0.0  # KWOK: operator start -> the last bound pod Running
    reported_unschedulable: int = 0  # unschedulable pods with at least one FailedScheduling event
    failed_events: int = 0
    events_per_s: float = 0.0  # FailedScheduling events / the drain
    busiest_second: int = 0
    max_events_per_pod: int = 0
    #: the same message for the same pod again within REPEAT_INTERVAL: 0 when the per-pod limit holds
    repeats_within_limit: int = 0
    peak_rss_mib: float | None = None
    #: bound pods the cache dropped because the watch had not confirmed them within the assumption TTL
    expired_assumptions: int = 0
    #: nodes holding more pods than their cpu allows (every pod here asks the same): 0 unless the cache lost track
    overcommitted_nodes: int = 0
    pending_at_end: dict[str, float] = field(default_factory=dict)  # scheduler_pending_pods by queue
    error: str | None = None

    def summary(self) -> str:
        kubelets = (
            f"KWOK nodes Ready {self.nodes_ready_s:.1f}s after their creation; "
            if self.kwok
            else "nodes created Ready, no kubelet; "
        )
        running = (
            f", running {self.running} (the last {self.last_running_s:.1f}s after the operator's start)"
            if self.kwok
            else ""
        )
        controllers = "with kube-controller-manager" if self.controller_manager else "no kube-controller-manager"
        return (
            f"{self.nodes} nodes, {self.pods} pods ({self.unschedulable} fit nowhere), {controllers}: "
            f"set up in {self.setup_s:.0f}s; "
            + kubelets
            + f"operator ready after {self.ready_s:.1f}s, every pod bound after {self.last_bind_s:.1f}s, "
            f"drained after {self.drained_s:.1f}s; bound {self.bound}{running}, "
            f"unschedulable reported {self.reported_unschedulable}; FailedScheduling events {self.failed_events} "
            f"({self.events_per_s:.0f}/s over the drain, busiest second {self.busiest_second}, "
            f"at most {self.max_events_per_pod} per pod, "
            f"{self.repeats_within_limit} repeats within {REPEAT_INTERVAL:.0f}s); "
            f"peak RSS {self.peak_rss_mib or 0:.0f} MiB; pending at the end {self.pending_at_end}; "
            f"assumptions expired before the watch confirmed them {self.expired_assumptions}; "
            f"overcommitted nodes {self.overcommitted_nodes}" + (f"; ERROR {self.error}" if self.error else "")
        )


class FailedSchedulingWatch:
    """When each FailedScheduling event of the namespace was seen, per pod."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.seen: list[tuple[float, str, str]] = []  # (time.monotonic(), pod, message)
        #: (the event's eventTime as the operator wrote it, pod): the limiter's own clock, which a
        #: backlog of writes does not shift as it shifts when the watch sees them
        self.stamped: list[tuple[float, str]] = []
        self._names: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        path = f"{self.kube.server}/api/v1/namespaces/{NAMESPACE}/events"
        selector = "reason=FailedScheduling"
        listed = await self.kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/events", fieldSelector=selector)
        version = str(listed["metadata"]["resourceVersion"])
        while True:
            params = {"watch": "1", "resourceVersion": version, "fieldSelector": selector, "timeoutSeconds": "1800"}
            async with self.kube.session.get(path, params=params) as resp:
                resp.raise_for_status()
                async for line in resp.content:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"event watch: {event['object']}")
                    version = event["object"]["metadata"]["resourceVersion"]
                    name = event["object"]["metadata"]["name"]
                    if event["type"] == "ADDED" and name not in self._names:
                        self._names.add(name)
                        pod = event["object"]["involvedObject"]["name"]
                        self.seen.append((time.monotonic(), pod, event["object"].get("message", "")))
                        if stamp := event["object"].get("eventTime"):
                            self.stamped.append((datetime.fromisoformat(stamp).timestamp(), pod))

    def pods(self) -> set[str]:
        return {pod for _, pod, _ in self.seen}

    def repeats(self, interval: float = REPEAT_INTERVAL) -> int:
        """Events for a pod written less than `interval` seconds after its last one (by their eventTime),
        whatever their messages: 0 when the limit holds."""
        last: dict[str, float] = {}
        out = 0
        for t, pod in sorted(self.stamped):
            if t - last.get(pod, -interval) < interval:
                out += 1
            last[pod] = t
        return out

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def pending_pods(port: int) -> dict[str, float]:
    """scheduler_pending_pods by queue, from the operator's /metrics."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        text = await resp.text()
    out = {}
    for line in text.splitlines():
        if line.startswith("scheduler_pending_pods{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('queue="', 1)[1].split('"', 1)[0]] = float(value)
    return out


async def established(kube: Kube, crd: str, timeout: float = 60.0) -> None:
    """Wait until the CRD is served (its Established condition is True)."""
    deadline = time.monotonic() + timeout
    while True:
        body = await kube.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", ok=(404,))
        conditions = ((body or {}).get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {crd} not established after {timeout:.0f}s")
        await asyncio.sleep(0.2)


def kwok_node_body(i: int) -> dict[str, Any]:
    """bench_e2e's node_body(i) for KWOK to make Ready: the same node, an InternalIP, no conditions."""
    node = bodies.node_body(f"node-{i:05d}").hostname().zone(f"zone{i % 3 + 1}").platform(arch=None)
    node.capacity(cpu="4", memory="32Gi", pods="110").address(bodies.fake_node_ip(i))
    return kwok_node(node).obj()


class LifecycleWatch(BindWatch):
    """BindWatch, and when each bound pod was first seen Running (KWOK's pod-ready stage)."""

    def __init__(self, kube: Kube, expected: int) -> None:
        super().__init__(kube, expected, on_first=lambda: None, on_last=lambda: None)
        self.running: dict[str, float] = {}  # pod name -> time.monotonic() when seen Running

    def _see(self, obj: dict[str, Any], now: float) -> None:
        super()._see(obj, now)
        name = obj["metadata"]["name"]
        if (obj.get("status") or {}).get("phase") == "Running" and name not in self.running:
            self.running[name] = now


def big_pod(name: str) -> dict[str, Any]:
    body = pod_body("default", name, NAMESPACE, SCHEDULER)
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}}
    return body


async def run_load(
    cp: ControlPlane,
    workdir: Path,
    *,
    nodes: int,
    pods: int,
    unschedulable: float = 0.1,
    timeout: float = 1800.0,
    kwok: bool = True,
) -> LoadResult:
    """One load run on `cp` (nodes and pods are created in it); see the module docstring."""
    if not kwok:
        return await _run_load(cp, workdir, None, nodes=nodes, pods=pods, unschedulable=unschedulable, timeout=timeout)
    # WARN: at INFO KWOK logs a line per node and pod it patches
    with Kwok(cp, log_level="WARN") as kubelets:
        return await _run_load(
            cp, workdir, kubelets, nodes=nodes, pods=pods, unschedulable=unschedulable, timeout=timeout
        )


async def _run_load(
    cp: ControlPlane,
    workdir: Path,
    kubelets: Kwok | None,
    *,
    nodes: int,
    pods: int,
    unschedulable: float,
    timeout: float,
) -> LoadResult:
    too_big = int(pods * unschedulable)
    result = LoadResult(nodes, pods, too_big, kwok=kubelets is not None, controller_manager=cp.controller_manager)
    kube = Kube(cp.kubeconfig)
    try:
        t0 = time.monotonic()
        await kube.call(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            ok=(409,),
        )
        if kubelets is None:
            await kube.create_all("/api/v1/nodes", [node_body(i) for i in range(nodes)])
        else:
            node_bodies = [kwok_node_body(i) for i in range(nodes)]
            created = time.monotonic()
            await kube.create_all("/api/v1/nodes", node_bodies)
            names = [b["metadata"]["name"] for b in node_bodies]
            await asyncio.to_thread(kubelets.wait_nodes_ready, names, 120.0)
            result.nodes_ready_s = time.monotonic() - created
        await asyncio.to_thread(cp.kubectl, "apply", "-f", str(CRD_FILE))
        await established(kube, f"{PLURAL}.{GROUP}")
        policy = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SchedulingPolicy",
            "metadata": {"name": SCHEDULER},
            "spec": {"schedulerName": SCHEDULER},
        }
        await kube.call("POST", f"/apis/{GROUP}/{VERSION}/{PLURAL}", policy)
        names = [f"pod-{i:05d}" for i in range(pods)]
        # the big ones spread evenly among the others: pod i is big when (i+1)*too_big/pods crosses an integer
        big = {n for i, n in enumerate(names) if (i * too_big) // pods != ((i + 1) * too_big) // pods}
        bodies = [big_pod(n) if n in big else pod_body("default", n, NAMESPACE, SCHEDULER) for n in names]
        await kube.create_all(f"/api/v1/namespaces/{NAMESPACE}/pods", bodies)
        result.setup_s = time.monotonic() - t0
        schedulable = pods - too_big
        watch = LifecycleWatch(kube, schedulable)
        events = FailedSchedulingWatch(kube)
        await watch.start()
        await events.start()
        port = free_port()
        log = workdir / "operator.log"
        argv = [
            sys.executable,
            "-m",
            "kopf_scheduler.commands",
            "run",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--secure-port",
            "0",
            "--insecure-port",
            str(port),
        ]
        proc = _popen(argv, log)
        stop = _stopper(proc)
        started = time.monotonic()
        try:
            await _poll_http(f"http://127.0.0.1:{port}/readyz", lambda: proc.poll() is None, log, 300)
            result.ready_s = time.monotonic() - started
            deadline = started + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the operator exited ({proc.returncode}); see {log}")
                if len(watch.bound) >= schedulable and big <= events.pods():
                    result.pending_at_end = await pending_pods(port)
                    if result.pending_at_end.get("active", 1) == 0 and result.pending_at_end.get("backoff", 1) == 0:
                        break
                if time.monotonic() > deadline:
                    result.pending_at_end = await pending_pods(port)
                    raise TimeoutError(
                        f"not drained after {timeout:.0f}s: {len(watch.bound)}/{schedulable} bound, "
                        f"{len(big & events.pods())}/{too_big} reported"
                    )
                await asyncio.sleep(0.5)
            result.drained_s = time.monotonic() - started
            if kubelets is not None:  # KWOK runs the last bound pods a moment after their bind
                while len(watch.running) < len(watch.bound) and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
            result.peak_rss_mib = peak_rss_mib(proc.pid)
        except Exception as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            result.peak_rss_mib = peak_rss_mib(proc.pid)
        finally:
            await stop()
            await watch.stop()
            await events.stop()
        result.bound = len(watch.bound)
        if watch.bound and len(watch.bound) >= schedulable:
            result.last_bind_s = max(watch.bound.values()) - started
        result.running = len(watch.running)
        if watch.running:
            result.last_running_s = max(watch.running.values()) - started
        result.reported_unschedulable = len(big & events.pods())
        times = [t for t, _, _ in events.seen]
        result.failed_events = len(times)
        if times and result.drained_s:
            result.events_per_s = len(times) / result.drained_s
            result.busiest_second = max(Counter(int(t - started) for t in times).values())
        result.max_events_per_pod = max(Counter(pod for _, pod, _ in events.seen).values(), default=0)
        result.expired_assumptions = log.read_text(errors="replace").count(
            "expired: the watch never confirmed its binding"
        )
        result.overcommitted_nodes = sum(1 for n in Counter(watch.node_of.values()).values() if n > PODS_PER_NODE)
        result.repeats_within_limit = events.repeats()
    finally:
        await kube.close()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument(
        "--unschedulable", type=float, default=0.1, help="fraction of the pods that fit nowhere (default 0.1)"
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds for the operator to drain the queue")
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="run no kube-controller-manager beside the API server (the operator alone with it on the cores)",
    )
    ap.add_argument(
        "--no-kwok",
        dest="kwok",
        action="store_false",
        help="create the nodes Ready and run no kubelet (bound pods stay Pending), as before KWOK",
    )
    args = ap.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-load-") as tmp,
        ControlPlane(Path(tmp) / "cp", die_with_parent=True, controller_manager=args.controller_manager) as cp,
    ):
        result = asyncio.run(
            run_load(
                cp,
                Path(tmp),
                nodes=args.nodes,
                pods=args.pods,
                unschedulable=args.unschedulable,
                timeout=args.timeout,
                kwok=args.kwok,
            )
        )
        if result.error:
            print((Path(tmp) / "operator.log").read_text()[-3000:], file=sys.stderr)
    print(result.summary())
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 1 if result.error else 0


if __name__ == "__main__":
    sys.exit(main())
