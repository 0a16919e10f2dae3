"""What v1.37 turns on by default for DRA: extended resources backed by DRA (DRAExtendedResource), DeviceTaintRules
(DRADeviceTaintRules) and the DynamicResources Filter timeout (DRASchedulerFilterTimeout).

Upstream: ``dynamicresources/extendeddynamicresources.go``, ``noderesources/fit.go`` and ``resource_allocation.go``,
``k8s.io/dynamic-resource-allocation`` ``deviceclass/extendedresourcecache`` and ``resourceslice/tracker`` (v1.37.2).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from builders import make_node, make_pod, node_info
from dra_builders import DRIVER_A, DRIVER_B, class_obj, device, device_class, request, resource_slice, slice_obj

from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.dra.extended import SPECIAL_CLAIM_NAME, requests_and_mappings
from kopf_scheduler.core.dra.objects import EXTENDED_RESOURCE_CLAIM_ANNOTATION, FINALIZER
from kopf_scheduler.core.dra.parsing import parse_device_taint_rule
from kopf_scheduler.core.dra.tracker import DraTracker
from kopf_scheduler.core.framework.basics import Code, CycleState, Status
from kopf_scheduler.core.framework.interface import ClusterEvent, QueueingHint
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.plugins.dynamic_resources import (
    ERR_CANNOT_ALLOCATE,
    ERR_CANNOT_FIT_RESOURCE,
    ERR_STALE_EXTENDED_CLAIM,
    MSG_DELETED,
    DynamicResources,
    DynamicResourcesArgs,
)
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit, NodeResourcesFitArgs, ScoringStrategy
from kopf_scheduler.core.scheduling.dra_routing import route_dra_object
from kopf_scheduler.core.scheduling.routing import PendingPods, serve
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.toolkit.scoring import ResourceSpec
from kopf_scheduler.sim.loader import load_cluster, load_pods
from kopf_scheduler.sim.simulator import Simulation

GPU = "example.com/gpu"


def gpu_class(name: str = "gpu", resource: str | None = GPU, created: str = "", driver: str = DRIVER_A) -> Any:
    body = device_class(name, driver)
    if resource is not None:
        body["spec"]["extendedResourceName"] = resource
    if created:
        body["metadata"]["creationTimestamp"] = created
    return body


def taint_rule(name: str, key: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": key, "effect": effect}},
    }


# =============================================================================================== the class resolver


def test_a_class_serves_its_extended_resource_name_and_its_implicit_one() -> None:
    t = DraTracker()
    t.set_class(class_obj(gpu_class()))
    assert t.device_class_for(GPU).name == "gpu"  # type: ignore[union-attr]
    assert t.device_class_for("deviceclass.resource.kubernetes.io/gpu").name == "gpu"  # type: ignore[union-attr]
    assert t.device_class_for("example.com/fpga") is None
    t.remove_class("gpu")
    assert t.device_class_for(GPU) is None and t.device_class_for("deviceclass.resource.kubernetes.io/gpu") is None


def test_of_two_classes_naming_one_resource_the_newer_wins_then_the_lower_name() -> None:
    t = DraTracker()
    t.set_class(class_obj(gpu_class("b", created="2026-01-02T00:00:00Z")))
    t.set_class(class_obj(gpu_class("a", created="2026-01-01T00:00:00Z")))  # older: changes nothing at all
    assert t.device_class_for(GPU).name == "b"  # type: ignore[union-attr]
    assert t.device_class_for("deviceclass.resource.kubernetes.io/a") is None  # upstream's quirk, kept
    t.set_class(class_obj(gpu_class("c", created="2026-01-02T00:00:00Z")))  # same age, higher name
    assert t.device_class_for(GPU).name == "b"  # type: ignore[union-attr]
    t.set_class(class_obj(gpu_class("a2", created="2026-01-03T00:00:00Z")))
    assert t.device_class_for(GPU).name == "a2"  # type: ignore[union-attr]


# =============================================================================================== requests and mappings


def resolver(*names: str) -> DraTracker:
    t = DraTracker()
    for i, name in enumerate(names):
        t.set_class(class_obj(gpu_class(f"class-{i}", name)))
    return t


def test_requests_are_per_container_named_by_index_and_sorted_request_name() -> None:
    # containers: init (short-lived, wants 3), sidecar (long-lived, 1), main (2); main also asks cpu and a second one
    pod = (
        make_pod("p")
        .init_container("init", **{GPU: "3"})
        .init_container("side", restartable=True, **{GPU: "1"})
        .container("main", cpu="1", **{GPU: "2", "example.com/tpu": "1"})
        .obj()
    )
    requests, mappings = requests_and_mappings(pod, {GPU: 3, "example.com/tpu": 1}, resolver(GPU, "example.com/tpu"))
    # init (index 0) reuses the sidecar's and main's devices (1 + 2 >= 3): no request of its own
    assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests] == [
        ("container-1-request-0", "class-0", 1),  # sidecar: its only request name
        ("container-2-request-1", "class-0", 2),  # main: sorted names cpu, example.com/gpu, example.com/tpu
        ("container-2-request-2", "class-1", 1),
    ]
    assert [(m.container, m.resource, m.request) for m in mappings] == [
        ("side", GPU, "container-1-request-0"),
        ("main", GPU, "container-2-request-1"),
        ("init", GPU, "container-1-request-0"),
        ("init", GPU, "container-2-request-1"),
        ("main", "example.com/tpu", "container-2-request-2"),
    ]


def test_init_containers_share_the_biggest_of_their_own_requests() -> None:
    pod = make_pod("p").init_container("a", **{GPU: "2"}).init_container("b", **{GPU: "5"}).container("c").obj()
    requests, mappings = requests_and_mappings(pod, {GPU: 5}, resolver(GPU))
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("container-1-request-0", 5)]
    assert [(m.container, m.request) for m in mappings] == [
        ("a", "container-1-request-0"),
        ("b", "container-1-request-0"),
    ]


# =============================================================================================== NodeResourcesFit


def fit_filter(pod: Pod, objs: ClusterObjects, *nodes: Any) -> list[Code]:
    plugin, state = NodeResourcesFit(), CycleState()
    infos = [node_info(n) for n in nodes]
    plugin.pre_filter(state, pod, Snapshot.of(infos, objs))
    return [plugin.filter(state, pod, i).code for i in infos]


def test_fit_leaves_a_resource_dra_serves_to_dra_where_the_node_has_none() -> None:
    objs = ClusterObjects()
    pod = make_pod("p").req(cpu="1", **{GPU: "2"}).obj()
    plain, advertised = (
        make_node("n1").obj(),
        make_node("n2").capacity(cpu="4", memory="32Gi", pods="110", **{GPU: "1"}).obj(),
    )
    assert fit_filter(pod, objs, plain, advertised) == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE] * 2
    objs.dra.set_class(class_obj(gpu_class()))
    # where the node advertises the resource, its device plugin serves it: checked as before
    assert fit_filter(pod, objs, plain, advertised) == [Code.SUCCESS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE]


def test_fit_vector_filter_agrees_with_the_per_node_filter() -> None:
    objs = ClusterObjects()
    objs.dra.set_class(class_obj(gpu_class()))
    pod = make_pod("p").req(cpu="1", **{GPU: "2"}).obj()
    nodes = [
        make_node("n1").obj(),
        make_node("n2").capacity(cpu="4", memory="32Gi", pods="110", **{GPU: "1"}).obj(),
        make_node("n3").capacity(cpu="4", memory="32Gi", pods="110", **{GPU: "4"}).obj(),
    ]
    snap = Snapshot.of([node_info(n) for n in nodes], objs)
    plugin, state = NodeResourcesFit(), CycleState()
    plugin.pre_filter(state, pod, snap)
    import numpy as np

    mask = plugin.filter_nodes(state, pod, snap.table, np.arange(3))
    assert mask.tolist() == [plugin.filter(state, pod, i).is_success for i in snap.node_infos] == [True, False, True]
    statuses = plugin.filter_statuses(state, pod, snap.table, np.array([1]))
    assert statuses is not None and statuses[0][0].reasons == (f"Insufficient {GPU}",)


def test_a_class_naming_the_resource_requeues_the_pod() -> None:
    cache = SchedulerCache()
    queue = serve(default_profile("s"), None, pending=PendingPods(), now=0.0, cluster=cache)
    plugin = next(p for p in default_profile("s").plugins if isinstance(p, NodeResourcesFit))
    hint = next(e.hint for e in plugin.events_to_register(queue.hints) if e.event is ClusterEvent.DEVICE_CLASS_CHANGE)  # type: ignore[arg-type]
    assert hint is not None
    pod = make_pod("p").req(**{GPU: "1"}).obj()
    cls, other = class_obj(gpu_class()), class_obj(gpu_class("x", "example.com/other"))
    assert hint(pod, None, cls) is QueueingHint.QUEUE
    assert hint(pod, None, other) is QueueingHint.QUEUE_SKIP
    assert hint(pod, cls, cls) is QueueingHint.QUEUE_SKIP  # the name did not change
    assert (
        hint(make_pod("q").req(**{"deviceclass.resource.kubernetes.io/x": "1"}).obj(), None, other)
        is QueueingHint.QUEUE
    )


def test_fit_scores_a_dra_resource_by_the_nodes_devices() -> None:
    """Scoring resources cpu and example.com/gpu, LeastAllocated: a node without the resource in its allocatable
    counts its devices of the class (3, one allocated) instead of scoring the resource as absent."""
    objs = ClusterObjects()
    objs.dra.set_class(class_obj(gpu_class()))
    objs.dra.set_slice(slice_obj(resource_slice("s1", "n1", device("d0"), device("d1"), device("d2"), node="n1")))
    strategy = ScoringStrategy(resources=(ResourceSpec("cpu", 1), ResourceSpec(GPU, 1)))
    plugin, state = NodeResourcesFit(NodeResourcesFitArgs(scoring_strategy=strategy)), CycleState()
    pod = make_pod("p").req(cpu="1", **{GPU: "1"}).obj()
    infos = [node_info(make_node("n1").obj()), node_info(make_node("n2").obj())]
    snap = Snapshot.of(infos, objs)
    plugin.pre_score(state, pod, infos, snap)
    # n1: cpu (4000-1000)*100/4000 = 75, gpu (3-1)*100/3 = 66 -> (75 + 66) / 2 = 70; n2: cpu only -> 75
    assert [plugin.score(state, pod, i) for i in infos] == [70, 75]
    import numpy as np

    assert plugin.score_nodes(state, pod, snap.table, np.arange(2)).tolist() == [70, 75]


# =============================================================================================== DynamicResources


N1 = make_node("n1").obj()  # DRA devices
N2 = make_node("n2").capacity(cpu="4", memory="32Gi", pods="110", **{GPU: "4"}).obj()  # a device plugin
N3 = make_node("n3").obj()  # neither


def dra_cluster(*devices: str) -> ClusterObjects:
    objs = ClusterObjects()
    objs.dra.set_class(class_obj(gpu_class()))
    objs.dra.set_slice(slice_obj(resource_slice("n1-gpus", "n1", *(device(d) for d in devices), node="n1")))
    return objs


def dra_pre_filter(pod: Pod, objs: ClusterObjects) -> tuple[DynamicResources, CycleState, Code]:
    plugin, state = DynamicResources(), CycleState()
    status = plugin.pre_filter(state, pod, Snapshot.of([node_info(n) for n in (N1, N2, N3)], objs))
    return plugin, state, status.code


def test_an_extended_resource_pod_gets_devices_where_the_node_lacks_the_resource() -> None:
    objs = dra_cluster("gpu-0", "gpu-1")
    pod = make_pod("p").req(cpu="1", **{GPU: "2"}).obj()
    plugin, state, code = dra_pre_filter(pod, objs)
    assert code is Code.SUCCESS
    assert plugin.filter(state, pod, node_info(N1)).is_success
    assert plugin.filter(state, pod, node_info(N2)).is_success  # its device plugin serves it: nothing for DRA
    assert plugin.filter(state, pod, node_info(N3)).reasons == (ERR_CANNOT_ALLOCATE,)
    s = state.read(plugin._key)
    assert s is not None and set(s.node_allocations) == {"n1"}
    claim, mappings = s.node_extended["n1"]
    assert claim.name == SPECIAL_CLAIM_NAME and [r.name for r in claim.spec.requests] == ["container-0-request-1"]
    assert [(r.device) for r in s.node_allocations["n1"][0].results] == ["gpu-0", "gpu-1"]
    assert [(m.container, m.resource, m.request) for m in mappings] == [("c0", GPU, "container-0-request-1")]


def test_a_resource_neither_the_node_nor_a_class_provides_does_not_fit() -> None:
    objs = dra_cluster("gpu-0")
    pod = make_pod("p").req(**{GPU: "1", "example.com/fpga": "1"}).obj()
    plugin, state, _ = dra_pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).reasons == (ERR_CANNOT_FIT_RESOURCE,)


def test_reserve_puts_the_allocation_in_flight_and_unreserve_takes_it_back() -> None:
    objs = dra_cluster("gpu-0", "gpu-1")
    pod = make_pod("p").req(**{GPU: "1"}).obj()
    plugin, state, _ = dra_pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).is_success

    class Handle:
        objects = objs

    assert plugin.reserve(state, pod, "n1", Handle()).is_success  # type: ignore[arg-type]
    other = make_pod("q").req(**{GPU: "2"}).obj()
    plugin2, state2, _ = dra_pre_filter(other, objs)
    assert plugin2.filter(state2, other, node_info(N1)).reasons == (ERR_CANNOT_ALLOCATE,)  # gpu-0 is taken
    plugin.unreserve(state, pod, "n1", Handle())  # type: ignore[arg-type]
    assert objs.dra.drain() == []  # nothing was created: nothing to delete
    plugin2, state2, _ = dra_pre_filter(other, objs)
    assert plugin2.filter(state2, other, node_info(N1)).is_success


def test_a_claim_of_an_earlier_cycle_fails_every_node_and_post_filter_deletes_it() -> None:
    objs = dra_cluster("gpu-0")
    pod = make_pod("p").req(**{GPU: "1"}).obj()
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "default",
            "uid": "u-stale",
            "resourceVersion": "3",
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": pod.uid, "controller": True}],
        },
        "spec": {"devices": {"requests": [request("container-0-request-0", "gpu")]}},
    }
    from dra_builders import claim_obj

    objs.dra.set_claim(claim_obj(stale))
    plugin, state, _ = dra_pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).reasons == (ERR_STALE_EXTENDED_CLAIM,)
    result = plugin.post_filter(state, pod, Snapshot.of([], objs), None, None)  # type: ignore[arg-type]
    assert result.status.code is Code.UNSCHEDULABLE and result.status.reasons == (MSG_DELETED,)
    (write,) = objs.dra.drain()
    assert (write.method, write.path, write.body) == (
        "PATCH",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/p-extended-resources-abcde",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}},
    )
    assert [(w.method, w.path) for w in write.then] == [("DELETE", write.path)]


# =============================================================================================== simulate: the writes


def test_simulate_creates_the_claim_writes_its_allocation_and_the_pods_status() -> None:
    nodes = [n.raw() for n in (make_node("n1"), make_node("n3"))]
    docs = [*nodes, gpu_class(), resource_slice("n1-gpus", "n1", device("gpu-0"), device("gpu-1"), node="n1")]
    loaded = load_cluster(docs)
    pods = load_pods(
        [make_pod("p").container("main", cpu="100m", **{GPU: "2"}).raw(), make_pod("q").req(**{GPU: "1"}).raw()]
    )
    sim = Simulation(loaded.cache, default_profile("kopf-scheduler"))
    p, q = sim.run(pods).placements
    assert p.node == "n1" and p.devices[0].endswith(f"{DRIVER_A}/n1/gpu-0, {DRIVER_A}/n1/gpu-1")
    assert q.node is None and q.message == (
        "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling."
    )
    tracker = loaded.cache.objects.dra
    (claim,) = tracker.claims.values()
    assert claim.name.startswith("p-extended-resources-") and len(claim.name) == len("p-extended-resources-") + 5
    assert p.devices[0].startswith(claim.name + ": ")
    assert claim.annotations == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"} and FINALIZER in claim.finalizers
    pod = next(x for x in pods if isinstance(x, Pod) and x.name == "p")
    assert claim.is_controlled_by(pod.uid) and [r.uid for r in claim.reserved_for] == [pod.uid]
    assert [r.name for r in claim.spec.requests] == ["container-0-request-1"]
    assert claim.allocation is not None and [r.device for r in claim.allocation.results] == ["gpu-0", "gpu-1"]
    status = sim.api.answer("GET", "/api/v1/namespaces/default/pods/p").body["status"]
    assert status["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}],
        "resourceClaimName": claim.name,
    }


# =============================================================================================== DeviceTaintRules


def test_a_rule_taints_the_devices_it_selects() -> None:
    t = DraTracker()
    t.set_slice(slice_obj(resource_slice("s1", "pool-1", device("d0"), device("d1"), node="n1")))
    t.set_slice(slice_obj(resource_slice("s2", "pool-2", device("d0"), node="n2", driver=DRIVER_B)))
    t.set_taint_rule(parse_device_taint_rule(taint_rule("r1", "broken", driver=DRIVER_A, device="d1")))
    t.set_taint_rule(parse_device_taint_rule(taint_rule("r2", "maintenance", "NoExecute", pool="pool-2")))
    t.set_taint_rule(
        parse_device_taint_rule({**taint_rule("none", "x"), "spec": {"taint": {"key": "x", "effect": "NoSchedule"}}})
    )
    taints = {(s.name, d.name): [x.key for x in d.taints] for s in t.patched_slices() for d in s.devices}
    assert taints == {("s1", "d0"): [], ("s1", "d1"): ["broken"], ("s2", "d0"): ["maintenance"]}
    assert all(not d.taints for s in t.slices.values() for d in s.devices)  # the slices as published stay
    assert t.patched_slices() is t.patched_slices()  # computed once per change
    t.remove_taint_rule("r1")
    assert [x.key for s in t.patched_slices() for d in s.devices for x in d.taints] == ["maintenance"]


def test_the_allocator_skips_a_tainted_device_unless_the_request_tolerates_it() -> None:
    objs = dra_cluster("gpu-0", "gpu-1")
    objs.dra.set_taint_rule(parse_device_taint_rule(taint_rule("r", "broken", device="gpu-0")))
    pod = make_pod("p").req(**{GPU: "1"}).obj()
    plugin, state, _ = dra_pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).is_success
    s = state.read(plugin._key)
    assert s is not None and [r.device for r in s.node_allocations["n1"][0].results] == ["gpu-1"]
    two = make_pod("q").req(**{GPU: "2"}).obj()
    plugin, state, _ = dra_pre_filter(two, objs)
    assert plugin.filter(state, two, node_info(N1)).reasons == (ERR_CANNOT_ALLOCATE,)
    objs.dra.set_taint_rule(parse_device_taint_rule(taint_rule("r", "broken", "None", device="gpu-0")))
    plugin, state, _ = dra_pre_filter(two, objs)
    assert plugin.filter(state, two, node_info(N1)).is_success  # effect None: informational only


def test_a_rule_is_a_slice_change_only_when_it_changes_some_devices_taints() -> None:
    cache = SchedulerCache()
    cache.objects.dra.set_slice(slice_obj(resource_slice("s1", "n1", device("d0"), node="n1")))
    queue = serve(default_profile("s"), None, pending=PendingPods(), now=0.0, cluster=cache)

    class Served:
        def __init__(self) -> None:
            self.queue = queue

    served = {"s": Served()}
    elsewhere = parse_device_taint_rule(taint_rule("r0", "k", driver="no-such-driver"))
    assert route_dra_object("DeviceTaintRule", "r0", elsewhere, cache=cache, served=served, now=1.0).event == ""
    here = parse_device_taint_rule(taint_rule("r1", "k", device="d0"))
    routed = route_dra_object("DeviceTaintRule", "r1", here, cache=cache, served=served, now=1.0)
    assert routed.event == ClusterEvent.RESOURCE_SLICE_CHANGE
    gone = route_dra_object("DeviceTaintRule", "r1", None, cache=cache, served=served, now=2.0)
    assert gone.event == ClusterEvent.RESOURCE_SLICE_CHANGE and set(cache.objects.dra.taint_rules) == {"r0"}


# =============================================================================================== the Filter timeout


def test_a_search_longer_than_filter_timeout_is_an_error_naming_the_node() -> None:
    objs = dra_cluster(*(f"gpu-{i}" for i in range(4)))
    ticks = itertools.count()
    objs.dra.clock = lambda: float(next(ticks))  # every reading one second later
    pod = make_pod("p").req(**{GPU: "2"}).obj()
    plugin, state = DynamicResources(DynamicResourcesArgs(filter_timeout="3s")), CycleState()
    plugin.pre_filter(state, pod, Snapshot.of([node_info(N1)], objs))
    status = plugin.filter(state, pod, node_info(N1))
    assert status.code is Code.ERROR and status.reasons == ("node n1: timed out trying to allocate devices",)
    plugin = DynamicResources(DynamicResourcesArgs(filter_timeout="0s"))  # disabled
    state = CycleState()
    plugin.pre_filter(state, pod, Snapshot.of([node_info(N1)], objs))
    assert plugin.filter(state, pod, node_info(N1)).is_success


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param({"filterTimeout": "-1s"}, "filterTimeout: must be zero or positive", id="negative"),
        pytest.param({"filterTimeout": "10"}, "filterTimeout: not a duration: '10'", id="no unit"),
        pytest.param({"bindingTimeout": "500ms"}, "bindingTimeout: must be at least 1s", id="binding timeout short"),
        pytest.param({"bindingTimeout": "soon"}, "bindingTimeout: not a duration: 'soon'", id="binding timeout text"),
        pytest.param({"filterTimeout": 5}, "filterTimeout: must be a string, not a number", id="a number"),
    ],
)
def test_dynamic_resources_arguments_are_checked(raw: dict[str, Any], message: str) -> None:
    from kopf_scheduler.core.framework.arguments import PluginArgsError

    with pytest.raises(PluginArgsError, match=message):
        DynamicResources.new(raw)


def test_dynamic_resources_arguments_default_to_upstreams() -> None:
    assert DynamicResources().filter_timeout == 10.0
    assert DynamicResources.new({"filterTimeout": "0"}).filter_timeout == 0.0
    assert DynamicResources.new({"filterTimeout": "1m30s"}).filter_timeout == 90.0


def test_a_failed_pre_bind_deletes_the_claim_it_created() -> None:
    """The pod's status cannot be written (the pod is gone): PreBind fails after creating the claim, and
    Unreserve deletes the claim (its finalizer first), as upstream's ``unreserveExtendedResourceClaim``."""
    from kopf_scheduler.sim.apiserver import InMemoryApi, drive

    objs = dra_cluster("gpu-0")
    cache = SchedulerCache()
    cache.objects.dra = objs.dra
    api = InMemoryApi(
        cache, claim_changed=lambda key, new: objs.dra.set_claim(new) if new else objs.dra.remove_claim(key)
    )
    pod = make_pod("p").req(**{GPU: "1"}).obj()
    plugin, state, _ = dra_pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).is_success

    class Handle:
        objects = objs

    assert plugin.reserve(state, pod, "n1", Handle()).is_success  # type: ignore[arg-type]
    status = drive(plugin.pre_bind(state, pod, "n1", api))
    assert status.code is Code.ERROR and status.message.startswith("update pod default/p ExtendedResourceClaimStatus: ")
    (created,) = objs.dra.claims.values()
    assert created.allocation is not None and FINALIZER in created.finalizers
    plugin.unreserve(state, pod, "n1", Handle())  # type: ignore[arg-type]
    assert objs.dra.pending_allocation(f"{pod.uid}/extended-resources") is None
    (write,) = objs.dra.drain()
    assert drive(api.request(write.method, write.path, write.body, content_type=write.content_type)).ok
    for after in write.then:
        assert drive(api.request(after.method, after.path, after.body, content_type=after.content_type)).ok
    assert not objs.dra.claims


