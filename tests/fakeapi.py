"""An in-process fake of kube-apiserver that speaks its wire format, for unit tests of the operator's edge.

``FakeApiServer`` listens on 127.0.0.1 (plain HTTP, a free port) inside the test's event loop, so a
client that works against it works against the real server: discovery, list (``limit``/``continue``,
field and label selectors, consistent snapshots), watch (replay from a resourceVersion, synthetic
ADDED events when none is given, bookmarks, ``timeoutSeconds``, 410 inside the stream), create,
replace, merge / strategic-merge / JSON patch, delete (finalizers, pods' graceful deletion), the
``status`` subresource, ``pods/binding`` and ``pods/eviction``, with the real Status bodies and
messages. It was checked against kube-apiserver v1.37.2 (its source in the Go module cache, the
cacher's ``convertToWatchEvent`` and ``nextBookmarkTime``, the generic registry, the pod registry,
and the binary itself on loopback). Where the behaviour is surprising, the real one won:

- a watch without a resourceVersion, or with "0", starts with an ADDED event per existing object;
- a no-op write keeps the resourceVersion and sends no event (etcd skips it);
- deleting a pod marks it first (MODIFIED with ``deletionTimestamp``): an unbound pod is then
  deleted at once, a bound one stays until its kubelet would finish (here: ``delete()``), as does
  an object with finalizers until they are removed;
- a ``metadata.uid`` in a PATCH body that differs is 422 "field is immutable"; the uid of a PUT
  body, a Binding or DeleteOptions.preconditions is the 409 Conflict precondition;
- DELETE answers the object for the kinds whose registry says so (pods, services, namespaces,
  PVs, PVCs, storage classes, CSINodes), otherwise a Status with ``details``;
- paths outside any served group-version answer a plain-text "404 page not found".

One resourceVersion counter serves every kind (etcd's revision); a bounded history of changes
(``history_limit``) serves watch replays and the snapshots of paged lists; ``compact()`` forgets it.
Bookmarks carry the latest revision every ``bookmark_interval`` and 2 s before a watch's deadline,
as on a real cluster, whose revision always moves (its own Leases); a quiet real server with
nothing written since the watch began sends at most one.

Faults to inject: ``stall_watches`` / ``stall_connections`` (silence, not closure), ``drop_watches``,
``cut_watches`` (a chunk cut short, a reset, an idle close by a middlebox), ``lose_answers`` (the
request is carried out, then its answer is reset or cut short), ``compact``, ``fail``, ``delay``,
``require_token``; ``requests`` records what clients sent.

Limits: no admission (a namespace need not exist), no validation or defaulting beyond uid,
resourceVersion, creationTimestamp and generation (pods created through the API get
``status: {phase: Pending}``, custom resources lose the status they were created with), no
managedFields or server-side apply, no garbage collection or controllers, no deletecollection,
no aggregated discovery (clients fall back to the legacy documents), no TLS, no authentication
beyond the optional bearer token, no authorization. Strategic merge patch knows the merge keys of
the fields a scheduler writes (conditions by ``type``, containers and volumes by ``name``,
``metadata.finalizers`` as a set...); other lists are replaced.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import copy
import datetime as _dt
import json
import random
import re
import socket
import struct
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from aiohttp import web

__all__ = ["BUILTIN_RESOURCES", "FakeApiServer", "RecordedRequest", "ResourceType"]

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

#: messages of injected failures (``fail`` without a body), as the real server words them
_FAILURE_MESSAGES: Final[Mapping[int, str]] = {
    410: "The resourceVersion for the provided list is too old.",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request",
    504: "Timeout: request did not complete within the allotted timeout",
}

# apiserver/pkg/storage/etcd3/errors.go: the message of a continue token older than the compaction
_CONTINUE_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without "
    "the continue parameter, or use the continue token in this response to retrieve the remainder of the results. "
    "Continuing with the provided token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)
_MODIFIED: Final = "the object has been modified; please apply your changes to the latest version and try again"
_WATCH_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go's strconv.ParseBool
_DEFAULT_WATCH_TIMEOUT: Final = 1800.0  # the real server picks 30 to 60 minutes when no timeoutSeconds is given
_PRE_TIMEOUT_BOOKMARK: Final = 2.0  # cacher: the last bookmark goes 2 s before the watch's deadline
_TOO_LARGE_RV_WAIT: Final = 3.0  # a list at a resourceVersion the server has not reached waits this long, then 504
_GENERATE_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand, 5 characters
_ALL_VERBS: Final = ("create", "delete", "get", "list", "patch", "update", "watch")


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
                 generation=True, unconditional_update=False),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, (), generation=True,
                 unconditional_update=False),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, (), generation=True,
                 unconditional_update=False),
    ResourceType("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False, ("status",),
                 generation=True, unconditional_update=False),
    ResourceType("scheduling.kopf.dev", "v1alpha1", "schedulingpolicies", "SchedulingPolicy", False, ("status",),
                 ("schedpol",), custom=True, generation=True, unconditional_update=False),
)
# fmt: on


#: GET /version: the release this fake was checked against
_VERSION: Final[Body] = {
    "major": "1", "minor": "37", "emulationMajor": "1", "emulationMinor": "37", "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36", "gitVersion": "v1.37.2", "gitCommit": "fakeapi", "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64",
}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Status bodies


def _status(code: int, message: str, *, reason: str | None = None, details: Body | None = None) -> Body:
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


class _ApiError(Exception):
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


def _bad_request(message: str) -> _ApiError:
    return _ApiError(_status(400, message))


def _not_found(rt: ResourceType, name: str) -> _ApiError:
    return _ApiError(
        _status(404, f'{rt.group_resource} "{name}" not found', details=_details(name, rt.group, rt.plural))
    )


def _conflict(rt: ResourceType, name: str, why: str, *, resource: str | None = None) -> _ApiError:
    """errors.NewConflict: ``Operation cannot be fulfilled on <resource> "<name>": <why>``."""
    res = resource or rt.plural
    qualified = f"{res}.{rt.group}" if rt.group else res
    return _ApiError(
        _status(
            409, f'Operation cannot be fulfilled on {qualified} "{name}": {why}', details=_details(name, rt.group, res)
        )
    )


def _precondition_failed(rt: ResourceType, obj: Body, what: str, wanted: str, actual: str) -> _ApiError:
    """The storage layer's failed precondition, as InterpretUpdateError wraps it into a Conflict."""
    meta = obj["metadata"]
    key = "/".join(["/registry", rt.plural, *([meta["namespace"]] if rt.namespaced else []), meta["name"]])
    why = (
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
    )
    return _conflict(rt, meta["name"], why)


