"""The differential harness with DynamicResources (bench/differential.py ``--dra-gates``): ResourceSlices on some of the
random nodes, a ResourceClaim on some of the pods, and what v1.37 turns on by default for DRA: the DeviceClass serves
``example.com/gpu`` (the device plugins' resource: a node without it in its allocatable serves it with devices) and
some pods without a claim ask for its implicit ``deviceclass.resource.kubernetes.io/<class>`` (DRAExtendedResource),
DeviceTaintRules on some pools, tolerated by some claims (DRADeviceTaintRules); upstream kube-scheduler v1.37.2 beside
us. Then the DynamicResources Filter timeout (DRASchedulerFilterTimeout) on a cluster of its own, both sides
configured with ``filterTimeout: 1ns``: every allocation attempt times out, with upstream's error.

Measured (`python bench/differential.py --seeds 2 --nodes 15 --pods 40 --dra-gates --seed-start 31`, what this runs):
100% on every figure (80 fits, 42 best nodes, 38 whole messages, 2,106 plugin scores, 8 allocations, 4 extended-
resource claims); `--seeds 8 --nodes 20 --pods 60 --dra-gates`: 480 fits, 257 best nodes, 223 messages, 19,872
scores, 42 allocations, 24 extended-resource claims, all 100%. A KubeSchedulerConfiguration scoring example.com/gpu
follows (NodeResourcesFit and BalancedAllocation count a node's devices of the class).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import differential as dh
import pytest

from kopf_scheduler.cluster import bodies
from kopf_scheduler.core.config import scheduler_config
from kopf_scheduler.sim.loader import load_policy

SEEDS = (31, 32)
KNOBS = dh.with_dra_gates(dh.Knobs(nodes=15, pods=40))


@pytest.fixture(scope="module")
def report() -> Iterator[dh.Report]:
    cases = dh.run(SEEDS, KNOBS, load_policy(None))
    yield dh.build_report([dh.compare(c) for c in cases])


def test_claims_gates_and_extended_resources_were_drawn() -> None:
    scenarios = [dh.generate(seed, KNOBS) for seed in SEEDS]
    for s in scenarios:
        plurals = [plural for plural, _ in s.device_objects]
        assert s.claims and "resourceslices" in plurals and "devicetaintrules" in plurals
        assert any("tolerations" in c["spec"]["devices"]["requests"][0]["exactly"] for c in s.claims.values())
        assert any(dh.IMPLICIT_PREFIX in str(p["spec"]) for p in s.pods)


@pytest.mark.parametrize(
    "metric", ["fits", "best_node", "feasible_sets_equal", "messages", "plugin_scores", "devices", "extended_claims"]
)
def test_agrees_with_upstream(report: dh.Report, metric: str) -> None:
    got = report.metrics()[metric]
    assert got["of"] > 0, f"nothing to compare for {metric}"
    assert got["percent"] == 100.0, f"{metric}: {got}\n\n{dh.render(report)}"


# --------------------------------------------------------------------------- DRASchedulerFilterTimeout

TIMEOUT_CONFIG: dict[str, Any] = {
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [{"name": "DynamicResources", "args": {"filterTimeout": "1ns"}}],
        }
    ]
}
HOSTNAME = "kubernetes.io/hostname"


def _node(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = bodies.node_body(name).hostname().platform()
    body.capacity(cpu="4", memory="8Gi", ephemeral_storage="100Gi", pods="110").ready(reason="KubeletReady")
    return body.manifest(), body.status()


def _pod(name: str, node: str, **requests: str) -> dict[str, Any]:
    body = bodies.pod_body(name, dh.NAMESPACE).automount_service_account_token(False).termination_grace_period(0)
    body.container("main", bodies.PAUSE_IMAGE, cpu="100m", **requests).node_selector_map({HOSTNAME: node})
    pod = body.obj()
    for name_, value in requests.items():
        if "/" in name_:
            pod["spec"]["containers"][0]["resources"].setdefault("limits", {})[name_] = value
    return pod


def _timeout_scenario() -> dh.Scenario:
    api = "resource.k8s.io/v1"
    cls = "t-gpu"
    cel = {"expression": f'device.driver == "{dh.DRA_DRIVER}"'}
    objects = [
        ("deviceclasses", {"apiVersion": api, "kind": "DeviceClass", "metadata": {"name": cls},
                           "spec": {"selectors": [{"cel": cel}], "extendedResourceName": dh.GPU}}),
    ]  # fmt: skip
    for node in ("t0", "t1"):
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        spec = {"driver": dh.DRA_DRIVER, "nodeName": node, "pool": pool}
        devices = [{"name": "gpu-0"}, {"name": "gpu-1"}]
        objects.append(
            ("resourceslices", {"apiVersion": api, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                                "spec": {**spec, "devices": devices}})
        )  # fmt: skip
    claimed = _pod("claimed", "t0")
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claimed-gpu"}]
    claim = {
        "apiVersion": api,
        "kind": "ResourceClaim",
        "metadata": {"name": "claimed-gpu", "namespace": dh.NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
    }
    pods = [
        claimed,  # a claim to allocate on t0: the allocator's first step is already too late
        _pod("extended", "t1", **{dh.GPU: "1"}),  # devices for an extended resource: the same
        _pod("plain", "t2"),  # nothing for DRA to allocate: no timeout
    ]
    return dh.Scenario(0, [], [], [_node(n) for n in ("t0", "t1", "t2")], pods, objects, {"claimed": claim})


@pytest.fixture(scope="module")
def timeout_cases() -> Iterator[dict[str, dh.PodCase]]:
    dh.ensure_binaries()
    head = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    loaded = scheduler_config.load({**head, **TIMEOUT_CONFIG})
    assert isinstance(loaded, tuple), loaded
    profiles, _ = loaded
    scenario = _timeout_scenario()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-dra-timeout-") as tmp,
        dh.Harness(Path(tmp), profiles[0], scheduler_config=TIMEOUT_CONFIG) as h,
    ):
        h.reset()
        h.setup(scenario)
        yield {body["metadata"]["name"]: h.one_pod(0, i, body) for i, body in enumerate(scenario.pods)}


@pytest.mark.parametrize(("pod", "node"), [("claimed", "t0"), ("extended", "t1")])
def test_a_filter_longer_than_filter_timeout_fails_as_upstream_does(
    timeout_cases: dict[str, dh.PodCase], pod: str, node: str
) -> None:
    case = timeout_cases[pod]
    up, ours = case.upstream, case.ours
    assert up.node is None and up.error, up
    expected = f'running "DynamicResources" filter plugin: node {node}: timed out trying to allocate devices'
    assert up.message == expected
    assert ours.node is None and ours.message == expected


def test_a_pod_dra_has_nothing_to_allocate_for_is_not_timed(timeout_cases: dict[str, dh.PodCase]) -> None:
    case = timeout_cases["plain"]
    assert case.upstream.node == case.ours.node == "t2"


# --------------------------------------------------------------------------- scoring a resource DRA serves

SCORING_CONFIG: dict[str, Any] = {
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "LeastAllocated",
                            "resources": [{"name": "cpu", "weight": 1}, {"name": dh.GPU, "weight": 3}],
                        }
                    },
                },
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu", "weight": 1}, {"name": dh.GPU, "weight": 1}]},
                },
            ],
        }
    ]
}


def _scoring_scenario() -> dh.Scenario:
    """s0 and s1 serve example.com/gpu with 2 and 4 devices (one tainted by a rule on s1), s2 with its device plugin
    (4); pods ask 1 or 2, unpinned: NodeResourcesFit and BalancedAllocation score the DRA nodes by their devices.

    The class has no selector: upstream v1.37.2's BalancedAllocation dereferences a CEL cache it never made when the
    class of a scored resource has one (a nil-pointer panic that ends kube-scheduler; its NodeResourcesFit makes
    one). We evaluate the selectors there as NodeResourcesFit does (tests/unit/test_dra_gates.py)."""
    api = "resource.k8s.io/v1"
    objects: list[tuple[str, dict[str, Any]]] = [
        ("deviceclasses", {"apiVersion": api, "kind": "DeviceClass", "metadata": {"name": "s-gpu"},
                           "spec": {"extendedResourceName": dh.GPU}}),
    ]  # fmt: skip
    for node, count in (("s0", 2), ("s1", 4)):
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        devices = [{"name": f"gpu-{i}"} for i in range(count)]
        objects.append(
            ("resourceslices", {"apiVersion": api, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                                "spec": {"driver": dh.DRA_DRIVER, "nodeName": node, "pool": pool, "devices": devices}})
        )  # fmt: skip
    selector = {"driver": dh.DRA_DRIVER, "pool": "s1", "device": "gpu-3"}
    taint = {"key": dh.TAINT_KEY, "effect": "NoSchedule"}
    objects.append(
        ("devicetaintrules", {"apiVersion": api, "kind": "DeviceTaintRule", "metadata": {"name": "s1-gpu-3"},
                              "spec": {"deviceSelector": selector, "taint": taint}})
    )  # fmt: skip
    nodes = [_node("s0"), _node("s1")]
    body = bodies.node_body("s2").hostname().platform()
    body.capacity(cpu="4", memory="8Gi", ephemeral_storage="100Gi", pods="110", **{dh.GPU: "4"}).ready(
        reason="KubeletReady"
    )
    nodes.append((body.manifest(), body.status()))
    pods = []
    for i, (gpus, cpu) in enumerate((("1", "500m"), ("2", "1"), ("1", "250m"), ("1", "2"), ("2", "100m"))):
        pod = bodies.pod_body(f"g{i}", dh.NAMESPACE).automount_service_account_token(False).termination_grace_period(0)
        pod.container("main", bodies.PAUSE_IMAGE, cpu=cpu, **{dh.GPU: gpus})
        obj = pod.obj()
        obj["spec"]["containers"][0]["resources"]["limits"] = {dh.GPU: gpus}
        pods.append(obj)
    return dh.Scenario(0, [], [], nodes, pods, objects, {})


@pytest.fixture(scope="module")
def scoring_cases() -> Iterator[list[dh.PodCase]]:
    dh.ensure_binaries()
    head = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    loaded = scheduler_config.load({**head, **SCORING_CONFIG})
    assert isinstance(loaded, tuple), loaded
    profiles, _ = loaded
    scenario = _scoring_scenario()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-dra-scoring-") as tmp,
        dh.Harness(Path(tmp), profiles[0], scheduler_config=SCORING_CONFIG) as h,
    ):
        h.reset()
        h.setup(scenario)
        yield [h.one_pod(0, i, body) for i, body in enumerate(scenario.pods)]


def test_a_resource_dra_serves_is_scored_by_the_nodes_devices_as_upstream_does(
    scoring_cases: list[dh.PodCase],
) -> None:
    report = dh.build_report([dh.compare(c) for c in scoring_cases])
    metrics = report.metrics()
    for metric in ("fits", "best_node", "feasible_sets_equal", "plugin_scores", "devices", "extended_claims"):
        assert metrics[metric]["percent"] == 100.0 and metrics[metric]["of"] > 0, (metric, dh.render(report))
    fit = report.plugins["NodeResourcesFit"]
    assert fit.compared > 0 and fit.equal == fit.compared
    # the devices counted: the first pod's scores differ between the DRA nodes (2 and 3 usable devices)
    first = scoring_cases[0].upstream.scores["NodeResourcesFit"]
    assert first["s0"] != first["s1"], first
