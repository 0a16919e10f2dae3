"""Raw API bodies -> core objects: ``kube/`` reads the objects it schedules with only through here.

Every function takes a body as Kopf (or the API) delivers it (a pod, a node, a namespace, a policy,
a kind the cache keeps, a ``resource.k8s.io`` kind) and returns a frozen object, a key or a few plain
values. Parse errors surface as ``core.model.parsing.ObjectError`` (the message names the field); anything
else a strange body makes a parser raise is re-raised as ``ObjectError`` too, so callers have exactly
one exception to handle and a pod never crashes the operator.

The other raw reads in ``kube/`` are of envelopes, of what the operator sends, or of answers to its
own requests, never of state the core schedules on: Kopf's watch events and list pages' items and
continue tokens (``handlers.py``, ``events.py``), the Lease (``leader.py``), the target of the Binding
being sent (``binding.py``), the client CA ConfigMap (``serving.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from ..core.config.ownership import PolicyMeta
from ..core.dra import parsing as dra_parsing
from ..core.model import objects, parsing
from ..core.model.objects import Pod
from ..core.model.parsing import ObjectError
from ..core.scheduling.routing import KIND_COSCHEDULING_POD_GROUP, KIND_POD_GROUP, key_prefix

__all__ = [
    "DRA_KINDS",
    "OTHER_KINDS",
    "ObjectError",
    "PodRef",
    "bound_pod",
    "dra_key",
    "namespace_labels",
    "name_of",
    "node",
    "object_key",
    "parse_dra",
    "parse_other",
    "pod",
    "pod_identity",
    "pod_ref",
    "pod_uid",
    "policy_meta",
    "resource_version",
]

T = TypeVar("T")


def _safe(parse: Callable[[Mapping[str, Any]], T], body: Mapping[str, Any], what: str) -> T:
    try:
        return parse(body)
    except ObjectError:
        raise
    except Exception as exc:  # a parser bug or a body of the wrong shape: report, never crash
        raise ObjectError(f"{what}: cannot read: {exc!r}") from exc


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def pod(body: Mapping[str, Any]) -> Pod:
    return _safe(parsing.parse_pod, body, "pod")


def bound_pod(body: Mapping[str, Any], assumed: Pod) -> Pod | None:
    """``pod(body)`` for the bound version of a pod we assumed, reusing the assumption when only the bind
    changed it (``parsing.parse_bound``); None when it must be parsed."""
    try:
        return parsing.parse_bound(body, assumed)
    except Exception:  # a body of a shape nobody expected: the parser reads it and names what is wrong
        return None


def node(body: Mapping[str, Any]) -> objects.Node:
    return _safe(parsing.parse_node, body, "node")


@dataclass(frozen=True, slots=True)
class PodRef:
    """What can be read of a pod body the parser refused: enough to report on it."""

    namespace: str
    name: str
    uid: str
    scheduler_name: object  # spec.schedulerName as found (maybe not a string)
    node_name: object  # spec.nodeName as found


def pod_ref(body: Mapping[str, Any]) -> PodRef:
    meta = _meta(body)
    spec = body.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    return PodRef(
        str(meta.get("namespace") or "default"),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        spec.get("schedulerName", "default-scheduler"),
        spec.get("nodeName"),
    )


def name_of(body: Mapping[str, Any]) -> str:
    """``metadata.name`` (a node's or a namespace's key)."""
    return str(_meta(body).get("name") or "")


def pod_identity(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(schedulerName, uid)`` as ``parse_pod`` reads them: where the pending index files the pod."""
    spec = body.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return str(name or "default-scheduler"), pod_uid(body)


def pod_uid(body: Mapping[str, Any]) -> str:
    """The pod's key, as ``parse_pod`` makes its uid (``ns/name`` when the body has none)."""
    meta = _meta(body)
    return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")


