"""PodTopologySpread: filter and score tables ported from upstream v1.37's filtering_test.go and
scoring_test.go (test names cited per case), the default constraints' selectors, AddPod / RemovePod
against a rebuilt snapshot, the arguments, and vector-vs-scalar agreement."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from builders import make_node, make_pod, node_info
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
)
from kopf_scheduler.core.model.parsing import ObjectError, parse_controller, parse_pod, parse_service
from kopf_scheduler.core.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    CriticalPaths,
    DefaultConstraint,
    Domains,
    PodTopologySpread,
    PodTopologySpreadArgs,
    default_selector,
)

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
HOST = LABEL_HOSTNAME

_names = itertools.count()


def node(name: str, labels: dict[str, str] | None = None, *, tainted: bool = False) -> Node:
    """A node with exactly ``labels`` (no automatic hostname label, as upstream's test nodes)."""
    b = make_node(name)
    b.body["metadata"]["labels"] = dict(labels or {})
    if tainted:
        b.taint(*UNSCHEDULABLE_TAINT)
    return b.obj()


def zoned(name: str, zone: str, **extra: str) -> Node:
    """Upstream's ``MakeNode().Name(n).Label("zone", z).Label("node", n)``."""
    return node(name, {"zone": zone, "node": name, **extra})


def hosted(name: str, zone: str | None = None) -> Node:
    labels = {HOST: name}
    if zone is not None:
        labels["zone"] = zone
    return node(name, labels)


def on(node_name: str, *keys: str, namespace: str = "default", terminating: bool = False, **labels: str) -> Pod:
    """A bound pod labelled ``key=""`` for each of ``keys`` (upstream ``Label("foo", "")``) and ``labels``."""
    b = make_pod(f"p{next(_names)}", namespace).labels({k: "" for k in keys}).labels(labels).node(node_name)
    if terminating:
        b.terminating()
    return b.obj()


def many(node_name: str, count: int, *keys: str) -> list[Pod]:
    return [on(node_name, *keys) for _ in range(count)]


def snapshot(nodes: list[Node], pods: list[Pod], objects: ClusterObjects | None = None) -> Snapshot:
    return Snapshot.of([node_info(n, *[p for p in pods if p.node_name == n.name]) for n in nodes], objects)


FOUR = [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"), zoned("node-y", "zone2")]
LIST = PodTopologySpreadArgs(defaulting_type="List")
SYSTEM = PodTopologySpreadArgs()
CODES = {"S": Code.SUCCESS, "U": Code.UNSCHEDULABLE, "UU": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def run_filter(pod: Pod, nodes: list[Node], pods: list[Pod], args: PodTopologySpreadArgs = LIST) -> str:
    """Per node, in order: S, U or UU; checks the reasons and that the vector form agrees."""
    snap = snapshot(nodes, pods)
    plugin = PodTopologySpread(args)
    state = CycleState()
    assert plugin.pre_filter(state, pod, snap).is_success
    statuses = [plugin.filter(state, pod, info) for info in snap.node_infos]
    for s in statuses:
        if s.code is Code.UNSCHEDULABLE:
            assert s.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
        elif s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            assert s.reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    vector = plugin.filter_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert vector.tolist() == [s.is_success for s in statuses]
    by_code = {v: k for k, v in CODES.items()}
    return " ".join(by_code[s.code] for s in statuses)


# --------------------------------------------------------------------------- filter: TestSingleConstraint


def _foo_pod(*constraints: tuple, labels: tuple[str, ...] = ("foo",)) -> Pod:
    b = make_pod("p").labels({k: "" for k in labels})
    for c in constraints:
        max_skew, key, selector, *rest = c
        b.spread(max_skew, key, "DoNotSchedule", selector, **(rest[0] if rest else {}))
    return b.obj()


SPREAD_2_1_0_3 = [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 3, "foo")]


@pytest.mark.parametrize(
    "pod, nodes, pods, want",
    [
        pytest.param(_foo_pod((1, "zone", FOO)), FOUR, [], "S S S S", id="TestSingleConstraint: no existing pods"),
        pytest.param(
            _foo_pod((1, "zone", BAR)),
            FOUR,
            [],
            "S S S S",
            id="TestSingleConstraint: no existing pods, the incoming pod does not match itself",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            # zone1 counts 0 (ns1 and ns2 pods are ignored), zone2 counts 2: 2 + 1 - 0 > 1 on zone2
            [
                on("node-a", "foo", namespace="ns1"),
                on("node-a", "foo", namespace="ns2"),
                on("node-x", "foo"),
                on("node-y", "foo"),
            ],
            "S S U U",
            id="TestSingleConstraint: existing pods in another namespace do not count",
        ),
        pytest.param(
            _foo_pod((1, "zone", None)),
            FOUR,
            [on("node-x", "foo"), on("node-y", "foo")],
            "S S S S",
            id="TestSingleConstraint: existing pods do not match a null selector (and neither does the pod)",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            # zone1: 3, zone2: 3 -> 3 + 1 - 3 = 1 <= 1 everywhere
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 3, "foo")],
            "S S S S",
            id="TestSingleConstraint: pods spread across zones as 3/3, all nodes fit",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            [
                zoned("node-a", "zone1"),
                node("node-b", {"zon": "zone1", "node": "node-b"}),
                zoned("node-x", "zone2"),
                zoned("node-y", "zone2"),
            ],
            # node-b has no zone: its pod is not counted; zone1: 1, zone2: 2 -> zone2: 2 + 1 - 1 > 1
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            "S UU U U",
            id="TestSingleConstraint: spread as 1/2 because node-b lacks the zone label",
        ),
        pytest.param(
            _foo_pod((1, "rack", FOO)),
            [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
            [],
            "UU UU",
            id="TestSingleConstraint: no node has the rack label",
        ),
        pytest.param(
            # min 0 (node-x): a 2+1, b 1+1, x 0+1, y 3+1 against maxSkew 1
            _foo_pod((1, "node", FOO)),
            FOUR,
            SPREAD_2_1_0_3,
            "U U S U",
            id="TestSingleConstraint: spread 2/1/0/3 over nodes, only node-x fits",
        ),
        pytest.param(
            _foo_pod((2, "node", FOO)),
            FOUR,
            SPREAD_2_1_0_3,
            "U S S U",
            id="TestSingleConstraint: spread 2/1/0/3, maxSkew 2, node-b and node-x fit",
        ),
        pytest.param(
            # the pod does not count itself: a 2, b 1, x 0, y 3 against maxSkew 1
            _foo_pod((1, "node", FOO), labels=("bar",)),
            FOUR,
            SPREAD_2_1_0_3,
            "U S S U",
            id="TestSingleConstraint: spread 2/1/0/3, the pod does not match itself",
        ),
        pytest.param(
            # only node-a (2) and node-y (3) are eligible: min 2; node-b/x read 1 and 0 (the filter
            # does not check affinity itself)
            make_pod("p")
            .label(foo="")
            .node_affinity_in("node", "node-a", "node-y")
            .spread(1, "node", "DoNotSchedule", FOO)
            .obj(),
            FOUR,
            SPREAD_2_1_0_3,
            "S S S U",
            id="TestSingleConstraint: node affinity leaves 2/~1~/~0~/3, so node-a fits",
        ),
        pytest.param(
            _foo_pod((1, "node", FOO)),
            [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
            [on("node-a", "foo", terminating=True), on("node-b", "foo")],
            "S U",
            id="TestSingleConstraint: terminating pods are excluded",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .required_node_terms({"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-b"]}]})
            .spread(1, "zone", "DoNotSchedule", FOO)
            .obj(),
            FOUR,
            # node-b's two pods do not count: zone1 0, zone2 1
            [*many("node-b", 2, "foo"), on("node-y", "foo")],
            "S S U U",
            id="TestSingleConstraint: node affinity leaves 0/~2~/0/1, so zone1 fits",
        ),
        pytest.param(
            # 3 domains < minDomains 4: the global minimum is 0; 2 + 1 - 0 > 2, 1 + 1 - 0 <= 2
            _foo_pod((2, "node", FOO, {"min_domains": 4})),
            [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
            [*many("node-a", 2, "foo"), *many("node-b", 2, "foo"), on("node-c", "foo")],
            "U U S",
            id="TestSingleConstraint: spread 2/2/1, fewer domains than minDomains, only the third node fits",
        ),
        pytest.param(
            _foo_pod((2, "node", FOO, {"min_domains": 2})),
            [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
            [*many("node-a", 2, "foo"), *many("node-b", 2, "foo"), on("node-c", "foo")],
            "S S S",
            id="TestSingleConstraint: spread 2/2/1, more domains than minDomains, all nodes fit",
        ),
        pytest.param(
            # zones 2/1 but 2 domains < 3: min 0 -> zone1 2 + 1 > 2
            _foo_pod((2, "zone", FOO, {"min_domains": 3})),
            FOUR,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S S",
            id="TestSingleConstraint: zones 2/1, fewer domains than minDomains, zone2 fits",
        ),
        pytest.param(
            _foo_pod((2, "zone", FOO, {"min_domains": 1})),
            FOUR,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "S S S S",
            id="TestSingleConstraint: zones 2/1, more domains than minDomains, all nodes fit",
        ),
        pytest.param(
            # node-y fails the nodeSelector: 1/1/0/~1~, min 0
            make_pod("p").label(foo="").node_selector(foo="").spread(1, "node", "DoNotSchedule", FOO).obj(),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"})],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S S",
            id="TestSingleConstraint: NodeAffinityPolicy honored with a nodeSelector",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .node_selector(foo="")
            .spread(1, "node", "DoNotSchedule", FOO, node_affinity_policy="Ignore")
            .obj(),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"})],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestSingleConstraint: NodeAffinityPolicy ignored with a nodeSelector",
        ),
        pytest.param(
            make_pod("p").label(foo="").node_affinity_in("foo", "").spread(1, "node", "DoNotSchedule", FOO).obj(),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"})],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S S",
            id="TestSingleConstraint: NodeAffinityPolicy honored with node affinity",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .node_affinity_in("foo", "")
            .spread(1, "node", "DoNotSchedule", FOO, node_affinity_policy="Ignore")
            .obj(),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"})],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestSingleConstraint: NodeAffinityPolicy ignored with node affinity",
        ),
        pytest.param(
            # the tainted node-y is left out: 1/1/0/~1~
            _foo_pod((1, "node", FOO, {"node_taints_policy": "Honor"})),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"}, tainted=True)],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S S",
            id="TestSingleConstraint: NodeTaintsPolicy honored",
        ),
        pytest.param(
            _foo_pod((1, "node", FOO)),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"}, tainted=True)],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestSingleConstraint: NodeTaintsPolicy ignored by default",
        ),
        pytest.param(
            # tolerated: node-y counts again
            make_pod("p")
            .label(foo="")
            .toleration(UNSCHEDULABLE_TAINT[0], operator="Exists")
            .spread(1, "node", "DoNotSchedule", FOO, node_taints_policy="Honor")
            .obj(),
            [node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")]
            + [node("node-y", {"node": "node-y"}, tainted=True)],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="NodeTaintsPolicy honored, but the pod tolerates the taint",
        ),
    ],
)
def test_filter_single_constraint(pod, nodes, pods, want):
    assert run_filter(pod, nodes, pods) == want


# --------------------------------------------------------------------------- filter: TestMultipleConstraints


def _two(zone_selector, node_selector, *, labels=("foo",), zone_policy=None, node_policy=None, node_sel=False) -> Pod:
    b = make_pod("p").labels({k: "" for k in labels})
    if node_sel:
        b.node_selector(foo="")
    b.spread(1, "zone", "DoNotSchedule", zone_selector, **(zone_policy or {}))
    b.spread(1, "node", "DoNotSchedule", node_selector, **(node_policy or {}))
    return b.obj()


FOO_NODES = [
    zoned("node-a", "zone1", foo=""),
    zoned("node-b", "zone1", foo=""),
    zoned("node-x", "zone2", foo=""),
    zoned("node-y", "zone2"),
]


@pytest.mark.parametrize(
    "pod, nodes, pods, want",
    [
        pytest.param(
            # zone: 3/3 -> anywhere; node: 2/1/0/3 -> node-x
            _two(FOO, FOO),
            FOUR,
            SPREAD_2_1_0_3,
            "U U S U",
            id="TestMultipleConstraints: zone and node, spreads [3/3, 2/1/0/3]",
        ),
        pytest.param(
            # zone: 3/4 -> zone1; node: 2/1/0/4 -> node-x: no intersection
            _two(FOO, FOO),
            FOUR,
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 4, "foo")],
            "U U U U",
            id="TestMultipleConstraints: zone and node, spreads [3/4, 2/1/0/4]",
        ),
        pytest.param(
            # zone(foo): 1/0 -> zone2; node(bar): 0/0/0/1 -> a, b, x
            _two(FOO, BAR, labels=("foo", "bar")),
            FOUR,
            [on("node-a", "foo"), on("node-y", "bar")],
            "U U S U",
            id="TestMultipleConstraints: different selectors, spreads [1/0, 1/0/0/1]",
        ),
        pytest.param(
            # zone(foo): 1/0 -> zone2; node(bar): 0/0/1/1 -> a, b
            _two(FOO, BAR, labels=("foo", "bar")),
            FOUR,
            [on("node-a", "foo"), on("node-x", "bar"), on("node-y", "bar")],
            "U U U U",
            id="TestMultipleConstraints: different selectors, spreads [1/0, 0/0/1/1]",
        ),
        pytest.param(
            # zone(foo): 2/3 -> zone1; node(bar): 1/0/0/1 -> b, x
            _two(FOO, BAR, labels=("foo", "bar")),
            FOUR,
            [
                on("node-a", "foo"),
                on("node-a", "foo", "bar"),
                on("node-y", "foo"),
                on("node-y", "foo", "bar"),
                on("node-y", "foo"),
            ],
            "U S U U",
            id="TestMultipleConstraints: different selectors, spreads [2/3, 1/0/0/1]",
        ),
        pytest.param(
            # the pod is not foo: zone 1/0 (+0) -> anywhere; node(bar) 0/0/1/1 -> a, b
            _two(FOO, BAR, labels=("bar",)),
            FOUR,
            [on("node-a", "foo"), on("node-x", "bar"), on("node-y", "bar")],
            "S S U U",
            id="TestMultipleConstraints: the pod does not match itself on the zone constraint",
        ),
        pytest.param(
            # node-x lacks "node": excluded from both counts; zone 1/1, node 1/0/-/1
            _two(FOO, FOO),
            [
                zoned("node-a", "zone1"),
                zoned("node-b", "zone1"),
                node("node-x", {"zone": "zone2"}),
                zoned("node-y", "zone2"),
            ],
            [on("node-a", "foo"), on("node-y", "foo")],
            "U S UU U",
            id="TestMultipleConstraints: node-x lacks the node label, spreads [1/1, 1/0/0/1]",
        ),
        pytest.param(
            # zone honours the nodeSelector: 2/0 -> zone2; node ignores it: 1/1/0/1 -> node-x
            _two(FOO, FOO, node_sel=True, node_policy={"node_affinity_policy": "Ignore"}),
            FOO_NODES,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestMultipleConstraints: zone honor/ignore, node ignore/ignore",
        ),
        pytest.param(
            # zone honours taints (node-y tainted): 2/0 -> zone2; node: 1/1/0/1 -> node-x
            _two(FOO, FOO, zone_policy={"node_taints_policy": "Honor"}),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1", foo=""),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y"}, tainted=True),
            ],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestMultipleConstraints: zone honor/honor, node honor/ignore",
        ),
        pytest.param(
            # nodeSelector foo: node-b out; zone 1/1 -> anywhere; node 1/~1~/0/1 -> node-b (not counted), node-x
            _two(FOO, FOO, node_sel=True),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1"),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True),
            ],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U S S U",
            id="TestMultipleConstraints: zone honor/ignore, node honor/ignore",
        ),
        pytest.param(
            # zone honours selector and taints: only a, x count: 1/0 -> zone2; node ignores both: 1/1/0/1 -> node-x
            _two(
                FOO,
                FOO,
                node_sel=True,
                zone_policy={"node_taints_policy": "Honor"},
                node_policy={"node_affinity_policy": "Ignore"},
            ),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1"),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True),
            ],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-y", "foo")],
            "U U S U",
            id="TestMultipleConstraints: zone honor/honor, node ignore/ignore",
        ),
        pytest.param(
            # bar: 2/1 -> zone2 (2 + 1 - 1 > 1 on zone1); foo: 3/3 -> anywhere
            make_pod("p")
            .label(foo="", bar="")
            .spread(1, "zone", "DoNotSchedule", BAR)
            .spread(1, "zone", "DoNotSchedule", FOO)
            .obj(),
            FOUR,
            [
                on("node-a", "foo", "bar"),
                on("node-a", "foo"),
                on("node-b", "foo", "bar"),
                on("node-y", "foo"),
                on("node-y", "foo", "bar"),
                on("node-y", "foo"),
            ],
            "U U S S",
            id="TestMultipleConstraints: two constraints on zone, spreads [3/3, 2/1]",
        ),
        pytest.param(
            # bar: 2/1 -> zone2; foo: 3/4 -> zone1
            make_pod("p")
            .label(foo="", bar="")
            .spread(1, "zone", "DoNotSchedule", BAR)
            .spread(1, "zone", "DoNotSchedule", FOO)
            .obj(),
            FOUR,
            [
                on("node-a", "foo", "bar"),
                on("node-a", "foo"),
                on("node-b", "foo", "bar"),
                on("node-y", "foo"),
                on("node-y", "foo", "bar"),
                *many("node-y", 2, "foo"),
            ],
            "U U U U",
            id="TestMultipleConstraints: two constraints on zone, spreads [3/4, 2/1]",
        ),
    ],
)
def test_filter_multiple_constraints(pod, nodes, pods, want):
    assert run_filter(pod, nodes, pods) == want


