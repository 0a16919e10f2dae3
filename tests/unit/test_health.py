"""The health server on 127.0.0.1: probe answers, readiness details, the metrics page, the attempts, shutdown;
the secure port: HTTPS (self-signed, or certificate files reloaded when they change), the gate before every
handler, client certificates of a client CA."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from prometheus_client.parser import text_string_to_metric_families

from kopf_scheduler.cluster.certs import CertPair, create_pki, issue_client_cert
from kopf_scheduler.telemetry.access import TOKEN_REVIEWS, Gate
from kopf_scheduler.telemetry.health import AttemptLookup, HealthServer, start_health_server, stop_health_server
from kopf_scheduler.telemetry.metrics import SchedulerMetrics
from kopf_scheduler.telemetry.serving import CertificateFiles, self_signed, server_context


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


# --- the secure port: HTTPS, the gate in front of every handler ---------------------------------


async def tokens_post(path: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
    """The API server's answers for one known token, allowed /metrics only."""
    spec = body["spec"]
    if path == TOKEN_REVIEWS:
        if spec["token"] != "good":
            return {"status": {"authenticated": False}}, ""
        return {"status": {"authenticated": True, "user": {"username": "reader", "groups": ["g"]}}}, ""
    return {"status": {"allowed": spec["nonResourceAttributes"]["path"] == "/metrics"}}, ""


def client_tls(ca: Path | None = None, cert: CertPair | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    if ca is None:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(cert.cert, cert.key)
    return ctx


async def fetch_tls(server: HealthServer, path: str, tls: ssl.SSLContext, token: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.get(f"https://127.0.0.1:{server.port}{path}", ssl=tls, headers=headers) as response:
            body = await response.json() if response.content_type == "application/json" else await response.text()
            return response.status, body


def test_the_secure_port_serves_https_and_asks_the_gate() -> None:
    async def main() -> None:
        chain, key = self_signed()
        server = await start_health_server(
            "127.0.0.1", 0, ready_check=lambda: (True, "synced"), metrics=SchedulerMetrics(), attempts=lookup,
            tls=server_context(cert_pem=chain, key_pem=key), gate=Gate(tokens_post),
        )  # fmt: skip
        try:
            assert server.scheme == "https"
            insecure = client_tls()
            for probe in ("/healthz", "/livez", "/readyz"):
                assert (await fetch_tls(server, probe, insecure))[0] == 200
            status, body = await fetch_tls(server, "/metrics", insecure)
            assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
            assert (await fetch_tls(server, "/metrics", insecure, token="bad"))[0] == 401
            status, text = await fetch_tls(server, "/metrics", insecure, token="good")
            assert status == 200 and "scheduler_schedule_attempts" in text
            status, body = await fetch_tls(server, "/debug/attempts/default/web", insecure, token="good")
            assert (status, body["message"]) == (
                403,
                'forbidden: User "reader" cannot get path "/debug/attempts/default/web"',
            )
            assert (await fetch_tls(server, "/nope", insecure, token="good"))[0] == 403  # authorized before routing
            with pytest.raises(aiohttp.ClientError):  # plain HTTP gets no answer from a TLS port
                await fetch(server, "/healthz")
        finally:
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_the_self_signed_certificate_is_for_localhost_and_127_0_0_1_and_verifies_with_its_ca(tmp_path: Path) -> None:
    chain, key = self_signed()
    certs = x509.load_pem_x509_certificates(chain)
    assert len(certs) == 2 and certs[1].subject.rfc4514_string().startswith("CN=localhost-ca@")
    (tmp_path / "ca.crt").write_bytes(certs[1].public_bytes(serialization.Encoding.PEM))

    async def main() -> None:
        server = await start_health_server(
            "127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics(),
            tls=server_context(cert_pem=chain, key_pem=key), gate=Gate(tokens_post),
        )  # fmt: skip
        try:
            assert (await fetch_tls(server, "/healthz", client_tls(tmp_path / "ca.crt")))[0] == 200
        finally:
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_certificate_files_and_client_certificates_of_the_cluster_ca(tmp_path: Path) -> None:
    """--tls-cert-file/--tls-private-key-file served and verified; a client certificate of the client CA
    authenticates its CN (system:masters: no review at all); one of another CA fails the handshake."""
    pki = create_pki(tmp_path / "cluster")
    stranger = create_pki(tmp_path / "other")
    root = issue_client_cert(pki.ca, tmp_path, "root", "root", ("system:masters",))
    asked: list[str] = []

    async def post(path: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
        asked.append(path)
        return await tokens_post(path, body)

    async def main() -> None:
        files = CertificateFiles(str(pki.serving.cert), str(pki.serving.key))
        server = await start_health_server(
            "127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics(), attempts=lookup,
            tls=server_context(cert_file=files.cert_file, key_file=files.key_file, client_ca=pki.ca.cert.read_bytes()),
            gate=Gate(post), certificate_files=files,
        )  # fmt: skip
        try:
            verified = client_tls(pki.ca.cert)
            assert (await fetch_tls(server, "/metrics", verified))[0] == 401
            status, body = await fetch_tls(server, "/debug/attempts/default/web", client_tls(pki.ca.cert, root))
            assert (status, body) == (200, {"pod": "default/web", "outcome": "scheduled"})
            assert asked == []
            with pytest.raises(aiohttp.ClientError):
                await fetch_tls(server, "/healthz", client_tls(pki.ca.cert, stranger.admin))
        finally:
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_changed_certificate_files_are_loaded_for_new_handshakes(tmp_path: Path) -> None:
    first, second = create_pki(tmp_path / "first"), create_pki(tmp_path / "second")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first.serving.cert.read_bytes())
    key.write_bytes(first.serving.key.read_bytes())
    files = CertificateFiles(str(cert), str(key))
    tls = server_context(cert_file=str(cert), key_file=str(key))

    async def main() -> None:
        server = await start_health_server(
            "127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics(), tls=tls, gate=Gate(tokens_post)
        )
        try:
            assert (await fetch_tls(server, "/healthz", client_tls(first.ca.cert)))[0] == 200
            assert files.reload_if_changed(tls) is False  # nothing changed
            cert.write_bytes(second.serving.cert.read_bytes())
            key.write_bytes(second.serving.key.read_bytes())
            os.utime(cert, (1e9, 1e9))
            assert files.reload_if_changed(tls) is True
            assert (await fetch_tls(server, "/healthz", client_tls(second.ca.cert)))[0] == 200
            with pytest.raises(aiohttp.ClientError):
                await fetch_tls(server, "/healthz", client_tls(first.ca.cert))
        finally:
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), timeout=20))


def test_tls_and_gate_go_together() -> None:
    chain, key = self_signed()

    async def main() -> None:
        with pytest.raises(ValueError, match="both a TLS context and a gate"):
            await start_health_server(
                "127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics(),
                tls=server_context(cert_pem=chain, key_pem=key),
            )  # fmt: skip

    asyncio.run(main())
