"""What Kopf costs per pod event, against our own informer, with each setting that cuts it.

    python bench/bench_kopf.py                  # 2000 pods (4000 events) per variant, 3 rounds
    python bench/bench_kopf.py --pods 4000 --rounds 5 --variants kopf-tuned,informer

Why it exists: pods reach the scheduling queue through a Kopf ``on.event`` handler (the product's
shape), and Kopf's per-event machinery (a worker task and queue per object, three loggers, cause
and kwargs building, the diff-base essence) runs before any handler filter. This measures it
alone, so that each setting in ``kube/handlers.configure`` and the gc thresholds the App sets
before its first lists are kept on numbers.

How: a fake API server (tests/fakeapi.py, the real wire format) runs in a subprocess and makes the
events itself: it creates N unassigned pods, then binds each, so a watch of unassigned pods
(``spec.nodeName=``) sees N ADDED and N DELETED. This process consumes them through one variant and
counts; the figure is this process's CPU (``time.process_time``, every thread) from the first event
to the last, per event. The handler does nothing but count: what the scheduler then does with a
pod is the same whichever path delivered it.

The event loop is the operator's: uvloop when installed (``--asyncio`` for asyncio's own).

Variants:
- ``kopf-plain``: ``@kopf.on.event`` on pods with Kopf's default settings (all pods listed);
- ``kopf-tuned``: the settings the operator runs with (``handlers.configure``: the server-side
  selector, an empty diff-base essence for pods, the ``kopf.objects`` loggers at WARNING);
- ``kopf-tuned-gc``: the same with the gc thresholds the App sets before its first lists;
- ``informer``: our informer (``edge/informer.py``) on the same selector.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

VARIANTS = ("kopf-plain", "kopf-tuned", "kopf-tuned-gc", "informer")


def pod_body(i: int) -> dict[str, Any]:
    """A pod of the size a real workload pod has (labels, owner, two containers, tolerations)."""
    from kopf_scheduler.cluster import bodies  # in the server process only, as its fake API server

    pod = bodies.pod_body(f"p-{i}", "bench").labels(
        {"app": "web", "pod-template-hash": "5d8f7c9b4", "tier": "frontend"}
    )
    pod.owner("ReplicaSet", "web-5d8f7c9b4", "rs-uid", api_version="apps/v1").scheduler("kopf-scheduler")
    pod.container("web", "registry.example/web:1.2.3").port(8080).req(cpu="100m", memory="128Mi").lim(memory="256Mi")
    pod.container("proxy", "registry.example/proxy:4.5", cpu="50m", memory="64Mi")
    pod.tolerations(
        {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in ("not-ready", "unreachable")
    )
    return pod.phase("Pending").obj()


# --------------------------------------------------------------------------- the server process


async def serve(pods: int) -> None:
    from fakeapi import FakeApiServer

    async with FakeApiServer() as server:
        print(server.url, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.readline)  # "go": the consumer is watching
        for i in range(pods):
            server.add("", "v1", "pods", pod_body(i))
            if i % 50 == 49:
                await asyncio.sleep(0)
        for i in range(pods):
            body = server.get("", "v1", "pods", f"p-{i}", namespace="bench")
            assert body is not None
            body["spec"]["nodeName"] = f"node-{i % 100}"
            server.update("", "v1", "pods", body)
            if i % 50 == 49:
                await asyncio.sleep(0)
        await loop.run_in_executor(None, sys.stdin.readline)  # "stop"


# --------------------------------------------------------------------------- the consumers


class Counter:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0
        self.first_cpu = 0.0
        self.last_cpu = 0.0
        self.done = asyncio.Event()

    def count(self) -> None:
        if self.seen == 0:
            self.first_cpu = time.process_time()
        self.seen += 1
        if self.seen >= self.expected:
            self.last_cpu = time.process_time()
            self.done.set()


async def consume_kopf(url: str, counter: Counter, *, tuned: bool, gc_tuned: bool, ready: asyncio.Event) -> None:
    import kopf

    from kopf_scheduler.kube import handlers

    registry = kopf.OperatorRegistry()
    settings = kopf.OperatorSettings()
    if tuned:
        handlers.configure(settings)
    settings.posting.enabled = False

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=url, token="t")

    @kopf.on.startup(registry=registry)
    async def started(**_: Any) -> None:
        ready.set()

    @kopf.on.event("v1", "pods", registry=registry)
    async def on_pod(event: Any, **_: Any) -> None:
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            counter.count()

    if gc_tuned:
        from kopf_scheduler.kube.app import _tune_gc

        _tune_gc()
    stop = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(registry=registry, settings=settings, standalone=True, clusterwide=True, stop_flag=stop)
    )
    await counter.done.wait()
    stop.set()
    await asyncio.wait_for(task, 30)


async def consume_informer(url: str, counter: Counter, *, ready: asyncio.Event) -> None:
    from kopf_scheduler.edge.client import Api
    from kopf_scheduler.edge.credentials import Credentials, StaticToken
    from kopf_scheduler.edge.informer import Feed, Informer

    api = Api(Credentials(server=url, source="bench", token=StaticToken("t")))

    def apply(kind: str, body: Any) -> None:
        if kind != "ADDED" or body.get("metadata", {}).get("resourceVersion"):
            counter.count()

    def synced(kind: str, ok: bool) -> None:
        if ok:
            ready.set()

    feed = Feed(
        "Pod",
        "/api/v1/pods",
        apply,
        lambda b: str(b["metadata"]["uid"]),
        lambda keys: None,
        field_selector="spec.nodeName=",
    )
    task = asyncio.create_task(Informer(api, feed, on_sync=synced).run())
    await counter.done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await api.close()


async def one_run(variant: str, pods: int) -> float:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(pods)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        url = server.stdout.readline().strip()
        counter = Counter(2 * pods)
        ready = asyncio.Event()
        if variant == "informer":
            consumer = asyncio.create_task(consume_informer(url, counter, ready=ready))
        else:
            consumer = asyncio.create_task(
                consume_kopf(
                    url, counter, tuned=variant != "kopf-plain", gc_tuned=variant == "kopf-tuned-gc", ready=ready
                )
            )
        await asyncio.wait_for(ready.wait(), 30)
        await asyncio.sleep(1.0)  # let Kopf's watch start after its (empty) list
        server.stdin.write("go\n")
        server.stdin.flush()
        await asyncio.wait_for(consumer, 300)
        server.stdin.write("stop\n")
        server.stdin.flush()
        return (counter.last_cpu - counter.first_cpu) / counter.expected * 1e6
    finally:
        server.kill()
        server.wait()
        gc.set_threshold(700, 10, 10)
        gc.unfreeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--asyncio", action="store_true", help="asyncio's own event loop even when uvloop is installed")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return
    logging.basicConfig(level=logging.WARNING)
    from kopf_scheduler.commands.run import _loop_factory

    loop_factory = None if args.asyncio else _loop_factory()
    print(f"event loop: {'uvloop' if loop_factory else 'asyncio'}")
    variants = args.variants.split(",")
    results: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for variant in variants[r % len(variants) :] + variants[: r % len(variants)]:
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                us = runner.run(one_run(variant, args.pods))
            results[variant].append(us)
            print(f"round {r + 1} {variant}: {us:.0f} us CPU per event", flush=True)
    print(f"\n{args.pods} pods, {2 * args.pods} events per run; median [min-max] of {args.rounds} rounds")
    for variant, values in results.items():
        print(f"{variant:15} {statistics.median(values):6.0f} us/event [{min(values):.0f}-{max(values):.0f}]")
    print(json.dumps({v: statistics.median(x) for v, x in results.items()}))


if __name__ == "__main__":
    main()
