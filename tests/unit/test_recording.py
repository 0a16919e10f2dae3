"""The FailedScheduling repeat limit and the PodScheduled condition memo: plain numbers for time,
step by step, and their bounds on memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kopf_scheduler.core.framework.recording import STAGE_PERMIT, ConditionMemo, RepeatLimiter

# --------------------------------------------------------------------------- RepeatLimiter


@pytest.mark.parametrize(
    ("sends", "expected"),
    [
        pytest.param([("u", "Scheduling", 0.0)], [True], id="a first event goes out"),
        pytest.param(
            [("u", "Scheduling", 0.0), ("u", "Scheduling", 29.9)], [True, False], id="another 29.9 s later is dropped"
        ),
        pytest.param(
            [("u", "Scheduling", 0.0), ("u", "Scheduling", 30.0)], [True, True], id="30 s later it goes out again"
        ),
        pytest.param(
            [("u", "Scheduling", 0.0), ("u", "Scheduling", 1.0)],
            [True, False],
            id="whatever its message: '0/2455 nodes' then '0/3532 nodes' while nodes join is one event "
            "(upstream's key has no note)",
        ),
        pytest.param(
            [("u", "Scheduling", 0.0), ("u", "Binding", 1.0)],
            [True, True],
            id="a binding failure is another series (the action is in the key)",
        ),
        pytest.param([("u", "Scheduling", 0.0), ("v", "Scheduling", 1.0)], [True, True], id="another pod's goes out"),
        pytest.param(
            [("u", "Scheduling", 0.0), ("u", "Scheduling", 10.0), ("u", "Scheduling", 31.0), ("u", "Scheduling", 40.0)],
            [True, False, True, False],
            id="a dropped repeat does not restart the interval (0 -> 31 goes out, 40 is within 31 + 30)",
        ),
    ],
)
def test_repeat_limiter(sends: list[tuple[str, str, float]], expected: list[bool]) -> None:
    limiter = RepeatLimiter(interval=30.0)
    assert [limiter.allow(uid, action, now) for uid, action, now in sends] == expected


def test_repeat_limiter_forgets_what_has_expired() -> None:
    limiter = RepeatLimiter(interval=30.0)
    for i in range(100):
        limiter.allow(f"pod-{i}", "m", float(i) / 10)  # 100 pods within 10 s
    assert len(limiter) == 100
    limiter.allow("late", "m", 45.0)  # everything sent before 15 s has expired
    assert len(limiter) == 1


def test_repeat_limiter_is_bounded_and_drops_the_oldest_first() -> None:
    limiter = RepeatLimiter(interval=30.0, capacity=3)
    for uid in "abcd":
        assert limiter.allow(uid, "m", 0.0)
    assert len(limiter) == 3
    assert limiter.allow("a", "m", 1.0) is True  # "a" was evicted: one repeated event, never a missed one
    assert limiter.allow("d", "m", 1.0) is False


# --------------------------------------------------------------------------- ConditionMemo


def test_condition_memo_writes_only_when_the_message_changes() -> None:
    memo = ConditionMemo()
    assert memo.should_write("u", "0/3 nodes are available: 3 Insufficient cpu.") is True
    assert memo.should_write("u", "0/3 nodes are available: 3 Insufficient cpu.") is False
    assert memo.should_write("u", "0/4 nodes are available: 4 Insufficient cpu.") is True
    assert memo.should_write("v", "0/4 nodes are available: 4 Insufficient cpu.") is True


def test_condition_memo_after_a_failed_write_writes_again() -> None:
    memo = ConditionMemo()
    memo.should_write("u", "a")
    memo.write_failed("u", "a")
    assert memo.should_write("u", "a") is True


def test_condition_memo_a_stale_failure_does_not_erase_a_newer_write() -> None:
    memo = ConditionMemo()
    memo.should_write("u", "a")
    memo.should_write("u", "b")  # a newer message went out while the first write was in flight
    memo.write_failed("u", "a")
    assert memo.should_write("u", "b") is False


def test_condition_memo_forgets_settled_pods_and_is_bounded() -> None:
    memo = ConditionMemo(capacity=2)
    memo.should_write("u", "a")
    memo.forget("u")
    assert len(memo) == 0 and memo.should_write("u", "a") is True
    memo.should_write("v", "a")
    memo.should_write("u", "a")  # touching "u" makes "v" the least recently used
    memo.should_write("w", "a")
    assert len(memo) == 2
    assert memo.should_write("u", "a") is False and memo.should_write("v", "a") is True


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: RepeatLimiter(capacity=0), id="limiter without room"),
        pytest.param(lambda: RepeatLimiter(interval=-1), id="limiter with a negative interval"),
        pytest.param(lambda: ConditionMemo(capacity=0), id="memo without room"),
    ],
)
def test_nonsense_settings_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()


def test_a_rejection_at_permit_is_a_series_of_its_own() -> None:
    limiter = RepeatLimiter(interval=30.0)
    assert limiter.allow("u", "Scheduling", 0.0)  # the filters: too few gang members yet
    assert limiter.allow("u", "Scheduling", 5.0, stage=STAGE_PERMIT)  # the gang did not gather: said too
    assert not limiter.allow("u", "Scheduling", 9.0, stage=STAGE_PERMIT)  # but not again within the interval
    assert not limiter.allow("u", "Scheduling", 9.0)
