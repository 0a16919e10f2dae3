"""Kubernetes quantities and the resource vectors the scheduler adds and compares.

A quantity ("100m", "1.5", "2Gi", "500Ki", "1e3", "1E") is parsed exactly, with
fractions, and then rounded *up* to whole units the way apimachinery's
``Quantity.Value()`` and ``MilliValue()`` do: cpu is kept in millicores, every
other resource in whole units (bytes, counts). An amount the scheduler tracks must lie in
0..``MAX_AMOUNT`` (an int64, as upstream's; upstream wraps silently past it, we refuse it, and
the API server refuses negative requests and capacities itself).

Requests follow upstream ``component-helpers/resource/helpers.go`` (``PodRequests``, v1.37):
containers add up; init containers run one at a time, except restartable
("sidecar") init containers, which keep running and add up; the pod's request is
the larger of the two; pod-level ``spec.resources.requests`` (cpu, memory,
hugepages) replace the containers' sums; the pod overhead is added. With status
resources (in-place resize), each of the containers' spec, allocated and actuated
requests is aggregated and the largest of the three taken, per resource. These
steps work on ``ResourceList`` mappings because upstream's defaulting for absent
requests depends on which names are *present*, not only on the amounts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

#: Scoring defaults for a container that leaves cpu/memory requests out
#: (upstream ``pkg/scheduler/util.DefaultMilliCPURequest`` / ``DefaultMemoryRequest``).
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024

#: the largest amount of one resource (millicores for cpu): what upstream's int64 holds
MAX_AMOUNT: Final = 2**63 - 1

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would not accept."""


def parse_quantity(value: Any) -> Fraction:
    """Parse a Kubernetes quantity exactly. Numbers (int/float) are accepted as YAML gives them."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or a number, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"quantity must be a finite number, not {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or a number, not {type(value).__name__}")
    m = _QUANTITY_RE.match(value.strip())
    if m is None:
        raise QuantityError(f"quantities must match the regular expression of a Kubernetes quantity: {value!r}")
    number = Fraction(m["num"])
    if m["bin"]:
        return number * _BINARY[m["bin"]]
    if m["exp"]:
        exponent = int(m["exp"][1:])
        if abs(exponent) > 64:
            raise QuantityError(f"quantity exponent out of range: {value!r}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[m["dec"] or ""]


def _ceil(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)


def to_milli(value: Any) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up."""
    if isinstance(value, str):
        return _milli_of(value)
    return _ceil(parse_quantity(value) * 1000)


def to_units(value: Any) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    if isinstance(value, str):
        return _units_of(value)
    return _ceil(parse_quantity(value))


# Quantities repeat from pod to pod ("100m", "500Mi"): exact Fraction arithmetic is worth doing once
# per distinct string (a bad string raises every time: lru_cache keeps no exceptions).
@functools.lru_cache(maxsize=4096)
def _milli_of(value: str) -> int:
    return _ceil(parse_quantity(value) * 1000)


@functools.lru_cache(maxsize=4096)
def _units_of(value: str) -> int:
    return _ceil(parse_quantity(value))


def format_quantity(amount: int, resource: str) -> str:
    """A compact human form, for messages and summaries (not for round-tripping)."""
    if resource == CPU:
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount and amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)


def is_scalar_resource(name: str) -> bool:
    """Extended resources (domain-prefixed, outside kubernetes.io), hugepages and attachable volumes.

    Upstream ``v1helper.IsScalarResourceName``: these are tracked by name in
    ``Resource.ScalarResources`` and checked like cpu and memory.
    """
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    # Domain-prefixed names are either extended resources or prefixed native
    # ones ("*kubernetes.io/*"); upstream tracks both as scalars.
    return "/" in name


