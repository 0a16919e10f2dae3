"""Watch-event routing without Kopf: pod events into the cache, the pending index and the queues,
as a table of single events and as step-by-step scenarios; nodes, other kinds and namespaces;
what a relist removes; when the caches count as synced."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from builders import make_node, make_pod

from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling.routing import (
    NOTHING,
    CacheSync,
    PendingPods,
    Routed,
    expire_assumed,
    reports_unreadable,
    route_assigned_pod,
    route_assigned_pods_relisted,
    route_namespace,
    route_namespaces_relisted,
    route_node,
    route_node_deleted,
    route_nodes_relisted,
    route_object,
    route_objects_relisted,
    route_pending_reconciled,
    route_pod_vanished,
    route_unassigned_pod,
    serve,
)
from kopf_scheduler.core.state.cache import PodState, SchedulerCache
from kopf_scheduler.core.state.queueing import ACTIVE, SchedulingQueue

OURS = "ours"
NOW = 100.0


@dataclass
class Served:
    queue: SchedulingQueue = field(default_factory=SchedulingQueue)


#: the served name's profile: its plugins' requeueing hints decide which events move which pods
PROFILE = default_profile(OURS)


@dataclass
class World:
    """The core state a watch handler touches, with one served name ("ours", today's default profile,
    its hints reading this cache, as the operator serves it) and one unserved."""

    cache: SchedulerCache = field(default_factory=SchedulerCache)
    pending: PendingPods = field(default_factory=PendingPods)
    served: dict[str, Served] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.served:
            queue = serve(PROFILE, None, pending=self.pending, now=NOW, cluster=self.cache)
            self.served[OURS] = Served(queue)

    @property
    def queue(self) -> SchedulingQueue:
        return self.served[OURS].queue

    def pod(self, pod: Pod, *, deleted: bool = False, now: float = NOW) -> Routed:
        """The event on the watch that sees `pod` as it is: assigned pods' or unassigned pods'."""
        if pod.node_name:
            return self.assigned(pod, deleted=deleted, now=now)
        return self.unassigned(pod, gone=deleted, now=now)

    def assigned(self, pod: Pod, *, deleted: bool = False, now: float = NOW) -> Routed:
        return route_assigned_pod(
            pod, deleted=deleted, cache=self.cache, pending=self.pending, served=self.served, now=now
        )

    def unassigned(self, pod: Pod, *, gone: bool = False, now: float = NOW) -> Routed:
        return route_unassigned_pod(pod, gone=gone, cache=self.cache, pending=self.pending, served=self.served, now=now)

    def park_unschedulable(self, pod: Pod, *, plugins: tuple[str, ...] = ()) -> None:
        """Put `pod` in the unschedulable pool, as a failed attempt that `plugins` rejected it in does
        (none: every event may help it)."""
        self.pod(pod)
        info = self.queue.pop(NOW)
        assert info is not None
        self.queue.add_unschedulable(info, NOW, plugins=plugins)


def pod(
    name: str = "p", *, scheduler: str = OURS, on: str = "", phase: str = "", deleting: bool = False, uid: str = ""
) -> Pod:
    b = make_pod(name).req(cpu="1").scheduler(scheduler)
    if uid:
        b.uid(uid)
    if on:
        b.node(on)
    if phase:
        b.phase(phase)
    if deleting:
        b.terminating()
    return b.obj()


def requested_cpu(world: World, node: str = "n1") -> int:
    info = world.cache.get_node_info(node)
    assert info is not None
    return info.requested.milli_cpu


@pytest.fixture
def world() -> World:
    w = World()
    w.cache.add_node(make_node("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    return w


# --------------------------------------------------------------------------- one event each


@pytest.mark.parametrize(
    ("event", "wake", "pending", "queued", "cached"),
    [
        pytest.param(
            dict(p=pod(uid="u")),
            (OURS,),
            True,
            ACTIVE,
            None,
            id="new unbound pod of ours: pending, active, its loop woken",
        ),
        pytest.param(
            dict(p=pod(uid="u", scheduler="other")),
            (),
            True,
            None,
            None,
            id="new unbound pod of an unserved name: pending only",
        ),
        pytest.param(dict(p=pod(uid="u", on="n1")), (), False, None, PodState.ADDED, id="new bound pod: cached"),
        pytest.param(
            dict(p=pod(uid="u", deleting=True)), (), False, None, None, id="unbound pod being deleted: nowhere"
        ),
        pytest.param(
            dict(p=pod(uid="u", phase="Succeeded")), (), False, None, None, id="unbound terminal pod: nowhere"
        ),
        pytest.param(
            dict(p=pod(uid="u", on="n1", phase="Failed")), (), False, None, None, id="bound terminal pod: not cached"
        ),
        pytest.param(
            dict(p=pod(uid="u"), deleted=True), (), False, None, None, id="deletion of an unknown pod: nothing"
        ),
    ],
)
def test_a_single_pod_event(
    world: World,
    event: dict[str, object],
    wake: tuple[str, ...],
    pending: bool,
    queued: str | None,
    cached: PodState | None,
) -> None:
    p = event["p"]
    assert isinstance(p, Pod)
    routed = world.pod(p, deleted=bool(event.get("deleted")))
    assert routed.wake == wake
    assert (p.uid in {x.uid for x in world.pending.of(p.scheduler_name)}) is pending
    assert world.queue.where(p) == queued
    assert world.cache.state_of(p) is cached


def test_bound_and_deleted_pods_are_settled_so_their_records_can_go(world: World) -> None:
    assert world.pod(pod(uid="a")).settled == ""
    assert world.pod(pod(uid="a", on="n1")).settled == "a"
    assert world.pod(pod(uid="b"), deleted=True).settled == "b"


# --------------------------------------------------------------------------- scenarios


def test_pending_pod_updates_stay_one_entry_and_binding_removes_it(world: World) -> None:
    world.pod(pod("p", uid="u"))
    world.pod(pod("p", uid="u"))  # an update (e.g. status)
    assert len(world.pending) == 1 and len(world.queue) == 1
    routed = world.pod(pod("p", uid="u", on="n1"))  # bound by someone: leaves the queue, enters the cache
    assert len(world.pending) == 0 and len(world.queue) == 0
    assert world.cache.state_of(pod(uid="u")) is PodState.ADDED
    assert routed.event == "AssignedPodAdd"


def test_an_assumed_pod_is_confirmed_by_the_watch(world: World) -> None:
    p = pod(uid="u")
    world.pod(p)
    info = world.queue.pop(NOW)
    assert info is not None
    world.cache.assume(p, "n1")
    world.pod(pod(uid="u"))  # an update while the bind is in flight: the queue ignores it, as upstream does
    assert world.queue.where(p) == "in_flight" and world.queue.get(p) is info and info.pod is p
    world.pod(pod(uid="u", on="n1"))
    assert world.cache.state_of(p) is PodState.ADDED
    assert requested_cpu(world) == 1000  # counted once


def test_deleting_an_assumed_pod_frees_its_resources_and_moves_unschedulable_pods(world: World) -> None:
    waiting = pod("waiting", uid="w")
    world.park_unschedulable(waiting)
    p = pod(uid="u")
    world.pod(p)
    world.queue.pop(NOW)
    world.cache.assume(p, "n1")
    routed = world.pod(pod(uid="u", deleting=True))  # upstream handleAssumedPodDeletion
    assert world.cache.state_of(p) is None
    assert requested_cpu(world) == 0
    assert (routed.event, routed.wake) == ("AssignedPodDelete", (OURS,))
    assert world.queue.where(waiting) != "unschedulable"


def test_deleting_a_bound_pod_moves_unschedulable_pods_once(world: World) -> None:
    world.pod(pod("bound", uid="b", on="n1"))
    waiting = pod("waiting", uid="w")
    world.park_unschedulable(waiting)
    routed = world.pod(pod("bound", uid="b", on="n1"), deleted=True)
    assert (routed.event, routed.wake, routed.settled) == ("AssignedPodDelete", (OURS,), "b")
    assert world.queue.where(waiting) in (ACTIVE, "backoff")
    again = world.pod(pod("bound", uid="b", on="n1"), deleted=True)  # a repeated delete: nothing left to free
    assert again == Routed(settled="b")


def test_an_in_place_resize_down_moves_unschedulable_pods(world: World) -> None:
    # upstream framework/events.go extractPodScaleDown: a bound pod's requests (status included) went down
    def running(actual_cpu: str) -> Pod:
        return (
            make_pod("bound")
            .uid("b")
            .node("n1")
            .container("c0", cpu="1")
            .container_status("c0", actual={"cpu": actual_cpu})
            .obj()
        )

    world.pod(running("3"))
    waiting = pod("waiting", uid="w")
    world.park_unschedulable(waiting)
    grew = world.pod(running("4"))
    assert (grew, world.queue.where(waiting)) == (Routed(settled="b"), "unschedulable")
    shrank = world.pod(running("2"))
    assert (shrank.event, shrank.wake, shrank.settled) == ("AssignedPodScaleDown", (OURS,), "b")
    assert world.queue.where(waiting) in (ACTIVE, "backoff")
    info = world.cache.get_node_info("n1")
    assert info is not None and info.requested.milli_cpu == 2000  # the larger of spec (1) and status (2)


def test_a_bound_pod_selected_by_required_affinity_moves_the_waiting_pod(world: World) -> None:
    waiting = make_pod("waiting").scheduler(OURS).uid("w").pod_affinity("kubernetes.io/hostname", {"app": "db"}).obj()
    world.park_unschedulable(waiting, plugins=("InterPodAffinity",))  # InterPodAffinity's hint decides
    unrelated = world.pod(make_pod("web").label(app="web").node("n1").obj())
    assert (unrelated.wake, world.queue.where(waiting)) == ((), "unschedulable")
    routed = world.pod(make_pod("db").label(app="db").node("n1").obj())
    assert routed.wake == (OURS,)
    assert world.queue.where(waiting) != "unschedulable"


def test_a_bound_pod_relabelled_into_a_required_affinity_moves_the_waiting_pod(world: World) -> None:
    waiting = make_pod("waiting").scheduler(OURS).uid("w").pod_affinity("kubernetes.io/hostname", {"app": "db"}).obj()
    world.park_unschedulable(waiting, plugins=("InterPodAffinity",))
    world.pod(make_pod("x").uid("x").label(app="web").node("n1").obj())
    assert world.queue.where(waiting) == "unschedulable"
    routed = world.pod(make_pod("x").uid("x").label(app="db").node("n1").obj())  # upstream's AssignedPod/UpdatePodLabel
    assert (routed.event, routed.wake, routed.settled) == ("AssignedPodUpdate", (OURS,), "x")
    assert world.queue.where(waiting) != "unschedulable"


def test_pods_of_a_name_served_later_start_in_its_queue(world: World) -> None:
    world.pod(pod("a", scheduler="later", uid="a"))
    world.pod(pod("b", scheduler="later", uid="b"))
    world.pod(pod("b", scheduler="later", uid="b", on="n1"))  # bound meanwhile: not pending any more
    queue = serve(
        Profile(scheduler_name="later", pod_initial_backoff_seconds=2, pod_max_backoff_seconds=20),
        None,
        pending=world.pending,
        now=NOW,
    )
    assert [p.uid for p in queue.pending_pods()] == ["a"]
    assert (queue.pod_initial_backoff, queue.pod_max_backoff) == (2, 20)


def test_serving_a_new_profile_keeps_the_queue_and_retries_unschedulable_pods(world: World) -> None:
    waiting = pod("waiting", uid="w")
    world.park_unschedulable(waiting)
    queue = serve(
        Profile(scheduler_name=OURS, pod_initial_backoff_seconds=3, pod_max_backoff_seconds=30),
        world.queue,
        pending=world.pending,
        now=NOW + 60,
    )
    assert queue is world.queue
    assert queue.where(waiting) == ACTIVE  # its 1 s backoff ran out long ago
    assert (queue.pod_initial_backoff, queue.pod_max_backoff) == (3, 30)


def test_expired_assumptions_are_returned_and_move_pods(world: World) -> None:
    p = pod(uid="u")
    placed = world.cache.assume(p, "n1")
    world.cache.finish_binding(placed, NOW)
    world.park_unschedulable(pod("waiting", uid="w"))
    assert expire_assumed(world.cache, world.served, NOW + 1) == ((), NOTHING)
    gone, routed = expire_assumed(world.cache, world.served, NOW + 31)  # the 30 s TTL ran out
    assert [x.uid for x in gone] == ["u"] and routed.wake == (OURS,)


@pytest.mark.parametrize(
    ("scheduler", "node", "expected"),
    [
        pytest.param(OURS, None, True, id="unbound pod of a served name: report it"),
        pytest.param(OURS, "n1", False, id="bound: not ours to report"),
        pytest.param("other", None, False, id="another scheduler's pod"),
        pytest.param(42, None, False, id="a schedulerName that is not even a string"),
    ],
)
def test_which_unreadable_pods_get_an_event(scheduler: object, node: object, expected: bool) -> None:
    assert reports_unreadable(scheduler, node, {OURS: Served()}) is expected


# --------------------------------------------------------------------------- nodes, objects, namespaces


def test_node_add_update_delete(world: World) -> None:
    waiting = pod("waiting", uid="w")
    world.park_unschedulable(waiting)
    routed = route_node(make_node("n2").obj(), cache=world.cache, served=world.served, now=NOW)
    assert (routed.event, routed.wake) == ("NodeAdd", (OURS,))
    assert (
        route_node(make_node("n2").label(a="b").obj(), cache=world.cache, served=world.served, now=NOW).event
        == "NodeUpdate"
    )
    assert route_node_deleted("n2", cache=world.cache) == NOTHING
    assert "n2" not in world.cache.node_names()
    assert route_node_deleted("never-seen", cache=world.cache) == NOTHING


@pytest.mark.parametrize(
    ("rejected_by", "cpu", "node_cpu", "moves"),
    [
        pytest.param(
            {"NodeResourcesFit"},
            "64",
            "4",
            False,
            id="64 cpu fit no 4-cpu node, even empty: it stays (upstream's QueueSkip)",
        ),
        pytest.param({"NodeResourcesFit"}, "64", "96", True, id="a 96-cpu node could hold it: it moves"),
        pytest.param(
            {"NodeResourcesFit", "TaintToleration"},
            "64",
            "4",
            True,
            id="another rejecting plugin has no hint: it moves",
        ),
        pytest.param({"TaintToleration"}, "64", "4", True, id="rejected by a taint only: it moves"),
    ],
)
def test_a_node_event_moves_a_pod_that_only_lacked_resources_when_the_node_could_hold_it(
    world: World, rejected_by: set[str], cpu: str, node_cpu: str, moves: bool
) -> None:
    waiting = make_pod("big").uid("big").req(cpu=cpu).scheduler(OURS).obj()
    world.pod(waiting)
    info = world.queue.pop(NOW)
    assert info is not None
    world.queue.add_unschedulable(info, NOW, plugins=rejected_by)
    for event, node in (
        ("NodeAdd", make_node("n2").capacity(cpu=node_cpu, memory="8Gi", pods="110")),
        ("NodeUpdate", make_node("n2").capacity(cpu=node_cpu, memory="8Gi", pods="110").label(a="b")),
    ):
        routed = route_node(node.obj(), cache=world.cache, served=world.served, now=NOW)
        assert routed.event == event
        assert (world.queue.pending_counts()["unschedulable"] == 0) is moves, event
        if moves:
            return


def test_a_node_that_could_not_hold_it_does_not_send_a_pod_in_flight_to_backoff(world: World) -> None:
    # a 4-cpu node joins while two pods of 64 cpu are tried; NodeResourcesFit rejects both: the node
    # cannot help either, so both fail to the pool. The event is judged against the rejectors of the
    # attempt it happened during (upstream determineSchedulingHintForInFlightPod), so the first attempt
    # of "first" is judged like the second of "big" (it used to go to backoff: no rejector yet).
    big = make_pod("big").uid("big").req(cpu="64").scheduler(OURS).obj()
    first = make_pod("first").uid("first").req(cpu="64").scheduler(OURS).obj()
    world.pod(big)
    info = world.queue.pop(NOW)
    assert info is not None
    world.queue.add_unschedulable(info, NOW, plugins={"NodeResourcesFit"})
    route_node(
        make_node("n2").capacity(cpu="96", memory="8Gi", pods="110").obj(),
        cache=world.cache,
        served=world.served,
        now=NOW,
    )  # moves it
    world.pod(first)
    popped = [world.queue.pop(NOW + 20), world.queue.pop(NOW + 20)]
    assert {p.uid for p in popped if p is not None} == {"big", "first"}
    route_node(
        make_node("n3").capacity(cpu="4", memory="8Gi", pods="110").obj(),
        cache=world.cache,
        served=world.served,
        now=NOW + 20,
    )
    for p in popped:
        assert p is not None
        world.queue.add_unschedulable(p, NOW + 20, plugins={"NodeResourcesFit"})
    assert (world.queue.where("big"), world.queue.where("first")) == ("unschedulable", "unschedulable")


def test_a_node_that_could_hold_it_sends_a_pod_in_flight_to_backoff(world: World) -> None:
    big = make_pod("big").uid("big").req(cpu="64").scheduler(OURS).obj()
    world.pod(big)
    info = world.queue.pop(NOW)
    assert info is not None
    node = make_node("n2").capacity(cpu="96", memory="8Gi", pods="110").obj()
    route_node(node, cache=world.cache, served=world.served, now=NOW)  # joins while the attempt runs
    world.queue.add_unschedulable(info, NOW, plugins={"NodeResourcesFit"})
    assert world.queue.where("big") == "backoff"


@pytest.mark.parametrize(
    ("node_cpu", "moves"),
    [
        pytest.param("4", False, id="room freed on a 4-cpu node cannot hold 64 cpu: it stays"),
        pytest.param("96", True, id="room freed on a 96-cpu node might: it moves"),
    ],
)
def test_resources_freed_on_a_node_move_a_pod_that_only_lacked_resources_when_the_node_could_hold_it(
    world: World, node_cpu: str, moves: bool
) -> None:
    world.cache.add_node(make_node("n2").capacity(cpu=node_cpu, memory="8Gi", pods="110").obj())
    resident = make_pod("resident").uid("resident").req(cpu="1").node("n2").obj()
    world.pod(resident)
    world.pod(make_pod("big").uid("big").req(cpu="64").scheduler(OURS).obj())
    info = world.queue.pop(NOW)
    assert info is not None
    world.queue.add_unschedulable(info, NOW, plugins={"NodeResourcesFit"})
    routed = world.pod(resident, deleted=True)
    assert routed.event == "AssignedPodDelete"
    assert (world.queue.where("big") != "unschedulable") is moves


def test_a_node_that_comes_back_under_its_pods_is_an_add(world: World) -> None:
    world.pod(pod(uid="u", on="n1"))
    route_node_deleted("n1", cache=world.cache)  # its pod keeps a placeholder
    assert route_node(make_node("n1").obj(), cache=world.cache, served=world.served, now=NOW).event == "NodeAdd"


def test_other_kinds_are_stored_and_each_change_is_a_move(world: World) -> None:
    generation = world.cache.objects.generation
    routed = route_object("StorageClass", "fast", object(), cache=world.cache, served=world.served, now=NOW)
    assert routed.event == "StorageClassChange" and "fast" in world.cache.objects.storage_classes
    route_object("StorageClass", "fast", None, cache=world.cache, served=world.served, now=NOW)
    assert "fast" not in world.cache.objects.storage_classes
    assert world.cache.objects.generation == generation + 2
    route_object("ReplicaSet", "ReplicaSet/ns/rs", object(), cache=world.cache, served=world.served, now=NOW)
    assert "ReplicaSet/ns/rs" in world.cache.objects.controllers


@pytest.mark.parametrize(
    ("before", "labels", "event"),
    [
        pytest.param(None, {"team": "a"}, "NamespaceChange", id="new namespace: a move"),
        pytest.param({"team": "a"}, {"team": "a"}, "", id="same labels: nothing"),
        pytest.param({"team": "a"}, {"team": "b"}, "NamespaceChange", id="labels changed: a move"),
        pytest.param({"team": "a"}, None, "", id="deleted: forgotten, nothing moves"),
    ],
)
def test_namespaces_move_pods_only_when_labels_change(
    world: World, before: dict[str, str] | None, labels: dict[str, str] | None, event: str
) -> None:
    if before is not None:
        world.cache.objects.namespace_labels["ns"] = before
    assert route_namespace("ns", labels, cache=world.cache, served=world.served, now=NOW).event == event
    assert world.cache.objects.namespace_labels.get("ns") == labels


# --------------------------------------------------------------------------- lists and the cache sync


def test_the_cache_is_synced_once_every_kind_listed_once() -> None:
    sync = CacheSync(["Pod", "Node", "Service"])
    assert (sync.synced, sync.waiting) == (False, ("Pod", "Node", "Service"))
    assert sync.listed("Node") is False
    assert sync.listed("Node") is False  # a relist of a kind already counted
    assert sync.listed("Pod") is False and sync.waiting == ("Service",)
    assert sync.listed("Service") is True  # exactly the list that completes it says so
    assert sync.synced and sync.waiting == ()
    assert sync.listed("Service") is False  # a later relist is no new sync


def test_nothing_to_wait_for_is_synced_from_the_start() -> None:
    assert CacheSync([]).synced


def test_an_assigned_relist_deletes_the_bound_pods_it_lacks_and_keeps_assumptions(world: World) -> None:
    world.pod(pod("kept", uid="k", on="n1"))
    world.pod(pod("gone-bound", uid="gb", on="n1"))
    world.pod(pod("pending", uid="p"))
    assumed = pod("assumed", uid="a")
    world.pod(assumed)
    world.queue.pop(NOW)
    world.cache.assume(assumed, "n1")  # its bind is in flight: the server has it unassigned
    world.park_unschedulable(pod("waiting", uid="w"))
    routed = route_assigned_pods_relisted({"k"}, cache=world.cache, pending=world.pending, served=world.served, now=NOW)
    assert sorted(p.uid for p in world.cache.pods()) == ["a", "k"]
    assert sorted(p.uid for p in world.pending) == ["a", "p", "w"]  # the pending pods are Kopf's to report
    assert requested_cpu(world) == 2000  # "kept" and the assumption
    assert routed.wake == (OURS,) and routed.event == "AssignedPodDelete"  # freed room: the waiting pod moves
    assert world.queue.where(pod("waiting", uid="w")) != "unschedulable"


def test_the_pending_reconciliation_drops_what_it_lacks_of_the_pods_known_before_it(world: World) -> None:
    for uid in ("kept", "gone", "late"):
        world.pod(pod(uid, uid=uid))
    routed = route_pending_reconciled(
        {"kept"}, ["kept", "gone"], cache=world.cache, pending=world.pending, served=world.served, now=NOW
    )
    assert sorted(p.uid for p in world.pending) == ["kept", "late"]  # "late" came after the list was asked for
    assert world.queue.where(pod("gone", uid="gone")) is None and routed == NOTHING


def test_binding_interleaves_the_two_watches_in_either_order(world: World) -> None:
    """Our bind: Kopf's watch sees the pod leave (DELETED, previous content), the informer sees it bound."""
    for assigned_first in (True, False):
        w = World()
        w.cache.add_node(make_node("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
        unbound = (
            make_pod("g").req(cpu="1").scheduler(OURS).uid("u").labels({"scheduling.x-k8s.io/pod-group": "gang"}).obj()
        )
        w.unassigned(unbound)
        w.queue.pop(NOW)
        w.cache.assume(unbound, "n1")
        w.cache.finish_binding(unbound, NOW)
        w.queue.done(unbound)  # binding_succeeded
        bound = (
            make_pod("g")
            .req(cpu="1")
            .scheduler(OURS)
            .uid("u")
            .labels({"scheduling.x-k8s.io/pod-group": "gang"})
            .node("n1")
            .obj()
        )
        if assigned_first:
            w.assigned(bound)
        w.unassigned(unbound, gone=True)
        if not assigned_first:
            w.assigned(bound)
        assert w.cache.state_of(bound) is PodState.ADDED, assigned_first
        assert len(w.pending) == 0 and w.queue.where(unbound) is None
        assert w.cache.objects.gang_members == {"scheduling.x-k8s.io/default/gang": frozenset({"u"})}
        assert requested_cpu(w) == 1000


def test_a_late_unassigned_event_of_a_bound_pod_changes_nothing(world: World) -> None:
    world.assigned(pod("p", uid="u", on="n1"))
    assert world.unassigned(pod("p", uid="u")) == NOTHING  # the other watch had not caught up yet
    assert len(world.pending) == 0 and world.queue.where(pod("p", uid="u")) is None
    assert world.cache.state_of(pod("p", uid="u")) is PodState.ADDED


def test_kopfs_deleted_of_an_assumed_pod_keeps_the_assumption(world: World) -> None:
    """Deleted or bound, nobody knows yet: the bind's answer or the assigned watch settles it."""
    p = pod("p", uid="u")
    world.unassigned(p)
    world.queue.pop(NOW)
    world.cache.assume(p, "n1")
    world.unassigned(p, gone=True)
    assert world.cache.is_assumed(p) and len(world.pending) == 0
    route_pod_vanished(p, cache=world.cache, pending=world.pending, served=world.served, now=NOW)  # the bind said 404
    assert world.cache.state_of(p) is None and requested_cpu(world) == 0


def test_a_vanished_pending_pod_leaves_its_queue(world: World) -> None:
    world.park_unschedulable(pod("p", uid="u"))
    route_pod_vanished(pod("p", uid="u"), cache=world.cache, pending=world.pending, served=world.served, now=NOW)
    assert len(world.pending) == 0 and world.queue.where(pod("p", uid="u")) is None


def test_a_broken_watch_unsyncs_its_kind_until_it_lists_again() -> None:
    sync = CacheSync(kind for kind in ("Pod", "Node"))  # any iterable, a generator too
    assert not sync.synced and not sync.listed("Pod") and sync.listed("Node")
    sync.broken("Node")
    sync.broken("Secret")  # not watched: ignored
    assert (sync.synced, sync.waiting) == (False, ("Node",))
    assert sync.listed("Node") and sync.synced


def test_a_relist_holding_everything_changes_nothing(world: World) -> None:
    world.pod(pod("kept", uid="k", on="n1"))
    world.pod(pod("pending", uid="p"))
    assert (
        route_assigned_pods_relisted({"k", "p"}, cache=world.cache, pending=world.pending, served=world.served, now=NOW)
        == NOTHING
    )
    assert len(world.pending) == 1 and world.cache.pod_count() == 1


def test_a_relist_deletes_nodes_objects_and_namespaces_it_lacks(world: World) -> None:
    route_node(make_node("n2").obj(), cache=world.cache, served=world.served, now=NOW)
    route_nodes_relisted({"n2"}, cache=world.cache)
    assert world.cache.node_names() == ["n2"]
    for kind, key in [
        ("ReplicaSet", "ReplicaSet/ns/a"),
        ("ReplicaSet", "ReplicaSet/ns/b"),
        ("StatefulSet", "StatefulSet/ns/a"),
    ]:
        route_object(kind, key, object(), cache=world.cache, served=world.served, now=NOW)
    routed = route_objects_relisted("ReplicaSet", {"ReplicaSet/ns/a"}, cache=world.cache, served=world.served, now=NOW)
    # the StatefulSet shares the controllers store but not the ReplicaSet list: it stays
    assert sorted(world.cache.objects.controllers) == ["ReplicaSet/ns/a", "StatefulSet/ns/a"]
    assert routed.event == "ReplicaSetChange"
    world.cache.objects.namespace_labels.update({"a": {}, "b": {}})
    route_namespaces_relisted({"b"}, cache=world.cache, served=world.served, now=NOW)
    assert list(world.cache.objects.namespace_labels) == ["b"]
