"""The fake API server (tests/fakeapi.py) answers as kube-apiserver does on the wire.

Each test drives it with a plain aiohttp client, as the operator's edge would, and checks the
status codes, Status bodies and watch streams the real server sends (messages verbatim where
clients match on them). Sync tests around ``asyncio.run``: this project has no pytest-asyncio.

Time: that an event stays out of a stream is shown by a later event that must come through (a stream
keeps order, so what should not be there would come first), not by waiting; what only time shows (the
bookmark interval, a stall, the server's seconds) runs on intervals of tens of milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from builders import make_node, make_pod
from fakeapi import FakeApiServer

from kopf_scheduler.sim.kubeapi import KubeApi, ResourceType

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
POLICIES = "/apis/scheduling.kopf.dev/v1alpha1/schedulingpolicies"
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}


def run(scenario: Callable[[FakeApiServer, aiohttp.ClientSession], Awaitable[None]], **server_args: Any) -> None:
    """Run `scenario` against a fresh server and a client session bound to its URL."""

    async def main() -> None:
        async with FakeApiServer(**server_args) as server:
            async with aiohttp.ClientSession(server.url) as session:
                await scenario(server, session)

    asyncio.run(main())


async def call(
    session: aiohttp.ClientSession, method: str, path: str, body: Any = None, **kwargs: Any
) -> tuple[int, Any]:
    """One request: (status, parsed JSON body)."""
    async with session.request(method, path, json=body, **kwargs) as resp:
        return resp.status, await resp.json(content_type=None)


def pod(name: str) -> dict[str, Any]:
    """A pod body as a user would POST it."""
    return make_pod(name).container("c").body


class Watch:
    """An open watch stream, read one event (line) at a time."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp

    async def next(self, timeout: float = 2.0) -> dict[str, Any]:
        line = await asyncio.wait_for(self.resp.content.readline(), timeout)
        assert line, "the stream ended"
        event: dict[str, Any] = json.loads(line)
        return event

    async def silent(self, seconds: float) -> None:
        """Nothing at all arrives for `seconds`."""
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(self.resp.content.read(1), seconds)

    async def ended(self, timeout: float = 3.0) -> bool:
        """Whether the stream ends cleanly (the terminating chunk) within `timeout`."""
        rest = await asyncio.wait_for(self.resp.content.read(), timeout)
        return rest == b"" and self.resp.content.at_eof()


async def watch(session: aiohttp.ClientSession, path: str, **params: str) -> Watch:
    resp = await session.get(path, params={"watch": "1", **params})
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.headers["Transfer-Encoding"] == "chunked"
    return Watch(resp)


def summary(event: dict[str, Any]) -> tuple[str, str, str]:
    meta = event["object"]["metadata"]
    return event["type"], meta.get("name", ""), meta["resourceVersion"]


# ---- discovery


