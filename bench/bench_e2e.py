"""End-to-end throughput against a real API server, as a ratio to upstream kube-scheduler v1.37.2.

    python bench/bench_e2e.py                      # 500 nodes, 1000 pods each
    python bench/bench_e2e.py --nodes 100 --pods 300 --only ours

Both schedulers run, one after the other, on the same local control plane
(etcd + kube-apiserver from tools/controlplane) with the same nodes
(scheduler_perf's node-default shape) and the same pod-default pods. For each:
the pods are created first, then the scheduler is started, and the figure is
pods bound / (last bind seen - first bind seen), watched by polling the API.
Startup and pod creation are not counted. The ratio ours/upstream is the
number to track; absolute pods/s depend on the machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from kubernetes import client, config  # noqa: E402

from kopf_scheduler.cluster.build import ensure_binaries  # noqa: E402
from kopf_scheduler.cluster.controlplane import ControlPlane, free_port  # noqa: E402

NAMESPACE = "bench"


def node_body(i: int) -> tuple[dict, dict]:
    name = f"node-{i}"
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"}}
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    status = {"status": {"capacity": res, "allocatable": res, "conditions": [{"type": "Ready", "status": "True"}]}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}, status


def pod_body(i: int, scheduler: str) -> dict:
    res = {"cpu": "100m", "memory": "500Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{scheduler}-{i}", "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler,
            "automountServiceAccountToken": False,
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": res, "limits": res}}],
        },
    }


def create_all(fn, items, workers: int = 16) -> None:  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(fn, items))


def measure(core: client.CoreV1Api, scheduler: str, pods: int, start_scheduler, timeout: float) -> float:  # type: ignore[no-untyped-def]
    create_all(lambda i: core.create_namespaced_pod(NAMESPACE, pod_body(i, scheduler)), range(pods))
    stop = start_scheduler()
    try:
        first = last = None
        deadline = time.monotonic() + timeout
        bound = 0
        while time.monotonic() < deadline:
            items = core.list_namespaced_pod(NAMESPACE).items
            bound = sum(1 for p in items if p.spec.scheduler_name == scheduler and p.spec.node_name)
            now = time.monotonic()
            if bound and first is None:
                first = now
            if bound >= pods:
                last = now
                break
            time.sleep(0.1)
        if first is None or last is None:
            raise SystemExit(f"{scheduler}: only {bound}/{pods} pods bound within {timeout}s")
        seconds = max(last - first, 1e-3)
        return pods / seconds
    finally:
        stop()
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--only", choices=("ours", "upstream"))
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="kopf-scheduler-bench-") as tmp, ControlPlane(Path(tmp)) as cp:
        config.load_kube_config(str(cp.kubeconfig))
        core = client.CoreV1Api()
        core.create_namespace({"metadata": {"name": NAMESPACE}})

        def make_node(i: int) -> None:
            body, status = node_body(i)
            core.create_node(body)
            core.patch_node_status(body["metadata"]["name"], status)

        create_all(make_node, range(args.nodes))
        rates: dict[str, float] = {}
        if args.only in (None, "upstream"):

            def start_upstream():  # type: ignore[no-untyped-def]
                # Lift the client rate limit (default qps 50) as scheduler_perf does, so the peer
                # is measured on scheduling, not on its own throttle. Our operator is not throttled.
                cfg = Path(tmp) / "kube-scheduler-config.yaml"
                cfg.write_text(
                    "apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\n"
                    f"clientConnection: {{kubeconfig: {cp.workdir / 'kube-scheduler.kubeconfig'}, qps: 5000, burst: 5000}}\n"
                    "leaderElection: {leaderElect: false}\n"
                )
                cp.start_kube_scheduler(extra_args=[f"--config={cfg}"])
                return lambda: cp.stop_process("kube-scheduler")

            rates["upstream"] = measure(core, "default-scheduler", args.pods, start_upstream, args.timeout)
            print(f"upstream kube-scheduler: {rates['upstream']:.0f} pods/s", flush=True)
        if args.only in (None, "ours"):
            cp.kubectl("apply", "-f", str(ROOT / "crds" / "schedulingpolicy.yaml"))
            cp.kubectl("wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=30s")
            cp.kubectl("apply", "-f", str(ROOT / "deploy" / "policies" / "default-provider.yaml"))

            def start_ours():  # type: ignore[no-untyped-def]
                log = open(Path(tmp) / "operator.log", "w")
                proc = subprocess.Popen(
                    [sys.executable, "-m", "kopf_scheduler.cli", "run", "--kubeconfig", str(cp.kubeconfig), "--metrics-port", str(free_port())],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

                def stop() -> None:
                    proc.terminate()
                    try:
                        proc.wait(15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    log.close()

                return stop

            rates["ours"] = measure(core, "kopf-scheduler", args.pods, start_ours, args.timeout)
            print(f"kopf-scheduler: {rates['ours']:.0f} pods/s", flush=True)
        if len(rates) == 2:
            print(f"ratio kopf-scheduler / upstream = {rates['ours'] / rates['upstream']:.2f} ({args.nodes} nodes, {args.pods} pods)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
