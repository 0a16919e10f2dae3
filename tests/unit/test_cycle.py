"""One scheduling cycle without an API server: each outcome of ``schedule_one`` and where it leaves
the pod in the cache and the queue; then what a bind's success or failure does to them."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod
from source_trees import nodes

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.core.framework.basics import SKIP, SUCCESS, CycleState, QueuedPodInfo, Status, error
from kopf_scheduler.core.framework.interface import ApiClient, PreBindPlugin
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import parse_service
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.cycle import (
    Bind,
    CacheHandle,
    CycleContext,
    Error,
    Parked,
    Skip,
    Unschedulable,
    binding_failed,
    binding_succeeded,
    conclude,
    decide,
    next_wait,
    prepare,
    schedule_one,
)
from kopf_scheduler.core.scheduling.routing import route_namespace, route_object
from kopf_scheduler.core.state.cache import PodState, SchedulerCache
from kopf_scheduler.core.state.queueing import BACKOFF, UNSCHEDULABLE, SchedulingQueue

NOW = 50.0


def default_scheduler() -> GenericScheduler:
    profile = validate_policy({"schedulerName": "s", "algorithmProvider": "DefaultProvider"})
    assert isinstance(profile, Profile)
    return GenericScheduler(profile)


class Cycle:
    """A cache with the given nodes, a queue holding one pod, popped and ready to decide."""

    def __init__(self, pod: Pod, *nodes: str, cpu: str = "2") -> None:
        self.cache = SchedulerCache()
        for name in nodes:
            self.cache.add_node(make_node(name).capacity(cpu=cpu, memory="8Gi", pods="110").obj())
        self.queue = SchedulingQueue()
        self.queue.add(pod, NOW - 1)
        info = self.queue.pop(NOW)
        assert info is not None
        self.info: QueuedPodInfo = info
        self.snapshot = Snapshot(self.cache.objects)
        self.waiting: WaitingPods[Parked] = WaitingPods()

    def run(self, scheduler: Any = None) -> object:
        return schedule_one(self.info, self.snapshot, self.context(scheduler or default_scheduler()))

    def context(self, scheduler: Any) -> CycleContext:
        return CycleContext(scheduler, self.cache, self.queue, self.waiting, random.Random(7), NOW)

    def failed(self, placed: Pod, now: float) -> bool:
        """``binding_failed`` for `placed`, bound by the default scheduler's profile."""
        return binding_failed(
            self.info, placed, handle=CacheHandle(self.cache, self.waiting), queue=self.queue, now=now,
            profile=default_scheduler().profile, state=CycleState(),
        )  # fmt: skip


def test_a_pod_that_fits_is_assumed_and_stays_in_flight_for_its_bind() -> None:
    pod = make_pod("web").req(cpu="1").obj()
    cycle = Cycle(pod, "n1")
    outcome = cycle.run()
    assert isinstance(outcome, Bind) and outcome.node == "n1"
    assert outcome.pod.node_name == "n1" and outcome.pod.uid == pod.uid
    assert cycle.cache.state_of(pod) is PodState.ASSUMED
    assert cycle.queue.where(pod) == "in_flight"
    assert len(cycle.snapshot) == 1  # brought up to date before the algorithm ran


class Volumes(PreBindPlugin):
    """A PreBind plugin whose pre-flight has work for pods labelled ``volume``, fails for ``broken`` ones."""

    NAME = "Volumes"

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if "broken" in pod.labels:
            return error(f'no pod volume found for node "{node_name}"')
        return SUCCESS if "volume" in pod.labels else SKIP

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        return SUCCESS


def volumes_scheduler() -> GenericScheduler:
    registry = Registry.in_tree().extended([(Volumes, "test")])
    profile = validate_policy({"schedulerName": "s", "plugins": [{"name": "Volumes"}]}, registry=registry)
    assert isinstance(profile, Profile), profile
    return GenericScheduler(profile)


@pytest.mark.parametrize(
    ("labels", "nominated"),
    [
        pytest.param({}, None, id="no PreBind plugin has work: bound without a nomination"),
        pytest.param({"volume": "yes"}, "n1", id="a PreBind plugin has work: nominated to the node first"),
    ],
)
def test_a_pre_bind_with_work_nominates_the_pod_before_binding(labels: dict[str, str], nominated: str | None) -> None:
    """Upstream's bindingCycle with NominatedNodeNameForExpectation: the pre-flights, then the nomination."""
    cycle = Cycle(make_pod("web").req(cpu="1").labels(labels).obj(), "n1")
    outcome = cycle.run(volumes_scheduler())
    assert isinstance(outcome, Bind) and outcome.nominated_node == nominated
    # VolumeBinding and DynamicResources (the default profile's PreBinds) have nothing to do for a pod without
    # volumes or claims
    defaults = {"VolumeBinding", "DynamicResources"}
    assert outcome.state.skip_pre_bind == (defaults if nominated else {*defaults, "Volumes"})