def test_discovery_documents() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        status, api = await call(session, "GET", "/api")
        assert (status, api["kind"], api["versions"]) == (200, "APIVersions", ["v1"])
        _, core = await call(session, "GET", "/api/v1")
        by_name = {r["name"]: r for r in core["resources"]}
        assert (
            by_name["pods"]["namespaced"] and by_name["pods"]["kind"] == "Pod" and "watch" in by_name["pods"]["verbs"]
        )
        assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
        assert by_name["pods/binding"] == {
            "name": "pods/binding",
            "singularName": "",
            "namespaced": True,
            "kind": "Binding",
            "verbs": ["create"],
        }
        assert not by_name["nodes"]["namespaced"]
        _, groups = await call(session, "GET", "/apis")
        ours = next(g for g in groups["groups"] if g["name"] == "scheduling.kopf.dev")
        assert ours["preferredVersion"] == {"groupVersion": "scheduling.kopf.dev/v1alpha1", "version": "v1alpha1"}
        _, crs = await call(session, "GET", "/apis/scheduling.kopf.dev/v1alpha1")
        names = {r["name"]: r for r in crs["resources"]}
        assert (
            names["schedulingpolicies"]["kind"] == "SchedulingPolicy" and not names["schedulingpolicies"]["namespaced"]
        )
        assert "schedulingpolicies/status" in names
        status, version = await call(session, "GET", "/version")
        assert (status, version["major"], version["minor"]) == (200, "1", "37")

        # unknown resource in a served group-version: a Status; outside any: plain text, as the real server
        status, body = await call(session, "GET", "/api/v1/widgets")
        assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
        async with session.get("/apis/x-k8s.io/v1/things") as resp:
            assert (resp.status, await resp.text()) == (404, "404 page not found\n")

        server.register("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
        _, pgs = await call(session, "GET", "/apis/scheduling.x-k8s.io/v1alpha1")
        assert [r["name"] for r in pgs["resources"]] == ["podgroups", "podgroups/status"]

    run(scenario)


# ---- create, get, list


def test_create_get_and_list_pages_over_a_consistent_snapshot() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        created = []
        for name in ("a", "b", "c", "d", "e"):
            status, body = await call(session, "POST", PODS, pod(name))
            assert status == 201
            created.append(body)
        assert [int(p["metadata"]["resourceVersion"]) for p in created] == sorted(
            {int(p["metadata"]["resourceVersion"]) for p in created}
        )
        meta = created[0]["metadata"]
        assert meta["uid"] != "uid-a-1" and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
        assert created[0]["status"] == {"phase": "Pending"}  # the registry resets a pod's status on create

        status, again = await call(session, "POST", PODS, pod("a"))
        assert status == 409
        assert again["reason"] == "AlreadyExists" and again["message"] == 'pods "a" already exists'
        assert again["details"] == {"name": "a", "kind": "pods"}

        status, got = await call(session, "GET", f"{PODS}/a")
        assert (status, got["kind"], got["metadata"]["uid"]) == (200, "Pod", meta["uid"])
        status, missing = await call(session, "GET", f"{PODS}/zzz")
        assert (status, missing["message"]) == (404, 'pods "zzz" not found')

        status, page1 = await call(session, "GET", "/api/v1/pods", params={"limit": "2"})
        assert status == 200 and page1["kind"] == "PodList" and page1["apiVersion"] == "v1"
        assert [p["metadata"]["name"] for p in page1["items"]] == ["a", "b"]
        assert "kind" not in page1["items"][0]  # list items carry no kind/apiVersion
        assert page1["metadata"]["remainingItemCount"] == 3
        snapshot_rv = page1["metadata"]["resourceVersion"]
        assert snapshot_rv == server.resource_version

        # changes after the first page do not show in the following ones
        await call(session, "DELETE", f"{PODS}/c")
        await call(session, "POST", PODS, pod("bb"))
        _, page2 = await call(
            session, "GET", "/api/v1/pods", params={"limit": "2", "continue": page1["metadata"]["continue"]}
        )
        assert [p["metadata"]["name"] for p in page2["items"]] == ["c", "d"]
        assert page2["metadata"]["resourceVersion"] == snapshot_rv
        _, page3 = await call(
            session, "GET", "/api/v1/pods", params={"limit": "2", "continue": page2["metadata"]["continue"]}
        )
        assert [p["metadata"]["name"] for p in page3["items"]] == ["e"] and "continue" not in page3["metadata"]

        _, fresh = await call(session, "GET", PODS)
        assert [p["metadata"]["name"] for p in fresh["items"]] == ["a", "b", "bb", "d", "e"]
        assert int(fresh["metadata"]["resourceVersion"]) > int(snapshot_rv)

        status, bad = await call(session, "GET", PODS, params={"continue": "garbage!"})
        assert (status, bad["reason"]) == (400, "BadRequest")

    run(scenario)


def test_field_and_label_selectors() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.add("", "v1", "pods", make_pod("bound").label(app="web", tier="a").node("n1").phase("Running").body)
        server.add("", "v1", "pods", make_pod("pending").label(app="web").scheduler("ours").body)
        server.add("", "v1", "pods", make_pod("other", "kube-system").label(app="db", tier="b").body)

        async def names(**params: str) -> list[str]:
            status, body = await call(session, "GET", "/api/v1/pods", params=params)
            assert status == 200, body
            return [p["metadata"]["name"] for p in body["items"]]

        assert await names(fieldSelector="spec.nodeName=") == ["pending", "other"]  # by namespace, then name
        assert await names(fieldSelector="spec.nodeName!=") == ["bound"]
        assert await names(fieldSelector="spec.nodeName==n1,status.phase=Running") == ["bound"]
        assert await names(fieldSelector="spec.nodeName=,spec.schedulerName=ours") == ["pending"]
        assert await names(fieldSelector="metadata.namespace!=default") == ["other"]
        assert await names(fieldSelector="metadata.name=pending") == ["pending"]
        assert await names(labelSelector="app=web") == ["bound", "pending"]
        assert await names(labelSelector="app!=web") == ["other"]
        assert await names(labelSelector="tier") == ["bound", "other"]
        assert await names(labelSelector="!tier") == ["pending"]
        assert await names(labelSelector="tier in (a, b),app notin (db)") == ["bound"]
        assert await names(labelSelector="app==web,!tier") == ["pending"]

        status, body = await call(session, "GET", "/api/v1/pods", params={"fieldSelector": "spec.bogus=x"})
        assert (status, body["message"]) == (400, "field label not supported: spec.bogus")
        status, body = await call(session, "GET", "/api/v1/nodes", params={"fieldSelector": "spec.nodeName=x"})
        assert status == 400  # a pod's field label is no node's
        status, body = await call(session, "GET", "/api/v1/pods", params={"labelSelector": "a=("})
        assert status == 400

    run(scenario)


# ---- conflicts and preconditions


def test_conflicts_and_preconditions_answer_409_with_the_real_messages() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        status, lease = await call(
            session, "POST", LEASES, {"metadata": {"name": "x"}, "spec": {"holderIdentity": "a"}}
        )
        assert status == 201
        stale = lease["metadata"]["resourceVersion"]
        lease["spec"]["holderIdentity"] = "b"
        status, renewed = await call(session, "PUT", f"{LEASES}/x", lease)
        assert status == 200 and int(renewed["metadata"]["resourceVersion"]) > int(stale)

        lease["spec"]["holderIdentity"] = "c"  # still at the stale resourceVersion
        status, body = await call(session, "PUT", f"{LEASES}/x", lease)
        assert status == 409 and body["reason"] == "Conflict"
        assert body["message"] == (
            'Operation cannot be fulfilled on leases.coordination.k8s.io "x": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        assert body["details"] == {"name": "x", "group": "coordination.k8s.io", "kind": "leases"}

        unconditional = {"metadata": {"name": "x"}, "spec": {"holderIdentity": "d"}}
        status, body = await call(session, "PUT", f"{LEASES}/x", unconditional)
        assert (status, body["reason"]) == (422, "Invalid")  # a Lease's update must name its resourceVersion

        uid = renewed["metadata"]["uid"]
        wrong_uid = {**renewed, "metadata": {**renewed["metadata"], "uid": "not-it"}}
        status, body = await call(session, "PUT", f"{LEASES}/x", wrong_uid)
        assert status == 409
        assert body["message"].endswith(f"Precondition failed: UID in precondition: not-it, UID in object meta: {uid}")

        status, body = await call(session, "DELETE", f"{LEASES}/x", {"preconditions": {"uid": "not-it"}})
        assert status == 409
        assert body["message"] == (
            f'Operation cannot be fulfilled on Lease.coordination.k8s.io "x": the UID in the precondition (not-it) '
            f"does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )

        # a uid in a patch body is no precondition but an immutable field (422), as the real server answers
        status, body = await call(session, "PATCH", f"{LEASES}/x", {"metadata": {"uid": "not-it"}}, headers=MERGE)
        assert (status, body["reason"]) == (422, "Invalid")
        assert (
            body["message"]
            == 'Lease.coordination.k8s.io "x" is invalid: metadata.uid: Invalid value: "not-it": field is immutable'
        )
        # a resourceVersion in a patch body is a precondition
        status, body = await call(
            session, "PATCH", f"{LEASES}/x", {"metadata": {"resourceVersion": stale}}, headers=MERGE
        )
        assert (status, body["reason"]) == (409, "Conflict")

        status, body = await call(session, "DELETE", f"{LEASES}/x")
        assert status == 200 and body["status"] == "Success" and body["details"]["uid"] == uid
        status, body = await call(session, "DELETE", f"{LEASES}/x")
        assert (status, body["message"]) == (404, 'leases.coordination.k8s.io "x" not found')

    run(scenario)


def test_binding() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        _, created = await call(session, "POST", PODS, pod("p"))
        uid = created["metadata"]["uid"]

        def binding(node: str, name: str = "p", uid: str | None = None) -> dict[str, Any]:
            meta = {"name": name, **({"uid": uid} if uid else {})}
            return {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }

        status, body = await call(session, "POST", f"{PODS}/p/binding", binding("n1", uid="stale-uid"))
        assert status == 409 and body["reason"] == "Conflict"
        assert body["message"].endswith(
            f"Precondition failed: UID in precondition: stale-uid, UID in object meta: {uid}"
        )

        status, body = await call(session, "POST", f"{PODS}/p/binding", binding("no-such-node", uid=uid))
        assert (status, body) == (
            201,
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        )
        bound = server.get("", "v1", "pods", "p", "default")
        assert bound is not None and bound["spec"]["nodeName"] == "no-such-node"  # nodes are not checked
        assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [("PodScheduled", "True")]
        assert int(bound["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

        status, body = await call(session, "POST", f"{PODS}/p/binding", binding("n2"))
        assert status == 409
        assert (
            body["message"]
            == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "no-such-node"'
        )
        assert body["details"] == {"name": "p", "kind": "pods/binding"}

        status, body = await call(session, "POST", f"{PODS}/gone/binding", binding("n1", name="gone"))
        assert (status, body["message"]) == (404, 'pods "gone" not found')
        status, body = await call(session, "POST", f"{PODS}/p/binding", binding("n1", name="other"))
        assert (status, body["message"]) == (400, "name in URL does not match name in Binding object")

    run(scenario)


# ---- patches and the status subresource


def test_merge_and_strategic_merge_patches_of_pod_status() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.add(
            "",
            "v1",
            "pods",
            make_pod("p").condition("PodScheduled", "False", "Unschedulable").condition("Ready", "False").body,
        )
        status_path = f"{PODS}/p/status"

        # strategic merge: conditions merge by type, the others stay
        patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]}}
        status, body = await call(session, "PATCH", status_path, patch, headers=STRATEGIC)
        assert status == 200
        assert [(c["type"], c.get("reason")) for c in body["status"]["conditions"]] == [
            ("PodScheduled", "SchedulerError"),
            ("Ready", ""),
        ]
        rv = body["metadata"]["resourceVersion"]

        # the same patch again changes nothing: no new resourceVersion (etcd skips no-op writes)
        _, same = await call(session, "PATCH", status_path, patch, headers=STRATEGIC)
        assert same["metadata"]["resourceVersion"] == rv

        # a merge patch replaces the list; null deletes a key
        replacing = {
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "phase": None, "nominatedNodeName": "n1"}
        }
        status, body = await call(session, "PATCH", status_path, replacing, headers=MERGE)
        assert status == 200 and body["status"] == {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nominatedNodeName": "n1",
        }

        # a status write ignores the spec; a main-resource write ignores the status
        status, body = await call(
            session, "PATCH", status_path, {"spec": {"nodeName": "x"}, "status": {"phase": "Running"}}, headers=MERGE
        )
        assert status == 200 and "nodeName" not in body["spec"] and body["status"]["phase"] == "Running"
        status, body = await call(
            session,
            "PATCH",
            f"{PODS}/p",
            {"metadata": {"labels": {"k": "v"}}, "status": {"phase": "Failed"}},
            headers=MERGE,
        )
        assert status == 200 and body["metadata"]["labels"] == {"k": "v"} and body["status"]["phase"] == "Running"

        # a JSON patch, and a strategic merge patch on a custom resource (not supported there: 415)
        ops = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}]
        status, body = await call(
            session, "PATCH", f"{PODS}/p", ops, headers={"Content-Type": "application/json-patch+json"}
        )
        assert status == 200 and body["metadata"]["annotations"] == {"a": "1"}
        server.add(
            "scheduling.kopf.dev", "v1alpha1", "schedulingpolicies", {"metadata": {"name": "default"}, "spec": {}}
        )
        status, body = await call(
            session, "PATCH", f"{POLICIES}/default/status", {"status": {"accepted": True}}, headers=STRATEGIC
        )
        assert (status, body["reason"]) == (415, "UnsupportedMediaType")
        status, body = await call(
            session, "PATCH", f"{POLICIES}/default/status", {"status": {"accepted": True}}, headers=MERGE
        )
        assert status == 200 and body["status"] == {"accepted": True} and body["metadata"]["generation"] == 1

    run(scenario)


