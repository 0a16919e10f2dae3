"""core/toolkit/scoring: the allocation scorers, scalar against hand arithmetic and numpy against scalar."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from kopf_scheduler.core.framework.arguments import PluginArgsError, parse_args
from kopf_scheduler.core.toolkit import scoring


def _shape(raw: object) -> scoring.Shape:
    """A shape as a policy gives it, parsed and scaled as NodeResourcesFit does."""
    return parse_args(scoring.RequestedToCapacityRatioParam, {"shape": raw}).scaled


@dataclass(frozen=True)
class _Resources:
    r: tuple[scoring.ResourceSpec, ...] = ()

    def __post_init__(self) -> None:
        scoring.check_resources(self.r, "r")


def _resources(raw: object) -> tuple[scoring.ResourceSpec, ...]:
    return parse_args(_Resources, {"r": raw}).r or scoring.DEFAULT_RESOURCES


@pytest.mark.parametrize(
    "requested, allocatable, weights, want",
    [
        # cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 -> (25+50)/2 = 37
        pytest.param([3000, 5000], [4000, 10000], [1, 1], 37, id="differently used"),
        # cpu 25 * 1, mem 50 * 2 -> 125/3 = 41
        pytest.param([3000, 5000], [4000, 10000], [1, 2], 41, id="memory weighs double"),
        # cpu over capacity -> 0; mem 100 -> 50
        pytest.param([6000, 0], [4000, 10000], [1, 1], 50, id="over capacity scores 0"),
        # cpu skipped (allocatable 0); mem 50 -> 50
        pytest.param([3000, 5000], [0, 10000], [1, 1], 50, id="zero allocatable skipped"),
        pytest.param([0, 0], [0, 0], [1, 1], 0, id="nothing allocatable"),
    ],
)
def test_least_allocated(requested: list[int], allocatable: list[int], weights: list[int], want: int) -> None:
    assert scoring.least_allocated(requested, allocatable, weights) == want


@pytest.mark.parametrize(
    "requested, allocatable, weights, want",
    [
        # cpu 3000*100/4000 = 75, mem 5000*100/10000 = 50 -> 62
        pytest.param([3000, 5000], [4000, 10000], [1, 1], 62, id="used share"),
        # cpu clamped to capacity -> 100, mem 0 -> 50
        pytest.param([6000, 0], [4000, 10000], [1, 1], 50, id="over capacity clamps to 100"),
        # cpu 75*1 + mem 50*3 = 225 / 4 = 56
        pytest.param([3000, 5000], [4000, 10000], [1, 3], 56, id="weighted"),
        pytest.param([5, 5], [0, 0], [1, 1], 0, id="nothing allocatable"),
    ],
)
def test_most_allocated(requested: list[int], allocatable: list[int], weights: list[int], want: int) -> None:
    assert scoring.most_allocated(requested, allocatable, weights) == want


MOST_SHAPE = _shape([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}])
LEAST_SHAPE = _shape([{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}])


def test_parse_shape_scales_scores_to_100() -> None:
    assert MOST_SHAPE == ((0, 0), (100, 100))


@pytest.mark.parametrize(
    "shape, p, want",
    [
        pytest.param(((10, 10), (50, 90)), 0, 10, id="before first point"),
        pytest.param(((10, 10), (50, 90)), 30, 50, id="midway: 10 + 80*20/40"),
        pytest.param(((10, 10), (50, 90)), 100, 90, id="after last point"),
        # decreasing segment: 100 + (-100*1)/3 truncates toward zero to -33 -> 67 (floor would give 66)
        pytest.param(((0, 100), (3, 0)), 1, 67, id="go truncation on a falling segment"),
        pytest.param(((0, 50),), 70, 50, id="single point is constant"),
    ],
)
def test_broken_linear(shape: scoring.Shape, p: int, want: int) -> None:
    assert scoring.broken_linear(shape, p) == want


@pytest.mark.parametrize(
    "requested, allocatable, weights, shape, want",
    [
        # utilization cpu 3000*100/4000 = 75 -> 75, mem 50 -> 50 -> round(125/2) = 63
        pytest.param([3000, 5000], [4000, 10000], [1, 1], MOST_SHAPE, 63, id="most-like rounds half up"),
        # least-like: cpu 25, mem 50 -> round(75/2) = 38
        pytest.param([3000, 5000], [4000, 10000], [1, 1], LEAST_SHAPE, 38, id="least-like"),
        # cpu scores 0 -> left out of both sums; mem 50 -> 50
        pytest.param([0, 5000], [4000, 10000], [1, 1], MOST_SHAPE, 50, id="zero resource scores excluded"),
        # over capacity -> utilization 100 -> most-like 100; mem 0 excluded -> 100
        pytest.param([5000, 0], [4000, 10000], [1, 1], MOST_SHAPE, 100, id="over capacity is 100%"),
        pytest.param([0, 0], [4000, 10000], [1, 1], MOST_SHAPE, 0, id="all zero"),
    ],
)
def test_requested_to_capacity_ratio(
    requested: list[int], allocatable: list[int], weights: list[int], shape: scoring.Shape, want: int
) -> None:
    assert scoring.requested_to_capacity_ratio(requested, allocatable, weights, shape) == want


@pytest.mark.parametrize(
    "requested, allocatable, want",
    [
        # fractions 0.75 and 0.5 -> std 0.125 -> int(87.5) = 87
        pytest.param([3000, 5000], [4000, 10000], 87, id="two resources"),
        # 0.6 and 0.6 -> std 0 -> 100
        pytest.param([6000, 6000], [10000, 10000], 100, id="perfectly balanced"),
        # capped at 1: fractions 1 and 0 -> std 0.5 -> 50
        pytest.param([20000, 0], [10000, 10000], 50, id="over capacity capped at 1"),
        # three: 0.5, 0.25, 0.75: mean 0.5, var (0+0.0625+0.0625)/3 -> std 0.2041 -> 79
        pytest.param([2, 1, 3], [4, 4, 4], 79, id="three resources population std"),
        # one valid fraction -> std 0 -> 100
        pytest.param([3, 0], [4, 0], 100, id="one resource"),
    ],
)
def test_balance_score(requested: list[int], allocatable: list[int], want: int) -> None:
    assert scoring.balance_score(requested, allocatable) == want


@pytest.mark.parametrize(
    "requested, allocated, allocatable, want",
    [
        # upstream balanced_allocation_test.go "differently sized nodes", node1:
        # with 0.75/0.5 -> 87, without 0/0 -> 100: 50 + (50 + 87 - 100) / 2 = 50 + 18 = 68
        pytest.param([3000, 5000], [0, 0], [4000, 10000], 68, id="pod unbalances an empty node"),
        # node2: with 0.5/0.5 -> 100, without -> 100: 50 + 50 / 2 = 75
        pytest.param([3000, 5000], [0, 0], [6000, 10000], 75, id="balance unchanged scores 75"),
        # "nodes to reach min/max score", node1: with 1/1 -> 100, without 1/0 -> 50: 50 + 100 / 2 = 100
        pytest.param([3000, 5000], [3000, 0], [3000, 5000], 100, id="pod restores the balance"),
        # node2: with 0/1 -> 50, without 0/0 -> 100: 50 + 0 / 2 = 50
        pytest.param([0, 5000], [0, 0], [3000, 5000], 50, id="pod ruins the balance"),
        # with 0.6/0.25 -> 82, without 0.3/0 -> 85: 50 + 47 / 2 = 73 (Go truncates 23.5)
        pytest.param([6000, 5000], [3000, 0], [10000, 20000], 73, id="odd numerator truncates"),
    ],
)
def test_balanced_allocation(requested: list[int], allocated: list[int], allocatable: list[int], want: int) -> None:
    assert scoring.balanced_allocation(requested, allocated, allocatable) == want


@pytest.mark.parametrize(
    "raw, field",
    [
        pytest.param([], "shape", id="empty"),
        pytest.param(
            [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
            "shape[1].utilization",
            id="not increasing",
        ),
        pytest.param([{"utilization": 101, "score": 1}], "shape[0].utilization", id="utilization over 100"),
        pytest.param([{"utilization": -1, "score": 1}], "shape[0].utilization", id="negative utilization"),
        pytest.param([{"utilization": 10, "score": 11}], "shape[0].score", id="score over 10"),
    ],
)
def test_parse_shape_rejects(raw: object, field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        _shape(raw)
    assert exc.value.field == field


@pytest.mark.parametrize(
    "raw, field",
    [
        pytest.param([{"name": "cpu", "weight": 0}], "r[0].weight", id="zero weight"),
        pytest.param([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 101}], "r[1].weight", id="over 100"),
        pytest.param([{"weight": 1}], "r[0].name", id="no name"),
        pytest.param([{"name": "cpu", "weight": True}], "r[0].weight", id="bool weight"),
    ],
)
def test_parse_resource_specs_rejects(raw: object, field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        _resources(raw)
    assert exc.value.field == field


def test_parse_resource_specs_defaults() -> None:
    assert _resources([]) == scoring.DEFAULT_RESOURCES
    assert _resources([{"name": "x.com/gpu"}]) == (scoring.ResourceSpec("x.com/gpu", 1),)


# ----------------------------------------------------------------------------- vector == scalar

_values = st.integers(min_value=0, max_value=2**40)


#: a request: any value (False, v), or the allocatable plus an offset (True, d); one strategy built once
#: (building one per element, for a range around its allocatable, took most of these tests' time)
_request_draw = st.one_of(st.tuples(st.just(False), _values), st.tuples(st.just(True), st.integers(-3, 3)))


def _request(allocatable: int, drawn: tuple[bool, int]) -> int:
    near, value = drawn
    return max(0, allocatable + value) if near else value


@st.composite
def _matrices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int]]:
    r = draw(st.integers(min_value=1, max_value=4))
    n = draw(st.integers(min_value=1, max_value=12))
    alloc = np.array(
        draw(st.lists(st.lists(st.one_of(st.just(0), _values), min_size=n, max_size=n), min_size=r, max_size=r)),
        dtype=np.int64,
    )
    # requests near the allocatable (within 3 of it) make the boundary cases likely
    req = np.array(
        [[_request(a, draw(_request_draw)) for a in row] for row in alloc.tolist()],
        dtype=np.int64,
    )
    weights = draw(st.lists(st.integers(min_value=1, max_value=100), min_size=r, max_size=r))
    return req, alloc, weights


def _columns(req: np.ndarray, alloc: np.ndarray) -> list[tuple[list[int], list[int]]]:
    return [(req[:, j].tolist(), alloc[:, j].tolist()) for j in range(req.shape[1])]


@settings(max_examples=examples(150), deadline=None)
@given(_matrices())
def test_vector_least_most_agree(m: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
    req, alloc, w = m
    assert scoring.least_allocated_nodes(req, alloc, w).tolist() == [
        scoring.least_allocated(r, a, w) for r, a in _columns(req, alloc)
    ]
    assert scoring.most_allocated_nodes(req, alloc, w).tolist() == [
        scoring.most_allocated(r, a, w) for r, a in _columns(req, alloc)
    ]


@st.composite
def _shapes(draw: st.DrawFn) -> scoring.Shape:
    us = sorted(draw(st.sets(st.integers(min_value=0, max_value=100), min_size=1, max_size=5)))
    raw = [{"utilization": u, "score": draw(st.integers(min_value=0, max_value=10))} for u in us]
    return _shape(raw)


@settings(max_examples=examples(150), deadline=None)
@given(_matrices(), _shapes())
def test_vector_rtcr_agrees(m: tuple[np.ndarray, np.ndarray, list[int]], shape: scoring.Shape) -> None:
    req, alloc, w = m
    table = scoring.shape_table(shape)
    got = scoring.requested_to_capacity_ratio_nodes(req, alloc, w, table).tolist()
    assert got == [scoring.requested_to_capacity_ratio(r, a, w, shape) for r, a in _columns(req, alloc)]


@settings(max_examples=examples(200), deadline=None)
@given(_matrices())
def test_vector_balance_agrees(m: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
    req, alloc, _ = m
    got = scoring.balance_score_nodes(req, alloc).tolist()
    assert got == [scoring.balance_score(r, a) for r, a in _columns(req, alloc)]


@st.composite
def _with_and_without(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(requested with the pod, allocated without it, allocatable); the pod's request per row."""
    req, alloc, _ = draw(_matrices())
    pod = np.array(draw(st.lists(_values, min_size=req.shape[0], max_size=req.shape[0])), dtype=np.int64).reshape(-1, 1)
    allocated = np.where(alloc > 0, req, 0)
    return allocated + np.where(alloc > 0, pod, 0), allocated, alloc


@settings(max_examples=examples(200), deadline=None)
@given(_with_and_without())
def test_vector_balanced_allocation_agrees(m: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    req, allocated, alloc = m
    want = [
        scoring.balanced_allocation(r, h, a) for (r, a), (h, _) in zip(_columns(req, alloc), _columns(allocated, alloc))
    ]
    assert scoring.balanced_allocation_nodes(req, allocated, alloc).tolist() == want
    if req.shape[0] == 2 and (alloc > 0).all():
        assert scoring.balanced_allocation_positive(req, allocated, alloc).tolist() == want