def test_a_pre_flight_error_undoes_the_attempt_and_backs_off() -> None:
    pod = make_pod("web").req(cpu="1").labels({"broken": "yes"}).obj()
    cycle = Cycle(pod, "n1")
    outcome = cycle.run(volumes_scheduler())
    assert isinstance(outcome, Error)
    assert (outcome.message, outcome.nominated_node) == ('running PreBindPreFlight "Volumes": '
                                                         'no pod volume found for node "n1"', "")  # fmt: skip
    assert cycle.cache.state_of(pod) is None and cycle.queue.where(pod) == BACKOFF


def test_a_pod_that_fits_nowhere_waits_in_the_unschedulable_pool() -> None:
    pod = make_pod("huge").req(cpu="8").obj()
    cycle = Cycle(pod, "n1", "n2")
    outcome = cycle.run()
    assert isinstance(outcome, Unschedulable)
    # 8 cpu never fits a 2-cpu node (UnschedulableAndUnresolvable): preemption cannot help there
    preemption = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    assert outcome.message == f"0/2 nodes are available: 2 Insufficient cpu. {preemption}"
    assert outcome.nominated_node == "" and outcome.victims == () and outcome.post_filtered
    assert "NodeResourcesFit" in outcome.plugins
    assert cycle.queue.where(pod) == UNSCHEDULABLE
    info = cycle.queue.get(pod)
    assert info is not None and info.unschedulable_plugins == outcome.plugins
    assert cycle.cache.state_of(pod) is None


def test_no_nodes_at_all_is_an_error_and_a_backoff() -> None:
    pod = make_pod("web").obj()
    cycle = Cycle(pod)
    assert cycle.run() == Error("no nodes available to schedule pods", nominated_node="")
    assert cycle.queue.where(pod) == BACKOFF


def test_an_algorithm_that_raises_is_an_error_carrying_the_exception() -> None:
    class Broken:
        profile = default_scheduler().profile

        def schedule(self, pod: Pod, snapshot: Snapshot, *, rng: random.Random, turn: object, **_: object) -> None:
            raise ZeroDivisionError("bug")

    pod = make_pod("web").obj()
    cycle = Cycle(pod, "n1")
    outcome = cycle.run(Broken())
    assert isinstance(outcome, Error) and isinstance(outcome.exception, ZeroDivisionError)
    assert outcome.message == "internal error: ZeroDivisionError('bug')"
    assert cycle.queue.where(pod) == BACKOFF


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        pytest.param("deleting", "being deleted", id="a pod being deleted is skipped"),
        pytest.param("bound", "already bound to n1", id="a pod already bound is skipped"),
        pytest.param("assumed", "already assumed", id="a pod assumed earlier (its bind in flight) is skipped"),
        pytest.param(
            "confirmed", "already bound (the watch confirmed it)", id="a pod the cache holds as bound is skipped"
        ),
    ],
)
def test_skips_leave_the_queue(setup: str, reason: str) -> None:
    b = make_pod("web").uid("u")
    if setup == "deleting":
        b.terminating()
    if setup == "bound":
        b.node("n1")
    pod = b.obj()
    cycle = Cycle(pod, "n1")
    if setup == "assumed":
        cycle.cache.assume(pod, "n1")
    if setup == "confirmed":
        cycle.cache.add_pod(pod.with_node("n1"))

    class NeverCalled:
        def schedule(self, *_: object, **__: object) -> None:
            raise AssertionError("a skipped pod reached the algorithm")

    assert cycle.run(NeverCalled()) == Skip(reason)
    assert cycle.queue.where(pod) is None


# --------------------------------------------------------------------------- preemption


def preempting_cycle(*, nominated_elsewhere: Pod | None = None) -> tuple[Cycle, Pod, Pod]:
    """n1 (2 cpu) full with a priority-0 pod; a priority-1000 pod asking for 2 cpu is popped."""
    pod = make_pod("urgent").priority(1000).req(cpu="2").obj()
    cycle = Cycle(pod, "n1")
    victim = make_pod("batch").priority(0).req(cpu="2").node("n1").obj()
    cycle.cache.add_pod(victim)
    if nominated_elsewhere is not None:
        cycle.queue.add_nominated_pod(nominated_elsewhere, "n1")
    return cycle, pod, victim


