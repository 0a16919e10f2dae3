"""The binding cycle's one sequencer (``core.scheduling.binding``), held to upstream's ``bindingCycle`` and
``handleBindingCycleError`` with a port that logs what the cycle asks of its executor.

``run_binding_cycle``: the steps and their order (Permit wait's writes, call-off, nomination for
expectation, PreBind, call-off again, binder extenders or Bind plugins), where each failure stops it and who
judges it. ``conclude_binding``: a bound pod finishes its binding, a refused one is unreserved, forgotten and
backed off, and the executor is told what it still owes (the event, a vanished pod, the nomination to clear).
Both executors run this module (``tests/unit/test_executors.py`` holds them to the same outcomes).
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from builders import make_node, make_pod
from source_trees import nodes

from kopf_scheduler.core.config.extenders import (
    Extender,
    ExtenderBinding,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
)
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import SKIP, SUCCESS, CycleState, Status, error
from kopf_scheduler.core.framework.interface import ApiClient, BindPlugin, PermitHandle, PreBindPlugin, ReservePlugin
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.waiting import WaitingPods
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling import binding
from kopf_scheduler.core.scheduling.binding import (
    BIND,
    PRE_BIND,
    BindingCycle,
    Bound,
    Refusal,
    Unbound,
    conclude_binding,
    run_binding_cycle,
)
from kopf_scheduler.core.scheduling.cycle import BindingPlan, Parked
from kopf_scheduler.core.state.cache import PodState, SchedulerCache
from kopf_scheduler.core.state.queueing import BACKOFF, SchedulingQueue
from kopf_scheduler.sim.apiserver import drive

NOW = 10.0


class Step(PreBindPlugin, BindPlugin, ReservePlugin):
    """A PreBind, Bind and Reserve plugin that logs each call and answers `answer` at PreBind and Bind."""

    NAME = "Step"

    def __init__(self, name: str, log: list[str], answer: Status = SUCCESS) -> None:
        super().__init__(name=name)
        self.log, self.answer = log, answer

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        self.log.append(f"pre_bind {self.name}")
        return self.answer

    async def bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        self.log.append(f"bind {self.name}")
        return self.answer

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        self.log.append(f"unreserve {self.name} {node_name}")


class Binder(Extender):
    """A binder extender the port stands in for: the sequencer never calls it itself."""

    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        raise AssertionError("not a filter")

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderPrioritizeResult:
        raise AssertionError("not a prioritizer")

    def bind(self, pod: Pod, node: str) -> str:
        raise AssertionError("the port binds")


class Port:
    """A ``BindingPort`` that logs every request of the cycle and answers what it is told."""

    def __init__(
        self,
        log: list[str],
        *,
        called_off: Sequence[Refusal | None] = (),
        written: bool = True,
        extenders: ExtenderBinding | None = None,
        judged: Refusal | None = None,
    ) -> None:
        self.log = log
        self._called_off = list(called_off)
        self._written, self._extenders, self._judged = written, extenders, judged

    @property
    def client(self) -> ApiClient:
        return None  # type: ignore[return-value]  # the plugins here send nothing

    async def permit_over(self) -> None:
        self.log.append("permit over")

    def called_off(self) -> Refusal | None:
        self.log.append("called off?")
        return self._called_off.pop(0) if self._called_off else None

    async def nominate(self, node: str) -> bool:
        self.log.append(f"nominate {node}")
        return self._written

    async def bind_with_extenders(self, extenders: Sequence[Extender], pod: Pod, node: str) -> ExtenderBinding:
        self.log.append(f"extenders {','.join(e.name for e in extenders)}")
        assert self._extenders is not None
        return self._extenders

    def judge(self, point: str, status: Status) -> Refusal:
        self.log.append(f"judge {point}: {status.message}")
        return self._judged or Refusal(status.message)


def job(
    log: list[str],
    *,
    pre_bind: Sequence[Status] = (),
    bind: Sequence[Status] = (SUCCESS,),
    extenders: int = 0,
    nominate: str | None = None,
    nominated: str = "",
    carried: str = "",
    queue: SchedulingQueue | None = None,
) -> BindingCycle:
    """`web`'s binding cycle on n1: PreBind plugins P0.. and Bind plugins B0.. answering as given."""
    pre_binders = tuple(Step(f"P{i}", log, a) for i, a in enumerate(pre_bind))
    binders = tuple(Step(f"B{i}", log, a) for i, a in enumerate(bind))
    binder_extenders = tuple(Binder(ExtenderConfig(f"http://x{i}", bind_verb="bind")) for i in range(extenders))
    queue = queue or SchedulingQueue()
    pod = make_pod("web").uid("u").nominated(carried).obj() if carried else make_pod("web").uid("u").obj()
    queue.add(pod, NOW - 1)
    info = queue.pop(NOW)
    assert info is not None
    profile = Profile("s", plugins=(Step("R", log),))
    plan = BindingPlan(pre_binders, binder_extenders, binders)
    return BindingCycle(
        info, pod.with_node("n1"), CycleState(), plan, profile, queue, nominate=nominate, nominated=nominated
    )


