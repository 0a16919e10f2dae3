"""The offline simulator on YAML fixtures: placements, messages, policies, determinism, bad input."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from extender_server import ExtenderServer

from kopf_scheduler.cluster.bodies import node_body, pod_body
from kopf_scheduler.commands import main

EXAMPLES = Path(__file__).resolve().parents[2] / "operator" / "kopf_scheduler" / "sim" / "examples"
LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy" / "openshift-scheduler.json"


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["simulate", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def placements(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, object]]:
    rc, out, err = simulate(capsys, *args, "--output", "json")
    assert rc == 0, err
    return {p["pod"]: p for p in json.loads(out)["placements"]}


def test_readme_example(capsys: pytest.CaptureFixture[str]) -> None:
    got = placements(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"), "--pods", str(EXAMPLES / "pods.yaml"))
    assert got["default/needs-ssd"]["node"] == "node-a"  # the only ssd node
    assert got["default/trainer"]["node"] == "node-c"  # the only node with the gpu, tainted for it
    # node-a has 1 cpu free after db-0; node-b 2 cpu: web-1 goes to the least allocated one
    assert got["default/web-1"]["node"] in ("node-b", "node-c")
    # no node could ever hold 16 cpu and the taint is not tolerated: preemption cannot help anywhere
    assert got["default/too-big"] == {
        "pod": "default/too-big",
        "node": None,
        "message": "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        "nominatedNode": None,
        "victims": [],
    }


def test_readme_max_replicas_example(capsys: pytest.CaptureFixture[str]) -> None:
    args = (
        "--cluster",
        str(EXAMPLES / "cluster.yaml"),
        "--pods",
        str(EXAMPLES / "pods.yaml"),
        "--max-replicas",
        str(EXAMPLES / "web.yaml"),
    )
    rc, out, _ = simulate(capsys, *args, "--output", "json")
    # after the pods: node-a has 500m cpu and 3Gi free -> 1 copy (500m, 1Gi); node-b 1500m, 3.5Gi -> 3;
    # node-c is tainted
    assert rc == 0 and json.loads(out)["maxReplicas"] == {
        "pod": "default/web", "replicas": 4, "nodes": {"node-a": 1, "node-b": 3}, "limit": 0,
        "stoppedBy": "0/3 nodes are available: "
        "1 Insufficient memory, 1 node(s) had untolerated taint(s), 2 Insufficient cpu.",
    }  # fmt: skip


def test_table_output_has_utilisation(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = simulate(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"), "--pods", str(EXAMPLES / "pods.yaml"))
    assert rc == 0
    assert "CPU REQUESTED" in out and "3/4 pods scheduled, 1 unschedulable" in out


def write(tmp_path: Path, name: str, docs: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def node(name: str, cpu: str = "4", *, pods: str = "110", **labels: str) -> dict:
    return node_body(name).hostname().labels(labels).allocatable(cpu=cpu, memory="8Gi", pods=pods).ready().obj()


def pod(name: str, cpu: str = "1", *, memory: str = "1Gi", **spec: object) -> dict:
    """A pod of namespace ns, one container requesting `cpu` and `memory`; `spec` sets its other fields."""
    body = pod_body(name, "ns").container("c", "x", cpu=cpu, memory=memory)
    for field, value in spec.items():
        body.set(f"spec.{field}", value)
    return body.obj()


def test_each_placement_counts_for_the_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="2")])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}") for i in range(5)])
    got = placements(capsys, "--cluster", cluster, "--pods", pods)
    nodes = [got[f"ns/p{i}"]["node"] for i in range(5)]
    assert sorted(n for n in nodes if n) == ["a", "a", "b", "b"]
    # the nodes are full of pods of the same priority (0): nothing to preempt
    assert got["ns/p4"]["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_bin_packing_policy_fills_one_node_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="8"), node("b", cpu="8")])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}") for i in range(4)])
    policy = write(
        tmp_path,
        "policy.yaml",
        [
            {
                "apiVersion": "scheduling.kopf.dev/v1alpha1",
                "kind": "SchedulingPolicy",
                "metadata": {"name": "pack"},
                "spec": {
                    "schedulerName": "kopf-scheduler",
                    "predicates": [{"name": "PodFitsResources"}],
                    "priorities": [{"name": "MostRequestedPriority", "weight": 1}],
                },
            }
        ],
    )
    got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", policy)
    assert len({got[f"ns/p{i}"]["node"] for i in range(4)}) == 1


def test_legacy_policy_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", region="r1", zone="z1"), node("b", region="r1", zone="z2")])
    pods = write(tmp_path, "p.yaml", [pod("p0")])
    got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", str(LEGACY), "--without-extenders")
    assert got["ns/p0"]["node"] in ("a", "b")


def test_extenders_of_the_policy_are_called(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    routes = {
        "filter": lambda args: (
            200,
            {"NodeNames": [n for n in args["NodeNames"] if n != "a"], "FailedNodes": {"a": "no licence on a"}},
        ),
        "prioritize": lambda args: (200, [{"Host": n, "Score": 10 if n == "c" else 0} for n in args["NodeNames"]]),
    }
    cluster = write(tmp_path, "c.yaml", [node("a"), node("b"), node("c")])
    pods = write(tmp_path, "p.yaml", [pod("p0"), pod("big", cpu="8")])
    with ExtenderServer(routes) as ext:
        extender = {"urlPrefix": ext.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 100}
        spec = {"schedulerName": "kopf-scheduler", "extenders": [{**extender, "nodeCacheCapable": True}]}
        policy = write(tmp_path, "policy.yaml", [{"kind": "SchedulingPolicy", "metadata": {"name": "x"}, "spec": spec}])
        got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", policy)
    assert got["ns/p0"]["node"] == "c"  # 10 * 10 * 100 outweighs any plugin score
    assert ext.verbs() == ["filter", "prioritize"], "the pod that fits no node never reaches the extender"
    assert got["ns/big"]["message"] == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_same_seed_same_placements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node(f"n{i}") for i in range(10)])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}", cpu="100m") for i in range(20)])
    first = placements(capsys, "--cluster", cluster, "--pods", pods, "--seed", "3")
    again = placements(capsys, "--cluster", cluster, "--pods", pods, "--seed", "3")
    assert first == again


def test_kind_list_and_bound_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bound = pod("running", cpu="3", nodeName="a")
    cluster = write(
        tmp_path, "c.yaml", [{"kind": "List", "items": [node("a"), node("b"), bound, {"kind": "ConfigMap"}]}]
    )
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="2")])
    assert placements(capsys, "--cluster", cluster, "--pods", pods)["ns/p0"]["node"] == "b"


def test_a_document_that_is_not_a_pod_stops_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [node("a")])
    rc, _, err = simulate(capsys, "--cluster", cluster, "--pods", pods)
    assert rc == 2 and "expected Pod" in err


@pytest.mark.parametrize(
    ("bad", "key", "needle"),
    [
        pytest.param(
            pod("bad", cpu="lots"),
            "ns/bad",
            "spec.containers[0].resources.requests.cpu",
            id="a bad quantity names the field",
        ),
        pytest.param(
            pod("neg", cpu="-2"), "ns/neg", "requests.cpu: must be greater than or equal to 0", id="a negative request"
        ),
        pytest.param(
            {"kind": "Pod", "metadata": "oops", "spec": {}},
            "document 2",
            "pod.metadata: expected an object",
            id="no readable name: the document's place",
        ),
        pytest.param(
            pod("ghost", priorityClassName="nope"),
            "ns/ghost",
            "no PriorityClass with name nope was found",
            id="a pod the API server would refuse",
        ),
    ],
)
def test_an_unreadable_pod_is_reported_not_placed_and_the_rest_are_placed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict, key: str, needle: str
) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [pod("first"), bad, pod("last")])
    rc, out, err = simulate(capsys, "--cluster", cluster, "--pods", pods, "--output", "json")
    assert rc == 1, err  # the run completes, and says that not every pod could be read
    got = json.loads(out)["placements"]
    assert [p["pod"] for p in got] == ["ns/first", key, "ns/last"]  # file order kept
    assert got[0]["node"] == got[2]["node"] == "a"
    assert (
        got[1]["node"] is None and got[1]["message"].startswith("cannot read the pod: ") and needle in got[1]["message"]
    ), got[1]
    assert "1 pod(s) could not be read" in err


def test_the_table_shows_an_unreadable_pod_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [pod("ok"), pod("bad", cpu="lots")])
    rc, out, _ = simulate(capsys, "--cluster", cluster, "--pods", pods)
    assert rc == 1
    row = next(line for line in out.splitlines() if line.startswith("ns/bad"))
    assert "<none>" in row and "cannot read the pod: " in row
    assert "1/2 pods scheduled, 1 unschedulable" in out


def test_invalid_policy_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [pod("p")])
    policy = write(
        tmp_path,
        "policy.yaml",
        [
            {
                "kind": "SchedulingPolicy",
                "spec": {"schedulerName": "x", "priorities": [{"name": "LeastRequestedPrority", "weight": 1}]},
            }
        ],
    )
    rc, _, err = simulate(capsys, "--cluster", cluster, "--pods", pods, "--policy", policy)
    assert rc == 2 and "spec.priorities[0].name" in err and "LeastRequestedPriority" in err


def _least_allocated_policy(tmp_path: Path) -> str:
    return write(
        tmp_path,
        "policy.yaml",
        [
            {
                "kind": "SchedulingPolicy",
                "spec": {
                    "schedulerName": "x",
                    "predicates": [{"name": "PodFitsResources"}, {"name": "PodToleratesNodeTaints"}],
                    "priorities": [{"name": "LeastRequestedPriority", "weight": 2}],
                },
            }
        ],
    )


def test_explain_json_gives_every_node_with_raw_and_normalised_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tainted = node("c")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4"), tainted])
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="1")])
    got = placements(
        capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain"
    )["ns/p0"]
    (least,) = {part["plugin"] for v in got["explain"]["nodes"] for part in v.get("scores", ())}
    assert got["node"] == "b"
    assert got["explain"] == {
        "pod": "ns/p0", "outcome": "scheduled", "node": "b", "message": "", "schedulerName": "x", "attempts": 0,
        "ageSeconds": None, "numNodes": 3, "evaluatedNodes": 3, "preFilter": "", "notEvaluated": [], "preemption": None,
        "hinted": False,
        "nodes": [
            # b: cpu (4-1)/4 -> 75, memory (8-1)/8 -> 87; (75+87)/2 = 81 (no normalisation: raw = score);
            # x weight 2 = 162
            {"node": "b", "result": "chosen", "total": 162,
             "scores": [{"plugin": least, "raw": 81, "score": 81, "weight": 2, "weighted": 162}]},
            # a: cpu (2-1)/2 -> 50, memory 87; (50+87)/2 = 68; x2 = 136
            {"node": "a", "result": "feasible", "total": 136,
             "scores": [{"plugin": least, "raw": 68, "score": 68, "weight": 2, "weighted": 136}]},
            {"node": "c", "result": "unresolvable", "plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
             "reasons": ["node(s) had untolerated taint(s)"]},
        ],
    }  # fmt: skip


def test_explain_scores_a_single_feasible_node_and_explains_an_unschedulable_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    pods = write(tmp_path, "p.yaml", [pod("fits-b-only", cpu="3"), pod("too-big", cpu="8")])
    got = placements(
        capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain"
    )
    one = got["ns/fits-b-only"]["explain"]
    # scored although alone: b cpu (4-3)/4 -> 25, memory (8-1)/8 -> 87; (25+87)/2 = 56; x2 = 112
    assert [(v["node"], v["result"], v.get("total")) for v in one["nodes"]] == [
        ("b", "chosen", 112),
        ("a", "unresolvable", None),
    ]
    big = got["ns/too-big"]
    assert big["node"] is None and big["explain"]["outcome"] == "unschedulable"
    # 8 cpu exceed both nodes' allocatable: no preemption could help (upstream fit.go), hence Unresolvable
    assert {(v["node"], v["plugin"], v["code"]) for v in big["explain"]["nodes"]} == {
        ("a", "NodeResourcesFit", "UnschedulableAndUnresolvable"),
        ("b", "NodeResourcesFit", "UnschedulableAndUnresolvable"),
    }
    assert big["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert big["explain"]["message"] == big["message"]


def test_explain_table_prints_each_decision_in_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="1"), pod("p1", cpu="1")])
    rc, out, _ = simulate(
        capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain"
    )
    assert rc == 0
    assert (
        "pod ns/p0: scheduled to b\n"
        "  b: total 162 (NodeResourcesLeastAllocated 81x2)\n"
        "  a: total 136 (NodeResourcesLeastAllocated 68x2)"
    ) in out
    assert "pod ns/p1: scheduled to" in out


def test_explain_one_pod_prints_its_whole_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="1"), pod("p1", cpu="1")])
    args = ("--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain", "ns/p1")
    rc, out, _ = simulate(capsys, *args)
    assert rc == 0 and "pod ns/p0:" not in out
    # after p0 on b: b cpu (4-2)/4 -> 50, memory (8-2)/8 -> 75, mean 62; a 68 as before
    assert out.split("\n\n")[1:3] == [
        "pod ns/p1: scheduled to a\n  scheduler x\n  2 nodes: 2 feasible, 0 rejected",
        "NODE  RESULT    TOTAL  PLUGIN                       RAW  SCORE  WEIGHT  WEIGHTED\n"
        "a     chosen      136  NodeResourcesLeastAllocated   68     68       2       136\n"
        "b     feasible    124  NodeResourcesLeastAllocated   62     62       2       124",
    ]
    explained = placements(capsys, *args)
    assert "explain" not in explained["ns/p0"] and explained["ns/p1"]["explain"]["node"] == "a"
    rc, _, err = simulate(capsys, "--cluster", cluster, "--pods", pods, "--explain", "ns/nope")
    assert rc == 2 and "--explain ns/nope: no such pod among the 2 pending pod(s) simulated" in err


def test_without_explain_there_is_no_explanation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [pod("p0")])
    assert "explain" not in placements(capsys, "--cluster", cluster, "--pods", pods)["ns/p0"]


# --------------------------------------------------------------------------- priorities and preemption


def test_preemption_example(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--cluster", str(EXAMPLES / "preemption-cluster.yaml"), "--pods", str(EXAMPLES / "preemption-pods.yaml"))
    got = placements(capsys, *args)
    # both nodes are full of batch (100) pods; db-0's PDB allows no disruption, so report goes
    assert got["default/api"] == {
        "pod": "default/api",
        "node": "node-b",
        "message": "",
        "nominatedNode": "node-b",
        "victims": ["default/report"],
    }
    assert got["default/batch-2"]["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert (
        got["default/patient"]["message"]
        == "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    rc, out, _ = simulate(capsys, *args)
    assert rc == 0
    assert out.splitlines()[:2] == [
        "POD              NODE    PREEMPTED       MESSAGE",
        "default/api      node-b  default/report",
    ]
    assert "1/3 pods scheduled, 2 unschedulable, 1 preempted" in out


def priority_class(name: str, value: int, **extra: object) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def full_cluster(tmp_path: Path, *extra: dict) -> str:
    """One 2-cpu node, full with a pod of priority 50."""
    return write(tmp_path, "c.yaml", [*extra, node("a", cpu="2"), pod("resident", cpu="2", nodeName="a", priority=50)])


@pytest.mark.parametrize(
    ("classes", "spec", "preempts"),
    [
        pytest.param(
            [priority_class("high", 100)], {"priorityClassName": "high"}, True, id="the class's value (100) beats 50"
        ),
        pytest.param(
            [priority_class("low", 10)], {"priorityClassName": "low"}, False, id="the class's value (10) does not"
        ),
        pytest.param(
            [], {"priorityClassName": "system-cluster-critical"}, True,
            id="the system classes exist without being listed",
        ),
        pytest.param(
            [priority_class("high", 100)], {"priorityClassName": "high", "priority": 7}, False,
            id="a pod carrying spec.priority keeps it",
        ),
        pytest.param(
            [priority_class("d", 1000, globalDefault=True), priority_class("e", 60, globalDefault=True)], {}, True,
            id="no class named: the lowest global default (60)",
        ),
        pytest.param([], {}, False, id="no class named and no global default: 0"),
        pytest.param(
            [priority_class("high", 100, preemptionPolicy="Never")], {"priorityClassName": "high"}, False,
            id="the class's preemptionPolicy Never",
        ),
    ],
)  # fmt: skip
def test_priority_classes_stand_in_for_admission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], classes: list[dict], spec: dict, preempts: bool
) -> None:
    cluster = full_cluster(tmp_path, *classes)
    pods = write(tmp_path, "p.yaml", [pod("new", cpu="2", **spec)])
    got = placements(capsys, "--cluster", cluster, "--pods", pods)["ns/new"]
    assert (got["node"], got["victims"]) == (("a", ["ns/resident"]) if preempts else (None, []))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"priorityClassName": "nope"},
            "pod ns/new: no PriorityClass with name nope was found",
            id="an unknown class",
        ),
        pytest.param(
            {"preemptionPolicy": "Never"},
            "pod ns/new: the string value of PreemptionPolicy (Never) must not be provided in pod spec; "
            "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
            id="a preemptionPolicy of its own (Never comes from a class)",
        ),
    ],
)
def test_pods_the_api_server_would_refuse_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict, message: str
) -> None:
    pods = write(tmp_path, "p.yaml", [pod("new", **spec)])
    rc, out, err = simulate(capsys, "--cluster", full_cluster(tmp_path), "--pods", pods, "--output", "json")
    (placement,) = json.loads(out)["placements"]
    assert rc == 1 and placement["node"] is None and message in placement["message"], (out, err)


# --------------------------------------------------------------------------- gangs


def pod_group(kind: str, name: str, size: int) -> dict:
    if kind == "workload":
        return {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
        }
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": size},
    }


def member(kind: str, name: str, group: str) -> dict:
    body = pod(name, cpu="1")
    if kind == "workload":
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
    else:
        body["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    return body


@pytest.mark.parametrize("kind", ["workload", "coscheduling"])
@pytest.mark.parametrize(
    ("nodes", "placed"),
    [pytest.param(4, 4, id="a gang of 4 on 4 nodes binds all 4"), pytest.param(3, 0, id="3 of 4 fit: none")],
)
def test_gangs_are_placed_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, nodes: int, placed: int
) -> None:
    # nodes of 1 cpu, members of 1 cpu; a pod outside the gang comes last
    cluster = write(tmp_path, "c.yaml", [pod_group(kind, "train", 4), *(node(f"n{i}", cpu="1") for i in range(nodes))])
    pods = write(tmp_path, "p.yaml", [*(member(kind, f"train-{i}", "train") for i in range(4))])
    got = placements(capsys, "--cluster", cluster, "--pods", pods)
    members = [got[f"ns/train-{i}"] for i in range(4)]
    assert sum(1 for m in members if m["node"]) == placed
    if not placed:
        # coscheduling: the 4th fits nowhere and its PostFilter rejects the 3 that waited (scheduler-plugins'
        # texts); the Workload API decides the gang in one pod-group cycle (nobody waits), with upstream's
        # PlacementFeasible text
        gang = (
            "optimistic rejection in PostFilter"
            if kind == "coscheduling"
            else "pod group is unschedulable, minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )
        unfit = (
            "0/3 nodes are available: 3 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        )
        if kind == "coscheduling":
            unfit += ", PodGroup ns/train gets rejected due to Pod train-3 is unschedulable even after PostFilter"
        else:  # no preemption for one member in a pod-group cycle (upstream runs the pod group's instead)
            unfit = "0/3 nodes are available: 3 Insufficient cpu."
        assert sorted(m["message"] for m in members) == sorted([gang, gang, gang, unfit])  # type: ignore[type-var]


def test_the_gang_example(capsys: pytest.CaptureFixture[str]) -> None:
    got = placements(
        capsys, "--cluster", str(EXAMPLES / "gang-cluster.yaml"), "--pods", str(EXAMPLES / "gang-pods.yaml")
    )
    # train (3 x 2 cpu, minCount 3) spreads over the three 4-cpu nodes; web (1 cpu) takes one more
    assert sorted(got[f"default/train-{i}"]["node"] for i in range(3)) == ["node-a", "node-b", "node-c"]  # type: ignore[type-var]
    assert got["default/web"]["node"]
    # 2 + 2 + 1 cpu are left: two etl members (2 cpu) fit, the third nowhere: its PostFilter turns the gang
    # down at once (the two that waited are released), and the fourth reads the same: none of etl is placed
    etl = [got[f"default/etl-{i}"] for i in range(4)]
    assert all(m["node"] is None for m in etl)
    assert [m["message"] for m in etl[:2]] == ["optimistic rejection in PostFilter"] * 2
    assert str(etl[2]["message"]).endswith("gets rejected due to Pod etl-2 is unschedulable even after PostFilter")


def test_the_gang_preemption_example(capsys: pytest.CaptureFixture[str]) -> None:
    args = (
        "--cluster",
        str(EXAMPLES / "gang-preemption-cluster.yaml"),
        "--pods",
        str(EXAMPLES / "gang-preemption-pods.yaml"),
    )
    got = placements(capsys, *args)
    # train wants one GPU on each full node: etl (disrupted "all") goes whole, sweep ("single") gives the member
    # that started last; both members report the gang's victims, each nominated where it then lands
    victims = ["default/etl-0", "default/etl-1", "default/sweep-1"]
    assert {k: (p["node"], p["nominatedNode"], p["victims"]) for k, p in got.items()} == {
        "default/train-0": ("gpu-a", "gpu-a", victims),
        "default/train-1": ("gpu-b", "gpu-b", victims),
    }
    rc, out, _ = simulate(capsys, *args)
    assert rc == 0 and "2/2 pods scheduled, 0 unschedulable, 3 preempted" in out  # each victim once


# --------------------------------------------------------------------------- capacity: --max-replicas


def template(cpu: str = "1", memory: str = "1Gi", **spec: object) -> dict:
    return pod("web", cpu, memory=memory, **spec)


def small_node(name: str, pods: str) -> dict:
    return node(name, pods=pods)


@pytest.mark.parametrize(
    ("cluster", "pending", "tmpl", "limit", "replicas", "nodes", "stopped_by"),
    [
        pytest.param(
            [node("a", cpu="2"), node("b", cpu="4")], [], template(cpu="1"), 0, 6, {"a": 2, "b": 4},
            "0/2 nodes are available: 2 Insufficient cpu.", id="cpu runs out first: 2/1 + 4/1 = 6",
        ),
        pytest.param(
            [node("a"), node("b")], [], template(cpu="500m", memory="3Gi"), 0, 4, {"a": 2, "b": 2},
            "0/2 nodes are available: 2 Insufficient memory.", id="memory runs out first: 8Gi // 3Gi = 2 per node",
        ),
        pytest.param(
            [small_node("a", pods="3"), pod("resident", cpu="100m", nodeName="a")], [], template(cpu="100m"),
            0, 2, {"a": 2},
            "0/1 nodes are available: 1 Too many pods.", id="the pod count runs out: 3 allowed - 1 running = 2",
        ),
        pytest.param(
            [node("a", cpu="4"), pod("resident", cpu="3", nodeName="a")], [], template(cpu="1"), 0, 1, {"a": 1},
            "0/1 nodes are available: 1 Insufficient cpu.", id="bound pods take their room: (4 - 3) / 1 = 1",
        ),
        pytest.param(
            [node("a", cpu="2", disk="ssd"), node("b", cpu="4")], [], template(cpu="1", nodeSelector={"disk": "ssd"}),
            0, 2, {"a": 2},
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.",
            id="a node selector leaves one node: 2/1 = 2",
        ),
        pytest.param(
            [node("a", cpu="4")], [pod("p0", cpu="1"), pod("p1", cpu="1")], template(cpu="1"), 0, 2, {"a": 2},
            "0/1 nodes are available: 1 Insufficient cpu.", id="the --pods land first: (4 - 2) / 1 = 2",
        ),
        pytest.param(
            [node("a", cpu="2"), node("b", cpu="4")], [], template(cpu="1"), 3, 3, None, "",
            id="--max-limit 3 stops the count at 3",
        ),
        pytest.param(
            [node("a", cpu="2"), pod("resident", cpu="2", nodeName="a", priority=0)], [],
            template(cpu="1", priority=1000), 0, 0, {},
            "0/1 nodes are available: 1 Insufficient cpu.", id="copies never preempt: 0, and no preemption tail",
        ),
    ],
)  # fmt: skip
def test_max_replicas_counts_the_copies_that_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
    cluster: list[dict], pending: list[dict], tmpl: dict, limit: int, replicas: int, nodes: dict[str, int] | None,
    stopped_by: str,
) -> None:  # fmt: skip
    args = [
        "--cluster",
        write(tmp_path, "c.yaml", cluster),
        "--max-replicas",
        write(tmp_path, "web.yaml", [tmpl]),
        "--max-limit",
        str(limit),
    ]
    if pending:
        args += ["--pods", write(tmp_path, "p.yaml", pending)]
    rc, out, err = simulate(capsys, *args, "--output", "json")
    assert rc == 0, err
    got = json.loads(out)["maxReplicas"]
    assert (got["pod"], got["replicas"], got["stoppedBy"], got["limit"]) == ("ns/web", replicas, stopped_by, limit)
    if nodes is not None:
        assert got["nodes"] == nodes
    else:
        assert sum(got["nodes"].values()) == replicas


def test_max_replicas_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    rc, out, _ = simulate(
        capsys, "--cluster", cluster, "--max-replicas", write(tmp_path, "web.yaml", [template(cpu="1")])
    )
    assert rc == 0
    assert out.split("\n\n")[0] == "\n".join(
        [
            "6 copies of ns/web fit",
            "NODE  COPIES",
            "a          2",
            "b          4",
            "the next copy does not fit: 0/2 nodes are available: 2 Insufficient cpu.",
        ]
    )


@pytest.mark.parametrize(
    ("docs", "needle"),
    [
        pytest.param([template(), template()], "expected one pod, not bound to a node; found 2 pod(s)", id="two pods"),
        pytest.param(
            [template(nodeName="a")], "expected one pod, not bound to a node; it is bound to a", id="a bound pod"
        ),
        pytest.param([template(cpu="lots")], "cannot read the pod:", id="an unreadable pod"),
    ],
)
def test_max_replicas_wants_one_unbound_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: list[dict], needle: str
) -> None:
    rc, _, err = simulate(
        capsys, "--cluster", write(tmp_path, "c.yaml", [node("a")]), "--max-replicas", write(tmp_path, "web.yaml", docs)
    )
    assert rc == 2 and needle in err


def test_without_pods_the_clusters_own_pending_pods_of_the_scheduler_name_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = write(
        tmp_path, "c.yaml",
        [
            node("a"), pod("ours", schedulerName="kopf-scheduler"), pod("theirs"), pod("other", schedulerName="other"),
            pod("bound", nodeName="a"),
        ],
    )  # fmt: skip
    assert list(placements(capsys, "--cluster", cluster)) == ["ns/ours"]  # the default policy's schedulerName
    assert list(placements(capsys, "--cluster", cluster, "--scheduler-name", "default-scheduler")) == ["ns/theirs"]
    rc, out, _ = simulate(capsys, "--cluster", cluster, "--scheduler-name", "other")
    assert rc == 0 and f"(1 pending pod(s) with schedulerName other in {cluster})" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        pytest.param(["--max-limit", "-1"], "--max-limit must be 0 (no limit) or more", id="a negative limit"),
        pytest.param(
            ["--max-limit", "3"], "--max-limit counts --max-replicas copies", id="a limit without --max-replicas"
        ),
        pytest.param(
            ["--kubeconfig", "k.yaml"],
            "--kubeconfig is read with --from-cluster only",
            id="a kubeconfig for a file cluster",
        ),
    ],
)
def test_options_that_would_be_ignored_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    rc, _, err = simulate(capsys, "--cluster", write(tmp_path, "c.yaml", [node("a")]), *extra)
    assert rc == 2 and needle in err


def test_from_cluster_says_what_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fast_retries: None
) -> None:
    rc, _, err = simulate(capsys, "--from-cluster", "--kubeconfig", str(tmp_path / "missing"))
    assert rc == 2 and f"cannot load kubeconfig {tmp_path / 'missing'}" in err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    rc, _, err = simulate(capsys, "--from-cluster", "--kubeconfig", str(kubeconfig))
    assert rc == 2 and f"cannot list Node objects from http://127.0.0.1:{port}" in err
