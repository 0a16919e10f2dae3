"""The registry: every name, aliases, providers as v1.9, filter order, suggestions, plugin resolution."""

from __future__ import annotations

import pytest

from kopf_scheduler.core import registry
from kopf_scheduler.core.registry import PREDICATES, PRIORITIES, PROVIDERS

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
MODERN = [
    "NodeUnschedulable", "NodeName", "NodePorts", "NodeAffinity", "NodeResourcesFit", "NodeResourcesBalancedAllocation",
    "TaintToleration", "InterPodAffinity", "ImageLocality", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits",
    "EBSLimits", "GCEPDLimits", "AzureDiskLimits", "VolumeBinding", "SelectorSpread", "NodeLabel", "ServiceAffinity",
    "NodePreferAvoidPods", "NodeResourceLimits",
]  # fmt: skip


@pytest.mark.parametrize("name", V19_PREDICATES)
def test_every_v19_predicate_is_registered(name: str) -> None:
    entry = PREDICATES[name]
    assert entry.legacy and entry.filters and entry.scorer is None


@pytest.mark.parametrize("name,weight", list(V19_PRIORITIES.items()))
def test_every_v19_priority_has_its_default_weight(name: str, weight: int) -> None:
    entry = PRIORITIES[name]
    assert entry.legacy and entry.scorer is not None
    assert entry.weight == weight


@pytest.mark.parametrize("name", MODERN)
def test_every_modern_name_is_registered(name: str) -> None:
    assert name in PREDICATES or name in PRIORITIES
    assert name in registry.MODERN_NAMES


def _targets(name: str) -> set[tuple[str, str | None]]:
    return {r.key for r in PREDICATES[name].filters}


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
        pytest.param("MatchInterPodAffinity", "InterPodAffinity", id="MatchInterPodAffinity"),
        pytest.param("PodToleratesNodeTaints", "TaintToleration", id="PodToleratesNodeTaints"),
        pytest.param("CheckNodeUnschedulable", "NodeUnschedulable", id="CheckNodeUnschedulable"),
        pytest.param("CheckVolumeBinding", "VolumeBinding", id="CheckVolumeBinding"),
    ],
)
def test_predicate_aliases_map_to_the_same_plugin(alias: str, name: str) -> None:
    assert _targets(alias) == _targets(name)


def test_general_predicates_is_fit_name_ports_affinity() -> None:
    assert _targets("GeneralPredicates") == (
        _targets("NodeResourcesFit") | _targets("NodeName") | _targets("NodePorts") | _targets("NodeAffinity")
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
    a, b = PRIORITIES[legacy].scorer, PRIORITIES[modern].scorer
    assert a is not None and b is not None
    assert a.key == b.key and dict(a.args) == dict(b.args)
    assert PRIORITIES[legacy].weight == PRIORITIES[modern].weight


@pytest.mark.parametrize(
    "name,plugin_name,strategy",
    [
        # upstream v1.19-1.22 ran these as their own plugins; we keep those names on NodeResourcesFit instances
        pytest.param("LeastRequestedPriority", "NodeResourcesLeastAllocated", "LeastAllocated", id="least"),
        pytest.param("MostRequestedPriority", "NodeResourcesMostAllocated", "MostAllocated", id="most"),
        pytest.param("RequestedToCapacityRatioPriority", "RequestedToCapacityRatio", "RequestedToCapacityRatio", id="rtcr"),
    ],
)
def test_resource_priorities_are_node_resources_fit_strategies(name: str, plugin_name: str, strategy: str) -> None:
    scorer = PRIORITIES[name].scorer
    assert scorer is not None
    assert scorer.target == registry.NODE_RESOURCES_FIT
    assert scorer.name == plugin_name
    assert scorer.args["scoringStrategy"]["type"] == strategy


def test_service_spreading_is_selector_spread_over_services_only() -> None:
    scorer = PRIORITIES["ServiceSpreadingPriority"].scorer
    assert scorer is not None and scorer.target == registry.SELECTOR_SPREAD
    assert dict(scorer.args) == {"servicesOnly": True}


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


def test_filter_order_covers_every_filter_slot() -> None:
    slots = {r.slot for e in PREDICATES.values() for r in e.filters}
    slots |= {k.slot for k in registry.ARGUMENT_PREDICATES.values()}
    assert slots <= set(registry.FILTER_ORDER)
    assert len(set(registry.FILTER_ORDER)) == len(registry.FILTER_ORDER)


def test_filter_order_follows_upstream_default_profile() -> None:
    # v1.37 default MultiPoint order for the plugins that still exist
    upstream = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                "VolumeRestrictions", "EBSLimits", "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits",
                "VolumeBinding", "VolumeZone", "InterPodAffinity"]  # fmt: skip
    ours = [s for s in registry.FILTER_ORDER if s in upstream]
    assert ours == upstream
    assert registry.FILTER_ORDER[0] == "CheckNodeCondition"
    assert registry.FILTER_ORDER[-1] == "InterPodAffinity"


@pytest.mark.parametrize(
    "typo,expected",
    [
        pytest.param("PodFitResources", "PodFitsResources", id="missing s"),
        pytest.param("LeastRequestPriority", "LeastRequestedPriority", id="missing ed"),
        pytest.param("NodeAfinity", "NodeAffinity", id="one f"),
        pytest.param("generalpredicate", "GeneralPredicates", id="case and plural"),
        pytest.param("TaintTolerationPriorty", "TaintTolerationPriority", id="transposed"),
        pytest.param("DefaultProvder", "DefaultProvider", id="provider"),
        pytest.param("Zzzzzz", None, id="nothing close"),
    ],
)
def test_suggest(typo: str, expected: str | None) -> None:
    assert registry.suggest(typo) == expected


@pytest.mark.parametrize(
    "name,canonical",
    [
        pytest.param("podfitsresources", "PodFitsResources", id="lower"),
        pytest.param("GENERALPREDICATES", "GeneralPredicates", id="upper"),
        pytest.param("nodeResourcesFit", "NodeResourcesFit", id="camel"),
    ],
)
def test_lookup_is_case_insensitive(name: str, canonical: str) -> None:
    entry = registry.lookup_predicate(name)
    assert entry is not None and entry.name == canonical


def test_lookups_of_unknown_names() -> None:
    assert registry.lookup_predicate("Nope") is None
    assert registry.lookup_priority("PodFitsResources") is None
    assert registry.lookup_provider("defaultprovider") is PROVIDERS["DefaultProvider"]


def test_registry_imports_without_plugins() -> None:
    # the table is strings only; nothing is imported until resolve()
    assert all(":" in t for t in registry.all_targets())


@pytest.mark.parametrize("target", registry.all_targets())
def test_every_target_resolves_to_a_plugin_class(target: str) -> None:
    cls = registry.resolve(target)
    plugin = cls(None, name="probe")
    assert plugin.name == "probe"
    default = cls()
    assert isinstance(default.name, str) and default.name
