"""What the scheduler believes, as log lines: the cache per node and the queues (on SIGUSR2).

Upstream ``pkg/scheduler/backend/cache/debugger/dumper.go`` (``CacheDumper.DumpAll``, run when
kube-scheduler gets SIGUSR2): every cached node with its requested and allocatable resources and
its pods, then the scheduling queue. Ours writes one line per node and one per served scheduler
name, each a JSON object after a fixed prefix, so that a person can read it and a script (the
fault tests compare it with the API server) can parse it:

    cache dump: node {"node": "n1", "deleted": false, "requested": {"cpu": 300, "memory": 402653184},
                      "allocatable": {...}, "pods": ["ns/a", "ns/b"], "assumed": ["ns/b"], "nominated": []}
    cache dump: queue {"scheduler": "kopf-scheduler", "active": 0, "backoff": 1, "unschedulable": 2, "gated": 0}
    cache dump: end {"nodes": 1, "pods": 2, "assumed": 1}

cpu is in millicores, everything else in units (bytes, counts). A node that was deleted while pods
were still on it is listed with ``"deleted": true``. Pure: the caller logs the lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..model.resources import Resources
from .cache import PodState, SchedulerCache
from .queueing import SchedulingQueue

__all__ = ["PREFIX", "dump_lines"]

PREFIX: Final = "cache dump:"


def _amounts(r: Resources) -> dict[str, int]:
    out = {"cpu": r.milli_cpu, "memory": r.memory, "ephemeral-storage": r.ephemeral_storage}
    out.update(r.scalar)
    return {name: amount for name, amount in out.items() if amount}


def dump_lines(cache: SchedulerCache, queues: Mapping[str, SchedulingQueue]) -> list[str]:
    """The cache node by node (sorted by name), each queue by scheduler name, and a closing summary."""
    names = set(cache.node_names()) | {pod.node_name for pod in cache.pods()}
    lines = []
    pods = assumed = 0
    nominated: dict[str, list[str]] = {}
    for queue in queues.values():
        for name in names:
            nominated.setdefault(name, []).extend(p.key for p in queue.nominated_pods_for_node(name))
    for name in sorted(names):
        info = cache.get_node_info(name)
        if info is None:
            continue
        keys = sorted(p.key for p in info.iter_pods())
        guesses = sorted(p.key for p in info.iter_pods() if cache.state_of(p) in (PodState.ASSUMED, PodState.BOUND))
        pods, assumed = pods + len(keys), assumed + len(guesses)
        entry: dict[str, Any] = {
            "node": name,
            "deleted": info.node is None,
            "requested": _amounts(info.requested),
            "allocatable": _amounts(info.allocatable),
            "pods": keys,
            "assumed": guesses,
            "nominated": sorted(nominated.get(name, [])),
        }
        lines.append(f"{PREFIX} node {json.dumps(entry, sort_keys=True)}")
    for scheduler_name in sorted(queues):
        counts = queues[scheduler_name].pending_counts()
        lines.append(f"{PREFIX} queue {json.dumps({'scheduler': scheduler_name, **counts}, sort_keys=True)}")
    summary = {"nodes": cache.node_count(), "pods": pods, "assumed": assumed}
    lines.append(f"{PREFIX} end {json.dumps(summary, sort_keys=True)}")
    return lines
