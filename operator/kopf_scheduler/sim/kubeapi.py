"""kube-apiserver's object semantics, without the wire: one store and the requests that read and write it.

``KubeApi`` holds objects by resource type and key with etcd's one resourceVersion counter (every
kind shares it) and a bounded history of changes (``history_limit``: what watch replays and the
snapshots of paged lists read; ``compact()`` forgets it), and carries requests out as the generic
registry and the pod registry of kube-apiserver v1.37.2 do: list (``limit``/``continue``, field and
label selectors, consistent snapshots), create, replace, merge / strategic-merge / JSON patch,
delete (finalizers, pods' graceful deletion), the ``status`` subresource, ``pods/binding`` and
``pods/eviction`` (PodDisruptionBudgets), answering with the real Status bodies and messages. Where
the behaviour is surprising, the real one won:

- a no-op write keeps the resourceVersion and records no change (etcd skips it);
- deleting a pod marks it first (``deletionTimestamp``): an unbound pod is then deleted at once, a
  bound one stays until its kubelet would finish (here: ``delete()``), as does an object with
  finalizers until they are removed;
- a ``metadata.uid`` in a PATCH body that differs is 422 "field is immutable"; the uid of a PUT
  body, a Binding or DeleteOptions.preconditions is the 409 Conflict precondition;
- DELETE answers the object for the kinds whose registry says so (pods, services, namespaces,
  PVs, PVCs, storage classes, CSINodes, ResourceClaims, DeviceClasses, ResourceSlices), otherwise a
  Status with ``details``;
- ``generateName`` is cut to 58 characters before the five of the suffix are appended.

Two servers use it: ``tests/fakeapi.py`` puts it behind HTTP for the edge's unit tests (discovery,
watch streams, bookmarks and injected faults live there), and ``simulate`` gives it to PreBind and
Bind plugins as their ``ApiClient`` (``sim/apiserver.py``). ``answer`` is the synchronous entry
point: a method, a path with its query, a parsed body, an ``ApiResponse`` back; ``changed`` is
called with every change as it is stored (what a watch would see). A list at a resourceVersion the
store has not reached is 504 at once (the HTTP server waits for it first). The clock that stamps
times, the uids of new objects and the suffixes of ``generateName`` (a random generator, or a
function of the object) are the caller's to give (``simulate``'s repeat from run to run).

Limits: no admission (a namespace need not exist), no validation or defaulting beyond uid,
resourceVersion, creationTimestamp, generation and a Binding's target (pods created through the
API get ``status: {phase: Pending}``, custom resources lose the status they were created with),
no managedFields or server-side apply, no garbage collection or controllers, no deletecollection,
no authorization. Strategic merge patch knows the merge keys of the fields a scheduler writes
(conditions by ``type``, containers and volumes by ``name``, ``metadata.finalizers`` as a set...);
other lists are replaced.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as _dt
import json
import random
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl

from ..core.framework.interface import ApiResponse

__all__ = [
    "BUILTIN_RESOURCES",
    "WATCH_TRUE",
    "ApiError",
    "Change",
    "Filter",
    "KubeApi",
    "ResourceType",
    "Target",
    "bad_request",
    "is_watch",
    "json_patch",
    "label_selector_from_object",
    "merge_patch",
    "not_allowed",
    "parse_field_selector",
    "parse_int",
    "parse_label_selector",
    "status_body",
    "strategic_merge_patch",
    "with_rv",
]

Body = dict[str, Any]

#: what the real server's Status ``reason`` is for a code when nothing more specific applies
_REASONS: Final[Mapping[int, str]] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


_CONTINUE_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without "
    "the continue parameter, or use the continue token in this response to retrieve the remainder of the results. "
    "Continuing with the provided token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)
_MODIFIED: Final = "the object has been modified; please apply your changes to the latest version and try again"
_GENERATE_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand, 5 characters
#: names.SimpleNameGenerator: a ``generateName`` longer than this is cut (63 less the 5 characters appended)
_MAX_GENERATE_NAME: Final = 58


# --------------------------------------------------------------------------------------------
# Resource types


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource and the registry behaviours of its kind that show on the wire."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    #: field selector labels beyond metadata.name and metadata.namespace
    field_labels: tuple[str, ...] = ()
    #: a custom resource: no strategic merge patch, its status is dropped on create
    custom: bool = False
    #: metadata.generation is kept and bumped when anything but metadata and status changes
    generation: bool = False
    #: a PUT without metadata.resourceVersion is accepted (the registry's AllowUnconditionalUpdate)
    unconditional_update: bool = True
    #: DELETE answers the deleted object rather than a Status (the registry's ReturnDeletedObject)
    returns_deleted_object: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def group_resource(self) -> str:
        """``pods`` or ``leases.coordination.k8s.io``: how messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


_POD_FIELDS: Final = (
    "spec.hostNetwork",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS: Final = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
#: boolean fields select as "true" / "false", unset included (fmt.Sprint / strconv.FormatBool of a Go bool)
_BOOL_FIELDS: Final = frozenset({"spec.hostNetwork", "spec.unschedulable"})

# fmt: off
BUILTIN_RESOURCES: Final[tuple[ResourceType, ...]] = (
    ResourceType("", "v1", "pods", "Pod", True, ("status", "binding", "eviction"), ("po",), _POD_FIELDS,
                 generation=True, returns_deleted_object=True),
    ResourceType("", "v1", "nodes", "Node", False, ("status",), ("no",), ("spec.unschedulable",)),
    ResourceType("", "v1", "namespaces", "Namespace", False, ("status",), ("ns",), ("status.phase",),
                 returns_deleted_object=True),
    ResourceType("", "v1", "services", "Service", True, ("status",), ("svc",), returns_deleted_object=True),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True, ("status",), ("rc",),
                 generation=True),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, ("status",), ("pv",),
                 returns_deleted_object=True),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",), ("pvc",),
                 returns_deleted_object=True),
    ResourceType("", "v1", "events", "Event", True, (), ("ev",), _EVENT_FIELDS),
    ResourceType("", "v1", "endpoints", "Endpoints", True, (), ("ep",)),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("status",), ("rs",), generation=True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, ("status",), ("sts",), generation=True),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, (), ("sc",),
                 returns_deleted_object=True),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False,
                 returns_deleted_object=True, unconditional_update=False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False,
                 returns_deleted_object=True, unconditional_update=False),
    ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True,
                 unconditional_update=False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), ("pdb",),
                 generation=True, unconditional_update=False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, unconditional_update=False),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, (), ("pc",)),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, ("status",),
                 generation=True, unconditional_update=False, returns_deleted_object=True),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, (), generation=True,
                 unconditional_update=False, returns_deleted_object=True),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, (), generation=True,
                 unconditional_update=False, returns_deleted_object=True),
    ResourceType("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False, ("status",),
                 generation=True, unconditional_update=False),
    ResourceType("scheduling.kopf.dev", "v1alpha1", "schedulingpolicies", "SchedulingPolicy", False, ("status",),
                 ("schedpol",), custom=True, generation=True, unconditional_update=False),
)
# fmt: on


