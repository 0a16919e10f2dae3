"""Bind an assumed pod, and what follows (``core.cycle.binding_succeeded`` / ``binding_failed``).

Right before the request, the bind is called off when the cache is not current (``App.current``: a
watch broke, or the process was frozen) or the chosen node is no longer in it: the API server does
not check that a node exists, so a pod bound to a node deleted meanwhile would stay bound to
nothing. The pod backs off and is decided again on a current cache.

The Scheduled event is written by the same task right after the bind, within its bind slot: an
event trailing its bind in a queue of other writes is an event lost when the process dies, and a
user waiting for it waits for the whole queue.

An extender with a ``bindVerb`` that is interested in the pod binds it instead of the API server
(``core.extenders.bind_with_extenders``, upstream ``extendersBinding``; its blocking call runs in
the App's thread pool); otherwise, or when an ignorable binder failed, we POST pods/{name}/binding.
The Binding carries the pod's uid, so the API server refuses to bind a pod that was deleted and
recreated under the same name. A 409 (already bound), no answer at all (a timeout: bound or not,
nobody knows yet) or any other failure forgets the assumption and requeues with backoff (a bound pod leaves the queue when the watch shows it); a 404 drops the
pod (it was deleted, maybe while Kopf's watch was down); a write the fence refused leaves the pod
to whichever replica leads now. This module records the events and metrics of each outcome.

*A 409 gets no FailedScheduling event (upstream records one): the pod is bound already, by another
scheduler, a replica that lost its Lease, or our own bind whose answer an API server restart cut
off, or it was replaced under its name. Nothing there for the pod's owner to act on; the watch
brings the truth, and the log says what happened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..core import routing
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
    """Why a bind did not happen. No FailedScheduling event when `quiet`: a 409 (see the module
    docstring), a fenced write, a pod that is gone, no answer at all, or a bind called off before it was sent."""

    message: str
    quiet: bool = False
    #: the pod no longer exists (404)
    vanished: bool = False


def _binding_body(pod: Pod, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(
    app: App, state: PolicyState, info: QueuedPodInfo, placed: Pod, *, started: float, cycle: CycleState | None = None
) -> None:
    """Bind `placed` (the assumed pod; `cycle` its cycle's state, for the Reserve plugins' unreserve
    on a failure), then record its Scheduled event; releases one of app.bind_slots when done (the
    loop acquired it)."""
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
            logger.debug("bound %s to %s", placed.key, node)  # the Scheduled event says it (upstream: V(2))
            await events.scheduled(
                app, namespace=placed.namespace, name=placed.name, uid=placed.uid, node=node, pipelined=True
            )
            return
        app.metrics.observe_binding("error", t1 - t0)
        app.metrics.observe_attempt("error", profile, t1 - started)
        binding_failed(
            info,
            placed,
            cache=app.cache,
            queue=state.queue,
            now=t1,
            profile=state.scheduler.profile,
            state=cycle,
            waiting=app.waiting,
        )
        if rejected.vanished:
            app.perform(
                routing.route_pod_vanished(placed, cache=app.cache, pending=app.pending, served=app.states, now=t1)
            )
        state.wakeup.set()
        if rejected.quiet:
            return
        app.spawn(
            events.failed_scheduling(
                app,
                namespace=placed.namespace,
                name=placed.name,
                uid=placed.uid,
                message=f"Binding rejected: {rejected.message}",
                action=events.ACTION_BINDING,
            )
        )
    finally:
        app.bind_slots.release()


async def _bind(app: App, state: PolicyState, placed: Pod, node: str) -> _Rejection | None:
    """Bind through an extender or the API server: None when bound, else why not."""
    if not app.current():
        logger.info(
            "not binding %s to %s: the cache is not current (a watch broke or the process was frozen)", placed.key, node
        )
        return _Rejection("the cache is not current", quiet=True)
    known = app.cache.get_node_info(node)
    if known is None or known.node is None:
        logger.info("not binding %s to %s: the node is gone", placed.key, node)
        return _Rejection(f"node {node} no longer exists", quiet=True)
    if not app.api.may_write():
        return _Rejection("not the leader", quiet=True)
    extenders = state.scheduler.extenders
    if binds_with_extender(extenders, placed):
        done = await app.run_blocking(bind_with_extenders, extenders, placed, node)
        for problem in done.skipped:
            logger.warning("binding %s to %s: skipped ignorable extender %s", placed.key, node, problem)
        if done.status is not None:
            if not done.status.is_success:
                logger.warning(
                    "binding %s to %s rejected by extender %s: %s",
                    placed.key,
                    node,
                    done.binder,
                    done.status.message[:300],
                )
            return None if done.status.is_success else _Rejection(done.status.message)
    response = await app.api.request(
        "POST",
        f"/api/v1/namespaces/{placed.namespace}/pods/{placed.name}/binding",
        _binding_body(placed, node),
        decode=False,
    )
    if response.ok:
        return None
    if response.fenced:
        logger.info("not binding %s to %s: this replica's term ended", placed.key, node)
        return _Rejection("not the leader", quiet=True)
    if response.gone:
        logger.info("binding %s to %s: the pod is gone (HTTP 404)", placed.key, node)
        return _Rejection(response.detail(), quiet=True, vanished=True)
    if response.conflict:
        logger.info(
            "binding %s to %s: the pod is bound already or was replaced (%s)", placed.key, node, response.describe()
        )
        return _Rejection(response.detail(), quiet=True)
    if response.status == 0:  # no answer: bound or not, the watch will tell; nothing to tell the pod's owner
        logger.warning(
            "binding %s to %s: no answer (%s); trying again unless the watch shows it bound",
            placed.key,
            node,
            response.detail(),
        )
        return _Rejection(response.detail(), quiet=True)
    logger.warning("binding %s to %s rejected: %s", placed.key, node, response.describe())
    return _Rejection(response.detail())
