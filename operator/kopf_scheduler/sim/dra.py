"""``simulate``'s side of DynamicResources: the ``resource.k8s.io/v1`` objects of the cluster file, the
claims' API server, and the resourceclaim controller's part.

- ``load_dra_object``: a DeviceClass, ResourceSlice, ResourceClaim or ResourceClaimTemplate document
  into ``ClusterObjects.dra`` (the tracker the cycle reads). A claim written without ``uid`` or
  ``resourceVersion`` gets them, as the API server would give them. ``admit_claims`` refuses a claim
  the API server would refuse (admin access outside a namespace labelled for it).
- ``ClaimServer``: ``GET``, ``PUT`` (the object, or its ``status``) and strategic-merge ``PATCH`` of
  ``status`` for the claims PreBind, Unreserve and PostFilter write, with resourceVersion conflicts
  (409) as kube-apiserver answers them; ``POST`` of a claim with ``generateName`` (the claim PreBind
  creates for a pod's extended resources: the name's five-character suffix derived from the pod's
  uid, so runs repeat), the strategic-merge ``PATCH`` that removes its finalizer, and ``DELETE``
  (a claim with finalizers is only marked deleted). Each write reaches the tracker as its watch
  would (``on_change``: the simulator routes it, so the queue's hints see it).
- ``load_dra_object`` also takes DeviceTaintRules (``DraTracker.patched_slices`` applies them).
- ``stamp_claims``: for a pod whose ``spec.resourceClaims`` names a template, the claim the
  resourceclaim controller creates (``pkg/controller/resourceclaim/controller.go``: generateName
  ``<pod>-<claim>-`` both truncated proportionally to 57 characters, five characters of suffix (here
  derived from the pod's uid, so runs repeat), owned by the pod, annotated with the pod claim's
  name), recorded in the pod's ``status.resourceClaimStatuses``. A template that does not exist
  creates nothing: the pod waits (``ResourceClaim not created yet``), as in a cluster.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..core.dra import parsing as dra_parsing
from ..core.dra.extended import SPECIAL_CLAIM_NAME
from ..core.dra.objects import DeviceTaintRule, ResourceClaim, ResourceClaimTemplate
from ..core.dra.tracker import DraTracker
from ..core.framework.snapshot import ClusterObjects
from ..core.model.objects import Pod, PodClaims
from ..core.model.parsing import ObjectError
from ..core.plugins.dynamic_resources import admin_access_forbidden

__all__ = ["ClaimServer", "admin_claims_refused", "admit_claims", "devices_of", "load_dra_object", "stamp_claims"]

_PARSERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = {
    "DeviceClass": dra_parsing.parse_device_class,
    "ResourceSlice": dra_parsing.parse_resource_slice,
    "ResourceClaim": dra_parsing.parse_resource_claim,
    "ResourceClaimTemplate": dra_parsing.parse_resource_claim_template,
    "DeviceTaintRule": dra_parsing.parse_device_taint_rule,
}
_CLAIM: Final = re.compile(
    r"^/apis/resource\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/resourceclaims(?:/(?P<name>[^/?]+)(?:/(?P<sub>status))?)?$"
)
#: the API server's longest ``generateName`` prefix (63 less the 5 random characters)
_MAX_GENERATE_NAME: Final = 58
#: the API server's random-name alphabet (k8s.io/apimachinery/pkg/util/rand)
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
#: the annotation the resourceclaim controller puts on a generated claim
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"


def load_dra_object(kind: str, doc: Mapping[str, Any], objs: ClusterObjects) -> bool:
    """Store a ``resource.k8s.io`` document in `objs.dra`; False for another kind. Raises ``ObjectError``."""
    parse = _PARSERS.get(kind)
    if parse is None:
        return False
    if kind == "ResourceClaim":
        doc = _as_created(doc)
    obj = parse(doc)
    tracker = objs.dra
    if isinstance(obj, ResourceClaim):
        tracker.set_claim(obj)
    elif isinstance(obj, ResourceClaimTemplate):
        tracker.set_template(obj)
    elif isinstance(obj, DeviceTaintRule):
        tracker.set_taint_rule(obj)
    elif kind == "DeviceClass":
        tracker.set_class(obj)
    else:
        tracker.set_slice(obj)
    return True


def _as_created(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A claim document with the ``uid`` and ``resourceVersion`` the API server gives every object."""
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or (meta.get("uid") and meta.get("resourceVersion")):
        return doc
    ns, name = meta.get("namespace") or "default", meta.get("name") or ""
    filled = {"uid": f"resourceclaim/{ns}/{name}", "resourceVersion": "1", **meta, "namespace": ns}
    return {**doc, "metadata": filled}


