"""``VectorFilter.filter_statuses`` says of many rejected nodes exactly what ``filter`` says of each."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.interface import VectorFilter
from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.plugins.node_affinity import NodeAffinity
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.node_unschedulable import NodeUnschedulable
from kopf_scheduler.core.plugins.taint_toleration import TaintToleration

ENFORCED = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
]}}}  # fmt: skip


def mixed_nodes(seed: int) -> list[NodeInfo]:
    """Cordoned, tainted, labelled and too small nodes in every mix, and NodeInfos without their Node."""
    rng = random.Random(seed)
    infos = []
    for i in range(60):
        if i % 13 == 0:
            infos.append(NodeInfo(None))
            continue
        b = make_node(f"n{i}").capacity(cpu=rng.choice(["1", "4"]), memory="8Gi", pods=rng.choice(["0", "110"]))
        b = b.label(zone=rng.choice("abc"), disk=rng.choice(["ssd", "hdd"]))
        if rng.random() < 0.3:
            b = b.taint("dedicated", rng.choice(["x", "y"]))
        if rng.random() < 0.2:
            b = b.unschedulable()
        infos.append(node_info(b.obj()))
    return infos


def pods() -> list[Pod]:
    return [
        make_pod("plain").req(cpu="2").obj(),
        make_pod("selector").req(cpu="100m").node_selector(disk="ssd").obj(),
        make_pod("tolerant").req(cpu="3", memory="9Gi").toleration("dedicated", "x", "NoSchedule").obj(),
    ]


@pytest.mark.parametrize(
    "plugin",
    [NodeResourcesFit(), TaintToleration(), NodeUnschedulable(), NodeAffinity(), NodeAffinity.new(ENFORCED)],
    ids=["NodeResourcesFit", "TaintToleration", "NodeUnschedulable", "NodeAffinity", "NodeAffinity with addedAffinity"],
)
@pytest.mark.parametrize("seed", range(4))
def test_the_statuses_of_the_rejected_nodes_equal_the_per_node_form(plugin: VectorFilter, seed: int) -> None:
    snap = Snapshot.of(mixed_nodes(seed))
    checked = 0
    for pod in pods():
        state = CycleState()
        if plugin.pre_filter(state, pod, snap).is_skip:  # type: ignore[attr-defined]
            continue
        index = np.array(random.Random(seed).sample(range(len(snap)), len(snap)), dtype=np.intp)
        rejected = index[~plugin.filter_nodes(state, pod, snap.table, index)]
        batch = plugin.filter_statuses(state, pod, snap.table, rejected)
        assert batch is not None
        distinct, which = batch
        assert [distinct[i] for i in which.tolist()] == [
            plugin.filter(state, pod, snap.node_infos[k]) for k in rejected
        ]
        checked += len(rejected)
    assert checked > 0
