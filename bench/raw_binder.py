"""The ceiling for any scheduler: bind pending pods round-robin to nodes, nothing else.

    python bench/raw_binder.py --kubeconfig K --scheduler-name raw-binder [--events]
        [--in-flight 64] [--event-in-flight 64] [--ready-file F]

A contender of bench/bench_e2e.py, run as its own process so its CPU and memory are measured
like a real scheduler's. It lists the nodes once, lists the pending pods whose
``spec.schedulerName`` is ours, then watches for more; each pod is bound through
``pods/{name}/binding`` to the next node in turn, with `--in-flight` requests at once over one
aiohttp session. No filter, no score, no cache: whatever a scheduler adds costs on top of this.
With ``--events`` it also posts one core/v1 ``Scheduled`` Event per bound pod, the way a scheduler
does: queued the moment its bind succeeds, while the binder goes on with the next pod, and written
by `--event-in-flight` writers over a connection pool of their own (upstream's finishBinding hands
the event to its recorder, whose broadcaster writes it in a goroutine through a client of its own;
ours spawns it as a task). That shows what events cost the API server, and how far they trail the
binds. `--ready-file` is written once the lists are in (the equivalent of a scheduler's informer
sync).

Also home of `kube_session`, the kubeconfig -> aiohttp session helper the benchmark itself uses.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import signal
import ssl
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

# Large enough for any one watch line (a pod is a few kB; a watch line is one object).
READ_BUFSIZE = 1 << 22


def _ssl_context(cluster: dict[str, Any], user: dict[str, Any]) -> ssl.SSLContext:
    """TLS context from a kubeconfig's cluster and user (embedded data or file paths)."""
    if "certificate-authority-data" in cluster:
        ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    else:
        ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "client-certificate-data" in user:
        # load_cert_chain reads files only: write the pair to a private temporary directory.
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            ctx.load_cert_chain(cert, key)
    elif "client-certificate" in user:
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    return ctx


def kube_session(kubeconfig: Path, *, limit: int) -> tuple[str, aiohttp.ClientSession]:
    """(server URL, session) for the current context of `kubeconfig`; at most `limit` connections."""
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    connector = aiohttp.TCPConnector(ssl=_ssl_context(cluster, user), limit=limit)
    session = aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        read_bufsize=READ_BUFSIZE,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    )
    return cluster["server"].rstrip("/"), session


def binding_body(namespace: str, name: str, uid: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def scheduled_event_body(namespace: str, name: str, uid: str, node: str, *, component: str) -> dict[str, Any]:
    """A core/v1 Normal/Scheduled Event, shaped like the ones schedulers post."""
    now = datetime.now(UTC)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid},
        "type": "Normal",
        "reason": "Scheduled",
        "action": "Binding",
        "message": f"Successfully assigned {namespace}/{name} to {node}",
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "count": 1,
    }


