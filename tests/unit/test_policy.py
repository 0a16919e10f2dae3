"""validate_policy: SchedulingPolicy spec -> Profile or field errors.

Profiles are built with the real in-tree plugins (cheap to construct); tests of out-of-tree names
pass a registry extended with a test plugin, as the operator passes the installed one.
"""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.core.config import extenders, registry
from kopf_scheduler.core.config.extenders import ExtenderConfig, ExtenderTLSConfig
from kopf_scheduler.core.config.policy import (
    FieldError,
    default_profile,
    default_provider_profile,
    parse_duration,
    validate_policy,
)
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.core.framework.basics import CycleState, Status
from kopf_scheduler.core.framework.interface import FilterPlugin, ScorePlugin
from kopf_scheduler.core.plugins.node_label import NodeLabel
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.pod_topology_spread import PodTopologySpread
from kopf_scheduler.core.plugins.service_affinity import ServiceAffinity


def ok(spec: dict[str, Any], registry: Registry | None = None) -> Profile:
    result = validate_policy(spec, registry=registry)
    assert isinstance(result, Profile), result
    return result


def errors(spec: dict[str, Any], registry: Registry | None = None) -> dict[str, str]:
    result = validate_policy(spec, registry=registry)
    assert isinstance(result, list), result
    assert all(isinstance(e, FieldError) for e in result)
    return {e.path: e.message for e in result}


def S(**kw: Any) -> dict[str, Any]:
    return {"schedulerName": "s", **kw}


# ----------------------------------------------------------------------------- providers


