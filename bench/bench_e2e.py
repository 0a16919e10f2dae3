"""End-to-end scheduling benchmark on a real API server: kopf-scheduler against upstream and two ceilings.

    python bench/bench_e2e.py --quick                      # all but the 5000/15000-node workloads, small, 1 round
    python bench/bench_e2e.py                              # every workload, 3 rounds (about 40 min on 2 cores)
    python bench/bench_e2e.py --workloads basic-200,basic-5000 --rounds 3
    python bench/bench_e2e.py --workloads steady --contenders ours,upstream --rate 100
    python bench/bench_e2e.py --workloads basic-200 --contenders ours --profile-ours /tmp/prof   # py-spy

Each workload gets a fresh local control plane (etcd + kube-apiserver + kube-controller-manager v1.37.2,
see kopf_scheduler.cluster; ``--no-controller-manager`` leaves the controllers out, so that only the
contender and the API server share the cores; the output says which way it ran) with its nodes. The
contenders then run in turn on it, each as its own process, with the same nodes and the same pods
(only spec.schedulerName differs), in `--rounds` rounds whose order rotates, so slow drift and noise
cancel in the per-round ratios:

- ours:       ``kopf-scheduler run --kubeconfig K --secure-port 0 --insecure-port P`` (the production
              entry; P is a free port for /readyz over plain HTTP, the development mode) after the CRD
              (crds/schedulingpolicy.yaml) and one shipped policy (`--policy-file`) are applied;
- upstream:   kube-scheduler v1.37.2 from the same build, its default profile (default-scheduler),
              client qps/burst 5000 as scheduler_perf sets them, leader election off;
- raw:        bench/raw_binder.py: binds pending pods round-robin, 64 in flight: the ceiling;
- raw-events: the same, plus one Scheduled Event per pod posted right after its bind, as a
              scheduler does it: without holding up the next bind, on a connection pool of its own;
- ours-chaos: ours through tests/cluster/faults/netfaults.py's ChaosProxy, a flaky load balancer (half
              of the server's chunks split into 1-16 byte pieces, 2% reset part-way, connections closed
              after 0.3-3 s idle, 5% of discovery answers cut short), logged in with a ServiceAccount
              token (a client certificate ends at the proxy): the report adds ours-chaos/ours per round.

What is counted. The pods are created first (steady arrival excepted), then the contender is
started; the benchmark waits for it to report ready (ours and upstream: /readyz; the raw binders: a
file written after their initial lists) and records when, and how many binds came before. One pod
watch in this process records when each pod's spec.nodeName first appears, and where. Throughput =
pods bound / (last bind - first bind): start-up, informer sync and pod creation are outside the
window. A scheduler's job ends with its Scheduled event, so one event watch (core/v1 Events of the
measured namespace, reason=Scheduled as a server-side field selector; upstream writes
events.k8s.io/v1 Events, the same objects seen through core/v1) records when each pod's first
Scheduled event appears, matched by involvedObject.uid (by name if an event has no uid). After the
last bind the benchmark waits up to `--event-timeout` s for the events still missing; those that
never come are counted and named. Throughput to the last event = pods with an event / (last
Scheduled event - first bind); the lag of a pod is its event's arrival minus its bind's, both as
this process's watches see them (p50, p99, max; min in the JSON). The two streams travel apart: the
API server keeps no watch cache for events (kube-apiserver's DefaultWatchCacheSizes), so events come
straight from etcd while pods come through the watch cache, which falls behind under load: then an
event can be seen before its bind (a negative lag), and a lag understates how late the event was.
"Ready after" and "first bind after" count from the contender's process start (its start time in
/proc/PID/stat, 10 ms ticks, the same for every contender; the time the benchmark spent before that,
e.g. issuing upstream's client certificate, is `spawn_s` in the JSON). CPU is utime+stime(+children)
from /proc/PID/stat of the contender and its descendants between the first and the last bind, per
1000 pods, and again until the last Scheduled event; the API server's, etcd's and this process's CPU
over the first window are recorded too (all share the machine's cores), and so is the CPU the rest
of the machine burnt meanwhile ("others' load", in cores: other users of a shared machine). Peak RSS
is VmHWM at the end. "Longest pause" is the longest gap between two consecutive binds in the window
(a scheduler that stops for a relist, a restart or a lost connection shows it there). "Nodes used"
counts the distinct nodes the pods went to: a spreading scheduler
that saw every node uses min(pods, feasible nodes). In steady arrival the pods are created at
`--rate` pods/s once the contender is ready, and latency runs from the 201 of each create to the
watch seeing the bind.

Workloads follow upstream test/integration/scheduler_perf (templates node-default, pod-default,
pod-with-node-affinity, pod-with-pod-anti-affinity, pod-with-topology-spreading); "init" pods are
created already bound (spec.nodeName set), so they load the nodes without being scheduled. The
basic-15000 is scheduler_perf's largest SchedulingBasic size (15000 nodes). The
"memory" workload places 20k of them on 5000 nodes: what a scheduler's cache of a large cluster
costs shows in its peak RSS, which the overview quotes for it. One deviation: nodes are spread over
zone1..zone3 in every workload, so node affinity (zone In [zone1, zone2]) rules out a third of them
(scheduler_perf labels every node zone1).

Each ratio line also prints upstream's own figure over its rounds and their spread, and a ratio whose
per-round range crosses 1.0 is called parity: upstream alone moves that much from round to round.
``ours/raw binder + events`` (per round, pods/s to the last Scheduled event) is ours' share of the
physical limit on the machine.

Results: a table on stdout; bench/results/e2e-<stamp>.{json,md} plus a PNG of bound pods over time
per workload (with matplotlib: ``pip install -e '.[bench]'``), and the same as latest* (or
latest-quick* with --quick, which leaves the full run's latest* alone). To draw
the Markdown and PNGs of a JSON again: ``python bench/e2e_report.py bench/results/latest.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

import e2e_report
from raw_binder import kube_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cluster" / "faults"))
from netfaults import ChaosProxy, proxied_kubeconfig  # the fault suite's own proxy

from kopf_scheduler.cluster import bodies
from kopf_scheduler.cluster.build import ensure_binaries
from kopf_scheduler.cluster.controlplane import ControlPlane, free_port

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"  # the measured pods; emptied between contenders
INIT_NAMESPACE = "bench-init"  # pods created already bound; they stay for the whole workload
CRD_FILE = ROOT / "crds" / "schedulingpolicy.yaml"
POLICIES = ROOT / "deploy" / "policies"
RESULTS = ROOT / "bench" / "results"
RAW_BINDER = ROOT / "bench" / "raw_binder.py"
UPSTREAM_PROFILE = "default-scheduler (kube-scheduler's default profile: its default plugins and weights)"
UPSTREAM_QPS = 5000
IN_FLIGHT = 64  # concurrent API requests of this process (creates, deletes), and the raw binders' binds and events
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Size:
    nodes: int
    pods: int
    init_pods: int = 0


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    pod: str  # pod shape, see pod_body()
    full: Size
    quick: Size | None  # None: skipped by --quick
    init_pod: str = "default"
    steady: bool = False  # pods arrive at --rate while the contender runs
    memory: bool = False  # the overview quotes peak RSS (a large cache: the init pods)

    def size(self, quick: bool) -> Size:
        return self.quick if quick and self.quick is not None else self.full


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("basic-200", "SchedulingBasic", "default", Size(200, 1000), Size(200, 500)),
        Workload("basic-5000", "SchedulingBasic", "default", Size(5000, 2000), None),
        Workload("basic-15000", "SchedulingBasic", "default", Size(15000, 3000), None),
        Workload(
            "node-affinity",
            "SchedulingNodeAffinity (zone In [zone1, zone2])",
            "node-affinity",
            Size(500, 1000, 500),
            Size(200, 300, 100),
            init_pod="node-affinity",
        ),
        Workload(
            "anti-affinity",
            "SchedulingPodAntiAffinity (required, hostname)",
            "anti-affinity",
            Size(500, 400, 100),
            Size(200, 160, 40),
            init_pod="anti-affinity",
        ),
        Workload(
            "topology-spread",
            "TopologySpreading (zone, maxSkew 5, DoNotSchedule)",
            "topology-spread",
            Size(500, 1000, 1000),
            Size(200, 300, 200),
        ),
        Workload("steady", "SchedulingBasic, steady arrival", "default", Size(200, 1000), Size(200, 500), steady=True),
        Workload("memory", "SchedulingBasic, 20k pods placed", "default", Size(5000, 1000, 20000), None, memory=True),
    )
}


def node_body(i: int) -> dict[str, Any]:
    """scheduler_perf's node-default (4 cpu, 32Gi, 110 pods, Ready) with hostname and a zone."""
    node = bodies.node_body(f"node-{i:05d}").hostname().zone(f"zone{i % 3 + 1}").platform(arch=None)
    # a Node may carry its status on create (pkg/registry/core/node/strategy.go), as kubelets do
    return node.capacity(cpu="4", memory="32Gi", pods="110").ready().set("status.phase", "Running").obj()


