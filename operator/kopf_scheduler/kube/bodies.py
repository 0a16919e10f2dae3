"""The request bodies the operator sends to the API server, one small function each: their shapes
(apiVersion and kind, uid preconditions, which patch type merges what) are written here once.

Pure: moments, names and texts are arguments, so a body is a value a test can compare; timestamps
are formatted by ``core/model/timestamps.py`` (MicroTime keeps its six digits). The callers in ``kube/``
send them through ``edge/client.Api``:

- ``event``: ``POST events``, a core/v1 Event about a pod (``events.py``);
- ``pod_status_patch`` with ``pod_scheduled_false`` or ``disruption_target_condition``:
  ``PATCH pods/{name}/status`` (``loop.py``, ``preemption.py``); ``delete_options``: ``DELETE
  pods/{name}`` of a preemption victim; ``Preemptor``: who a victim goes for, as its condition and its
  Preempted event name it;
- ``pod_group_condition_patch`` / ``pod_group_status_patch``: ``PATCH podgroups/{name}/status`` of
  the two PodGroup APIs (``podgroups.py``); ``policy_status_patch``: a SchedulingPolicy's status
  (``app.py``); ``lease``: the leader-election Lease (``leader.py``).

The Binding is not here: DefaultBinder sends it (``core/plugins/default_binder.binding_body``), and
plugins do not import the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ..core.framework.diagnosis import truncate_message
from ..core.model.objects import (
    CONDITION_DISRUPTION_TARGET,
    CONDITION_POD_GROUP_INITIALLY_SCHEDULED,
    REASON_PREEMPTION_BY_SCHEDULER,
    WORKLOAD_API,
    Pod,
    PodGroup,
)
from ..core.model.timestamps import rfc3339, rfc3339_micro

__all__ = [
    "LEASE_API_VERSION",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "Preemptor",
    "delete_options",
    "disruption_target_condition",
    "event",
    "lease",
    "pod_group_condition_patch",
    "pod_group_status_patch",
    "pod_scheduled_false",
    "pod_status_patch",
    "policy_status_patch",
]

#: merges lists of conditions by their type (built-in kinds only)
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
#: RFC 7386: replaces what it names (custom resources, which have no strategic merge)
MERGE_PATCH: Final = "application/merge-patch+json"
LEASE_API_VERSION: Final = "coordination.k8s.io/v1"


def _pod_ref(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid}


@dataclass(frozen=True, slots=True)
class Preemptor:
    """Who victims are evicted for (upstream ``ExecutorPreemptor``): a pod, or a ``scheduling.k8s.io`` PodGroup
    whose gang preempted as a whole. `kind` is upstream's ``Type()`` (``pod``, ``podgroup``), which the
    victims' Preempted events and DisruptionTarget conditions name; `related` is the events' related object."""

    kind: str
    uid: str
    key: str
    scheduler_name: str
    related: Mapping[str, Any]

    @staticmethod
    def of_pod(pod: Pod) -> Preemptor:
        return Preemptor("pod", pod.uid, pod.key, pod.scheduler_name, _pod_ref(pod.namespace, pod.name, pod.uid))

    @staticmethod
    def of_pod_group(group: PodGroup, scheduler_name: str) -> Preemptor:
        ref = {
            "apiVersion": f"{WORKLOAD_API}/v1beta1",
            "kind": "PodGroup",
            "namespace": group.namespace,
            "name": group.name,
            "uid": group.uid,
        }
        return Preemptor("podgroup", group.uid, f"podgroup {group.namespace}/{group.name}", scheduler_name, ref)


def event(
    *,
    namespace: str,
    name: str,
    uid: str,
    type_: str,
    reason: str,
    action: str,
    message: str,
    controller: str,
    instance: str,
    now: datetime,
    suffix: str,
    related: Pod | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about the pod `namespace/name` (`uid`), named ``<name>.<suffix>``; `related` names
    a second object (upstream's related object): a pod, or an object reference as it is. The message is cut
    to the API's limit."""
    micro = rfc3339_micro(now)
    second = micro[:19] + "Z"  # the same moment as metav1.Time, without formatting it twice
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{suffix}", "namespace": namespace},
        "involvedObject": _pod_ref(namespace, name, uid),
        "type": type_,
        "reason": reason,
        "action": action,
        "message": truncate_message(message),
        "source": {"component": controller},
        "reportingComponent": controller,
        "reportingInstance": instance[:128],
        "firstTimestamp": second,
        "lastTimestamp": second,
        "eventTime": micro,
        "count": 1,
    }
    if isinstance(related, Pod):
        body["related"] = _pod_ref(related.namespace, related.name, related.uid)
    elif related is not None:
        body["related"] = dict(related)
    return body


