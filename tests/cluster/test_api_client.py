"""The operator's one API client on the real control plane: client certificates and tokens from
the one credential loader, a rotated token file picked up after a 401, and the Lease client."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.core.framework.interface import ApiResponse
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import load_credentials
from kopf_scheduler.kube.leader import ApiLeaseClient, LeaseConflictError, LeaseRecord

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class FrozenClock:
    """Never moves: the token file is looked at only when a 401 forces it."""

    def __call__(self) -> float:
        return 0.0


def test_client_certificate_from_the_admin_kubeconfig(kubeconfig: Path) -> None:
    async def main() -> ApiResponse:
        api = Api(load_credentials(str(kubeconfig)))
        try:
            return await api.request("GET", "/api/v1/namespaces/default")
        finally:
            await api.close()

    response = asyncio.run(main())
    assert response.ok and isinstance(response.body, dict) and response.body["metadata"]["name"] == "default"


def test_a_rotated_token_file_is_read_again_after_a_401(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    sa = json.loads(
        control_plane.service_account_kubeconfig(namespace, "rotating", path=tmp_path / "sa.kubeconfig").read_text()
    )
    good = sa["users"][0]["user"]["token"]
    token_file = tmp_path / "token"
    token_file.write_text("expired-token")
    sa["users"][0]["user"] = {"tokenFile": str(token_file)}
    config = tmp_path / "rotating.kubeconfig"
    config.write_text(json.dumps(sa))

    async def main() -> list[int]:
        api = Api(load_credentials(str(config), clock=FrozenClock()))
        try:
            first = await api.request("GET", "/version")  # 401, and the file has not changed: no retry
            token_file.write_text(good)  # the kubelet rotates the token
            second = await api.request("GET", "/version")  # sent with the old token, 401, re-read, retried
            third = await api.request("GET", "/version")
            return [first.status, second.status, third.status]
        finally:
            await api.close()

    assert asyncio.run(main()) == [401, 200, 200]


def test_lease_client_creates_replaces_and_detects_conflicts(kubeconfig: Path, namespace: str) -> None:
    record = LeaseRecord("me", 15, T0, T0, 0)

    async def main() -> None:
        api = Api(load_credentials(str(kubeconfig)))
        lease = ApiLeaseClient(api, name="kopf-scheduler-test", namespace=namespace)
        try:
            assert await lease.get() is None
            created = await lease.create(record)
            assert created.record == record
            with pytest.raises(LeaseConflictError):
                await lease.create(record)
            renewed = LeaseRecord("me", 15, T0, T0.replace(second=9), 0)
            replaced = await lease.replace(renewed, resource_version=created.resource_version)
            assert replaced.record == renewed and replaced.resource_version != created.resource_version
            with pytest.raises(LeaseConflictError):  # written against a version that is gone
                await lease.replace(record, resource_version=created.resource_version)
            assert await lease.get() == replaced
        finally:
            await api.close()

    asyncio.run(main())