def test_deletion_semantics() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        await call(session, "POST", PODS, pod("unbound"))
        server.add("", "v1", "pods", make_pod("bound").node("n1").phase("Running").body)
        server.add("", "v1", "pods", {**pod("guarded"), "metadata": {"name": "guarded", "finalizers": ["x/y"]}})
        stream = await watch(session, PODS, resourceVersion=server.resource_version)

        # an unbound pod is marked, then deleted; the pod itself is the answer
        status, body = await call(session, "DELETE", f"{PODS}/unbound")
        assert status == 200 and body["kind"] == "Pod" and body["metadata"]["deletionGracePeriodSeconds"] == 0
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in (await stream.next(), await stream.next())] == [
            ("MODIFIED", "unbound"),
            ("DELETED", "unbound"),
        ]
        # a bound pod waits for its kubelet: terminating, still there
        status, body = await call(session, "DELETE", f"{PODS}/bound")
        assert status == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 30
        assert server.get("", "v1", "pods", "bound", "default") is not None
        assert summary(await stream.next())[:2] == ("MODIFIED", "bound")
        # finalizers hold an object until they are removed
        status, body = await call(session, "DELETE", f"{PODS}/guarded")
        assert status == 200 and "deletionTimestamp" in body["metadata"]
        assert summary(await stream.next())[:2] == ("MODIFIED", "guarded")
        await call(session, "PATCH", f"{PODS}/guarded", {"metadata": {"finalizers": None}}, headers=MERGE)
        gone = await stream.next()
        assert summary(gone)[:2] == ("DELETED", "guarded")
        assert server.get("", "v1", "pods", "guarded", "default") is None
        stream.resp.close()

    run(scenario)


