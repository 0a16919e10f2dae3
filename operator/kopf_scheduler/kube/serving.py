"""The operator's HTTP endpoints, served as kube-scheduler serves its 10259: the wiring.

``telemetry/health.py`` serves /healthz /livez /readyz /metrics /debug/attempts; ``telemetry/serving.py``
makes its TLS context; ``telemetry/access.py`` decides who may read what. This module puts them together
with the process's one API client (``edge/client.Api``): the TokenReviews and SubjectAccessReviews go
through it (with its credentials, retries and ``rest_client_*`` metrics), and so does the one read of
the cluster's client CA, the ``client-ca-file`` of ConfigMap ``kube-system/extension-apiserver-
authentication`` that kube-apiserver publishes (upstream's delegating authentication reads it the same
way when ``--client-ca-file`` is not given). As kube-scheduler (``TolerateInClusterLookupFailure``), a
failed read is logged and serving goes on without client certificates; it is read once, at start.

Reviews change nothing in the cluster, so they are not fenced: a standby replica authenticates its
scrapes too.

Two listeners at most: the secure port (``--secure-port``, 10259 by default) and, for development
only, the insecure one (``--insecure-port``, off by default): plain HTTP, no authentication, on
``--insecure-bind-address`` (127.0.0.1 by default).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.model import paths
from ..edge.client import Api
from ..telemetry.access import AccessPolicy, Gate
from ..telemetry.health import AttemptLookup, HealthServer, ReadyCheck, start_health_server
from ..telemetry.metrics import SchedulerMetrics
from ..telemetry.serving import CertificateFiles, self_signed, server_context

__all__ = ["AUTHENTICATION_CONFIGMAP", "DEFAULT_SECURE_PORT", "ServingOptions", "client_ca_of_cluster", "serve"]

logger = logging.getLogger(__name__)

DEFAULT_SECURE_PORT: Final = 10259
#: where kube-apiserver publishes its client CA (and the front proxy's) for delegated authentication
AUTHENTICATION_CONFIGMAP: Final = paths.item(
    "v1", "configmaps", "extension-apiserver-authentication", namespace="kube-system"
)


@dataclass(frozen=True, slots=True)
class ServingOptions:
    """``kopf-scheduler run``'s serving flags (``commands/run.py`` documents each)."""

    secure_port: int = DEFAULT_SECURE_PORT
    bind_address: str = "0.0.0.0"
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    client_ca_file: str | None = None
    #: do not read the client CA from the cluster (``--authentication-skip-lookup``)
    skip_lookup: bool = False
    access: AccessPolicy = field(default_factory=AccessPolicy)
    insecure_port: int = 0
    insecure_bind_address: str = "127.0.0.1"


async def client_ca_of_cluster(api: Api) -> bytes | None:
    """The cluster's client CA bundle (PEM) from kube-apiserver's ConfigMap, or None (logged)."""
    response = await api.request("GET", AUTHENTICATION_CONFIGMAP)
    if not response.ok or not isinstance(response.body, dict):
        logger.warning(
            "cannot read the client CA from configmap kube-system/extension-apiserver-authentication (%s):"
            " client certificates will not authenticate; bearer tokens still do",
            response.describe(),
        )
        return None
    bundle = str((response.body.get("data") or {}).get("client-ca-file") or "")
    if not bundle.strip():
        logger.warning("configmap kube-system/extension-apiserver-authentication has no client-ca-file")
        return None
    return bundle.encode()


def _post(api: Api) -> Callable[[str, Mapping[str, Any]], Any]:
    async def post(path: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
        # not fenced: a review creates nothing (see the module docstring); retried like any idempotent call
        response = await api.request("POST", path, dict(body), fence=False, retry=True)
        if response.ok and isinstance(response.body, dict):
            return response.body, ""
        return None, response.describe()

    return post


async def serve(
    options: ServingOptions,
    api: Api,
    *,
    ready_check: ReadyCheck,
    metrics: SchedulerMetrics,
    leading: Callable[[], bool] | None = None,
    attempts: AttemptLookup | None = None,
    live_check: ReadyCheck | None = None,
) -> list[HealthServer]:
    """Start the listeners `options` ask for (none when both ports are 0); stop each when done."""
    servers: list[HealthServer] = []
    common: dict[str, Any] = {
        "ready_check": ready_check,
        "metrics": metrics,
        "leading": leading,
        "attempts": attempts,
        "live_check": live_check,
    }
    try:
        if options.secure_port:
            client_ca: bytes | None = None
            if options.client_ca_file:
                with open(options.client_ca_file, "rb") as f:
                    client_ca = f.read()
            elif not options.skip_lookup:
                client_ca = await client_ca_of_cluster(api)
            files: CertificateFiles | None = None
            if options.tls_cert_file and options.tls_private_key_file:
                files = CertificateFiles(options.tls_cert_file, options.tls_private_key_file)
                tls = server_context(cert_file=files.cert_file, key_file=files.key_file, client_ca=client_ca)
                origin = options.tls_cert_file
            else:
                chain, key = self_signed()
                tls = server_context(cert_pem=chain, key_pem=key, client_ca=client_ca)
                origin = "a self-signed certificate made at start"
            gate = Gate(_post(api), options.access)
            server = await start_health_server(
                options.bind_address, options.secure_port, tls=tls, gate=gate, certificate_files=files, **common
            )
            servers.append(server)
            logger.info(
                "serving securely on %s:%d (HTTPS with %s; client certificates %s; always allowed: %s)",
                options.bind_address,
                server.port,
                origin,
                "verified against the cluster's client CA" if client_ca else "not asked for",
                ", ".join(options.access.always_allow_paths) or "nothing",
            )
        if options.insecure_port:
            server = await start_health_server(options.insecure_bind_address, options.insecure_port, **common)
            servers.append(server)
            logger.warning(
                "serving INSECURELY on %s:%d: plain HTTP, no authentication (development only)",
                options.insecure_bind_address,
                server.port,
            )
    except BaseException:
        for server in servers:
            await server.stop()
        raise
    return servers