def pod_body(shape: str, name: str, namespace: str, scheduler_name: str, node: str | None = None) -> dict[str, Any]:
    """A pod of scheduler_perf's templates: pod-default, or it plus the shape's constraint."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    pod = bodies.pod_body(name, namespace).scheduler(scheduler_name)
    pod.container("pause", "registry.k8s.io/pause:3.10.2").port(80).req(resources).lim(resources)
    if shape == "node-affinity":
        pod.node_affinity_in(ZONE, "zone1", "zone2")
    elif shape == "anti-affinity":
        pod.label(color="green").pod_affinity(
            HOSTNAME, {"color": "green"}, anti=True, namespaces=[NAMESPACE, INIT_NAMESPACE]
        )
    elif shape == "topology-spread":
        pod.label(color="blue").spread(5, ZONE, "DoNotSchedule", {"matchLabels": {"color": "blue"}})
    elif shape != "default":
        raise ValueError(f"unknown pod shape {shape!r}")
    if node is not None:
        pod.node(node)
    return pod.obj()


def init_node(shape: str, i: int, nodes: int) -> str:
    """Where init pod `i` sits: round-robin over the nodes its constraint allows."""
    if shape == "node-affinity":  # zone1 and zone2: node indices n with n % 3 != 2
        eligible = [n for n in range(nodes) if n % 3 != 2]
        return str(node_body(eligible[i % len(eligible)])["metadata"]["name"])
    return str(node_body(i % nodes)["metadata"]["name"])  # anti-affinity: init_pods <= nodes, one per node


# --------------------------------------------------------------------------- /proc


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from 3 (state) on; the name may hold spaces


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (a scan of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid: int | None, *, tree: bool = False) -> float | None:
    """utime+stime+cutime+cstime of `pid` (and of its live descendants with `tree`), in seconds."""
    if pid is None:
        return None
    total = 0.0
    for p in [pid, *(descendants(pid) if tree else [])]:
        fields = _stat_fields(p)
        if fields is None:
            if p == pid:
                return None
            continue
        total += sum(int(x) for x in fields[11:15]) / CLK_TCK  # stat fields 14..17
    return total


def process_start(pid: int | None) -> float | None:
    """When `pid` started, on time.monotonic()'s clock (to half a clock tick, 5 ms); None if it is gone.

    The kernel keeps a start time in clock ticks since boot (stat field 22), the same for a Python
    child of ours and for a Go binary the control plane starts in another thread after issuing its
    client certificate."""
    fields = _stat_fields(pid) if pid is not None else None
    if fields is None:
        return None
    since_boot = (int(fields[19]) + 0.5) / CLK_TCK  # the middle of its tick
    return since_boot - (time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic())


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent busy since boot (the "cpu" line of /proc/stat, less idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK  # user nice system idle iowait irq softirq steal


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM of `pid` plus that of its live descendants, MiB."""
    total = 0.0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            if p == pid:
                return None
    return total


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Have Linux SIGKILL a contender if the benchmark dies, so nothing is left behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


