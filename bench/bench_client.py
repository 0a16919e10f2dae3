"""Bind round trips through our ``Api``, a plain aiohttp session and the official client: binds/s and CPU per bind.

    python bench/bench_client.py                   # 1000 binds per client, 64 in flight
    python bench/bench_client.py --pods 3000 --concurrency 16

Why it exists: edge/client.py speaks HTTP/1.1 itself over a small keep-alive pool for every
write the operator makes (binds, events, statuses, the Lease) on the claim that it costs less of
our CPU than aiohttp's request machinery (which it used before) and the official client; this
measures that claim on the write that matters most. On one local control plane (etcd +
kube-apiserver from tools/controlplane), with the admin credentials loaded by the operator's
own loader, the same number of pending pods is bound to one node by:

- ``Api``: the operator's client, ``--concurrency`` requests in flight on one event loop;
- ``aiohttp``: one ``aiohttp.ClientSession`` with the same TLS context, the same in flight;
- ``kubernetes``: the official client's ``create_namespaced_pod_binding`` (with
  ``_preload_content=False``, as it raises on success otherwise), ``--concurrency`` threads.

Only the binds are timed (pods are created first). CPU is this process's user + system time over
the binds (the API server's is not counted), in microseconds per bind: on a shared machine it is
steadier than binds/s. Absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

import aiohttp
from kubernetes import client, config

from kopf_scheduler.cluster import bodies
from kopf_scheduler.cluster.build import ensure_binaries
from kopf_scheduler.cluster.controlplane import ControlPlane
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import load_credentials, ssl_context

NAMESPACE = "bench"
NODE = "node-0"


def pod_body(name: str) -> dict[str, Any]:
    pod = bodies.pod_body(name, NAMESPACE).scheduler("nobody").automount_service_account_token(False)
    return pod.container("pause", "pause").obj()


def binding_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Timed:
    """Wall and CPU time of a block; ``rate`` and ``cpu_us`` per item once it ended."""

    def __init__(self, items: int) -> None:
        self.items = items
        self.rate = self.cpu_us = 0.0

    def __enter__(self) -> "Timed":
        self._wall, self._cpu = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *_: object) -> None:
        self.rate = self.items / (time.perf_counter() - self._wall)
        self.cpu_us = (cpu_seconds() - self._cpu) / self.items * 1e6


def bind_with_api(kubeconfig: Path, names: list[str], concurrency: int) -> Timed:
    async def main() -> Timed:
        api = Api(load_credentials(str(kubeconfig)))
        slots = asyncio.Semaphore(concurrency)

        async def bind(name: str) -> None:
            async with slots:
                answer = await api.request(
                    "POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding", binding_body(name)
                )
            if answer.status != 201:
                raise SystemExit(f"Api: bind {name}: HTTP {answer.status} {answer.detail()}")

        try:
            await asyncio.gather(
                *(api.request("GET", "/version") for _ in range(concurrency))
            )  # connect outside the timing
            with Timed(len(names)) as timed:
                await asyncio.gather(*(bind(n) for n in names))
            return timed
        finally:
            await api.close()

    return asyncio.run(main())


def bind_with_aiohttp(kubeconfig: Path, names: list[str], concurrency: int) -> Timed:
    async def main() -> Timed:
        credentials = load_credentials(str(kubeconfig))
        connector = aiohttp.TCPConnector(ssl=ssl_context(credentials), limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, headers={"Accept": "application/json"}) as session:
            slots = asyncio.Semaphore(concurrency)

            async def get_version() -> None:
                async with session.get(f"{credentials.server}/version") as resp:
                    await resp.read()

            async def bind(name: str) -> None:
                url = f"{credentials.server}/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding"
                async with (
                    slots,
                    session.post(
                        url, data=json.dumps(binding_body(name)), headers={"Content-Type": "application/json"}
                    ) as resp,
                ):
                    json.loads(await resp.text())
                    if resp.status != 201:
                        raise SystemExit(f"aiohttp: bind {name}: HTTP {resp.status}")

            await asyncio.gather(*(get_version() for _ in range(concurrency)))  # connect outside the timing
            with Timed(len(names)) as timed:
                await asyncio.gather(*(bind(n) for n in names))
            return timed

    return asyncio.run(main())


def bind_with_official_client(names: list[str], concurrency: int) -> Timed:
    core = client.CoreV1Api()
    core.get_api_resources()  # connect outside the timing

    def bind(name: str) -> None:
        response = core.create_namespaced_pod_binding(name, NAMESPACE, binding_body(name), _preload_content=False)
        if response.status != 201:
            raise SystemExit(f"kubernetes: bind {name}: HTTP {response.status}")

    with ThreadPoolExecutor(concurrency) as pool, Timed(len(names)) as timed:
        list(pool.map(bind, names))
    return timed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=1000, help="binds per client")
    ap.add_argument(
        "--concurrency", type=int, default=64, help="binds in flight (the operator's BIND_CONCURRENCY is 64)"
    )
    args = ap.parse_args()
    ensure_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-bench-") as tmp,
        ControlPlane(
            # clients are measured here, not scheduling: no controllers beside the API server to share the cores with
            Path(tmp),
            controller_manager=False,
        ) as cp,
    ):
        print("control plane: etcd and kube-apiserver, no kube-controller-manager (a client benchmark)")
        config.load_kube_config(str(cp.kubeconfig))
        configuration = client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = (
            args.concurrency
        )  # urllib3's default pool of 4 would serialise the threads
        client.Configuration.set_default(configuration)
        core = client.CoreV1Api()
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_node(bodies.node_body(NODE).manifest())
        results: dict[str, Timed] = {}
        for label in ("Api", "aiohttp", "kubernetes"):
            names = [f"{label.lower()}-{i}" for i in range(args.pods)]
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda n: core.create_namespaced_pod(NAMESPACE, pod_body(n)), names))
            if label == "Api":
                results[label] = bind_with_api(cp.kubeconfig, names, args.concurrency)
            elif label == "aiohttp":
                results[label] = bind_with_aiohttp(cp.kubeconfig, names, args.concurrency)
            else:
                results[label] = bind_with_official_client(names, args.concurrency)
            r = results[label]
            print(
                f"{label:<11} {r.rate:7.0f} binds/s  {r.cpu_us:6.0f} us CPU per bind  "
                f"({args.pods} binds, {args.concurrency} in flight)",
                flush=True,
            )
        api = results["Api"]
        for other in ("aiohttp", "kubernetes"):
            rate, cpu = api.rate / results[other].rate, api.cpu_us / results[other].cpu_us
            print(f"Api/{other}: binds/s {rate:.2f}x, CPU per bind {cpu:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