def run(cycle: BindingCycle, port: Port) -> Bound | Refusal:
    return drive(run_binding_cycle(cycle, port))


# --------------------------------------------------------------------------- the steps, in order


def test_a_plain_bind_checks_the_call_off_then_binds() -> None:
    log: list[str] = []
    assert run(job(log), Port(log)) == Bound("B0")
    assert log == ["called off?", "bind B0"]


def test_every_step_in_upstreams_order() -> None:
    """Upstream ``bindingCycle``: the nomination for expectation, (WaitOnPermit), PreBind, then the binders."""
    log: list[str] = []
    cycle = job(log, pre_bind=(SUCCESS, SKIP), bind=(SKIP, SUCCESS), nominate="n1", nominated="n1")
    assert run(cycle, Port(log)) == Bound("B1")
    assert log == [
        "permit over",  # the nomination written while it waited at Permit has landed
        "called off?",
        "nominate n1",
        "pre_bind P0",
        "pre_bind P1",
        "called off?",  # a PreBind may take a while: asked again right before the bind
        "bind B0",
        "bind B1",
    ]


def test_the_nomination_is_not_written_again_when_the_pod_carries_it() -> None:
    log: list[str] = []
    assert run(job(log, nominate="n1", carried="n1"), Port(log)) == Bound("B0")
    assert log == ["called off?", "bind B0"]


def test_a_bind_called_off_at_the_start_writes_nothing() -> None:
    log: list[str] = []
    stale = Refusal("the cache is not current", quiet=True)
    assert run(job(log, pre_bind=(SUCCESS,), nominate="n1"), Port(log, called_off=[stale])) == stale
    assert log == ["called off?"]


def test_a_bind_called_off_after_pre_bind_keeps_the_written_nomination_to_clear() -> None:
    log: list[str] = []
    gone = Refusal("node n1 no longer exists", quiet=True)
    verdict = run(job(log, pre_bind=(SUCCESS,), nominate="n1"), Port(log, called_off=[None, gone]))
    assert verdict == Refusal("node n1 no longer exists", quiet=True, nominated=True)
    assert log == ["called off?", "nominate n1", "pre_bind P0", "called off?"]


@pytest.mark.parametrize(
    ("written", "nominated"),
    [
        pytest.param(True, True, id="written: to be cleared"),
        pytest.param(False, False, id="the write failed: nothing of ours to clear"),
    ],
)
def test_a_pre_bind_failure_is_judged_by_the_executor_and_stops_the_cycle(written: bool, nominated: bool) -> None:
    log: list[str] = []
    cycle = job(log, pre_bind=(error("volume not attached"), SUCCESS), nominate="n1")
    verdict = run(cycle, Port(log, written=written))
    assert verdict == Refusal("running PreBind plugin 'P0': volume not attached", nominated=nominated)
    assert log == [
        "called off?",
        "nominate n1",
        "pre_bind P0",
        f"judge {PRE_BIND}: running PreBind plugin 'P0': volume not attached",
    ]


def test_a_bind_failure_is_judged_by_the_executor() -> None:
    log: list[str] = []
    quiet = Refusal("pods web already assigned", quiet=True)
    assert run(job(log, bind=(error("409"),)), Port(log, judged=quiet)) == quiet
    assert log == ["called off?", "bind B0", f"judge {BIND}: running Bind plugin 'B0': 409"]


@pytest.mark.parametrize(
    ("answer", "verdict", "bound_by_plugin"),
    [
        pytest.param(ExtenderBinding(SUCCESS, "http://x0"), Bound(), False, id="an extender binds"),
        pytest.param(
            ExtenderBinding(error("no room"), "http://x0"), Refusal("no room"), False, id="an extender refuses"
        ),
        pytest.param(ExtenderBinding(None), Bound("B0"), True, id="none of them bound: the Bind plugins do"),
    ],
)
def test_binder_extenders_come_before_the_bind_plugins(
    answer: ExtenderBinding, verdict: Bound | Refusal, bound_by_plugin: bool
) -> None:
    """Upstream ``bind``: ``extendersBinding`` first; an extender's answer is final, not judged."""
    log: list[str] = []
    assert run(job(log, extenders=2), Port(log, extenders=answer)) == verdict
    assert log == ["called off?", "extenders http://x0,http://x1", *(["bind B0"] if bound_by_plugin else [])]