# --------------------------------------------------------------------------- pre-filter state: TestPreFilterState


def domain_counts(d: Domains) -> dict[str, int]:
    out = {value: int(d.counts[vid]) for value, vid in d.vocab.items() if d.present[vid]}
    out.update(d.extra)
    return out


def pre_filter(
    pod: Pod,
    nodes: list[Node],
    pods: list[Pod],
    args: PodTopologySpreadArgs = LIST,
    objects: ClusterObjects | None = None,
):
    plugin = PodTopologySpread(args)
    state = CycleState()
    snap = snapshot(nodes, pods, objects)
    status = plugin.pre_filter(state, pod, snap)
    return plugin, state, snap, status, state.read(plugin._filter_key)


@pytest.mark.parametrize(
    "pod, nodes, pods, want_counts, want_min",
    [
        pytest.param(
            make_pod("p").label(foo="").spread(5, "zone", "DoNotSchedule", {"matchLabels": {"foo": "bar"}}).obj(),
            FOUR,
            [],
            [{"zone1": 0, "zone2": 0}],
            [0],
            id="TestPreFilterState: clean cluster with one constraint",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 2, "foo")],
            [{"zone1": 3, "zone2": 2}],
            [2],
            id="TestPreFilterState: one constraint",
        ),
        pytest.param(
            _foo_pod((1, "zone", None)),
            FOUR,
            [*many("node-a", 2, "foo"), on("node-b", "foo")],
            [{"zone1": 0, "zone2": 0}],
            [0],
            id="TestPreFilterState: a null label selector counts nothing",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            [*FOUR, zoned("node-o", "zone3"), zoned("node-p", "zone3")],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 2, "foo")],
            [{"zone1": 3, "zone2": 2, "zone3": 0}],
            [0],
            id="TestPreFilterState: one constraint on a 3-zone cluster",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            [
                on("node-a", "foo"),
                on("node-a", "foo", namespace="ns1"),
                on("node-b", "foo"),
                on("node-y", "foo", namespace="ns2"),
                on("node-y", "foo"),
            ],
            [{"zone1": 2, "zone2": 1}],
            [1],
            id="TestPreFilterState: another namespace does not count",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .spread(1, "zone", "ScheduleAnyway", FOO)
            .spread(1, "zone", "DoNotSchedule", FOO)
            .spread(1, "node", "ScheduleAnyway", FOO)
            .spread(1, "node", "DoNotSchedule", FOO)
            .obj(),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-y", "zone2")],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 4, "foo")],
            [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            [3, 1],
            id="TestPreFilterState: soft constraints are bypassed",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .required_node_terms({"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-x"]}]})
            .spread(1, "zone", "DoNotSchedule", FOO)
            .spread(1, "node", "DoNotSchedule", FOO)
            .obj(),
            FOUR,
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 4, "foo")],
            [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            [3, 1],
            id="TestPreFilterState: two constraints, node affinity excludes node-x",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .node_selector(foo="")
            .spread(1, "node", "DoNotSchedule", BAR, node_affinity_policy="Ignore")
            .obj(),
            [
                node("node-a", {"node": "node-a", "foo": ""}),
                node("node-b", {"node": "node-b", "foo": ""}),
                node("node-c", {"node": "node-c", "bar": ""}),
            ],
            [on("node-a", "bar"), *many("node-b", 2, "bar"), on("node-c")],
            [{"node-a": 1, "node-b": 2, "node-c": 0}],
            [0],
            id="TestPreFilterState: NodeAffinityPolicy ignored with a nodeSelector",
        ),
        pytest.param(
            make_pod("p").label(foo="").spread(1, "node", "DoNotSchedule", BAR, node_taints_policy="Honor").obj(),
            [
                node("node-a", {"node": "node-a"}),
                node("node-b", {"node": "node-b"}),
                node("node-c", {"node": "node-c", "bar": ""}, tainted=True),
            ],
            [on("node-a", "bar"), *many("node-b", 2, "bar"), on("node-c")],
            [{"node-a": 1, "node-b": 2}],
            [1],
            id="TestPreFilterState: NodeTaintsPolicy honored",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="", bar="a")
            .spread(1, "zone", "DoNotSchedule", FOO, match_label_keys=["bar"])
            .obj(),
            FOUR,
            [
                on("node-a", "foo"),
                on("node-a", "foo", bar="a"),
                on("node-b", "foo"),
                on("node-y", "foo", bar="a"),
                on("node-y", "bar"),
            ],
            [{"zone1": 1, "zone2": 1}],
            [1],
            id="TestPreFilterState: matchLabelKeys ANDed with a non-empty labelSelector",
        ),
        pytest.param(
            make_pod("p").label(foo="a").spread(1, "zone", "DoNotSchedule", {}, match_label_keys=["foo"]).obj(),
            FOUR,
            [*many("node-a", 2), on("node-b"), *many("node-y", 2)],
            [{"zone1": 0, "zone2": 0}],
            [0],
            id="TestPreFilterState: matchLabelKeys on an empty selector (pods labelled foo=a only)",
        ),
        pytest.param(
            make_pod("p").label(foo="").spread(1, "zone", "DoNotSchedule", None, match_label_keys=["bar"]).obj(),
            FOUR,
            [on("node-a", foo="a"), on("node-y", foo="a")],
            [{"zone1": 0, "zone2": 0}],
            [0],
            id="TestPreFilterState: matchLabelKeys are ignored when the labelSelector is null",
        ),
        pytest.param(
            make_pod("p").label(foo="").spread(1, "zone", "DoNotSchedule", FOO, match_label_keys=["bar"]).obj(),
            FOUR,
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-y", 2, "foo")],
            [{"zone1": 3, "zone2": 2}],
            [2],
            id="TestPreFilterState: a matchLabelKeys key the pod lacks is ignored",
        ),
    ],
)
def test_pre_filter_state(pod, nodes, pods, want_counts, want_min):
    _, _, _, status, s = pre_filter(pod, nodes, pods)
    assert status.is_success
    assert [domain_counts(d) for d in s.domains] == want_counts
    assert [d.min_match(c.min_domains) for c, d in zip(s.constraints, s.domains)] == want_min


