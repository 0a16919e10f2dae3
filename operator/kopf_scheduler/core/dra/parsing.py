"""API bodies -> ``core/dra/objects.py``: ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice,
DeviceTaintRule, and a pod's claim references.

Each parser takes the dict the API server returns (or a YAML file holds) and raises
``core.model.parsing.ObjectError`` naming the field path of anything malformed, as ``core/model/parsing.py`` does.
The API server's defaulting is applied where users may leave it out in files (``allocationMode``
ExactCount, ``count`` 1; ``resourceSliceCount`` 1). ``allocation_body`` is the way back: an
``AllocationResult`` as the JSON PreBind writes.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ..model.fields import ObjectError, integer, list_at, object_at, without_managed_fields
from ..model.objects import NodeSelectorRequirement, NodeSelectorTerm, OwnerReference
from ..model.parsing import parse_node_selector_term
from ..model.parsing import parse_pod_claims as parse_pod_claims  # re-exported: it lives with parse_pod
from ..model.resources import QuantityError, parse_quantity
from .objects import (
    ALLOCATION_MODE_EXACT_COUNT,
    AllocatedDeviceStatus,
    AllocationResult,
    CapacityRequestPolicy,
    ClaimSpec,
    ConsumerReference,
    CounterSet,
    Device,
    DeviceAllocationConfiguration,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaimConfiguration,
    DeviceClass,
    DeviceCondition,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceTaintRule,
    DeviceTaintSelector,
    DeviceToleration,
    ExactRequest,
    OpaqueConfiguration,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

__all__ = [
    "allocation_body",
    "parse_allocation",
    "parse_device_class",
    "parse_device_taint_rule",
    "parse_pod_claims",
    "parse_resource_claim",
    "parse_resource_claim_template",
    "parse_resource_slice",
    "quantity_text",
]

_LIST_KINDS = ("ints", "bools", "strings", "versions")
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version", *_LIST_KINDS)


# --------------------------------------------------------------------------- helpers


def _str(body: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ObjectError(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _opt_str(body: Mapping[str, Any], key: str, where: str) -> str | None:
    return None if body.get(key) is None else _str(body, key, where)


def _bool(body: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ObjectError(f"{where}.{key}: expected true or false, got {value!r}")
    return value


def _quantity(value: Any, where: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise ObjectError(f"{where}: {exc}") from None


def _strs(body: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    out = []
    for i, v in enumerate(list_at(body, key, where)):
        if not isinstance(v, str):
            raise ObjectError(f"{where}.{key}[{i}]: expected a string, got {v!r}")
        out.append(v)
    return tuple(out)


def _meta(body: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ObjectError(f"{kind}: expected an object")
    return object_at(body, "metadata", kind)


def _node_selector(raw: Any, where: str) -> tuple[NodeSelectorTerm, ...] | None:
    """A ``v1.NodeSelector`` as its terms (ORed); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a node selector object")
    return tuple(
        parse_node_selector_term(t, f"{where}.nodeSelectorTerms[{i}]")
        for i, t in enumerate(list_at(raw, "nodeSelectorTerms", where))
    )


def _string_map(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in object_at(raw, key, where).items()}


# --------------------------------------------------------------------------- slices


def _attribute(raw: Any, where: str) -> DeviceAttribute:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an attribute object")
    present = [k for k in _ATTRIBUTE_KINDS if raw.get(k) is not None]
    if len(present) != 1:
        raise ObjectError(f"{where}: exactly one of {', '.join(_ATTRIBUTE_KINDS)} must be set")
    kind = present[0]
    value = raw[kind]
    many = kind in _LIST_KINDS
    scalar = kind[:-1] if many else kind
    values = value if many else [value]
    if not isinstance(values, list):
        raise ObjectError(f"{where}.{kind}: expected a list")
    for v in values:
        ok = (
            (scalar == "int" and isinstance(v, int) and not isinstance(v, bool))
            or (scalar == "bool" and isinstance(v, bool))
            or (scalar in ("string", "version") and isinstance(v, str))
        )
        if not ok:
            raise ObjectError(f"{where}.{kind}: expected {'a list of ' if many else ''}{scalar}, got {v!r}")
    return DeviceAttribute(kind, tuple(value) if many else value)


