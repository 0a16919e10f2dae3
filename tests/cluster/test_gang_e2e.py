"""Gang scheduling end to end, for both PodGroup APIs: `kopf-scheduler run` against the real control plane.

The apiserver serves upstream's ``scheduling.k8s.io/v1beta1`` PodGroups (the control plane turns
GenericWorkload on); scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` CRD is installed from
crds/optional/ as a user would. Nodes have 1 cpu and every member asks for 1 cpu, so a gang of 4
fits 4 nodes and only 3 of it fit 3 nodes. Members wait at Permit for 3 seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import ROOT, Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane

pytestmark = pytest.mark.cluster

POLICY = "e2e-gang"
WAIT_SECONDS = 3
APIS = {"workload": ("scheduling.k8s.io", "v1beta1"), "coscheduling": ("scheduling.x-k8s.io", "v1alpha1")}


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    control_plane.kubectl("apply", "-k", str(ROOT / "crds" / "optional"))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=30s")
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", POLICY], sa_kubeconfig)
    try:
        # today's default profile; Workload API gangs wait 3 s (coscheduling ones: their PodGroup says 3 s)
        create_policy(
            custom, POLICY, {"schedulerName": POLICY, "gangScheduling": {"permitWaitingTimeSeconds": WAIT_SECONDS}}
        )
        wait_accepted(custom, POLICY, op)
        yield op
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=POLICY) as g:
        yield g


def create_gang(
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    group: Group,
    namespace: str,
    kind: str,
    name: str,
    size: int,
) -> list[str]:
    """A PodGroup of `kind` with minimum `size`, then `size` members asking for 1 cpu each."""
    api_group, version = APIS[kind]
    if kind == "workload":
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": size}}}
    else:
        spec = {"minMember": size, "scheduleTimeoutSeconds": WAIT_SECONDS}
    body = {"apiVersion": f"{api_group}/{version}", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    custom.create_namespaced_custom_object(api_group, version, namespace, "podgroups", body)
    core = client.CoreV1Api(api)
    names = [f"{name}-{i}" for i in range(size)]
    for pod_name in names:
        pod = group.pod(pod_name, cpu="1", memory="64Mi")
        if kind == "workload":
            pod["spec"]["schedulingGroup"] = {"podGroupName": name}
        else:
            pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = name
        core.create_namespaced_pod(namespace, pod)
    return names


def nodes_of(core: client.CoreV1Api, namespace: str, names: list[str]) -> dict[str, str | None]:
    return {n: core.read_namespaced_pod(n, namespace).spec.node_name for n in names}


def failed_messages(core: client.CoreV1Api, namespace: str, pod: str) -> list[str]:
    return [
        e.message
        for e in core.list_namespaced_event(namespace).items
        if e.reason == "FailedScheduling" and e.involved_object.name == pod
    ]


def unschedulable_message(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    """The message of the pod's PodScheduled=False condition ("" when it has none)."""
    conditions = core.read_namespaced_pod(pod, namespace).status.conditions or []
    return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")


def pod_group_status(custom: client.CustomObjectsApi, kind: str, namespace: str, name: str) -> dict[str, Any]:
    api_group, version = APIS[kind]
    status: dict[str, Any] = (
        custom.get_namespaced_custom_object(api_group, version, namespace, "podgroups", name).get("status") or {}
    )
    return status


def initially_scheduled(status: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == "PodGroupInitiallyScheduled"), None)


@pytest.mark.parametrize("kind", ["workload", "coscheduling"])
def test_a_gang_of_4_that_fits_binds_all_4(
    operator: Operator, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group, kind: str
) -> None:
    core = client.CoreV1Api(api)
    nodes = group.nodes(4, cpu="1")
    names = create_gang(api, custom, group, namespace, kind, "train", 4)
    placed = wait(
        operator, lambda: (p := nodes_of(core, namespace, names)) and all(p.values()) and p, message="all 4 bound"
    )
    assert sorted(placed.values()) == sorted(nodes)  # one member per node
    if kind == "workload":

        def initially_scheduled_true() -> Any:
            c = initially_scheduled(pod_group_status(custom, kind, namespace, "train"))
            return c and c["status"] == "True" and c

        condition = wait(operator, initially_scheduled_true, message="PodGroupInitiallyScheduled=True")
        assert (condition["reason"], condition["message"]) == ("Scheduled", "4 of the 4 pods it needs are bound")
    else:

        def phase_scheduled() -> Any:
            s = pod_group_status(custom, kind, namespace, "train")
            return s.get("phase") == "Scheduled" and s

        status = wait(operator, phase_scheduled, message="phase Scheduled")
        assert (status["scheduled"], status["running"]) == (4, 0)


@pytest.mark.parametrize("kind", ["workload", "coscheduling"])
def test_a_gang_of_4_where_3_fit_binds_none_and_holds_nothing_after_its_timeout(
    operator: Operator, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group, kind: str
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(3, cpu="1")
    names = create_gang(api, custom, group, namespace, kind, "train", 4)
    expected = (
        f"gang {namespace}/train: only 3 of the 4 pods it needs fit; none is bound and every reservation is released"
    )

    # the 3 members that fit waited at Permit, then the gang was rejected: one event each, saying how
    # many fit (a rejection at Permit is limited apart from the filters' failures, which came before),
    # and the same in each one's PodScheduled condition
    def rejected() -> list[str]:
        return [
            n
            for n in names
            if expected in failed_messages(core, namespace, n) and expected in unschedulable_message(core, namespace, n)
        ]

    wait(
        operator,
        lambda: len(rejected()) == 3,
        timeout=WAIT_SECONDS + 20,
        message="3 members rejected with the gang's message",
    )
    assert nodes_of(core, namespace, names) == dict.fromkeys(names)  # nothing is half-bound

    # no reservation holds a node: three pods outside the gang, 1 cpu each, take the 3 nodes
    others = [f"after-{i}" for i in range(3)]
    for other in others:
        core.create_namespaced_pod(namespace, group.pod(other, cpu="1", memory="64Mi"))
    wait(operator, lambda: all(nodes_of(core, namespace, others).values()), message="the freed nodes are used")
    assert nodes_of(core, namespace, names) == dict.fromkeys(names)
    status = pod_group_status(custom, kind, namespace, "train")
    if kind == "workload":
        condition = wait(
            operator,
            lambda: initially_scheduled(pod_group_status(custom, kind, namespace, "train")),
            message="condition",
        )
        assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", expected)
    else:
        assert (status.get("phase"), status.get("scheduled"), status.get("running")) == ("Pending", 0, 0)
