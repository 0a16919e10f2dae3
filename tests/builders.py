"""Fluent builders for pods and nodes in unit tests (after upstream ``testing/wrappers.go``).

They extend the API-body builders of ``kopf_scheduler.cluster.bodies`` (which the demo, the
benchmarks and ``kube_helpers`` use too) with what unit tests want: every pod in namespace
"default" with a fresh uid and phase Pending, every node a 4-cpu, 32Gi, Ready one, and ``obj()``
returning the body parsed by the same ``core.objects`` parser the operator uses, so tests exercise
the real parsing (``raw()`` or ``body`` give the body itself)::

    pod = make_pod("web").req(cpu="500m", memory="1Gi").node_selector(disk="ssd").obj()
    node = make_node("n1").capacity(cpu="4", memory="8Gi").label(zone="a").taint("k", "v").obj()
    info = node_info(node, pod_on_node)
"""

from __future__ import annotations

import itertools
from typing import Any

from kopf_scheduler.cluster.bodies import NodeBody, PodBody, Quantity, resource_list
from kopf_scheduler.core.nodeinfo import NodeInfo, node_info_of
from kopf_scheduler.core.objects import Node, Pod, PodGroup
from kopf_scheduler.core.parsing import parse_coscheduling_pod_group, parse_node, parse_pod, parse_pod_group

_uids = itertools.count(1)


class PodBuilder(PodBody):
    """A pod body with unit-test defaults; ``obj()`` parses it (the package's ``obj()`` is ``raw()`` here)."""

    default_image = "pause"

    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__(name, namespace)
        self.uid(f"uid-{name}-{next(_uids)}").phase("Pending")

    def init_host_port(self, port: int, *, restartable: bool = True) -> PodBuilder:
        """An init container (a sidecar unless ``restartable`` is False) with a host port."""
        return self.init_container(restartable=restartable, host_port=port)

    def container_status(
        self,
        name: str,
        *,
        actual: dict[str, Quantity] | None = None,
        allocated: dict[str, Quantity] | None = None,
        init: bool = False,
    ) -> PodBuilder:
        """A status entry for container ``name``: ``resources.requests`` (what runs) and ``allocatedResources``."""
        cs: dict[str, Any] = {"name": name}
        if actual is not None:
            cs["resources"] = {"requests": resource_list(**actual)}
        if allocated is not None:
            cs["allocatedResources"] = resource_list(**allocated)
        self.body["status"].setdefault("initContainerStatuses" if init else "containerStatuses", []).append(cs)
        return self

    def pod_status_resources(
        self, *, actual: dict[str, Quantity] | None = None, allocated: dict[str, Quantity] | None = None
    ) -> PodBuilder:
        """Pod-level ``status.resources.requests`` and ``status.allocatedResources``."""
        if actual is not None:
            self.body["status"]["resources"] = {"requests": resource_list(**actual)}
        if allocated is not None:
            self.body["status"]["allocatedResources"] = resource_list(**allocated)
        return self

    def resize_pending(self, reason: str) -> PodBuilder:
        """A PodResizePending condition (reason Deferred or Infeasible)."""
        return self.condition("PodResizePending", "True", reason)

    def raw(self) -> dict[str, Any]:
        """The body (a copy): what ``obj()`` returns in ``kopf_scheduler.cluster.bodies``."""
        return super().obj()

    def obj(self) -> Pod:  # type: ignore[override]  # a parsed Pod, what the core's tests take
        return parse_pod(self.body)


class NodeBuilder(NodeBody):
    """A node body with unit-test defaults (uid, hostname label, 4 cpu, 32Gi, 110 pods, Ready); ``obj()`` parses it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.uid(f"uid-{name}").hostname().capacity(cpu="4", memory="32Gi", pods="110").ready()

    def raw(self) -> dict[str, Any]:
        """The body (a copy): what ``obj()`` returns in ``kopf_scheduler.cluster.bodies``."""
        return super().obj()

    def obj(self) -> Node:  # type: ignore[override]  # a parsed Node, what the core's tests take
        return parse_node(self.body)


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_pod_group(
    name: str,
    min_count: int,
    *,
    namespace: str = "default",
    basic: bool = False,
    priority: int | None = None,
    disruption: str | None = None,
) -> PodGroup:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup with a gang policy of `min_count` (or a basic policy), parsed;
    `priority` is its ``spec.priority`` (what the Priority admission writes), `disruption` its
    ``spec.disruptionMode`` (``"all"`` or ``"single"``)."""
    policy = {"basic": {}} if basic else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if priority is not None:
        spec["priority"] = priority
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    body = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}"},
        "spec": spec,
    }
    return parse_pod_group(body)


def make_coscheduling_group(
    name: str, min_member: int, *, namespace: str = "default", timeout: int | None = None
) -> PodGroup:
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup, parsed."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return parse_coscheduling_pod_group(body)


def make_node(name: str = "node") -> NodeBuilder:
    return NodeBuilder(name)


def node_info(node: Node, *pods: Pod) -> NodeInfo:
    """A NodeInfo with ``pods`` on it (their nodeName set to the node)."""
    return node_info_of(node, *(p if p.node_name == node.name else p.with_node(node.name) for p in pods))