def test_preemption_nominates_the_pod_and_names_the_victims() -> None:
    cycle, pod, victim = preempting_cycle()
    outcome = cycle.run()
    assert isinstance(outcome, Unschedulable)
    assert outcome.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    )
    assert (outcome.nominated_node, outcome.victims, outcome.clear_nominations, outcome.post_filtered) == (
        "n1",
        (victim,),
        (),
        True,
    )
    # the pod waits (nominated) until the victim's deletion moves it; the victim stays cached until the watch says so
    assert cycle.queue.where(pod) == UNSCHEDULABLE
    assert cycle.queue.nominated_pods_for_node("n1") == [pod]
    assert cycle.cache.state_of(victim) is PodState.ADDED


def test_preemption_clears_lower_nominations_on_the_node() -> None:
    lower = make_pod("lower").priority(10).obj()
    cycle, pod, _ = preempting_cycle(nominated_elsewhere=lower)
    outcome = cycle.run()
    assert isinstance(outcome, Unschedulable) and outcome.clear_nominations == (lower,)
    assert cycle.queue.nominated_pods_for_node("n1") == [pod]


def test_a_failed_preemption_clears_the_nomination() -> None:
    pod = make_pod("urgent").priority(1000).req(cpu="2").nominated("n1").obj()
    cycle = Cycle(pod, "n1")
    cycle.cache.add_pod(make_pod("system").priority(2000).req(cpu="2").node("n1").obj())
    assert cycle.queue.nominated_pods_for_node("n1") == [pod]
    outcome = cycle.run()
    assert isinstance(outcome, Unschedulable) and outcome.nominated_node == "" and outcome.victims == ()
    assert outcome.message.endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert cycle.queue.nominated_pods_for_node("n1") == []


def test_a_pod_that_may_not_preempt_keeps_its_nomination() -> None:
    pod = make_pod("patient").priority(1000).req(cpu="2").preemption_policy("Never").nominated("n1").obj()
    cycle = Cycle(pod, "n1")
    cycle.cache.add_pod(make_pod("batch").req(cpu="2").node("n1").obj())
    outcome = cycle.run()
    assert isinstance(outcome, Unschedulable) and outcome.nominated_node is None
    assert outcome.message.endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert cycle.queue.nominated_pods_for_node("n1") == [pod]


def test_a_nominated_pod_that_fits_leaves_the_nominator() -> None:
    pod = make_pod("urgent").priority(1000).req(cpu="1").nominated("n1").obj()
    cycle = Cycle(pod, "n1")
    assert isinstance(cycle.run(), Bind)
    assert cycle.queue.nominated_pods_for_node("n1") == []  # the cache counts it now


# --------------------------------------------------------------------------- after the bind


def bound_cycle() -> tuple[Cycle, Pod]:
    cycle = Cycle(make_pod("web").req(cpu="1").obj(), "n1")
    outcome = cycle.run()
    assert isinstance(outcome, Bind)
    return cycle, outcome.pod


def test_a_successful_bind_starts_the_assumption_ttl_and_ends_the_attempt() -> None:
    cycle, placed = bound_cycle()
    binding_succeeded(placed, cache=cycle.cache, queue=cycle.queue, now=NOW + 1)
    assert cycle.cache.state_of(placed) is PodState.BOUND
    assert cycle.queue.where(placed) is None
    assert cycle.cache.expire(NOW + 30) == [] and cycle.cache.expire(NOW + 31) == [placed]  # TTL 30 s from the bind


def test_a_bind_the_watch_confirmed_first_stays_confirmed() -> None:
    cycle, placed = bound_cycle()
    cycle.cache.add_pod(placed)  # the watch was faster than the response
    binding_succeeded(placed, cache=cycle.cache, queue=cycle.queue, now=NOW + 1)
    assert cycle.cache.state_of(placed) is PodState.ADDED


def test_a_failed_bind_forgets_the_assumption_and_backs_off() -> None:
    cycle, placed = bound_cycle()
    assert cycle.failed(placed, NOW + 1) is True
    assert cycle.cache.state_of(placed) is None
    assert cycle.queue.where(placed) == BACKOFF


