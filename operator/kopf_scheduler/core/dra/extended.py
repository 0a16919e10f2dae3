"""Extended resources backed by DRA (DRAExtendedResource, GA and locked on in v1.37): the pure parts.

A pod that requests an extended resource some DeviceClass serves (its ``spec.extendedResourceName``,
or the implicit ``deviceclass.resource.kubernetes.io/<class>``; ``DraTracker.device_class_for``) gets
it from DRA devices on a node that does not advertise the resource. NodeResourcesFit leaves such a
resource to DynamicResources there (``delegated``), and DynamicResources allocates devices for it
through a claim of its own, one per pod, created in PreBind. Upstream:
``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go`` (the claim, its
requests and the pod's request mappings), ``noderesources/fit.go`` (``shouldDelegateResourceToDRA``)
and ``noderesources/resource_allocation.go`` (scoring such a resource by the node's devices).

- ``special_claim``: the claim that exists only in memory until PreBind creates it: named
  ``<extended-resources>`` (not a valid name: it never meets a real claim), with a temporary uid,
  ``generateName: <pod>-extended-resources-``, owned by the pod and annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"``; no requests until a node gives it some.
- ``requests_and_mappings``: the device requests one node's copy of that claim asks for, one per
  container and resource (``container-<i>-request-<j>``: ``i`` the container's index among init then
  regular containers, ``j`` the resource's index among the container's sorted request names), and
  which container's resource each serves. An init container first reuses the requests of the
  long-lived containers after it (sidecars and regular containers); the init containers' own
  requests collapse into the biggest one, as they run one after another.
- ``device_totals``: how many devices of a class a node has and how many are allocated (the
  scorers' allocatable and requested for such a resource); ``dra_scoring`` (PreScore) and
  ``dra_vectors`` (per node) put them into NodeResourcesFit's and NodeResourcesBalancedAllocation's
  resource vectors.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..model.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from .allocator import Allocator, node_matches
from .expressions import compile_selector
from .objects import (
    ALLOCATION_MODE_EXACT_COUNT,
    DEVICE_CLASS_RESOURCE_PREFIX,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    Device,
    DeviceClass,
    DeviceID,
    ResourceSlice,
)

if TYPE_CHECKING:
    from ..model.objects import Container, Node, Pod
    from .allocator import AllocatedState
    from .tracker import DraTracker


class ScoredResource(Protocol):
    """A resource a scorer weighs, as far as DRA looks at it: its name (``toolkit/scoring.py``'s ``ResourceSpec``;
    a protocol so that ``dra/`` stays below the toolkit that imports it)."""

    @property
    def name(self) -> str: ...


__all__ = [
    "SPECIAL_CLAIM_NAME",
    "DraScoring",
    "RequestMapping",
    "delegated",
    "device_totals",
    "dra_scoring",
    "dra_vectors",
    "is_dra_extended_resource_name",
    "maps_some_resource",
    "requests_and_mappings",
    "special_claim_body",
]

#: upstream ``specialClaimInMemName``: the name of the pod's extended-resource claim until PreBind creates it
SPECIAL_CLAIM_NAME: Final = "<extended-resources>"


def is_extended_resource_name(name: str) -> bool:
    """Upstream ``IsExtendedResourceName``: domain-prefixed, outside ``*kubernetes.io/``, not ``requests.*``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_dra_extended_resource_name(name: str) -> bool:
    """Upstream ``IsDRAExtendedResourceName``: an extended resource, or a class's implicit name."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_RESOURCE_PREFIX)


def maps_some_resource(requests: Mapping[str, int], tracker: DraTracker) -> bool:
    """Upstream ``hasDeviceClassMappedExtendedResource``: some requested (non-zero) extended resource is
    served by a DeviceClass."""
    return any(
        amount and is_dra_extended_resource_name(name) and tracker.device_class_for(name) is not None
        for name, amount in requests.items()
    )


def delegated(requests: Mapping[str, int], tracker: DraTracker) -> frozenset[str]:
    """The requested resources some DeviceClass serves: on a node whose allocatable has none of one of
    them, NodeResourcesFit leaves it to DRA (upstream ``shouldDelegateResourceToDRA``, whose node part
    is ``allocatable <= 0``)."""
    if not requests or not tracker.classes:
        return frozenset()
    return frozenset(n for n, q in requests.items() if q and tracker.device_class_for(n) is not None)


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """Upstream ``ContainerExtendedResourceRequest``: which request of the claim serves a container's resource."""

    container: str
    resource: str
    request: str

    def body(self) -> dict[str, str]:
        return {"containerName": self.container, "resourceName": self.resource, "requestName": self.request}


