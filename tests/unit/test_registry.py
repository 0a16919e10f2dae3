"""The registry: plugin classes by symbol, every v1.9 name, providers as v1.9, filter order, extension."""

from __future__ import annotations

import pytest

from kopf_scheduler.core.config import registry
from kopf_scheduler.core.config.registry import LEGACY_PREDICATES, LEGACY_PRIORITIES, PROVIDERS, Registry
from kopf_scheduler.core.framework.interface import FilterPlugin, Plugin, ScorePlugin
from kopf_scheduler.core.model.specs import closest
from kopf_scheduler.core.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.core.plugins.selector_spread import SelectorSpread

IN_TREE = Registry.in_tree()

V19_PREDICATES = [
    "PodFitsResources", "HostName", "PodFitsHost", "PodFitsHostPorts", "PodFitsPorts", "MatchNodeSelector",
    "GeneralPredicates", "NoDiskConflict", "NoVolumeZoneConflict", "MaxEBSVolumeCount", "MaxGCEPDVolumeCount",
    "MaxAzureDiskVolumeCount", "MatchInterPodAffinity", "PodToleratesNodeTaints", "PodToleratesNodeNoExecuteTaints",
    "CheckNodeMemoryPressure", "CheckNodeDiskPressure", "CheckNodePIDPressure", "CheckNodeCondition",
    "CheckNodeUnschedulable", "CheckVolumeBinding",
]  # fmt: skip
V19_PRIORITIES = {
    "LeastRequestedPriority": 1, "MostRequestedPriority": 1, "RequestedToCapacityRatioPriority": 1,
    "BalancedResourceAllocation": 1, "SelectorSpreadPriority": 1, "ServiceSpreadingPriority": 1,
    "InterPodAffinityPriority": 1, "NodeAffinityPriority": 1, "TaintTolerationPriority": 1,
    "NodePreferAvoidPodsPriority": 10000, "ImageLocalityPriority": 1, "EqualPriority": 1, "ResourceLimitsPriority": 1,
}  # fmt: skip
FILTERS = [
    "NodeUnschedulable", "NodeName", "NodePorts", "NodeAffinity", "NodeResourcesFit", "TaintToleration",
    "InterPodAffinity", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits", "EBSLimits", "GCEPDLimits",
    "AzureDiskLimits", "VolumeBinding", "NodeLabel", "ServiceAffinity",
]  # fmt: skip
SCORERS = [
    "NodeResourcesFit", "NodeResourcesBalancedAllocation", "NodeAffinity", "TaintToleration", "InterPodAffinity",
    "ImageLocality", "SelectorSpread", "NodeLabel", "ServiceAffinity", "NodePreferAvoidPods", "NodeResourceLimits",
]  # fmt: skip


@pytest.mark.parametrize("name", V19_PREDICATES)
def test_every_v19_predicate_is_a_name_policies_may_list(name: str) -> None:
    assert name in IN_TREE.predicate_names()
    assert registry.is_v19_name(name)
    legacy = registry.lookup_legacy_predicate(name)
    assert (legacy is not None and legacy.filters) or IN_TREE.filter_plugin(name) is not None


@pytest.mark.parametrize("name,weight", list(V19_PRIORITIES.items()))
def test_every_v19_priority_has_its_default_weight(name: str, weight: int) -> None:
    assert name in IN_TREE.priority_names()
    legacy = registry.lookup_legacy_priority(name)
    if legacy is not None:
        assert legacy.weight == weight
    else:
        cls = IN_TREE.score_plugin(name)
        assert cls is not None and issubclass(cls, ScorePlugin) and cls.DEFAULT_WEIGHT == weight


@pytest.mark.parametrize("name", FILTERS)
def test_filter_plugins_by_name(name: str) -> None:
    cls = IN_TREE.filter_plugin(name)
    assert cls is not None and issubclass(cls, FilterPlugin) and cls.NAME == name


