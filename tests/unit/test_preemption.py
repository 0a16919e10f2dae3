"""Preemption (core/toolkit/preemption.py, the DefaultPreemption plugin): tables ported from upstream v1.37's
``defaultpreemption/default_preemption_test.go`` (TestPostFilter, TestDryRunPreemption,
TestSelectBestCandidate, TestPodEligibleToPreemptOthers, TestPreempt, TestSelectVictimsOnNode)
and ``preemption/util_test.go`` (TestFilterVictimsWithPDBViolation), with the same pods, nodes,
priorities and expectations, plus our own cases for the candidate order and the messages.

Resources as upstream's: small 100m/100, medium 200m/200, large 300m/300, very large 500m/500
(cpu/memory bytes); nodes hold very large unless a case says otherwise, and 32 pods.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework import basics
from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState, Status
from kopf_scheduler.core.framework.diagnosis import Diagnosis
from kopf_scheduler.core.framework.interface import FilterPlugin, PostFilterResult, PreFilterExtensions
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import LabelSelector, Node, Pod, PodDisruptionBudget
from kopf_scheduler.core.model.parsing import ObjectError, parse_pod, parse_pod_disruption_budget
from kopf_scheduler.core.plugins.default_preemption import DefaultPreemption, DefaultPreemptionArgs
from kopf_scheduler.core.plugins.inter_pod_affinity import InterPodAffinity
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, Turn
from kopf_scheduler.core.state.queueing import Nominator
from kopf_scheduler.core.toolkit.preemption import (
    Candidate,
    Evaluator,
    calculate_num_candidates,
    dry_run_preemption,
    filter_victims_with_pdb_violation,
    pick_one_node_for_preemption,
    pod_eligible_to_preempt_others,
    select_victims_on_node,
)

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}


# --------------------------------------------------------------------------- builders


def pod(
    name: str,
    priority: int = 0,
    *,
    on: str = "",
    res: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    start: int | None = None,
    namespace: str = "default",
) -> Pod:
    b = make_pod(name, namespace).uid(name).priority(priority)
    if res:
        b.req(**res)
    if on:
        b.node(on)
    if labels:
        b.labels(labels)
    if start is not None:
        b.started(start)
    return b.obj()


def node(spec: str, res: dict[str, str] | None = None, **labels: str) -> Node:
    """``name[/zone]`` as upstream's node names; label ``hostname`` (and ``zone``) as upstream's tests."""
    name, *zone = spec.split("/")
    capacity = {"pods": "32", **(VERY_LARGE if res is None else res)}
    b = make_node(name).capacity(**capacity).label(hostname=name, **labels)
    if zone:
        b.label(zone=zone[0])
    return b.obj()


def pdb(
    labels: dict[str, str], allowed: int, *, disrupted: Sequence[str] = (), name: str = "pdb"
) -> PodDisruptionBudget:
    return PodDisruptionBudget("default", name, LabelSelector(labels), allowed, frozenset(disrupted))


def snapshot_of(nodes: Sequence[Node], pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget] = ()) -> Snapshot:
    objects = ClusterObjects()
    objects.pod_disruption_budgets = {f"{b.namespace}/{b.name}": b for b in pdbs}
    return Snapshot.of([node_info(n, *(p for p in pods if p.node_name == n.name)) for n in nodes], objects)


# --------------------------------------------------------------------------- fake plugins (upstream tf.*)


class FakeFilter(FilterPlugin):
    """Counts its calls; answers `code` on every node (upstream FakeFilterPlugin)."""

    NAME = "FakeFilter"

    def __init__(self, code: Code = Code.SUCCESS) -> None:
        super().__init__()
        self.code = code
        self.calls = 0

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        self.calls += 1
        return basics.SUCCESS if self.code is Code.SUCCESS else Status(self.code)


class FalseFilter(FilterPlugin):
    NAME = "FalseFilter"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.unschedulable("injecting failure for pod test")


class TrueFilter(FilterPlugin):
    NAME = "TrueFilter"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS


class MatchFilter(FilterPlugin):
    """Fits only the node named like the pod."""

    NAME = "MatchFilter"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS if pod.name == node.name else basics.unschedulable("injecting failure for pod test")


class TestPlugin(PreFilterExtensions, FilterPlugin):
    """Errs in AddPod / RemovePod on nodes labelled error=true (upstream's TestPlugin)."""

    __test__ = False
    NAME = "test-plugin"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        return basics.SUCCESS

    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return basics.error(f"failed to add pod: {pod.name}") if _error_node(node) else basics.SUCCESS

    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return basics.error(f"failed to remove pod: {pod.name}") if _error_node(node) else basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS


def _error_node(node: NodeInfo) -> bool:
    return node.node is not None and node.node.labels.get("error") == "true"


def scheduler(*filters: FilterPlugin, args: DefaultPreemptionArgs | None = None) -> GenericScheduler:
    return GenericScheduler(Profile("test", filters=filters, post_filters=(DefaultPreemption(args),)))


def pre_filtered(sched: GenericScheduler, pod: Pod, snapshot: Snapshot) -> CycleState:
    """A cycle state after the profile's pre-filters (upstream ``RunPreFilterPlugins``)."""
    state = CycleState()
    for plugin in sched.profile.pre_filters:
        status = plugin.pre_filter(state, pod, snapshot)
        if status.is_skip:
            state.skip_filter.add(plugin.name)
        assert status.is_success or status.is_skip, status
    return state


# --------------------------------------------------------------------------- TestPostFilter

U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def found(node_name: str, victims: int = 1) -> str:
    return f"preemption: found a potential placement for pod on node {node_name}, preempting {victims} victims"


@pytest.mark.parametrize(
    ("preemptor", "pods", "nodes", "statuses", "pdbs", "want_node", "want_code", "want_message"),
    [
        pytest.param(
            pod("p", HIGH), [pod("p1", on="node1")], [node("node1", ONE_POD)], {"node1": U}, [],
            "node1", Code.SUCCESS, found("node1"),
            id="pod with higher priority can be made schedulable",
        ),
        pytest.param(
            pod("p"), [pod("p1", on="node1")], [node("node1", ONE_POD)], {"node1": U}, [],
            "", Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            id="pod with tied priority is still unschedulable",
        ),
        pytest.param(
            pod("p", HIGH), [pod("p1", on="node1")], [node("node1", ONE_POD)], {"node1": UU}, [],
            "", Code.UNSCHEDULABLE, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            id="preemption respects the filter statuses",
        ),
        pytest.param(
            pod("p", HIGH), [pod("p1", on="node1")], [node("node1", ONE_POD)], {}, [],
            "", Code.UNSCHEDULABLE, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            id="a node without a status counts as UnschedulableAndUnresolvable",
        ),
        pytest.param(
            pod("p", MID), [pod("p1", HIGH, on="node1"), pod("p2", LOW, on="node2")],
            [node("node1", ONE_POD), node("node2", ONE_POD)], {"node1": U, "node2": U}, [],
            "node2", Code.SUCCESS, found("node2"),
            id="pod can be made schedulable on one node",
        ),
        pytest.param(
            pod("p", VERY_HIGH),
            [
                pod("p1", HIGH, on="node1", labels={"pdb": "non-violating"}),
                pod("p2", LOW, on="node1", labels={"pdb": "violating"}),
                pod("p3", MID, on="node2", labels={"pdb": "violating"}),
            ],
            [node("node1", ONE_POD), node("node2", ONE_POD)], {"node1": U, "node2": U},
            [
                pdb({"pdb": "violating"}, 0, name="violating"),
                pdb({"pdb": "non-violating"}, 2**31 - 1, name="non-violating"),
            ],
            # node1: p2 (violating) and p1 must go, 1 violation, highest victim HIGH;
            # node2: p3, 1 violation, highest MID
            "node2", Code.SUCCESS, found("node2"),
            id="pod can be made schedulable on the node whose highest victim priority is lowest",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), [pod("p1", on="node1"), pod("p2", on="node2")],
            [node("node1", NODE_RES), node("node2", NODE_RES)], {"node1": U, "node2": U}, [],
            "", Code.UNSCHEDULABLE, "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
            id="no candidate: not enough cpu even after removing the lower-priority pods",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE),
            [pod("p1", HIGH, on="node1"), pod("p2", on="node2"), pod("p3", HIGH, on="node3")],
            [node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
            {"node1": U, "node2": U, "node3": U}, [],
            "", Code.UNSCHEDULABLE,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
            id="no candidate with mixed reasons: no lower-priority pod, not enough cpu",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), [pod("p1", on="node1"), pod("p2", on="node2")],
            [node("node1", NODE_RES), node("node2", NODE_RES), node("node3", NODE_RES), node("node4", NODE_RES)],
            {"node1": U, "node2": U, "node4": UU}, [],
            "", Code.UNSCHEDULABLE,
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
            id="no candidate: two unresolvable nodes (one without a status) and two without enough cpu",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), [pod("p1", on="node1"), pod("p2", on="node2", res=MEDIUM)],
            [node("node1", LARGE, error="true"), node("node2", LARGE)], {"node1": U, "node2": U}, [],
            "node2", Code.SUCCESS, found("node2"),
            id="one node fails in a PreFilterExtension, the other is still a candidate",
        ),
    ],
)  # fmt: skip
def test_post_filter(
    preemptor: Pod,
    pods: list[Pod],
    nodes: list[Node],
    statuses: dict[str, Code],
    pdbs: list[PodDisruptionBudget],
    want_node: str,
    want_code: Code,
    want_message: str,
) -> None:
    got = post_filter(preemptor, nodes, pods, statuses, pdbs)
    assert (got.status.code, got.status.message) == (want_code, want_message)
    assert got.nominated_node == want_node
    if want_node:
        assert got.victims and all(v.node_name == want_node for v in got.victims)