def _invalid(rt: ResourceType, name: str, field_path: str, detail: str, *, by_kind: bool = True) -> _ApiError:
    """errors.NewInvalid with one cause; validation names the kind, the registry the resource."""
    what = rt.group_kind if by_kind else rt.group_resource
    details = _details(name, rt.group, rt.kind if by_kind else rt.plural)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": detail, "field": field_path}]
    return _ApiError(_status(422, f'{what} "{name}" is invalid: {field_path}: {detail}', details=details))


# --------------------------------------------------------------------------------------------
# Small helpers on raw objects


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Body) -> Body:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise _bad_request("metadata must be an object")
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


def _with_rv(obj: Body, rv: int) -> Body:
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


def _set_condition(status: Body, condition: Body) -> None:
    """podutil.UpdatePodCondition: replace the condition of that type, keep the transition time if its status holds."""
    conditions = status.setdefault("conditions", [])
    condition = {"lastProbeTime": None, "lastTransitionTime": _now(), **condition}
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
            raise _bad_request(f"unable to parse requirement: {term.strip()!r} is not a valid label selector term")
        op = (m["op"] or "").strip()
        if not op:
            requirements.append(_Requirement(m["key"], "!exists" if m["neg"] else "exists"))
        elif op in ("in", "notin"):
            value = m["value"] or ""
            if not value.startswith("("):
                raise _bad_request(f"unable to parse requirement: found '{value}', expected: '('")
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
            raise _bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        label, op, value = m[1].strip(), m[2], _unescape_field_value(m[3])
        if label not in ("metadata.name", "metadata.namespace", *rt.field_labels):
            raise _bad_request(f"field label not supported: {label}")
        terms.append((label, op != "!=", value))
    return tuple(terms)


@dataclass(frozen=True, slots=True)
class _Filter:
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
# Storage: objects, the global resourceVersion, the history of changes, the watchers


@dataclass(frozen=True, slots=True)
class _Change:
    """One write, as the watch cache keeps it: the object after it and before it."""

    rv: int
    resource: ResourceType
    type: str  # ADDED, MODIFIED or DELETED
    obj: Body  # DELETED: the last stored state, with the deletion's resourceVersion
    prev: Body | None


class _Watcher:
    """One watch stream's pending events, converted by the cacher's rule as the changes happen."""

    def __init__(self, rt: ResourceType, selection: _Filter, start_rv: int) -> None:
        self.rt = rt
        self.selection = selection
        self.start_rv = start_rv
        self.pending: deque[Body] = deque()
        self.wake = asyncio.Event()
        self.dropped = False
        self.transport: asyncio.Transport | None = None

    def offer(self, change: _Change) -> None:
        """The cacher's convertToWatchEvent: starts matching -> ADDED, keeps matching -> MODIFIED,
        stops matching -> DELETED with the old content and the new resourceVersion."""
        if change.resource.key != self.rt.key or change.rv <= self.start_rv:
            return
        now_matches = change.type != "DELETED" and self.selection.matches(change.obj)
        was_matching = change.prev is not None and self.selection.matches(change.prev)
        if now_matches:
            self.push({"type": "MODIFIED" if was_matching else "ADDED", "object": change.obj})
        elif was_matching and change.prev is not None:
            self.push({"type": "DELETED", "object": _with_rv(change.prev, change.rv)})

    def push(self, event: Body) -> None:
        self.pending.append(event)
        self.wake.set()


class _Store:
    """Objects by resource and key, etcd's one revision counter, and a bounded history of changes."""

    def __init__(self, history_limit: int) -> None:
        self.rv = 1  # an empty etcd is at revision 1
        self.horizon = 0  # the oldest resourceVersion a watch or a continue token may start from
        self.history: deque[_Change] = deque()
        self.history_limit = history_limit
        self.objects: dict[tuple[str, str, str], dict[str, Body]] = {}
        self.watchers: set[_Watcher] = set()
        self.changed = asyncio.Event()

    def bucket(self, rt: ResourceType) -> dict[str, Body]:
        return self.objects.setdefault(rt.key, {})

    def write(self, rt: ResourceType, obj: Body) -> Body:
        """Store `obj` (the caller's, never mutated afterwards) at a new resourceVersion: ADDED or MODIFIED."""
        key = _obj_key(obj)
        prev = self.bucket(rt).get(key)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.bucket(rt)[key] = obj
        self._record(_Change(self.rv, rt, "ADDED" if prev is None else "MODIFIED", obj, prev))
        return obj

    def remove(self, rt: ResourceType, key: str) -> Body:
        prev = self.bucket(rt).pop(key)
        self.rv += 1
        gone = _with_rv(prev, self.rv)
        self._record(_Change(self.rv, rt, "DELETED", gone, prev))
        return gone

    def _record(self, change: _Change) -> None:
        self.history.append(change)
        while len(self.history) > self.history_limit:
            self.horizon = max(self.horizon, self.history.popleft().rv)
        for watcher in self.watchers:
            watcher.offer(change)
        self.changed.set()
        self.changed = asyncio.Event()

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

    async def reach(self, rv: int, timeout: float) -> bool:
        """Wait until the store is at `rv` or later (a list at a future resourceVersion waits, then fails)."""
        deadline = time.monotonic() + timeout
        while self.rv < rv:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)
        return True


