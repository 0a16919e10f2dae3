"""KubeSchedulerConfiguration v1 -> SchedulingPolicy: upstream's defaults, merge and MultiPoint rules,
pluginConfig, refusals at their field paths, the round trip, and the two commands that use it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.cluster.bodies import node_body, pod_body
from kopf_scheduler.commands import main
from kopf_scheduler.core.config import policy
from kopf_scheduler.core.config import scheduler_config as sc
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.plugins.inter_pod_affinity import InterPodAffinity
from kopf_scheduler.core.plugins.node_affinity import NodeAffinity
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.pod_topology_spread import PodTopologySpread

HEAD = {"apiVersion": sc.API_VERSION, "kind": sc.KIND}


def config(*profiles: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**HEAD, **top, **({"profiles": list(profiles)} if profiles else {})}


def profiles_of(doc: dict[str, Any]) -> list[Profile]:
    loaded = sc.load(doc)
    assert not isinstance(loaded, list), loaded
    return loaded[0]


def only(doc: dict[str, Any]) -> Profile:
    (profile,) = profiles_of(doc)
    return profile


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    loaded = sc.load(doc)
    assert isinstance(loaded, list), "expected errors"
    return {e.path: e.message for e in loaded}


def plugin(profile: Profile, cls: type) -> Any:
    (found,) = {id(p): p for p in profile.plugins if isinstance(p, cls)}.values()
    return found


# ----------------------------------------------------------------------------- defaults


def test_an_empty_configuration_is_the_upstream_default_profile() -> None:
    got = only(config())
    want = policy.default_profile("default-scheduler")
    assert got.scheduler_name == "default-scheduler"
    assert got.filter_names == want.filter_names
    assert got.score_names == want.score_names
    assert [type(p).__name__ for p in got.post_filters] == [type(p).__name__ for p in want.post_filters]
    assert [type(p).__name__ for p in got.post_filters] == ["DynamicResources", "DefaultPreemption"]
    assert got.percentage_of_nodes_to_score == 0
    # GenericWorkload is off by default in v1.37: no GangScheduling in the default plugins
    assert not got.pre_filter_only
    assert got.spec["gangScheduling"] == {"enabled": False}


def test_a_named_profile_without_plugins_gets_the_defaults_and_two_profiles_are_two_policies() -> None:
    got = profiles_of(config({"schedulerName": "a"}, {"schedulerName": "b"}))
    assert [p.scheduler_name for p in got] == ["a", "b"]
    assert got[0].score_names == got[1].score_names == policy.default_profile().score_names


# ----------------------------------------------------------------------------- merge rules


def test_score_enabled_reweights_a_default_and_keeps_its_override_position_first() -> None:
    got = only(config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 9}]}}}))
    assert got.score_names[0] == ("ImageLocality", 9)
    assert dict(got.score_names)["TaintToleration"] == 3


def test_multi_point_reenabled_default_takes_the_new_weight_and_none_means_one() -> None:
    got = only(
        config(
            {
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "TaintToleration"}]}
                }
            }
        )
    )
    weights = dict(got.score_names)
    assert weights["NodeResourcesFit"] == 5
    assert weights["TaintToleration"] == 1  # replaced in place without a weight: upstream's 0 -> 1


def test_multi_point_disable_removes_a_plugin_from_every_point() -> None:
    got = only(config({"plugins": {"multiPoint": {"disabled": [{"name": "ImageLocality"}, {"name": "NodePorts"}]}}}))
    assert "ImageLocality" not in dict(got.score_names)
    assert "NodePorts" not in got.filter_names


def test_score_disabled_star_then_enabled_list_scores_with_those_only() -> None:
    got = only(
        config(
            {
                "plugins": {
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "NodeResourcesFit", "weight": 2}, {"name": "ImageLocality"}],
                    }
                }
            }
        )
    )
    assert got.score_names == [("NodeResourcesFit", 2), ("ImageLocality", 1)]
    assert "TaintToleration" in got.filter_names  # filters untouched


def test_disabling_a_score_keeps_the_filter() -> None:
    got = only(config({"plugins": {"score": {"disabled": [{"name": "NodeAffinity"}]}}}))
    assert "NodeAffinity" not in dict(got.score_names)
    assert "NodeAffinity" in got.filter_names


def test_disabling_default_preemption_turns_preemption_off() -> None:
    got = only(config({"plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}))
    assert [type(p).__name__ for p in got.post_filters] == ["DynamicResources"]  # its deallocation stays


def test_disabling_dynamic_resources_takes_it_out_of_every_extension_point() -> None:
    got = only(config({"plugins": {"multiPoint": {"disabled": [{"name": "DynamicResources"}]}}}))
    default = policy.default_profile()
    assert got.score_names == [s for s in default.score_names if s[0] != "DynamicResources"]
    assert "DynamicResources" not in got.filter_names
    assert [type(p).__name__ for p in got.post_filters] == ["DefaultPreemption"]


def test_upstream_plugins_we_do_without_may_be_disabled() -> None:
    got = only(config({"plugins": {"multiPoint": {"disabled": [{"name": "NodeDeclaredFeatures"}]}}}))
    assert got.score_names == policy.default_profile().score_names


# ----------------------------------------------------------------------------- pluginConfig and settings


def test_plugin_config_args_configure_the_plugins() -> None:
    got = only(
        config(
            {
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "apiVersion": sc.API_VERSION,
                            "kind": "NodeResourcesFitArgs",
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 0}],
                            },
                        },
                    },
                    {
                        "name": "PodTopologySpread",
                        "args": {
                            "defaultingType": "List",
                            "defaultConstraints": [
                                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                            ],
                        },
                    },
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 10}},
                    {
                        "name": "NodeAffinity",
                        "args": {
                            "addedAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                                    ]
                                }
                            }
                        },
                    },
                    {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": 7}},
                ]
            }
        )
    )
    fit = plugin(got, NodeResourcesFit).args.scoring_strategy
    assert fit.type == "MostAllocated"
    assert [(r.name, r.weight) for r in fit.resources] == [("cpu", 3), ("memory", 1)]  # weight 0 means 1
    spread = plugin(got, PodTopologySpread).args
    assert spread.defaulting_type == "List" and spread.default_constraints[0].topology_key == "zone"
    assert plugin(got, InterPodAffinity).args.hard_pod_affinity_weight == 10
    assert plugin(got, NodeAffinity).args.added_affinity is not None
    assert got.post_filters[-1].args.min_candidate_nodes_absolute == 7  # type: ignore[attr-defined]


def test_percentage_of_nodes_to_score_global_and_per_profile() -> None:
    a, b = profiles_of(
        config(
            {"schedulerName": "a", "percentageOfNodesToScore": 30}, {"schedulerName": "b"}, percentageOfNodesToScore=70
        )
    )
    assert (a.percentage_of_nodes_to_score, b.percentage_of_nodes_to_score) == (30, 70)


def test_global_settings_and_extenders_apply_to_every_profile() -> None:
    extender = {"urlPrefix": "http://e:80/x", "filterVerb": "filter", "enableHTTPS": False, "httpTimeout": "2s"}
    a, b = profiles_of(
        config(
            {"schedulerName": "a"},
            {"schedulerName": "b"},
            parallelism=8,
            podInitialBackoffSeconds=2,
            podMaxBackoffSeconds=20,
            extenders=[extender],
        )
    )
    for p in (a, b):
        assert (p.pod_initial_backoff_seconds, p.pod_max_backoff_seconds) == (2.0, 20.0)
        assert p.spec["parallelism"] == 8
        assert [e.url_prefix for e in p.extenders] == ["http://e:80/x"]
        assert p.extenders[0].http_timeout_seconds == 2.0


def test_process_settings_are_ignored_with_a_warning() -> None:
    translated = sc.translate(config(leaderElection={"leaderElect": False}, clientConnection={"kubeconfig": "/k"}))
    assert not isinstance(translated, list)
    assert [w.split(":")[0] for w in translated.warnings] == ["leaderElection", "clientConnection"]


def test_round_trip_through_the_schedulingpolicy() -> None:
    doc = config(
        {
            "schedulerName": "pack",
            "percentageOfNodesToScore": 50,
            "plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}},
            "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
        }
    )
    translated = sc.translate(doc)
    assert not isinstance(translated, list)
    (manifest,) = translated.policies
    # the manifest survives YAML (kubectl apply -f -) and validates into the same profile
    spec = yaml.safe_load(yaml.safe_dump(manifest))["spec"]
    first = policy.validate_policy(spec)
    assert isinstance(first, Profile)
    assert first.spec["pluginConfig"] == [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
    ]
    again = policy.validate_policy(first.spec)
    assert isinstance(again, Profile)
    assert again.spec == first.spec
    assert (again.filter_names, again.score_names) == (first.filter_names, first.score_names)
    assert plugin(again, NodeResourcesFit).args == plugin(only(doc), NodeResourcesFit).args
    assert again.percentage_of_nodes_to_score == 50


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        pytest.param(
            config({"plugins": {"preScore": {"enabled": [{"name": "TaintToleration"}, {"name": "Foo"}]}}}),
            "profiles[0].plugins.preScore.enabled[1].name",
            "plugin 'Foo' is not supported",
            id="unknown plugin",
        ),
        pytest.param(config(foo=1), "foo", "unknown field (allowed: ", id="unknown top-level field"),
        pytest.param(
            config({"schedulerName": "a", "plugin": {}}),
            "profiles[0].plugin",
            "unknown field; did you mean 'plugins'?",
            id="unknown profile field",
        ),
        pytest.param(
            config({"plugins": {"filters": {}}}),
            "profiles[0].plugins.filters",
            "unknown field; did you mean 'filter'?",
            id="unknown extension point",
        ),
        pytest.param(
            config({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "wieght": 2}]}}}),
            "profiles[0].plugins.score.enabled[0].wieght",
            "unknown field; did you mean 'weight'?",
            id="unknown plugin field",
        ),
        pytest.param(
            {**HEAD, "apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
            "apiVersion",
            "must be 'kubescheduler.config.k8s.io/v1'",
            id="apiVersion",
        ),
        pytest.param(
            config({"plugins": {"filter": {"enabled": [{"name": "ImageLocality"}]}}}),
            "profiles[0].plugins.filter.enabled[0].name",
            "plugin 'ImageLocality' has no filter extension point",
            id="not a filter",
        ),
        pytest.param(
            config({"plugins": {"preScore": {"disabled": [{"name": "TaintToleration"}]}}}),
            "profiles[0].plugins.preScore.disabled[0]",
            "plugin 'TaintToleration' is enabled at score but not at preScore",
            id="score without its preScore",
        ),
        pytest.param(
            config({"plugins": {"filter": {"disabled": [{"name": "NodePorts"}]}}}),
            "profiles[0].plugins.filter.disabled[0]",
            "plugin 'NodePorts' is enabled at preFilter but not at filter",
            id="preFilter without its filter",
        ),
        pytest.param(
            config({"plugins": {"multiPoint": {"disabled": [{"name": "PodTopologySpread"}]}}}),
            "profiles[0].plugins.multiPoint.disabled[0]",
            "disabling PodTopologySpread's filter is not supported",
            id="PodTopologySpread filter",
        ),
        pytest.param(
            config({"plugins": {"preEnqueue": {"disabled": [{"name": "SchedulingGates"}]}}}),
            "profiles[0].plugins.preEnqueue.disabled[0]",
            "disabling SchedulingGates is not supported",
            id="SchedulingGates",
        ),
        pytest.param(
            config({"plugins": {"bind": {"disabled": [{"name": "DefaultBinder"}]}}}),
            "profiles[0].plugins.bind.disabled[0]",
            "DefaultBinder must be the last Bind plugin",
            id="DefaultBinder",
        ),
        pytest.param(
            config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}}]}),
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            "unsupported value 'Most'",
            id="bad args",
        ),
        pytest.param(
            config({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"kind": "InterPodAffinityArgs"}}]}),
            "profiles[0].pluginConfig[0].args.kind",
            "must be 'NodeResourcesFitArgs'",
            id="args kind",
        ),
        pytest.param(
            config({"pluginConfig": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]}),
            "profiles[0].pluginConfig[1].name",
            "repeated config for plugin 'ImageLocality'",
            id="repeated pluginConfig",
        ),
        pytest.param(
            config({"pluginConfig": [{"name": "Trimaran", "args": {}}]}),
            "profiles[0].pluginConfig[0].name",
            "plugin 'Trimaran' is not supported",
            id="pluginConfig of an unknown plugin",
        ),
        pytest.param(
            config({"schedulerName": "a"}, {"schedulerName": "a"}),
            "profiles[1].schedulerName",
            "duplicate (also profiles[0])",
            id="duplicate profile",
        ),
        pytest.param(
            config({"schedulerName": "a"}, {}),
            "profiles[1].schedulerName",
            "required: a non-empty string",
            id="unnamed second profile",
        ),
        pytest.param(
            config(percentageOfNodesToScore=101),
            "percentageOfNodesToScore",
            "must be an integer from 0 to 100",
            id="percentage",
        ),
        pytest.param(
            config(extenders=[{"urlPrefix": "ftp://x"}]),
            "extenders[0].urlPrefix",
            "",
            id="extender error maps back to its path",
        ),
        pytest.param(
            config(extenders=[{"urlPrefix": "http://e", "prioritizeVerb": "p"}]),
            "extenders[0].weight",
            "must have a positive weight applied to it",
            id="extender prioritize without weight",
        ),
        pytest.param(
            config({"schedulerName": "Not_A_DNS_Name"}),
            "profiles[0].schedulerName",
            "invalid scheduler name",
            id="scheduler name maps back",
        ),
    ],
)
def test_refusals_name_the_field(doc: dict[str, Any], path: str, message: str) -> None:
    errors = errors_of(doc)
    assert path in errors, errors
    assert message in errors[path]


def test_the_same_queue_sort_spelled_differently_is_the_same() -> None:
    same = {"queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}]}}
    assert len(profiles_of(config({"schedulerName": "a"}, {"schedulerName": "b", "plugins": same}))) == 2


def test_a_profile_without_a_queue_sort_is_refused() -> None:
    errors = errors_of(config({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}))
    assert errors == {"profiles[0].plugins.queueSort": "exactly one QueueSort plugin is required, got 0"}


# ----------------------------------------------------------------------------- the commands


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_config_import_prints_one_schedulingpolicy_per_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "c.yaml", [config({"schedulerName": "a"}, {"schedulerName": "b"}, leaderElection={})])
    assert main(["config", "import", path]) == 0
    out, err = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"], d["spec"]["schedulerName"]) for d in docs] == [
        ("SchedulingPolicy", "a", "a"),
        ("SchedulingPolicy", "b", "b"),
    ]
    assert all(isinstance(policy.validate_policy(d["spec"]), Profile) for d in docs)
    assert "leaderElection: a process setting, ignored" in err


def test_config_import_refuses_with_every_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = config({"plugins": {"score": {"enabled": [{"name": "Foo"}]}}, "pluginConfig": [{"name": "Bar"}]})
    assert main(["config", "import", write(tmp_path, "c.yaml", [doc])]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "profiles[0].plugins.score.enabled[0].name: plugin 'Foo' is not supported" in err
    assert "profiles[0].pluginConfig[0].name: plugin 'Bar' is not supported" in err


def node(name: str) -> dict[str, Any]:
    return node_body(name).hostname().allocatable(cpu="8", memory="16Gi", pods="110").ready().obj()


def pod(name: str, scheduler: str) -> dict[str, Any]:
    body = pod_body(name, "ns").container("c", "x", cpu="1", memory="1Gi")
    body.set("spec.schedulerName", scheduler)
    return body.obj()


def test_simulate_config_runs_every_profile_the_pods_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write(tmp_path, "cluster.yaml", [node("a"), node("b"), node("c")])
    most = {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
    conf = write(
        tmp_path,
        "conf.yaml",
        [
            config(
                {"schedulerName": "spread"},
                {
                    "schedulerName": "pack",
                    "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
                    "pluginConfig": [most],
                },
            )
        ],
    )

    def nodes(scheduler: str) -> list[str]:
        pods = write(tmp_path, f"{scheduler}.yaml", [pod(f"p{i}", scheduler) for i in range(3)])
        rc = main(["simulate", "--cluster", cluster, "--pods", pods, "--config", conf, "--output", "json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        return [p["node"] for p in json.loads(out)["placements"]]

    assert len(set(nodes("pack"))) == 1
    assert len(set(nodes("spread"))) == 3
    # both profiles in one run, as kube-scheduler runs them: one cache, each pod by the profile it names
    mixed = write(
        tmp_path, "mixed.yaml", [pod("x0", "pack"), pod("y0", "spread"), pod("x1", "pack"), pod("y1", "spread")]
    )
    rc = main(["simulate", "--cluster", cluster, "--pods", mixed, "--config", conf, "--output", "json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    at = {p["pod"].split("/")[1]: p["node"] for p in json.loads(out)["placements"]}
    assert at["x0"] == at["x1"]  # packed together
    assert len({at["x0"], at["y0"], at["y1"]}) == 3  # spread away from the packed node and from each other
    # --scheduler-name runs one profile alone: every pod of the file packed
    rc = main(["simulate", "--cluster", cluster, "--pods", mixed, "--config", conf, "--scheduler-name", "pack",
               "--output", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert len({p["node"] for p in json.loads(out)["placements"]}) == 1


def test_percentage_of_nodes_to_score_bounds_the_feasible_nodes_found(tmp_path: Path) -> None:
    from kopf_scheduler.core.model.parsing import parse_pod
    from kopf_scheduler.sim.loader import load_cluster
    from kopf_scheduler.sim.simulator import Simulation

    state = [node(f"n{i:03}") for i in range(400)]

    def feasible(percentage: int) -> int:
        profile = only(config(percentageOfNodesToScore=percentage))
        sim = Simulation(load_cluster(state).cache, profile, explain=True)
        placement = sim.evaluate(parse_pod(pod("p", "default-scheduler")))
        assert placement.node is not None and placement.explanation is not None
        return len(placement.explanation.scored)

    # upstream numFeasibleNodesToFind: the percentage of all nodes, never under 100; 0 is 50 - N/125 percent
    assert feasible(50) == 200
    assert feasible(10) == 100
    assert feasible(0) == 400 * (50 - 400 // 125) // 100


# --------------------------------------------------------------------------- refusals, each by its field

P0 = "profiles[0]"


@pytest.mark.parametrize(
    "doc, path, message",
    [
        pytest.param(config(parallelism=0), "parallelism", "must be a positive integer, got 0", id="parallelism"),
        pytest.param(
            config(podMaxBackoffSeconds="10s"),
            "podMaxBackoffSeconds",
            "must be a positive integer, got '10s'",
            id="backoff",
        ),
        pytest.param(config(extenders={}), "extenders", "must be a list", id="extenders not a list"),
        pytest.param(
            config(extenders=[{"urlPrefix": "http://x", "prioritizeVerb": "prioritize"}]),
            "extenders[0].weight",
            "must have a positive weight applied to it",
            id="prioritizing extender without a weight",
        ),
        pytest.param(
            config(percentageOfNodesToScore=101),
            "percentageOfNodesToScore",
            "must be an integer from 0 to 100, got 101",
            id="percentage",
        ),
        pytest.param(config(profiles={}), "profiles", "must be a list", id="profiles not a list"),
        pytest.param(config(3), P0, "must be an object", id="profile not an object"),
        pytest.param(
            config({"schedulerName": "a"}, {"schedulerName": "a"}),
            "profiles[1].schedulerName",
            "duplicate (also profiles[0])",
            id="duplicate scheduler name",
        ),
        pytest.param(
            config({"schedulerName": "a", "plugins": {"filter": []}}),
            f"{P0}.plugins.filter",
            "must be an object with enabled and disabled lists",
            id="set not an object",
        ),
        pytest.param(
            config({"schedulerName": "a", "plugins": {"filter": {"enabled": {}}}}),
            f"{P0}.plugins.filter.enabled",
            "must be a list",
            id="enabled not a list",
        ),
        pytest.param(
            config({"schedulerName": "a", "plugins": {"filter": {"enabled": ["NodeName"]}}}),
            f"{P0}.plugins.filter.enabled[0]",
            "must be an object with a name",
            id="enabled item not an object",
        ),
        pytest.param(
            config({"schedulerName": "a", "plugins": {"filter": {"disabled": [{"name": ""}]}}}),
            f"{P0}.plugins.filter.disabled[0].name",
            "required: a non-empty string",
            id="empty name",
        ),
        pytest.param(
            config({"schedulerName": "a", "plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": -1}]}}}),
            f"{P0}.plugins.score.enabled[0].weight",
            "must be an integer from 0 to 1000000",
            id="weight",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": {}}),
            f"{P0}.pluginConfig",
            "must be a list",
            id="pluginConfig not a list",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [1]}),
            f"{P0}.pluginConfig[0]",
            "must be an object with name and args",
            id="pluginConfig entry",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [{"args": {}}]}),
            f"{P0}.pluginConfig[0].name",
            "required: a non-empty string",
            id="pluginConfig without a name",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]}),
            f"{P0}.pluginConfig[1].name",
            "repeated config for plugin 'NodeAffinity' (also at profiles[0].pluginConfig[0])",
            id="repeated pluginConfig",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [{"name": "NodeAffinity", "args": []}]}),
            f"{P0}.pluginConfig[0].args",
            "must be an object",
            id="args not an object",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [{"name": "NodeAffinity", "args": {"kind": "FooArgs"}}]}),
            f"{P0}.pluginConfig[0].args.kind",
            "must be 'NodeAffinityArgs', got 'FooArgs'",
            id="args kind",
        ),
        pytest.param(
            config({"schedulerName": "a", "pluginConfig": [{"name": "NodeAffinity", "args": {"apiVersion": "v1"}}]}),
            f"{P0}.pluginConfig[0].args.apiVersion",
            "must be 'kubescheduler.config.k8s.io/v1', got 'v1'",
            id="args apiVersion",
        ),
        pytest.param(
            config({"schedulerName": "a", "percentageOfNodesToScore": -1}),
            f"{P0}.percentageOfNodesToScore",
            "must be an integer from 0 to 100, got -1",
            id="profile percentage",
        ),
    ],
)
def test_a_configuration_is_refused_by_the_field_at_fault(doc: dict[str, Any], path: str, message: str) -> None:
    found = errors_of(doc)
    assert found.get(path) == message, found


def test_a_configuration_that_is_no_object_is_refused() -> None:
    assert [(e.path, e.message) for e in sc.load([])] == [("", "a KubeSchedulerConfiguration must be an object")]
