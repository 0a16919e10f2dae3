"""The nominatedNodeName a pod carries on its way to its node, against upstream kube-scheduler v1.37.2.

With NominatedNodeNameForExpectation (beta, on by default since v1.35) upstream writes a pod's
``status.nominatedNodeName`` before binding it when the pod will wait at Permit or a PreBind plugin
has work for it (``schedule_one.go`` ``bindingCycle``, after ``RunPreBindPreFlights``), so that the
cluster autoscaler and other schedulers see where it is going; with ClearingNominatedNodeNameAfterBinding
(beta, on) the API server clears it when the pod is bound. Both sides get the same workloads on nodes of
their own, on the real control plane: upstream (GenericWorkload on, every other gate at its default) and
``kopf-scheduler run`` (today's default profile). A watch records every value each pod's
``nominatedNodeName`` took while it was pending, and both sides must agree, pod for pod:

- a Workload-API gang of three on three nodes: upstream submits the members to Permit one after
  another, so the first two wait there for the quorum, nominated to their nodes, and the third
  completes it (never nominated);
- a pod with a ResourceClaim: DynamicResources' PreBind has work (its pre-flight), so it is
  nominated to the node of the devices before PreBind writes the claim;
- a plain pod: neither waits nor has PreBind work, so it is never nominated;

and every bound pod ends with no nomination.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client, watch

from kopf_scheduler.cluster import ControlPlane

pytestmark = pytest.mark.cluster

POLICY = "e2e-nominations"
UPSTREAM = "default-scheduler"
WORKLOAD = ("scheduling.k8s.io", "v1beta1")
RESOURCE = ("resource.k8s.io", "v1")


@pytest.fixture(scope="module")
def upstream(control_plane: ControlPlane) -> Iterator[None]:
    name = "kube-scheduler-nominations"
    control_plane.start_kube_scheduler(["--feature-gates=GenericWorkload=true"], name=name)
    try:
        yield
    finally:
        control_plane.stop_process(name)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", POLICY], sa_kubeconfig)
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})  # today's default profile
        wait_accepted(custom, POLICY, op)
        yield op
    finally:
        delete_policy(custom, POLICY)
        op.stop()


class History:
    """Every value of ``status.nominatedNodeName`` each pod of a namespace took while unbound, and its node."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.nominated: dict[str, list[str]] = {}
        self.node: dict[str, str] = {}
        self.final: dict[str, str] = {}
        self._watch = watch.Watch()
        rv = self.core.list_namespaced_pod(namespace).metadata.resource_version
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()

    def _run(self, rv: str) -> None:
        try:
            self._follow(rv)
        except Exception:  # the stream cut when the test stops it: what was seen is kept
            pass

    def _follow(self, rv: str) -> None:
        for event in self._watch.stream(
            self.core.list_namespaced_pod, self.namespace, resource_version=rv, timeout_seconds=120
        ):
            pod = event["object"]
            name = pod.metadata.name
            nominated = pod.status.nominated_node_name or ""
            seen = self.nominated.setdefault(name, [])
            if pod.spec.node_name:
                self.node[name] = pod.spec.node_name
                self.final[name] = nominated
            elif nominated and (not seen or seen[-1] != nominated):
                seen.append(nominated)

    def stop(self) -> None:
        self._watch.stop()