def test_resource_claims_as_their_registry_serves_them() -> None:
    """``KubeApi`` alone (``answer``): a ResourceClaim's status written apart, its reservations patched away by
    uid, its finalizer holding its deletion, DELETE answering the claim (the registry's ReturnDeletedObject),
    and ``generateName`` cut to 58 characters before the suffix the caller's hook gives."""
    asked: list[tuple[str, str]] = []

    def suffix(rt: ResourceType, obj: dict[str, Any]) -> str:
        asked.append((rt.plural, f"{obj['metadata']['namespace']}/{obj['metadata']['generateName']}"))
        return "zzzzz"

    api = KubeApi(name_suffix=suffix)
    claims = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
    created = api.answer("POST", claims, {"metadata": {"generateName": "c" * 70}, "spec": spec})
    name = "c" * 58 + "zzzzz"
    assert created.status == 201 and created.body["metadata"]["name"] == name
    assert asked == [("resourceclaims", "ns/" + "c" * 70)]
    claim = created.body

    # the object's update leaves the status alone, the status update the rest; a stale one is a conflict
    claim["metadata"]["finalizers"] = ["x/y"]
    claim["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    updated = api.answer("PUT", f"{claims}/{name}", claim)
    assert updated.ok and updated.body["metadata"]["finalizers"] == ["x/y"] and "status" not in updated.body
    stale = api.answer("PUT", f"{claims}/{name}/status", claim)
    assert (stale.status, stale.body["reason"]) == (409, "Conflict")
    claim = {**claim, "metadata": updated.body["metadata"]}
    reserved = api.answer("PUT", f"{claims}/{name}/status", claim)
    assert reserved.ok and reserved.body["status"]["reservedFor"][0]["uid"] == "u1"
    unreserve = {
        "metadata": {"uid": claim["metadata"]["uid"]},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "u1"}]},
    }
    strategic = "application/strategic-merge-patch+json"
    patched = api.answer("PATCH", f"{claims}/{name}/status", unreserve, content_type=strategic)
    assert patched.ok and not patched.body["status"].get("reservedFor")

    # the finalizer holds the deletion; removing it finishes it
    marked = api.answer("DELETE", f"{claims}/{name}")
    assert marked.ok and marked.body["kind"] == "ResourceClaim" and "deletionTimestamp" in marked.body["metadata"]
    unprotect = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/y"]}}
    assert api.answer("PATCH", f"{claims}/{name}", unprotect, content_type=strategic).ok
    assert api.get("resource.k8s.io", "v1", "resourceclaims", name, "ns") is None

    # without finalizers DELETE answers the claim itself, not a Status
    plain = api.answer("POST", claims, {"metadata": {"name": "plain"}, "spec": spec})
    gone = api.answer("DELETE", f"{claims}/plain")
    assert (
        gone.ok
        and gone.body["kind"] == "ResourceClaim"
        and gone.body["metadata"]["uid"] == plain.body["metadata"]["uid"]
    )
    missing = api.answer("GET", f"{claims}/plain")
    assert (missing.status, missing.body["message"]) == (404, 'resourceclaims.resource.k8s.io "plain" not found')

    # the default suffix: five characters of the random generator's, after the same cut
    default = KubeApi().answer("POST", claims, {"metadata": {"generateName": "d" * 70}, "spec": spec})
    assert default.body["metadata"]["name"].startswith("d" * 58) and len(default.body["metadata"]["name"]) == 63