def special_claim_body(pod: Pod, uid: str, requests: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The pod's extended-resource claim as upstream's ``preFilterExtendedResources`` makes it in memory
    (``requests``: one node's, see ``requests_and_mappings``)."""
    devices: dict[str, Any] = {"requests": [dict(r) for r in requests]} if requests else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": SPECIAL_CLAIM_NAME,
            "uid": uid,
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": devices},
    }


@dataclass(slots=True)
class _Request:
    name: str
    device_class: str
    count: int

    def body(self) -> dict[str, Any]:
        exactly = {"deviceClassName": self.device_class, "allocationMode": ALLOCATION_MODE_EXACT_COUNT}
        return {"name": self.name, "exactly": {**exactly, "count": self.count}}


def _container_request(
    index: int, container: Container, resource: str, device_class: str, reusable: Sequence[_Request | None]
) -> tuple[_Request | None, list[RequestMapping]]:
    """Upstream ``createResourceRequestAndMappings``."""
    wanted = container.requests.scalar.get(resource, 0)
    if not wanted:
        return None, []
    mappings: list[RequestMapping] = []
    total = 0
    for r in reusable:
        if r is not None:
            total += r.count
            mappings.append(RequestMapping(container.name, resource, r.name))
            if total >= wanted:
                return None, mappings
    names = sorted(container.request_names)
    position = names.index(resource) if resource in names else 0
    request = _Request(f"container-{index}-request-{position}", device_class, wanted - total)
    mappings.append(RequestMapping(container.name, resource, request.name))
    return request, mappings


def requests_and_mappings(
    pod: Pod, resources: Mapping[str, int], tracker: DraTracker
) -> tuple[tuple[dict[str, Any], ...], tuple[RequestMapping, ...]]:
    """Upstream ``createRequestsAndMappings``: the device requests (API bodies, sorted by name) for the
    `resources` DRA serves on one node, and the containers' mappings to them (see the module docstring)."""
    containers = (*pod.init_containers, *pod.containers)
    n_init = len(pod.init_containers)
    long_lived = [i for i, c in enumerate(containers) if i >= n_init or c.restartable]
    short_lived = [i for i, c in enumerate(containers) if i < n_init and not c.restartable]
    requests: list[_Request] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        cls = tracker.device_class_for(resource)
        if cls is None:
            continue
        long_requests: list[_Request | None] = [None] * len(containers)
        long_mappings: list[RequestMapping] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, ())
            long_requests[i] = request
            long_mappings += found
        biggest: _Request | None = None
        short_names: set[str] = set()
        short_mappings: list[RequestMapping] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, cls.name, long_requests[i:])
            if request is not None:
                short_names.add(request.name)
                if biggest is None or biggest.count < request.count:
                    biggest = request
            short_mappings += found
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest.name)
            short_mappings = [
                RequestMapping(m.container, m.resource, biggest.name) if m.request in short_names else m
                for m in short_mappings
            ]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r.name)
    return tuple(r.body() for r in requests), tuple(mappings)


# --------------------------------------------------------------------------- scoring