# --------------------------------------------------------------------------------------------
# Status bodies


def status_body(code: int, message: str, *, reason: str | None = None, details: Body | None = None) -> Body:
    """A metav1.Status of a failure, its keys in the real server's order."""
    body: Body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    body["reason"] = _REASONS.get(code, "") if reason is None else reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _success(code: int, details: Body | None = None) -> Body:
    body: Body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    else:
        body["code"] = code
    return body


class ApiError(Exception):
    """An answer other than success: carried out of the request's handler to become the response."""

    def __init__(self, body: Body, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.body = body
        self.headers = dict(headers or {})

    @property
    def code(self) -> int:
        return int(self.body["code"])


def _details(name: str, group: str, kind: str) -> Body:
    details: Body = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def bad_request(message: str) -> ApiError:
    return ApiError(status_body(400, message))


def _not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        status_body(404, f'{rt.group_resource} "{name}" not found', details=_details(name, rt.group, rt.plural))
    )


def _conflict(rt: ResourceType, name: str, why: str, *, resource: str | None = None) -> ApiError:
    """errors.NewConflict: ``Operation cannot be fulfilled on <resource> "<name>": <why>``."""
    res = resource or rt.plural
    qualified = f"{res}.{rt.group}" if rt.group else res
    return ApiError(
        status_body(
            409, f'Operation cannot be fulfilled on {qualified} "{name}": {why}', details=_details(name, rt.group, res)
        )
    )


def _precondition_failed(rt: ResourceType, obj: Body, what: str, wanted: str, actual: str) -> ApiError:
    """The storage layer's failed precondition, as InterpretUpdateError wraps it into a Conflict."""
    meta = obj["metadata"]
    key = "/".join(["/registry", rt.plural, *([meta["namespace"]] if rt.namespaced else []), meta["name"]])
    why = (
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
    )
    return _conflict(rt, meta["name"], why)


def _invalid(rt: ResourceType, name: str, field_path: str, detail: str, *, by_kind: bool = True) -> ApiError:
    """errors.NewInvalid with one cause; validation names the kind, the registry the resource."""
    what = rt.group_kind if by_kind else rt.group_resource
    details = _details(name, rt.group, rt.kind if by_kind else rt.plural)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": detail, "field": field_path}]
    return ApiError(status_body(422, f'{what} "{name}" is invalid: {field_path}: {detail}', details=details))


# --------------------------------------------------------------------------------------------
# Small helpers on raw objects


def _stamp(moment: _dt.datetime) -> str:
    """A time as the API writes it (RFC 3339, whole seconds, UTC)."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Body) -> Body:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    return meta


def _key(namespace: str | None, name: str) -> str:
    """The object's key below its resource's etcd prefix; lists are sorted by it and continue from it."""
    return f"/{namespace}/{name}" if namespace else f"/{name}"


def _direct_key(rt: ResourceType, name: str, namespace: str | None) -> str:
    """The key the direct store methods mean: "default" unless told, no namespace for cluster-scoped kinds."""
    return _key((namespace or "default") if rt.namespaced else None, name)


def _obj_key(obj: Body) -> str:
    meta = obj["metadata"]
    return _key(meta.get("namespace") or None, meta["name"])


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _field_value(obj: Body, label: str) -> str:
    """The value a field selector compares, as the kind's ToSelectableFields computes it."""
    if label == "source":  # an event's source component, else its reporting controller
        value = _lookup(obj, "source.component") or obj.get("reportingComponent")
    else:
        value = _lookup(obj, label)
    if label in _BOOL_FIELDS:
        return "true" if value else "false"
    return "" if value is None else str(value)