_EMPTY: Final[Mapping[str, int]] = {}


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource vector: cpu in millicores, the rest in whole units. Immutable; adds like a vector."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalar: Mapping[str, int] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, *, where: str = "resources") -> "Resources":
        """Parse ``{"cpu": "100m", "memory": "1Gi", ...}``; unknown non-scalar names are ignored."""
        if not raw:
            return ZERO_RESOURCES
        if not isinstance(raw, Mapping):
            raise QuantityError(f"{where}: expected a mapping of resource names to quantities")
        if not all(type(v) is str for v in raw.values()):  # YAML's numbers (and bools: refused) are not kept
            return to_resources(parse_resource_list(raw, where=where))
        key = tuple(raw.items())
        found = _PARSED_LISTS.get(key)
        if found is None:
            found = to_resources(parse_resource_list(raw, where=where))  # a bad list raises: nothing is kept
            if len(_PARSED_LISTS) >= _PARSED_LISTS_LIMIT:
                _PARSED_LISTS.clear()
            _PARSED_LISTS[key] = found
        return found

    def get(self, name: str) -> int:
        """The amount of one resource by its Kubernetes name (cpu in millicores)."""
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        return self.scalar.get(name, 0)

    def names(self) -> Iterable[str]:
        """Names of the resources present (non-zero cpu/memory/storage, every scalar key)."""
        if self.milli_cpu:
            yield CPU
        if self.memory:
            yield MEMORY
        if self.ephemeral_storage:
            yield EPHEMERAL_STORAGE
        yield from self.scalar

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))

    def __add__(self, other: "Resources") -> "Resources":
        if not other.scalar and not self.scalar:
            return Resources(
                self.milli_cpu + other.milli_cpu,
                self.memory + other.memory,
                self.ephemeral_storage + other.ephemeral_storage,
            )
        scalar = dict(self.scalar)
        for k, v in other.scalar.items():
            scalar[k] = scalar.get(k, 0) + v
        return Resources(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
            scalar,
        )

    def __sub__(self, other: "Resources") -> "Resources":
        scalar = dict(self.scalar)
        for k, v in other.scalar.items():
            scalar[k] = scalar.get(k, 0) - v
        return Resources(
            self.milli_cpu - other.milli_cpu,
            self.memory - other.memory,
            self.ephemeral_storage - other.ephemeral_storage,
            scalar or _EMPTY,
        )

    def max(self, other: "Resources") -> "Resources":
        """Per-resource maximum (how init containers combine with the rest)."""
        scalar = dict(self.scalar)
        for k, v in other.scalar.items():
            scalar[k] = max(scalar.get(k, 0), v)
        return Resources(
            max(self.milli_cpu, other.milli_cpu),
            max(self.memory, other.memory),
            max(self.ephemeral_storage, other.ephemeral_storage),
            scalar or _EMPTY,
        )


ZERO_RESOURCES: Final = Resources()

# Nodes repeat a few capacity shapes: 15000 nodes of a cluster may have three. The vector of a list of
# quantity strings is kept by its items (an immutable Resources, shared), so a node list reads each
# shape once (parse_node's two lists were 40% of its cost at start-up, issue 27).
_PARSED_LISTS: dict[tuple[tuple[str, str], ...], Resources] = {}
_PARSED_LISTS_LIMIT: Final = 1024


#: name -> amount (cpu in millicores, the rest in units). Which names are present matters.
ResourceList = Mapping[str, int]

#: Upstream ``supportedPodLevelResources`` (plus any ``hugepages-*``).
POD_LEVEL_RESOURCES: Final = frozenset((CPU, MEMORY))


def is_pod_level_resource(name: str) -> bool:
    """Upstream ``IsSupportedPodLevelResource``: cpu, memory and hugepages can be set for the whole pod."""
    return name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def check_amount(amount: int) -> int:
    """`amount` when it lies in 0..MAX_AMOUNT; else QuantityError (the API server's words for a negative one)."""
    if amount < 0:
        raise QuantityError("must be greater than or equal to 0")
    if amount > MAX_AMOUNT:
        raise QuantityError(f"must be at most {MAX_AMOUNT} (millicores for cpu, units for the rest)")
    return amount


def saturated(amount: int) -> int:
    """`amount`, or MAX_AMOUNT when a sum of amounts went past it (for the int64 node arrays)."""
    return amount if amount <= MAX_AMOUNT else MAX_AMOUNT


def parse_resource_list(raw: Mapping[str, Any], *, where: str = "resources") -> dict[str, int]:
    """The names the scheduler tracks (cpu, memory, ephemeral-storage, scalar), zeros kept; each in 0..MAX_AMOUNT."""
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            if name == CPU:
                out[name] = check_amount(to_milli(value))
            elif name in (MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name):
                out[name] = check_amount(to_units(value))
        except QuantityError as exc:
            raise QuantityError(f"{where}.{name}: {exc}") from None
    return out


def to_resources(rl: ResourceList) -> Resources:
    """Upstream ``Resource.Add`` of a ResourceList."""
    scalar = {k: v for k, v in rl.items() if k not in (CPU, MEMORY, EPHEMERAL_STORAGE)}
    return Resources(rl.get(CPU, 0), rl.get(MEMORY, 0), rl.get(EPHEMERAL_STORAGE, 0), scalar or _EMPTY)


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's request lists as ``PodRequests`` reads them (``None``: the field is absent)."""

    spec: ResourceList
    #: ``status.containerStatuses[].allocatedResources``
    allocated: ResourceList | None = None
    #: ``status.containerStatuses[].resources.requests``
    actuated: ResourceList | None = None
    #: an init container with ``restartPolicy: Always`` (a sidecar)
    restartable: bool = False