def test_match_label_keys_on_an_empty_selector_count_the_pods_with_the_value():
    # TestPreFilterState "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"
    pod = make_pod("p").label(foo="a").spread(1, "zone", "DoNotSchedule", {}, match_label_keys=["foo"]).obj()
    pods = [*many("node-a", 2), on("node-b"), *many("node-y", 2)]
    pods = [on(p.node_name, foo="a") for p in pods]
    _, _, _, _, s = pre_filter(pod, FOUR, pods)
    assert domain_counts(s.domains[0]) == {"zone1": 3, "zone2": 2}
    assert s.constraints[0].selector == LabelSelector({}, (LabelSelectorRequirement("foo", "In", frozenset({"a"})),))


def test_an_empty_selector_counts_no_existing_pod_but_matches_the_pod_itself():
    # upstream countPodsMatchSelector returns 0 for an empty selector, while Filter's self-match is true
    pod = make_pod("p").label(foo="").spread(1, "node", "DoNotSchedule", {}).obj()
    nodes = [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})]
    _, _, _, _, s = pre_filter(pod, nodes, [*many("node-a", 3, "foo")])
    assert domain_counts(s.domains[0]) == {"node-a": 0, "node-b": 0} and s.self_match == (1,)
    assert run_filter(pod, nodes, [*many("node-a", 3, "foo")]) == "S S"


