"""SchedulingPolicy ownership and status without an API server: the rules as tables, then the
PolicyBook step by step (accept, reject keeping the last good profile, conflicts, hand-over)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kopf_scheduler.core.config.ownership import (
    Condition,
    PolicyBook,
    PolicyMeta,
    PolicyRecord,
    Serving,
    condition_of,
    owner_of,
    status_body,
    transition_time,
)
from kopf_scheduler.core.config.policy import FieldError
from kopf_scheduler.core.config.profile import Profile

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
T0_TEXT = "2030-01-02T03:04:05Z"
LATER = T0 + timedelta(minutes=5)
LATER_TEXT = "2030-01-02T03:09:05Z"
BAD = (FieldError("spec.priorities[1].name", "unknown priority 'Nope'"),)


def meta(name: str, scheduler: str = "s", *, generation: int = 1, created: str = "2030-01-01T00:00:00Z") -> PolicyMeta:
    return PolicyMeta(name, generation, created, f"uid-{name}", scheduler, {"schedulerName": scheduler})


def profile(scheduler: str = "s") -> Profile:
    return Profile(scheduler_name=scheduler)


def record(
    name: str,
    scheduler: str = "s",
    *,
    created: str = "2030-01-01T00:00:00Z",
    good: bool = True,
    errors: tuple[FieldError, ...] = (),
) -> PolicyRecord:
    r = PolicyRecord(meta(name, scheduler, created=created, generation=3), errors=errors)
    if good:
        r.profile, r.active_generation = profile(scheduler), 2
    return r


def condition(body: dict[str, Any] | Any) -> dict[str, Any]:
    (cond,) = body["conditions"]
    return dict(cond)


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("claimants", "expected"),
    [
        pytest.param([], None, id="nobody claims the name: no owner"),
        pytest.param(
            [("b", "2030-01-01T00:00:01Z"), ("a", "2030-01-01T00:00:02Z")], "b", id="the oldest creationTimestamp wins"
        ),
        pytest.param(
            [("b", "2030-01-01T00:00:01Z"), ("a", "2030-01-01T00:00:01Z")],
            "a",
            id="same second: the name breaks the tie",
        ),
        pytest.param(
            [("z", "2029-12-31T23:59:59Z"), ("a", "2030-01-01T00:00:00Z")],
            "z",
            id="RFC 3339 text sorts as time across a year",
        ),
    ],
)
def test_owner_is_the_oldest_claimant_then_by_name(claimants: list[tuple[str, str]], expected: str | None) -> None:
    owner = owner_of(record(name, created=created) for name, created in claimants)
    assert (owner.meta.name if owner else None) == expected


@pytest.mark.parametrize(
    ("errors", "owner", "status", "reason", "message"),
    [
        pytest.param(
            (),
            "self",
            "True",
            "Accepted",
            "serving schedulerName 's' with generation 3",
            id="valid and owner: accepted",
        ),
        pytest.param(
            (),
            "other",
            "False",
            "Conflict",
            "schedulerName 's' is already served by the older SchedulingPolicy 'old'",
            id="valid but an older policy owns the name: conflict naming it",
        ),
        pytest.param(
            BAD,
            "self",
            "False",
            "Invalid",
            "invalid fields: spec.priorities[1].name: spec.priorities[1].name: unknown priority 'Nope' "
            "(still serving generation 2)",
            id="invalid while serving: the last good generation stays in force and says so",
        ),
        pytest.param(
            BAD,
            "other",
            "False",
            "Invalid",
            "invalid fields: spec.priorities[1].name: spec.priorities[1].name: unknown priority 'Nope'",
            id="invalid and not serving: field errors win over the conflict",
        ),
    ],
)
def test_condition(errors: tuple[FieldError, ...], owner: str, status: str, reason: str, message: str) -> None:
    me = record("me", errors=errors)
    other = record("old")
    assert condition_of(me, me if owner == "self" else other) == Condition(status, reason, message)


def test_an_invalid_message_is_cut_to_the_condition_limit_keeping_its_suffix() -> None:
    me = record("me", errors=tuple(FieldError(f"spec.x{i}", "y" * 1000) for i in range(40)))
    message = condition_of(me, me).message
    assert len(message) == 32768 and message.endswith(" (still serving generation 2)")


@pytest.mark.parametrize(
    ("previous", "previous_time", "current", "expected"),
    [
        pytest.param(None, "", Condition("True", "Accepted", "m"), LATER_TEXT, id="first report: now"),
        pytest.param(
            Condition("True", "Accepted", "m"),
            T0_TEXT,
            Condition("True", "Accepted", "m2"),
            T0_TEXT,
            id="same status and reason, new message: kept",
        ),
        pytest.param(
            Condition("True", "Accepted", "m"),
            T0_TEXT,
            Condition("False", "Invalid", "m"),
            LATER_TEXT,
            id="status changed: now",
        ),
        pytest.param(
            Condition("False", "Invalid", "m"),
            T0_TEXT,
            Condition("False", "Conflict", "m"),
            LATER_TEXT,
            id="reason changed: now",
        ),
        pytest.param(
            Condition("True", "Accepted", "m"),
            "",
            Condition("True", "Accepted", "m"),
            LATER_TEXT,
            id="no time recorded yet: now",
        ),
    ],
)
def test_last_transition_time_moves_only_on_a_transition(
    previous: Condition | None, previous_time: str, current: Condition, expected: str
) -> None:
    assert transition_time(previous, previous_time, current, LATER) == expected


def test_status_body() -> None:
    body = status_body(
        meta("p", generation=4), Condition("True", "Accepted", "ok"), transition_time=T0_TEXT, active_generation=4
    )
    assert body == {
        "observedGeneration": 4,
        "activeGeneration": 4,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "ok",
                "lastTransitionTime": T0_TEXT,
                "observedGeneration": 4,
            }
        ],
    }
    # not serving: activeGeneration null, which a merge patch deletes
    assert (
        status_body(meta("p"), Condition("False", "Conflict", "x"), transition_time=T0_TEXT, active_generation=None)[
            "activeGeneration"
        ]
        is None
    )


# --------------------------------------------------------------------------- the book, step by step


def test_accept_then_edit_then_invalid_edit_keeps_the_last_good_profile() -> None:
    book = PolicyBook()
    first = profile()
    s = book.observe(meta("p", generation=1), first, now=T0)
    assert s.serve == (Serving("s", "p", 1, first),) and s.stop == ()
    assert condition(s.statuses["p"])["status"] == "True"
    assert s.statuses["p"]["activeGeneration"] == 1

    second = profile()
    s = book.observe(meta("p", generation=2), second, now=LATER)
    assert s.serve == (Serving("s", "p", 2, second),)  # a new generation: served anew
    assert condition(s.statuses["p"])["lastTransitionTime"] == T0_TEXT  # still Accepted: no transition
    assert condition(s.statuses["p"])["message"] == "serving schedulerName 's' with generation 2"

    s = book.observe(meta("p", generation=3), BAD, now=LATER)
    assert s.serve == () and s.stop == ()  # generation 2 stays in force
    assert book.serving["s"] == Serving("s", "p", 2, second)
    status = s.statuses["p"]
    assert (status["observedGeneration"], status["activeGeneration"]) == (3, 2)
    assert (condition(status)["reason"], condition(status)["lastTransitionTime"]) == ("Invalid", LATER_TEXT)

    s = book.observe(meta("p", generation=4), profile(), now=LATER + timedelta(seconds=1))
    assert [x.generation for x in s.serve] == [4]
    assert condition(s.statuses["p"])["reason"] == "Accepted"


def test_invalid_from_the_start_serves_nothing() -> None:
    book = PolicyBook()
    s = book.observe(meta("p"), BAD, now=T0)
    assert (s.serve, s.stop) == ((), ())
    assert s.statuses["p"]["activeGeneration"] is None
    assert condition(s.statuses["p"])["reason"] == "Invalid"
    assert book.served_by("p") is None


def test_two_claimants_older_wins_newer_takes_over_when_the_owner_goes() -> None:
    book = PolicyBook()
    a_profile, b_profile = profile(), profile()
    book.observe(meta("a", created="2030-01-01T00:00:01Z"), a_profile, now=T0)
    s = book.observe(meta("b", created="2030-01-01T00:00:02Z"), b_profile, now=T0)
    assert s.serve == ()  # a keeps serving
    assert list(s.statuses) == ["b"]  # a's status did not change: not rewritten
    assert condition(s.statuses["b"])["reason"] == "Conflict"
    assert s.statuses["b"]["activeGeneration"] is None
    assert book.served_by("a") is not None and book.served_by("b") is None

    s = book.delete("a", now=LATER)
    assert s.serve == (Serving("s", "b", 1, b_profile),)
    assert condition(s.statuses["b"]) | {"message": ""} == {
        "type": "Accepted",
        "status": "True",
        "reason": "Accepted",
        "message": "",
        "lastTransitionTime": LATER_TEXT,
        "observedGeneration": 1,
    }
    s = book.delete("b", now=LATER)
    assert (s.serve, s.stop, dict(s.statuses)) == ((), ("s",), {})  # pods of "s" stay Pending


def test_an_older_policy_that_moves_onto_a_name_takes_it_and_the_loser_is_told() -> None:
    book = PolicyBook()
    book.observe(meta("old", "x", created="2030-01-01T00:00:01Z"), profile("x"), now=T0)
    book.observe(meta("new", "s", created="2030-01-01T00:00:02Z"), profile("s"), now=T0)
    moved = profile("s")
    s = book.observe(meta("old", "s", generation=2, created="2030-01-01T00:00:01Z"), moved, now=LATER)
    assert s.serve == (Serving("s", "old", 2, moved),)
    assert s.stop == ("x",)  # nobody else claims "x"
    assert condition(s.statuses["new"])["reason"] == "Conflict"
    assert s.statuses["new"]["activeGeneration"] is None
    assert condition(s.statuses["old"])["reason"] == "Accepted"


def test_an_invalid_owner_keeps_its_name_against_a_newer_claimant() -> None:
    book = PolicyBook()
    book.observe(meta("a", created="2030-01-01T00:00:01Z"), profile(), now=T0)
    book.observe(meta("b", created="2030-01-01T00:00:02Z"), profile(), now=T0)
    s = book.observe(meta("a", generation=2, created="2030-01-01T00:00:01Z"), BAD, now=LATER)
    assert s.serve == () and book.serving["s"].policy == "a"
    assert list(s.statuses) == ["a"]  # b is still in Conflict: nothing new to write
    assert s.statuses["a"]["activeGeneration"] == 1


def test_observing_the_same_generation_again_rewrites_only_its_own_status() -> None:
    book = PolicyBook()
    book.observe(meta("p"), profile(), now=T0)
    s = book.observe(meta("p"), profile(), now=LATER)  # e.g. Kopf resumes it
    assert s.serve == ()  # same policy, same generation: nothing to restart
    assert condition(s.statuses["p"])["lastTransitionTime"] == T0_TEXT


def test_deleting_an_unknown_or_never_valid_policy_does_nothing() -> None:
    book = PolicyBook()
    assert book.delete("ghost", now=T0).statuses == {}
    book.observe(meta("p"), BAD, now=T0)
    s = book.delete("p", now=T0)
    assert (s.serve, s.stop, dict(s.statuses)) == ((), (), {})
    assert book.records == {}