# --------------------------------------------------------------------------- the API


class Kube:
    """This process's raw-JSON client: one aiohttp session, IN_FLIGHT requests at once."""

    def __init__(self, kubeconfig: Path) -> None:
        self.server, self.session = kube_session(kubeconfig, limit=IN_FLIGHT + 3)  # + the two watches, + 1 spare
        self.slots = asyncio.Semaphore(IN_FLIGHT)

    async def call(self, method: str, path: str, body: Any = None, *, ok: Sequence[int] = (), **params: str) -> Any:
        async with (
            self.slots,
            self.session.request(
                method, self.server + path, params=params, data=None if body is None else json.dumps(body)
            ) as resp,
        ):
            text = await resp.text()
            if resp.status >= 300 and resp.status not in ok:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status} {text[:300]}")
            return json.loads(text) if text else None

    async def create_all(self, path: str, bodies: Sequence[dict[str, Any]]) -> None:
        await asyncio.gather(*(self.call("POST", path, b) for b in bodies))

    async def empty(self, namespace: str) -> None:
        """Delete every pod (grace 0) and event of `namespace`; return once no pod is left.

        A collection of many thousand pods may outlast the API server's request timeout (504, the
        deletion stops where it got): then it is asked again."""
        while True:
            await self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods", ok=(504,), gracePeriodSeconds="0")
            await self.call("DELETE", f"/api/v1/namespaces/{namespace}/events", ok=(504,))
            for _ in range(50):
                if not (await self.call("GET", f"/api/v1/namespaces/{namespace}/pods", limit="1"))["items"]:
                    return
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        await self.session.close()


class Watch:
    """List, then watch, one collection of the measured namespace (only what `selector` lets through):
    each object goes to `_see` with the time its line arrived. Used once per contender run."""

    path = ""
    selector = ""  # a server-side field selector ("": everything): what is not sent costs nothing to parse

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._task: asyncio.Task[None] | None = None

    def _see(self, obj: dict[str, Any], now: float) -> None:
        raise NotImplementedError

    async def _list(self) -> str:
        listed = await self.kube.call("GET", self.path, fieldSelector=self.selector)
        now = time.monotonic()
        for obj in listed["items"]:
            self._see(obj, now)
        return str(listed["metadata"]["resourceVersion"])

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(await self._list()))

    async def _watch(self, resource_version: str) -> None:
        url = self.kube.server + self.path
        while True:
            params = {
                "watch": "1",
                "fieldSelector": self.selector,
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "1800",
            }
            async with self.kube.session.get(url, params=params) as resp:
                resp.raise_for_status()
                async for line in resp.content:
                    now = time.monotonic()
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        resource_version = await self._list()
                        break
                    resource_version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._see(event["object"], now)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if not self._task.cancelled() and self._task.exception() is not None:
                raise self._task.exception()  # type: ignore[misc]


