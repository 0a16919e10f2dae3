"""Gang scheduling without an API server: the two gang plugins (both PodGroup APIs) through the
cycle's Reserve, Permit and waiting pods, with time as an argument."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from builders import make_coscheduling_group, make_node, make_pod, make_pod_group

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.objects import Pod, PodGroup
from kopf_scheduler.core.plugins.coscheduling import Coscheduling
from kopf_scheduler.core.plugins.gang_scheduling import GangScheduling
from kopf_scheduler.core.scheduling import routing
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.cycle import (
    Bind,
    CycleContext,
    Group,
    Parked,
    Unschedulable,
    Wait,
    schedule_one,
    settle_waiting,
)
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from kopf_scheduler.core.toolkit.gangs import pod_group_status

T0 = 1000.0
TIMEOUT = 30


class Served:
    def __init__(self, queue: SchedulingQueue) -> None:
        self.queue = queue


class Cluster:
    """Nodes of 1 cpu, one served scheduler name with the default profile, the waiting pods."""

    def __init__(self, nodes: int, *groups: PodGroup, wait: int = TIMEOUT, **gang: int) -> None:
        profile = validate_policy({"schedulerName": "s", "gangScheduling": {"permitWaitingTimeSeconds": wait, **gang}})
        assert isinstance(profile, Profile)
        self.scheduler = GenericScheduler(profile)
        self.cache = SchedulerCache()
        for i in range(nodes):
            self.cache.add_node(make_node(f"n{i}").capacity(cpu="1", memory="4Gi", pods="10").obj())
        for group in groups:
            routing.route_object("PodGroup", group.key, group, cache=self.cache, served={}, now=T0)
        self.queue = SchedulingQueue()
        self.served = {"s": Served(self.queue)}
        self.waiting: WaitingPods[Parked] = WaitingPods()
        self.snapshot = Snapshot(self.cache.objects)

    def create(self, *pods: Pod) -> None:
        for pod in pods:
            routing.route_unassigned_pod(
                pod, gone=False, cache=self.cache, pending=routing.PendingPods(), served=self.served, now=T0
            )

    def attempt(self, now: float = T0) -> object:
        info = self.queue.pop(now)
        assert info is not None
        ctx = CycleContext(self.scheduler, self.cache, self.queue, self.waiting, random.Random(1), now)
        return schedule_one(info, self.snapshot, ctx)

    def assumed(self) -> int:
        return self.cache.assumed_count()


def workload_gang(name: str, n: int, cpu: str = "1") -> list[Pod]:
    return [make_pod(f"{name}-{i}").scheduler("s").scheduling_group(name).req(cpu=cpu).obj() for i in range(n)]


def coscheduling_gang(name: str, n: int, cpu: str = "1") -> list[Pod]:
    return [make_pod(f"{name}-{i}").scheduler("s").pod_group(name).req(cpu=cpu).obj() for i in range(n)]


# --------------------------------------------------------------------------- PreFilter


@pytest.mark.parametrize(
    ("plugin", "groups", "pods", "code", "message"),
    [
        pytest.param(
            GangScheduling,
            [],
            workload_gang("g", 1),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            'waiting for pods\'s pod group "g" to appear in scheduling queue',
            id="workload: no PodGroup yet",
        ),
        pytest.param(
            GangScheduling,
            [make_pod_group("g", 4)],
            workload_gang("g", 3),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "waiting for minCount pods from a gang to appear in scheduling queue",
            id="workload: 3 members of a gang of 4",
        ),
        pytest.param(
            GangScheduling,
            [make_pod_group("g", 4)],
            workload_gang("g", 4),
            Code.SKIP,
            "",
            id="workload: 4 of 4 go on (the filter is skipped)",
        ),
        pytest.param(
            GangScheduling,
            [make_pod_group("g", 4, basic=True)],
            workload_gang("g", 1),
            Code.SKIP,
            "",
            id="workload: a basic policy is no gang",
        ),
        pytest.param(
            GangScheduling,
            [],
            coscheduling_gang("g", 1),
            Code.SKIP,
            "",
            id="workload: a coscheduling member is not its business",
        ),
        pytest.param(
            Coscheduling,
            [make_coscheduling_group("g", 4)],
            coscheduling_gang("g", 2),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "pre-filter pod g-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 4",
            id="coscheduling: 2 of 4",
        ),
        pytest.param(
            Coscheduling,
            [make_coscheduling_group("g", 2)],
            coscheduling_gang("g", 2),
            Code.SKIP,
            "",
            id="coscheduling: 2 of 2",
        ),
        pytest.param(
            Coscheduling,
            [],
            coscheduling_gang("g", 1),
            Code.SKIP,
            "",
            id="coscheduling: no PodGroup passes here (Permit rejects it)",
        ),
    ],
)
def test_a_gang_is_not_tried_before_it_has_its_minimum_of_members(
    plugin: Any, groups: list[PodGroup], pods: list[Pod], code: Code, message: str
) -> None:
    cluster = Cluster(1, *groups)
    cluster.create(*pods)
    cluster.cache.update_snapshot(cluster.snapshot)
    status = plugin().pre_filter(CycleState(), pods[0], cluster.snapshot)
    assert (status.code, status.message) == (code, message)


# --------------------------------------------------------------------------- Permit and the waiting pods


def test_a_coscheduling_gang_of_4_that_fits_waits_until_the_fourth_member_then_binds_together() -> None:
    cluster = Cluster(4, make_coscheduling_group("train", 4))
    cluster.create(*coscheduling_gang("train", 4))
    outcomes = [cluster.attempt(T0 + i) for i in range(4)]
    # members 1..3 are assumed (each holds its node) and wait; the 4th completes the gang
    assert [type(o) for o in outcomes] == [Wait, Wait, Wait, Bind]
    assert cluster.assumed() == 4
    settled = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0 + 4)
    assert sorted(a.pod.name for a in settled.allowed) == ["train-0", "train-1", "train-2"]
    assert settled.rejected == () and len(cluster.waiting) == 0
    assert {a.node for a in settled.allowed} | {outcomes[3].node} == {"n0", "n1", "n2", "n3"}  # type: ignore[attr-defined]


def test_a_coscheduling_gang_of_4_where_3_fit_is_turned_down_by_post_filter_at_once() -> None:
    """scheduler-plugins' PostFilter: the member that fits nowhere rejects the waiting ones; nothing is
    held until the deadline."""
    group = make_coscheduling_group("train", 4, timeout=TIMEOUT)
    pods = coscheduling_gang("train", 4)
    cluster = Cluster(3, group)
    cluster.create(*pods)
    outcomes = [cluster.attempt(T0) for _ in range(4)]
    assert [type(o) for o in outcomes] == [Wait, Wait, Wait, Unschedulable]  # 3 nodes of 1 cpu, 4 pods of 1 cpu
    last = outcomes[3]
    assert isinstance(last, Unschedulable)
    assert last.message == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod., "
        "PodGroup default/train gets rejected due to Pod train-3 is unschedulable even after PostFilter"
    )
    assert len(list(cluster.waiting)) == 0  # every waiting member is rejected already; the executor settles them
    settled = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0)
    assert sorted(r.pod.name for r in settled.rejected) == ["train-0", "train-1", "train-2"]
    assert {(r.status.plugin, r.status.message) for r in settled.rejected} == {
        ("Coscheduling", "optimistic rejection in PostFilter")
    }
    assert cluster.assumed() == 0 and cluster.cache.pod_count() == 0  # every reservation released
    assert all(cluster.queue.where(p) == UNSCHEDULABLE for p in pods)
    # the released room moves other pods, not the gang: it rests together until something changes
    assert settled.keep == {p.uid for p in pods}


def test_a_coscheduling_gang_within_the_reject_percentage_waits_out_its_deadline() -> None:
    """A gap of at most podGroupRejectPercentage of minMember (here 1 of 4, 25%) leaves the gang
    alone: the members that fit wait, then time out with how many fit."""
    group = make_coscheduling_group("train", 4, timeout=TIMEOUT)
    pods = coscheduling_gang("train", 4)
    cluster = Cluster(3, group, podGroupRejectPercentage=25)
    cluster.create(*pods)
    outcomes = [cluster.attempt(T0) for _ in range(4)]
    assert [type(o) for o in outcomes] == [Wait, Wait, Wait, Unschedulable]
    assert "gets rejected" not in outcomes[3].message  # type: ignore[attr-defined]
    early = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0 + TIMEOUT - 0.1)
    assert early.allowed == early.rejected == () and cluster.assumed() == 3
    late = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0 + TIMEOUT)
    assert sorted(r.pod.name for r in late.rejected) == ["train-0", "train-1", "train-2"]
    for r in late.rejected:  # one message per member, with how many of the gang fit
        assert (r.status.plugin, r.status.message) == (
            "Coscheduling",
            "gang default/train: only 3 of the 4 pods it needs fit; none is bound and every reservation is released",
        )
        assert r.gangs == (group.key,)
    assert cluster.assumed() == 0 and cluster.cache.pod_count() == 0


def test_a_coscheduling_podgroup_turned_down_backs_off_as_a_whole() -> None:
    pods = coscheduling_gang("train", 4)
    cluster = Cluster(3, make_coscheduling_group("train", 4), podGroupBackoffSeconds=20)
    cluster.create(*pods)
    for _ in range(4):
        cluster.attempt(T0)
    settle_waiting(cluster.waiting, cache=cluster.cache, now=T0)
    assert all(cluster.queue.where(p) == BACKOFF for p in pods)  # held, not resting for an event
    routing.broadcast(routing.EVENT_NODE_ADD, cluster.served, T0 + 1)
    assert cluster.queue.pop(T0 + 19.9) is None
    assert cluster.queue.next_ready_at(T0 + 1) == T0 + 20
    assert cluster.queue.pop(T0 + 20) is not None


# --------------------------------------------------------------------------- the pod-group cycle (Workload API)


def test_a_workload_gang_of_4_that_fits_is_decided_in_one_cycle_and_bound_whole() -> None:
    cluster = Cluster(4, make_pod_group("train", 4))
    pods = workload_gang("train", 4)
    cluster.create(*pods)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.rejection == "" and outcome.key == "scheduling.k8s.io/default/train"
    # upstream submits the members one after another: the first three wait at Permit for the quorum, each
    # nominated to its node meanwhile; the fourth completes it, allows them and is bound at once
    assert [(m.pod.name, type(o)) for m, o in outcome.members] == [
        *((f"train-{i}", Wait) for i in range(3)),
        ("train-3", Bind),
    ]
    assert {o.node for _, o in outcome.members} == {"n0", "n1", "n2", "n3"}  # type: ignore[union-attr]
    assert all(o.nominated_node == o.node for _, o in outcome.members[:3])  # type: ignore[union-attr]
    assert outcome.members[3][1].nominated_node is None  # type: ignore[union-attr]
    assert cluster.assumed() == 4
    settled = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0)
    assert [a.pod.name for a in settled.allowed] == ["train-0", "train-1", "train-2"] and not settled.rejected
    assert len(cluster.waiting) == 0
    assert cluster.queue.pop(T0) is None  # every member left the queue with the first


def test_a_doomed_workload_gang_leaves_no_reservation_after_one_attempt() -> None:
    """Issue 18: a gang of 4 where 3 fit holds nothing, not for 5 minutes, not for a moment."""
    pods = workload_gang("train", 4)
    cluster = Cluster(3, make_pod_group("train", 4))
    cluster.create(*pods)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group)
    gang = (  # upstream's PlacementFeasible text, then its pod group PostFilter's (nothing of lower priority to evict)
        "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )
    assert outcome.rejection == gang  # the PodGroup's condition
    assert cluster.assumed() == 0 and len(cluster.waiting) == 0 and cluster.cache.pod_count() == 0
    by_name = {m.pod.name: o for m, o in outcome.members}
    for name in ("train-0", "train-1", "train-2"):  # they fit, the gang did not: they read the gang's verdict
        assert isinstance(by_name[name], Unschedulable)
        assert (by_name[name].message, by_name[name].plugins) == (  # type: ignore[union-attr]
            f"pod group is unschedulable, {gang}",
            {"GangScheduling"},
        )
    last = by_name["train-3"]
    assert isinstance(last, Unschedulable) and last.message.startswith("0/3 nodes are available: 3 Insufficient cpu")
    assert all(cluster.queue.where(p) == UNSCHEDULABLE for p in pods)
    assert cluster.queue.pop(T0 + 1) is None  # and nothing was tried twice


def test_a_workload_gang_stops_as_soon_as_min_count_is_out_of_reach() -> None:
    """Upstream PlacementFeasible after each member: the first member that fits nowhere ends a gang of
    4 of 4 at once, the others untried (they read the gang's count); tests/cluster/test_gang_differential.py
    checks these texts against upstream's."""
    pods = [
        make_pod(f"w-{i}").scheduler("s").scheduling_group("w").req(cpu="2" if i == 0 else "1").obj() for i in range(4)
    ]
    cluster = Cluster(4, make_pod_group("w", 4))
    cluster.create(*pods)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group)
    assert outcome.rejection.startswith("minCount (4) cannot be satisfied: 0 scheduled, 3 remaining, ")
    messages = {m.pod.name: o.message for m, o in outcome.members}  # type: ignore[union-attr]
    assert messages["w-0"] == "0/4 nodes are available: 4 Insufficient cpu."  # no preemption for one member
    # untried, they read PlacementFeasible's text alone (upstream clones the gang's status before its PostFilter)
    assert {messages[f"w-{i}"] for i in (1, 2, 3)} == {"minCount (4) cannot be satisfied: 0 scheduled, 3 remaining"}
    assert cluster.assumed() == 0