def test_default_provider_profile() -> None:
    p = ok(S(algorithmProvider="DefaultProvider"))
    assert p.filter_names == [
        "CheckNodeCondition", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "EBSLimits", "GCEPDLimits", "AzureDiskLimits", "VolumeBinding", "VolumeZone",
        "CheckNodeMemoryPressure", "CheckNodeDiskPressure", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    assert sorted(p.score_names) == sorted([
        ("SelectorSpread", 1), ("InterPodAffinity", 1), ("NodeResourcesLeastAllocated", 1),
        ("NodeResourcesBalancedAllocation", 1), ("NodePreferAvoidPods", 10000), ("NodeAffinity", 1),
        ("TaintToleration", 1),
    ])  # fmt: skip
    assert p.source == "DefaultProvider"
    assert p.spec["algorithmProvider"] == "DefaultProvider"


def test_filter_and_score_of_one_plugin_share_an_instance() -> None:
    p = ok(S(algorithmProvider="DefaultProvider"))
    filters = {f.name: f for f in p.filters}
    scorers = {s.name: s for s, _ in p.scorers}
    for name in ("NodeAffinity", "TaintToleration", "InterPodAffinity"):
        assert filters[name] is scorers[name]
    # LeastRequestedPriority is its own NodeResourcesFit instance with the LeastAllocated strategy
    assert scorers["NodeResourcesLeastAllocated"] is not filters["NodeResourcesFit"]
    assert scorers["NodeResourcesLeastAllocated"].args.scoring_strategy.type == "LeastAllocated"


def test_cluster_autoscaler_provider() -> None:
    p = ok(S(algorithmProvider="ClusterAutoscalerProvider"))
    names = dict(p.score_names)
    assert "NodeResourcesMostAllocated" in names and "NodeResourcesLeastAllocated" not in names


def test_nothing_given_means_todays_default_profile() -> None:
    p = ok(S())
    assert p.source == "the v1.37 default profile"
    # v1.37 default_plugins.go: MultiPoint order and weights
    assert p.filter_names == [
        "NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
        "InterPodAffinity", "DynamicResources",
    ]  # fmt: skip
    assert p.score_names == [
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("VolumeBinding", 1),
        ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
    ]  # fmt: skip
    # upstream's applyDynamicResources: DynamicResources' PostFilter before DefaultPreemption
    assert [f.name for f in p.post_filters] == ["DynamicResources", "DefaultPreemption"]
    scorers = dict((s.name, s) for s, _ in p.scorers)
    filters = {f.name: f for f in p.filters}
    assert all(
        scorers[n] is filters[n]
        for n in ("TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity")
    )
    assert filters["NodeResourcesFit"].args.scoring_strategy.type == "LeastAllocated"


def test_provider_and_lists_together_is_an_error() -> None:
    assert "both" in errors(S(algorithmProvider="DefaultProvider", predicates=[]))["spec.algorithmProvider"]


def test_unknown_provider_suggests() -> None:
    assert "did you mean 'DefaultProvider'?" in errors(S(algorithmProvider="DefaultProvder"))["spec.algorithmProvider"]


def test_default_profile() -> None:
    p = default_profile("my-scheduler")
    assert p.scheduler_name == "my-scheduler" and p.filter_names[0] == "NodeName"
    v19 = default_provider_profile("my-scheduler")
    assert v19.source == "DefaultProvider" and v19.filter_names[0] == "CheckNodeCondition"


# ----------------------------------------------------------------------------- v1.9 list rules


def test_empty_predicates_means_only_mandatory() -> None:
    p = ok(S(predicates=[], priorities=[{"name": "LeastRequestedPriority", "weight": 1}]))
    assert p.filter_names == ["CheckNodeCondition", "PodTopologySpread"]


def test_missing_predicates_with_priorities_means_only_mandatory() -> None:
    p = ok(S(priorities=[{"name": "EqualPriority", "weight": 1}]))
    assert p.filter_names == ["CheckNodeCondition", "PodTopologySpread"]


def test_empty_priorities_means_equal_priority() -> None:
    p = ok(S(predicates=[{"name": "PodFitsResources"}], priorities=[]))
    assert p.score_names == [("EqualPriority", 1)]
    assert p.filter_names == ["CheckNodeCondition", "NodeResourcesFit", "PodTopologySpread"]


def test_empty_priorities_with_extenders_leaves_scoring_to_them() -> None:
    p = ok(S(predicates=[], extenders=[{"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": 2}]))
    assert p.score_names == []


def test_modern_names_only_get_no_mandatory_filter_and_no_equal_priority() -> None:
    p = ok(S(predicates=[{"name": "NodeResourcesFit"}, {"name": "NodeName"}], priorities=[]))
    assert p.filter_names == ["NodeName", "NodeResourcesFit", "PodTopologySpread"]
    assert p.score_names == []


def test_one_legacy_name_makes_check_node_condition_mandatory() -> None:
    p = ok(S(predicates=[{"name": "NodeResourcesFit"}], priorities=[{"name": "TaintTolerationPriority"}]))
    assert p.filter_names == ["CheckNodeCondition", "NodeResourcesFit", "PodTopologySpread"]


# ----------------------------------------------------------------------------- order and de-duplication


def test_filters_run_in_canonical_order_whatever_the_listing() -> None:
    listed = ["MatchInterPodAffinity", "CheckNodeDiskPressure", "NoVolumeZoneConflict", "PodFitsResources",
              "PodToleratesNodeTaints", "HostName", "CheckNodeUnschedulable"]  # fmt: skip
    p = ok(S(predicates=[{"name": n} for n in listed]))
    assert p.filter_names == [
        "CheckNodeCondition", "NodeName", "NodeUnschedulable", "TaintToleration", "NodeResourcesFit", "VolumeZone",
        "CheckNodeDiskPressure", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    reversed_ = ok(S(predicates=[{"name": n} for n in reversed(listed)]))
    assert reversed_.filter_names == p.filter_names


@pytest.mark.parametrize(
    "names,expected",
    [
        pytest.param(
            ["GeneralPredicates", "PodFitsResources"],
            ["NodeName", "NodeAffinity", "NodePorts", "NodeResourcesFit"],
            id="general + resources",
        ),
        pytest.param(["PodFitsPorts", "PodFitsHostPorts"], ["NodePorts"], id="ports aliases"),
        pytest.param(["HostName", "PodFitsHost", "NodeName"], ["NodeName"], id="hostname aliases"),
        pytest.param(
            ["MatchNodeSelector", "GeneralPredicates"],
            ["NodeName", "NodeAffinity", "NodePorts", "NodeResourcesFit"],
            id="selector + general",
        ),
    ],
)
def test_identical_filters_are_deduplicated(names: list[str], expected: list[str]) -> None:
    p = ok(S(predicates=[{"name": n} for n in names]))
    got = [n for n in p.filter_names if n != "CheckNodeCondition"]
    # canonical order: NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit
    assert got == sorted([*expected, "PodTopologySpread"], key=[cls.NAME for cls in registry.FILTER_ORDER].index)


def test_same_name_twice_is_an_error() -> None:
    errs = errors(S(predicates=[{"name": "PodFitsResources"}, {"name": "podfitsresources"}]))
    assert "duplicate predicate 'PodFitsResources' (also at spec.predicates[0])" == errs["spec.predicates[1].name"]


def test_two_names_for_one_scorer_is_an_error() -> None:
    errs = errors(S(priorities=[{"name": "NodeAffinityPriority", "weight": 1}, {"name": "NodeAffinity", "weight": 3}]))
    assert "same scorer" in errs["spec.priorities[1]"]


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "section,name,message",
    [
        pytest.param(
            "predicates",
            "PodFitResources",
            "unknown predicate 'PodFitResources'; did you mean 'PodFitsResources'?",
            id="pred typo",
        ),
        pytest.param(
            "priorities",
            "LeastRequestPriority",
            "unknown priority 'LeastRequestPriority'; did you mean 'LeastRequestedPriority'?",
            id="prio typo",
        ),
        pytest.param(
            "predicates",
            "LeastRequestedPriority",
            "'LeastRequestedPriority' is a priority, not a predicate; list it under spec.priorities",
            id="wrong list",
        ),
        pytest.param(
            "priorities",
            "GeneralPredicates",
            "'GeneralPredicates' is a predicate, not a priority; list it under spec.predicates",
            id="wrong list 2",
        ),
        pytest.param(
            "predicates",
            "NodeResourcesBalancedAllocation",
            "'NodeResourcesBalancedAllocation' is a score plugin, not a predicate; list it under spec.priorities",
            id="scorer as predicate",
        ),
    ],
)
def test_unknown_names(section: str, name: str, message: str) -> None:
    assert (
        errors(
            S(
                **{
                    section: [
                        {"name": "EqualPriority"} if section == "priorities" else {"name": "HostName"},
                        {"name": name},
                    ]
                }
            )
        )[f"spec.{section}[1].name"]
        == message
    )


def test_a_name_nothing_installed_has_lists_the_installed_plugins() -> None:
    message = errors(S(predicates=[{"name": "Qqqqqq"}]))["spec.predicates[0].name"]
    assert message.startswith(
        "unknown predicate 'Qqqqqq': no plugin of that name is installed "
        "(out-of-tree plugins installed: none; filter plugins: "
    )
    assert "NodeResourcesFit" in message and "argument.serviceAffinity or argument.labelsPresence" in message
    with_cheap = Registry.in_tree().extended([(_Cheap, "pkg:Cheap")])
    message = errors(S(priorities=[{"name": "Qqqqqq"}]), with_cheap)["spec.priorities[0].name"]
    assert "out-of-tree plugins installed: Cheap;" in message


def test_a_plugin_that_failed_to_load_is_named_with_its_problem() -> None:
    broken = Registry.in_tree().extended([], {"Broken": "pkg:Broken: cannot be imported: ImportError: no"})
    assert errors(S(predicates=[{"name": "Broken"}]), broken) == {
        "spec.predicates[0].name": "plugin 'Broken' is installed but cannot be used: "
        "pkg:Broken: cannot be imported: ImportError: no"
    }


# ----------------------------------------------------------------------------- out-of-tree plugins


class _Cheap(ScorePlugin, FilterPlugin):
    """A test plugin with a filter and a score, as an out-of-tree package would ship it."""

    NAME = "Cheap"
    DEFAULT_WEIGHT = 3

    def filter(self, state: CycleState, pod: Any, node: Any) -> Status:
        return Status()

    def score(self, state: CycleState, pod: Any, node: Any) -> int:
        return 0


def test_out_of_tree_names_resolve_through_the_registry_passed_in() -> None:
    with_cheap = Registry.in_tree().extended([(_Cheap, "pkg:Cheap")])
    p = ok(S(predicates=[{"name": "NodeName"}, {"name": "cheap"}], priorities=[{"name": "Cheap"}]), with_cheap)
    assert p.filter_names == [
        "NodeName",
        "PodTopologySpread",
        "Cheap",
    ]  # out-of-tree filters run after the in-tree ones
    assert p.score_names == [("Cheap", 3)]  # the class's DEFAULT_WEIGHT
    assert p.filters[2] is p.scorers[0][0]
    assert p.spec["predicates"][1] == {"name": "Cheap"}
    assert "Cheap" in errors(S(predicates=[{"name": "Cheap"}]))["spec.predicates[0].name"]  # in-tree only: unknown


def test_out_of_tree_plugin_without_arguments_rejects_some() -> None:
    with_cheap = Registry.in_tree().extended([(_Cheap, "pkg:Cheap")])
    assert errors(S(priorities=[{"name": "Cheap", "argument": {"x": 1}}]), with_cheap) == {
        "spec.priorities[0].argument.x": "unknown field: this plugin takes no arguments"
    }


@pytest.mark.parametrize("name", ["podfitsresources", "PODFITSRESOURCES", "podFitsResources"])
def test_mixed_case_names_are_accepted_and_normalised(name: str) -> None:
    p = ok(S(predicates=[{"name": name}]))
    assert p.spec["predicates"] == [{"name": "PodFitsResources"}]
    assert "NodeResourcesFit" in p.filter_names


@pytest.mark.parametrize("name", ["x", "-abc", "abc-", "a b", "a_b"])
def test_invalid_name_format(name: str) -> None:
    assert "invalid name" in errors(S(predicates=[{"name": name}]))["spec.predicates[0].name"]


def test_missing_name() -> None:
    assert errors(S(predicates=[{}]))["spec.predicates[0].name"].startswith("required")


# ----------------------------------------------------------------------------- weights


@pytest.mark.parametrize(
    "weight,message",
    [
        pytest.param(0, "must be an integer from 1 to 1000000, got 0", id="zero"),
        pytest.param(-1, "must be an integer from 1 to 1000000, got -1", id="negative"),
        pytest.param(1_000_001, "must be an integer from 1 to 1000000, got 1000001", id="too big"),
        pytest.param(1.5, "must be an integer from 1 to 1000000, got 1.5", id="float"),
        pytest.param(True, "must be an integer from 1 to 1000000, got True", id="bool"),
    ],
)
def test_bad_weights(weight: Any, message: str) -> None:
    spec = S(priorities=[{"name": "EqualPriority", "weight": 1}, {"name": "ImageLocalityPriority", "weight": weight}])
    assert errors(spec) == {"spec.priorities[1].weight": message}


def test_missing_weight_is_the_default_weight() -> None:
    p = ok(S(priorities=[{"name": "NodePreferAvoidPodsPriority"}, {"name": "ImageLocality"}]))
    assert sorted(p.score_names) == [("ImageLocality", 1), ("NodePreferAvoidPods", 10000)]
    assert p.spec["priorities"][0] == {"name": "NodePreferAvoidPodsPriority", "weight": 10000}


# ----------------------------------------------------------------------------- argument-style names


def test_labels_presence_predicate() -> None:
    p = ok(S(predicates=[{"name": "RequireSSD", "argument": {"labelsPresence": {"labels": ["ssd"], "presence": True}}},
                         {"name": "HostName"}]))  # fmt: skip
    assert p.filter_names == ["CheckNodeCondition", "NodeName", "RequireSSD", "PodTopologySpread"]
    f = p.filters[2]
    assert isinstance(f, NodeLabel) and f.args.present_labels == ("ssd",) and f.args.absent_labels == ()


def test_service_affinity_predicate_and_anti_affinity_priority() -> None:
    p = ok(S(
        predicates=[{"name": "Region", "argument": {"serviceAffinity": {"labels": ["region"]}}}],
        priorities=[{"name": "Zone", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "zone"}}}],
    ))  # fmt: skip
    assert p.filter_names == ["CheckNodeCondition", "Region", "PodTopologySpread"]
    assert p.score_names == [("Zone", 2)]
    assert isinstance(p.filters[1], ServiceAffinity) and p.filters[1].args.affinity_labels == ("region",)
    assert p.scorers[0][0].args.anti_affinity_labels_preference == ("zone",)