@pytest.mark.parametrize("name", SCORERS)
def test_score_plugins_by_name(name: str) -> None:
    cls = IN_TREE.score_plugin(name)
    assert cls is not None and issubclass(cls, ScorePlugin) and cls.NAME == name


def test_each_in_tree_name_is_written_once() -> None:
    names = [cls.NAME for cls in registry.IN_TREE]
    assert len(names) == len(set(names))
    assert not set(names) & set(LEGACY_PREDICATES)
    assert not set(names) & set(LEGACY_PRIORITIES)


def _keys(name: str) -> set[tuple[type[Plugin], str]]:
    legacy = registry.lookup_legacy_predicate(name)
    if legacy is not None:
        return {r.key for r in legacy.filters}
    cls = IN_TREE.filter_plugin(name)
    assert cls is not None
    return {(cls, cls.NAME)}


@pytest.mark.parametrize(
    "alias,name",
    [
        pytest.param("PodFitsPorts", "PodFitsHostPorts", id="PodFitsPorts"),
        pytest.param("PodFitsHost", "HostName", id="PodFitsHost"),
        pytest.param("HostName", "NodeName", id="HostName is NodeName"),
        pytest.param("PodFitsResources", "NodeResourcesFit", id="PodFitsResources"),
        pytest.param("MatchNodeSelector", "NodeAffinity", id="MatchNodeSelector"),
        pytest.param("NoDiskConflict", "VolumeRestrictions", id="NoDiskConflict"),
        pytest.param("NoVolumeZoneConflict", "VolumeZone", id="NoVolumeZoneConflict"),
        pytest.param("MaxEBSVolumeCount", "EBSLimits", id="EBS"),
        pytest.param("MaxGCEPDVolumeCount", "GCEPDLimits", id="GCEPD"),
        pytest.param("MaxAzureDiskVolumeCount", "AzureDiskLimits", id="AzureDisk"),
        pytest.param("MaxCSIVolumeCountPred", "NodeVolumeLimits", id="CSI"),
        pytest.param("MatchInterPodAffinity", "InterPodAffinity", id="MatchInterPodAffinity"),
        pytest.param("PodToleratesNodeTaints", "TaintToleration", id="PodToleratesNodeTaints"),
        pytest.param("CheckNodeUnschedulable", "NodeUnschedulable", id="CheckNodeUnschedulable"),
        pytest.param("CheckVolumeBinding", "VolumeBinding", id="CheckVolumeBinding"),
    ],
)
def test_predicate_aliases_map_to_the_same_plugin(alias: str, name: str) -> None:
    assert _keys(alias) == _keys(name)


def test_general_predicates_is_fit_name_ports_affinity() -> None:
    assert _keys("GeneralPredicates") == _keys("NodeResourcesFit") | _keys("NodeName") | _keys("NodePorts") | _keys(
        "NodeAffinity"
    )


@pytest.mark.parametrize(
    "legacy,modern",
    [
        pytest.param("NodeAffinityPriority", "NodeAffinity", id="NodeAffinity"),
        pytest.param("TaintTolerationPriority", "TaintToleration", id="TaintToleration"),
        pytest.param("InterPodAffinityPriority", "InterPodAffinity", id="InterPodAffinity"),
        pytest.param("ImageLocalityPriority", "ImageLocality", id="ImageLocality"),
        pytest.param("BalancedResourceAllocation", "NodeResourcesBalancedAllocation", id="Balanced"),
        pytest.param("SelectorSpreadPriority", "SelectorSpread", id="SelectorSpread"),
        pytest.param("NodePreferAvoidPodsPriority", "NodePreferAvoidPods", id="NodePreferAvoidPods"),
        pytest.param("ResourceLimitsPriority", "NodeResourceLimits", id="ResourceLimits"),
    ],
)
def test_priority_aliases_map_to_the_same_plugin(legacy: str, modern: str) -> None:
    entry = LEGACY_PRIORITIES[legacy]
    cls = IN_TREE.score_plugin(modern)
    assert entry.scorer.cls is cls and entry.scorer.name is None and not entry.scorer.args
    assert cls is not None and issubclass(cls, ScorePlugin) and entry.weight == cls.DEFAULT_WEIGHT