def post_filter(
    preemptor: Pod,
    nodes: list[Node],
    pods: list[Pod],
    statuses: dict[str, Code],
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> PostFilterResult:
    snap = snapshot_of(nodes, pods, pdbs)
    sched = scheduler(NodeResourcesFit(), TestPlugin())
    state = pre_filtered(sched, preemptor, snap)
    diagnosis = Diagnosis(len(nodes), {name: Status(code) for name, code in statuses.items()})
    plugin = sched.profile.post_filters[0]
    return plugin.post_filter(state, preemptor, snap, diagnosis, sched.handle(random.Random(0)))


def test_post_filter_error_in_a_pre_filter_extension_on_the_only_node() -> None:
    got = post_filter(
        pod("p", HIGH, res=LARGE), [node("node1", LARGE, error="true")], [pod("p1", on="node1")], {"node1": U}
    )
    assert got.status.code is Code.ERROR
    assert (
        got.status.message == 'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p'
    )
    assert got.nominated_node is None and got.victims == ()  # an error leaves the nomination alone


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        pytest.param(["node1"], 'preemption: expected at least one victim pod on node "node1"', id="one node"),
        pytest.param(
            ["node1", "node2"],
            # in dry-run order: random.Random(0).randrange(2) == 1, so node2 first
            'preemption: [expected at least one victim pod on node "node2", '
            'expected at least one victim pod on node "node1"]',
            id="two nodes: apimachinery's aggregate of the errors",
        ),
    ],
)
def test_post_filter_error_when_the_pod_needs_no_victim(nodes: list[str], message: str) -> None:
    # the filters said Unschedulable, but the pod fits with every pod back: upstream calls that an error
    pods = [pod(f"v{i}", LOW, on=name, res=SMALL) for i, name in enumerate(nodes)]
    got = post_filter(pod("p", HIGH, res=SMALL), [node(n) for n in nodes], pods, dict.fromkeys(nodes, U))
    assert (got.status.code, got.status.message, got.nominated_node) == (Code.ERROR, message, None)


# --------------------------------------------------------------------------- TestDryRunPreemption


def dry_run(
    preemptor: Pod,
    nodes: list[Node],
    pods: list[Pod],
    *filters: FilterPlugin,
    fake: Code = Code.SUCCESS,
    pdbs: Sequence[PodDisruptionBudget] = (),
    offset: int = 0,
    args: DefaultPreemptionArgs | None = None,
) -> tuple[list[tuple[str, list[str], int]], int]:
    """(node, sorted victim names, PDB violations) per candidate, sorted by node; and FakeFilter's calls."""
    counter = FakeFilter(fake)
    sched = scheduler(counter, *filters)
    snap = snapshot_of(nodes, pods, pdbs)
    state = pre_filtered(sched, preemptor, snap)
    infos = sorted(snap.node_infos, key=lambda i: i.name)
    a = args or DefaultPreemptionArgs()
    wanted = calculate_num_candidates(len(infos), a.min_candidate_nodes_percentage, a.min_candidate_nodes_absolute)
    candidates, _, _ = dry_run_preemption(
        Evaluator(sched.handle(random.Random(0))), state, preemptor, infos, list(pdbs), offset, wanted
    )
    got = sorted((c.node, sorted(v.name for v in c.victims), c.num_pdb_violations) for c in candidates)
    return got, counter.calls


