"""QueueSort: the profile's plugin orders the active queue, a policy names it in ``spec.queueSort``
(one at most), and a policy edit that switches it re-sorts the queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from builders import make_pod

from kopf_scheduler.core.config.policy import FieldError, validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.core.framework.basics import QueuedPodInfo
from kopf_scheduler.core.framework.interface import FilterPlugin, QueueSortPlugin
from kopf_scheduler.core.plugins.priority_sort import PrioritySort
from kopf_scheduler.core.scheduling.routing import PendingPods, serve
from kopf_scheduler.core.state.queueing import SchedulingQueue


@dataclass(frozen=True, slots=True)
class ByNameArgs:
    descending: bool = False


class ByName(QueueSortPlugin):
    """An out-of-tree order: by pod name (reversed with ``descending``), whatever the priority."""

    NAME = "ByName"
    Args = ByNameArgs

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if self.args.descending:
            return a.pod.name > b.pod.name
        return a.pod.name < b.pod.name


class AlsoSorts(QueueSortPlugin):
    NAME = "AlsoSorts"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return False


REGISTRY = Registry.in_tree().extended([(ByName, "test"), (AlsoSorts, "test")])
PODS = [("b", 0), ("c", 100), ("a", 10)]


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (info := q.pop(1.0)) is not None:
        out.append(info.pod.name)
    return out


def filled(q: SchedulingQueue) -> SchedulingQueue:
    for t, (name, priority) in enumerate(PODS):
        q.add(make_pod(name).priority(priority).obj(), float(t))
    return q


def test_the_queue_pops_in_the_order_of_its_queue_sort() -> None:
    assert drain(filled(SchedulingQueue())) == ["c", "a", "b"]  # PrioritySort: priority, then enqueue time
    assert drain(filled(SchedulingQueue(less=PrioritySort().less))) == ["c", "a", "b"]
    assert drain(filled(SchedulingQueue(less=ByName().less))) == ["a", "b", "c"]
    assert drain(filled(SchedulingQueue(less=ByName(ByNameArgs(descending=True)).less))) == ["c", "b", "a"]


def test_prioritysort_breaks_ties_by_enqueue_time_as_upstream() -> None:
    old, new = make_pod("old").obj(), make_pod("new").obj()
    a, b = QueuedPodInfo(old, timestamp=1.0, added_at=1.0), QueuedPodInfo(new, timestamp=2.0, added_at=2.0)
    assert PrioritySort().less(a, b) and not PrioritySort().less(b, a)


def test_a_profile_that_switches_its_queue_sort_resorts_the_queue() -> None:
    pending = PendingPods()
    for name, priority in PODS:
        pending.put(make_pod(name).priority(priority).scheduler("s").obj())
    queue = serve(Profile("s"), None, pending=pending, now=0.0)
    assert isinstance(Profile("s").queue_sort, PrioritySort)
    serve(Profile("s", queue_sort=ByName()), queue, pending=pending, now=1.0)
    assert drain(queue) == ["a", "b", "c"]


def test_a_policy_names_its_queue_sort() -> None:
    profile = validate_policy({"schedulerName": "s", "queueSort": [{"name": "ByName"}]}, registry=REGISTRY)
    assert isinstance(profile, Profile) and isinstance(profile.queue_sort, ByName)
    assert profile.spec["queueSort"] == [{"name": "ByName"}]
    configured = validate_policy(
        {"schedulerName": "s", "queueSort": [{"name": "byname", "argument": {"descending": True}}]}, registry=REGISTRY
    )
    assert isinstance(configured, Profile) and configured.queue_sort.args == ByNameArgs(descending=True)
    default = validate_policy({"schedulerName": "s"})
    assert isinstance(default, Profile) and isinstance(default.queue_sort, PrioritySort)
    assert "queueSort" not in default.spec
    assert REGISTRY.queue_sort_names() == ["AlsoSorts", "ByName", "PrioritySort"]
    assert REGISTRY.queue_sort_plugin("prioritysort") is PrioritySort and REGISTRY.queue_sort_plugin("NodeName") is None


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        pytest.param(
            {"queueSort": [{"name": "PrioritySort"}, {"name": "ByName"}]},
            FieldError(
                "spec.queueSort[1].name",
                "only one QueueSort plugin orders a profile's queue, and spec.queueSort[0] names one already; "
                "remove 'ByName' or the other",
            ),
            id="two QueueSort plugins",
        ),
        pytest.param(
            {"queueSort": [{"name": "PriortySort"}]},
            FieldError(
                "spec.queueSort[0].name",
                "unknown QueueSort plugin 'PriortySort'; did you mean 'PrioritySort'? "
                "(installed: AlsoSorts, ByName, PrioritySort)",
            ),
            id="a typo",
        ),
        pytest.param(
            {"queueSort": [{"name": "NodeAffinity"}]},
            FieldError(
                "spec.queueSort[0].name",
                "'NodeAffinity' is not a QueueSort plugin (installed: AlsoSorts, ByName, PrioritySort)",
            ),
            id="a filter plugin",
        ),
        pytest.param(
            {"queueSort": [{"name": "ByName", "argument": {"descending": "yes"}}]},
            FieldError("spec.queueSort[0].argument.descending", "must be a boolean, not a string"),
            id="bad arguments",
        ),
        pytest.param(
            {"queueSort": {"name": "ByName"}},
            FieldError("spec.queueSort", "must be a list"),
            id="not a list",
        ),
        pytest.param(
            {"predicates": [{"name": "PrioritySort"}]},
            FieldError(
                "spec.predicates[0].name",
                "'PrioritySort' is a QueueSort plugin, not a predicate; name it in spec.queueSort",
            ),
            id="under predicates",
        ),
    ],
)
def test_a_policy_refuses_what_is_not_one_queue_sort(spec: dict[str, Any], error: FieldError) -> None:
    assert validate_policy({"schedulerName": "s", **spec}, registry=REGISTRY) == [error]


def test_a_queue_sort_plugin_is_no_filter() -> None:
    assert not issubclass(PrioritySort, FilterPlugin)
