"""Bind round trips per second through our aiohttp ``Api`` and through the official client.

    python bench/bench_client.py                   # 1000 binds per client, 64 in flight
    python bench/bench_client.py --pods 300 --concurrency 16

Why it exists: kube/client.py keeps a small hand-written aiohttp client for every write the
operator makes (binds, events, statuses, the Lease) on the claim that it is the fastest path we
have; this measures that claim on the write that matters most. On one local control plane (etcd
+ kube-apiserver from tools/controlplane), with the admin credentials loaded by the operator's
own loader, the same number of pending pods is bound to one node by:

- ``Api``: the operator's client, ``--concurrency`` requests in flight on one event loop;
- ``kubernetes``: the official client's ``create_namespaced_pod_binding`` (with
  ``_preload_content=False``, as it raises on success otherwise), ``--concurrency`` threads.

Only the binds are timed (pods are created first). Absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from kubernetes import client, config  # noqa: E402

from kopf_scheduler.cluster.build import ensure_binaries  # noqa: E402
from kopf_scheduler.cluster.controlplane import ControlPlane  # noqa: E402
from kopf_scheduler.kube.client import Api  # noqa: E402
from kopf_scheduler.kube.credentials import load_credentials  # noqa: E402

NAMESPACE = "bench"
NODE = "node-0"


def pod_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"schedulerName": "nobody", "automountServiceAccountToken": False, "containers": [{"name": "pause", "image": "pause"}]},
    }


def binding_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": NAMESPACE}, "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}


def bind_with_api(kubeconfig: Path, names: list[str], concurrency: int) -> float:
    async def main() -> float:
        api = Api(load_credentials(str(kubeconfig)))
        slots = asyncio.Semaphore(concurrency)

        async def bind(name: str) -> None:
            async with slots:
                status, answer = await api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding", binding_body(name))
            if status != 201:
                raise SystemExit(f"Api: bind {name}: HTTP {status} {answer}")

        try:
            await api.request("GET", "/version")  # connect outside the timing, as the operator has
            started = time.perf_counter()
            await asyncio.gather(*(bind(n) for n in names))
            return len(names) / (time.perf_counter() - started)
        finally:
            await api.close()

    return asyncio.run(main())


def bind_with_official_client(names: list[str], concurrency: int) -> float:
    core = client.CoreV1Api()
    core.get_api_resources()  # connect outside the timing

    def bind(name: str) -> None:
        response = core.create_namespaced_pod_binding(name, NAMESPACE, binding_body(name), _preload_content=False)
        if response.status != 201:
            raise SystemExit(f"kubernetes: bind {name}: HTTP {response.status}")

    with ThreadPoolExecutor(concurrency) as pool:
        started = time.perf_counter()
        list(pool.map(bind, names))
        return len(names) / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=1000, help="binds per client")
    ap.add_argument("--concurrency", type=int, default=64, help="binds in flight (the operator's BIND_CONCURRENCY is 64)")
    args = ap.parse_args()
    ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="kopf-scheduler-bench-") as tmp, ControlPlane(Path(tmp)) as cp:
        config.load_kube_config(str(cp.kubeconfig))
        configuration = client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = args.concurrency  # urllib3's default pool of 4 would serialise the threads
        client.Configuration.set_default(configuration)
        core = client.CoreV1Api()
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
        rates: dict[str, float] = {}
        for label in ("Api", "kubernetes"):
            names = [f"{label.lower()}-{i}" for i in range(args.pods)]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda n: core.create_namespaced_pod(NAMESPACE, pod_body(n)), names))
            if label == "Api":
                rates[label] = bind_with_api(cp.kubeconfig, names, args.concurrency)
            else:
                rates[label] = bind_with_official_client(names, args.concurrency)
            print(f"{label:<11} {rates[label]:7.0f} binds/s  ({args.pods} binds, {args.concurrency} in flight)", flush=True)
        print(f"ratio Api/kubernetes: {rates['Api'] / rates['kubernetes']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
