"""The probe and scrape endpoints: /healthz, /livez, /readyz, /metrics, /debug/attempts (aiohttp).

- `/healthz` (and `/livez`, its newer name upstream) answers 200 whenever the event loop runs this
  handler (a wedged loop cannot answer, which is exactly what the liveness probe should catch) and the
  optional `live_check` agrees: 500 when it says the process cannot recover by itself (Kopf failing
  again and again).
- `/readyz` answers 200 once the app says its caches are synced, 503 before. With leader
  election on, a synced standby is ready too (its body says "standby"): readiness gates rollouts
  and Service endpoints, not leadership, and a 2-replica Deployment whose standby were never ready
  could not roll.
- `/metrics` is the Prometheus text of the given SchedulerMetrics.
- `/debug/attempts/NAMESPACE/NAME` (when given an `attempts` lookup) is the JSON explanation of the
  pod's last scheduling attempt (`kopf-scheduler explain` reads it), 404 when none is kept. Read-only,
  GET only; it serves scheduling data (node and plugin names, reasons, scores, victims' names and
  priorities), never a pod's spec, a token or any other credential.

Served securely, as kube-scheduler's 10259, when given `tls` (an ``ssl.SSLContext``,
``serving.py``) and a `gate` (``access.Gate``): every request is authenticated and authorized before
its handler runs, and one that is not answers 401, 403 or 500 with a ``v1.Status`` body, as the API
server's. `certificate_files` are re-read every `RELOAD_INTERVAL` seconds when they changed. Without
them it is plain HTTP with no authentication: ``kopf-scheduler run --insecure-port``, for development.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from .access import DELEGATED_HEADER, Gate
from .metrics import SchedulerMetrics
from .serving import CertificateFiles

__all__ = ["AttemptLookup", "HealthServer", "ReadyCheck", "start_health_server", "stop_health_server"]

ReadyCheck = Callable[[], tuple[bool, str]]
"""Returns (ready, detail); must be cheap and must not block (it runs on the event loop)."""

AttemptLookup = Callable[[str, str], Mapping[str, Any] | str]
"""(namespace, name) -> the JSON of the pod's last attempt, or why there is none; runs on the event loop."""

#: seconds between two looks at the certificate files' modification times (upstream: one minute)
RELOAD_INTERVAL: Final = 60.0


@dataclass(frozen=True, slots=True)
class HealthServer:
    """A running server: `port` is the bound port (useful when asked for port 0)."""

    runner: web.AppRunner
    host: str
    port: int
    #: "https" with a TLS context, else "http"
    scheme: str = "http"
    reloading: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        """Close the listener and finish in-flight requests."""
        if self.reloading is not None:
            self.reloading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reloading
        await self.runner.cleanup()


def _guard(gate: Gate) -> Middleware:
    """The middleware that asks the gate before any handler (unknown paths included, as upstream)."""

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
        verdict = await gate.admit(
            request.method,
            request.path,
            authorization=request.headers.get("Authorization"),
            delegated=request.headers.get(DELEGATED_HEADER),
            peer_certificate=peer or None,
        )
        if not verdict.allowed:
            return web.json_response(verdict.status(), status=verdict.code)
        return await handler(request)

    return guard


def _app(
    ready_check: ReadyCheck,
    metrics: SchedulerMetrics,
    leading: Callable[[], bool] | None,
    attempts: AttemptLookup | None,
    live_check: ReadyCheck | None = None,
    gate: Gate | None = None,
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        if live_check is not None:
            live, detail = live_check()
            if not live:
                return web.Response(status=500, text=f"unhealthy: {detail}\n")
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

    app = web.Application(middlewares=[_guard(gate)] if gate is not None else [])
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    if attempts is not None:
        app.router.add_get("/debug/attempts/{namespace}/{name}", attempt, allow_head=False)
    return app


async def start_health_server(
    host: str,
    port: int,
    *,
    ready_check: ReadyCheck,
    metrics: SchedulerMetrics,
    leading: Callable[[], bool] | None = None,
    attempts: AttemptLookup | None = None,
    live_check: ReadyCheck | None = None,
    tls: ssl.SSLContext | None = None,
    gate: Gate | None = None,
    certificate_files: CertificateFiles | None = None,
) -> HealthServer:
    """Serve the endpoints on host:port (port 0 picks a free one) until `stop()`.

    Pass `leading` (e.g. `lambda: elector.is_leader`) when leader election is on, and `attempts` to
    serve /debug/attempts; `tls` and `gate` for the secure port (see the module docstring).
    """
    if (tls is None) != (gate is None):
        raise ValueError("the secure port takes both a TLS context and a gate; the insecure one neither")
    runner = web.AppRunner(
        _app(ready_check, metrics, leading, attempts, live_check, gate), access_log=None, handle_signals=False
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
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
    reloading = None
    if tls is not None and certificate_files is not None:
        reloading = asyncio.create_task(_reload(certificate_files, tls), name="serving certificate reload")
    return HealthServer(runner, host, bound, "https" if tls is not None else "http", reloading)


async def _reload(files: CertificateFiles, tls: ssl.SSLContext) -> None:
    while True:
        await asyncio.sleep(RELOAD_INTERVAL)
        files.reload_if_changed(tls)


async def stop_health_server(server: HealthServer) -> None:
    """Same as `server.stop()`."""
    await server.stop()
