"""Workload-API gangs against upstream kube-scheduler v1.37.2, its GenericWorkload gate on (the control plane's
kube-apiserver runs with it too, ``cluster.controlplane.FEATURE_GATES``).

The same gang on the same nodes: upstream decides it in the real cluster (its pod-group cycle), and ``simulate``
decides it from the objects as the API server stored them (every node and bound pod of the cluster, the PodGroup,
the members). Both must agree on where each member goes and, for a gang that cannot be placed, on the text each
member reads (upstream's PodScheduled=False condition) and on the PodGroup's condition.

Preemption (upstream's WorkloadAwarePreemption e2e, on cpu): a low-priority gang of two fills a node, in either
disruption mode, with its members' ``status.startTime`` written as a kubelet would (upstream ranks victims of equal
priority by it); then a high-priority gang, or a lone pod, wants that node. ``simulate`` starts from the cluster as
it was before the preemptor came: both sides must evict the same pods, bind the preemptors to the same nodes, and
write the same texts (each preemptor's FailedScheduling events; the Preempted events upstream writes on its victims
are the ones the operator writes, ``Preempted by podgroup <PodGroup uid> on node cluster``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kube_helpers import Group, wait
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.sim.loader import load_cluster, load_pods
from kopf_scheduler.sim.simulator import Placement, Simulation

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


# --------------------------------------------------------------------------- preemption

LOW, HIGH = 100, 1000
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def priorities(api: client.ApiClient) -> Iterator[dict[str, str]]:
    """PriorityClass names: low (100) and high (1000), as upstream's e2e makes them."""
    scheduling = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"low-priority-{suffix}", "high": f"high-priority-{suffix}"}
    for role, value in (("low", LOW), ("high", HIGH)):
        scheduling.create_priority_class({"metadata": {"name": names[role]}, "value": value})
    try:
        yield names
    finally:
        for name in names.values():
            scheduling.delete_priority_class(name)


def create_pod_group(
    custom: client.CustomObjectsApi, namespace: str, name: str, priority_class: str, min_count: int, mode: str
) -> None:
    body = {
        "apiVersion": "/".join(WORKLOAD),
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "priorityClassName": priority_class,
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": {mode: {}},
        },
    }
    custom.create_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", body)


def create_pinned(
    core: client.CoreV1Api, group: Group, namespace: str, name: str, node: str, priority_class: str, pod_group: str = ""
) -> None:
    """A pod of 1 cpu for `node` (upstream's e2e pins its pods by hostname), in `pod_group` when given."""
    pod = group.pod(name, cpu="1", memory="64Mi", node_selector={HOST: node}, priority_class_name=priority_class)
    if pod_group:
        pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
    core.create_namespaced_pod(namespace, pod)


