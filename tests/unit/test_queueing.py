"""SchedulingQueue: step-by-step scenarios (each step an action, then the expected state) and a
hypothesis state machine checking the invariants over random sequences."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from builders import make_pod
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from hypothesis_budget import examples

from kopf_scheduler.core.framework.basics import QueuedPodInfo
from kopf_scheduler.core.framework.interface import ClusterEvent
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import parse_pod
from kopf_scheduler.core.plugins.inter_pod_affinity import InterPodAffinity
from kopf_scheduler.core.state.queueing import (
    ACTIVE,
    BACKOFF,
    EVENT_BACKOFF_COMPLETE,
    EVENT_POD_ADD,
    EVENT_SCHEDULE_ATTEMPT_FAILURE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    GATED,
    UNSCHEDULABLE,
    QueueingHints,
    SchedulingQueue,
    is_pod_updated,
)

NODE_ADD = "NodeAdd"


def pod(name: str, priority: int = 0, *, gates: tuple[str, ...] = ()) -> Pod:
    b = make_pod(name).priority(priority)
    if gates:
        b.spec["schedulingGates"] = [{"name": g} for g in gates]
    return b.obj()


def changed(p: Pod, **fields: Any) -> Pod:
    return dataclasses.replace(p, **fields)


def state(q: SchedulingQueue) -> dict[str, list[str]]:
    """Pod names per sub-queue (and in flight), sorted, for compact assertions."""
    out: dict[str, list[str]] = {ACTIVE: [], BACKOFF: [], UNSCHEDULABLE: [], GATED: [], "in_flight": []}
    for sub, infos in (
        (ACTIVE, q._active),
        (BACKOFF, q._backoff),
        (UNSCHEDULABLE, q._unschedulable),
        (GATED, q._gated),
    ):
        out[sub] = sorted(i.pod.name for i in infos.values())
    out["in_flight"] = sorted(f.info.pod.name for f in q._in_flight.values())
    return out


def expect(q: SchedulingQueue, **subs: list[str]) -> None:
    want = {ACTIVE: [], BACKOFF: [], UNSCHEDULABLE: [], GATED: [], "in_flight": []}
    want.update({k: sorted(v) for k, v in subs.items()})
    assert state(q) == want
    assert len(q) == sum(q.pending_counts().values())


def pop_name(q: SchedulingQueue, now: float) -> str | None:
    info = q.pop(now)
    return None if info is None else info.pod.name


def fail(q: SchedulingQueue, now: float, *, plugins: tuple[str, ...] = ("NodeResourcesFit",)) -> QueuedPodInfo:
    """Pop the head and report it unschedulable at ``now``."""
    info = q.pop(now)
    assert info is not None
    q.add_unschedulable(info, now, plugins=plugins)
    return info


# --------------------------------------------------------------------------- ordering


def test_priority_order_then_fifo_within_equal_priority() -> None:
    q = SchedulingQueue()
    q.add(pod("low1", 0), 0.0)
    q.add(pod("high", 100), 1.0)
    q.add(pod("low2", 0), 2.0)
    q.add(pod("mid", 10), 3.0)
    q.add(pod("low0", 0), -1.0)  # enqueued "earlier" by timestamp even though added last
    expect(q, active=["high", "low0", "low1", "low2", "mid"])
    assert [pop_name(q, 5.0) for _ in range(5)] == ["high", "mid", "low0", "low1", "low2"]
    assert pop_name(q, 5.0) is None
    expect(q, in_flight=["high", "low0", "low1", "low2", "mid"])


def test_same_timestamp_same_priority_pops_in_insertion_order() -> None:
    q = SchedulingQueue()
    for name in "abcdef":
        q.add(pod(name), 0.0)
    assert [pop_name(q, 0.0) for _ in range(6)] == list("abcdef")


def test_pluggable_less() -> None:
    # Lowest priority first, as a custom QueueSort could order.
    q = SchedulingQueue(less=lambda a, b: a.pod.priority < b.pod.priority)
    q.add(pod("p5", 5), 0.0)
    q.add(pod("p1", 1), 0.0)
    q.add(pod("p3", 3), 0.0)
    assert [pop_name(q, 0.0) for _ in range(3)] == ["p1", "p3", "p5"]


def test_update_in_active_reorders() -> None:
    q = SchedulingQueue()
    a, b = pod("a", 1), pod("b", 2)
    q.add(a, 0.0)
    q.add(b, 0.0)
    q.update(a, changed(a, priority=9), 1.0)
    expect(q, active=["a", "b"])
    info = q.pop(1.0)
    assert info is not None and info.pod.priority == 9
    assert pop_name(q, 1.0) == "b"


def test_requeued_pod_goes_behind_newer_pods_of_equal_priority() -> None:
    q = SchedulingQueue()
    q.add(pod("old"), 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.add(pod("new"), 5.0)
    q.add_backoff(info, 6.0)  # timestamp refreshed to 6.0; backoff 1 s -> expiry 7.0
    q.add(pod("later"), 6.5)
    # step: at 7.0 "old" (first added at 0.0) queues by its re-enqueue time 6.0: after "new" (5.0)
    assert [pop_name(q, 7.0) for _ in range(3)] == ["new", "old", "later"]
    assert info.added_at == 0.0 and info.timestamp == 6.0


# --------------------------------------------------------------------------- backoff


def test_backoff_doubles_and_caps_with_explicit_times() -> None:
    q = SchedulingQueue()  # 1 s initial, 10 s max
    p = pod("p")
    q.add(p, 0.0)
    now = 0.0
    # attempts: 1 -> 1 s, 2 -> 2 s, 3 -> 4 s, 4 -> 8 s, 5 -> 16 s capped at 10 s, 6 -> 10 s
    for attempts, backoff in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (6, 10.0)]:
        info = q.pop(now)
        assert info is not None and info.attempts == attempts
        q.add_backoff(info, now)
        expect(q, backoff=["p"])
        assert q.backoff_duration(info) == backoff
        assert q.next_ready_at(now) == now + backoff
        assert q.pop(now + backoff - 0.001) is None  # still backing off
        expect(q, backoff=["p"])
        now += backoff
    assert q.incoming[(ACTIVE, EVENT_BACKOFF_COMPLETE)] == 5


def test_backoff_is_configurable() -> None:
    q = SchedulingQueue(pod_initial_backoff=0.5, pod_max_backoff=3.0)
    info = QueuedPodInfo(pod("p"), timestamp=0.0, added_at=0.0)
    assert [q.backoff_duration(dataclasses.replace(info, attempts=a)) for a in range(7)] == [
        0.0,
        0.5,
        1.0,
        2.0,
        3.0,
        3.0,
        3.0,
    ]
    with pytest.raises(ValueError):
        SchedulingQueue(pod_initial_backoff=5.0, pod_max_backoff=1.0)


def test_backoff_queue_ordered_by_expiry() -> None:
    q = SchedulingQueue()
    q.add(pod("a", 0), 0.0)
    q.add(pod("b", 100), 0.0)
    b1 = q.pop(0.0)  # b, attempts 1
    a1 = q.pop(0.0)  # a, attempts 1
    assert b1 is not None and a1 is not None
    q.add_backoff(b1, 0.0)  # b: expiry 1.0
    b2 = q.pop(1.0)
    assert b2 is b1
    q.add_backoff(b2, 1.0)  # b: attempts 2 -> expiry 3.0
    q.add_backoff(a1, 1.5)  # a: attempts 1 -> expiry 2.5
    assert q.next_ready_at(1.5) == 2.5
    assert q.pop(2.6) is a1
    assert q.pop(2.9) is None
    assert q.next_ready_at(2.9) == 3.0
    assert q.pop(3.0) is b1


def test_flush_backoff_completed_without_pop() -> None:
    q = SchedulingQueue()
    q.add(pod("p"), 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.add_backoff(info, 10.0)
    assert q.flush_backoff_completed(10.9) == 0
    expect(q, backoff=["p"])
    assert q.flush_backoff_completed(11.0) == 1
    expect(q, active=["p"])


# --------------------------------------------------------------------------- unschedulable pool


def test_unschedulable_moved_by_cluster_event_active_or_backoff() -> None:
    q = SchedulingQueue()
    q.add(pod("a"), 0.0)
    q.add(pod("b"), 0.0)
    fail(q, 0.0)  # a fails at 0.0 (attempt 1, backoff until 1.0)
    fail(q, 5.0)  # b fails at 5.0 (attempt 1, backoff until 6.0)
    expect(q, unschedulable=["a", "b"])
    assert q.next_ready_at(5.0) == 300.0  # a's leftover deadline, nothing else would wake us
    # step: a node is added at 5.5: a's backoff is over -> active; b still backing off -> backoff
    assert q.move_all_to_active_or_backoff(NODE_ADD, 5.5) == 2
    expect(q, active=["a"], backoff=["b"])
    assert q.incoming[(ACTIVE, NODE_ADD)] == 1 and q.incoming[(BACKOFF, NODE_ADD)] == 1
    assert q.next_ready_at(5.5) == 5.5
    assert pop_name(q, 5.5) == "a"
    assert pop_name(q, 5.9) is None
    assert q.next_ready_at(5.9) == 6.0
    assert pop_name(q, 6.0) == "b"


def test_unschedulable_leftover_flush_after_five_minutes() -> None:
    q = SchedulingQueue()
    q.add(pod("a"), 0.0)
    q.add(pod("b"), 0.0)
    fail(q, 10.0)
    fail(q, 20.0)
    expect(q, unschedulable=["a", "b"])
    assert q.next_ready_at(30.0) == 310.0
    assert q.flush_unschedulable_leftover(309.9) == 0
    assert q.flush_unschedulable_leftover(310.0) == 1
    expect(q, active=["a"], unschedulable=["b"])
    assert q.incoming[(ACTIVE, EVENT_UNSCHEDULABLE_TIMEOUT)] == 1
    # step: pop flushes the leftover itself, so sleeping until next_ready_at never spins
    assert pop_name(q, 310.0) == "a"
    assert q.next_ready_at(310.0) == 320.0
    assert pop_name(q, 320.0) == "b"


def test_leftover_duration_configurable() -> None:
    q = SchedulingQueue(pod_max_in_unschedulable=60.0)
    q.add(pod("a"), 0.0)
    fail(q, 0.0)
    assert q.next_ready_at(0.0) == 60.0
    assert q.pop(59.0) is None
    assert pop_name(q, 60.0) == "a"


def test_move_request_during_attempt_sends_failure_to_backoff() -> None:
    q = SchedulingQueue()
    q.add(pod("a"), 0.0)
    q.add(pod("b"), 0.0)
    a = q.pop(0.0)
    assert a is not None
    # step: a node is added while "a" is being scheduled: "a" remembers it, and it may help "a"
    q.move_all_to_active_or_backoff(NODE_ADD, 0.1)
    q.add_unschedulable(a, 0.2)
    expect(q, active=["b"], backoff=["a"])
    assert q.incoming[(BACKOFF, EVENT_SCHEDULE_ATTEMPT_FAILURE)] == 1
    # step: "b" is popped after the event: nothing happened during its attempt, its failure goes to the pool
    b = q.pop(0.3)
    assert b is not None and b.pod.name == "b"
    q.add_unschedulable(b, 0.4)
    expect(q, backoff=["a"], unschedulable=["b"])
    assert q.incoming[(UNSCHEDULABLE, EVENT_SCHEDULE_ATTEMPT_FAILURE)] == 1


def test_unschedulable_update_spec_moves_status_only_does_not() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    fail(q, 0.0)
    expect(q, unschedulable=["p"])
    # step: our own PodScheduled=False status write comes back (status + resourceVersion only)
    status_only = changed(p, resource_version="7", phase="Pending", nominated_node_name="")
    assert not is_pod_updated(p, status_only)
    q.update(p, status_only, 0.5)
    expect(q, unschedulable=["p"])
    assert q.get(p).pod is status_only  # type: ignore[union-attr]
    # step: the user relaxes the node selector while p still backs off (until 1.0) -> backoff
    relaxed = changed(status_only, labels={"tier": "web"})
    q.update(status_only, relaxed, 0.6)
    expect(q, backoff=["p"])
    assert pop_name(q, 0.9) is None
    info = q.pop(1.0)
    assert info is not None and info.pod is relaxed
    # step: fails again at 1.0 (attempt 2, backoff until 3.0); updated at 5.0 -> straight to active
    q.add_unschedulable(info, 1.0)
    q.update(relaxed, changed(relaxed, labels={"tier": "db"}), 5.0)
    expect(q, active=["p"])


def test_assigned_pod_added_moves_only_matching_affinity() -> None:
    """InterPodAffinity's hint (upstream ``isSchedulableAfterAssignedPodChange``) for the pods it rejected."""
    q = SchedulingQueue(hints=QueueingHints([InterPodAffinity()]))
    wants_db = make_pod("wants-db").pod_affinity("kubernetes.io/hostname", {"app": "db"}).obj()
    wants_cache = make_pod("wants-cache").pod_affinity("kubernetes.io/hostname", {"app": "cache"}).obj()
    anti_db = make_pod("anti-db").pod_affinity("kubernetes.io/hostname", {"app": "db"}, anti=True).obj()
    preferred_db = make_pod("pref-db").pod_affinity("kubernetes.io/hostname", {"app": "db"}, weight=5).obj()
    other_ns = make_pod("other-ns", namespace="team-b").pod_affinity("kubernetes.io/hostname", {"app": "db"}).obj()
    plain = pod("plain")
    for p in (wants_db, wants_cache, anti_db, preferred_db, other_ns, plain):
        q.add(p, 0.0)
        fail(q, 0.0, plugins=("InterPodAffinity",))
    expect(q, unschedulable=["anti-db", "other-ns", "plain", "pref-db", "wants-cache", "wants-db"])
    db = make_pod("db").label(app="db").node("n1").obj()
    added = ClusterEvent.ASSIGNED_POD_ADD
    # step: a db pod is bound in "default": only the required affinity term in the same namespace matches
    assert q.move_all_to_active_or_backoff(added, 10.0, new=db) == 1
    expect(q, active=["wants-db"], unschedulable=["anti-db", "other-ns", "plain", "pref-db", "wants-cache"])
    assert q.incoming[(ACTIVE, added)] == 1
    web = make_pod("web").label(app="web").node("n1").obj()
    assert q.move_all_to_active_or_backoff(added, 10.0, new=web) == 0


