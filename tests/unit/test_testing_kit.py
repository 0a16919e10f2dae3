"""``kopf_scheduler.testing``, the plugin author's kit: its public names, the builders, ``run_plugin`` through
the scheduler's runtime, ``profile`` and ``policy``, and whole cycles in a ``Cluster``.

The names are pinned as ``kopf_scheduler.framework``'s are (tests/unit/test_framework_api.py): a change of
this list is a change of what out-of-tree plugins' tests import. The examples' tests import nothing else of
kopf_scheduler (tests/unit/test_examples_imports.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import kopf_scheduler.testing as testing
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.priority_sort import PrioritySort
from kopf_scheduler.framework import (
    SKIP,
    SUCCESS,
    ApiClient,
    Code,
    CycleState,
    FilterPlugin,
    NodeInfo,
    NormalizeScorePlugin,
    PermitHandle,
    PermitPlugin,
    PermitResult,
    Pod,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Snapshot,
    Status,
    default_normalize,
    error,
    parse_node,
    parse_pod,
    unresolvable,
)
from kopf_scheduler.kube import convert
from kopf_scheduler.testing import Cluster, make_node, make_pod, node_info, policy, profile, run_plugin

PUBLIC = [
    "Cluster",
    "FieldError",
    "NodeBuilder",
    "NodeLike",
    "Placement",
    "PluginRun",
    "PodBuilder",
    "PodLike",
    "PolicyError",
    "Profile",
    "make_coscheduling_group",
    "make_node",
    "make_pod",
    "make_pod_group",
    "node_info",
    "policy",
    "profile",
    "read_manifests",
    "run_plugin",
]


def test_all_is_exactly_the_public_names() -> None:
    assert testing.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(testing, name, None) is not None, name
    defined_here = sorted(
        name
        for name, value in vars(testing).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == testing.__name__
    )
    assert [n for n in defined_here if n not in PUBLIC] == [], "defined here and public-looking: export or hide it"


# --------------------------------------------------------------------------- builders


def fields(obj: object) -> tuple[object, ...]:
    """A Pod's or Node's fields (they compare by identity)."""
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))  # type: ignore[arg-type]


def test_built_objects_are_what_the_operator_makes_of_the_same_bodies() -> None:
    pod = make_pod("web", "shop").req(cpu="500m", memory="1Gi").label(app="web").priority(10)
    node = make_node("n1").capacity(cpu="8", memory="16Gi", pods="20").label(zone="a").taint("gpu", "yes")
    assert fields(pod.obj()) == fields(convert.pod(pod.raw())) == fields(parse_pod(pod.raw()))
    assert fields(node.obj()) == fields(convert.node(node.raw())) == fields(parse_node(node.raw()))
    assert (pod.obj().namespace, pod.obj().priority, pod.obj().requests.milli_cpu) == ("shop", 10, 500)
    assert make_pod("a").obj().uid != make_pod("a").obj().uid  # every pod a uid of its own


def test_node_info_takes_builders_and_bodies_and_places_the_pods() -> None:
    info = node_info(make_node("n1"), make_pod("a").req(cpu="1"), make_pod("b").req(cpu="2").raw())
    assert info.name == "n1" and [p.node_name for p in info.pods.values()] == ["n1", "n1"]
    assert info.requested.milli_cpu == 3000


# --------------------------------------------------------------------------- one plugin


GPU = "example.com/gpu-ready"


class GpuReady(FilterPlugin):
    NAME = "GpuReady"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        ready = node.node is not None and node.node.labels.get(GPU) == "true"
        return SUCCESS if ready else unresolvable("node(s) were not GPU-ready")


@dataclass(frozen=True, slots=True)
class PinArgs:
    nodes: tuple[str, ...] = ()


class Pin(PreFilterPlugin[PinArgs], FilterPlugin[PinArgs]):
    """Admits only ``nodes`` (upstream's PreFilterResult); none given: SKIP. Its filter rejects node ``bad``."""

    NAME = "Pin"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if not self.args.nodes:
            return SKIP
        state.admit_only(self.name, self.args.nodes)
        return SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return unresolvable("bad node") if node.name == "bad" else SUCCESS


class TeamOnly(PreFilterPlugin):
    """Rejects every node for a pod whose namespace has no ``team`` label (reads the cluster's objects)."""

    NAME = "TeamOnly"

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        if "team" in snapshot.objects.namespace_labels.get(pod.namespace, {}):
            return SUCCESS
        return unresolvable(f"namespace {pod.namespace} belongs to no team")


class Emptiest(PreScorePlugin, NormalizeScorePlugin):
    """Raw score: the pods on the node, reversed by normalisation (fewest pods: 100). SKIPs pods labelled ``any``."""

    NAME = "Emptiest"

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        return SKIP if "any" in pod.labels else SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return len(node.pods)

    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return default_normalize(scores, reverse=True)


class Broken(ScorePlugin):
    NAME = "Broken"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        raise KeyError("no price")


def test_a_filter_says_why_of_each_node_and_what_the_event_would_say() -> None:
    nodes = [make_node("a").labels({GPU: "true"}), make_node("b"), make_node("c")]
    run = run_plugin(GpuReady(), make_pod("trainer"), nodes=nodes)
    rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) were not GPU-ready",), "GpuReady")
    assert run.statuses == {"a": SUCCESS, "b": rejected, "c": rejected}
    assert run.feasible == ["a"] and run.scores == {} and run.message == "" and run.error is None
    none = run_plugin(GpuReady(), make_pod("trainer"), nodes=nodes[1:])
    assert none.feasible == [] and none.message == "0/2 nodes are available: 2 node(s) were not GPU-ready."