TWO_NODES = [node("node1"), node("node2")]
FIVE_NODES = [node(f"node{i}") for i in range(1, 6)]
FOO = {"app": "foo"}


def five(priorities: Sequence[int], labelled: Sequence[int] = ()) -> list[Pod]:
    """p1..p5 on node1..node5, large, with the given priorities; `labelled` (1-based) carry app=foo."""
    return [
        pod(f"p{i}", prio, on=f"node{i}", res=LARGE, labels=FOO if i in labelled else None)
        for i, prio in enumerate(priorities, 1)
    ]


@pytest.mark.parametrize(
    ("preemptor", "nodes", "pods", "filters", "fake", "expected", "calls"),
    [
        pytest.param(
            pod("p", HIGH), TWO_NODES, [pod("p1", MID, on="node1"), pod("p2", MID, on="node2")], (FalseFilter(),),
            Code.SUCCESS, [], 2,  # each node: the pod does not fit even with both pods gone
            id="a pod that does not fit on any node",
        ),
        pytest.param(
            pod("p", HIGH), TWO_NODES, [pod("p1", MID, on="node1"), pod("p2", MID, on="node2")], (TrueFilter(),),
            Code.UNSCHEDULABLE, [], 2,
            id="a fake filter that rejects every node",
        ),
        pytest.param(
            pod("node1", HIGH), TWO_NODES, [pod("p1", MID, on="node1"), pod("p2", MID, on="node2")], (MatchFilter(),),
            Code.UNSCHEDULABLE, [], 2,
            id="a pod that fits on one node with no preemption",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), TWO_NODES,
            [pod("p1", MID, on="node1", res=LARGE), pod("p2", MID, on="node2", res=LARGE)],
            (NodeResourcesFit(),), Code.SUCCESS,
            [("node1", ["p1"], 0), ("node2", ["p2"], 0)], 4,  # per node: fits without p*, not with it back
            id="a pod that fits on both nodes when lower priority pods are preempted",
        ),
        pytest.param(
            pod("p", LOW, res=LARGE), TWO_NODES,
            [pod("p1", MID, on="node1", res=LARGE), pod("p2", MID, on="node2", res=LARGE)],
            (NodeResourcesFit(),), Code.SUCCESS,
            [], 0,  # no pod of lower priority anywhere: no filter call at all
            id="the pods running are of higher priority, no preemption",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), TWO_NODES,
            [
                pod("p1.1", LOW, on="node1", res=SMALL), pod("p1.2", MID, on="node1", res=LARGE),
                pod("p2", MID, on="node2", res=LARGE),
            ],
            (NodeResourcesFit(),), Code.SUCCESS,
            # node1: p1.2 (300m) back leaves 300+300+100 > 500: evicted; p1.1 (100m) back fits: 1 + 2 calls; node2: 2
            [("node1", ["p1.2"], 0), ("node2", ["p2"], 0)], 5,
            id="the medium priority pod is preempted, the small lower priority one stays",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), TWO_NODES,
            [
                pod("p1.1", MID, on="node1", res=SMALL), pod("p1.2", LOW, on="node1", res=SMALL),
                pod("p1.3", MID, on="node1", res=MEDIUM), pod("p1.4", HIGH, on="node1", res=SMALL),
                pod("p2", HIGH, on="node2", res=LARGE),
            ],
            (NodeResourcesFit(),), Code.SUCCESS,
            # node1 without p1.1-3: 100+300 used; back in priority order: p1.1 fits (500), p1.3 not, p1.2 not
            [("node1", ["p1.2", "p1.3"], 0)], 4,
            id="mixed priority pods are preempted",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE), TWO_NODES,
            [
                pod("p1.1", LOW, on="node1", res=SMALL, start=5), pod("p1.2", LOW, on="node1", res=SMALL, start=4),
                pod("p1.3", MID, on="node1", res=MEDIUM, start=3), pod("p1.4", HIGH, on="node1", res=SMALL, start=2),
                pod("p2", HIGH, on="node2", res=LARGE, start=1),
            ],
            (NodeResourcesFit(),), Code.SUCCESS,
            # same priority: the earlier start (p1.2) is more important, so it is put back first and stays
            [("node1", ["p1.1", "p1.3"], 0)], 4,
            id="of equal priorities the later started pod is preempted",
        ),
        pytest.param(
            pod("p", HIGH, res=SMALL, labels={"foo": ""}), TWO_NODES,
            [
                make_pod("p1.1").uid("p1.1").priority(LOW).req(**SMALL).node("node1").label(foo="")
                .pod_affinity("hostname", {"foo": ""}, anti=True).obj(),
                pod("p1.2", MID, on="node1", res=SMALL), pod("p1.3", HIGH, on="node1", res=SMALL),
                pod("p2", HIGH, on="node2", res=SMALL),
            ],
            (NodeResourcesFit(), InterPodAffinity()), Code.SUCCESS,
            # p1.1's required anti-affinity rejects p (labelled foo) on its host: InterPodAffinity learns it
            # through RemovePod / AddPod on the cloned state
            [("node1", ["p1.1"], 0)], 3,
            id="pod with anti-affinity is preempted",
        ),
    ],
)  # fmt: skip
def test_dry_run_preemption(
    preemptor: Pod,
    nodes: list[Node],
    pods: list[Pod],
    filters: tuple[FilterPlugin, ...],
    fake: Code,
    expected: list[tuple[str, list[str], int]],
    calls: int,
) -> None:
    assert dry_run(preemptor, nodes, pods, *filters, fake=fake) == (expected, calls)