def test_assigned_pod_added_during_attempt_counts_as_move_request_for_that_pod() -> None:
    """Events during an attempt are judged against the attempt's own rejectors when it fails."""
    q = SchedulingQueue(hints=QueueingHints([InterPodAffinity()]))
    wants_db = make_pod("wants-db").pod_affinity("kubernetes.io/hostname", {"app": "db"}).obj()
    q.add(wants_db, 0.0)
    q.add(pod("plain"), 0.0)
    w = q.pop(0.0)
    p = q.pop(0.0)
    assert w is not None and p is not None
    db = make_pod("db").label(app="db").node("n1").obj()
    q.move_all_to_active_or_backoff(ClusterEvent.ASSIGNED_POD_ADD, 0.1, new=db)
    q.add_unschedulable(w, 0.2, plugins=("InterPodAffinity",))
    q.add_unschedulable(p, 0.2, plugins=("InterPodAffinity",))
    expect(q, backoff=["wants-db"], unschedulable=["plain"])


# --------------------------------------------------------------------------- update / delete


def test_update_and_delete_while_queued() -> None:
    q = SchedulingQueue()
    a, b, c, g = pod("a"), pod("b"), pod("c"), pod("g", gates=("wait",))
    for p in (a, b, c, g):
        q.add(p, 0.0)
    info = q.pop(0.0)
    assert info is not None and info.pod is a
    q.add_backoff(info, 0.0)
    fail(q, 0.0)  # b -> unschedulable
    expect(q, active=["c"], backoff=["a"], unschedulable=["b"], gated=["g"])
    # step: updates in place keep each pod where it is (a status-only change for b)
    a2, b2 = changed(a, labels={"x": "1"}), changed(b, resource_version="9")
    q.update(a, a2, 0.5)
    q.update(b, b2, 0.5)
    expect(q, active=["c"], backoff=["a"], unschedulable=["b"], gated=["g"])
    assert q.get(a).pod is a2 and q.get(b).pod is b2  # type: ignore[union-attr]
    # step: deletes from every sub-queue
    for p in (a2, b2, c, g):
        q.delete(p)
    expect(q)
    assert a not in q and len(q) == 0
    assert q.pop(100.0) is None
    assert q.next_ready_at(100.0) is None


