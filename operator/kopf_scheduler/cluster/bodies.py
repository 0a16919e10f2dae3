"""Fluent builders for Node and Pod API bodies: the one place that writes them by hand.

Modelled on upstream's ``pkg/scheduler/testing/wrappers.go`` (``MakePod().Req(...).Obj()``). Users:

- the demo (``commands/demo_workload.py``): its nodes, their kubelet-like status, its pods;
- the tests: ``tests/kube_helpers.py`` (nodes and pods on the real control plane), and the test kit
  ``kopf_scheduler.testing`` (plugin authors' and the unit tests', through ``tests/builders.py``), whose
  ``make_pod``/``make_node`` extend these builders and parse the body into core objects;
- the benchmarks and the differential harness (``bench/``): scheduler_perf's templates, the random
  clusters of ``bench/differential.py``, the fixed pods of the micro-benchmarks.

::

    node = node_body("n1").hostname().zone("z1").capacity(cpu="4", memory="8Gi", pods=110).ready().obj()
    pod = pod_body("web", "default").container("main").req(cpu="100m").scheduler("x").priority(10).obj()

A body holds what it was told and nothing else: ``apiVersion``, ``kind``, ``metadata.name`` and
``spec`` always (a pod's ``spec.containers`` too), the rest only once a method sets it. Container
methods (``req``, ``lim``, ``image``, ``port``, ``host_port``) act on the last container, adding
one named ``c0`` if there is none. Resources are keyword arguments (``cpu="1"``; ``ephemeral_storage``
becomes ``ephemeral-storage``, ``__`` becomes ``/``) or a mapping for any name
(``{"nvidia.com/gpu": 1}``); numbers become strings. ``set("spec.podCIDR", ...)`` writes any other field.

``obj()`` returns a deep copy, so one builder can stamp out several bodies. A node's ``manifest()``
and ``status()`` split it for a create followed by a patch of the status subresource, the way a
kubelet registers (a create may also carry the status: ``obj()``).

No I/O and no parsing: ``core.model.parsing`` turns bodies into objects; this module only writes dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Self

from ..core.model.timestamps import rfc3339

__all__ = [
    "ARCH_LABEL",
    "FAKE_NODE_INFO",
    "HOSTNAME_LABEL",
    "NO_PRESSURE",
    "OS_LABEL",
    "PAUSE_IMAGE",
    "Quantity",
    "REGION_LABEL",
    "ZONE_LABEL",
    "NodeBody",
    "PodBody",
    "fake_node_ip",
    "node_body",
    "pod_body",
    "resource_list",
    "timestamp",
]

#: a quantity as callers write it: "100m", "1Gi", 110
Quantity = str | int

PAUSE_IMAGE: Final = "registry.k8s.io/pause:3.10"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
OS_LABEL: Final = "kubernetes.io/os"
ARCH_LABEL: Final = "kubernetes.io/arch"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"

#: the node conditions a healthy kubelet reports besides Ready
NO_PRESSURE: Final[Mapping[str, str]] = {"MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}

#: ``status.nodeInfo`` of a node no real kubelet runs (the control plane's release; empty ids).
#: ``kubeProxyVersion`` is deprecated and empty, as the API server serves it; the official client's
#: V1NodeSystemInfo refuses a Node created with its status (a KWOK node) without it.
FAKE_NODE_INFO: Final[Mapping[str, str]] = {
    "architecture": "amd64",
    "operatingSystem": "linux",
    "kubeletVersion": "v1.37.2",
    "kubeProxyVersion": "",
    "containerRuntimeVersion": "fake://0",
    "kernelVersion": "",
    "osImage": "fake",
    "machineID": "",
    "systemUUID": "",
    "bootID": "",
}


def timestamp(moment: datetime | None = None) -> str:
    """A ``metav1.Time`` (``lastTransitionTime`` and friends) of `moment`, now by default."""
    return rfc3339(moment or datetime.now(UTC))


def fake_node_ip(index: int) -> str:
    """An InternalIP for the `index`-th fake node: 10.128.0.1 onwards, 250 to a /24."""
    return f"10.128.{index // 250}.{index % 250 + 1}"


def resource_list(mapping: Mapping[str, Quantity] | None = None, /, **named: Quantity) -> dict[str, str]:
    """Resource name -> quantity as the API writes it (upstream ``v1.ResourceList``), values as strings:
    `mapping` as it is, then `named` with Python names made resource names (``ephemeral_storage`` ->
    ``ephemeral-storage``, ``__`` -> ``/``)."""
    out = {name: str(value) for name, value in (mapping or {}).items()}
    for key, value in named.items():
        name = key if key in ("cpu", "memory", "pods") else key.replace("__", "/").replace("_", "-")
        out[name] = str(value)
    return out


class _Body:
    """What both builders share: the body, metadata, ``set`` and ``obj``."""

    body: dict[str, Any]

    def __init__(self, kind: str, name: str, spec: dict[str, Any]) -> None:
        self.body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "spec": spec}

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def spec(self) -> dict[str, Any]:
        return self.body["spec"]  # type: ignore[no-any-return]

    def _status(self) -> dict[str, Any]:
        return self.body.setdefault("status", {})  # type: ignore[no-any-return]

    def uid(self, uid: str) -> Self:
        self.body["metadata"]["uid"] = uid
        return self

    def label(self, **labels: str) -> Self:
        """Labels whose keys are Python names (``app="web"``); see ``labels`` for any key."""
        return self.labels(labels)

    def labels(self, labels: Mapping[str, str]) -> Self:
        """Merge `labels` into ``metadata.labels`` (created, empty, even when `labels` is)."""
        self.body["metadata"].setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self.body["metadata"].setdefault("annotations", {})[key] = value
        return self

    def set(self, path: str, value: Any) -> Self:
        """Any field no method covers, by dotted path: ``set("metadata.resourceVersion", "7")``."""
        *parents, last = path.split(".")
        target = self.body
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
        return self

    def obj(self) -> dict[str, Any]:
        """The body (a deep copy: the builder can go on)."""
        return copy.deepcopy(self.body)


class NodeBody(_Body):
    """A Node: labels, taints, resources, conditions and what else a kubelet reports."""

    def __init__(self, name: str) -> None:
        super().__init__("Node", name, {})

    # ---- metadata

    def hostname(self) -> Self:
        """The ``kubernetes.io/hostname`` label a kubelet sets: the node's name."""
        return self.labels({HOSTNAME_LABEL: self.name})

    def platform(self, os: str = "linux", arch: str | None = "amd64") -> Self:
        """The ``kubernetes.io/os`` and (unless None) ``kubernetes.io/arch`` labels."""
        return self.labels({OS_LABEL: os} if arch is None else {OS_LABEL: os, ARCH_LABEL: arch})

    def zone(self, zone: str, region: str = "") -> Self:
        """The topology labels: zone, and region when given."""
        return self.labels({ZONE_LABEL: zone, **({REGION_LABEL: region} if region else {})})

    # ---- spec

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self.spec.setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def taints(self, taints: Iterable[Mapping[str, Any]]) -> Self:
        """Append raw taints (``{"key": ..., "value": ..., "effect": ...}``); ``spec.taints`` exists afterwards."""
        self.spec.setdefault("taints", []).extend(dict(t) for t in taints)
        return self

    def unschedulable(self, value: bool = True) -> Self:
        """Cordoned (``spec.unschedulable``)."""
        self.spec["unschedulable"] = value
        return self

    # ---- status

    def capacity(self, resources: Mapping[str, Quantity] | None = None, /, **named: Quantity) -> Self:
        """``status.capacity`` and ``status.allocatable``, both these resources (``pods`` included)."""
        res = resource_list(resources, **named)
        self._status()["capacity"] = res
        self._status()["allocatable"] = dict(res)
        return self

    def allocatable(self, resources: Mapping[str, Quantity] | None = None, /, **named: Quantity) -> Self:
        """``status.allocatable`` alone (capacity stays as it is, or absent)."""
        self._status()["allocatable"] = resource_list(resources, **named)
        return self

    def condition(
        self,
        type_: str,
        status: str,
        *,
        reason: str | None = None,
        heartbeat: str | None = None,
        transition: str | None = None,
    ) -> Self:
        """A condition (``lastHeartbeatTime``, ``lastTransitionTime`` when given); it replaces one of its type."""
        condition = {"type": type_, "status": status}
        optional = {"reason": reason, "lastHeartbeatTime": heartbeat, "lastTransitionTime": transition}
        condition.update({k: v for k, v in optional.items() if v is not None})
        conditions = [c for c in self._status().get("conditions", []) if c["type"] != type_]
        self._status()["conditions"] = [*conditions, condition]
        return self

    def conditions(
        self,
        statuses: Mapping[str, str],
        *,
        reason: str | None = None,
        heartbeat: str | None = None,
        transition: str | None = None,
    ) -> Self:
        """One ``condition`` per type -> status; `reason` is a template (``"Fake{type}"``)."""
        for type_, status in statuses.items():
            why = None if reason is None else reason.format(type=type_)
            self.condition(type_, status, reason=why, heartbeat=heartbeat, transition=transition)
        return self

    def ready(self, status: str = "True", *, reason: str | None = None) -> Self:
        return self.condition("Ready", status, reason=reason)

    def no_conditions(self) -> Self:
        self._status()["conditions"] = []
        return self

    def address(self, address: str, type_: str = "InternalIP") -> Self:
        self._status().setdefault("addresses", []).append({"type": type_, "address": address})
        return self

    def image(self, size_bytes: int, *names: str) -> Self:
        """An image the node holds (``status.images``), under its `names`."""
        self._status().setdefault("images", []).append({"names": list(names), "sizeBytes": size_bytes})
        return self

    def node_info(self, info: Mapping[str, str] = FAKE_NODE_INFO, /, **fields: str) -> Self:
        """``status.nodeInfo``: `info` (a fake kubelet's by default) updated with `fields` (``osImage="..."``)."""
        self._status()["nodeInfo"] = {**info, **fields}
        return self

    # ---- out

    def manifest(self) -> dict[str, Any]:
        """The body without its status: what a create sends before the status subresource is patched."""
        body = self.obj()
        body.pop("status", None)
        return body

    def status(self) -> dict[str, Any]:
        """``{"status": ...}``: the patch of the status subresource."""
        return {"status": copy.deepcopy(self._status())}