class BindWatch(Watch):
    """The measured pods: the moment each pod's spec.nodeName first appears."""

    path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    def __init__(self, kube: Kube, expected: int, *, on_first: Callable[[], None], on_last: Callable[[], None]) -> None:
        super().__init__(kube)
        self.expected = expected
        self.on_first, self.on_last = on_first, on_last
        self.bound: dict[str, float] = {}  # pod name -> time.monotonic() when seen bound
        self.node_of: dict[str, str] = {}  # pod name -> its node
        self.uid_of: dict[str, str] = {}  # pod name -> its uid (what events name)
        self.all_bound = asyncio.Event()

    def _see(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        if obj["spec"].get("nodeName") and name not in self.bound:
            self.bound[name] = now
            self.node_of[name] = obj["spec"]["nodeName"]
            self.uid_of[name] = obj["metadata"].get("uid", "")
            if len(self.bound) == 1:
                self.on_first()
            if len(self.bound) == self.expected:
                self.on_last()
                self.all_bound.set()


class EventWatch(Watch):
    """The measured pods' Scheduled events: the moment each pod's first one appears.

    core/v1 Events, reason=Scheduled. Upstream writes events.k8s.io/v1 Events: the same objects,
    their `regarding` read here as `involvedObject`. Keyed by involvedObject.uid; an event that
    names no uid is kept by the pod's name."""

    path = f"/api/v1/namespaces/{NAMESPACE}/events"
    selector = "reason=Scheduled"

    def __init__(self, kube: Kube, expected: int, *, on_last: Callable[[], None]) -> None:
        super().__init__(kube)
        self.expected = expected
        self.on_last = on_last
        self.by_uid: dict[str, float] = {}  # involvedObject.uid -> time.monotonic() when first seen
        self.by_name: dict[str, float] = {}  # pod name -> the same, for events without a uid
        self.all_seen = asyncio.Event()

    def __len__(self) -> int:
        return len(self.by_uid) + len(self.by_name)

    def time_of(self, name: str, uid: str) -> float | None:
        return self.by_uid[uid] if uid in self.by_uid else self.by_name.get(name)

    def expect(self, expected: int) -> None:
        """Fewer pods were bound than planned: their events are all there is to wait for."""
        self.expected = expected
        self._check()

    def _check(self) -> None:
        if len(self) >= self.expected and not self.all_seen.is_set():
            self.on_last()
            self.all_seen.set()

    def _see(self, obj: dict[str, Any], now: float) -> None:
        involved = obj.get("involvedObject") or {}
        key, seen = involved.get("uid"), self.by_uid
        if not key:
            key, seen = involved.get("name", ""), self.by_name
        if key not in seen:
            seen[key] = now
            self._check()


# --------------------------------------------------------------------------- contenders


@dataclass
class Running:
    """A started contender: how to find its pid, wait until it is ready, and stop it."""

    pid: Callable[[], int | None]
    ready: Callable[[], Awaitable[str]]  # returns the contender's own readiness text
    stop: Callable[[], Awaitable[None]]
    log: Path


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    scheduler_name: str
    start: Callable[[Bench], Running]
    events: bool = True  # writes a Scheduled event per pod: the benchmark waits for them and measures them


def _popen(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "operator"), os.environ.get("PYTHONPATH")])),
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _stopper(proc: subprocess.Popen[bytes], grace: float = 10.0) -> Callable[[], Awaitable[None]]:
    async def stop() -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await asyncio.to_thread(proc.wait, 5)

    return stop