def test_eviction_respects_the_disruption_budget() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.add(
            "",
            "v1",
            "pods",
            make_pod("web-1").label(app="web").node("n1").phase("Running").condition("Ready", "True").body,
        )
        pdb = {
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "observedGeneration": 1},
        }
        server.add("policy", "v1", "poddisruptionbudgets", pdb)
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "web-1", "namespace": "default"},
        }

        status, body = await call(session, "POST", f"{PODS}/web-1/eviction", eviction)
        assert (status, body["reason"]) == (429, "TooManyRequests")
        assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
        assert body["details"]["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
            }
        ]

        stored = server.get("policy", "v1", "poddisruptionbudgets", "web", "default")
        assert stored is not None
        server.update(
            "policy", "v1", "poddisruptionbudgets", {**stored, "status": {**stored["status"], "disruptionsAllowed": 1}}
        )
        status, body = await call(session, "POST", f"{PODS}/web-1/eviction", eviction)
        assert (status, body["status"]) == (201, "Success")
        evicted = server.get("", "v1", "pods", "web-1", "default")
        assert evicted is not None and "deletionTimestamp" in evicted["metadata"]  # bound: terminating
        assert any(c["type"] == "DisruptionTarget" for c in evicted["status"]["conditions"])
        after = server.get("policy", "v1", "poddisruptionbudgets", "web", "default")
        assert (
            after is not None
            and after["status"]["disruptionsAllowed"] == 0
            and "web-1" in after["status"]["disruptedPods"]
        )

    run(scenario)