def test_same_user_name_for_service_affinity_filter_and_score_shares_one_plugin() -> None:
    p = ok(S(
        predicates=[{"name": "Zone", "argument": {"serviceAffinity": {"labels": ["zone"]}}}],
        priorities=[{"name": "Zone", "weight": 1, "argument": {"serviceAntiAffinity": {"label": "zone"}}}],
    ))  # fmt: skip
    assert p.filters[1] is p.scorers[0][0]
    assert p.filters[1].args.affinity_labels == ("zone",)
    assert p.filters[1].args.anti_affinity_labels_preference == ("zone",)


def test_label_preference_priority() -> None:
    p = ok(
        S(
            priorities=[
                {
                    "name": "PreferInfra",
                    "weight": 3,
                    "argument": {"labelPreference": {"label": "infra", "presence": False}},
                }
            ]
        )
    )
    plugin, weight = p.scorers[0]
    assert (plugin.name, weight, type(plugin)) == ("PreferInfra", 3, NodeLabel)
    assert plugin.args.absent_labels_preference == ("infra",) and plugin.args.present_labels_preference == ()


def test_requested_to_capacity_ratio_argument() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    p = ok(
        S(
            priorities=[
                {"name": "MyRatio", "weight": 2, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}
            ]
        )
    )
    plugin, weight = p.scorers[0]
    assert plugin.name == "RequestedToCapacityRatio" and weight == 2
    assert isinstance(plugin, NodeResourcesFit) and plugin.strategy.type == "RequestedToCapacityRatio"
    assert plugin.strategy.requested_to_capacity_ratio is not None
    assert [(pt.utilization, pt.score) for pt in plugin.strategy.requested_to_capacity_ratio.shape] == [
        (0, 0),
        (100, 10),
    ]


@pytest.mark.parametrize(
    "argument,path,fragment",
    [
        pytest.param(
            {"labelsPresence": {"labels": ["a"]}, "serviceAffinity": {"labels": ["b"]}},
            "spec.predicates[0].argument",
            "exactly one of",
            id="two kinds",
        ),
        pytest.param(
            {"labelsPresence": {"labels": ["a"], "presense": True}},
            "spec.predicates[0].argument.labelsPresence.presense",
            "did you mean 'presence'?",
            id="typo field",
        ),
        pytest.param(
            {"labelsPresence": ["a"]},
            "spec.predicates[0].argument.labelsPresence",
            "must be an object",
            id="not object",
        ),
        pytest.param(
            {"labelsPresence": {"labels": "ssd"}},
            "spec.predicates[0].argument.labelsPresence.labels",
            "must be a list",
            id="plugin rejects",
        ),
        pytest.param(
            {"labelsPresence": {"labels": ["ssd"], "presence": "yes"}},
            "spec.predicates[0].argument.labelsPresence.presence",
            "must be a boolean, not 'yes'",
            id="presence not a boolean",
        ),
    ],
)
def test_bad_predicate_arguments(argument: Any, path: str, fragment: str) -> None:
    errs = errors(S(predicates=[{"name": "Custom", "argument": argument}]))
    assert fragment in errs[path], errs


