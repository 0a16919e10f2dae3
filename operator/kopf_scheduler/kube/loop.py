"""The scheduling loop of one SchedulingPolicy (upstream ``scheduleOne`` in a loop): waiting and effects.

Sleep as long as the core says (``core.scheduling.cycle.next_wait``) or until a handler wakes us; pop; let
the core decide and carry out the outcome. The cycle's steps are the core's (``begin_cycle``, then the
``Decision``'s ``run`` and ``finish``, as ``schedule_one`` takes them); only where ``run`` goes is ours: to
``App.run_blocking``'s thread pool when the policy has HTTP extenders, whose calls block (on the policy's
own snapshot with a private copy of the cluster objects and of the nominator), inline otherwise (a thread
hop costs more than most attempts):

- ``Bind``: spawn its binding cycle (at most ``app.BIND_CONCURRENCY`` in flight, so the next pod
  is scheduled while binds are on the wire; ``kube/binding.py`` follows the core's plan: PreBind
  plugins, binder extenders, Bind plugins);
- ``Unschedulable``: a FailedScheduling event (unless the core's repeat limiter drops it) and
  PodScheduled=False/Unschedulable through pods/status when the core's condition memo says the
  message changed, with ``status.nominatedNodeName`` when the core changed the nomination; when
  preemption chose victims, they are evicted before the next pop (``kube/preemption.py``);
- ``Error``: a FailedScheduling event (and a cleared nomination); ``Skip``: nothing;
- ``Group``: a Workload-API gang's pod-group cycle (decided inline, on the loop): each member's
  outcome is carried out as above (a member its gang's preemption nominated gets ``status.nominatedNodeName``),
  the gang's preemption victims are evicted once for its PodGroup (``kube/preemption.py``), and a rejected
  gang's PodGroup reads why (``kube/podgroups.py``);
- ``Wait``: the pod is assumed and waits at Permit in ``app.waiting`` (gangs); its
  ``status.nominatedNodeName`` is set to its node meanwhile (upstream's NominatedNodeNameForExpectation;
  a ``Bind`` whose PreBind plugins have work carries it too, written by the binding task first).
  ``_settle`` finishes waiting pods after every batch and when a deadline passes (the core's
  ``next_wait`` counts the earliest one): allowed ones are bound as above, rejected and timed-out
  ones get a FailedScheduling event and PodScheduled=False, and their nomination is cleared; the
  room they release is an AssignedPodDelete move that leaves the rejected gangs alone, and their PodGroups' status is
  written (``kube/podgroups.py``, also refreshed with the housekeeping).

Several served scheduler names (a KubeSchedulerConfiguration's profiles, imported as one SchedulingPolicy
each) share the cache and take turns as one queue would order their pods (upstream has one queue for
every profile): a loop whose next pod comes after another name's ready pod wakes that name's loop and
lets it pop first (``_first_elsewhere``), at most ``MAX_DEFERRALS`` times in a row. Their queues count
scheduling cycles together (opportunistic batching reuses a ranking only in the very next one).

Every attempt is kept for ``kopf-scheduler explain`` (``app.attempts``, ``core/scheduling/attempts.py``: references,
no copies).

Every ``HOUSEKEEPING_PERIOD`` seconds: expire unconfirmed assumptions (``core.scheduling.routing``) and
refresh gauges. The loop pops only while the cache is current (``App.current``: every kind
synced at start, pods and nodes not relisting after lost history, and the process not frozen) and
``app.leading`` is set; a standby keeps its cache and queues warm. Whatever it then decides is
written only while this replica's term is valid (the ``Api``'s fence).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, Final

from ..core.framework.basics import Code, CycleState, QueuedPodInfo
from ..core.framework.instrumentation import PLUGIN_METRICS_SAMPLE_PERCENT
from ..core.framework.recording import STAGE_PERMIT
from ..core.model.objects import Pod
from ..core.scheduling import routing
from ..core.scheduling.cycle import (
    Bind,
    CycleContext,
    Decision,
    Error,
    Group,
    Outcome,
    Single,
    Skip,
    Unschedulable,
    Wait,
    begin_cycle,
    next_wait,
    settle_waiting,
)
from ..core.state.queueing import first_ready
from ..core.toolkit import gangs
from ..edge.recorder import DrawLog
from . import binding, bodies, dra, events, podgroups, preemption
from .app import App, PolicyState

__all__ = ["run"]

logger = logging.getLogger(__name__)

HOUSEKEEPING_PERIOD: Final = 1.0
IDLE_WAIT: Final = 1.0
#: pods scheduled back to back before yielding to the event loop (watch handlers, binds)
BATCH: Final = 32
#: with several served names, a loop lets the one whose pod comes first pop it: it waits this long for that,
#: at most this many times in a row (a loop held up elsewhere, in a bind slot, must not stall the others)
DEFER_WAIT: Final = 0.002
MAX_DEFERRALS: Final = 50


async def run(app: App, policy: str, stopped: Any) -> None:
    """Serve `policy` until Kopf's `stopped` flag is set (the policy was deleted or the operator stops)."""
    logger.info("scheduling loop for SchedulingPolicy %s started", policy)
    last_housekeeping = 0.0
    deferrals = 0  # in a row, to another served name's loop
    while not stopped:
        state = app.state_for_policy(policy)
        if state is None or not app.leading.is_set() or not app.current():
            await _sleep_until(app, state, IDLE_WAIT)
            continue
        now = app.now()
        if now - last_housekeeping >= HOUSEKEEPING_PERIOD:
            last_housekeeping = now
            _housekeeping(app, state, now)
        await _settle(app, now)
        wait = next_wait(state.queue, now, longest=IDLE_WAIT, waiting=app.waiting)
        if wait > 0:
            await _sleep_until(app, state, wait)
            continue
        pause = 0.0
        for _ in range(BATCH):
            other = _first_elsewhere(app, state, app.now())
            if other is not None and deferrals < MAX_DEFERRALS:  # its loop pops first, as one queue would
                deferrals += 1
                other.wakeup.set()
                pause = DEFER_WAIT
                break
            deferrals = 0
            info = state.queue.pop(app.now())
            if info is None:
                break
            try:
                await _attempt(app, state, info)
            except Exception:  # a bug must not end the loop: back off the pod, keep going
                logger.exception("scheduling %s failed unexpectedly", info.pod.key)
                state.queue.add_backoff(info, app.now())
            if stopped or app.state_for_policy(policy) is not state or not app.leading.is_set() or not app.current():
                break
        await asyncio.sleep(pause)
    logger.info("scheduling loop for SchedulingPolicy %s stopped", policy)