def admin_claims_refused(objs: ClusterObjects) -> list[str]:
    """The claims the API server would refuse for admin access (``admit_claims`` raises for the first)."""
    out = []
    for claim in objs.dra.claims.values():
        problem = admin_access_forbidden(claim, objs.namespace_labels.get(claim.namespace, {}))
        if problem is not None:
            out.append(f"resourceclaim {claim.key}: {problem}")
    return out


def admit_claims(objs: ClusterObjects) -> None:
    """Raise ``ObjectError`` for a claim the API server would have refused (once every namespace is read)."""
    refused = admin_claims_refused(objs)
    if refused:
        raise ObjectError(refused[0])


# --------------------------------------------------------------------------- the claims' API server


def _not_found(name: str) -> tuple[int, str]:
    return 404, f'resourceclaims.resource.k8s.io "{name}" not found'


def _conflict(name: str) -> tuple[int, str]:
    return 409, (
        f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


class ClaimServer:
    """The claims of the simulated cluster, as kube-apiserver serves them (see the module docstring)."""

    def __init__(self, tracker: DraTracker, on_change: Callable[[str, ResourceClaim | None], None]) -> None:
        self._tracker = tracker
        self._on_change = on_change

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any] | None:
        """(status, body or message), or None for a path that is not a claim's."""
        m = _CLAIM.match(path)
        if m is None:
            return None
        ns, name, sub = m["ns"], m["name"], m["sub"]
        if name is None:
            if method != "POST" or not isinstance(body, Mapping):
                return 405, f"the simulation answers POST of claims only: {method} {path}"
            return self._create(ns, body)
        current = self._tracker.claims.get(f"{ns}/{name}")
        if current is None or current.source is None:
            return _not_found(name)
        found = copy.deepcopy(dict(current.source))
        if method == "GET":
            return 200, found
        if method == "DELETE" and sub is None:
            return self._delete(current, found)
        if not isinstance(body, Mapping):
            return 400, f"{method} {path}: expected a ResourceClaim"
        meta = found.get("metadata") or {}
        given = body.get("metadata") or {}
        if given.get("uid") and given["uid"] != meta.get("uid"):
            return (
                409,
                f"Precondition failed: UID in precondition: {given['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if method == "PUT":
            if str(given.get("resourceVersion") or "") != str(meta.get("resourceVersion") or ""):
                return _conflict(name)
            if sub == "status":
                found["status"] = copy.deepcopy(dict(body.get("status") or {}))
            else:  # an update of the object leaves its status alone
                found = {**copy.deepcopy(dict(body)), "status": found.get("status") or {}}
        elif method == "PATCH" and sub == "status":
            found["status"] = _merge_status(found.get("status") or {}, body.get("status") or {})
        elif method == "PATCH" and set(body) == {"metadata"}:
            patched = _merge_metadata(meta, body["metadata"])
            if patched is None:
                return 422, f"the simulation patches a claim's finalizers only: {body}"
            found["metadata"] = patched
        else:
            return 405, f"the simulation answers GET, PUT and PATCH of claims' status: {method} {path}"
        return self._store(current, found)

    def _store(self, current: ResourceClaim | None, body: dict[str, Any], code: int = 200) -> tuple[int, Any]:
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = str(int(current.resource_version or "0") + 1) if current is not None else "1"
        body["metadata"] = meta
        if not body.get("status"):
            body.pop("status", None)
        try:
            claim = dra_parsing.parse_resource_claim(body)
        except ObjectError as exc:
            return 422, str(exc)
        if claim.deleting and not claim.finalizers:  # the last finalizer of a deleted claim went: it goes
            self._on_change(claim.key, None)
        else:
            self._on_change(claim.key, claim)
        return code, copy.deepcopy(body)

    def _create(self, ns: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        meta = dict(body.get("metadata") or {})
        name = str(meta.get("name") or "")
        if not name:
            prefix = str(meta.get("generateName") or "")
            if not prefix:
                return 422, "metadata.name: Required value: name or generateName is required"
            owner = next((str(o.get("uid")) for o in meta.get("ownerReferences") or () if isinstance(o, Mapping)), "")
            name = _generate(prefix, f"{ns}/{prefix}/{owner}")
        if f"{ns}/{name}" in self._tracker.claims:
            return 409, f'resourceclaims.resource.k8s.io "{name}" already exists'
        meta.update(name=name, namespace=ns, uid=f"resourceclaim/{ns}/{name}")
        created = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **copy.deepcopy(dict(body))}
        created["metadata"] = meta
        return self._store(None, created, 201)

    def _delete(self, current: ResourceClaim, found: dict[str, Any]) -> tuple[int, Any]:
        """A claim with finalizers is marked deleted (it goes when the last one is removed); else it goes."""
        if current.finalizers:
            if current.deleting:
                return 200, found
            found["metadata"] = {**(found.get("metadata") or {}), "deletionTimestamp": "1970-01-01T00:00:00Z"}
            return self._store(current, found)
        self._on_change(current.key, None)
        return 200, found


def _merge_metadata(meta: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any] | None:
    """A strategic-merge patch of metadata removing finalizers (``$deleteFromPrimitiveList/finalizers``),
    or None for any other patch (the simulation's writers send no other)."""
    if not isinstance(patch, Mapping) or set(patch) != {"$deleteFromPrimitiveList/finalizers"}:
        return None
    gone = set(patch["$deleteFromPrimitiveList/finalizers"] or ())
    out = dict(meta)
    left = [f for f in meta.get("finalizers") or () if f not in gone]
    if left:
        out["finalizers"] = left
    else:
        out.pop("finalizers", None)
    return out


def _generate(prefix: str, seed: str) -> str:
    """What ``generateName`` gives: the prefix (cut to 58 characters) and five characters derived from `seed`."""
    digest = hashlib.sha256(seed.encode()).digest()
    return prefix[:_MAX_GENERATE_NAME] + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _merge_status(status: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A strategic-merge patch of a claim's status: ``reservedFor`` merges by ``uid`` (``$patch: delete``)."""
    out = dict(status)
    for key, value in patch.items():
        if key != "reservedFor" or not isinstance(value, list):
            out[key] = copy.deepcopy(value)
            continue
        entries = list(out.get("reservedFor") or [])
        for item in value:
            if not isinstance(item, Mapping):
                continue
            entries = [e for e in entries if e.get("uid") != item.get("uid")]
            if item.get("$patch") != "delete":
                entries.append(dict(item))
        out["reservedFor"] = entries
        if not entries:
            del out["reservedFor"]
    return out


# --------------------------------------------------------------------------- the resourceclaim controller


def generated_name(pod: str, claim: str, uid: str) -> str:
    """The name the controller's generateName gives the claim, with a suffix derived from `uid`."""
    base = f"{pod}-{claim}-"
    if len(base) > 57:
        base = f"{pod[: len(pod) * 57 // len(base)]}-{claim[: len(claim) * 57 // len(base)]}-"
    digest = hashlib.sha256(f"{uid}/{claim}".encode()).digest()
    return base + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def stamp_claims(pod: Pod, tracker: DraTracker) -> Pod:
    """The pod after the controller made its template claims (see the module docstring)."""
    refs = pod.resource_claims
    if not refs or not any(r.resource_claim_template_name for r in refs.claims):
        return pod
    statuses = dict(refs.statuses)
    for ref in refs.claims:
        template = (
            tracker.templates.get(f"{pod.namespace}/{ref.resource_claim_template_name}")
            if ref.resource_claim_template_name
            else None
        )
        if template is None or ref.name in statuses:
            continue
        name = generated_name(pod.name, ref.name, pod.uid)
        spec = (template.source or {}).get("spec") or {}
        tmeta = spec.get("metadata") or {}
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": pod.namespace,
                "uid": f"resourceclaim/{pod.namespace}/{name}",
                "resourceVersion": "1",
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: ref.name},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.name,
                        "uid": pod.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy(spec.get("spec") or {}),
        }
        tracker.set_claim(dra_parsing.parse_resource_claim(body))
        statuses[ref.name] = name
    if statuses == dict(refs.statuses):
        return pod
    source = dict(pod.source or {})
    status = dict(source.get("status") or {})
    status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in statuses.items()]
    source["status"] = status
    return dataclasses.replace(pod, resource_claims=PodClaims(refs.claims, statuses), source=source)