def resource_version(body: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion`` as ``parse_pod`` reads it ("" when absent)."""
    return str(_meta(body).get("resourceVersion") or "")


#: kind -> (parser, whether the key includes the namespace); where each kind is stored:
#: core.scheduling.routing.OBJECT_STORES
OTHER_KINDS: Final[dict[str, tuple[Callable[[Mapping[str, Any]], Any], bool]]] = {
    "Service": (parsing.parse_service, True),
    "ReplicationController": (parsing.parse_controller, True),
    "ReplicaSet": (parsing.parse_controller, True),
    "StatefulSet": (parsing.parse_controller, True),
    "PersistentVolume": (parsing.parse_persistent_volume, False),
    "PersistentVolumeClaim": (parsing.parse_persistent_volume_claim, True),
    "StorageClass": (parsing.parse_storage_class, False),
    "PodDisruptionBudget": (parsing.parse_pod_disruption_budget, True),
    "CSINode": (parsing.parse_csi_node, False),
    "CSIDriver": (parsing.parse_csi_driver, False),
    "CSIStorageCapacity": (parsing.parse_csi_storage_capacity, True),
    KIND_POD_GROUP: (parsing.parse_pod_group, True),
    KIND_COSCHEDULING_POD_GROUP: (parsing.parse_coscheduling_pod_group, True),
}


def object_key(kind: str, body: Mapping[str, Any]) -> str:
    """The ClusterObjects key of a body: ``name``, ``ns/name``, ``Kind/ns/name`` for controllers,
    ``<api group>/ns/name`` for PodGroups."""
    meta = _meta(body)
    name = str(meta.get("name") or "")
    _, namespaced = OTHER_KINDS[kind]
    if not namespaced:
        return name
    return f"{key_prefix(kind)}{str(meta.get('namespace') or 'default')}/{name}"


def parse_other(kind: str, body: Mapping[str, Any]) -> Any:
    parse, _ = OTHER_KINDS[kind]
    if kind in ("ReplicationController", "ReplicaSet", "StatefulSet") and not body.get("kind"):
        body = {**body, "kind": kind}
    return _safe(parse, body, kind)


#: the ``resource.k8s.io`` kinds -> (parser, namespaced); DynamicResources reads them (core/dra/)
DRA_KINDS: Final[Mapping[str, tuple[Callable[[Mapping[str, Any]], Any], bool]]] = {
    "ResourceClaim": (dra_parsing.parse_resource_claim, True),
    "ResourceClaimTemplate": (dra_parsing.parse_resource_claim_template, True),
    "DeviceClass": (dra_parsing.parse_device_class, False),
    "ResourceSlice": (dra_parsing.parse_resource_slice, False),
    "DeviceTaintRule": (dra_parsing.parse_device_taint_rule, False),
}


def dra_key(kind: str, body: Mapping[str, Any]) -> str:
    """The DraTracker key of a body: ``ns/name`` for claims and templates, else the name."""
    meta = _meta(body)
    name = str(meta.get("name") or "")
    return f"{str(meta.get('namespace') or 'default')}/{name}" if DRA_KINDS[kind][1] else name


def parse_dra(kind: str, body: Mapping[str, Any]) -> Any:
    return _safe(DRA_KINDS[kind][0], body, kind)


def namespace_labels(body: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    meta = _meta(body)
    labels = meta.get("labels")
    clean = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
    return str(meta.get("name") or ""), clean


def policy_meta(body: Mapping[str, Any]) -> PolicyMeta:
    meta = _meta(body)
    spec = body.get("spec") if isinstance(body.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    try:
        generation = int(meta.get("generation") or 0)
    except (TypeError, ValueError):
        generation = 0
    return PolicyMeta(
        name=str(meta.get("name") or ""),
        generation=generation,
        created=str(meta.get("creationTimestamp") or ""),
        uid=str(meta.get("uid") or ""),
        scheduler_name=str(spec.get("schedulerName") or ""),
        spec=_plain(spec),
    )


def _plain(value: Any) -> Any:
    """Kopf bodies are views; the policy validator gets plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
