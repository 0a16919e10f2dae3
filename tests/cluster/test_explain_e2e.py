"""Explain and capacity end to end: `kopf-scheduler explain` against a running operator, and
`simulate --from-cluster --max-replicas` against the real control plane.

The operator runs under the deploy/ ServiceAccount with its metrics port on a free local port, where
`explain` asks /debug/attempts. Every test makes its own nodes (a Group), which its pods select: other
tests' nodes stay in the cluster and fail the selector, so "every node" is every node the API lists.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.commands import main

pytestmark = pytest.mark.cluster

POLICY = "e2e-explain"  # the default profile under this schedulerName
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def endpoint(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Operator, str]]:
    port = free_port()
    op = Operator(
        tmp_path_factory.mktemp("operator") / "operator.log",
        ["--policy", POLICY, "--insecure-port", str(port)],
        sa_kubeconfig,
    )
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})
        wait_accepted(custom, POLICY, op)
        yield op, f"http://127.0.0.1:{port}"
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=POLICY) as g:
        yield g


@pytest.fixture
def stranger(api: client.ApiClient) -> Iterator[str]:
    """A node of no test's group: the pods' selectors must reject it (whatever other nodes exist)."""
    with Group(api) as g:
        yield g.nodes(1)[0]


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["explain", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def explained(capsys: pytest.CaptureFixture[str], op: Operator, url: str, pod: str, outcome: str) -> dict[str, Any]:
    """The pod's explanation once its last attempt has the `outcome` (the operator may not have tried it yet)."""

    def attempt() -> dict[str, Any] | None:
        rc, out, _ = explain(capsys, pod, "--endpoint", url, "--output", "json")
        data: dict[str, Any] | None = json.loads(out) if rc == 0 else None
        return data if data is not None and data["outcome"] == outcome else None

    found: dict[str, Any] = wait(op, attempt, message=f"{pod}'s attempt is {outcome}")
    return found


def test_explain_lists_every_nodes_reason_for_an_unschedulable_pod(
    endpoint: tuple[Operator, str],
    api: client.ApiClient,
    namespace: str,
    group: Group,
    stranger: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    op, url = endpoint
    mine = group.nodes(2, cpu="1")
    client.CoreV1Api(api).create_namespaced_pod(namespace, group.pod("big", cpu="2"))
    data = explained(capsys, op, url, f"{namespace}/big", "unschedulable")
    everyone = {n.metadata.name for n in client.CoreV1Api(api).list_node().items}
    reasons = {v["node"]: (v["plugin"], v["reasons"]) for v in data["nodes"]}
    assert set(reasons) == everyone and data["notEvaluated"] == [] and data["numNodes"] == len(everyone)
    # 2 cpu exceed the group's 1-cpu nodes; every other node fails the group's node selector
    assert {n: reasons[n] for n in mine} == {n: ("NodeResourcesFit", ["Insufficient cpu"]) for n in mine}
    assert stranger in everyone and all(
        reasons[n] == ("NodeAffinity", [SELECTOR_MISMATCH]) for n in everyone - set(mine)
    ), reasons
    assert data["schedulerName"] == POLICY and data["attempts"] >= 1
    histogram = sorted(
        ["2 Insufficient cpu", f"{len(everyone) - 2} {SELECTOR_MISMATCH}"]
    )  # as strings, as upstream sorts them
    assert data["message"].startswith(f"0/{len(everyone)} nodes are available: {', '.join(histogram)}.")

    rc, table, _ = explain(capsys, f"{namespace}/big", "--endpoint", url)
    lines = table.splitlines()
    assert rc == 0 and lines[0] == f"pod {namespace}/big: unschedulable"
    for node in mine:
        assert any(
            line.split() == [node, "unresolvable", "NodeResourcesFit", "Insufficient", "cpu"] for line in lines
        ), table


def test_explain_shows_the_scores_of_a_scheduled_pod(
    endpoint: tuple[Operator, str],
    api: client.ApiClient,
    namespace: str,
    group: Group,
    capsys: pytest.CaptureFixture[str],
) -> None:
    op, url = endpoint
    mine = group.nodes(2, cpu="4")
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, group.pod("web", cpu="100m"))
    bound = wait(op, lambda: core.read_namespaced_pod("web", namespace).spec.node_name, message="web bound")
    data = explained(capsys, op, url, f"{namespace}/web", "scheduled")
    assert data["node"] == bound
    scored = [v for v in data["nodes"] if v["result"] in ("chosen", "feasible")]
    assert {v["node"] for v in scored} == set(mine) and scored[0] == next(v for v in scored if v["node"] == bound)
    for v in scored:
        assert v["scores"] and v["total"] == sum(s["score"] * s["weight"] for s in v["scores"])
        assert all(s["weighted"] == s["score"] * s["weight"] and 0 <= s["score"] <= 100 for s in v["scores"])
    assert scored[0]["total"] >= scored[1]["total"]
    plugins = {s["plugin"] for s in scored[0]["scores"]}
    assert {"NodeResourcesFit", "NodeResourcesBalancedAllocation"} <= plugins, plugins

    rc, table, _ = explain(capsys, f"{namespace}/web", "--endpoint", url)
    assert rc == 0 and table.splitlines()[0] == f"pod {namespace}/web: scheduled to {bound}"
    assert "NODE" in table and "RAW  SCORE  WEIGHT  WEIGHTED" in table


