"""docs/plugins.md's QueueSort and requeueing examples run as written, against the public API."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from builders import make_node, make_pod

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.core.state.queueing import QueueingHints, SchedulingQueue
from kopf_scheduler.framework import ClusterEvent

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def section(title: str) -> dict[str, Any]:
    """What the python blocks of the section `title` define, run in order."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    namespace: dict[str, Any] = {}
    for block in re.findall(r"```python\n(.*?)```", body, flags=re.S):
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def test_the_queue_sort_example_orders_the_queue_and_a_policy_names_it() -> None:
    plugin = section("Ordering the queue: QueueSort")["FewestAttemptsFirst"]
    q = SchedulingQueue(less=plugin().less)
    q.add(make_pod("retried").priority(100).obj(), 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.add_backoff(info, 0.0)  # one failed attempt
    q.add(make_pod("fresh").obj(), 0.5)
    assert [p.pod.name for p in (q.pop(5.0), q.pop(5.0)) if p is not None] == ["fresh", "retried"]
    profile = validate_policy(
        {"schedulerName": "fair", "queueSort": [{"name": "FewestAttemptsFirst"}]},
        registry=Registry.in_tree().extended([(plugin, "docs")]),
    )
    assert isinstance(profile, Profile) and isinstance(profile.queue_sort, plugin)


def test_the_requeueing_example_moves_its_pods_when_a_node_becomes_ready() -> None:
    plugin = section("Requeueing: the events that can help a pod you rejected")["GpuReady"]()
    q = SchedulingQueue(hints=QueueingHints([plugin]))
    q.add(make_pod("trainer").obj(), 0.0)
    info = q.pop(0.0)
    assert info is not None
    q.add_unschedulable(info, 0.0, plugins=["GpuReady"])
    plain, ready = make_node("n").obj(), make_node("n").label(**{"example.com/gpu-ready": "true"}).obj()
    assert q.move_all_to_active_or_backoff(ClusterEvent.NODE_ADD, 5.0, new=plain) == 0
    assert q.move_all_to_active_or_backoff(ClusterEvent.NODE_UPDATE, 5.0, old=plain, new=ready) == 1