def _without_rv(obj: Body) -> Body:
    trimmed = dict(obj)
    trimmed["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return trimmed


def with_rv(obj: Body, rv: int) -> Body:
    copied = dict(obj)
    copied["metadata"] = {**obj["metadata"], "resourceVersion": str(rv)}
    return copied


def _spec_changed(old: Body, new: Body) -> bool:
    """Whether anything but metadata and status changed: what bumps metadata.generation."""
    skip = {"metadata", "status", "kind", "apiVersion"}
    return {k: v for k, v in old.items() if k not in skip} != {k: v for k, v in new.items() if k not in skip}


def _pod_ready(pod: Body) -> bool:
    conditions = _lookup(pod, "status.conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def _set_condition(status: Body, condition: Body, now: str) -> None:
    """podutil.UpdatePodCondition: replace the condition of that type, keep the transition time if its status holds."""
    conditions = status.setdefault("conditions", [])
    condition = {"lastProbeTime": None, "lastTransitionTime": now, **condition}
    for i, old in enumerate(conditions):
        if old.get("type") == condition["type"]:
            if old.get("status") == condition["status"] and old.get("lastTransitionTime"):
                condition["lastTransitionTime"] = old["lastTransitionTime"]
            conditions[i] = condition
            return
    conditions.append(condition)


# --------------------------------------------------------------------------------------------
# Selectors


@dataclass(frozen=True, slots=True)
class _Requirement:
    """One label requirement: op is one of = != in notin exists !exists."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # != and notin match an absent key too


_LABEL_TERM: Final = re.compile(
    r"""^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)\s*
        (?:(?P<op>==|=|!=|\s(?:in|notin)\s)\s*(?P<value>\([^()]*\)|[-A-Za-z0-9_.]*))?\s*$""",
    re.VERBOSE,
)


def _split_top_level(text: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def parse_label_selector(text: str) -> tuple[_Requirement, ...]:
    """``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, comma-joined (ANDed)."""
    if not text.strip():
        return ()
    requirements = []
    for term in _split_top_level(text):
        m = _LABEL_TERM.match(term)
        if not m or (m["neg"] and m["op"]):
            raise bad_request(f"unable to parse requirement: {term.strip()!r} is not a valid label selector term")
        op = (m["op"] or "").strip()
        if not op:
            requirements.append(_Requirement(m["key"], "!exists" if m["neg"] else "exists"))
        elif op in ("in", "notin"):
            value = m["value"] or ""
            if not value.startswith("("):
                raise bad_request(f"unable to parse requirement: found '{value}', expected: '('")
            values = frozenset(v.strip() for v in value[1:-1].split(",") if v.strip())
            requirements.append(_Requirement(m["key"], op, values))
        else:
            requirements.append(_Requirement(m["key"], "!=" if op == "!=" else "=", frozenset({m["value"] or ""})))
    return tuple(requirements)


def label_selector_from_object(selector: Body | None) -> tuple[_Requirement, ...] | None:
    """A metav1.LabelSelector (matchLabels, matchExpressions); None selects nothing, {} everything."""
    if selector is None:
        return None
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    requirements = [_Requirement(k, "=", frozenset({v})) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        requirements.append(_Requirement(expr["key"], ops[expr["operator"]], frozenset(expr.get("values") or ())))
    return tuple(requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], "", False
    for ch in text:
        if escaped:
            current += "\\" + ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def _unescape_field_value(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(text: str, rt: ResourceType) -> tuple[tuple[str, bool, str], ...]:
    """``label=value``, ``label==value``, ``label!=value``, comma-joined; (label, equal, value) each."""
    terms = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        label, op, value = m[1].strip(), m[2], _unescape_field_value(m[3])
        if label not in ("metadata.name", "metadata.namespace", *rt.field_labels):
            raise bad_request(f"field label not supported: {label}")
        terms.append((label, op != "!=", value))
    return tuple(terms)


@dataclass(frozen=True, slots=True)
class Filter:
    """What a list or watch selects: a namespace (or all), field and label requirements."""

    namespace: str | None
    fields: tuple[tuple[str, bool, str], ...] = ()
    labels: tuple[_Requirement, ...] = ()

    def matches(self, obj: Body) -> bool:
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if not all((_field_value(obj, label) == value) == equal for label, equal, value in self.fields):
            return False
        labels = meta.get("labels") or {}
        return all(r.matches(labels) for r in self.labels)

    @property
    def selects(self) -> bool:
        return bool(self.fields or self.labels)


# --------------------------------------------------------------------------------------------
# Patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


#: strategic merge: lists merged by a key (by path of map keys from the object's root) ...
_MERGE_KEYS: Final[Mapping[tuple[str, ...], str]] = {
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("metadata", "ownerReferences"): "uid",
    ("status", "reservedFor"): "uid",
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "containers", "env"): "name",
    ("spec", "containers", "ports"): "containerPort",
    ("spec", "containers", "volumeMounts"): "mountPath",
    ("spec", "template", "spec", "containers"): "name",
}
#: ... and lists of scalars merged as sets
_SET_LISTS: Final = frozenset({("metadata", "finalizers")})


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    """Enough of Kubernetes' strategic merge patch for built-in kinds (see ``_MERGE_KEYS``).

    Maps merge recursively and null deletes a key (as a merge patch); lists with a merge key merge
    element by element (``{"$patch": "delete", key: ...}`` removes one), set-lists union, other lists
    are replaced. ``$patch: replace|delete`` on a map, ``$deleteFromPrimitiveList/`` and
    ``$setElementOrder/`` (ignored) are understood.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [v for v in result.get(name) or [] if v not in value]
            continue
        sub = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and sub in _MERGE_KEYS:
            result[key] = _merge_list(result.get(key) or [], value, _MERGE_KEYS[sub], sub)
        elif isinstance(value, list) and sub in _SET_LISTS:
            merged = list(result.get(key) or [])
            result[key] = merged + [v for v in value if v not in merged]
        else:
            merged_value = strategic_merge_patch(result.get(key), value, sub)
            if merged_value is None:
                result.pop(key, None)
            else:
                result[key] = merged_value
    return result


def _merge_list(target: list[Any], patch: list[Any], merge_key: str, path: tuple[str, ...]) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = list(target)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next(
            (i for i, old in enumerate(result) if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strategic_merge_patch({}, item, path))
        else:
            result[index] = strategic_merge_patch(result[index], item, path)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test; ValueError when one cannot apply."""
    if not isinstance(operations, list):
        raise ValueError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)

    def parent(parts: list[str]) -> tuple[Any, str]:
        node = doc
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node, parts[-1]

    def get(path: str) -> Any:
        node = doc
        for part in _pointer(path):
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def remove(path: str) -> Any:
        container, last = parent(_pointer(path))
        return container.pop(int(last)) if isinstance(container, list) else container.pop(last)

    def add(path: str, value: Any) -> None:
        nonlocal doc
        parts = _pointer(path)
        if not parts:
            doc = value
            return
        container, last = parent(parts)
        if isinstance(container, list):
            container.insert(len(container) if last == "-" else int(last), value)
        else:
            container[last] = value

    try:
        for op in operations:
            kind, path = op["op"], op["path"]
            if kind == "add":
                add(path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                remove(path)
            elif kind == "replace":
                remove(path)
                add(path, copy.deepcopy(op["value"]))
            elif kind == "move":
                add(path, remove(op["from"]))
            elif kind == "copy":
                add(path, copy.deepcopy(get(op["from"])))
            elif kind == "test":
                if get(path) != op["value"]:
                    raise ValueError(f"testing value {path} failed")
            else:
                raise ValueError(f"unexpected kind: {kind}")
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"cannot apply the JSON patch: {exc!r}") from exc
    return doc


# --------------------------------------------------------------------------------------------
# Storage: objects, the global resourceVersion, the history of changes


@dataclass(frozen=True, slots=True)
class Change:
    """One write, as the watch cache keeps it: the object after it and before it."""

    rv: int
    resource: ResourceType
    type: str  # ADDED, MODIFIED or DELETED
    obj: Body  # DELETED: the last stored state, with the deletion's resourceVersion
    prev: Body | None


class Store:
    """Objects by resource and key, etcd's one revision counter, and a bounded history of changes."""

    def __init__(self, history_limit: int, changed: Callable[[Change], None] | None = None) -> None:
        self.rv = 1  # an empty etcd is at revision 1
        self.horizon = 0  # the oldest resourceVersion a watch or a continue token may start from
        self.history: deque[Change] = deque()
        self.history_limit = history_limit
        self.objects: dict[tuple[str, str, str], dict[str, Body]] = {}
        #: told of every change as it is stored (the HTTP server's watches)
        self.changed = changed

    def bucket(self, rt: ResourceType) -> dict[str, Body]:
        return self.objects.setdefault(rt.key, {})

    def write(self, rt: ResourceType, obj: Body) -> Body:
        """Store `obj` (the caller's, never mutated afterwards) at a new resourceVersion: ADDED or MODIFIED."""
        key = _obj_key(obj)
        prev = self.bucket(rt).get(key)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.bucket(rt)[key] = obj
        self._record(Change(self.rv, rt, "ADDED" if prev is None else "MODIFIED", obj, prev))
        return obj

    def remove(self, rt: ResourceType, key: str) -> Body:
        prev = self.bucket(rt).pop(key)
        self.rv += 1
        gone = with_rv(prev, self.rv)
        self._record(Change(self.rv, rt, "DELETED", gone, prev))
        return gone

    def _record(self, change: Change) -> None:
        self.history.append(change)
        while len(self.history) > self.history_limit:
            self.horizon = max(self.horizon, self.history.popleft().rv)
        if self.changed is not None:
            self.changed(change)

    def compact(self) -> None:
        self.history.clear()
        self.horizon = self.rv

    def snapshot(self, rt: ResourceType, rv: int) -> dict[str, Body] | None:
        """The objects of `rt` as they were at `rv` (None if the history no longer reaches back there)."""
        if rv < self.horizon:
            return None
        state = dict(self.bucket(rt))
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.resource.key != rt.key:
                continue
            key = _obj_key(change.obj)
            if change.prev is None:
                state.pop(key, None)
            else:
                state[key] = change.prev
        return state


# --------------------------------------------------------------------------------------------
# Request targets and their semantics


@dataclass(frozen=True, slots=True)
class Target:
    """What a request path names: a resource type, maybe a namespace, a name and a subresource."""

    rt: ResourceType
    namespace: str | None
    name: str | None = None
    subresource: str | None = None


def parse_int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"invalid {what}: {value!r}") from None


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise bad_request(f"invalid continue token: continue key is not valid: {exc}") from None


class KubeApi:
    """kube-apiserver's objects and the requests on them (see the module docstring).

    `changed` is told of every change as it is stored; `clock` stamps creation, deletion and condition
    times; `new_uid` names new objects; `rng` picks ``generateName`` suffixes, unless `name_suffix` is
    given: then it is asked for the five characters, with the resource and the object being created
    (its namespace set, its ``generateName`` whole).
    """

    def __init__(
        self,
        *,
        history_limit: int = 10_000,
        changed: Callable[[Change], None] | None = None,
        clock: Callable[[], _dt.datetime] = lambda: _dt.datetime.now(_dt.UTC),
        new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
        rng: random.Random | None = None,
        name_suffix: Callable[[ResourceType, Body], str] | None = None,
    ) -> None:
        self.store = Store(history_limit, changed)
        #: the served resource types by (group, version, plural)
        self.resources: dict[tuple[str, str, str], ResourceType] = {rt.key: rt for rt in BUILTIN_RESOURCES}
        self._clock = clock
        self._new_uid = new_uid
        self._rng = rng or random.Random()
        self._name_suffix = name_suffix
        self._last_stamp = (_dt.datetime.min, "")
        #: the group-versions a path was found under (resource types are only ever added)
        self._group_versions: set[tuple[str, str]] = set()

    def _now(self) -> str:
        moment = self._clock()
        if moment != self._last_stamp[0]:  # a simulation's clock stands still for many requests
            self._last_stamp = (moment, _stamp(moment))
        return self._last_stamp[1]

    # ---- resource types

    def register(
        self,
        group: str,
        version: str,
        plural: str,
        kind: str,
        *,
        namespaced: bool = True,
        subresources: tuple[str, ...] = ("status",),
        short_names: tuple[str, ...] = (),
    ) -> ResourceType:
        """Serve a custom resource (as an installed CRD would)."""
        rt = ResourceType(
            group,
            version,
            plural,
            kind,
            namespaced,
            subresources,
            short_names,
            custom=True,
            generation=True,
            unconditional_update=False,
        )
        self.resources[rt.key] = rt
        return rt

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        try:
            return self.resources[(group, version, plural)]
        except KeyError:
            raise KeyError(f"not a served resource: {group or 'core'}/{version} {plural}") from None

    # ---- direct store access (arrange and assert)

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion (etcd's revision)."""
        return str(self.store.rv)

    def add(self, group: str, version: str, plural: str, body: Body) -> Body:
        """Store a new object as given (no status reset); uid, resourceVersion, creationTimestamp are assigned."""
        rt = self.resource(group, version, plural)
        namespace = (_meta(body).get("namespace") or "default") if rt.namespaced else None
        obj = self._new_object(rt, copy.deepcopy(body), namespace)
        if _obj_key(obj) in self.store.bucket(rt):
            raise ValueError(f"{rt.group_resource} {_obj_key(obj)} already exists")
        return copy.deepcopy(self.store.write(rt, obj))

    def get(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> Body | None:
        """A copy of the object, or None; `namespace` defaults to "default" for namespaced kinds."""
        rt = self.resource(group, version, plural)
        obj = self.store.bucket(rt).get(_direct_key(rt, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def update(self, group: str, version: str, plural: str, body: Body) -> Body:
        """Replace an object as given, status included, whatever its resourceVersion (a MODIFIED event)."""
        rt = self.resource(group, version, plural)
        new = copy.deepcopy(body)
        meta = _meta(new)
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        old = self.store.bucket(rt).get(_obj_key(new))
        if old is None:
            raise KeyError(f"{rt.group_resource} {_obj_key(new)} does not exist")
        return copy.deepcopy(self._commit_update(rt, old, new))

    def delete(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> Body | None:
        """Remove an object now, finalizers and grace period notwithstanding (a kubelet's final delete)."""
        rt = self.resource(group, version, plural)
        key = _direct_key(rt, name, namespace)
        if key not in self.store.bucket(rt):
            return None
        return copy.deepcopy(self.store.remove(rt, key))

    def load(self, group: str, version: str, plural: str, body: Mapping[str, Any]) -> None:
        """Store an object as it was read elsewhere, creating or replacing (what a watch would bring): its
        uid and times are kept (a uid is assigned when it has none). `body` is shared, never written to."""
        rt = self.resource(group, version, plural)
        meta = dict(body.get("metadata") or {})
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not meta.get("uid"):
            meta["uid"] = self._new_uid()
        obj = {k: v for k, v in body.items() if k not in ("kind", "apiVersion", "metadata")}
        self.store.write(rt, {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta, **obj})

    def peek(
        self, group: str, version: str, plural: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        """The stored object itself (not to be written to), or None: ``get`` without the copy."""
        rt = self.resource(group, version, plural)
        return self.store.bucket(rt).get(_direct_key(rt, name, namespace))

    def objects(self, group: str, version: str, plural: str) -> list[Body]:
        rt = self.resource(group, version, plural)
        bucket = self.store.bucket(rt)
        return [copy.deepcopy(bucket[k]) for k in sorted(bucket)]

    def compact(self) -> None:
        """Forget the history up to now: older resourceVersions and continue tokens get 410 Expired."""
        self.store.compact()

    # ---- requests

    def answer(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> ApiResponse:
        """One request, carried out at once: `path` with its query, `body` parsed (or the wire's bytes).
        A watch is refused (it needs a stream: the HTTP server's); paths outside a served group-version
        answer the real server's plain-text 404."""
        where, _, raw_query = path.partition("?")
        query: dict[str, str] = {}
        for key, value in parse_qsl(raw_query, keep_blank_values=True):
            query.setdefault(key, value)
        target = self.target([p for p in where.split("/") if p])
        if target is None:
            return ApiResponse(404, "404 page not found\n")
        if not isinstance(target, Target):
            return ApiResponse(404, target)
        if method == "GET" and target.name is None and is_watch(query):
            return ApiResponse(
                400, status_body(400, "a watch needs a stream: this server answers one request at a time")
            )
        try:
            code, answered = self.serve(method, target, query, body, content_type)
        except ApiError as error:
            return ApiResponse(error.code, error.body)
        # a stored object is copied (the caller may write to it); a Status is made for this answer
        return ApiResponse(code, answered if answered.get("kind") == "Status" else copy.deepcopy(answered))

    def serve(
        self, method: str, target: Target, query: Mapping[str, str], body: Any, content_type: str
    ) -> tuple[int, Body]:
        """Carry out a request on `target`, a watch excepted: (HTTP status, body), or ``ApiError``. `body` is
        the request's bytes or its parsed JSON; the answer may be the stored object itself (copy it)."""
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        if name is None:
            if method == "GET":
                return 200, self.list_objects(rt, ns, query)
            if method == "POST" and (ns is not None or not rt.namespaced):
                return 201, self.create(rt, ns, _json_body(body))
            raise not_allowed()
        if sub in ("binding", "eviction"):
            if method != "POST" or ns is None:
                raise not_allowed()
            carry_out = self.bind if sub == "binding" else self.evict
            return 201, carry_out(ns, name, _json_body(body))
        if method == "GET":
            return 200, self.read(rt, ns, name)
        if method == "PUT":
            return 200, self.replace(rt, ns, name, _json_body(body), status_only=sub == "status")
        if method == "PATCH":
            return 200, self.patch(rt, ns, name, body, content_type, status_only=sub == "status")
        if method == "DELETE" and sub is None:
            options = _json_body(body) if body is not None and (not isinstance(body, bytes) or body.strip()) else {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = parse_int(query["gracePeriodSeconds"], "gracePeriodSeconds")
            return 200, self.delete_object(rt, ns, name, options)
        raise not_allowed()

    def target(self, parts: list[str]) -> Target | Body | None:
        """The target of a resource path; a Status 404 body under a served group-version; None elsewhere."""
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if (group, version) not in self._group_versions:
            if not any((g, v) == (group, version) for g, v, _ in self.resources):
                return None
            self._group_versions.add((group, version))
        found: Target | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt = self.resources.get((group, version, rest[2]))
            if rt is not None and rt.namespaced and len(rest) <= 5:
                found = Target(rt, rest[1], *rest[3:5])
        if found is None and rest:
            rt = self.resources.get((group, version, rest[0]))
            if rt is not None and len(rest) <= 3 and (len(rest) == 1 or not rt.namespaced):
                found = Target(rt, None, *rest[1:3])
        if found is None or (found.subresource is not None and found.subresource not in found.rt.subresources):
            return status_body(404, "the server could not find the requested resource", details={})
        return found

    def read(self, rt: ResourceType, ns: str | None, name: str) -> Body:
        obj = self.store.bucket(rt).get(_key(ns, name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def selection(self, rt: ResourceType, ns: str | None, query: Mapping[str, str]) -> Filter:
        return Filter(
            ns,
            parse_field_selector(query.get("fieldSelector", ""), rt),
            parse_label_selector(query.get("labelSelector", "")),
        )

    def list_objects(self, rt: ResourceType, ns: str | None, query: Mapping[str, str]) -> Body:
        """A list, paged by `limit` and `continue` over a consistent snapshot, as etcd serves it (at a
        resourceVersion not reached yet: 504, which the real server answers after waiting 3 s for it)."""
        selection = self.selection(rt, ns, query)
        limit = parse_int(query["limit"], "limit") if query.get("limit") else 0
        token = query.get("continue", "")
        requested_rv = query.get("resourceVersion", "")
        start = ""
        if token:
            if requested_rv:
                raise bad_request("specifying resource version is not allowed when using continue")
            rv, start = _decode_continue(token)
            start = f"/{ns}{start}" if ns else start  # the token's key is below the list's prefix
            if rv == -1:  # the token of an expired list: continue, inconsistently, at the latest
                rv = self.store.rv
        elif requested_rv and requested_rv != "0":
            rv = parse_int(requested_rv, "resource version")
            if rv > self.store.rv:
                details = {
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                }
                message = f"Timeout: Too large resource version: {rv}, current: {self.store.rv}"
                raise ApiError(status_body(504, message, details=details))
            if query.get("resourceVersionMatch") != "Exact":
                rv = self.store.rv
        else:
            rv = self.store.rv
        state = self.store.snapshot(rt, rv)
        if state is None:
            if token:
                body = status_body(410, _CONTINUE_EXPIRED)
                body["metadata"] = {"continue": _encode_continue(-1, start.removeprefix(f"/{ns}" if ns else ""))}
                raise ApiError(body)
            raise ApiError(status_body(410, f"too old resource version: {rv} ({self.store.horizon})"))
        keys = sorted(k for k in state if k >= start and selection.matches(state[k]))
        page = keys[:limit] if limit > 0 else keys
        metadata: Body = {"resourceVersion": str(rv)}
        if len(page) < len(keys):
            metadata["continue"] = _encode_continue(rv, page[-1].removeprefix(f"/{ns}" if ns else "") + "\x00")
            if not selection.selects:
                metadata["remainingItemCount"] = len(keys) - len(page)
        items = [{k: v for k, v in state[key].items() if k not in ("kind", "apiVersion")} for key in page]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": metadata, "items": items}

    # ---- writes

    def _new_object(self, rt: ResourceType, obj: Body, ns: str | None) -> Body:
        """Fill what the server assigns on create: namespace, name from generateName, uid, timestamps, generation."""
        meta = _meta(obj)
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = (
                self._name_suffix(rt, obj)
                if self._name_suffix is not None
                else "".join(self._rng.choices(_GENERATE_NAME_ALPHABET, k=5))
            )
            meta["name"] = str(meta["generateName"])[:_MAX_GENERATE_NAME] + suffix
        if not meta.get("name"):
            raise _invalid(rt, "", "metadata.name", "Required value: name or generateName is required")
        for field_name in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field_name, None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = self._now()
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        return {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")},
        }

    def create(self, rt: ResourceType, ns: str | None, body: Body) -> Body:
        meta = _meta(body)
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        obj = self._new_object(rt, body, ns)
        if rt.plural == "pods" and not rt.group:
            obj["status"] = {"phase": "Pending"}  # podStrategy.PrepareForCreate
        elif rt.custom and "status" in rt.subresources:
            obj.pop("status", None)
        if _obj_key(obj) in self.store.bucket(rt):
            name = obj["metadata"]["name"]
            message = f'{rt.group_resource} "{name}" already exists'
            raise ApiError(
                status_body(409, message, reason="AlreadyExists", details=_details(name, rt.group, rt.plural))
            )
        return self.store.write(rt, obj)

    def _commit_update(self, rt: ResourceType, old: Body, new: Body) -> Body:
        """Write `new` over `old`: system fields kept, generation bumped, no-ops skipped, pending deletions finished."""
        meta, old_meta = _meta(new), old["metadata"]
        new["kind"], new["apiVersion"] = rt.kind, rt.api_version
        for field_name in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if field_name in old_meta and field_name not in meta:
                meta[field_name] = old_meta[field_name]
        if rt.generation:
            meta["generation"] = old_meta.get("generation", 1) + (1 if _spec_changed(old, new) else 0)
        if _without_rv(new) == _without_rv(old):
            return old  # etcd writes nothing for a no-op update: same resourceVersion, no event
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds", 0) == 0
        ):
            # the update is not stored: the DELETED event carries the last stored state, the answer the update
            gone = self.store.remove(rt, _obj_key(old))
            return with_rv(new, int(gone["metadata"]["resourceVersion"]))
        return self.store.write(rt, new)

    def replace(self, rt: ResourceType, ns: str | None, name: str, body: Body, *, status_only: bool) -> Body:
        old = self.read(rt, ns, name)
        meta = _meta(body)
        if meta.get("name") != name:
            raise bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
            raise _precondition_failed(rt, old, "UID", meta["uid"], old["metadata"]["uid"])
        rv = meta.get("resourceVersion")
        if not rv and not rt.unconditional_update:
            raise _invalid(
                rt, name, "metadata.resourceVersion", "Invalid value: 0: must be specified for an update", by_kind=False
            )
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(rt, name, _MODIFIED)
        new = self._scoped(rt, old, copy.deepcopy(body), status_only=status_only)
        if rt.namespaced:
            new["metadata"]["namespace"] = ns
        else:
            new["metadata"].pop("namespace", None)
        return self._commit_update(rt, old, new)

    @staticmethod
    def _scoped(rt: ResourceType, old: Body, new: Body, *, status_only: bool) -> Body:
        """A status write changes only .status; a main write leaves .status alone where status is a subresource."""
        if status_only:
            scoped = copy.deepcopy(old)
            if "status" in new:
                scoped["status"] = new["status"]
            else:
                scoped.pop("status", None)
            return scoped
        if "status" in rt.subresources:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    def patch(
        self, rt: ResourceType, ns: str | None, name: str, body: Any, content_type: str, *, status_only: bool
    ) -> Body:
        """PATCH by `content_type`'s kind of patch; `body` is the wire's bytes or the parsed patch."""
        accepted = ["application/json-patch+json", "application/merge-patch+json"]
        if not rt.custom:
            accepted.append("application/strategic-merge-patch+json")
        if content_type not in accepted:
            listed = ", ".join(accepted)
            raise ApiError(
                status_body(
                    415, f"the body of the request was in an unknown format - accepted media types include: {listed}"
                )
            )
        old = self.read(rt, ns, name)
        patch = body
        if isinstance(body, bytes | str):
            try:
                patch = json.loads(body)
            except ValueError as exc:
                raise bad_request(f"error decoding patch: {exc}") from None
        if content_type == "application/json-patch+json":
            try:
                patched = json_patch(old, patch)
            except ValueError as exc:
                raise ApiError(status_body(422, str(exc))) from None
        elif not isinstance(patch, dict):
            raise bad_request("the patch is not a JSON object")
        elif content_type == "application/merge-patch+json":
            patched = merge_patch(old, patch)
        else:
            patched = strategic_merge_patch(old, patch)
        if not isinstance(patched, dict):
            raise bad_request("the patched object is not a JSON object")
        patched = copy.deepcopy(patched)
        meta, old_meta = _meta(patched), old["metadata"]
        if meta.get("uid", old_meta["uid"]) != old_meta["uid"]:
            raise _invalid(rt, name, "metadata.uid", f'Invalid value: "{meta["uid"]}": field is immutable')
        if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != ns):
            raise bad_request("the name or namespace of the object cannot be changed by a patch")
        if meta.get("resourceVersion", old_meta["resourceVersion"]) != old_meta["resourceVersion"]:
            raise _conflict(rt, name, _MODIFIED)
        return self._commit_update(rt, old, self._scoped(rt, old, patched, status_only=status_only))

    def delete_object(self, rt: ResourceType, ns: str | None, name: str, options: Body) -> Body:
        """DELETE: preconditions, then graceful (pods), pending (finalizers) or immediate deletion."""
        old = self.read(rt, ns, name)
        old_meta = old["metadata"]
        preconditions = options.get("preconditions") or {}
        kind_resource = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
        for what, field_name, tail in (
            ("UID", "uid", "deleted and then recreated"),
            ("ResourceVersion", "resourceVersion", "modified"),
        ):
            wanted = preconditions.get(field_name)
            if wanted is not None and wanted != old_meta.get(field_name):
                why = (
                    f"the {what} in the precondition ({wanted}) does not match the {what} in record "
                    f"({old_meta.get(field_name)}). The object might have been {tail}"
                )
                raise ApiError(
                    status_body(
                        409,
                        f'Operation cannot be fulfilled on {kind_resource} "{name}": {why}',
                        details=_details(name, rt.group, rt.kind),
                    )
                )
        is_pod = rt.plural == "pods" and not rt.group
        if is_pod or old_meta.get("finalizers"):
            grace = 0
            if is_pod:
                terminal = (old.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                default = old.get("spec", {}).get("terminationGracePeriodSeconds", 30)
                grace = (
                    0
                    if terminal or not old.get("spec", {}).get("nodeName")
                    else int(options.get("gracePeriodSeconds", default))
                )
            if not old_meta.get("deletionTimestamp") or grace < old_meta.get("deletionGracePeriodSeconds", 0):
                marked = copy.deepcopy(old)
                stamp = self._clock() + _dt.timedelta(seconds=grace)
                marked["metadata"]["deletionTimestamp"] = _stamp(stamp)
                marked["metadata"]["deletionGracePeriodSeconds"] = grace
                if rt.generation and not old_meta.get("deletionTimestamp"):
                    marked["metadata"]["generation"] = old_meta.get("generation", 1) + 1
                old = self.store.write(rt, marked)
            if old["metadata"].get("finalizers") or old["metadata"].get("deletionGracePeriodSeconds", 0) > 0:
                return old  # pending: 200 with the object, whatever the kind
        gone = self.store.remove(rt, _obj_key(old))
        if rt.returns_deleted_object:
            return gone
        return _success(200, {**_details(name, rt.group, rt.plural), "uid": old_meta["uid"]})

    # ---- pods' subresources

    def bind(self, ns: str, name: str, binding: Body) -> Body:
        """pods/binding, as the pod registry's BindingREST: preconditions, unassigned, then nodeName + PodScheduled."""
        pods = self.resources[("", "v1", "pods")]
        meta = _meta(binding)
        if meta.get("name") != name:
            raise bad_request("name in URL does not match name in Binding object")
        target = binding.get("target") or {}
        problems = []
        if target.get("kind") not in (None, "", "Node"):
            problems.append(f'target.kind: Unsupported value: "{target["kind"]}": supported values: "Node", "<empty>"')
        if not target.get("name"):
            problems.append("target.name: Required value")
        if problems:  # ValidatePodBinding's errors are no API status: the server answers them as an unknown 500
            message = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            raise ApiError({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "code": 500})  # fmt: skip
        pod = self.read(pods, ns, name)
        pod_meta = pod["metadata"]
        if meta.get("uid") and meta["uid"] != pod_meta["uid"]:
            raise _precondition_failed(pods, pod, "UID", meta["uid"], pod_meta["uid"])
        if meta.get("resourceVersion") and meta["resourceVersion"] != pod_meta["resourceVersion"]:
            raise _precondition_failed(
                pods, pod, "ResourceVersion", meta["resourceVersion"], pod_meta["resourceVersion"]
            )
        spec = pod.get("spec") or {}
        if pod_meta.get("deletionTimestamp"):
            raise _conflict(
                pods, name, f"pod {name} is being deleted, cannot be assigned to a host", resource="pods/binding"
            )
        if spec.get("nodeName"):
            raise _conflict(
                pods, name, f'pod {name} is already assigned to node "{spec["nodeName"]}"', resource="pods/binding"
            )
        if spec.get("schedulingGates"):
            raise _conflict(pods, name, f"pod {name} has non-empty .spec.schedulingGates", resource="pods/binding")
        # new dicts for what a binding changes, the rest shared with the stored pod (never written in place)
        bound_meta = dict(pod_meta)
        for field_name in ("annotations", "labels"):
            if meta.get(field_name):
                bound_meta[field_name] = {**(pod_meta.get(field_name) or {}), **meta[field_name]}
        status = {k: v for k, v in (pod.get("status") or {}).items() if k != "nominatedNodeName"}
        status["conditions"] = list(status.get("conditions") or [])
        _set_condition(status, {"type": "PodScheduled", "status": "True"}, self._now())
        bound = {**pod, "metadata": bound_meta, "spec": {**spec, "nodeName": target["name"]}, "status": status}
        self.store.write(pods, bound)
        return _success(201)

    def evict(self, ns: str, name: str, eviction: Body) -> Body:
        """pods/eviction, as the pod registry's EvictionREST: the one matching PDB must allow a disruption."""
        pods = self.resources[("", "v1", "pods")]
        if _meta(eviction).get("name") != name:
            raise bad_request("name in URL does not match name in Eviction object")
        pod = self.read(pods, ns, name)
        options = dict(eviction.get("deleteOptions") or {})
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            return self._delete_evicted(pods, pod, options)
        pdbs_rt = self.resources[("policy", "v1", "poddisruptionbudgets")]
        labels = pod["metadata"].get("labels") or {}
        pdbs = []
        for pdb in self.store.bucket(pdbs_rt).values():
            selector = label_selector_from_object((pdb.get("spec") or {}).get("selector"))
            if (
                pdb["metadata"].get("namespace") == ns
                and selector is not None
                and all(r.matches(labels) for r in selector)
            ):
                pdbs.append(pdb)
        if len(pdbs) > 1:
            # a Status without a reason, as the real one
            message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            raise ApiError(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": message,
                    "code": 500,
                }
            )
        if pdbs:
            pdb = pdbs[0]
            st = pdb.get("status") or {}
            unhealthy_ok = not _pod_ready(pod) and (
                (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                or 0 < st.get("desiredHealthy", 0) <= st.get("currentHealthy", 0)
            )
            if not unhealthy_ok:
                self._take_disruption(pdbs_rt, pdb, name)
        return self._delete_evicted(pods, pod, options)

    def _take_disruption(self, rt: ResourceType, pdb: Body, pod_name: str) -> None:
        """checkAndDecrement: 429 when the budget allows no disruption, else one fewer and the pod noted."""
        pdb_name, st = pdb["metadata"]["name"], pdb.get("status") or {}
        cause = "DisruptionBudget"
        message = "Cannot evict pod as it would violate the pod's disruption budget."
        if st.get("observedGeneration", 0) < pdb["metadata"].get("generation", 0):
            causes = [
                {
                    "reason": cause,
                    "message": f"The disruption budget {pdb_name} is still being processed by the server.",
                }
            ]
            raise ApiError(
                status_body(429, message, details={"causes": causes, "retryAfterSeconds": 10}),
                headers={"Retry-After": "10"},
            )
        allowed = st.get("disruptionsAllowed", 0)
        if allowed < 0:
            causes = [
                {
                    "reason": cause,
                    "message": f"The disruption budget {pdb_name} does not allow evicting pods currently: "
                    "pdb disruptions allowed is negative",
                }
            ]
            text = f'poddisruptionbudget.policy "{pdb_name}" is forbidden: pdb disruptions allowed is negative'
            raise ApiError(
                status_body(
                    403, text, details={**_details(pdb_name, "policy", "poddisruptionbudget"), "causes": causes}
                )
            )
        if allowed == 0:
            desired, current = st.get("desiredHealthy", 0), st.get("currentHealthy", 0)
            why = (
                f"The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
                if current <= desired
                else f"The disruption budget {pdb_name} does not allow evicting pods currently"
            )
            raise ApiError(status_body(429, message, details={"causes": [{"reason": cause, "message": why}]}))
        updated = copy.deepcopy(pdb)
        updated["status"] = {
            **st,
            "disruptionsAllowed": allowed - 1,
            "disruptedPods": {**st.get("disruptedPods", {}), pod_name: self._now()},
        }
        self._commit_update(rt, pdb, updated)

    def _delete_evicted(self, pods: ResourceType, pod: Body, options: Body) -> Body:
        """addConditionAndDeletePod: a DisruptionTarget condition, then DELETE with the eviction's options."""
        marked = copy.deepcopy(pod)
        _set_condition(
            marked.setdefault("status", {}),
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            },
            self._now(),
        )
        updated = self._commit_update(pods, pod, marked)
        preconditions = options.get("preconditions") or {}
        if preconditions.get("resourceVersion") == pod["metadata"]["resourceVersion"]:
            options = {
                **options,
                "preconditions": {**preconditions, "resourceVersion": updated["metadata"]["resourceVersion"]},
            }
        meta = pod["metadata"]
        self.delete_object(pods, meta["namespace"], meta["name"], options)
        return _success(201)


WATCH_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go's strconv.ParseBool


def is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch", "") in WATCH_TRUE


def not_allowed() -> ApiError:
    return ApiError(status_body(405, "the server does not allow this method on the requested resource"))


def _json_body(raw: Any) -> Body:
    """A request's body: the wire's bytes (decoded here) or JSON already parsed; an object, or 400."""
    if isinstance(raw, bytes | str):
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
    else:
        body = raw
    if not isinstance(body, dict):
        raise bad_request("the request body is not a JSON object")
    return body