def _request_policy(raw: Any, where: str) -> CapacityRequestPolicy | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    default = raw.get("default")
    valid_range = raw.get("validRange")
    rng: tuple[Fraction | None, Fraction | None, Fraction | None] | None = None
    if valid_range is not None:
        w = f"{where}.validRange"
        if not isinstance(valid_range, Mapping):
            raise ObjectError(f"{w}: expected an object")
        rng = tuple(  # type: ignore[assignment]
            None if valid_range.get(k) is None else _quantity(valid_range[k], f"{w}.{k}")
            for k in ("min", "max", "step")
        )
    return CapacityRequestPolicy(
        default=None if default is None else _quantity(default, f"{where}.default"),
        valid_values=tuple(
            _quantity(v, f"{where}.validValues[{i}]") for i, v in enumerate(list_at(raw, "validValues", where))
        ),
        valid_range=rng,
    )


def _counters(raw: Mapping[str, Any], where: str) -> Mapping[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, c in object_at(raw, "counters", where).items():
        if not isinstance(c, Mapping):
            raise ObjectError(f"{where}.counters.{name}: expected {{value}}")
        out[str(name)] = _quantity(c.get("value"), f"{where}.counters.{name}.value")
    return out


def _taint(raw: Any, where: str) -> DeviceTaint:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a taint object")
    return DeviceTaint(_str(raw, "key", where), _str(raw, "value", where), _str(raw, "effect", where))


def _device(raw: Any, where: str) -> Device:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a device object")
    name = _str(raw, "name", where)
    if not name:
        raise ObjectError(f"{where}.name: required")
    attributes = {
        str(k): _attribute(v, f"{where}.attributes.{k}") for k, v in object_at(raw, "attributes", where).items()
    }
    capacity: dict[str, DeviceCapacity] = {}
    for k, v in object_at(raw, "capacity", where).items():
        w = f"{where}.capacity.{k}"
        if not isinstance(v, Mapping):
            raise ObjectError(f"{w}: expected {{value}}")
        capacity[str(k)] = DeviceCapacity(
            _quantity(v.get("value"), f"{w}.value"), _request_policy(v.get("requestPolicy"), f"{w}.requestPolicy")
        )
    consumes = []
    for i, c in enumerate(list_at(raw, "consumesCounters", where)):
        w = f"{where}.consumesCounters[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{w}: expected an object")
        consumes.append(
            DeviceCounterConsumption(_str(c, "counterSet", w), _counters(c, w), _strs(c, "compatibilityGroups", w))
        )
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        node_name=_opt_str(raw, "nodeName", where),
        node_selector=_node_selector(raw.get("nodeSelector"), f"{where}.nodeSelector"),
        all_nodes=bool(_bool(raw, "allNodes", where)),
        taints=tuple(_taint(t, f"{where}.taints[{i}]") for i, t in enumerate(list_at(raw, "taints", where))),
        binds_to_node=bool(_bool(raw, "bindsToNode", where)),
        binding_conditions=_strs(raw, "bindingConditions", where),
        binding_failure_conditions=_strs(raw, "bindingFailureConditions", where),
        allow_multiple_allocations=_bool(raw, "allowMultipleAllocations", where),
    )


