"""TargetLoadPacking and LoadVariationRiskBalancing: scheduler-plugins' Trimaran test tables, the pods placed
since the sample, the fallback to requests, arguments, and what explain shows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.commands import main
from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.framework.usage import (
    ANY_SOURCE,
    METRICS_API,
    SCORE_NOTES,
    NodeUsage,
    UsageError,
    UsageSnapshot,
    go_round,
    parse_node_metrics,
    parse_usage_annotation,
    reading,
)
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.plugins.load_variation_risk_balancing import LoadVariationRiskBalancing, risk_score
from kopf_scheduler.core.plugins.target_load_packing import TargetLoadPacking, packing_score, predict_pod

MI = 1024 * 1024
NOW = 1_000_000.0


def trimaran_node(name: str = "node-1", *pods: Pod) -> NodeInfo:
    """Upstream's test node: 1000m cpu, 1Gi memory (capacity and allocatable)."""
    return node_info(make_node(name).capacity(cpu="1000m", memory="1Gi", pods="110").obj(), *pods)


def usage_of(**nodes: NodeUsage) -> dict[str, UsageSnapshot]:
    return {METRICS_API: UsageSnapshot(dict(nodes), NOW, "test")}


def fresh(cpu: float, memory: float | None = None, cpu_std: float = 0.0, memory_std: float = 0.0) -> NodeUsage:
    return NodeUsage(cpu, memory, cpu_std, memory_std, timestamp=NOW - 10, pods=None)


def score(plugin: Any, pod: Pod, info: NodeInfo, usage: dict[str, UsageSnapshot]) -> tuple[int, str]:
    state = CycleState()
    snap = Snapshot.of([info], ClusterObjects(node_usage=usage))
    assert plugin.pre_score(state, pod, [info], snap).is_success
    value = plugin.score(state, pod, info)
    notes = state.read(SCORE_NOTES)
    assert notes is not None
    return value, str(notes[(plugin.name, info.name)])


def empty_pod() -> Pod:
    """Upstream's ``st.MakePod().Name("p").Obj()``: no containers, so nothing is predicted."""
    return make_pod("p").obj()


def cpu_pod(*millis: int) -> Pod:
    """Upstream's ``getPodWithContainersAndOverhead(0, millis...)``: cpu request = limit per container."""
    b = make_pod("p")
    for m in millis:
        b = b.container(cpu=f"{m}m").lim(cpu=f"{m}m")
    return b.obj()


# --------------------------------------------------------------------------- TargetLoadPacking


@pytest.mark.parametrize(
    ("pod", "cpu", "expected"),
    [
        # predicted 0%: (100-40)*0/40 + 40
        pytest.param(empty_pod(), 0, 40, id="new node"),
        # 50% > 40: round(40*(100-50)/60) = round(33.3)
        pytest.param(empty_pod(), 50, 33, id="hot node"),
        # 30% of 1000m + 1000m = 130% > 100
        pytest.param(cpu_pod(1000), 30, 0, id="excess utilization returns min score"),
    ],
)
def test_target_load_packing_trimaran_table(pod: Pod, cpu: float, expected: int) -> None:
    assert make_pod("p").obj().containers == ()
    value, _ = score(TargetLoadPacking(), pod, trimaran_node(), usage_of(**{"node-1": fresh(cpu)}))
    assert value == expected


@pytest.mark.parametrize(
    ("predicted", "target", "expected"),
    [
        pytest.param(40.0, 40, 100, id="at the target: 60*40/40+40"),
        pytest.param(20.0, 40, 70, id="below: 60*20/40+40"),
        pytest.param(70.0, 40, 20, id="above: 40*30/60"),
        pytest.param(100.0, 40, 0, id="full"),
        pytest.param(100.5, 40, 0, id="over"),
        pytest.param(10.0, 80, 83, id="target 80: round(20*10/80+80)=round(82.5) away from zero"),
    ],
)
def test_packing_score(predicted: float, target: int, expected: int) -> None:
    assert packing_score(predicted, target) == expected