@pytest.mark.parametrize(
    "pod, args, objects",
    [
        pytest.param(make_pod("p").label(foo="").obj(), LIST, None, id="no constraints and no defaults"),
        pytest.param(
            make_pod("p").label(foo="").spread(1, "zone", "ScheduleAnyway", FOO).obj(),
            LIST,
            None,
            id="only ScheduleAnyway constraints",
        ),
        pytest.param(
            make_pod("p").label(foo="bar").obj(),
            PodTopologySpreadArgs(),
            ClusterObjects(
                services={"default/s": parse_service({"metadata": {"name": "s"}, "spec": {"selector": {"foo": "bar"}}})}
            ),
            id="system defaults are all ScheduleAnyway",
        ),
        pytest.param(
            make_pod("p").label(foo="bar").obj(),
            PodTopologySpreadArgs(
                default_constraints=(DefaultConstraint(3, "node", "DoNotSchedule"),), defaulting_type="List"
            ),
            ClusterObjects(
                services={"default/s": parse_service({"metadata": {"name": "s"}, "spec": {"selector": {"baz": "kep"}}})}
            ),
            id="TestPreFilterState: default constraints and a service that does not match",
        ),
        pytest.param(
            make_pod("p").label(foo="bar").obj(),
            PodTopologySpreadArgs(
                default_constraints=(DefaultConstraint(2, "node", "ScheduleAnyway"),), defaulting_type="List"
            ),
            ClusterObjects(
                services={"default/s": parse_service({"metadata": {"name": "s"}, "spec": {"selector": {"foo": "bar"}}})}
            ),
            id="TestPreFilterState: default soft constraints and a service",
        ),
    ],
)
def test_pre_filter_skips(pod, args, objects):
    assert pre_filter(pod, FOUR, [], args, objects)[3].is_skip


def test_default_constraints_take_the_service_selector():
    # TestPreFilterState "default constraints and a service"
    args = PodTopologySpreadArgs(
        default_constraints=(
            DefaultConstraint(3, "node", "DoNotSchedule"),
            DefaultConstraint(2, "node", "ScheduleAnyway"),
            DefaultConstraint(5, "rack", "DoNotSchedule"),
        ),
        defaulting_type="List",
    )
    objects = ClusterObjects(
        services={"default/s": parse_service({"metadata": {"name": "s"}, "spec": {"selector": {"foo": "bar"}}})}
    )
    pod = make_pod("p").label(foo="bar", baz="kar").obj()
    _, _, _, status, s = pre_filter(pod, [], [], args, objects)
    assert status.is_success
    assert [(c.max_skew, c.topology_key, c.selector) for c in s.constraints] == [
        (3, "node", LabelSelector({"foo": "bar"})),
        (5, "rack", LabelSelector({"foo": "bar"})),
    ]
    assert [d.paths for d in s.domains] == [CriticalPaths(), CriticalPaths()]


def test_a_pods_own_constraints_replace_the_defaults():
    # TestPreFilterState "default constraints and a service, but pod has constraints"
    args = PodTopologySpreadArgs(
        default_constraints=(DefaultConstraint(2, "node", "DoNotSchedule"),), defaulting_type="List"
    )
    objects = ClusterObjects(
        services={"default/s": parse_service({"metadata": {"name": "s"}, "spec": {"selector": {"foo": "bar"}}})}
    )
    pod = (
        make_pod("p")
        .label(foo="bar", baz="tar")
        .spread(1, "zone", "DoNotSchedule", {"matchLabels": {"baz": "tar"}})
        .spread(2, "planet", "ScheduleAnyway", {"matchLabels": {"fot": "rok"}})
        .obj()
    )
    _, _, _, _, s = pre_filter(pod, [], [], args, objects)
    assert [(c.max_skew, c.topology_key, c.selector) for c in s.constraints] == [
        (1, "zone", LabelSelector({"baz": "tar"}))
    ]


# --------------------------------------------------------------------------- critical paths


@pytest.mark.parametrize(
    "updates, want",
    [
        pytest.param([("a", 1), ("b", 2)], CriticalPaths("a", 1, "b", 2), id="two domains in order"),
        pytest.param([("a", 2), ("b", 1)], CriticalPaths("b", 1, "a", 2), id="a smaller domain goes first"),
        pytest.param(
            [("a", 1), ("b", 2), ("c", 0)],
            CriticalPaths("c", 0, "a", 1),
            id="a third, smaller domain pushes the first down",
        ),
        pytest.param([("a", 1), ("b", 1)], CriticalPaths("a", 1, "b", 1), id="ties keep the earlier domain first"),
        pytest.param(
            [("a", 1), ("b", 2), ("a", 3)],
            CriticalPaths("b", 2, "a", 3),
            id="a tracked domain growing past the other swaps",
        ),
        # upstream's caveat: with a, b, c at 1 and only a, b tracked, growing both hides c's 1
        pytest.param(
            [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2)],
            CriticalPaths("b", 2, "a", 2),
            id="additions can hide an untracked minimum, as upstream",
        ),
    ],
)
def test_critical_paths(updates, want):
    paths = CriticalPaths()
    for value, num in updates:
        paths = paths.update(value, num)
    assert paths == want


# --------------------------------------------------------------------------- AddPod / RemovePod


def test_add_pod_updates_counts_and_minimum():
    # TestPreFilterStateAddPod "node a and b both impact current min match"
    pod = _foo_pod((1, "node", FOO))
    nodes = [zoned("node-a", "zone1"), zoned("node-b", "zone1")]
    plugin, state, snap, _, before = pre_filter(pod, nodes, [])
    assert plugin.add_pod(state, pod, on("node-a", "foo"), snap.get("node-a")).is_success
    after = state.read(plugin._filter_key)
    assert domain_counts(after.domains[0]) == {"node-a": 1, "node-b": 0} and after.domains[0].min_match(1) == 0
    assert domain_counts(before.domains[0]) == {"node-a": 0, "node-b": 0}  # the original state is untouched


@pytest.mark.parametrize(
    "added, node_name, want",
    [
        pytest.param(
            on("node-b", "foo"),
            "node-b",
            {"zone1": 1, "zone2": 2},
            id="TestPreFilterStateAddPod: a pod on a counted node",
        ),
        pytest.param(
            on("node-b", "bar"),
            "node-b",
            {"zone1": 1, "zone2": 1},
            id="a pod the selector does not select changes nothing",
        ),
        pytest.param(
            on("node-b", "foo", namespace="other"),
            "node-b",
            {"zone1": 1, "zone2": 1},
            id="a pod of another namespace changes nothing",
        ),
    ],
)
def test_add_pod(added, node_name, want):
    pod = (
        make_pod("p")
        .label(foo="")
        .toleration(UNSCHEDULABLE_TAINT[0], operator="Exists")
        .spread(1, "zone", "DoNotSchedule", FOO)
        .obj()
    )
    nodes = [node("node-a", {"zone": "zone1", "node": "node-a"}, tainted=True), zoned("node-b", "zone2")]
    plugin, state, snap, _, _ = pre_filter(pod, nodes, [on("node-a", "foo"), on("node-b", "foo")])
    plugin.add_pod(state, pod, added, snap.get(node_name))
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == want


@pytest.mark.parametrize(
    "pod, nodes, existing, victim, want, want_min",
    [
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR[:3],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo")],
            0,
            {"zone1": 1, "zone2": 1},
            1,
            id="TestPreFilterStateRemovePod: one constraint on zone, minimum unchanged",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            0,
            {"zone1": 1, "zone2": 2},
            1,
            id="TestPreFilterStateRemovePod: one constraint on zone, minimum changed",
        ),
        pytest.param(
            _foo_pod((1, "zone", FOO)),
            FOUR,
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo"), on("node-y", "foo")],
            -1,
            {"zone1": 2, "zone2": 2},
            2,
            id="TestPreFilterStateRemovePod: removing a pod the constraint does not select changes nothing",
        ),
        pytest.param(
            make_pod("p").label(foo="").node_selector(foo="").spread(1, "zone", "DoNotSchedule", FOO).obj(),
            [zoned("node-a", "zone1", foo=""), zoned("node-b", "zone1"), zoned("node-x", "zone2", foo="")],
            [on("node-a", "foo"), on("node-b", "foo"), on("node-x", "foo")],
            1,
            {"zone1": 1, "zone2": 1},
            1,
            id="TestPreFilterStateRemovePod: a pod on a node the nodeSelector excludes does not count",
        ),
    ],
)
def test_remove_pod(pod, nodes, existing, victim, want, want_min):
    plugin, state, snap, _, _ = pre_filter(pod, nodes, existing)
    removed = existing[victim] if victim >= 0 else on("node-a", "bar")
    assert plugin.remove_pod(state, pod, removed, snap.get(removed.node_name)).is_success
    d = state.read(plugin._filter_key).domains[0]
    assert domain_counts(d) == want and d.min_match(1) == want_min