def parse_resource_slice(body: Mapping[str, Any]) -> ResourceSlice:
    """A ResourceSlice from its API body; raises ``ObjectError`` naming the bad field."""
    meta = _meta(body, "resourceslice")
    name = _str(meta, "name", "resourceslice: metadata")
    where = f"resourceslice {name}: spec"
    spec = object_at(body, "spec", f"resourceslice {name}")
    pool = object_at(spec, "pool", where)
    return ResourceSlice(
        name=name,
        driver=_str(spec, "driver", where),
        pool=_str(pool, "name", f"{where}.pool"),
        generation=integer(pool.get("generation"), f"{where}.pool.generation"),
        resource_slice_count=integer(pool.get("resourceSliceCount"), f"{where}.pool.resourceSliceCount", 1),
        node_name=_opt_str(spec, "nodeName", where) or None,
        node_selector=_node_selector(spec.get("nodeSelector"), f"{where}.nodeSelector"),
        all_nodes=bool(_bool(spec, "allNodes", where)),
        per_device_node_selection=_bool(spec, "perDeviceNodeSelection", where),
        devices=tuple(_device(d, f"{where}.devices[{i}]") for i, d in enumerate(list_at(spec, "devices", where))),
        shared_counters=tuple(
            CounterSet(_str(c, "name", f"{where}.sharedCounters[{i}]"), _counters(c, f"{where}.sharedCounters[{i}]"))
            for i, c in enumerate(list_at(spec, "sharedCounters", where))
            if isinstance(c, Mapping)
        ),
        uid=_str(meta, "uid", "resourceslice: metadata"),
        resource_version=_str(meta, "resourceVersion", "resourceslice: metadata"),
    )


# --------------------------------------------------------------------------- classes and claims


def _selectors(raw: Mapping[str, Any], where: str) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for i, s in enumerate(list_at(raw, "selectors", where)):
        w = f"{where}.selectors[{i}]"
        if not isinstance(s, Mapping):
            raise ObjectError(f"{w}: expected a selector object")
        cel = s.get("cel")
        if cel is None:
            out.append(None)
            continue
        if not isinstance(cel, Mapping):
            raise ObjectError(f"{w}.cel: expected {{expression}}")
        out.append(_str(cel, "expression", f"{w}.cel"))
    return tuple(out)


def _opaque(raw: Mapping[str, Any], where: str) -> OpaqueConfiguration | None:
    opaque = raw.get("opaque")
    if opaque is None:
        return None
    if not isinstance(opaque, Mapping):
        raise ObjectError(f"{where}.opaque: expected {{driver, parameters}}")
    return OpaqueConfiguration(_str(opaque, "driver", f"{where}.opaque"), opaque.get("parameters"))