@pytest.mark.parametrize(
    "name,where",
    [
        pytest.param("LeastRequestedPriority", ("scoringStrategy", "resources"), id="least"),
        pytest.param("MostRequestedPriority", ("scoringStrategy", "resources"), id="most"),
        pytest.param("NodeResourcesFit", ("scoringStrategy", "resources"), id="fit"),
        pytest.param("BalancedResourceAllocation", ("resources",), id="balanced"),
        pytest.param("NodeResourcesBalancedAllocation", ("resources",), id="balanced modern"),
    ],
)
def test_resources_argument_of_resource_priorities(name: str, where: tuple[str, ...]) -> None:
    weight = 1 if "Balanced" in name else 2
    resources = [{"name": "cpu", "weight": weight}, {"name": "example.com/gpu", "weight": 1}]
    p = ok(S(priorities=[{"name": name, "weight": 1, "argument": {"resources": resources}}]))
    args: Any = p.scorers[0][0].args
    for key in where:
        args = getattr(args, {"scoringStrategy": "scoring_strategy"}.get(key, key))
    assert [(r.name, r.weight) for r in args] == [("cpu", weight), ("example.com/gpu", 1)]
    assert p.spec["priorities"][0]["argument"] == {"resources": resources}


def test_resources_argument_keeps_the_strategy() -> None:
    p = ok(
        S(
            priorities=[
                {
                    "name": "MostRequestedPriority",
                    "weight": 1,
                    "argument": {"resources": [{"name": "cpu", "weight": 1}]},
                }
            ]
        )
    )
    strategy = p.scorers[0][0].args.scoring_strategy
    assert strategy.type == "MostAllocated" and [(r.name, r.weight) for r in strategy.resources] == [("cpu", 1)]


def test_resources_argument_error_path() -> None:
    spec = S(priorities=[{"name": "LeastRequestedPriority", "weight": 1, "argument": {"resources": [{"name": ""}]}}])
    assert errors(spec) == {"spec.priorities[0].argument.resources[0].name": "must be a non-empty string"}


def test_resources_argument_not_for_other_priorities() -> None:
    errs = errors(S(priorities=[{"name": "ImageLocalityPriority", "weight": 1, "argument": {"resources": []}}]))
    assert errs["spec.priorities[0].argument"].startswith("ImageLocalityPriority takes no argument")


def test_legacy_name_takes_no_argument() -> None:
    errs = errors(S(predicates=[{"name": "PodFitsResources", "argument": {"foo": 1}}]))
    assert errs["spec.predicates[0].argument"].startswith("PodFitsResources takes no argument")


# ----------------------------------------------------------------------------- plugin args -> field paths


def test_modern_plugin_args_errors_map_to_field_paths() -> None:
    strategy = {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]}
    spec = S(
        priorities=[
            {"name": "EqualPriority"},
            {"name": "NodeResourcesFit", "weight": 1, "argument": {"scoringStrategy": strategy}},
        ]
    )
    assert errors(spec) == {
        "spec.priorities[1].argument.scoringStrategy.resources[0].weight": (
            "resource weight of cpu not in valid range (0, 100]"
        )
    }


def test_rtcr_args_errors_map_back_to_the_policy_argument() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": "ten"}]
    spec = S(
        priorities=[{"name": "Ratio", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}]
    )
    assert errors(spec) == {
        "spec.priorities[0].argument.requestedToCapacityRatioArguments.shape[1].score": "must be an integer, not 'ten'"
    }


def test_modern_plugin_args_are_shared_between_filter_and_score() -> None:
    args = {"scoringStrategy": {"type": "MostAllocated"}}
    p = ok(
        S(
            predicates=[{"name": "NodeResourcesFit"}],
            priorities=[{"name": "NodeResourcesFit", "weight": 1, "argument": args}],
        )
    )
    assert p.filters[0] is p.scorers[0][0] and p.filters[0].args.scoring_strategy.type == "MostAllocated"


def test_conflicting_args_for_one_plugin() -> None:
    least, most = {"scoringStrategy": {"type": "LeastAllocated"}}, {"scoringStrategy": {"type": "MostAllocated"}}
    errs = errors(S(predicates=[{"name": "NodeResourcesFit", "argument": least}],
                    priorities=[{"name": "NodeResourcesFit", "weight": 1, "argument": most}]))  # fmt: skip
    assert "conflicting arguments" in errs["spec.priorities[0].argument"]


@pytest.mark.parametrize(
    "value,error",
    [
        pytest.param(10, None, id="10"),
        pytest.param(0, None, id="0 means unset"),
        pytest.param(100, None, id="100"),
        pytest.param(101, "must be an integer from 0 to 100, got 101", id="101"),
        pytest.param(-1, "must be an integer from 0 to 100, got -1", id="negative"),
    ],
)
def test_hard_pod_affinity_symmetric_weight(value: int, error: str | None) -> None:
    spec = S(predicates=[{"name": "MatchInterPodAffinity"}],
             priorities=[{"name": "InterPodAffinityPriority", "weight": 1}],
             hardPodAffinitySymmetricWeight=value)  # fmt: skip
    if error:
        assert errors(spec) == {"spec.hardPodAffinitySymmetricWeight": error}
        return
    p = ok(spec)
    ((plugin, _),) = p.scorers
    # 0 is "unset" (v1.9 and the CRD): the plugin's default (1) applies
    assert plugin.args.hard_pod_affinity_weight == (value or 1)


def test_hard_pod_affinity_weight_rejected_by_plugin_points_at_spec_field() -> None:
    spec = S(priorities=[{"name": "InterPodAffinity", "weight": 1, "argument": {"hardPodAffinityWeight": "BAD"}}])
    assert errors(spec) == {"spec.priorities[0].argument.hardPodAffinityWeight": "must be an integer, not 'BAD'"}


# ----------------------------------------------------------------------------- scalar settings


