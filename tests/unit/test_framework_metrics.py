"""Framework timings (core/framework/instrumentation.py), client-go's request families and the process collectors:
what a cycle reports to its recorder, sampled or not, and what the registry renders."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from builders import make_node, make_pod, node_info
from fakeapi import FakeApiServer
from prometheus_client.parser import text_string_to_metric_families

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.telemetry.metrics import SchedulerMetrics


class FakeClock:
    """A recorder whose clock advances 1 ms a read; keeps what it was told."""

    def __init__(self) -> None:
        self.now = 0.0
        self.points: list[tuple[str, Code]] = []
        self.plugins: list[tuple[str, str, Code]] = []

    def clock(self) -> float:
        self.now += 0.001
        return self.now

    def extension_point(self, point: str, code: Code, seconds: float) -> None:
        assert seconds > 0
        self.points.append((point, code))

    def plugin(self, point: str, plugin: str, code: Code, seconds: float) -> None:
        assert seconds > 0
        self.plugins.append((point, plugin, code))


def default_scheduler() -> GenericScheduler:
    profile = validate_policy({"schedulerName": "s", "algorithmProvider": "DefaultProvider"})
    assert isinstance(profile, Profile)
    return GenericScheduler(profile)


def nodes(n: int) -> Snapshot:
    return Snapshot.of(node_info(make_node(f"n{i}").obj()) for i in range(n))  # 4 cpu each


def schedule(recorder: FakeClock, *, sample: bool, cpu: str = "1", snapshot: Snapshot | None = None) -> Any:
    pod = make_pod("p").req(cpu=cpu).obj()
    return default_scheduler().schedule(
        pod, snapshot or nodes(3), rng=random.Random(0), state=CycleState(recorder, sample_plugins=sample)
    )


def test_an_unsampled_cycle_times_only_the_extension_points() -> None:
    recorder = FakeClock()
    result = schedule(recorder, sample=False)
    assert result.node is not None
    assert recorder.plugins == []
    assert [p for p, _ in recorder.points] == ["PreFilter", "Filter", "PreScore", "Score"]
    assert {c for _, c in recorder.points} == {Code.SUCCESS}


def test_a_sampled_cycle_times_every_plugin_at_its_point() -> None:
    recorder = FakeClock()
    schedule(recorder, sample=True)
    points = {(point, plugin) for point, plugin, _ in recorder.plugins}
    assert ("PreFilter", "NodeResourcesFit") in points
    assert ("Filter", "NodeResourcesFit") in points
    assert ("Score", "NodeResourcesBalancedAllocation") in points
    assert ("PreScore", "InterPodAffinity") in points


def test_a_pod_that_fits_nowhere_reports_its_rejections_and_the_post_filter() -> None:
    recorder = FakeClock()
    result = schedule(recorder, sample=True, cpu="64")
    assert result.node is None
    assert ("Filter", "NodeResourcesFit", Code.UNSCHEDULABLE) in recorder.plugins
    assert ("PostFilter", "DefaultPreemption", Code.UNSCHEDULABLE) in recorder.plugins
    assert recorder.points[-1] == ("PostFilter", Code.UNSCHEDULABLE)


def test_without_a_recorder_nothing_is_timed_and_the_choice_is_the_same() -> None:
    snapshot = nodes(5)
    pod = make_pod("p").req(cpu="1").obj()
    plain = default_scheduler().schedule(pod, snapshot, rng=random.Random(3))
    timed = default_scheduler().schedule(
        pod, snapshot, rng=random.Random(3), state=CycleState(FakeClock(), sample_plugins=True)
    )
    assert plain.node == timed.node


def families(metrics: SchedulerMetrics) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}


def test_the_recorder_feeds_upstream_families_with_upstream_label_values() -> None:
    metrics = SchedulerMetrics(process=False)
    recorder = metrics.framework_recorder("kopf-scheduler")
    assert metrics.framework_recorder("kopf-scheduler") is recorder
    default_scheduler().schedule(
        make_pod("p").req(cpu="64").obj(),
        nodes(2),
        rng=random.Random(0),
        state=CycleState(recorder, sample_plugins=True),
    )
    sample = metrics.registry.get_sample_value
    assert sample(
        "scheduler_plugin_execution_duration_seconds_count",
        {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Unschedulable"},
    )
    assert sample(
        "scheduler_framework_extension_point_duration_seconds_count",
        {"extension_point": "PostFilter", "status": "Unschedulable", "profile": "kopf-scheduler"},
    )
    bounds = sorted(
        {
            float(s.labels["le"])
            for s in families(metrics)["scheduler_plugin_execution_duration_seconds"].samples
            if "le" in s.labels
        }
    )
    assert bounds[0] == pytest.approx(0.00001) and len(bounds) == 21  # 20 bounds and +Inf, factor 1.5


def test_plain_histograms_render_cumulative_buckets_as_prometheus_client_does() -> None:
    metrics = SchedulerMetrics(process=False)
    for seconds in (0.003, 0.003, 0.2, 100.0):
        metrics.observe_request("h:1", "GET", 200, seconds)
    family = families(metrics)["rest_client_request_duration_seconds"]
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert (buckets["0.005"], buckets["0.025"], buckets["0.25"], buckets["60.0"], buckets["+Inf"]) == (2, 2, 3, 3, 4)
    counts = {s.name: s.value for s in family.samples if not s.name.endswith("_bucket")}
    assert counts == {
        "rest_client_request_duration_seconds_count": 4,
        "rest_client_request_duration_seconds_sum": pytest.approx(100.206),
    }
    assert family.type == "histogram"


def test_process_platform_and_gc_collectors_are_on_the_served_registry() -> None:
    names = set(families(SchedulerMetrics()))
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info", "python_gc_objects_collected"} <= (
        names
    )
    assert "process_cpu_seconds" not in families(SchedulerMetrics(process=False))


def test_requests_are_counted_by_code_method_and_host_and_timed_by_verb_and_host() -> None:
    metrics = SchedulerMetrics(process=False)
    metrics.observe_request("10.0.0.1:6443", "POST", 201, 0.004)
    metrics.observe_request("10.0.0.1:6443", "POST", 201, 0.004)
    metrics.observe_request("10.0.0.1:6443", "GET", 0, 15.0)
    metrics.observe_request("10.0.0.1:6443", "GET", 200, -1.0)  # a watch: counted, not timed
    sample = metrics.registry.get_sample_value
    host = "10.0.0.1:6443"
    assert sample("rest_client_requests_total", {"code": "201", "method": "POST", "host": host}) == 2
    assert sample("rest_client_requests_total", {"code": "<error>", "method": "GET", "host": host}) == 1
    assert sample("rest_client_requests_total", {"code": "200", "method": "GET", "host": host}) == 1
    assert sample("rest_client_request_duration_seconds_count", {"verb": "POST", "host": host}) == 2
    assert sample("rest_client_request_duration_seconds_count", {"verb": "GET", "host": host}) == 1


def test_the_edge_client_reports_each_request_and_watch() -> None:
    seen: list[tuple[str, int, float]] = []

    async def main() -> None:
        async with FakeApiServer() as server:
            server.add("", "v1", "nodes", make_node("n1").raw())
            api = Api(Credentials(server=f"http://127.0.0.1:{server.port}", source="test"))
            api.observe = lambda method, status, seconds: seen.append((method, status, seconds))
            try:
                assert (await api.request("GET", "/api/v1/nodes")).ok
                assert (await api.request("GET", "/api/v1/nodes/absent")).gone
                async for _ in api.watch("/api/v1/nodes", {}, timeout=1):
                    break
            finally:
                await api.close()
            assert api.metrics_host == f"127.0.0.1:{server.port}"

    asyncio.run(main())
    assert [(m, s) for m, s, _ in seen] == [("GET", 200), ("GET", 404), ("GET", 200)]
    assert seen[0][2] > 0 and seen[2][2] == -1.0
