"""The scheduling trace's records: what ``run --record`` writes and ``replay`` reads (pure: dicts in, dicts out).

A trace is JSON lines, one record per line, each ``{"t": <unix seconds>, "e": <kind>, ...}``:

- ``checkpoint``: ``nodes``, ``pods`` (bound and pending) and ``policies`` as they stood when a segment
  began, so every segment can be replayed from its start once older segments have rotated away;
- ``node`` / ``pod``: ``op`` (``ADDED``, ``MODIFIED``, ``DELETED``) and ``obj``, the API body pruned to what
  scheduling reads (``prune_node``, ``prune_pod``); a change that leaves the pruned body as it was is
  not written (node heartbeats, a pod's status message);
- ``policy``: a SchedulingPolicy version (``name``, ``generation``, ``schedulerName``, ``spec``);
- ``decision``: one attempt's outcome (``decision_record``): the pod, the scheduler name, ``outcome``
  (bind, wait, unschedulable, error, skip, permit-allowed, permit-rejected), the ``node``, the
  ``reason``, a preemption's ``nominated`` node and ``victims``, and the random tie-break ``draws``
  ([range, value] pairs) the attempt made, so a replay with the same policy breaks ties the same way;
- ``dropped``: how many records the recorder could not keep up with and left out.

Pruning keeps only what ``core/model/parsing.py`` reads: no environment, commands, mounts, probes, secrets
or annotations (a pod's ``last-applied-configuration`` annotation would carry its whole spec); of a
node's annotations only the preferAvoidPods one. The pruned bodies are still API bodies, so a
replay reads them with the same loader and parser as ``simulate`` (``sim/loader.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..model.objects import ANNOTATION_PREFER_AVOID_PODS
from .cycle import Bind, Error, Outcome, Skip, Unschedulable, Wait

__all__ = [
    "CHECKPOINT",
    "DECISION",
    "DROPPED",
    "NODE",
    "POD",
    "POLICY",
    "decision_record",
    "prune_node",
    "prune_pod",
]

CHECKPOINT: Final = "checkpoint"
NODE: Final = "node"
POD: Final = "pod"
POLICY: Final = "policy"
DECISION: Final = "decision"
DROPPED: Final = "dropped"

_POD_META: Final = ("name", "namespace", "uid", "labels", "ownerReferences", "creationTimestamp", "deletionTimestamp")
_POD_SPEC: Final = (
    "nodeName",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "overhead",
    "affinity",
    "nodeSelector",
    "tolerations",
    "topologySpreadConstraints",
    "schedulingGates",
    "schedulingGroup",
    "resources",
    "resourceClaims",
)
_CONTAINER: Final = ("name", "image", "resources", "ports", "restartPolicy")
#: the fields of a volume source that name it (``parsing._volume``); nothing else of it is kept
_VOLUME_SOURCE: Final = frozenset(
    ("readOnly", "pool", "image", "monitors", "iqn", "volumeHandle", "driver", "reference", "claimName", "pdName",
     "volumeID", "diskName")
)  # fmt: skip
_POD_STATUS: Final = ("phase", "nominatedNodeName", "startTime", "allocatedResources", "resources")
_POD_CONDITIONS: Final = frozenset(("PodScheduled", "DisruptionTarget"))
_CONTAINER_STATUS: Final = ("name", "allocatedResources", "resources")


def _pick(raw: Any, keys: Sequence[str]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        return {}
    return {k: raw[k] for k in keys if raw.get(k) is not None}


def _containers(raw: Any) -> list[Any]:
    return [_pick(c, _CONTAINER) for c in raw] if isinstance(raw, list) else []


def _volume(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    out: dict[str, Any] = {"name": raw.get("name")}
    for kind, source in raw.items():
        if kind != "name":
            out[kind] = {k: v for k, v in source.items() if k in _VOLUME_SOURCE} if isinstance(source, Mapping) else {}
    return out


def prune_pod(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with only what scheduling reads of a pod (see the module docstring)."""
    spec_in = body.get("spec")
    spec = _pick(spec_in, _POD_SPEC)
    if isinstance(spec_in, Mapping):
        for key in ("containers", "initContainers"):
            if spec_in.get(key):
                spec[key] = _containers(spec_in[key])
        if isinstance(spec_in.get("volumes"), list):
            spec["volumes"] = [_volume(v) for v in spec_in["volumes"]]
    status_in = body.get("status")
    status = _pick(status_in, _POD_STATUS)
    if isinstance(status_in, Mapping):
        conditions = [
            _pick(c, ("type", "status", "reason", "lastTransitionTime"))
            for c in status_in.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") in _POD_CONDITIONS and c.get("status") == "True"
        ]
        if conditions:
            status["conditions"] = conditions
        for key in ("containerStatuses", "initContainerStatuses"):
            if isinstance(status_in.get(key), list):
                status[key] = [_pick(c, _CONTAINER_STATUS) for c in status_in[key]]
    return {"kind": "Pod", "metadata": _pick(body.get("metadata"), _POD_META), "spec": spec, "status": status}


def prune_node(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with only what scheduling reads of a node (see the module docstring)."""
    meta_in = body.get("metadata")
    meta = _pick(meta_in, ("name", "uid", "labels"))
    annotations = meta_in.get("annotations") if isinstance(meta_in, Mapping) else None
    if isinstance(annotations, Mapping) and ANNOTATION_PREFER_AVOID_PODS in annotations:
        meta["annotations"] = {ANNOTATION_PREFER_AVOID_PODS: annotations[ANNOTATION_PREFER_AVOID_PODS]}
    status_in = body.get("status")
    status = _pick(status_in, ("allocatable", "capacity", "images"))
    if isinstance(status_in, Mapping) and isinstance(status_in.get("conditions"), list):
        status["conditions"] = [_pick(c, ("type", "status")) for c in status_in["conditions"]]
    return {
        "kind": "Node",
        "metadata": meta,
        "spec": _pick(body.get("spec"), ("taints", "unschedulable")),
        "status": status,
    }


def decision_record(
    t: float,
    *,
    key: str,
    uid: str,
    scheduler_name: str,
    outcome: Outcome,
    draws: Sequence[tuple[int, int]] = (),
) -> dict[str, Any]:
    """One attempt's outcome as a ``decision`` record."""
    record: dict[str, Any] = {"t": t, "e": DECISION, "pod": key, "uid": uid, "scheduler": scheduler_name}
    match outcome:
        case Bind(node=node):
            record.update(outcome="bind", node=node)
        case Wait(node=node):
            record.update(outcome="wait", node=node)
        case Unschedulable(message, _, nominated, victims):
            record.update(outcome="unschedulable", reason=message)
            if nominated:
                record["nominated"] = nominated
            if victims:
                record["victims"] = [v.key for v in victims]
        case Error(message):
            record.update(outcome="error", reason=message)
        case Skip(reason):
            record.update(outcome="skip", reason=reason)
    if draws:
        record["draws"] = [list(d) for d in draws]
    return record
