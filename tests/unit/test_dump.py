"""The SIGUSR2 dump: one JSON line per cached node (deleted ones included) and per queue, then a summary."""

from __future__ import annotations

import json
from typing import Any

from builders import make_node, make_pod

from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.dump import PREFIX, dump_lines
from kopf_scheduler.core.state.queueing import SchedulingQueue


def parse(lines: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        assert line.startswith(PREFIX + " ")
        kind, _, body = line[len(PREFIX) + 1 :].partition(" ")
        out.setdefault(kind, []).append(json.loads(body))
    return out


def test_nodes_queues_and_summary() -> None:
    cache = SchedulerCache()
    cache.add_node(make_node("a").capacity(cpu="4", memory="8Gi", pods="110").obj())
    cache.add_node(make_node("gone").capacity(cpu="2", memory="4Gi", pods="110").obj())
    cache.add_pod(make_pod("bound", "ns").req(cpu="500m", memory="1Gi").node("a").obj())
    cache.assume(make_pod("assumed", "ns").req(cpu="250m").obj(), "a")
    cache.add_pod(make_pod("left", "ns").req(cpu="1").node("gone").obj())
    cache.remove_node("gone")  # its pod keeps a placeholder until the pod goes
    queue = SchedulingQueue()
    queue.add(make_pod("waiting", "ns").obj(), 0.0)

    dump = parse(dump_lines(cache, {"kopf-scheduler": queue}))

    a, gone = dump["node"]
    # 500m + 250m; memory only from the bound pod (the assumed one asks none)
    assert a == {
        "node": "a", "deleted": False, "requested": {"cpu": 750, "memory": 2**30},
        "allocatable": {"cpu": 4000, "memory": 8 * 2**30},
        "pods": ["ns/assumed", "ns/bound"], "assumed": ["ns/assumed"], "nominated": [],
    }  # fmt: skip
    assert (gone["node"], gone["deleted"], gone["requested"], gone["pods"]) == (
        "gone",
        True,
        {"cpu": 1000},
        ["ns/left"],
    )
    assert dump["queue"] == [{"scheduler": "kopf-scheduler", "active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}]
    assert dump["end"] == [{"nodes": 1, "pods": 3, "assumed": 1}]