async def _poll_http(url: str, proc_alive: Callable[[], bool], log: Path, timeout: float) -> str:
    """GET `url` until 200; return its body. Fails if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while True:
            if not proc_alive():
                raise RuntimeError(f"contender exited while starting; end of {log}:\n{e2e_report.tail(log)}")
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with session.get(url, ssl=False) as resp:
                    if resp.status == 200:
                        return (await resp.text()).strip()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} not ready after {timeout:.0f}s; end of {log}:\n{e2e_report.tail(log)}")
            await asyncio.sleep(0.05)


def start_ours(bench: Bench, *, kubeconfig: Path | None = None, log_name: str = "ours.log") -> Running:
    port = free_port()
    log = bench.workdir / log_name
    argv = [
        sys.executable,
        "-m",
        "kopf_scheduler.commands",
        "run",
        "--kubeconfig",
        str(kubeconfig or bench.cp.kubeconfig),
        "--secure-port",
        "0",
        "--insecure-port",
        str(port),
    ]
    if bench.args.record_ours is not None:  # a live trace for bench_replay.py --trace (one directory a run)
        bench.record_round += 1
        argv += ["--record", str(bench.args.record_ours / f"{bench.workdir.name}-{bench.record_round}")]
    proc = _popen(argv, log)

    async def ready() -> str:
        url = f"http://127.0.0.1:{port}/readyz"
        return await _poll_http(url, lambda: proc.poll() is None, log, bench.args.ready_timeout)

    return Running(pid=lambda: proc.pid, ready=ready, stop=_stopper(proc), log=log)


CHAOS_SEED = 24


def start_ours_chaos(bench: Bench) -> Running:
    """Ours through a ChaosProxy of its own (a fresh seed per run), as a ServiceAccount bound to cluster-admin."""
    token = bench.workdir / "chaos-admin.kubeconfig"
    if not token.exists():
        bench.cp.service_account_kubeconfig("kube-system", "bench-chaos", expiration_seconds=86400, path=token)
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "bench-chaos"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "bench-chaos", "namespace": "kube-system"}],
        }
        with contextlib.suppress(Exception):  # exists already
            bench.cp.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    bench.chaos_runs += 1
    chaos = ChaosProxy(bench.cp, seed=CHAOS_SEED + bench.chaos_runs).start()
    config = proxied_kubeconfig(token, chaos, bench.workdir / "chaos.kubeconfig")
    running = start_ours(bench, kubeconfig=config, log_name="ours-chaos.log")
    stop_ours = running.stop

    async def stop() -> None:
        await stop_ours()
        bench.progress.note(f"chaos proxy: {chaos.stats.line()}")
        chaos.close()

    running.stop = stop
    return running


def start_upstream(bench: Bench) -> Running:
    name = "kube-scheduler"
    config = bench.workdir / "kube-scheduler-config.yaml"
    # qps/burst lifted as scheduler_perf does, so the peer is measured on scheduling, not on its
    # client throttle (default qps 50); no profiles listed = the default profile.
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {bench.cp.workdir / (name + '.kubeconfig')}, "
        f"qps: {UPSTREAM_QPS}, burst: {UPSTREAM_QPS}}}\n"
        "leaderElection: {leaderElect: false}\n"
    )
    # start_kube_scheduler blocks until /healthz answers: run it beside the event loop, which must
    # keep reading the watch meanwhile (upstream may bind before /healthz is polled)
    started = asyncio.ensure_future(
        asyncio.to_thread(
            bench.cp.start_kube_scheduler, [f"--config={config}", "-v=1"], name=name, timeout=bench.args.ready_timeout
        )
    )
    log = bench.cp.workdir / f"{name}.log"

    async def ready() -> str:
        await started
        port = bench.cp.port(name)
        return await _poll_http(
            f"https://127.0.0.1:{port}/readyz", lambda: name in bench.cp.pids(), log, bench.args.ready_timeout
        )

    async def stop() -> None:
        with contextlib.suppress(Exception):
            await started
        await asyncio.to_thread(bench.cp.stop_process, name)

    return Running(pid=lambda: bench.cp.pids().get(name), ready=ready, stop=stop, log=log)


def _start_raw(bench: Bench, *, events: bool) -> Running:
    ready_file = bench.workdir / f"raw-binder-{time.monotonic_ns()}.ready"
    log = bench.workdir / ("raw-binder-events.log" if events else "raw-binder.log")
    argv = [
        sys.executable,
        str(RAW_BINDER),
        "--kubeconfig",
        str(bench.cp.kubeconfig),
        "--scheduler-name",
        "raw-binder",
        "--in-flight",
        str(IN_FLIGHT),
        "--ready-file",
        str(ready_file),
        *(["--events", "--event-in-flight", str(IN_FLIGHT)] if events else []),
    ]
    proc = _popen(argv, log)

    async def ready() -> str:
        deadline = time.monotonic() + bench.args.ready_timeout
        while not ready_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"raw binder not ready; end of {log}:\n{e2e_report.tail(log)}")
            await asyncio.sleep(0.02)
        return ready_file.read_text().strip()

    return Running(pid=lambda: proc.pid, ready=ready, stop=_stopper(proc), log=log)


def start_profiler(bench: Bench, running: Running, name: str) -> Callable[[], Awaitable[str]] | None:
    """With --profile-ours: py-spy samples ours from now (it is ready) until the returned stop() is awaited.

    stop() returns the path of the collapsed stacks and writes a summary beside them (`.top.txt`).
    Profiled runs are slower (py-spy takes CPU on the same cores) and are marked so in the JSON.
    """
    if bench.args.profile_ours is None or (pid := running.pid()) is None:
        return None
    bench.args.profile_ours.mkdir(parents=True, exist_ok=True)
    out = bench.args.profile_ours / f"ours-{name}.txt"
    spy = subprocess.Popen(
        [
            bench.args.py_spy,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--nolineno",
            "--rate",
            "100",
            "--nonblocking",
            "-o",
            str(out),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
    )

    async def stop() -> str:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        await asyncio.to_thread(spy.wait, 30)
        if out.exists():
            summary = e2e_report.profile_summary(out.read_text())
            out.with_suffix(".top.txt").write_text(summary)
            bench.progress.note(f"py-spy: {out}\n" + "\n".join(summary.splitlines()[:16]))
        return str(out)

    return stop


def policy_scheduler_name(policy_file: Path) -> str:
    return str(yaml.safe_load(policy_file.read_text())["spec"]["schedulerName"])


def describe_policy(policy_file: Path) -> str:
    policy = yaml.safe_load(policy_file.read_text())
    spec = policy.get("spec", {})
    if spec.get("algorithmProvider"):
        what = f"algorithmProvider {spec['algorithmProvider']}"
    elif spec.get("predicates") or spec.get("priorities"):
        what = f"{len(spec.get('predicates', []))} predicates, {len(spec.get('priorities', []))} priorities"
    else:
        what = "the default profile"
    where = policy_file.relative_to(ROOT) if policy_file.is_relative_to(ROOT) else policy_file
    return f"SchedulingPolicy {policy['metadata']['name']} ({what}) from {where}"


def contenders(policy_file: Path) -> dict[str, Contender]:
    return {
        c.key: c
        for c in (
            Contender(
                "raw",
                f"raw binder ({IN_FLIGHT} in flight)",
                "raw-binder",
                lambda b: _start_raw(b, events=False),
                events=False,
            ),
            Contender(
                "raw-events", "raw binder + Scheduled events", "raw-binder", lambda b: _start_raw(b, events=True)
            ),
            Contender("upstream", "kube-scheduler v1.37.2", "default-scheduler", start_upstream),
            Contender("ours", f"kopf-scheduler ({policy_file.stem})", policy_scheduler_name(policy_file), start_ours),
            Contender(
                "ours-chaos",
                f"kopf-scheduler ({policy_file.stem}) through a flaky load balancer",
                policy_scheduler_name(policy_file),
                start_ours_chaos,
            ),
        )
    }


# --------------------------------------------------------------------------- one run


@dataclass
class Run:
    """One contender, one round, one workload: the JSON record."""

    contender: str
    round: int
    pods: int
    bound: int = 0
    pods_per_s: float | None = None  # first bind -> last bind
    pods_per_s_to_event: float | None = None  # first bind -> last Scheduled event (pods with an event)
    cpu_s_per_1000: float | None = None  # the contender's, first bind -> last bind
    cpu_s_per_1000_to_event: float | None = None  # the contender's, first bind -> last Scheduled event
    apiserver_cpu_s_per_1000_to_event: float | None = None
    apiserver_cpu_s_per_1000: float | None = None
    etcd_cpu_s_per_1000: float | None = None
    bench_cpu_s_per_1000: float | None = None
    nodes_used: int = 0  # distinct nodes the pods went to: a spreading scheduler that saw every node uses many
    max_pods_per_node: int = 0
    other_cores: float | None = None  # mean cores busy outside the contender, apiserver, etcd and this process
    peak_rss_mib: float | None = None
    spawn_s: float | None = None  # the benchmark's start call -> the contender's process start
    ready_s: float | None = None  # process start -> ready
    ready_detail: str = ""
    binds_before_ready: int = 0
    first_bind_s: float | None = None  # process start -> first bind seen
    window_s: float | None = None  # first bind -> last bind
    longest_gap_s: float | None = None  # the longest gap between two consecutive binds
    event_window_s: float | None = None  # first bind -> last Scheduled event
    events: int | None = None  # bound pods whose Scheduled event was seen (None: a contender that writes none)
    events_missing: int | None = None  # bound pods whose Scheduled event did not come within --event-timeout
    events_missing_pods: list[str] = field(default_factory=list)  # the first few of them
    event_lag_ms: dict[str, float] = field(default_factory=dict)  # bind seen -> its event seen: min, p50, p90, p99, max
    latency_ms: dict[str, float] = field(default_factory=dict)  # steady arrival: p50, p90, p99, max
    load_avg: list[float] = field(default_factory=list)
    error: str = ""
    profile: str = ""  # with --profile-ours: py-spy's collapsed stacks (this run's figures are perturbed)
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (s since process start, pods bound)
    event_timeline: list[tuple[float, int]] = field(default_factory=list)  # (s since process start, Scheduled events)


class Bench:
    """State shared by the runs of one workload: the control plane, the API client, the options."""

    def __init__(
        self, args: argparse.Namespace, cp: ControlPlane, kube: Kube, workdir: Path, progress: e2e_report.Progress
    ) -> None:
        self.args, self.cp, self.kube, self.workdir, self.progress = args, cp, kube, workdir, progress
        self.record_round = 0  # ours' runs so far (``--record-ours``)
        self.chaos_runs = 0  # ours-chaos runs so far: each proxy gets a seed of its own

    def pids(self) -> dict[str, int | None]:
        pids = self.cp.pids()
        return {"apiserver": pids.get("kube-apiserver"), "etcd": pids.get("etcd"), "bench": os.getpid()}


async def measure(bench: Bench, workload: Workload, size: Size, contender: Contender, round_: int) -> Run:
    run = Run(contender.key, round_, size.pods)
    names = [f"pod-{i:05d}" for i in range(size.pods)]
    pod_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    if not workload.steady:
        await bench.kube.create_all(
            pod_path, [pod_body(workload.pod, n, NAMESPACE, contender.scheduler_name) for n in names]
        )
    samples: dict[str, dict[str, float | None]] = {}
    running: Running | None = None

    def sample(key: str) -> None:
        cpu = {name: cpu_seconds(pid) for name, pid in bench.pids().items()}
        cpu["contender"] = cpu_seconds(running.pid(), tree=True) if running is not None else None
        cpu["machine"] = machine_busy_seconds()
        samples[key] = cpu

    watch = BindWatch(bench.kube, size.pods, on_first=lambda: sample("first"), on_last=lambda: sample("last"))
    events = EventWatch(bench.kube, size.pods, on_last=lambda: sample("last_event"))
    await watch.start()
    await events.start()
    bench.progress.run_started(workload.name, round_, contender.key, size.pods, watch.bound, events)
    t_called = t_start = time.monotonic()
    created: dict[str, float] = {}
    try:
        running = contender.start(bench)
        run.ready_detail = await running.ready()
        t_ready = time.monotonic()
        t_start = max(t_called, process_start(running.pid()) or t_called)  # it started after it was asked to
        run.spawn_s = t_start - t_called
        run.ready_s = t_ready - t_start
        run.binds_before_ready = sum(1 for t in watch.bound.values() if t < t_ready)
        profiler = start_profiler(bench, running, f"{workload.name}-r{round_}") if contender.key == "ours" else None
        if workload.steady:
            bodies = [pod_body(workload.pod, n, NAMESPACE, contender.scheduler_name) for n in names]
            await create_steadily(bench.kube, pod_path, bodies, bench.args.rate, created)
        try:
            await asyncio.wait_for(watch.all_bound.wait(), bench.args.timeout)
        except TimeoutError:
            run.error = f"timeout: {len(watch.bound)}/{size.pods} bound after {bench.args.timeout:.0f}s"
            sample("last")
        events.expect(len(watch.bound))
        if contender.events and not run.error:  # the contender keeps running while its last events come in
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(events.all_seen.wait(), bench.args.event_timeout)
        if profiler is not None:
            run.profile = await profiler()
        pid = running.pid()
        run.peak_rss_mib = peak_rss_mib(pid) if pid is not None else None
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        if running is not None:
            await running.stop()
        await watch.stop()
        await events.stop()
        bench.progress.run_finished()
    run.load_avg = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    fill(run, watch.bound, samples, created, t_start)
    if contender.events:
        fill_events(run, watch, events, samples, t_start)
    per_node = Counter(watch.node_of.values())
    run.nodes_used, run.max_pods_per_node = len(per_node), max(per_node.values(), default=0)
    await bench.kube.empty(NAMESPACE)
    return run


async def create_steadily(
    kube: Kube, path: str, bodies: list[dict[str, Any]], rate: float, created: dict[str, float]
) -> None:
    """Create one pod every 1/rate s (not waiting for earlier answers); `created` gets each 201's time."""

    async def one(body: dict[str, Any]) -> None:
        await kube.call("POST", path, body)
        created[body["metadata"]["name"]] = time.monotonic()

    t0 = time.monotonic()
    tasks = []
    for i, body in enumerate(bodies):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(body)))
    await asyncio.gather(*tasks)


