"""Shared resource-scoring math: the allocation scorers behind NodeResourcesFit and BalancedAllocation.

Follows upstream ``pkg/scheduler/framework/plugins/noderesources/{least_allocated,most_allocated,
requested_to_capacity_ratio,balanced_allocation,resource_allocation}.go`` and
``plugins/helper/shape_score.go`` (v1.37). Every scorer takes, per configured resource, the
*requested* amount (what the node would hold with the pod on it) and the node's *allocatable*
amount, in resource order. A resource whose allocatable is 0 takes no part (upstream fills such
entries with zeros and skips them), which is also how a plugin says "pod does not request this
extended resource".

Two forms of each scorer: a scalar one over sequences (the reference) and a numpy one over
``(R, N)`` int64 arrays (``R`` resources by ``N`` nodes) that returns one int64 score per node.
They agree exactly, including Go's truncating integer division and float64 rounding.

Also here: the argument types the resource plugins share (``ResourceSpec``, the utilization shape)
and their validation, raising ``PluginArgsError`` with the upstream field paths.

Limits: no DRA-backed extended resources; values are assumed to fit int64 after ``* 100``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework.arguments import PluginArgsError
from ..framework.basics import MAX_NODE_SCORE
from ..model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import NodeTable
    from ..model.objects import Pod

IntArray = npt.NDArray[np.int64]

#: shape scores in the arguments are 0..10 (upstream ``config.MaxCustomPriorityScore``)
MAX_CUSTOM_PRIORITY_SCORE: Final = 10
MAX_UTILIZATION: Final = 100
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 100

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
STRATEGY_TYPES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """One resource a scorer looks at, and its weight (upstream ``config.ResourceSpec``)."""

    name: str
    weight: int = 1

    def __post_init__(self) -> None:
        if not self.name:
            raise PluginArgsError("name", "must be a non-empty string")


DEFAULT_RESOURCES: Final = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def check_resources(
    resources: tuple[ResourceSpec, ...],
    field: str,
    *,
    weight_must_be_one: bool = False,
    reject_duplicates: bool = False,
) -> None:
    """Upstream ``validateResources``: weights 1..100 (BalancedAllocation: exactly 1, no resource twice)."""
    seen: set[str] = set()
    for i, spec in enumerate(resources):
        where = f"{field}[{i}]"
        if weight_must_be_one:
            if spec.weight != 1:
                raise PluginArgsError(f"{where}.weight", "must be 1")
        elif not MIN_WEIGHT <= spec.weight <= MAX_WEIGHT:
            raise PluginArgsError(
                f"{where}.weight", f"resource weight of {spec.name} not in valid range (0, {MAX_WEIGHT}]"
            )
        if reject_duplicates and spec.name in seen:
            raise PluginArgsError(f"{where}.name", f"duplicate resource {spec.name!r}")
        seen.add(spec.name)


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    """One point of a RequestedToCapacityRatio shape: utilization 0..100 -> score 0..10."""

    utilization: int = 0
    score: int = 0


@dataclass(frozen=True, slots=True)
class RequestedToCapacityRatioParam:
    """Upstream ``RequestedToCapacityRatioParam``: a broken-linear shape, utilization strictly increasing."""

    shape: tuple[UtilizationShapePoint, ...] = ()

    def __post_init__(self) -> None:
        if not self.shape:
            raise PluginArgsError("shape", "at least one point must be specified")
        for i, point in enumerate(self.shape):
            where = f"shape[{i}]"
            if i > 0 and point.utilization <= self.shape[i - 1].utilization:
                raise PluginArgsError(f"{where}.utilization", "utilization values must be sorted in increasing order")
            if not 0 <= point.utilization <= MAX_UTILIZATION:
                raise PluginArgsError(f"{where}.utilization", f"not in valid range [0, {MAX_UTILIZATION}]")
            if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
                raise PluginArgsError(f"{where}.score", f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")

    @property
    def scaled(self) -> Shape:
        """(utilization, score) points with scores scaled to 0..MAX_NODE_SCORE, as upstream scores them."""
        factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        return tuple((p.utilization, p.score * factor) for p in self.shape)


#: a broken-linear shape: (utilization 0..100, score 0..MAX_NODE_SCORE) points, utilization increasing
Shape = tuple[tuple[int, int], ...]


# ----------------------------------------------------------------------------- scalar forms


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # requested may exceed capacity because request-less pods count with defaults: clamp
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def least_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """Weighted mean (integer division) of the free share x 100 over resources with allocatable > 0."""
    total = weight_sum = 0
    for req, alloc, w in zip(requested, allocatable, weights):
        if alloc == 0:
            continue
        total += least_requested_score(req, alloc) * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


def most_allocated(requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int]) -> int:
    """Weighted mean (integer division) of the used share x 100 (clamped at 100)."""
    total = weight_sum = 0
    for req, alloc, w in zip(requested, allocatable, weights):
        if alloc == 0:
            continue
        total += most_requested_score(req, alloc) * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


def broken_linear(shape: Shape, p: int) -> int:
    """The piecewise-linear function through ``shape``; flat before the first and after the last point."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return s0 + _go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def utilization(requested: int, capacity: int) -> int:
    """Percent used, 0..100; 100 when over capacity (capacity > 0 assumed)."""
    if requested > capacity:
        return MAX_UTILIZATION
    return requested * MAX_UTILIZATION // capacity


