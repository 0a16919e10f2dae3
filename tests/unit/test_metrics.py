"""SchedulerMetrics: upstream names, buckets and labels, private registries, exposition text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from builders import make_pod
from prometheus_client.parser import text_string_to_metric_families

from kopf_scheduler.core.state.queueing import SchedulingQueue
from kopf_scheduler.telemetry.metrics import SchedulerMetrics, exponential_buckets


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def bucket_bounds(metrics: SchedulerMetrics, family: str) -> list[float]:
    for fam in text_string_to_metric_families(metrics.render().decode()):
        if fam.name == family:
            bounds = sorted({float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")})
            return [b for b in bounds if b != float("inf")]
    raise AssertionError(f"{family} not exposed")


def test_exponential_buckets_match_upstream() -> None:
    assert exponential_buckets(1, 2, 5) == (1, 2, 4, 8, 16)
    latency = exponential_buckets(0.001, 2, 15)
    assert (len(latency), latency[0]) == (15, 0.001)
    assert latency[-1] == pytest.approx(16.384)  # 0.001 * 2^14
    with pytest.raises(ValueError):
        exponential_buckets(0, 2, 3)


def test_registries_are_private_so_many_instances_coexist() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_attempt("scheduled", "kopf-scheduler", 0.01)
    assert sample(a, "scheduler_schedule_attempts_total", result="scheduled", profile="kopf-scheduler") == 1
    assert sample(b, "scheduler_schedule_attempts_total", result="scheduled", profile="kopf-scheduler") is None


def test_attempt_counts_and_latency_by_result_and_profile() -> None:
    m = SchedulerMetrics()
    m.observe_attempt("scheduled", "p", 0.003)
    m.observe_attempt("scheduled", "p", 0.5)
    m.observe_attempt("unschedulable", "p", 0.002)
    assert sample(m, "scheduler_schedule_attempts_total", result="scheduled", profile="p") == 2
    assert sample(m, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled", profile="p") == 2
    assert sample(
        m, "scheduler_scheduling_attempt_duration_seconds_sum", result="scheduled", profile="p"
    ) == pytest.approx(0.503)
    # 0.003 s lands in the 0.004 bucket (0.001 x 2^2), not in 0.002.
    assert (
        sample(m, "scheduler_scheduling_attempt_duration_seconds_bucket", result="scheduled", profile="p", le="0.002")
        == 0
    )
    assert (
        sample(m, "scheduler_scheduling_attempt_duration_seconds_bucket", result="scheduled", profile="p", le="0.004")
        == 1
    )
    assert bucket_bounds(m, "scheduler_scheduling_attempt_duration_seconds") == pytest.approx(
        list(exponential_buckets(0.001, 2, 15))
    )


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.observe_attempt("Scheduled", "p", 1.0), id="attempt result is case sensitive"),
        pytest.param(lambda m: m.observe_e2e("bound", "p", 1.0), id="e2e result"),
        pytest.param(lambda m: m.observe_binding("ok", 1.0), id="binding result"),
        pytest.param(lambda m: m.inc_incoming_pods("activeQ", "PodAdd"), id="queue name"),
        pytest.param(lambda m: m.set_pending_pods({"waiting": 1}), id="pending queue name"),
        pytest.param(lambda m: m.observe_pod_scheduled(0, 1.0), id="zero attempts"),
    ],
)
def test_unknown_label_values_are_rejected(call: Callable[[SchedulerMetrics], object]) -> None:
    with pytest.raises(ValueError):
        call(SchedulerMetrics())


def test_algorithm_binding_and_e2e_latencies() -> None:
    m = SchedulerMetrics()
    m.observe_algorithm(0.004)
    m.observe_binding("success", 0.02)
    m.observe_binding("error", 0.03)
    m.observe_e2e("scheduled", "p", 0.05)
    assert sample(m, "scheduler_scheduling_algorithm_duration_seconds_count") == 1
    assert sample(m, "scheduler_binding_duration_seconds_count", result="success") == 1
    assert sample(m, "scheduler_binding_duration_seconds_count", result="error") == 1
    assert sample(m, "scheduler_e2e_scheduling_duration_seconds_sum", result="scheduled", profile="p") == pytest.approx(
        0.05
    )
    for family in ("scheduler_scheduling_algorithm_duration_seconds", "scheduler_binding_duration_seconds"):
        assert len(bucket_bounds(m, family)) == 15


def test_pod_scheduled_feeds_sli_by_attempts_and_attempts_histogram() -> None:
    m = SchedulerMetrics()
    m.observe_pod_scheduled(1, 0.2)
    m.observe_pod_scheduled(3, 12.0)
    assert sample(m, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="3") == 1
    assert sample(m, "scheduler_pod_scheduling_attempts_bucket", le="2.0") == 1  # attempts 1
    assert sample(m, "scheduler_pod_scheduling_attempts_bucket", le="4.0") == 2  # attempts 1 and 3
    assert bucket_bounds(m, "scheduler_pod_scheduling_attempts") == [1, 2, 4, 8, 16]
    sli = bucket_bounds(m, "scheduler_pod_scheduling_sli_duration_seconds")
    assert (len(sli), sli[0]) == (20, 0.01)


def test_pending_pods_zeroes_queues_left_out() -> None:
    m = SchedulerMetrics()
    m.set_pending_pods({"active": 4, "backoff": 2, "unschedulable": 1, "gated": 3})
    m.set_pending_pods({"active": 1})
    values = {q: sample(m, "scheduler_pending_pods", queue=q) for q in ("active", "backoff", "unschedulable", "gated")}
    assert values == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}


def test_queue_cache_preemption_and_unschedulable() -> None:
    m = SchedulerMetrics()
    m.inc_incoming_pods("active", "PodAdd")
    m.inc_incoming_pods("active", "PodAdd")
    m.set_cache_size(nodes=10, pods=200, assumed_pods=3)
    m.observe_preemption(2)
    m.set_unschedulable_pods("NodeResourcesFit", "p", 5)
    assert sample(m, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 2
    assert sample(m, "scheduler_scheduler_cache_size", type="assumed_pods") == 3
    assert sample(m, "scheduler_preemption_attempts_total") == 1
    assert sample(m, "scheduler_preemption_victims_sum") == 2
    assert sample(m, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="p") == 5


def test_leader_and_policy_generation_and_forget() -> None:
    m = SchedulerMetrics()
    m.set_leader("default", True)
    m.set_policy_generation("default", 7)
    assert sample(m, "kopf_scheduler_leader", policy="default") == 1
    m.set_leader("default", False)
    assert sample(m, "kopf_scheduler_leader", policy="default") == 0
    assert sample(m, "kopf_scheduler_policy_generation", policy="default") == 7
    m.forget_policy("default")
    m.forget_policy("never-seen")
    assert sample(m, "kopf_scheduler_leader", policy="default") is None
    assert sample(m, "kopf_scheduler_policy_generation", policy="default") is None


def test_render_is_parseable_exposition_with_help_and_types() -> None:
    m = SchedulerMetrics()
    m.observe_attempt("error", "p", 0.1)
    text = m.render().decode()
    assert "# TYPE scheduler_schedule_attempts_total counter" in text
    assert "# HELP scheduler_pending_pods " in text
    assert m.content_type.startswith("text/plain")
    names = {fam.name for fam in text_string_to_metric_families(text)}
    assert {
        "scheduler_schedule_attempts",
        "scheduler_scheduling_attempt_duration_seconds",
        "kopf_scheduler_leader",
    } <= names


def test_no_created_series_are_exported() -> None:
    # upstream's counters and histograms have no `_created` companions; prometheus_client adds one
    # per counter, histogram and child unless switched off, doubling the series for nothing
    m = SchedulerMetrics()
    m.observe_attempt("scheduled", "p", 0.1)
    m.observe_binding("success", 0.02)
    m.observe_preemption(1)
    m.inc_incoming_pods("active", "PodAdd")
    m.observe_pod_scheduled(1, 0.2)
    text = m.render().decode()
    assert "scheduler_schedule_attempts_total" in text
    assert [line for line in text.splitlines() if "_created" in line] == []


def test_a_queues_counts_are_recorded_as_of_each_scrape() -> None:
    """``scheduler_queue_incoming_pods_total`` and ``scheduler_unschedulable_pods`` come from the queue's
    values (the core imports no prometheus), recorded before each exposition."""
    m, q = SchedulerMetrics(), SchedulingQueue()
    m.before_render(lambda: m.observe_queue("p", q.take_incoming(), q.unschedulable_plugin_counts()))
    for name in ("a", "b", "c"):
        q.add(make_pod(name).obj(), 0.0)
    for plugins in (("NodeResourcesFit",), ("NodeResourcesFit", "TaintToleration")):
        info = q.pop(0.0)
        assert info is not None
        q.add_unschedulable(info, 0.0, plugins=plugins)
    m.render()
    assert sample(m, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 3
    assert sample(m, "scheduler_queue_incoming_pods_total", queue="unschedulable", event="ScheduleAttemptFailure") == 2
    assert sample(m, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="p") == 2
    assert sample(m, "scheduler_unschedulable_pods", plugin="TaintToleration", profile="p") == 1
    # a node joins: both move; a second scrape counts only what happened since the first
    q.move_all_to_active_or_backoff("NodeAdd", 5.0)
    m.render()
    assert sample(m, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 3
    assert sample(m, "scheduler_queue_incoming_pods_total", queue="active", event="NodeAdd") == 2
    assert sample(m, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile="p") == 0  # no stale gauge
    assert sample(m, "scheduler_unschedulable_pods", plugin="TaintToleration", profile="p") == 0


def test_queue_counts_check_the_queue_label() -> None:
    with pytest.raises(ValueError, match="unknown queue"):
        SchedulerMetrics().observe_queue("p", {("activeQ", "PodAdd"): 1}, {})
