"""A read-only snapshot of a live cluster, as the documents a CLUSTER.yaml would hold (``simulate --from-cluster``).

Lists, and only lists, every kind the simulator reads: Nodes, Pods (not Succeeded or Failed),
Services, ReplicationControllers, ReplicaSets, StatefulSets, PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes, PodDisruptionBudgets, PriorityClasses and Namespaces, 500 at a time. The
answers are the API's own JSON with ``kind`` set on each item, so they go through the same loader and
parser as a file (``sim/loader.py``): one path from API bodies to core objects.

The credentials are the operator's (``edge/credentials.py``: ``--kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config``, then in-cluster; ``exec`` and ``auth-provider`` plugins included), so the snapshot
shows what the operator logged in as would see. The client is the official ``kubernetes`` one built
from them (``api_client``), not the operator's asyncio ``edge/client.Api``: this is a synchronous
command and needs no event loop. A 401 refreshes the token (an exec plugin runs again) and the list
is asked once more. Bodies are decoded from the raw JSON (``_preload_content=False``), which is
faster than the client's models and keeps every field exactly as served. A kind the API server does
not serve (404) is left out with a note; any other failure (403: the user may not list it) stops
with the API's message. The official client's errors are read through the edge's one ``Response``
(``edge/transport.py``): the same status rule as the operator's requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .transport import Response

__all__ = ["LIST_CHUNK", "ClusterReadError", "LiveSnapshot", "read_cluster"]

#: items per list call (``limit``; the rest comes with ``continue`` tokens)
LIST_CHUNK: Final = 500

#: kind -> (API class of the official client, its list method, extra list arguments)
_LISTS: Final[tuple[tuple[str, str, str, dict[str, str]], ...]] = (
    ("Node", "CoreV1Api", "list_node", {}),
    (
        "Pod",
        "CoreV1Api",
        "list_pod_for_all_namespaces",
        {"field_selector": "status.phase!=Succeeded,status.phase!=Failed"},
    ),
    ("Service", "CoreV1Api", "list_service_for_all_namespaces", {}),
    ("ReplicationController", "CoreV1Api", "list_replication_controller_for_all_namespaces", {}),
    ("ReplicaSet", "AppsV1Api", "list_replica_set_for_all_namespaces", {}),
    ("StatefulSet", "AppsV1Api", "list_stateful_set_for_all_namespaces", {}),
    ("PersistentVolume", "CoreV1Api", "list_persistent_volume", {}),
    ("PersistentVolumeClaim", "CoreV1Api", "list_persistent_volume_claim_for_all_namespaces", {}),
    ("StorageClass", "StorageV1Api", "list_storage_class", {}),
    ("CSINode", "StorageV1Api", "list_csi_node", {}),
    ("CSIDriver", "StorageV1Api", "list_csi_driver", {}),
    ("CSIStorageCapacity", "StorageV1Api", "list_csi_storage_capacity_for_all_namespaces", {}),
    ("PodDisruptionBudget", "PolicyV1Api", "list_pod_disruption_budget_for_all_namespaces", {}),
    ("PriorityClass", "SchedulingV1Api", "list_priority_class", {}),
    ("Namespace", "CoreV1Api", "list_namespace", {}),
)


class ClusterReadError(Exception):
    """The cluster could not be read: the kubeconfig, the connection, or a list the API refused."""


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    documents: list[dict[str, Any]]
    #: the server the snapshot came from
    server: str
    #: kinds the API server does not serve (404), left out
    missing: tuple[str, ...] = ()


def read_cluster(kubeconfig: str | None = None) -> LiveSnapshot:
    """List every kind the simulator reads; `kubeconfig` None: ``$KUBECONFIG`` or ``~/.kube/config``, then
    in-cluster."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from .credentials import CredentialsError, api_client, load_credentials

    try:
        creds = load_credentials(kubeconfig)
    except CredentialsError as exc:
        raise ClusterReadError(
            f"cannot load kubeconfig {kubeconfig}: {exc.reason}" if kubeconfig else str(exc)
        ) from None
    api = api_client(creds)
    documents: list[dict[str, Any]] = []
    missing: list[str] = []
    try:
        for kind, api_class, method, extra in _LISTS:
            lister = getattr(getattr(client, api_class)(api), method)
            for attempt in (0, 1):
                try:
                    documents += _list_all(lister, kind, extra)
                except ApiException as exc:
                    answer = _response(exc)
                    if answer.unauthorized and attempt == 0 and creds.token is not None and creds.token.refresh():
                        continue  # a new token: ask once more
                    if answer.gone:
                        missing.append(kind)
                        break
                    raise ClusterReadError(
                        f"cannot list {kind} objects: HTTP {answer.status} {exc.reason}: {answer.detail()}"
                    ) from None
                except Exception as exc:  # the transport's (urllib3's) errors: unreachable, TLS, timeouts
                    raise ClusterReadError(
                        f"cannot list {kind} objects from {creds.server}: {type(exc).__name__}: {exc}"
                    ) from None
                break
        return LiveSnapshot(documents, creds.server, tuple(missing))
    finally:
        api.close()  # type: ignore[no-untyped-call]


def _list_all(lister: Callable[..., Any], kind: str, extra: dict[str, str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        response = lister(limit=LIST_CHUNK, _continue=token, _preload_content=False, **extra)
        try:
            page = json.loads(response.data)
        finally:
            response.release_conn()
        for item in page.get("items") or ():
            item["kind"] = kind
            items.append(item)
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return items


def _response(exc: Any) -> Response:
    """The official client's error as the edge's one ``Response`` (its status rule, its ``detail``)."""
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        body = exc.body
    return Response(int(exc.status or 0), body, error=str(exc.reason or ""))
