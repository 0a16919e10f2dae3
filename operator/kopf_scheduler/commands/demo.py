"""``kopf-scheduler demo``: a local cluster, simulated nodes and what users run, scheduled live.

1. builds the control-plane binaries and KWOK if needed, starts etcd + kube-apiserver +
   kube-controller-manager in ``--workdir`` and KWOK (sigs.k8s.io/kwok: the simulated nodes'
   kubelets, logging to WORKDIR/kwok.log);
2. installs the CRDs from crds/ and the example policy deploy/policies/default.yaml;
3. creates ``--nodes`` Node objects over three zones (4/8/16 CPUs, a few GPU nodes tainted
   ``dedicated=gpu:NoSchedule``, some with DRA accelerators, one cordoned), which KWOK makes Ready;
4. starts the operator as ``python -m kopf_scheduler.commands run --kubeconfig K --secure-port 0
   --insecure-port P`` (plain HTTP on 127.0.0.1, the development mode), logging to WORKDIR/operator.log;
5. creates a StorageClass (the in-tree hostPath provisioner), the accelerators' DeviceClass and
   ResourceSlices, then in namespace ``demo`` a ResourceClaimTemplate and workloads
   (``schedulerName: kopf-scheduler``) making ``--pods`` pods: Deployments, a Job, a StatefulSet with
   volume claims, a DaemonSet (one more pod per node) and pods whose DRA claims come from the template,
   about 5% unschedulable on purpose (``demo_workload.py``; the objects are in WORKDIR/workload.json),
   created in waves each placed before the next (``Workload.wave``: node agents, pods with few places
   to go, the rest).
   kube-controller-manager's controllers make the pods, provision and bind the volumes and create the
   claims, as in any cluster;
6. prints progress every second until every pod is bound or has a FailedScheduling event, and
   every bound pod is Running (KWOK starts it; a Job's pods then complete);
7. prints a summary by workload (each pod read by its owner) and node, and stops everything
   (unless ``--keep``).

With ``--record DIR`` the operator records what scheduling saw (``run --record``); once it has
stopped, ``kopf-scheduler replay DIR --policy CANDIDATE.yaml`` replays the demo with another policy.

Exit status 0 when every schedulable pod was placed and went Running (and no impossible one was placed),
else 1.

For development against another scheduler, $KOPF_SCHEDULER_DEMO_OPERATOR replaces the
``python -m kopf_scheduler.commands run`` prefix (split like a shell would); ``--kubeconfig K
--secure-port 0 --insecure-port P`` are still appended.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster import BuildError, ControlPlane, ControlPlaneError, Kwok, ensure_binaries, ensure_kwok, free_port
from ..cluster.build import controlplane_dir
from .demo_workload import (
    KIND_LABEL,
    UNSCHEDULABLE_KINDS,
    DemoNode,
    Workload,
    demo_cluster_objects,
    demo_node_body,
    demo_nodes,
    demo_workloads,
    parse_quantity,
    pod_requests,
)

__all__ = ["add_parser", "run"]

DEFAULT_WORKDIR = Path(".work/demo")
SCHEDULER_NAME = "kopf-scheduler"
CRD_NAME = "schedulingpolicies.scheduling.kopf.dev"
ENV_OPERATOR = "KOPF_SCHEDULER_DEMO_OPERATOR"
_SETTLE_SECONDS = 10.0  # all pods decided but some schedulable one not bound: wait this long for progress
#: all decided, but a bound pod not Running, a Job's not done or a claim not Bound yet: wait this long for KWOK and
#: the PersistentVolume controller
_RUNNING_GRACE = 10.0
#: the annotation VolumeBinding's PreBind writes on a WaitForFirstConsumer claim: the node to provision for
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def add_parser(subparsers: Any, name: str, help: str) -> None:
    parser = subparsers.add_parser(
        name, help=help, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=30, help="simulated nodes (default: 30)")
    parser.add_argument(
        "--pods",
        type=int,
        default=300,
        help="pods the workloads make, besides one DaemonSet pod per node (default: 300)",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for scheduling (default: 180)")
    parser.add_argument(
        "--workdir", type=Path, default=DEFAULT_WORKDIR, help=f"state and logs (default: {DEFAULT_WORKDIR})"
    )
    parser.add_argument("--namespace", default="demo", help="namespace of the demo pods (default: demo)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload mix (default: 1)")
    parser.add_argument("--keep", action="store_true", help="leave the control plane and operator running at the end")
    parser.add_argument("--record", type=Path, metavar="DIR", help="the operator records a trace into DIR (for replay)")
    parser.set_defaults(func=run)


def _say(msg: str = "") -> None:
    print(msg, flush=True)


class DemoError(RuntimeError):
    pass


# --------------------------------------------------------------------------- setup steps


def _repo_root() -> Path:
    return controlplane_dir().parent.parent  # tools/controlplane -> repository


def _kubectl(cp: ControlPlane, *args: str, timeout: float = 60.0) -> str:
    proc = cp.kubectl(*args, check=False, timeout=timeout)
    if proc.returncode != 0:
        raise DemoError(
            f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc.stdout


def _install_crds_and_policy(cp: ControlPlane) -> None:
    root = _repo_root()
    _kubectl(cp, "apply", "-k", str(root / "crds"))
    _kubectl(cp, "wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s", timeout=70)
    _kubectl(cp, "apply", "-f", str(root / "deploy" / "policies" / "default.yaml"))


def _create_nodes(api: Any, nodes: list[DemoNode]) -> None:
    """Create the nodes, status included (a Node may carry it on create, as a kubelet's does); KWOK,
    which manages them by their annotation, adds the conditions that make them Ready."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api)  # fed plain dicts, which the client accepts

    def one(item: tuple[int, DemoNode]) -> None:
        i, node = item
        core.create_node(demo_node_body(node, i).obj())

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, enumerate(nodes)))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Have Linux SIGKILL the operator when the demo's thread that started it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _start_operator(
    kubeconfig: Path, metrics_port: int, log: Path, keep: bool, extra: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    prefix = (
        shlex.split(os.environ[ENV_OPERATOR])
        if os.environ.get(ENV_OPERATOR)
        else [sys.executable, "-m", "kopf_scheduler.commands", "run"]
    )
    serving = ["--secure-port", "0", "--insecure-port", str(metrics_port)]  # plain HTTP on 127.0.0.1: a local demo
    argv = [*prefix, "--kubeconfig", str(kubeconfig), *serving, *extra]
    with log.open("ab") as out:
        out.write(f"# demo: {shlex.join(argv)}\n".encode())
        out.flush()
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the demo only; the demo stops the operator in order
            preexec_fn=None if keep else _die_with_parent,  # a killed demo leaves no operator behind
        )