@pytest.mark.parametrize(
    ("pods", "pdbs", "expected", "calls"),
    [
        pytest.param(
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, labels=FOO),
                pod("p1.2", MID, on="node1", res=MEDIUM, labels=FOO),
            ],
            [pdb(FOO, 1)],
            # the budget of 1 is spent on p1.1; p1.2 violates; both must go (500 needed)
            [("node1", ["p1.1", "p1.2"], 1)], 3,
            id="preemption with violation of the same pdb",
        ),
        pytest.param(
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, labels=FOO),
                pod("p1.2", MID, on="node1", res=MEDIUM, labels=FOO),
            ],
            [pdb(FOO, 1, disrupted=["p2"])],
            [("node1", ["p1.1", "p1.2"], 1)], 3,
            id="a pdb whose disrupted pods do not include the victim",
        ),
        pytest.param(
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, labels=FOO),
                pod("p1.2", MID, on="node1", res=MEDIUM, labels=FOO),
            ],
            [pdb(FOO, 1, disrupted=["p1.2"])],
            [("node1", ["p1.1", "p1.2"], 0)], 3,  # p1.2's eviction was already counted: it spends nothing
            id="a pdb whose disrupted pods include the victim",
        ),
        pytest.param(
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, labels=FOO),
                pod("p1.2", MID, on="node1", res=MEDIUM, labels=FOO),
                pod("p1.3", MID, on="node1", res=MEDIUM, labels=FOO),
            ],
            [pdb(FOO, 1, disrupted=["p1.3"])],
            # p1.1 spends the budget, p1.2 violates, p1.3 is free: all three go, 1 violation
            [("node1", ["p1.1", "p1.2", "p1.3"], 1)], 4,
            id="a victim listed in disrupted pods counts as non-violating",
        ),
    ],
)  # fmt: skip
def test_dry_run_preemption_with_pdbs(
    pods: list[Pod], pdbs: list[PodDisruptionBudget], expected: list[tuple[str, list[str], int]], calls: int
) -> None:
    preemptor = pod("p", HIGH, res=VERY_LARGE)
    assert dry_run(preemptor, [node("node1")], pods, NodeResourcesFit(), pdbs=pdbs) == (expected, calls)


FORTY_PERCENT = DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1)


@pytest.mark.parametrize(
    ("pods", "pdbs", "args", "offset", "expected", "calls"),
    [
        pytest.param(
            five([MID] * 5), [], FORTY_PERCENT, 4,
            # 5 * 40% = 2 candidates; from node5: node5 yes, node1 yes
            [("node1", ["p1"], 0), ("node5", ["p5"], 0)], 4,
            id="all nodes are possible candidates, but the arguments limit to 2",
        ),
        pytest.param(
            five([MID, VERY_HIGH, MID, MID, VERY_HIGH]), [], FORTY_PERCENT, 4,
            # from node5: node5 no (0 calls), node1 yes, node2 no, node3 yes
            [("node1", ["p1"], 0), ("node3", ["p3"], 0)], 4,
            id="some nodes are not possible candidates, the arguments limit to 2",
        ),
        pytest.param(
            five([MID] * 5), [], FORTY_PERCENT, 1, [("node2", ["p2"], 0), ("node3", ["p3"], 0)], 4,
            id="offset 1 starts at node2",
        ),
        pytest.param(
            five([MID] * 5), [], FORTY_PERCENT, 3, [("node4", ["p4"], 0), ("node5", ["p5"], 0)], 4,
            id="offset 3 starts at node4",
        ),
        pytest.param(
            five([MID] * 5, labelled=(1, 2, 5)), [pdb(FOO, 0)],
            DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=2), 4,
            # node5 (violating), node1 (violating: 2 now, the list's capacity), node2 (violating, dropped),
            # node3 (non-violating): 3 found, at least one non-violating: stop; 4 nodes x 2 calls
            [("node1", ["p1"], 1), ("node3", ["p3"], 0), ("node5", ["p5"], 1)], 8,
            id="the dry run looks past the limit until a PDB-respecting node is found",
        ),
    ],
)  # fmt: skip
def test_dry_run_preemption_candidate_limits(
    pods: list[Pod],
    pdbs: list[PodDisruptionBudget],
    args: DefaultPreemptionArgs,
    offset: int,
    expected: list[tuple[str, list[str], int]],
    calls: int,
) -> None:
    preemptor = pod("p", HIGH, res=LARGE)
    assert dry_run(preemptor, FIVE_NODES, pods, NodeResourcesFit(), pdbs=pdbs, offset=offset, args=args) == (
        expected,
        calls,
    )


# --------------------------------------------------------------------------- TestSelectBestCandidate

THREE_NODES = [node("node1"), node("node2"), node("node3")]