# ---- watches


def test_watch_replays_after_a_resource_version_then_streams_live() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        _, listed = await call(session, "GET", PODS)
        start = listed["metadata"]["resourceVersion"]
        _, a = await call(session, "POST", PODS, pod("a"))
        await call(session, "PATCH", f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}}, headers=MERGE)
        stream = await watch(session, PODS, resourceVersion=start)
        replayed = [await stream.next(), await stream.next()]
        assert [e["type"] for e in replayed] == ["ADDED", "MODIFIED"]
        assert replayed[0]["object"]["kind"] == "Pod" and replayed[0]["object"]["apiVersion"] == "v1"
        assert replayed[0]["object"]["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]

        await call(session, "DELETE", f"{PODS}/a")
        server.add("", "v1", "pods", pod("b"))  # direct writes make the same events
        live = [summary(await stream.next()) for _ in range(3)]
        assert [(t, n) for t, n, _ in live] == [("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "b")]
        rvs = [int(rv) for _, _, rv in live]
        assert rvs == sorted(rvs) and rvs[-1] == int(server.resource_version)

        # other kinds and other namespaces stay out
        server.add("", "v1", "nodes", make_node("n1").body)
        server.add("", "v1", "pods", make_pod("elsewhere", "kube-system").body)
        server.add("", "v1", "pods", pod("c"))  # in order: what should stay out would come before it
        assert summary(await stream.next())[:2] == ("ADDED", "c")
        stream.resp.close()

        # no resourceVersion (or "0"): the current state as ADDED events first
        fresh = await watch(session, "/api/v1/pods")
        assert {summary(await fresh.next())[:2] for _ in range(3)} == {
            ("ADDED", "b"),
            ("ADDED", "c"),
            ("ADDED", "elsewhere"),
        }
        fresh.resp.close()

    run(scenario)


def test_watch_with_a_field_selector_sees_transitions() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        await call(session, "POST", PODS, pod("p"))
        before = server.get("", "v1", "pods", "p", "default")
        assert before is not None
        unassigned = await watch(
            session, "/api/v1/pods", fieldSelector="spec.nodeName=", resourceVersion=server.resource_version
        )
        assigned = await watch(
            session, "/api/v1/pods", fieldSelector="spec.nodeName!=", resourceVersion=server.resource_version
        )
        await call(session, "POST", f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {"name": "n1"}})

        gone = await unassigned.next()
        assert gone["type"] == "DELETED"  # it stopped matching: its previous content, the new resourceVersion
        assert "nodeName" not in gone["object"]["spec"] and gone["object"]["status"] == before["status"]
        assert gone["object"]["metadata"]["resourceVersion"] == server.resource_version
        came = await assigned.next()
        assert came["type"] == "ADDED" and came["object"]["spec"]["nodeName"] == "n1"

        await call(session, "PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}}, headers=MERGE)
        assert (await assigned.next())["type"] == "MODIFIED"
        await call(session, "POST", PODS, pod("q"))  # unassigned: comes after whatever else it was sent
        assert summary(await unassigned.next())[:2] == ("ADDED", "q")
        unassigned.resp.close()
        assigned.resp.close()

    run(scenario)


def test_bookmarks_come_at_the_configured_interval() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        t0 = time.monotonic()  # before the server's stream starts: its intervals are lower bounds from here
        stream = await watch(session, PODS, resourceVersion=server.resource_version, allowWatchBookmarks="true")
        first = await stream.next()
        assert first == {
            "type": "BOOKMARK",
            "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": server.resource_version}},
        }
        server.add("", "v1", "nodes", make_node("n1").body)  # another kind moves the global resourceVersion
        second = await stream.next()
        assert (
            second["type"] == "BOOKMARK" and second["object"]["metadata"]["resourceVersion"] == server.resource_version
        )
        assert 2 * server.bookmark_interval <= time.monotonic() - t0 < 1.0
        stream.resp.close()

        # no allowWatchBookmarks: no bookmarks
        quiet = await watch(session, PODS, resourceVersion=server.resource_version)
        await quiet.silent(2.5 * server.bookmark_interval)
        quiet.resp.close()

    run(scenario, bookmark_interval=0.03)


def test_timeout_seconds_ends_the_stream_cleanly() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        t0 = time.monotonic()
        stream = await watch(session, PODS, resourceVersion=server.resource_version, timeoutSeconds="2")
        assert await stream.ended()
        assert 0.04 <= time.monotonic() - t0 < 1.0  # two of this server's seconds, 0.02 s each
        stream.resp.close()

    run(scenario, second=0.02)


def test_end_watches_sends_the_events_due_then_ends_the_streams_cleanly() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        stream = await watch(session, PODS, resourceVersion=server.resource_version)
        assert server.open_watches == 1
        server.add("", "v1", "pods", pod("a"))
        assert server.end_watches() == 1 and server.open_watches == 0
        server.add("", "v1", "pods", pod("b"))  # after the end: on no ended stream
        assert summary(await stream.next())[:2] == ("ADDED", "a")
        assert await stream.ended()  # the terminating chunk, nothing after "a"
        stream.resp.close()
        again = await watch(session, PODS, resourceVersion=server.resource_version)  # new watches are served
        server.add("", "v1", "pods", pod("c"))
        assert summary(await again.next())[:2] == ("ADDED", "c")
        again.resp.close()

    run(scenario)


def test_compaction_expires_old_resource_versions_and_continue_tokens() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        for name in ("a", "b", "c"):
            await call(session, "POST", PODS, pod(name))
        _, page = await call(session, "GET", PODS, params={"limit": "1"})
        old = page["metadata"]["resourceVersion"]
        await call(session, "POST", PODS, pod("d"))
        server.compact()

        stream = await watch(session, PODS, resourceVersion=str(int(old) - 1))
        error = await stream.next()
        assert error == {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {int(old) - 1} ({server.resource_version})",
                "reason": "Expired",
                "code": 410,
            },
        }
        assert await stream.ended()
        stream.resp.close()

        status, body = await call(session, "GET", PODS, params={"limit": "1", "continue": page["metadata"]["continue"]})
        assert (status, body["reason"], body["code"]) == (410, "Expired", 410)
        assert body["message"].startswith(
            "The provided continue parameter is too old to display a consistent list result."
        )
        # the real server's inconsistent continuation: the rest, at the latest resourceVersion
        _, rest = await call(session, "GET", PODS, params={"continue": body["metadata"]["continue"]})
        assert [p["metadata"]["name"] for p in rest["items"]] == ["b", "c", "d"]

        # from the compaction point on, watches work again
        current = await watch(session, PODS, resourceVersion=server.resource_version)
        await call(session, "POST", PODS, pod("e"))
        assert summary(await current.next())[:2] == ("ADDED", "e")
        current.resp.close()

    run(scenario)