def fill(
    run: Run,
    bound: dict[str, float],
    samples: dict[str, dict[str, float | None]],
    created: dict[str, float],
    t_start: float,
) -> None:
    """Derive the figures of `run` from the bind times and the CPU samples."""
    run.bound = len(bound)
    if not bound:
        run.error = run.error or "no pod was bound"
        return
    times = sorted(bound.values())
    run.first_bind_s = times[0] - t_start
    run.window_s = times[-1] - times[0]
    run.longest_gap_s = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    if run.bound > 1 and run.window_s > 0:
        run.pods_per_s = run.bound / run.window_s
    per_1000 = 1000 / run.bound
    first, last = samples.get("first", {}), samples.get("last", {})
    used: dict[str, float] = {}
    for key in ("contender", "apiserver", "etcd", "bench", "machine"):
        a, b = first.get(key), last.get(key)
        if a is not None and b is not None:
            used[key] = b - a
    run.cpu_s_per_1000 = used["contender"] * per_1000 if "contender" in used else None
    run.apiserver_cpu_s_per_1000 = used["apiserver"] * per_1000 if "apiserver" in used else None
    run.etcd_cpu_s_per_1000 = used["etcd"] * per_1000 if "etcd" in used else None
    run.bench_cpu_s_per_1000 = used["bench"] * per_1000 if "bench" in used else None
    if len(used) == 5 and run.window_s > 0:  # what the rest of the machine burnt meanwhile (other users' load)
        run.other_cores = max(0.0, used["machine"] - sum(v for k, v in used.items() if k != "machine")) / run.window_s
    if created:
        latencies = sorted(max(0.0, bound[n] - created[n]) for n in bound if n in created)
        run.latency_ms = {f"p{q}": 1000 * e2e_report.percentile(latencies, q) for q in (50, 90, 99)}
        run.latency_ms["max"] = 1000 * latencies[-1]
    run.timeline = timeline(times, t_start)


