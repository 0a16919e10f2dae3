"""The scheduling loop of one SchedulingPolicy (upstream ``scheduleOne`` in a loop).

Wait until the queue says a pod is ready (``next_ready_at``) or a handler wakes us; pop; skip
pods being deleted or already assumed; bring the snapshot up to date; run the algorithm. On a
fit, assume the pod and spawn its bind (at most ``app.BIND_CONCURRENCY`` in flight, so the next pod
is scheduled while binds are on the wire). On a FitError, park it as unschedulable, record a
FailedScheduling event (rate-limited, see events.py) and set PodScheduled=False/Unschedulable
through pods/status when the message changed. On an error, back off and record an event.
Every ``HOUSEKEEPING_PERIOD`` seconds: expire unconfirmed assumptions and refresh gauges.

Only while ``app.leading`` is set does the loop pop; a standby keeps its cache and queues warm.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from ..core.algorithm import ScheduleResult
from ..core.cache import CacheError
from ..core.diagnosis import truncate_message
from ..core.queueing import QueuedPodInfo
from . import binding, events
from .app import App, PolicyState, rfc3339

__all__ = ["run"]

logger = logging.getLogger(__name__)

HOUSEKEEPING_PERIOD: Final = 1.0
IDLE_WAIT: Final = 1.0
#: pods scheduled back to back before yielding to the event loop (watch handlers, binds)
BATCH: Final = 32


async def run(app: App, policy: str, stopped: Any) -> None:
    """Serve `policy` until Kopf's `stopped` flag is set (the policy was deleted or the operator stops)."""
    logger.info("scheduling loop for SchedulingPolicy %s started", policy)
    last_housekeeping = 0.0
    while not stopped:
        state = app.state_for_policy(policy)
        if state is None or not app.leading.is_set():
            await _sleep_until(app, state, IDLE_WAIT)
            continue
        now = app.now()
        if now - last_housekeeping >= HOUSEKEEPING_PERIOD:
            last_housekeeping = now
            _housekeeping(app, state, now)
        ready_at = state.queue.next_ready_at(now)
        if ready_at is None or ready_at > now:
            wait = IDLE_WAIT if ready_at is None else min(IDLE_WAIT, ready_at - now)
            await _sleep_until(app, state, wait)
            continue
        for _ in range(BATCH):
            info = state.queue.pop(app.now())
            if info is None:
                break
            try:
                await schedule_one(app, state, info)
            except Exception:  # a bug must not end the loop: back off the pod, keep going
                logger.exception("scheduling %s failed unexpectedly", info.pod.key)
                state.queue.add_backoff(info, app.now())
            if stopped or app.state_for_policy(policy) is not state or not app.leading.is_set():
                break
        await asyncio.sleep(0)
    logger.info("scheduling loop for SchedulingPolicy %s stopped", policy)


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
    for pod in app.cache.expire(now):
        logger.warning("assumed pod %s expired: the watch never confirmed its binding", pod.key)
        app.move_all("AssignedPodDelete")
    counts = state.queue.pending_counts()
    app.metrics.set_pending_pods({k: v for k, v in counts.items() if k in ("active", "backoff", "unschedulable", "gated")})  # type: ignore[misc]
    app.metrics.set_cache_size(nodes=app.cache.node_count(), pods=app.cache.pod_count(), assumed_pods=app.cache.assumed_count())
    app.metrics.set_leader(state.policy, app.leading.is_set())


async def schedule_one(app: App, state: PolicyState, info: QueuedPodInfo) -> None:
    pod = info.pod
    if pod.deleting or pod.node_name or app.cache.is_assumed(pod):
        state.queue.done(pod)  # upstream skipPodSchedule
        return
    started = app.now()
    if state.snapshot is None:
        state.snapshot = app.cache.snapshot()
    else:
        app.cache.update_snapshot(state.snapshot)
    result: ScheduleResult | None
    error: str | None
    try:
        result = state.scheduler.schedule(pod, state.snapshot, rng=state.rng)
    except Exception as exc:  # the runtime catches plugin errors; this is a last resort
        logger.exception("the algorithm failed on %s", pod.key)
        result, error = None, f"internal error: {exc!r}"
    else:
        error = result.error
    done = app.now()
    app.metrics.observe_algorithm(done - started)
    profile = state.scheduler_name

    if result is not None and result.node is not None:
        try:
            placed = app.cache.assume(pod, result.node)
        except CacheError as exc:
            logger.warning("cannot assume %s: %s", pod.key, exc)
            state.queue.add_backoff(info, done)
            return
        await app.bind_slots.acquire()  # released by binding.bind
        app.spawn(binding.bind(app, state, info, placed, started=started))
        return

    if result is not None and result.unschedulable:
        message = result.message
        app.metrics.observe_attempt("unschedulable", profile, done - started)
        state.queue.add_unschedulable(info, done, plugins=result.diagnosis.unschedulable_plugins)
        logger.info("%s is unschedulable: %s", pod.key, message)
        app.spawn(events.failed_scheduling(app, namespace=pod.namespace, name=pod.name, uid=pod.uid, message=message))
        if app.conditions_written.get(pod.uid) != message:
            app.conditions_written[pod.uid] = message
            app.spawn(_set_unschedulable(app, pod.namespace, pod.name, pod.uid, message))
        return

    message = error or "unknown error"
    app.metrics.observe_attempt("error", profile, done - started)
    state.queue.add_backoff(info, done)
    logger.warning("error scheduling %s: %s", pod.key, message)
    app.spawn(events.failed_scheduling(app, namespace=pod.namespace, name=pod.name, uid=pod.uid, message=message))


async def _set_unschedulable(app: App, namespace: str, name: str, uid: str, message: str) -> None:
    """PodScheduled=False, reason Unschedulable (a strategic merge on conditions, keyed by type)."""
    body = {
        "metadata": {"uid": uid},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": truncate_message(message),
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(),
                }
            ]
        },
    }
    async with app.write_slots:
        code, answer = await app.api.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", body,
            content_type="application/strategic-merge-patch+json",
        )
    if not 200 <= code < 300:
        app.conditions_written.pop(uid, None)
        if code != 404:
            logger.warning("cannot set PodScheduled=False on %s/%s: HTTP %s %s", namespace, name, code, str(answer)[:300])


