"""Bind an assumed pod, and what follows (``core.cycle.binding_succeeded`` / ``binding_failed``).

An extender with a ``bindVerb`` that is interested in the pod binds it instead of the API server
(``core.extenders.bind_with_extenders``, upstream ``extendersBinding``; its blocking call runs in
the App's thread pool); otherwise, or when an ignorable binder failed, we POST pods/{name}/binding.
The Binding carries the pod's uid, so the API server refuses to bind a pod that was deleted and
recreated under the same name. A 409 (already bound), 404 (gone) or any other failure forgets
the assumption and requeues with backoff (a deleted pod is dropped by the queue itself, a bound
one when the watch shows it); this module records the events and metrics of either outcome.

*A 409 gets no FailedScheduling event (upstream records one): the pod is bound already, by another
scheduler, a replica that lost its Lease, or our own bind whose answer an API server restart cut
off, or it was replaced under its name. Nothing there for the pod's owner to act on; the watch
brings the truth, and the log says what happened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..core.cycle import binding_failed, binding_succeeded
from ..core.extenders import bind_with_extenders, binds_with_extender
from ..core.framework import CycleState
from ..core.objects import Pod
from ..core.queueing import QueuedPodInfo
from . import events
from .app import App, PolicyState

__all__ = ["bind"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Rejection:
    """Why a bind did not happen; `conflict` for a 409 (no event: see the module docstring)."""

    message: str
    conflict: bool = False


def _binding_body(pod: Pod, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(app: App, state: PolicyState, info: QueuedPodInfo, placed: Pod, *, started: float, cycle: CycleState | None = None) -> None:
    """Bind `placed` (the assumed pod; `cycle` its cycle's state, for the Reserve plugins' unreserve
    on a failure); releases one of app.bind_slots when done (the loop acquired it)."""
    try:
        node = placed.node_name
        t0 = app.now()
        rejected = await _bind(app, state, placed, node)
        t1 = app.now()
        profile = state.scheduler_name
        if rejected is None:
            app.metrics.observe_binding("success", t1 - t0)
            app.metrics.observe_e2e("scheduled", profile, t1 - started)
            app.metrics.observe_attempt("scheduled", profile, t1 - started)
            if info.initial_attempt_timestamp is not None:
                app.metrics.observe_pod_scheduled(info.attempts, t1 - info.initial_attempt_timestamp)
            binding_succeeded(placed, cache=app.cache, queue=state.queue, now=t1)
            app.bound_total += 1
            logger.debug("bound %s to %s", placed.key, node)  # the Scheduled event says it (upstream: V(2))
            app.spawn(events.scheduled(app, namespace=placed.namespace, name=placed.name, uid=placed.uid, node=node))
            return
        app.metrics.observe_binding("error", t1 - t0)
        app.metrics.observe_attempt("error", profile, t1 - started)
        binding_failed(info, placed, cache=app.cache, queue=state.queue, now=t1, profile=state.scheduler.profile, state=cycle, waiting=app.waiting)
        state.wakeup.set()
        if rejected.conflict:
            return
        app.spawn(
            events.failed_scheduling(
                app, namespace=placed.namespace, name=placed.name, uid=placed.uid,
                message=f"Binding rejected: {rejected.message}", action=events.ACTION_BINDING,
            )
        )
    finally:
        app.bind_slots.release()


async def _bind(app: App, state: PolicyState, placed: Pod, node: str) -> _Rejection | None:
    """Bind through an extender or the API server: None when bound, else why not."""
    extenders = state.scheduler.extenders
    if binds_with_extender(extenders, placed):
        done = await app.run_blocking(bind_with_extenders, extenders, placed, node)
        for problem in done.skipped:
            logger.warning("binding %s to %s: skipped ignorable extender %s", placed.key, node, problem)
        if done.status is not None:
            if not done.status.is_success:
                logger.warning("binding %s to %s rejected by extender %s: %s", placed.key, node, done.binder, done.status.message[:300])
            return None if done.status.is_success else _Rejection(done.status.message)
    code, answer = await app.api.request(
        "POST", f"/api/v1/namespaces/{placed.namespace}/pods/{placed.name}/binding", _binding_body(placed, node)
    )
    if 200 <= code < 300:
        return None
    detail = answer.get("message", answer) if isinstance(answer, dict) else answer
    if code == 409:
        logger.info("binding %s to %s: the pod is bound already or was replaced (HTTP 409 %s)", placed.key, node, str(detail)[:300])
        return _Rejection(str(detail), conflict=True)
    logger.warning("binding %s to %s rejected: HTTP %s %s", placed.key, node, code, str(detail)[:300])
    return _Rejection(str(detail))