def devices_of(pod: Pod, tracker: DraTracker) -> tuple[str, ...]:
    """``<claim>: <driver>/<pool>/<device>, ...`` for each allocated claim of `pod` (what ``--explain`` shows),
    the claim of its extended resources last (``<extended-resources>`` while only Reserve has allocated it)."""
    refs = pod.resource_claims
    claims: list[ResourceClaim | None] = []
    for ref in refs.claims:
        name = ref.resource_claim_name or refs.statuses.get(ref.name)
        claim = tracker.get_claim(pod.namespace, name) if name else None
        if claim is not None and claim.allocation is None:  # allocated in Reserve, not written yet
            claim = tracker.pending_allocation(claim.uid) or claim
        claims.append(claim)
    if tracker.classes and pod.requests.scalar:
        extended = tracker.extended_resource_claim(pod.namespace, pod.name, pod.uid)
        if extended is None or extended.allocation is None:
            owned = (c for c in tracker.in_flight() if c.is_controlled_by(pod.uid) and c.name == SPECIAL_CLAIM_NAME)
            extended = next(owned, extended)
        claims.append(extended)
    out = []
    for claim in claims:
        if claim is None or claim.allocation is None:
            continue
        devices = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for r in claim.allocation.results)
        out.append(f"{claim.name}: {devices or '-'}")
    return tuple(out)
