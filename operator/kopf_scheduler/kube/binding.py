"""POST pods/{name}/binding, and what follows (``core.cycle.binding_succeeded`` / ``binding_failed``).

The Binding carries the pod's uid, so the API server refuses to bind a pod that was deleted and
recreated under the same name. A 409 (already bound), 404 (gone) or any other failure forgets
the assumption and requeues with backoff (a deleted pod is dropped by the queue itself); this
module records the events and metrics of either outcome.
"""

from __future__ import annotations

import logging

from ..core.cycle import binding_failed, binding_succeeded
from ..core.objects import Pod
from ..core.queueing import QueuedPodInfo
from . import events
from .app import App, PolicyState

__all__ = ["bind"]

logger = logging.getLogger(__name__)


def _binding_body(pod: Pod, node: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(app: App, state: PolicyState, info: QueuedPodInfo, placed: Pod, *, started: float) -> None:
    """Bind `placed` (the assumed pod); releases one of app.bind_slots when done (the loop acquired it)."""
    try:
        node = placed.node_name
        t0 = app.now()
        code, answer = await app.api.request(
            "POST", f"/api/v1/namespaces/{placed.namespace}/pods/{placed.name}/binding", _binding_body(placed, node)
        )
        t1 = app.now()
        profile = state.scheduler_name
        if 200 <= code < 300:
            app.metrics.observe_binding("success", t1 - t0)
            app.metrics.observe_e2e("scheduled", profile, t1 - started)
            app.metrics.observe_attempt("scheduled", profile, t1 - started)
            if info.initial_attempt_timestamp is not None:
                app.metrics.observe_pod_scheduled(info.attempts, t1 - info.initial_attempt_timestamp)
            binding_succeeded(placed, cache=app.cache, queue=state.queue, now=t1)
            app.bound_total += 1
            logger.info("bound %s to %s", placed.key, node)
            app.spawn(events.scheduled(app, namespace=placed.namespace, name=placed.name, uid=placed.uid, node=node))
            return
        app.metrics.observe_binding("error", t1 - t0)
        app.metrics.observe_attempt("error", profile, t1 - started)
        detail = answer.get("message", answer) if isinstance(answer, dict) else answer
        logger.warning("binding %s to %s rejected: HTTP %s %s", placed.key, node, code, str(detail)[:300])
        binding_failed(info, placed, cache=app.cache, queue=state.queue, now=t1)
        state.wakeup.set()
        app.spawn(
            events.failed_scheduling(
                app, namespace=placed.namespace, name=placed.name, uid=placed.uid,
                message=f"Binding rejected: {detail}", action=events.ACTION_BINDING,
            )
        )
    finally:
        app.bind_slots.release()
