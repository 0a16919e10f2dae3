"""HourlyCostAnnotation (PreBind) and PricedBinder (Bind): what they ask the API server, and a policy and a
whole scheduling cycle that run them. A plugin of the binding cycle is a coroutine given an ``ApiClient``:
a test gives it a fake one and runs it with ``asyncio.run``; ``kopf_scheduler.testing.Cluster`` runs it in
the cycle, against an in-memory API server holding the cluster's pods and nodes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cost_aware import CostAware, HourlyCostAnnotation, PricedBinder
from cost_aware.binding import BindingArgs

from kopf_scheduler.framework import CycleState, PluginArgsError, Status, parse_args, parse_pod
from kopf_scheduler.testing import Cluster, PolicyError, policy, read_manifests

EXAMPLE = Path(__file__).resolve().parents[1] / "example"
POD = parse_pod(
    {"metadata": {"name": "web", "namespace": "shop", "uid": "u-1"}, "spec": {"containers": [{"name": "c"}]}}
)


@dataclass(frozen=True)
class Answer:
    """What the fake API server answers (the ``ApiResponse`` a plugin reads)."""

    status: int
    body: Any = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    def detail(self, limit: int = 300) -> str:
        return str((self.body or {}).get("message", self.body))[:limit]


@dataclass
class FakeClient:
    """Answers GET of the nodes it knows (name -> labels) and 2xx to every write, unless told `fail`."""

    nodes: dict[str, dict[str, str]]
    fail: dict[str, int] = field(default_factory=dict)
    asked: list[tuple[str, str, Any, str]] = field(default_factory=list)

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", decode: bool = True
    ) -> Answer:
        self.asked.append((method, path, body, content_type))
        if method in self.fail:
            return Answer(self.fail[method], {"message": f"{method} refused"})
        if method == "GET":  # a list of the nodes, by name: /api/v1/nodes?fieldSelector=metadata.name%3D<name>
            name = path.rsplit("%3D", 1)[1]
            items = [{"metadata": {"name": name, "labels": self.nodes[name]}}] if name in self.nodes else []
            return Answer(200, {"kind": "NodeList", "items": items})
        return Answer(201 if method == "POST" else 200, {})


NODES = {"spot": {"example.com/hourly-cost": "0.12"}, "free": {}}


def pre_bind(plugin: HourlyCostAnnotation, node: str, client: FakeClient) -> Status:
    return asyncio.run(plugin.pre_bind(CycleState(), POD, node, client))


def bind(plugin: PricedBinder, node: str, client: FakeClient) -> Status:
    return asyncio.run(plugin.bind(CycleState(), POD, node, client))


def test_the_price_is_stamped_on_the_pod_before_the_bind() -> None:
    client = FakeClient(NODES)
    assert pre_bind(HourlyCostAnnotation(), "spot", client).is_success
    stamp = {"metadata": {"annotations": {"example.com/hourly-cost": "0.12"}}}
    assert client.asked == [
        ("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dspot", None, "application/json"),
        ("PATCH", "/api/v1/namespaces/shop/pods/web", stamp, "application/merge-patch+json"),
    ]


def test_an_unpriced_node_leaves_nothing_to_stamp() -> None:
    client = FakeClient(NODES)
    assert pre_bind(HourlyCostAnnotation(), "free", client).is_skip
    assert [method for method, *_ in client.asked] == ["GET"]


@pytest.mark.parametrize(
    ("node", "fail", "message"),
    [
        pytest.param("gone", {}, "cannot read node gone: no such node", id="the node is gone"),
        pytest.param("spot", {"GET": 403}, "cannot read node spot: GET refused", id="the node cannot be read"),
        pytest.param("spot", {"PATCH": 403}, "cannot annotate the pod: PATCH refused", id="the patch is refused"),
    ],
)
def test_a_failure_is_a_status_naming_it(node: str, fail: dict[str, int], message: str) -> None:
    status = pre_bind(HourlyCostAnnotation(), node, FakeClient(NODES, fail))
    assert not status.is_success and status.message == message


def test_priced_nodes_are_bound_with_their_price_on_the_binding() -> None:
    client = FakeClient(NODES)
    assert bind(PricedBinder(), "spot", client).is_success
    _, path, body, _ = client.asked[-1]
    assert path == "/api/v1/namespaces/shop/pods/web/binding"
    assert body["metadata"] == {
        "name": "web", "namespace": "shop", "uid": "u-1", "annotations": {"example.com/bound-at-hourly-cost": "0.12"},
    }  # fmt: skip
    assert body["target"]["name"] == "spot"


def test_an_unpriced_node_is_left_to_default_binder() -> None:
    client = FakeClient(NODES)
    assert bind(PricedBinder(), "free", client).is_skip
    assert [method for method, *_ in client.asked] == ["GET"]  # nothing bound here


def test_a_refused_binding_fails_the_bind() -> None:
    status = bind(PricedBinder(), "spot", FakeClient(NODES, {"POST": 409}))
    assert not status.is_success and status.message == "POST refused"


def test_arguments() -> None:
    assert HourlyCostAnnotation.new({"annotation": "acme.io/price"}).annotation == "acme.io/price"
    assert PricedBinder.new({"label": "acme.io/cost"}).args.label == "acme.io/cost"
    with pytest.raises(PluginArgsError) as exc:
        parse_args(BindingArgs, {"annotation": "not a key!"})
    assert exc.value.field == "annotation"


PLUGINS = (CostAware, HourlyCostAnnotation, PricedBinder)


def test_a_policy_enables_them_in_its_plugins_list() -> None:
    spec = {"schedulerName": "s", "plugins": [{"name": "HourlyCostAnnotation"}, {"name": "PricedBinder"}]}
    profile = policy(spec, plugins=PLUGINS)
    # The default profile's own PreBind plugins (VolumeBinding, DynamicResources) run first; ours follows them.
    assert [p.name for p in profile.pre_binders] == ["VolumeBinding", "DynamicResources", "HourlyCostAnnotation"]
    assert [p.name for p in profile.binders] == ["PricedBinder", "DefaultBinder"]  # DefaultBinder is always last
    with pytest.raises(PolicyError) as wrong:
        policy({**spec, "plugins": [{"name": "CostAware"}]}, plugins=PLUGINS)
    assert wrong.value.errors[0].path == "spec.plugins[0].name"


def test_a_whole_cycle_runs_them_against_the_in_memory_api_server() -> None:
    cluster = Cluster(
        objects=read_manifests(EXAMPLE / "cluster.yaml"), profile=policy(EXAMPLE / "policy.yaml", plugins=PLUGINS)
    )
    placements = cluster.schedule(*read_manifests(EXAMPLE / "pods.yaml"))
    assert [p.node for p in placements] == ["spot-a"] * 4 + ["reserved-c"] * 2
    web = cluster.pod("web-1")
    assert web["spec"]["nodeName"] == "spot-a"
    assert web["metadata"]["annotations"] == {
        "example.com/hourly-cost": "0.12",  # stamped by HourlyCostAnnotation
        "example.com/bound-at-hourly-cost": "0.12",  # from PricedBinder's Binding
    }
    # every pod landed on a priced node: PricedBinder bound each, DefaultBinder none
    bindings = [body for method, path, body in cluster.requests if path.endswith("/binding")]
    assert [b["metadata"]["annotations"]["example.com/bound-at-hourly-cost"] for b in bindings] == (
        ["0.12"] * 4 + ["0.28"] * 2
    )
