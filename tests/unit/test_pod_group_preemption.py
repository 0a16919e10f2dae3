"""Gang-aware preemption without an API server: victims that are pod groups, and gangs that preempt as one.

Upstream v1.37.2 with GenericWorkload on (``framework/preemption``: types.go's victims, util.go's
MoreImportantVictim and FilterVictimsWithPDBViolation, podgrouppreemption.go's PodGroupEvaluator; the
pod-group cycle's PodGroupPostFilter in schedule_one_podgroup.go). The scenarios follow upstream's e2e
``[sig-scheduling] WorkloadAwarePreemption``: a low-priority gang fills a node with a fake extended
resource, a high-priority gang (or pod) wants that node; a gang disrupted ``all`` goes whole, one disrupted
``single`` member by member. ``tests/cluster/test_gang_differential.py`` holds the texts against upstream's.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import pytest
from builders import make_coscheduling_group, make_node, make_pod, make_pod_group

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework import basics
from kopf_scheduler.core.framework.basics import Code, CycleState, Status
from kopf_scheduler.core.framework.interface import FilterPlugin, PreFilterExtensions
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.objects import LabelSelector, Pod, PodDisruptionBudget, PodGroup
from kopf_scheduler.core.scheduling import routing
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.cycle import Bind, CycleContext, Error, Group, Parked, Unschedulable, schedule_one
from kopf_scheduler.core.scheduling.explanation import explanation_of
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import UNSCHEDULABLE, SchedulingQueue
from kopf_scheduler.core.toolkit.preemption import (
    VICTIM_POD,
    VICTIM_POD_GROUP,
    Victim,
    VictimIndex,
    more_important,
    split_victims_by_pdb,
    victim_priority,
)

T0 = 1000.0
GPU = "example.com/combined-resource"
LOW, HIGH = 100, 1000
HOST = "kubernetes.io/hostname"


class Served:
    def __init__(self, queue: SchedulingQueue) -> None:
        self.queue = queue


class Cluster:
    """Nodes with 2 of the fake resource each (and plenty of cpu), one served scheduler name with upstream's
    default profile, the PodGroups given."""

    def __init__(self, nodes: int, *groups: PodGroup, gpus: str = "2") -> None:
        profile = validate_policy({"schedulerName": "s"})
        assert isinstance(profile, Profile)
        self.scheduler = GenericScheduler(profile)
        self.cache = SchedulerCache()
        for i in range(nodes):
            self.cache.add_node(
                make_node(f"n{i}").capacity({"cpu": "8", "memory": "8Gi", "pods": "20", GPU: gpus}).obj()
            )
        for group in groups:
            routing.route_object("PodGroup", group.key, group, cache=self.cache, served={}, now=T0)
        self.queue = SchedulingQueue()
        self.served = {"s": Served(self.queue)}
        self.waiting: WaitingPods[Parked] = WaitingPods()
        self.snapshot = Snapshot(self.cache.objects)

    def pdb(self, labels: dict[str, str], allowed: int, name: str = "pdb") -> None:
        self.cache.objects.pod_disruption_budgets[f"default/{name}"] = PodDisruptionBudget(
            "default", name, LabelSelector(match_labels=labels), allowed
        )

    def bind(self, *pods: Pod) -> None:
        for pod in pods:
            routing.route_assigned_pod(
                pod, deleted=False, cache=self.cache, pending=routing.PendingPods(), served=self.served, now=T0
            )

    def delete(self, *pods: Pod) -> None:
        for pod in pods:
            routing.route_assigned_pod(
                pod, deleted=True, cache=self.cache, pending=routing.PendingPods(), served=self.served, now=T0
            )

    def create(self, *pods: Pod) -> None:
        for pod in pods:
            routing.route_unassigned_pod(
                pod, gone=False, cache=self.cache, pending=routing.PendingPods(), served=self.served, now=T0
            )

    def attempt(self, now: float = T0) -> Any:
        info = self.queue.pop(now)
        assert info is not None, "nothing to pop"
        ctx = CycleContext(self.scheduler, self.cache, self.queue, self.waiting, random.Random(1), now)
        return schedule_one(info, self.snapshot, ctx)


def victim(name: str, node: str, *, group: str = "", priority: int = LOW, started: int = 0, **labels: str) -> Pod:
    """A pod holding one of the fake resource on `node` (a member of the Workload PodGroup `group`)."""
    b = make_pod(name).scheduler("other").priority(priority).req({GPU: "1"}).node(node).phase("Running")
    if group:
        b = b.scheduling_group(group)
    if started:
        b = b.started(started)
    return b.labels(labels).obj() if labels else b.obj()


def preemptor(name: str, group: str = "", *, node: str = "n0", priority: int = HIGH, gpus: str = "1") -> Pod:
    """A pending pod of scheduler "s" for one of the fake resource on `node` (upstream's e2e pins it there)."""
    b = make_pod(name).scheduler("s").priority(priority).req({GPU: gpus}).node_selector(**{HOST: node})
    return b.scheduling_group(group).obj() if group else b.obj()


def victim_gang(mode: str, cluster_nodes: int = 3) -> tuple[Cluster, list[Pod]]:
    """Upstream's e2e: a low-priority gang of two (disruption `mode`) fills n0; a PodGroup of one for hp1."""
    cluster = Cluster(
        cluster_nodes,
        make_pod_group("pg-victim", 2, priority=LOW, disruption=mode),
        make_pod_group("pg-preemptor", 1, priority=HIGH, disruption="single"),
    )
    victims = [victim(f"victim{i}", "n0", group="pg-victim", started=100 * i) for i in (1, 2)]
    cluster.bind(*victims)
    return cluster, victims


def names(pods: Sequence[Pod]) -> list[str]:
    return [p.name for p in pods]


# --------------------------------------------------------------------------- victims


def test_victims_group_the_members_of_a_gang_disrupted_together_across_nodes() -> None:
    groups = [
        make_pod_group("all", 2, priority=7, disruption="all"),
        make_pod_group("single", 2, priority=5, disruption="single"),
        make_pod_group("default", 2, priority=3),  # no disruptionMode: Single, the API's default
    ]
    pods = [
        victim("a0", "n0", group="all"),
        victim("plain", "n0", priority=9),
        victim("s0", "n0", group="single"),
        victim("a1", "n1", group="all"),
        victim("d0", "n1", group="default"),
        victim("orphan", "n1", group="missing", priority=4),  # its PodGroup is gone: its own priority
    ]
    snap = Snapshot.of([], None)
    cluster = Cluster(2, *groups)
    cluster.bind(*pods)
    cluster.cache.update_snapshot(snap)
    index = VictimIndex(snap)
    got = [(names(v.pods), v.priority, v.kind) for v in index.victims(snap.node_infos[0].iter_pods())]
    assert got == [
        (["a0", "a1"], 7, VICTIM_POD_GROUP),  # every member of the group, wherever it runs
        (["plain"], 9, VICTIM_POD),
        (["s0"], 5, VICTIM_POD_GROUP),
    ]
    got = [(names(v.pods), v.priority, v.kind) for v in index.victims(snap.all_pods())]
    assert got == [
        (["a0", "a1"], 7, VICTIM_POD_GROUP),  # once, though two nodes hold it
        (["plain"], 9, VICTIM_POD),
        (["s0"], 5, VICTIM_POD_GROUP),
        (["d0"], 3, VICTIM_POD_GROUP),
        (["orphan"], 4, VICTIM_POD_GROUP),
    ]
    assert victim_priority(pods[-1], snap.objects) == 4 and victim_priority(pods[0], snap.objects) == 7
    assert not index.trivial and VictimIndex(Snapshot()).trivial


def v(priority: int, *starts: float, kind: str = VICTIM_POD) -> Victim:
    return Victim(tuple(make_pod(f"p{i}").started(int(s)).obj() for i, s in enumerate(starts)), priority, kind)


@pytest.mark.parametrize(
    ("more", "less"),
    [
        pytest.param(v(2, 500), v(1, 100), id="higher priority"),
        pytest.param(v(1, 500, kind=VICTIM_POD_GROUP), v(1, 100), id="a pod group before a pod of its priority"),
        pytest.param(v(1, 500, 600, kind=VICTIM_POD_GROUP), v(1, 100, kind=VICTIM_POD_GROUP), id="the larger group"),
        pytest.param(v(1, 300, 100, kind=VICTIM_POD_GROUP), v(1, 200, 200, kind=VICTIM_POD_GROUP), id="earlier start"),
        pytest.param(v(1, 100), v(1, 200), id="two pods: the earlier start"),
    ],
)
def test_more_important_victims_are_ranked_as_upstream(more: Victim, less: Victim) -> None:
    """Upstream ``MoreImportantVictim``: priority, then type (pod group over pod), then size, then earliest start."""
    assert sorted([less, more], key=more_important) == [more, less]


def test_a_group_violates_pdbs_when_any_member_does_and_counts_each() -> None:
    a = Victim((make_pod("a0").label(app="x").obj(), make_pod("a1").label(app="x").obj()), 1, VICTIM_POD_GROUP)
    b = Victim.of(make_pod("b").label(app="x").obj())
    budget = PodDisruptionBudget("default", "x", LabelSelector(match_labels={"app": "x"}), 1)
    violating, non_violating = split_victims_by_pdb([a, b], [budget])
    assert violating == [(a, 1), (b, 1)] and non_violating == []  # a0 spends the one disruption allowed


# --------------------------------------------------------------------------- a gang preempts as a whole


@pytest.mark.parametrize(
    ("mode", "evicted"),
    [
        pytest.param("all", ["victim1", "victim2"], id="All: the victim gang goes together"),
        pytest.param("single", ["victim2"], id="Single: one member is enough, the later one goes"),
    ],
)
def test_a_pod_group_preempts_as_upstreams_e2e_expects(mode: str, evicted: list[str]) -> None:
    cluster, victims = victim_gang(mode)
    hp1 = preemptor("hp1", "pg-preemptor")
    cluster.create(hp1)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.pod_group is not None and outcome.pod_group.name == "pg-preemptor"
    found = f"pod group preemption: found a placement for podgroup, preempting {len(evicted)} victims"
    assert outcome.preemption is not None and outcome.preemption.status.message == found
    assert outcome.preemption.status.plugin == "DefaultPreemption"
    assert names(outcome.victims) == evicted and outcome.preemption.nominations == {hp1.uid: "n0"}
    # the gang's status (the PodGroup's condition): PlacementFeasible's, then the PostFilter's
    assert outcome.rejection == f"minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, {found}"
    [(_, own)] = outcome.members
    # hp1 fit nowhere on its own: it reads its own FitError (no PostFilter of its own), nominated to n0
    assert isinstance(own, Unschedulable) and own.nominated_node == "n0" and own.victims == ()
    assert own.message == (
        f"0/3 nodes are available: 1 Insufficient {GPU}, 2 node(s) didn't match Pod's node affinity/selector."
    )
    assert own.result is not None  # explanations (explain, simulate --explain) show the gang's choice
    shown = explanation_of(hp1, own.result).preemption
    assert shown is not None and (shown.plugin, shown.message, shown.nominated_node) == (
        "DefaultPreemption",
        found,
        "n0",
    )
    assert [v.pod for v in shown.victims] == [f"default/{name}" for name in evicted]
    assert cluster.queue.nominated_node_of(hp1) == "n0" and cluster.cache.assumed_count() == 0
    # the executor evicts; the deletion moves hp1, which lands where it was nominated
    cluster.delete(*(p for p in victims if p.name in evicted))
    again = cluster.attempt(T0 + 1)
    assert isinstance(again, Group) and again.preemption is None
    [(_, bound)] = again.members
    assert isinstance(bound, Bind) and bound.node == "n0"


def test_an_individual_pod_preempts_a_gang_disrupted_together_whole_across_nodes() -> None:
    """Single-pod preemption (``SelectVictimsOnNode``) with a victim that is a whole gang: its member on
    another node goes too, and counts among the candidate's victims."""
    cluster = Cluster(3, make_pod_group("pg", 2, priority=LOW, disruption="all"))
    here, there = victim("m0", "n0", group="pg"), victim("m1", "n1", group="pg")
    cluster.bind(here, there, victim("full", "n0", priority=HIGH))
    cluster.create(preemptor("hp"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and outcome.nominated_node == "n0"
    assert names(outcome.victims) == ["m0", "m1"]
    assert outcome.message.endswith("preemption: found a potential placement for pod on node n0, preempting 2 victims")


def test_an_individual_pod_preempts_members_of_a_single_gang_one_by_one() -> None:
    cluster, _ = victim_gang("single")
    cluster.create(preemptor("hp"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and names(outcome.victims) == ["victim2"]  # upstream e2e's third entry


def test_a_member_of_a_gang_outranks_a_lone_pod_of_its_priority() -> None:
    """A gang member is the more important victim (rank), though it started later: the lone pod goes."""
    cluster = Cluster(1, make_pod_group("pg", 1, priority=LOW))
    cluster.bind(victim("lone", "n0", started=100), victim("member", "n0", group="pg", started=200))
    cluster.create(preemptor("hp"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and names(outcome.victims) == ["lone"]


def test_a_pod_naming_a_podgroup_that_is_gone_ranks_as_a_member_at_its_own_priority() -> None:
    """Upstream ``NewPodVictim``: a pod with a schedulingGroup is a pod-group victim whether or not its PodGroup
    exists (then at its own priority), though no PodGroup exists at all."""
    cluster = Cluster(1)
    cluster.bind(victim("lone", "n0", started=100), victim("orphan", "n0", group="gone", started=200))
    cluster.create(preemptor("hp"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and names(outcome.victims) == ["lone"]


def test_the_pod_group_priority_protects_members_whatever_their_own() -> None:
    """A victim's priority is its PodGroup's (upstream ``GetPodPriority``): members of a group above the
    preemptor are no victims, though their pods say 0."""
    cluster = Cluster(1, make_pod_group("vip", 2, priority=2000, disruption="all"))
    cluster.bind(*(victim(f"m{i}", "n0", group="vip", priority=0) for i in (1, 2)))
    cluster.create(preemptor("hp"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and outcome.victims == ()
    assert outcome.message.endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_a_gang_of_two_where_one_fits_waits_for_its_victims_nominated() -> None:
    """The member that fit reads the gang's status as it is (no "pod group is unschedulable" before it: it
    waits on preemption) and is nominated where preemption's trial put it."""
    cluster = Cluster(
        2,
        make_pod_group("pg-victim", 2, priority=LOW, disruption="all"),
        make_pod_group("pg", 2, priority=HIGH),
    )
    cluster.bind(*(victim(f"victim{i}", "n0", group="pg-victim") for i in (1, 2)))
    elsewhere, here = preemptor("p-a", "pg", node="n1"), preemptor("p-b", "pg", node="n0")
    cluster.create(elsewhere, here)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and names(outcome.victims) == ["victim1", "victim2"]
    found = "pod group preemption: found a placement for podgroup, preempting 2 victims"
    gang = f"minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, {found}"
    assert outcome.rejection == gang
    by_name = {m.pod.name: own for m, own in outcome.members}
    assert isinstance(by_name["p-a"], Unschedulable) and by_name["p-a"].message == gang
    assert by_name["p-a"].nominated_node == "n1" and by_name["p-b"].nominated_node == "n0"  # type: ignore[union-attr]
    assert cluster.cache.assumed_count() == 0 and {cluster.queue.where(p) for p in (elsewhere, here)} == {UNSCHEDULABLE}


@pytest.mark.parametrize(
    ("protected", "evicted", "violations"),
    [
        pytest.param({"victim1"}, ["victim2"], 0, id="the protected one is tried first and spared"),
        pytest.param({"victim2"}, ["victim1"], 0, id="though it started later"),
        pytest.param({"victim1", "victim2"}, ["victim2"], 1, id="both protected: the less important goes"),
    ],
)
def test_pod_group_preemption_spares_pdb_protected_victims_first(
    protected: set[str], evicted: list[str], violations: int
) -> None:
    cluster = Cluster(1, make_pod_group("pg", 1, priority=HIGH))
    cluster.bind(
        *(
            victim(f"victim{i}", "n0", started=100 * i, **({"app": "db"} if f"victim{i}" in protected else {}))
            for i in (1, 2)
        )
    )
    cluster.pdb({"app": "db"}, 0)
    cluster.create(preemptor("hp", "pg"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.preemption is not None
    assert names(outcome.victims) == evicted and outcome.preemption.num_pdb_violations == violations


def test_a_gang_with_a_member_that_never_preempts_is_not_eligible() -> None:
    cluster, _ = victim_gang("all")
    never = make_pod("hp1").scheduler("s").priority(HIGH).preemption_policy("Never").req({GPU: "1"})
    cluster.create(never.node_selector(**{HOST: "n0"}).scheduling_group("pg-preemptor").obj())
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.victims == ()
    assert outcome.rejection.endswith(", pod group preemption: not eligible due to preemptionPolicy=Never.")
    assert outcome.preemption is not None and outcome.preemption.status.code is Code.UNSCHEDULABLE


def test_an_ongoing_preemption_is_waited_for_with_the_nominations_kept() -> None:
    """Upstream ``isOngoingPreemption``: a member's nominated node holds a lower-priority pod terminating
    because of preemption: nothing more is evicted, the nominations stand."""
    cluster = Cluster(1, make_pod_group("pg", 1, priority=HIGH))
    dying = make_pod("dying").scheduler("other").priority(LOW).req({GPU: "2"}).node("n0").terminating()
    cluster.bind(dying.condition("DisruptionTarget", "True", "PreemptionByScheduler").obj())
    hp = make_pod("hp").scheduler("s").priority(HIGH).req({GPU: "1"}).scheduling_group("pg").nominated("n0").obj()
    cluster.create(hp)
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.victims == ()
    assert outcome.rejection.endswith(", pod group preemption: ongoing preemption on nominated nodes")
    [(_, own)] = outcome.members
    assert isinstance(own, Unschedulable) and own.nominated_node == "n0"


def test_a_gang_finds_no_victim_below_its_priority() -> None:
    cluster = Cluster(1, make_pod_group("pg", 1, priority=LOW))
    cluster.bind(victim("peer", "n0", priority=LOW), victim("peer2", "n0", priority=LOW))
    cluster.create(preemptor("hp", "pg", priority=LOW))
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.victims == ()
    assert outcome.rejection == (
        "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )


def test_victims_on_several_nodes_make_room_for_a_spread_gang() -> None:
    """The domain is the whole cluster: a gang of two pinned to two full nodes evicts on both."""
    cluster = Cluster(2, make_pod_group("pg", 2, priority=HIGH))
    cluster.bind(*(victim(f"v{n}", f"n{n}", priority=LOW) for n in (0, 1)))
    cluster.bind(*(victim(f"w{n}", f"n{n}", priority=LOW, started=50) for n in (0, 1)))
    cluster.create(preemptor("a", "pg", node="n0", gpus="2"), preemptor("b", "pg", node="n1", gpus="1"))
    outcome = cluster.attempt()
    assert isinstance(outcome, Group) and outcome.preemption is not None
    # a needs all of n0; b needs one of n1, where w1 (started at 50, more important than v1) is spared
    assert sorted(names(outcome.victims)) == ["v0", "v1", "w0"]
    assert sorted(outcome.preemption.nominations.values()) == ["n0", "n1"]


def test_a_coscheduling_gang_preempts_member_by_member_as_scheduler_plugins() -> None:
    """scheduler-plugins' coscheduling has no gang preemption: a member preempts as a lone pod, and a
    coscheduling member is a victim on its own, at its own priority."""
    cluster = Cluster(1, make_coscheduling_group("cg", 1))
    cluster.bind(
        make_pod("co-victim").scheduler("other").priority(LOW).req({GPU: "2"}).node("n0").pod_group("cg").obj()
    )
    cluster.create(make_pod("co").scheduler("s").priority(HIGH).req({GPU: "1"}).pod_group("cg").obj())
    outcome = cluster.attempt()
    assert isinstance(outcome, Unschedulable) and names(outcome.victims) == ["co-victim"]
    assert outcome.message.endswith("preemption: found a potential placement for pod on node n0, preempting 1 victims")


def test_the_snapshot_preemption_works_on_is_a_copy() -> None:
    cluster, victims = victim_gang("all", cluster_nodes=1)
    cluster.cache.update_snapshot(cluster.snapshot)
    work = cluster.snapshot.copy()
    assert work.remove_pod(victims[0]) and not work.remove_pod(victims[0])
    assert [len(i.pods) for i in work.node_infos] == [1] and [len(i.pods) for i in cluster.snapshot.node_infos] == [2]
    assert work.table.scalar_requested(GPU).tolist() == [1] and cluster.snapshot.table.scalar_requested(
        GPU
    ).tolist() == [2]
    assert work.add_pod(victims[0]) and not work.add_pod(make_pod("x").node("nowhere").obj())


class FailsOnAdd(PreFilterExtensions, FilterPlugin):
    """A filter whose AddPod extension fails: preemption cannot put a victim back."""

    NAME = "FailsOnAdd"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        return basics.SUCCESS

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return basics.error("no room for the past")

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS


def test_a_pod_group_post_filter_error_is_every_members_error() -> None:
    """Upstream ``RunPodGroupPostFilterPlugins`` wraps a plugin's error, and ``applyPodGroupPostFilterResult`` makes
    it the gang's status: every member backs off with it, nothing is evicted or nominated."""
    cluster, _ = victim_gang("all")
    profile = cluster.scheduler.profile
    cluster.scheduler = GenericScheduler(dataclasses.replace(profile, filters=(*profile.filters, FailsOnAdd())))
    cluster.create(preemptor("hp1", "pg-preemptor"))
    outcome = cluster.attempt()
    text = (
        'error in "DefaultPreemption" PodGroupPostFilter plugins: pod group preemption: '
        'running AddPod on PreFilter plugin "FailsOnAdd": no room for the past'
    )
    assert isinstance(outcome, Group) and outcome.victims == () and outcome.rejection == text
    [(member, own)] = outcome.members
    assert isinstance(own, Error) and own.message == text and own.nominated_node == ""
    assert cluster.queue.where(member.pod) == "backoff"