@pytest.mark.parametrize(
    ("preemptor", "nodes", "pods", "expected"),
    [
        pytest.param(
            pod("p", HIGH, res=LARGE), TWO_NODES,
            [pod("p1", MID, on="node1", res=LARGE, start=0), pod("p2", MID, on="node2", res=LARGE, start=0)],
            {"node1", "node2"},
            id="a pod that fits on both nodes when lower priority pods are preempted",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, start=0), pod("p1.2", MID, on="node1", res=LARGE, start=0),
                pod("p2.1", MID, on="node2", res=MEDIUM, start=0), pod("p2.2", LOW, on="node2", res=MEDIUM, start=0),
                pod("p3.1", LOW, on="node3", res=MEDIUM, start=0), pod("p3.2", LOW, on="node3", res=MEDIUM, start=0),
            ],
            {"node3"},  # highest victim: node1 MID, node2 MID, node3 LOW
            id="node with min highest priority pod is picked",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, start=0), pod("p1.2", MID, on="node1", res=LARGE, start=0),
                pod("p2.1", MID, on="node2", res=LARGE, start=0), pod("p2.2", LOW, on="node2", res=MEDIUM, start=0),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=0), pod("p3.2", MID, on="node3", res=MEDIUM, start=0),
            ],
            {"node2"},  # all MID at the top; sums 200, 100, 200 (+ offsets)
            id="when highest priorities are the same, minimum sum of priorities is picked",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=SMALL, start=0), pod("p1.2", NEG, on="node1", res=SMALL, start=0),
                pod("p1.3", MID, on="node1", res=SMALL, start=0), pod("p1.4", NEG, on="node1", res=SMALL, start=0),
                pod("p2.1", MID, on="node2", res=LARGE, start=0), pod("p2.2", NEG, on="node2", res=MEDIUM, start=0),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=0), pod("p3.2", NEG, on="node3", res=SMALL, start=0),
                pod("p3.3", LOW, on="node3", res=SMALL, start=0),
            ],
            # sums with 2^31 added per victim: node2's two victims beat node1's four and node3's three
            {"node2"},
            id="when highest priority and sum are the same, minimum number of pods is picked",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=SMALL, start=0), pod("p1.2", NEG, on="node1", res=SMALL, start=0),
                pod("p1.3", NEG, on="node1", res=SMALL, start=0),
                pod("p2.1", MID, on="node2", res=LARGE, start=0), pod("p2.2", NEG, on="node2", res=MEDIUM, start=0),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=0), pod("p3.2", NEG, on="node3", res=SMALL, start=0),
                pod("p3.3", LOW, on="node3", res=SMALL, start=0),
            ],
            # raw sums: node1 -100, node2 0, node3 0; adjusted: node1 3*2^31-100 > node2 2*2^31
            {"node2"},
            id="sum of adjusted priorities is considered",
        ),
        pytest.param(
            pod("p", VERY_HIGH, res=VERY_LARGE), [node("node1"), node("node2"), node("node3"), node("node4")],
            [
                pod("p1.1", MID, on="node1", res=SMALL, start=0), pod("p1.2", LOW, on="node1", res=SMALL, start=0),
                pod("p1.3", LOW, on="node1", res=SMALL, start=0),
                pod("p2.1", HIGH, on="node2", res=LARGE, start=0),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=0), pod("p3.2", LOW, on="node3", res=SMALL, start=0),
                pod("p3.3", LOW, on="node3", res=SMALL, start=0), pod("p3.4", LOW, on="node3", res=MEDIUM, start=0),
                pod("p4.1", MID, on="node4", res=MEDIUM, start=0), pod("p4.2", MID, on="node4", res=SMALL, start=0),
                pod("p4.3", MID, on="node4", res=SMALL, start=0), pod("p4.4", NEG, on="node4", res=SMALL, start=0),
            ],
            {"node1"},
            id="non-overlapping lowest high priority, sum priorities, and number of pods",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, start=2), pod("p1.2", MID, on="node1", res=MEDIUM, start=2),
                pod("p2.1", MID, on="node2", res=MEDIUM, start=3), pod("p2.2", MID, on="node2", res=MEDIUM, start=3),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=1), pod("p3.2", MID, on="node3", res=MEDIUM, start=1),
            ],
            {"node2"},  # the latest earliest start: 3
            id="same priority, same number of victims, different start time for each node's pod",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", MID, on="node1", res=MEDIUM, start=4), pod("p1.2", MID, on="node1", res=MEDIUM, start=2),
                pod("p2.1", MID, on="node2", res=MEDIUM, start=5), pod("p2.2", MID, on="node2", res=MEDIUM, start=1),
                pod("p3.1", MID, on="node3", res=MEDIUM, start=3), pod("p3.2", MID, on="node3", res=MEDIUM, start=6),
            ],
            {"node3"},  # earliest starts: node1 2, node2 1, node3 3
            id="same priority, same number of victims, different start time for all pods",
        ),
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), THREE_NODES,
            [
                pod("p1.1", LOW, on="node1", res=MEDIUM, start=4), pod("p1.2", MID, on="node1", res=MEDIUM, start=2),
                pod("p2.1", MID, on="node2", res=MEDIUM, start=6), pod("p2.2", LOW, on="node2", res=MEDIUM, start=1),
                pod("p3.1", LOW, on="node3", res=MEDIUM, start=3), pod("p3.2", MID, on="node3", res=MEDIUM, start=5),
            ],
            {"node2"},  # only the MID victims' starts count: node1 2, node2 6, node3 5
            id="different priority, same number of victims, different start time for all pods",
        ),
    ],
)  # fmt: skip
def test_select_best_candidate(preemptor: Pod, nodes: list[Node], pods: list[Pod], expected: set[str]) -> None:
    sched = scheduler(NodeResourcesFit())
    snap = snapshot_of(nodes, pods)
    state = pre_filtered(sched, preemptor, snap)
    wanted = calculate_num_candidates(len(nodes), 10, 100)
    candidates, _, _ = dry_run_preemption(
        Evaluator(sched.handle(random.Random(0))), state, preemptor, snap.node_infos, [], 0, wanted
    )
    best = pick_one_node_for_preemption(candidates)
    assert best is not None and best.node in expected


def cand(node_name: str, *victims: tuple[int, int | None], pdb_violations: int = 0) -> Candidate:
    """A candidate whose victims are (priority, start) pairs, most important first."""
    return Candidate(
        node_name,
        tuple(pod(f"{node_name}-{i}", prio, start=start) for i, (prio, start) in enumerate(victims)),
        pdb_violations,
    )


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        pytest.param(
            [cand("a", (10, 0), pdb_violations=1), cand("b", (500, 0))], "b",
            id="fewest PDB violations beats lower priorities",
        ),
        pytest.param(
            [cand("a", (500, 0)), cand("b", (100, 0), (100, 0), (100, 0))], "b",
            id="lowest highest-victim priority beats more victims",
        ),
        pytest.param(
            [cand("a", (100, 0), (-5, 0)), cand("b", (100, 0), (0, 0))], "a",
            id="smallest sum of priorities: (100 + 2^31) + (-5 + 2^31) < (100 + 2^31) + (0 + 2^31)",
        ),
        pytest.param(
            [cand("a", (100, 0), (-100, 0)), cand("b", (100, 0))], "b",
            id="one victim's adjusted sum (100 + 2^31) beats two's even with a negative priority",
        ),
        pytest.param(
            [cand("a", (100, 5), (100, 9)), cand("b", (100, 7), (100, 8))], "b",
            id="latest earliest start of the top victims: 7 > 5",
        ),
        pytest.param(
            [cand("a", (100, 5)), cand("b", (100, None))], "b", id="a victim never started counts as started last"
        ),
        pytest.param(
            [cand("a", (100, None)), cand("b", (100, None))], "a", id="a complete tie goes to the first candidate"
        ),
    ],
)  # fmt: skip
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str) -> None:
    best = pick_one_node_for_preemption(candidates)
    assert best is not None and best.node == expected


def test_pick_one_node_of_none_is_none() -> None:
    assert pick_one_node_for_preemption([]) is None


# --------------------------------------------------------------------------- TestPodEligibleToPreemptOthers

PREEMPTED = ("DisruptionTarget", "True", "PreemptionByScheduler")