@pytest.mark.parametrize(
    "field,value,message",
    [
        pytest.param("schedulerName", "", "required: the name pods select with spec.schedulerName", id="empty name"),
        pytest.param(
            "percentageOfNodesToScore", 101, "must be an integer from 0 (adaptive) to 100, got 101", id="pct>100"
        ),
        pytest.param("percentageOfNodesToScore", -1, "must be an integer from 0 (adaptive) to 100, got -1", id="pct<0"),
        pytest.param("alwaysCheckAllPredicates", "yes", "must be a boolean", id="bool"),
        pytest.param("podInitialBackoffSeconds", 0, "must be a positive number of seconds, got 0", id="backoff 0"),
        pytest.param(
            "podMaxBackoffSeconds", 0.5, "must be at least podInitialBackoffSeconds (1.0)", id="max < initial"
        ),
        pytest.param("predicates", {}, "must be a list", id="predicates not list"),
        pytest.param("parallelism", 0, "must be an integer from 1 to 1024, got 0", id="parallelism"),
        pytest.param("preemption", "yes", "must be a boolean", id="preemption not a boolean"),
        pytest.param(
            "schedulerName",
            "My_Scheduler",
            "invalid scheduler name 'My_Scheduler': a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')",
            id="bad scheduler name",
        ),
    ],
)
def test_bad_scalar_fields(field: str, value: Any, message: str) -> None:
    assert errors(S(**{field: value})) == {f"spec.{field}": message}


def test_missing_scheduler_name() -> None:
    assert "spec.schedulerName" in errors({"algorithmProvider": "DefaultProvider"})


def test_unknown_top_level_field_suggests() -> None:
    assert errors(S(percentageOfNodeToScore=50)) == {
        "spec.percentageOfNodeToScore": "unknown field; did you mean 'percentageOfNodesToScore'?"
    }


def test_scalar_settings_reach_the_profile() -> None:
    p = ok(S(algorithmProvider="DefaultProvider", alwaysCheckAllPredicates=True, percentageOfNodesToScore=30,
             podInitialBackoffSeconds=2, podMaxBackoffSeconds=20))  # fmt: skip
    assert (p.always_check_all_predicates, p.percentage_of_nodes_to_score) == (True, 30)
    assert (p.pod_initial_backoff_seconds, p.pod_max_backoff_seconds) == (2.0, 20.0)
    assert p.spec["podMaxBackoffSeconds"] == 20


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(S(algorithmProvider="DefaultProvider"), True, id="on by default, as in every upstream profile"),
        pytest.param(
            S(predicates=[{"name": "NodeResourcesFit"}]), True, id="on by default for plugin-name policies too"
        ),
        pytest.param(S(algorithmProvider="DefaultProvider", preemption=True), True, id="on when asked"),
        pytest.param(S(algorithmProvider="DefaultProvider", preemption=False), False, id="off when asked"),
    ],
)
def test_preemption_switch(spec: dict[str, Any], expected: bool) -> None:
    p = ok(spec)
    assert [type(f).__name__ for f in p.post_filters] == (["DefaultPreemption"] if expected else [])
    assert p.spec["preemption"] is expected


@pytest.mark.parametrize("section", ["predicates", "priorities"])
def test_default_preemption_is_not_a_predicate_or_priority(section: str) -> None:
    kind = section[:-1].replace("ie", "y")  # predicate, priority
    assert errors(S(**{section: [{"name": "DefaultPreemption"}]})) == {
        f"spec.{section}[0].name": f"DefaultPreemption is a PostFilter plugin, not a {kind}; "
        "spec.preemption (default true) enables it"
    }


def test_every_error_is_reported_at_once() -> None:
    errs = errors(
        {
            "predicates": [{"name": "Nope"}],
            "priorities": [{"name": "EqualPriority", "weight": 0}],
            "percentageOfNodesToScore": 200,
        }
    )
    assert set(errs) == {
        "spec.schedulerName",
        "spec.predicates[0].name",
        "spec.priorities[0].weight",
        "spec.percentageOfNodesToScore",
    }


# ----------------------------------------------------------------------------- extenders


def test_extender_config() -> None:
    p = ok(S(algorithmProvider="DefaultProvider", extenders=[
        {"urlPrefix": "https://ext/api", "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 3,
         "bindVerb": "bind", "enableHttps": True, "httpTimeout": "1m30s", "nodeCacheCapable": True, "ignorable": True,
         "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}, {"name": "example.com/fpga"}]},
    ]))  # fmt: skip
    assert p.extenders == (
        ExtenderConfig(
            url_prefix="https://ext/api", filter_verb="filter", prioritize_verb="prioritize", bind_verb="bind",
            weight=3, enable_https=True, http_timeout_seconds=90.0, node_cache_capable=True, ignorable=True,
            managed_resources=("example.com/gpu", "example.com/fpga"), ignored_by_scheduler=("example.com/gpu",),
        ),
    )  # fmt: skip
    assert p.spec["extenders"][0]["httpTimeout"] == "90s"


def test_extender_tls_config() -> None:
    p = ok(S(extenders=[{"urlPrefix": "https://ext:8443", "tlsConfig": {
        "serverName": "ext.example", "caData": "Q0E=", "certFile": "/tls/tls.crt", "keyData": "S0VZ"}}]))  # fmt: skip
    assert p.extenders[0].tls == ExtenderTLSConfig(
        server_name="ext.example", ca_data=b"CA", cert_file="/tls/tls.crt", key_data=b"KEY"
    )
    assert "KEY" not in repr(p.extenders[0]), "the private key stays out of logs"


def _fit_ignored(p: Profile) -> tuple[str, ...]:
    fit = next(f for f in p.filters if isinstance(f, NodeResourcesFit))
    return fit.args.ignored_resources  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "predicates,expected",
    [
        pytest.param([{"name": "PodFitsResources"}], ("example.com/gpu",), id="v1.9 name"),
        pytest.param(
            [{"name": "NodeResourcesFit", "argument": {"ignoredResources": ["example.com/nic"]}}],
            ("example.com/nic", "example.com/gpu"),
            id="added to the plugin's own",
        ),  # fmt: skip
    ],
)
def test_ignored_by_scheduler_reaches_node_resources_fit(
    predicates: list[dict[str, Any]], expected: tuple[str, ...]
) -> None:
    managed = [{"name": "example.com/gpu", "ignoredByScheduler": True}, {"name": "example.com/fpga"}]
    p = ok(S(predicates=predicates, priorities=[], extenders=[{"urlPrefix": "http://x", "managedResources": managed}]))
    assert _fit_ignored(p) == expected


#: what validation says of a managed resource that is not an extended resource
NOT_EXTENDED = (
    "is an invalid extended resource name (a domain-prefixed name outside kubernetes.io, such as example.com/gpu)"
)


