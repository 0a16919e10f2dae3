"""The structured-parameters allocator: which devices satisfy a pod's unallocated claims on one node.

Follows upstream ``k8s.io/dynamic-resource-allocation/structured`` v0.37.2, the *incubating* variant
(``internal/incubating``: allocator_incubating.go, pools_incubating.go, constraint.go,
consumable_capacity.go), which is the one kube-scheduler v1.37 runs with its default feature gates
(DRAConsumableCapacity, DRADeviceBindingConditions and DRAFractionalCapacityRange are on, and only
"incubating" supports them). The same search, in the same order, so the same devices are chosen:

- pools: the slices of the node (``nodeName``) and the shared ones (``nodeSelector`` / ``allNodes`` /
  ``perDeviceNodeSelection``) that match the node, grouped by (driver, pool); only the newest
  generation of a pool counts; a pool with fewer slices than ``resourceSliceCount`` is incomplete
  (nothing is allocated from it, and an ``All`` request fails), one with a duplicate device name or a
  bad counter reference is invalid; pools sorted by driver then pool name, those with binding
  conditions last; slices sorted by name; devices in slice order;
- a depth-first search over claims, then requests, then devices: the first full solution wins;
  within one request devices are taken in increasing position (combinations, not permutations);
  ``firstAvailable`` subrequests are tried in order; ``All`` takes every matching device of the
  node's pools; at most 32 devices per claim;
- a device is a candidate when it is not allocated (to any claim in the cluster, in flight from an
  earlier pod's Reserve, or earlier in this search) unless the request has admin access, its class's
  and the request's CEL selectors match (``core/dra/expressions.py``), its taints are tolerated, the
  claim's ``matchAttribute`` / ``distinctAttribute`` constraints hold, its pool's shared counters
  have room (partitionable devices), and its capacity covers the request's ``capacity.requests``
  (consumable capacity; devices with ``allowMultipleAllocations`` are shared, each share with its
  own ``shareID``);
- the result per claim: the devices (with admin access, tolerations, binding conditions, share
  and consumed capacity), the class and claim configuration for them, and the node selector.

Outcomes: a list of ``AllocationResult`` (one per claim, in order), None when the claims do not fit on
the node, ``NodeAllocationError`` (upstream's ErrFailedAllocationOnNode: only this node failed, with
the reason "invalid resource pools were encountered"), or ``AllocationError`` for a problem with a
claim or class that no node can fix (a CEL error, an unknown class, a constraint an ``All`` request
violates...). Messages are upstream's, whole.

Not supported, refused with an ``AllocationError`` naming the feature as upstream's stable and
incubating variants do when a gate is off: derived attributes (alpha), compatibility groups (alpha:
slices using them are ignored, as upstream does with the gate off), list-type attributes in
``matchAttribute`` (alpha). The slices are given with DeviceTaintRules applied (``DraTracker.patched_slices``).

``allocate`` may be given ``expired``, a function of nothing that says when the time allowed is up
(upstream's context deadline, DRASchedulerFilterTimeout): it is asked at every step of the search, as
upstream checks its context in every ``allocateOne``, and ``AllocationTimeout`` ends the search.

Pure: no I/O, no clock of its own; CEL results are cached per allocator (one pod's cycle) across nodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final

from ..model.objects import NodeSelectorRequirement, NodeSelectorTerm
from .expressions import CelError, DeviceInput, compile_selector, device_input
from .objects import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_RESULTS_MAX_SIZE,
    CONFIG_SOURCE_CLAIM,
    CONFIG_SOURCE_CLASS,
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    AllocationResult,
    CounterSet,
    Device,
    DeviceAllocationConfiguration,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceToleration,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)

if TYPE_CHECKING:
    from ..model.objects import Node

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "Features",
    "NodeAllocationError",
    "node_matches",
]

#: ``structured.ErrFailedAllocationOnNode`` wrapped by ``Allocate`` when invalid pools were met
ERR_INVALID_POOLS: Final = "invalid resource pools were encountered"


class AllocationError(Exception):
    """Upstream ``Allocate``'s error: a problem of the claims or classes; the pod's attempt is an error."""


class AllocationTimeout(AllocationError):
    """Upstream's context deadline during ``Allocate`` ("filter operation aborted: context deadline exceeded")."""


class NodeAllocationError(AllocationError):
    """Upstream ``ErrFailedAllocationOnNode``: only this node failed (the pod is unschedulable there)."""


class _MaxSizeExceeded(Exception):
    """Upstream ``errAllocationResultMaxSizeExceeded``: backtrack further."""


@dataclass(frozen=True, slots=True)
class Features:
    """Upstream ``structured.Features``; the defaults are kube-scheduler v1.37's default gates."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    #: DRADeviceBindingConditions and DRAResourceClaimDeviceStatus
    device_binding_and_status: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = True


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Upstream ``AllocatedState``: what claims (allocated, or in flight) hold in the cluster."""

    devices: frozenset[DeviceID] = frozenset()
    #: (device, shareID) of shared allocations (allowMultipleAllocations devices)
    shared: frozenset[tuple[DeviceID, str]] = frozenset()
    #: capacity consumed on shared devices, summed over their shares
    capacity: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)

    def is_allocated(self, device: DeviceID) -> bool:
        """Upstream ``IsDeviceAllocated``."""
        return device in self.devices or device in self.capacity or any(d == device for d, _ in self.shared)

    def capacity_in_use(self, device: DeviceID) -> bool:
        return device in self.capacity or any(d == device for d, _ in self.shared)