def test_update_of_unknown_pod_adds_it() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.update(None, p, 3.0)
    expect(q, active=["p"])
    assert q.incoming[(ACTIVE, EVENT_POD_ADD)] == 1
    q.add(changed(p, labels={"a": "b"}), 4.0)  # a re-add of a known pod is an update
    expect(q, active=["p"])


def test_delete_while_in_flight_drops_it_on_failure() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.delete(p)
    expect(q, in_flight=["p"])
    assert q.add_unschedulable(info, 1.0) is False
    expect(q)
    q.update(None, p, 2.0)  # a late, stale update re-adds as upstream does; the caller filters deleted pods
    q.delete(p)
    # the same for add_backoff after a bind error
    q.add(p2 := pod("p2"), 0.0)
    info2 = q.pop(0.0)
    assert info2 is not None
    q.delete(p2)
    assert q.add_backoff(info2, 1.0) is False
    expect(q)
    assert q.pop(100.0) is None


def test_update_while_in_flight_is_applied_on_requeue() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    info = q.pop(0.0)
    assert info is not None
    status_only = changed(p, resource_version="2")
    q.update(p, status_only, 0.1)
    expect(q, in_flight=["p"])
    assert info.pod is p  # the attempt keeps the version it started with
    q.add_unschedulable(info, 0.2)
    # status-only change: no reason to retry early -> pool, with the latest version
    expect(q, unschedulable=["p"])
    assert q.get(p).pod is status_only  # type: ignore[union-attr]

    q2 = SchedulingQueue()
    q2.add(p, 0.0)
    info = q2.pop(0.0)
    assert info is not None
    spec = changed(p, node_selector={"disk": "ssd"})
    q2.update(p, spec, 0.1)
    q2.add_unschedulable(info, 0.2)
    # the attempt judged the old spec: retry after the backoff instead of waiting for an event
    expect(q2, backoff=["p"])
    info = q2.pop(1.2)
    assert info is not None and info.pod is spec