@pytest.mark.parametrize(
    "extenders,path,message",
    [
        pytest.param([{"filterVerb": "f"}], "spec.extenders[0].urlPrefix", "required: a non-empty URL", id="no url"),
        pytest.param(
            [{"urlPrefix": "ext:80/x"}],
            "spec.extenders[0].urlPrefix", "must be an http:// or https:// URL, got 'ext:80/x'",
            id="no scheme",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "prioritizeVerb": "p", "weight": 0}],
            "spec.extenders[0].weight", "an extender with a prioritizeVerb needs a positive weight",
            id="weight 0",
        ),
        pytest.param(
            [{"urlPrefix": "http://a", "bindVerb": "b"}, {"urlPrefix": "http://c", "bindVerb": "b"}],
            "spec.extenders[1].bindVerb", "only one extender may bind; spec.extenders[0] already has a bindVerb",
            id="two binders",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "httpTimeout": "5 sec"}],
            "spec.extenders[0].httpTimeout",
            "must be a positive duration such as \"5s\" or a number of seconds, got '5 sec'",
            id="bad timeout",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "urlprefx": "v"}],
            "spec.extenders[0].urlprefx", "unknown field; did you mean 'urlPrefix'?",
            id="unknown key",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "enableHttps": "true"}],
            "spec.extenders[0].enableHttps", "must be a boolean",
            id="bool",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "preemptVerb": "preempt"}],
            "spec.extenders[0].preemptVerb", "not supported yet: preemption does not call extenders",
            id="preempt verb",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "enableHttps": True}],
            "spec.extenders[0].enableHttps", "needs an https:// urlPrefix",
            id="https flag on an http url",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "tlsConfig": {"insecure": True}}],
            "spec.extenders[0].tlsConfig", "applies to https:// extenders only",
            id="tls on an http url",
        ),
        pytest.param(
            [{"urlPrefix": "https://u", "tlsConfig": {"insecure": True, "caFile": "/ca.crt"}}],
            "spec.extenders[0].tlsConfig.insecure",
            "specifying a root certificates file with the insecure flag is not allowed",
            id="insecure with a CA",
        ),
        pytest.param(
            [{"urlPrefix": "https://u", "tlsConfig": {"certFile": "/tls.crt"}}],
            "spec.extenders[0].tlsConfig",
            "a client certificate needs both a certificate and a key: keyFile or keyData is missing",
            id="cert without key",
        ),
        pytest.param(
            [{"urlPrefix": "https://u", "tlsConfig": {"keyData": "S0VZ"}}],
            "spec.extenders[0].tlsConfig",
            "a client certificate needs both a certificate and a key: certFile or certData is missing",
            id="key without cert",
        ),
        pytest.param(
            [{"urlPrefix": "https://u", "tlsConfig": {"caData": "not base64!"}}],
            "spec.extenders[0].tlsConfig.caData", "must be base64-encoded PEM",
            id="ca data not base64",
        ),
        pytest.param(
            [{"urlPrefix": "https://u", "tlsConfig": {"serverName": 7}}],
            "spec.extenders[0].tlsConfig.serverName", "must be a string",
            id="server name not a string",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "managedResources": [{"name": "nvidia.com/gpu"}, {"name": "cpu"}]}],
            "spec.extenders[0].managedResources[1].name",
            f"'cpu' {NOT_EXTENDED}",
            id="native resource",
        ),
        pytest.param(
            [{"urlPrefix": "http://u", "managedResources": [{"name": "kubernetes.io/x"}]}],
            "spec.extenders[0].managedResources[0].name",
            f"'kubernetes.io/x' {NOT_EXTENDED}",
            id="kubernetes.io resource",
        ),
        pytest.param(
            [
                {"urlPrefix": "http://a", "managedResources": [{"name": "x.io/gpu"}]},
                {"urlPrefix": "http://b", "managedResources": [{"name": "x.io/gpu"}]},
            ],
            "spec.extenders[1].managedResources[0].name",
            "duplicate extender managed resource name: spec.extenders[0].managedResources[0].name manages it already",
            id="managed twice",
        ),
    ],
)  # fmt: skip
def test_bad_extenders(extenders: Any, path: str, message: str) -> None:
    assert errors(S(algorithmProvider="DefaultProvider", extenders=extenders))[path] == message


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("5s", 5.0),
        ("1m30s", 90.0),
        ("250ms", 0.25),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        (3, 3.0),
        ("", None),
        ("5", None),
        ("s", None),
    ],
)
def test_parse_duration(text: Any, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


# ----------------------------------------------------------------------------- real plugins


@pytest.mark.parametrize("name", Registry.in_tree().predicate_names())
def test_every_predicate_builds_with_real_plugins(name: str) -> None:
    p = ok(S(predicates=[{"name": name}]))
    assert p.filters


@pytest.mark.parametrize("name", Registry.in_tree().priority_names())
def test_every_priority_builds_with_real_plugins(name: str) -> None:
    p = ok(S(priorities=[{"name": name, "weight": 2}]))
    assert [w for _, w in p.scorers] == [2]


def test_argument_style_names_build_with_real_plugins() -> None:
    ok(S(
        predicates=[{"name": "Region", "argument": {"serviceAffinity": {"labels": ["region"]}}},
                    {"name": "HasSSD", "argument": {"labelsPresence": {"labels": ["ssd"], "presence": True}}}],
        priorities=[{"name": "Zone", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
                    {"name": "PreferSSD", "weight": 1,
                     "argument": {"labelPreference": {"label": "ssd", "presence": True}}},
                    {"name": "Ratio", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {
                        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
                        "resources": [{"name": "cpu", "weight": 1}]}}}],
    ))  # fmt: skip


def test_default_provider_builds_with_real_plugins() -> None:
    p = default_provider_profile()
    assert p.filter_names[0] == "CheckNodeCondition"
    assert ("NodePreferAvoidPods", 10000) in p.score_names


def test_real_plugin_args_errors_surface_as_field_errors() -> None:
    spec = S(priorities=[{"name": "InterPodAffinity", "weight": 1, "argument": {"hardPodAffinityWeight": "x"}}])
    errs = errors(spec)
    assert list(errs) == ["spec.priorities[0].argument.hardPodAffinityWeight"]
    spec = S(priorities=[{"name": "Zone", "weight": 1, "argument": {"serviceAntiAffinity": {"label": ""}}}])
    assert list(errors(spec)) == ["spec.priorities[0].argument.serviceAntiAffinity.label"]


def test_real_rtcr_shape_error_maps_to_the_policy_argument() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 11}]  # scores are 0..10
    spec = S(
        priorities=[{"name": "Ratio", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}]
    )
    assert list(errors(spec)) == ["spec.priorities[0].argument.requestedToCapacityRatioArguments.shape[1].score"]


