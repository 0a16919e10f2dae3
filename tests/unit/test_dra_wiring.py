"""DynamicResources wired into the scheduler: pods carry their claims, the tracker is shared, the DRA
kinds are routed into it with their events, the queue's PreEnqueue stage holds a pod whose claims do
not exist, and ``simulate`` reads, writes and stamps claims (sim/dra.py, its API server sim/apiserver.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import make_node, make_pod
from dra_builders import DRIVER_A, allocated, claim, claim_obj, device, device_class, request, resource_slice

from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.dra.objects import NO_POD_CLAIMS, ResourceClaim
from kopf_scheduler.core.framework.interface import ClusterEvent, QueueingHint
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import ObjectError, parse_pod
from kopf_scheduler.core.plugins.dynamic_resources import DynamicResources, claim_change_hint
from kopf_scheduler.core.scheduling.dra_routing import route_dra_object, route_dra_relisted
from kopf_scheduler.core.scheduling.routing import PendingPods, serve
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.core.state.queueing import GATED, QueueingHints, SchedulingQueue
from kopf_scheduler.sim.apiserver import InMemoryApi
from kopf_scheduler.sim.dra import claim_name_prefix, load_dra_object, stamp_claims
from kopf_scheduler.sim.loader import ManifestError, load_cluster, load_pods
from kopf_scheduler.sim.simulator import Simulation


def with_claims(name: str, *refs: dict[str, Any], statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = make_pod(name).req(cpu="100m").raw()
    body["spec"]["resourceClaims"] = list(refs)
    if statuses is not None:
        body.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return body


# --------------------------------------------------------------------------- the pod model


def test_a_pending_pod_carries_its_claims_and_their_statuses() -> None:
    body = with_claims(
        "p",
        {"name": "gpu", "resourceClaimName": "c1"},
        {"name": "tpl", "resourceClaimTemplateName": "t"},
        statuses=[{"name": "tpl", "resourceClaimName": "p-tpl-abcde"}],
    )
    claims = parse_pod(body).resource_claims
    assert [(c.name, c.resource_claim_name, c.resource_claim_template_name) for c in claims.claims] == [
        ("gpu", "c1", None),
        ("tpl", None, "t"),
    ]
    assert claims.statuses == {"tpl": "p-tpl-abcde"}


def test_a_pod_without_claims_shares_the_empty_value() -> None:
    assert parse_pod(make_pod("p").raw()).resource_claims is NO_POD_CLAIMS


def test_a_malformed_claim_reference_names_the_field() -> None:
    body = make_pod("p").raw()
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": 7}]
    with pytest.raises(ObjectError, match=r"resourceClaims\[0\]\.resourceClaimName"):
        parse_pod(body)


def test_the_snapshot_shares_the_caches_tracker() -> None:
    cache = SchedulerCache()
    snap = Snapshot(cache.objects)
    cache.update_snapshot(snap, private_objects=True)
    assert snap.objects.dra is cache.objects.dra and cache.objects.copy().dra is cache.objects.dra


# --------------------------------------------------------------------------- routing and requeueing


class Served:
    def __init__(self, queue: SchedulingQueue) -> None:
        self.queue = queue


def served_queue(cache: SchedulerCache) -> SchedulingQueue:
    return serve(default_profile("s"), None, pending=PendingPods(), now=0.0, cluster=cache)


def test_a_pod_whose_claim_does_not_exist_waits_until_it_is_created() -> None:
    cache = SchedulerCache()
    queue = served_queue(cache)
    pod = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimName": "c1"}))
    queue.add(pod, 0.0)
    assert queue.where(pod) == GATED and queue.pop(0.0) is None
    assert queue.get(pod) is not None and queue.get(pod).unschedulable_plugins == {"DynamicResources"}  # type: ignore[union-attr]
    served = {"s": Served(queue)}
    # another claim of the namespace: the hint leaves the pod where it is
    route_dra_object("ResourceClaim", "default/other", claim_obj(claim("other")), cache=cache, served=served, now=1.0)
    assert queue.where(pod) == GATED
    routed = route_dra_object(
        "ResourceClaim", "default/c1", claim_obj(claim("c1")), cache=cache, served=served, now=1.0
    )
    assert routed.wake == ("s",) and routed.event == ClusterEvent.RESOURCE_CLAIM_CHANGE
    assert queue.where(pod) in ("active", "backoff")


def test_a_move_asks_pre_enqueue_again() -> None:
    cache = SchedulerCache()
    queue = served_queue(cache)
    pod = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimName": "c1"}))
    queue.add(pod, 0.0)
    queue.move_all_to_active_or_backoff("PolicyChange", 1.0)  # a wildcard move: the claim is still missing
    assert queue.where(pod) == GATED


def test_pods_without_claims_are_never_held() -> None:
    hints = QueueingHints(default_profile("s").plugins, SchedulerCache())
    assert hints.pre_enqueue(parse_pod(make_pod("p").raw())) is None


def test_dra_objects_are_routed_into_the_tracker_and_relisted_away() -> None:
    cache = SchedulerCache()
    tracker = cache.objects.dra
    served: dict[str, Any] = {}
    route_dra_object("DeviceClass", "gpu", load_class(), cache=cache, served=served, now=0.0)
    route_dra_object("ResourceClaim", "default/c1", claim_obj(claim("c1")), cache=cache, served=served, now=0.0)
    assert "gpu" in tracker.classes and tracker.get_claim("default", "c1") is not None
    route_dra_relisted("ResourceClaim", set(), cache=cache, served=served, now=1.0)
    route_dra_relisted("DeviceClass", {"gpu"}, cache=cache, served=served, now=1.0)
    assert tracker.get_claim("default", "c1") is None and "gpu" in tracker.classes


def load_class() -> Any:
    from dra_builders import class_obj

    return class_obj(device_class("gpu"))


C1 = claim_obj(claim("c1"))
C1_ALLOCATED = claim_obj(allocated(claim("c1"), ("gpu", DRIVER_A, "pool", "gpu-0")))
OTHER_ALLOCATED = claim_obj(allocated(claim("other"), ("gpu", DRIVER_A, "pool", "gpu-0")))
OTHER = claim_obj(claim("other"))
WANTS_C1 = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimName": "c1"}))


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        pytest.param(None, C1, QueueingHint.QUEUE, id="the pod's claim created"),
        pytest.param(None, OTHER, QueueingHint.QUEUE_SKIP, id="another claim created"),
        pytest.param(OTHER_ALLOCATED, OTHER, QueueingHint.QUEUE, id="another claim deallocated: devices free"),
        pytest.param(OTHER_ALLOCATED, None, QueueingHint.QUEUE, id="an allocated claim deleted"),
        pytest.param(OTHER, None, QueueingHint.QUEUE_SKIP, id="an unallocated claim deleted"),
        pytest.param(C1, C1_ALLOCATED, QueueingHint.QUEUE, id="the pod's claim changed"),
    ],
)
def test_claim_change_hint(old: ResourceClaim | None, new: ResourceClaim | None, hint: QueueingHint) -> None:
    assert claim_change_hint(WANTS_C1, old, new) is hint


def test_the_plugin_registers_the_dra_events() -> None:
    events = {e.event for e in DynamicResources().events_to_register(SchedulerCache())}
    assert {
        ClusterEvent.RESOURCE_CLAIM_CHANGE,
        ClusterEvent.RESOURCE_SLICE_CHANGE,
        ClusterEvent.DEVICE_CLASS_CHANGE,
    } <= events


# --------------------------------------------------------------------------- simulate


def cluster_docs() -> list[dict[str, Any]]:
    nodes = [make_node(n).capacity(cpu="4", memory="8Gi", pods="110").raw() for n in ("n1", "n2")]
    return [
        *nodes,
        device_class("gpu"),
        resource_slice("n2-gpus", "n2", device("gpu-0"), node="n2"),
        claim("one", request("gpu", "gpu")),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "tpl", "namespace": "default"},
            "spec": {"metadata": {"labels": {"team": "a"}}, "spec": {"devices": {"requests": [request("gpu", "gpu")]}}},
        },
    ]


def test_the_cluster_file_fills_the_tracker() -> None:
    tracker = load_cluster(cluster_docs()).cache.objects.dra
    assert set(tracker.classes) == {"gpu"} and set(tracker.slices) == {"n2-gpus"}
    assert set(tracker.claims) == {"default/one"} and set(tracker.templates) == {"default/tpl"}


def test_a_claim_written_without_uid_gets_one() -> None:
    objs = SchedulerCache().objects
    body = claim("bare", request("gpu", "gpu"))
    del body["metadata"]["uid"], body["metadata"]["resourceVersion"]
    assert load_dra_object("ResourceClaim", body, objs)
    got = objs.dra.get_claim("default", "bare")
    assert got is not None and (got.uid, got.resource_version) == ("resourceclaim/default/bare", "1")


def test_admin_access_outside_a_labelled_namespace_is_refused() -> None:
    body = claim("admin", request("gpu", "gpu"))
    body["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    with pytest.raises(ManifestError, match="admin access to devices requires"):
        load_cluster([*cluster_docs(), body])


def test_simulate_allocates_stamps_templates_and_says_why_a_pod_waits() -> None:
    loaded = load_cluster(cluster_docs())
    pods = load_pods(
        [
            with_claims("first", {"name": "gpu", "resourceClaimName": "one"}),
            with_claims("templated", {"name": "gpu", "resourceClaimTemplateName": "tpl"}),
            with_claims("missing", {"name": "gpu", "resourceClaimName": "nope"}),
        ]
    )
    sim = Simulation(loaded.cache, default_profile("kopf-scheduler"))
    placements = {p.pod: p for p in sim.run(pods).placements}
    first = placements["default/first"]
    assert (first.node, first.devices) == ("n2", (f"one: {DRIVER_A}/n2/gpu-0",))
    templated = placements["default/templated"]
    assert templated.node is None and "cannot allocate all claims" in templated.message
    pod = next(p for p in pods if isinstance(p, Pod) and p.name == "templated")
    (generated,) = (c for c in loaded.cache.objects.dra.claims.values() if c.is_controlled_by(pod.uid))
    name = generated.name
    assert name.startswith("templated-gpu-") and len(name) == len("templated-gpu-") + 5
    served = sim.api.answer("GET", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}")
    assert served.ok and served.body["metadata"]["uid"] == generated.uid  # the API server holds it too
    assert placements["default/missing"].message == (
        'waiting for PreEnqueue plugin DynamicResources: could not find ResourceClaim "default/nope"'
    )
    one = loaded.cache.objects.dra.get_claim("default", "one")
    assert one is not None and [r.name for r in one.reserved_for] == ["first"]


def test_stamped_claims_are_created_through_the_api_server_and_recorded_in_the_pods_status() -> None:
    cache = load_cluster(cluster_docs()).cache
    tracker = cache.objects.dra
    api = InMemoryApi(cache, claim_changed=lambda key, new: pytest.fail("the controller's claims are not told"))
    pod = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimTemplateName": "tpl"}))
    stamped = stamp_claims(pod, tracker, api.create_claim)
    name = stamped.resource_claims.statuses["gpu"]
    assert name is not None and name.startswith("p-gpu-")
    assert stamped.source is not None
    assert stamped.source["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": name}]
    assert stamp_claims(stamped, tracker, api.create_claim) is stamped  # once only
    claim_ = tracker.get_claim("default", name)
    assert claim_ is not None and claim_.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim_.is_controlled_by(pod.uid)
    served = api.kube.peek("resource.k8s.io", "v1", "resourceclaims", name, "default")
    assert served is not None and served["metadata"]["resourceVersion"] == claim_.resource_version
    assert served["metadata"]["labels"] == {"team": "a"}
    # the same pod (its uid, its claim's name) gets the same name in another run
    again = stamp_claims(
        pod, load_cluster(cluster_docs()).cache.objects.dra, InMemoryApi(SchedulerCache()).create_claim
    )
    assert again.resource_claims.statuses["gpu"] == name


def test_a_refused_creation_leaves_the_pod_waiting() -> None:
    tracker = load_cluster(cluster_docs()).cache.objects.dra
    pod = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimTemplateName": "tpl"}))
    assert stamp_claims(pod, tracker, lambda body: "refused") is pod


def test_long_names_are_truncated_as_the_controller_does() -> None:
    # 60 + 30 + 2 = 92 > 57: both parts cut in proportion (60 * 57 // 92 = 37, 30 * 57 // 92 = 18)
    assert claim_name_prefix("p" * 60, "c" * 30) == "p" * 37 + "-" + "c" * 18 + "-"


class TestSimulatedClaims:
    """The simulation's API server serves the claims (``KubeApi``'s semantics) and tells the simulator of each
    change a request makes, as the claims' watch would."""

    CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"

    def setup_method(self) -> None:
        self.cache = SchedulerCache()
        self.tracker = self.cache.objects.dra
        self.tracker.set_claim(claim_obj(claim("c1", request("gpu", "gpu"))))
        self.changes: list[tuple[str, ResourceClaim | None]] = []
        self.api = InMemoryApi(self.cache, claim_changed=self.changed)
        self.path = f"{self.CLAIMS}/c1"

    def changed(self, key: str, new: ResourceClaim | None) -> None:
        if new is None:
            self.tracker.remove_claim(key)
        else:
            self.tracker.set_claim(new)
        self.changes.append((key, new))

    def current(self) -> dict[str, Any]:
        got = self.api.answer("GET", self.path)
        assert got.status == 200
        body: dict[str, Any] = got.body
        return body

    def test_the_clusters_claims_are_held_at_the_servers_resource_version(self) -> None:
        held = self.tracker.get_claim("default", "c1")
        assert held is not None and held.resource_version == self.current()["metadata"]["resourceVersion"]
        assert held.uid == "uid-c1" and not self.changes  # loading is no change a request made

    def test_a_stale_update_is_a_conflict(self) -> None:
        body = self.current()
        body["metadata"]["finalizers"] = ["x"]
        assert self.api.answer("PUT", self.path, body).status == 200
        stale = self.api.answer("PUT", self.path, body)
        assert (stale.status, stale.detail()) == (
            409,
            'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c1": the object has been modified; '
            "please apply your changes to the latest version and try again",
        )
        ((key, new),) = self.changes
        assert key == "default/c1" and new is not None and new.finalizers == ("x",)
        assert new.resource_version == self.current()["metadata"]["resourceVersion"]

    def test_status_is_written_apart_and_reservations_patched_away(self) -> None:
        body = self.current()
        body["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
        assert self.api.answer("PUT", self.path + "/status", body).status == 200
        new = self.changes[-1][1]
        assert new is not None and [r.uid for r in new.reserved_for] == ["u1"]
        patch = {"metadata": {"uid": "uid-c1"}, "status": {"reservedFor": [{"$patch": "delete", "uid": "u1"}]}}
        strategic = "application/strategic-merge-patch+json"
        assert self.api.answer("PATCH", self.path + "/status", patch, content_type=strategic).status == 200
        new = self.changes[-1][1]
        assert new is not None and new.reserved_for == ()

    def test_a_generated_claim_is_named_the_same_every_run_and_its_deletion_told(self) -> None:
        body = claim("unused", request("gpu", "gpu"))
        body["metadata"] = {"generateName": "p-extended-resources-", "ownerReferences": [{"uid": "pod-uid"}]}
        created = self.api.answer("POST", self.CLAIMS, body)
        assert created.status == 201
        name = created.body["metadata"]["name"]
        again = InMemoryApi(SchedulerCache()).answer("POST", self.CLAIMS, body)
        assert name.startswith("p-extended-resources-") and again.body["metadata"]["name"] == name
        assert [key for key, _ in self.changes] == [f"default/{name}"]
        gone = self.api.answer("DELETE", f"{self.CLAIMS}/{name}")
        assert gone.ok and gone.body["kind"] == "ResourceClaim" and self.changes[-1] == (f"default/{name}", None)

    def test_other_kinds_and_missing_claims(self) -> None:
        other = self.api.answer("GET", "/apis/resource.k8s.io/v1/deviceclasses")
        assert other.status == 404
        missing = self.api.answer("GET", self.path.replace("c1", "nope"))
        assert (missing.status, missing.detail()) == (404, 'resourceclaims.resource.k8s.io "nope" not found')


# --------------------------------------------------------------------------- the operator's executor


def test_the_operator_sends_the_outbox_writes() -> None:
    """Unreserve's strategic-merge patch and PostFilter's deallocation, as ``kube/dra.flush`` sends them."""
    import asyncio

    from fakeapi import FakeApiServer

    from kopf_scheduler.core.plugins.dynamic_resources import deallocate_write, unreserve_write
    from kopf_scheduler.edge.client import Api
    from kopf_scheduler.edge.credentials import Credentials
    from kopf_scheduler.kube import dra
    from kopf_scheduler.kube.app import App

    reserved = allocated(
        claim("c1", request("gpu", "gpu")),
        ("gpu", DRIVER_A, "pool", "gpu-0"),
        reservedFor=[{"resource": "pods", "name": "p", "uid": "u1"}, {"resource": "pods", "name": "q", "uid": "u2"}],
    )
    resource = ("resource.k8s.io", "v1", "resourceclaims")

    async def main() -> tuple[Any, Any]:
        async with FakeApiServer() as server:
            stored = server.add(*resource, reserved)
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0, fence=lambda: True, user_agent="t")
            app = App(api, identity="t")
            try:
                pod = parse_pod(with_claims("p", {"name": "gpu", "resourceClaimName": "c1"}))
                pod = Pod(namespace=pod.namespace, name=pod.name, uid="u1")
                app.cache.objects.dra.outbox.append(unreserve_write(claim_obj(stored), pod))
                dra.flush(app)
                await asyncio.gather(*list(app._tasks))
                after_unreserve = server.get(*resource, "c1")
                assert after_unreserve is not None
                app.cache.objects.dra.outbox.append(deallocate_write(claim_obj(after_unreserve)))
                dra.flush(app)
                await asyncio.gather(*list(app._tasks))
                return after_unreserve, server.get(*resource, "c1")
            finally:
                await api.close()

    after_unreserve, after_deallocate = asyncio.run(asyncio.wait_for(main(), 20))
    assert [r["uid"] for r in after_unreserve["status"]["reservedFor"]] == ["u2"]
    assert after_unreserve["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert "allocation" not in after_deallocate.get("status", {}) and "reservedFor" not in after_deallocate.get(
        "status", {}
    )