# --------------------------------------------------------------------------------------------
# Faults and records


@dataclass(slots=True)
class RecordedRequest:
    """A request as the server received it; ``status`` is None until it is answered."""

    time: float  # time.monotonic() at arrival
    method: str
    path: str
    query: dict[str, str]
    body: Any  # the parsed JSON body, or None
    headers: dict[str, str]  # names in canonical case: User-Agent, Authorization...
    status: int | None = None


@dataclass(slots=True)
class _Rule:
    method: str
    path: re.Pattern[str]
    watch: bool | None
    status: int = 0
    times: int = 0
    body: Body | None = None
    seconds: float = 0.0
    #: ``lose_answers``: "reset" (no answer), "truncated" (half of it, then the connection closes)
    lost: str = ""

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            self.method in ("*", method)
            and self.path.search(path) is not None
            and (self.watch is None or self.watch == watch)
        )


_RECORD: Final = web.RequestKey("fakeapi.record", RecordedRequest)


def _canonical_header(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


# --------------------------------------------------------------------------------------------
# Request targets


@dataclass(frozen=True, slots=True)
class _Target:
    """What a request path names: a resource type, maybe a namespace, a name and a subresource."""

    rt: ResourceType
    namespace: str | None
    name: str | None = None
    subresource: str | None = None


def _is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch", "") in _WATCH_TRUE


def _parse_int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _bad_request(f"invalid {what}: {value!r}") from None


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise _bad_request(f"invalid continue token: continue key is not valid: {exc}") from None


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close a connection with a TCP RST (SO_LINGER 0), as a crashed peer or a middlebox does."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error_response(error: _ApiError) -> web.Response:
    return _json_response(error.body, error.code, error.headers)


# --------------------------------------------------------------------------------------------
# The server


class FakeApiServer:
    """kube-apiserver's wire behaviour on 127.0.0.1:<free port>, with faults to inject; see the module docstring.

    Use as ``async with FakeApiServer() as server:``; arrange and assert with ``add``, ``get``,
    ``update``, ``delete``, ``objects`` (they make the same watch events as API writes) and
    ``requests``. Every method is called from the event loop the server runs on.
    """

    def __init__(self, *, bookmark_interval: float = 60.0, history_limit: int = 10_000) -> None:
        self.bookmark_interval = bookmark_interval
        self.requests: list[RecordedRequest] = []
        self._store = _Store(history_limit)
        self._resources: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN_RESOURCES:
            self._add_resource(rt)
        self._watches_flowing = asyncio.Event()
        self._watches_flowing.set()
        self._connections_flowing = asyncio.Event()
        self._connections_flowing.set()
        self._failures: list[_Rule] = []
        self._delays: list[_Rule] = []
        self._token: str | None = None
        self._in_flight: dict[asyncio.Transport, set[asyncio.Task[Any]]] = {}
        self._runner: web.AppRunner | None = None
        self._port = 0

    # ---- lifecycle

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen on a free port, or again on the port it had (after ``stop``: a server back from an outage)."""
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._route)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Close every connection (hung, stalled or streaming) and stop listening: new connections are
        refused until ``start`` (the objects and their history are kept, as etcd keeps them)."""
        if self._runner is None:
            return
        for transport, tasks in list(self._in_flight.items()):
            transport.abort()
            for task in tasks:
                task.cancel()
        await self._runner.cleanup()
        self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    def kubeconfig(self, path: str | Path, token: str = "t") -> Path:
        """Write a kubeconfig for this server (a static bearer token user); JSON, which is YAML too."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fakeapi", "cluster": {"server": self.url}}],
            "users": [{"name": "fakeapi", "user": {"token": token}}],
            "contexts": [
                {"name": "fakeapi", "context": {"cluster": "fakeapi", "user": "fakeapi", "namespace": "default"}}
            ],
            "current-context": "fakeapi",
        }
        target = Path(path)
        target.write_text(json.dumps(config, indent=2))
        return target

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
        self._add_resource(rt)
        return rt

    def _add_resource(self, rt: ResourceType) -> None:
        self._resources[rt.key] = rt

    def _resource(self, group: str, version: str, plural: str) -> ResourceType:
        try:
            return self._resources[(group, version, plural)]
        except KeyError:
            raise KeyError(f"not a served resource: {group or 'core'}/{version} {plural}") from None

    # ---- direct store access (arrange and assert)

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion (etcd's revision)."""
        return str(self._store.rv)

    def add(self, group: str, version: str, plural: str, body: Body) -> Body:
        """Store a new object as given (no status reset); uid, resourceVersion, creationTimestamp are assigned."""
        rt = self._resource(group, version, plural)
        namespace = (_meta(body).get("namespace") or "default") if rt.namespaced else None
        obj = self._new_object(rt, copy.deepcopy(body), namespace)
        if _obj_key(obj) in self._store.bucket(rt):
            raise ValueError(f"{rt.group_resource} {_obj_key(obj)} already exists")
        return copy.deepcopy(self._store.write(rt, obj))

    def get(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> Body | None:
        """A copy of the object, or None; `namespace` defaults to "default" for namespaced kinds."""
        rt = self._resource(group, version, plural)
        obj = self._store.bucket(rt).get(_direct_key(rt, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    def update(self, group: str, version: str, plural: str, body: Body) -> Body:
        """Replace an object as given, status included, whatever its resourceVersion (a MODIFIED event)."""
        rt = self._resource(group, version, plural)
        new = copy.deepcopy(body)
        meta = _meta(new)
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        old = self._store.bucket(rt).get(_obj_key(new))
        if old is None:
            raise KeyError(f"{rt.group_resource} {_obj_key(new)} does not exist")
        return copy.deepcopy(self._commit_update(rt, old, new))

    def delete(self, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> Body | None:
        """Remove an object now, finalizers and grace period notwithstanding (a kubelet's final delete)."""
        rt = self._resource(group, version, plural)
        key = _direct_key(rt, name, namespace)
        if key not in self._store.bucket(rt):
            return None
        return copy.deepcopy(self._store.remove(rt, key))

    def objects(self, group: str, version: str, plural: str) -> list[Body]:
        rt = self._resource(group, version, plural)
        bucket = self._store.bucket(rt)
        return [copy.deepcopy(bucket[k]) for k in sorted(bucket)]

    # ---- faults

    def stall_watches(self) -> None:
        """Every watch stream, open or new, sends nothing (events are withheld, in order) until resumed."""
        self._watches_flowing.clear()

    def resume_watches(self) -> None:
        self._watches_flowing.set()
        self._wake_watchers()

    def stall_connections(self) -> None:
        """Every request, on existing or new connections, hangs unanswered until resumed; streams go silent."""
        self._connections_flowing.clear()

    def resume_connections(self) -> None:
        self._connections_flowing.set()
        self._wake_watchers()

    def drop_watches(self) -> int:
        """Close every open watch connection abruptly (no terminating chunk); returns how many."""
        watchers = list(self._store.watchers)
        for watcher in watchers:
            watcher.dropped = True
            watcher.pending.clear()
            self._store.watchers.discard(watcher)
            if watcher.transport is not None:
                watcher.transport.abort()
            watcher.wake.set()
        return len(watchers)

    def cut_watches(self, how: str) -> int:
        """End every open watch connection as a flaky network does; returns how many. `how`:
        "truncated" (a chunk announced in full but sent in part, then the connection closes: the client
        reads "not enough data to satisfy transfer length"), "reset" (a TCP RST) or "closed" (a clean
        close without the terminating chunk: what a load balancer does to a connection it finds idle)."""
        if how not in ("truncated", "reset", "closed"):
            raise ValueError(f"unknown cut {how!r}")
        watchers = list(self._store.watchers)
        for watcher in watchers:
            watcher.dropped = True
            watcher.pending.clear()
            self._store.watchers.discard(watcher)
            transport = watcher.transport
            if transport is not None and not transport.is_closing():
                if how == "truncated":
                    event = {"type": "BOOKMARK", "object": self._bookmark(watcher.rt, self._store.rv)}
                    data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
                    transport.write(b"%x\r\n" % len(data) + data[: len(data) // 2])
                    transport.close()
                elif how == "reset":
                    _reset(transport)
                else:
                    transport.close()
            watcher.wake.set()
        return len(watchers)

    def lose_answers(
        self, method: str, path_regex: str, times: int = 1, *, truncated: bool = False, watch: bool | None = False
    ) -> None:
        """The next `times` matching requests are carried out, but their answer is lost: the connection is
        reset before it (a write that landed and a client that cannot know), or, `truncated`, half of it
        arrives and the connection closes (a body cut short: a client reads "not enough data")."""
        rule = _Rule(
            method.upper(), re.compile(path_regex), watch, times=times, lost="truncated" if truncated else "reset"
        )
        self._failures.append(rule)

    def compact(self) -> None:
        """Forget the history up to now: older resourceVersions and continue tokens get 410 Expired."""
        self._store.compact()

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        body: Body | None = None,
        *,
        watch: bool | None = None,
    ) -> None:
        """The next `times` requests whose path matches answer `status` (a Status body unless `body` is given).

        `method` may be "*"; `watch` restricts the rule to watches (True) or to the rest (False).
        """
        self._failures.append(
            _Rule(method.upper(), re.compile(path_regex), watch, status=status, times=times, body=body)
        )

    def delay(self, method: str, path_regex: str, seconds: float, *, watch: bool | None = None) -> None:
        """Requests whose path matches wait `seconds` before being served (until ``clear_faults``)."""
        self._delays.append(_Rule(method.upper(), re.compile(path_regex), watch, seconds=seconds))

    def clear_faults(self) -> None:
        """Forget injected failures and delays; resume stalled watches and connections."""
        self._failures.clear()
        self._delays.clear()
        self.resume_watches()
        self.resume_connections()

    def require_token(self, token: str | None) -> None:
        """Answer 401 to requests without ``Authorization: Bearer <token>`` (None: accept anything)."""
        self._token = token

    # ---- the HTTP edge

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Record, then apply the faults in the order a real path would meet them, then serve."""
        raw = await request.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        record = RecordedRequest(
            time.monotonic(),
            request.method,
            request.path,
            dict(request.query),
            parsed,
            {_canonical_header(k): v for k, v in request.headers.items()},
        )
        self.requests.append(record)
        request[_RECORD] = record  # a watch sets its status once its headers are out
        transport = request.transport
        task = asyncio.current_task()
        if transport is not None and task is not None:
            self._in_flight.setdefault(transport, set()).add(task)
        try:
            response = await self._serve(request, handler)
        finally:
            if transport is not None and task is not None:
                tasks = self._in_flight.get(transport, set())
                tasks.discard(task)
                if not tasks:
                    self._in_flight.pop(transport, None)
        record.status = response.status
        return response

    async def _serve(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        await self._connections_flowing.wait()
        if self._token is not None and request.headers.get("Authorization") != f"Bearer {self._token}":
            return _json_response(_status(401, "Unauthorized"), 401)
        watch = _is_watch(request.query)
        for rule in self._delays:
            if rule.matches(request.method, request.path, watch):
                await asyncio.sleep(rule.seconds)
        for rule in self._failures:
            if rule.matches(request.method, request.path, watch):
                rule.times -= 1
                if rule.times <= 0:
                    self._failures.remove(rule)
                if rule.lost:
                    return await self._lose_answer(request, handler, rule.lost)
                return self._injected_failure(rule)
        try:
            return await handler(request)
        except _ApiError as error:
            return _error_response(error)

    @staticmethod
    async def _lose_answer(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]], how: str
    ) -> web.StreamResponse:
        """Carry the request out, then lose its answer (see ``lose_answers``)."""
        try:
            response = await handler(request)
        except _ApiError as error:
            response = _error_response(error)
        transport = request.transport
        if transport is None or transport.is_closing():
            return response
        body = response.body if isinstance(response, web.Response) and isinstance(response.body, bytes) else b""
        if how == "truncated":
            head = (
                f"HTTP/1.1 {response.status} {response.reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            transport.write(head.encode() + body[: len(body) // 2])
            transport.close()
        else:
            _reset(transport)
        return response  # aiohttp drops what is written to a closed transport

    @staticmethod
    def _injected_failure(rule: _Rule) -> web.Response:
        headers = {"Retry-After": "1"} if rule.status == 429 else {}
        if rule.body is not None:
            return _json_response(rule.body, rule.status, headers)
        details = {"retryAfterSeconds": 1} if rule.status == 429 else None
        message = _FAILURE_MESSAGES.get(rule.status, f"injected failure {rule.status}")
        return _json_response(_status(rule.status, message, details=details), rule.status, headers)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        """Discovery documents, or a resource target and its method."""
        parts = [p for p in request.path.split("/") if p]
        discovery = self._discovery(parts)
        if discovery is not None:
            return _json_response(discovery) if request.method == "GET" else self._not_allowed()
        target = self._target(parts)
        if target is None:
            return web.Response(status=404, text="404 page not found\n")
        body = await request.read()
        return await self._dispatch(request, target, body)

    def _discovery(self, parts: list[str]) -> Body | None:
        groups: dict[str, list[str]] = {}
        for group, version, _ in self._resources:
            if group and version not in groups.setdefault(group, []):
                groups[group].append(version)
        match parts:
            case ["version"]:
                return _VERSION
            case ["api"]:
                return {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self._port}"}
                    ],
                }
            case ["api", "v1"]:
                return {"kind": "APIResourceList", "groupVersion": "v1", "resources": self._resource_entries("", "v1")}
            case ["apis"]:
                return {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [_group_entry(g, vs) for g, vs in groups.items()],
                }
            case ["apis", group] if group in groups:
                return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, groups[group])}
            case ["apis", group, version] if version in groups.get(group, []):
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}",
                    "resources": self._resource_entries(group, version),
                }
        return None

    def _resource_entries(self, group: str, version: str) -> list[Body]:
        entries: list[Body] = []
        for rt in self._resources.values():
            if (rt.group, rt.version) != (group, version):
                continue
            entry: Body = {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_ALL_VERBS),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            entries.append(entry)
            for sub in rt.subresources:
                sub_entry: Body = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
                if sub == "binding":
                    sub_entry.update(kind="Binding", verbs=["create"])
                elif sub == "eviction":
                    sub_entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
                else:
                    sub_entry.update(kind=rt.kind, verbs=["get", "patch", "update"])
                entries.append(sub_entry)
        return entries

    def _target(self, parts: list[str]) -> _Target | Body | None:
        """The target of a resource path; a Status 404 body under a served group-version; None elsewhere."""
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not any((g, v) == (group, version) for g, v, _ in self._resources):
            return None
        unknown: Body = _status(404, "the server could not find the requested resource", details={})
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt = self._resources.get((group, version, rest[2]))
            if rt is not None and rt.namespaced and len(rest) <= 5:
                return self._checked(_Target(rt, rest[1], *rest[3:5]), unknown)
        if rest:
            rt = self._resources.get((group, version, rest[0]))
            if rt is not None and len(rest) <= 3 and (len(rest) == 1 or not rt.namespaced):
                return self._checked(_Target(rt, None, *rest[1:3]), unknown)
        return unknown

    @staticmethod
    def _checked(target: _Target, unknown: Body) -> _Target | Body:
        if target.subresource is not None and target.subresource not in target.rt.subresources:
            return unknown
        return target

    @staticmethod
    def _not_allowed() -> web.Response:
        return _json_response(_status(405, "the server does not allow this method on the requested resource"), 405)

    async def _dispatch(self, request: web.Request, target: _Target | Body, raw: bytes) -> web.StreamResponse:
        if not isinstance(target, _Target):
            return _json_response(target, 404)
        method, rt, ns, name, sub = request.method, target.rt, target.namespace, target.name, target.subresource
        query: Mapping[str, str] = request.query
        if name is None:
            if method == "GET":
                if _is_watch(query):
                    return await self._watch(request, rt, ns, query)
                return _json_response(await self._list(rt, ns, query))
            if method == "POST" and (ns is not None or not rt.namespaced):
                return _json_response(self._create(rt, ns, _json_body(raw)), 201)
            return self._not_allowed()
        if sub == "binding":
            if method != "POST" or ns is None:
                return self._not_allowed()
            return _json_response(self._bind(ns, name, _json_body(raw)), 201)
        if sub == "eviction":
            if method != "POST" or ns is None:
                return self._not_allowed()
            return _json_response(self._evict(ns, name, _json_body(raw)), 201)
        if method == "GET":
            return _json_response(self._existing(rt, ns, name))
        if method == "PUT":
            return _json_response(self._replace(rt, ns, name, _json_body(raw), status_only=sub == "status"))
        if method == "PATCH":
            patched = self._patch(rt, ns, name, raw, request.content_type, status_only=sub == "status")
            return _json_response(patched)
        if method == "DELETE" and sub is None:
            options = _json_body(raw) if raw.strip() else {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = _parse_int(query["gracePeriodSeconds"], "gracePeriodSeconds")
            return _json_response(self._delete(rt, ns, name, options))
        return self._not_allowed()

    # ---- reads

    def _existing(self, rt: ResourceType, ns: str | None, name: str) -> Body:
        obj = self._store.bucket(rt).get(_key(ns, name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def _selection(self, rt: ResourceType, ns: str | None, query: Mapping[str, str]) -> _Filter:
        return _Filter(
            ns,
            parse_field_selector(query.get("fieldSelector", ""), rt),
            parse_label_selector(query.get("labelSelector", "")),
        )

    async def _list(self, rt: ResourceType, ns: str | None, query: Mapping[str, str]) -> Body:
        """A list, paged by `limit` and `continue` over a consistent snapshot, as etcd serves it."""
        selection = self._selection(rt, ns, query)
        limit = _parse_int(query["limit"], "limit") if query.get("limit") else 0
        token = query.get("continue", "")
        requested_rv = query.get("resourceVersion", "")
        start = ""
        if token:
            if requested_rv:
                raise _bad_request("specifying resource version is not allowed when using continue")
            rv, start = _decode_continue(token)
            start = f"/{ns}{start}" if ns else start  # the token's key is below the list's prefix
            if rv == -1:  # the token of an expired list: continue, inconsistently, at the latest
                rv = self._store.rv
        elif requested_rv and requested_rv != "0":
            rv = _parse_int(requested_rv, "resource version")
            if rv > self._store.rv and not await self._store.reach(rv, _TOO_LARGE_RV_WAIT):
                details = {
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                }
                message = f"Timeout: Too large resource version: {rv}, current: {self._store.rv}"
                raise _ApiError(_status(504, message, details=details))
            if query.get("resourceVersionMatch") != "Exact":
                rv = self._store.rv
        else:
            rv = self._store.rv
        state = self._store.snapshot(rt, rv)
        if state is None:
            if token:
                body = _status(410, _CONTINUE_EXPIRED)
                body["metadata"] = {"continue": _encode_continue(-1, start.removeprefix(f"/{ns}" if ns else ""))}
                raise _ApiError(body)
            raise _ApiError(_status(410, f"too old resource version: {rv} ({self._store.horizon})"))
        keys = sorted(k for k in state if k >= start and selection.matches(state[k]))
        page = keys[:limit] if limit > 0 else keys
        metadata: Body = {"resourceVersion": str(rv)}
        if len(page) < len(keys):
            metadata["continue"] = _encode_continue(rv, page[-1].removeprefix(f"/{ns}" if ns else "") + "\x00")
            if not selection.selects:
                metadata["remainingItemCount"] = len(keys) - len(page)
        items = [{k: v for k, v in state[key].items() if k not in ("kind", "apiVersion")} for key in page]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": metadata, "items": items}

    # ---- watches

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None, query: Mapping[str, str]
    ) -> web.StreamResponse:
        """A chunked stream of events: replayed after a resourceVersion, or the current state as ADDED, then live."""
        selection = self._selection(rt, ns, query)
        bookmarks = query.get("allowWatchBookmarks", "") in _WATCH_TRUE
        timeout = (
            float(_parse_int(query["timeoutSeconds"], "timeoutSeconds"))
            if query.get("timeoutSeconds")
            else _DEFAULT_WATCH_TIMEOUT
        )
        initial = self._initial_events_wanted(query, bookmarks)
        requested_rv = query.get("resourceVersion", "")
        if requested_rv not in ("", "0"):
            start_rv = _parse_int(requested_rv, "resource version")
        else:
            start_rv = self._store.rv
            if initial is None:
                initial = True  # no resourceVersion or "0": "Get State and Start at Most Recent"
        watcher = _Watcher(rt, selection, start_rv)
        if start_rv < self._store.horizon:
            message = f"too old resource version: {start_rv} ({self._store.horizon})"
            watcher.push({"type": "ERROR", "object": _status(410, message)})
            watcher.dropped = True  # ends the stream after the error, cleanly
        else:
            if initial:
                # no await between this snapshot and the registration below: nothing can fall in between
                start_rv = max(start_rv, self._store.rv)
                watcher.start_rv = start_rv
                bucket = self._store.bucket(rt)
                for key in sorted(bucket):
                    if selection.matches(bucket[key]):
                        watcher.push({"type": "ADDED", "object": bucket[key]})
                if query.get("sendInitialEvents", "") in _WATCH_TRUE:
                    annotations = {"k8s.io/initial-events-end": "true"}
                    watcher.push({"type": "BOOKMARK", "object": self._bookmark(rt, start_rv, annotations)})
            else:
                for change in self._store.history:
                    watcher.offer(change)
            self._store.watchers.add(watcher)
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        )
        response.enable_chunked_encoding()
        watcher.transport = request.transport
        try:
            await response.prepare(request)
            request[_RECORD].status = response.status
            await self._stream(watcher, response, timeout, bookmarks)
            if request.transport is not None and not request.transport.is_closing():
                await response.write_eof()  # the terminating chunk: a clean end
        except ConnectionResetError:
            pass  # dropped (drop_watches) or the client went away
        finally:
            self._store.watchers.discard(watcher)
        return response

    def _initial_events_wanted(self, query: Mapping[str, str], bookmarks: bool) -> bool | None:
        """sendInitialEvents, validated as the real server does (it needs bookmarks and NotOlderThan)."""
        if "sendInitialEvents" not in query:
            return None
        if not bookmarks:
            raise _ApiError(
                _status(
                    422,
                    'ListOptions.meta.k8s.io "" is invalid: allowWatchBookmarks: Forbidden: '
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                )
            )
        if query.get("resourceVersionMatch") != "NotOlderThan":
            raise _ApiError(
                _status(
                    422,
                    'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        return query["sendInitialEvents"] in _WATCH_TRUE

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, annotations: Mapping[str, str] | None = None) -> Body:
        metadata: Body = {"resourceVersion": str(rv)}
        if annotations:
            metadata["annotations"] = dict(annotations)
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": metadata}

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """cacher's nextBookmarkTime: every interval, the last one 2 s before the deadline, none after it."""
        at = min(now + self.bookmark_interval, deadline - _PRE_TIMEOUT_BOOKMARK)
        return None if at < now else at

    async def _stream(self, watcher: _Watcher, response: web.StreamResponse, timeout: float, bookmarks: bool) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = self._next_bookmark(loop.time(), deadline) if bookmarks else None
        while not watcher.dropped or watcher.pending:
            if not self._flowing:
                watcher.wake.clear()
                await watcher.wake.wait()  # set by new events (withheld), a resume or a drop
                continue
            if watcher.pending:
                await response.write(json.dumps(watcher.pending.popleft(), separators=(",", ":")).encode() + b"\n")
                continue
            now = loop.time()
            if now >= deadline:
                return
            if next_bookmark is not None and now >= next_bookmark:
                if self._store.rv >= watcher.start_rv:
                    bookmark = {"type": "BOOKMARK", "object": self._bookmark(watcher.rt, self._store.rv)}
                    await response.write(json.dumps(bookmark, separators=(",", ":")).encode() + b"\n")
                next_bookmark = self._next_bookmark(loop.time(), deadline)
                continue
            watcher.wake.clear()
            wake_at = deadline if next_bookmark is None else min(deadline, next_bookmark)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.wake.wait(), wake_at - now)

    @property
    def _flowing(self) -> bool:
        """Whether watch streams may send: neither the watches nor the connections are stalled."""
        return self._watches_flowing.is_set() and self._connections_flowing.is_set()

    def _wake_watchers(self) -> None:
        for watcher in self._store.watchers:
            watcher.wake.set()

    # ---- writes

    def _new_object(self, rt: ResourceType, obj: Body, ns: str | None) -> Body:
        """Fill what the server assigns on create: namespace, name from generateName, uid, timestamps, generation."""
        meta = _meta(obj)
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_NAME_ALPHABET, k=5))
        if not meta.get("name"):
            raise _invalid(rt, "", "metadata.name", "Required value: name or generateName is required")
        for field_name in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field_name, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        return {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")},
        }

    def _create(self, rt: ResourceType, ns: str | None, body: Body) -> Body:
        meta = _meta(body)
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise _bad_request("the namespace of the provided object does not match the namespace sent on the request")
        obj = self._new_object(rt, body, ns)
        if rt.plural == "pods" and not rt.group:
            obj["status"] = {"phase": "Pending"}  # podStrategy.PrepareForCreate
        elif rt.custom and "status" in rt.subresources:
            obj.pop("status", None)
        if _obj_key(obj) in self._store.bucket(rt):
            name = obj["metadata"]["name"]
            message = f'{rt.group_resource} "{name}" already exists'
            raise _ApiError(_status(409, message, reason="AlreadyExists", details=_details(name, rt.group, rt.plural)))
        return self._store.write(rt, obj)

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
            gone = self._store.remove(rt, _obj_key(old))
            return _with_rv(new, int(gone["metadata"]["resourceVersion"]))
        return self._store.write(rt, new)

    def _replace(self, rt: ResourceType, ns: str | None, name: str, body: Body, *, status_only: bool) -> Body:
        old = self._existing(rt, ns, name)
        meta = _meta(body)
        if meta.get("name") != name:
            raise _bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise _bad_request("the namespace of the provided object does not match the namespace sent on the request")
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

    def _patch(
        self, rt: ResourceType, ns: str | None, name: str, raw: bytes, content_type: str, *, status_only: bool
    ) -> Body:
        accepted = ["application/json-patch+json", "application/merge-patch+json"]
        if not rt.custom:
            accepted.append("application/strategic-merge-patch+json")
        if content_type not in accepted:
            listed = ", ".join(accepted)
            raise _ApiError(
                _status(
                    415, f"the body of the request was in an unknown format - accepted media types include: {listed}"
                )
            )
        old = self._existing(rt, ns, name)
        try:
            patch = json.loads(raw)
        except ValueError as exc:
            raise _bad_request(f"error decoding patch: {exc}") from None
        if content_type == "application/json-patch+json":
            try:
                patched = json_patch(old, patch)
            except ValueError as exc:
                raise _ApiError(_status(422, str(exc))) from None
        elif not isinstance(patch, dict):
            raise _bad_request("the patch is not a JSON object")
        elif content_type == "application/merge-patch+json":
            patched = merge_patch(old, patch)
        else:
            patched = strategic_merge_patch(old, patch)
        if not isinstance(patched, dict):
            raise _bad_request("the patched object is not a JSON object")
        patched = copy.deepcopy(patched)
        meta, old_meta = _meta(patched), old["metadata"]
        if meta.get("uid", old_meta["uid"]) != old_meta["uid"]:
            raise _invalid(rt, name, "metadata.uid", f'Invalid value: "{meta["uid"]}": field is immutable')
        if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != ns):
            raise _bad_request("the name or namespace of the object cannot be changed by a patch")
        if meta.get("resourceVersion", old_meta["resourceVersion"]) != old_meta["resourceVersion"]:
            raise _conflict(rt, name, _MODIFIED)
        return self._commit_update(rt, old, self._scoped(rt, old, patched, status_only=status_only))

    def _delete(self, rt: ResourceType, ns: str | None, name: str, options: Body) -> Body:
        """DELETE: preconditions, then graceful (pods), pending (finalizers) or immediate deletion."""
        old = self._existing(rt, ns, name)
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
                raise _ApiError(
                    _status(
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
                stamp = _dt.datetime.now(_dt.UTC) + _dt.timedelta(seconds=grace)
                marked["metadata"]["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
                marked["metadata"]["deletionGracePeriodSeconds"] = grace
                if rt.generation and not old_meta.get("deletionTimestamp"):
                    marked["metadata"]["generation"] = old_meta.get("generation", 1) + 1
                old = self._store.write(rt, marked)
            if old["metadata"].get("finalizers") or old["metadata"].get("deletionGracePeriodSeconds", 0) > 0:
                return old  # pending: 200 with the object, whatever the kind
        gone = self._store.remove(rt, _obj_key(old))
        if rt.returns_deleted_object:
            return gone
        return _success(200, {**_details(name, rt.group, rt.plural), "uid": old_meta["uid"]})

    # ---- pods' subresources

    def _bind(self, ns: str, name: str, binding: Body) -> Body:
        """pods/binding, as the pod registry's BindingREST: preconditions, unassigned, then nodeName + PodScheduled."""
        pods = self._resources[("", "v1", "pods")]
        meta = _meta(binding)
        if meta.get("name") != name:
            raise _bad_request("name in URL does not match name in Binding object")
        pod = self._existing(pods, ns, name)
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
        bound = copy.deepcopy(pod)
        bound.setdefault("spec", {})["nodeName"] = (binding.get("target") or {}).get("name", "")
        if meta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        if meta.get("labels"):
            bound["metadata"].setdefault("labels", {}).update(meta["labels"])
        status = bound.setdefault("status", {})
        status.pop("nominatedNodeName", None)
        _set_condition(status, {"type": "PodScheduled", "status": "True"})
        self._store.write(pods, bound)
        return _success(201)

    def _evict(self, ns: str, name: str, eviction: Body) -> Body:
        """pods/eviction, as the pod registry's EvictionREST: the one matching PDB must allow a disruption."""
        pods = self._resources[("", "v1", "pods")]
        if _meta(eviction).get("name") != name:
            raise _bad_request("name in URL does not match name in Eviction object")
        pod = self._existing(pods, ns, name)
        options = dict(eviction.get("deleteOptions") or {})
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            return self._delete_evicted(pods, pod, options)
        pdbs_rt = self._resources[("policy", "v1", "poddisruptionbudgets")]
        labels = pod["metadata"].get("labels") or {}
        pdbs = []
        for pdb in self._store.bucket(pdbs_rt).values():
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
            raise _ApiError(
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
            raise _ApiError(
                _status(429, message, details={"causes": causes, "retryAfterSeconds": 10}),
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
            raise _ApiError(
                _status(403, text, details={**_details(pdb_name, "policy", "poddisruptionbudget"), "causes": causes})
            )
        if allowed == 0:
            desired, current = st.get("desiredHealthy", 0), st.get("currentHealthy", 0)
            why = (
                f"The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
                if current <= desired
                else f"The disruption budget {pdb_name} does not allow evicting pods currently"
            )
            raise _ApiError(_status(429, message, details={"causes": [{"reason": cause, "message": why}]}))
        updated = copy.deepcopy(pdb)
        updated["status"] = {
            **st,
            "disruptionsAllowed": allowed - 1,
            "disruptedPods": {**st.get("disruptedPods", {}), pod_name: _now()},
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
        )
        updated = self._commit_update(pods, pod, marked)
        preconditions = options.get("preconditions") or {}
        if preconditions.get("resourceVersion") == pod["metadata"]["resourceVersion"]:
            options = {
                **options,
                "preconditions": {**preconditions, "resourceVersion": updated["metadata"]["resourceVersion"]},
            }
        meta = pod["metadata"]
        self._delete(pods, meta["namespace"], meta["name"], options)
        return _success(201)


def _group_entry(group: str, versions: Iterable[str]) -> Body:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def _json_body(raw: bytes) -> Body:
    try:
        body = json.loads(raw) if raw else None
    except ValueError as exc:
        raise _bad_request(f"couldn't get version/kind; json parse error: {exc}") from None
    if not isinstance(body, dict):
        raise _bad_request("the request body is not a JSON object")
    return body