def parse_device_class(body: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass from its API body; raises ``ObjectError`` naming the bad field."""
    meta = _meta(body, "deviceclass")
    name = _str(meta, "name", "deviceclass: metadata")
    where = f"deviceclass {name}: spec"
    spec = object_at(body, "spec", f"deviceclass {name}")
    config = []
    for i, c in enumerate(list_at(spec, "config", where)):
        if not isinstance(c, Mapping):
            raise ObjectError(f"{where}.config[{i}]: expected an object")
        config.append(_opaque(c, f"{where}.config[{i}]"))
    return DeviceClass(
        name=name,
        selectors=_selectors(spec, where),
        config=tuple(config),
        extended_resource_name=_opt_str(spec, "extendedResourceName", where),
        uid=_str(meta, "uid", "deviceclass: metadata"),
        resource_version=_str(meta, "resourceVersion", "deviceclass: metadata"),
        created=_str(meta, "creationTimestamp", "deviceclass: metadata"),
    )


def parse_device_taint_rule(body: Mapping[str, Any]) -> DeviceTaintRule:
    """A DeviceTaintRule from its API body; raises ``ObjectError`` naming the bad field."""
    meta = _meta(body, "devicetaintrule")
    name = _str(meta, "name", "devicetaintrule: metadata")
    where = f"devicetaintrule {name}: spec"
    spec = object_at(body, "spec", f"devicetaintrule {name}")
    raw = spec.get("deviceSelector")
    selector = None
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise ObjectError(f"{where}.deviceSelector: expected an object")
        w = f"{where}.deviceSelector"
        selector = DeviceTaintSelector(_opt_str(raw, "driver", w), _opt_str(raw, "pool", w), _opt_str(raw, "device", w))
    taint = spec.get("taint")
    if not isinstance(taint, Mapping):
        raise ObjectError(f"{where}.taint: required")
    return DeviceTaintRule(
        name=name,
        selector=selector,
        taint=_taint(taint, f"{where}.taint"),
        uid=_str(meta, "uid", "devicetaintrule: metadata"),
        resource_version=_str(meta, "resourceVersion", "devicetaintrule: metadata"),
    )


def _toleration(raw: Any, where: str) -> DeviceToleration:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a toleration object")
    seconds = raw.get("tolerationSeconds")
    return DeviceToleration(
        key=_str(raw, "key", where),
        operator=_str(raw, "operator", where, "Equal"),
        value=_str(raw, "value", where),
        effect=_str(raw, "effect", where),
        toleration_seconds=None if seconds is None else integer(seconds, f"{where}.tolerationSeconds"),
    )


def _exact(raw: Any, where: str, *, sub: bool) -> ExactRequest:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    mode = _str(raw, "allocationMode", where) or ALLOCATION_MODE_EXACT_COUNT
    count = integer(raw.get("count"), f"{where}.count")
    if mode == ALLOCATION_MODE_EXACT_COUNT and count == 0:
        count = 1  # upstream SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest
    capacity = None
    cap = raw.get("capacity")
    if cap is not None:
        if not isinstance(cap, Mapping):
            raise ObjectError(f"{where}.capacity: expected {{requests}}")
        if cap.get("requests") is not None:
            capacity = {
                str(k): _quantity(v, f"{where}.capacity.requests.{k}")
                for k, v in object_at(cap, "requests", f"{where}.capacity").items()
            }
    return ExactRequest(
        device_class_name=_str(raw, "deviceClassName", where),
        selectors=_selectors(raw, where),
        allocation_mode=mode,
        count=count,
        admin_access=None if sub else _bool(raw, "adminAccess", where),
        tolerations=tuple(
            _toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(list_at(raw, "tolerations", where))
        ),
        capacity=capacity,
        derived_attributes=len(list_at(raw, "derivedAttributes", where)),
    )


def _claim_spec(spec: Mapping[str, Any], where: str) -> ClaimSpec:
    devices = object_at(spec, "devices", where)
    w = f"{where}.devices"
    requests = []
    for i, r in enumerate(list_at(devices, "requests", w)):
        rw = f"{w}.requests[{i}]"
        if not isinstance(r, Mapping):
            raise ObjectError(f"{rw}: expected a request object")
        exactly = r.get("exactly")
        subs = tuple(
            DeviceSubRequest(
                _str(s, "name", f"{rw}.firstAvailable[{j}]") if isinstance(s, Mapping) else "",
                _exact(s, f"{rw}.firstAvailable[{j}]", sub=True),
            )
            for j, s in enumerate(list_at(r, "firstAvailable", rw))
        )
        if exactly is not None and subs:
            raise ObjectError(f"{rw}: exactly one of exactly, firstAvailable must be set")
        requests.append(
            DeviceRequest(
                name=_str(r, "name", rw),
                exactly=None if exactly is None else _exact(exactly, f"{rw}.exactly", sub=False),
                first_available=subs,
            )
        )
    constraints = []
    for i, c in enumerate(list_at(devices, "constraints", w)):
        cw = f"{w}.constraints[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{cw}: expected a constraint object")
        constraints.append(
            DeviceConstraint(
                requests=_strs(c, "requests", cw),
                match_attribute=_opt_str(c, "matchAttribute", cw),
                distinct_attribute=_opt_str(c, "distinctAttribute", cw),
            )
        )
    config = []
    for i, c in enumerate(list_at(devices, "config", w)):
        cw = f"{w}.config[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{cw}: expected an object")
        config.append(DeviceClaimConfiguration(_strs(c, "requests", cw), _opaque(c, cw)))
    return ClaimSpec(tuple(requests), tuple(constraints), tuple(config))


def _owners(meta: Mapping[str, Any], where: str) -> tuple[OwnerReference, ...]:
    return tuple(
        OwnerReference(
            str(o.get("kind") or ""), str(o.get("name") or ""), str(o.get("uid") or ""), bool(o.get("controller"))
        )
        for o in list_at(meta, "ownerReferences", where)
        if isinstance(o, Mapping)
    )


def _result(raw: Any, where: str) -> DeviceRequestAllocationResult:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    consumed = raw.get("consumedCapacity")
    return DeviceRequestAllocationResult(
        request=_str(raw, "request", where),
        driver=_str(raw, "driver", where),
        pool=_str(raw, "pool", where),
        device=_str(raw, "device", where),
        admin_access=_bool(raw, "adminAccess", where),
        tolerations=tuple(
            _toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(list_at(raw, "tolerations", where))
        ),
        binding_conditions=_strs(raw, "bindingConditions", where),
        binding_failure_conditions=_strs(raw, "bindingFailureConditions", where),
        share_id=_opt_str(raw, "shareID", where),
        consumed_capacity=None
        if consumed is None
        else {
            str(k): _quantity(v, f"{where}.consumedCapacity.{k}")
            for k, v in object_at(raw, "consumedCapacity", where).items()
        },
    )


def parse_allocation(raw: Any, where: str = "status.allocation") -> AllocationResult | None:
    """A claim's ``status.allocation``; None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    devices = object_at(raw, "devices", where)
    w = f"{where}.devices"
    config = []
    for i, c in enumerate(list_at(devices, "config", w)):
        cw = f"{w}.config[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{cw}: expected an object")
        config.append(DeviceAllocationConfiguration(_str(c, "source", cw), _strs(c, "requests", cw), _opaque(c, cw)))
    return AllocationResult(
        results=tuple(_result(r, f"{w}.results[{i}]") for i, r in enumerate(list_at(devices, "results", w))),
        config=tuple(config),
        node_selector=_node_selector(raw.get("nodeSelector"), f"{where}.nodeSelector"),
        allocation_timestamp=_opt_str(raw, "allocationTimestamp", where),
    )


