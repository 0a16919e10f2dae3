"""The binding cycle of an assumed pod, sequenced once for both executors: upstream ``bindingCycle`` and
``handleBindingCycleError`` (pkg/scheduler/schedule_one.go).

The scheduling cycle (``core/scheduling/cycle.py``) decided the node, assumed the pod, ran Reserve and Permit and
planned the binding (``BindingPlan``); a pod a Permit plugin made wait comes here once ``settle_waiting``
allowed it. From then on the steps, their order and what each failure means are this module's:

1. the Permit wait is over: whatever the executor wrote for it (the pod's nomination while it waited) has
   landed before anything else is written (``BindingPort.permit_over``);
2. the bind may be called off before anything is sent (``BindingPort.called_off``: the operator's cache is
   not current, the node is gone, the replica lost its Lease; ``simulate`` never calls it off);
3. the nomination for expectation (``BindingCycle.nominate``, the core's ``Bind.nominated_node``: a PreBind
   plugin has work), written unless the pod carries it already; the cycle goes on whatever the answer, as
   upstream's does;
4. the PreBind plugins (``core.scheduling.cycle.run_pre_bind_plugins``), then, when there were any, the call-off check
   again (a PreBind may have taken a while);
5. the binder extenders interested in the pod (``BindingPort.bind_with_extenders``, upstream
   ``extendersBinding``: the first that answers decides), else the Bind plugins until one does not answer
   SKIP (``core.scheduling.cycle.run_bind_plugins``; DefaultBinder, last, POSTs pods/binding).

``run_binding_cycle`` runs them: ``Bound``, or a ``Refusal`` that says why not. A failed PreBind or Bind step
is judged by the executor (``BindingPort.judge``), which alone knows what its API server answered (the
operator's rules for a 409, a 404, no answer and a fenced write are in ``kube/binding.py``). Then
``conclude_binding`` carries the verdict into the cache and the queue: a bound pod finishes its binding
(``binding_succeeded``); a refused one is undone as upstream's ``handleBindingCycleError`` does (every
Reserve plugin's ``unreserve``, the assumption forgotten, the pod backed off: ``binding_failed``; a PreBind
or Bind failure never makes a pod unschedulable), and ``Unbound`` says what the executor still owes: the
FailedScheduling text and whether to write it, a pod that vanished, a nomination to clear (upstream's
failure handler clears it: ``clearNominatedNode``).

The steps are a coroutine that awaits only the plugins and the port, which the executor lends: the operator
awaits it in the pod's bind task (``kube/binding.py``), ``simulate`` runs it to its end at once
(``sim/apiserver.drive``; every port method and in-memory request answers without waiting). Nothing here
reads a clock: ``now`` is an argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..config.extenders import Extender, ExtenderBinding
from ..config.profile import Profile
from ..framework.basics import CycleState, QueuedPodInfo, Status
from ..framework.interface import ApiClient
from ..framework.waiting import WaitingPods
from ..model.objects import Pod
from ..state.cache import SchedulerCache
from ..state.queueing import SchedulingQueue
from .cycle import (
    BindingPlan,
    CacheHandle,
    Parked,
    binding_failed,
    binding_succeeded,
    run_bind_plugins,
    run_pre_bind_plugins,
)

__all__ = [
    "PRE_BIND",
    "BIND",
    "Bound",
    "BindingCycle",
    "BindingPort",
    "Refusal",
    "Unbound",
    "conclude_binding",
    "run_binding_cycle",
]

#: the steps a failure is judged at (``BindingPort.judge``)
PRE_BIND = "PreBind"
BIND = "Bind"


@dataclass(frozen=True, slots=True)
class BindingCycle:
    """One assumed pod's binding cycle: the pod as assumed (its ``node_name`` is the node), its scheduling
    cycle's state, the core's plan, and where it goes back should the binding fail."""

    info: QueuedPodInfo
    pod: Pod
    state: CycleState
    plan: BindingPlan
    #: the profile whose Reserve plugins unreserve on a failure
    profile: Profile
    queue: SchedulingQueue
    #: the node to write into ``status.nominatedNodeName`` first (``Bind.nominated_node``; None: none)
    nominate: str | None = None
    #: the node it was nominated to while it waited at Permit (``Allowed.nominated``; "": none)
    nominated: str = ""

    @property
    def node(self) -> str:
        return self.pod.node_name


@dataclass(frozen=True, slots=True)
class Bound:
    """The pod is bound: by the Bind plugin `plugin`, or by a binder extender ("")."""

    plugin: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the bind did not happen. `quiet`: nothing for the pod's owner to act on (no FailedScheduling
    event); `vanished`: the pod no longer exists; `nominated`: this cycle wrote the nomination for
    expectation (set by ``run_binding_cycle``)."""

    message: str
    quiet: bool = False
    vanished: bool = False
    nominated: bool = False


