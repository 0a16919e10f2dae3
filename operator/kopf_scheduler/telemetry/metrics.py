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

No `_created` series: upstream exports none, and prometheus_client would add one per counter,
histogram and labelled child. Its switch is process-wide; every `SchedulerMetrics` turns it off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

__all__ = [
    "ATTEMPT_RESULTS",
    "BINDING_RESULTS",
    "CACHE_TYPES",
    "QUEUES",
    "AttemptResult",
    "BindingResult",
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


def _check(value: str, allowed: frozenset[str] | tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(allowed)}")
    return value


class SchedulerMetrics:
    """All collectors of one scheduler process, registered in its own registry.

    Methods are named for the event they record; durations are seconds (floats).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # see the module docstring
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
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

    # --- per scheduling cycle ------------------------------------------------------------------

    def observe_attempt(self, result: AttemptResult, profile: str, seconds: float) -> None:
        """One scheduling attempt ended (scheduled = assumed and handed to binding)."""
        _check(result, ATTEMPT_RESULTS, "attempt result")
        self._attempts.labels(result, profile).inc()
        self._attempt_duration.labels(result, profile).observe(seconds)

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
