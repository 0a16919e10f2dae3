"""The scheduler's Prometheus metrics, named and bucketed as upstream kube-scheduler's (seconds).

Upstream source: pkg/scheduler/metrics/metrics.go. Each `SchedulerMetrics` owns a private
`CollectorRegistry`, so tests and several schedulers in one process never collide in the global
one. Label values that upstream fixes (result, queue, cache type...) are checked, because a typo
would silently create a new time series that no dashboard shows.

Two names have no exact modern counterpart and are documented at their definitions:
`scheduler_binding_duration_seconds` and `scheduler_e2e_scheduling_duration_seconds`.

The queue's two families are read from the queues when a scrape renders them (`before_render`, as a
Prometheus collector would): the core keeps the counts as plain values (`SchedulingQueue.take_incoming`,
`unschedulable_plugin_counts`) and imports nothing of this module; `observe_queue` records them.

Beside the scheduler's own families the registry carries prometheus-client's process, platform and
garbage-collector collectors (``process_cpu_seconds_total``, ``process_resident_memory_bytes``,
``python_info``, ``python_gc_*``: what dashboards select a component's CPU and memory by, as Go's
collectors give upstream), client-go's two request families (``rest_client_requests_total{code,method,host}``,
``rest_client_request_duration_seconds{verb,host}``; component-base/metrics/prometheus/restclient),
fed by the edge's API client through ``observe_request``, and the framework's two timing families
(``scheduler_framework_extension_point_duration_seconds``, ``scheduler_plugin_execution_duration_seconds``),
fed by the cycle through a ``FrameworkRecorder`` (``framework_recorder``; ``core/framework/instrumentation.py``).

No `_created` series: upstream exports none, and prometheus_client would add one per counter,
histogram and labelled child. Its switch is process-wide; every `SchedulerMetrics` turns it off.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ..core.framework.basics import Code
from ..core.framework.instrumentation import STATUS_LABELS

__all__ = [
    "ATTEMPT_RESULTS",
    "BINDING_RESULTS",
    "CACHE_TYPES",
    "REQUEST_ERROR_CODE",
    "QUEUES",
    "AttemptResult",
    "BindingResult",
    "FrameworkTimings",
    "PlainHistogram",
    "Queue",
    "SchedulerMetrics",
    "exponential_buckets",
]

AttemptResult = Literal["scheduled", "unschedulable", "error"]
BindingResult = Literal["success", "error"]
Queue = Literal["active", "backoff", "unschedulable", "gated"]

ATTEMPT_RESULTS: Final = frozenset({"scheduled", "unschedulable", "error"})
BINDING_RESULTS: Final = frozenset({"success", "error"})
QUEUES: Final = frozenset({"active", "backoff", "unschedulable", "gated"})
CACHE_TYPES: Final = ("nodes", "pods", "assumed_pods")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Upstream's `metrics.ExponentialBuckets`: start, start*factor, ... (count bounds)."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("exponential_buckets needs start > 0, factor > 1, count >= 1")
    return tuple(start * factor**i for i in range(count))


# 1 ms .. ~16 s: one scheduling attempt, the algorithm, binding, e2e.
_LATENCY_BUCKETS: Final = exponential_buckets(0.001, 2, 15)
# 10 ms .. ~87 min: a pod's whole time from first enqueue to bound.
_SLI_BUCKETS: Final = exponential_buckets(0.01, 2, 20)
_ATTEMPTS_BUCKETS: Final = exponential_buckets(1, 2, 5)  # 1, 2, 4, 8, 16
_VICTIMS_BUCKETS: Final = exponential_buckets(1, 2, 7)  # 1 .. 64, as upstream
_WORKLOAD_VICTIMS_BUCKETS: Final = exponential_buckets(1, 2, 11)  # 1 .. 1024, as upstream
# upstream framework_extension_point_duration_seconds: 0.1 ms .. ~200 ms
_EXTENSION_POINT_BUCKETS: Final = exponential_buckets(0.0001, 2, 12)
# upstream plugin_execution_duration_seconds: 10 us .. ~22 ms, factor 1.5
_PLUGIN_BUCKETS: Final = exponential_buckets(0.00001, 1.5, 20)
# client-go rest_client_request_duration_seconds
_REQUEST_BUCKETS: Final = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
#: client-go's code label when no answer came (its errors are unbounded strings)
REQUEST_ERROR_CODE: Final = "<error>"


def _check(value: str, allowed: frozenset[str] | tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(allowed)}")
    return value


class SchedulerMetrics:
    """All collectors of one scheduler process, registered in its own registry.

    Methods are named for the event they record; durations are seconds (floats).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        """`process`: register the process, platform and GC collectors (they read this process's
        /proc and interpreter, so one registry per process should have them: the one it serves)."""
        disable_created_metrics()  # type: ignore[no-untyped-call]  # see the module docstring
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        if process:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                r.register(collector)
        self._extension_point_duration = PlainHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ("extension_point", "status", "profile"),
            _EXTENSION_POINT_BUCKETS,
        )
        self._plugin_duration = PlainHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point (a 10% sample of cycles).",
            ("plugin", "extension_point", "status"),
            _PLUGIN_BUCKETS,
        )
        r.register(self._extension_point_duration)
        r.register(self._plugin_duration)
        self._requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self._request_duration = PlainHistogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ("verb", "host"),
            _REQUEST_BUCKETS,
        )
        r.register(self._request_duration)
        #: ``rest_client_requests_total`` children by (host, method, status): a dict lookup, not ``labels()``
        self._counters: dict[tuple[str, str, int], Counter] = {}
        self._recorders: dict[str, FrameworkTimings] = {}
        self._attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self._attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self._algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds (filter, score, select host), failures included.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # v1.9's scheduler_e2e_scheduling_latency_microseconds in seconds (upstream later renamed it
        # scheduler_e2e_scheduling_duration_seconds, then deprecated it for the attempt duration):
        # from the start of the algorithm to the end of the binding, after every bind attempt.
        self._e2e_duration = Histogram(
            "scheduler_e2e_scheduling_duration_seconds",
            "E2e scheduling latency in seconds: algorithm start to binding end, per bind attempt.",
            ["result", "profile"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # v1.9's scheduler_binding_latency_microseconds in seconds, with a result label: the
        # asynchronous binding step alone (POST pods/{name}/binding, or an extender's bind verb),
        # timed from the request to the response. Modern upstream reports it only as the Bind
        # extension point of scheduler_framework_extension_point_duration_seconds.
        self._binding_duration = Histogram(
            "scheduler_binding_duration_seconds",
            "Binding latency in seconds: the bind API request alone, by result.",
            ["result"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self._pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=r,
        )
        self._sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue, "
            "by the number of attempts it took.",
            ["attempts"],
            buckets=_SLI_BUCKETS,
            registry=r,
        )
        self._pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_ATTEMPTS_BUCKETS,
            registry=r,
        )
        self._preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now.",
            registry=r,
        )
        self._preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=_VICTIMS_BUCKETS,
            registry=r,
        )
        self._workload_preemption_attempts = Counter(
            "scheduler_workload_preemption_attempts",
            "Total preemption attempts initiated by workload (including pod groups) in the cluster till now.",
            ["result"],
            registry=r,
        )
        self._workload_preemption_victims = Histogram(
            "scheduler_workload_preemption_victims",
            "Number of pod preemption victims caused by workload preemption.",
            buckets=_WORKLOAD_VICTIMS_BUCKETS,
            registry=r,
        )
        self._incoming_pods = Counter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues, by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self._cache_size = Gauge(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        self._unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name.",
            ["plugin", "profile"],
            registry=r,
        )
        self._batch_attempts = Counter(
            "scheduler_batch_attempts",
            "Counts of results when we attempt to use batching.",
            ["profile", "result"],
            registry=r,
        )
        self._batch_cache_flushed = Counter(
            "scheduler_batch_cache_flushed",
            "Counts of cache flushes by reason.",
            ["profile", "reason"],
            registry=r,
        )
        self._batch_rescore_attempts = Counter(
            "scheduler_batch_rescore_attempts",
            "Counts of rescore attempts during opportunistic batching.",
            ["profile"],
            registry=r,
        )
        self._leader = Gauge(
            "kopf_scheduler_leader",
            "1 while this process holds the policy's leader Lease, else 0.",
            ["policy"],
            registry=r,
        )
        #: profile -> the plugins ``scheduler_unschedulable_pods`` has a series for
        self._unschedulable_seen: dict[str, set[str]] = {}
        self._before_render: list[Callable[[], None]] = []
        self._policy_generation = Gauge(
            "kopf_scheduler_policy_generation",
            "metadata.generation of the SchedulingPolicy currently in force.",
            ["policy"],
            registry=r,
        )
        self._watch_resumes = Counter(
            "kopf_scheduler_informer_watch_resumes",
            "Watches of an informed kind resumed from their last resourceVersion, by why they ended.",
            ["kind", "reason"],
            registry=r,
        )
        self._relists = Counter(
            "kopf_scheduler_informer_relists",
            "Lists of an informed kind after its first, by why "
            "(expired, unreachable, blind, watch-failures, resync, failure).",
            ["kind", "reason"],
            registry=r,
        )
        self._pauses = Counter(
            "kopf_scheduler_informer_pauses",
            "Times scheduling paused while a kind relisted after lost history (only pods and nodes pause).",
            ["kind"],
            registry=r,
        )
        self._pause_seconds = Counter(
            "kopf_scheduler_informer_pause_seconds",
            "Seconds scheduling was paused while a kind relisted after lost history.",
            ["kind"],
            registry=r,
        )
        self._kopf_restarts = Counter(
            "kopf_scheduler_kopf_restarts",
            "Times Kopf's orchestration ended on an error and was started again in the same process.",
            registry=r,
        )

    # --- per scheduling cycle ------------------------------------------------------------------

    def observe_attempt(self, result: AttemptResult, profile: str, seconds: float) -> None:
        """One scheduling attempt ended (scheduled = assumed and handed to binding)."""
        _check(result, ATTEMPT_RESULTS, "attempt result")
        self._attempts.labels(result, profile).inc()
        self._attempt_duration.labels(result, profile).observe(seconds)

    def observe_batch(
        self, profile: str, attempts: Mapping[str, int], flushed: Mapping[str, int], rescores: int
    ) -> None:
        """Opportunistic batching's counts since the last call (``core/toolkit/batching.py``), upstream's
        ``scheduler_batch_attempts_total{profile,result}``, ``scheduler_batch_cache_flushed_total{profile,reason}``
        and ``scheduler_batch_rescore_attempts_total{profile}``."""
        for result, count in attempts.items():
            self._batch_attempts.labels(profile, result).inc(count)
        for reason, count in flushed.items():
            self._batch_cache_flushed.labels(profile, reason).inc(count)
        if rescores:
            self._batch_rescore_attempts.labels(profile).inc(rescores)

    def observe_algorithm(self, seconds: float) -> None:
        """The algorithm (filter -> score -> select host) ran, whatever its outcome."""
        self._algorithm_duration.observe(seconds)

    def observe_binding(self, result: BindingResult, seconds: float) -> None:
        """A bind request finished."""
        _check(result, BINDING_RESULTS, "binding result")
        self._binding_duration.labels(result).observe(seconds)

    def observe_e2e(self, result: AttemptResult, profile: str, seconds: float) -> None:
        """A pod's cycle ended after its bind attempt: from algorithm start to binding end."""
        _check(result, ATTEMPT_RESULTS, "attempt result")
        self._e2e_duration.labels(result, profile).observe(seconds)

    def observe_pod_scheduled(self, attempts: int, seconds_since_first_queued: float) -> None:
        """A pod was bound after `attempts` attempts, this long after it first entered the queue."""
        if attempts < 1:
            raise ValueError("a scheduled pod took at least one attempt")
        self._sli_duration.labels(str(attempts)).observe(seconds_since_first_queued)
        self._pod_attempts.observe(attempts)

    def observe_preemption(self, victims: int) -> None:
        """A preemption attempt ran and chose `victims` pods (0 when it found no candidate)."""
        self._preemption_attempts.inc()
        self._preemption_victims.observe(victims)

    def observe_workload_preemption(self, code: Code, victims: int) -> None:
        """A gang's preemption ran (its status code, upstream's ``result`` label) and chose `victims` pods
        (upstream observes them when it evicts: only when there are some)."""
        self._workload_preemption_attempts.labels(STATUS_LABELS[code]).inc()
        if victims:
            self._workload_preemption_victims.observe(victims)

    def framework_recorder(self, profile: str) -> FrameworkTimings:
        """The ``FrameworkRecorder`` a cycle of `profile` reports its extension points and plugins to."""
        recorder = self._recorders.get(profile)
        if recorder is None:
            recorder = FrameworkTimings(self._extension_point_duration, self._plugin_duration, profile)
            self._recorders[profile] = recorder
        return recorder

    def observe_extension_point(self, point: str, code: Code, profile: str, seconds: float) -> None:
        """All plugins of one extension point ran in one cycle (upstream: every cycle)."""
        self._extension_point_duration.observe((point, STATUS_LABELS[code], profile), seconds)

    def observe_plugin(self, point: str, plugin: str, code: Code, seconds: float) -> None:
        """One plugin call at one extension point, in a sampled cycle."""
        self._plugin_duration.observe((plugin, point, STATUS_LABELS[code]), seconds)

    def observe_request(self, host: str, method: str, status: int, seconds: float) -> None:
        """One HTTP request to the API server answered with `status` (0: no answer, client-go's
        ``<error>``) after `seconds`: ``rest_client_requests_total`` and ``rest_client_request_duration_seconds``."""
        count = self._counters.get((host, method, status))
        if count is None:
            code = str(status) if status else REQUEST_ERROR_CODE
            count = self._counters[(host, method, status)] = self._requests.labels(code, method, host)
        count.inc()
        if seconds >= 0:  # a watch's answer is counted, not timed (as client-go)
            self._request_duration.observe((method, host), seconds)

    # --- queue and cache -----------------------------------------------------------------------

    def inc_incoming_pods(self, queue: Queue, event: str, count: int = 1) -> None:
        """`count` pods entered `queue` because of `event` (upstream event labels: PodAdd, NodeAdd...)."""
        _check(queue, QUEUES, "queue")
        self._incoming_pods.labels(queue, event).inc(count)

    def observe_queue(
        self, profile: str, incoming: Mapping[tuple[str, str], int], unschedulable: Mapping[str, int]
    ) -> None:
        """One scheduling queue's news: the pods that entered each sub-queue since the last call, by
        (queue, event) (``scheduler_queue_incoming_pods_total``, as upstream counts every add and move),
        and its unschedulable pool now, by rejecting plugin (``scheduler_unschedulable_pods``; a plugin
        that has no pod there any more reads 0, so no gauge goes stale)."""
        for (queue, event), count in incoming.items():
            if count > 0:
                self._incoming_pods.labels(_check(queue, QUEUES, "queue"), event).inc(count)
        seen = self._unschedulable_seen.setdefault(profile, set())
        for plugin in seen - unschedulable.keys():
            self.set_unschedulable_pods(plugin, profile, 0)
        for plugin, count in unschedulable.items():
            self.set_unschedulable_pods(plugin, profile, count)
        seen.update(unschedulable)

    def set_pending_pods(self, counts: Mapping[Queue, int]) -> None:
        """Current queue lengths; queues left out are set to 0 so a gauge never goes stale."""
        known: dict[str, int] = {_check(queue, QUEUES, "queue"): count for queue, count in counts.items()}
        for queue in sorted(QUEUES):
            self._pending_pods.labels(queue).set(known.get(queue, 0))

    def set_cache_size(self, *, nodes: int, pods: int, assumed_pods: int) -> None:
        """Current scheduler cache contents."""
        for kind, value in zip(CACHE_TYPES, (nodes, pods, assumed_pods), strict=True):
            self._cache_size.labels(kind).set(value)

    def set_unschedulable_pods(self, plugin: str, profile: str, count: int) -> None:
        """Pods in the unschedulable pool that `plugin` rejected."""
        self._unschedulable_pods.labels(plugin, profile).set(count)

    # --- operator state ------------------------------------------------------------------------

    def set_leader(self, policy: str, leading: bool) -> None:
        """Leader election changed for `policy`'s Lease."""
        self._leader.labels(policy).set(1 if leading else 0)

    def set_policy_generation(self, policy: str, generation: int) -> None:
        """A SchedulingPolicy generation came into force."""
        self._policy_generation.labels(policy).set(generation)

    def forget_policy(self, policy: str) -> None:
        """Drop a deleted policy's series (leader and generation gauges; its profile's series stay)."""
        for gauge in (self._leader, self._policy_generation):
            try:
                gauge.remove(policy)
            except KeyError:
                pass

    # --- the edge ------------------------------------------------------------------------------

    def observe_informer_restart(self, kind: str, action: str, reason: str) -> None:
        """An informer's watch ended: resumed (`action` "resume") or the kind listed again ("relist")."""
        counter = self._watch_resumes if action == "resume" else self._relists
        counter.labels(kind, reason).inc()

    def observe_informer_pause(self, kind: str, seconds: float) -> None:
        """Scheduling was paused `seconds` while `kind` relisted after lost history."""
        self._pauses.labels(kind).inc()
        self._pause_seconds.labels(kind).inc(seconds)

    def inc_kopf_restarts(self) -> None:
        self._kopf_restarts.inc()

    # --- exposition ----------------------------------------------------------------------------

    content_type: Final = CONTENT_TYPE_LATEST

    def before_render(self, refresh: Callable[[], None]) -> None:
        """Call `refresh` before each exposition: values kept elsewhere are recorded as of the scrape."""
        self._before_render.append(refresh)

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        for refresh in self._before_render:
            refresh()
        return generate_latest(self.registry)


