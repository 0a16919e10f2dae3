"""kube/serving.py: the operator's listeners as ``kopf-scheduler run`` starts them, against the fake API server:
the client CA read from kube-apiserver's ConfigMap (and serving going on without it), the secure port (its own
certificate or a self-signed one) beside the insecure one, and nothing left listening when a port is taken."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from fakeapi import FakeApiServer

from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.kube.serving import ServingOptions, client_ca_of_cluster, serve
from kopf_scheduler.telemetry.metrics import SchedulerMetrics
from kopf_scheduler.telemetry.serving import self_signed

AUTH = {"metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def on_fake(body: Callable[[FakeApiServer, Api], Awaitable[None]]) -> None:
    async def main() -> None:
        async with FakeApiServer() as server:
            server.register("", "v1", "configmaps", "ConfigMap", subresources=())
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0)
            try:
                await asyncio.wait_for(body(server, api), 9)
            finally:
                await api.close()

    asyncio.run(main())


def test_the_client_ca_is_the_configmaps_bundle_or_none(caplog: pytest.LogCaptureFixture) -> None:
    found: list[bytes | None] = []

    async def body(server: FakeApiServer, api: Api) -> None:
        found.append(await client_ca_of_cluster(api))  # no ConfigMap
        server.add("", "v1", "configmaps", {**AUTH, "data": {"requestheader-client-ca-file": "x"}})
        found.append(await client_ca_of_cluster(api))  # no client-ca-file in it
        server.delete("", "v1", "configmaps", AUTH["metadata"]["name"], "kube-system")
        server.add("", "v1", "configmaps", {**AUTH, "data": {"client-ca-file": "-----BEGIN CERTIFICATE-----\n"}})
        found.append(await client_ca_of_cluster(api))

    with caplog.at_level(logging.WARNING, logger="kopf_scheduler.kube.serving"):
        on_fake(body)
    assert found == [None, None, b"-----BEGIN CERTIFICATE-----\n"]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings[0].startswith("cannot read the client CA from configmap kube-system/extension-apiserver-auth")
    assert warnings[1] == "configmap kube-system/extension-apiserver-authentication has no client-ca-file"


def insecure_client() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


async def get(url: str, tls: ssl.SSLContext | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, ssl=tls if tls is not None else False) as response:
            return response.status, await response.text()


def test_both_ports_serve_and_only_the_secure_one_asks_who_is_calling() -> None:
    secure, insecure = free_port(), free_port()

    async def body(server: FakeApiServer, api: Api) -> None:
        options = ServingOptions(secure_port=secure, bind_address="127.0.0.1", insecure_port=insecure)
        servers = await serve(options, api, ready_check=lambda: (True, "synced"), metrics=SchedulerMetrics())
        try:
            assert [s.port for s in servers] == [secure, insecure]
            assert (await get(f"https://127.0.0.1:{secure}/healthz", insecure_client()))[0] == 200
            # /metrics is not always allowed: without credentials the secure port refuses
            assert (await get(f"https://127.0.0.1:{secure}/metrics", insecure_client()))[0] == 401
            status, text = await get(f"http://127.0.0.1:{insecure}/metrics")
            assert status == 200 and "scheduler_" in text
        finally:
            for s in servers:
                await s.stop()
        # the client CA was looked up in the cluster (none there: served without client certificates)
        assert any(r.path.endswith("/configmaps/extension-apiserver-authentication") for r in server.requests)

    on_fake(body)


def test_the_secure_port_serves_the_given_certificate_and_reads_no_configmap(tmp_path: Path) -> None:
    chain, key = self_signed()
    (tmp_path / "tls.crt").write_bytes(chain)
    (tmp_path / "tls.key").write_bytes(key)
    (tmp_path / "ca.crt").write_bytes(chain)
    port = free_port()

    async def body(server: FakeApiServer, api: Api) -> None:
        options = ServingOptions(
            secure_port=port,
            bind_address="127.0.0.1",
            tls_cert_file=str(tmp_path / "tls.crt"),
            tls_private_key_file=str(tmp_path / "tls.key"),
            client_ca_file=str(tmp_path / "ca.crt"),
        )
        (only,) = await serve(options, api, ready_check=lambda: (True, "synced"), metrics=SchedulerMetrics())
        try:
            trusting = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))
            assert (await get(f"https://localhost:{port}/healthz", trusting))[0] == 200  # verified: our certificate
        finally:
            await only.stop()
        assert not any("configmaps" in r.path for r in server.requests)

    on_fake(body)


def test_a_taken_port_stops_the_listener_already_started() -> None:
    secure = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        insecure = taken.getsockname()[1]

        async def body(server: FakeApiServer, api: Api) -> None:
            options = ServingOptions(
                secure_port=secure, bind_address="127.0.0.1", skip_lookup=True, insecure_port=insecure
            )
            with pytest.raises(OSError):
                await serve(options, api, ready_check=lambda: (True, "synced"), metrics=SchedulerMetrics())
            with pytest.raises(aiohttp.ClientConnectionError):
                await get(f"https://127.0.0.1:{secure}/healthz", insecure_client())
            assert not any("configmaps" in r.path for r in server.requests)  # skip_lookup: never asked

        on_fake(body)
