"""Measured node utilisation for the load-aware plugins: the usage snapshot and what a score reads from it.

The snapshot is an input of the cycle, as the nodes are: the edge (``edge/usage.py``) polls a metrics
source (metrics.k8s.io NodeMetrics through the API server, or a Prometheus query) and publishes a
``UsageSnapshot`` in ``ClusterObjects.node_usage`` under its source's key; ``simulate`` reads one from
CLUSTER.yaml's ``usage:`` section (``sim/loader.py``). Nothing here reads a clock: a snapshot carries
``now``, the time of the poll that published it (the same clock as the samples' timestamps, seconds
since the epoch), and staleness is judged against it, so a sample goes stale at most one polling
interval late.

``reading`` is the one rule the plugins share (scheduler-plugins' Trimaran, ``pkg/trimaran``):

- a fresh sample (not older than ``stale_after``) gives the node's cpu / memory utilisation in percent
  of capacity (with their standard deviations when the source has them); pods placed on the node
  since the sample (assumed or bound by us or anyone: the cache's pods that were not on the node when
  the sample arrived, and those whose PodScheduled condition turned True less than ``REPORTING_LAG``
  before the sample was taken, as Trimaran's ``PodAssignEventHandler`` window) are added at their
  requests, so a burst of pods does not pile onto the node that looked idle;
- a missing or stale sample falls back to the node's requests (every pod's requests over allocatable),
  and the reading says why, which ``explain`` shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..model.objects import Node, Pod
from ..model.resources import QuantityError, to_milli, to_units
from ..model.timestamps import parse_time
from .arguments import PluginArgsError
from .basics import StateKey
from .nodeinfo import NodeInfo

__all__ = [
    "ANY_SOURCE",
    "METRICS_API",
    "PROMETHEUS",
    "SCORE_NOTES",
    "MetricsSource",
    "NodeUsage",
    "Reading",
    "UsageNote",
    "UsageSnapshot",
    "reading",
]

METRICS_API: Final = "MetricsAPI"
PROMETHEUS: Final = "Prometheus"
#: seconds a pod's usage may take to show in a sample: a pod scheduled less than this before the sample
#: counts at its requests too (Trimaran's ``metricsAgentReportingIntervalSeconds``)
REPORTING_LAG: Final = 60.0
#: the key of a snapshot every source reads when its own key has none (``simulate``'s CLUSTER.yaml)
ANY_SOURCE: Final = "*"
#: the default Prometheus queries: node_exporter's cpu and memory utilisation in percent, by instance
DEFAULT_CPU_QUERY: Final = '100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m])))'
DEFAULT_MEMORY_QUERY: Final = "100 * (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)"

#: per-node notes plugins leave for ``explain`` ((plugin name, node name) -> text); ``core/scheduling/explanation.py``
#: attaches each to that plugin's score on that node
SCORE_NOTES: Final = StateKey[dict[tuple[str, str], object]]("ScoreNotes")


@dataclass(frozen=True, slots=True)
class MetricsSource:
    """Where utilisation comes from (replaces Trimaran's ``watcherAddress`` / ``metricProvider``).

    ``MetricsAPI``: metrics.k8s.io/v1beta1 NodeMetrics through the API server (metrics-server).
    ``Prometheus``: an instant ``query`` (cpu percent per node) and ``memoryQuery`` at ``address``, the
    node named by the sample's ``nodeLabel``. Polled every ``interval`` seconds; a sample older than
    ``staleAfter`` seconds is not used (the node falls back to requests).
    """

    type: Literal["MetricsAPI", "Prometheus"] = "MetricsAPI"
    address: str = ""
    query: str = ""
    memory_query: str = ""
    node_label: str = "instance"
    interval: float = 30.0
    stale_after: float = 180.0

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise PluginArgsError("interval", f"must be positive seconds, not {self.interval}")
        if self.stale_after <= 0:
            raise PluginArgsError("staleAfter", f"must be positive seconds, not {self.stale_after}")
        if self.type == PROMETHEUS:
            if not self.address.startswith(("http://", "https://")):
                raise PluginArgsError("address", f"a Prometheus source needs an http(s) URL, not {self.address!r}")
            if not self.node_label:
                raise PluginArgsError("nodeLabel", "must not be empty")
        elif self.address or self.query or self.memory_query:
            raise PluginArgsError("type", "address and queries apply to a Prometheus source only")

    @property
    def key(self) -> str:
        """The key its snapshots are published under: equal sources share one poller."""
        if self.type == METRICS_API:
            return METRICS_API
        return f"{PROMETHEUS} {self.address} {self.cpu_query} | {self.mem_query} by {self.node_label}"

    @property
    def cpu_query(self) -> str:
        return self.query or DEFAULT_CPU_QUERY

    @property
    def mem_query(self) -> str:
        return self.memory_query or DEFAULT_MEMORY_QUERY


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's sample: utilisation in percent of capacity, its standard deviations, when it was taken."""

    cpu: float
    memory: float | None = None
    cpu_std: float = 0.0
    memory_std: float = 0.0
    #: when the sample was taken (seconds since the epoch)
    timestamp: float = 0.0
    #: uids of the pods the cache had on the node when the sample arrived; the node's other pods are
    #: counted at their requests. None: every pod on the node is in the sample
    pods: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class UsageSnapshot:
    """Every node's latest sample from one source, ``now`` (the poll's time) and the last poll's failure."""

    nodes: Mapping[str, NodeUsage] = field(default_factory=dict)
    now: float = 0.0
    source: str = ""
    error: str = ""
    #: (node name, stale_after) -> (the NodeInfo generation, its reading): what ``reading`` computed,
    #: valid while the node does not change (a new poll makes a new snapshot, so the memo goes with it)
    memo: dict[tuple[str, float], tuple[int, Reading]] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Reading:
    """What a score used for one node: utilisation in percent, where it came from and why."""

    cpu: float
    #: None when the source measures no memory
    memory: float | None
    cpu_std: float
    memory_std: float
    #: "metrics" or "requests"
    basis: str
    #: why requests were used ("" for metrics)
    why: str
    #: cpu percent measured (before the pods placed since), or from requests
    measured_cpu: float = 0.0
    #: the sample's age in seconds
    age: float = 0.0
    #: pods placed since the sample, counted at their requests (cpu millicores, memory bytes)
    added: tuple[Pod, ...] = ()
    added_milli_cpu: int = 0
    added_memory: int = 0

    @property
    def from_metrics(self) -> bool:
        return self.basis == "metrics"

    def note(self) -> str:
        """The text ``explain`` shows next to the score."""
        base = f"cpu {self.cpu:.1f}%"
        if self.cpu_std:
            base += f" (sd {self.cpu_std:.1f})"
        base += ", memory not measured" if self.memory is None else f", memory {self.memory:.1f}%"
        if self.memory_std:
            base += f" (sd {self.memory_std:.1f})"
        if self.from_metrics:
            text = f"{base} measured (sample {self.age:.0f}s old)"
            if self.added:
                text += f" + {len(self.added)} pod(s) placed since, at requests"
            return text
        return f"{base} from requests: {self.why}"


@dataclass(frozen=True, slots=True)
class UsageNote:
    """A load-aware score's note for ``explain`` (``SCORE_NOTES``), formatted only when read."""

    reading: Reading
    #: TargetLoadPacking: the predicted cpu percent with the pod, and the pods placed since, predicted
    predicted_cpu: float | None = None
    predicted_added: int = 0

    def __str__(self) -> str:
        text = self.reading.note()
        if self.predicted_added:
            text += f" (predicted {self.predicted_added}m)"
        if self.predicted_cpu is not None:
            text += f"; predicted cpu {self.predicted_cpu:.1f}% with the pod"
        return text


def go_round(x: float) -> int:
    """Go's ``math.Round``: to the nearest integer, halves away from zero."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def snapshot_for(usage: Mapping[str, UsageSnapshot], source: MetricsSource) -> UsageSnapshot | None:
    """The snapshot `source`'s poller published, else the one every source reads (simulate's)."""
    return usage.get(source.key) or usage.get(ANY_SOURCE)


def _percent(used: int, total: int) -> float:
    return 100.0 * used / total if total > 0 else 0.0


def reading(node: NodeInfo, usage: UsageSnapshot | None, *, stale_after: float) -> Reading:
    """The utilisation a load-aware score uses for `node` (see the module docstring)."""
    if usage is None:
        return _from_requests(node, "no metrics yet")
    key = (node.name, stale_after)
    memo = usage.memo.get(key)
    if memo is not None and memo[0] == node.generation:
        return memo[1]
    found = _reading(node, usage, stale_after)
    usage.memo[key] = (node.generation, found)
    return found


def _from_requests(node: NodeInfo, why: str) -> Reading:
    req, alloc = node.requested, node.allocatable
    cpu = _percent(req.milli_cpu, alloc.milli_cpu)
    return Reading(cpu, _percent(req.memory, alloc.memory), 0.0, 0.0, "requests", why, cpu)


def _reading(node: NodeInfo, usage: UsageSnapshot, stale_after: float) -> Reading:
    sample = usage.nodes.get(node.name)
    if sample is None:
        return _from_requests(
            node, f"no metrics for the node ({usage.error})" if usage.error else "no metrics for the node"
        )
    age = usage.now - sample.timestamp
    if age > stale_after:
        why = f"metrics stale: {age:.0f}s old > {stale_after:.0f}s"
        return _from_requests(node, f"{why} ({usage.error})" if usage.error else why)
    known = sample.pods
    recent = sample.timestamp - REPORTING_LAG
    added = tuple(
        p
        for p in node.iter_pods()
        if (known is not None and p.uid not in known) or (p.scheduled_at is not None and p.scheduled_at > recent)
    )
    milli = sum(p.requests.milli_cpu for p in added)
    memory = sum(p.requests.memory for p in added)
    alloc = node.allocatable
    return Reading(
        sample.cpu + _percent(milli, alloc.milli_cpu),
        sample.memory + _percent(memory, alloc.memory) if sample.memory is not None else None,
        sample.cpu_std,
        sample.memory_std,
        "metrics",
        "",
        sample.cpu,
        max(0.0, age),
        added,
        milli,
        memory,
    )


# --------------------------------------------------------------------------- reading samples

#: a node annotation ``simulate`` reads (percent of capacity): ``cpu=75,memory=40,cpuStd=5,memoryStd=2``
USAGE_ANNOTATION: Final = "kopf-scheduler.io/usage"
_ANNOTATION_KEYS: Final = {"cpu": "cpu", "memory": "memory", "cpustd": "cpu_std", "memorystd": "memory_std"}


class UsageError(ValueError):
    """A sample that cannot be read; the message names the field."""


def _capacity(node: Node) -> tuple[int, int]:
    """The node's cpu (millicores) and memory (bytes) capacity; allocatable when capacity is not reported."""
    cap, alloc = node.capacity, node.allocatable
    return cap.milli_cpu or alloc.milli_cpu, cap.memory or alloc.memory


