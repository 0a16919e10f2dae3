"""HTTP extenders end to end: the operator calls an extender served by a local HTTP server in the test.

One extender (``tests/extender_server.py``) filters out the node labelled ``reserved=batch`` (it
reads the labels from the Node objects it is sent), scores another up, and binds the pods itself
through the API server; the operator's placements, events and bindings follow it. A hanging
extender with a short ``httpTimeout`` fails each attempt with upstream's FailedScheduling text,
unless it is ``ignorable``, when pods are scheduled without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extender_server import ExtenderServer
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client
from kubernetes.client.exceptions import ApiException

POLICY, HANGING, IGNORABLE = "e2e-extender", "e2e-extender-hang", "e2e-extender-ignorable"


@pytest.fixture(scope="module")
def operator(sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    args = [a for name in (POLICY, HANGING, IGNORABLE) for a in ("--policy", name)]
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", args, sa_kubeconfig)
    try:
        yield op
    finally:
        op.stop()


def node_of(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name


def failed_scheduling(core: client.CoreV1Api, namespace: str, pod: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    return [e.message for e in events if e.reason == "FailedScheduling"]


class Extender:
    """The test's extender: rejects reserved nodes, prefers `favourite`, binds through the API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.favourite = ""
        self.release = threading.Event()

    def filter(self, args: Any) -> tuple[int, Any]:
        keep, failed = [], {}
        for node in args["Nodes"]["items"]:
            name = node["metadata"]["name"]
            if node["metadata"]["labels"].get("reserved") == "batch":
                failed[name] = "node(s) reserved for batch by the extender"
            else:
                keep.append(node)
        return 200, {"Nodes": {"items": keep}, "FailedNodes": failed}

    def prioritize(self, args: Any) -> tuple[int, Any]:
        return 200, [
            {"Host": n["metadata"]["name"], "Score": 10 if n["metadata"]["name"] == self.favourite else 0}
            for n in args["Nodes"]["items"]
        ]

    def bind(self, args: Any) -> tuple[int, Any]:
        body = {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": args["PodName"], "namespace": args["PodNamespace"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        }  # fmt: skip
        try:
            self.core.create_namespaced_pod_binding(args["PodName"], args["PodNamespace"], body, _preload_content=False)
        except ApiException as exc:
            return 200, {"Error": f"binding refused: {exc.status}"}
        return 200, {"Error": ""}

    def hang(self, args: Any) -> tuple[int, Any]:
        self.release.wait(5)
        return 200, {"NodeNames": args["NodeNames"]}


@pytest.fixture
def extender(api: client.ApiClient) -> Iterator[tuple[Extender, ExtenderServer]]:
    ext = Extender(api)
    routes = {"filter": ext.filter, "prioritize": ext.prioritize, "bind": ext.bind, "hang": ext.hang}
    with ExtenderServer(routes) as server:
        try:
            yield ext, server
        finally:
            ext.release.set()


def test_an_extender_filters_scores_and_binds(
    operator: Operator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    extender: tuple[Extender, ExtenderServer],
) -> None:
    ext, server = extender
    core = client.CoreV1Api(api)
    group = Group(api, scheduler=POLICY)
    try:
        (reserved,) = group.nodes(1, labels={"reserved": "batch"}, cpu="8")
        plain, favourite = group.nodes(2, cpu="8")
        ext.favourite = favourite
        spec = {
            "schedulerName": POLICY,
            "extenders": [{
                "urlPrefix": server.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
                "weight": 5, "httpTimeout": "5s",
            }],
        }  # fmt: skip
        create_policy(custom, POLICY, spec)
        wait_accepted(custom, POLICY, operator)
        for i in range(3):
            core.create_namespaced_pod(namespace, group.pod(f"web-{i}", cpu="100m"))
        placed = wait(
            operator,
            lambda: (p := {i: node_of(core, namespace, f"web-{i}") for i in range(3)}) and all(p.values()) and p,
            message="3 pods bound",
        )
        # the extender's 10 points x 10 x weight 5 outweigh the spread the plugins prefer
        assert set(placed.values()) == {favourite}, (placed, reserved, plain)
        verbs = server.verbs()
        assert verbs.count("bind") == 3, "the extender bound them, not pods/binding"
        assert verbs.count("filter") == 3 and verbs.count("prioritize") == 3

        # a pod only the reserved node could take: the extender's reason is in upstream's FitError text
        core.create_namespaced_pod(
            namespace, group.pod("batch-only", cpu="100m", node_selector={"kubernetes.io/hostname": reserved})
        )
        messages = wait(
            operator,
            lambda: failed_scheduling(core, namespace, "batch-only"),
            message="FailedScheduling for batch-only",
        )
        assert "1 node(s) reserved for batch by the extender" in messages[0], messages
        assert messages[0].startswith("0/"), messages
    finally:
        delete_policy(custom, POLICY)
        group.cleanup()


def test_a_hanging_extender_fails_the_attempt_unless_ignorable(
    operator: Operator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    extender: tuple[Extender, ExtenderServer],
) -> None:
    _, server = extender
    core = client.CoreV1Api(api)
    strict, lenient = Group(api, scheduler=HANGING), Group(api, scheduler=IGNORABLE)
    try:
        strict.nodes(1)
        lenient.nodes(1)
        hanging = {"urlPrefix": server.url, "filterVerb": "hang", "nodeCacheCapable": True, "httpTimeout": "500ms"}
        create_policy(custom, HANGING, {"schedulerName": HANGING, "extenders": [hanging]})
        create_policy(custom, IGNORABLE, {"schedulerName": IGNORABLE, "extenders": [{**hanging, "ignorable": True}]})
        wait_accepted(custom, HANGING, operator)
        wait_accepted(custom, IGNORABLE, operator)
        t0 = time.monotonic()
        core.create_namespaced_pod(namespace, strict.pod("stuck", cpu="100m"))
        core.create_namespaced_pod(namespace, lenient.pod("skips-it", cpu="100m"))

        bound = wait(
            operator, lambda: node_of(core, namespace, "skips-it"), message="skips-it bound without the extender"
        )
        assert bound == lenient.names[0]
        messages = wait(
            operator, lambda: failed_scheduling(core, namespace, "stuck"), message="FailedScheduling for stuck"
        )
        assert (
            messages[0]
            == f'Post "{server.url}/hang": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        )
        assert time.monotonic() - t0 < 15
        assert node_of(core, namespace, "stuck") is None
        assert "skipped ignorable extender" in operator.text()
        assert "Traceback" not in operator.text(), "a failing extender is an outcome, not a crash"
    finally:
        delete_policy(custom, HANGING)
        delete_policy(custom, IGNORABLE)
        strict.cleanup()
        lenient.cleanup()