def test_pre_filter_skip_rejection_and_narrowing_behave_as_in_the_operator() -> None:
    nodes = [make_node("good"), make_node("bad"), make_node("other")]
    skipped = run_plugin(Pin(), make_pod("p"), nodes=nodes)  # no nodes named: SKIP, its Filter is not called
    assert skipped.filter_skipped and skipped.feasible == ["good", "bad", "other"]
    narrowed = run_plugin(Pin(PinArgs(nodes=("good", "bad"))), make_pod("p"), nodes=nodes)
    assert not narrowed.filter_skipped and narrowed.feasible == ["good"]
    assert narrowed.statuses["bad"] == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("bad node",), "Pin")
    assert narrowed.statuses["other"].reasons == ("node(s) didn't satisfy plugin(s) [Pin]",)
    teamless = run_plugin(TeamOnly(), make_pod("p", "scratch"), nodes=nodes)
    assert {s.message for s in teamless.statuses.values()} == {"namespace scratch belongs to no team"}
    assert teamless.message == "0/3 nodes are available: namespace scratch belongs to no team."


def test_other_cluster_objects_are_read_from_their_bodies() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "web"}}}
    run = run_plugin(TeamOnly(), make_pod("p", "shop"), nodes=[make_node("a")], objects=[namespace])
    assert run.feasible == ["a"]


def test_scores_before_and_after_normalize_score_and_a_skipped_pre_score() -> None:
    nodes = [make_node("busy"), make_node("idle"), make_node("half")]
    pods = [make_pod("x").node("busy"), make_pod("y").node("busy"), make_pod("z").node("half")]
    run = run_plugin(Emptiest(), make_pod("p"), nodes=nodes, pods=pods)
    # raw: pods per node 2, 0, 1; reversed default normalisation: 100 - raw * 100 // 2
    assert run.raw_scores == {"busy": 2, "idle": 0, "half": 1}
    assert run.scores == {"busy": 0, "idle": 100, "half": 50}
    skipped = run_plugin(Emptiest(), make_pod("p").label(any="yes"), nodes=nodes, pods=pods)
    assert skipped.score_skipped and skipped.scores == {} and skipped.feasible == ["busy", "idle", "half"]


def test_a_plugin_that_raises_is_an_error_naming_it() -> None:
    run = run_plugin(Broken(), make_pod("p"), nodes=[make_node("a"), make_node("b")])
    assert run.error == "running Score plugin 'Broken': KeyError: 'no price'" and run.statuses == {}


