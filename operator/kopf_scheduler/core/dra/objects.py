"""The ``resource.k8s.io/v1`` objects DynamicResources reads, as frozen dataclasses.

Upstream ``k8s.io/api/resource/v1`` (types.go), trimmed to what the scheduler reads: ResourceClaim
(spec.devices and status.allocation / reservedFor / devices), ResourceClaimTemplate, DeviceClass,
ResourceSlice and DeviceTaintRule, plus a pod's ``spec.resourceClaims`` and ``status.resourceClaimStatuses``.
``core/dra/parsing.py`` builds them from API bodies, with the API server's defaults applied
(allocationMode ExactCount, count 1). Quantities are exact ``Fraction`` values (``core.model.resources``).

Naming: a *device ID* is the triple (driver, pool, device) upstream's ``DeviceID`` is; a request
reference is the request name, or ``request/subrequest`` for a ``firstAvailable`` entry.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, NamedTuple

from ..model.objects import EMPTY_LABELS, NodeSelectorTerm, OwnerReference

# a pod's claim references live with the Pod (``core/model/objects.py``); re-exported here
from ..model.objects import NO_POD_CLAIMS as NO_POD_CLAIMS
from ..model.objects import PodClaims as PodClaims
from ..model.objects import PodResourceClaim as PodResourceClaim

#: the finalizer the scheduler adds to a claim it allocates (upstream ``resourceapi.Finalizer``)
FINALIZER: Final = "resource.kubernetes.io/delete-protection"
#: the namespace label that allows admin access to devices (upstream ``DRAAdminNamespaceLabelKey``)
ADMIN_ACCESS_LABEL: Final = "resource.kubernetes.io/admin-access"
#: the annotation (value "true") on the claim the scheduler creates for a pod's extended resources
#: (upstream ``ExtendedResourceClaimAnnotation``, DRAExtendedResource)
EXTENDED_RESOURCE_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
#: a DeviceClass's implicit extended resource name is this prefix and the class name
#: (upstream ``ResourceDeviceClassPrefix``)
DEVICE_CLASS_RESOURCE_PREFIX: Final = "deviceclass.resource.kubernetes.io/"

ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"

TAINT_EFFECT_NONE: Final = "None"
TAINT_EFFECT_NO_SCHEDULE: Final = "NoSchedule"
TAINT_EFFECT_NO_EXECUTE: Final = "NoExecute"

TOLERATION_OP_EXISTS: Final = "Exists"
TOLERATION_OP_EQUAL: Final = "Equal"

CONFIG_SOURCE_CLASS: Final = "FromClass"
CONFIG_SOURCE_CLAIM: Final = "FromClaim"

#: upstream ``AllocationResultsMaxSize``: devices per claim
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
#: upstream ``FirstAvailableDeviceRequestMaxSize``: subrequests per request (DynamicResources' score)
FIRST_AVAILABLE_MAX_SIZE: Final = 8


class DeviceID(NamedTuple):
    """Upstream ``DeviceID``: the device's driver, pool and name; printed ``driver/pool/device``."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# --------------------------------------------------------------------------- slices


@dataclass(frozen=True, slots=True)
class DeviceAttribute:
    """One attribute value. ``kind`` is the API field that holds it: ``int``, ``bool``, ``string`` or
    ``version`` (a semantic version string), or a list kind ``ints``, ``bools``, ``strings``,
    ``versions`` (behind the alpha DRAListTypeAttributes gate upstream)."""

    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class CapacityRequestPolicy:
    """Upstream ``CapacityRequestPolicy``: how a request for this capacity is rounded and checked."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    #: (min, max, step) of ``validRange``, None when absent
    valid_range: tuple[Fraction | None, Fraction | None, Fraction | None] | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Fraction
    request_policy: CapacityRequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = TAINT_EFFECT_NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    #: "" means Equal (the API server defaults it)
    operator: str = TOLERATION_OP_EQUAL
    value: str = ""
    #: "" tolerates every effect
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        """Upstream ``resourceclaim.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", TOLERATION_OP_EQUAL):
            return self.value == taint.value
        return self.operator == TOLERATION_OP_EXISTS