class PodBody(_Body):
    """A Pod: containers and their resources, placement constraints, priority, status."""

    #: the image of a container added without one
    default_image: str = PAUSE_IMAGE

    def __init__(self, name: str, namespace: str | None = None) -> None:
        super().__init__("Pod", name, {"containers": []})
        if namespace is not None:
            self.body["metadata"]["namespace"] = namespace

    # ---- metadata

    def owner(self, kind: str, name: str, uid: str, controller: bool = True, *, api_version: str = "v1") -> Self:
        """An ownerReference (``api_version="apps/v1"`` for a ReplicaSet)."""
        reference = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller}
        self.body["metadata"].setdefault("ownerReferences", []).append(reference)
        return self

    def pod_group(self, name: str) -> Self:
        """Join the coscheduling PodGroup `name` (label ``scheduling.x-k8s.io/pod-group``)."""
        return self.labels({"scheduling.x-k8s.io/pod-group": name})

    def terminating(self, at: str = "2026-01-01T00:00:00Z") -> Self:
        self.body["metadata"]["deletionTimestamp"] = at
        return self

    # ---- containers

    def _container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self.spec["containers"]
        if not containers:
            containers.append({"name": "c0", "image": self.default_image})
        return containers[-1]

    def container(self, name: str | None = None, image: str | None = None, **requests: Quantity) -> Self:
        """Add a container (``c<n>``, the default image); keyword arguments are its requests."""
        c: dict[str, Any] = {"name": name or f"c{len(self.spec['containers'])}", "image": image or self.default_image}
        if requests:
            c["resources"] = {"requests": resource_list(**requests)}
        self.spec["containers"].append(c)
        return self

    def init_container(
        self,
        name: str | None = None,
        image: str = "busybox",
        *,
        restartable: bool = False,
        host_port: int = 0,
        **requests: Quantity,
    ) -> Self:
        """Add an init container (``init<n>``); ``restartable`` makes it a sidecar (``restartPolicy: Always``)."""
        c: dict[str, Any] = {"name": name or f"init{len(self.spec.get('initContainers', []))}", "image": image}
        if requests:
            c["resources"] = {"requests": resource_list(**requests)}
        if restartable:
            c["restartPolicy"] = "Always"
        if host_port:
            c["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
        self.spec.setdefault("initContainers", []).append(c)
        return self

    def req(self, requests: Mapping[str, Quantity] | None = None, /, **named: Quantity) -> Self:
        """Requests of the last container, merged (``container(**requests)`` adds none when there are none)."""
        self._container().setdefault("resources", {}).setdefault("requests", {}).update(
            resource_list(requests, **named)
        )
        return self

    def lim(self, limits: Mapping[str, Quantity] | None = None, /, **named: Quantity) -> Self:
        """Limits of the last container, merged."""
        self._container().setdefault("resources", {}).setdefault("limits", {}).update(resource_list(limits, **named))
        return self

    def image(self, image: str) -> Self:
        self._container()["image"] = image
        return self

    def port(self, container_port: int) -> Self:
        """A port the last container declares (no host port)."""
        self._container().setdefault("ports", []).append({"containerPort": container_port})
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> Self:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            p["hostIP"] = host_ip
        self._container().setdefault("ports", []).append(p)
        return self

    def overhead(self, **resources: Quantity) -> Self:
        self.spec["overhead"] = resource_list(**resources)
        return self

    def pod_requests(self, **requests: Quantity) -> Self:
        """Pod-level ``spec.resources.requests`` (PodLevelResources)."""
        self.spec.setdefault("resources", {}).setdefault("requests", {}).update(resource_list(**requests))
        return self

    def pod_limits(self, **limits: Quantity) -> Self:
        self.spec.setdefault("resources", {}).setdefault("limits", {}).update(resource_list(**limits))
        return self

    # ---- spec

    def scheduler(self, name: str) -> Self:
        self.spec["schedulerName"] = name
        return self

    def node(self, node_name: str) -> Self:
        """Bound to `node_name` (``spec.nodeName``)."""
        self.spec["nodeName"] = node_name
        return self

    def priority(self, value: int) -> Self:
        self.spec["priority"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self.spec["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> Self:
        self.spec["preemptionPolicy"] = policy
        return self

    def scheduling_group(self, pod_group: str) -> Self:
        """Join the ``scheduling.k8s.io`` PodGroup `pod_group` (``spec.schedulingGroup.podGroupName``)."""
        self.spec["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def automount_service_account_token(self, value: bool = False) -> Self:
        """False on a control plane without a token controller (a pod would wait for its token)."""
        self.spec["automountServiceAccountToken"] = value
        return self

    def termination_grace_period(self, seconds: int = 0) -> Self:
        """0 where no kubelet confirms a graceful delete."""
        self.spec["terminationGracePeriodSeconds"] = seconds
        return self

    def node_selector(self, **labels: str) -> Self:
        return self.node_selector_map(labels)

    def node_selector_map(self, labels: Mapping[str, str]) -> Self:
        self.spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def affinity(self, affinity: Mapping[str, Any]) -> Self:
        """A raw ``spec.affinity`` (the methods below add single terms)."""
        self.spec["affinity"] = dict(affinity)
        return self

    def node_affinity_in(self, key: str, *values: str) -> Self:
        """A required node affinity term ``key In values`` (ANDed into the first term)."""
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        req = na.setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{"matchExpressions": []}]}
        )
        req["nodeSelectorTerms"][0]["matchExpressions"].append({"key": key, "operator": "In", "values": list(values)})
        return self

    def required_node_terms(self, *terms: dict[str, Any]) -> Self:
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": list(terms)}
        return self

    def preferred_node_term(self, weight: int, *expressions: dict[str, Any]) -> Self:
        na = self.spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        na.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": weight, "preference": {"matchExpressions": list(expressions)}}
        )
        return self

    def pod_affinity(
        self,
        topology_key: str,
        labels: Mapping[str, str],
        *,
        anti: bool = False,
        weight: int | None = None,
        namespaces: list[str] | None = None,
    ) -> Self:
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
    ) -> Self:
        """A topologySpreadConstraint (upstream ``SpreadConstraint``); `selector` is a raw labelSelector or None."""
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

    def toleration(self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> Self:
        t: dict[str, Any] = {"operator": operator}
        if key:
            t["key"] = key
        if value:
            t["value"] = value
        if effect:
            t["effect"] = effect
        self.spec.setdefault("tolerations", []).append(t)
        return self

    def tolerations(self, tolerations: Iterable[Mapping[str, Any]]) -> Self:
        """Append raw tolerations (``tolerationSeconds`` and all)."""
        self.spec.setdefault("tolerations", []).extend(dict(t) for t in tolerations)
        return self

    def volume(self, volume: dict[str, Any]) -> Self:
        """A raw volume entry, e.g. ``{"name": "v", "gcePersistentDisk": {"pdName": "pd1"}}``."""
        self.spec.setdefault("volumes", []).append(volume)
        return self

    def pvc(self, claim: str, read_only: bool = False) -> Self:
        return self.volume({"name": claim, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}})

    # ---- status

    def phase(self, phase: str) -> Self:
        self._status()["phase"] = phase
        return self

    def nominated(self, node_name: str) -> Self:
        self._status()["nominatedNodeName"] = node_name
        return self

    def started(self, seconds: int) -> Self:
        """``status.startTime``, `seconds` after the epoch."""
        self._status()["startTime"] = timestamp(datetime.fromtimestamp(seconds, UTC))
        return self

    def condition(self, type_: str, status: str, reason: str = "") -> Self:
        self._status().setdefault("conditions", []).append({"type": type_, "status": status, "reason": reason})
        return self


def node_body(name: str) -> NodeBody:
    return NodeBody(name)


def pod_body(name: str, namespace: str | None = None) -> PodBody:
    return PodBody(name, namespace)