def test_explain_notes_the_devices_of_the_extended_resource_claim() -> None:
    docs = [make_node("n1").raw(), make_node("n2").raw(), gpu_class()]
    docs += [resource_slice(f"{n}-gpus", n, device("gpu-0"), node=n) for n in ("n1", "n2")]
    loaded = load_cluster(docs)
    sim = Simulation(loaded.cache, default_profile("kopf-scheduler"), explain=True)
    placement = sim.evaluate(load_pods([make_pod("p").req(**{GPU: "1"}).raw()])[0])  # type: ignore[arg-type]
    assert placement.explanation is not None and placement.node is not None
    notes = {v.node: s.note for v in placement.explanation.scored for s in v.scores if s.plugin == "DynamicResources"}
    assert notes == {
        n: f"claim {SPECIAL_CLAIM_NAME}: container-0-request-0 -> {DRIVER_A}/{n}/gpu-0" for n in ("n1", "n2")
    }
    assert placement.devices == (f"{SPECIAL_CLAIM_NAME}: {DRIVER_A}/{placement.node}/gpu-0",)


def test_balanced_allocation_counts_a_dra_resource_like_an_advertised_one() -> None:
    """A node with two devices of the class (selected by CEL) balances as one advertising two of the resource."""
    import numpy as np

    from kopf_scheduler.core.plugins.balanced_allocation import BalancedAllocationArgs, NodeResourcesBalancedAllocation

    objs = ClusterObjects()
    objs.dra.set_class(class_obj(gpu_class()))
    objs.dra.set_slice(slice_obj(resource_slice("s1", "n1", device("d0"), device("d1"), node="n1")))
    plugin = NodeResourcesBalancedAllocation(BalancedAllocationArgs((ResourceSpec("cpu", 1), ResourceSpec(GPU, 1))))
    pod = make_pod("p").req(cpu="1", **{GPU: "1"}).obj()
    advertised = make_node("n2").capacity(cpu="4", memory="32Gi", pods="110", **{GPU: "2"}).obj()
    infos = [node_info(make_node("n1").obj()), node_info(advertised), node_info(make_node("n3").obj())]
    snap = Snapshot.of(infos, objs)
    state = CycleState()
    assert plugin.pre_score(state, pod, infos, snap).is_success
    scores = [plugin.score(state, pod, i) for i in infos]
    assert scores[0] == scores[1] != scores[2]
    assert plugin.score_nodes(state, pod, snap.table, np.arange(3)).tolist() == scores