def _slice_devices(s: ResourceSlice, node: Node, matches: Callable[..., bool]) -> Sequence[Device]:
    """The devices of `s` reachable from `node`, as upstream's ``calculateDRAResourceTotals`` picks them."""
    if s.per_device_node_selection:
        out = []
        for d in s.devices:
            if d.all_nodes or (d.node_name and d.node_name == node.name):
                out.append(d)
            elif d.node_selector is not None and matches(node, d.node_name, d.all_nodes, d.node_selector):
                out.append(d)
        return out
    if not s.all_nodes and s.node_name != node.name and s.node_selector is not None:
        if not matches(node, s.node_name, s.all_nodes, s.node_selector):
            return ()
    elif not s.all_nodes and s.node_name and s.node_name != node.name:
        return ()
    return s.devices


def device_totals(
    node: Node,
    device_class: DeviceClass,
    allocated: AllocatedState,
    slices: Sequence[ResourceSlice],
    verdict: Callable[[str, str, Device], bool | str],
) -> tuple[int, int]:
    """Upstream ``calculateDRAResourceTotals``: (devices of the class reachable from `node`, how many of them
    are allocated), over every slice as listed (no pool generations); (0, 0) when a selector fails on a
    device (upstream logs the error and scores the resource as absent). `verdict(expression, driver,
    device)` is a CEL selector's answer, or its error's text."""
    total = used = 0
    for s in slices:
        for d in _slice_devices(s, node, node_matches):
            ok = True
            for expression in device_class.selectors:
                if expression is None:
                    continue
                answer = verdict(expression, s.driver, d)
                if isinstance(answer, str):
                    return 0, 0
                if not answer:
                    ok = False
                    break
            if ok:
                total += 1
                used += allocated.is_allocated(DeviceID(s.driver, s.pool, d.name))
    return total, used


@dataclass(frozen=True, slots=True)
class DraScoring:
    """PreScore's DRA part (upstream ``draPreScoreState``): per scored resource a DeviceClass serves,
    the class; and the allocated devices and the slices (DeviceTaintRules applied)."""

    classes: tuple[DeviceClass | None, ...]
    allocated: AllocatedState
    slices: tuple[ResourceSlice, ...]
    verdict: Callable[[str, str, Device], bool | str]


def dra_scoring(specs: Sequence[ScoredResource], tracker: DraTracker) -> DraScoring | None:
    """Upstream ``getDRAPreScoredParams``: None unless a scored resource is an extended resource some
    DeviceClass serves; else what scoring such resources by devices needs."""
    if not tracker.classes or not any(
        is_dra_extended_resource_name(r.name) and tracker.device_class_for(r.name) is not None for r in specs
    ):
        return None
    engine = Allocator(classes={}, slices=())

    def verdict(expression: str, driver: str, device: Device) -> bool | str:
        compiled = compile_selector(expression)
        if compiled.error is not None:
            return compiled.error
        return engine.device_verdict(expression, driver, device)

    return DraScoring(
        tuple(tracker.device_class_for(r.name) for r in specs),
        tracker.allocated_state(),
        tuple(tracker.patched_slices()),
        verdict,
    )


def dra_vectors(
    dra: DraScoring,
    specs: Sequence[ScoredResource],
    pod_requests: Sequence[int],
    node: Node,
    requested: list[int],
    allocatable: list[int],
) -> None:
    """Upstream ``calculateResourceAllocatableRequest``'s DRA branch, in place: a scored resource a class
    serves, that the pod requests and the node's allocatable lacks, counts the node's devices of the class."""
    for i, (spec, cls) in enumerate(zip(specs, dra.classes)):
        if cls is None or spec.name in (CPU, MEMORY, EPHEMERAL_STORAGE) or not pod_requests[i] or allocatable[i]:
            continue
        total, used = device_totals(node, cls, dra.allocated, dra.slices, dra.verdict)
        if total > 0:
            allocatable[i], requested[i] = total, used + pod_requests[i]
