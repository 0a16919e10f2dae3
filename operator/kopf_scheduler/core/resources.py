"""Kubernetes quantities and the resource vectors the scheduler adds and compares.

A quantity ("100m", "1.5", "2Gi", "500Ki", "1e3", "1E") is parsed exactly, with
fractions, and then rounded *up* to whole units the way apimachinery's
``Quantity.Value()`` and ``MilliValue()`` do: cpu is kept in millicores, every
other resource in whole units (bytes, counts).

Requests follow upstream ``component-helpers/resource.PodRequests`` (v1.37):
containers add up; init containers run one at a time, except restartable
("sidecar") init containers, which keep running and add up; the pod's request is
the larger of the two, plus the pod overhead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
    return _ceil(parse_quantity(value) * 1000)


def to_units(value: Any) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
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
        cpu = mem = eph = 0
        scalar: dict[str, int] = {}
        for name, value in raw.items():
            try:
                if name == CPU:
                    cpu = to_milli(value)
                elif name == MEMORY:
                    mem = to_units(value)
                elif name == EPHEMERAL_STORAGE:
                    eph = to_units(value)
                elif is_scalar_resource(name):
                    scalar[name] = to_units(value)
            except QuantityError as exc:
                raise QuantityError(f"{where}.{name}: {exc}") from None
        return cls(cpu, mem, eph, scalar or _EMPTY)

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


def with_defaults(requests: Resources, raw: Mapping[str, Any] | None) -> Resources:
    """The container's request with the scoring defaults for *absent* cpu / memory keys.

    An explicit zero stays zero (upstream ``GetNonzeroRequestForResource``).
    """
    raw = raw or {}
    cpu = requests.milli_cpu if CPU in raw else DEFAULT_MILLI_CPU_REQUEST
    mem = requests.memory if MEMORY in raw else DEFAULT_MEMORY_REQUEST
    if cpu == requests.milli_cpu and mem == requests.memory:
        return requests
    return Resources(cpu, mem, requests.ephemeral_storage, requests.scalar)


def pod_requests(
    containers: Iterable[Resources],
    init_containers: Iterable[tuple[Resources, bool]],
    overhead: Resources,
) -> Resources:
    """The pod's effective request; ``init_containers`` yields ``(request, restartable)``."""
    total = ZERO_RESOURCES
    for r in containers:
        total = total + r
    sidecars = ZERO_RESOURCES
    init_peak = ZERO_RESOURCES
    for r, restartable in init_containers:
        if restartable:
            total = total + r
            sidecars = sidecars + r
            effective = sidecars
        else:
            effective = r + sidecars
        init_peak = init_peak.max(effective)
    total = total.max(init_peak)
    if not overhead.is_zero():
        total = total + overhead
    return total
