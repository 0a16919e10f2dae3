"""``BlockingApi``: the operator's ``Api`` for commands that ask a cluster a few things and exit.

``simulate --from-cluster`` (``snapshot.py``) and the kubectl plugin (``commands/kubectl.py``) are
synchronous; they reach the API server through the same ``Api`` (``client.py``) and the same
``Credentials`` (``credentials.py``) as the operator, driven on a private event loop
(``transport.LoopBridge``): one client, one kubeconfig loader, one status rule, the same 401 refresh
of an exec plugin's token. Measured with bench/bench_sync_clients.py against the official client
and pykube-ng (README, "Which client the commands use").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..core.framework.interface import ApiResponse
from .client import Api
from .credentials import Credentials
from .transport import LoopBridge

__all__ = ["BlockingApi"]

#: seconds a command waits for one answer
TIMEOUT: Final = 30.0


class BlockingApi:
    """``get(path)`` answers one GET, blocking; ``close`` when done (or use it as a context manager)."""

    def __init__(
        self, credentials: Credentials, *, timeout: float = TIMEOUT, user_agent: str = "kopf-scheduler"
    ) -> None:
        self.server = credentials.server
        self._timeout = timeout
        self._api = Api(credentials, timeout=timeout, user_agent=user_agent)
        self._bridge = LoopBridge()

    def get(self, path: str, *, headers: Mapping[str, str] | None = None) -> ApiResponse:
        """``GET path`` (a query string included): the edge's ``ApiResponse``; status 0 when no answer came."""
        return self._bridge.run(self._api.request("GET", path, headers=headers), timeout=self._timeout + 5)

    def post(self, path: str, body: Any) -> ApiResponse:
        """``POST path`` with a JSON body (a TokenRequest), sent once: a POST is not repeated."""
        return self._bridge.run(self._api.request("POST", path, body), timeout=self._timeout + 5)

    def close(self) -> None:
        try:
            self._bridge.run(self._api.close(), timeout=self._timeout)
        finally:
            self._bridge.close(lambda: None)

    def __enter__(self) -> BlockingApi:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