def test_done_ends_attempt_and_discards_in_flight_update() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.update(p, changed(p, labels={"a": "1"}), 0.1)
    q.done(p)
    expect(q)
    q.done(p)  # idempotent
    assert q.next_ready_at(1.0) is None


def test_add_unschedulable_of_pending_pod_is_refused() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    info = q.get(p)
    assert info is not None
    assert q.add_unschedulable(info, 1.0) is False
    expect(q, active=["p"])


# --------------------------------------------------------------------------- gated pods


def test_gated_pods_never_pop_until_gates_removed() -> None:
    q = SchedulingQueue()
    g = pod("g", gates=("example.com/quota", "example.com/other"))
    q.add(g, 0.0)
    q.add(pod("p"), 0.0)
    expect(q, active=["p"], gated=["g"])
    assert q.pending_counts() == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}
    assert pop_name(q, 1.0) == "p"
    assert q.pop(1.0) is None
    assert q.next_ready_at(1.0) is None  # gated pods never wake the loop
    q.move_all_to_active_or_backoff(NODE_ADD, 2.0)
    expect(q, gated=["g"], in_flight=["p"])
    # step: one gate removed -> still gated
    g1 = changed(g, scheduling_gates=("example.com/other",))
    q.update(g, g1, 3.0)
    expect(q, gated=["g"], in_flight=["p"])
    assert q.get(g).initial_attempt_timestamp is None  # type: ignore[union-attr]
    # step: last gate removed -> active; the SLI clock starts now
    g2 = changed(g1, scheduling_gates=())
    q.update(g1, g2, 4.0)
    expect(q, active=["g"], in_flight=["p"])
    info = q.pop(4.0)
    assert info is not None and info.pod is g2
    assert (info.added_at, info.initial_attempt_timestamp, info.attempts) == (0.0, 4.0, 1)


