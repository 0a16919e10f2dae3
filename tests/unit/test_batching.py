"""Opportunistic batching (``core/toolkit/batching.py``, upstream framework/runtime/batch.go): signatures, hints, the
conditions under which a ranking is reused, rescoring, and a case where batching places a pod elsewhere than
scoring it afresh would (as upstream's does)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from builders import make_node, make_pod

from kopf_scheduler.core.config.policy import default_profile, validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler, ScheduleResult, Turn
from kopf_scheduler.core.scheduling.explanation import render
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import CycleCounter, SchedulingQueue, first_ready
from kopf_scheduler.core.toolkit import batching
from kopf_scheduler.sim.simulator import Simulation

#: the default plugins, but PodTopologySpread without system defaults: its pods are signable
BATCHING: Mapping[str, Any] = {
    "schedulerName": "s",
    "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}],
}
#: the same, packing
PACKING: Mapping[str, Any] = {
    **BATCHING,
    "pluginConfig": [
        *BATCHING["pluginConfig"],
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
    ],
}


#: a cluster with nothing in it: what the signatures below read of the cluster (no DeviceClass)
EMPTY = Snapshot(SchedulerCache().objects)


def profile(spec: Mapping[str, Any] = BATCHING) -> Profile:
    p = validate_policy(spec)
    assert isinstance(p, Profile), p
    return p


def replica(name: str, *, port: int | None = 8080, cpu: str = "500m") -> Pod:
    builder = make_pod(name).scheduler("s").req(cpu=cpu, memory="256Mi")
    return (builder.host_port(port) if port else builder).obj()


class Cluster:
    """Nodes of 8, 6, 4 and 2 cpu (n1..n4: least allocated prefers them in that order) and a scheduler."""

    def __init__(self, spec: Mapping[str, Any] = BATCHING) -> None:
        self.cache = SchedulerCache()
        for name, cpu in (("n1", "8"), ("n2", "6"), ("n3", "4"), ("n4", "2")):
            self.cache.add_node(make_node(name).capacity(cpu=cpu, memory="16Gi", pods="110").obj())
        self.scheduler = GenericScheduler(profile(spec))
        self.snapshot = Snapshot(self.cache.objects)
        self.rng = random.Random(1)

    def schedule(self, pod: Pod, *, cycle: int, now: float = 0.0, assume: bool = True) -> ScheduleResult:
        self.cache.update_snapshot(self.snapshot)
        result = self.scheduler.schedule(pod, self.snapshot, rng=self.rng, turn=Turn(cycle=cycle, now=now))
        if assume and result.node is not None:
            self.cache.assume(pod, result.node)
        return result


# --------------------------------------------------------------------------- signatures


def test_identical_pods_sign_alike_and_a_difference_in_what_plugins_read_signs_apart() -> None:
    scheduler = GenericScheduler(profile())
    a, b = scheduler.sign(replica("a"), EMPTY), scheduler.sign(replica("b"), EMPTY)
    assert a is not None and a == b  # the name and uid are no part of it
    assert scheduler.sign(replica("c", port=9090), EMPTY) != a
    assert scheduler.sign(replica("d", cpu="1"), EMPTY) != a
    assert scheduler.sign(make_pod("e").scheduler("s").req(cpu="500m", memory="256Mi").host_port(8080)
                          .toleration("k", "v", "NoSchedule").obj(), EMPTY) != a  # fmt: skip
    assert dict(a)[batching.SCHEDULER_NAME_SIGNER] == "s"


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("aff").scheduler("s").pod_affinity("kubernetes.io/hostname", {"app": "x"}).obj(),
                     id="pod affinity"),
        pytest.param(make_pod("spread").scheduler("s").label(app="x").spread(1, "zone", {"app": "x"}).obj(),
                     id="topology spread constraints"),
    ],
)  # fmt: skip
def test_a_plugin_refuses_to_sign_pods_whose_verdicts_depend_on_other_pods(pod: Pod) -> None:
    assert GenericScheduler(profile()).sign(pod, EMPTY) is None


def test_the_default_profile_signs_no_pod_as_upstreams_system_spread_defaults_say() -> None:
    """Upstream's PodTopologySpread with system default constraints refuses every pod: no batching."""
    scheduler = GenericScheduler(default_profile("s"))
    assert scheduler.signers is not None and scheduler.sign(replica("a"), EMPTY) is None


