"""The informer on the real API server: a list in pages, then the watch from its resourceVersion;
the keys of each list go to `relisted` (what the core deletes when a relist lacks it)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kube_helpers import make_pod_body, wait_for
from kubernetes import client

from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import load_credentials
from kopf_scheduler.edge.informer import Feed, Informer
from kopf_scheduler.kube import convert


def test_lists_in_pages_then_watches_adds_changes_and_deletions(
    kubeconfig: Path, api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    for name in ("a", "b", "c"):
        core.create_namespaced_pod(namespace, make_pod_body(name, scheduler_name="nobody"))
    seen: list[tuple[str, str]] = []
    relisted: list[set[str]] = []
    listed: list[str] = []

    def apply(kind: str, body: Mapping[str, Any]) -> None:
        seen.append((kind, body["metadata"]["name"]))

    async def main() -> None:
        client_api = Api(load_credentials(str(kubeconfig)))
        feed = Feed("Pod", f"/api/v1/namespaces/{namespace}/pods", apply, convert.pod_uid, relisted.append)
        task = asyncio.create_task(
            Informer(client_api, feed, on_sync=lambda kind, synced: listed.append(kind), page=2).run()
        )  # 3 pods: 2 pages
        try:
            await asyncio.to_thread(wait_for, lambda: listed, 10)
            assert sorted(seen) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
            uids = {p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
            assert relisted == [uids] and listed == ["Pod"]
            seen.clear()
            await asyncio.to_thread(core.create_namespaced_pod, namespace, make_pod_body("d", scheduler_name="nobody"))
            await asyncio.to_thread(core.patch_namespaced_pod, "a", namespace, {"metadata": {"labels": {"x": "y"}}})
            await asyncio.to_thread(core.delete_namespaced_pod, "b", namespace, grace_period_seconds=0)
            await asyncio.to_thread(wait_for, lambda: ("DELETED", "b") in seen, 10)
            assert seen[:2] == [("ADDED", "d"), ("MODIFIED", "a")] and ("DELETED", "b") in seen
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client_api.close()

    asyncio.run(main())


def test_an_optional_kind_the_server_does_not_serve_counts_as_listed_and_empty(kubeconfig: Path) -> None:
    relisted: list[set[str]] = []
    listed: list[str] = []

    async def main() -> None:
        client_api = Api(load_credentials(str(kubeconfig)))
        path = "/apis/example.invalid/v1/widgets"  # no such API: 404
        feed = Feed("Widget", path, lambda kind, body: None, lambda body: "", relisted.append, optional=True)
        task = asyncio.create_task(Informer(client_api, feed, on_sync=lambda kind, synced: listed.append(kind)).run())
        try:
            await asyncio.to_thread(wait_for, lambda: listed, 10)
            assert listed == ["Widget"] and relisted == [set()]  # the cache sync is not held up; stale objects go
            required = Feed("Widget", path, lambda kind, body: None, lambda body: "", relisted.append)
            other = asyncio.create_task(
                Informer(client_api, required, on_sync=lambda kind, synced: synced and listed.append(kind)).run()
            )
            await asyncio.sleep(2)
            other.cancel()
            await asyncio.gather(other, return_exceptions=True)
            assert listed == ["Widget"]  # a kind that must exist keeps trying and never counts as listed
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client_api.close()

    asyncio.run(main())