# --------------------------------------------------------------------------- next_ready_at, nominations


def test_next_ready_at_values() -> None:
    q = SchedulingQueue()
    assert q.next_ready_at(0.0) is None
    q.add(pod("a"), 0.0)
    assert q.next_ready_at(0.0) == 0.0
    assert q.next_ready_at(7.0) == 7.0  # active non-empty: now
    info = q.pop(7.0)
    assert info is not None
    assert q.next_ready_at(7.0) is None  # only in flight
    q.add_backoff(info, 7.0)
    assert q.next_ready_at(7.0) == 8.0
    assert q.next_ready_at(9.0) == 9.0  # expiry already past: never earlier than now
    info = q.pop(9.0)
    assert info is not None
    q.add_unschedulable(info, 9.0)
    assert q.next_ready_at(9.0) == 309.0
    q.add(pod("b"), 10.0)
    info_b = q.pop(10.0)
    assert info_b is not None
    q.add_backoff(info_b, 10.0)
    assert q.next_ready_at(10.0) == 11.0  # the earlier of backoff expiry and leftover deadline


def test_nominated_pods_tracking() -> None:
    q = SchedulingQueue()
    p = pod("p", 10)
    q.add(p, 0.0)
    info = q.pop(0.0)
    assert info is not None
    # step: preemption nominates n1 in memory, then the failure requeues the pod
    q.add_nominated_pod(p, "n1")
    q.add_unschedulable(info, 0.0)
    assert q.nominated_pods_for_node("n1") == [p]
    # step: a status-only update without nominatedNodeName keeps the in-memory nomination
    p2 = changed(p, resource_version="2")
    q.update(p, p2, 1.0)
    assert q.nominated_pods_for_node("n1") == [p2]
    # step: the status now names n2
    p3 = changed(p2, nominated_node_name="n2")
    q.update(p2, p3, 2.0)
    assert q.nominated_pods_for_node("n1") == [] and q.nominated_pods_for_node("n2") == [p3]
    # step: a pod added with a nomination in its status; then deletes clear both
    other = changed(pod("o"), nominated_node_name="n2")
    q.add(other, 3.0)
    assert sorted(x.name for x in q.nominated_pods_for_node("n2")) == ["o", "p"]
    q.delete(p3)
    q.delete(other)
    assert q.nominated_pods_for_node("n2") == []
    # step: a scheduled pod (done) leaves the nominator
    q.add(n := changed(pod("n"), nominated_node_name="n3"), 4.0)
    assert q.pop(4.0) is not None
    assert q.nominated_pods_for_node("n3") == [n]
    q.done(n)
    assert q.nominated_pods_for_node("n3") == []