def test_a_profile_with_a_plugin_that_cannot_sign_signs_nothing() -> None:
    """v1.9's SelectorSpread is no SignPlugin: upstream's computeBatchablePlugins turns signatures off."""
    scheduler = GenericScheduler(profile({"schedulerName": "s", "priorities": [{"name": "SelectorSpread"}]}))
    assert scheduler.signers is None and scheduler.sign(replica("a"), EMPTY) is None


# --------------------------------------------------------------------------- hints


def test_replicas_that_go_one_per_node_take_the_next_best_node_unscored() -> None:
    cluster = Cluster()
    first = cluster.schedule(replica("r0"), cycle=1)
    assert first.node == "n1" and first.scored is not None and len(first.scored) == 4
    second = cluster.schedule(replica("r1"), cycle=2)  # n1 holds the port now: the hint is n2, unscored
    assert (second.node, second.scored, second.evaluated_nodes) == ("n2", None, 1)
    third = cluster.schedule(replica("r2"), cycle=3)
    assert (third.node, third.scored) == ("n3", None)
    batch = cluster.scheduler.batch
    attempts, flushed, rescores = batch.take_counts()
    assert attempts == {batching.NO_HINT: 1, batching.HINT_USED: 2} and not flushed and rescores == 0
    assert batch.batched == 2


@pytest.mark.parametrize(
    ("second", "cycle", "now", "reason"),
    [
        pytest.param(replica("r1"), 3, 0.0, batching.FLUSH_POD_SKIPPED, id="another pod was tried in between"),
        pytest.param(replica("r1"), 2, 0.6, batching.FLUSH_EXPIRED, id="the ranking is older than 500 ms"),
        pytest.param(replica("r1", port=9090), 2, 0.0, batching.FLUSH_POD_INCOMPATIBLE, id="another signature"),
        pytest.param(make_pod("r1").scheduler("s").req(cpu="500m", memory="256Mi").host_port(8080).nominated("n4")
                     .obj(), 2, 0.0, batching.FLUSH_POD_NOMINATED, id="a nominated pod"),
    ],
)  # fmt: skip
def test_no_hint_unless_the_very_next_cycle_brings_the_same_signature_soon(
    second: Pod, cycle: int, now: float, reason: str
) -> None:
    cluster = Cluster()
    cluster.schedule(replica("r0"), cycle=1)
    result = cluster.schedule(second, cycle=cycle, now=now)
    # scored afresh; a nominated pod tries its own node first and goes there unscored, as without batching
    assert result.scored is not None if not second.nominated_node_name else result.node == "n4"
    attempts, flushed, _ = cluster.scheduler.batch.take_counts()
    # a nominated pod placed unscored leaves no ranking to keep (upstream: an empty list)
    empty = {batching.FLUSH_EMPTY_LIST: 1} if second.nominated_node_name else {}
    assert flushed == {reason: 1, **empty} and attempts[batching.NO_HINT] == 2


def test_a_hint_that_no_longer_fits_is_not_used_and_the_pod_is_scored_afresh() -> None:
    cluster = Cluster()
    cluster.schedule(replica("r0"), cycle=1)
    cluster.cache.add_pod(make_pod("intruder").req(cpu="6").node("n2").obj())  # the hint, n2, is full now
    result = cluster.schedule(replica("r1"), cycle=2)
    assert result.node == "n3" and result.scored is not None
    attempts, _, _ = cluster.scheduler.batch.take_counts()
    assert attempts[batching.HINT_NOT_USED] == 1


