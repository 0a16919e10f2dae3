"""The operator's side of an assumed pod's binding cycle, and what follows it.

``core.scheduling.binding`` sequences the cycle (upstream ``bindingCycle`` and ``handleBindingCycleError``, for
``simulate`` too): the nomination written while the pod waited at Permit lands first, the call-off
check, the nomination for expectation, the PreBind plugins, the call-off check again, then the binder
extenders interested in the pod or the Bind plugins (DefaultBinder, last, POSTs pods/{name}/binding with
the pod's uid, so the API server refuses to bind a pod that was deleted and recreated under the same
name); ``core.scheduling.binding.conclude_binding`` finishes the binding or undoes it (unreserve, forget, back off).
This module lends it the effects (``_Port``): ``app.api`` for the plugins (every write fenced), the
pods/status write of the nomination, the binder extenders' blocking calls in the App's thread pool, and
the rules below for calling a bind off and for judging a failure; then it performs what the core
concluded: metrics, events, a cleared nomination, a vanished pod dropped.

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
import logging
from collections.abc import Sequence
from typing import Any

from ..core.config.extenders import Extender, ExtenderBinding, bind_with_extenders
from ..core.framework.basics import CycleState, QueuedPodInfo, Status
from ..core.framework.interface import ApiResponse
from ..core.model.objects import Pod
from ..core.plugins.default_binder import binding_path
from ..core.scheduling import routing
from ..core.scheduling.binding import BIND, BindingCycle, Bound, Refusal, conclude_binding, run_binding_cycle
from ..core.scheduling.cycle import BindingPlan
from ..edge.client import Api
from . import dra, events, preemption
from .app import App, PolicyState

__all__ = ["bind", "nominate_waiting", "nomination_written"]

logger = logging.getLogger(__name__)


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
        self.binding: ApiResponse | None = None
        self.fenced = False

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", decode: bool = True
    ) -> ApiResponse:
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
                response = ApiResponse(201, retried=True)
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
    plan; ``core.scheduling.binding`` sequences it), then perform what it concluded: metrics, the Scheduled event,
    or the failure's event, nomination clearing and vanished pod. Releases one of app.bind_slots when
    done (the loop acquired it). `nominate`: the node to write into ``status.nominatedNodeName`` first
    (the core's ``Bind.nominated_node``, upstream's NominatedNodeNameForExpectation); `nominated`: the
    node it was nominated to already (while it waited at Permit). A failed binding clears the nomination."""
    try:
        node = placed.node_name
        if app.binding_here is not None:  # a recovery runs: this pod's event is ours to write
            app.binding_here.add(placed.uid)
        job = BindingCycle(
            info,
            placed,
            cycle,
            plan,
            state.scheduler.profile,
            state.queue,
            nominate=nominate,
            nominated=nominated,
        )
        port = _Port(app, job)
        verdict = await run_binding_cycle(job, port)
        t0, t1 = port.started, app.now()
        profile = state.scheduler_name
        unbound = conclude_binding(job, verdict, cache=app.cache, waiting=app.waiting, now=t1)
        if unbound is None:
            app.metrics.observe_binding("success", t1 - t0)
            app.metrics.observe_e2e("scheduled", profile, t1 - started)
            app.metrics.observe_attempt("scheduled", profile, t1 - started)
            if info.initial_attempt_timestamp is not None:
                app.metrics.observe_pod_scheduled(info.attempts, t1 - info.initial_attempt_timestamp)
            if isinstance(verdict, Bound) and verdict.plugin and verdict.plugin != plan.binders[-1].name:
                logger.debug("%s was bound to %s by the Bind plugin %s", placed.key, node, verdict.plugin)
            logger.debug("bound %s to %s", placed.key, node)  # the Scheduled event says it (upstream: V(2))
            await events.scheduled(
                app, namespace=placed.namespace, name=placed.name, uid=placed.uid, node=node, pipelined=True
            )
            return
        app.metrics.observe_binding("error", t1 - t0)
        app.metrics.observe_attempt("error", profile, t1 - started)
        dra.flush(app)  # DynamicResources' Unreserve writes
        if unbound.vanished:
            app.perform(
                routing.route_pod_vanished(placed, cache=app.cache, pending=app.pending, served=app.states, now=t1)
            )
        elif unbound.clear_nomination:
            # upstream's failure handler (clearNominatedNode); a fenced write is refused anyway
            app.spawn(preemption.patch_pod_status(app, placed, nominated_node=""))
        state.wakeup.set()
        if not unbound.report:
            return
        app.spawn(
            events.failed_scheduling(
                app,
                namespace=placed.namespace,
                name=placed.name,
                uid=placed.uid,
                message=unbound.message,
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


class _Port:
    """The operator's ``core.scheduling.binding.BindingPort``: the fenced ``Api`` (through ``_Client``), the
    nomination written through pods/status, binder extenders in the thread pool, and the module
    docstring's rules for calling a bind off and for judging a failed one."""

    __slots__ = ("_app", "_client", "_job", "started")

    def __init__(self, app: App, job: BindingCycle) -> None:
        self._app, self._job = app, job
        self._client = _Client(app.api, job.pod)
        #: when the binding cycle's steps began (after the Permit wait's writes): its duration's start
        self.started = app.now()

    @property
    def client(self) -> _Client:
        return self._client

    async def permit_over(self) -> None:
        await nomination_written(self._app, self._job.pod.uid)  # nominated while it waited: that write lands first
        self.started = self._app.now()

    async def nominate(self, node: str) -> bool:
        # upstream writes it at the start of its binding cycle and goes on whatever the answer
        return (await preemption.patch_pod_status(self._app, self._job.pod, nominated_node=node)).ok

    async def bind_with_extenders(self, extenders: Sequence[Extender], pod: Pod, node: str) -> ExtenderBinding:
        done = await self._app.run_blocking(bind_with_extenders, extenders, pod, node)
        for problem in done.skipped:
            logger.warning("binding %s to %s: skipped ignorable extender %s", pod.key, node, problem)
        if done.status is not None and not done.status.is_success:
            logger.warning(
                "binding %s to %s rejected by extender %s: %s", pod.key, node, done.binder, done.status.message[:300]
            )
        return done

    def called_off(self) -> Refusal | None:
        """Why the bind must not go out now (see the module docstring), if it must not."""
        app, placed = self._app, self._job.pod
        node = placed.node_name
        if not app.current():
            logger.info(
                "not binding %s to %s: the cache is not current (pods or nodes relist, or the process was frozen)",
                placed.key,
                node,
            )
            return Refusal("the cache is not current", quiet=True)
        known = app.cache.get_node_info(node)
        if known is None or known.node is None:
            logger.info("not binding %s to %s: the node is gone", placed.key, node)
            return Refusal(f"node {node} no longer exists", quiet=True)
        if not app.api.may_write():
            return Refusal("not the leader", quiet=True)
        return None

    def judge(self, point: str, status: Status) -> Refusal:
        """A failed PreBind or Bind step, judged by what the API server answered (the module docstring's rules)."""
        placed, client = self._job.pod, self._client
        node = placed.node_name
        if client.fenced:
            logger.info("not binding %s to %s: this replica's term ended", placed.key, node)
            return Refusal("not the leader", quiet=True)
        response = client.binding
        if point == BIND and response is not None and not response.ok:
            if response.gone:
                logger.info("binding %s to %s: the pod is gone (HTTP 404)", placed.key, node)
                return Refusal(response.detail(), quiet=True, vanished=True)
            if response.conflict:
                logger.info(
                    "binding %s to %s: the pod is bound already or was replaced (%s)",
                    placed.key,
                    node,
                    response.describe(),
                )
                return Refusal(response.detail(), quiet=True)
            if response.status == 0:  # no answer: bound or not, the watch will tell; nothing to tell the pod's owner
                logger.warning(
                    "binding %s to %s: no answer (%s); trying again unless the watch shows it bound",
                    placed.key,
                    node,
                    response.detail(),
                )
                return Refusal(response.detail(), quiet=True)
            logger.warning("binding %s to %s rejected: %s", placed.key, node, response.describe())
            return Refusal(response.detail())
        logger.warning("binding %s to %s failed at %s: %s", placed.key, node, point, status.message[:300])
        return Refusal(status.message)