def _device_statuses(status: Mapping[str, Any], where: str) -> tuple[AllocatedDeviceStatus, ...]:
    out = []
    for i, d in enumerate(list_at(status, "devices", where)):
        w = f"{where}.devices[{i}]"
        if not isinstance(d, Mapping):
            raise ObjectError(f"{w}: expected an object")
        conditions = tuple(
            DeviceCondition(_str(c, "type", w), _str(c, "status", w), _str(c, "reason", w), _str(c, "message", w))
            for c in list_at(d, "conditions", w)
            if isinstance(c, Mapping)
        )
        out.append(
            AllocatedDeviceStatus(
                _str(d, "driver", w), _str(d, "pool", w), _str(d, "device", w), _opt_str(d, "shareID", w), conditions
            )
        )
    return tuple(out)


def parse_resource_claim(body: Mapping[str, Any]) -> ResourceClaim:
    """A ResourceClaim from its API body; raises ``ObjectError`` naming the bad field."""
    meta = _meta(body, "resourceclaim")
    ns = _str(meta, "namespace", "resourceclaim: metadata") or "default"
    name = _str(meta, "name", "resourceclaim: metadata")
    where = f"resourceclaim {ns}/{name}"
    status = object_at(body, "status", where)
    reserved = []
    for i, r in enumerate(list_at(status, "reservedFor", f"{where}: status")):
        w = f"{where}: status.reservedFor[{i}]"
        if not isinstance(r, Mapping):
            raise ObjectError(f"{w}: expected an object")
        reserved.append(
            ConsumerReference(_str(r, "resource", w), _str(r, "name", w), _str(r, "uid", w), _str(r, "apiGroup", w))
        )
    return ResourceClaim(
        namespace=ns,
        name=name,
        uid=_str(meta, "uid", f"{where}: metadata"),
        resource_version=_str(meta, "resourceVersion", f"{where}: metadata"),
        spec=_claim_spec(object_at(body, "spec", where), f"{where}: spec"),
        allocation=parse_allocation(status.get("allocation"), f"{where}: status.allocation"),
        reserved_for=tuple(reserved),
        devices=_device_statuses(status, f"{where}: status"),
        deleting=meta.get("deletionTimestamp") is not None,
        finalizers=_strs(meta, "finalizers", f"{where}: metadata"),
        owner_references=_owners(meta, f"{where}: metadata"),
        annotations=_string_map(meta, "annotations", f"{where}: metadata"),
        source=without_managed_fields(body, meta),
    )


