"""The binding cycle's runtime (``core.scheduling.cycle.run_pre_bind_pre_flights``, ``run_pre_bind_plugins``,
``run_bind_plugins``, ``binding_plan``), as upstream's RunPreBindPreFlights, RunPreBindPlugins and RunBindPlugins:
order, SKIP, failures named, exceptions turned into errors; the nomination for expectation a pre-flight with work
(or a wait at Permit) puts on the outcome; and ``sim.apiserver.drive``, which runs them without an event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from builders import make_pod

from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.framework.basics import SKIP, SUCCESS, Code, CycleState, Status, error, unschedulable
from kopf_scheduler.core.framework.interface import ApiClient, BindPlugin, PreBindPlugin
from kopf_scheduler.core.plugins.default_binder import DefaultBinder
from kopf_scheduler.core.plugins.dynamic_resources import DynamicResources
from kopf_scheduler.core.plugins.volume_binding import VolumeBinding
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.cycle import (
    BindingPlan,
    binding_plan,
    run_bind_plugins,
    run_pre_bind_plugins,
    run_pre_bind_pre_flights,
)
from kopf_scheduler.sim.apiserver import SuspendedError, drive

POD = make_pod("web").obj()


class Answers(PreBindPlugin, BindPlugin):
    """Answers what it is told at PreBind and Bind (or raises it), and says it was asked."""

    NAME = "Answers"

    def __init__(
        self, name: str, answer: Status | Exception, asked: list[str], flight: Status | Exception = SUCCESS
    ) -> None:
        super().__init__(name=name)
        self.answer, self.asked, self.flight = answer, asked, flight

    def pre_bind_pre_flight(self, state: CycleState, pod: Any, node_name: str) -> Status:
        self.asked.append(f"{self.name}?")
        if isinstance(self.flight, Exception):
            raise self.flight
        return self.flight

    async def _reply(self) -> Status:
        self.asked.append(self.name)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def pre_bind(self, state: CycleState, pod: Any, node_name: str, client: ApiClient) -> Status:
        return await self._reply()

    async def bind(self, state: CycleState, pod: Any, node_name: str, client: ApiClient) -> Status:
        return await self._reply()


def plan(*answers: Status | Exception) -> tuple[BindingPlan, list[str]]:
    asked: list[str] = []
    plugins = tuple(Answers(f"P{i}", a, asked) for i, a in enumerate(answers))
    return BindingPlan(plugins, (), plugins), asked


@pytest.mark.parametrize(
    ("answers", "code", "message", "asked"),
    [
        pytest.param((SUCCESS, SKIP, SUCCESS), Code.SUCCESS, "", ["P0", "P1", "P2"], id="SKIP means nothing to do"),
        pytest.param(
            (SUCCESS, error("disk busy"), SUCCESS), Code.ERROR, "running PreBind plugin 'P1': disk busy", ["P0", "P1"],
            id="the first failure stops, naming its plugin",
        ),
        pytest.param(
            (unschedulable("no volume"),), Code.UNSCHEDULABLE, "running PreBind plugin 'P0': no volume", ["P0"],
            id="a rejection keeps its code",
        ),
        pytest.param(
            (ValueError("bug"),), Code.ERROR, "running PreBind plugin 'P0': ValueError: bug", ["P0"],
            id="an exception is the plugin's error",
        ),
    ],
)  # fmt: skip
def test_pre_bind(answers: tuple[Status | Exception, ...], code: Code, message: str, asked: list[str]) -> None:
    p, seen = plan(*answers)
    status = asyncio.run(run_pre_bind_plugins(p, CycleState(), POD, "n1", client=None))  # type: ignore[arg-type]
    assert (status.code, status.message, seen) == (code, message, asked)


@pytest.mark.parametrize(
    ("answers", "code", "plugin", "asked"),
    [
        pytest.param((SKIP, SUCCESS, SUCCESS), Code.SUCCESS, "P1", ["P0", "P1"], id="the first not to skip binds"),
        pytest.param((SKIP, error("409"), SUCCESS), Code.ERROR, "P1", ["P0", "P1"], id="a failure is the bind's"),
        pytest.param((SKIP, SKIP), Code.ERROR, "", ["P0", "P1"], id="every one skipped: not bound"),
    ],
)  # fmt: skip
def test_bind(answers: tuple[Status | Exception, ...], code: Code, plugin: str, asked: list[str]) -> None:
    p, seen = plan(*answers)
    status = drive(run_bind_plugins(p, CycleState(), POD, "n1", client=None))  # type: ignore[arg-type]
    assert (status.code, status.plugin, seen) == (code, plugin, asked)


@pytest.mark.parametrize(
    ("flights", "code", "message", "pre_bound"),
    [
        pytest.param((), Code.SKIP, "", [], id="no PreBind plugin: nothing to do"),
        pytest.param((SKIP, SUCCESS, SKIP), Code.SUCCESS, "", ["P1"], id="one with work: only it runs PreBind"),
        pytest.param((SKIP, SKIP), Code.SKIP, "", [], id="every one skips: no PreBind runs"),
        pytest.param(
            (SKIP, error("no pod volume found for node"), SUCCESS), Code.ERROR,
            'running PreBindPreFlight "P1": no pod volume found for node', None, id="an error names its plugin",
        ),
        pytest.param(
            (unschedulable("full"),), Code.ERROR,
            'PreBindPreFlight P0 returned "Unschedulable", which is unsupported. '
            "It is supposed to return Success, Skip, or Error status", None,
            id="a rejection is unsupported: an error",
        ),
        pytest.param(
            (KeyError("state"),), Code.ERROR, "running PreBindPreFlight \"P0\": KeyError: 'state'", None,
            id="an exception is the plugin's error",
        ),
    ],
)  # fmt: skip
def test_pre_flights(
    flights: tuple[Status | Exception, ...], code: Code, message: str, pre_bound: list[str] | None
) -> None:
    """Upstream RunPreBindPreFlights: SUCCESS when one plugin has work, SKIP when none has, the first error
    otherwise; the plugins that skipped are not asked at PreBind."""
    asked: list[str] = []
    plugins = tuple(Answers(f"P{i}", SUCCESS, asked, f) for i, f in enumerate(flights))
    p, state = BindingPlan(plugins, (), ()), CycleState()
    status = run_pre_bind_pre_flights(p, state, POD, "n1")
    assert (status.code, status.message) == (code, message)
    if pre_bound is None:
        return
    asked.clear()
    assert asyncio.run(run_pre_bind_plugins(p, state, POD, "n1", client=None)).is_success  # type: ignore[arg-type]
    assert asked == pre_bound


def test_the_default_profile_binds_with_default_binder_alone() -> None:
    """VolumeBinding and DynamicResources are the default profile's PreBind plugins, in upstream's order (each
    skips a pod without volumes to bind or claims)."""
    p = binding_plan(GenericScheduler(default_profile("s")), POD)
    assert [type(b) for b in p.pre_binders] == [VolumeBinding, DynamicResources]
    assert p.extenders == () and [type(b) for b in p.binders] == [DefaultBinder]


class Timer:
    """An awaitable that waits on something (as an asyncio future or a timer does: it yields itself)."""

    def __await__(self) -> Any:
        yield self


def test_drive_steps_over_a_bare_yield_and_fails_a_real_wait_inside_the_plugin() -> None:
    class Sleeps(BindPlugin):
        NAME = "Sleeps"

        async def bind(self, state: CycleState, pod: Any, node_name: str, client: ApiClient) -> Status:
            await asyncio.sleep(0)  # a bare yield: stepped over
            await Timer()  # waits on something the simulation cannot provide
            return SUCCESS

    only = BindingPlan((), (), (Sleeps(),))
    status = drive(run_bind_plugins(only, CycleState(), POD, "n1", client=None))  # type: ignore[arg-type]
    assert status.code is Code.ERROR and status.plugin == "Sleeps"
    assert status.message.startswith("running Bind plugin 'Sleeps': SuspendedError: waited on")


def test_drive_raises_when_a_coroutine_keeps_waiting() -> None:
    async def stubborn() -> None:
        while True:
            try:
                await Timer()
            except SuspendedError:
                pass

    with pytest.raises(SuspendedError, match="kept waiting"):
        drive(stubborn())
