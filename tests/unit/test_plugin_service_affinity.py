"""ServiceAffinity: v1.9 checkServiceAffinity filter and ServiceAntiAffinity score (0..100)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import Pod, Service
from kopf_scheduler.core.plugins.service_affinity import (
    ERR_REASON,
    ServiceAffinity,
    ServiceAffinityArgs,
    fits,
    normalize,
)

SVC = {"default/web": Service("default", "web", {"app": "web"})}
OK = (Code.SUCCESS, ())
NO = (Code.UNSCHEDULABLE, (ERR_REASON,))

# n1, n2 in region r1 (zones z1, z2); n3 in r2/z3; n4 has no labels
NODES = [
    make_node("n1").label(region="r1", zone="z1").obj(),
    make_node("n2").label(region="r1", zone="z2").obj(),
    make_node("n3").label(region="r2", zone="z3").obj(),
    make_node("n4").obj(),
]


def snap_of(placement: dict[str, list[Pod]], services: dict[str, Service] | None = None) -> Snapshot:
    return Snapshot.of(
        [node_info(n, *placement.get(n.name, [])) for n in NODES], ClusterObjects(services=dict(services or {}))
    )


def web(name: str = "w", ns: str = "default") -> Any:
    return make_pod(name, ns).label(app="web")


@pytest.mark.parametrize(
    "args, pod, placement, services, want_pre, want",
    [
        pytest.param({"affinityLabels": []}, web().obj(), {}, SVC, Code.SKIP, [], id="no labels configured: skip"),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().node_selector(region="r1").obj(),
            {},
            None,
            Code.SUCCESS,
            [OK, OK, NO, NO],
            id="label from the pod's nodeSelector",
        ),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().obj(),
            {"n3": [web("e").obj()]},
            SVC,
            Code.SUCCESS,
            [NO, NO, OK, NO],
            id="missing label copied from the node of a pod matching the pod's labels",
        ),
        pytest.param(
            {"affinityLabels": ["region", "zone"]},
            web().node_selector(region="r1").obj(),
            {"n2": [web("e").obj()]},
            SVC,
            Code.SUCCESS,
            [NO, OK, NO, NO],
            id="nodeSelector value kept, the missing one backfilled",
        ),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().obj(),
            {"n3": [web("e").obj()]},
            None,
            Code.SKIP,
            [],
            id="no service: no backfill, empty map, skip",
        ),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().obj(),
            {"n3": [web("e", "other").obj(), make_pod("db").label(app="db").obj()]},
            SVC,
            Code.SKIP,
            [],
            id="no example pod in the namespace with the pod's labels: skip",
        ),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().obj(),
            {"n4": [web("e").obj()]},
            SVC,
            Code.SUCCESS,
            [OK, OK, OK, OK],
            id="example pod's node lacks the label: empty map fits everywhere",
        ),
        pytest.param(
            {"affinityLabels": ["region"]},
            web().node_selector(region="r9").obj(),
            {},
            None,
            Code.SUCCESS,
            [NO, NO, NO, NO],
            id="a value no node has",
        ),
    ],
)
def test_filter(
    args: dict[str, Any], pod: Pod, placement: dict[str, list[Pod]], services: Any, want_pre: Code, want: list[Any]
) -> None:
    snap = snap_of(placement, services)
    plugin = ServiceAffinity.new(args)
    state = CycleState()
    pre = plugin.pre_filter(state, pod, snap)
    assert pre.code is want_pre
    if pre.is_skip:
        assert all(fits(pod, i, plugin.args.affinity_labels, snap).is_success for i in snap.node_infos)
        return
    statuses = [plugin.filter(state, pod, i) for i in snap.node_infos]
    assert [(s.code, s.reasons) for s in statuses] == want
    mask = plugin.filter_nodes(state, pod, snap.table, np.arange(len(snap), dtype=np.intp))
    assert mask.tolist() == [s.is_success for s in statuses]
    assert [
        (s.code, s.reasons) for s in (fits(pod, i, plugin.args.affinity_labels, snap) for i in snap.node_infos)
    ] == want


def test_filter_what_if_node_hides_the_example_pod() -> None:
    """A NodeInfo with the example pod removed (preemption what-if) falls back to the next example."""
    first, second = web("e1").obj(), web("e2").obj()
    snap = snap_of({"n3": [first], "n1": [second]}, SVC)  # snapshot order n1, n2, n3: e2 is the first example
    plugin = ServiceAffinity(ServiceAffinityArgs(affinity_labels=("region",)))
    state = CycleState()
    plugin.pre_filter(state, web().obj(), snap)
    assert [plugin.filter(state, web().obj(), i).code for i in snap.node_infos] == [
        Code.SUCCESS,
        Code.SUCCESS,
        Code.UNSCHEDULABLE,
        Code.UNSCHEDULABLE,
    ]
    what_if = node_info(NODES[0])  # n1 without e2: e1 on n3 (region r2) becomes the example
    assert plugin.filter(state, web().obj(), what_if).code is Code.UNSCHEDULABLE


@pytest.mark.parametrize(
    "args, pod, placement, services, want_raw, want",
    [
        pytest.param(
            {"antiAffinityLabelsPreference": ["zone"]},
            web().obj(),
            {},
            SVC,
            [0, 0, 0, 0],
            [100, 100, 100, 0],
            id="no pods: labelled 100, unlabelled 0",
        ),
        pytest.param(
            {"antiAffinityLabelsPreference": ["zone"]},
            web().obj(),
            {"n4": [web().obj()]},
            None,
            # no service: nothing counts; total 0 -> nodes with the label get 100
            [0, 0, 0, 0],
            [100, 100, 100, 0],
            id="no service",
        ),
        pytest.param(
            {"antiAffinityLabelsPreference": ["region"]},
            web().obj(),
            {"n1": [web().obj(), web().obj()], "n3": [web().obj()], "n4": [web().obj()]},
            SVC,
            # total 4 (n4 counts in the total); r1 2, r2 1: n1, n2 100*(4-2)/4 = 50; n3 100*3/4 = 75; n4 0
            [2, 0, 1, 1],
            [50, 50, 75, 0],
            id="spread by region",
        ),
        pytest.param(
            {"antiAffinityLabelsPreference": ["region", "zone"]},
            web().obj(),
            {"n1": [web().obj(), web().obj()], "n3": [web().obj()]},
            SVC,
            # total 3. region: r1 2, r2 1 -> n1 n2 33.3, n3 66.6; zone: z1 2, z2 0, z3 1 -> n1 33.3, n2 100, n3 66.6
            # halves summed: n1 33.3, n2 66.6, n3 66.6 -> 33, 66, 66
            [2, 0, 1, 0],
            [33, 66, 66, 0],
            id="two labels each count for half",
        ),
        pytest.param(
            {"antiAffinityLabelsPreference": ["zone"]},
            web().obj(),
            {"n1": [web().terminating().obj(), web("o", "other").obj()]},
            SVC,
            # v1.9 counts pods being deleted; other namespaces never: n1 1 of 1 -> 0; others 100
            [1, 0, 0, 0],
            [0, 100, 100, 0],
            id="deleting pod counts (v1.9), other namespace not",
        ),
    ],
)
def test_score(
    args: dict[str, Any], pod: Pod, placement: dict[str, list[Pod]], services: Any, want_raw: list[int], want: list[int]
) -> None:
    snap = snap_of(placement, services)
    plugin = ServiceAffinity.new(args)
    state = CycleState()
    assert plugin.pre_score(state, pod, list(snap.node_infos), snap).is_success
    raw = [plugin.score(state, pod, i) for i in snap.node_infos]
    assert raw == want_raw
    assert plugin.normalize_scores(state, pod, np.array(raw, dtype=np.int64)).tolist() == want


def test_score_skips_without_labels() -> None:
    snap = snap_of({}, SVC)
    assert (
        ServiceAffinity.new({"affinityLabels": ["region"]})
        .pre_score(CycleState(), web().obj(), list(snap.node_infos), snap)
        .is_skip
    )


def test_normalize_empty_label_list_is_zero() -> None:
    assert normalize(np.array([1, 2], dtype=np.int64), []).tolist() == [0, 0]


@pytest.mark.parametrize(
    "args, field",
    [
        pytest.param({"affinityLabels": "region"}, "affinityLabels", id="labels must be a list"),
        pytest.param({"affinityLabels": [""]}, "affinityLabels[0]", id="empty label key"),
        pytest.param(
            {"antiAffinityLabelsPreference": [""]}, "antiAffinityLabelsPreference[0]", id="empty anti-affinity label"
        ),
        pytest.param(
            {"antiAffinityLabelsPreference": [["zone"]]}, "antiAffinityLabelsPreference[0]", id="a label is a string"
        ),
        pytest.param({"antiAffinityLabelsPreference": 3}, "antiAffinityLabelsPreference", id="not a list"),
        # the v1.9 shapes are registry.py's to translate (serviceAffinity / serviceAntiAffinity)
        pytest.param({"labels": ["region"]}, "labels", id="v1.9 labels is not a plugin argument"),
        pytest.param({"label": "zone"}, "label", id="v1.9 label is not a plugin argument"),
        pytest.param({"presence": True}, "presence", id="unknown field"),
    ],
)
def test_args_errors(args: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        ServiceAffinity.new(args)
    assert exc.value.field == field


@pytest.mark.parametrize(
    "kwargs, field",
    [
        pytest.param({"affinity_labels": ("region", "")}, "affinityLabels[1]", id="affinity label"),
        pytest.param(
            {"anti_affinity_labels_preference": ("",)}, "antiAffinityLabelsPreference[0]", id="anti-affinity label"
        ),
    ],
)
def test_typed_args_reject_empty_label_keys(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        ServiceAffinityArgs(**kwargs)
    assert (exc.value.field, exc.value.message) == (field, "must be a non-empty label key")


def test_names() -> None:
    assert ServiceAffinity().name == ServiceAffinity.NAME == "ServiceAffinity"
    assert ServiceAffinity.new({"antiAffinityLabelsPreference": ["zone"]}, name="zone-spread").name == "zone-spread"
    assert ServiceAffinity.new({"antiAffinityLabelsPreference": ["zone"]}).args == ServiceAffinityArgs(
        anti_affinity_labels_preference=("zone",)
    )


def test_filter_without_pre_filter_state() -> None:
    snap = snap_of({}, SVC)
    plugin = ServiceAffinity.new({"affinityLabels": ["region"]})
    assert plugin.filter(CycleState(), web().obj(), snap.node_infos[0]).code is Code.ERROR
    with pytest.raises(LookupError):
        plugin.filter_nodes(CycleState(), web().obj(), snap.table, np.arange(len(snap), dtype=np.intp))
