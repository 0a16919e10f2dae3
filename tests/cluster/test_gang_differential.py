"""Workload-API gangs against upstream kube-scheduler v1.37.2, its GenericWorkload gate on (the control plane's
kube-apiserver runs with it too, ``cluster.controlplane.FEATURE_GATES``).

The same gang on the same nodes: upstream decides it in the real cluster (its pod-group cycle), and ``simulate``
decides it from the objects as the API server stored them (every node and bound pod of the cluster, the PodGroup,
the members). Both must agree on where each member goes and, for a gang that cannot be placed, on the text each
member reads (upstream's PodScheduled=False condition) and on the PodGroup's condition.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kube_helpers import Group, wait
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.core.policy import validate_policy
from kopf_scheduler.core.profile import Profile
from kopf_scheduler.sim.loader import load_cluster, load_pods
from kopf_scheduler.sim.simulator import Simulation

pytestmark = pytest.mark.cluster

UPSTREAM = "kube-scheduler-gangs"
WORKLOAD = ("scheduling.k8s.io", "v1beta1")


@pytest.fixture(scope="module")
def upstream(control_plane: ControlPlane) -> Iterator[None]:
    control_plane.start_kube_scheduler(
        ["--feature-gates=GenericWorkload=true,OpportunisticBatching=false"], name=UPSTREAM
    )
    try:
        yield
    finally:
        control_plane.stop_process(UPSTREAM)


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=None) as g:  # pods left to the default scheduler: upstream's
        yield g


def raw(call: Any, *args: Any, **kwargs: Any) -> Any:
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def create_gang(
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    group: Group,
    namespace: str,
    name: str,
    size: int,
    *,
    min_count: int | None = None,
    cpus: dict[int, str] | None = None,
) -> list[str]:
    """A PodGroup of minCount `min_count` (default `size`) and `size` members of 1 cpu (`cpus`: index -> cpu)."""
    body = {
        "apiVersion": "/".join(WORKLOAD),
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count or size}}},
    }
    custom.create_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", body)
    names = [f"{name}-{i}" for i in range(size)]
    core = client.CoreV1Api(api)
    for i, pod_name in enumerate(names):
        pod = group.pod(pod_name, cpu=(cpus or {}).get(i, "1"), memory="64Mi")
        pod["spec"]["schedulingGroup"] = {"podGroupName": name}
        core.create_namespaced_pod(namespace, pod)
    return names


def upstream_outcome(core: client.CoreV1Api, namespace: str, names: list[str]) -> dict[str, tuple[str | None, str]]:
    """Each member's node, or None with its PodScheduled=False message."""
    out: dict[str, tuple[str | None, str]] = {}
    for name in names:
        pod = core.read_namespaced_pod(name, namespace)
        conditions = pod.status.conditions or []
        message = next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")
        out[name] = (pod.spec.node_name, "" if pod.spec.node_name else message)
    return out


def simulated_outcome(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str, gang: str, names: list[str]
) -> tuple[dict[str, tuple[str | None, str]], Simulation]:
    """simulate over the cluster as the API server holds it, the members pending again."""
    nodes = raw(core.list_node)["items"]
    bound = [p for p in raw(core.list_pod_for_all_namespaces)["items"] if p["spec"].get("nodeName")]
    bound = [p for p in bound if p["metadata"]["name"] not in names or p["metadata"]["namespace"] != namespace]
    for body in nodes + bound:
        body.setdefault("apiVersion", "v1")
    nodes_kind = [{**n, "kind": "Node"} for n in nodes]
    pods_kind = [{**p, "kind": "Pod"} for p in bound]
    pod_group = custom.get_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", gang)
    members = []
    for name in names:
        body = raw(core.read_namespaced_pod, name, namespace)
        body.update(apiVersion="v1", kind="Pod")
        body["spec"].pop("nodeName", None)
        body.pop("status", None)
        members.append(body)
    loaded = load_cluster([*nodes_kind, *pods_kind, pod_group], source="cluster")
    profile = validate_policy({"schedulerName": "default-scheduler"})
    assert isinstance(profile, Profile), profile
    sim = Simulation(loaded.cache, profile, seed=1)
    result = sim.run(load_pods(members, source="members"))
    return {p.pod.split("/")[1]: (p.node, p.message) for p in result.placements}, sim


def test_a_doomed_gang_reads_the_same_on_both_sides(
    upstream: None, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(3, cpu="1")
    names = create_gang(api, custom, group, namespace, "train", 4)

    def decided() -> dict[str, tuple[str | None, str]] | None:
        seen = upstream_outcome(core, namespace, names)
        return seen if all(m for _, m in seen.values()) else None

    theirs = wait(None, decided, timeout=30, message="upstream turned every member down")
    ours, sim = simulated_outcome(core, custom, namespace, "train", names)
    assert ours == theirs
    assert sim.cache.assumed_count() == 0
    conditions = custom.get_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", "train")["status"]["conditions"]
    [condition] = [c for c in conditions if c["type"] == "PodGroupInitiallyScheduled"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    # the condition reads the gang's status; the members that fit read it after "pod group is unschedulable, "
    assert f"pod group is unschedulable, {condition['message']}" in {m for _, m in ours.values()}


def test_a_gang_that_fits_lands_alike_on_both_sides(
    upstream: None, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(4, cpu="1")
    names = create_gang(api, custom, group, namespace, "fits", 4)
    theirs = wait(
        None,
        lambda: (seen := upstream_outcome(core, namespace, names)) and all(n for n, _ in seen.values()) and seen,
        timeout=30,
        message="upstream bound every member",
    )
    ours, _ = simulated_outcome(core, custom, namespace, "fits", names)
    # one member per node on both sides (which member takes which empty 1-cpu node is a score tie)
    assert sorted(n for n, _ in ours.values() if n) == sorted(n for n, _ in theirs.values() if n)
    assert all(m == "" for _, m in ours.values())


def test_a_gang_whose_first_member_fits_nowhere_stops_at_once_on_both_sides(
    upstream: None, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    """PlacementFeasible after the first member: 0 scheduled, 3 remaining cannot reach 4."""
    core = client.CoreV1Api(api)
    group.nodes(4, cpu="1")
    names = create_gang(api, custom, group, namespace, "early", 4, cpus={0: "2"})
    theirs = wait(
        None,
        lambda: (seen := upstream_outcome(core, namespace, names)) and all(m for _, m in seen.values()) and seen,
        timeout=30,
        message="upstream turned every member down",
    )
    ours, _ = simulated_outcome(core, custom, namespace, "early", names)
    assert ours == theirs
    assert "0 scheduled, 3 remaining" in theirs["early-1"][1]


def test_a_gang_above_its_min_count_binds_what_fits_on_both_sides(
    upstream: None, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    """minCount 2 of 3 members on 2 nodes: the gang stands, 2 are bound, the third reads its own FitError."""
    core = client.CoreV1Api(api)
    group.nodes(2, cpu="1")
    names = create_gang(api, custom, group, namespace, "loose", 3, min_count=2)

    def decided() -> dict[str, tuple[str | None, str]] | None:
        seen = upstream_outcome(core, namespace, names)
        return seen if all(n or m for n, m in seen.values()) else None

    theirs = wait(None, decided, timeout=30, message="upstream decided every member")
    ours, _ = simulated_outcome(core, custom, namespace, "loose", names)
    assert sorted(n for n, _ in ours.values() if n) == sorted(n for n, _ in theirs.values() if n)
    assert sorted(m for _, m in ours.values()) == sorted(m for _, m in theirs.values())
