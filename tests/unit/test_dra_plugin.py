"""DynamicResources (core/plugins/dynamic_resources.py): PreFilter messages, Filter per node, Score,
Reserve / Unreserve through the tracker, PostFilter's deallocation and PreBind's writes.

Messages are upstream's (dynamicresources.go v1.37.2); every rejection is UnschedulableAndUnresolvable.
The cluster's DRA store is ``ClusterObjects.dra``. PreBind writes to simulate's API server (``sim/apiserver.py``'s
``InMemoryApi`` over ``KubeApi``), so conflicts, status subresources and deletions are kube-apiserver's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from builders import make_node, make_pod, node_info
from dra_builders import (
    DRIVER_A,
    allocated,
    claim,
    claim_obj,
    class_obj,
    device,
    device_class,
    first_available,
    request,
    resource_slice,
    slice_obj,
)

from kopf_scheduler.core.dra.objects import FINALIZER
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import ClusterObjects, Snapshot
from kopf_scheduler.core.framework.usage import SCORE_NOTES
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.plugins.dynamic_resources import (
    BIND_TIME,
    ERR_CANNOT_ALLOCATE,
    ERR_NOT_AVAILABLE,
    MSG_DEALLOCATED,
    NAME,
    DynamicResources,
    admin_access_forbidden,
    pre_enqueue,
)
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.sim.apiserver import InMemoryApi, drive

N1, N2 = make_node("node-1").obj(), make_node("node-2").obj()


Objects = ClusterObjects


@dataclass
class Handle:
    """The part of ``PermitHandle`` Reserve / Unreserve use."""

    objects: Objects


def cluster(*, claims: tuple[dict[str, Any], ...] = (), slices: tuple[dict[str, Any], ...] = ()) -> Objects:
    objs = Objects()
    objs.dra.set_class(class_obj(device_class("gpu", DRIVER_A)))
    for c in claims:
        objs.dra.set_claim(claim_obj(c))
    for s in slices:
        objs.dra.set_slice(slice_obj(s))
    return objs


def two_gpus_each() -> tuple[dict[str, Any], ...]:
    return tuple(resource_slice(f"{n}-gpus", n, device("gpu-0"), device("gpu-1"), node=n) for n in ("node-1", "node-2"))


def pod_with(*refs: dict[str, Any], statuses: list[dict[str, Any]] | None = None, name: str = "p") -> Pod:
    b = make_pod(name)
    b.body["spec"]["resourceClaims"] = list(refs)
    if statuses is not None:
        b.body.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return b.obj()


def uses(claim_name: str, ref: str = "gpu") -> dict[str, Any]:
    return {"name": ref, "resourceClaimName": claim_name}


def pre_filter(pod: Pod, objs: Objects, *nodes: Any) -> tuple[DynamicResources, CycleState, Snapshot, Any]:
    plugin, state = DynamicResources(), CycleState()
    snap = Snapshot.of([node_info(n) for n in (nodes or (N1, N2))], objs)
    return plugin, state, snap, plugin.pre_filter(state, pod, snap)


# --------------------------------------------------------------------------- PreFilter


def test_pod_without_claims_is_skipped() -> None:
    _, _, _, status = pre_filter(make_pod("plain").req(cpu="1").obj(), cluster())
    assert status.is_skip


@pytest.mark.parametrize(
    ("pod", "claims", "message"),
    [
        pytest.param(
            pod_with(uses("missing")), (), 'could not find ResourceClaim "default/missing"', id="missing claim"
        ),
        pytest.param(
            pod_with({"name": "gpu", "resourceClaimTemplateName": "tpl"}),
            (),
            'pod "default/p": ResourceClaim not created yet',
            id="template claim not generated yet",
        ),
        pytest.param(
            pod_with(
                {"name": "gpu", "resourceClaimTemplateName": "tpl"},
                statuses=[{"name": "gpu", "resourceClaimName": "p-gpu-x"}],
            ),
            (claim("p-gpu-x", request("r", "gpu"), owner_uid="someone-else"),),
            "ResourceClaim default/p-gpu-x was not created for Pod default/p (Pod is not owner)",
            id="generated claim of another pod",
        ),
        pytest.param(
            pod_with(uses("c")),
            (claim("c", request("r", "no-such-class")),),
            "request r: device class no-such-class does not exist",
            id="missing class",
        ),
        pytest.param(
            pod_with(uses("c")),
            (
                {
                    **claim("c", request("r", "gpu")),
                    "metadata": {**claim("c")["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
                },
            ),
            'resourceclaim "c" is being deleted',
            id="claim being deleted",
        ),
    ],
)
def test_pre_filter_rejections(pod: Pod, claims: tuple[dict[str, Any], ...], message: str) -> None:
    objs = cluster(claims=claims)
    _, _, _, status = pre_filter(pod, objs)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (message,)
    assert pre_enqueue(pod, objs.dra).code is (
        Code.SUCCESS if "class" in message else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )


def test_template_claim_intentionally_not_created_is_skipped() -> None:
    pod = pod_with({"name": "gpu", "resourceClaimTemplateName": "tpl"}, statuses=[{"name": "gpu"}])
    assert pre_filter(pod, cluster())[3].is_skip


def test_generated_claim_owned_by_the_pod_is_used() -> None:
    b = make_pod("p")
    uid = b.body["metadata"]["uid"]
    b.body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "tpl"}]
    b.body["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]
    objs = cluster(claims=(claim("p-gpu-x", request("r", "gpu"), owner_uid=uid),), slices=two_gpus_each())
    plugin, state, _, status = pre_filter(b.obj(), objs)
    assert status.is_success
    assert plugin.filter(state, b.obj(), node_info(N1)).is_success


# --------------------------------------------------------------------------- Filter


def test_filter_allocates_per_node() -> None:
    slices = (resource_slice("n1-gpus", "node-1", device("gpu-0"), node="node-1"),)
    objs = cluster(claims=(claim("c", request("r", "gpu", count=2)),), slices=slices)
    pod = pod_with(uses("c"))
    plugin, state, _, status = pre_filter(pod, objs)
    assert status.is_success
    on_n1 = plugin.filter(state, pod, node_info(N1))
    assert on_n1.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and on_n1.reasons == (ERR_CANNOT_ALLOCATE,)
    objs.dra.set_slice(slice_obj(resource_slice("n2-gpus", "node-2", device("gpu-0"), device("gpu-1"), node="node-2")))
    plugin, state, _, _ = pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N2)).is_success


def test_allocated_claim_restricts_nodes() -> None:
    c = allocated(claim("c", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    pod = pod_with(uses("c"))
    plugin, state, _, status = pre_filter(pod, cluster(claims=(c,), slices=two_gpus_each()))
    assert status.is_success
    assert plugin.filter(state, pod, node_info(N1)).is_success
    on_n2 = plugin.filter(state, pod, node_info(N2))
    assert on_n2.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and on_n2.reasons == (ERR_NOT_AVAILABLE,)


def test_cel_error_is_an_error_status() -> None:
    objs = cluster(
        claims=(claim("c", request("r", "gpu", 'device.attributes["driver-a"].nope')),), slices=two_gpus_each()
    )
    pod = pod_with(uses("c"))
    plugin, state, _, _ = pre_filter(pod, objs)
    status = plugin.filter(state, pod, node_info(N1))
    assert status.code is Code.ERROR
    assert status.reasons[0].startswith(
        "claim default/c: selector #0 on device driver-a/node-1/gpu-0: CEL runtime error: no such key: nope"
    )


# --------------------------------------------------------------------------- Reserve, in-flight allocations


def test_reserve_keeps_the_devices_from_the_next_pod() -> None:
    objs = cluster(
        claims=(claim("a", request("r", "gpu", count=2)), claim("b", request("r", "gpu"))), slices=two_gpus_each()
    )
    first = pod_with(uses("a"), name="first")
    plugin, state, _, _ = pre_filter(first, objs, N1)
    assert plugin.filter(state, first, node_info(N1)).is_success
    assert plugin.reserve(state, first, "node-1", Handle(objs)).is_success  # type: ignore[arg-type]
    # node-1's two GPUs are in flight for claim a: claim b fits only on node-2
    second = pod_with(uses("b"), name="second")
    plugin2, state2, _, _ = pre_filter(second, objs)
    assert plugin2.filter(state2, second, node_info(N1)).reasons == (ERR_CANNOT_ALLOCATE,)
    assert plugin2.filter(state2, second, node_info(N2)).is_success
    # a pod sharing claim a waits until the allocation is written
    sharer = pod_with(uses("a"), name="sharer")
    status = pre_filter(sharer, objs)[3]
    assert status.reasons == ("resource claim default/a is in the process of being allocated",)
    # Unreserve gives the devices back
    plugin.unreserve(state, first, "node-1", Handle(objs))  # type: ignore[arg-type]
    plugin2, state2, _, _ = pre_filter(second, objs)
    assert plugin2.filter(state2, second, node_info(N1)).is_success


def test_unreserve_queues_the_reservation_removal() -> None:
    objs = cluster(slices=two_gpus_each())
    pod = pod_with(uses("c"))
    c = allocated(claim("c", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    c["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": pod.uid}]
    objs.dra.set_claim(claim_obj(c))
    plugin, state, _, _ = pre_filter(pod, objs)
    plugin.unreserve(state, pod, "node-1", Handle(objs))  # type: ignore[arg-type]
    (write,) = objs.dra.drain()
    assert (write.method, write.content_type) == ("PATCH", "application/strategic-merge-patch+json")
    assert write.body == {
        "metadata": {"uid": "uid-c"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
    }


# --------------------------------------------------------------------------- PostFilter


def test_post_filter_deallocates_a_claim_reserved_for_nobody() -> None:
    c = allocated(claim("c", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    objs = cluster(claims=(c,), slices=two_gpus_each())
    pod = pod_with(uses("c"))
    plugin, state, snap, _ = pre_filter(pod, objs, N2)
    assert plugin.filter(state, pod, node_info(N2)).reasons == (ERR_NOT_AVAILABLE,)
    result = plugin.post_filter(state, pod, snap, None, None)  # type: ignore[arg-type]
    assert result.status.code is Code.UNSCHEDULABLE and result.status.reasons == (MSG_DEALLOCATED,)
    (write,) = objs.dra.drain()
    assert write.method == "PUT" and write.path.endswith("/resourceclaims/c/status")
    assert write.body["status"] == {}


def test_post_filter_without_pre_filter_ends_the_stage() -> None:
    result = DynamicResources().post_filter(CycleState(), make_pod("p").obj(), Snapshot(), None, None)  # type: ignore[arg-type]
    assert result.status.code is Code.ERROR and result.status.reasons == ("not found",)


# --------------------------------------------------------------------------- Score


def test_score_prefers_the_first_subrequest() -> None:
    slices = (
        resource_slice("n1", "node-1", device("gpu-0", attributes={"big": True}), node="node-1"),
        resource_slice("n2", "node-2", device("gpu-0", attributes={"big": False}), node="node-2"),
    )
    big = request("big", "gpu", 'device.attributes["driver-a"].big')
    objs = cluster(claims=(claim("c", first_available("r", big, request("any", "gpu"))),), slices=slices)
    pod = pod_with(uses("c"))
    plugin, state, snap, _ = pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).is_success and plugin.filter(state, pod, node_info(N2)).is_success
    import numpy as np

    raw = plugin.score_nodes(state, pod, snap.table, np.arange(2))
    by_name = dict(zip(snap.table.names, raw.tolist()))
    assert by_name == {"node-1": 8, "node-2": 7}  # 8 - index in firstAvailable
    assert plugin.normalize_scores(state, pod, raw.copy()).tolist() == [(s * 100) // 8 for s in raw.tolist()]


def test_each_scored_node_notes_its_devices_for_explain() -> None:
    objs = cluster(claims=(claim("c", request("r", "gpu", count=2)),), slices=two_gpus_each())
    pod = pod_with(uses("c"))
    plugin, state, snap, _ = pre_filter(pod, objs)
    assert all(plugin.filter(state, pod, node_info(n)).is_success for n in (N1, N2))
    assert plugin.pre_score(state, pod, [node_info(N1), node_info(N2)], snap).is_success
    notes = state.read(SCORE_NOTES)
    assert notes is not None
    assert str(notes[(NAME, "node-2")]) == (f"claim c: r -> {DRIVER_A}/node-2/gpu-0, r -> {DRIVER_A}/node-2/gpu-1")
    plain = make_pod("plain").req(cpu="1").obj()
    plugin, state, snap, _ = pre_filter(plain, objs)
    assert plugin.pre_score(state, plain, [node_info(N1)], snap).is_skip and state.read(SCORE_NOTES) is None


# --------------------------------------------------------------------------- PreBind


CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def api_holding(objs: Objects) -> InMemoryApi:
    """simulate's API server (``sim/apiserver.py``, ``KubeApi``'s semantics) holding the cluster's claims: the
    tracker's claims are replaced by the stored ones, at the server's resourceVersions, as simulate starts.
    No watch is wired (``claim_changed``): what the tracker holds afterwards is what the plugin assumed."""
    cache = SchedulerCache()
    cache.objects.dra = objs.dra
    return InMemoryApi(cache)


def calls(api: InMemoryApi) -> list[tuple[str, str]]:
    """The plugin's requests, (method, path below the claims)."""
    return [(method, path.removeprefix(CLAIMS)) for method, path, _ in api.requests]