def test_heaps_stay_bounded_under_many_updates() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    cur = p
    for i in range(1000):
        nxt = changed(cur, priority=i)
        q.update(cur, nxt, float(i))
        cur = nxt
    assert len(q._active_heap) <= 130
    info = q.pop(1000.0)
    assert info is not None and info.pod is cur
    assert q.pop(1000.0) is None


# --------------------------------------------------------------------------- state machine


class QueueMachine(RuleBasedStateMachine):
    """Random queue traffic against a tiny model of what must hold."""

    def __init__(self) -> None:
        super().__init__()
        self.q = SchedulingQueue(pod_initial_backoff=1.0, pod_max_backoff=4.0, pod_max_in_unschedulable=20.0)
        self.now = 0.0
        self.n = 0
        self.pods: dict[str, Pod] = {}  # uid -> latest version, for pods the queue should know
        self.deleted: set[str] = set()
        self.in_flight: dict[str, QueuedPodInfo] = {}
        #: uid -> earliest time the pod may pop (its last failure + backoff)
        self.ready_at: dict[str, float] = {}

    @initialize()
    def start(self) -> None:
        pass

    @rule(priority=st.integers(0, 3), gated=st.booleans())
    def add(self, priority: int, gated: bool) -> None:
        self.n += 1
        p = pod(f"p{self.n}", priority, gates=("g",) if gated else ())
        self.q.add(p, self.now)
        self.pods[p.uid] = p

    @rule(dt=st.sampled_from([0.0, 0.3, 1.0, 2.5, 7.0, 25.0]))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule()
    def pop(self) -> None:
        info = self.q.pop(self.now)
        if info is None:
            assert self.q.pending_counts()[ACTIVE] == 0
            return
        uid = info.uid
        assert uid not in self.deleted, "a deleted pod popped"
        assert uid not in self.in_flight
        assert not info.pod.scheduling_gates, "a gated pod popped"
        assert self.now >= self.ready_at.get(uid, float("-inf")), "popped before its backoff expiry"
        self.in_flight[uid] = info

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), how=st.sampled_from(["unschedulable", "backoff", "done"]))
    def finish(self, data: st.DataObject, how: str) -> None:
        uid = data.draw(st.sampled_from(sorted(self.in_flight)))
        info = self.in_flight.pop(uid)
        if how == "done":
            self.q.done(info.pod)
            self.pods.pop(uid, None)
            return
        queued = (
            self.q.add_unschedulable(info, self.now) if how == "unschedulable" else self.q.add_backoff(info, self.now)
        )
        assert queued == (uid not in self.deleted)
        if queued:
            backoff = min(1.0 * 2 ** (info.attempts - 1), 4.0)
            self.ready_at[uid] = self.now + backoff
            assert info.pod is self.pods[uid], "the requeued info carries the latest version"

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data(), kind=st.sampled_from(["status", "spec", "ungate", "priority"]))
    def update(self, data: st.DataObject, kind: str) -> None:
        uid = data.draw(st.sampled_from(sorted(self.pods)))
        old = self.pods[uid]
        if kind == "status":
            new = changed(old, resource_version=str(self.n))
        elif kind == "spec":
            new = changed(old, labels={"v": str(self.n)})
        elif kind == "ungate":
            new = changed(old, scheduling_gates=())
        else:
            new = changed(old, priority=old.priority + 1)
        self.n += 1
        self.q.update(old, new, self.now)
        self.pods[uid] = new

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.pods)))
        self.q.delete(self.pods.pop(uid))
        self.deleted.add(uid)

    @rule(event=st.sampled_from(["NodeAdd", "PodDelete"]))
    def move_all(self, event: str) -> None:
        self.q.move_all_to_active_or_backoff(event, self.now)

    @rule()
    def flush(self) -> None:
        self.q.flush_unschedulable_leftover(self.now)
        self.q.flush_backoff_completed(self.now)

    @invariant()
    def at_most_one_sub_queue(self) -> None:
        subs = [
            set(self.q._active),
            set(self.q._backoff),
            set(self.q._unschedulable),
            set(self.q._gated),
            set(self.q._in_flight),
        ]
        total = sum(len(s) for s in subs)
        assert len(set().union(*subs)) == total

    @invariant()
    def counts_agree(self) -> None:
        assert len(self.q) == sum(self.q.pending_counts().values())
        # every pod the model knows is pending or in flight, and nothing else is
        pending = {p.uid for p in self.q.pending_pods()}
        assert pending | set(self.q._in_flight) == set(self.pods) | set(self.in_flight)
        assert set(self.q._in_flight) == set(self.in_flight)
        assert not (pending & self.deleted)

    @invariant()
    def gated_hold_gates(self) -> None:
        for info in self.q._gated.values():
            assert info.pod.scheduling_gates
        for sub in (self.q._active, self.q._backoff, self.q._unschedulable):
            for info in sub.values():
                assert not info.pod.scheduling_gates

    @invariant()
    def next_ready_at_is_sound(self) -> None:
        at = self.q.next_ready_at(self.now)
        if self.q.pending_counts()[ACTIVE]:
            assert at == self.now
        elif at is None:
            assert not self.q._backoff and not self.q._unschedulable
        else:
            assert at >= self.now


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(max_examples=examples(150), stateful_step_count=40, deadline=None)


