"""The attempt log (core/scheduling/attempts.py): what is kept, the byte estimate, and the three bounds (count,
bytes, age)."""

from __future__ import annotations

import numpy as np
from builders import make_pod

from kopf_scheduler.core.framework.basics import Code, CycleState, QueuedPodInfo, Status, unresolvable
from kopf_scheduler.core.framework.diagnosis import Diagnosis
from kopf_scheduler.core.framework.interface import Candidate, PostFilterResult
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling.algorithm import ScheduleResult
from kopf_scheduler.core.scheduling.attempts import MAX_AGE_SECONDS, AttemptLog, estimated_bytes
from kopf_scheduler.core.scheduling.cycle import Bind, BindingPlan, Error, Skip, Unschedulable

NODES = ("n0", "n1", "n2", "n3")


def info(name: str, *, attempts: int = 1) -> QueuedPodInfo:
    return QueuedPodInfo(make_pod(name).obj(), timestamp=0.0, added_at=0.0, attempts=attempts)


def bound(pod: Pod, node: str = "n0") -> Bind:
    """Scored on n0 and n1 with one plugin."""
    result = ScheduleResult(
        node, Diagnosis(num_all_nodes=4), evaluated_nodes=2, feasible_nodes=2, node_names=NODES,
        scored=np.array([0, 1]), totals=np.array([7, 5]), plugin_scores=[("P", 1, np.array([7, 5]), np.array([7, 5]))],
    )  # fmt: skip
    return Bind(pod.with_node(node), node, CycleState(), BindingPlan((), (), ()), result=result)


def unschedulable(rejected: int = 4, verdict: PostFilterResult | None = None) -> Unschedulable:
    """Rejected on the first `rejected` nodes."""
    diagnosis = Diagnosis(
        num_all_nodes=4,
        node_to_status={n: Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "F") for n in NODES[:rejected]},
    )
    result = ScheduleResult(None, diagnosis, evaluated_nodes=4, node_names=NODES, post_filter=verdict)
    return Unschedulable(result.message, frozenset({"F"}), result=result)


def test_the_byte_estimate_counts_rejected_and_scored_nodes() -> None:
    # a record 512, 4 rejected nodes x 128, nothing scored
    assert estimated_bytes(unschedulable(4).result) == 512 + 4 * 128
    # 2 scored nodes x (16 + 1 plugin x 16)
    assert estimated_bytes(bound(make_pod("p").obj()).result) == 512 + 2 * (16 + 16)
    assert estimated_bytes(None) == 512  # an algorithm that raised: just the message


def test_the_last_attempt_is_explained_with_its_context_and_age() -> None:
    log = AttemptLog()
    first = info("web", attempts=1)
    log.record(first, unschedulable(), scheduler_name="s", now=10.0)
    log.record(info("web", attempts=2), bound(first.pod), scheduler_name="s", now=12.0)
    e = log.explanation("default", "web", now=15.5)
    assert e is not None
    assert (e.outcome, e.node, e.scheduler_name, e.attempts, e.age_seconds) == ("scheduled", "n0", "s", 2, 3.5)
    assert [(v.node, v.result, v.total) for v in e.nodes] == [("n0", "chosen", 7), ("n1", "feasible", 5)]
    assert e.not_evaluated == ("n2", "n3")
    assert len(log) == 1 and log.explanation("default", "other", now=15.5) is None


def test_a_skip_is_no_attempt() -> None:
    log = AttemptLog()
    log.record(info("p"), Skip("already bound"), scheduler_name="s", now=0.0)
    assert len(log) == 0 and log.bytes == 0


def test_an_error_without_a_result_keeps_its_message() -> None:
    log = AttemptLog()
    log.record(info("p"), Error("internal error: KeyError('x')"), scheduler_name="s", now=0.0)
    e = log.explanation("default", "p", now=0.0)
    assert e is not None and (e.outcome, e.message, e.nodes) == ("error", "internal error: KeyError('x')", ())


def test_records_age_out() -> None:
    log = AttemptLog()
    log.record(info("old"), unschedulable(), scheduler_name="s", now=0.0)
    log.record(info("new"), unschedulable(), scheduler_name="s", now=100.0)
    assert log.get("default", "old", now=MAX_AGE_SECONDS - 1) is not None
    assert log.get("default", "old", now=MAX_AGE_SECONDS + 1) is None  # 600 s after its attempt
    assert log.get("default", "new", now=MAX_AGE_SECONDS + 1) is not None
    assert len(log) == 1 and log.bytes == 512 + 4 * 128