# ---- the what-ifs agree with a snapshot rebuilt without (or with) the pod

ZONES = ("z1", "z2", "z3")
KEYS = ("foo", "bar")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    n = draw(st.integers(2, 7))
    nodes = []
    for i in range(n):
        labels = {HOST: f"n{i}", "node": f"n{i}"}
        if draw(st.booleans()) or i == 0:
            labels["zone"] = draw(st.sampled_from(ZONES))
        nodes.append(node(f"n{i}", labels, tainted=draw(st.integers(0, 4)) == 0))
    pods = []
    for _ in range(draw(st.integers(0, 14))):
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True))
        pods.append(
            on(
                f"n{draw(st.integers(0, n - 1))}",
                *keys,
                namespace=draw(st.sampled_from(("default", "default", "other"))),
            )
        )
    b = make_pod("incoming").labels({k: "" for k in draw(st.lists(st.sampled_from(KEYS), unique=True))})
    if draw(st.booleans()):
        b.node_selector_map({"zone": draw(st.sampled_from(ZONES))})
    for _ in range(draw(st.integers(1, 2))):
        b.spread(
            draw(st.integers(1, 2)),
            draw(st.sampled_from(("zone", "node", HOST))),
            draw(st.sampled_from(("DoNotSchedule", "ScheduleAnyway"))),
            {"matchExpressions": [{"key": draw(st.sampled_from(KEYS)), "operator": "Exists"}]},
            min_domains=draw(st.sampled_from((None, 1, 3))),
            node_affinity_policy=draw(st.sampled_from((None, "Honor", "Ignore"))),
            node_taints_policy=draw(st.sampled_from((None, "Honor", "Ignore"))),
        )
    return nodes, pods, b.obj()


def _verdicts(plugin: PodTopologySpread, state: CycleState, pod: Pod, snap: Snapshot) -> list[Code]:
    return [plugin.filter(state, pod, info).code for info in snap.node_infos]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_remove_pod_equals_a_rebuilt_snapshot(cluster, data):
    nodes, pods, pod = cluster
    if not pods:
        return
    victim = data.draw(st.sampled_from(pods))
    plugin, state, snap, status, _ = pre_filter(pod, nodes, pods)
    if status.is_skip:
        return
    what_if = state.clone()
    plugin.remove_pod(what_if, pod, victim, snap.get(victim.node_name))
    again, rebuilt_state, rebuilt, _, rebuilt_s = pre_filter(pod, nodes, [p for p in pods if p is not victim])
    got = what_if.read(plugin._filter_key)
    assert [domain_counts(d) for d in got.domains] == [domain_counts(d) for d in rebuilt_s.domains]
    # removals keep the critical paths exact
    assert [d.min_match(c.min_domains) for c, d in zip(got.constraints, got.domains)] == [
        d.min_match(c.min_domains) for c, d in zip(rebuilt_s.constraints, rebuilt_s.domains)
    ]
    assert _verdicts(plugin, what_if, pod, snap) == _verdicts(again, rebuilt_state, pod, rebuilt)


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_add_pod_equals_a_rebuilt_snapshot(cluster, data):
    nodes, pods, pod = cluster
    keys = data.draw(st.lists(st.sampled_from(KEYS), unique=True))
    added = on(data.draw(st.sampled_from([n.name for n in nodes])), *keys)
    plugin, state, snap, status, _ = pre_filter(pod, nodes, pods)
    if status.is_skip:
        return
    what_if = state.clone()
    plugin.add_pod(what_if, pod, added, snap.get(added.node_name))
    again, rebuilt_state, rebuilt, _, rebuilt_s = pre_filter(pod, nodes, [*pods, added])
    got = what_if.read(plugin._filter_key)
    assert [domain_counts(d) for d in got.domains] == [domain_counts(d) for d in rebuilt_s.domains]
    for c, d, r in zip(got.constraints, got.domains, rebuilt_s.domains):
        # one addition never hides the minimum (it takes two, see test_critical_paths)
        assert d.min_match(c.min_domains) == r.min_match(c.min_domains)
    assert _verdicts(plugin, what_if, pod, snap) == _verdicts(again, rebuilt_state, pod, rebuilt)


def test_what_ifs_count_a_deleting_pod_as_upstream():
    # upstream updateWithPod does not look at deletionTimestamp: removing a terminating pod (never
    # counted) lowers its domain below the recount
    pod = _foo_pod((1, "node", FOO))
    nodes = [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})]
    dying = on("node-a", "foo", terminating=True)
    plugin, state, snap, _, _ = pre_filter(pod, nodes, [dying, on("node-a", "foo")])
    plugin.remove_pod(state, pod, dying, snap.get("node-a"))
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"node-a": 0, "node-b": 0}


def test_what_ifs_without_pre_filter_state_change_nothing():
    plugin = PodTopologySpread(LIST)
    state = CycleState()
    pod = make_pod("p").obj()
    assert plugin.add_pod(state, pod, on("node-a", "foo"), node_info(FOUR[0])).is_success
    assert state.read(plugin._filter_key) is None


# --------------------------------------------------------------------------- score: TestPodTopologySpreadScore


def run_score(pod, nodes, failed, pods, *, args=SYSTEM, objects=None) -> list[int] | None:
    """Normalised scores of ``nodes`` (the candidates; ``failed`` are in the snapshot only); scalar and vector agree."""
    snap = snapshot([*nodes, *failed], pods, objects)
    plugin = PodTopologySpread(args)
    state = CycleState()
    candidates = [snap.get(n.name) for n in nodes]
    status = plugin.pre_score(state, pod, candidates, snap)
    if status.is_skip:
        return None
    assert status.is_success
    raw = np.array([plugin.score(state, pod, info) for info in candidates], dtype=np.int64)
    index = np.array([snap.table.position[n.name] for n in nodes], dtype=np.intp)
    assert plugin.score_nodes(state, pod, snap.table, index).tolist() == raw.tolist()
    return plugin.normalize_scores(state, pod, raw).tolist()


def _soft(*constraints: tuple, labels: tuple[str, ...] = ("foo",)) -> Pod:
    b = make_pod("p").labels({k: "" for k in labels})
    for c in constraints:
        max_skew, key, selector, *rest = c
        b.spread(max_skew, key, "ScheduleAnyway", selector, **(rest[0] if rest else {}))
    return b.obj()


HOSTS4 = [hosted("node-a"), hosted("node-b"), hosted("node-c"), hosted("node-d")]
SPREAD_4_3_2_1 = [*many("node-a", 4, "foo"), *many("node-b", 3, "foo"), *many("node-c", 2, "foo"), on("node-d", "foo")]
POLICY_NODES = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-c", {"node": "node-c"}),
]
TAINT_NODES = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c"}, tainted=True),
]
POLICY_PODS = [*many("node-a", 2, "foo"), on("node-b", "foo"), on("node-c", "foo")]


