"""sim/apiserver.py: the in-memory API server ``simulate`` gives PreBind and Bind plugins answers as kube-apiserver
would (``sim/kubeapi.py``'s: pods/binding's 201, 400, 404, 409 and 500 with the real messages; GET and PATCH of
pods and their status; nodes by name or by field selector) and refuses what the simulation would not see with a
clear status."""

from __future__ import annotations

import pytest
from builders import make_node, make_pod

from kopf_scheduler.sim.apiserver import InMemoryApi, drive
from kopf_scheduler.sim.loader import load_cluster

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def api() -> InMemoryApi:
    loaded = load_cluster(
        [make_node("n1").label(zone="a").raw(), make_node("n2").raw(), make_pod("bound").node("n1").raw()]
    )
    return InMemoryApi(loaded.cache)


def test_a_pending_pod_is_bound_once(api: InMemoryApi) -> None:
    pod = make_pod("web").obj()
    api.hold(pod)
    first = api.bind(pod, "n1", annotations={"a": "b"})
    assert first.status == 201 and api.is_bound(pod)
    again = api.bind(pod, "n2")
    assert (again.status, again.conflict) == (409, True)
    assert (
        again.detail()
        == 'Operation cannot be fulfilled on pods/binding "web": pod web is already assigned to node "n1"'
    )
    read = api.answer("GET", f"{PODS}/web")
    assert read.body["spec"]["nodeName"] == "n1" and read.body["metadata"]["annotations"] == {"a": "b"}
    assert pod.source is not None and not (pod.source.get("spec") or {}).get("nodeName")  # the parsed body untouched


@pytest.mark.parametrize(
    "method, path, body, status, message",
    [
        pytest.param(
            "POST",
            f"{PODS}/ghost/binding",
            {"metadata": {"name": "ghost"}, "target": {"name": "n1"}},
            404,
            'pods "ghost" not found',
            id="404",
        ),
        pytest.param(
            "POST",
            f"{PODS}/web/binding",
            {"target": {"name": "n1"}},
            400,
            "name in URL does not match name in Binding object",
            id="400",
        ),
        pytest.param(
            "POST",
            f"{PODS}/web/binding",
            {"metadata": {"name": "web"}, "target": {}},
            500,
            "target.name: Required value",
            id="no target: ValidatePodBinding's error, an unknown 500",
        ),
        pytest.param(
            "GET",
            f"{PODS}/web/binding",
            None,
            405,
            "the server does not allow this method on the requested resource",
            id="GET binding",
        ),
        pytest.param(
            "DELETE",
            f"{PODS}/web",
            None,
            405,
            "the simulation writes pods through pods/binding, and objects by PATCH and PUT only: DELETE",
            id="DELETE pod",
        ),
        pytest.param(
            "POST", "/api/v1/nodes", {}, 405, "the simulation does not change nodes: POST /api/v1/nodes", id="n"
        ),
        pytest.param("GET", "/api/v1/nodes/n9", None, 404, 'nodes "n9" not found', id="no such node"),
        pytest.param(
            "GET",
            "/api/v1/nodes?fieldSelector=status.phase%3DRunning",
            None,
            400,
            "field label not supported: status.phase",
            id="other field selector",
        ),
        pytest.param(
            "GET",
            "/api/v1/services",
            None,
            404,
            "the simulation's API server holds pods, nodes and resource claims only, not /api/v1/services",
            id="other kinds",
        ),
    ],
)
def test_what_is_refused_says_why(api: InMemoryApi, method, path, body, status, message) -> None:
    api.hold(make_pod("web").obj())
    answer = drive(api.request(method, path, body))
    assert (answer.status, answer.detail()) == (status, message)
    assert answer.body["code"] == status and api.requests[-1] == (method, path, body)


def test_pods_are_read_and_merge_patched(api: InMemoryApi) -> None:
    pod = make_pod("web").label(app="x", tier="f").obj()
    api.hold(pod)
    merge = "application/merge-patch+json"
    refused = api.answer("PATCH", f"{PODS}/web", {"metadata": {"labels": {"new": "1"}}})
    assert refused.status == 415  # a patch says which kind it is, or the server refuses it
    patched = api.answer(
        "PATCH", f"{PODS}/web", {"metadata": {"labels": {"tier": None, "new": "1"}}}, content_type=merge
    )
    assert patched.ok and patched.body["metadata"]["labels"] == {"app": "x", "new": "1"}
    status = api.answer("PATCH", f"{PODS}/web/status", {"status": {"nominatedNodeName": "n2"}}, content_type=merge)
    assert status.body["status"]["nominatedNodeName"] == "n2"
    assert pod.source is not None and pod.source["metadata"]["labels"] == {"app": "x", "tier": "f"}  # copy on write
    # a bound pod of the cluster is found through the cache
    bound = api.answer("GET", f"{PODS}/bound")
    assert bound.ok and bound.body["spec"]["nodeName"] == "n1"


def test_nodes_by_name_or_field_selector(api: InMemoryApi) -> None:
    listed = api.answer("GET", "/api/v1/nodes")
    assert [n["metadata"]["name"] for n in listed.body["items"]] == ["n1", "n2"]
    one = api.answer("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1")
    assert [n["metadata"]["name"] for n in one.body["items"]] == ["n1"]
    node = api.answer("GET", "/api/v1/nodes/n1")
    assert node.body["kind"] == "Node" and node.body["metadata"]["labels"]["zone"] == "a"


def test_a_binding_of_a_stale_uid_is_a_conflict(api: InMemoryApi) -> None:
    """kube-apiserver answers a Binding whose metadata.uid is not the pod's with 409 Conflict (a failed uid
    precondition), not 404."""
    api.hold(make_pod("web").obj())
    binding = {"metadata": {"name": "web", "uid": "other"}, "target": {"name": "n1"}}
    answer = api.answer("POST", f"{PODS}/web/binding", binding)
    assert answer.status == 409 and "Precondition failed: UID in precondition: other" in answer.detail()
