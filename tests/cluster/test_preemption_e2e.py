"""Pod priority and preemption end to end: `kopf-scheduler run` against the real control plane.

PriorityClasses are resolved by the API server's Priority admission (as on any cluster). There is
no kubelet: a victim with a termination grace period stays Terminating until the test deletes it
for good, as a kubelet would; victims without one go at once. kube-controller-manager's disruption
controller keeps a PodDisruptionBudget's status, but these pods never get Ready (no kubelet runs them),
so its status.disruptionsAllowed stays 0: every pod it selects is protected.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.cluster

POLICY = "e2e-preempt"


@pytest.fixture(scope="module")
def operator(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", POLICY], sa_kubeconfig)
    try:
        # the v1.9 DefaultProvider's filters and scores, and preemption (spec.preemption defaults to true)
        create_policy(custom, POLICY, {"schedulerName": POLICY, "algorithmProvider": "DefaultProvider"})
        wait_accepted(custom, POLICY, op)
        yield op
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture(scope="module")
def priorities(api: client.ApiClient) -> Iterator[dict[str, str]]:
    """PriorityClass names by role: low (10), mid (20), high (1000), and never (1000, preemptionPolicy Never)."""
    scheduling = client.SchedulingV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    classes = {"low": (10, None), "mid": (20, None), "high": (1000, None), "never": (1000, "Never")}
    names = {role: f"e2e-{role}-{suffix}" for role in classes}
    for role, (value, policy) in classes.items():
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names[role]},
            "value": value,
        }
        if policy:
            body["preemptionPolicy"] = policy  # the admission refuses a pod spec that differs from its class
        scheduling.create_priority_class(body)
    try:
        yield names
    finally:
        for name in names.values():
            scheduling.delete_priority_class(name)


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=POLICY) as g:
        yield g


def read(core: client.CoreV1Api, namespace: str, name: str) -> Any | None:
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def events_of(core: client.CoreV1Api, namespace: str, reason: str, pod: str) -> list[Any]:
    return [
        e for e in core.list_namespaced_event(namespace).items if e.reason == reason and e.involved_object.name == pod
    ]


def bound(core: client.CoreV1Api, namespace: str, *names: str) -> dict[str, str] | None:
    placed = {n: getattr(read(core, namespace, n), "spec", None) for n in names}
    nodes = {n: spec.node_name for n, spec in placed.items() if spec is not None and spec.node_name}
    return nodes if len(nodes) == len(names) else None


def test_a_high_priority_pod_evicts_a_lower_one_and_lands(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group, priorities: dict[str, str]
) -> None:
    core = client.CoreV1Api(api)
    (node,) = group.nodes(1, cpu="2")
    low = group.pod("low", cpu="2", priority_class_name=priorities["low"])
    low["spec"]["terminationGracePeriodSeconds"] = 30  # it stays Terminating: there is no kubelet to end it
    core.create_namespaced_pod(namespace, low)
    wait(operator, lambda: bound(core, namespace, "low"), message="low bound")
    high_uid = core.create_namespaced_pod(
        namespace, group.pod("high", cpu="2", priority_class_name=priorities["high"])
    ).metadata.uid

    # the victim: marked, deleted (gracefully), and told why
    def terminating() -> Any:
        pod = read(core, namespace, "low")
        return pod is not None and pod.metadata.deletion_timestamp is not None and pod

    victim = wait(operator, terminating, message="low is being deleted")
    (condition,) = [c for c in victim.status.conditions or [] if c.type == "DisruptionTarget"]
    assert (condition.status, condition.reason) == ("True", "PreemptionByScheduler")
    assert condition.message == f"{POLICY}: preempting to accommodate a higher priority pod"
    (event,) = wait(operator, lambda: events_of(core, namespace, "Preempted", "low"), message="Preempted event")
    assert (event.type, event.action, event.reporting_component) == ("Normal", "Preempting", "kopf-scheduler")
    assert event.message == f"Preempted by pod {high_uid} on node {node}"
    assert event.related is not None and (event.related.name, event.related.uid) == ("high", high_uid)

    # the preemptor: nominated to the node, told so, and waiting for the victim to be gone
    wait(operator, lambda: read(core, namespace, "high").status.nominated_node_name == node, message="high nominated")
    failed = wait(
        operator, lambda: events_of(core, namespace, "FailedScheduling", "high"), message="FailedScheduling on high"
    )
    # other tests' nodes fail the group's node selector; this group's one node lacks cpu
    assert " 1 Insufficient cpu" in failed[0].message, failed[0].message
    assert failed[0].message.endswith(
        f". preemption: found a potential placement for pod on node {node}, preempting 1 victims"
    )
    # the victim is still there (Terminating): the preemptor waits, it does not preempt again
    assert read(core, namespace, "high").spec.node_name is None

    core.delete_namespaced_pod("low", namespace, grace_period_seconds=0)  # the kubelet's part
    assert wait(operator, lambda: bound(core, namespace, "high"), message="high bound") == {"high": node}
    # one preemption only: the pod waited for its victim instead of choosing more
    assert len(events_of(core, namespace, "Preempted", "low")) == 1


def test_a_pod_disruption_budget_steers_the_victim_choice(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group, priorities: dict[str, str]
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(2, cpu="2")
    # db has the lower priority, so without its PDB its node would be chosen (lowest highest-victim priority)
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace, {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}
    )
    core.create_namespaced_pod(
        namespace, group.pod("db", cpu="2", labels={"app": "db"}, priority_class_name=priorities["low"])
    )
    core.create_namespaced_pod(
        namespace, group.pod("report", cpu="2", labels={"app": "report"}, priority_class_name=priorities["mid"])
    )
    placed = wait(operator, lambda: bound(core, namespace, "db", "report"), message="db and report bound")
    assert placed["db"] != placed["report"]

    core.create_namespaced_pod(namespace, group.pod("api", cpu="2", priority_class_name=priorities["high"]))
    assert wait(operator, lambda: bound(core, namespace, "api"), message="api bound") == {"api": placed["report"]}
    assert read(core, namespace, "report") is None
    assert read(core, namespace, "db").metadata.deletion_timestamp is None
    (event,) = events_of(core, namespace, "Preempted", "report")
    assert event.message.endswith(f"on node {placed['report']}")


def test_a_pod_with_preemption_policy_never_only_waits(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group, priorities: dict[str, str]
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(1, cpu="2")
    core.create_namespaced_pod(namespace, group.pod("low", cpu="2", priority_class_name=priorities["low"]))
    wait(operator, lambda: bound(core, namespace, "low"), message="low bound")
    core.create_namespaced_pod(namespace, group.pod("patient", cpu="2", priority_class_name=priorities["never"]))
    (event,) = wait(
        operator, lambda: events_of(core, namespace, "FailedScheduling", "patient"), message="FailedScheduling"
    )
    assert event.message.endswith(" 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."), (
        event.message
    )
    assert read(core, namespace, "low").metadata.deletion_timestamp is None
    assert not read(core, namespace, "patient").status.nominated_node_name