@pytest.mark.parametrize(
    "pod, nodes, failed, pods, want",
    [
        pytest.param(
            _soft((1, HOST, FOO)),
            HOSTS4[:2],
            [],
            [],
            [100, 100],
            id="TestPodTopologySpreadScore: one constraint on node, no existing pods",
        ),
        pytest.param(
            _soft((1, HOST, FOO)),
            HOSTS4[:1],
            HOSTS4[1:2],
            [*many("node-a", 2, "foo"), on("node-b", "foo")],
            [100],
            id="TestPodTopologySpreadScore: only one candidate scores 100",
        ),
        pytest.param(
            _soft((1, HOST, FOO)),
            HOSTS4[:2],
            [],
            [on("node-a", "foo"), on("node-b", "foo")],
            [100, 100],
            id="TestPodTopologySpreadScore: all nodes have the same number of matching pods",
        ),
        pytest.param(
            # weight log(4 + 2) = 1.79; raw round(2w)=4, round(w)=2, 0, round(3w)=5;
            # normalised 100 * (5 + 0 - s) // 5 -> 20, 60, 100, 0
            _soft((1, HOST, FOO)),
            HOSTS4,
            [],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-d", 3, "foo")],
            [20, 60, 100, 0],
            id="TestPodTopologySpreadScore: one constraint on node, 4 candidates spread 2/1/0/3",
        ),
        pytest.param(
            _soft((1, HOST, None)),
            HOSTS4,
            [],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-d", 3, "foo")],
            [100, 100, 100, 100],
            id="TestPodTopologySpreadScore: a null selector counts nothing",
        ),
        pytest.param(
            # + maxSkew - 1 = 1 each: round(2w + 1) = 5, round(w + 1) = 3, 1, round(3w + 1) = 6
            # -> 100 * (6 + 1 - s) // 6 = 33, 66, 100, 16
            _soft((2, HOST, FOO)),
            HOSTS4,
            [],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-d", 3, "foo")],
            [33, 66, 100, 16],
            id="TestPodTopologySpreadScore: spread 2/1/0/3, maxSkew 2",
        ),
        pytest.param(
            _soft((3, HOST, FOO)),
            HOSTS4,
            [],
            SPREAD_4_3_2_1,
            [44, 66, 77, 100],
            id="TestPodTopologySpreadScore: spread 4/3/2/1, maxSkew 3",
        ),
        pytest.param(
            # w = log(3 + 2) = 1.61: round(4w)=6, round(2w)=3, round(w)=2 -> 100 * (6 + 2 - s) // 6
            _soft((1, HOST, FOO)),
            [hosted("node-a"), hosted("node-b"), hosted("node-x")],
            [hosted("node-y")],
            [*many("node-a", 4, "foo"), *many("node-b", 2, "foo"), on("node-x", "foo"), *many("node-y", 3, "foo")],
            [33, 83, 100],
            id="TestPodTopologySpreadScore: 3 of 4 nodes are candidates",
        ),
        pytest.param(
            # node-b lacks the key: ignored (0); w = log(2 + 2): round(4w) = 6, round(w) = 1
            # -> 100 * (6 + 1 - s) // 6 = 16, 100
            _soft((1, HOST, FOO)),
            [hosted("node-a"), node("node-b", {"n": "node-b"}), hosted("node-x")],
            [hosted("node-y")],
            [*many("node-a", 4, "foo"), *many("node-b", 2, "foo"), on("node-x", "foo"), *many("node-y", 3, "foo")],
            [16, 0, 100],
            id="TestPodTopologySpreadScore: a candidate without the topology key scores 0",
        ),
        pytest.param(
            # zone1 = 6, zone2 = 4 (node-y counts although not a candidate); w = log(2 + 2)
            # round(6w) = 8, round(4w) = 6 -> 100 * (8 + 6 - s) // 8 = 75, 75, 100
            _soft((1, "zone", FOO)),
            [hosted("node-a", "zone1"), hosted("node-b", "zone1"), hosted("node-x", "zone2")],
            [hosted("node-y", "zone2")],
            [*many("node-a", 4, "foo"), *many("node-b", 2, "foo"), on("node-x", "foo"), *many("node-y", 3, "foo")],
            [75, 75, 100],
            id="TestPodTopologySpreadScore: one constraint on zone, 3 of 4 nodes are candidates",
        ),
        pytest.param(
            _soft((1, "zone", FOO), (1, HOST, FOO)),
            [hosted("node-a", "zone1"), hosted("node-x", "zone2")],
            [hosted("node-b", "zone1"), hosted("node-y", "zone2")],
            [*many("node-a", 2, "foo"), on("node-b", "foo"), *many("node-x", 2, "foo"), *many("node-y", 4, "foo")],
            [100, 63],
            id="TestPodTopologySpreadScore: zone and node constraints, 2 of 4 nodes are candidates",
        ),
        pytest.param(
            _soft((1, "zone", FOO), (1, "zone", BAR), labels=("foo", "bar")),
            [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"})],
            [node("node-b", {"zone": "zone1"}), node("node-y", {"zone": "zone2"})],
            [
                on("node-a", "foo", "bar"),
                on("node-a", "foo"),
                on("node-b", "foo", "bar"),
                on("node-y", "foo"),
                on("node-y", "foo", "bar"),
                on("node-y", "foo"),
            ],
            [85, 100],
            id="TestPodTopologySpreadScore: two constraints on zone, 2 of 4 nodes are candidates",
        ),
        pytest.param(
            _soft((1, "zone", FOO), (1, HOST, BAR), labels=("foo", "bar")),
            [
                hosted("node-a", "zone1"),
                hosted("node-b", "zone1"),
                hosted("node-x", "zone2"),
                hosted("node-y", "zone2"),
            ],
            [],
            [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-y", "foo"), on("node-y", "bar")],
            [60, 20, 100, 60],
            id="TestPodTopologySpreadScore: zone and node constraints with different selectors",
        ),
        pytest.param(
            _soft((1, "zone", FOO), (1, HOST, BAR), labels=("foo", "bar")),
            [
                hosted("node-a", "zone1"),
                hosted("node-b", "zone1"),
                hosted("node-x", "zone2"),
                hosted("node-y", "zone2"),
            ],
            [],
            [on("node-b", "bar"), on("node-x", "foo"), on("node-y", "foo", "bar")],
            [100, 60, 40, 0],
            id="TestPodTopologySpreadScore: different selectors, some nodes have no pods",
        ),
        pytest.param(
            _soft((1, "zone", FOO), (1, HOST, BAR), labels=("foo", "bar")),
            [hosted("node-a", "zone1"), hosted("node-b", "zone1"), hosted("node-x", "zone2")],
            [hosted("node-y", "zone2")],
            [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-y", "foo"), on("node-y", "bar")],
            [50, 25, 100],
            id="TestPodTopologySpreadScore: different selectors, 3 of 4 nodes are candidates",
        ),
        pytest.param(
            # the ns1 pod does not count: 1 vs 2 -> w = log(4): round(w) = 1, round(2w) = 3 -> 100, 33
            _soft((1, HOST, FOO)),
            HOSTS4[:2],
            [],
            [on("node-a", "foo", namespace="ns1"), on("node-a", "foo"), *many("node-b", 2, "foo")],
            [100, 33],
            id="TestPodTopologySpreadScore: existing pods in another namespace do not count",
        ),
        pytest.param(
            _soft((1, HOST, FOO)),
            HOSTS4[:2],
            [],
            [on("node-a", "foo", terminating=True), on("node-b", "foo")],
            [100, 0],
            id="TestPodTopologySpreadScore: terminating pods are excluded",
        ),
        pytest.param(
            _soft((2, "node", FOO, {"min_domains": 10})),
            [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
            [],
            [*many("node-a", 2, "foo"), *many("node-b", 2, "foo"), on("node-c", "foo")],
            [75, 75, 100],
            id="TestPodTopologySpreadScore: minDomains has no effect on ScheduleAnyway",
        ),
        pytest.param(
            make_pod("p").label(foo="").node_selector(foo="").spread(1, "node", "ScheduleAnyway", FOO).obj(),
            POLICY_NODES,
            [],
            POLICY_PODS,
            [0, 33, 100],
            id="TestPodTopologySpreadScore: NodeAffinityPolicy honored with a nodeSelector",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="")
            .node_selector(foo="")
            .spread(1, "node", "ScheduleAnyway", FOO, node_affinity_policy="Ignore")
            .obj(),
            POLICY_NODES,
            [],
            POLICY_PODS,
            [66, 100, 100],
            id="TestPodTopologySpreadScore: NodeAffinityPolicy ignored with a nodeSelector",
        ),
        pytest.param(
            make_pod("p").label(foo="").node_affinity_in("foo", "").spread(1, "node", "ScheduleAnyway", FOO).obj(),
            POLICY_NODES,
            [],
            POLICY_PODS,
            [0, 33, 100],
            id="TestPodTopologySpreadScore: NodeAffinityPolicy honored with node affinity",
        ),
        pytest.param(
            _soft((1, "node", FOO, {"node_taints_policy": "Honor"})),
            TAINT_NODES,
            [],
            POLICY_PODS,
            [0, 33, 100],
            id="TestPodTopologySpreadScore: NodeTaintsPolicy honored",
        ),
        pytest.param(
            _soft((1, "node", FOO)),
            TAINT_NODES,
            [],
            POLICY_PODS,
            [66, 100, 100],
            id="TestPodTopologySpreadScore: NodeTaintsPolicy ignored",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="", bar="")
            .spread(1, "zone", "ScheduleAnyway", {}, match_label_keys=["foo"])
            .spread(1, HOST, "ScheduleAnyway", {}, match_label_keys=["bar"])
            .obj(),
            [
                hosted("node-a", "zone1"),
                hosted("node-b", "zone1"),
                hosted("node-c", "zone2"),
                hosted("node-d", "zone2"),
            ],
            [],
            [on("node-a", "foo"), on("node-b", "foo", "bar"), on("node-c", "foo"), on("node-c", "bar")],
            [60, 20, 60, 100],
            id="TestPodTopologySpreadScore: matchLabelKeys ANDed with an empty labelSelector",
        ),
        pytest.param(
            make_pod("p")
            .label(foo="", bar="", baz="")
            .spread(1, "zone", "ScheduleAnyway", FOO)
            .spread(1, HOST, "ScheduleAnyway", BAR, match_label_keys=["baz"])
            .obj(),
            [
                hosted("node-a", "zone1"),
                hosted("node-b", "zone1"),
                hosted("node-c", "zone2"),
                hosted("node-d", "zone2"),
            ],
            [],
            [
                on("node-a", "foo"),
                on("node-b", "foo", "bar", "baz"),
                on("node-c", "foo"),
                on("node-c", "bar"),
                on("node-c", "bar", "baz"),
            ],
            [60, 20, 60, 100],
            id="TestPodTopologySpreadScore: matchLabelKeys ANDed with a non-empty labelSelector",
        ),
    ],
)
def test_score(pod, nodes, failed, pods, want):
    assert run_score(pod, nodes, failed, pods) == want


def _service(ns: str, name: str, selector: dict[str, str] | None) -> tuple[str, object]:
    return f"{ns}/{name}", parse_service({"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}})


def test_system_defaults_spread_by_hostname_when_nodes_have_no_zone():
    # TestPodTopologySpreadScore "system defaulting, nodes don't have zone, pods match service":
    # the zone constraint is skipped on nodes without zones (hostname maxSkew 3 alone, as "spread 4/3/2/1, maxSkew 3")
    objects = ClusterObjects(services=dict([_service("default", "svc", {"foo": ""})]))
    assert run_score(make_pod("p").label(foo="").obj(), HOSTS4, [], SPREAD_4_3_2_1, objects=objects) == [
        44,
        66,
        77,
        100,
    ]


def test_system_defaults_need_a_selecting_service_or_controller():
    assert run_score(make_pod("p").label(foo="").obj(), HOSTS4, [], SPREAD_4_3_2_1) is None


def test_system_defaults_with_zones():
    # hostname maxSkew 3 and zone maxSkew 5 over 4 candidates in 2 zones (zone1: 7 pods, zone2: 3):
    # hostname w = log(6) = 1.79, zone w = log(4) = 1.39; node-a: 4 * 1.79 + 2 + 7 * 1.39 + 4 = 22.87 -> 23 ...
    objects = ClusterObjects(services=dict([_service("default", "svc", {"foo": ""})]))
    nodes = [hosted("node-a", None), hosted("node-b", None), hosted("node-c", None), hosted("node-d", None)]
    nodes = [
        node(n.name, {HOST: n.name, LABEL_ZONE: "zone1" if n.name in ("node-a", "node-b") else "zone2"}) for n in nodes
    ]
    raw = [round(c * math.log(6) + 2 + z * math.log(4) + 4) for c, z in ((4, 7), (3, 7), (2, 3), (1, 3))]
    assert raw == [23, 21, 14, 12]
    want = [100 * (23 + 12 - s) // 23 for s in raw]
    assert run_score(make_pod("p").label(foo="").obj(), nodes, [], SPREAD_4_3_2_1, objects=objects) == want


def test_system_defaults_count_nodes_without_a_zone_as_the_empty_zone():
    # upstream reads a missing zone label as "": with system defaults, a candidate without a zone puts
    # "" among the zone domains, and every node without a zone counts into it
    objects = ClusterObjects(services=dict([_service("default", "svc", {"foo": ""})]))
    nodes = [node("a", {HOST: "a", LABEL_ZONE: "z1"}), node("b", {HOST: "b"}), node("c", {HOST: "c"})]
    pods = [*many("a", 1, "foo"), *many("b", 2, "foo"), *many("c", 3, "foo")]
    plugin = PodTopologySpread()
    snap = snapshot(nodes, pods, objects)
    state = CycleState()
    pod = make_pod("p").label(foo="").obj()
    assert plugin.pre_score(state, pod, [snap.get("a"), snap.get("b")], snap).is_success
    w_host, w_zone = math.log(2 + 2), math.log(2 + 2)  # 2 candidates; zones {"z1", ""}
    # node-b: own 2 pods; its zone "" holds b's 2 and c's 3 -> but b has no zone label, so only hostname counts
    assert plugin.score(state, pod, snap.get("b")) == round(2 * w_host + 2)
    assert plugin.score(state, pod, snap.get("a")) == round(1 * w_host + 2 + 1 * w_zone + 4)
    assert state.read(plugin._score_key).domain_counts[1].tolist() == [1, 5]  # z1: 1; "": 2 + 3


def test_normalize_scores_zero_for_ignored_nodes_and_100_when_all_zero():
    pod = _soft((1, "zone", FOO))
    nodes = [node("a", {"zone": "z1"}), node("b", {"other": "x"}), node("c", {"zone": "z2"})]
    assert run_score(pod, nodes, [], []) == [100, 0, 100]


@pytest.mark.parametrize(
    "pod, args, objects",
    [
        pytest.param(make_pod("p").obj(), LIST, None, id="TestPreScoreSkip: the pod has no soft constraints"),
        pytest.param(
            make_pod("p").label(foo="").spread(1, "zone", "DoNotSchedule", FOO).obj(),
            PodTopologySpreadArgs(),
            None,
            id="only hard constraints",
        ),
        pytest.param(
            make_pod("p").label(foo="bar", baz="sup").owner("ReplicaSet", "rs2", "uid-rs2").obj(),
            PodTopologySpreadArgs(
                default_constraints=(DefaultConstraint(2, "planet", "ScheduleAnyway"),), defaulting_type="List"
            ),
            ClusterObjects(
                controllers={
                    "ReplicaSet/default/rs1": parse_controller(
                        {
                            "kind": "ReplicaSet",
                            "metadata": {"namespace": "default", "name": "rs1"},
                            "spec": {"selector": {"matchExpressions": [{"key": "tar", "operator": "Exists"}]}},
                        }
                    )
                }
            ),
            id="TestPreScoreSkip: default constraints and a replicaset that is not the pod's owner",
        ),
    ],
)
def test_pre_score_skips(pod, args, objects):
    assert (
        run_score(pod, [node("node-a", {"planet": "mars", HOST: "node-a"})], [], [], args=args, objects=objects) is None
    )


# --------------------------------------------------------------------------- default selectors (helper.DefaultSelector)


def _controller(kind: str, name: str, selector: dict | None, ns: str = "default") -> tuple[str, object]:
    spec = {} if selector is None else {"selector": selector}
    return f"{kind}/{ns}/{name}", parse_controller(
        {"kind": kind, "metadata": {"namespace": ns, "name": name}, "spec": spec}
    )


def _in(key: str, value: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key, "In", frozenset({value}))


@pytest.mark.parametrize(
    "pod, services, controllers, want",
    [
        pytest.param(
            make_pod("p").label(app="web").obj(), [], [], LabelSelector(), id="nothing selects the pod: empty"
        ),
        pytest.param(
            make_pod("p").label(app="web", tier="fe").obj(),
            [
                _service("default", "a", {"app": "web"}),
                _service("default", "b", {"tier": "fe"}),
                _service("default", "c", {"app": "db"}),
            ],
            [],
            LabelSelector({"app": "web", "tier": "fe"}),
            id="the selectors of the services selecting the pod merge",
        ),
        pytest.param(
            make_pod("p").label(app="web").obj(),
            [_service("other", "a", {"app": "web"}), _service("default", "empty", None)],
            [],
            LabelSelector(),
            id="services of other namespaces and without a selector do not count",
        ),
        pytest.param(
            make_pod("p").label(app="web", v="1").owner("ReplicationController", "rc", "u1").obj(),
            [_service("default", "a", {"app": "web"})],
            [_controller("ReplicationController", "rc", {"app": "web", "v": "1"})],
            LabelSelector({"app": "web", "v": "1"}),
            id="a replication controller's map merges into the services'",
        ),
        pytest.param(
            make_pod("p").label(app="web", v="1").owner("ReplicaSet", "rs", "u1").obj(),
            [_service("default", "a", {"app": "web"})],
            [
                _controller(
                    "ReplicaSet",
                    "rs",
                    {"matchLabels": {"v": "1"}, "matchExpressions": [{"key": "app", "operator": "Exists"}]},
                )
            ],
            LabelSelector(
                {"app": "web"},
                (_in("v", "1"), LabelSelectorRequirement("app", "Exists")),
            ),
            id="a replica set's requirements are added",
        ),
        pytest.param(
            make_pod("p").label(app="db").owner("StatefulSet", "ss", "u1").obj(),
            [],
            [_controller("StatefulSet", "ss", {"matchLabels": {"app": "db"}})],
            LabelSelector({}, (_in("app", "db"),)),
            id="a stateful set alone",
        ),
        pytest.param(
            make_pod("p").label(app="db").owner("StatefulSet", "ss", "u1", controller=False).obj(),
            [],
            [_controller("StatefulSet", "ss", {"matchLabels": {"app": "db"}})],
            LabelSelector(),
            id="an owner that is not the controller does not count",
        ),
        pytest.param(
            make_pod("p").label(app="db").owner("ReplicaSet", "gone", "u1").obj(),
            [],
            [_controller("ReplicaSet", "other", {"matchLabels": {"app": "db"}})],
            LabelSelector(),
            id="a controller is found by the owner's name, not by its selector",
        ),
        pytest.param(
            make_pod("p").label(app="db").owner("Job", "j", "u1").obj(),
            [],
            [],
            LabelSelector(),
            id="other owner kinds do not count",
        ),
    ],
)
def test_default_selector(pod, services, controllers, want):
    objects = ClusterObjects(services=dict(services), controllers=dict(controllers))
    assert default_selector(pod, objects) == want


def test_default_constraints_count_with_the_owners_selector():
    # a pod of a replica set whose other replicas sit on node-a: hostname spreading prefers node-b
    objects = ClusterObjects(controllers=dict([_controller("ReplicaSet", "rs", {"matchLabels": {"app": "web"}})]))
    pod = make_pod("p").label(app="web").owner("ReplicaSet", "rs", "u1").obj()
    pods = [on("node-a", app="web"), on("node-a", app="web"), on("node-b", app="db")]
    # w = log(2 + 2); node-a: round(2w + 2) = 5, node-b: 2 -> 100 * (5 + 2 - s) // 5
    assert run_score(pod, [hosted("node-a"), hosted("node-b")], [], pods, objects=objects) == [40, 100]


# --------------------------------------------------------------------------- the count cache follows the snapshot


def test_counts_follow_node_changes_between_cycles():
    pod = _foo_pod((1, "node", FOO))
    nodes = [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})]
    snap = snapshot(nodes, [on("node-a", "foo")])
    plugin = PodTopologySpread(LIST)
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"node-a": 1, "node-b": 0}
    # a pod lands on node-b: the snapshot row is replaced, as the cache does between cycles
    changed = snap.get("node-b").clone()
    changed.add_pod(on("node-b", "foo"))
    changed.add_pod(on("node-b", "foo"))
    snap.replace_one(snap.table.position["node-b"], changed, node_changed=False)
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"node-a": 1, "node-b": 2}
    assert [plugin.filter(state, pod, i).code for i in snap.node_infos] == [Code.SUCCESS, Code.UNSCHEDULABLE]


# --------------------------------------------------------------------------- arguments


def test_args_defaults_and_names():
    plugin = PodTopologySpread()
    assert plugin.name == PodTopologySpread.NAME == "PodTopologySpread"
    assert (
        plugin.args == PodTopologySpreadArgs(default_constraints=(), defaulting_type="System")
        and plugin.system_defaulted
    )
    assert [(c.max_skew, c.topology_key, c.when_unsatisfiable) for c in plugin.default_constraints] == [
        (3, LABEL_HOSTNAME, "ScheduleAnyway"),
        (5, LABEL_ZONE, "ScheduleAnyway"),
    ]
    listed = PodTopologySpread.new(
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor"}
            ],
        }
    )
    assert not listed.system_defaulted
    assert listed.args.default_constraints == (
        DefaultConstraint(2, "rack", "DoNotSchedule", node_taints_policy="Honor"),
    )
    assert PodTopologySpread.new({"defaultingType": "List"}).default_constraints == ()


