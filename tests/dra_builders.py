"""Builders of ``resource.k8s.io/v1`` bodies for the DynamicResources tests (after upstream's
allocatortesting helpers: ``class``, ``claimWithRequests``, ``request``, ``sliceWithDevices``, ``device``).

Each returns the API body (``dict``), parsed by ``core/dra/parsing.py`` where the test wants objects
(``claim_obj`` ...), so the tests exercise the real parsing::

    cls = device_class("gpu", driver="driver-a")
    c = claim("claim-0", request("req-0", "gpu", count=2))
    s = node_slice("slice-1", "node-1", "pool-1", "driver-a", device("device-1", capacity={"memory": "1Gi"}))
"""

from __future__ import annotations

from typing import Any

from kopf_scheduler.core.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.core.dra.parsing import parse_device_class, parse_resource_claim, parse_resource_slice

DRIVER_A = "driver-a"
DRIVER_B = "driver-b"


def cel(expression: str) -> dict[str, Any]:
    return {"cel": {"expression": expression}}


def device_class(name: str, driver: str = DRIVER_A, *selectors: str, config: list[Any] | None = None) -> dict[str, Any]:
    """Upstream ``class``: a class selecting the devices of `driver` (plus `selectors`)."""
    spec: dict[str, Any] = {"selectors": [cel(f'device.driver == "{driver}"'), *(cel(s) for s in selectors)]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def request(
    name: str,
    device_class_name: str,
    *selectors: str,
    count: int | None = None,
    mode: str | None = None,
    admin_access: bool | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if selectors:
        exactly["selectors"] = [cel(s) for s in selectors]
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if admin_access is not None:
        exactly["adminAccess"] = admin_access
    if tolerations is not None:
        exactly["tolerations"] = tolerations
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": exactly}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    """A request with ``firstAvailable`` subrequests (each built by ``request``: its ``exactly`` is taken)."""
    return {"name": name, "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subs]}


def claim(
    name: str,
    *requests: dict[str, Any],
    namespace: str = "default",
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    uid: str | None = None,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": "1"}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": devices},
    }


def allocated(
    body: dict[str, Any], *results: tuple[str, str, str, str], node: str | None = None, **status: Any
) -> dict[str, Any]:
    """The claim with ``status.allocation``: (request, driver, pool, device) per result, local to `node`."""
    allocation: dict[str, Any] = {
        "devices": {"results": [{"request": r, "driver": d, "pool": p, "device": x} for r, d, p, x in results]}
    }
    if node is not None:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        }
    return {**body, "status": {"allocation": allocation, **status}}


def device(
    name: str,
    *,
    attributes: dict[str, Any] | None = None,
    capacity: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A device: attributes as ``{"numa": 1, "model": "a100", "ok": True, "version": {"version": "1.0.0"}}``."""
    out: dict[str, Any] = {"name": name}
    if attributes:
        out["attributes"] = {k: _attribute(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    out.update(extra)
    return out


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def resource_slice(
    name: str,
    pool: str,
    *devices: dict[str, Any],
    driver: str = DRIVER_A,
    node: str | None = None,
    node_selector: dict[str, Any] | None = None,
    all_nodes: bool = False,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices),
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    if node_selector is not None:
        body["nodeSelector"] = node_selector
    if all_nodes:
        body["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def label_selector(key: str, value: str) -> dict[str, Any]:
    """Upstream ``nodeLabelSelector``: one term, ``key In [value]``."""
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}


def class_obj(body: dict[str, Any]) -> DeviceClass:
    return parse_device_class(body)


def claim_obj(body: dict[str, Any]) -> ResourceClaim:
    return parse_resource_claim(body)


def slice_obj(body: dict[str, Any]) -> ResourceSlice:
    return parse_resource_slice(body)
