"""Fixtures shared by the unit tests.

``fast_retries``: the API client (edge/client.py) sends an idempotent request again after ``RETRY_PAUSES``
(0.1, 0.4 and 1 s, each jittered up to double: 1.5 to 3 s in all) when the connection fails or the server is
overloaded. A test that meets a refused connection, a refusing proxy or a certificate it does not trust on
purpose asks for this fixture: the same tries happen, a millisecond apart, and the answer is the same.

``api_server``: for the commands' blocking client (``edge/blocking.py``), which cannot share the test's event
loop: starts tests/fakeapi.py on a loop in a thread, seeded by the test, and answers a kubeconfig for it (user
token "t", context namespace team-a); the server stops when the test ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeapi import FakeApiServer

from kopf_scheduler.edge import client as client_module


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "RETRY_PAUSES", (0.001,) * len(client_module.RETRY_PAUSES))


Seed = Callable[[FakeApiServer], None]


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[Callable[[Seed], Path]]:
    """See the module docstring."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    def start(seed: Seed) -> Path:
        async def serve() -> None:
            async with FakeApiServer() as server:
                seed(server)
                state["url"] = server.url
                state["stop"] = asyncio.Event()
                ready.set()
                await state["stop"].wait()

        state["thread"] = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
        state["thread"].start()
        assert ready.wait(10)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": state["url"]}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}],
            "current-context": "x",
        }
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    yield start
    if "stop" in state:
        loop.call_soon_threadsafe(state["stop"].set)
        state["thread"].join(10)
    loop.close()
