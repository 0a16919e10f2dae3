"""The probe and scrape endpoints: /healthz, /readyz, /metrics over plain HTTP (aiohttp).

- `/healthz` answers 200 whenever the event loop runs this handler: a wedged loop cannot answer,
  which is exactly what the liveness probe should catch.
- `/readyz` answers 200 once the app says its caches are synced, 503 before. With leader
  election on, a synced standby is ready too (its body says "standby"): readiness gates rollouts
  and Service endpoints, not leadership, and a 2-replica Deployment whose standby were never ready
  could not roll.
- `/metrics` is the Prometheus text of the given SchedulerMetrics.
- `/debug/attempts/NAMESPACE/NAME` (when given an `attempts` lookup) is the JSON explanation of the
  pod's last scheduling attempt (`kopf-scheduler explain` reads it), 404 when none is kept. Read-only,
  GET only; it serves scheduling data (node and plugin names, reasons, scores, victims' names and
  priorities), never a pod's spec, a token or any other credential.
- `/debug/about` (when given `about`) is a small JSON of who serves here: the operator's identity, the API
  server it schedules for and how it was started. The kubectl plugin checks it before it asks a local
  operator (``kopf run`` during development) for an explanation: the same API server, or not that one.

Plain HTTP, like kube-scheduler's old insecure port; put it behind a NetworkPolicy if needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .metrics import SchedulerMetrics

__all__ = ["AttemptLookup", "HealthServer", "ReadyCheck", "start_health_server", "stop_health_server"]

ReadyCheck = Callable[[], tuple[bool, str]]
"""Returns (ready, detail); must be cheap and must not block (it runs on the event loop)."""

AttemptLookup = Callable[[str, str], Mapping[str, Any] | str]
"""(namespace, name) -> the JSON of the pod's last attempt, or why there is none; runs on the event loop."""


@dataclass(frozen=True, slots=True)
class HealthServer:
    """A running server: `port` is the bound port (useful when asked for port 0)."""

    runner: web.AppRunner
    host: str
    port: int

    async def stop(self) -> None:
        """Close the listener and finish in-flight requests."""
        await self.runner.cleanup()


def _app(
    ready_check: ReadyCheck,
    metrics: SchedulerMetrics,
    leading: Callable[[], bool] | None,
    attempts: AttemptLookup | None,
    about: Mapping[str, Any] | None = None,
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        try:
            ready, detail = ready_check()
        except Exception as exc:  # a buggy check must read as "not ready", not crash the probe
            ready, detail = False, f"ready check failed: {exc!r}"
        role = "" if leading is None else (" (leading)" if leading() else " (standby)")
        text = f"{'ok' if ready else 'not ready'}: {detail}{role}\n"
        return web.Response(status=200 if ready else 503, text=text)

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": metrics.content_type})

    async def attempt(request: web.Request) -> web.Response:
        assert attempts is not None
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        found = attempts(namespace, name)
        if isinstance(found, str):
            standby = leading is not None and not leading()
            return web.json_response(
                {"error": found + ("; this replica is standing by: ask the leader" if standby else "")}, status=404
            )
        return web.json_response(found)

    async def about_page(_: web.Request) -> web.Response:
        return web.json_response(dict(about or {}))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    if attempts is not None:
        app.router.add_get("/debug/attempts/{namespace}/{name}", attempt, allow_head=False)
    if about is not None:
        app.router.add_get("/debug/about", about_page, allow_head=False)
    return app


async def start_health_server(
    host: str,
    port: int,
    *,
    ready_check: ReadyCheck,
    metrics: SchedulerMetrics,
    leading: Callable[[], bool] | None = None,
    attempts: AttemptLookup | None = None,
    about: Mapping[str, Any] | None = None,
) -> HealthServer:
    """Serve the endpoints on host:port (port 0 picks a free one) until `stop()`.

    Pass `leading` (e.g. `lambda: elector.is_leader`) when leader election is on, `attempts` to
    serve /debug/attempts and `about` to serve /debug/about.
    """
    runner = web.AppRunner(_app(ready_check, metrics, leading, attempts, about), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = port
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            bound = int(address[1])
            break
    return HealthServer(runner, host, bound)


async def stop_health_server(server: HealthServer) -> None:
    """Same as `server.stop()`."""
    await server.stop()