def test_a_built_in_vector_filter_on_nodes_with_pods_bound_to_them() -> None:
    nodes = [make_node(name).capacity(cpu="2", memory="4Gi", pods="10") for name in ("full", "free")]
    pods = [make_pod("hog").req(cpu="1500m").node("full")]
    run = run_plugin(NodeResourcesFit(), make_pod("p").req(cpu="1"), nodes=nodes, pods=pods)
    assert run.feasible == ["free"]
    assert run.statuses["full"] == Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "NodeResourcesFit")
    # LeastAllocated, cpu and memory weighing 1 each: cpu (2000m - 1000m) * 100 / 2000m = 50; memory (the pod asks
    # none: 200Mi counts) (4096Mi - 200Mi) * 100 / 4096Mi = 95; (50 + 95) / 2 = 72
    assert run.scores == {"free": 72}


def test_pending_pods_go_through_the_priority_admission_of_the_clusters_classes() -> None:
    seen: list[int] = []

    class Spy(FilterPlugin):
        NAME = "Spy"

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            seen.append(pod.priority)
            return SUCCESS

    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 900}
    run_plugin(Spy(), make_pod("p").priority_class("high"), nodes=[make_node("a")], objects=[high])
    assert seen == [900]


def test_what_the_kit_refuses() -> None:
    class Permits(PermitPlugin):
        NAME = "Permits"

        def permit(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> PermitResult:
            return PermitResult()

    with pytest.raises(TypeError, match="Permits is not a PreFilter, Filter or Score plugin"):
        run_plugin(Permits(), make_pod("p"), nodes=[make_node("a")])
    with pytest.raises(ValueError, match="default/pending do not"):
        run_plugin(GpuReady(), make_pod("p"), nodes=[make_node("a")], pods=[make_pod("pending")])
    with pytest.raises(ValueError, match="default/nameless"):
        run_plugin(GpuReady(), make_pod("nameless").set("spec.priority", "high"), nodes=[make_node("a")])


# --------------------------------------------------------------------------- profiles


class ByName(QueueSortPlugin):
    NAME = "ByName"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.pod.name < b.pod.name


def test_profile_places_each_plugin_at_its_points_in_the_order_given() -> None:
    fit, gpu, empt, sort = NodeResourcesFit(), GpuReady(), Emptiest(), ByName()
    built = profile(gpu, fit, (empt, 3), sort)
    assert built.filters == (gpu, fit)
    assert built.scorers == ((fit, 1), (empt, 3))
    assert built.pre_filters == (fit,)
    assert built.queue_sort is sort and built.post_filters == ()
    assert [p.name for p in built.binders] == ["DefaultBinder"]
    assert isinstance(profile(gpu).queue_sort, PrioritySort)
    with pytest.raises(ValueError, match="two plugins are named GpuReady"):
        profile(gpu, GpuReady())
    assert profile(gpu, GpuReady(name="GpuReady2")).filter_names == ["GpuReady", "GpuReady2"]
    with pytest.raises(TypeError, match="has a weight but is not a ScorePlugin"):
        profile((gpu, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one QueueSort plugin"):
        profile(sort, ByName(name="Other"))


def test_policy_validates_as_the_operator_does_with_the_plugins_given(tmp_path: Path) -> None:
    spec = {"schedulerName": "gpus", "predicates": [{"name": "GpuReady"}], "priorities": [{"name": "Emptiest"}]}
    built = policy(spec, plugins=[GpuReady, Emptiest])
    assert built.scheduler_name == "gpus" and "GpuReady" in built.filter_names
    assert [name for name, _ in built.score_names] == ["Emptiest"]
    manifest = {"apiVersion": "scheduling.kopf.dev/v1alpha1", "kind": "SchedulingPolicy", "spec": spec}
    assert policy(manifest, plugins=[GpuReady, Emptiest]).filter_names == built.filter_names
    path = tmp_path / "policy.yaml"
    path.write_text(
        "apiVersion: scheduling.kopf.dev/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: gpus}\n"
        "spec:\n  schedulerName: gpus\n  predicates: [{name: GpuReady}]\n"
        "  priorities: [{name: Emptiest, weight: 1000001}]\n"
    )
    with pytest.raises(testing.PolicyError) as exc:
        policy(path, plugins=[GpuReady, Emptiest])
    assert [e.path for e in exc.value.errors] == ["spec.priorities[0].weight"]
    with pytest.raises(testing.PolicyError) as exc:
        policy(spec)  # not installed
    assert "no plugin of that name is installed" in exc.value.errors[0].message

    class NodeName(FilterPlugin):
        NAME = "NodeName"

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            return SUCCESS

    with pytest.raises(ValueError, match="the name 'NodeName' is already taken by built-in"):
        policy(spec, plugins=[NodeName])


# --------------------------------------------------------------------------- whole cycles


class Holds(ReservePlugin):
    """Reserves a node per pod and remembers what it was told, unreserves included."""

    NAME = "Holds"

    def __init__(self, args: Any = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.log: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        self.log.append(f"reserve {pod.name} {node_name}")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        self.log.append(f"unreserve {pod.name} {node_name}")


class Stamp(PreBindPlugin):
    """Writes the node on the pod before the bind; fails for pods labelled ``fail``."""

    NAME = "Stamp"

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        if "fail" in pod.labels:
            return error("no stamp today")
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        patch = {"metadata": {"annotations": {"example.com/node": node_name}}}
        answer = await client.request("PATCH", path, patch, content_type="application/merge-patch+json")
        return SUCCESS if answer.ok else error(answer.detail())


def test_a_whole_cycle_binds_through_the_plugins_and_the_api_server_shows_it() -> None:
    holds = Holds()
    nodes = [make_node("a").labels({GPU: "true"}).capacity(cpu="2", memory="4Gi", pods="10"), make_node("b")]
    cluster = Cluster(nodes=nodes, profile=profile(GpuReady(), NodeResourcesFit(), holds, Stamp()))
    placed = cluster.schedule(*(make_pod(f"t{i}").req(cpu="1") for i in range(3)), make_pod("bad").label(fail="x"))
    assert [(p.pod, p.node) for p in placed[:3]] == [("default/t0", "a"), ("default/t1", "a"), ("default/t2", None)]
    assert placed[2].message == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were not GPU-ready."
    assert placed[3].node is None and "running PreBind plugin 'Stamp': no stamp today" in placed[3].message
    assert cluster.pod("t0")["spec"]["nodeName"] == "a"
    assert cluster.pod("t0")["metadata"]["annotations"] == {"example.com/node": "a"}
    assert sorted(p.name for p in cluster.node("a").pods.values()) == ["t0", "t1"]
    assert ("POST", "/api/v1/namespaces/default/pods/t1/binding") in [(m, path) for m, path, _ in cluster.requests]
    assert holds.log[:2] == ["reserve t0 a", "reserve t1 a"]
    assert "unreserve bad b" not in holds.log and "unreserve bad a" in holds.log  # the failed binding undone
    with pytest.raises(KeyError):
        cluster.pod("nobody")
    later = cluster.schedule(make_pod("late").req(cpu="1"))  # the cluster goes on from where it was
    assert later[0].node is None


def test_the_default_profile_preempts_and_a_cluster_file_loads(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: only}\n"
        "status: {allocatable: {cpu: '1', memory: 1Gi, pods: '10'}, conditions: [{type: Ready, status: 'True'}]}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: low, namespace: default, uid: low-1}\n"
        "spec: {nodeName: only, priority: 0, containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n"
    )
    cluster = Cluster(objects=testing.read_manifests(tmp_path / "cluster.yaml"))
    (high,) = cluster.schedule(make_pod("high").req(cpu="1").priority(1000))
    assert high.victims == ("default/low",) and high.nominated_node == "only"
    assert high.node == "only"  # the victim gone, tried again and bound


def test_placements_are_the_simulations_and_a_seed_breaks_ties() -> None:
    nodes = [make_node(f"n{i}") for i in range(8)]
    spread = {
        Cluster(nodes=nodes, profile=profile(Emptiest()), seed=seed).schedule(make_pod("p"))[0].node
        for seed in range(20)
    }
    assert len(spread) > 1  # every node scores 100: the tie-break decides
    once = [Cluster(nodes=nodes, profile=profile(Emptiest()), seed=3).schedule(make_pod("p"))[0] for _ in range(2)]
    assert once[0] == dataclasses.replace(once[1]) and isinstance(once[0], testing.Placement)