# --------------------------------------------------------------------------- pod groups: pop_members and hold


def test_pop_members_takes_a_pod_groups_pending_pods_out_of_every_sub_queue_but_gated() -> None:
    q = SchedulingQueue(pod_initial_backoff=1, pod_max_backoff=10)
    active, backing, resting = (make_pod(n).obj() for n in ("active", "backing", "resting"))
    gated = dataclasses.replace(make_pod("gated").obj(), scheduling_gates=("wait",))
    for p, requeue in ((backing, q.add_backoff), (resting, q.add_unschedulable)):
        q.add(p, 0.0)
        info = q.pop(0.0)
        assert info is not None and info.pod is p
        requeue(info, 0.0)
    q.add(active, 0.0)
    q.add(gated, 0.0)
    assert (q.where(backing), q.where(resting)) == ("backoff", "unschedulable")
    taken = q.pop_members([active.uid, backing.uid, resting.uid, gated.uid, "unknown"], 0.0)
    assert sorted(i.pod.name for i in taken) == ["active", "backing", "resting"]
    assert all(q.where(p) == "in_flight" for p in (active, backing, resting)) and q.where(gated) == "gated"
    assert q.pop(100.0) is None  # their stale heap entries pop nothing
    assert [i.attempts for i in sorted(taken, key=lambda i: i.pod.name)] == [1, 2, 2]


