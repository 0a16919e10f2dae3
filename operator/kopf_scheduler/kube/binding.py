"""The binding cycle of an assumed pod, as the core planned it (``core.cycle.BindingPlan``), and what follows.

Upstream ``bindingCycle`` (schedule_one.go): the PreBind plugins (``core.cycle.run_pre_bind_plugins``),
then the binder extenders interested in the pod (``core.extenders.bind_with_extenders``, upstream
``extendersBinding``; its blocking call runs in the App's thread pool), else the Bind plugins until
one does not answer SKIP (``core.cycle.run_bind_plugins``; DefaultBinder, last, POSTs
pods/{name}/binding with the pod's uid, so the API server refuses to bind a pod that was deleted and
recreated under the same name). The plugins talk to the API server through ``app.api`` (every write
fenced). Success is ``core.cycle.binding_succeeded``; any failure ``binding_failed`` (unreserve,
forget, back off).

When the core's plan says so (``Bind.nominated_node``: a PreBind plugin has work for the pod), the
pod's ``status.nominatedNodeName`` is set to its node first, as upstream's binding cycle does with
NominatedNodeNameForExpectation on (the default since v1.35), so that autoscalers and other schedulers
see where it is going while PreBind works; the binding clears it (the API server's
ClearingNominatedNodeNameAfterBinding), and a binding cycle that fails clears it too.

Right before the cycle, and again right before the bind (a PreBind may take a while), the bind is
called off when the cache is not current (``App.current``: pods or nodes relist after lost
history, or the process was frozen) or the chosen node is no longer in it: the API server does not
check that a node exists, so a pod bound to a node deleted meanwhile would stay bound to nothing.
The pod backs off and is decided again on a current cache.

The Scheduled event is written by the same task right after the bind, within its bind slot: an
event trailing its bind in a queue of other writes is an event lost when the process dies, and a
user waiting for it waits for the whole queue.

The pods/binding POST is sent again when its answer is lost (a reset, a body cut short, a timeout:
``Api.request``'s retries); a 409 to such a retry naming the node we chose is our first try, which
bound the pod, and counts as done.

What the API server answered the pod's pods/binding POST decides how a failed bind is reported: a
409 (already bound), no answer at all (a timeout: bound or not, nobody knows yet) forget the
assumption and requeue with backoff without a FailedScheduling event* (a bound pod leaves the queue
when the watch shows it); a 404 drops the pod (it was deleted, maybe while Kopf's watch was down); a
write the fence refused leaves the pod to whichever replica leads now. Any other failure (a PreBind
or Bind plugin's, an extender's, another answer) gets a FailedScheduling event naming it. This
module records the events and metrics of each outcome.

*A 409 gets no FailedScheduling event (upstream records one): the pod is bound already, by another
scheduler, a replica that lost its Lease, or our own bind whose answer an API server restart cut
off, or it was replaced under its name. Nothing there for the pod's owner to act on; the watch
brings the truth, and the log says what happened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from ..core import routing
from ..core.cycle import BindingPlan, binding_failed, binding_succeeded, run_bind_plugins, run_pre_bind_plugins
from ..core.extenders import bind_with_extenders
from ..core.framework import CycleState, Status
from ..core.objects import Pod
from ..core.plugins.default_binder import binding_path
from ..core.queueing import QueuedPodInfo
from ..edge.client import Api, Response
from . import dra, events, preemption
from .app import App, PolicyState

__all__ = ["bind", "nominate_waiting", "nomination_written"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Rejection:
    """Why a bind did not happen. No FailedScheduling event when `quiet`: a 409 (see the module
    docstring), a fenced write, a pod that is gone, no answer at all, or a bind called off before it was sent."""

    message: str
    quiet: bool = False
    #: the pod no longer exists (404)
    vanished: bool = False
    #: this binding cycle nominated the pod to the node first (to be cleared)
    nominated: bool = False


class _Client:
    """The ``ApiClient`` the plugins get: ``app.api``, remembering the answer to the pod's pods/binding
    POST (whoever sent it) and whether a write was fenced, for the rules of the module docstring.

    The pods/binding POST may be sent again when its answer is lost (``Api.request``'s retries): a
    409 to a retry that says the pod is already assigned to the node it names is our first try's
    answer, and counts as bound."""

    __slots__ = ("_api", "_binding_path", "binding", "fenced")

    def __init__(self, api: Api, pod: Pod) -> None:
        self._api = api
        self._binding_path = binding_path(pod)
        self.binding: Response | None = None
        self.fenced = False

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", decode: bool = True
    ) -> Response:
        is_binding = method == "POST" and path == self._binding_path
        response = await self._api.request(
            method, path, body, content_type=content_type, decode=decode, retry=True if is_binding else None
        )
        if response.fenced:
            self.fenced = True
        if is_binding:
            node = str(((body or {}).get("target") or {}).get("name") or "")
            if response.retried and response.conflict and f'is already assigned to node "{node}"' in response.detail():
                logger.info("binding %s: an earlier try whose answer was lost bound it to %s", path, node)
                response = Response(201, retried=True)
            self.binding = response
        return response


async def bind(
    app: App,
    state: PolicyState,
    info: QueuedPodInfo,
    placed: Pod,
    *,
    started: float,
    cycle: CycleState,
    plan: BindingPlan,
    nominate: str | None = None,
    nominated: str = "",
) -> None:
    """Run `placed`'s binding cycle (the assumed pod; `cycle` its cycle's state, `plan` the core's
    plan), then record its Scheduled event; releases one of app.bind_slots when done (the loop
    acquired it). `nominate`: the node to write into ``status.nominatedNodeName`` first (the core's
    ``Bind.nominated_node``, upstream's NominatedNodeNameForExpectation); `nominated`: the node it was
    nominated to already (while it waited at Permit). A failed binding clears the nomination."""
    try:
        node = placed.node_name
        if app.binding_here is not None:  # a recovery runs: this pod's event is ours to write
            app.binding_here.add(placed.uid)
        if nominated:  # nominated while it waited at Permit: that write lands first
            await nomination_written(app, placed.uid)
        t0 = app.now()
        rejected = await _binding_cycle(app, placed, node, cycle, plan, nominate)
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
            waiting=app.waiting,
            now=t1,
            profile=state.scheduler.profile,
            state=cycle,
        )
        dra.flush(app)  # DynamicResources' Unreserve writes
        if rejected.vanished:
            app.perform(
                routing.route_pod_vanished(placed, cache=app.cache, pending=app.pending, served=app.states, now=t1)
            )
        elif rejected.nominated or nominated or placed.nominated_node_name:
            # upstream's failure handler (clearNominatedNode); a fenced write is refused anyway
            app.spawn(preemption.patch_pod_status(app, placed, nominated_node=""))
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


def nominate_waiting(app: App, placed: Pod, node: str) -> None:
    """Nominate a pod that waits at Permit to its node (upstream's NominatedNodeNameForExpectation); its
    bind, or the clearing of its rejection, waits for this write (``nomination_written``), so that the
    write never lands after them (an API server refuses to nominate a bound pod)."""
    task = app.spawn(preemption.patch_pod_status(app, placed, nominated_node=node))
    uid = placed.uid
    app.nominating[uid] = task
    task.add_done_callback(lambda done: app.nominating.pop(uid) if app.nominating.get(uid) is done else None)


async def nomination_written(app: App, uid: str) -> None:
    """Once the nomination of the waiting pod `uid` is written (or failed), if one is in flight."""
    task = app.nominating.get(uid)
    if task is not None:
        await asyncio.wait([task])


async def _binding_cycle(
    app: App, placed: Pod, node: str, cycle: CycleState, plan: BindingPlan, nominate: str | None
) -> _Rejection | None:
    """The plan's steps: None when bound, else why not. First the nomination for expectation, if any
    (upstream writes it at the start of its binding cycle and goes on whatever the answer)."""
    called_off = _called_off(app, placed, node)
    if called_off is not None:
        return called_off
    written = False
    if nominate and nominate != placed.nominated_node_name:
        written = (await preemption.patch_pod_status(app, placed, nominated_node=nominate)).ok
    rejected = await _steps(app, placed, node, cycle, plan)
    if rejected is not None and written:
        return dataclasses.replace(rejected, nominated=True)
    return rejected


async def _steps(app: App, placed: Pod, node: str, cycle: CycleState, plan: BindingPlan) -> _Rejection | None:
    """PreBind, the binder extenders or the Bind plugins: None when bound, else why not."""
    client = _Client(app.api, placed)
    if plan.pre_binders:
        status = await run_pre_bind_plugins(plan, cycle, placed, node, client)
        if not status.is_success:
            return _failed("PreBind", placed, node, status, client)
        called_off = _called_off(app, placed, node)
        if called_off is not None:
            return called_off
    if plan.extenders:
        done = await app.run_blocking(bind_with_extenders, plan.extenders, placed, node)
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
    status = await run_bind_plugins(plan, cycle, placed, node, client)
    if status.is_success:
        if status.plugin != plan.binders[-1].name:
            logger.debug("%s was bound to %s by the Bind plugin %s", placed.key, node, status.plugin)
        return None
    return _failed("Bind", placed, node, status, client)


def _called_off(app: App, placed: Pod, node: str) -> _Rejection | None:
    """Why the bind must not go out now (see the module docstring), if it must not."""
    if not app.current():
        logger.info(
            "not binding %s to %s: the cache is not current (pods or nodes relist, or the process was frozen)",
            placed.key,
            node,
        )
        return _Rejection("the cache is not current", quiet=True)
    known = app.cache.get_node_info(node)
    if known is None or known.node is None:
        logger.info("not binding %s to %s: the node is gone", placed.key, node)
        return _Rejection(f"node {node} no longer exists", quiet=True)
    if not app.api.may_write():
        return _Rejection("not the leader", quiet=True)
    return None


def _failed(point: str, placed: Pod, node: str, status: Status, client: _Client) -> _Rejection:
    """A failed PreBind or Bind step, judged by what the API server answered (the module docstring's rules)."""
    if client.fenced:
        logger.info("not binding %s to %s: this replica's term ended", placed.key, node)
        return _Rejection("not the leader", quiet=True)
    response = client.binding
    if point == "Bind" and response is not None and not response.ok:
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
    logger.warning("binding %s to %s failed at %s: %s", placed.key, node, point, status.message[:300])
    return _Rejection(status.message)