@pytest.mark.parametrize(
    "name,plugin_name,strategy",
    [
        # upstream v1.19-1.22 ran these as their own plugins; we keep those names on NodeResourcesFit instances
        pytest.param("LeastRequestedPriority", "NodeResourcesLeastAllocated", "LeastAllocated", id="least"),
        pytest.param("MostRequestedPriority", "NodeResourcesMostAllocated", "MostAllocated", id="most"),
        pytest.param(
            "RequestedToCapacityRatioPriority", "RequestedToCapacityRatio", "RequestedToCapacityRatio", id="rtcr"
        ),
    ],
)
def test_resource_priorities_are_node_resources_fit_strategies(name: str, plugin_name: str, strategy: str) -> None:
    scorer = LEGACY_PRIORITIES[name].scorer
    assert scorer.cls is NodeResourcesFit and scorer.name == plugin_name
    assert scorer.args["scoringStrategy"]["type"] == strategy
    assert NodeResourcesFit.new(scorer.args).strategy.type == strategy


def test_service_spreading_is_selector_spread_over_services_only() -> None:
    scorer = LEGACY_PRIORITIES["ServiceSpreadingPriority"].scorer
    assert scorer.cls is SelectorSpread and dict(scorer.args) == {"servicesOnly": True}


@pytest.mark.parametrize(
    "kind", [*registry.ARGUMENT_PREDICATES.values(), *registry.ARGUMENT_PRIORITIES.values()], ids=lambda k: k.key
)
def test_argument_style_translations_build_their_plugin(kind: registry.ArgumentKind) -> None:
    sample = {
        "labels": ["a", "b"], "presence": True, "label": "a",
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
        "resources": [{"name": "cpu", "weight": 2}],
    }  # fmt: skip
    raw = kind.translate({k: sample[k] for k in kind.fields})
    plugin = kind.cls.new(raw)
    assert isinstance(plugin, kind.cls)


def test_default_provider_is_v19() -> None:
    p = PROVIDERS["DefaultProvider"]
    assert set(p.predicates) == {
        "NoVolumeZoneConflict", "MaxEBSVolumeCount", "MaxGCEPDVolumeCount", "MaxAzureDiskVolumeCount",
        "MatchInterPodAffinity", "NoDiskConflict", "GeneralPredicates", "CheckNodeMemoryPressure",
        "CheckNodeDiskPressure", "CheckNodeCondition", "PodToleratesNodeTaints", "CheckVolumeBinding",
    }  # fmt: skip
    assert dict(p.priorities) == {
        "SelectorSpreadPriority": 1, "InterPodAffinityPriority": 1, "LeastRequestedPriority": 1,
        "BalancedResourceAllocation": 1, "NodePreferAvoidPodsPriority": 10000, "NodeAffinityPriority": 1,
        "TaintTolerationPriority": 1,
    }  # fmt: skip
    assert "ImageLocalityPriority" not in dict(p.priorities)


def test_cluster_autoscaler_provider_swaps_least_for_most_requested() -> None:
    d, ca = PROVIDERS["DefaultProvider"], PROVIDERS["ClusterAutoscalerProvider"]
    assert ca.predicates == d.predicates
    expected = dict(d.priorities)
    del expected["LeastRequestedPriority"]
    expected["MostRequestedPriority"] = 1
    assert dict(ca.priorities) == expected


def test_filter_order_covers_every_in_tree_filter() -> None:
    filters = {cls for cls in registry.IN_TREE if issubclass(cls, FilterPlugin)}
    assert filters == set(registry.FILTER_ORDER)
    assert len(set(registry.FILTER_ORDER)) == len(registry.FILTER_ORDER)