def test_a_gang_that_no_eviction_can_place_reads_the_algorithm_again() -> None:
    """Pod-group preemption removes every pod of lower priority and runs the gang's algorithm again: when
    even that cannot place it, its status is the answer (upstream ``selectVictimsOnDomain``); nothing is
    evicted. With preemption off, upstream appends its empty PostFilter status."""
    cluster = Cluster(3, make_pod_group("g", 4))
    low = make_pod("low").scheduler("other").priority(-1).req(cpu="0.1").node("n0").obj()
    routing.route_assigned_pod(
        low, deleted=False, cache=cluster.cache, pending=routing.PendingPods(), served=cluster.served, now=T0
    )
    cluster.create(*workload_gang("g", 4, cpu="0.9"))
    outcome = cluster.attempt()
    gang = "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"
    assert isinstance(outcome, Group) and outcome.rejection == f"{gang}, pod group preemption: {gang}"
    assert outcome.victims == () and cluster.cache.get_pod(low.uid) is not None
    off = Cluster(3, make_pod_group("g", 4))
    off.scheduler = GenericScheduler(dataclasses.replace(off.scheduler.profile, post_filters=()))
    off.create(*workload_gang("g", 4))
    outcome = off.attempt()
    assert (
        isinstance(outcome, Group)
        and outcome.rejection == "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
    )