# =============================================================================================== batching


def test_a_pod_whose_extended_resource_a_device_class_serves_is_not_signed_for_batching() -> None:
    """Upstream's NodeResourcesFit and BalancedAllocation refuse to sign such a pod (which devices it gets
    depends on more than the pod): no opportunistic batching for it; a pod asking for none is signed."""
    from kopf_scheduler.core.config.policy import validate_policy
    from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
    from kopf_scheduler.core.toolkit import batching

    cache = SchedulerCache()
    route_dra_object("DeviceClass", "gpu", class_obj(gpu_class()), cache=cache, served={}, now=0.0)
    snapshot = Snapshot(cache.objects)
    spec = {"schedulerName": "s", "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}
    validated = validate_policy(spec)
    assert not isinstance(validated, list)
    scheduler = GenericScheduler(validated)
    gpu_pod = make_pod("g").scheduler("s").req(cpu="1", **{GPU: "1"}).obj()
    assert scheduler.sign(gpu_pod, snapshot) is None
    refused = batching.resources(gpu_pod, snapshot)
    assert isinstance(refused, Status) and refused.message == batching.DRA_EXTENDED_NOT_SIGNABLE
    assert scheduler.sign(make_pod("p").scheduler("s").req(cpu="1").obj(), snapshot) is not None