def fill_events(
    run: Run, watch: BindWatch, events: EventWatch, samples: dict[str, dict[str, float | None]], t_start: float
) -> None:
    """Derive what the Scheduled events add: throughput to the last one, each pod's bind-to-event
    lag, the contender's CPU until the last one, and which bound pods never got one."""
    seen = {name: t for name in watch.bound if (t := events.time_of(name, watch.uid_of.get(name, ""))) is not None}
    missing = sorted(set(watch.bound) - set(seen))
    run.events, run.events_missing, run.events_missing_pods = len(seen), len(missing), missing[:10]
    if not seen:
        return
    times = sorted(seen.values())
    run.event_window_s = times[-1] - min(watch.bound.values())
    if run.events > 1 and run.event_window_s > 0:
        run.pods_per_s_to_event = run.events / run.event_window_s
    lags = sorted(t - watch.bound[name] for name, t in seen.items())  # may be < 0: two watches, two streams
    run.event_lag_ms = {"min": 1000 * lags[0], **{f"p{q}": 1000 * e2e_report.percentile(lags, q) for q in (50, 90, 99)}}
    run.event_lag_ms["max"] = 1000 * lags[-1]
    first, last = samples.get("first", {}), samples.get("last_event", {})
    for key, attr in (("contender", "cpu_s_per_1000_to_event"), ("apiserver", "apiserver_cpu_s_per_1000_to_event")):
        a, b = first.get(key), last.get(key)
        if a is not None and b is not None and not missing:
            setattr(run, attr, (b - a) * 1000 / run.bound)
    run.event_timeline = timeline(times, t_start)


