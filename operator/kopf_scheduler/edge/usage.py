"""Polling node utilisation for the load-aware plugins: metrics.k8s.io through the API server, or Prometheus.

One ``UsagePoller`` per distinct ``MetricsSource`` (``core/framework/usage.py``) the served policies name. Every
``interval`` seconds it asks its source and publishes a ``UsageSnapshot`` in the cache's
``ClusterObjects.node_usage`` under the source's key, stamped with the wall clock of the poll (the
clock staleness is judged with, in the core). A failed poll keeps the previous samples (they go stale
in time) and records the failure, which ``explain`` shows beside a node that fell back to requests.

- ``MetricsAPI``: ``GET /apis/metrics.k8s.io/v1beta1/nodes`` through the operator's ``Api`` (its
  credentials; RBAC: ``list`` on ``nodes`` of the ``metrics.k8s.io`` group), each NodeMetrics'
  usage over its node's capacity.
- ``Prometheus``: ``GET <address>/api/v1/query?query=...`` over ``edge/transport.py``'s pool, the cpu
  and memory queries each an instant vector of percentages, the node named by ``nodeLabel`` (a value
  ``host:port``, as node_exporter's ``instance``, names node ``host`` when no node is called
  ``host:port``).

Each sample remembers the pods the cache had on its node when it arrived; the core counts the others
(placed since) at their requests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

from ..core.framework.usage import METRICS_API, MetricsSource, NodeUsage, UsageError, UsageSnapshot, parse_node_metrics
from ..core.model import paths
from ..core.state.cache import SchedulerCache
from .client import Api
from .transport import Pool

__all__ = ["NODE_METRICS_PATH", "UsagePoller", "UsagePollers"]

logger = logging.getLogger(__name__)

NODE_METRICS_PATH: Final = paths.collection("metrics.k8s.io/v1beta1", "nodes")
#: seconds a poll may take
POLL_TIMEOUT: Final = 10.0


class PollError(Exception):
    """A poll that brought nothing: the message says why (kept on the snapshot)."""


class UsagePoller:
    """Polls one source and publishes its snapshots into `cache` (see the module docstring)."""

    def __init__(
        self, source: MetricsSource, *, api: Api, cache: SchedulerCache, clock: Callable[[], float] = time.time
    ) -> None:
        self.source = source
        self.api = api
        self.cache = cache
        self.clock = clock
        self._pool: Pool | None = None
        self._last_error = ""

    async def poll_once(self) -> UsageSnapshot:
        """Ask the source once and publish what it said (or its failure, keeping the previous samples)."""
        key = self.source.key
        previous = self.cache.objects.node_usage.get(key)
        try:
            nodes = await (self._metrics_api() if self.source.type == METRICS_API else self._prometheus())
            error = ""
        except PollError as exc:
            nodes = dict(previous.nodes) if previous is not None else {}
            error = str(exc)
        if error != self._last_error:
            if error:
                logger.warning("node metrics from %s: %s", self.source.type, error)
            else:
                logger.info("node metrics from %s: %d node(s)", self.source.type, len(nodes))
            self._last_error = error
        snapshot = UsageSnapshot(nodes, self.clock(), self.source.type, error)
        self.cache.objects.node_usage[key] = snapshot
        self.cache.objects.generation += 1
        return snapshot

    async def run(self) -> None:
        """Poll every ``interval`` seconds until cancelled; a poll that raises is logged, never fatal."""
        while True:
            try:
                await self.poll_once()
            except Exception:  # a bug here must not stop the polling: the samples would go stale silently
                logger.exception("polling node metrics from %s", self.source.type)
            await asyncio.sleep(self.source.interval)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.cache.objects.node_usage.pop(self.source.key, None)
        self.cache.objects.generation += 1

    def _pods_on(self, name: str) -> frozenset[str] | None:
        info = self.cache.get_node_info(name)
        return frozenset(p.uid for p in info.iter_pods()) if info is not None else None

    # ---- metrics.k8s.io

    async def _metrics_api(self) -> dict[str, NodeUsage]:
        try:
            # no retries: the next poll is the retry, and a failure is recorded as such
            response = await asyncio.wait_for(self.api.request("GET", NODE_METRICS_PATH, retry=False), POLL_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise PollError(f"GET {NODE_METRICS_PATH}: {type(exc).__name__}: {exc}") from None
        if not response.ok:
            raise PollError(f"GET {NODE_METRICS_PATH}: {response.describe()}")
        items = response.body.get("items") if isinstance(response.body, Mapping) else None
        if not isinstance(items, list):
            raise PollError(f"GET {NODE_METRICS_PATH}: not a NodeMetricsList")
        nodes: dict[str, NodeUsage] = {}
        for item in items:
            name = str(((item or {}).get("metadata") or {}).get("name") or "")
            info = self.cache.get_node_info(name)
            if info is None or info.node is None:
                continue  # a node we do not know (yet): nothing to score
            try:
                nodes[name] = parse_node_metrics(item, info.node, pods=self._pods_on(name))
            except UsageError as exc:
                logger.debug("node metrics: %s", exc)
        return nodes

    # ---- Prometheus

    async def _prometheus(self) -> dict[str, NodeUsage]:
        cpu = await self._query(self.source.cpu_query)
        memory = await self._query(self.source.mem_query) if self.source.mem_query else {}
        nodes: dict[str, NodeUsage] = {}
        for name, (value, stamp) in cpu.items():
            mem = memory.get(name)
            nodes[name] = NodeUsage(
                value, mem[0] if mem is not None else None, timestamp=stamp, pods=self._pods_on(name)
            )
        return nodes

    async def _query(self, query: str) -> dict[str, tuple[float, float]]:
        """One instant query: node name -> (value, sample time)."""
        url = urlsplit(self.source.address)
        path = f"{url.path.rstrip('/')}/api/v1/query?{urlencode({'query': query})}"
        if self._pool is None:
            tls = ssl.create_default_context() if url.scheme == "https" else None
            port = url.port or (443 if url.scheme == "https" else 80)
            self._pool = Pool(url.hostname or "localhost", port, timeout=POLL_TIMEOUT, tls=tls, connections=2)
        head = (
            f"GET {path} HTTP/1.1\r\nHost: {url.netloc.rpartition('@')[2]}\r\n"
            "Accept: application/json\r\nUser-Agent: kopf-scheduler\r\n\r\n"
        )
        where = f"{self.source.address} query {query!r}"
        try:
            status, raw = await self._pool.send(head.encode("latin-1"), replayable=True)
        except (OSError, TimeoutError, ValueError) as exc:
            raise PollError(f"{where}: {type(exc).__name__}: {exc}") from None
        try:
            answer = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            answer = None
        if status != 200 or not isinstance(answer, Mapping) or answer.get("status") != "success":
            detail = answer.get("error") if isinstance(answer, Mapping) else raw[:200].decode(errors="replace")
            raise PollError(f"{where}: HTTP {status}: {detail}")
        return self._vector(answer.get("data"), where)

    def _vector(self, data: Any, where: str) -> dict[str, tuple[float, float]]:
        if not isinstance(data, Mapping) or data.get("resultType") != "vector":
            raise PollError(f"{where}: not an instant vector")
        out: dict[str, tuple[float, float]] = {}
        for sample in data.get("result") or ():
            label = str(((sample or {}).get("metric") or {}).get(self.source.node_label) or "")
            name = self._node_named(label)
            try:
                stamp, value = sample["value"]
                out[name] = (float(value), float(stamp))
            except (KeyError, TypeError, ValueError):
                continue
        return {k: v for k, v in out.items() if k}

    def _node_named(self, label: str) -> str:
        if not label or self.cache.get_node_info(label) is not None:
            return label
        host, sep, port = label.rpartition(":")
        return host if sep and port.isdigit() and self.cache.get_node_info(host) is not None else label


class UsagePollers:
    """The pollers of the sources the served policies name: started and stopped as policies change."""

    def __init__(self, *, api: Api, cache: SchedulerCache, clock: Callable[[], float] = time.time) -> None:
        self.api, self.cache, self.clock = api, cache, clock
        self.running: dict[str, tuple[UsagePoller, asyncio.Task[None]]] = {}

    def sync(self, sources: list[MetricsSource]) -> None:
        """Poll exactly `sources` (on the running loop): new ones start at once, gone ones stop."""
        wanted = {s.key: s for s in sources}
        for key in [k for k in self.running if k not in wanted]:
            poller, task = self.running.pop(key)
            task.cancel()
            poller.close()
            logger.info("stopped polling node metrics: %s", key)
        for key, source in wanted.items():
            if key not in self.running:
                poller = UsagePoller(source, api=self.api, cache=self.cache, clock=self.clock)
                task = asyncio.get_running_loop().create_task(poller.run())
                self.running[key] = (poller, task)
                logger.info("polling node metrics every %gs: %s", source.interval, key)

    def stop(self) -> None:
        self.sync([])
