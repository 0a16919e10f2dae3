"""NodePreferAvoidPods: the preferAvoidPods annotation against the pod's RC/RS controller; SKIP; vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_prefer_avoid_pods import NodePreferAvoidPods, parse_avoid_pods

KEY = "scheduler.alpha.kubernetes.io/preferAvoidPods"


def avoid(*controllers):
    return json.dumps(
        {
            "preferAvoidPods": [
                {
                    "podSignature": {
                        "podController": {"apiVersion": "v1", "kind": kind, "name": "x", "uid": uid, "controller": True}
                    },
                    "reason": "r",
                }
                for kind, uid in controllers
            ]
        }
    )


RC_POD = make_pod().owner("ReplicationController", "rc", "abcdef123456").obj()
RS_POD = make_pod().owner("ReplicaSet", "rs", "qwert12345").obj()


@pytest.mark.parametrize(
    "pod, annotation, score",
    [
        pytest.param(RC_POD, avoid(("ReplicationController", "abcdef123456")), 0, id="rc listed"),
        pytest.param(RS_POD, avoid(("ReplicaSet", "qwert12345")), 0, id="rs listed"),
        pytest.param(RS_POD, avoid(("ReplicationController", "qwert12345")), 100, id="same uid, other kind"),
        pytest.param(RC_POD, avoid(("ReplicationController", "other")), 100, id="other uid"),
        pytest.param(RC_POD, None, 100, id="no annotation"),
        pytest.param(RC_POD, "{not json", 100, id="unparsable annotation"),
        pytest.param(RC_POD, json.dumps({"preferAvoidPods": "x"}), 100, id="wrong shape"),
        pytest.param(make_pod().obj(), avoid(("ReplicationController", "abcdef123456")), 100, id="no controller"),
        pytest.param(
            make_pod().owner("StatefulSet", "ss", "abcdef123456").obj(),
            avoid(("StatefulSet", "abcdef123456")),
            100,
            id="only RC and RS count",
        ),
        pytest.param(
            make_pod().owner("ReplicationController", "rc", "abcdef123456", controller=False).obj(),
            avoid(("ReplicationController", "abcdef123456")),
            100,
            id="owner that is not the controller",
        ),
    ],
)
def test_score(pod, annotation, score):
    b = make_node("n1")
    if annotation is not None:
        b.annotation(KEY, annotation)
    info = node_info(b.obj())
    plugin = NodePreferAvoidPods()
    assert plugin.score(CycleState(), pod, info) == score
    snap = Snapshot.of([info])
    # SKIP exactly when every node would score 100
    assert plugin.pre_score(CycleState(), pod, [info], snap).is_skip is (score == 100)
    assert plugin.score_nodes(CycleState(), pod, snap.table, np.array([0], dtype=np.intp)).tolist() == [score]


def test_parse_errors():
    with pytest.raises(ValueError):
        parse_avoid_pods("[1]")
    assert parse_avoid_pods("{}") == frozenset()
    assert parse_avoid_pods(avoid(("ReplicaSet", "u"))) == {("ReplicaSet", "u")}


def test_vector_over_many_nodes():
    infos = []
    for i in range(12):
        b = make_node(f"n{i}")
        if i % 3 == 0:
            b.annotation(KEY, avoid(("ReplicationController", "abcdef123456")))
        elif i % 3 == 1:
            b.annotation(KEY, avoid(("ReplicaSet", "zzz")))
        infos.append(node_info(b.obj()))
    snap = Snapshot.of(infos)
    plugin = NodePreferAvoidPods()
    index = np.array([11, 0, 3, 4, 5, 9], dtype=np.intp)
    for pod in (RC_POD, RS_POD):
        assert plugin.score_nodes(CycleState(), pod, snap.table, index).tolist() == [
            plugin.score(CycleState(), pod, infos[k]) for k in index.tolist()
        ]


def test_names_and_args():
    assert NodePreferAvoidPods().name == NodePreferAvoidPods.NAME == "NodePreferAvoidPods"
    assert NodePreferAvoidPods.DEFAULT_WEIGHT == 10000  # v1.9 DefaultProvider's weight
    with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
        NodePreferAvoidPods.new({"x": 1})