@pytest.mark.parametrize(
    "raw, field, message",
    [
        pytest.param(
            {"defaultingType": "Sometimes"}, "defaultingType", "unsupported value", id="unknown defaulting type"
        ),
        pytest.param(
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
            "defaultingType",
            "when .defaultConstraints are not empty",
            id="System with default constraints",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
            },
            "defaultConstraints[0].maxSkew",
            "not in valid range (0, inf)",
            id="maxSkew must be positive",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}],
            },
            "defaultConstraints[0].topologyKey",
            "can not be empty",
            id="topologyKey is required",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "not a label!", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "defaultConstraints[0].topologyKey",
            "invalid label name",
            id="topologyKey must be a label name",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}],
            },
            "defaultConstraints[0].whenUnsatisfiable",
            "supported values",
            id="whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": ""}],
            },
            "defaultConstraints[0].whenUnsatisfiable",
            "can not be empty",
            id="whenUnsatisfiable can not be empty",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]},
            "defaultConstraints[0].whenUnsatisfiable",
            "required",
            id="whenUnsatisfiable is required",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"a": "b"}},
                    }
                ],
            },
            "defaultConstraints[0].labelSelector",
            "must not define a selector",
            id="default constraints may not have a selector",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            "defaultConstraints[1]",
            "duplicate value: {zone, DoNotSchedule}",
            id="no two default constraints share a key and an action",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "nodeTaintsPolicy": "Sometimes",
                    }
                ],
            },
            "defaultConstraints[0].nodeTaintsPolicy",
            "unsupported value",
            id="node inclusion policies are Honor or Ignore",
        ),
    ],
)
def test_args_validation(raw, field, message):
    with pytest.raises(PluginArgsError) as caught:
        PodTopologySpread.new(raw)
    assert caught.value.field == field and message in caught.value.message