@dataclass(frozen=True, slots=True)
class Unbound:
    """A failed binding cycle, undone in the cache and the queue: what the executor still does."""

    #: the FailedScheduling text (upstream's "Binding rejected: ..."), and what ``simulate`` reports
    message: str
    #: write the FailedScheduling event (not for a quiet refusal)
    report: bool
    #: the pod is gone: the executor drops it (``core.scheduling.routing.route_pod_vanished``)
    vanished: bool
    #: the pod's ``status.nominatedNodeName`` is to be cleared (upstream's ``clearNominatedNode``)
    clear_nomination: bool


class BindingPort(Protocol):
    """What an executor lends the binding cycle: its API client and the effects only it can perform."""

    @property
    def client(self) -> ApiClient:
        """The client the PreBind and Bind plugins talk to the API server through."""
        ...

    async def permit_over(self) -> None:
        """The pod passed Permit: return once the writes of its wait there (its nomination) have landed."""
        ...

    def called_off(self) -> Refusal | None:
        """Why the bind must not go out now, if it must not."""
        ...

    async def nominate(self, node: str) -> bool:
        """Write the pod's ``status.nominatedNodeName`` = `node`; whether it was written."""
        ...

    async def bind_with_extenders(self, extenders: Sequence[Extender], pod: Pod, node: str) -> ExtenderBinding:
        """``core.config.extenders.bind_with_extenders`` as the executor runs it (their calls block)."""
        ...

    def judge(self, point: str, status: Status) -> Refusal:
        """A failed PreBind or Bind step (`point`), judged by what the API server answered."""
        ...


async def run_binding_cycle(cycle: BindingCycle, port: BindingPort) -> Bound | Refusal:
    """The binding cycle's steps in order (the module docstring): ``Bound``, or why not."""
    if cycle.nominated:
        await port.permit_over()
    refused = port.called_off()
    if refused is not None:
        return refused
    written = False
    if cycle.nominate and cycle.nominate != cycle.pod.nominated_node_name:
        written = await port.nominate(cycle.nominate)
    verdict = await _steps(cycle, port)
    if isinstance(verdict, Refusal) and written:
        return dataclasses.replace(verdict, nominated=True)
    return verdict


async def _steps(cycle: BindingCycle, port: BindingPort) -> Bound | Refusal:
    """PreBind, then the binder extenders or the Bind plugins."""
    plan, state, pod, node = cycle.plan, cycle.state, cycle.pod, cycle.node
    if plan.pre_binders:
        status = await run_pre_bind_plugins(plan, state, pod, node, port.client)
        if not status.is_success:
            return port.judge(PRE_BIND, status)
        refused = port.called_off()
        if refused is not None:
            return refused
    if plan.extenders:
        done = await port.bind_with_extenders(plan.extenders, pod, node)
        if done.status is not None:
            return Bound() if done.status.is_success else Refusal(done.status.message)
    status = await run_bind_plugins(plan, state, pod, node, port.client)
    if status.is_success:
        return Bound(status.plugin)
    return port.judge(BIND, status)


def conclude_binding(
    cycle: BindingCycle,
    verdict: Bound | Refusal,
    *,
    cache: SchedulerCache,
    waiting: WaitingPods[Parked],
    now: float,
) -> Unbound | None:
    """Carry the verdict into the cache and the queue: None when bound (``binding_succeeded``); else the
    binding is undone (``binding_failed``, upstream ``handleBindingCycleError``) and ``Unbound`` says what
    the executor still does. The nomination is cleared when the pod has one (written by this cycle, while
    it waited at Permit, or carried in) and still exists."""
    pod = cycle.pod
    if isinstance(verdict, Bound):
        binding_succeeded(pod, cache=cache, queue=cycle.queue, now=now)
        return None
    binding_failed(
        cycle.info,
        pod,
        handle=CacheHandle(cache, waiting),
        queue=cycle.queue,
        now=now,
        profile=cycle.profile,
        state=cycle.state,
    )
    nominated = verdict.nominated or bool(cycle.nominated) or bool(pod.nominated_node_name)
    return Unbound(
        message=f"Binding rejected: {verdict.message}",
        report=not verdict.quiet,
        vanished=verdict.vanished,
        clear_nomination=nominated and not verdict.vanished,
    )