@pytest.fixture
def priorities(api: client.ApiClient) -> Iterator[dict[str, str]]:
    scheduling = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = {"low": (f"e2e-explain-low-{suffix}", 10), "high": (f"e2e-explain-high-{suffix}", 1000)}
    for name, value in names.values():
        scheduling.create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
    try:
        yield {role: name for role, (name, _) in names.items()}
    finally:
        for name, _ in names.values():
            scheduling.delete_priority_class(name)


def test_explain_shows_the_victims_of_a_preemption_after_the_pod_landed(
    endpoint: tuple[Operator, str],
    api: client.ApiClient,
    namespace: str,
    group: Group,
    priorities: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    op, url = endpoint
    (node,) = group.nodes(1, cpu="2")
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        namespace, group.pod("low", cpu="2", priority_class_name=priorities["low"])
    )  # no grace period: gone at once
    wait(op, lambda: core.read_namespaced_pod("low", namespace).spec.node_name, message="low bound")
    core.create_namespaced_pod(namespace, group.pod("high", cpu="2", priority_class_name=priorities["high"]))
    # the attempt that preempted nominated high to the node; the next one bound it there, and still tells why
    data = explained(capsys, op, url, f"{namespace}/high", "scheduled")
    assert data["node"] == node
    preemption = data["preemption"]
    assert (preemption["plugin"], preemption["nominatedNode"]) == ("DefaultPreemption", node)
    assert preemption["victims"] == [{"pod": f"{namespace}/low", "priority": 10}]
    assert (
        preemption["message"] == f"preemption: found a potential placement for pod on node {node}, preempting 1 victims"
    )
    rc, table, _ = explain(capsys, f"{namespace}/high", "--endpoint", url)
    assert rc == 0 and f"  nominated {node}; victims {namespace}/low (priority 10)" in table.splitlines()


def test_simulate_from_cluster_counts_the_copies_that_fit(
    kubeconfig: Path,
    api: client.ApiClient,
    namespace: str,
    stranger: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = Group(api)
    try:
        first, second = group.nodes(2, cpu="2", memory="8Gi")
        core = client.CoreV1Api(api)
        resident = group.pod("resident", None, cpu="1")
        resident["spec"]["nodeName"] = first  # bound at creation, as a kubelet-run pod would be
        core.create_namespaced_pod(namespace, resident)
        # a pod pending for a scheduler nobody runs: simulate places the cluster's pending pods first
        queue = f"e2e-capacity-{uuid.uuid4().hex[:6]}"
        core.create_namespaced_pod(namespace, group.pod("queued", queue, cpu="500m"))
        web = tmp_path / "web.yaml"
        web.write_text(yaml.safe_dump(group.pod("web", None, namespace=namespace, cpu="500m")))
        everyone = len(core.list_node().items)
        args = [
            "simulate",
            "--from-cluster",
            "--kubeconfig",
            str(kubeconfig),
            "--scheduler-name",
            queue,
            "--max-replicas",
            str(web),
        ]
        rc = main([*args, "--output", "json"])
        out = capsys.readouterr()
        assert rc == 0, out.err
        result = json.loads(out.out)
        assert [(p["pod"], p["node"] in (first, second)) for p in result["placements"]] == [
            (f"{namespace}/queued", True)
        ]
        # room for 500m pods: first (2 - 1) / 0.5 = 2, second 2 / 0.5 = 4; the queued pod takes one: 5
        capacity = result["maxReplicas"]
        assert (capacity["pod"], capacity["replicas"]) == (f"{namespace}/web", 5)
        assert sum(capacity["nodes"].values()) == 5 and set(capacity["nodes"]) <= {first, second}
        # the group's nodes are full; the stranger (and any node other tests left) fails the selector
        histogram = sorted(
            ["2 Insufficient cpu", f"{everyone - 2} {SELECTOR_MISMATCH}"]
        )  # as strings, as upstream sorts them
        assert capacity["stoppedBy"] == f"0/{everyone} nodes are available: {', '.join(histogram)}."

        rc = main(args)
        table = capsys.readouterr().out
        assert rc == 0 and f"5 copies of {namespace}/web fit" in table
        assert f"(1 pending pod(s) with schedulerName {queue} in the cluster at " in table
    finally:
        group.cleanup()