def test_a_failed_bind_of_a_pod_deleted_meanwhile_is_not_requeued() -> None:
    cycle, placed = bound_cycle()
    cycle.cache.remove_pod(placed)  # the watch saw the deletion and freed it
    cycle.queue.delete(placed)
    assert cycle.failed(placed, NOW + 1) is False
    assert cycle.queue.where(placed) is None


# --------------------------------------------------------------------------- how long the loop sleeps


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param("empty", 1.0, id="nothing queued: the longest wait, a handler's wake-up cuts it short"),
        pytest.param("active", 0.0, id="a pod is ready: pop now"),
        pytest.param("backoff", 0.25, id="a pod backing off until 50.25: sleep 0.25 s (its 1 s backoff from 49.25)"),
        pytest.param("long backoff", 1.0, id="a backoff longer than the longest wait: the longest wait"),
        pytest.param(
            "unschedulable", 1.0, id="only an unschedulable pod: the longest wait (its 5 min leftover is far)"
        ),
    ],
)
def test_next_wait(state: str, expected: float) -> None:
    queue = SchedulingQueue(pod_initial_backoff=1.0, pod_max_backoff=10.0)
    if state != "empty":
        queue.add(make_pod("p").obj(), 0.0)
    if state in ("backoff", "long backoff", "unschedulable"):
        info = queue.pop(0.0)
        assert info is not None
        if state == "unschedulable":
            queue.add_unschedulable(info, NOW)
        else:
            queue.add_backoff(info, NOW - 0.75 if state == "backoff" else NOW + 5)
    assert next_wait(queue, NOW, longest=1.0, waiting=WaitingPods()) == pytest.approx(expected)


# ----------------------------------------------------------------------------- the three steps, run apart


def test_a_pod_bound_while_decide_ran_off_the_loop_is_skipped() -> None:
    pod = make_pod("web").req(cpu="1").obj()
    cycle = Cycle(pod, "n1")
    assert prepare(cycle.info, cycle.snapshot, cache=cycle.cache, queue=cycle.queue, private_objects=True) is None
    decided = decide(cycle.info, cycle.snapshot, cycle.context(default_scheduler()))
    cycle.cache.add_pod(pod.with_node("n1"))  # meanwhile another scheduler bound it and the watch said so
    outcome = conclude(cycle.info, decided, cycle.context(default_scheduler()))
    assert outcome == Skip("already bound (the watch confirmed it)")
    assert cycle.queue.where(pod) is None


def test_a_private_snapshot_keeps_its_objects_while_the_cache_changes() -> None:
    cycle = Cycle(make_pod("web").obj(), "n1")
    service = parse_service({"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"app": "web"}}})
    cycle.cache.update_snapshot(cycle.snapshot, private_objects=True)
    private = cycle.snapshot.objects
    assert private is not cycle.cache.objects
    route_object("Service", "default/s", service, cache=cycle.cache, served={}, now=NOW)
    assert private.services == {}, "a watch event during decide does not reach the copy"
    cycle.cache.update_snapshot(cycle.snapshot, private_objects=True)
    assert cycle.snapshot.objects.services == {"default/s": service}, "the next prepare copies again"
    unchanged = cycle.snapshot.objects
    cycle.cache.update_snapshot(cycle.snapshot, private_objects=True)
    assert cycle.snapshot.objects is unchanged, "no change, no copy"
    cycle.cache.update_snapshot(cycle.snapshot)
    assert cycle.snapshot.objects is cycle.cache.objects


def test_a_deleted_namespace_counts_as_a_change() -> None:
    cache = SchedulerCache()
    route_namespace("team", {"env": "prod"}, cache=cache, served={}, now=NOW)
    before = cache.objects.generation
    route_namespace("team", None, cache=cache, served={}, now=NOW)
    assert cache.objects.generation == before + 1


def test_only_the_core_sequences_a_scheduling_cycle() -> None:
    """``schedule_one``'s steps are written once (``begin_cycle`` and its ``Decision``): no module outside
    core/scheduling/ takes ``prepare``, ``decide`` or ``conclude`` from the cycle, the operator's loop included."""
    steps = {"prepare", "decide", "conclude"}
    package = Path(__file__).resolve().parents[2] / "operator" / "kopf_scheduler"
    importers: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        if path.is_relative_to(package / "core" / "scheduling"):
            continue
        for node in nodes(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("scheduling.cycle"):
                taken = {alias.name for alias in node.names} & steps
                if taken:
                    importers.setdefault(str(path.relative_to(package)), set()).update(taken)
    assert importers == {}