def test_a_lone_pod_lands_on_the_better_node_after_a_doomed_gang() -> None:
    """The issue's small case: big (4 cpu) and small (2 cpu); a gang of 4 pods of 2 cpu where 3 fit. Had the
    3 kept their reservations, big and small would be full and the lone pod would fit nowhere; now
    nothing is held and it lands on big, the emptier node."""
    cluster = Cluster(0, make_pod_group("train", 4))
    cluster.cache.add_node(make_node("big").capacity(cpu="4", memory="4Gi", pods="10").obj())
    cluster.cache.add_node(make_node("small").capacity(cpu="2", memory="4Gi", pods="10").obj())
    cluster.create(*workload_gang("train", 4, cpu="2"))
    outcome = cluster.attempt(T0)
    assert isinstance(outcome, Group)
    assert outcome.rejection.startswith("minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, ")
    cluster.create(make_pod("lone").scheduler("s").req(cpu="1").obj())
    lone = cluster.attempt(T0 + 1)
    assert isinstance(lone, Bind) and lone.node == "big"


def test_a_workload_gang_completed_by_bound_members_takes_the_rest_along() -> None:
    """Members already bound count for minCount (upstream ScheduledPodsCount): a pending member of a gang
    whose quorum is bound is placed on its own; one that fits nowhere leaves the gang unschedulable all the
    same (upstream wants a member placed in the cycle), so the gang's PostFilter looks for victims."""
    cluster = Cluster(2, make_pod_group("g", 2))
    bound = [make_pod(f"g-{i}").scheduler("s").scheduling_group("g").req(cpu="1").node(f"n{i}").obj() for i in (0, 1)]
    for p in bound:
        routing.route_assigned_pod(
            p, deleted=False, cache=cluster.cache, pending=routing.PendingPods(), served=cluster.served, now=T0
        )
    late = make_pod("g-2").scheduler("s").scheduling_group("g").req(cpu="8").obj()  # fits nowhere, yet the gang stands
    cluster.create(late)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.rejection == (
        "pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor"
    )
    [(_, own)] = outcome.members
    assert isinstance(own, Unschedulable) and own.message.startswith("0/2 nodes are available")