def _stop_operator(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        proc.wait(5)


def _wait_operator_ready(
    url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float, nodes: int, nodes_grace: float = 10.0
) -> str:
    """Poll the operator's /readyz until 200; return how it went, for the progress line.

    Pods are submitted afterwards, so pods/s measures scheduling, not the operator's start-up.
    /readyz may say ok while its node cache still fills ("ok: ..., 28 nodes"), so for up to
    `nodes_grace` seconds more it also waits for the text to count all `nodes` (best effort).
    """
    started = time.monotonic()
    detail = "no answer"
    ready_at: float | None = None
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise DemoError(f"the operator exited with status {proc.returncode}; end of {log}:\n{_log_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                detail = resp.read().decode(errors="replace").strip()
            now = time.monotonic()
            ready_at = now if ready_at is None else ready_at
            if f" {nodes} nodes" in detail or now - ready_at > nodes_grace:
                return f"ready after {now - started:.1f}s: {detail}"
        except urllib.error.HTTPError as exc:  # 503: not ready yet
            detail = exc.read().decode(errors="replace").strip() or str(exc)
        except OSError:
            pass
        time.sleep(0.2)
    return f"not ready after {timeout:.0f}s ({detail}); submitting anyway"


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


def _wait_placed(
    api: Any,
    namespace: str,
    kinds: frozenset[str],
    pods: int,
    operator: subprocess.Popen[bytes],
    log: Path,
    timeout: float = 90.0,
) -> None:
    """Until `pods` pods of the namespace whose ``demo.kopf.dev/kind`` is one of `kinds` are bound."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        listing = _list_json(core.list_namespaced_pod, namespace)
        bound = [
            p
            for p in listing.get("items", [])
            if (p.get("spec") or {}).get("nodeName") and (p["metadata"].get("labels") or {}).get(KIND_LABEL) in kinds
        ]
        if len(bound) >= pods:
            return
        if operator.poll() is not None:
            raise DemoError(f"the operator exited with status {operator.returncode}; end of {log}:\n{_log_tail(log)}")
        if time.monotonic() > deadline:
            raise DemoError(
                f"{len(bound)} of the {pods} pods of {', '.join(sorted(kinds))} bound after {timeout:.0f}s; see {log}"
            )
        time.sleep(0.2)


def _create_objects(cp: ControlPlane, path: Path, objects: list[dict[str, Any]]) -> float:
    """Write `objects` as one List to `path` and ``kubectl create`` it; return the monotonic time just before."""
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=1) + "\n")
    started = time.monotonic()
    _kubectl(cp, "create", "-f", str(path), timeout=120)
    return started


# --------------------------------------------------------------------------- observing


@dataclass
class Observation:
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> pod JSON
    bound_at: dict[str, float] = field(default_factory=dict)  # name -> monotonic time first seen bound
    running_at: dict[str, float] = field(default_factory=dict)  # name -> monotonic time first seen Running
    failed: dict[str, str] = field(default_factory=dict)  # name -> latest FailedScheduling message
    unbound_claims: int = 0  # PersistentVolumeClaims not Bound yet (provisioned once their pod's node is chosen)

    def node_of(self, name: str) -> str | None:
        return (self.pods.get(name, {}).get("spec") or {}).get("nodeName")

    def pending_undecided(self) -> list[str]:
        return [n for n in self.pods if not self.node_of(n) and n not in self.failed]

    def completing(self) -> list[str]:
        """A Job's pods that run but have not completed yet: KWOK completes them a moment after they start, and
        the summary counts them done."""
        return [
            n
            for n, pod in self.pods.items()
            if (pod.get("status") or {}).get("phase") == "Running"
            and any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or ())
        ]


def _list_json(method: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a kubernetes-client list method and decode the raw JSON (much faster than its models)."""
    resp = method(*args, _preload_content=False, **kwargs)
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def _observe(api: Any, namespace: str, obs: Observation) -> None:
    from kubernetes import client

    core: Any = client.CoreV1Api(api)  # fed plain dicts, which the client accepts
    now = time.monotonic()
    listing = _list_json(core.list_namespaced_pod, namespace)
    for pod in listing.get("items", []):
        name = pod["metadata"]["name"]
        obs.pods[name] = pod
        if (pod.get("spec") or {}).get("nodeName") and name not in obs.bound_at:
            obs.bound_at[name] = now
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded") and name not in obs.running_at:
            obs.running_at[name] = now
    claims = _list_json(core.list_namespaced_persistent_volume_claim, namespace).get("items", [])
    obs.unbound_claims = sum(1 for c in claims if (c.get("status") or {}).get("phase") != "Bound")
    events = _list_json(core.list_namespaced_event, namespace, field_selector="reason=FailedScheduling")
    latest: dict[str, tuple[str, str]] = {}
    for ev in events.get("items", []):
        obj = ev.get("involvedObject") or {}
        if obj.get("kind") != "Pod":
            continue
        stamp = ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp") or ""
        if obj.get("name") not in latest or stamp >= latest[obj["name"]][0]:
            latest[obj["name"]] = (stamp, ev.get("message") or ev.get("note") or "")
    obs.failed = {n: msg for n, (_, msg) in latest.items() if n in obs.pods and not obs.node_of(n)}


def _kind(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(KIND_LABEL, "?"))


def _wait_for_scheduling(
    api: Any, namespace: str, expected: int, timeout: float, operator: subprocess.Popen[bytes], log: Path
) -> Observation:
    obs = Observation()
    deadline = time.monotonic() + timeout
    next_line = time.monotonic()
    last_progress, last_bound = time.monotonic(), -1
    decided_at: float | None = None
    while True:
        _observe(api, namespace, obs)
        now = time.monotonic()
        bound = len(obs.bound_at)
        if bound != last_bound:
            last_bound, last_progress = bound, now
        undecided = obs.pending_undecided()
        if now >= next_line:
            _say(
                f"  [{now - deadline + timeout:5.1f}s] bound {bound:4d} (running {len(obs.running_at):4d}) / "
                f"pending {len(undecided):4d} / unschedulable (FailedScheduling) {len(obs.failed):4d}   "
                f"of {len(obs.pods)}"
            )
            next_line += 1.0
        if operator.poll() is not None:
            raise DemoError(f"the operator exited with status {operator.returncode}; end of {log}:\n{_log_tail(log)}")
        if len(obs.pods) >= expected and not undecided:
            wrongly_failed = [n for n in obs.failed if _kind(obs.pods[n]) not in UNSCHEDULABLE_KINDS]
            if not wrongly_failed or now - last_progress > _SETTLE_SECONDS:
                decided_at = decided_at or now
                settled = len(obs.running_at) >= bound and not obs.completing() and not obs.unbound_claims
                if settled or now - decided_at > _RUNNING_GRACE:
                    return obs
        if now > deadline:
            _say(f"  timed out after {timeout:.0f}s")
            return obs
        time.sleep(0.2)


# --------------------------------------------------------------------------- summary


def _fmt_mem(b: float) -> str:
    return f"{b / 2**30:.1f}Gi"


@dataclass
class Owners:
    """Who made each pod, read from the API server after the run: ``Kind/name`` of its workload (a ReplicaSet's
    pods count for its Deployment), and what the controllers made besides pods."""

    of_pod: dict[str, str] = field(default_factory=dict)
    #: "Kind/name" -> the name the summary prints it under, in the order of the workloads
    notes: list[str] = field(default_factory=list)


def _read_owners(api: Any, namespace: str, obs: Observation, workloads: list[Workload]) -> Owners:
    from kubernetes import client

    apps: Any = client.AppsV1Api(api)
    replica_sets = _list_json(apps.list_namespaced_replica_set, namespace).get("items", [])
    rs_owner = {
        rs["metadata"]["name"]: f"{ref['kind']}/{ref['name']}"
        for rs in replica_sets
        for ref in rs["metadata"].get("ownerReferences") or ()
        if ref.get("controller")
    }
    owners = Owners()
    for name, pod in obs.pods.items():
        for ref in pod["metadata"].get("ownerReferences") or ():
            if ref.get("controller"):
                key = f"{ref['kind']}/{ref['name']}"
                owners.of_pod[name] = rs_owner.get(ref["name"], key) if ref["kind"] == "ReplicaSet" else key
    core: Any = client.CoreV1Api(api)
    claims = _list_json(core.list_namespaced_persistent_volume_claim, namespace).get("items", [])
    bound = sum(1 for c in claims if (c.get("status") or {}).get("phase") == "Bound")
    selected = sum(1 for c in claims if (c["metadata"].get("annotations") or {}).get(SELECTED_NODE))
    volumes = _list_json(core.list_persistent_volume).get("items", [])
    provisioned = sum(
        1
        for v in volumes
        if ((v.get("spec") or {}).get("claimRef") or {}).get("namespace") == namespace
        and (v["metadata"].get("annotations") or {}).get("pv.kubernetes.io/provisioned-by")
    )
    for w in workloads:
        if w.kind == "StatefulSet" and claims:
            owners.notes.append(
                f"volumes: {bound} of the {len(claims)} claims of StatefulSet/{w.name} Bound, {provisioned} of them to "
                "volumes the PersistentVolume controller provisioned (StorageClass demo-hostpath, "
                f"WaitForFirstConsumer), {selected} for the node kopf-scheduler selected"
            )
    resource: Any = client.CustomObjectsApi(api)
    made = [
        c
        for c in resource.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]
        if (c["metadata"].get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
    ]
    if made:
        allocated = sum(1 for c in made if (c.get("status") or {}).get("allocation"))
        owners.notes.append(
            f"DRA: {len(made)} ResourceClaims the resourceclaim controller made from the pods' templates, "
            f"{allocated} allocated by the scheduler"
        )
    return owners


def _summary(
    obs: Observation,
    owners: Owners,
    workloads: list[Workload],
    nodes: list[DemoNode],
    node_objs: dict[str, dict[str, Any]],
    first_create: float,
    cp: ControlPlane,
    namespace: str,
    log: Path,
    kwok_log: Path,
    metrics_url: str,
    kept: bool,
    metrics_saved: bool,
) -> int:
    total = len(obs.pods)
    placed = sorted(n for n in obs.pods if obs.node_of(n))
    unplaced = sorted(n for n in obs.pods if not obs.node_of(n))
    missed = [n for n in unplaced if _kind(obs.pods[n]) not in UNSCHEDULABLE_KINDS]
    impossible_placed = [n for n in placed if _kind(obs.pods[n]) in UNSCHEDULABLE_KINDS]

    _say()
    _say("=" * 78)
    _say(f"placed {len(placed)} / unschedulable {len(unplaced)} (of {total} pods)")
    if obs.bound_at:
        span = max(obs.bound_at.values()) - first_create
        _say(
            f"throughput: {len(placed) / span if span > 0 else float('inf'):.1f} pods/s "
            f"({len(placed)} binds in {span:.1f}s from first create to last bind)"
        )
    else:
        _say("throughput: no pod was bound")
    running = [n for n in placed if n in obs.running_at]
    if placed:
        last_start = max((obs.running_at[n] - obs.bound_at.get(n, obs.running_at[n]) for n in running), default=0.0)
        _say(
            f"running: {len(running)} of the {len(placed)} placed pods (started by KWOK"
            + (f"; at most {last_start:.1f}s after its bind was seen)" if running else ")")
        )

    if unplaced:
        _say()
        _say("unschedulable, by reason (FailedScheduling events):")
        groups: dict[str, list[str]] = collections.defaultdict(list)
        for n in unplaced:
            groups[obs.failed.get(n, "(no FailedScheduling event yet: still pending)")].append(n)
        for msg, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(names[:4]) + (f", ... (+{len(names) - 4})" if len(names) > 4 else "")
            _say(f"  {len(names):4d} x {msg}")
            _say(f"         {shown}")

    per_node: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for n in placed:
        per_node[obs.node_of(n) or ""].append(obs.pods[n])
    _say()
    _say(f"{'node':<14} {'zone':<7} {'pods':>4}  {'cpu req/alloc':>16}  {'memory req/alloc':>20}  note")
    for node in nodes:
        alloc = (node_objs.get(node.name, {}).get("status") or {}).get("allocatable") or {}
        cpu_alloc = parse_quantity(alloc.get("cpu", node.cpu))
        mem_alloc = parse_quantity(alloc.get("memory", f"{node.memory_gi}Gi"), memory=True)
        cpu = sum(pod_requests(p)[0] for p in per_node[node.name])
        mem = sum(pod_requests(p)[1] for p in per_node[node.name])
        cpu_s = f"{cpu:.2f}/{cpu_alloc:g} {100 * cpu / cpu_alloc:3.0f}%" if cpu_alloc else "-"
        mem_s = f"{_fmt_mem(mem)}/{_fmt_mem(mem_alloc)} {100 * mem / mem_alloc:3.0f}%" if mem_alloc else "-"
        _say(f"{node.name:<14} {node.zone:<7} {len(per_node[node.name]):>4}  {cpu_s:>16}  {mem_s:>20}  {node.note}")
    strays = sorted(set(per_node) - {n.name for n in nodes})
    for s in strays:
        _say(f"{s:<14} {'?':<7} {len(per_node[s]):>4}  (not a demo node)")

    zone_of = {n.name: n.zone for n in nodes}
    per_zone = collections.Counter(zone_of.get(obs.node_of(n) or "", "?") for n in placed)
    _say()
    _say("per zone: " + ", ".join(f"{z} {per_zone[z]}" for z in sorted(per_zone)))

    _say()
    _say(f"{'workload (by owner)':<26} {'wanted':>6} {'pods':>5} {'placed':>6} {'running':>7} {'done':>5}  note")
    by_owner: dict[str, list[str]] = collections.defaultdict(list)
    for n in obs.pods:
        by_owner[owners.of_pod.get(n, "(no owner)")].append(n)
    for w in workloads:
        key = f"{w.kind}/{w.name}"
        names = by_owner.pop(key, [])
        phases = collections.Counter((obs.pods[n].get("status") or {}).get("phase") for n in names)
        note = "unschedulable on purpose" if not w.schedulable else ""
        _say(
            f"{key:<26} {w.pods:>6} {len(names):>5} {sum(1 for n in names if obs.node_of(n)):>6} "
            f"{phases['Running']:>7} {phases['Succeeded']:>5}  {note}"
        )
    for key, names in sorted(by_owner.items()):
        _say(f"{key:<26} {'-':>6} {len(names):>5} {sum(1 for n in names if obs.node_of(n)):>6}  (not a demo workload)")
    for note in owners.notes:
        _say(note)

    kubectl = f"{cp.binary('kubectl')} --kubeconfig {cp.kubeconfig}"
    _say()
    _say("where to look:" + ("" if kept else "  (the cluster is stopped now; rerun with --keep to explore it live)"))
    _say(f"  events:       {kubectl} get events -n {namespace} --field-selector reason=FailedScheduling")
    _say(f"  placements:   {kubectl} get pods -n {namespace} -o wide")
    _say(f"  operator log: {log}")
    _say(f"  KWOK log:     {kwok_log}")
    saved_note = (
        f"  (scraped at the end into {log.parent / 'metrics.txt'})" if metrics_saved else "  (was not reachable)"
    )
    _say(f"  metrics:      {metrics_url}" + saved_note)

    not_running = [n for n in placed if n not in obs.running_at]
    ok = not missed and not impossible_placed and not not_running and total > 0
    if not_running:
        _say(f"FAILED: {len(not_running)} placed pods never went Running, e.g. {', '.join(not_running[:5])}")
    if missed:
        _say(f"FAILED: {len(missed)} schedulable pods were not placed, e.g. {', '.join(missed[:5])}")
    if impossible_placed:
        _say(f"FAILED: {len(impossible_placed)} impossible pods were placed, e.g. {', '.join(impossible_placed[:5])}")
    if ok:
        _say("OK: every schedulable pod was placed and is Running")
    return 0 if ok else 1


def _save_metrics(url: str, path: Path) -> bool:
    """Keep a scrape of the operator's metrics (the operator is stopped with the cluster)."""
    path.unlink(missing_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            path.write_bytes(resp.read())
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------- main


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1 or args.pods < 1:
        print("error: --nodes and --pods must be at least 1", file=sys.stderr)
        return 2
    # `kill` (SIGTERM) cleans up like Ctrl-C does; ignored SIGINT (background job) is restored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    workdir = Path(args.workdir).expanduser().resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "operator.log"
    log.unlink(missing_ok=True)
    started = time.monotonic()

    try:
        _say("[1/6] control-plane binaries and KWOK (built once: 15-30 min and 2-3.5 min when the cache is cold)")
        bin_dir = ensure_binaries()
        kwok_install = ensure_kwok()
        cp = ControlPlane(workdir, bin_dir=bin_dir, die_with_parent=not args.keep)
        cp.up()
    except (BuildError, ControlPlaneError) as exc:
        if "already running" in str(exc):
            exc = ControlPlaneError(f"{exc} (`kopf-scheduler cluster down --workdir {workdir}`)")
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

    operator: subprocess.Popen[bytes] | None = None
    api: Any = None
    try:
        from kubernetes import client, config

        _say(f"      control plane at {cp.server} ({time.monotonic() - started:.1f}s), workdir {workdir}")
        kwok = Kwok(cp, install=kwok_install).start()
        _say(f"      KWOK {kwok_install.root.name.removeprefix('kwok-')} plays the nodes' kubelets (log {kwok.log})")
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(cp.kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.connection_pool_maxsize = 32  # the pod-creating thread pool
        api = client.ApiClient(configuration)

        _say("[2/6] CRDs and policy deploy/policies/default.yaml")
        _install_crds_and_policy(cp)

        nodes = demo_nodes(args.nodes)
        n_gpu, n_cordoned = sum(n.gpu for n in nodes), sum(n.cordoned for n in nodes)
        n_dra = sum(1 for n in nodes if n.accelerators)
        _say(
            f"[3/6] {len(nodes)} nodes over 3 zones ({n_gpu} GPU-tainted, {n_dra} with DRA accelerators, "
            f"{n_cordoned} cordoned)"
        )
        _create_nodes(api, nodes)
        ready_s = kwok.wait_nodes_ready([n.name for n in nodes], timeout=60)
        _say(f"      all Ready (KWOK) in {ready_s:.1f}s")

        metrics_port = free_port()
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        _say(f"[4/6] operator (log {log}, metrics {metrics_url})")
        record = ["--record", str(Path(args.record).expanduser().resolve())] if args.record else []
        operator = _start_operator(cp.kubeconfig, metrics_port, log, args.keep, record)
        _say(
            "      " + _wait_operator_ready(f"http://127.0.0.1:{metrics_port}/readyz", operator, log, 30.0, len(nodes))
        )

        workloads = demo_workloads(args.pods, nodes, SCHEDULER_NAME, seed=args.seed)
        expected = sum(w.pods for w in workloads)
        core: Any = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": args.namespace}})
        _create_objects(cp, workdir / "cluster-objects.json", demo_cluster_objects(nodes, args.namespace))
        _say(
            f"[5/6] {len(workloads)} workloads making {expected} pods in namespace {args.namespace} "
            f"(objects in {workdir / 'workload.json'}): " + ", ".join(f"{w.kind}/{w.name} {w.pods}" for w in workloads)
        )
        items = {w.name: {**w.body, "metadata": {**w.body["metadata"], "namespace": args.namespace}} for w in workloads}
        (workdir / "workload.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items.values())}, indent=1) + "\n"
        )
        # in waves, each placed before the next (Workload.wave): node agents, then the pods with few places
        # to go, then those that fit anywhere and could otherwise fill a small zone's one usable node first
        first_create = time.monotonic()
        waves = sorted({w.wave for w in workloads})
        for wave in waves:
            members = [w for w in workloads if w.wave == wave]
            _create_objects(
                cp,
                workdir / f"workload-wave{wave}.json",
                [items[w.name] for w in members],
            )
            if wave != waves[-1]:
                schedulable = [w for w in members if w.schedulable]
                _wait_placed(
                    api,
                    args.namespace,
                    frozenset(w.label for w in schedulable),
                    sum(w.pods for w in schedulable),
                    operator,
                    log,
                )
        _say(
            f"      created in {time.monotonic() - first_create:.1f}s, in {len(waves)} waves each placed before the "
            "next (node agents; pods with few places to go; the rest); kube-controller-manager makes the pods"
        )

        _say(f"[6/6] scheduling (timeout {args.timeout:.0f}s)")
        obs = _wait_for_scheduling(api, args.namespace, expected, args.timeout, operator, log)
        node_objs = {n["metadata"]["name"]: n for n in _list_json(client.CoreV1Api(api).list_node).get("items", [])}
        owners = _read_owners(api, args.namespace, obs, workloads)
        saved = _save_metrics(metrics_url, workdir / "metrics.txt")
        return _summary(
            obs,
            owners,
            workloads,
            nodes,
            node_objs,
            first_create,
            cp,
            args.namespace,
            log,
            kwok.log,
            metrics_url,
            args.keep,
            saved,
        )
    except KeyboardInterrupt:
        _say("\ninterrupted")
        return 130
    except (DemoError, BuildError, ControlPlaneError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if api is not None:
            api.close()
        if args.keep:
            _say(
                f"\n--keep: control plane left running in {workdir} "
                f"(stop: kopf-scheduler cluster down --workdir {workdir}"
                + (
                    f"; operator pid {operator.pid}: kill {operator.pid})"
                    if operator and operator.poll() is None
                    else ")"
                )
            )
        else:
            if operator is not None:
                _stop_operator(operator)
                if args.record:
                    _say(f"trace in {args.record}: kopf-scheduler replay {args.record} --policy CANDIDATE.yaml")
            try:
                cp.down()
            except ControlPlaneError as exc:
                print(f"warning: stopping the control plane: {exc}", file=sys.stderr)
