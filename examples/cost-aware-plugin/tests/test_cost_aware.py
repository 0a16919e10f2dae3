"""CostAware: scores from the cost label, argument validation, a policy that uses it, and the installed package.

Everything of kopf_scheduler comes from ``kopf_scheduler.framework`` (what the plugin is written against)
and ``kopf_scheduler.testing`` (the kit: builders, ``run_plugin``, ``policy``, ``Cluster``).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from cost_aware import CostAware, CostAwareArgs, HourlyCostAnnotation, PricedBinder, hourly_cost

from kopf_scheduler.framework import PluginArgsError, parse_args
from kopf_scheduler.testing import (
    Cluster,
    NodeBuilder,
    PolicyError,
    make_node,
    make_pod,
    node_info,
    policy,
    read_manifests,
    run_plugin,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "example"
LABEL = "example.com/hourly-cost"
PLUGINS = (CostAware, HourlyCostAnnotation, PricedBinder)


def priced(name: str, cost: str | None, label: str = LABEL) -> NodeBuilder:
    """A node priced `cost` an hour (None: no price label)."""
    node = make_node(name)
    return node.labels({label: cost}) if cost is not None else node


@pytest.mark.parametrize(
    "costs, want",
    [
        # cheapest 0.10 -> 100, dearest 0.50 -> 0, 0.20 -> (0.50-0.20)/(0.40) = 75
        pytest.param(["0.10", "0.50", "0.20"], [100, 0, 75], id="linear between cheapest and dearest"),
        pytest.param(["0.30", None, "0.60"], [100, 0, 0], id="a node without the label scores 0"),
        pytest.param(["1", "1"], [100, 100], id="equal prices all score 100"),
        pytest.param(["cheap", "0.4"], [0, 100], id="a value that is not a decimal counts as no label"),
        pytest.param(["-1", "0.4"], [0, 100], id="a negative price counts as no label"),
    ],
)
def test_scores(costs: list[str | None], want: list[int]) -> None:
    nodes = [priced(f"n{i}", cost) for i, cost in enumerate(costs)]
    run = run_plugin(CostAware(), make_pod("web"), nodes=nodes)
    assert run.error is None and not run.score_skipped
    assert [run.scores[f"n{i}"] for i in range(len(costs))] == want


def test_no_priced_node_skips_the_score() -> None:
    run = run_plugin(CostAware(), make_pod("web"), nodes=[priced("a", None), priced("b", "x")])
    assert run.score_skipped and run.scores == {}  # every node gets 0 from CostAware
    assert run.feasible == ["a", "b"]  # it filters nothing


def test_label_argument() -> None:
    plugin = CostAware.new({"label": "acme.io/price"})
    assert plugin.label == "acme.io/price" and plugin.args == CostAwareArgs(label="acme.io/price")
    nodes = [priced("a", "2", "acme.io/price"), priced("b", "1", "acme.io/price"), priced("c", "0.1")]
    assert run_plugin(plugin, make_pod("web"), nodes=nodes).scores == {"a": 0, "b": 100, "c": 0}
    assert hourly_cost(node_info(priced("x", "0.5"))) == Decimal("0.5")


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
    spec = {
        "schedulerName": "s",
        "priorities": [{"name": "CostAware", "weight": 5, "argument": {"label": "acme.io/price"}}],
    }
    profile = policy(spec, plugins=[CostAware])
    ((plugin, weight),) = profile.scorers
    assert isinstance(plugin, CostAware) and plugin.label == "acme.io/price" and weight == 5
    with pytest.raises(PolicyError) as bad:
        policy({**spec, "priorities": [{"name": "CostAware", "argument": {"label": "!"}}]}, plugins=[CostAware])
    assert [e.path for e in bad.value.errors] == ["spec.priorities[0].argument.label"]
    with pytest.raises(PolicyError) as missing:
        policy(spec)  # without the plugin installed
    assert "no plugin of that name is installed" in missing.value.errors[0].message


def test_the_cheapest_node_fills_first() -> None:
    cluster = Cluster(
        objects=read_manifests(EXAMPLE / "cluster.yaml"), profile=policy(EXAMPLE / "policy.yaml", plugins=PLUGINS)
    )
    placements = cluster.schedule(*read_manifests(EXAMPLE / "pods.yaml"))
    # 4 CPUs per node: the cheapest (spot-a, 0.12) fills first, then the next cheapest (reserved-c, 0.28)
    assert [p.node for p in placements] == ["spot-a"] * 4 + ["reserved-c"] * 2


def test_the_package_declares_its_plugins_as_entry_points() -> None:
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group="kopf_scheduler.plugins")}
    assert {name: found[name].load() for name in ("CostAware", "HourlyCostAnnotation", "PricedBinder")} == {
        "CostAware": CostAware,
        "HourlyCostAnnotation": HourlyCostAnnotation,
        "PricedBinder": PricedBinder,
    }


def test_installed_the_schedulers_own_simulate_finds_it() -> None:
    """The ``kopf-scheduler`` command beside this Python (the package installed, as users install it)
    discovers the plugins through their entry points, as the operator does at start."""
    beside = Path(sys.executable).with_name("kopf-scheduler")
    command = str(beside) if beside.exists() else shutil.which("kopf-scheduler")
    assert command, "kopf-scheduler is not installed beside this Python"
    files = {"--cluster": "cluster.yaml", "--pods": "pods.yaml", "--policy": "policy.yaml"}
    args = [arg for option, name in files.items() for arg in (option, str(EXAMPLE / name))]
    done = subprocess.run([command, "simulate", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    placements = [line.split()[:2] for line in done.stdout.splitlines() if line.startswith("default/web-")]
    assert [node for _, node in placements] == ["spot-a"] * 4 + ["reserved-c"] * 2
