"""Fixtures shared by the unit tests.

``fast_retries``: the API client (edge/client.py) sends an idempotent request again after ``RETRY_PAUSES``
(0.1, 0.4 and 1 s, each jittered up to double: 1.5 to 3 s in all) when the connection fails or the server is
overloaded. A test that meets a refused connection, a refusing proxy or a certificate it does not trust on
purpose asks for this fixture: the same tries happen, a millisecond apart, and the answer is the same.
"""

from __future__ import annotations

import pytest

from kopf_scheduler.edge import client as client_module


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "RETRY_PAUSES", (0.001,) * len(client_module.RETRY_PAUSES))