def test_filter_order_follows_upstream_default_profile() -> None:
    # v1.37 default MultiPoint order for the plugins that still exist
    upstream = ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
                "InterPodAffinity", "DynamicResources"]  # fmt: skip
    ours = [cls.NAME for cls in registry.FILTER_ORDER if cls.NAME in upstream]
    assert ours == upstream == [cls.NAME for cls in registry.DEFAULT_PROFILE.filters]
    assert registry.FILTER_ORDER[0].NAME == "CheckNodeCondition"
    assert registry.FILTER_ORDER[-1].NAME == "DynamicResources"  # applyDynamicResources appends it


@pytest.mark.parametrize(
    "typo,expected",
    [
        pytest.param("PodFitResources", "PodFitsResources", id="missing s"),
        pytest.param("LeastRequestPriority", "LeastRequestedPriority", id="missing ed"),
        pytest.param("NodeAfinity", "NodeAffinity", id="one f"),
        pytest.param("generalpredicate", "GeneralPredicates", id="case and plural"),
        pytest.param("TaintTolerationPriorty", "TaintTolerationPriority", id="transposed"),
        pytest.param("Zzzzzz", None, id="nothing close"),
    ],
)
def test_suggestions(typo: str, expected: str | None) -> None:
    assert closest(typo, [*IN_TREE.predicate_names(), *IN_TREE.priority_names()]) == expected


@pytest.mark.parametrize(
    "name,canonical",
    [
        pytest.param("podfitsresources", "PodFitsResources", id="lower"),
        pytest.param("GENERALPREDICATES", "GeneralPredicates", id="upper"),
    ],
)
def test_legacy_lookup_is_case_insensitive(name: str, canonical: str) -> None:
    entry = registry.lookup_legacy_predicate(name)
    assert entry is not None and entry.name == canonical


def test_plugin_lookup_is_case_insensitive() -> None:
    assert IN_TREE.filter_plugin("nodeResourcesFit") is NodeResourcesFit
    assert IN_TREE.filter_plugin("Nope") is None
    assert IN_TREE.filter_plugin("NodeResourcesBalancedAllocation") is None  # a scorer only
    assert registry.lookup_legacy_priority("PodFitsResources") is None
    assert registry.lookup_provider("defaultprovider") is PROVIDERS["DefaultProvider"]


@pytest.mark.parametrize("cls", registry.IN_TREE, ids=lambda c: c.NAME)
def test_every_in_tree_plugin_builds_with_defaults_and_a_name(cls: type[Plugin]) -> None:
    assert cls.new(None, name="probe").name == "probe"
    assert cls().name == cls.NAME


# ----------------------------------------------------------------------------- extension


class _Cheap(ScorePlugin):
    NAME = "Cheap"

    def score(self, state: object, pod: object, node: object) -> int:  # type: ignore[override]
        return 1


class _Clash(ScorePlugin):
    NAME = "NodeAffinity"

    def score(self, state: object, pod: object, node: object) -> int:  # type: ignore[override]
        return 1


def test_extended_registry_adds_out_of_tree_plugins() -> None:
    extended = IN_TREE.extended([(_Cheap, "pkg:Cheap")])
    assert extended.score_plugin("cheap") is _Cheap
    assert extended.out_of_tree() == ["Cheap"]
    assert IN_TREE.score_plugin("Cheap") is None  # the in-tree registry is unchanged


@pytest.mark.parametrize(
    "plugin, problem",
    [
        pytest.param(_Clash, "already taken", id="a built-in name"),
        pytest.param(int, "not a kopf_scheduler.framework.Plugin", id="not a plugin"),
    ],
)
def test_extended_registry_reports_what_it_cannot_register(plugin: type, problem: str) -> None:
    extended = IN_TREE.extended([(plugin, "pkg:X")])
    assert any(problem in text for text in extended.problems.values())
    assert extended.score_plugin("NodeAffinity") is IN_TREE.score_plugin("NodeAffinity")