def served(api: InMemoryApi, name: str) -> dict[str, Any]:
    found = api.kube.get("resource.k8s.io", "v1", "resourceclaims", name, "default")
    assert found is not None
    return found


def test_pre_bind_writes_finalizer_allocation_and_reservation() -> None:
    objs = cluster(claims=(claim("c", request("r", "gpu")),), slices=two_gpus_each())
    api = api_holding(objs)
    pod = pod_with(uses("c"))
    plugin, state, _, _ = pre_filter(pod, objs)
    assert plugin.filter(state, pod, node_info(N1)).is_success
    assert plugin.reserve(state, pod, "node-1", Handle(objs)).is_success  # type: ignore[arg-type]
    state.write(BIND_TIME, "2026-05-01T00:00:00Z")
    assert drive(plugin.pre_bind(state, pod, "node-1", api)).is_success
    assert calls(api) == [("PUT", "/c"), ("PUT", "/c/status")]
    written = served(api, "c")
    assert written["metadata"]["finalizers"] == [FINALIZER]
    assert written["status"]["allocation"] == {
        "devices": {"results": [{"request": "r", "driver": DRIVER_A, "pool": "node-1", "device": "gpu-0"}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
        },
        "allocationTimestamp": "2026-05-01T00:00:00Z",
    }
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": pod.uid}]
    # the write is assumed at once (no watch here tells the tracker) and the in-flight allocation released
    assumed = objs.dra.get_claim("default", "c")
    assert assumed is not None and assumed.allocation is not None and objs.dra.pending_allocation("uid-c") is None
    assert assumed.resource_version == written["metadata"]["resourceVersion"]


def test_pre_bind_retries_a_conflict_after_reading_the_claim() -> None:
    body = allocated(claim("c", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    objs = cluster(claims=(body,), slices=two_gpus_each())
    api = api_holding(objs)
    pod = pod_with(uses("c"))
    plugin, state, _, _ = pre_filter(pod, objs)
    # someone else writes the claim meanwhile: the server's resourceVersion moves past the tracker's
    touched = api.answer(
        "PATCH",
        f"{CLAIMS}/c",
        {"metadata": {"labels": {"touched": "yes"}}},
        content_type="application/merge-patch+json",
    )
    assert touched.ok
    assert drive(plugin.pre_bind(state, pod, "node-1", api)).is_success
    assert calls(api) == [("PUT", "/c/status"), ("GET", "/c"), ("PUT", "/c/status")]
    written = served(api, "c")
    assert written["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": pod.uid}]
    assert written["metadata"]["labels"] == {"touched": "yes"}  # the other write is kept


def test_a_pre_bind_failure_leaves_unreserve_the_reservations_it_wrote() -> None:
    """Upstream updates its state per claim, so Unreserve removes the pod from the claims PreBind did write."""
    first = allocated(claim("c1", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    second = allocated(claim("c2", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-1"), node="node-1")
    second["metadata"] = {**second["metadata"], "finalizers": [FINALIZER]}  # an allocated claim carries it
    objs = cluster(claims=(first, second), slices=two_gpus_each())
    api = api_holding(objs)
    pod = pod_with(uses("c1", "a"), uses("c2", "b"))
    plugin, state, _, _ = pre_filter(pod, objs)
    # c2 is deleted meanwhile: its finalizer holds it, marked (deletionTimestamp, a new resourceVersion)
    deleted = api.answer("DELETE", f"{CLAIMS}/c2")
    assert deleted.ok and "deletionTimestamp" in deleted.body["metadata"]
    status = drive(plugin.pre_bind(state, pod, "node-1", api))
    assert status.code is Code.ERROR and "got deleted in the meantime" in status.message
    assert calls(api) == [("PUT", "/c1/status"), ("PUT", "/c2/status"), ("GET", "/c2")]
    plugin.unreserve(state, pod, "node-1", Handle(objs))  # type: ignore[arg-type]
    (write,) = objs.dra.drain()
    assert write.path.endswith("/resourceclaims/c1/status") and write.method == "PATCH"
    # the server takes it: the reservation PreBind wrote is gone again
    undone = api.answer(write.method, write.path, write.body, content_type=write.content_type)
    assert undone.ok and not undone.body["status"].get("reservedFor")


# --------------------------------------------------------------------------- admin access


def test_admin_access_needs_the_namespace_label() -> None:
    c = claim_obj(claim("c", request("r", "gpu", admin_access=True)))
    assert admin_access_forbidden(c, {"resource.kubernetes.io/admin-access": "true"}) is None
    assert admin_access_forbidden(c, {}) == (
        "spec.devices.requests[0].adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    )
    assert admin_access_forbidden(claim_obj(claim("d", request("r", "gpu"))), {}) is None


def test_admin_access_takes_a_device_in_use() -> None:
    taken = allocated(claim("other", request("r", "gpu")), ("r", DRIVER_A, "node-1", "gpu-0"), node="node-1")
    objs = cluster(
        claims=(taken, claim("admin", request("r", "gpu", admin_access=True))),
        slices=(resource_slice("n1", "node-1", device("gpu-0"), node="node-1"),),
    )
    plain = cluster(
        claims=(taken, claim("plain", request("r", "gpu"))),
        slices=(resource_slice("n1", "node-1", device("gpu-0"), node="node-1"),),
    )
    pod = pod_with(uses("admin"))
    plugin, state, _, _ = pre_filter(pod, objs, N1)
    assert plugin.filter(state, pod, node_info(N1)).is_success
    pod2 = pod_with(uses("plain"))
    plugin, state, _, _ = pre_filter(pod2, plain, N1)
    assert plugin.filter(state, pod2, node_info(N1)).reasons == (ERR_CANNOT_ALLOCATE,)