def timeline(times: list[float], t_start: float) -> list[tuple[float, int]]:
    """(s since t_start, how many so far) at about 60 of the sorted `times`: enough for a plot, small in the JSON."""
    step = max(1, len(times) // 60)
    return [(round(t - t_start, 3), i + 1) for i, t in enumerate(times) if i % step == 0 or i == len(times) - 1]


# --------------------------------------------------------------------------- one workload


async def run_workload(
    args: argparse.Namespace, workload: Workload, chosen: list[Contender], progress: e2e_report.Progress
) -> dict[str, Any]:
    size = workload.size(args.quick)
    size = replace(size, nodes=args.nodes or size.nodes, pods=args.pods or size.pods)
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-e2e-{workload.name}-") as tmp,
        ControlPlane(Path(tmp) / "cp", die_with_parent=True, controller_manager=args.controller_manager) as cp,
    ):
        workdir = Path(tmp)
        kube = Kube(cp.kubeconfig)
        bench = Bench(args, cp, kube, workdir, progress)
        try:
            t0 = time.monotonic()
            progress.note(
                f"{workload.name}: control plane up; creating {size.nodes} nodes, {size.init_pods} bound init pods"
            )
            for ns in (NAMESPACE, INIT_NAMESPACE):
                await kube.call(
                    "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                )
            await kube.create_all("/api/v1/nodes", [node_body(i) for i in range(size.nodes)])
            await kube.create_all(
                f"/api/v1/namespaces/{INIT_NAMESPACE}/pods",
                [
                    pod_body(
                        workload.init_pod,
                        f"init-{i:05d}",
                        INIT_NAMESPACE,
                        "init",
                        init_node(workload.init_pod, i, size.nodes),
                    )
                    for i in range(size.init_pods)
                ],
            )
            if any(c.key == "ours" for c in chosen):
                await asyncio.to_thread(install_policy, cp, args.policy_file)
            setup_s = time.monotonic() - t0
            progress.note(f"{workload.name}: set up in {setup_s:.1f}s")
            runs: list[Run] = []
            for round_ in range(1, args.rounds + 1):
                shift = (round_ - 1) % len(chosen)  # rotate the order each round
                for contender in chosen[shift:] + chosen[:shift]:
                    run = await measure(bench, workload, size, contender, round_)
                    runs.append(run)
                    progress.report(run)
        finally:
            await kube.close()
    return {
        "name": workload.name,
        "title": workload.title,
        "steady": workload.steady,
        "memory": workload.memory,
        "rate": args.rate if workload.steady else None,
        "size": asdict(size),
        "setup_s": round(setup_s, 1),
        "runs": [asdict(r) for r in runs],
    }


def install_policy(cp: ControlPlane, policy_file: Path) -> None:
    """The CRD file users install, then the policy (the operator accepts it when it starts)."""
    cp.kubectl("apply", "-f", str(CRD_FILE))
    cp.kubectl(
        "wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=60s", timeout=70
    )
    cp.kubectl("apply", "-f", str(policy_file))


# --------------------------------------------------------------------------- main


def default_policy_file() -> Path:
    preferred = POLICIES / "default.yaml"
    return preferred if preferred.exists() else POLICIES / "default-provider.yaml"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round, fewer pods, no 5000-node workload (under 5 minutes)")
    ap.add_argument("--workloads", help=f"comma-separated, of: {', '.join(WORKLOADS)} (default: all)")
    ap.add_argument(
        "--contenders",
        default="raw,raw-events,upstream,ours",
        help="comma-separated, of: raw, raw-events, upstream, ours, ours-chaos",
    )
    ap.add_argument("--rounds", type=int, help="rounds of every contender (default 3; 1 with --quick)")
    ap.add_argument("--nodes", type=int, help="override every chosen workload's node count")
    ap.add_argument("--pods", type=int, help="override every chosen workload's measured pod count")
    ap.add_argument("--rate", type=float, default=100.0, help="steady arrival: pods created per second (default 100)")
    ap.add_argument(
        "--policy-file",
        type=Path,
        default=default_policy_file(),
        help="the SchedulingPolicy ours runs (default deploy/policies/default.yaml, else default-provider.yaml)",
    )
    ap.add_argument(
        "--timeout", type=float, default=900.0, help="seconds one run may take to bind every pod (default 900)"
    )
    ap.add_argument(
        "--ready-timeout", type=float, default=120.0, help="seconds a contender may take to be ready (default 120)"
    )
    ap.add_argument(
        "--event-timeout",
        type=float,
        default=30.0,
        help="seconds to wait after the last bind for the Scheduled events still missing (default 30)",
    )
    ap.add_argument(
        "--profile-ours",
        type=Path,
        metavar="DIR",
        help="sample ours with py-spy while it schedules; collapsed stacks and a top list go to DIR",
    )
    ap.add_argument(
        "--record-ours",
        type=Path,
        metavar="DIR",
        help="ours runs with --record DIR/<workload>-<n>: live traces for bench/bench_replay.py --trace",
    )
    ap.add_argument(
        "--out", type=Path, default=RESULTS, help="where the JSON, Markdown and PNG go (default bench/results)"
    )
    ap.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="run no kube-controller-manager beside the API server: the contenders alone with it on the cores",
    )
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    names = (
        args.workloads.split(",")
        if args.workloads
        else [w for w in WORKLOADS if not (args.quick and WORKLOADS[w].quick is None)]
    )
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    args.workload_names = names
    args.contender_keys = args.contenders.split(",")
    if bad := [c for c in args.contender_keys if c not in ("raw", "raw-events", "upstream", "ours", "ours-chaos")]:
        ap.error(f"unknown contender(s) {', '.join(bad)}")
    args.policy_file = args.policy_file.resolve()
    args.py_spy = None
    if args.profile_ours is not None:
        args.py_spy = shutil.which(
            "py-spy", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        )
        if args.py_spy is None:
            ap.error("--profile-ours needs py-spy: pip install py-spy (or pip install -e '.[bench]')")
    return args


async def main_async(args: argparse.Namespace, command: str) -> dict[str, Any]:
    by_key = contenders(args.policy_file)
    chosen = [by_key[k] for k in args.contender_keys]
    sizes = [WORKLOADS[n].size(args.quick) for n in args.workload_names]
    progress = e2e_report.Progress(total_runs=len(sizes) * args.rounds * len(chosen))
    started = datetime.now(UTC)
    results: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "machine": e2e_report.machine(),
        "rounds": args.rounds,
        "quick": args.quick,
        "contenders": {c.key: {"label": c.label, "scheduler_name": c.scheduler_name} for c in chosen},
        "ours": f"kopf-scheduler run --insecure-port P, {describe_policy(args.policy_file)}",
        "upstream": f"kube-scheduler v1.37.2, profile {UPSTREAM_PROFILE}, "
        f"clientConnection qps/burst {UPSTREAM_QPS}, leader election off",
        "controller_manager": args.controller_manager,
        "workloads": [],
    }
    with progress:
        for name in args.workload_names:
            results["workloads"].append(await run_workload(args, WORKLOADS[name], chosen, progress))
    results["minutes"] = round((datetime.now(UTC) - started).total_seconds() / 60, 1)
    results["machine"]["load_avg_end"] = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_binaries()
    command = shlex.join(["python", "bench/bench_e2e.py", *(sys.argv[1:] if argv is None else argv)])
    results = asyncio.run(main_async(args, command))
    e2e_report.summarise(results)
    print(e2e_report.render_text(results))
    for path in e2e_report.write(results, args.out):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0 if all(not r["error"] for w in results["workloads"] for r in w["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