def parse_node_metrics(body: Mapping[str, Any], node: Node, *, pods: frozenset[str] | None = None) -> NodeUsage:
    """A metrics.k8s.io/v1beta1 NodeMetrics object as a sample: usage over the node's capacity, in percent."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        raise UsageError(f"NodeMetrics {node.name}: usage is missing")
    cpu_cap, mem_cap = _capacity(node)
    try:
        cpu = to_milli(usage["cpu"]) if "cpu" in usage else None
        memory = to_units(usage["memory"]) if "memory" in usage else None
    except QuantityError as exc:
        raise UsageError(f"NodeMetrics {node.name}: usage: {exc}") from None
    if cpu is None or cpu_cap <= 0:
        raise UsageError(f"NodeMetrics {node.name}: no cpu usage, or the node reports no cpu capacity")
    when = parse_time(str(body.get("timestamp") or "")) if body.get("timestamp") else None
    return NodeUsage(
        100.0 * cpu / cpu_cap,
        100.0 * memory / mem_cap if memory is not None and mem_cap > 0 else None,
        timestamp=when.timestamp() if when is not None else 0.0,
        pods=pods,
    )


def parse_usage_annotation(text: str, *, timestamp: float, pods: frozenset[str] | None = None) -> NodeUsage:
    """``cpu=75,memory=40[,cpuStd=5][,memoryStd=2]`` (percent of capacity) as a sample taken at `timestamp`."""
    values: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        field_name = _ANNOTATION_KEYS.get(key.strip().lower())
        if not sep or field_name is None:
            raise UsageError(f"{USAGE_ANNOTATION}: {part.strip()!r}: expected cpu=, memory=, cpuStd= or memoryStd=")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"{USAGE_ANNOTATION}: {key.strip()}: {value.strip()!r} is not a number") from None
        if not 0 <= number <= 100:
            raise UsageError(f"{USAGE_ANNOTATION}: {key.strip()}: {number} is not a percentage (0..100)")
        values[field_name] = number
    if "cpu" not in values:
        raise UsageError(f"{USAGE_ANNOTATION}: cpu= is required")
    return NodeUsage(
        values["cpu"],
        values.get("memory"),
        values.get("cpu_std", 0.0),
        values.get("memory_std", 0.0),
        timestamp,
        pods,
    )