@pytest.mark.parametrize(
    ("preemptor", "pods", "nominated_status", "expected"),
    [
        pytest.param(
            make_pod("p").priority(HIGH).nominated("node1").obj(),
            [make_pod("p1").priority(LOW).node("node1").terminating().condition(*PREEMPTED).obj()],
            basics.unresolvable("node(s) had untolerated taint"), (True, ""),
            id="a nominated node now unresolvable for the pod: preempt again",
        ),
        pytest.param(make_pod("p").priority(HIGH).obj(), [], Status(U), (True, ""), id="pod without nominated node"),
        pytest.param(
            make_pod("p").priority(HIGH).preemption_policy("Never").obj(), [], Status(U),
            (False, "not eligible due to preemptionPolicy=Never."),
            id="pod with preemptionPolicy Never",
        ),
        pytest.param(
            make_pod("p").priority(HIGH).nominated("node1").obj(),
            [make_pod("p1").priority(LOW).node("node1").terminating().condition(*PREEMPTED).obj()],
            Status(U), (False, "not eligible due to a terminating pod on the nominated node."),
            id="a victim on the nominated node is terminating (DisruptionTarget PreemptionByScheduler)",
        ),
        pytest.param(
            make_pod("p").priority(HIGH).nominated("node1").obj(),
            [make_pod("p1").priority(LOW).node("node1").terminating().obj()],
            Status(U), (True, ""),
            id="non-victim pods terminating",
        ),
        pytest.param(
            make_pod("p").priority(HIGH).nominated("node1").obj(),
            [make_pod("p1").priority(HIGH).node("node1").terminating().condition(*PREEMPTED).obj()],
            Status(U), (True, ""),
            id="a terminating preempted pod of equal priority is not the preemptor's victim",
        ),
    ],
)  # fmt: skip
def test_pod_eligible_to_preempt_others(
    preemptor: Pod, pods: list[Pod], nominated_status: Status, expected: tuple[bool, str]
) -> None:
    snap = snapshot_of([node("node1")], pods)
    assert pod_eligible_to_preempt_others(preemptor, snap, nominated_status) == expected


# --------------------------------------------------------------------------- TestSelectVictimsOnNode


@pytest.mark.parametrize(
    ("preemptor", "pods", "pdbs", "victims", "violations", "code"),
    [
        pytest.param(
            pod("p", HIGH, res=LARGE), [pod("victim", LOW, on="node1", res=LARGE)], [], {"victim"}, 0, Code.SUCCESS,
            id="preempt a single lower priority pod",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE),
            [
                pod("high-prio", HIGH, on="node1", res=SMALL),
                pod("mid-prio", MID, on="node1", res=SMALL),
                pod("low-prio", LOW, on="node1", res=SMALL),
            ],
            [], {"low-prio"}, 0, Code.SUCCESS,
            id="prefer the lower priority victim",  # 100 (high) + 300 + 100 (mid) fits 500; low must go
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE),
            [
                pod("victim-pdb", LOW, on="node1", res=MEDIUM, labels=FOO),
                pod("victim-no-pdb", MID, on="node1", res=MEDIUM),
            ],
            [pdb(FOO, 0)], {"victim-no-pdb"}, 0, Code.SUCCESS,
            id="a non-violating victim of higher priority goes before a violating one of lower priority",
        ),
        pytest.param(
            pod("p", HIGH, res=LARGE),
            [pod("v1", LOW, on="node1", res=MEDIUM, labels=FOO), pod("v2", MID, on="node1", res=MEDIUM, labels=FOO)],
            [pdb(FOO, 0)], {"v1"}, 1, Code.SUCCESS,
            id="when every choice violates a PDB, the lower priority pod goes",
        ),
        pytest.param(
            pod("p", MID), [pod("victim", HIGH, on="node1")], [], set(), 0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            id="a victim of higher priority cannot be preempted",
        ),
        pytest.param(
            pod("p", MID), [], [], set(), 0, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, id="an empty node has no victim"
        ),
    ],
)  # fmt: skip
def test_select_victims_on_node(
    preemptor: Pod, pods: list[Pod], pdbs: list[PodDisruptionBudget], victims: set[str], violations: int, code: Code
) -> None:
    sched = scheduler(NodeResourcesFit())
    snap = snapshot_of([node("node1")], pods)
    state = pre_filtered(sched, preemptor, snap)
    got, got_violations, status = select_victims_on_node(
        state, preemptor, snap.node_infos[0].clone(), pdbs, sched.handle(random.Random(0))
    )
    assert ({v.name for v in got}, got_violations, status.code) == (victims, violations, code)
    if code is not Code.SUCCESS:
        assert status.message == "No preemption victims found for incoming pod"


def test_select_victims_on_node_leaves_the_snapshot_alone() -> None:
    preemptor = pod("p", HIGH, res=LARGE)
    snap = snapshot_of([node("node1")], [pod("victim", LOW, on="node1", res=LARGE)])
    sched = scheduler(NodeResourcesFit())
    state = pre_filtered(sched, preemptor, snap)
    original = snap.node_infos[0]
    select_victims_on_node(state.clone(), preemptor, original.clone(), [], sched.handle(random.Random(0)))
    assert [p.name for p in original.iter_pods()] == ["victim"] and original.requested.milli_cpu == 300


# --------------------------------------------------------------------------- TestFilterVictimsWithPDBViolation


def victim(name: str, labels: dict[str, str] | None = None, namespace: str = "default") -> Pod:
    return pod(name, labels=labels if labels is not None else FOO, namespace=namespace)


@pytest.mark.parametrize(
    ("victims", "pdbs", "violating", "non_violating"),
    [
        pytest.param([], [], [], [], id="no victims, no PDBs"),
        pytest.param([victim("p1")], [pdb({"app": "bar"}, 0)], [], ["p1"], id="victim with no matching PDB"),
        pytest.param([victim("p1", namespace="other")], [pdb(FOO, 0)], [], ["p1"], id="a PDB of another namespace"),
        pytest.param([victim("p1")], [pdb(FOO, 1)], [], ["p1"], id="victim matching a PDB with a disruption allowed"),
        pytest.param([victim("p1")], [pdb(FOO, 0)], ["p1"], [], id="victim matching a PDB with no disruption allowed"),
        pytest.param(
            [victim("p1"), victim("p2")], [pdb(FOO, 1)], ["p2"], ["p1"],
            id="multiple victims spend the same budget in order",
        ),
        pytest.param(
            [victim("p1")], [pdb(FOO, 0, disrupted=["p1"])], [], ["p1"], id="a pod in disruptedPods is ignored"
        ),
        pytest.param(
            [victim("p1")], [PodDisruptionBudget("default", "pdb", LabelSelector(), 0)], [], ["p1"],
            id="a PDB with an empty selector",
        ),
        pytest.param(
            [victim("p1")], [PodDisruptionBudget("default", "pdb", None, 0)], [], ["p1"], id="a PDB with no selector"
        ),
        pytest.param(
            [victim("p1", labels={})], [PodDisruptionBudget("default", "pdb", LabelSelector(), 0)], [], ["p1"],
            id="a pod without labels matches no PDB",
        ),
        pytest.param(
            [victim("p1", labels={"app": "foo", "tier": "backend"})],
            [pdb(FOO, 1, name="a"), pdb({"tier": "backend"}, 0, name="b")], ["p1"], [],
            id="one of several matching PDBs is exhausted",
        ),
    ],
)  # fmt: skip
def test_filter_victims_with_pdb_violation(
    victims: list[Pod], pdbs: list[PodDisruptionBudget], violating: list[str], non_violating: list[str]
) -> None:
    got_violating, got_non = filter_victims_with_pdb_violation(victims, pdbs)
    assert [p.name for p in got_violating] == violating
    assert [p.name for p in got_non] == non_violating