def test_stalled_watches_send_nothing_then_deliver_in_order() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        stream = await watch(session, PODS, resourceVersion=server.resource_version, allowWatchBookmarks="true")
        assert (await stream.next())["type"] == "BOOKMARK"
        server.stall_watches()
        await call(session, "POST", PODS, pod("a"))
        await call(session, "POST", PODS, pod("b"))
        late = await watch(session, PODS, resourceVersion=server.resource_version)  # new watches stall too
        await call(session, "DELETE", f"{PODS}/a")
        await stream.silent(1.5 * server.bookmark_interval)  # no events, no bookmarks
        await late.silent(0.01)
        status, _ = await call(session, "GET", PODS)  # other requests work
        assert status == 200

        server.resume_watches()
        events = [summary(await stream.next())[:2] for _ in range(4)]
        assert events == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "a")]
        assert [summary(await late.next())[:2] for _ in range(2)] == [("MODIFIED", "a"), ("DELETED", "a")]
        stream.resp.close()
        late.resp.close()

    run(scenario, bookmark_interval=0.04)  # shorter than the silence asserted, longer than a read takes


def test_stalled_connections_hang_every_request_until_resumed() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        stream = await watch(session, PODS, resourceVersion=server.resource_version)
        server.stall_connections()
        with pytest.raises(TimeoutError):
            # a server that answered would within milliseconds: 30 ms is ten times that
            await call(session, "GET", PODS, timeout=aiohttp.ClientTimeout(total=0.03))
        assert server.requests[-1].path == PODS and server.requests[-1].status is None  # received, never answered
        server.add("", "v1", "pods", pod("a"))
        await stream.silent(0.03)

        server.resume_connections()
        assert summary(await stream.next())[:2] == ("ADDED", "a")
        status, _ = await call(session, "GET", PODS)
        assert status == 200
        stream.resp.close()

    run(scenario)


