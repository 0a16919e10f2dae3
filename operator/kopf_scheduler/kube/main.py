"""Entry for ``kopf run -m kopf_scheduler.kube.main -A --standalone``.

Importing this module registers every handler in Kopf's default registry: that is what
``kopf run -m`` expects of its module (the CLI, ``kopf-scheduler run``, builds its own registry
with ``handlers.register`` instead and imports nothing by side effect).
In the ``kopf run`` form there is no leader election (run one replica).

The health server (``telemetry/health.py``: /healthz, /readyz, /metrics, /debug/attempts, /debug/about)
listens on ``127.0.0.1:$KOPF_SCHEDULER_METRICS_PORT`` (default 10259, as ``kopf-scheduler run``'s
``--metrics-port``; 0 turns it off; ``$KOPF_SCHEDULER_METRICS_HOST`` for another address), so that
``kopf-scheduler explain NS/POD`` and ``kubectl kopf-scheduler explain NS/POD`` answer during
development too: the plugin asks this port when no Lease names a leader and no operator pod runs.
A port already taken is logged and the operator runs on without it.

Settings: see ``handlers.configure``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Final

import kopf

from ..telemetry.health import start_health_server
from . import handlers
from .app import App

__all__ = ["ENV_METRICS_HOST", "ENV_METRICS_PORT", "serve_health"]

ENV_METRICS_PORT: Final = "KOPF_SCHEDULER_METRICS_PORT"
ENV_METRICS_HOST: Final = "KOPF_SCHEDULER_METRICS_HOST"
DEFAULT_METRICS_PORT: Final = 10259

logger = logging.getLogger(__name__)


async def serve_health(memo: Any, **_: Any) -> None:
    """Start the health server beside the App ``handlers.startup`` made (see the module docstring)."""
    app = memo.get("app") if isinstance(memo, Mapping) or hasattr(memo, "get") else None
    if not isinstance(app, App):
        raise kopf.TemporaryError("the App is not made yet", delay=0.1)
    try:
        port = int(os.environ.get(ENV_METRICS_PORT) or DEFAULT_METRICS_PORT)
    except ValueError:
        logger.error("$%s=%r is not a port number: no health server", ENV_METRICS_PORT, os.environ[ENV_METRICS_PORT])
        return
    if port == 0:
        return
    host = os.environ.get(ENV_METRICS_HOST) or "127.0.0.1"
    about = {"identity": app.identity, "server": app.api.credentials.server, "entry": "kopf run"}
    try:
        server = await start_health_server(
            host, port, ready_check=app.ready, metrics=app.metrics, attempts=app.explain, about=about
        )
    except OSError as exc:
        logger.warning(
            "no health server: cannot listen on %s:%d (%s); set $%s to another port (0: none)",
            host,
            port,
            exc,
            ENV_METRICS_PORT,
        )
        return
    app.on_shutdown.append(server.stop)
    logger.info("health, metrics and explain on %s:%d", host, server.port)


handlers.register(kopf.get_default_registry())
kopf.on.startup(id="kopf-scheduler-health")(serve_health)