def start(core: client.CoreV1Api, namespace: str, names: Sequence[str]) -> None:
    """Write each pod's status.startTime as a kubelet would, a minute apart in the order given."""
    then = datetime.now(UTC) - timedelta(hours=1)
    for i, name in enumerate(names):
        at = (then + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running", "startTime": at}})


def cluster_now(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    """Every node and bound pod of the cluster, and the namespace's PodGroups, as the API server holds them."""
    nodes = [{**n, "apiVersion": "v1", "kind": "Node"} for n in raw(core.list_node)["items"]]
    bound = [
        {**p, "apiVersion": "v1", "kind": "Pod"}
        for p in raw(core.list_pod_for_all_namespaces)["items"]
        if p["spec"].get("nodeName")
    ]
    return [*nodes, *bound, *pod_groups_of(custom, namespace)]


def pod_groups_of(custom: client.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    items = custom.list_namespaced_custom_object(*WORKLOAD, namespace, "podgroups")["items"]
    return [{**g, "apiVersion": "/".join(WORKLOAD), "kind": "PodGroup"} for g in items]


def pending_bodies(core: client.CoreV1Api, namespace: str, names: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        body = raw(core.read_namespaced_pod, name, namespace)
        body.update(apiVersion="v1", kind="Pod")
        body["spec"].pop("nodeName", None)
        body.pop("status", None)
        out.append(body)
    return out


def simulate_preemption(
    before: list[dict[str, Any]], pod_groups: list[dict[str, Any]], pending: list[dict[str, Any]]
) -> tuple[dict[str, Placement], Simulation]:
    """simulate from the cluster as it was before the preemptors came, with their PodGroups and themselves."""
    known = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in before}
    fresh = [g for g in pod_groups if ("PodGroup", g["metadata"]["namespace"], g["metadata"]["name"]) not in known]
    loaded = load_cluster([*before, *fresh], source="cluster")
    profile = validate_policy({"schedulerName": "default-scheduler"})
    assert isinstance(profile, Profile), profile
    sim = Simulation(loaded.cache, profile, seed=1)
    result = sim.run(load_pods(pending, source="preemptors"))
    return {p.pod.split("/")[1]: p for p in result.placements}, sim


def events_of(core: client.CoreV1Api, namespace: str, reason: str) -> dict[str, list[str]]:
    """Per pod, the messages of its events of `reason`, oldest first."""
    items = sorted(
        (e for e in core.list_namespaced_event(namespace).items if e.reason == reason),
        key=lambda e: e.first_timestamp or e.event_time or datetime.min.replace(tzinfo=UTC),
    )
    out: dict[str, list[str]] = {}
    for e in items:
        out.setdefault(e.involved_object.name, []).append(e.message or "")
    return out


def gone(core: client.CoreV1Api, namespace: str, names: Sequence[str]) -> set[str]:
    present = {p.metadata.name for p in core.list_namespaced_pod(namespace).items if not p.metadata.deletion_timestamp}
    return {n for n in names if n not in present}


def fill_with_victims(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    group: Group,
    namespace: str,
    priorities: dict[str, str],
    mode: str,
    nodes: Sequence[str],
) -> list[str]:
    """The low-priority gang "pg-victim" (minCount 2, disruption `mode`), one member per entry of `nodes`, bound
    by upstream and started (victim1 first)."""
    create_pod_group(custom, namespace, "pg-victim", priorities["low"], 2, mode)
    victims = [f"victim{i + 1}" for i in range(len(nodes))]
    for name, node in zip(victims, nodes):
        create_pinned(core, group, namespace, name, node, priorities["low"], "pg-victim")
    wait(
        None,
        lambda: all(n for n, _ in upstream_outcome(core, namespace, victims).values()),
        timeout=30,
        message="upstream bound the victim gang",
    )
    start(core, namespace, victims)
    return victims


@pytest.mark.parametrize(
    ("mode", "evicted"),
    [
        pytest.param("all", {"victim1", "victim2"}, id="All: the victim gang goes together"),
        pytest.param("single", {"victim2"}, id="Single: only the later-started member goes"),
    ],
)
def test_a_pod_group_preempts_alike_on_both_sides(
    upstream: None,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    priorities: dict[str, str],
    mode: str,
    evicted: set[str],
) -> None:
    """Upstream's e2e "should preempt entire group with All disruption mode by a pod group" and "... partial group
    with Single disruption mode ...", with a second preemptor member that fits elsewhere: it reads the gang's
    status, pod-group preemption's text included, in its FailedScheduling event."""
    core = client.CoreV1Api(api)
    full, free = group.nodes(2, cpu="2")
    victims = fill_with_victims(core, custom, group, namespace, priorities, mode, [full, full])
    before = cluster_now(core, custom, namespace)
    create_pod_group(custom, namespace, "pg-preemptor", priorities["high"], 2, "single")
    # hp1, created first, is tried first (upstream's member order) and fits on the free node; hp2 needs the full one
    create_pinned(core, group, namespace, "hp1", free, priorities["high"], "pg-preemptor")
    create_pinned(core, group, namespace, "hp2", full, priorities["high"], "pg-preemptor")
    preemptors = ["hp1", "hp2"]
    theirs = wait(
        None,
        lambda: (seen := upstream_outcome(core, namespace, preemptors)) and all(n for n, _ in seen.values()) and seen,
        timeout=60,
        message="upstream bound the preemptors",
    )
    assert {name: node for name, (node, _) in theirs.items()} == {"hp1": free, "hp2": full}
    assert gone(core, namespace, victims) == evicted
    pod_groups = pod_groups_of(custom, namespace)
    ours, sim = simulate_preemption(before, pod_groups, pending_bodies(core, namespace, preemptors))
    assert {name: p.node for name, p in ours.items()} == {"hp1": free, "hp2": full}
    assert {v.split("/")[1] for p in ours.values() for v in p.victims} == evicted
    assert {name: p.nominated_node for name, p in ours.items()} == {"hp1": free, "hp2": full}
    # the texts: each preemptor's FailedScheduling events (hp1: the gang's status, as it waits for the victims;
    # hp2: its own FitError), and the gang's status (the PodGroup's condition until the gang is bound)
    failed = events_of(core, namespace, "FailedScheduling")
    found = f"pod group preemption: found a placement for podgroup, preempting {len(evicted)} victims"
    assert failed["hp1"] == [f"minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, {found}"]
    assert {name: list(p.failures) for name, p in ours.items()} == {name: failed[name] for name in preemptors}
    [(key, rejection)] = sim.rejections.items()
    assert key.endswith("/pg-preemptor") and rejection == failed["hp1"][0]
    preemptor_uid = next(g["metadata"]["uid"] for g in pod_groups if g["metadata"]["name"] == "pg-preemptor")
    assert events_of(core, namespace, "Preempted") == {
        name: [f"Preempted by podgroup {preemptor_uid} on node cluster"] for name in evicted
    }


def test_a_lone_pod_evicts_a_gang_disrupted_together_across_nodes_alike(
    upstream: None,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    priorities: dict[str, str],
) -> None:
    """Single-pod preemption with GenericWorkload on: a victim that is a gang disrupted together goes whole, its
    member on another node too (upstream's DomainVictim)."""
    core = client.CoreV1Api(api)
    full, other = group.nodes(2, cpu="1")
    victims = fill_with_victims(core, custom, group, namespace, priorities, "all", [full, other])
    before = cluster_now(core, custom, namespace)
    create_pinned(core, group, namespace, "hp", full, priorities["high"])
    theirs = wait(
        None,
        lambda: (seen := upstream_outcome(core, namespace, ["hp"])) and seen["hp"][0] and seen,
        timeout=60,
        message="upstream bound the preemptor",
    )
    assert theirs["hp"][0] == full and gone(core, namespace, victims) == {"victim1", "victim2"}
    pod_groups = pod_groups_of(custom, namespace)
    ours, _ = simulate_preemption(before, pod_groups, pending_bodies(core, namespace, ["hp"]))
    assert ours["hp"].node == full and {v.split("/")[1] for v in ours["hp"].victims} == {"victim1", "victim2"}
    failed = events_of(core, namespace, "FailedScheduling")
    assert list(ours["hp"].failures) == failed["hp"]
    assert failed["hp"][0].endswith(
        f"preemption: found a potential placement for pod on node {full}, preempting 2 victims"
    )