def test_predict_utilisation_limits_requests_default() -> None:
    pod = make_pod("p").container(cpu="100m").lim(cpu="300m").container(cpu="101m").container().overhead(cpu="7m").obj()
    # limit 300 + round(101*1.5)=152 (151.5 away from zero) + the default 1000 + overhead 7
    assert predict_pod(pod, multiplier=1.5, default_milli_cpu=1000) == 300 + 152 + 1000 + 7
    args = {"defaultRequests": {"cpu": "500m"}, "defaultRequestsMultiplier": "2"}
    assert TargetLoadPacking.new(args)._predict(pod) == 300 + 202 + 500 + 7


def test_target_load_packing_counts_pods_placed_since_the_sample() -> None:
    old = make_pod("old").uid("old").container(cpu="100m").lim(cpu="100m").obj()
    new = make_pod("new").uid("new").container(cpu="200m").obj()  # no limit: 200 * 1.5
    info = trimaran_node("node-1", old, new)
    sample = NodeUsage(10.0, None, timestamp=NOW - 5, pods=frozenset({"old"}))
    value, note = score(TargetLoadPacking(), empty_pod(), info, usage_of(**{"node-1": sample}))
    # measured 100m + new pod predicted 300m: 40% -> the target's score
    assert value == 100
    assert "1 pod(s) placed since" in note and "predicted 300m" in note and "predicted cpu 40.0%" in note


def test_burst_spreads_over_idle_nodes() -> None:
    """Two idle nodes with the same sample: a pod placed on one since the sample makes it score differently."""
    placed = make_pod("placed").uid("placed").container(cpu="500m").obj()
    a, b = trimaran_node("a", placed), trimaran_node("b")
    usage = usage_of(
        a=NodeUsage(0.0, timestamp=NOW, pods=frozenset()), b=NodeUsage(0.0, timestamp=NOW, pods=frozenset())
    )
    pod = make_pod("p").container(cpu="100m").obj()
    plugin = LoadVariationRiskBalancing()
    assert score(plugin, pod, a, usage)[0] < score(plugin, pod, b, usage)[0]


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        pytest.param({}, "no metrics yet", id="no source"),
        pytest.param(usage_of(), "no metrics for the node", id="node missing"),
        pytest.param(
            usage_of(**{"node-1": NodeUsage(90.0, timestamp=NOW - 200)}), "metrics stale: 200s old > 180s", id="stale"
        ),
    ],
)
def test_missing_or_stale_metrics_fall_back_to_requests(usage: dict[str, UsageSnapshot], why: str) -> None:
    running = make_pod("r").uid("r").container(cpu="200m", memory="256Mi").obj()
    info = trimaran_node("node-1", running)
    value, note = score(TargetLoadPacking(), empty_pod(), info, usage)
    # requests: 200m of 1000m = 20%: 60*20/40 + 40
    assert value == 70
    assert note.startswith("cpu 20.0%, memory 25.0% from requests: " + why)


def test_any_source_snapshot_is_read_when_the_plugins_own_is_absent() -> None:
    usage = {ANY_SOURCE: UsageSnapshot({"node-1": fresh(50)}, NOW, "cluster.yaml")}
    assert score(TargetLoadPacking(), empty_pod(), trimaran_node(), usage)[0] == 33


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"targetUtilization": 0}, "targetUtilization"),
        ({"targetUtilization": 100}, "targetUtilization"),
        ({"defaultRequestsMultiplier": "x"}, "defaultRequestsMultiplier"),
        ({"defaultRequests": {"memory": "1Gi"}}, "defaultRequests.memory"),
        ({"defaultRequests": {"cpu": "lots"}}, "defaultRequests.cpu"),
        ({"metricsSource": {"type": "Prometheus"}}, "metricsSource.address"),
        ({"metricsSource": {"type": "Graphite"}}, "metricsSource.type"),
        ({"metricsSource": {"interval": 0}}, "metricsSource.interval"),
        ({"metricsSource": {"query": "up"}}, "metricsSource.type"),
    ],
)
def test_bad_arguments_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        TargetLoadPacking.new(args)
    assert err.value.field == field


# --------------------------------------------------------------------------- LoadVariationRiskBalancing


