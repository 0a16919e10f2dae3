"""A kubeconfig's ``proxy-url``: the edge's requests go through a CONNECT tunnel (edge/transport.py), for the
operator's ``Api`` and the commands' ``BlockingApi`` alike; a refusing or absent proxy is a clear error."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import Iterator

import pytest
from builders import make_node
from fakeapi import FakeApiServer

from kopf_scheduler.edge.blocking import BlockingApi
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.edge.transport import Pool


class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), and records each request head; `refuse` answers 403."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.heads: list[str] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        self.heads.append(head)
        if self.refuse:
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, _, port = head.split(" ")[1].rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


def test_requests_go_through_the_proxys_tunnel_with_its_credentials() -> None:
    async def main() -> None:
        async with FakeApiServer() as server:
            server.add("", "v1", "nodes", make_node("n1").raw())
            proxy = ConnectProxy()
            port = await proxy.start()
            creds = Credentials(
                server=f"http://127.0.0.1:{server.port}", source="test", proxy_url=f"http://me:p%40ss@127.0.0.1:{port}"
            )
            api = Api(creds)
            try:
                first = await api.request("GET", "/api/v1/nodes")
                second = await api.request("GET", "/api/v1/nodes/n1")
            finally:
                await api.close()
                proxy.close()
            assert first.ok and [n["metadata"]["name"] for n in first.body["items"]] == ["n1"]
            assert second.ok
            assert len(proxy.heads) == 1  # one tunnel, kept alive for both requests
            head = proxy.heads[0]
            assert head.startswith(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n")
            assert f"Proxy-Authorization: Basic {base64.b64encode(b'me:p@ss').decode()}" in head

    asyncio.run(main())


def test_a_refusing_proxy_is_an_answerless_response_saying_so(fast_retries: None) -> None:
    async def main() -> None:
        proxy = ConnectProxy(refuse=True)
        port = await proxy.start()
        api = Api(Credentials(server="http://10.0.0.1:6443", source="test", proxy_url=f"http://127.0.0.1:{port}"))
        refused = await api.request("GET", "/api/v1/nodes")
        await api.close()
        proxy.close()
        assert refused.status == 0
        assert (
            refused.detail()
            == f"ConnectError: proxy 127.0.0.1:{port} refused CONNECT 10.0.0.1:6443: HTTP/1.1 403 Forbidden"
        )

    asyncio.run(main())


def test_only_http_proxies_are_accepted() -> None:
    with pytest.raises(ValueError, match="only http:// proxies"):
        Pool("h", 443, timeout=1, proxy="socks5://127.0.0.1:1080")


@pytest.fixture
def proxied_api_server() -> Iterator[tuple[str, str, ConnectProxy]]:
    """A fake API server and a CONNECT proxy on a loop in a thread, for the blocking client."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, object] = {}

    async def serve() -> None:
        async with FakeApiServer() as server:
            server.add("", "v1", "nodes", make_node("n1").raw())
            proxy = ConnectProxy()
            state["urls"] = (f"http://127.0.0.1:{server.port}", f"http://127.0.0.1:{await proxy.start()}", proxy)
            ready.set()
            stop = asyncio.Event()
            state["stop"] = stop
            await stop.wait()
            proxy.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield state["urls"]  # type: ignore[misc]
    finally:
        loop.call_soon_threadsafe(state["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
        loop.close()


def test_the_commands_blocking_client_uses_the_proxy_too(proxied_api_server: tuple[str, str, ConnectProxy]) -> None:
    server, proxy_url, proxy = proxied_api_server
    with BlockingApi(Credentials(server=server, source="test", proxy_url=proxy_url)) as api:
        answer = api.get("/api/v1/nodes")
    assert answer.ok and len(answer.body["items"]) == 1
    assert proxy.heads and proxy.heads[0].startswith("CONNECT ")