def test_the_count_bound_pushes_out_the_oldest_record_first() -> None:
    log = AttemptLog(max_pending=2)
    for t, name in enumerate(("a", "b", "c")):
        log.record(info(name), unschedulable(), scheduler_name="s", now=float(t))
    assert [n for n in "abc" if log.get("default", n, now=3.0)] == ["b", "c"]
    # recording "b" again makes it the newest: "c" goes next
    log.record(info("b"), unschedulable(), scheduler_name="s", now=4.0)
    log.record(info("d"), unschedulable(), scheduler_name="s", now=5.0)
    assert [n for n in "abcd" if log.get("default", n, now=5.0)] == ["b", "d"]


def test_the_byte_bound_pushes_out_the_oldest_records_until_the_rest_fits() -> None:
    # each record: 512 + 4 x 128 = 1024 bytes; 2500 bytes hold two
    log = AttemptLog(max_pending_bytes=2500)
    for t, name in enumerate(("a", "b", "c")):
        log.record(info(name), unschedulable(), scheduler_name="s", now=float(t))
    assert [n for n in "abc" if log.get("default", n, now=3.0)] == ["b", "c"] and log.bytes == 2048
    # a small record (1 rejected node: 640 bytes) fits beside them: 2688 > 2500 pushes out "b" only
    log.record(info("d"), unschedulable(rejected=1), scheduler_name="s", now=4.0)
    assert [n for n in "abcd" if log.get("default", n, now=4.0)] == ["c", "d"] and log.bytes == 1024 + 640


def test_a_stream_of_bound_pods_never_pushes_out_the_pending_ones() -> None:
    log = AttemptLog(max_pending=1, max_bound=2)
    log.record(info("pending"), unschedulable(), scheduler_name="s", now=0.0)
    for t in range(10):
        pod = info(f"bound-{t}")
        log.record(pod, bound(pod.pod), scheduler_name="s", now=float(t))
    assert log.get("default", "pending", now=10.0) is not None
    assert [t for t in range(10) if log.get("default", f"bound-{t}", now=10.0)] == [8, 9]


def test_a_pod_moves_between_the_pools_as_it_binds() -> None:
    log = AttemptLog(max_pending=1, max_bound=1)
    web, other = info("web"), info("other")
    log.record(web, unschedulable(), scheduler_name="s", now=0.0)
    log.record(web, bound(web.pod), scheduler_name="s", now=1.0)  # leaves the pending pool...
    log.record(other, unschedulable(), scheduler_name="s", now=2.0)  # ...so this one does not push it out
    assert log.get("default", "web", now=2.0) is not None and log.get("default", "other", now=2.0) is not None
    assert len(log) == 2


def test_the_attempt_after_a_preemption_still_shows_what_preemption_considered() -> None:
    victim = make_pod("victim").priority(1).obj()
    found = Status(
        Code.SUCCESS,
        ("preemption: found a potential placement for pod on node n1, preempting 1 victims",),
        "DefaultPreemption",
    )
    verdict = PostFilterResult(
        found,
        "n1",
        (victim,),
        (Candidate("n1", (victim,)),),
        {"n0": unresolvable("No preemption victims found for incoming pod")},
    )
    log = AttemptLog()
    web = info("web")
    log.record(web, unschedulable(verdict=verdict), scheduler_name="s", now=0.0)
    log.record(web, unschedulable(), scheduler_name="s", now=1.0)  # waiting for the victim to go
    log.record(web, bound(web.pod, "n1"), scheduler_name="s", now=2.0)
    e = log.explanation("default", "web", now=2.0)
    assert e is not None and e.node == "n1" and e.preemption is not None
    assert (e.preemption.nominated_node, [v.pod for v in e.preemption.victims]) == ("n1", ["default/victim"])
    assert [(n.node, n.candidate) for n in e.preemption.nodes] == [("n1", True), ("n0", False)]
    # the carried attempt counts in the bytes: 512 + 2 x 32 for the bind, 512 + 4 x 128 for the preempting one
    assert log.bytes == 576 + 1024
    # an attempt that runs preemption itself shows its own verdict
    log.record(
        web,
        unschedulable(verdict=PostFilterResult(unresolvable("preemption: not eligible"), "")),
        scheduler_name="s",
        now=3.0,
    )
    again = log.explanation("default", "web", now=3.0)
    assert again is not None and again.preemption is not None and again.preemption.nodes == ()
