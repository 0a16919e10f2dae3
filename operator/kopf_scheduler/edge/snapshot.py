"""A read-only snapshot of a live cluster, as the documents a CLUSTER.yaml would hold (``simulate --from-cluster``).

Lists, and only lists, every kind the simulator reads: Nodes, Pods (not Succeeded or Failed),
Services, ReplicationControllers, ReplicaSets, StatefulSets, PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities, PodDisruptionBudgets, PriorityClasses,
Namespaces, and the ``resource.k8s.io/v1`` DeviceClasses, ResourceSlices, DeviceTaintRules, ResourceClaims
and ResourceClaimTemplates, 500 at a time. The
answers are the API's own JSON with ``kind`` set on each item, so they go through the same loader and
parser as a file (``sim/loader.py``): one path from API bodies to core objects.

The credentials and the client are the operator's (``edge/credentials.py``: ``--kubeconfig``,
``$KUBECONFIG``, ``~/.kube/config``, then in-cluster; ``exec`` and ``auth-provider`` plugins included;
``edge/client.Api`` driven synchronously by ``edge/blocking.BlockingApi``), so the snapshot shows what
the operator logged in as would see, and a 401 refreshes the token (an exec plugin runs again) and asks
once more, as the operator does. A kind the API server does not serve (404) is left out with a note;
any other failure (403: the user may not list it) stops with the API's message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode

from ..core.model import paths

if TYPE_CHECKING:
    from .blocking import BlockingApi

__all__ = ["LIST_CHUNK", "ClusterReadError", "LiveSnapshot", "read_cluster"]

#: items per list call (``limit``; the rest comes with ``continue`` tokens)
LIST_CHUNK: Final = 500

#: kind -> (its list path across namespaces, extra query parameters)
_LISTS: Final[tuple[tuple[str, str, dict[str, str]], ...]] = (
    ("Node", paths.collection("v1", "nodes"), {}),
    ("Pod", paths.collection("v1", "pods"), {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}),
    ("Service", paths.collection("v1", "services"), {}),
    ("ReplicationController", paths.collection("v1", "replicationcontrollers"), {}),
    ("ReplicaSet", paths.collection("apps/v1", "replicasets"), {}),
    ("StatefulSet", paths.collection("apps/v1", "statefulsets"), {}),
    ("PersistentVolume", paths.collection("v1", "persistentvolumes"), {}),
    ("PersistentVolumeClaim", paths.collection("v1", "persistentvolumeclaims"), {}),
    ("StorageClass", paths.collection("storage.k8s.io/v1", "storageclasses"), {}),
    ("CSINode", paths.collection("storage.k8s.io/v1", "csinodes"), {}),
    ("PodDisruptionBudget", paths.collection("policy/v1", "poddisruptionbudgets"), {}),
    ("PriorityClass", paths.collection("scheduling.k8s.io/v1", "priorityclasses"), {}),
    ("Namespace", paths.collection("v1", "namespaces"), {}),
    ("CSIDriver", paths.collection("storage.k8s.io/v1", "csidrivers"), {}),
    ("CSIStorageCapacity", paths.collection("storage.k8s.io/v1", "csistoragecapacities"), {}),
    # DynamicResources (resource.k8s.io/v1); a server without the API leaves them out (404)
    ("DeviceClass", paths.collection("resource.k8s.io/v1", "deviceclasses"), {}),
    ("ResourceSlice", paths.collection("resource.k8s.io/v1", "resourceslices"), {}),
    ("DeviceTaintRule", paths.collection("resource.k8s.io/v1", "devicetaintrules"), {}),
    ("ResourceClaim", paths.collection("resource.k8s.io/v1", "resourceclaims"), {}),
    ("ResourceClaimTemplate", paths.collection("resource.k8s.io/v1", "resourceclaimtemplates"), {}),
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
    #: optional kinds (``OPTIONAL``) these credentials may not list (403), left out
    forbidden: tuple[str, ...] = ()


def read_cluster(kubeconfig: str | None = None) -> LiveSnapshot:
    """List every kind the simulator reads; `kubeconfig` None: ``$KUBECONFIG`` or ``~/.kube/config``, then
    in-cluster."""
    from .blocking import BlockingApi
    from .credentials import CredentialsError, load_credentials

    try:
        creds = load_credentials(kubeconfig)
    except CredentialsError as exc:
        raise ClusterReadError(
            f"cannot load kubeconfig {kubeconfig}: {exc.reason}" if kubeconfig else str(exc)
        ) from None
    documents: list[dict[str, Any]] = []
    missing: list[str] = []
    forbidden: list[str] = []
    with BlockingApi(creds) as api:
        for kind, path, extra in _LISTS:
            try:
                items = _list_all(api, kind, path, extra)
            except _Forbidden:
                if kind not in OPTIONAL:
                    raise
                forbidden.append(kind)
                continue
            if items is None:
                missing.append(kind)
            else:
                documents += items
    return LiveSnapshot(documents, creds.server, tuple(missing), tuple(forbidden))


#: kinds that only refine a simulation (the scheduler's own RBAC need not grant them, e.g. templates, which
#: only the resourceclaim controller reads): credentials that may not list them leave them out, with a note
OPTIONAL: Final = frozenset(
    {
        "ResourceClaimTemplate",
        "CSIDriver",
        "CSIStorageCapacity",
        "DeviceClass",
        "ResourceSlice",
        "DeviceTaintRule",
        "ResourceClaim",
    }
)


class _Forbidden(ClusterReadError):
    """A list answered 403."""


def _list_all(api: BlockingApi, kind: str, path: str, extra: dict[str, str]) -> list[dict[str, Any]] | None:
    """Every `kind` object, page by page; None when the API server does not serve the kind (404)."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        query = {"limit": str(LIST_CHUNK), **extra, **({"continue": token} if token else {})}
        answer = api.get(f"{path}?{urlencode(query)}")
        if answer.gone:
            return None
        if answer.status == 403:
            raise _Forbidden(f"cannot list {kind} objects: HTTP 403: {answer.detail()}")
        if answer.status == 0:  # unreachable, TLS, a timeout
            raise ClusterReadError(f"cannot list {kind} objects from {api.server}: {answer.detail()}")
        if not answer.ok or not isinstance(answer.body, dict):
            raise ClusterReadError(f"cannot list {kind} objects: HTTP {answer.status}: {answer.detail()}")
        for item in answer.body.get("items") or ():
            item["kind"] = kind
            items.append(item)
        token = (answer.body.get("metadata") or {}).get("continue") or None
        if token is None:
            return items