def test_the_operator_deletes_a_claim_after_removing_its_finalizer() -> None:
    """``delete_write`` (Unreserve / PostFilter of an extended-resource claim): the finalizer patch, then the
    DELETE it carries in ``then``, in that order, as ``kube/dra.flush`` sends them."""
    import asyncio

    from fakeapi import FakeApiServer

    from kopf_scheduler.core.plugins.dynamic_resources import delete_write
    from kopf_scheduler.edge.client import Api
    from kopf_scheduler.edge.credentials import Credentials
    from kopf_scheduler.kube import dra
    from kopf_scheduler.kube.app import App

    body = claim("p-extended-resources-abcde", request("container-0-request-0", "gpu"))
    body["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    resource = ("resource.k8s.io", "v1", "resourceclaims")

    async def main() -> Any:
        async with FakeApiServer() as server:
            stored = server.add(*resource, body)
            api = Api(Credentials(server=server.url, source="fakeapi"), timeout=2.0, fence=lambda: True, user_agent="t")
            app = App(api, identity="t")
            try:
                app.cache.objects.dra.outbox.append(delete_write(claim_obj(stored)))
                dra.flush(app)
                await asyncio.gather(*list(app._tasks))
                return server.get(*resource, "p-extended-resources-abcde")
            finally:
                await api.close()

    assert asyncio.run(asyncio.wait_for(main(), 20)) is None