def mem_pod(milli: int, memory: int) -> Pod:
    """Upstream's ``getPodWithContainersAndOverhead(0, 0, 0, [milli], [memory])``."""
    init = make_pod("p").init_container(cpu="0m", memory="0")
    return init.container(cpu=f"{milli}m", memory=str(memory)).lim(cpu=f"{milli}m", memory=str(memory)).obj()


@pytest.mark.parametrize(
    ("pod", "sample", "expected"),
    [
        # mu 0.5, sigma 0: (1 - 0.25) * 100
        pytest.param(empty_pod(), fresh(50), 75, id="new node"),
        pytest.param(empty_pod(), fresh(100), 50, id="hot node"),
        # mu (300+200)/1000 = 0.5, sigma 0.16: (1 - 0.33) * 100
        pytest.param(mem_pod(200, 256 * MI), fresh(30, None, 16), 67, id="average and stDev metrics"),
        # cpu: 0.5, 0.16 -> 67; memory: (512+512)/1024 = 1, 0.1 -> 45; the lower
        pytest.param(mem_pod(100, 512 * MI), fresh(40, 50, 16, 10), 45, id="CPU and Memory metrics"),
        # cpu: 0.9, 0.2 -> 45; memory: 0.75, 0.15 -> 55
        pytest.param(mem_pod(100, 512 * MI), fresh(80, 25, 20, 15), 45, id="pick worst case: CPU or Memory"),
    ],
)
def test_load_variation_trimaran_table(pod: Pod, sample: NodeUsage, expected: int) -> None:
    value, _ = score(LoadVariationRiskBalancing(), pod, trimaran_node(), usage_of(**{"node-1": sample}))
    assert value == expected


@pytest.mark.parametrize(
    ("margin", "sensitivity", "expected"),
    [
        pytest.param(1.0, 1.0, 67.0, id="defaults: mu .5, sigma .16"),
        pytest.param(2.0, 1.0, 59.0, id="margin 2: sigma .32, risk .41"),
        pytest.param(1.0, 2.0, 55.0, id="sensitivity 2: sigma sqrt(.16) = .4"),
        pytest.param(1.0, 0.0, 75.0, id="sensitivity 0: sigma^inf = 0"),
    ],
)
def test_risk_score(margin: float, sensitivity: float, expected: float) -> None:
    assert risk_score(300, 160, 200, 1000, margin=margin, sensitivity=sensitivity) == pytest.approx(expected)
    assert risk_score(1, 1, 1, 0, margin=1, sensitivity=1) == 0.0


def test_load_variation_bad_arguments() -> None:
    with pytest.raises(PluginArgsError) as err:
        LoadVariationRiskBalancing.new({"safeVarianceMargin": -5})
    assert err.value.field == "safeVarianceMargin"
    with pytest.raises(PluginArgsError) as err:
        LoadVariationRiskBalancing.new({"safeVarianceSensitivity": -1})
    assert err.value.field == "safeVarianceSensitivity"


# --------------------------------------------------------------------------- samples and helpers


def test_go_round_halves_away_from_zero() -> None:
    assert [go_round(x) for x in (0.5, 1.5, 2.5, -0.5, 2.49)] == [1, 2, 3, -1, 2]


def test_parse_node_metrics() -> None:
    node = make_node("n").capacity(cpu="4", memory="8Gi").obj()
    body = {"timestamp": "2026-01-01T00:00:00Z", "window": "10s", "usage": {"cpu": "1", "memory": "2Gi"}}
    sample = parse_node_metrics(body, node, pods=frozenset({"u"}))
    assert (sample.cpu, sample.memory, sample.pods) == (25.0, 25.0, frozenset({"u"}))
    assert sample.timestamp == 1767225600.0
    with pytest.raises(UsageError, match="usage is missing"):
        parse_node_metrics({}, node)
    with pytest.raises(UsageError, match="usage"):
        parse_node_metrics({"usage": {"cpu": "many"}}, node)


def test_parse_usage_annotation() -> None:
    sample = parse_usage_annotation("cpu=75, memory=40,cpuStd=5", timestamp=3.0)
    assert (sample.cpu, sample.memory, sample.cpu_std, sample.timestamp) == (75.0, 40.0, 5.0, 3.0)
    for bad, match in (("memory=4", "cpu= is required"), ("cpu=x", "not a number"), ("gpu=1", "expected")):
        with pytest.raises(UsageError, match=match):
            parse_usage_annotation(bad, timestamp=0)
    with pytest.raises(UsageError, match="percentage"):
        parse_usage_annotation("cpu=150", timestamp=0)


