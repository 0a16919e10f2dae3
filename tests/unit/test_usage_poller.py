"""The node metrics pollers (edge/usage.py): metrics.k8s.io through the fake API server, Prometheus from a
local HTTP server, failures kept beside the previous samples, and the pollers following the policies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from builders import make_node, make_pod
from fakeapi import FakeApiServer

from kopf_scheduler.core.config.ownership import PolicyMeta
from kopf_scheduler.core.framework.usage import METRICS_API, MetricsSource, UsageSnapshot, reading
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.edge.usage import NODE_METRICS_PATH, UsagePoller, UsagePollers
from kopf_scheduler.kube.app import App

METRICS = ("metrics.k8s.io", "v1beta1", "nodes")
NOW = 1_767_225_700.0  # 100 s after the samples' 2026-01-01T00:00:00Z


def node_metrics(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": "2026-01-01T00:00:00Z",
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def cluster() -> SchedulerCache:
    cache = SchedulerCache()
    for name in ("hot", "idle"):
        cache.add_node(make_node(name).capacity(cpu="4", memory="8Gi", pods="110").obj())
    cache.add_pod(make_pod("running").uid("running").container(cpu="1").obj().with_node("hot"))
    return cache


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 20))


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `condition` holds (polled every millisecond), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


def test_metrics_api_through_the_api_server() -> None:
    async def body() -> None:
        async with FakeApiServer() as server:
            server.register(*METRICS, "NodeMetrics", namespaced=False, subresources=())
            server.add(*METRICS, node_metrics("hot", "3", "6Gi"))
            server.add(*METRICS, node_metrics("idle", "200m", "1Gi"))
            server.add(*METRICS, node_metrics("gone", "1", "1Gi"))  # no such node: left out
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            cache = cluster()
            try:
                poller = UsagePoller(MetricsSource(), api=api, cache=cache, clock=lambda: NOW)
                generation = cache.objects.generation
                snap = await poller.poll_once()
                assert cache.objects.node_usage[METRICS_API] is snap and cache.objects.generation > generation
                assert (snap.now, snap.error, sorted(snap.nodes)) == (NOW, "", ["hot", "idle"])
                hot = snap.nodes["hot"]
                assert (hot.cpu, hot.memory, hot.timestamp) == (75.0, 75.0, NOW - 100)
                assert hot.pods == frozenset({"running"}) and snap.nodes["idle"].pods == frozenset()
                assert any(r.method == "GET" and r.path == NODE_METRICS_PATH for r in server.requests)

                # the API server fails: the previous samples stay, the failure is recorded, staleness follows
                server.fail("GET", NODE_METRICS_PATH, 503)
                poller.clock = lambda: NOW + 200
                failed = await poller.poll_once()
                assert failed.nodes == snap.nodes and "503" in failed.error
                info = cache.get_node_info("hot")
                assert info is not None
                r = reading(info, failed, stale_after=180)
                assert r.basis == "requests" and r.why.startswith("metrics stale: 300s old > 180s (GET ")
            finally:
                await api.close()

    run(body)


def test_metrics_api_not_served() -> None:
    """No metrics-server (the APIService is absent): a 404, every node falls back to requests."""

    async def body() -> None:
        async with FakeApiServer() as server:
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            cache = cluster()
            try:
                snap = await UsagePoller(MetricsSource(), api=api, cache=cache, clock=lambda: NOW).poll_once()
                assert snap.nodes == {} and "404" in snap.error
                info = cache.get_node_info("idle")
                assert info is not None
                assert reading(info, snap, stale_after=60).why.startswith("no metrics for the node (GET ")
            finally:
                await api.close()

    run(body)


class Prometheus:
    """A Prometheus HTTP API answering instant queries from a table (query -> result list, or an error)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.queries: list[str] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        self.queries.append(query)
        answer = self.answers.get(query)
        if answer is None:
            return web.json_response({"status": "error", "errorType": "bad_data", "error": "parse error"}, status=400)
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": answer}})

    async def __aenter__(self) -> Prometheus:
        app = web.Application()
        app.router.add_get("/prom/api/v1/query", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/prom"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def test_prometheus_queries() -> None:
    cpu = [
        {"metric": {"instance": "hot:9100"}, "value": [NOW - 5, "81.5"]},
        {"metric": {"instance": "idle"}, "value": [NOW - 5, "3"]},
        {"metric": {"instance": "elsewhere:9100"}, "value": [NOW - 5, "50"]},
        {"metric": {}, "value": [NOW, "1"]},
    ]
    mem = [{"metric": {"instance": "hot:9100"}, "value": [NOW - 5, "40"]}]

    async def body() -> None:
        async with Prometheus({"cpu_q": cpu, "mem_q": mem}) as prom:
            cache = cluster()
            source = MetricsSource(type="Prometheus", address=prom.url, query="cpu_q", memory_query="mem_q")
            poller = UsagePoller(source, api=None, cache=cache, clock=lambda: NOW)  # type: ignore[arg-type]
            try:
                snap = await poller.poll_once()
                assert prom.queries == ["cpu_q", "mem_q"]
                assert snap.error == "" and cache.objects.node_usage[source.key] is snap
                assert sorted(snap.nodes) == ["elsewhere:9100", "hot", "idle"]
                assert (snap.nodes["hot"].cpu, snap.nodes["hot"].memory) == (81.5, 40.0)
                assert (snap.nodes["idle"].cpu, snap.nodes["idle"].memory) == (3.0, None)
                assert snap.nodes["hot"].timestamp == NOW - 5 and snap.nodes["hot"].pods == frozenset({"running"})

                prom.answers.pop("cpu_q")
                failed = await poller.poll_once()
                assert failed.nodes == snap.nodes and "HTTP 400: parse error" in failed.error
            finally:
                poller.close()
            assert source.key not in cache.objects.node_usage

    run(body)


def test_prometheus_unreachable() -> None:
    async def body() -> None:
        cache = cluster()
        source = MetricsSource(type="Prometheus", address="http://127.0.0.1:9", interval=1)
        snap: UsageSnapshot = await UsagePoller(source, api=None, cache=cache).poll_once()  # type: ignore[arg-type]
        assert snap.nodes == {} and "ConnectError" in snap.error

    run(body)


def test_pollers_follow_the_sources() -> None:
    async def body() -> None:
        async with FakeApiServer() as server:
            server.register(*METRICS, "NodeMetrics", namespaced=False, subresources=())
            server.add(*METRICS, node_metrics("hot", "3", "6Gi"))
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            cache = cluster()
            pollers = UsagePollers(api=api, cache=cache, clock=lambda: NOW)
            try:
                interval = 0.01
                pollers.sync([MetricsSource(interval=interval), MetricsSource(interval=interval)])
                assert list(pollers.running) == [METRICS_API]
                await until(lambda: METRICS_API in cache.objects.node_usage)
                assert cache.objects.node_usage[METRICS_API].nodes["hot"].cpu == 75.0

                def polls() -> list[float]:
                    return [r.time for r in server.requests if r.path == NODE_METRICS_PATH]

                await until(lambda: len(polls()) >= 3)  # every interval, not once
                times = polls()
                assert all(later - earlier >= interval for earlier, later in zip(times, times[1:])), times
                pollers.stop()
                assert pollers.running == {} and METRICS_API not in cache.objects.node_usage
            finally:
                pollers.stop()
                await api.close()

    run(body)


def test_the_app_polls_the_sources_its_policies_name() -> None:
    """kube/app.py: a policy naming a metrics source starts its poller, and deleting it stops the poller."""
    spec = {
        "schedulerName": "aware",
        "priorities": [
            {"name": "TargetLoadPacking", "argument": {"metricsSource": {"interval": 0.05}}},
            {"name": "LoadVariationRiskBalancing", "argument": {"metricsSource": {"interval": 0.05}}},
        ],
    }

    async def body() -> None:
        async with FakeApiServer() as server:
            server.register(*METRICS, "NodeMetrics", namespaced=False, subresources=())
            server.add(*METRICS, node_metrics("hot", "3", "6Gi"))
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            app = App(api, identity="test")
            for node in cluster().node_names():
                app.cache.add_node(make_node(node).capacity(cpu="4", memory="8Gi", pods="110").obj())
            try:
                app.observe_policy(PolicyMeta("aware", 1, "2026-01-01T00:00:00Z", "uid-aware", "aware", spec))
                assert list(app.usage.running) == [METRICS_API]  # two plugins, one source, one poller
                await until(lambda: METRICS_API in app.cache.objects.node_usage)
                assert app.cache.objects.node_usage[METRICS_API].nodes["hot"].cpu == 75.0
                app.observe_policy(PolicyMeta("plain", 1, "2026-01-01T00:00:01Z", "uid-plain", "plain", {}))
                assert list(app.usage.running) == [METRICS_API]
                app.delete_policy("aware")
                assert app.usage.running == {} and METRICS_API not in app.cache.objects.node_usage
            finally:
                for stop in app.on_shutdown:
                    await stop()
                await api.close()

    run(body)