def test_a_waiting_member_deleted_meanwhile_is_not_requeued() -> None:
    cluster = Cluster(3, make_coscheduling_group("g", 3))
    pods = coscheduling_gang("g", 3)
    cluster.create(*pods)
    assert isinstance(cluster.attempt(), Wait)
    cluster.queue.delete(pods[0])  # the watch saw it deleted while it waited
    settled = settle_waiting(cluster.waiting, cache=cluster.cache, now=T0 + TIMEOUT)
    assert [r.pod.name for r in settled.rejected] == ["g-0"]
    assert cluster.queue.where(pods[0]) is None and cluster.assumed() == 0


def test_a_gang_member_without_its_coscheduling_podgroup_is_rejected_at_permit() -> None:
    cluster = Cluster(1)
    [pod] = coscheduling_gang("missing", 1)
    cluster.create(pod)
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and outcome.message == "PodGroup not found"
    assert outcome.plugins == {"Coscheduling"} and cluster.assumed() == 0


def test_a_coscheduling_podgroup_timeout_wins_over_the_default() -> None:
    cluster = Cluster(2, make_coscheduling_group("g", 2, timeout=7), wait=300)
    cluster.create(*coscheduling_gang("g", 2))
    assert isinstance(cluster.attempt(), Wait)
    assert cluster.waiting.next_deadline() == T0 + 7  # spec.scheduleTimeoutSeconds, not the policy's 300


