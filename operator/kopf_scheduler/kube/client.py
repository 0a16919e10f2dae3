"""``Api``: the asyncio HTTP client the operator's informers and writes go through.

The informers' lists and watches (``kube/informer.py``), binds, events, pod conditions,
SchedulingPolicy statuses and the leader-election Lease all use one aiohttp session built from
the process's one ``Credentials`` (``kube/credentials.py``), the same ones Kopf's policy watch
logs in with. Bodies are plain JSON we build ourselves, so timestamps go
out exactly as formatted (the official client re-serialises MicroTime without the zero fraction
the API server requires). We keep this small client rather than a maintained one because it is
the fastest path we have measured for the bind round trip (see ``bench/bench_client.py``).

Requests never raise for HTTP errors: they return (status, decoded body); a transport failure
returns status 0 and the error text. The bearer token is taken from its ``TokenSource`` for every
request (a token file is looked at at most once a second); a 401 makes it re-read the token at
once and, if the token changed, the request is sent once more.

``watch`` streams a watch request's events as decoded dicts until the server's timeout ends it;
an HTTP error becomes one ``ERROR`` event carrying its code (as the API server reports a 410
inside a stream), a transport failure one with code 0.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp

from .credentials import Credentials, ssl_context

__all__ = ["CONNECTION_LIMIT", "Api"]

#: pooled connections: more than the informers' watches, binds and writes at once (12 + 64 + 16),
#: so a Lease renewal or a policy status never waits behind them for a connection
CONNECTION_LIMIT: Final = 128
#: a watch that sends nothing (not even a bookmark) for this long past its own timeout is dead
WATCH_READ_SLACK: Final = 30.0


class Api:
    """A minimal async Kubernetes API client; see the module docstring."""

    def __init__(self, credentials: Credentials, *, timeout: float = 15.0, connections: int = CONNECTION_LIMIT) -> None:
        self.credentials = credentials
        self.host = credentials.server
        self._ssl = ssl_context(credentials) if credentials.server.startswith("https:") else False
        self._headers = {"Accept": "application/json", "User-Agent": "kopf-scheduler"}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        status, answer = await self._send(method, path, data, content_type)
        token = self.credentials.token
        if status == 401 and token is not None and token.refresh():
            status, answer = await self._send(method, path, data, content_type)
        return status, answer

    async def watch(self, path: str, params: Mapping[str, str], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """The events of ``GET path?watch=1&...`` (the server ends it after `timeout` seconds)."""
        query = urlencode({**params, "watch": "1", "timeoutSeconds": str(int(timeout))})
        client_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout.total, sock_read=timeout + WATCH_READ_SLACK)
        for attempt in range(2):
            try:
                async with self._session_().get(f"{self.host}{path}?{query}", headers=self._auth({}), timeout=client_timeout) as resp:
                    if resp.status == 401 and attempt == 0 and self.credentials.token is not None and self.credentials.token.refresh():
                        continue
                    if resp.status != 200:
                        text = await resp.text()
                        yield {"type": "ERROR", "object": {"code": resp.status, "message": text[:300]}}
                        return
                    buffer = b""
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        if b"\n" not in chunk:
                            continue
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            if line:
                                yield json.loads(line)
                    return
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                yield {"type": "ERROR", "object": {"code": 0, "message": f"{type(exc).__name__}: {exc}"}}
                return

    def _session_(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        return self._session

    def _auth(self, headers: dict[str, str]) -> dict[str, str]:
        if self.credentials.token is not None:
            headers["Authorization"] = f"Bearer {self.credentials.token.current()}"
        return headers

    async def _send(self, method: str, path: str, data: str | None, content_type: str) -> tuple[int, Any]:
        headers: dict[str, str] = {}
        if data is not None:
            headers["Content-Type"] = content_type
        try:
            async with self._session_().request(method, self.host + path, data=data, headers=self._auth(headers)) as resp:
                text = await resp.text()
                try:
                    decoded: Any = json.loads(text) if text else None
                except ValueError:
                    decoded = text
                return resp.status, decoded
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return 0, f"{type(exc).__name__}: {exc}"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
