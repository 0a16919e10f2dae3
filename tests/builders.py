"""Fluent builders for pods and nodes in unit tests (after upstream ``testing/wrappers.go``).

They build the API body a user would write, then parse it with the same
``core.objects`` parser the operator uses, so tests exercise the real parsing::

    pod = make_pod("web").req(cpu="500m", memory="1Gi").node_selector(disk="ssd").obj()
    node = make_node("n1").capacity(cpu="4", memory="8Gi").label(zone="a").taint("k", "v").obj()
    info = node_info(node, pod_on_node)
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime
from typing import Any

from kopf_scheduler.core.nodeinfo import NodeInfo, node_info_of
from kopf_scheduler.core.objects import Node, Pod, PodGroup
from kopf_scheduler.core.parsing import parse_coscheduling_pod_group, parse_node, parse_pod, parse_pod_group

_uids = itertools.count(1)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self.body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}-{next(_uids)}"},
            "spec": {"containers": []},
            "status": {"phase": "Pending"},
        }

    @property
    def spec(self) -> dict[str, Any]:
        return self.body["spec"]

    def _container(self) -> dict[str, Any]:
        if not self.spec["containers"]:
            self.spec["containers"].append({"name": "c0", "image": "pause"})
        return self.spec["containers"][-1]

    def container(self, name: str | None = None, image: str = "pause", **requests: str) -> "PodBuilder":
        """Add a container; keyword arguments are requests (cpu="1", memory="1Gi", ephemeral_storage=...)."""
        c: dict[str, Any] = {"name": name or f"c{len(self.spec['containers'])}", "image": image}
        if requests:
            c["resources"] = {"requests": _res(requests)}
        self.spec["containers"].append(c)
        return self

    def init_container(self, *, restartable: bool = False, **requests: str) -> "PodBuilder":
        c: dict[str, Any] = {"name": f"init{len(self.spec.get('initContainers', []))}", "image": "busybox"}
        if requests:
            c["resources"] = {"requests": _res(requests)}
        if restartable:
            c["restartPolicy"] = "Always"
        self.spec.setdefault("initContainers", []).append(c)
        return self

    def req(self, **requests: str) -> "PodBuilder":
        """Requests of the current (or a first) container."""
        self._container().setdefault("resources", {}).setdefault("requests", {}).update(_res(requests))
        return self

    def lim(self, **limits: str) -> "PodBuilder":
        self._container().setdefault("resources", {}).setdefault("limits", {}).update(_res(limits))
        return self

    def image(self, image: str) -> "PodBuilder":
        self._container()["image"] = image
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> "PodBuilder":
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            p["hostIP"] = host_ip
        self._container().setdefault("ports", []).append(p)
        return self

    def label(self, **labels: str) -> "PodBuilder":
        self.body["metadata"].setdefault("labels", {}).update(labels)
        return self

    def labels(self, labels: dict[str, str]) -> "PodBuilder":
        self.body["metadata"].setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> "PodBuilder":
        self.body["metadata"].setdefault("annotations", {})[key] = value
        return self

    def uid(self, uid: str) -> "PodBuilder":
        self.body["metadata"]["uid"] = uid
        return self

    def node(self, node_name: str) -> "PodBuilder":
        self.spec["nodeName"] = node_name
        return self

    def scheduler(self, name: str) -> "PodBuilder":
        self.spec["schedulerName"] = name
        return self

    def scheduling_group(self, pod_group: str) -> "PodBuilder":
        """Join the ``scheduling.k8s.io`` PodGroup `pod_group` (``spec.schedulingGroup.podGroupName``)."""
        self.spec["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def pod_group(self, name: str) -> "PodBuilder":
        """Join the coscheduling PodGroup `name` (label ``scheduling.x-k8s.io/pod-group``)."""
        return self.label(**{"scheduling.x-k8s.io/pod-group": name})

    def priority(self, value: int) -> "PodBuilder":
        self.spec["priority"] = value
        return self

    def preemption_policy(self, policy: str) -> "PodBuilder":
        self.spec["preemptionPolicy"] = policy
        return self

    def nominated(self, node_name: str) -> "PodBuilder":
        self.body["status"]["nominatedNodeName"] = node_name
        return self

    def started(self, seconds: int) -> "PodBuilder":
        """``status.startTime``, `seconds` after the epoch."""
        self.body["status"]["startTime"] = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self

    def condition(self, type_: str, status: str, reason: str = "") -> "PodBuilder":
        self.body["status"].setdefault("conditions", []).append({"type": type_, "status": status, "reason": reason})
        return self

    def phase(self, phase: str) -> "PodBuilder":
        self.body["status"]["phase"] = phase
        return self

    def terminating(self) -> "PodBuilder":
        self.body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return self

    def owner(self, kind: str, name: str, uid: str, controller: bool = True) -> "PodBuilder":
        self.body["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": controller}
        )
        return self

    def node_selector(self, **labels: str) -> "PodBuilder":
        self.spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def node_selector_map(self, labels: dict[str, str]) -> "PodBuilder":
        self.spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def node_affinity_in(self, key: str, *values: str) -> "PodBuilder":
        """A required node affinity term ``key In values`` (ANDed into the first term)."""
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        req = na.setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{"matchExpressions": []}]}
        )
        req["nodeSelectorTerms"][0]["matchExpressions"].append({"key": key, "operator": "In", "values": list(values)})
        return self

    def required_node_terms(self, *terms: dict[str, Any]) -> "PodBuilder":
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": list(terms)}
        return self

    def preferred_node_term(self, weight: int, *expressions: dict[str, Any]) -> "PodBuilder":
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        na.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": weight, "preference": {"matchExpressions": list(expressions)}}
        )
        return self

    def pod_affinity(
        self,
        topology_key: str,
        labels: dict[str, str],
        *,
        anti: bool = False,
        weight: int | None = None,
        namespaces: list[str] | None = None,
    ) -> "PodBuilder":
        """A pod (anti-)affinity term selecting ``labels``; ``weight`` makes it preferred instead of required."""
        kind = "podAntiAffinity" if anti else "podAffinity"
        section = self.spec.setdefault("affinity", {}).setdefault(kind, {})
        term: dict[str, Any] = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology_key}
        if namespaces is not None:
            term["namespaces"] = namespaces
        if weight is None:
            section.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            section.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": weight, "podAffinityTerm": term}
            )
        return self

    def spread(
        self,
        max_skew: int,
        topology_key: str,
        when: str = "DoNotSchedule",
        selector: dict[str, Any] | None = None,
        *,
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: list[str] | None = None,
    ) -> "PodBuilder":
        """A topologySpreadConstraint (upstream ``SpreadConstraint``); ``selector`` is a raw labelSelector, None omits it."""
        c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": topology_key, "whenUnsatisfiable": when}
        optional = {
            "labelSelector": selector,
            "minDomains": min_domains,
            "nodeAffinityPolicy": node_affinity_policy,
            "nodeTaintsPolicy": node_taints_policy,
            "matchLabelKeys": match_label_keys,
        }
        c.update({k: v for k, v in optional.items() if v is not None})
        self.spec.setdefault("topologySpreadConstraints", []).append(c)
        return self

    def toleration(self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> "PodBuilder":
        t: dict[str, Any] = {"operator": operator}
        if key:
            t["key"] = key
        if value:
            t["value"] = value
        if effect:
            t["effect"] = effect
        self.spec.setdefault("tolerations", []).append(t)
        return self

    def volume(self, volume: dict[str, Any]) -> "PodBuilder":
        """A raw volume entry, e.g. ``{"name": "v", "gcePersistentDisk": {"pdName": "pd1"}}``."""
        self.spec.setdefault("volumes", []).append(volume)
        return self

    def pvc(self, claim: str, read_only: bool = False) -> "PodBuilder":
        return self.volume({"name": claim, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}})

    def overhead(self, **resources: str) -> "PodBuilder":
        self.spec["overhead"] = _res(resources)
        return self

    def pod_requests(self, **requests: str) -> "PodBuilder":
        """Pod-level ``spec.resources.requests`` (PodLevelResources)."""
        self.spec.setdefault("resources", {}).setdefault("requests", {}).update(_res(requests))
        return self

    def pod_limits(self, **limits: str) -> "PodBuilder":
        self.spec.setdefault("resources", {}).setdefault("limits", {}).update(_res(limits))
        return self

    def init_host_port(self, port: int, *, restartable: bool = True) -> "PodBuilder":
        """An init container (a sidecar unless ``restartable`` is False) with a host port."""
        self.init_container(restartable=restartable)
        self.spec["initContainers"][-1]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
        return self

    def container_status(
        self,
        name: str,
        *,
        actual: dict[str, str] | None = None,
        allocated: dict[str, str] | None = None,
        init: bool = False,
    ) -> "PodBuilder":
        """A status entry for container ``name``: ``resources.requests`` (what runs) and ``allocatedResources``."""
        cs: dict[str, Any] = {"name": name}
        if actual is not None:
            cs["resources"] = {"requests": _res(actual)}
        if allocated is not None:
            cs["allocatedResources"] = _res(allocated)
        self.body["status"].setdefault("initContainerStatuses" if init else "containerStatuses", []).append(cs)
        return self

    def pod_status_resources(
        self, *, actual: dict[str, str] | None = None, allocated: dict[str, str] | None = None
    ) -> "PodBuilder":
        """Pod-level ``status.resources.requests`` and ``status.allocatedResources``."""
        if actual is not None:
            self.body["status"]["resources"] = {"requests": _res(actual)}
        if allocated is not None:
            self.body["status"]["allocatedResources"] = _res(allocated)
        return self

    def resize_pending(self, reason: str) -> "PodBuilder":
        """A PodResizePending condition (reason Deferred or Infeasible)."""
        self.body["status"].setdefault("conditions", []).append(
            {"type": "PodResizePending", "status": "True", "reason": reason}
        )
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def obj(self) -> Pod:
        return parse_pod(self.body)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def capacity(self, **resources: str) -> "NodeBuilder":
        """Sets both capacity and allocatable (keys as in ``req``; ``pods`` too)."""
        res = _res(resources)
        self.body["status"]["capacity"] = dict(res)
        self.body["status"]["allocatable"] = dict(res)
        return self

    def allocatable(self, **resources: str) -> "NodeBuilder":
        self.body["status"]["allocatable"] = _res(resources)
        return self

    def label(self, **labels: str) -> "NodeBuilder":
        self.body["metadata"]["labels"].update(labels)
        return self

    def labels(self, labels: dict[str, str]) -> "NodeBuilder":
        self.body["metadata"]["labels"].update(labels)
        return self

    def zone(self, zone: str, region: str = "") -> "NodeBuilder":
        self.body["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        if region:
            self.body["metadata"]["labels"]["topology.kubernetes.io/region"] = region
        return self

    def annotation(self, key: str, value: str) -> "NodeBuilder":
        self.body["metadata"].setdefault("annotations", {})[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> "NodeBuilder":
        self.body["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self, value: bool = True) -> "NodeBuilder":
        self.body["spec"]["unschedulable"] = value
        return self

    def condition(self, type_: str, status: str) -> "NodeBuilder":
        conds = [c for c in self.body["status"]["conditions"] if c["type"] != type_]
        conds.append({"type": type_, "status": status})
        self.body["status"]["conditions"] = conds
        return self

    def no_conditions(self) -> "NodeBuilder":
        self.body["status"]["conditions"] = []
        return self

    def image(self, size_bytes: int, *names: str) -> "NodeBuilder":
        self.body["status"].setdefault("images", []).append({"names": list(names), "sizeBytes": size_bytes})
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def obj(self) -> Node:
        return parse_node(self.body)


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_pod_group(name: str, min_count: int, *, namespace: str = "default", basic: bool = False) -> PodGroup:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup with a gang policy of `min_count` (or a basic policy), parsed."""
    policy = {"basic": {}} if basic else {"gang": {"minCount": min_count}}
    body = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}"},
        "spec": {"schedulingPolicy": policy},
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


def _res(values: dict[str, str]) -> dict[str, str]:
    """Python keyword names to resource names: ephemeral_storage -> ephemeral-storage; '__' -> '/'."""
    out = {}
    for k, v in values.items():
        name = k.replace("__", "/").replace("_", "-") if k not in ("cpu", "memory", "pods") else k
        out[name] = str(v)
    return out
