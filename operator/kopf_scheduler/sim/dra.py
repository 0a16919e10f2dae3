"""``simulate``'s side of DynamicResources: the ``resource.k8s.io/v1`` objects of the cluster file, the
names its API server gives claims, and the resourceclaim controller's part.

- ``load_dra_object``: a DeviceClass, ResourceSlice, ResourceClaim or ResourceClaimTemplate document
  into ``ClusterObjects.dra`` (the tracker the cycle reads). A claim written without ``uid`` or
  ``resourceVersion`` gets them, as the API server would give them. ``admit_claims`` refuses a claim
  the API server would refuse (admin access outside a namespace labelled for it).
- ``load_dra_object`` also takes DeviceTaintRules (``DraTracker.patched_slices`` applies them).
- The claims themselves are served by the simulation's API server (``sim/apiserver.py``: ``KubeApi``,
  the one model of kube-apiserver's semantics), which tells the simulator of every change a request
  makes. ``name_suffix`` is its ``generateName`` hook: the five characters a cluster draws at random,
  derived here from the object so runs repeat.
- ``stamp_claims``: for a pod whose ``spec.resourceClaims`` names a template, the claim the
  resourceclaim controller creates through the API server (``pkg/controller/resourceclaim/controller.go``:
  generateName ``<pod>-<claim>-`` both truncated proportionally to 57 characters, owned by the pod,
  annotated with the pod claim's name), recorded in the pod's ``status.resourceClaimStatuses``. A
  template that does not exist creates nothing: the pod waits (``ResourceClaim not created yet``),
  as in a cluster.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
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
from .kubeapi import ResourceType

__all__ = [
    "admin_claims_refused",
    "admit_claims",
    "claim_name_prefix",
    "devices_of",
    "load_dra_object",
    "name_suffix",
    "stamp_claims",
]

_PARSERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = {
    "DeviceClass": dra_parsing.parse_device_class,
    "ResourceSlice": dra_parsing.parse_resource_slice,
    "ResourceClaim": dra_parsing.parse_resource_claim,
    "ResourceClaimTemplate": dra_parsing.parse_resource_claim_template,
    "DeviceTaintRule": dra_parsing.parse_device_taint_rule,
}
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


# --------------------------------------------------------------------------- the API server's generateName


def name_suffix(rt: ResourceType, obj: Mapping[str, Any]) -> str:
    """The five characters the simulation's API server (``sim/apiserver.py``, ``KubeApi``'s hook) appends to a
    ``generateName``: random in a cluster, here derived from the object so runs repeat. A claim the
    resourceclaim controller makes: from its owner pod's uid and the pod claim's name; any other object
    (a pod's extended-resource claim): from its namespace, ``generateName`` and owner's uid."""
    meta = obj.get("metadata") or {}
    owner = next((str(o.get("uid")) for o in meta.get("ownerReferences") or () if isinstance(o, Mapping)), "")
    pod_claim = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
    seed = (
        f"{owner}/{pod_claim}"
        if pod_claim is not None
        else f"{meta.get('namespace')}/{meta.get('generateName')}/{owner}"
    )
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


# --------------------------------------------------------------------------- the resourceclaim controller


def claim_name_prefix(pod: str, claim: str) -> str:
    """The controller's ``generateName`` for a pod's claim: ``<pod>-<claim>-``, both cut in proportion to 57."""
    base = f"{pod}-{claim}-"
    if len(base) > 57:
        base = f"{pod[: len(pod) * 57 // len(base)]}-{claim[: len(claim) * 57 // len(base)]}-"
    return base


def stamp_claims(pod: Pod, tracker: DraTracker, create: Callable[[Mapping[str, Any]], ResourceClaim | str]) -> Pod:
    """The pod after the controller made its template claims (see the module docstring): each created through
    `create` (the API server's POST: the claim as created, or its refusal, which leaves the pod waiting
    as for a missing template) and put in `tracker`."""
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
        spec = (template.source or {}).get("spec") or {}
        tmeta = spec.get("metadata") or {}
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": claim_name_prefix(pod.name, ref.name),
                "namespace": pod.namespace,
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
        created = create(body)
        if isinstance(created, str):
            continue
        tracker.set_claim(created)
        statuses[ref.name] = created.name
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
