"""Entry for ``kopf run -m kopf_scheduler.kube.main -A --standalone``.

Importing this module registers every handler in Kopf's default registry: that is what
``kopf run -m`` expects of its module (the CLI, ``kopf-scheduler run``, builds its own registry
with ``handlers.register`` instead and imports nothing by side effect).
In the ``kopf run`` form there is no leader election (run one replica).

The endpoints (/healthz, /livez, /readyz, /metrics, /debug/attempts) are served as ``kopf-scheduler run
--secure-port 0 --insecure-port N`` serves them, for development: plain HTTP with no authentication on
``127.0.0.1:$KOPF_SCHEDULER_METRICS_PORT`` (default 10259; 0 turns them off; ``$KOPF_SCHEDULER_METRICS_HOST``
for another address), so ``kopf-scheduler explain --endpoint http://127.0.0.1:10259 NS/POD`` and
``kubectl kopf-scheduler explain --endpoint http://127.0.0.1:10259 NS/POD`` answer during development too.
A port already taken is logged and the operator runs on without it.

Settings: see ``handlers.configure``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

import kopf

from . import handlers
from .app import App
from .serving import ServingOptions, serve

__all__ = ["ENV_METRICS_HOST", "ENV_METRICS_PORT", "serve_endpoints"]

ENV_METRICS_PORT: Final = "KOPF_SCHEDULER_METRICS_PORT"
ENV_METRICS_HOST: Final = "KOPF_SCHEDULER_METRICS_HOST"
DEFAULT_METRICS_PORT: Final = 10259

logger = logging.getLogger(__name__)


async def serve_endpoints(memo: Any, **_: Any) -> None:
    """Serve the endpoints beside the App ``handlers.startup`` made (see the module docstring)."""
    app = memo.get("app") if hasattr(memo, "get") else None
    if not isinstance(app, App):
        raise kopf.TemporaryError("the App is not made yet", delay=0.1)
    try:
        port = int(os.environ.get(ENV_METRICS_PORT) or DEFAULT_METRICS_PORT)
    except ValueError:
        logger.error("$%s=%r is not a port number: no endpoints served", ENV_METRICS_PORT, os.environ[ENV_METRICS_PORT])
        return
    if port == 0:
        return
    host = os.environ.get(ENV_METRICS_HOST) or "127.0.0.1"
    options = ServingOptions(secure_port=0, insecure_port=port, insecure_bind_address=host)
    try:
        servers = await serve(options, app.api, ready_check=app.ready, metrics=app.metrics, attempts=app.explain)
    except OSError as exc:
        logger.warning(
            "no endpoints served: cannot listen on %s:%d (%s); set $%s to another port (0: none)",
            host,
            port,
            exc,
            ENV_METRICS_PORT,
        )
        return
    for server in servers:
        app.on_shutdown.append(server.stop)
        logger.info("health, metrics and explain over plain HTTP on %s:%d (development)", host, server.port)


handlers.register(kopf.get_default_registry())
kopf.on.startup(id="kopf-scheduler-endpoints")(serve_endpoints)