# --------------------------------------------------------------------------- TestPreempt, through the algorithm


@pytest.mark.parametrize(
    ("preemptor", "node_name", "victims", "message_tail"),
    [
        pytest.param(
            pod("p", HIGH, res=VERY_LARGE), "node1", {"p1.1", "p1.2"},
            "preemption: found a potential placement for pod on node node1, preempting 2 victims",
            id="basic preemption logic",  # node1: two LOW victims; node2 HIGH; node3 one MID
        ),
        pytest.param(
            make_pod("p").uid("p").priority(HIGH).req(**VERY_LARGE).preemption_policy("Never").obj(), None, set(),
            "preemption: not eligible due to preemptionPolicy=Never.",
            id="a pod with preemptionPolicy Never does not preempt",
        ),
    ],
)  # fmt: skip
def test_preempt_through_schedule(preemptor: Pod, node_name: str | None, victims: set[str], message_tail: str) -> None:
    pods = [
        pod("p1.1", LOW, on="node1", res=SMALL), pod("p1.2", LOW, on="node1", res=SMALL),
        pod("p2.1", HIGH, on="node2", res=LARGE), pod("p3.1", MID, on="node3", res=MEDIUM),
    ]  # fmt: skip
    sched = scheduler(NodeResourcesFit())
    result = sched.schedule(preemptor, snapshot_of(THREE_NODES, pods), rng=random.Random(0))
    assert result.node is None and result.post_filter is not None
    # every node lacks room for 500m: Insufficient cpu and memory on each
    assert result.message == f"0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory. {message_tail}"
    assert result.post_filter.nominated_node == node_name
    assert {v.name for v in result.post_filter.victims} == victims


def test_a_profile_without_preemption_leaves_the_message_and_the_nomination() -> None:
    sched = GenericScheduler(Profile("test", filters=(NodeResourcesFit(),)))
    result = sched.schedule(
        pod("p", HIGH, res=VERY_LARGE),
        snapshot_of([node("node1")], [pod("v", on="node1", res=SMALL)]),
        rng=random.Random(0),
    )
    assert result.message == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    assert result.post_filter is None