def test_a_node_that_still_fits_is_rescored_and_packing_keeps_going_there_unscored() -> None:
    """Upstream ``refreshHintCandidates``: pods that do not go one per node (no port, packing) rescore the node
    the previous one took and compete it with the kept ranking."""
    cluster = Cluster(PACKING)
    first = cluster.schedule(replica("p0", port=None), cycle=1)
    assert first.node == "n4"  # most allocated: the smallest node
    second = cluster.schedule(replica("p1", port=None), cycle=2)
    assert (second.node, second.scored) == ("n4", None)  # rescored, still the best: the hint
    _, _, rescores = cluster.scheduler.batch.take_counts()
    assert rescores == 1


def test_without_a_cycle_a_pod_is_scheduled_on_its_own() -> None:
    cluster = Cluster()
    cluster.schedule(replica("r0"), cycle=1)
    cluster.cache.update_snapshot(cluster.snapshot)
    result = cluster.scheduler.schedule(replica("r1"), cluster.snapshot, rng=cluster.rng)
    assert result.scored is not None and cluster.scheduler.batch.batched == 0


# --------------------------------------------------------------------------- batching is not rescoring


def normalisation_cluster() -> SchedulerCache:
    """n1 (label gold) and n2 (silver) empty, n3 half full. The replicas prefer gold (weight 100), then silver
    (weight 1); each holds host port 8080, so they go one per node."""
    cache = SchedulerCache()
    cache.add_node(make_node("n1").capacity(cpu="4", memory="8Gi", pods="110").label(gold="1").obj())
    cache.add_node(make_node("n2").capacity(cpu="4", memory="8Gi", pods="110").label(silver="1").obj())
    cache.add_node(make_node("n3").capacity(cpu="4", memory="8Gi", pods="110").obj())
    cache.add_pod(make_pod("load").req(cpu="2").node("n2").obj())
    return cache


def preferring(name: str) -> Pod:
    terms = [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "gold", "operator": "Exists"}]}},
        {"weight": 1, "preference": {"matchExpressions": [{"key": "silver", "operator": "Exists"}]}},
    ]
    builder = make_pod(name).scheduler("s").req(cpu="100m", memory="100Mi").host_port(8080)
    return builder.affinity({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}).obj()


def test_a_kept_ranking_keeps_its_normalisation_where_scoring_afresh_would_choose_another_node() -> None:
    """The first replica's NodeAffinity scores were normalised with gold's 100 on n1: silver's 1 is worth 1 then,
    so the second replica's hint is n3. Scored afresh without n1 (its port is taken), silver's 1 is the maximum,
    worth 100, and n2 would win. Upstream's batching decides n3: so do we."""
    sim = Simulation(normalisation_cluster(), profile(), explain=True)
    result = sim.run([preferring(f"r{i}") for i in range(3)], burst=True)
    assert [p.node for p in result.placements] == ["n1", "n3", "n2"]
    assert sim.scheduler.batch.batched == 2
    assert [p.batched for p in result.placements] == [False, True, True]
    explained = result.placements[1].explanation
    assert explained is not None and explained.hinted
    assert "opportunistic batching's hint" in render(explained)
    fresh = Simulation(normalisation_cluster(), profile(), explain=True)
    fresh.run([preferring("r0")])
    assert fresh.evaluate(preferring("r1")).node == "n2"  # one attempt on its own: no hint


# --------------------------------------------------------------------------- one queue for every profile


def test_queues_of_one_scheduler_count_cycles_together_and_pop_in_one_order() -> None:
    a, b = SchedulingQueue(), SchedulingQueue()
    b.cycles = a.cycles
    assert isinstance(a.cycles, CycleCounter)
    a.add(replica("first"), 1.0)
    b.add(replica("second"), 2.0)
    b.add(make_pod("urgent").scheduler("s").priority(10).obj(), 3.0)
    less = a.less
    order = []
    while (queue := first_ready([a, b], 5.0, less=less)) is not None:
        info = queue.pop(5.0)
        assert info is not None
        order.append((info.pod.name, queue.scheduling_cycle))
        queue.done(info.pod)
    assert order == [("urgent", 1), ("first", 2), ("second", 3)]  # priority, then the earlier enqueue