@dataclass(frozen=True, slots=True)
class DeviceCounterConsumption:
    counter_set: str
    counters: Mapping[str, Fraction] = field(default_factory=dict)
    compatibility_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice (upstream ``Device``)."""

    name: str
    #: qualified name (``domain/id``, or ``id`` in the driver's domain) -> value
    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    #: per-device node selection (only with the slice's ``perDeviceNodeSelection``)
    node_name: str | None = None
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """Upstream ``ResourceSlice``: some devices of one pool of one driver, and where they are reachable.

    Exactly one of ``node_name``, ``node_selector``, ``all_nodes`` and ``per_device_node_selection``
    is set by a valid slice (a slice holding only ``shared_counters`` may set none)."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    resource_slice_count: int = 1
    node_name: str | None = None
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    #: None when absent (upstream tests ``!= nil`` in places)
    per_device_node_selection: bool | None = None
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class DeviceTaintSelector:
    """Upstream ``DeviceTaintSelector``: the devices a rule taints; None in a field selects any."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """Upstream ``DeviceTaintRule`` (DRADeviceTaintRules, GA in v1.37): one taint added to every device its
    selector matches, as if the driver had published it in the slice. No selector matches no device."""

    name: str
    selector: DeviceTaintSelector | None
    taint: DeviceTaint
    uid: str = ""
    resource_version: str = ""

    def selects(self, driver: str, pool: str, device: str) -> bool:
        s = self.selector
        return (
            s is not None
            and (s.driver is None or s.driver == driver)
            and (s.pool is None or s.pool == pool)
            and (s.device is None or s.device == device)
        )


# --------------------------------------------------------------------------- classes and claims


@dataclass(frozen=True, slots=True)
class OpaqueConfiguration:
    """Upstream ``DeviceConfiguration`` with its ``opaque`` member; ``parameters`` is kept as read."""

    driver: str
    parameters: Any = None


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    #: CEL expressions; None for a selector of an unknown kind (no ``cel``)
    selectors: tuple[str | None, ...] = ()
    #: opaque configurations (None for an entry of an unknown kind)
    config: tuple[OpaqueConfiguration | None, ...] = ()
    extended_resource_name: str | None = None
    uid: str = ""
    resource_version: str = ""
    #: ``metadata.creationTimestamp`` as written (RFC 3339, "" when absent): of two classes naming the
    #: same extended resource the newer serves it (upstream's extended resource cache)
    created: str = ""


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """What one request (``exactly``) or one subrequest (an entry of ``firstAvailable``) asks for."""

    device_class_name: str
    #: CEL expressions; None for a selector of an unknown kind (no ``cel``)
    selectors: tuple[str | None, ...] = ()
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    #: None when the field is absent (upstream distinguishes absent from false); never set on subrequests
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    #: ``capacity.requests``; None when absent
    capacity: Mapping[str, Fraction] | None = None
    #: how many ``derivedAttributes`` (alpha upstream; refused by its allocator as here)
    derived_attributes: int = 0


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    name: str
    spec: ExactRequest


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One entry of ``spec.devices.requests``: ``exactly`` or ``first_available`` (neither: unknown kind)."""

    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    #: the requests (or ``request/subrequest``) it applies to; empty: all of the claim's
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceClaimConfiguration:
    requests: tuple[str, ...] = ()
    opaque: OpaqueConfiguration | None = None


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """``ResourceClaimSpec``: the spec of a claim, and of the claims a template stamps out."""

    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    """``ResourceClaimConsumerReference``: who a claim is reserved for (a pod, or a PodGroup)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""

    def body(self) -> dict[str, str]:
        out = {"resource": self.resource, "name": self.name, "uid": self.uid}
        if self.api_group:
            out["apiGroup"] = self.api_group
        return out


@dataclass(frozen=True, slots=True)
class DeviceRequestAllocationResult:
    """One allocated device (upstream ``DeviceRequestAllocationResult``)."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Fraction] | None = None

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class DeviceAllocationConfiguration:
    source: str
    requests: tuple[str, ...]
    opaque: OpaqueConfiguration | None


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """Upstream ``AllocationResult``: the devices, their configuration and where the claim is usable."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()
    #: None: available on every node; else the terms (ORed) a node must match
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    #: RFC 3339, set by PreBind (upstream, with DRADeviceBindingConditions on)
    allocation_timestamp: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class AllocatedDeviceStatus:
    """An entry of ``status.devices``, written by drivers; only its conditions matter here."""

    driver: str
    pool: str
    device: str
    share_id: str | None = None
    conditions: tuple[DeviceCondition, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    spec: ClaimSpec = ClaimSpec()
    allocation: AllocationResult | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()
    devices: tuple[AllocatedDeviceStatus, ...] = ()
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    #: the body as read (without managedFields); shared, never mutated
    source: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_reserved_for(self, uid: str) -> bool:
        return any(r.uid == uid for r in self.reserved_for)

    def is_controlled_by(self, uid: str) -> bool:
        """Upstream ``metav1.IsControlledBy``: the controller owner reference has this uid."""
        return any(o.controller and o.uid == uid for o in self.owner_references)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = ClaimSpec()
    #: ``spec.metadata`` labels and annotations copied onto generated claims
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    uid: str = ""
    #: the body as read: ``simulate`` stamps claims from its ``spec`` (as the resourceclaim controller)
    source: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