def parse_resource_claim_template(body: Mapping[str, Any]) -> ResourceClaimTemplate:
    """A ResourceClaimTemplate from its API body; raises ``ObjectError`` naming the bad field."""
    meta = _meta(body, "resourceclaimtemplate")
    ns = _str(meta, "namespace", "resourceclaimtemplate: metadata") or "default"
    name = _str(meta, "name", "resourceclaimtemplate: metadata")
    where = f"resourceclaimtemplate {ns}/{name}: spec"
    spec = object_at(body, "spec", f"resourceclaimtemplate {ns}/{name}")
    tmeta = object_at(spec, "metadata", where)
    return ResourceClaimTemplate(
        namespace=ns,
        name=name,
        spec=_claim_spec(object_at(spec, "spec", where), f"{where}.spec"),
        labels=_string_map(tmeta, "labels", f"{where}.metadata"),
        annotations=_string_map(tmeta, "annotations", f"{where}.metadata"),
        uid=_str(meta, "uid", "resourceclaimtemplate: metadata"),
        source=without_managed_fields(body, meta),
    )


# --------------------------------------------------------------------------- pods


# ``parse_pod_claims`` lives in ``core/model/parsing.py`` (``parse_pod`` reads it) and is re-exported here.


# --------------------------------------------------------------------------- the way back


def quantity_text(q: Fraction) -> str:
    """A quantity as the API accepts it: an integer, or milli units, or a decimal exponent."""
    if q.denominator == 1:
        return str(q.numerator)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    nano = q * 10**9
    if nano.denominator == 1:
        return f"{nano.numerator}n"
    return str(float(q))  # not representable exactly: upstream rounds up to nano units too


def _requirement_body(r: NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def node_selector_body(terms: tuple[NodeSelectorTerm, ...]) -> dict[str, Any]:
    out = []
    for t in terms:
        term: dict[str, Any] = {}
        if t.match_expressions:
            term["matchExpressions"] = [_requirement_body(r) for r in t.match_expressions]
        if t.match_fields:
            term["matchFields"] = [_requirement_body(r) for r in t.match_fields]
        out.append(term)
    return {"nodeSelectorTerms": out}


def _toleration_body(t: DeviceToleration) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.key:
        out["key"] = t.key
    if t.operator:
        out["operator"] = t.operator
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _result_body(r: DeviceRequestAllocationResult) -> dict[str, Any]:
    out: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
    if r.admin_access is not None:
        out["adminAccess"] = r.admin_access
    if r.tolerations:
        out["tolerations"] = [_toleration_body(t) for t in r.tolerations]
    if r.binding_conditions:
        out["bindingConditions"] = list(r.binding_conditions)
    if r.binding_failure_conditions:
        out["bindingFailureConditions"] = list(r.binding_failure_conditions)
    if r.share_id is not None:
        out["shareID"] = r.share_id
    if r.consumed_capacity:
        out["consumedCapacity"] = {k: quantity_text(v) for k, v in r.consumed_capacity.items()}
    return out


def allocation_body(allocation: AllocationResult) -> dict[str, Any]:
    """``status.allocation`` as JSON, as PreBind writes it."""
    devices: dict[str, Any] = {}
    if allocation.results:
        devices["results"] = [_result_body(r) for r in allocation.results]
    if allocation.config:
        config = []
        for c in allocation.config:
            entry: dict[str, Any] = {"source": c.source}
            if c.requests:
                entry["requests"] = list(c.requests)
            if c.opaque is not None:
                opaque: dict[str, Any] = {"driver": c.opaque.driver}
                if c.opaque.parameters is not None:
                    opaque["parameters"] = c.opaque.parameters
                entry["opaque"] = opaque
            config.append(entry)
        devices["config"] = config
    out: dict[str, Any] = {"devices": devices}
    if allocation.node_selector is not None:
        out["nodeSelector"] = node_selector_body(allocation.node_selector)
    if allocation.allocation_timestamp is not None:
        out["allocationTimestamp"] = allocation.allocation_timestamp
    return out
