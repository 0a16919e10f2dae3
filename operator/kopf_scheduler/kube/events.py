"""Scheduled / FailedScheduling events (core/v1 Events, written as plain JSON).

reportingController ``kopf-scheduler``, reportingInstance the process identity, action
``Scheduling`` or ``Binding``, involvedObject with the pod's uid. Timestamps are formatted here:
``firstTimestamp``/``lastTimestamp`` as metav1.Time, ``eventTime`` as MicroTime with exactly six
fractional digits (the official client would drop them when the microseconds are 0).

Repeats: upstream aggregates identical events through the broadcaster's correlator (a count on
one Event). We keep it simpler: at most one identical FailedScheduling message per pod per
``REPEAT_INTERVAL`` seconds; the rest are dropped (counted in the debug log only).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Final

from ..core.diagnosis import truncate_message
from .app import App, rfc3339, rfc3339_micro

__all__ = ["REPEAT_INTERVAL", "REPORTING_CONTROLLER", "failed_scheduling", "scheduled", "record"]

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "kopf-scheduler"
REPEAT_INTERVAL: Final = 30.0
ACTION_SCHEDULING: Final = "Scheduling"
ACTION_BINDING: Final = "Binding"


async def record(
    app: App, *, namespace: str, name: str, uid: str, type_: str, reason: str, action: str, message: str
) -> None:
    now = datetime.now(UTC)
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid},
        "type": type_,
        "reason": reason,
        "action": action,
        "message": truncate_message(message),
        "source": {"component": REPORTING_CONTROLLER},
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": app.identity[:128],
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "eventTime": rfc3339_micro(now),
        "count": 1,
    }
    async with app.write_slots:
        code, answer = await app.api.request("POST", f"/api/v1/namespaces/{namespace}/events", body)
    if not 200 <= code < 300:
        logger.warning("cannot record %s event for %s/%s: HTTP %s %s", reason, namespace, name, code, str(answer)[:300])


async def scheduled(app: App, *, namespace: str, name: str, uid: str, node: str) -> None:
    await record(
        app, namespace=namespace, name=name, uid=uid, type_="Normal", reason="Scheduled", action=ACTION_BINDING,
        message=f"Successfully assigned {namespace}/{name} to {node}",
    )


async def failed_scheduling(
    app: App, *, namespace: str, name: str, uid: str, message: str, action: str = ACTION_SCHEDULING
) -> None:
    """A Warning FailedScheduling event, unless the same message went out for this pod recently."""
    now = app.now()
    key = (uid, message)
    last = app.events_sent.get(key)
    if last is not None and now - last < REPEAT_INTERVAL:
        logger.debug("repeated FailedScheduling for %s/%s suppressed", namespace, name)
        return
    app.events_sent[key] = now
    if len(app.events_sent) > 50_000:  # bound the memory: drop entries older than the interval
        for k in [k for k, t in app.events_sent.items() if now - t >= REPEAT_INTERVAL]:
            del app.events_sent[k]
    await record(
        app, namespace=namespace, name=name, uid=uid, type_="Warning", reason="FailedScheduling", action=action, message=message
    )
