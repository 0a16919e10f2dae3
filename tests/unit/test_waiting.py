"""WaitingPods (upstream's waitingPodsMap) step by step: allow, reject, deadlines as data."""

from __future__ import annotations

import pytest
from builders import make_pod

from kopf_scheduler.core.framework.basics import Code, Status
from kopf_scheduler.core.framework.waiting import WaitingPods, go_duration, timeout_message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(300, "5m0s", id="five minutes, as upstream's permitTimeoutDuration prints"),
        pytest.param(30, "30s", id="seconds only"),
        pytest.param(1.5, "1.5s", id="a fraction"),
        pytest.param(3725, "1h2m5s", id="hours"),
        pytest.param(0, "0s", id="zero"),
    ],
)
def test_durations_read_as_go_prints_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_a_pod_waits_until_every_waiting_plugin_allowed_it() -> None:
    waiting: WaitingPods[str] = WaitingPods()
    pod = make_pod("a").node("n1").obj()
    waiting.add(pod, "n1", "payload", {"A": 10.0, "B": 20.0}, now=100.0)
    waiting.allow(pod.uid, "A")
    assert waiting.get(pod.uid) is not None and waiting.take_settled() == []  # B has not allowed yet
    waiting.allow(pod.uid, "B")
    assert waiting.get(pod.uid) is None  # settled: no longer waiting
    [done] = waiting.take_settled()
    assert done.outcome is not None and done.outcome.is_success and done.payload == "payload"
    assert len(waiting) == 0


def test_the_first_verdict_wins() -> None:
    waiting: WaitingPods[None] = WaitingPods()
    pod = make_pod("a").obj()
    waiting.add(pod, "n1", None, {"Gang": 10.0}, now=0.0)
    waiting.reject(pod.uid, "Gang", "no")
    waiting.allow(pod.uid, "Gang")  # too late
    waiting.reject(pod.uid, "Other", "later")
    [done] = waiting.take_settled()
    assert done.outcome is not None and done.outcome.code is Code.UNSCHEDULABLE
    assert (done.outcome.plugin, done.outcome.message) == ("Gang", "no")


def test_deadlines_are_data_and_expire_only_when_due() -> None:
    waiting: WaitingPods[None] = WaitingPods()
    a, b = make_pod("a").obj(), make_pod("b").obj()
    waiting.add(a, "n1", None, {"Gang": 30.0}, now=100.0)  # deadline 130
    waiting.add(b, "n2", None, {"Gang": 5.0, "Other": 60.0}, now=110.0)  # earliest deadline 115
    assert waiting.next_deadline() == 115.0
    assert waiting.expired(114.9) == []
    [(w, plugin, seconds)] = waiting.expired(115.0)
    assert (w.pod.uid, plugin, seconds) == (b.uid, "Gang", 5.0)
    assert waiting.get(b.uid) is not None  # expired() names it; the runtime rejects it
    waiting.reject(b.uid, plugin, timeout_message(seconds, plugin))
    assert waiting.next_deadline() == 130.0  # a settled pod has no deadline any more
    [done] = waiting.take_settled()
    assert (
        done.outcome is not None and done.outcome.message == "rejected due to timeout after waiting 5s at plugin Gang"
    )


def test_a_wait_longer_than_fifteen_minutes_is_capped() -> None:
    waiting: WaitingPods[None] = WaitingPods()
    pod = make_pod("a").obj()
    waiting.add(pod, "n1", None, {"Gang": 3600.0}, now=0.0)
    assert waiting.next_deadline() == 900.0  # upstream maxTimeout


def test_removed_pods_are_forgotten_whatever_their_state() -> None:
    waiting: WaitingPods[None] = WaitingPods()
    pod = make_pod("a").obj()
    waiting.add(pod, "n1", None, {"Gang": 10.0}, now=0.0)
    assert waiting.remove(pod.uid) is not None
    assert list(waiting) == [] and waiting.next_deadline() is None and waiting.take_settled() == []


def test_a_preempted_pod_settles_at_once_with_an_error_and_later_verdicts_change_nothing() -> None:
    """Upstream ``waitingPod.Preempt``: not a rejection (the pod is not unschedulable), the first verdict."""
    waiting: WaitingPods[None] = WaitingPods()
    pod = make_pod("member").obj()
    waiting.add(pod, "n1", None, {"Gang": 30.0}, now=0.0)
    assert waiting.preempt(pod.uid, "DefaultPreemption", "preempted")
    assert not waiting.preempt(pod.uid, "DefaultPreemption", "preempted")  # it no longer waits
    waiting.allow(pod.uid, "Gang")
    [settled] = waiting.take_settled()
    assert settled.outcome == Status(Code.ERROR, ("preempted",), "DefaultPreemption")