def make_side(
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    tag: str,
    scheduler: str,
    created: list[tuple[str, str]],
    op: Operator | None = None,
) -> list[str]:
    """On 4 nodes of 1 cpu: a gang of three 1-cpu members on three of them, then a pod with a claim for the
    device a slice of the side's own driver publishes on the fourth, then a plain pod (anywhere it fits).
    Returns the pod names, in that order; the cluster-scoped objects made go to `created` (plural, name)."""
    core = client.CoreV1Api(api)
    nodes = group.nodes(3, cpu="1", labels={"side": tag, "role": "gang"})
    nodes += group.nodes(1, cpu="1", labels={"side": tag, "role": "devices"})
    driver, device_class = f"{tag}-{group.id}.example.com", f"dev-{tag}-{group.id}"
    created += [("resourceslices", f"{nodes[3]}-{tag}"), ("deviceclasses", device_class)]
    custom.create_cluster_custom_object(
        *RESOURCE,
        "deviceclasses",
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}},
    )  # fmt: skip
    custom.create_cluster_custom_object(
        *RESOURCE,
        "resourceslices",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{nodes[3]}-{tag}"},
         "spec": {"driver": driver, "nodeName": nodes[3], "devices": [{"name": "dev-0"}],
                  "pool": {"name": nodes[3], "generation": 1, "resourceSliceCount": 1}}},
    )  # fmt: skip
    custom.create_namespaced_custom_object(
        *WORKLOAD,
        namespace,
        "podgroups",
        {"apiVersion": "/".join(WORKLOAD), "kind": "PodGroup", "metadata": {"name": f"{tag}-gang"},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}},
    )  # fmt: skip
    names = []
    for i in range(3):
        body = group.pod(f"{tag}-gang-{i}", scheduler, cpu="1", memory="64Mi", node_selector={"role": "gang"})
        body["spec"]["schedulingGroup"] = {"podGroupName": f"{tag}-gang"}
        core.create_namespaced_pod(namespace, body)
        names.append(f"{tag}-gang-{i}")
    wait(op, lambda: all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names), timeout=30,
         message=f"{tag}: the gang is bound")  # fmt: skip
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"{tag}-claim"},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": device_class}}]}},
    }
    custom.create_namespaced_custom_object(*RESOURCE, namespace, "resourceclaims", claim)  # fmt: skip
    body = group.pod(f"{tag}-claimed", scheduler, cpu="100m", memory="64Mi", node_selector={"side": tag})
    body["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": f"{tag}-claim"}]
    core.create_namespaced_pod(namespace, body)
    names.append(f"{tag}-claimed")
    body = group.pod(f"{tag}-plain", scheduler, cpu="100m", memory="64Mi", node_selector={"side": tag})
    core.create_namespaced_pod(namespace, body)
    names.append(f"{tag}-plain")
    wait(op, lambda: all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names), timeout=30,
         message=f"{tag}: every pod is bound")  # fmt: skip
    return names


def journey(history: History, names: list[str], tag: str) -> dict[str, Any]:
    """Per pod (its name less the side's tag): the nominations it carried while pending, as "its node" or
    another name, and the nomination it ends with."""
    out = {}
    for name in names:
        node = history.node[name]
        out[name.removeprefix(f"{tag}-")] = (
            ["its node" if n == node else n for n in history.nominated.get(name, [])],
            history.final.get(name, ""),
        )
    return out


def test_pods_carry_upstreams_nominated_node_name_while_they_wait_at_permit_or_pre_bind(
    upstream: None,
    operator: Operator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
) -> None:
    history = History(api, namespace)
    created: list[tuple[str, str]] = []
    try:
        with Group(api) as theirs_group, Group(api) as ours_group:
            theirs_names = make_side(api, custom, namespace, theirs_group, "up", UPSTREAM, created)
            ours_names = make_side(api, custom, namespace, ours_group, "ours", POLICY, created, operator)
            wait(
                operator,
                lambda: all(n in history.node for n in theirs_names + ours_names),
                timeout=10,
                message="the watch saw every pod bound",
            )
            theirs = journey(history, theirs_names, "up")
            ours = journey(history, ours_names, "ours")
    finally:
        history.stop()
        for plural, name in created:
            custom.delete_cluster_custom_object(*RESOURCE, plural, name)
    # what upstream does, as the module docstring says: the test tests what it says
    assert theirs == {
        "gang-0": (["its node"], ""),
        "gang-1": (["its node"], ""),
        "gang-2": ([], ""),
        "claimed": (["its node"], ""),
        "plain": ([], ""),
    }, theirs
    assert ours == theirs