def test_pods_outside_gangs_are_bound_at_once() -> None:
    cluster = Cluster(1)
    cluster.create(make_pod("web").scheduler("s").req(cpu="1").obj())
    assert isinstance(cluster.attempt(), Bind)
    assert len(cluster.waiting) == 0


@pytest.mark.parametrize(
    ("nodes", "phases", "waiting", "expected"),
    [
        pytest.param(
            ["", "", ""], ["Pending"] * 3, 0, {"phase": "Pending", "scheduled": 0, "running": 0}, id="nothing placed"
        ),
        pytest.param(
            ["", "", ""],
            ["Pending"] * 3,
            2,
            {"phase": "Scheduling", "scheduled": 0, "running": 0},
            id="two wait at Permit",
        ),
        pytest.param(
            ["a", "b", ""],
            ["Pending"] * 3,
            0,
            {"phase": "Scheduled", "scheduled": 2, "running": 0},
            id="minMember 2 bound",
        ),
        pytest.param(
            ["a", "b", "c"],
            ["Running", "Running", "Pending"],
            0,
            {"phase": "Running", "scheduled": 3, "running": 2},
            id="2 running of minMember 2",
        ),
    ],
)
def test_the_coscheduling_status_counts_members(
    nodes: list[str], phases: list[str], waiting: int, expected: dict[str, object]
) -> None:
    group = make_coscheduling_group("g", 2)
    pods = [
        make_pod(f"p{i}").node(n).phase(ph).obj() if n else make_pod(f"p{i}").phase(ph).obj()
        for i, (n, ph) in enumerate(zip(nodes, phases, strict=True))
    ]
    assert pod_group_status(group, pods, waiting=waiting) == expected


def test_a_pod_joining_a_gang_moves_only_its_members() -> None:
    cluster = Cluster(4, make_pod_group("g", 2))
    [first, second] = workload_gang("g", 2)
    outsider = make_pod("other").scheduler("s").req(cpu="8").obj()
    cluster.create(first, outsider)
    assert isinstance(cluster.attempt(), Unschedulable)  # first: a gang of 1 of 2
    assert isinstance(cluster.attempt(), Unschedulable)  # other: too big
    assert cluster.queue.where(first) == cluster.queue.where(outsider) == UNSCHEDULABLE
    cluster.create(second)
    assert cluster.queue.where(first) != UNSCHEDULABLE  # back to active (or backoff)
    assert cluster.queue.where(outsider) == UNSCHEDULABLE
    assert cluster.cache.state_of(first) is None  # nothing assumed yet