def _first_elsewhere(app: App, state: PolicyState, now: float) -> PolicyState | None:
    """Upstream has one queue for every profile: the other served name whose ready pod that queue would pop
    before this one's (by this profile's QueueSort; ``core.state.queueing.first_ready``), if there is one."""
    if len(app.states) < 2:
        return None
    states = list(app.states.values())
    first = first_ready([s.queue for s in states], now, less=state.queue.less)
    if first is None or first is state.queue:
        return None
    return next(s for s in states if s.queue is first)


async def _sleep_until(app: App, state: PolicyState | None, timeout: float) -> None:
    if state is None:
        await asyncio.sleep(timeout)
        return
    state.wakeup.clear()
    try:
        await asyncio.wait_for(state.wakeup.wait(), timeout=max(timeout, 0.001))
    except TimeoutError:
        pass


def _housekeeping(app: App, state: PolicyState, now: float) -> None:
    expired, routed = routing.expire_assumed(app.cache, app.states, now)
    for pod in expired:
        logger.warning("assumed pod %s expired: the watch never confirmed its binding", pod.key)
    if expired:
        # a bind the watch of pods did not show within the TTL: that watch may be deaf while it seems
        # alive (a stream that delivers only bookmarks); list pods again rather than trust it
        for informer in app.informers:
            if informer.feed.kind == "Pod":
                informer.resync()
    app.perform(routed)
    app.metrics.set_leader(state.policy, app.leading.is_set())
    for name, served in app.states.items():  # opportunistic batching's counts (core/toolkit/batching.py)
        app.metrics.observe_batch(name, *served.scheduler.batch.take_counts())
    podgroups.refresh(app)


