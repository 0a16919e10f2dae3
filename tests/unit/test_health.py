"""The health server on 127.0.0.1: probe answers, readiness details, the metrics page, the attempts, shutdown."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kopf_scheduler.telemetry.health import AttemptLookup, HealthServer, start_health_server, stop_health_server
from kopf_scheduler.telemetry.metrics import SchedulerMetrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fetch(server: HealthServer, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{server.port}{path}") as response:
            return response.status, await response.text(), response.headers.get("Content-Type", "")


def serve(
    body: Callable[[HealthServer, dict[str, Any]], Awaitable[None]],
    *,
    leading: Callable[[], bool] | None = None,
    port: int | None = None,
    attempts: AttemptLookup | None = None,
) -> None:
    """Start a server whose readiness reads state["ready"], run `body`, always stop it."""
    state: dict[str, Any] = {"ready": (False, "caches syncing"), "metrics": SchedulerMetrics()}

    def ready_check() -> tuple[bool, str]:
        value = state["ready"]
        if isinstance(value, Exception):
            raise value
        return value  # type: ignore[no-any-return]

    async def main() -> None:
        server = await start_health_server(
            "127.0.0.1",
            free_port() if port is None else port,
            ready_check=ready_check,
            metrics=state["metrics"],
            leading=leading,
            attempts=attempts,
        )
        try:
            await body(server, state)
        finally:
            await stop_health_server(server)

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_healthz_is_ok_while_the_loop_runs() -> None:
    async def body(server: HealthServer, state: dict[str, Any]) -> None:
        assert await fetch(server, "/healthz") == (200, "ok\n", "text/plain; charset=utf-8")

    serve(body)


def test_readyz_follows_the_ready_check() -> None:
    async def body(server: HealthServer, state: dict[str, Any]) -> None:
        status, text, _ = await fetch(server, "/readyz")
        assert (status, text) == (503, "not ready: caches syncing\n")
        state["ready"] = (True, "caches synced")
        status, text, _ = await fetch(server, "/readyz")
        assert (status, text) == (200, "ok: caches synced\n")
        state["ready"] = RuntimeError("boom")
        status, text, _ = await fetch(server, "/readyz")
        assert status == 503 and "ready check failed" in text

    serve(body)


@pytest.mark.parametrize(("leading", "role"), [(True, "(leading)"), (False, "(standby)")])
def test_readyz_says_leading_or_standby_and_standby_is_ready(leading: bool, role: str) -> None:
    async def body(server: HealthServer, state: dict[str, Any]) -> None:
        state["ready"] = (True, "caches synced")
        assert (await fetch(server, "/readyz"))[:2] == (200, f"ok: caches synced {role}\n")

    serve(body, leading=lambda: leading)


def test_metrics_page_serves_the_registry() -> None:
    async def body(server: HealthServer, state: dict[str, Any]) -> None:
        state["metrics"].observe_attempt("scheduled", "kopf-scheduler", 0.01)
        status, text, content_type = await fetch(server, "/metrics")
        assert status == 200 and content_type.startswith("text/plain")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        (attempts,) = families["scheduler_schedule_attempts"].samples[:1]
        assert attempts.value == 1 and attempts.labels == {"result": "scheduled", "profile": "kopf-scheduler"}
        assert (await fetch(server, "/nope"))[0] == 404

    serve(body)


def lookup(namespace: str, name: str) -> dict[str, Any] | str:
    if (namespace, name) == ("default", "web"):
        return {"pod": "default/web", "outcome": "scheduled"}
    return f"no scheduling attempt of {namespace}/{name} is kept"


@pytest.mark.parametrize(
    ("leading", "path", "status", "body"),
    [
        pytest.param(
            None, "/debug/attempts/default/web", 200, {"pod": "default/web", "outcome": "scheduled"},
            id="a kept attempt",
        ),
        pytest.param(
            None, "/debug/attempts/default/gone", 404, {"error": "no scheduling attempt of default/gone is kept"},
            id="none kept",
        ),
        pytest.param(
            lambda: False, "/debug/attempts/default/gone", 404,
            {"error": "no scheduling attempt of default/gone is kept; this replica is standing by: ask the leader"},
            id="none kept on a standby",
        ),
        pytest.param(None, "/debug/attempts/default", 404, None, id="a namespace alone is no pod"),
    ],
)  # fmt: skip
def test_debug_attempts_serves_the_lookup_as_json(
    leading: Callable[[], bool] | None, path: str, status: int, body: Any
) -> None:
    async def main(server: HealthServer, state: dict[str, Any]) -> None:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{server.port}{path}") as response:
                assert response.status == status
                if body is not None:
                    assert response.content_type == "application/json" and await response.json() == body
            async with session.post(f"http://127.0.0.1:{server.port}/debug/attempts/default/web") as response:
                assert response.status == 405  # read-only

    serve(main, leading=leading, attempts=lookup)


def test_without_a_lookup_there_is_no_debug_route() -> None:
    async def body(server: HealthServer, state: dict[str, Any]) -> None:
        assert (await fetch(server, "/debug/attempts/default/web"))[0] == 404

    serve(body)


def test_port_zero_reports_the_bound_port_and_stop_frees_it() -> None:
    async def main() -> None:
        server = await start_health_server("127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics())
        assert server.port > 0
        assert (await fetch(server, "/healthz"))[0] == 200
        await server.stop()
        with pytest.raises(aiohttp.ClientConnectionError):
            await fetch(server, "/healthz")

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_a_taken_port_raises_and_leaves_nothing_running() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        async def main() -> None:
            with pytest.raises(OSError):
                await start_health_server("127.0.0.1", port, ready_check=lambda: (True, ""), metrics=SchedulerMetrics())

        asyncio.run(main())