# --------------------------------------------------------------------------- node matching


def node_matches(
    node: Node | None, node_name: str | None, all_nodes: bool, selector: tuple[NodeSelectorTerm, ...] | None
) -> bool:
    """Upstream ``NodeMatches``: a node name, all nodes, or a node selector (terms ORed)."""
    if node_name:
        return node is not None and node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node is not None and any(t.matches(node) for t in selector)
    return False


# --------------------------------------------------------------------------- pools


@dataclass(slots=True)
class Pool:
    """Upstream ``Pool``: one (driver, pool) as seen from one node."""

    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)
    slices_not_targeting_node: list[ResourceSlice] = field(default_factory=list)
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)

    @property
    def id(self) -> tuple[str, str]:
        return self.driver, self.pool

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


def _uses_compatibility_groups(s: ResourceSlice) -> bool:
    return any(c.compatibility_groups for d in s.devices for c in d.consumes_counters)


def _slice_relevant(s: ResourceSlice, node: Node) -> bool | None:
    """Whether the slice's devices are reachable from the node; None: it says nothing known."""
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return None


def gather_pools(
    slices_for_node: Iterable[ResourceSlice], node: Node, features: Features, all_slices: Sequence[ResourceSlice]
) -> list[Pool]:
    """Upstream ``GatherPools`` (incubating)."""
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices_for_node:
        if not features.partitionable_devices and (s.per_device_node_selection is not None or s.shared_counters):
            continue
        if _uses_compatibility_groups(s):  # DRADeviceCompatibilityGroups is alpha, off
            continue
        if not _slice_relevant(s, node):
            continue
        key = (s.driver, s.pool)
        have = pools.get(key)
        if have is None or s.generation > have[0].generation:
            pools[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)
    result: list[Pool] = []
    with_binding_conditions: list[Pool] = []
    for (driver, name), for_pool in pools.items():
        count = for_pool[0].resource_slice_count
        all_for_pool: list[ResourceSlice] | None = None
        if len(for_pool) != count:
            obsolete, all_for_pool = _slices_in_pool(all_slices, driver, name, for_pool[0].generation)
            if obsolete:
                continue
            all_for_pool = [s for s in all_for_pool if not _uses_compatibility_groups(s)]
            if len(all_for_pool) != count:
                result.append(Pool(driver, name, incomplete=True))
                continue
        pool = _build_pool(driver, name, for_pool, features, all_for_pool)
        if any(d.binding_conditions for s in pool.slices for d in s.devices):
            with_binding_conditions.append(pool)
        else:
            result.append(pool)
    result.sort(key=lambda p: p.id)
    with_binding_conditions.sort(key=lambda p: p.id)
    return result + with_binding_conditions


def _slices_in_pool(
    slices: Sequence[ResourceSlice], driver: str, pool: str, generation: int
) -> tuple[bool, list[ResourceSlice]]:
    """Upstream ``checkSlicesInPool``: (obsolete, every slice of the pool with this generation)."""
    out = []
    for s in slices:
        if s.driver != driver or s.pool != pool:
            continue
        if s.generation == generation:
            out.append(s)
        elif s.generation > generation:
            return True, []
    return False, out


def _build_pool(
    driver: str, name: str, slices: list[ResourceSlice], features: Features, all_for_pool: list[ResourceSlice] | None
) -> Pool:
    """Upstream ``buildPool`` (incubating)."""
    slices = sorted(slices, key=lambda s: s.name)
    device_slices: list[ResourceSlice] = []
    counter_slices: list[ResourceSlice] = []
    not_targeting: list[ResourceSlice] = []
    for s in slices:
        (counter_slices if features.partitionable_devices and s.shared_counters else device_slices).append(s)
    if all_for_pool is not None and len(slices) < len(all_for_pool):
        seen = {s.name for s in slices}
        for s in all_for_pool:
            if s.name in seen:
                continue
            (counter_slices if features.partitionable_devices and s.shared_counters else not_targeting).append(s)
    names: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in names:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}")
            names.add(d.name)
    if not features.partitionable_devices:
        return Pool(driver, name, slices=device_slices)
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate counter set name {cs.name}")
            counter_sets[cs.name] = cs
    for group in (device_slices, not_targeting):
        reason = _counter_reference_error(counter_sets, group)
        if reason:
            return Pool(driver, name, invalid=True, invalid_reason=reason)
    return Pool(driver, name, slices=device_slices, slices_not_targeting_node=not_targeting, counter_sets=counter_sets)


def _counter_reference_error(counter_sets: Mapping[str, CounterSet], slices: Iterable[ResourceSlice]) -> str:
    """Upstream ``validateDeviceCounterConsumption``: "" when every reference resolves."""
    for s in slices:
        for d in s.devices:
            for c in d.consumes_counters:
                cs = counter_sets.get(c.counter_set)
                if cs is None:
                    return f"counter set {c.counter_set} not found"
                for counter in c.counters:
                    if counter not in cs.counters:
                        return f"counter {counter} not found in counter set {cs.name}"
    return ""