class FrameworkTimings:
    """``core.framework.basics.FrameworkRecorder`` over a ``SchedulerMetrics``, for one profile."""

    __slots__ = ("_points", "_plugins", "_profile")

    clock = staticmethod(time.perf_counter)

    def __init__(self, points: PlainHistogram, plugins: PlainHistogram, profile: str) -> None:
        self._points = points
        self._plugins = plugins
        self._profile = profile

    def extension_point(self, point: str, code: Code, seconds: float) -> None:
        self._points.observe((point, STATUS_LABELS[code], self._profile), seconds)

    def plugin(self, point: str, plugin: str, code: Code, seconds: float) -> None:
        self._plugins.observe((plugin, point, STATUS_LABELS[code]), seconds)


class PlainHistogram(Collector):
    """A labelled histogram kept in plain lists and rendered by its own collector, for the per-cycle
    and per-request families: prometheus-client's ``Histogram`` takes a lock for the sum and one for
    the bucket (about 1.5 us an observation, measured with bench/bench_metrics.py), this a dict lookup
    and a bisection. Buckets are cumulative at render, as Prometheus wants them. Observations come from
    the event loop's thread, or from one worker thread deciding an attempt (policies with extenders):
    the GIL makes each ``+=`` whole enough for counts that are read as rates.
    """

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> None:
        self.name = name
        self._documentation = documentation
        self._labels = labels
        self._bounds = list(buckets)
        self._les = [floatToGoString(b) for b in buckets] + ["+Inf"]  # type: ignore[no-untyped-call]
        #: label values -> a count per bucket (the last is +Inf), then the sum
        self._series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = [0.0] * (len(self._bounds) + 2)
        series[bisect_left(self._bounds, value)] += 1  # the first bound >= value: le is inclusive
        series[-1] += value

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self._documentation, labels=self._labels)
        for labels, series in list(self._series.items()):
            total, buckets = 0.0, []
            for le, count in zip(self._les, series[:-1]):
                total += count
                buckets.append((le, total))
            family.add_metric(list(labels), buckets, sum_value=series[-1])
        yield family

    def describe(self) -> Iterable[Metric]:
        yield HistogramMetricFamily(self.name, self._documentation, labels=self._labels)