def test_real_resources_argument_error_path() -> None:
    resources = {"resources": [{"name": "cpu", "weight": 0}]}
    spec = S(
        predicates=[{"name": "NodeName"}],
        priorities=[{"name": "NodeResourcesBalancedAllocation", "argument": resources}],
    )
    assert [e.path.startswith("spec.priorities[0].argument.resources[0]") for e in validate_policy(spec)] == [True]  # type: ignore[union-attr]


def test_real_modern_args_error_path() -> None:
    spec = S(
        predicates=[{"name": "NodeName"}],
        priorities=[{"name": "NodeResourcesFit", "argument": {"scoringStrategy": {"type": "Least"}}}],
    )
    assert list(errors(spec)) == ["spec.priorities[0].argument.scoringStrategy.type"]


# ----------------------------------------------------------------------------- agreement with the CRD


def _crd_spec_schema() -> dict[str, Any]:
    import pathlib

    import yaml

    crd = yaml.safe_load((pathlib.Path(__file__).parents[2] / "crds" / "schedulingpolicy.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[no-any-return]


def test_spec_fields_match_the_crd() -> None:
    from kopf_scheduler.core.config import policy

    schema = _crd_spec_schema()
    assert set(schema["properties"]) == set(policy.SPEC_KEYS)
    ext = schema["properties"]["extenders"]["items"]["properties"]
    assert set(ext) == set(extenders.EXTENDER_KEYS)
    assert set(ext["tlsConfig"]["properties"]) == set(extenders.TLS_KEYS)
    pred_args = schema["properties"]["predicates"]["items"]["properties"]["argument"]["properties"]
    assert set(pred_args) == set(registry.ARGUMENT_PREDICATES)
    prio_args = schema["properties"]["priorities"]["items"]["properties"]["argument"]["properties"]
    assert set(prio_args) == set(registry.ARGUMENT_PRIORITIES) | {"resources"}
    assert schema["properties"]["priorities"]["items"]["properties"]["weight"]["maximum"] == registry.MAX_WEIGHT


# ----------------------------------------------------------------------------- end to end with the algorithm


@pytest.mark.parametrize(
    "provider,expected",
    [
        # n-busy already requests 3 of its 4 cpus; LeastRequested prefers the idle node, MostRequested the busy one
        pytest.param("DefaultProvider", "n-idle", id="spread"),
        pytest.param("ClusterAutoscalerProvider", "n-busy", id="bin-pack"),
    ],
)
def test_provider_profiles_schedule(provider: str, expected: str) -> None:
    import random

    from builders import make_node, make_pod, node_info

    from kopf_scheduler.core.framework.snapshot import Snapshot
    from kopf_scheduler.core.scheduling.algorithm import GenericScheduler

    profile = ok(S(algorithmProvider=provider))
    busy = make_node("n-busy").capacity(cpu="4", memory="8Gi", pods="110").obj()
    idle = make_node("n-idle").capacity(cpu="4", memory="8Gi", pods="110").obj()
    tainted = make_node("n-tainted").capacity(cpu="4", memory="8Gi", pods="110").taint("dedicated", "x").obj()
    snap = Snapshot.of(
        [
            node_info(busy, make_pod("old").req(cpu="3", memory="1Gi").node("n-busy").obj()),
            node_info(idle),
            node_info(tainted),
        ]
    )
    result = GenericScheduler(profile).schedule(
        make_pod("p").req(cpu="500m", memory="1Gi").obj(), snap, rng=random.Random(0)
    )
    assert result.node == expected, result


# ============================================================================= a pod's own DoNotSchedule
# topology spread constraints hold under every policy (issue 10): policy._honour_own_spread_constraints


def _spread_filters(p: Profile) -> list[PodTopologySpread]:
    return [f for f in p.filters if isinstance(f, PodTopologySpread)]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(S(), id="nothing given (the default profile)"),
        pytest.param(S(algorithmProvider="ClusterAutoscalerProvider"), id="a v1.9 provider"),
        pytest.param(S(predicates=[], priorities=[]), id="empty v1.9 lists"),
        pytest.param(S(predicates=[{"name": "NodeName"}], priorities=[]), id="plugin names only"),
        pytest.param(
            S(predicates=[{"name": "PodFitsResources"}], priorities=[{"name": "LeastRequestedPriority"}]),
            id="v1.9 names",
        ),
    ],
)
def test_every_profile_filters_with_pod_topology_spread(spec: dict[str, Any]) -> None:
    p = ok(spec)
    (spread,) = _spread_filters(p)
    assert spread.name == "PodTopologySpread" and spread.args.defaulting_type == "System"
    after = [n for n in p.filter_names[p.filter_names.index("PodTopologySpread") + 1 :]]
    assert after in ([], ["InterPodAffinity"], ["InterPodAffinity", "DynamicResources"])
    assert "predicates" not in p.spec or all(
        e["name"] != "PodTopologySpread" for e in p.spec["predicates"]
    )  # implied, not listed


def test_a_listed_pod_topology_spread_filter_is_not_doubled() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    }
    p = ok(S(predicates=[{"name": "PodTopologySpread", "argument": args}]))
    (spread,) = _spread_filters(p)
    assert spread.args.defaulting_type == "List" and spread.default_constraints[0].topology_key == "zone"


def test_a_pod_topology_spread_priority_is_also_the_filter() -> None:
    # one instance per plugin and name: the implied filter is the scorer the policy configured
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"}],
    }
    p = ok(
        S(predicates=[{"name": "NodeName"}], priorities=[{"name": "PodTopologySpread", "weight": 2, "argument": args}])
    )
    (spread,) = _spread_filters(p)
    assert p.scorers == ((spread, 2),) and spread.args.defaulting_type == "List"


