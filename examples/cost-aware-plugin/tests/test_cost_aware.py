"""CostAware: scores from the cost label, argument validation, and a policy that uses it."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from cost_aware import CostAware, CostAwareArgs, hourly_cost

from kopf_scheduler.core.nodeinfo import NodeInfo
from kopf_scheduler.core.policy import validate_policy
from kopf_scheduler.core.registry import Registry
from kopf_scheduler.framework import CycleState, PluginArgsError, Snapshot, parse_args, parse_node

EXAMPLE = Path(__file__).resolve().parents[1] / "example"


def node(name: str, cost: str | None, label: str = "example.com/hourly-cost") -> NodeInfo:
    labels = {label: cost} if cost is not None else {}
    return NodeInfo(
        parse_node(
            {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}
        )
    )


def scores(plugin: CostAware, nodes: list[NodeInfo]) -> list[int]:
    state = CycleState()
    pod = None  # CostAware ignores the pod
    status = plugin.pre_score(state, pod, nodes, Snapshot.of(nodes))  # type: ignore[arg-type]
    if status.is_skip:
        return [0] * len(nodes)
    return [plugin.score(state, pod, n) for n in nodes]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "costs, want",
    [
        # cheapest 0.10 -> 100, dearest 0.50 -> 0, 0.20 -> (0.50-0.20)/(0.40) = 75
        pytest.param(["0.10", "0.50", "0.20"], [100, 0, 75], id="linear between cheapest and dearest"),
        pytest.param(["0.30", None, "0.60"], [100, 0, 0], id="a node without the label scores 0"),
        pytest.param(["1", "1"], [100, 100], id="equal prices all score 100"),
        pytest.param(["cheap", "0.4"], [0, 100], id="a value that is not a decimal counts as no label"),
        pytest.param(["-1", "0.4"], [0, 100], id="a negative price counts as no label"),
        pytest.param([None, None], [0, 0], id="no priced node: every node 0"),
    ],
)
def test_scores(costs: list[str | None], want: list[int]) -> None:
    nodes = [node(f"n{i}", c) for i, c in enumerate(costs)]
    assert scores(CostAware(), nodes) == want


def test_label_argument() -> None:
    plugin = CostAware.new({"label": "acme.io/price"})
    assert plugin.label == "acme.io/price"
    assert scores(plugin, [node("a", "2", "acme.io/price"), node("b", "1", "acme.io/price")]) == [0, 100]
    assert hourly_cost(node("x", "0.5")) == Decimal("0.5")


@pytest.mark.parametrize(
    "raw, field",
    [
        pytest.param({"label": "not a label!"}, "label", id="invalid label key"),
        pytest.param({"label": 3}, "label", id="not a string"),
        pytest.param({"lable": "x"}, "lable", id="unknown field"),
    ],
)
def test_bad_arguments(raw: dict[str, object], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        parse_args(CostAwareArgs, raw)
    assert exc.value.field == field


def test_a_policy_names_it_like_a_built_in() -> None:
    registry = Registry.in_tree().extended([(CostAware, "test")])
    spec = {
        "schedulerName": "s",
        "priorities": [{"name": "CostAware", "weight": 5, "argument": {"label": "acme.io/price"}}],
    }
    profile = validate_policy(spec, registry=registry)
    assert not isinstance(profile, list), profile
    ((plugin, weight),) = profile.scorers
    assert isinstance(plugin, CostAware) and plugin.label == "acme.io/price" and weight == 5
    bad = validate_policy(
        {**spec, "priorities": [{"name": "CostAware", "argument": {"label": "!"}}]}, registry=registry
    )
    assert isinstance(bad, list) and bad[0].path == "spec.priorities[0].argument.label"
    missing = validate_policy(spec)  # the in-tree registry does not know it
    assert isinstance(missing, list) and "no plugin of that name is installed" in missing[0].message


def test_installed_entry_point_is_found() -> None:
    from kopf_scheduler.edge.plugins import load_registry

    assert load_registry().plugin("CostAware") is CostAware


def test_simulate_prefers_the_cheapest_node(capsys: pytest.CaptureFixture[str]) -> None:
    from kopf_scheduler.commands import main

    args = ["simulate", "--cluster", str(EXAMPLE / "cluster.yaml"), "--pods", str(EXAMPLE / "pods.yaml")]
    assert main([*args, "--policy", str(EXAMPLE / "policy.yaml")]) == 0
    placements = [line.split()[:2] for line in capsys.readouterr().out.splitlines() if line.startswith("default/web-")]
    # 4 CPUs per node: the cheapest fills first, then the next cheapest
    assert [node for _, node in placements] == ["spot-a"] * 4 + ["reserved-c"] * 2
