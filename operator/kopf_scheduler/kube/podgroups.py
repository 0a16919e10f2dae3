"""PodGroup status, for both APIs: what a gang's members came to (``core/toolkit/gangs.py`` decides).

- ``scheduling.k8s.io/v1beta1``: the ``PodGroupInitiallyScheduled`` condition, as upstream's
  ``updatePodGroupCondition``: True (reason Scheduled) once minCount members are bound, and never
  back to False after that; False (reason Unschedulable, with the message every member read) when
  the gang was rejected. A strategic merge patch, so other conditions stay.
- ``scheduling.x-k8s.io/v1alpha1``: ``status.phase``, ``scheduled`` and ``running`` (a merge patch;
  ``succeeded``/``failed`` are left alone: terminal pods leave our cache).

``refresh`` runs from the loop's housekeeping and after a gang was rejected; ``App.pod_group_statuses``
remembers what was written, so only changes go out. A 404 (the API or the object is gone) is quiet.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from ..core.model import paths
from ..core.model.objects import WORKLOAD_API, PodGroup
from ..core.state.cache import PodState
from ..core.toolkit import gangs
from . import bodies
from .app import App

__all__ = ["refresh"]

logger = logging.getLogger(__name__)

REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"


def refresh(app: App, *, rejected: dict[str, str] | None = None) -> None:
    """Write the status of every PodGroup whose members' state changed; `rejected` maps PodGroup keys
    to the message of the gang's rejection just now."""
    rejected = rejected or {}
    waiting_uids = {w.pod.uid for w in app.waiting}
    for key, group in app.cache.objects.pod_groups.items():
        members = app.cache.objects.gang_members.get(key, frozenset())
        bound = [
            p
            for uid in members
            if (p := app.cache.get_pod(uid)) is not None and app.cache.state_of(p) is not PodState.ASSUMED
        ]
        waiting = len(members & waiting_uids)
        if group.api == WORKLOAD_API:
            status = _workload_status(app, group, len(bound), rejected.get(key))
        else:
            status = dict(gangs.pod_group_status(group, bound, waiting=waiting))
        if status is None or app.pod_group_statuses.get(key) == status:
            continue
        app.pod_group_statuses[key] = status
        app.spawn(_write(app, group, status))


def _workload_status(app: App, group: PodGroup, bound: int, rejection: str | None) -> dict[str, Any] | None:
    if not group.gang:
        return None
    last = app.pod_group_statuses.get(group.key)
    if group.initially_scheduled == "True" or (last is not None and last["status"] == "True"):
        return last  # terminal: never regresses
    if bound >= group.min_count:
        return {
            "status": "True",
            "reason": REASON_SCHEDULED,
            "message": f"{bound} of the {group.min_count} pods it needs are bound",
        }
    if rejection is not None:
        return {"status": "False", "reason": REASON_UNSCHEDULABLE, "message": rejection}
    return last


async def _write(app: App, group: PodGroup, status: dict[str, Any]) -> None:
    version = "v1beta1" if group.api == WORKLOAD_API else "v1alpha1"
    base = paths.item(
        f"{group.api}/{version}", "podgroups", group.name, namespace=group.namespace, subresource="status"
    )
    if group.api == WORKLOAD_API:
        body = bodies.pod_group_condition_patch(status, generation=group.generation, now=datetime.now(UTC))
        content_type = bodies.STRATEGIC_MERGE_PATCH
    else:
        body, content_type = bodies.pod_group_status_patch(status), bodies.MERGE_PATCH
    async with app.write_slots:
        response = await app.api.request("PATCH", base, body, content_type=content_type)
    if not response.ok and not response.gone:
        app.pod_group_statuses.pop(group.key, None)  # try again at the next refresh (a fenced one: when leading)
        if not response.fenced:
            logger.warning("cannot write the status of PodGroup %s: %s", group.key, response.describe())