def requested_to_capacity_ratio(
    requested: Sequence[int], allocatable: Sequence[int], weights: Sequence[int], shape: Shape
) -> int:
    """Weighted mean of ``shape(utilization)``, counting only resources that score > 0, rounded half up."""
    total = weight_sum = 0
    for req, alloc, w in zip(requested, allocatable, weights):
        if alloc == 0:
            continue
        s = broken_linear(shape, utilization(req, alloc))
        if s > 0:
            total += s * w
            weight_sum += w
    if weight_sum == 0:
        return 0
    return (2 * total + weight_sum) // (2 * weight_sum)  # math.Round of a non-negative ratio


def balance_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """Upstream ``balancedResourceScore``: ``int((1 - std) * 100)`` of the requested/allocatable
    fractions (each capped at 1), in 50..100.

    Two fractions: std = |f0 - f1| / 2; more: the population standard deviation; fewer: 0.
    """
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable):
        if alloc == 0:
            continue
        f = float(req) / float(alloc)
        if f > 1:
            f = 1.0
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balance_change(with_pod: int, without_pod: int) -> int:
    """Upstream ``balancedResourceScorer``: ``50 + (50 + with - without) / 2`` (Go integer division).

    Both balance scores lie in 50..100, so the result does too: about 75 when the pod changes
    the node's balance little, towards 100 when it improves it, towards 50 when it worsens it.
    """
    half = MAX_NODE_SCORE // 2
    return half + _go_div(half + with_pod - without_pod, 2)


def balanced_allocation(requested: Sequence[int], allocated: Sequence[int], allocatable: Sequence[int]) -> int:
    """BalancedAllocation's score: the balance with the pod (``requested``) against the balance
    without it (``allocated``, what the node already holds)."""
    return balance_change(balance_score(requested, allocatable), balance_score(allocated, allocatable))


# ----------------------------------------------------------------------------- numpy forms
#
# ``requested`` and ``allocatable`` are (R, N) int64 arrays; ``weights`` has R entries.


def _weighted_mean_floor(scores: IntArray, valid: npt.NDArray[np.bool_], weights: Sequence[int]) -> IntArray:
    w = np.asarray(weights, dtype=np.int64)[:, None]
    total = (np.where(valid, scores, 0) * w).sum(axis=0)
    weight_sum = (valid * w).sum(axis=0)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0).astype(np.int64)