# --------------------------------------------------------------------------- consumable capacity


class _CapacityError(Exception):
    pass


_NOT_REPRESENTABLE: Final = "capacity request cannot be represented in the device's range arithmetic"
_INT64_MAX: Final = 2**63 - 1


def _ceil(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)


def _exact_milli(q: Fraction) -> int | None:
    """Upstream ``safeMilliValue``: the value in milli units when that is lossless."""
    m = q * 1000
    return m.numerator if m.denominator == 1 and abs(m.numerator) <= _INT64_MAX else None


def _use_milli(rng: tuple[Fraction | None, Fraction | None, Fraction | None], fractional: bool) -> bool:
    if not fractional:
        return False
    for i, q in enumerate(rng):
        if q is None:
            continue
        milli = _exact_milli(q)
        if milli is None:
            return False
        if i == 2 and milli < 1:
            return False
    return True


def _round_up_range(
    requested: Fraction, rng: tuple[Fraction | None, Fraction | None, Fraction | None], fractional: bool
) -> Fraction:
    low, _, step = rng
    assert low is not None
    if requested < low:
        return low
    if step is None:
        return requested
    if _use_milli(rng, fractional):
        req = _exact_milli(requested)
        if req is None:
            raise _CapacityError(f"{_NOT_REPRESENTABLE}: request {requested} is not a representable milli value")
        step_m, low_m = _exact_milli(step) or 1, _exact_milli(low) or 0
        n = -((low_m - req) // step_m)
        return Fraction(low_m + step_m * n, 1000)
    if requested > _INT64_MAX:
        raise _CapacityError(f"{_NOT_REPRESENTABLE}: request {requested} exceeds MaxInt64")
    req_i, step_i, low_i = _ceil(requested), _ceil(step), _ceil(low)
    n = -((low_i - req_i) // step_i)
    if low_i >= 0 and n > (_INT64_MAX - low_i) // step_i:
        raise _CapacityError(f"{_NOT_REPRESENTABLE}: rounding request {requested} up to the next step passes MaxInt64")
    return Fraction(low_i + step_i * n)


def _consumed(requested: Fraction | None, cap: DeviceCapacity, fractional: bool) -> Fraction:
    """Upstream ``calculateConsumedCapacity``."""
    policy = cap.request_policy
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range[0] is not None:
        return _round_up_range(requested, policy.valid_range, fractional)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def _violates_policy(value: Fraction, cap: DeviceCapacity, fractional: bool) -> bool:
    policy = cap.request_policy
    if policy is None:
        return False
    if policy.default is not None and value == policy.default:
        return False
    if policy.valid_range is not None:
        low, high, step = policy.valid_range
        if high is not None and value > high:
            return True
        if step is not None:
            if _use_milli(policy.valid_range, fractional):
                req = _exact_milli(value)
                if req is None:
                    return True
                low_m = (_exact_milli(low) or 0) if low is not None else 0
                return (req - low_m) % (_exact_milli(step) or 1) != 0
            low_i = _ceil(low) if low is not None else 0
            return (_ceil(value) - low_i) % _ceil(step) != 0
        return False
    if policy.valid_values:
        return value not in policy.valid_values
    return False


def capacity_fits(
    current: Mapping[str, Fraction],
    requests: Mapping[str, Fraction] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocating: Mapping[str, Fraction] | None,
    fractional: bool,
) -> bool:
    """Upstream ``CmpRequestOverCapacity``; raises ``_CapacityError`` for an unrepresentable request."""
    if requests and any(name not in capacity for name in requests):
        return False
    consumed: dict[str, Fraction] = {}
    for name, cap in capacity.items():
        try:
            value = _consumed(requests.get(name) if requests else None, cap, fractional)
        except _CapacityError as exc:
            raise _CapacityError(f'capacity "{name}": {exc}') from None
        if value < 0:
            raise _CapacityError(f'capacity "{name}": capacity value is negative')
        consumed[name] = value
    for name, cap in capacity.items():
        value = consumed[name]
        if _violates_policy(value, cap, fractional):
            return False
        total = current.get(name, Fraction(0)) + value + (allocating.get(name, Fraction(0)) if allocating else 0)
        if total > cap.value:
            return False
    return True


# --------------------------------------------------------------------------- constraints


def _lookup_attribute(device: Device, device_id: DeviceID, name: str) -> DeviceAttribute | None:
    """Upstream ``lookupAttribute``: the fully qualified name, or the bare id in the driver's domain."""
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id.driver:
        return None
    return device.attributes.get(ident)


def _constraint_applies(requests: frozenset[str], request: str, sub: str) -> bool:
    if not requests:
        return True
    if not sub:
        return request in requests
    return request in requests or f"{request}/{sub}" in requests


_SCALAR_KINDS: Final = ("int", "bool", "string", "version")


class _MatchAttribute:
    """Upstream ``matchAttributeConstraint``: every device has the attribute, with one value."""

    __slots__ = ("requests", "name", "value", "count")

    def __init__(self, requests: frozenset[str], name: str) -> None:
        self.requests, self.name = requests, name
        self.value: DeviceAttribute | None = None
        self.count = 0

    def add(self, request: str, sub: str, device: Device, device_id: DeviceID) -> bool:
        if not _constraint_applies(self.requests, request, sub):
            return True
        attr = _lookup_attribute(device, device_id, self.name)
        if attr is None:
            return False
        if self.count == 0:
            self.value, self.count = attr, 1
            return True
        if attr.kind not in _SCALAR_KINDS:
            return False  # an unknown value type (list attributes: alpha) cannot match
        assert self.value is not None
        if self.value.kind != attr.kind or self.value.value != attr.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub: str, device: Device, device_id: DeviceID) -> None:
        if _constraint_applies(self.requests, request, sub):
            self.count -= 1


class _DistinctAttribute:
    """Upstream ``distinctAttributeConstraint``: every device has the attribute, all values different."""

    __slots__ = ("requests", "name", "values")

    def __init__(self, requests: frozenset[str], name: str) -> None:
        self.requests, self.name = requests, name
        self.values: list[DeviceAttribute] = []

    def add(self, request: str, sub: str, device: Device, device_id: DeviceID) -> bool:
        if not _constraint_applies(self.requests, request, sub):
            return True
        attr = _lookup_attribute(device, device_id, self.name)
        if attr is None:
            return False
        if attr.kind not in _SCALAR_KINDS and self.values:
            return False
        if any(v.kind == attr.kind and v.value == attr.value for v in self.values):
            return False
        self.values.append(attr)
        return True

    def remove(self, request: str, sub: str, device: Device, device_id: DeviceID) -> None:
        if _constraint_applies(self.requests, request, sub):
            self.values.pop()


_Constraint = _MatchAttribute | _DistinctAttribute


# --------------------------------------------------------------------------- the search


@dataclass(slots=True)
class _RequestData:
    """Upstream ``requestData``: one request, or one subrequest of a ``firstAvailable`` request."""

    name: str
    spec: ExactRequest
    #: the parent request's name for a subrequest
    parent: str | None
    device_class: DeviceClass | None = None
    num_devices: int = 0
    selected_sub: int = 0
    all_devices: list[_Candidate] = field(default_factory=list)

    @property
    def admin_access(self) -> bool:
        return bool(self.spec.admin_access) and self.parent is None

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent is not None else self.name


@dataclass(frozen=True, slots=True)
class _Candidate:
    id: DeviceID
    device: Device
    slice: ResourceSlice
    pool: Pool


@dataclass(slots=True)
class _Picked:
    """Upstream ``internalDeviceResult``."""

    request: str
    parent: str
    candidate: _Candidate
    admin_access: bool | None
    share_id: str | None = None
    consumed: Mapping[str, Fraction] | None = None

    @property
    def request_name(self) -> str:
        return f"{self.parent}/{self.request}" if self.parent else self.request


@dataclass(slots=True)
class _Undo:
    """Upstream ``deviceRollbackState``."""

    counters: bool = False
    constraints: int = 0
    marked: bool = False
    capacity: Mapping[str, Fraction] | None = None
    capacity_existed: bool = False
    result_len: int = -1


def _claim_name(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}"


class Allocator:
    """Upstream ``structured.Allocator`` for one pod's cycle: the cluster's slices, classes and
    allocated devices, fixed; ``allocate`` for each node. Reuse it across the nodes of one cycle
    (CEL verdicts and available counters are kept across them, as upstream keeps the latter)."""

    def __init__(
        self,
        *,
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        allocated: AllocatedState = AllocatedState(),
        features: Features = Features(),
        share_ids: Callable[[], str] | None = None,
    ) -> None:
        self.classes = classes
        self.features = features
        self.allocated = allocated
        self.all_slices = slices
        self.slices_on_node: dict[str, list[ResourceSlice]] = {}
        self.slices_shared: list[ResourceSlice] = []
        for s in slices:
            if s.node_name:
                self.slices_on_node.setdefault(s.node_name, []).append(s)
            else:
                self.slices_shared.append(s)
        self._share_ids = share_ids or _counting_share_ids()
        self._available_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        #: (selector text, id(device)) -> verdict or runtime error text; devices are kept alive by `slices`
        self._cel: dict[tuple[str, int], bool | str] = {}
        self._inputs: dict[int, DeviceInput | str] = {}
        #: allocateOne calls of the last ``allocate`` (upstream's Stats.NumAllocateOneInvocations)
        self.steps = 0

    def allocate(
        self, node: Node, claims: Sequence[ResourceClaim], *, expired: Callable[[], bool] | None = None
    ) -> list[AllocationResult] | None:
        """Upstream ``Allocate``: one result per claim, or None when they cannot all be allocated here;
        ``AllocationTimeout`` once `expired` says so (see the module docstring)."""
        return _Run(self, node, claims, expired).run()

    # --- shared across nodes

    def device_verdict(self, expression: str, driver: str, device: Device) -> bool | str:
        """A CEL selector on a device: the verdict, or the runtime error's text."""
        key = (expression, id(device))
        verdict = self._cel.get(key)
        if verdict is None:
            selector = compile_selector(expression)
            data = self._inputs.get(id(device))
            if data is None:
                try:
                    data = device_input(driver, device)
                except CelError as exc:
                    data = str(exc)
                self._inputs[id(device)] = data
            if isinstance(data, str):
                verdict = data
            else:
                try:
                    verdict = selector.matches(data)
                except CelError as exc:
                    verdict = str(exc)
            self._cel[key] = verdict
        return verdict

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        """The pool's counters less what allocated devices consume (computed once per pool, as upstream)."""
        have = self._available_counters.get(pool.id)
        if have is None:
            have = {name: dict(cs.counters) for name, cs in pool.counter_sets.items()}
            for group in (pool.slices, pool.slices_not_targeting_node):
                for s in group:
                    for d in s.devices:
                        if not self.allocated.is_allocated(DeviceID(s.driver, s.pool, d.name)):
                            continue
                        for c in d.consumes_counters:
                            available = have.get(c.counter_set)
                            if available is None:
                                continue
                            for name, value in c.counters.items():
                                if name in available:
                                    available[name] -= value
            self._available_counters[pool.id] = have
        return have

    def new_share_id(self) -> str:
        return self._share_ids()


def _counting_share_ids() -> Callable[[], str]:
    """Deterministic share IDs (UUIDs numbered from 1) for simulations and tests; the operator passes uuid4."""
    count = 0

    def next_id() -> str:
        nonlocal count
        count += 1
        return str(uuid.UUID(int=count))

    return next_id


class _Run:
    """One ``Allocate`` call (upstream's ``allocator`` struct): one node, one pod's claims."""

    def __init__(
        self, owner: Allocator, node: Node, claims: Sequence[ResourceClaim], expired: Callable[[], bool] | None = None
    ) -> None:
        self.expired = expired
        self.a = owner
        self.features = owner.features
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = []
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_Constraint]] = [[] for _ in claims]
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self.results: list[list[_Picked]] = [[] for _ in claims]

    # ------------------------------------------------------------------ setup

    def run(self) -> list[AllocationResult] | None:
        a = self.a
        slices_for_node = [*a.slices_on_node.get(self.node.name, ()), *a.slices_shared]
        self.pools = gather_pools(slices_for_node, self.node, self.features, a.all_slices)
        a.steps = 0
        for ci, claim in enumerate(self.claims):
            self._prepare_claim(ci, claim)
        try:
            done = self._allocate_one(ci=0, ri=0, si=0, di=0, sub=False, start=(0, 0, 0))
        except _MaxSizeExceeded:  # pragma: no cover - upstream's caller never sees it either
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise NodeAllocationError(ERR_INVALID_POOLS)
            return None
        return [self._result(ci, claim) for ci, claim in enumerate(self.claims)]

    def _prepare_claim(self, ci: int, claim: ResourceClaim) -> None:
        features = self.features
        min_per_claim = 0
        for ri, request in enumerate(claim.spec.requests):
            subs = request.first_available
            if not features.prioritized_list and subs:
                where = f"claim {_claim_name(claim)}, request {request.name}"
                raise AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature is disabled")
            if subs:
                least = None
                for si, sub in enumerate(subs):
                    data = self._validate(ci, claim, _RequestData(sub.name, sub.spec, request.name), (ci, ri, si))
                    self.request_data[(ci, ri, si)] = data
                    least = data.num_devices if least is None else min(least, data.num_devices)
                per_request = least or 0
            else:
                spec = request.exactly if request.exactly is not None else ExactRequest("")
                data = self._validate(ci, claim, _RequestData(request.name, spec, None), (ci, ri, 0))
                self.request_data[(ci, ri, 0)] = data
                per_request = data.num_devices
            if per_request > ALLOCATION_RESULTS_MAX_SIZE - min_per_claim:
                raise AllocationError(
                    f"claim {_claim_name(claim)}, request {request.name}: adding {per_request} devices exceeds the "
                    f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_per_claim} already accounted for"
                )
            min_per_claim += per_request
        for i, c in enumerate(claim.spec.constraints):
            if c.match_attribute is not None:
                self.constraints[ci].append(_MatchAttribute(frozenset(c.requests), c.match_attribute))
            elif c.distinct_attribute is not None:
                self.constraints[ci].append(_DistinctAttribute(frozenset(c.requests), c.distinct_attribute))
            else:
                raise AllocationError(
                    f"claim {_claim_name(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )

    def _validate(self, ci: int, claim: ResourceClaim, data: _RequestData, key: tuple[int, int, int]) -> _RequestData:
        """Upstream ``validateDeviceRequest``."""
        spec = data.spec
        where = f"claim {_claim_name(claim)}, request {data.name}"
        if spec.derived_attributes:
            raise AllocationError(f"{where}: cannot handle request with derived attributes, the feature is disabled")
        for i, selector in enumerate(spec.selectors):
            if selector is None:
                raise AllocationError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not self.features.admin_access and spec.admin_access is not None and data.parent is None:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not spec.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        cls = self.a.classes.get(spec.device_class_name)
        if cls is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        data.device_class = cls
        if spec.allocation_mode == ALLOCATION_MODE_EXACT_COUNT:
            data.num_devices = spec.count
        elif spec.allocation_mode == ALLOCATION_MODE_ALL:
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {pool} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"{where}: asks for all devices, but resource pool {pool} is currently invalid"
                    )
                for s in pool.slices:
                    for di, device in enumerate(s.devices):
                        if not self._selectable(key, data, s, di):
                            continue
                        if self.features.consumable_capacity:
                            try:
                                fits = capacity_fits(
                                    {}, spec.capacity, device.capacity, {}, self.features.fractional_capacity_range
                                )
                            except _CapacityError as exc:
                                raise AllocationError(
                                    f"{where}: checking capacity for device {device.name}: {exc}"
                                ) from None
                            if not fits:
                                continue
                        data.all_devices.append(_Candidate(DeviceID(s.driver, s.pool, device.name), device, s, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {spec.allocation_mode}")
        return data

    # ------------------------------------------------------------------ the search

    def _allocate_one(self, *, ci: int, ri: int, si: int, di: int, sub: bool, start: tuple[int, int, int]) -> bool:
        """Upstream ``allocateOne``; raises ``_MaxSizeExceeded`` to backtrack further."""
        self.a.steps += 1
        if self.expired is not None and self.expired():
            raise AllocationTimeout("filter operation aborted: context deadline exceeded")
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.spec.requests):
            try:
                return self._allocate_one(ci=ci + 1, ri=0, si=0, di=0, sub=False, start=(0, 0, 0))
            except _MaxSizeExceeded:
                return False
        key = (ci, ri, si)
        data = self.request_data[key]
        if not sub and data.parent is not None:
            return self._allocate_subrequests(ci, ri, data)
        do_all = data.spec.allocation_mode == ALLOCATION_MODE_ALL
        if do_all and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._allocate_one(ci=ci, ri=ri + 1, si=0, di=0, sub=False, start=(0, 0, 0))
        if data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[ci]):
            raise _MaxSizeExceeded
        if do_all:
            candidate = data.all_devices[di]
            undo = self._allocate_device(ci, key, candidate, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one(ci=ci, ri=ri, si=si, di=di + 1, sub=sub, start=(0, 0, 0))
            except BaseException:
                self._rollback(ci, key, candidate, undo)
                raise
            if not done:
                self._rollback(ci, key, candidate, undo)
            return done
        return self._search(ci, ri, si, di, sub, start, data)

    def _allocate_subrequests(self, ci: int, ri: int, data: _RequestData) -> bool:
        all_exceeded = True
        si = 0
        while (ci, ri, si) in self.request_data:
            try:
                success = self._allocate_one(ci=ci, ri=ri, si=si, di=0, sub=True, start=(0, 0, 0))
            except _MaxSizeExceeded:
                si += 1
                continue
            all_exceeded = False
            if success:
                data.selected_sub = si
                return True
            si += 1
        if all_exceeded:
            raise _MaxSizeExceeded
        return False

    def _search(
        self, ci: int, ri: int, si: int, di: int, sub: bool, start: tuple[int, int, int], data: _RequestData
    ) -> bool:
        """Upstream ``allocateOne``'s loop over the pools' devices for request (`ci`, `ri`, `si`), whose `data`
        it is, from device position `start` (pool, slice, device) on."""
        key = (ci, ri, si)
        claim = self.claims[ci]
        admin = data.admin_access
        capacity = self.features.consumable_capacity
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            for li in range(start[1] if pi == start[0] else 0, len(pool.slices)):
                s = pool.slices[li]
                first = start[2] if pi == start[0] and li == start[1] else 0
                for xi in range(first, len(s.devices)):
                    device = s.devices[xi]
                    device_id = DeviceID(pool.driver, pool.pool, device.name)
                    if admin and ci in self.allocating.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable(key, data, s, xi):
                        continue
                    if capacity:
                        try:
                            fits = self._capacity_fits(data, device_id, device)
                        except _CapacityError as exc:
                            where = f"claim {_claim_name(claim)}, request {data.name}"
                            raise AllocationError(f"{where}: checking capacity for device {device_id}: {exc}") from None
                        if not fits:
                            continue
                    candidate = _Candidate(device_id, device, s, pool)
                    undo = self._allocate_device(ci, key, candidate, must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._allocate_one(ci=ci, ri=ri, si=si, di=di + 1, sub=sub, start=(pi, li, xi + 1))
                    except BaseException:
                        self._rollback(ci, key, candidate, undo)
                        raise
                    if done:
                        return True
                    self._rollback(ci, key, candidate, undo)
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.a.allocated.devices or bool(self.allocating.get(device_id))

    def _capacity_fits(self, data: _RequestData, device_id: DeviceID, device: Device) -> bool:
        current = self.a.allocated.capacity.get(device_id, {})
        return capacity_fits(
            current,
            data.spec.capacity,
            device.capacity,
            self.allocating_capacity.get(device_id),
            self.features.fractional_capacity_range,
        )

    # ------------------------------------------------------------------ one device

    def _selectable(self, key: tuple[int, int, int], data: _RequestData, s: ResourceSlice, index: int) -> bool:
        """Upstream ``isSelectable``."""
        device = s.devices[index]
        if not self.features.device_binding_and_status and device.binding_conditions:
            return False
        device_id = DeviceID(s.driver, s.pool, device.name)
        mk = (device_id, *key)
        cached = self.matches.get(mk)
        if cached is not None:
            return cached
        ok = True
        if data.device_class is not None:
            ok = self._selectors_match(
                key[0], s.driver, device, device_id, data.device_class, data.device_class.selectors
            )
        if ok:
            ok = self._selectors_match(key[0], s.driver, device, device_id, None, data.spec.selectors)
        if ok and s.per_device_node_selection:
            ok = node_matches(self.node, device.node_name, device.all_nodes, device.node_selector)
        self.matches[mk] = ok
        return ok

    def _selectors_match(
        self,
        ci: int,
        driver: str,
        device: Device,
        device_id: DeviceID,
        cls: DeviceClass | None,
        selectors: Sequence[str | None],
    ) -> bool:
        """Upstream ``selectorsMatch``."""
        for i, expression in enumerate(selectors):
            assert expression is not None  # refused by _validate
            who = f"class {cls.name}" if cls is not None else f"claim {_claim_name(self.claims[ci])}"
            selector = compile_selector(expression)
            if selector.error is not None:
                raise AllocationError(f"{who}: selector #{i}: CEL compile error: {selector.error}")
            verdict = self.a.device_verdict(expression, driver, device)
            if isinstance(verdict, str):
                raise AllocationError(f"{who}: selector #{i} on device {device_id}: CEL runtime error: {verdict}")
            if not verdict:
                return False
        return True

    def _allocate_device(self, ci: int, key: tuple[int, int, int], c: _Candidate, *, must: bool) -> _Undo | None:
        """Upstream ``allocateDevice``: the undo record of a taken device, or None (not usable)."""
        data = self.request_data[key]
        spec = data.spec
        admin = data.admin_access
        device = c.device
        multi = self.features.consumable_capacity and device.allow_multiple_allocations is True
        if not multi and admin and ci in self.allocating.get(c.id, ()):
            return None
        if not admin and self._in_use(c.id):
            return None
        if not self.features.partitionable_devices and device.consumes_counters:
            return None
        skip_counters = multi and (self.a.allocated.capacity_in_use(c.id) or c.id in self.allocating_capacity)
        undo = _Undo(result_len=len(self.results[ci]))
        if not skip_counters and device.consumes_counters:
            if not self._take_counters(c):
                return None
            undo.counters = True
        base, sub = (data.parent, data.name) if data.parent is not None else (data.name, "")
        if self.features.device_taints and _taint_prevents(device, spec.tolerations):
            self._rollback(ci, key, c, undo, added=False)
            return None
        for constraint in self.constraints[ci]:
            if not constraint.add(base, sub, device, c.id):
                self._rollback(ci, key, c, undo, added=False)
                if must:
                    raise AllocationError(
                        f"claim {_claim_name(self.claims[ci])}, request {data.name}: cannot add device {c.id} "
                        "because a claim constraint would not be satisfied"
                    )
                return None
            undo.constraints += 1
        if not multi:
            self.allocating.setdefault(c.id, set()).add(ci)
            undo.marked = True
        share_id: str | None = None
        consumed: dict[str, Fraction] = {}
        if self.features.consumable_capacity:
            claim = self.claims[ci]
            try:
                fits = self._capacity_fits(data, c.id, device)
            except _CapacityError as exc:
                self._rollback(ci, key, c, undo, added=False)
                raise AllocationError(
                    f"claim {_claim_name(claim)}, request {data.name}: rechecking capacity for device {c.id}: {exc}"
                ) from None
            if not fits:
                self._rollback(ci, key, c, undo, added=False)
                return None
            if multi:
                try:
                    consumed = {
                        name: _consumed(
                            spec.capacity.get(name) if spec.capacity else None,
                            cap,
                            self.features.fractional_capacity_range,
                        )
                        for name, cap in device.capacity.items()
                    }
                except _CapacityError as exc:
                    self._rollback(ci, key, c, undo, added=False)
                    where = f"claim {_claim_name(claim)}, request {data.name}"
                    raise AllocationError(f"{where}: computing consumed capacity for device {c.id}: {exc}") from None
                share_id = self.a.new_share_id()
                undo.capacity_existed = c.id in self.allocating_capacity
                entry = self.allocating_capacity.setdefault(c.id, {})
                for name, value in consumed.items():
                    entry[name] = entry.get(name, Fraction(0)) + value
                undo.capacity = consumed
        self.results[ci].append(
            _Picked(
                data.name,
                data.parent or "",
                c,
                True if admin else None,
                share_id,
                consumed or None,
            )
        )
        return undo

    def _rollback(self, ci: int, key: tuple[int, int, int], c: _Candidate, undo: _Undo, *, added: bool = True) -> None:
        """Upstream ``rollbackDevice``."""
        data = self.request_data[key]
        if added and undo.result_len >= 0:
            del self.results[ci][undo.result_len :]
        if undo.capacity is not None:
            entry = self.allocating_capacity.get(c.id)
            if entry is not None:
                for name, value in undo.capacity.items():
                    if name in entry:
                        entry[name] -= value
                if all(v == 0 for v in entry.values()):
                    del self.allocating_capacity[c.id]
                    if undo.capacity_existed:
                        self.allocating_capacity[c.id] = {}
        if undo.marked:
            self.allocating[c.id].discard(ci)
        base, sub = (data.parent, data.name) if data.parent is not None else (data.name, "")
        for constraint in reversed(self.constraints[ci][: undo.constraints]):
            constraint.remove(base, sub, c.device, c.id)
        if undo.counters:
            self._release_counters(c)

    def _take_counters(self, c: _Candidate) -> bool:
        """Upstream ``checkAvailableCounters``: take the device's counters if its pool has room."""
        available = self.a.available_counters(c.pool)
        consumed = self.consumed_counters.setdefault(c.pool.id, {})
        for use in c.device.consumes_counters:
            counters = consumed.setdefault(use.counter_set, {})
            for name, value in use.counters.items():
                counters[name] = counters.get(name, Fraction(0)) + value
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, have in counters.items():
                if have < used.get(name, 0):
                    self._release_counters(c)
                    return False
        return True

    def _release_counters(self, c: _Candidate) -> None:
        consumed = self.consumed_counters.get(c.pool.id, {})
        for use in c.device.consumes_counters:
            counters = consumed.get(use.counter_set, {})
            for name, value in use.counters.items():
                counters[name] = counters.get(name, Fraction(0)) - value

    # ------------------------------------------------------------------ results

    def _result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        picked = self.results[ci]
        results = tuple(
            DeviceRequestAllocationResult(
                request=p.request_name,
                driver=p.candidate.id.driver,
                pool=p.candidate.id.pool,
                device=p.candidate.id.device,
                admin_access=p.admin_access,
                tolerations=_tolerations_of(claim, p),
                binding_conditions=p.candidate.device.binding_conditions
                if self.features.device_binding_and_status
                else (),
                binding_failure_conditions=(
                    p.candidate.device.binding_failure_conditions if self.features.device_binding_and_status else ()
                ),
                share_id=p.share_id,
                consumed_capacity=p.consumed,
            )
            for p in picked
        )
        try:
            selector = _node_selector(picked, self.node.name)
        except AllocationError as exc:
            raise AllocationError(f"create NodeSelector for claim {claim.name}: {exc}") from None
        return AllocationResult(results=results, config=self._config(ci, claim), node_selector=selector)

    def _config(self, ci: int, claim: ResourceClaim) -> tuple[DeviceAllocationConfiguration, ...]:
        out: list[list[Any]] = []  # [source, requests (list), opaque]
        by_class: dict[str, tuple[int, int]] = {}
        requests = claim.spec.requests
        for ri in range(len(requests)):
            data = self.request_data[(ci, ri, 0)]
            if data.parent is not None:
                data = self.request_data[(ci, ri, data.selected_sub)]
            cls = data.device_class
            if cls is None:
                continue
            span = by_class.get(cls.name)
            if span is not None:
                for i in range(*span):
                    out[i][1].append(data.full_name)
                continue
            first = len(out)
            for class_config in cls.config:
                out.append([CONFIG_SOURCE_CLASS, [data.full_name], class_config])
            by_class[cls.name] = (first, len(out))
        for config in claim.spec.config:
            if not config.requests:
                out.append([CONFIG_SOURCE_CLAIM, list(config.requests), config.opaque])
                continue
            for ri, request in enumerate(requests):
                if request.name in config.requests or self._selected_ref(ci, ri, request) in config.requests:
                    out.append([CONFIG_SOURCE_CLAIM, list(config.requests), config.opaque])
                    break
        for entry in out:
            names = entry[1]
            if names and all(
                r.name in names or self._selected_ref(ci, ri, r) in names for ri, r in enumerate(requests)
            ):
                entry[1] = []
        return tuple(DeviceAllocationConfiguration(src, tuple(names), opaque) for src, names, opaque in out)

    def _selected_ref(self, ci: int, ri: int, request: DeviceRequest) -> str | None:
        data = self.request_data[(ci, ri, 0)]
        if data.parent is None:
            return None
        return f"{request.name}/{request.first_available[data.selected_sub].name}"


def _tolerations_of(claim: ResourceClaim, p: _Picked) -> tuple[DeviceToleration, ...]:
    """Upstream ``lookupRequest(claim).tolerations()``."""
    name = p.parent or p.request
    for request in claim.spec.requests:
        if request.name != name:
            continue
        if not p.parent:
            return request.exactly.tolerations if request.exactly is not None else ()
        for sub in request.first_available:
            if sub.name == p.request:
                return sub.spec.tolerations
    return ()


def _taint_prevents(device: Device, tolerations: Sequence[DeviceToleration]) -> bool:
    """Upstream ``taintPreventsAllocation``: NoSchedule / NoExecute taints must be tolerated."""
    for taint in device.taints:
        if taint.effect in (TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE) and not any(
            t.tolerates(taint) for t in tolerations
        ):
            return True
    return False


def _node_selector(picked: Sequence[_Picked], node_name: str) -> tuple[NodeSelectorTerm, ...] | None:
    """Upstream ``createNodeSelector``."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for p in picked:
        s, device = p.candidate.slice, p.candidate.device
        if s.per_device_node_selection:
            name, selector = device.node_name, device.node_selector
        else:
            name, selector = s.node_name, s.node_selector
        if name or device.binds_to_node:
            return (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node_name,)),)),)
        if selector is not None:
            if len(selector) == 1:
                _add_new(selector[0].match_fields, fields)
                _add_new(selector[0].match_expressions, expressions)
            elif len(selector) > 1:
                raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(selector)} terms")
    if fields or expressions:
        return (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)
    return None


def _add_new(source: Iterable[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for r in source:
        if not any(x.key == r.key and x.operator == r.operator and set(x.values) == set(r.values) for x in into):
            into.append(r)