@dataclass(frozen=True, slots=True)
class PodResources:
    """Everything ``PodRequests`` reads of a pod."""

    containers: tuple[ContainerResources, ...] = ()
    init_containers: tuple[ContainerResources, ...] = ()
    #: ``spec.resources.requests`` (pod-level resources)
    pod_requests: ResourceList | None = None
    #: ``status.allocatedResources`` (pod level)
    pod_allocated: ResourceList | None = None
    #: ``status.resources.requests`` (pod level); ``pod_status_resources``: ``status.resources`` is set
    pod_actuated: ResourceList | None = None
    pod_status_resources: bool = False
    overhead: ResourceList | None = None
    #: the PodResizePending condition says Infeasible: the spec is not what runs
    resize_infeasible: bool = False

    @property
    def pod_level_requests_set(self) -> bool:
        """Upstream ``IsPodLevelRequestsSet``."""
        return self.pod_requests is not None and any(is_pod_level_resource(k) for k in self.pod_requests)


def _add_into(acc: dict[str, int], other: ResourceList | None) -> None:
    if other:
        for k, v in other.items():
            acc[k] = acc.get(k, 0) + v


def _max_into(acc: dict[str, int], other: ResourceList | None) -> None:
    if other:
        for k, v in other.items():
            if k not in acc or v > acc[k]:
                acc[k] = v


def _max_of(first: ResourceList | None, *rest: ResourceList | None) -> dict[str, int]:
    out = dict(first) if first is not None else {}
    for other in rest:
        _max_into(out, other)
    return out


def _with_non_missing(rl: ResourceList | None, non_missing: ResourceList) -> dict[str, int]:
    """Upstream ``applyNonMissing``: the defaults for the names ``rl`` lacks (an explicit 0 stays 0)."""
    out = dict(rl) if rl is not None else {}
    for k, v in non_missing.items():
        if rl is None or k not in rl:
            out[k] = out.get(k, 0) + v
    return out


def _spec(c: ContainerResources, infeasible: bool) -> ResourceList | None:
    return c.spec


def _allocated(c: ContainerResources, infeasible: bool) -> ResourceList | None:
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.spec


def _actuated(c: ContainerResources, infeasible: bool) -> ResourceList | None:
    if c.actuated is not None:
        return c.actuated
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.spec


def _aggregate(
    pod: PodResources,
    pick: Callable[[ContainerResources, bool], ResourceList | None],
    non_missing: ResourceList | None,
    infeasible: bool,
) -> dict[str, int]:
    """Upstream ``aggregateContainerResourcesByFn``: the sidecar-aware sum over the containers."""
    total: dict[str, int] = {}
    for c in pod.containers:
        rl = pick(c, infeasible)
        _add_into(total, _with_non_missing(rl, non_missing) if non_missing else rl)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod.init_containers:
        rl = pick(c, infeasible)
        if non_missing:
            rl = _with_non_missing(rl, non_missing)
        if c.restartable:
            _add_into(total, rl)
            _add_into(sidecars, rl)
            _max_into(init_peak, sidecars)
        else:
            running: dict[str, int] = {}
            _add_into(running, rl)
            _add_into(running, sidecars)
            _max_into(init_peak, running)
    _max_into(total, init_peak)
    return total


def pod_requests(
    pod: PodResources, *, use_status: bool, pod_level: bool, non_missing: ResourceList | None = None
) -> dict[str, int]:
    """Upstream ``PodRequests`` with v1.37's default feature gates.

    ``use_status``: InPlacePodVerticalScaling (GA) and InPlacePodLevelResourcesVerticalScaling
    (beta, on): the largest of spec, allocated and actuated requests. ``pod_level``: PodLevelResources
    (beta, on). ``non_missing``: defaults for the names a container's list lacks.
    """
    infeasible = use_status and pod.resize_infeasible
    spec = _aggregate(pod, _spec, non_missing, infeasible)
    if not use_status:
        reqs = spec
    else:
        if pod.pod_allocated is not None and pod.pod_status_resources and pod.pod_actuated is not None:
            allocated: ResourceList = pod.pod_allocated
            actuated: ResourceList = pod.pod_actuated
        else:
            allocated = _aggregate(pod, _allocated, non_missing, infeasible)
            actuated = _aggregate(pod, _actuated, non_missing, infeasible)
        reqs = _max_of(actuated, allocated) if infeasible else _max_of(spec, actuated, allocated)
    if pod_level and pod.pod_level_requests_set:
        effective = pod.pod_requests
        if use_status and pod.pod_status_resources:
            effective = _max_of(None if infeasible else pod.pod_requests, pod.pod_actuated, pod.pod_allocated)
        for k, v in (effective or {}).items():
            if is_pod_level_resource(k):
                reqs[k] = v
    _add_into(reqs, pod.overhead)
    return reqs


#: Upstream ``getNonMissingContainerRequests`` without pod-level requests: the scoring defaults.
NON_ZERO_DEFAULTS: Final[ResourceList] = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def non_missing_defaults(requests: ResourceList, pod_level_set: bool) -> dict[str, int]:
    """Upstream ``getNonMissingContainerRequests``: with pod-level requests, a default only for
    cpu / memory that neither the containers nor the pod level name at all."""
    if not pod_level_set:
        return dict(NON_ZERO_DEFAULTS)
    return {k: v for k, v in NON_ZERO_DEFAULTS.items() if k not in requests}
