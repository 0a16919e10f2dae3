"""Gang-aware preemption end to end: `kopf-scheduler run` against the real control plane, upstream's e2e scenarios.

Upstream's ``[sig-scheduling] WorkloadAwarePreemption [FeatureGate:GenericWorkload]`` (test/e2e/scheduling/
workload_aware_preemption.go, v1.37.2), reproduced: PriorityClasses low (100) and high (1000); one node gets 2 of
the fake extended resource ``example.com/combined-resource``; a low-priority PodGroup of two (gang minCount 2,
disruption mode All or Single) fills it, each member asking for one; then a high-priority pod asking for one is
created for that node (pinned by hostname), the only member of a PodGroup of minCount 1, or a lone pod. The
preemptor must run on the node, and the victim gang must be preempted entirely (All) or in part, a member staying
(Single). There is no kubelet: the pods ask for no grace period, so a victim goes as soon as it is deleted.

Beyond upstream's checks: the Preempted events name the PodGroup (``Preempted by podgroup <uid> on node
cluster``, related object the PodGroup), and the preemptor PodGroup ends PodGroupInitiallyScheduled=True.
``tests/cluster/test_gang_differential.py`` holds the decisions and texts against upstream kube-scheduler itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.cluster

POLICY = "e2e-gang-preemption"
WORKLOAD = ("scheduling.k8s.io", "v1beta1")
RESOURCE = "example.com/combined-resource"
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def operator(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", POLICY], sa_kubeconfig)
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})  # today's default profile, preemption included
        wait_accepted(custom, POLICY, op)
        yield op
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture(scope="module")
def priorities(api: client.ApiClient) -> Iterator[dict[str, str]]:
    scheduling = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"low-priority-{suffix}", "high": f"high-priority-{suffix}"}
    for role, value in (("low", 100), ("high", 1000)):
        scheduling.create_priority_class({"metadata": {"name": names[role]}, "value": value})
    try:
        yield names
    finally:
        for name in names.values():
            scheduling.delete_priority_class(name)


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=POLICY) as g:
        yield g


def add_extended_resource(core: client.CoreV1Api, node: str) -> None:
    """e2enode.AddExtendedResource: 2 of the resource in the node's capacity (and allocatable: no kubelet here)."""
    core.patch_node_status(node, {"status": {"capacity": {RESOURCE: "2"}, "allocatable": {RESOURCE: "2"}}})


def create_pod_group(
    custom: client.CustomObjectsApi, namespace: str, name: str, priority_class: str, min_count: int, mode: str
) -> dict[str, Any]:
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
    created: dict[str, Any] = custom.create_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", body)
    return created


def create_pod(
    core: client.CoreV1Api, group: Group, namespace: str, name: str, node: str, priority_class: str, pod_group: str
) -> None:
    """upstream's makePod: pinned to `node` by hostname, one of the resource requested and limited."""
    pod = group.pod(name, cpu=None, memory=None, node_selector={HOST: node}, priority_class_name=priority_class)
    pod["spec"]["containers"][0]["resources"] = {"requests": {RESOURCE: "1"}, "limits": {RESOURCE: "1"}}
    if pod_group:
        pod["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
    core.create_namespaced_pod(namespace, pod)


def preempted(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    """upstream's isPodPreempted: gone, or being deleted."""
    try:
        return core.read_namespaced_pod(name, namespace).metadata.deletion_timestamp is not None
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise


def node_of(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    node: str | None = core.read_namespaced_pod(name, namespace).spec.node_name
    return node


def preempted_events(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return [e for e in core.list_namespaced_event(namespace).items if e.reason == "Preempted"]


@pytest.mark.parametrize(
    ("preemptor", "mode"),
    [
        pytest.param("podgroup", "all", id="should preempt entire group with All disruption mode by a pod group"),
        pytest.param(
            "podgroup", "single", id="should preempt partial group with Single disruption mode by a pod group"
        ),
        pytest.param(
            "pod", "single", id="should preempt partial group with Single disruption mode by an individual pod"
        ),
        pytest.param("pod", "all", id="an individual pod preempts a gang disrupted together whole"),
    ],
)
def test_workload_aware_preemption(
    operator: Operator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    priorities: dict[str, str],
    preemptor: str,
    mode: str,
) -> None:
    core = client.CoreV1Api(api)
    node, _ = group.nodes(2)
    add_extended_resource(core, node)
    create_pod_group(custom, namespace, "pg-victim", priorities["low"], 2, mode)
    victims = ["victim1", "victim2"]
    for name in victims:
        create_pod(core, group, namespace, name, node, priorities["low"], "pg-victim")
    wait(operator, lambda: all(node_of(core, namespace, v) == node for v in victims), message="the victims run")

    pg = ""
    if preemptor == "podgroup":
        pg = create_pod_group(custom, namespace, "pg-preemptor", priorities["high"], 1, "single")["metadata"]["uid"]
    create_pod(core, group, namespace, "hp1", node, priorities["high"], "pg-preemptor" if pg else "")
    wait(operator, lambda: node_of(core, namespace, "hp1") == node, timeout=60, message="hp1 runs on the node")

    gone = {v for v in victims if preempted(core, namespace, v)}
    if mode == "all":
        assert gone == set(victims)  # verifyAllPreempted
    else:  # verifyPartialPreempted: at least one goes, and for 5 seconds at least one stays
        assert len(gone) == 1
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert sum(preempted(core, namespace, v) for v in victims) < len(victims)
            time.sleep(1)

    events = wait(operator, lambda: preempted_events(core, namespace) or None, message="the Preempted events")
    assert sorted(e.involved_object.name for e in events) == sorted(gone)
    if pg:  # upstream's executor for a pod group: the PodGroup preempts, on its whole-cluster candidate
        assert {e.message for e in events} == {f"Preempted by podgroup {pg} on node cluster"}
        assert {(e.related.kind, e.related.name) for e in events} == {("PodGroup", "pg-preemptor")}

        def scheduled() -> Any:
            status = custom.get_namespaced_custom_object(*WORKLOAD, namespace, "podgroups", "pg-preemptor")
            return next(
                (
                    c
                    for c in (status.get("status") or {}).get("conditions") or []
                    if c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "True"
                ),
                None,
            )

        wait(operator, scheduled, message="the preemptor's PodGroup is scheduled")
    else:
        uid = core.read_namespaced_pod("hp1", namespace).metadata.uid
        assert {e.message for e in events} == {f"Preempted by pod {uid} on node {node}"}