async def _attempt(app: App, state: PolicyState, info: QueuedPodInfo) -> None:
    """One cycle: the core decides, this carries the outcome out."""
    started = app.now()
    outcome = await _cycle(app, state, info)
    done = app.now()
    if not isinstance(outcome, Group):
        await _carry_out(app, state, info, outcome, started, done)
        return
    for member, own in outcome.members:  # a pod-group cycle: each member's outcome as its own
        await _carry_out(app, state, member, own, started, done)
    if outcome.preemption is not None:
        app.metrics.observe_workload_preemption(outcome.preemption.status.code, len(outcome.victims))
    if outcome.victims and outcome.pod_group is not None:  # the gang's preemption: its victims go once
        nominated = [
            (m.pod, own.nominated_node)
            for m, own in outcome.members
            if isinstance(own, Unschedulable) and own.nominated_node
        ]
        await preemption.preempt_for_pod_group(app, outcome.pod_group, nominated, outcome.victims)
        await _settle(app, done)  # a victim waiting at Permit was preempted in memory: release it now
    if outcome.rejection:
        podgroups.refresh(app, rejected={outcome.key: outcome.rejection})


async def _carry_out(
    app: App, state: PolicyState, info: QueuedPodInfo, outcome: Single, started: float, done: float
) -> None:
    pod = info.pod
    profile = state.scheduler_name
    app.attempts.record(info, outcome, scheduler_name=profile, now=done)
    if app.recorder is not None:
        draws = state.rng.take() if isinstance(state.rng, DrawLog) else ()
        app.recorder.decision(pod.key, pod.uid, profile, outcome, draws)
    match outcome:
        case Skip(reason):
            logger.debug("skipping %s: %s", pod.key, reason)
        case Bind(placed, _, cycle, plan):
            app.metrics.observe_algorithm(done - started)
            await app.bind_slots.acquire()  # released by binding.bind
            app.spawn(
                binding.bind(
                    app, state, info, placed, started=started, cycle=cycle, plan=plan, nominate=outcome.nominated_node
                )
            )
        case Wait(placed, node, plugins):
            app.metrics.observe_algorithm(done - started)
            logger.info("%s is assumed on %s and waits at Permit for %s", pod.key, node, ", ".join(plugins))
            if outcome.nominated_node and outcome.nominated_node != pod.nominated_node_name:
                # upstream's NominatedNodeNameForExpectation: others see where the waiting pod is going
                binding.nominate_waiting(app, placed, outcome.nominated_node)
        case Unschedulable(message, _, nominated, victims, clear_nominations, post_filtered):
            app.metrics.observe_algorithm(done - started)
            app.metrics.observe_attempt("unschedulable", profile, done - started)
            if post_filtered:
                app.metrics.observe_preemption(len(victims))
            logger.info("%s is unschedulable: %s", pod.key, message)
            app.spawn(
                events.failed_scheduling(app, namespace=pod.namespace, name=pod.name, uid=pod.uid, message=message)
            )
            write_condition = app.condition_memo.should_write(pod.uid, message)
            renominate = nominated if nominated is not None and nominated != pod.nominated_node_name else None
            if write_condition or renominate is not None:
                app.spawn(_update_status(app, pod, message if write_condition else None, renominate))
            if victims and nominated:
                await preemption.preempt(app, pod, nominated, victims, clear_nominations)
            # a gang's PostFilter may have rejected its waiting members, a preemption taken a waiting pod's place:
            # release them now
            if gangs.member_keys(pod) or (victims and nominated):
                await _settle(app, done)
        case Error(message, exception, nominated):
            app.metrics.observe_algorithm(done - started)
            app.metrics.observe_attempt("error", profile, done - started)
            logger.warning("error scheduling %s: %s", pod.key, message, exc_info=exception)
            app.spawn(
                events.failed_scheduling(app, namespace=pod.namespace, name=pod.name, uid=pod.uid, message=message)
            )
            if nominated == "" and pod.nominated_node_name:
                app.spawn(preemption.patch_pod_status(app, pod, nominated_node=""))
    dra.flush(app)  # DynamicResources' PostFilter / Unreserve writes, if any