def test_the_operator_awaits_the_same_coroutine() -> None:
    """Nothing in the cycle needs ``drive``: an event loop runs it as the operator's bind task does."""
    log: list[str] = []
    assert asyncio.run(run_binding_cycle(job(log, pre_bind=(SUCCESS,)), Port(log))) == Bound("B0")
    assert log == ["called off?", "pre_bind P0", "called off?", "bind B0"]


# --------------------------------------------------------------------------- the conclusion


def assumed(cycle: BindingCycle) -> SchedulerCache:
    cache = SchedulerCache()
    cache.add_node(make_node("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    cache.assume(cycle.info.pod, cycle.node)
    return cache


def test_a_bound_pod_finishes_its_binding_and_leaves_the_queue() -> None:
    log: list[str] = []
    cycle = job(log)
    cache = assumed(cycle)
    assert conclude_binding(cycle, Bound("B0"), cache=cache, waiting=WaitingPods(), now=NOW) is None
    assert cache.state_of(cycle.pod) is PodState.BOUND
    assert cycle.queue.get(cycle.pod) is None and log == []


def test_a_refused_pod_is_unreserved_forgotten_and_backed_off() -> None:
    """Upstream ``handleBindingCycleError``: unreserve and forget, then the failure handler (backoff: a
    PreBind or Bind failure never makes a pod unschedulable)."""
    log: list[str] = []
    cycle = job(log)
    cache = assumed(cycle)
    waiting: WaitingPods[Parked] = WaitingPods()
    unbound = conclude_binding(cycle, Refusal("running Bind plugin 'B0': 500"), cache=cache, waiting=waiting, now=NOW)
    assert unbound == Unbound(
        "Binding rejected: running Bind plugin 'B0': 500", report=True, vanished=False, clear_nomination=False
    )
    assert log == ["unreserve R n1"]
    assert cache.state_of(cycle.pod) is None and cycle.queue.where(cycle.pod) == BACKOFF


@pytest.mark.parametrize(
    ("refusal", "nominated", "carried", "report", "clear"),
    [
        pytest.param(Refusal("x"), "", "", True, False, id="no nomination: nothing to clear"),
        pytest.param(Refusal("x", nominated=True), "", "", True, True, id="written by this cycle"),
        pytest.param(Refusal("x"), "n1", "", True, True, id="written while it waited at Permit"),
        pytest.param(Refusal("x"), "", "n2", True, True, id="carried in (preemption nominated it)"),
        pytest.param(Refusal("x", quiet=True), "", "", False, False, id="quiet: no event"),
        pytest.param(
            Refusal("x", quiet=True, vanished=True, nominated=True), "n1", "n2", False, False,
            id="vanished: nothing left to clear",
        ),
    ],
)  # fmt: skip
def test_what_the_executor_still_owes_a_refused_pod(
    refusal: Refusal, nominated: str, carried: str, report: bool, clear: bool
) -> None:
    log: list[str] = []
    cycle = job(log, nominated=nominated, carried=carried)
    unbound = conclude_binding(cycle, refusal, cache=assumed(cycle), waiting=WaitingPods(), now=NOW)
    assert unbound is not None
    assert (unbound.report, unbound.vanished, unbound.clear_nomination) == (report, refusal.vanished, clear)
    assert unbound.message == "Binding rejected: x"


def test_only_the_sequencer_runs_the_binding_steps() -> None:
    """One place sequences the binding cycle: no executor calls the PreBind or Bind runners, or undoes a
    binding, on its own (simulate's ``evaluate`` takes back an attempt it never bound: its one exception)."""
    steps = {"run_pre_bind_plugins", "run_bind_plugins", "binding_succeeded", "binding_failed"}
    package = Path(binding.__file__).resolve().parents[2]
    callers: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        if path.is_relative_to(package / "core"):  # the runtime and the sequencer (DRA has a binding_failed too)
            continue
        for node in nodes(path):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in steps:
                    callers.setdefault(str(path.relative_to(package)), set()).add(name)
    assert callers == {"sim/simulator.py": {"binding_failed"}}  # Simulation._undo, for evaluate's one-off attempts