def test_reading_without_memory_in_the_sample() -> None:
    r = reading(trimaran_node(), UsageSnapshot({"node-1": fresh(20)}, NOW), stale_after=60)
    assert (r.cpu, r.memory, r.basis) == (20.0, None, "metrics")
    assert r.note() == "cpu 20.0%, memory not measured measured (sample 10s old)"


# --------------------------------------------------------------------------- simulate


REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "operator" / "kopf_scheduler" / "sim" / "examples"


def run_simulate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    rc = main(["simulate", "--cluster", str(EXAMPLES / "load-aware-cluster.yaml"), *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    return out


def test_simulate_reads_usage_and_avoids_the_hot_node(capsys: pytest.CaptureFixture[str]) -> None:
    pods = str(EXAMPLES / "load-aware-pods.yaml")
    policy = str(REPO / "deploy" / "policies" / "load-aware.yaml")
    placed = json.loads(run_simulate(capsys, "--pods", pods, "--policy", policy, "--output", "json"))
    nodes = [p["node"] for p in placed["placements"]]
    assert len(nodes) == 6 and "node-hot" not in nodes
    # the pods placed during the run count at their requests: the burst does not all land on one node
    assert len(set(nodes)) == 2
    explained = run_simulate(capsys, "--pods", pods, "--policy", policy, "--explain", "default/web-1")
    assert "node-hot TargetLoadPacking: cpu 85.0%, memory 60.0% measured" in explained
    assert "node-warm LoadVariationRiskBalancing: cpu 20.0%, memory 25.0% measured" in explained


def test_simulate_without_a_load_aware_policy_ignores_usage(capsys: pytest.CaptureFixture[str]) -> None:
    pods = str(EXAMPLES / "load-aware-pods.yaml")
    placed = json.loads(run_simulate(capsys, "--pods", pods, "--scheduler-name", "kopf-load-aware", "--output", "json"))
    assert "node-hot" in [p["node"] for p in placed["placements"]]


def test_simulate_refuses_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {kopf-scheduler.io/usage: 'cpu=lots'}}\n"
        "status: {allocatable: {cpu: '1', memory: 1Gi, pods: '10'}}\n"
    )
    assert main(["simulate", "--cluster", str(cluster)]) != 0
    assert "kopf-scheduler.io/usage: cpu: 'lots' is not a number" in capsys.readouterr().err


def test_reading_is_remembered_until_the_node_changes() -> None:
    usage = UsageSnapshot({"node-1": NodeUsage(10.0, 10.0, timestamp=NOW, pods=frozenset())}, NOW)
    info = trimaran_node()
    first = reading(info, usage, stale_after=60)
    assert reading(info, usage, stale_after=60) is first and first.added == ()
    assert reading(info, usage, stale_after=30) is not first  # another window, another reading
    info.add_pod(make_pod("late").uid("late").container(cpu="100m").obj().with_node("node-1"))
    later = reading(info, usage, stale_after=60)
    assert later is not first and [p.uid for p in later.added] == ["late"] and later.cpu == 20.0


def test_pods_scheduled_shortly_before_the_sample_count_at_requests() -> None:
    """Trimaran's window: a pod bound less than 60 s before the sample may not show in it yet."""
    sample_time = NOW - 10

    def bound(name: str, ago: float | None) -> Pod:
        pod = make_pod(name).uid(name).container(cpu="100m").obj().with_node("node-1")
        return dataclasses.replace(pod, scheduled_at=None if ago is None else sample_time - ago)

    info = trimaran_node("node-1", bound("recent", 30), bound("old", 120), bound("unknown", None))
    usage = UsageSnapshot(
        {"node-1": NodeUsage(10.0, timestamp=sample_time, pods=frozenset({"recent", "old", "unknown"}))}, NOW
    )
    r = reading(info, usage, stale_after=60)
    assert [p.uid for p in r.added] == ["recent"] and r.cpu == 20.0