class RawBinder:
    def __init__(
        self,
        server: str,
        session: aiohttp.ClientSession,
        *,
        scheduler_name: str,
        event_session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.server = server
        self.session = session
        self.scheduler_name = scheduler_name
        self.event_session = event_session  # None: no events
        self.queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self.event_queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # Scheduled events of pods just bound
        self.seen: set[str] = set()  # uids queued once: a watch may repeat an object
        self.nodes: list[str] = []
        self.next_node = 0
        self.errors = 0
        self.events = 0
        self.event_errors = 0

    @property
    def pending_selector(self) -> str:
        return f"spec.schedulerName={self.scheduler_name},spec.nodeName="

    async def get(self, path: str, **params: str) -> Any:
        async with self.session.get(self.server + path, params=params) as resp:
            resp.raise_for_status()
            return await resp.json()

    def offer(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if pod["spec"].get("nodeName") or meta["uid"] in self.seen:
            return
        self.seen.add(meta["uid"])
        self.queue.put_nowait((meta["namespace"], meta["name"], meta["uid"]))

    async def sync(self) -> str:
        """List nodes and pending pods; return the pods' resourceVersion to watch from."""
        nodes = await self.get("/api/v1/nodes")
        self.nodes = sorted(n["metadata"]["name"] for n in nodes["items"])
        pods = await self.get("/api/v1/pods", fieldSelector=self.pending_selector)
        for pod in pods["items"]:
            self.offer(pod)
        return str(pods["metadata"]["resourceVersion"])

    async def watch(self, resource_version: str) -> None:
        while True:
            params = {
                "watch": "1",
                "fieldSelector": self.pending_selector,
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "600",
            }
            async with self.session.get(self.server + "/api/v1/pods", params=params) as resp:
                resp.raise_for_status()
                async for line in resp.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # e.g. 410 Gone: start again from a fresh list
                        resource_version = await self.sync()
                        break
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] == "ADDED":
                        self.offer(obj)

    async def worker(self) -> None:
        """Bind the next pending pod, again and again; queue its Scheduled event the moment the bind succeeds."""
        while True:
            namespace, name, uid = await self.queue.get()
            node = self.nodes[self.next_node % len(self.nodes)]
            self.next_node += 1
            url = f"{self.server}/api/v1/namespaces/{namespace}/pods/{name}/binding"
            async with self.session.post(url, data=json.dumps(binding_body(namespace, name, uid, node))) as resp:
                await resp.read()
                ok = resp.status < 300
            if not ok:
                self.errors += 1
            elif self.event_session is not None:
                self.event_queue.put_nowait(
                    scheduled_event_body(namespace, name, uid, node, component=self.scheduler_name)
                )

    async def event_writer(self) -> None:
        """Post queued Scheduled events, one at a time, over the events' own connection pool."""
        assert self.event_session is not None
        while True:
            body = await self.event_queue.get()
            url = f"{self.server}/api/v1/namespaces/{body['metadata']['namespace']}/events"
            async with self.event_session.post(url, data=json.dumps(body)) as resp:
                await resp.read()
                if resp.status < 300:
                    self.events += 1
                else:
                    self.event_errors += 1


async def run(args: argparse.Namespace) -> None:
    server, session = kube_session(Path(args.kubeconfig), limit=args.in_flight + 1)  # +1: the watch
    event_session = kube_session(Path(args.kubeconfig), limit=args.event_in_flight)[1] if args.events else None
    async with session, event_session or contextlib.nullcontext():
        binder = RawBinder(server, session, scheduler_name=args.scheduler_name, event_session=event_session)
        resource_version = await binder.sync()
        if not binder.nodes:
            sys.exit("raw_binder: no nodes")
        if args.ready_file:
            Path(args.ready_file).write_text(f"{len(binder.nodes)} nodes, {binder.queue.qsize()} pending pods\n")
        workers = [asyncio.create_task(binder.worker()) for _ in range(args.in_flight)]
        workers += [
            asyncio.create_task(binder.event_writer()) for _ in range(args.event_in_flight if args.events else 0)
        ]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        watch = asyncio.create_task(binder.watch(resource_version))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([watch, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in (watch, stopped, *workers):
            task.cancel()
        await asyncio.gather(watch, stopped, *workers, return_exceptions=True)
        if watch.done() and not watch.cancelled() and watch.exception() is not None:
            raise watch.exception()  # type: ignore[misc]
        events = (
            f", {binder.events} Scheduled events, {binder.event_errors} refused, {binder.event_queue.qsize()} unsent"
            if args.events
            else ""
        )
        print(f"raw_binder: {binder.next_node} binds, {binder.errors} refused{events}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required="KUBECONFIG" not in os.environ)
    ap.add_argument("--scheduler-name", default="raw-binder", help="bind pods whose spec.schedulerName is this")
    ap.add_argument("--events", action="store_true", help="also post one Scheduled Event per bound pod")
    ap.add_argument("--in-flight", type=int, default=64, help="binds in flight at once (default 64)")
    ap.add_argument(
        "--event-in-flight", type=int, default=64, help="with --events: events in flight at once (default 64)"
    )
    ap.add_argument("--ready-file", help="write this file once the nodes and pending pods are listed")
    asyncio.run(run(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
