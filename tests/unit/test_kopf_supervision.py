"""``KopfSupervisor`` (kube/supervision.py): Kopf's orchestration started again in the same process when it
fails, while what the App runs beside it carries on.

First with stand-in root tasks (the supervisor's own rules: restart with backoff, stop on request, health,
Kopf's leftovers cancelled and ours left alone), then with real Kopf on the in-process fake API server
(tests/fakeapi.py) whose discovery answer is cut short: Kopf's resource observer fails, Kopf is started
again, and a pending pod is bound, the informers never listing again. Sync tests around ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import kopf
import pytest
from builders import make_node, make_pod
from clocks import MovingClock
from fakeapi import FakeApiServer

from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.kube import handlers, supervision
from kopf_scheduler.kube.app import App
from kopf_scheduler.kube.supervision import KopfSupervisor


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 20) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout))


async def wait(condition: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.002)


class Runs:
    """Stand-in Kopf runs: each spawn starts two root tasks, the first failing after `fail_after` seconds
    (None: running until the stop flag), plus one leftover task of Kopf's own making. With a `clock`, a
    failing run moves it on by `fail_after` and fails at once; without, it sleeps that long."""

    def __init__(self, *fail_after: float | None, clock: MovingClock | None = None) -> None:
        self.clock = clock
        self.plan = list(fail_after)
        self.spawned = 0
        #: when each run was spawned (monotonic)
        self.times: list[float] = []
        self.leftovers: list[asyncio.Task[Any]] = []

    async def spawn(self, stop: asyncio.Event) -> Collection[asyncio.Task[Any]]:
        fail_after = self.plan[self.spawned] if self.spawned < len(self.plan) else None
        self.spawned += 1
        self.times.append(time.monotonic())

        async def root() -> None:
            if fail_after is None:
                await stop.wait()
                return
            if self.clock is not None:
                self.clock.advance(fail_after)
            else:
                await asyncio.sleep(fail_after)
            raise RuntimeError("a discovery answer cut short")

        async def forever() -> None:
            await asyncio.Event().wait()

        self.leftovers.append(asyncio.create_task(_kopf_like_worker()))
        return [asyncio.create_task(root(), name="resource observer"), asyncio.create_task(forever(), name="other")]


async def _kopf_like_worker() -> None:
    await asyncio.Event().wait()


_kopf_like_worker.__code__ = _kopf_like_worker.__code__.replace(co_filename="/site-packages/kopf/_core/worker.py")


def test_a_failed_run_is_started_again_after_a_backoff_and_a_stop_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    first = 0.01
    monkeypatch.setattr(supervision, "BACKOFF_FIRST", first)
    monkeypatch.setattr(supervision, "LEFTOVER_GRACE", 0.01)

    async def scenario() -> None:
        runs = Runs(0.002, 0.002, None)
        restarts: list[float] = []
        settings = kopf.OperatorSettings()
        supervisor = KopfSupervisor(runs.spawn, settings=settings, on_restart=lambda: restarts.append(time.monotonic()))
        ours = asyncio.create_task(asyncio.Event().wait())  # a task of ours made while Kopf ran: a bind, say
        task = asyncio.create_task(supervisor.run())
        await wait(lambda: runs.spawned == 3 and supervisor.running)
        assert supervisor.restarts == 2 and supervisor.failures == 2 and supervisor.healthy()[0]
        assert runs.times[1] - restarts[0] >= first  # each run started a backoff after the failure
        assert runs.times[2] - restarts[1] >= 2 * first  # the second backoff doubled the first
        assert settings.process.ultimate_exiting_timeout is None  # Kopf arms no SIGKILL when its roots are cancelled
        assert all(t.cancelled() for t in runs.leftovers[:2]) and not ours.done()
        supervisor.request_stop()
        await asyncio.wait_for(task, 5)
        assert runs.spawned == 3 and not ours.done()
        ours.cancel()

    run(scenario)


def test_failing_again_and_again_turns_unhealthy_and_a_stable_run_forgives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervision, "BACKOFF_FIRST", 0.001)
    monkeypatch.setattr(supervision, "BACKOFF_MAX", 0.001)
    monkeypatch.setattr(supervision, "LEFTOVER_GRACE", 0.001)
    monkeypatch.setattr(supervision, "STABLE", 0.3)
    monkeypatch.setattr(supervision, "UNHEALTHY_AFTER", 0.05)
    failures = supervision.UNHEALTHY_FAILURES

    async def scenario() -> None:
        # the supervisor's clock moves as long as each run lasts, and nothing else moves it
        clock = MovingClock(frozen=True)
        runs = Runs(*[0.001] * (failures - 1), 0.06, 0.4, None, clock=clock)
        supervisor = KopfSupervisor(runs.spawn, settings=kopf.OperatorSettings(), clock=clock)
        task = asyncio.create_task(supervisor.run())
        await wait(lambda: supervisor.failures == failures - 1)
        assert supervisor.healthy()[0]  # many failures, but not for long yet
        await wait(lambda: supervisor.failures == failures)
        healthy, detail = supervisor.healthy()
        assert not healthy and detail.startswith(f"Kopf's orchestration failed {failures} times in a row over ")
        await wait(lambda: runs.spawned == failures + 2)
        assert supervisor.failures == 1 and supervisor.healthy()[0]  # the 0.4 s run was stable
        supervisor.request_stop()
        await asyncio.wait_for(task, 5)

    run(scenario)


# ---- real Kopf on the fake API server


def test_kopf_whose_discovery_answer_is_cut_short_is_started_again_and_pods_are_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(supervision, "BACKOFF_FIRST", 0.01)
    monkeypatch.setattr(supervision, "LEFTOVER_GRACE", 0.02)  # Kopf's watchers of the failed run linger: 2 s otherwise
    caplog.set_level(logging.INFO, logger="kopf_scheduler")

    async def scenario() -> None:
        async with FakeApiServer() as server:
            server.add("", "v1", "nodes", make_node("n1").capacity(cpu="4", memory="8Gi", pods="110").body)
            server.add(
                "scheduling.kopf.dev",
                "v1alpha1",
                "schedulingpolicies",
                {"metadata": {"name": "default"}, "spec": {"schedulerName": "ours"}},
            )
            server.lose_answers("GET", "^/apis$", truncated=True)  # Kopf's first discovery scan fails
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            app = App(api, identity="replica-a")
            app.supervised = True
            registry = kopf.OperatorRegistry()
            handlers.register(registry)
            settings = kopf.OperatorSettings()
            handlers.configure(settings)

            async def spawn(stop: asyncio.Event) -> Collection[asyncio.Task[Any]]:
                return await kopf.spawn_tasks(
                    registry=registry,
                    settings=settings,
                    memo=kopf.Memo(app=app),
                    standalone=True,
                    clusterwide=True,
                    stop_flag=stop,
                )

            supervisor = KopfSupervisor(spawn, settings=settings)
            handlers.start(app)
            task = asyncio.create_task(supervisor.run())
            try:
                await wait(lambda: supervisor.restarts == 1 and supervisor.running)
                server.add("", "v1", "pods", make_pod("p").scheduler("ours").req(cpu="1").body)
                await wait(lambda: (server.get("", "v1", "pods", "p") or {}).get("spec", {}).get("nodeName") == "n1")
                node_lists = [r for r in server.requests if r.path == "/api/v1/nodes" and r.query.get("watch") != "1"]
                assert len(node_lists) == 1  # the informers ran on through Kopf's restart
                assert "Kopf's orchestration ended" in caplog.text
            finally:
                supervisor.request_stop()
                await asyncio.wait_for(task, 15)
                for hook in app.on_shutdown:
                    await hook()
                await api.close()

    run(scenario, timeout=40)