# --------------------------------------------------------------------------- the policy's gang settings


def test_the_coscheduling_post_filter_settings_reach_the_plugin_only() -> None:
    profile = validate_policy(
        {"schedulerName": "s", "gangScheduling": {"podGroupBackoffSeconds": 30, "podGroupRejectPercentage": 0}}
    )
    assert isinstance(profile, Profile)
    [cosched] = [p for p in profile.plugins if isinstance(p, Coscheduling)]
    assert (cosched.args.pod_group_backoff_seconds, cosched.args.pod_group_reject_percentage) == (30, 0)
    assert profile.spec["gangScheduling"]["podGroupBackoffSeconds"] == 30


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("podGroupBackoffSeconds", -1),
        ("podGroupBackoffSeconds", 3601),
        ("podGroupRejectPercentage", 101),
        ("podGroupRejectPercentage", "10"),
    ],
)
def test_bad_coscheduling_post_filter_settings_are_refused(key: str, value: object) -> None:
    errors = validate_policy({"schedulerName": "s", "gangScheduling": {key: value}})
    assert isinstance(errors, list)
    assert [e.path for e in errors] == [f"spec.gangScheduling.{key}"]


# --------------------------------------------------------------------------- PreEnqueue (Workload API)


def served_cluster(nodes: int, *groups: PodGroup) -> Cluster:
    """A Cluster whose queue is served as the executors serve it: its PreEnqueue plugins read the cache."""
    cluster = Cluster(nodes, *groups)
    cluster.queue = routing.serve(
        cluster.scheduler.profile, None, pending=routing.PendingPods(), now=T0, cluster=cluster.cache
    )
    cluster.served = {"s": Served(cluster.queue)}
    return cluster


def test_a_gang_short_of_members_waits_gated_and_enters_when_the_last_arrives() -> None:
    cluster = served_cluster(3, make_pod_group("g", 3))
    pods = workload_gang("g", 3)
    cluster.create(*pods[:2])
    assert [cluster.queue.where(p) for p in pods[:2]] == [GATED, GATED]
    info = cluster.queue.get(pods[0])
    assert info is not None and info.pre_enqueue is not None
    assert (info.pre_enqueue.plugin, info.pre_enqueue.message) == (
        "GangScheduling",
        "waiting for minCount pods from a gang to appear in scheduling queue",
    )
    assert cluster.queue.pop(T0) is None and info.attempts == 0  # never tried, not at PreFilter either
    routing.broadcast(routing.EVENT_NODE_ADD, cluster.served, T0)  # an event for other plugins lets nobody in
    assert cluster.queue.where(pods[0]) == GATED
    cluster.create(pods[2])  # the third member: the gang enters and is decided in one cycle
    assert all(cluster.queue.where(p) == ACTIVE for p in pods)
    outcome = cluster.attempt(T0 + 1)
    assert isinstance(outcome, Group) and [type(o) for _, o in outcome.members] == [Wait, Wait, Bind]


def test_a_member_without_its_podgroup_waits_gated_until_it_appears() -> None:
    cluster = served_cluster(1)
    [pod] = workload_gang("late", 1)
    cluster.create(pod)
    info = cluster.queue.get(pod)
    assert cluster.queue.where(pod) == GATED and info is not None and info.pre_enqueue is not None
    assert info.pre_enqueue.message == 'waiting for pods\'s pod group "late" to appear in scheduling queue'
    group = make_pod_group("late", 1)
    routing.route_object("PodGroup", group.key, group, cache=cluster.cache, served=cluster.served, now=T0 + 1)
    assert cluster.queue.where(pod) == ACTIVE
    assert isinstance(cluster.attempt(T0 + 1), Group)


def test_pods_outside_gangs_are_never_gated() -> None:
    cluster = served_cluster(1)
    pod = make_pod("web").scheduler("s").req(cpu="1").obj()
    cluster.create(pod)
    assert cluster.queue.where(pod) == ACTIVE
