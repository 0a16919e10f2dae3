"""``Api``: the asyncio HTTP client every write of the operator goes through.

Binds, events, pod conditions, SchedulingPolicy statuses and the leader-election Lease all use
one aiohttp session built from the process's one ``Credentials`` (``kube/credentials.py``), the
same ones Kopf's watches log in with. Bodies are plain JSON we build ourselves, so timestamps go
out exactly as formatted (the official client re-serialises MicroTime without the zero fraction
the API server requires). We keep this small client rather than a maintained one because it is
the fastest path we have measured for the bind round trip (see ``bench/bench_client.py``).

Requests never raise for HTTP errors: they return (status, decoded body); a transport failure
returns status 0 and the error text. The bearer token is taken from its ``TokenSource`` for every
request (a token file is looked at at most once a second); a 401 makes it re-read the token at
once and, if the token changed, the request is sent once more.
"""

from __future__ import annotations

import json
from typing import Any, Final

import aiohttp

from .credentials import Credentials, ssl_context

__all__ = ["CONNECTION_LIMIT", "Api"]

#: pooled connections: more than the binds and writes the App lets run at once (64 + 16), so a
#: Lease renewal or a policy status never waits behind them for a connection
CONNECTION_LIMIT: Final = 128


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

    async def _send(self, method: str, path: str, data: str | None, content_type: str) -> tuple[int, Any]:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        headers: dict[str, str] = {}
        if data is not None:
            headers["Content-Type"] = content_type
        if self.credentials.token is not None:
            headers["Authorization"] = f"Bearer {self.credentials.token.current()}"
        try:
            async with self._session.request(method, self.host + path, data=data, headers=headers) as resp:
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