async def _cycle(app: App, state: PolicyState, info: QueuedPodInfo) -> Outcome:
    """``core.scheduling.cycle.schedule_one``'s steps (``begin_cycle``), with the algorithm in a worker thread
    when the policy has extenders (their calls block), inline otherwise."""
    detached = bool(state.scheduler.extenders)
    recorder = app.metrics.framework_recorder(state.scheduler_name)
    sample = app.sampling.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT  # upstream rand.Intn(100) < 10
    ctx = CycleContext(state.scheduler, app.cache, state.queue, app.waiting, state.rng, app.now())
    step = begin_cycle(info, state.snapshot, ctx, detached=detached, state=CycleState(recorder, sample_plugins=sample))
    if not isinstance(step, Decision):
        return step
    if not detached:
        return step.finish(step.run(), ctx.now)
    decided = await app.run_blocking(step.run)
    if not isinstance(decided, Error):
        for problem in decided.extender_errors:
            logger.info("scheduling %s: %s", info.pod.key, problem)
    return step.finish(decided, app.now())  # the clock read again: the extenders' calls took a while


async def _settle(app: App, now: float) -> None:
    """Finish the pods whose wait at Permit is over (see the module docstring)."""
    settled = settle_waiting(app.waiting, cache=app.cache, now=now)
    dra.flush(app)
    for allowed in settled.allowed:
        state = app.states.get(allowed.scheduler_name)
        if state is None:  # the name is no longer served: give the room back
            app.cache.forget(allowed.pod)
            continue
        logger.info("%s is allowed at Permit: binding it to %s", allowed.pod.key, allowed.node)
        if app.recorder is not None:
            app.recorder.permit(allowed.pod.key, allowed.pod.uid, allowed.scheduler_name, node=allowed.node)
        await app.bind_slots.acquire()  # released by binding.bind
        app.spawn(
            binding.bind(
                app,
                state,
                allowed.info,
                allowed.pod,
                started=now,
                cycle=allowed.state,
                plan=allowed.plan,
                nominated=allowed.nominated,
            )
        )
    if not settled.rejected:
        return
    rejections: dict[str, str] = {}
    for r in settled.rejected:
        pod, message = r.pod, r.status.message
        failed = r.status.code is Code.ERROR  # preempted while it waited: an error, it backs off
        logger.info(
            "%s was %s at Permit by %s: %s", pod.key, "stopped" if failed else "rejected", r.status.plugin, message
        )
        if app.recorder is not None:
            app.recorder.permit(pod.key, pod.uid, r.scheduler_name, reason=message)
        app.metrics.observe_attempt("error" if failed else "unschedulable", r.scheduler_name, 0.0)
        app.spawn(
            events.failed_scheduling(
                app, namespace=pod.namespace, name=pod.name, uid=pod.uid, message=message, stage=STAGE_PERMIT
            )
        )
        write_condition = app.condition_memo.should_write(pod.uid, message)
        if write_condition or r.nominated_node is not None:  # upstream's failure handler clears the nomination
            reason = "SchedulerError" if failed else "Unschedulable"
            update = _update_status(
                app, pod, message if write_condition else None, r.nominated_node, after=True, reason=reason
            )
            app.spawn(update)
        rejections.update(dict.fromkeys(r.gangs, message))
    app.perform(routing.broadcast(routing.EVENT_ASSIGNED_POD_DELETE, app.states, now, keep=settled.keep))
    podgroups.refresh(app, rejected=rejections)


async def _update_status(
    app: App,
    pod: Pod,
    message: str | None,
    nominated_node: str | None,
    *,
    after: bool = False,
    reason: str = "Unschedulable",
) -> None:
    """PodScheduled=False, reason Unschedulable (or `reason`; `message` None: unchanged) and/or the nomination, in
    one patch; `after`: once a nomination of the pod in flight is written."""
    if after:
        await binding.nomination_written(app, pod.uid)
    condition = None if message is None else bodies.pod_scheduled_false(message, datetime.now(UTC), reason=reason)
    response = await preemption.patch_pod_status(app, pod, condition=condition, nominated_node=nominated_node)
    if message is not None and not response.ok:
        app.condition_memo.write_failed(pod.uid, message)
