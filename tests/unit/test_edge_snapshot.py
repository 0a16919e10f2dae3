"""edge/snapshot.py (``simulate --from-cluster``) against the fake API server: every kind listed page by page with
its kind set, kinds the server does not serve left out with a note, optional kinds the user may not list left out,
and any other refusal stopping with the API's own message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from builders import make_node, make_pod
from fakeapi import FakeApiServer

from kopf_scheduler.edge import snapshot
from kopf_scheduler.edge.snapshot import ClusterReadError, read_cluster

Start = Callable[[Callable[[FakeApiServer], None]], Path]


def three_nodes_and_pods(server: FakeApiServer) -> None:
    for i in range(3):
        server.add("", "v1", "nodes", make_node(f"n{i}").raw())
    server.add("", "v1", "pods", make_pod("running").node("n0").phase("Running").raw())
    server.add("", "v1", "pods", make_pod("done").node("n0").phase("Succeeded").raw())
    server.add("", "v1", "pods", make_pod("pending").raw())


def test_every_kind_is_listed_page_by_page_with_its_kind(api_server: Start, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "LIST_CHUNK", 2)
    seen: list[FakeApiServer] = []
    kubeconfig = api_server(lambda server: (three_nodes_and_pods(server), seen.append(server)))
    read = read_cluster(str(kubeconfig))
    node_lists = [r.query for r in seen[0].requests if r.path == "/api/v1/nodes"]
    assert [q.get("limit") for q in node_lists] == ["2", "2"] and "continue" in node_lists[1]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in read.documents) == [
        ("Node", "n0"),
        ("Node", "n1"),
        ("Node", "n2"),
        ("Pod", "pending"),
        ("Pod", "running"),
    ]  # finished pods are not asked for
    assert read.missing == ("ResourceClaimTemplate",)  # the fake serves no templates: a 404, left out
    assert read.forbidden == () and read.server.startswith("http://127.0.0.1:")


def test_an_optional_kind_the_user_may_not_list_is_left_out(api_server: Start) -> None:
    def seed(server: FakeApiServer) -> None:
        three_nodes_and_pods(server)
        server.fail("GET", r"^/apis/resource.k8s.io/v1/resourceslices$", 403)

    read = read_cluster(str(api_server(seed)))
    assert read.forbidden == ("ResourceSlice",) and len([d for d in read.documents if d["kind"] == "Node"]) == 3


@pytest.mark.parametrize(
    "status, message",
    [
        pytest.param(403, "cannot list Node objects: HTTP 403: ", id="forbidden"),
        pytest.param(422, "cannot list Node objects: HTTP 422: ", id="refused"),
    ],
)
def test_a_kind_the_simulation_needs_stops_the_read(api_server: Start, status: int, message: str) -> None:
    def seed(server: FakeApiServer) -> None:
        server.fail("GET", r"^/api/v1/nodes$", status)

    with pytest.raises(ClusterReadError) as caught:
        read_cluster(str(api_server(seed)))
    assert str(caught.value).startswith(message)


def test_an_unreadable_kubeconfig_says_which(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(ClusterReadError) as caught:
        read_cluster(str(kubeconfig))
    assert str(caught.value).startswith(f"cannot load kubeconfig {kubeconfig}: ")