def test_a_pre_filter_rejection_is_not_helped_by_preemption() -> None:
    class Reject(PreFilterExtensions, FilterPlugin):
        NAME = "Reject"

        def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
            return basics.unresolvable("no way")

        def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
            return basics.SUCCESS

        def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
            return basics.SUCCESS

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            return basics.SUCCESS

    result = scheduler(Reject()).schedule(
        pod("p", HIGH), snapshot_of(TWO_NODES, [pod("v", on="node1")]), rng=random.Random(0)
    )
    # the pre-filter's status stands for every node, so no node is worth a dry run
    assert result.message == (
        "0/2 nodes are available: no way. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


# --------------------------------------------------------------------------- arguments


def test_default_arguments_are_upstreams() -> None:
    assert DefaultPreemption().args == DefaultPreemptionArgs(10, 100)
    assert DefaultPreemption.new({"minCandidateNodesPercentage": 40}).args == DefaultPreemptionArgs(40, 100)


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        pytest.param(
            {"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage", "not in valid range [0, 100]",
            id="negative percentage",
        ),
        pytest.param(
            {"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage", "not in valid range [0, 100]",
            id="percentage over 100",
        ),
        pytest.param(
            {"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute", "not in valid range [0, inf)",
            id="negative absolute",
        ),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "minCandidateNodesPercentage",
            "cannot be zero at the same time as minCandidateNodesAbsolute", id="both zero",
        ),
    ],
)  # fmt: skip
def test_argument_validation(raw: dict[str, int], field: str, message: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        DefaultPreemption.new(raw)
    assert (err.value.field, err.value.message) == (field, message)


@pytest.mark.parametrize(
    ("nodes", "percentage", "absolute", "expected"),
    [
        pytest.param(10, 10, 100, 10, id="fewer nodes than the absolute minimum: all of them"),
        pytest.param(5000, 10, 100, 500, id="10% of 5000 is more than 100"),
        pytest.param(500, 10, 100, 100, id="10% of 500 is less than 100"),
        pytest.param(5, 40, 1, 2, id="40% of 5 rounds down to 2"),
        pytest.param(5, 0, 3, 3, id="no percentage: the absolute number"),
    ],
)
def test_calculate_num_candidates(nodes: int, percentage: int, absolute: int, expected: int) -> None:
    assert calculate_num_candidates(nodes, percentage, absolute) == expected


# --------------------------------------------------------------------------- nominated pods (upstream addNominatedPods)


def nominator_with(*pods: tuple[Pod, str]) -> Nominator:
    n = Nominator()
    for p, node_name in pods:
        n.add(p, node_name)
    return n


@pytest.mark.parametrize(
    "check_all", [pytest.param(False, id="vector filters"), pytest.param(True, id="per-node filters")]
)
@pytest.mark.parametrize(
    ("priority", "same_pod", "fits"),
    [
        pytest.param(50, False, False, id="a lower-priority pod leaves the room to the nominated one"),
        pytest.param(100, False, False, id="an equal-priority pod leaves the room to the nominated one"),
        pytest.param(150, False, True, id="a higher-priority pod may take the room"),
        pytest.param(100, True, True, id="the nominated pod does not count against itself"),
    ],
)  # fmt: skip
def test_nominated_pods_hold_their_room(check_all: bool, priority: int, same_pod: bool, fits: bool) -> None:
    # n1: 2 cpu free; the nominated pod wants 1.5, the incoming one 1
    nominated = make_pod("nominated").uid("nominated").priority(100).req(cpu="1500m").obj()
    incoming = nominated if same_pod else make_pod("incoming").uid("incoming").priority(priority).req(cpu="1").obj()
    sched = GenericScheduler(Profile("test", filters=(NodeResourcesFit(),), always_check_all_predicates=check_all))
    snap = Snapshot.of([node_info(make_node("n1").capacity(cpu="2", memory="1Gi", pods="10").obj())])
    result = sched.schedule(incoming, snap, rng=random.Random(0), turn=Turn(nominator_with((nominated, "n1"))))
    assert result.node == ("n1" if fits else None)
    if not fits:
        assert result.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_nominated_pods_count_through_the_pre_filter_extensions() -> None:
    # the nominated pod refuses app=y pods on its host (required anti-affinity): InterPodAffinity must learn
    # of it through AddPod on a cloned state, since nothing is running there yet. (The incoming pod has a
    # term of its own, else InterPodAffinity's PreFilter skips it, as upstream's, and AddPod is not called.)
    nominated = (
        make_pod("nominated")
        .uid("nominated")
        .priority(100)
        .pod_affinity("kubernetes.io/hostname", {"app": "y"}, anti=True)
        .obj()
    )
    incoming = (
        make_pod("incoming")
        .uid("incoming")
        .priority(10)
        .label(app="y")
        .pod_affinity("kubernetes.io/hostname", {"app": "z"}, anti=True)
        .obj()
    )
    sched = GenericScheduler(Profile("test", filters=(NodeResourcesFit(), InterPodAffinity())))
    nodes = [node_info(make_node("n1").obj()), node_info(make_node("n2").obj())]
    result = sched.schedule(
        incoming, Snapshot.of(nodes), rng=random.Random(0), turn=Turn(nominator_with((nominated, "n1")))
    )
    assert result.node == "n2"
    result = sched.schedule(
        incoming, Snapshot.of(nodes[:1]), rng=random.Random(0), turn=Turn(nominator_with((nominated, "n1")))
    )
    assert result.message == "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
    # without the nomination the same pod fits n1
    assert sched.schedule(incoming, Snapshot.of(nodes[:1]), rng=random.Random(0)).node == "n1"


def test_nominated_pods_must_fit_without_them_too() -> None:
    # the incoming pod requires affinity to app=x; only the nominated pod has it: with it the filters pass,
    # without it they do not, and upstream asks for both (the nominated pod may land elsewhere)
    nominated = make_pod("nominated").uid("nominated").priority(100).label(app="x").obj()
    incoming = (
        make_pod("incoming").uid("incoming").priority(10).pod_affinity("kubernetes.io/hostname", {"app": "x"}).obj()
    )
    sched = GenericScheduler(Profile("test", filters=(InterPodAffinity(),)))
    snap = Snapshot.of([node_info(make_node("n1").obj())])
    result = sched.schedule(incoming, snap, rng=random.Random(0), turn=Turn(nominator_with((nominated, "n1"))))
    assert result.message == "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."


def test_the_dry_run_counts_nominated_pods() -> None:
    # node1 has a LOW pod (300m) and a MID pod nominated (300m): a HIGH pod of 300m preempts the LOW pod,
    # but a MID pod cannot, since the nominated MID pod's 300m stays counted (500m in all)
    pods = [pod("low", LOW, on="node1", res=LARGE)]
    nominated = pod("nominated", MID, res=LARGE)
    sched = scheduler(NodeResourcesFit())
    snap = snapshot_of([node("node1")], pods)
    nominator = nominator_with((nominated, "node1"))
    high = sched.schedule(pod("high", HIGH, res=LARGE), snap, rng=random.Random(0), turn=Turn(nominator))
    assert high.post_filter is not None and high.post_filter.nominated_node == "node1"
    mid = sched.schedule(pod("mid", MID, res=LARGE), snap, rng=random.Random(0), turn=Turn(nominator))
    assert mid.post_filter is not None and mid.post_filter.nominated_node == ""
    assert mid.message.endswith("preemption: 0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")


# --------------------------------------------------------------------------- what preemption reads of the API objects


def test_pod_fields_preemption_reads() -> None:
    plain = make_pod("p").obj()
    assert (plain.preemption_policy, plain.start_time, plain.disruption_target, plain.terminating_by_preemption) == (
        "PreemptLowerPriority",
        None,
        "",
        False,
    )
    victim = make_pod("v").preemption_policy("Never").started(90).terminating().condition(*PREEMPTED).obj()
    assert (
        victim.preemption_policy,
        victim.start_time,
        victim.disruption_target,
        victim.terminating_by_preemption,
    ) == ("Never", 90.0, "PreemptionByScheduler", True)
    # the condition alone (not being deleted), or another reason, is not a termination by preemption
    assert not make_pod("v").condition(*PREEMPTED).obj().terminating_by_preemption
    assert (
        not make_pod("v")
        .terminating()
        .condition("DisruptionTarget", "True", "DeletionByTaintManager")
        .obj()
        .terminating_by_preemption
    )


def test_a_bad_start_time_names_the_field() -> None:
    body = make_pod("p").raw()
    body["status"]["startTime"] = "yesterday"
    with pytest.raises(
        ObjectError, match=r"pod default/p: status.startTime: expected an RFC 3339 time, got 'yesterday'"
    ):
        parse_pod(body)


def test_pod_disruption_budget_fields() -> None:
    got = parse_pod_disruption_budget(
        {
            "metadata": {"name": "db", "namespace": "prod"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 2},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2030-01-01T00:00:00Z"}},
        }
    )
    assert (got.namespace, got.name, got.disruptions_allowed, got.disrupted_pods) == (
        "prod",
        "db",
        1,
        frozenset({"db-0"}),
    )
    assert got.selects(pod("db-1", labels={"app": "db"}, namespace="prod"))
    assert not got.selects(pod("db-1", labels={"app": "db"}, namespace="dev"))


# --------------------------------------------------------------------------- the FitError text


@pytest.mark.parametrize(
    ("diagnosis", "expected"),
    [
        pytest.param(
            Diagnosis(
                3,
                {"a": basics.unschedulable("Insufficient cpu")},
                basics.unresolvable("Preemption is not helpful for scheduling"),
            ),
            "0/3 nodes are available: 1 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
            id="nodes without a status count with the absent-nodes reasons",
        ),
        pytest.param(
            Diagnosis(
                2,
                {"a": basics.unschedulable("Insufficient cpu"), "b": basics.unschedulable("Insufficient cpu")},
                post_filter_msg="preemption: not eligible due to preemptionPolicy=Never.",
            ),
            "0/2 nodes are available: 2 Insufficient cpu. "
            "preemption: not eligible due to preemptionPolicy=Never.",
            id="the PostFilter message is appended as it is",
        ),
        pytest.param(
            Diagnosis(
                2, {}, basics.unresolvable("no way"), pre_filter_msg="no way", post_filter_msg="preemption: x"
            ),
            "0/2 nodes are available: no way. preemption: x",
            id="a pre-filter rejection is said once, not per node",
        ),
    ],
)  # fmt: skip
def test_fit_error_text(diagnosis: Diagnosis, expected: str) -> None:
    assert diagnosis.message() == expected
