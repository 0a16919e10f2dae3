"""Extenders in the algorithm, with fake ``Extender`` objects: filtering, reasons, weighted scores, errors, binding.

Upstream: ``schedule_one.go`` (``findNodesThatPassExtenders``, ``prioritizeNodes``, ``extendersBinding``),
``extender.go`` (``IsInterested``), ``scheduler.go`` (``buildExtenders``: ignorable extenders last).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.extenders import (
    Extender,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
    HostPriority,
    bind_with_extenders,
    binds_with_extender,
)
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.basics import SUCCESS, Code, Status, unschedulable
from kopf_scheduler.core.framework.diagnosis import PluginScore
from kopf_scheduler.core.framework.interface import FilterPlugin, ScorePlugin
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, ScheduleResult


class FakeExtender(Extender):
    """Answers from tables; records the node names each call was sent."""

    def __init__(
        self,
        config: ExtenderConfig,
        *,
        failed: Mapping[str, str] | None = None,
        unresolvable: Mapping[str, str] | None = None,
        dropped: Sequence[str] = (),
        scores: Mapping[str, int] | None = None,
        filter_error: str = "",
        prioritize_error: str = "",
        bind_error: str = "",
        extra: Sequence[str] = (),
        raises: bool = False,
    ) -> None:
        super().__init__(config)
        self.failed = dict(failed or {})
        self.unresolvable = dict(unresolvable or {})
        self.dropped = set(dropped)  # filtered out without a reason
        self.scores = dict(scores or {})
        self.filter_error, self.prioritize_error, self.bind_error = filter_error, prioritize_error, bind_error
        self.extra = tuple(extra)  # names it claims to keep although it was not sent them
        self.raises = raises
        self.filtered: list[list[str]] = []
        self.prioritized: list[list[str]] = []
        self.bound: list[tuple[str, str]] = []

    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        if self.raises:
            raise RuntimeError("extender bug")
        names = [n.name for n in nodes]
        self.filtered.append(names)
        if self.filter_error:
            return ExtenderFilterResult(error=self.filter_error)
        rejected = set(self.failed) | set(self.unresolvable) | self.dropped
        keep = tuple(n for n in names if n not in rejected) + self.extra
        return ExtenderFilterResult(keep, self.failed, self.unresolvable)

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderPrioritizeResult:
        self.prioritized.append([n.name for n in nodes])
        if self.prioritize_error:
            return ExtenderPrioritizeResult(error=self.prioritize_error)
        return ExtenderPrioritizeResult(tuple(HostPriority(n.name, self.scores.get(n.name, 0)) for n in nodes))

    def bind(self, pod: Pod, node: str) -> str:
        self.bound.append((pod.name, node))
        return self.bind_error


def config(url: str = "http://ext", **kw: Any) -> ExtenderConfig:
    return ExtenderConfig(url_prefix=url, **kw)


def filtering(url: str = "http://ext", **kw: Any) -> FakeExtender:
    cfg_keys = {"ignorable", "managed_resources", "weight", "prioritize_verb", "bind_verb"}
    cfg = {k: kw.pop(k) for k in list(kw) if k in cfg_keys}
    return FakeExtender(config(url, filter_verb="filter", **cfg), **kw)


def prioritizing(url: str = "http://ext", *, weight: int = 1, **kw: Any) -> FakeExtender:
    return FakeExtender(config(url, prioritize_verb="prioritize", weight=weight), **kw)


class RejectNodes(FilterPlugin):
    NAME = "RejectNodes"

    def __init__(self, reject: Mapping[str, str]) -> None:
        super().__init__()
        self.reject = reject

    def filter(self, state: Any, pod: Any, node: Any) -> Status:
        return unschedulable(self.reject[node.name]) if node.name in self.reject else SUCCESS


class ScoreByName(ScorePlugin):
    NAME = "ScoreByName"

    def __init__(self, scores: Mapping[str, int]) -> None:
        super().__init__()
        self.scores = scores

    def score(self, state: Any, pod: Any, node: Any) -> int:
        return self.scores.get(node.name, 0)


def snapshot_of(n: int) -> Snapshot:
    return Snapshot.of(node_info(make_node(f"n{i}").obj()) for i in range(n))


def scheduler(
    *extenders: FakeExtender, filters: tuple[FilterPlugin, ...] = (), scorers: tuple[tuple[ScorePlugin, int], ...] = ()
) -> GenericScheduler:
    by_url = {e.config.url_prefix: e for e in extenders}
    profile = Profile("s", filters=filters, scorers=scorers, extenders=tuple(e.config for e in extenders))
    return GenericScheduler(profile, extender_factory=lambda c: by_url[c.url_prefix])


def run(sched: GenericScheduler, nodes: int = 3, pod: Pod | None = None, **kw: Any) -> ScheduleResult:
    return sched.schedule(pod or make_pod("p").obj(), snapshot_of(nodes), rng=random.Random(0), **kw)


# ----------------------------------------------------------------------------- filter


def test_extender_reasons_join_the_fit_error() -> None:
    plugin = RejectNodes({"n0": "Insufficient cpu"})
    ext = filtering(failed={"n1": "no GPU left"}, unresolvable={"n2": "wrong rack"})
    result = run(scheduler(ext, filters=(plugin,)))
    assert result.unschedulable
    assert result.message == "0/3 nodes are available: 1 Insufficient cpu, 1 no GPU left, 1 wrong rack."
    statuses = result.diagnosis.node_to_status
    assert (statuses["n1"].code, statuses["n2"].code) == (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    assert statuses["n1"].plugin == "http://ext"
    assert result.diagnosis.unschedulable_plugins == {"RejectNodes", "Extender"}
    assert ext.filtered == [["n1", "n2"]], "only the nodes the plugins kept are sent"


def test_unresolvable_wins_when_a_node_is_in_both_maps() -> None:
    ext = filtering(failed={"n0": "busy"}, unresolvable={"n0": "never"})
    status = run(scheduler(ext), nodes=1).diagnosis.node_to_status["n0"]
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("never",))


def test_a_node_dropped_without_a_reason_is_not_counted() -> None:
    # upstream counts only the nodes that have a status: 2 were filtered, 1 is listed
    ext = filtering(failed={"n0": "busy"}, dropped=["n1"])
    assert run(scheduler(ext), nodes=2).message == "0/2 nodes are available: 1 busy."


def test_extenders_filter_one_after_another() -> None:
    first = filtering("http://a", failed={"n0": "a says no"})
    second = filtering("http://b", failed={"n1": "b says no"})
    result = run(scheduler(first, second), nodes=3)
    assert result.node == "n2"
    assert first.filtered == [["n0", "n1", "n2"]] and second.filtered == [["n1", "n2"]]


def test_no_extender_is_called_once_no_node_is_left() -> None:
    first = filtering("http://a", failed={"n0": "no"})
    second = filtering("http://b")
    assert run(scheduler(first, second), nodes=1).unschedulable
    assert second.filtered == []


def test_a_failing_extender_fails_the_attempt_with_its_error() -> None:
    ext = filtering(
        filter_error='Post "http://ext/filter": '
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )
    result = run(scheduler(ext))
    assert result.node is None and not result.unschedulable
    assert (
        result.message
        == 'Post "http://ext/filter": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    )


def test_an_ignorable_extender_that_fails_is_skipped_and_called_last() -> None:
    flaky = filtering("http://flaky", ignorable=True, filter_error="connection refused")
    strict = filtering("http://strict", failed={"n0": "no"})
    sched = scheduler(flaky, strict)
    assert [e.name for e in sched.extenders] == ["http://strict", "http://flaky"]
    result = run(sched, nodes=2)
    assert result.node == "n1"
    assert result.extender_errors == ["skipped ignorable extender http://flaky: connection refused"]
    assert strict.filtered == [["n0", "n1"]] and flaky.filtered == [["n1"]]


def test_an_extender_may_not_keep_a_node_it_was_not_sent() -> None:
    ext = filtering(extra=["n0"])
    result = run(scheduler(ext, filters=(RejectNodes({"n0": "Insufficient cpu"}),)), nodes=2)
    assert result.error == "extender 'http://ext' claims a filtered node 'n0' which is not found in the input node list"


def test_an_extender_that_raises_is_an_error_not_a_crash() -> None:
    assert run(scheduler(filtering(raises=True))).error == "RuntimeError: extender bug"


@pytest.mark.parametrize(
    "pod,called",
    [
        pytest.param(make_pod("plain").req(cpu="1"), False, id="no managed resource: not called"),
        pytest.param(make_pod("gpu").req(**{"example.com/gpu": "1"}), True, id="requests one"),
        pytest.param(make_pod("zero").req(**{"example.com/gpu": "0"}), True, id="a zero request still names it"),
        pytest.param(make_pod("lim").lim(**{"example.com/gpu": "1"}), True, id="limits one"),
        pytest.param(
            make_pod("init").init_container(**{"example.com/gpu": "1"}), True, id="an init container requests one"
        ),
        pytest.param(make_pod("other").req(**{"example.com/fpga": "1"}), False, id="another extended resource"),
    ],
)
def test_an_extender_with_managed_resources_sees_only_pods_that_ask_for_them(pod: Any, called: bool) -> None:
    ext = filtering(managed_resources=("example.com/gpu",), failed={"n0": "no"})
    run(scheduler(ext), nodes=2, pod=pod.obj())
    assert bool(ext.filtered) is called
    assert ext.is_interested(pod.obj()) is called


def test_a_rejected_nominated_node_falls_back_to_the_search() -> None:
    ext = filtering(failed={"n1": "no"})
    pod = dataclasses.replace(make_pod("p").obj(), nominated_node_name="n1")
    result = run(scheduler(ext), nodes=3, pod=pod)
    assert result.node in {"n0", "n2"}
    assert ext.filtered[0] == ["n1"] and sorted(ext.filtered[1]) == ["n0", "n1", "n2"]


@pytest.mark.parametrize(
    "make,searched",
    [
        pytest.param(lambda: filtering(), 5, id="a filter extender: every node is a candidate"),
        pytest.param(lambda: prioritizing(), 5, id="a prioritizer: every node is a candidate"),
        pytest.param(lambda: FakeExtender(config(bind_verb="bind")), 1, id="only a binder: the first feasible node"),
    ],
)
def test_extenders_that_choose_widen_the_search(make: Callable[[], FakeExtender], searched: int) -> None:
    # with no score plugins upstream stops at one feasible node unless an extender filters or scores
    assert run(scheduler(make()), nodes=5, explain=True).feasible_nodes == searched


# ----------------------------------------------------------------------------- prioritize


def test_extender_scores_are_scaled_and_weighted() -> None:
    plugin = ScoreByName({"n0": 50, "n1": 40, "n2": 0})
    ext = prioritizing(weight=2, scores={"n1": 1, "n2": 3})
    result = run(scheduler(ext, scorers=((plugin, 1),)), explain=True)
    # n0: 50 + 0*10*2 = 50;  n1: 40 + 1*10*2 = 60;  n2: 0 + 3*10*2 = 60
    totals = {s.node: s.total for s in result.scores}
    assert totals == {"n0": 50, "n1": 60, "n2": 60}
    assert result.node in {"n1", "n2"}
    parts = {s.node: s.parts for s in result.scores}
    # the extender's raw score is its own 0..10; normalised, x10
    assert parts["n2"] == (PluginScore("ScoreByName", 0, 0, 1), PluginScore("http://ext", 3, 30, 2))


def test_scores_of_several_extenders_add_up() -> None:
    a = prioritizing("http://a", weight=1, scores={"n0": 10})
    b = prioritizing("http://b", weight=5, scores={"n1": 3})
    result = run(scheduler(a, b), nodes=2, explain=True)
    # n0: 10*10*1 = 100;  n1: 3*10*5 = 150
    assert {s.node: s.total for s in result.scores} == {"n0": 100, "n1": 150}
    assert result.node == "n1"


def test_without_score_plugins_only_extender_scores_count() -> None:
    # no +1 per node when extenders are configured (upstream: zero plugin scores, then extender scores)
    ext = prioritizing(scores={"n0": 1})
    result = run(scheduler(ext), nodes=2, explain=True)
    assert {s.node: s.total for s in result.scores} == {"n0": 10, "n1": 0}


def test_a_failed_prioritize_call_only_loses_its_scores() -> None:
    broken = prioritizing("http://broken", weight=100, scores={"n0": 10}, prioritize_error="code 500")
    working = prioritizing("http://working", scores={"n1": 2})
    result = run(scheduler(broken, working), nodes=2)
    assert result.node == "n1"
    assert result.extender_errors == ["extender http://broken gave no scores: code 500"]


def test_scores_for_hosts_not_sent_are_ignored() -> None:
    ext = prioritizing(scores={"n0": 1})
    ext.prioritize = lambda pod, nodes: ExtenderPrioritizeResult((HostPriority("elsewhere", 10), HostPriority("n1", 1)))  # type: ignore[method-assign]
    result = run(scheduler(ext), nodes=2, explain=True)
    assert {s.node: s.total for s in result.scores} == {"n0": 0, "n1": 10}


def test_a_single_feasible_node_is_not_prioritized() -> None:
    f = filtering("http://f", failed={"n0": "no"})
    p = prioritizing("http://p")
    assert run(scheduler(f, p), nodes=2).node == "n1"
    assert p.prioritized == []


def test_an_uninterested_prioritizer_is_not_called() -> None:
    ext = FakeExtender(config(prioritize_verb="p", managed_resources=("example.com/gpu",)), scores={"n0": 10})
    run(scheduler(ext), nodes=2)
    assert ext.prioritized == []


def test_a_profile_with_extenders_needs_a_factory() -> None:
    with pytest.raises(ValueError, match="pass an extender_factory"):
        GenericScheduler(Profile("s", extenders=(config(filter_verb="f"),)))


# ----------------------------------------------------------------------------- bind


def _binders(*specs: tuple[str, bool, str, tuple[str, ...]]) -> list[Extender]:
    return [
        FakeExtender(config(url, bind_verb="bind", ignorable=ign, managed_resources=managed), bind_error=err)
        for url, ign, err, managed in specs
    ]


@pytest.mark.parametrize(
    "binders,expected",
    [
        pytest.param([], (None, ""), id="no binder: the API server binds"),
        pytest.param(
            [("http://b", False, "", ("example.com/gpu",))], (None, ""), id="a binder not interested in the pod"
        ),
        pytest.param([("http://b", False, "", ())], (Code.SUCCESS, "http://b"), id="the binder binds"),
        pytest.param([("http://b", False, "no room", ())], (Code.ERROR, "http://b"), id="its error fails the bind"),
        pytest.param([("http://b", True, "no room", ())], (None, ""), id="an ignorable binder's error falls through"),
    ],
)
def test_bind_with_extenders(
    binders: list[tuple[str, bool, str, tuple[str, ...]]], expected: tuple[Code | None, str]
) -> None:
    exts = _binders(*binders)
    pod = make_pod("p").obj()
    outcome = bind_with_extenders(exts, pod, "n1")
    assert (outcome.status.code if outcome.status else None, outcome.binder) == expected
    assert binds_with_extender(exts, pod) is any(e.is_interested(pod) for e in exts)
    if expected[0] is Code.ERROR:
        assert outcome.status is not None and outcome.status.message == "no room"


def test_an_ignorable_binder_is_skipped_and_reported() -> None:
    exts = _binders(("http://b", True, "timeout", ()))
    assert bind_with_extenders(exts, make_pod("p").obj(), "n1").skipped == ("http://b: timeout",)