def test_drop_watches_closes_streams_abruptly() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        stream = await watch(session, PODS, resourceVersion=server.resource_version)
        server.add("", "v1", "pods", pod("a"))
        assert summary(await stream.next())[:2] == ("ADDED", "a")
        assert server.drop_watches() == 1
        with pytest.raises(aiohttp.ClientPayloadError):  # no terminating chunk
            await asyncio.wait_for(stream.resp.content.read(), 2.0)
        stream.resp.close()
        status, _ = await call(session, "GET", PODS)
        assert status == 200

    run(scenario)


# ---- injected faults, records, tokens


def test_injected_failures_delays_and_request_records() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.fail("GET", r"/pods$", 503, times=2)
        assert [(await call(session, "GET", PODS))[0] for _ in range(3)] == [503, 503, 200]

        server.fail("POST", r"/binding$", 500, body={"kind": "Status", "code": 500, "message": "boom"})
        status, body = await call(
            session, "POST", f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {"name": "n"}}
        )
        assert (status, body["message"]) == (500, "boom")

        server.fail("*", r"/pods$", 429)
        async with session.get(PODS) as resp:
            assert resp.status == 429 and resp.headers["Retry-After"] == "1"
            assert (await resp.json())["reason"] == "TooManyRequests"

        server.fail("GET", r"/pods$", 410, watch=False)  # a list, not a watch
        stream = await watch(session, PODS, resourceVersion=server.resource_version)
        status, body = await call(session, "GET", PODS)
        assert (status, body["reason"]) == (410, "Expired")
        stream.resp.close()

        server.delay("GET", r"^/api/v1/nodes$", 0.02)
        t0 = time.monotonic()
        status, _ = await call(session, "GET", "/api/v1/nodes", headers={"User-Agent": "edge-test/1"})
        assert status == 200 and time.monotonic() - t0 >= 0.02
        server.clear_faults()

        record = server.requests[-1]
        assert (record.method, record.path, record.status, record.headers["User-Agent"]) == (
            "GET",
            "/api/v1/nodes",
            200,
            "edge-test/1",
        )
        binding = next(r for r in server.requests if r.path.endswith("/binding"))
        assert binding.body == {"metadata": {"name": "p"}, "target": {"name": "n"}} and binding.status == 500
        watch_record = next(r for r in server.requests if r.query.get("watch") == "1")
        assert watch_record.status == 200 and "resourceVersion" in watch_record.query

        server.hold("GET", r"^/api/v1/nodes$")  # recorded, then kept until released
        count = len(server.requests)
        held = asyncio.create_task(call(session, "GET", "/api/v1/nodes"))
        while len(server.requests) == count:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0)
        assert not held.done() and server.requests[-1].status is None
        server.release()
        assert (await held)[0] == 200 and server.requests[-1].status == 200
        assert (await call(session, "GET", "/api/v1/nodes"))[0] == 200  # released: later ones are not held

    run(scenario)


def test_require_token_answers_401_and_follows_rotation() -> None:
    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.require_token("one")
        status, body = await call(session, "GET", "/api/v1/nodes")
        assert (status, body) == (
            401,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
        )
        assert (await call(session, "GET", "/api/v1/nodes", headers={"Authorization": "Bearer one"}))[0] == 200
        server.require_token("two")
        assert (await call(session, "GET", "/api/v1/nodes", headers={"Authorization": "Bearer one"}))[0] == 401
        assert (await call(session, "GET", "/api/v1/nodes", headers={"Authorization": "Bearer two"}))[0] == 200
        assert server.requests[-1].headers["Authorization"] == "Bearer two"

    run(scenario)


def test_the_official_kubernetes_client_lists_nodes(tmp_path: Path) -> None:
    from kubernetes import client, config

    async def scenario(server: FakeApiServer, session: aiohttp.ClientSession) -> None:
        server.add("", "v1", "nodes", make_node("n1").label(zone="a").body)
        server.add("", "v1", "nodes", make_node("n2").body)
        server.require_token("secret")
        path = server.kubeconfig(tmp_path / "kubeconfig", token="secret")

        def list_nodes() -> list[str]:
            api = config.new_client_from_config(config_file=str(path))
            try:
                nodes = client.CoreV1Api(api).list_node(label_selector="zone=a")
                return [n.metadata.name for n in nodes.items]
            finally:
                api.close()

        assert await asyncio.to_thread(list_nodes) == ["n1"]
        assert server.requests[-1].headers["Authorization"] == "Bearer secret"

    run(scenario)
