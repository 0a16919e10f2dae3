"""SchedulerCache: step-by-step scenarios of the pod state machine, node lifecycle and
incremental snapshots, and a hypothesis property over random operation sequences."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from kopf_scheduler.core.framework.nodeinfo import NodeInfo
from kopf_scheduler.core.framework.snapshot import NodeTable, Snapshot
from kopf_scheduler.core.model.objects import Node, Pod
from kopf_scheduler.core.model.resources import ZERO_RESOURCES, Resources
from kopf_scheduler.core.state.cache import ASSUMED_POD_TTL_SECONDS, CacheError, PodState, SchedulerCache

GI = 2**30


def node(name: str, zone: str = "", cpu: str = "4", memory: str = "32Gi") -> Node:
    b = make_node(name).capacity(cpu=cpu, memory=memory, pods="110")
    if zone:
        b.zone(zone)
    return b.obj()


def pod(name: str, cpu: str = "1", memory: str = "1Gi", *, on: str = "", scheduler: str = "") -> Pod:
    b = make_pod(name).req(cpu=cpu, memory=memory)
    if on:
        b.node(on)
    if scheduler:
        b.scheduler(scheduler)
    return b.obj()


def usage(cache: SchedulerCache) -> dict[str, tuple[int, int, int]]:
    """Per NodeInfo (placeholders too): (milli cpu, memory, pod count)."""
    out = {}
    for name, info in cache._nodes.items():
        out[name or "<empty>"] = (info.requested.milli_cpu, info.requested.memory, len(info.pods))
    return out


def states(cache: SchedulerCache) -> dict[str, str]:
    return {e.pod.name: e.state.value for e in cache._pods.values()}


@pytest.fixture
def cache() -> SchedulerCache:
    c = SchedulerCache()
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    return c


# --------------------------------------------------------------------------- pod state machine


def test_assume_finish_binding_add_confirms(cache: SchedulerCache) -> None:
    p = pod("p", cpu="1", memory="2Gi")
    # step: assume on n1 -> ASSUMED, counted on n1, returned with nodeName set
    placed = cache.assume(p, "n1")
    assert placed.node_name == "n1" and p.node_name == ""
    assert cache.state_of(p) is PodState.ASSUMED and cache.is_assumed(p)
    assert usage(cache) == {"n1": (1000, 2 * GI, 1), "n2": (0, 0, 0)}
    # step: the bind succeeded at t=100 -> BOUND, deadline 130
    cache.finish_binding(placed, 100.0)
    assert cache.state_of(p) is PodState.BOUND
    assert cache._pods[p.uid].deadline == 100.0 + ASSUMED_POD_TTL_SECONDS
    # step: the watch shows it bound on n1 -> ADDED, no longer assumed
    bound = pod("p", cpu="1", memory="2Gi", on="n1")
    bound = dataclasses.replace(bound, uid=p.uid)
    cache.add_pod(bound)
    assert cache.state_of(p) is PodState.ADDED and not cache.is_assumed(p)
    assert cache.get_pod(p.uid) is bound
    assert usage(cache) == {"n1": (1000, 2 * GI, 1), "n2": (0, 0, 0)}
    # step: confirmed pods never expire
    assert cache.expire(10_000.0) == []
    assert cache.assumed_count() == 0 and cache.pod_count() == 1


def test_assume_then_forget(cache: SchedulerCache) -> None:
    p = pod("p")
    placed = cache.assume(p, "n2")
    assert usage(cache)["n2"] == (1000, GI, 1)
    cache.forget(placed)
    assert usage(cache) == {"n1": (0, 0, 0), "n2": (0, 0, 0)}
    assert cache.state_of(p) is None
    # step: forgetting a BOUND (bind finished, unconfirmed) pod is allowed as upstream
    placed = cache.assume(p, "n2")
    cache.finish_binding(placed, 0.0)
    cache.forget(p)  # the pod without nodeName: no node to mismatch
    assert cache.pod_count() == 0 and usage(cache)["n2"] == (0, 0, 0)


def test_finish_binding_expires_after_ttl_unless_confirmed(cache: SchedulerCache) -> None:
    a, b, c = pod("a"), pod("b"), pod("c")
    cache.assume(a, "n1")
    cache.assume(b, "n1")
    cache.assume(c, "n2")  # its bind never finishes
    cache.finish_binding(a, 10.0)  # deadline 40.0
    cache.finish_binding(b, 20.0)  # deadline 50.0
    # step: t=39.9 nothing expires
    assert cache.expire(39.9) == []
    # step: t=40.0 a expires (deadline <= now) and leaves n1
    assert [p.name for p in cache.expire(40.0)] == ["a"]
    assert states(cache) == {"b": "bound", "c": "assumed"}
    assert usage(cache) == {"n1": (1000, GI, 1), "n2": (1000, GI, 1)}
    # step: b is confirmed before its deadline -> survives
    cache.add_pod(dataclasses.replace(b, node_name="n1"))
    assert cache.expire(1000.0) == []
    # step: an assumed pod whose bind has not finished never expires
    assert states(cache) == {"b": "added", "c": "assumed"}


def test_custom_ttl() -> None:
    cache = SchedulerCache(ttl=5.0)
    cache.add_node(node("n1"))
    p = pod("p")
    cache.assume(p, "n1")
    cache.finish_binding(p, 0.0)
    assert cache.expire(4.9) == [] and len(cache.expire(5.0)) == 1


def test_confirm_on_a_different_node_moves_the_pod(cache: SchedulerCache) -> None:
    p = pod("p", cpu="2", memory="4Gi")
    cache.assume(p, "n1")
    cache.finish_binding(p, 0.0)
    # step: the watch says n2 (someone else bound it, or the assumption was wrong)
    cache.add_pod(dataclasses.replace(p, node_name="n2"))
    assert usage(cache) == {"n1": (0, 0, 0), "n2": (2000, 4 * GI, 1)}
    assert cache.state_of(p) is PodState.ADDED
    # step: an update for an ADDED pod to another node also moves it
    cache.update_pod(None, dataclasses.replace(p, node_name="n1"))
    assert usage(cache) == {"n1": (2000, 4 * GI, 1), "n2": (0, 0, 0)}


def test_update_of_assumed_pod_confirms_it(cache: SchedulerCache) -> None:
    p = pod("p")
    cache.assume(p, "n1")
    cache.update_pod(p, dataclasses.replace(p, node_name="n1", resource_version="5"))
    assert cache.state_of(p) is PodState.ADDED
    assert cache.expire(1e9) == []


def test_update_changes_requests(cache: SchedulerCache) -> None:
    p = pod("p", cpu="1", on="n1")
    cache.add_pod(p)
    bigger = dataclasses.replace(p, requests=Resources(3000, 5 * GI))
    cache.update_pod(p, bigger)
    assert usage(cache)["n1"] == (3000, 5 * GI, 1)
    cache.remove_pod(bigger)
    assert usage(cache)["n1"] == (0, 0, 0)


ILLEGAL: list[Any] = [
    pytest.param(lambda c, p: c.finish_binding(p, 0.0), id="finish_binding of an unknown pod"),
    pytest.param(lambda c, p: c.forget(p), id="forget of an unknown pod"),
    pytest.param(lambda c, p: c.remove_pod(p), id="remove of an unknown pod"),
    pytest.param(lambda c, p: c.update_pod(None, p.with_node("n1")), id="update of an unknown pod"),
    pytest.param(lambda c, p: c.add_pod(p), id="add of an unbound pod"),
    pytest.param(lambda c, p: c.assume(c.get_pod("uid-assumed"), "n2"), id="assume of an assumed pod"),
    pytest.param(lambda c, p: c.assume(c.get_pod("uid-added"), "n2"), id="assume of an added pod"),
    pytest.param(lambda c, p: c.finish_binding(c.get_pod("uid-bound"), 1.0), id="finish_binding twice"),
    pytest.param(lambda c, p: c.finish_binding(c.get_pod("uid-added"), 1.0), id="finish_binding of an added pod"),
    pytest.param(lambda c, p: c.forget(c.get_pod("uid-added")), id="forget of an added pod"),
    pytest.param(lambda c, p: c.forget(c.get_pod("uid-assumed").with_node("n2")), id="forget on the wrong node"),  # type: ignore[union-attr]
    pytest.param(lambda c, p: c.add_pod(c.get_pod("uid-added")), id="add of an added pod"),
    pytest.param(
        lambda c, p: c.update_pod(None, dataclasses.replace(c.get_pod("uid-added"), node_name="")),
        id="update of an added pod to no node",
    ),
    pytest.param(lambda c, p: c.assume(p, ""), id="assume on no node"),
]


@pytest.mark.parametrize("action", ILLEGAL)
def test_illegal_transitions_raise_and_change_nothing(
    cache: SchedulerCache, action: Callable[[SchedulerCache, Pod], Any]
) -> None:
    cache.assume(make_pod("assumed").uid("uid-assumed").req(cpu="1").obj(), "n1")
    bound = cache.assume(make_pod("bound").uid("uid-bound").req(cpu="2").obj(), "n1")
    cache.finish_binding(bound, 0.0)
    cache.add_pod(make_pod("added").uid("uid-added").req(cpu="3").node("n2").obj())
    before_usage, before_states = usage(cache), states(cache)
    before_gens = {n: i.generation for n, i in cache._nodes.items()}
    with pytest.raises(CacheError):
        action(cache, pod("stranger"))
    assert usage(cache) == before_usage
    assert states(cache) == before_states
    assert {n: i.generation for n, i in cache._nodes.items()} == before_gens


# --------------------------------------------------------------------------- nodes


def test_node_removed_while_pods_remain_then_pods_removed(cache: SchedulerCache) -> None:
    a, b = pod("a", on="n1"), pod("b", on="n1")
    cache.add_pod(a)
    cache.add_pod(b)
    snap = cache.snapshot()
    assert [i.name for i in snap.node_infos] == ["n1", "n2"]
    # step: n1 is deleted; its pods' deletions have not arrived yet
    cache.remove_node("n1")
    assert cache.node_names() == ["n2"] and cache.node_count() == 1
    info = cache.get_node_info("n1")
    assert info is not None and info.node is None and len(info) == 2
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos] == ["n2"]
    assert snap.get("n1") is None and len(snap.table) == 1
    # step: the pods go: the placeholder disappears with the last one
    cache.remove_pod(a)
    assert cache.get_node_info("n1") is not None
    cache.remove_pod(b)
    assert cache.get_node_info("n1") is None
    assert usage(cache) == {"n2": (0, 0, 0)}
    cache.remove_node("n1")  # removing an unknown node is a no-op


def test_pods_before_their_node_then_node_arrives(cache: SchedulerCache) -> None:
    cache.add_pod(pod("early", cpu="1", on="n3"))
    snap = cache.snapshot()
    assert snap.get("n3") is None and cache.node_count() == 2
    cache.add_node(node("n3"))
    cache.update_snapshot(snap)
    info = snap.get("n3")
    assert info is not None and info.requested.milli_cpu == 1000
    k = snap.table.position["n3"]
    assert snap.table.req_cpu[k] == 1000 and snap.table.pod_count[k] == 1 and snap.table.alloc_cpu[k] == 4000


def test_pods_of_other_schedulers_count_toward_usage(cache: SchedulerCache) -> None:
    cache.add_pod(pod("ours", cpu="1", on="n1"))
    cache.add_pod(pod("theirs", cpu="2", on="n1", scheduler="other-scheduler"))
    assert usage(cache)["n1"] == (3000, 2 * GI, 2)
    snap = cache.snapshot()
    assert snap.table.req_cpu[snap.table.position["n1"]] == 3000


def test_tree_order_interleaves_zones() -> None:
    cache = SchedulerCache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c"), ("x", "")]:
        cache.add_node(node(name, zone))
    snap = cache.snapshot()
    # round 1: first of each zone (in order of first appearance), round 2: second of each...
    assert [i.name for i in snap.node_infos] == ["a1", "b1", "c1", "x", "a2", "c2", "a3"]
    assert snap.table.names == [i.name for i in snap.node_infos]
    # step: a node changes zone (via update_node): the order is rebuilt. Zones come in the
    # order of their first node in the cache, nodes keep their insertion order within a zone
    # (upstream's nodeTree would append a1 to zone b instead; the interleaving is the same).
    cache.update_node(node("a1", "b"))
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos] == ["a1", "a2", "c1", "x", "b1", "a3", "c2"]


def test_add_node_with_a_new_zone_rebuilds_the_order() -> None:
    # regression: add_node compared the zone after replacing the node, so this went unnoticed
    cache = SchedulerCache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]:
        cache.add_node(node(name, zone))
    snap = cache.snapshot()
    assert [i.name for i in snap.node_infos] == ["a1", "b1", "a2", "b2"]
    cache.add_node(node("a1", "b"))
    cache.update_snapshot(snap)
    # zone b = a1, b1, b2 now; zone a = a2 (the stale order was a1, b1, a2, b2)
    assert [i.name for i in snap.node_infos] == ["a1", "a2", "b1", "b2"]


# --------------------------------------------------------------------------- snapshots


def test_update_snapshot_reclones_only_changed_nodes() -> None:
    cache = SchedulerCache()
    for i in range(5):
        cache.add_node(node(f"n{i}"))
    snap = cache.snapshot()
    first = {i.name: i for i in snap.node_infos}
    gen0 = snap.generation
    assert gen0 == max(i.generation for i in cache._nodes.values())
    # step: nothing changed -> nothing re-cloned
    cache.update_snapshot(snap)
    assert all(snap.get(n) is first[n] for n in first) and snap.generation == gen0
    # step: a pod lands on n2 and n4 changes allocatable -> exactly those two are re-cloned
    cache.add_pod(pod("p", cpu="1", on="n2"))
    cache.update_node(node("n4", cpu="8"))
    cache.update_snapshot(snap)
    fresh = {n for n in first if snap.get(n) is not first[n]}
    assert fresh == {"n2", "n4"}
    assert snap.generation == max(cache._nodes["n2"].generation, cache._nodes["n4"].generation) > gen0
    assert snap.get("n2").generation == cache._nodes["n2"].generation  # type: ignore[union-attr]
    t = snap.table
    assert t.req_cpu[t.position["n2"]] == 1000 and t.alloc_cpu[t.position["n4"]] == 8000
    # the clone is independent of the cache's NodeInfo
    cache.add_pod(pod("q", cpu="1", on="n2"))
    assert snap.get("n2").requested.milli_cpu == 1000  # type: ignore[union-attr]


def test_a_snapshots_node_names_list_is_never_changed_in_place() -> None:
    # explanations keep an attempt's `table.names` by reference (core/scheduling/attempts.py): updates must not edit it
    cache = SchedulerCache()
    for i in range(3):
        cache.add_node(node(f"n{i}"))
    snap = cache.snapshot()
    kept = snap.table.names
    cache.add_pod(pod("p", cpu="1", on="n1"))
    cache.update_snapshot(snap)
    assert snap.table.names is kept  # rows rewritten in place: the same list
    cache.add_node(node("n3"))
    cache.remove_node("n0")
    cache.update_snapshot(snap)
    assert kept == ["n0", "n1", "n2"] and sorted(snap.table.names) == ["n1", "n2", "n3"]


def test_a_changed_node_set_keeps_the_clones_and_rows_of_unchanged_nodes() -> None:
    cache = SchedulerCache()
    for i in range(5):
        cache.add_node(node(f"n{i}"))
    snap = cache.snapshot()
    first = {i.name: i for i in snap.node_infos}
    cache.add_node(node("n5"))  # the node set changes: the order is made again...
    cache.add_pod(pod("p", cpu="1", on="n1"))
    cache.remove_node("n3")
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos] == ["n0", "n1", "n2", "n4", "n5"]
    assert {n for n in first if n != "n3" and snap.get(n) is not first[n]} == {"n1"}  # ...but only n1 is cloned again
    rebuilt = NodeTable(list(snap.node_infos))  # every row written afresh
    for col in (*TABLE_COLUMNS, "generation"):
        assert np.array_equal(getattr(snap.table, col), getattr(rebuilt, col)), col


def test_nodes_holding_pods_with_affinity_are_known_per_change() -> None:
    cache = SchedulerCache()
    for name in ("a", "b", "c"):
        cache.add_node(node(name))
    snap = cache.snapshot()
    assert not snap.any_pods_with_affinity and not snap.any_pods_with_required_anti_affinity
    anti = make_pod("anti").uid("anti").pod_affinity("kubernetes.io/hostname", {"x": "y"}, anti=True).node("c").obj()
    cache.add_pod(anti)
    cache.add_pod(make_pod("aff").uid("aff").pod_affinity("kubernetes.io/hostname", {"x": "y"}).node("a").obj())
    cache.update_snapshot(snap)
    assert snap.any_pods_with_affinity and snap.any_pods_with_required_anti_affinity
    assert [i.name for i in snap.have_pods_with_affinity] == ["a", "c"]  # in snapshot order
    assert [i.name for i in snap.have_pods_with_required_anti_affinity] == ["c"]
    cache.remove_pod(anti)
    cache.update_snapshot(snap)
    assert snap.any_pods_with_affinity and not snap.any_pods_with_required_anti_affinity
    assert [i.name for i in snap.have_pods_with_affinity] == ["a"]


def test_two_snapshots_each_see_node_set_changes() -> None:
    # regression: the node-set version was stored once per cache, so a second snapshot
    # (cache.snapshot() for a simulation or a dump) hid added and removed nodes from the loop's one
    cache = SchedulerCache()
    cache.add_node(node("a"))
    cache.add_node(node("gone"))
    loop = Snapshot()
    cache.update_snapshot(loop)
    cache.add_node(node("b"))
    cache.remove_node("gone")
    other = cache.snapshot()
    cache.update_snapshot(loop)
    assert [i.name for i in loop.node_infos] == [i.name for i in other.node_infos] == ["a", "b"]
    assert loop.table.names == ["a", "b"]


def test_snapshot_of_is_rebuilt_by_update_snapshot() -> None:
    cache = SchedulerCache()
    cache.add_node(node("a"))
    snap = Snapshot.of([NodeInfo(node("zzz"))])
    cache.update_snapshot(snap)
    assert [i.name for i in snap.node_infos] == ["a"]


# --------------------------------------------------------------------------- property


TABLE_COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "pod_count",
    "nz_cpu",
    "nz_mem",
    "has_node",
)

NODE_NAMES = ["n0", "n1", "n2", "n3"]
POD_NAMES = [f"p{i}" for i in range(8)]

op = st.one_of(
    st.tuples(
        st.just("add_node"),
        st.sampled_from(NODE_NAMES),
        st.sampled_from(["", "a", "b"]),
        st.sampled_from(["2", "4", "8"]),
    ),
    st.tuples(st.just("remove_node"), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("assume"), st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("finish_binding"), st.sampled_from(POD_NAMES)),
    st.tuples(st.just("forget"), st.sampled_from(POD_NAMES)),
    st.tuples(st.just("add_pod"), st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)),
    st.tuples(
        st.just("update_pod"),
        st.sampled_from(POD_NAMES),
        st.sampled_from(NODE_NAMES),
        st.sampled_from(["100m", "1", "3"]),
    ),
    st.tuples(st.just("remove_pod"), st.sampled_from(POD_NAMES)),
    st.tuples(st.just("expire"), st.sampled_from([0.0, 10.0, 31.0])),
    st.tuples(st.just("snapshot"), st.booleans()),
)


def _pods() -> dict[str, Pod]:
    out = {}
    for i, name in enumerate(POD_NAMES):
        b = make_pod(name).uid(f"uid-{name}")
        if i % 3 == 0:
            b.req(cpu=f"{(i + 1) * 100}m", memory=f"{i + 1}Gi", ephemeral_storage="1Gi")
        elif i % 3 == 1:
            b.req(cpu="500m", example__com__gpu="1")  # no memory request: non-zero default applies
        out[name] = b.obj()
    return out


def _apply(
    cache: SchedulerCache, pods: dict[str, Pod], step: tuple[Any, ...], clock: list[float], loop: Snapshot
) -> None:
    kind = step[0]
    if kind == "add_node":
        _, name, zone, cpu = step
        cache.add_node(node(name, zone, cpu=cpu))
    elif kind == "remove_node":
        cache.remove_node(step[1])
    elif kind == "assume":
        cache.assume(pods[step[1]], step[2])
    elif kind == "finish_binding":
        cache.finish_binding(pods[step[1]], clock[0])
    elif kind == "forget":
        cache.forget(pods[step[1]])
    elif kind == "add_pod":
        cache.add_pod(pods[step[1]].with_node(step[2]))
    elif kind == "update_pod":
        _, name, node_name, cpu = step
        base = pods[name]
        new = dataclasses.replace(
            base.with_node(node_name),
            requests=dataclasses.replace(base.requests, milli_cpu=Resources.from_mapping({"cpu": cpu}).milli_cpu),
        )
        cache.update_pod(cache.get_pod(base.uid), new)
    elif kind == "remove_pod":
        stored = cache.get_pod(pods[step[1]].uid)
        cache.remove_pod(stored if stored is not None else pods[step[1]])
    elif kind == "expire":
        clock[0] += step[1]
        cache.expire(clock[0])
    elif kind == "snapshot":
        if step[1]:
            cache.snapshot()  # a second snapshot must not disturb the loop's one
        cache.update_snapshot(loop)


def _check(cache: SchedulerCache, loop: Snapshot) -> None:
    # every NodeInfo's sums are the sums of its pods, never negative
    for info in cache._nodes.values():
        want = ZERO_RESOURCES
        for p in info.pods.values():
            want = want + p.requests
        assert info.requested.milli_cpu == want.milli_cpu >= 0
        assert info.requested.memory == want.memory >= 0
        assert info.requested.ephemeral_storage == want.ephemeral_storage >= 0
        assert all(v >= 0 for v in info.requested.scalar.values())
        assert info.non_zero_requested.milli_cpu >= 0 and info.non_zero_requested.memory >= 0
        assert info.node is not None or info.pods, "an empty placeholder was left behind"
    # every cached pod is on exactly the node it names
    for e in cache._pods.values():
        assert cache._nodes[e.pod.node_name].pods[e.pod.uid] is e.pod
    assert sum(len(i.pods) for i in cache._nodes.values()) == cache.pod_count()
    # the assumed index holds exactly the entries not yet confirmed (expiry and counts read only it)
    assert cache._assumed == {uid: e for uid, e in cache._pods.items() if e.state is not PodState.ADDED}
    assert cache.assumed_count() == len(cache._assumed)
    # the incrementally updated snapshot equals a fresh rebuild
    cache.update_snapshot(loop)
    fresh = cache.snapshot()
    assert loop.table.names == fresh.table.names == [i.name for i in loop.node_infos]
    for col in TABLE_COLUMNS:
        assert np.array_equal(getattr(loop.table, col), getattr(fresh.table, col)), col
    for a, b in zip(loop.node_infos, fresh.node_infos):
        assert (
            a.pods.keys() == b.pods.keys()
            and a.requested == b.requested
            and a.node is b.node
            and a.generation == b.generation
        )
    assert np.array_equal(loop.table.generation, fresh.table.generation)
    rebuilt = NodeTable(list(fresh.node_infos))
    for col in TABLE_COLUMNS:
        assert np.array_equal(getattr(loop.table, col), getattr(rebuilt, col)), col
    assert np.array_equal(loop.table.scalar_requested("example.com/gpu"), rebuilt.scalar_requested("example.com/gpu"))
    # derived columns cached on the long-lived table are dropped when their nodes change
    zone = "topology.kubernetes.io/zone"
    ids, vocab = loop.table.label_column(zone)
    fresh_ids, fresh_vocab = rebuilt.label_column(zone)
    inv, fresh_inv = {v: k for k, v in vocab.items()}, {v: k for k, v in fresh_vocab.items()}
    assert [inv.get(int(i)) for i in ids] == [fresh_inv.get(int(i)) for i in fresh_ids]
    assert np.array_equal(
        loop.table.scalar_allocatable("example.com/gpu"), rebuilt.scalar_allocatable("example.com/gpu")
    )


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(op, max_size=40))
def test_random_operations_keep_sums_and_table_consistent(steps: list[tuple[Any, ...]]) -> None:
    cache = SchedulerCache()
    pods = _pods()
    clock = [0.0]
    loop = Snapshot()
    cache.update_snapshot(loop)
    for step in steps:
        before = (usage(cache), states(cache))
        try:
            _apply(cache, pods, step, clock, loop)
        except CacheError:
            assert (usage(cache), states(cache)) == before, f"{step} raised but changed the cache"
        _check(cache, loop)