def test_typed_args_are_validated_too():
    with pytest.raises(PluginArgsError, match="duplicate value"):
        PodTopologySpreadArgs(
            default_constraints=(
                DefaultConstraint(1, "zone", "DoNotSchedule"),
                DefaultConstraint(1, "zone", "DoNotSchedule"),
            ),
            defaulting_type="List",
        )
    assert PodTopologySpreadArgs(
        default_constraints=(
            DefaultConstraint(1, "zone", "DoNotSchedule"),
            DefaultConstraint(1, "zone", "ScheduleAnyway"),
        ),
        defaulting_type="List",
    )


def test_spread_constraint_policies_are_parsed_with_field_paths():
    pod = make_pod("p").spread(1, "zone", node_affinity_policy="Ignore", node_taints_policy="Honor").obj()
    c = pod.topology_spread_constraints[0]
    assert (c.node_affinity_policy, c.node_taints_policy) == ("Ignore", "Honor")
    raw = make_pod("p").spread(1, "zone").raw()
    raw["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = ["Honor"]
    with pytest.raises(ObjectError, match=r"spec\.topologySpreadConstraints\[0\]\.nodeTaintsPolicy"):
        parse_pod(raw)


# --------------------------------------------------------------------------- vector forms agree with per-node ones


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_vector_forms_agree_with_per_node(cluster, data):
    nodes, pods, pod = cluster
    snap = snapshot(nodes, pods)
    plugin = PodTopologySpread(data.draw(st.sampled_from((PodTopologySpreadArgs(), LIST))))
    everything = np.arange(len(snap), dtype=np.intp)
    state = CycleState()
    if plugin.pre_filter(state, pod, snap).is_success:
        per_node = [plugin.filter(state, pod, info).is_success for info in snap.node_infos]
        assert plugin.filter_nodes(state, pod, snap.table, everything).tolist() == per_node
    picked = sorted(data.draw(st.sets(st.integers(0, len(snap) - 1), min_size=1)))
    candidates: list[NodeInfo] = [snap.node_infos[k] for k in picked]
    if plugin.pre_score(state, pod, candidates, snap).is_success:
        per_node_scores = [plugin.score(state, pod, info) for info in candidates]
        assert plugin.score_nodes(state, pod, snap.table, np.asarray(picked, dtype=np.intp)).tolist() == per_node_scores


def test_counts_follow_a_new_snapshot_of_as_many_other_nodes():
    # the count cache is keyed by generations, not by table: another table of the same length recounts
    pod = _foo_pod((1, "node", FOO))
    plugin = PodTopologySpread(LIST)
    first = snapshot([node("a", {"node": "a"}), node("b", {"node": "b"})], [*many("a", 2, "foo")])
    state = CycleState()
    plugin.pre_filter(state, pod, first)
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"a": 2, "b": 0}
    second = snapshot([node("c", {"node": "c"}), node("d", {"node": "d"})], [on("d", "foo")])
    plugin.pre_filter(state, pod, second)
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"c": 0, "d": 1}
    again = Snapshot.of([i.clone() for i in first.node_infos])  # clones keep generations: same counts
    plugin.pre_filter(state, pod, again)
    assert domain_counts(state.read(plugin._filter_key).domains[0]) == {"a": 2, "b": 0}