def pod_scheduled_false(message: str, now: datetime, *, reason: str = "Unschedulable") -> dict[str, Any]:
    """PodScheduled=False as upstream's ``updatePod`` writes it: reason Unschedulable, or SchedulerError for a
    pod whose attempt failed."""
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": truncate_message(message),
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(now),
    }


def disruption_target_condition(scheduler_name: str, now: datetime, *, preemptor: str = "pod") -> dict[str, Any]:
    """DisruptionTarget=True on a preemption victim (upstream ``PreemptPod``); `preemptor` is its kind (``pod``
    or ``podgroup``, upstream's ``ExecutorPreemptor.Type``)."""
    return {
        "type": CONDITION_DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority {preemptor}",
        "lastTransitionTime": rfc3339(now),
    }


def pod_status_patch(
    uid: str, *, condition: Mapping[str, Any] | None = None, nominated_node: str | None = None
) -> dict[str, Any]:
    """A strategic merge patch of pods/status: a condition (merged by type) and/or ``nominatedNodeName``
    ("" removes it); the uid makes it fail on a pod recreated under the name."""
    status: dict[str, Any] = {}
    if condition is not None:
        status["conditions"] = [dict(condition)]
    if nominated_node is not None:
        status["nominatedNodeName"] = nominated_node or None
    return {"metadata": {"uid": uid}, "status": status}


def delete_options(uid: str) -> dict[str, Any]:
    """DeleteOptions that delete only the pod with this uid (409 for another one under the name)."""
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}


def pod_group_condition_patch(status: Mapping[str, Any], *, generation: int, now: datetime) -> dict[str, Any]:
    """``scheduling.k8s.io`` PodGroup: the PodGroupInitiallyScheduled condition from `status` (its status,
    reason and message), a strategic merge patch so other conditions stay."""
    condition = {
        "type": CONDITION_POD_GROUP_INITIALLY_SCHEDULED,
        **status,
        "message": truncate_message(str(status["message"])),
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(now),
    }
    return {"status": {"conditions": [condition]}}


def pod_group_status_patch(status: Mapping[str, Any]) -> dict[str, Any]:
    """``scheduling.x-k8s.io`` PodGroup: phase, scheduled and running (a merge patch)."""
    return {"status": dict(status)}


def policy_status_patch(status: Mapping[str, Any]) -> dict[str, Any]:
    """A SchedulingPolicy's status (a merge patch)."""
    return {"status": dict(status)}


def lease(
    *,
    name: str,
    namespace: str,
    holder: str,
    duration_seconds: int,
    transitions: int,
    acquire_time: datetime | None,
    renew_time: datetime | None,
    resource_version: str | None,
) -> dict[str, Any]:
    """The Lease that is created (no `resource_version`) or replaced (with one: the API server refuses
    it with a 409 when the Lease changed meanwhile); times as MicroTime."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration_seconds,
        "leaseTransitions": transitions,
    }
    if acquire_time is not None:
        spec["acquireTime"] = rfc3339_micro(acquire_time)
    if renew_time is not None:
        spec["renewTime"] = rfc3339_micro(renew_time)
    return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": metadata, "spec": spec}
