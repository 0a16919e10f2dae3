"""The offline simulator on YAML fixtures: placements, messages, policies, determinism, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from extender_server import ExtenderServer

from kopf_scheduler.cli import main

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


def test_table_output_has_utilisation(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = simulate(capsys, "--cluster", str(EXAMPLES / "cluster.yaml"), "--pods", str(EXAMPLES / "pods.yaml"))
    assert rc == 0
    assert "CPU REQUESTED" in out and "3/4 pods scheduled, 1 unschedulable" in out


def write(tmp_path: Path, name: str, docs: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def node(name: str, cpu: str = "4", **labels: str) -> dict:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(name: str, cpu: str = "1", **spec: object) -> dict:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec},
    }


def test_each_placement_counts_for_the_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="2")])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}") for i in range(5)])
    got = placements(capsys, "--cluster", cluster, "--pods", pods)
    nodes = [got[f"ns/p{i}"]["node"] for i in range(5)]
    assert sorted(n for n in nodes if n) == ["a", "a", "b", "b"]
    # the nodes are full of pods of the same priority (0): nothing to preempt
    assert got["ns/p4"]["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_bin_packing_policy_fills_one_node_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="8"), node("b", cpu="8")])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}") for i in range(4)])
    policy = write(
        tmp_path,
        "policy.yaml",
        [{"apiVersion": "scheduling.kopf.dev/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": "pack"},
          "spec": {"schedulerName": "kopf-scheduler", "predicates": [{"name": "PodFitsResources"}],
                   "priorities": [{"name": "MostRequestedPriority", "weight": 1}]}}],
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
        "filter": lambda args: (200, {"NodeNames": [n for n in args["NodeNames"] if n != "a"], "FailedNodes": {"a": "no licence on a"}}),
        "prioritize": lambda args: (200, [{"Host": n, "Score": 10 if n == "c" else 0} for n in args["NodeNames"]]),
    }
    cluster = write(tmp_path, "c.yaml", [node("a"), node("b"), node("c")])
    pods = write(tmp_path, "p.yaml", [pod("p0"), pod("big", cpu="8")])
    with ExtenderServer(routes) as ext:
        spec = {"schedulerName": "kopf-scheduler", "extenders": [
            {"urlPrefix": ext.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 100, "nodeCacheCapable": True}]}  # fmt: skip
        policy = write(tmp_path, "policy.yaml", [{"kind": "SchedulingPolicy", "metadata": {"name": "x"}, "spec": spec}])
        got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", policy)
    assert got["ns/p0"]["node"] == "c"  # 10 * 10 * 100 outweighs any plugin score
    assert ext.verbs() == ["filter", "prioritize"], "the pod that fits no node never reaches the extender"
    assert got["ns/big"]["message"] == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_same_seed_same_placements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node(f"n{i}") for i in range(10)])
    pods = write(tmp_path, "p.yaml", [pod(f"p{i}", cpu="100m") for i in range(20)])
    first = placements(capsys, "--cluster", cluster, "--pods", pods, "--seed", "3")
    again = placements(capsys, "--cluster", cluster, "--pods", pods, "--seed", "3")
    assert first == again


def test_kind_list_and_bound_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bound = pod("running", cpu="3", nodeName="a")
    cluster = write(tmp_path, "c.yaml", [{"kind": "List", "items": [node("a"), node("b"), bound, {"kind": "ConfigMap"}]}])
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
        pytest.param(pod("bad", cpu="lots"), "ns/bad", "spec.containers[0].resources.requests.cpu", id="a bad quantity names the field"),
        pytest.param(pod("neg", cpu="-2"), "ns/neg", "requests.cpu: must be greater than or equal to 0", id="a negative request"),
        pytest.param({"kind": "Pod", "metadata": "oops", "spec": {}}, "document 2", "pod.metadata: expected an object", id="no readable name: the document's place"),
        pytest.param(pod("ghost", priorityClassName="nope"), "ns/ghost", "no PriorityClass with name nope was found", id="a pod the API server would refuse"),
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
    assert got[1]["node"] is None and got[1]["message"].startswith("cannot read the pod: ") and needle in got[1]["message"], got[1]
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
    policy = write(tmp_path, "policy.yaml", [{"kind": "SchedulingPolicy", "spec": {"schedulerName": "x", "priorities": [{"name": "LeastRequestedPrority", "weight": 1}]}}])
    rc, _, err = simulate(capsys, "--cluster", cluster, "--pods", pods, "--policy", policy)
    assert rc == 2 and "spec.priorities[0].name" in err and "LeastRequestedPriority" in err


def _least_allocated_policy(tmp_path: Path) -> str:
    return write(
        tmp_path,
        "policy.yaml",
        [{"kind": "SchedulingPolicy", "spec": {"schedulerName": "x", "predicates": [{"name": "PodFitsResources"}, {"name": "PodToleratesNodeTaints"}],
                                               "priorities": [{"name": "LeastRequestedPriority", "weight": 2}]}}],
    )


def test_explain_json_gives_feasible_filtered_and_per_plugin_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tainted = node("c")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4"), tainted])
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="1")])
    got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain")["ns/p0"]
    (least,) = {part["plugin"] for s in got["explain"]["scores"] for part in s["plugins"]}
    assert got["node"] == "b"
    assert got["explain"] == {
        "feasible": ["a", "b"],
        "filtered": [{"node": "c", "plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                      "reasons": ["node(s) had untolerated taint(s)"]}],
        "preFilter": None,
        "scores": [
            # b: cpu (4-1)/4 -> 75, memory (8-1)/8 -> 87; (75+87)/2 = 81; x weight 2 = 162
            {"node": "b", "total": 162, "plugins": [{"plugin": least, "score": 81, "weight": 2}]},
            # a: cpu (2-1)/2 -> 50, memory 87; (50+87)/2 = 68; x2 = 136
            {"node": "a", "total": 136, "plugins": [{"plugin": least, "score": 68, "weight": 2}]},
        ],
    }


def test_explain_scores_a_single_feasible_node_and_explains_an_unschedulable_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    pods = write(tmp_path, "p.yaml", [pod("fits-b-only", cpu="3"), pod("too-big", cpu="8")])
    got = placements(capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain")
    one = got["ns/fits-b-only"]["explain"]
    assert one["feasible"] == ["b"] and [s["node"] for s in one["scores"]] == ["b"]  # scored although alone
    big = got["ns/too-big"]
    assert big["node"] is None and big["explain"]["feasible"] == [] and big["explain"]["scores"] == []
    # 8 cpu exceed both nodes' allocatable: no preemption could help (upstream fit.go), hence Unresolvable
    assert {(f["node"], f["plugin"], f["code"]) for f in big["explain"]["filtered"]} == {
        ("a", "NodeResourcesFit", "UnschedulableAndUnresolvable"),
        ("b", "NodeResourcesFit", "UnschedulableAndUnresolvable"),
    }
    assert big["message"] == "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def test_explain_table_prints_each_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a", cpu="2"), node("b", cpu="4")])
    pods = write(tmp_path, "p.yaml", [pod("p0", cpu="1")])
    rc, out, _ = simulate(capsys, "--cluster", cluster, "--pods", pods, "--policy", _least_allocated_policy(tmp_path), "--explain")
    assert rc == 0
    assert "pod ns/p0: scheduled to b" in out and "b: total 162" in out and "a: total 136" in out


def test_without_explain_there_is_no_explanation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "c.yaml", [node("a")])
    pods = write(tmp_path, "p.yaml", [pod("p0")])
    assert "explain" not in placements(capsys, "--cluster", cluster, "--pods", pods)["ns/p0"]

# --------------------------------------------------------------------------- priorities and preemption


def test_preemption_example(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--cluster", str(EXAMPLES / "preemption-cluster.yaml"), "--pods", str(EXAMPLES / "preemption-pods.yaml"))
    got = placements(capsys, *args)
    # both nodes are full of batch (100) pods; db-0's PDB allows no disruption, so report goes
    assert got["default/api"] == {"pod": "default/api", "node": "node-b", "message": "", "nominatedNode": "node-b", "victims": ["default/report"]}
    assert got["default/batch-2"]["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert got["default/patient"]["message"] == "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    rc, out, _ = simulate(capsys, *args)
    assert rc == 0
    assert out.splitlines()[:2] == ["POD              NODE    PREEMPTED       MESSAGE", "default/api      node-b  default/report"]
    assert "1/3 pods scheduled, 2 unschedulable, 1 preempted" in out


def priority_class(name: str, value: int, **extra: object) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, **extra}


def full_cluster(tmp_path: Path, *extra: dict) -> str:
    """One 2-cpu node, full with a pod of priority 50."""
    return write(tmp_path, "c.yaml", [*extra, node("a", cpu="2"), pod("resident", cpu="2", nodeName="a", priority=50)])


@pytest.mark.parametrize(
    ("classes", "spec", "preempts"),
    [
        pytest.param([priority_class("high", 100)], {"priorityClassName": "high"}, True, id="the class's value (100) beats 50"),
        pytest.param([priority_class("low", 10)], {"priorityClassName": "low"}, False, id="the class's value (10) does not"),
        pytest.param([], {"priorityClassName": "system-cluster-critical"}, True, id="the system classes exist without being listed"),
        pytest.param([priority_class("high", 100)], {"priorityClassName": "high", "priority": 7}, False, id="a pod carrying spec.priority keeps it"),
        pytest.param([priority_class("d", 1000, globalDefault=True), priority_class("e", 60, globalDefault=True)], {}, True,
                     id="no class named: the lowest global default (60)"),
        pytest.param([], {}, False, id="no class named and no global default: 0"),
        pytest.param([priority_class("high", 100, preemptionPolicy="Never")], {"priorityClassName": "high"}, False,
                     id="the class's preemptionPolicy Never"),
    ],
)  # fmt: skip
def test_priority_classes_stand_in_for_admission(tmp_path: Path, capsys: pytest.CaptureFixture[str], classes: list[dict], spec: dict, preempts: bool) -> None:
    cluster = full_cluster(tmp_path, *classes)
    pods = write(tmp_path, "p.yaml", [pod("new", cpu="2", **spec)])
    got = placements(capsys, "--cluster", cluster, "--pods", pods)["ns/new"]
    assert (got["node"], got["victims"]) == (("a", ["ns/resident"]) if preempts else (None, []))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"priorityClassName": "nope"}, "pod ns/new: no PriorityClass with name nope was found", id="an unknown class"),
        pytest.param(
            {"preemptionPolicy": "Never"},
            "pod ns/new: the string value of PreemptionPolicy (Never) must not be provided in pod spec; "
            "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
            id="a preemptionPolicy of its own (Never comes from a class)",
        ),
    ],
)
def test_pods_the_api_server_would_refuse_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict, message: str) -> None:
    pods = write(tmp_path, "p.yaml", [pod("new", **spec)])
    rc, out, err = simulate(capsys, "--cluster", full_cluster(tmp_path), "--pods", pods, "--output", "json")
    (placement,) = json.loads(out)["placements"]
    assert rc == 1 and placement["node"] is None and message in placement["message"], (out, err)