def least_allocated_nodes(requested: IntArray, allocatable: IntArray, weights: Sequence[int]) -> IntArray:
    valid = allocatable > 0
    safe = np.where(valid, allocatable, 1)
    per = np.where(requested <= allocatable, (allocatable - requested) * MAX_NODE_SCORE // safe, 0)
    return _weighted_mean_floor(per, valid, weights)


def most_allocated_nodes(requested: IntArray, allocatable: IntArray, weights: Sequence[int]) -> IntArray:
    valid = allocatable > 0
    safe = np.where(valid, allocatable, 1)
    per = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
    return _weighted_mean_floor(per, valid, weights)


def shape_table(shape: Shape) -> IntArray:
    """``broken_linear(shape, p)`` for every utilization p in 0..100 (the vector form looks it up)."""
    return np.array([broken_linear(shape, p) for p in range(MAX_UTILIZATION + 1)], dtype=np.int64)


def requested_to_capacity_ratio_nodes(
    requested: IntArray, allocatable: IntArray, weights: Sequence[int], table: IntArray
) -> IntArray:
    """``table`` is ``shape_table(shape)``."""
    valid = allocatable > 0
    safe = np.where(valid, allocatable, 1)
    util = np.where(requested > allocatable, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
    util = np.clip(util, 0, MAX_UTILIZATION)
    per = table[util]
    counted = valid & (per > 0)
    w = np.asarray(weights, dtype=np.int64)[:, None]
    total = (np.where(counted, per, 0) * w).sum(axis=0)
    weight_sum = (counted * w).sum(axis=0)
    return np.where(weight_sum > 0, (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1), 0).astype(np.int64)


def balance_score_nodes(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``balance_score`` per column; float arithmetic in the scalar order, so the truncated results agree."""
    valid = allocatable > 0
    frac = np.where(valid, requested.astype(np.float64) / np.where(valid, allocatable, 1).astype(np.float64), 0.0)
    frac = np.minimum(frac, 1.0)
    count = valid.sum(axis=0)
    r = requested.shape[0]
    n = requested.shape[1] if requested.ndim == 2 else 0
    total = np.zeros(n, dtype=np.float64)
    for i in range(r):  # sequential sums, as the scalar loop adds
        total = total + frac[i]
    mean = total / np.maximum(count, 1)
    acc = np.zeros(n, dtype=np.float64)
    for i in range(r):
        d = frac[i] - mean
        acc = acc + np.where(valid[i], d * d, 0.0)
    std = np.where(count > 2, np.sqrt(acc / np.maximum(count, 1)), 0.0)
    if r >= 2:
        # exactly two valid fractions: |f_first - f_second| / 2, taking them in resource order
        first = np.argmax(valid, axis=0)
        rest = valid.copy()
        rest[first, np.arange(n)] = False
        second = np.argmax(rest, axis=0)
        cols = np.arange(n)
        pair = np.abs((frac[first, cols] - frac[second, cols]) / 2)
        std = np.where(count == 2, pair, std)
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def balance_change_nodes(with_pod: IntArray, without_pod: IntArray) -> IntArray:
    """``balance_change`` per node; the numerator is never negative, so floor division is Go's."""
    half = MAX_NODE_SCORE // 2
    out: IntArray = half + with_pod
    out -= without_pod
    out //= 2
    out += half
    return out


def balanced_allocation_nodes(requested: IntArray, allocated: IntArray, allocatable: IntArray) -> IntArray:
    """``balanced_allocation`` per column of (R, N) arrays."""
    return balance_change_nodes(
        balance_score_nodes(requested, allocatable), balance_score_nodes(allocated, allocatable)
    )


# ----------------------------------------------------------------------------- inputs
#
# What upstream ``resource_allocation.go`` gathers per resource: cpu and memory from the non-zero
# sums (or the real ones when ``use_requested``), ephemeral-storage and scalar resources from the
# real sums. A scalar resource the pod does not request, or a name the node does not report,
# becomes (0, 0) and so takes no part.


def pod_request_list(pod: "Pod", specs: Sequence[ResourceSpec], *, use_requested: bool) -> tuple[int, ...]:
    """The pod's request for each spec, as upstream's ``calculatePodResourceRequest``.

    ``use_requested`` (BalancedAllocation): the effective request, with pod-level resources.
    Otherwise (NodeResourcesFit): the containers' requests with the cpu/memory defaults; upstream's
    Fit scorer is built without the PodLevelResources flag, so pod-level resources are ignored there.
    """
    r = pod.requests if use_requested else pod.container_non_zero_requests
    return tuple(r.get(spec.name) for spec in specs)


def _takes_part(name: str, pod_request: int) -> bool:
    if name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        return True
    return pod_request != 0 and is_scalar_resource(name)


def node_vectors(
    specs: Sequence[ResourceSpec], pod_requests: Sequence[int], info: "NodeInfo", *, use_requested: bool
) -> tuple[list[int], list[int]]:
    """(requested-with-pod, allocatable) for one node, in spec order."""
    alloc = info.allocatable
    nz = info.requested if use_requested else info.non_zero_requested
    real = info.requested
    requested: list[int] = []
    allocatable: list[int] = []
    for spec, p in zip(specs, pod_requests):
        name = spec.name
        a = r = 0
        if _takes_part(name, p):
            if name == CPU:
                a, r = alloc.milli_cpu, nz.milli_cpu + p
            elif name == MEMORY:
                a, r = alloc.memory, nz.memory + p
            elif name == EPHEMERAL_STORAGE:
                a, r = alloc.ephemeral_storage, real.ephemeral_storage + p
            elif name in alloc.scalar:
                a, r = alloc.scalar[name], real.scalar.get(name, 0) + p
        if a == 0:
            r = 0
        requested.append(r)
        allocatable.append(a)
    return requested, allocatable


def table_vectors(
    specs: Sequence[ResourceSpec],
    pod_requests: Sequence[int],
    table: "NodeTable",
    index: npt.NDArray[np.intp],
    *,
    use_requested: bool,
) -> tuple[IntArray, IntArray]:
    """(requested-with-pod, allocatable) as (R, len(index)) arrays; the vector form of ``node_vectors``."""
    m = len(index)
    requested = np.zeros((len(specs), m), dtype=np.int64)
    allocatable = np.zeros((len(specs), m), dtype=np.int64)
    for i, (spec, p) in enumerate(zip(specs, pod_requests)):
        name = spec.name
        if not _takes_part(name, p):
            continue
        if name == CPU:
            a, used = table.alloc_cpu, (table.req_cpu if use_requested else table.nz_cpu)
        elif name == MEMORY:
            a, used = table.alloc_mem, (table.req_mem if use_requested else table.nz_mem)
        elif name == EPHEMERAL_STORAGE:
            a, used = table.alloc_eph, table.req_eph
        else:
            a, used = table.scalar_allocatable(name), table.scalar_requested(name)
        a_i = a[index]
        allocatable[i] = a_i
        requested[i] = np.where(a_i > 0, used[index] + p, 0)
    return requested, allocatable


# ----------------------------------------------------------------------------- cpu + memory fast paths
#
# The default profile scores cpu and memory only. These paths do the same arithmetic as the
# general forms on one (2, N) array instead of per-resource rows, which matters because at a
# few hundred nodes numpy's per-call cost, not the arithmetic, dominates.


def cpu_mem_allocatable(table: "NodeTable") -> tuple[IntArray, bool]:
    """The (2, N) stack of allocatable cpu and memory, and whether every entry is positive.

    Cached on the table; its derived columns are dropped whenever a node (and so allocatable)
    changes, and allocatable does not change otherwise.
    """

    def build(_infos: object) -> tuple[IntArray, bool]:
        stacked = np.stack((table.alloc_cpu, table.alloc_mem))
        return stacked, bool(stacked.size == 0 or stacked.min() > 0)

    return table.derived("scoring.cpu_mem_allocatable", build)  # type: ignore[return-value]


def cpu_mem_inputs(
    table: "NodeTable", index: npt.NDArray[np.intp], pod_cpu: int, pod_mem: int, *, use_requested: bool
) -> tuple[IntArray, IntArray, bool]:
    """(requested-with-pod, allocatable, all allocatable positive) as (2, len(index)) arrays."""
    stacked, positive = cpu_mem_allocatable(table)
    allocatable = stacked.take(index, axis=1)
    requested = np.empty_like(allocatable)
    np.take(table.req_cpu if use_requested else table.nz_cpu, index, out=requested[0])
    np.take(table.req_mem if use_requested else table.nz_mem, index, out=requested[1])
    requested += np.array([[pod_cpu], [pod_mem]], dtype=np.int64)
    return requested, allocatable, positive


def least_allocated_positive(requested: IntArray, allocatable: IntArray, weights: Sequence[int]) -> IntArray:
    """``least_allocated_nodes`` for two resources whose allocatable is positive everywhere."""
    free = allocatable - requested
    free *= MAX_NODE_SCORE
    free //= allocatable
    np.maximum(free, 0, out=free)  # over capacity: the floor went negative, the score is 0
    return _two_row_mean(free, weights)


def most_allocated_positive(requested: IntArray, allocatable: IntArray, weights: Sequence[int]) -> IntArray:
    """``most_allocated_nodes`` for two resources whose allocatable is positive everywhere."""
    used = np.minimum(requested, allocatable)
    used *= MAX_NODE_SCORE
    used //= allocatable
    return _two_row_mean(used, weights)


def _two_row_mean(per: IntArray, weights: Sequence[int]) -> IntArray:
    w0, w1 = weights
    out: IntArray
    if w0 == 1 and w1 == 1:
        out = per[0] + per[1]
        out //= 2
        return out
    out = per[0] * w0 + per[1] * w1
    out //= w0 + w1
    return out


def _balance_positive(requested: IntArray, allocatable: IntArray) -> IntArray:
    """``balance_score_nodes`` for two resources whose allocatable is positive everywhere."""
    frac: npt.NDArray[np.float64] = np.true_divide(requested, allocatable)
    np.minimum(frac, 1.0, out=frac)
    d: npt.NDArray[np.float64] = frac[0] - frac[1]
    d /= 2
    np.abs(d, out=d)
    d = 1 - d
    d *= float(MAX_NODE_SCORE)
    return d.astype(np.int64)


def balanced_allocation_positive(requested: IntArray, allocated: IntArray, allocatable: IntArray) -> IntArray:
    """``balanced_allocation_nodes`` for two resources whose allocatable is positive everywhere."""
    return balance_change_nodes(_balance_positive(requested, allocatable), _balance_positive(allocated, allocatable))