def test_hold_keeps_a_pod_group_in_backoff_until_its_time_even_when_requeued_later() -> None:
    q = SchedulingQueue(pod_initial_backoff=1, pod_max_backoff=10)
    pending, flying = make_pod("pending").obj(), make_pod("flying").obj()
    q.add(flying, 0.0)
    q.add(pending, 0.0)
    info = q.pop(0.0)
    assert info is not None and info.pod.name == "flying"
    q.hold([pending.uid, flying.uid], 30.0)
    assert q.where(pending) == "backoff"
    q.add_unschedulable(info, 1.0)  # its attempt ends: held, so backoff rather than the pool
    assert q.where(flying) == "backoff"
    assert q.next_ready_at(1.0) == 30.0 and q.pop(29.9) is None
    assert {q.pop(30.0).pod.name, q.pop(30.0).pod.name} == {"pending", "flying"}  # type: ignore[union-attr]


def test_a_status_write_read_back_from_the_api_is_no_update_but_a_spec_change_is() -> None:
    """Parsed from real bodies (each keeps its ``source``): our own PodScheduled=False write comes back
    with a new resourceVersion and status only, and leaves the unschedulable pod where it is, as upstream's
    ``isPodUpdated`` strips status, resourceVersion, generation, managed fields and finalizers; a change
    of the container's image (no field of ``Pod`` of its own) is an update to it."""
    body = make_pod("p").uid("u-p").req(cpu="1").raw()
    body["metadata"].update(resourceVersion="5", generation=1)
    body["status"] = {"phase": "Pending"}
    q = SchedulingQueue()
    p = parse_pod(body)
    q.add(p, 0.0)
    fail(q, 0.0)
    written = copy.deepcopy(body)
    written["metadata"]["resourceVersion"] = "6"
    written["metadata"]["managedFields"] = [{"manager": "kopf-scheduler", "operation": "Update"}]
    written["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    status_only = parse_pod(written)
    assert not is_pod_updated(p, status_only)
    q.update(None, status_only, 0.5)
    expect(q, unschedulable=["p"])
    image = copy.deepcopy(written)
    image["metadata"]["resourceVersion"] = "7"
    image["spec"]["containers"][0]["image"] = "registry.example/other:2"
    assert is_pod_updated(status_only, parse_pod(image))
