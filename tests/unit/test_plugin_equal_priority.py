"""EqualPriority: 1 for every node, per node and vectorised."""

from __future__ import annotations

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.interface import VectorScore
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.equal_priority import EqualPriority


def test_every_node_scores_one():
    infos = [node_info(make_node(f"n{i}").obj()) for i in range(4)]
    snap = Snapshot.of(infos)
    plugin = EqualPriority()
    pod = make_pod().obj()
    assert [plugin.score(CycleState(), pod, i) for i in infos] == [1, 1, 1, 1]
    assert plugin.score_nodes(CycleState(), pod, snap.table, np.array([3, 1], dtype=np.intp)).tolist() == [1, 1]


def test_names_and_args():
    assert EqualPriority().name == EqualPriority.NAME == "EqualPriority"
    assert EqualPriority.DEFAULT_WEIGHT == 1
    assert issubclass(EqualPriority, VectorScore)  # the algorithm takes the vector path
    with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
        EqualPriority.new({"x": 1})
