"""Out-of-tree plugins, pip-installed, change placements in `simulate` and in the live operator, and bind pods.

`pip install --target` puts examples/cost-aware-plugin (and its entry point) in a folder of its own,
which the subprocesses get on PYTHONPATH: the same as installing it into the scheduler's
environment, without touching the test run's own. Nothing in kopf-scheduler knows the plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import (
    ROOT,
    Group,
    Operator,
    accepted,
    create_policy,
    delete_policy,
    wait,
    wait_accepted,
)
from kubernetes import client

EXAMPLE = ROOT / "examples" / "cost-aware-plugin"
POLICY = "e2e-cost-aware"
BINDER_POLICY = "e2e-priced-binder"
COST = "example.com/hourly-cost"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert (target / "cost_aware" / "__init__.py").is_file()
    return target


def _env(plugin_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT / "operator")])}


def test_simulate_uses_the_installed_plugin(plugin_path: Path) -> None:
    example = EXAMPLE / "example"
    run = [sys.executable, "-m", "kopf_scheduler.commands", "simulate", "--cluster", str(example / "cluster.yaml"),
           "--pods", str(example / "pods.yaml"), "--policy", str(example / "policy.yaml")]  # fmt: skip
    out = subprocess.run(run, env=_env(plugin_path), check=True, capture_output=True, text=True).stdout
    placed = [line.split()[1] for line in out.splitlines() if line.startswith("default/web-")]
    assert placed == ["spot-a"] * 4 + ["reserved-c"] * 2, out


@pytest.fixture(scope="module")
def operator(sa_kubeconfig: Path, plugin_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log",
                  ["--policy", POLICY, "--policy", "e2e-cost-typo", "--policy", BINDER_POLICY], sa_kubeconfig,
                  env=_env(plugin_path))  # fmt: skip
    try:
        yield op
    finally:
        op.stop()


def test_the_live_operator_uses_the_installed_plugin(
    operator: Operator, custom: client.CustomObjectsApi, api: client.ApiClient, namespace: str
) -> None:
    group = Group(api, scheduler=POLICY)
    try:
        cheap, dear = (
            group.nodes(1, labels={COST: "0.10"}, cpu="4")[0],
            group.nodes(1, labels={COST: "0.90"}, cpu="4")[0],
        )
        spec = {
            "schedulerName": POLICY,
            "predicates": [{"name": "NodeResourcesFit"}],
            # LeastAllocated alone would alternate between the two nodes; CostAware (weight 5) packs the cheap one
            "priorities": [{"name": "NodeResourcesFit", "weight": 1}, {"name": "CostAware", "weight": 5}],
        }
        create_policy(custom, POLICY, spec)
        wait_accepted(custom, POLICY, operator)
        assert "CostAware from cost_aware:CostAware" in operator.text()  # logged at start
        core = client.CoreV1Api(api)
        for i in range(5):
            core.create_namespaced_pod(namespace, group.pod(f"web-{i}", cpu="1"))

        def placements() -> dict[str, str] | None:
            pods = core.list_namespaced_pod(namespace).items
            nodes = {p.metadata.name: p.spec.node_name for p in pods}
            return nodes if len(nodes) == 5 and all(nodes.values()) else None

        nodes = wait(operator, placements, message="5 pods bound")
        assert sorted(nodes.values()) == [cheap] * 4 + [dear], nodes

        # a misspelt plugin name is refused on the policy, naming the installed out-of-tree plugins
        create_policy(custom, "e2e-cost-typo", {"schedulerName": "e2e-cost-typo", "priorities": [{"name": "CostAwre"}]})
        condition = wait_accepted(custom, "e2e-cost-typo", operator, status="False")
        assert condition["reason"] == "Invalid"
        assert "spec.priorities[0].name: unknown priority 'CostAwre'; did you mean 'CostAware'?" in condition["message"]
        assert accepted(custom, POLICY)["status"] == "True"  # type: ignore[index]
    finally:
        delete_policy(custom, POLICY)
        delete_policy(custom, "e2e-cost-typo")
        group.cleanup()


def test_a_bind_plugin_of_the_package_binds_pods_on_the_real_control_plane(
    operator: Operator, custom: client.CustomObjectsApi, api: client.ApiClient, namespace: str
) -> None:
    """PricedBinder (cost_aware.binding, its own entry point) binds the pod headed for a priced node
    itself, the price on its Binding (which the API server copies onto the pod); it SKIPs the pod
    headed for an unpriced node, which DefaultBinder binds."""
    group = Group(api, scheduler=BINDER_POLICY)
    bound_at = "example.com/bound-at-hourly-cost"
    try:
        priced = group.nodes(1, labels={COST: "0.25"}, cpu="4")[0]
        unpriced = group.nodes(1, labels={"example.com/tier": "free"}, cpu="4")[0]
        create_policy(custom, BINDER_POLICY, {"schedulerName": BINDER_POLICY, "plugins": [{"name": "PricedBinder"}]})
        wait_accepted(custom, BINDER_POLICY, operator)
        assert "PricedBinder from cost_aware.binding:PricedBinder" in operator.text()  # logged at start
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(namespace, group.pod("on-priced", cpu="1", node_selector={COST: "0.25"}))
        core.create_namespaced_pod(
            namespace, group.pod("on-unpriced", cpu="1", node_selector={"example.com/tier": "free"})
        )

        def bound() -> dict[str, Any] | None:
            pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
            return pods if len(pods) == 2 and all(p.spec.node_name for p in pods.values()) else None

        pods = wait(operator, bound, message="both pods bound")
        assert pods["on-priced"].spec.node_name == priced
        assert (pods["on-priced"].metadata.annotations or {}).get(bound_at) == "0.25"  # PricedBinder's Binding
        assert pods["on-unpriced"].spec.node_name == unpriced
        assert bound_at not in (pods["on-unpriced"].metadata.annotations or {})  # DefaultBinder's
    finally:
        delete_policy(custom, BINDER_POLICY)
        group.cleanup()