def test_a_pods_do_not_schedule_constraint_holds_under_a_policy_that_does_not_name_it() -> None:
    import random

    from builders import make_node, make_pod, node_info

    from kopf_scheduler.core.framework.snapshot import Snapshot
    from kopf_scheduler.core.scheduling.algorithm import GenericScheduler

    profile = ok(S(predicates=[{"name": "NodeName"}], priorities=[{"name": "NodeResourcesFit"}]))
    a, b, bare = make_node("a").zone("z1").obj(), make_node("b").zone("z2").obj(), make_node("bare").obj()
    web = {"matchLabels": {"app": "web"}}
    placed = [make_pod(f"web-{i}").label(app="web").node("a").obj() for i in range(2)]
    pod = make_pod("web-new").label(app="web").spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", web).obj()
    snap = Snapshot.of([node_info(a, *placed), node_info(b), node_info(bare)])
    for seed in range(5):  # z1 2 + 1 - 0 > 1; z2 0 + 1 - 0 <= 1; "bare" has no zone
        assert GenericScheduler(profile).schedule(pod, snap, rng=random.Random(seed)).node == "b"
    # with minDomains 2 and only z1 known, the global minimum is 0: a's 2 + 1 - 0 > 1 as well
    lonely = (
        make_pod("web-new")
        .label(app="web")
        .spread(1, "topology.kubernetes.io/zone", "DoNotSchedule", web, min_domains=2)
        .obj()
    )
    result = GenericScheduler(profile).schedule(
        lonely, Snapshot.of([node_info(a, *placed[:1]), node_info(bare)]), rng=random.Random(0)
    )
    assert result.node is None
    assert result.message == (
        "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label)."
        " preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod,"
        " 1 Preemption is not helpful for scheduling."
    )


def test_pods_without_do_not_schedule_constraints_skip_the_implied_filter() -> None:
    from builders import make_node, make_pod, node_info

    from kopf_scheduler.core.framework.snapshot import Snapshot

    (spread,) = _spread_filters(ok(S(predicates=[{"name": "NodeName"}])))
    snap = Snapshot.of([node_info(make_node("a").obj())])
    assert spread.pre_filter(CycleState(), make_pod("p").label(app="web").obj(), snap).is_skip
    soft = make_pod("p").label(app="web").spread(1, "zone", "ScheduleAnyway", {"matchLabels": {"app": "web"}}).obj()
    assert spread.pre_filter(CycleState(), soft, snap).is_skip


# ----------------------------------------------------------------------------- refusals, each by its field


@pytest.mark.parametrize(
    "spec, path, message",
    [
        pytest.param(S(algorithmProvider=3), "spec.algorithmProvider", "must be a string", id="provider not a string"),
        pytest.param(S(plugins={}), "spec.plugins", "must be a list", id="plugins not a list"),
        pytest.param(
            S(plugins=[{"name": "Coscheduling"}]),
            "spec.plugins[0].name",
            "Coscheduling is a gang plugin; spec.gangScheduling (enabled by default) enables it",
            id="gang plugin as a plugin",
        ),
        pytest.param(
            S(plugins=[{"name": "DefaultBinder"}]),
            "spec.plugins[0].name",
            "DefaultBinder is every profile's last Bind plugin; it needs no entry",
            id="DefaultBinder",
        ),
        pytest.param(
            S(plugins=[{"name": "DefaultPreemption"}]),
            "spec.plugins[0].name",
            "DefaultPreemption is a PostFilter plugin; spec.preemption (default true) enables it",
            id="DefaultPreemption",
        ),
        pytest.param(
            S(plugins=[{"name": "NodeName"}]),
            "spec.plugins[0].name",
            "'NodeName' has no Reserve, Permit, PreBind or Bind point: a filter goes under spec.predicates,"
            " a score under spec.priorities",
            id="a filter as a plugin",
        ),
        pytest.param(
            S(plugins=[{"name": "DynamicResources"}, {"name": "dynamicresources"}]),
            "spec.plugins[1].name",
            "duplicate plugin 'DynamicResources' (also at spec.plugins[0])",
            id="duplicate plugin",
        ),
        pytest.param(
            S(plugins=[{"name": "Zzzzzzzzzz"}]),
            "spec.plugins[0].name",
            "unknown plugin 'Zzzzzzzzzz': no plugin of that name is installed (plugins with a Reserve, Permit, "
            "PreBind or Bind point: DynamicResources, VolumeBinding)",
            id="unknown plugin",
        ),
        pytest.param(S(gangScheduling=1), "spec.gangScheduling", "must be an object", id="gang not an object"),
        pytest.param(
            S(gangScheduling={"enabled": "yes"}), "spec.gangScheduling.enabled", "must be a boolean", id="gang enabled"
        ),
        pytest.param(S(pluginConfig={}), "spec.pluginConfig", "must be a list", id="pluginConfig not a list"),
        pytest.param(
            S(pluginConfig=[3]), "spec.pluginConfig[0]", "must be an object with name and args", id="config entry"
        ),
        pytest.param(
            S(pluginConfig=[{"name": "NodeAffinity", "args": []}]),
            "spec.pluginConfig[0].args",
            "must be an object",
            id="config args not an object",
        ),
        pytest.param(
            S(pluginConfig=[{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]),
            "spec.pluginConfig[1].name",
            "repeated config for plugin 'NodeAffinity'",
            id="repeated config",
        ),
        pytest.param(S(queueSort={}), "spec.queueSort", "must be a list", id="queueSort not a list"),
        pytest.param(
            S(queueSort=[{"name": "PrioritySort"}, {"name": "PrioritySort"}]),
            "spec.queueSort[1].name",
            "only one QueueSort plugin orders a profile's queue, and spec.queueSort[0] names one already; "
            "remove 'PrioritySort' or the other",
            id="two queue sorts",
        ),
        pytest.param(
            S(queueSort=[{"name": "NodeName"}]),
            "spec.queueSort[0].name",
            "'NodeName' is not a QueueSort plugin (installed: PrioritySort)",
            id="not a queue sort",
        ),
        pytest.param(
            S(predicates=[{"name": "PrioritySort"}]),
            "spec.predicates[0].name",
            "'PrioritySort' is a QueueSort plugin, not a predicate; name it in spec.queueSort",
            id="queue sort as a predicate",
        ),
        pytest.param(
            S(predicates=[{"name": "Coscheduling"}]),
            "spec.predicates[0].name",
            "Coscheduling is a gang plugin, not a predicate; spec.gangScheduling (enabled by default) enables it",
            id="gang plugin as a predicate",
        ),
    ],
)
def test_a_policy_is_refused_by_the_field_at_fault(spec: dict[str, Any], path: str, message: str) -> None:
    assert errors(spec).get(path) == message, errors(spec)


def test_a_spec_that_is_no_object_is_refused() -> None:
    assert [(e.path, e.message) for e in validate_policy([])] == [("spec", "must be an object")]
