"""The one list of scheduling names: every plugin class, every v1.9 predicate / priority name, the providers.

Reference: upstream ``pkg/scheduler/framework/plugins/registry.go`` (plugin name -> factory) and, for
the v1.9 names, ``pkg/scheduler/framework/plugins/legacy_registry.go`` (v1.19-v1.22), which turned
a Policy name into framework plugins + arguments + weight; v1.9 ``algorithmprovider/defaults``
for the two providers.

Shape:

- ``IN_TREE`` lists the plugin classes by symbol; each carries its ``NAME`` (written once, on the
  class). A ``Registry`` maps names to classes; ``Registry.in_tree()`` holds ours, and
  ``kopf_scheduler.edge.plugins`` adds the out-of-tree plugins installed through the
  ``kopf_scheduler.plugins`` entry-point group (discovery is I/O, so it happens at the edge).
- A plugin name listed in a policy's ``predicates`` enables the class's filter (it must be a
  ``FilterPlugin``), in ``priorities`` its score (a ``ScorePlugin``), with the policy's weight or the
  class's ``DEFAULT_WEIGHT``. No table is needed for those names.
- ``LEGACY_PREDICATES`` / ``LEGACY_PRIORITIES`` map each v1.9 name to the plugin instances it
  enables (``GeneralPredicates`` enables four) and, for priorities, a default weight.
- Instance naming (decision): an instance is named by its class's ``NAME`` except (a) argument-style
  v1.9 entries, named by the user (as in v1.9), and (b) the legacy resource priorities that upstream
  v1.19-1.22 ran as plugins of their own: LeastRequestedPriority -> ``NodeResourcesLeastAllocated``,
  MostRequestedPriority -> ``NodeResourcesMostAllocated``, RequestedToCapacityRatioPriority ->
  ``RequestedToCapacityRatio`` (all NodeResourcesFit with a scoring strategy). Entries resolving to
  the same (class, name) share one instance, so GeneralPredicates + PodFitsResources build one
  NodeResourcesFit filter, and MatchInterPodAffinity + InterPodAffinityPriority one InterPodAffinity.
- Names are matched case-insensitively and normalised to the canonical spelling; v1.9 was
  case-sensitive, but a case slip is never a different plugin, so we accept it.
- A QueueSort plugin (``QueueSortPlugin``, upstream's queueSort extension point) is named in a
  policy's ``spec.queueSort``; PrioritySort, in ``IN_TREE``, is every profile's default.
- ``FILTER_ORDER`` is the evaluation order of the in-tree filters, whatever order a policy lists
  them; out-of-tree filters follow, in the policy's order.
- Argument-style v1.9 names (any user-chosen name with ``argument.labelsPresence`` etc.) are in
  ``ARGUMENT_PREDICATES`` / ``ARGUMENT_PRIORITIES``: which plugin each argument key builds and how
  its fields translate into the plugin's arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..framework.arguments import PluginArgsError
from ..framework.interface import FilterPlugin, Plugin, QueueSortPlugin, ScorePlugin
from ..plugins.balanced_allocation import NodeResourcesBalancedAllocation
from ..plugins.coscheduling import Coscheduling
from ..plugins.default_binder import DefaultBinder
from ..plugins.default_preemption import DefaultPreemption
from ..plugins.dynamic_resources import DynamicResources
from ..plugins.equal_priority import EqualPriority
from ..plugins.gang_scheduling import GangScheduling
from ..plugins.image_locality import ImageLocality
from ..plugins.inter_pod_affinity import InterPodAffinity
from ..plugins.load_variation_risk_balancing import LoadVariationRiskBalancing
from ..plugins.node_affinity import NodeAffinity
from ..plugins.node_conditions import (
    CheckNodeCondition,
    CheckNodeDiskPressure,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
    PodToleratesNodeNoExecuteTaints,
)
from ..plugins.node_label import NodeLabel
from ..plugins.node_name import NodeName
from ..plugins.node_ports import NodePorts
from ..plugins.node_prefer_avoid_pods import NodePreferAvoidPods
from ..plugins.node_resources_fit import NodeResourcesFit
from ..plugins.node_unschedulable import NodeUnschedulable
from ..plugins.node_volume_limits import AzureDiskLimits, EBSLimits, GCEPDLimits, NodeVolumeLimits
from ..plugins.pod_topology_spread import PodTopologySpread
from ..plugins.priority_sort import PrioritySort
from ..plugins.resource_limits import NodeResourceLimits
from ..plugins.selector_spread import SelectorSpread
from ..plugins.service_affinity import ServiceAffinity
from ..plugins.taint_toleration import TaintToleration
from ..plugins.target_load_packing import TargetLoadPacking
from ..plugins.volume_binding import VolumeBinding
from ..plugins.volume_restrictions import VolumeRestrictions
from ..plugins.volume_zone import VolumeZone

#: v1.9 weights must be > 0; the upper bound is ours (v1.9: MaxInt/10). With scores <= 100 and a few
#: dozen scorers, 10^6 keeps every total far inside int64 while allowing NodePreferAvoidPods' 10000.
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 1_000_000

DEFAULT_PROVIDER: Final = "DefaultProvider"
CLUSTER_AUTOSCALER_PROVIDER: Final = "ClusterAutoscalerProvider"

#: The plugins that ship with kopf-scheduler, by symbol.
IN_TREE: Final[tuple[type[Plugin], ...]] = (
    NodeResourcesFit,
    NodeResourcesBalancedAllocation,
    NodeResourceLimits,
    NodeUnschedulable,
    NodeName,
    NodePorts,
    NodeAffinity,
    TaintToleration,
    CheckNodeCondition,
    CheckNodeMemoryPressure,
    CheckNodeDiskPressure,
    CheckNodePIDPressure,
    PodToleratesNodeNoExecuteTaints,
    NodeLabel,
    NodePreferAvoidPods,
    ImageLocality,
    EqualPriority,
    InterPodAffinity,
    PodTopologySpread,
    SelectorSpread,
    ServiceAffinity,
    VolumeRestrictions,
    VolumeZone,
    NodeVolumeLimits,
    EBSLimits,
    GCEPDLimits,
    AzureDiskLimits,
    VolumeBinding,
    DynamicResources,
    DefaultPreemption,
    GangScheduling,
    Coscheduling,
    PrioritySort,
    DefaultBinder,
    TargetLoadPacking,
    LoadVariationRiskBalancing,
)

#: The gang plugins (both PodGroup APIs; ``core/toolkit/gangs.py``): enabled in every profile by
#: ``spec.gangScheduling`` (default on, as upstream's default profile has GangScheduling with the
#: GenericWorkload gate on), as PreFilter (they have no Filter), Reserve and Permit plugins;
#: not predicate names.
GANG_PLUGINS: Final[tuple[type[Plugin], ...]] = (GangScheduling, Coscheduling)

#: Evaluation order of the in-tree filters (the first rejection decides a node's status).
#: Decision: upstream v1.37's default MultiPoint order for the plugins that still exist
#: (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
#: VolumeRestrictions, EBS/GCEPD limits, NodeVolumeLimits, AzureDisk limits, VolumeBinding,
#: VolumeZone, PodTopologySpread, InterPodAffinity), because that peer is what our diagnoses are compared with; the
#: v1.9-only filters sit where the ordered legacy evaluation (legacy_registry.go predicateOrdering)
#: put them relative to those: CheckNodeCondition first; NoExecute taints right after
#: TaintToleration; NodeLabel and ServiceAffinity after VolumeRestrictions, before the volume
#: limits; memory/PID/disk pressure after VolumeZone, before InterPodAffinity (the most expensive
#: filter stays last). Out-of-tree filters run after all of these.
FILTER_ORDER: Final[tuple[type[FilterPlugin], ...]] = (
    CheckNodeCondition,
    NodeName,
    NodeUnschedulable,
    TaintToleration,
    PodToleratesNodeNoExecuteTaints,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeRestrictions,
    NodeLabel,
    ServiceAffinity,
    EBSLimits,
    GCEPDLimits,
    NodeVolumeLimits,
    AzureDiskLimits,
    VolumeBinding,
    VolumeZone,
    CheckNodeMemoryPressure,
    CheckNodePIDPressure,
    CheckNodeDiskPressure,
    PodTopologySpread,
    InterPodAffinity,
    DynamicResources,
)
_FILTER_RANK: Final[Mapping[type[Plugin], int]] = {cls: i for i, cls in enumerate(FILTER_ORDER)}


def filter_rank(cls: type[Plugin]) -> int:
    """Position of a filter class in ``FILTER_ORDER`` (out-of-tree classes sort last, stably)."""
    return _FILTER_RANK.get(cls, len(FILTER_ORDER))


# ----------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin instance to build: class, instance name (None = the class's NAME), fixed raw args."""

    cls: type[Plugin]
    name: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[type[Plugin], str]:
        """Entries with the same key share one live instance."""
        return (self.cls, self.name or self.cls.NAME)

    @property
    def instance_name(self) -> str:
        return self.name or self.cls.NAME


@dataclass(frozen=True, slots=True)
class LegacyPredicate:
    """A v1.9 predicate name and the filter plugins it enables."""

    name: str
    filters: tuple[PluginRef, ...]
    #: another v1.9 name this one is an alias of (for documentation and tests)
    alias_of: str = ""


@dataclass(frozen=True, slots=True)
class LegacyPriority:
    """A v1.9 priority name, the score plugin it enables and its default weight."""

    name: str
    scorer: PluginRef
    weight: int = 1
    alias_of: str = ""


def _resources_strategy(kind: str) -> dict[str, Any]:
    return {
        "scoringStrategy": {"type": kind, "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    }


def rtcr_args(argument: Mapping[str, Any]) -> dict[str, Any]:
    """Policy ``requestedToCapacityRatioArguments {shape, resources}`` -> NodeResourcesFit args."""
    strategy: dict[str, Any] = {"type": "RequestedToCapacityRatio"}
    strategy["resources"] = argument.get("resources", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}])
    strategy["requestedToCapacityRatio"] = {"shape": argument.get("shape", [])}
    return {"scoringStrategy": strategy}


#: upstream v1.15+ default shape when RequestedToCapacityRatioPriority has no argument (least-requested-like)
DEFAULT_RTCR_SHAPE: Final = ({"utilization": 0, "score": 10}, {"utilization": 100, "score": 0})
RTCR_NAME: Final = "RequestedToCapacityRatio"

_FIT = PluginRef(NodeResourcesFit)
_NAME = PluginRef(NodeName)
_PORTS = PluginRef(NodePorts)
_AFFINITY = PluginRef(NodeAffinity)
_LEAST = PluginRef(NodeResourcesFit, "NodeResourcesLeastAllocated", _resources_strategy("LeastAllocated"))
_MOST = PluginRef(NodeResourcesFit, "NodeResourcesMostAllocated", _resources_strategy("MostAllocated"))
_RTCR = PluginRef(NodeResourcesFit, RTCR_NAME, rtcr_args({"shape": [dict(p) for p in DEFAULT_RTCR_SHAPE]}))

_LEGACY_PREDICATE_LIST: Final = (
    LegacyPredicate("PodFitsResources", (_FIT,)),
    LegacyPredicate("HostName", (_NAME,)),
    LegacyPredicate("PodFitsHost", (_NAME,), alias_of="HostName"),
    LegacyPredicate("PodFitsHostPorts", (_PORTS,)),
    LegacyPredicate("PodFitsPorts", (_PORTS,), alias_of="PodFitsHostPorts"),
    LegacyPredicate("MatchNodeSelector", (_AFFINITY,)),
    LegacyPredicate("GeneralPredicates", (_FIT, _NAME, _PORTS, _AFFINITY)),
    LegacyPredicate("NoDiskConflict", (PluginRef(VolumeRestrictions),)),
    LegacyPredicate("NoVolumeZoneConflict", (PluginRef(VolumeZone),)),
    LegacyPredicate("MaxEBSVolumeCount", (PluginRef(EBSLimits),)),
    LegacyPredicate("MaxGCEPDVolumeCount", (PluginRef(GCEPDLimits),)),
    LegacyPredicate("MaxAzureDiskVolumeCount", (PluginRef(AzureDiskLimits),)),
    LegacyPredicate("MaxCSIVolumeCountPred", (PluginRef(NodeVolumeLimits),)),
    LegacyPredicate("MatchInterPodAffinity", (PluginRef(InterPodAffinity),)),
    LegacyPredicate("PodToleratesNodeTaints", (PluginRef(TaintToleration),)),
    LegacyPredicate("CheckNodeUnschedulable", (PluginRef(NodeUnschedulable),)),
    LegacyPredicate("CheckVolumeBinding", (PluginRef(VolumeBinding),)),
)

_LEGACY_PRIORITY_LIST: Final = (
    LegacyPriority("LeastRequestedPriority", _LEAST),
    LegacyPriority("MostRequestedPriority", _MOST),
    LegacyPriority("RequestedToCapacityRatioPriority", _RTCR),
    LegacyPriority("BalancedResourceAllocation", PluginRef(NodeResourcesBalancedAllocation)),
    LegacyPriority("SelectorSpreadPriority", PluginRef(SelectorSpread)),
    LegacyPriority("ServiceSpreadingPriority", PluginRef(SelectorSpread, "ServiceSpreading", {"servicesOnly": True})),
    LegacyPriority("InterPodAffinityPriority", PluginRef(InterPodAffinity)),
    LegacyPriority("NodeAffinityPriority", PluginRef(NodeAffinity)),
    LegacyPriority("TaintTolerationPriority", PluginRef(TaintToleration)),
    LegacyPriority("NodePreferAvoidPodsPriority", PluginRef(NodePreferAvoidPods), NodePreferAvoidPods.DEFAULT_WEIGHT),
    LegacyPriority("ImageLocalityPriority", PluginRef(ImageLocality)),
    LegacyPriority("ResourceLimitsPriority", PluginRef(NodeResourceLimits)),
)

#: v1.9 predicate / priority names that are not also plugin names (those resolve through the registry).
LEGACY_PREDICATES: Final[Mapping[str, LegacyPredicate]] = {e.name: e for e in _LEGACY_PREDICATE_LIST}
LEGACY_PRIORITIES: Final[Mapping[str, LegacyPriority]] = {e.name: e for e in _LEGACY_PRIORITY_LIST}

#: Plugins whose NAME is itself a v1.9 predicate or priority name: listing them makes a policy
#: v1.9-style (mandatory predicates, EqualPriority when no priority is given) like the names above.
V19_PLUGIN_NAMES: Final = frozenset(
    cls.NAME
    for cls in (
        CheckNodeCondition,
        CheckNodeMemoryPressure,
        CheckNodeDiskPressure,
        CheckNodePIDPressure,
        PodToleratesNodeNoExecuteTaints,
        EqualPriority,
    )
)


def is_v19_name(name: str) -> bool:
    """Whether ``name`` (canonical spelling) belongs to the v1.9 Policy vocabulary."""
    return name in LEGACY_PREDICATES or name in LEGACY_PRIORITIES or name in V19_PLUGIN_NAMES


#: Where ``argument.resources`` goes in a resource plugin's arguments: the SchedulingPolicy CRD lets
#: resource-based priorities (v1.9 names and plugin names) choose their resources and weights.
RESOURCES_ARGUMENT: Final[Mapping[type[Plugin], str]] = {
    NodeResourcesFit: "scoringStrategy.resources",
    NodeResourcesBalancedAllocation: "resources",
}


def with_resources(args: Mapping[str, Any], where: str, resources: Any) -> dict[str, Any]:
    """``args`` with ``resources`` placed at the dotted path ``where`` (copying what it changes)."""
    out = dict(args)
    head, _, rest = where.partition(".")
    if rest:
        inner = out.get(head)
        out[head] = with_resources(inner if isinstance(inner, Mapping) else {}, rest, resources)
    else:
        out[head] = resources
    return out


# ----------------------------------------------------------------------------- argument-style names


@dataclass(frozen=True, slots=True)
class ArgumentKind:
    """A v1.9 argument key (``labelsPresence`` ...): the plugin it builds and how its fields translate."""

    key: str
    cls: type[Plugin]
    #: the fields the v1.9 argument object may have
    fields: tuple[str, ...]
    #: v1.9 argument object -> the plugin's raw arguments (``PluginArgsError`` at a v1.9 field)
    translate: Callable[[Mapping[str, Any]], dict[str, Any]]
    #: (plugin argument path prefix, v1.9 field) pairs, to report plugin errors at the v1.9 field
    field_map: tuple[tuple[str, str], ...]
    #: instance name; None = the policy entry's own name (v1.9: user-chosen)
    fixed_name: str | None = None


def _presence(a: Mapping[str, Any]) -> bool:
    presence = a.get("presence", False)
    if not isinstance(presence, bool):
        raise PluginArgsError("presence", f"must be a boolean, not {presence!r}")
    return presence


def _labels_presence(a: Mapping[str, Any]) -> dict[str, Any]:
    return {"presentLabels" if _presence(a) else "absentLabels": a.get("labels", [])}


def _label_preference(a: Mapping[str, Any]) -> dict[str, Any]:
    return {"presentLabelsPreference" if _presence(a) else "absentLabelsPreference": [a.get("label")]}


ARGUMENT_PREDICATES: Final[Mapping[str, ArgumentKind]] = {
    "serviceAffinity": ArgumentKind(
        "serviceAffinity",
        ServiceAffinity,
        ("labels",),
        lambda a: {"affinityLabels": a.get("labels", [])},
        (("affinityLabels", "labels"),),
    ),
    "labelsPresence": ArgumentKind(
        "labelsPresence",
        NodeLabel,
        ("labels", "presence"),
        _labels_presence,
        (("presentLabels", "labels"), ("absentLabels", "labels")),
    ),
}
ARGUMENT_PRIORITIES: Final[Mapping[str, ArgumentKind]] = {
    "serviceAntiAffinity": ArgumentKind(
        "serviceAntiAffinity",
        ServiceAffinity,
        ("label",),
        lambda a: {"antiAffinityLabelsPreference": [a.get("label")]},
        (("antiAffinityLabelsPreference[0]", "label"), ("antiAffinityLabelsPreference", "label")),
    ),
    "labelPreference": ArgumentKind(
        "labelPreference",
        NodeLabel,
        ("label", "presence"),
        _label_preference,
        (("presentLabelsPreference[0]", "label"), ("absentLabelsPreference[0]", "label")),
    ),
    "requestedToCapacityRatioArguments": ArgumentKind(
        "requestedToCapacityRatioArguments",
        NodeResourcesFit,
        ("shape", "resources"),
        rtcr_args,
        (("scoringStrategy.requestedToCapacityRatio.shape", "shape"), ("scoringStrategy.resources", "resources")),
        fixed_name=RTCR_NAME,
    ),
}


# ----------------------------------------------------------------------------- today's default profile


@dataclass(frozen=True, slots=True)
class PluginProfile:
    """A profile written with plugin names: its filters (in ``FILTER_ORDER``) and weighted scores."""

    name: str
    filters: tuple[type[Plugin], ...]
    scores: tuple[tuple[type[Plugin], int], ...]


#: Upstream v1.37's default profile (pkg/scheduler/apis/config/v1/default_plugins.go): its MultiPoint
#: plugins that filter or score, with their weights. Not here: PrioritySort (every profile's QueueSort
#: unless ``spec.queueSort`` names another), SchedulingGates (our queue holds gated pods),
#: DefaultPreemption (added to every profile unless ``preemption: false``, after the profile's own
#: PostFilter plugins: DynamicResources first, as upstream's ``applyDynamicResources`` puts it),
#: DefaultBinder (every profile's last Bind plugin), and the default-on plugins that pass every pod
#: this scheduler can see (NodeDeclaredFeatures without declared features, GangScheduling without a
#: Workload). DynamicResources (DynamicResourceAllocation, on by default) sits where upstream inserts
#: it, before DefaultPreemption: after InterPodAffinity as a filter, with weight 2 as a scorer.
DEFAULT_PROFILE: Final = PluginProfile(
    "the v1.37 default profile",
    filters=(
        NodeName,
        NodeUnschedulable,
        TaintToleration,
        NodeAffinity,
        NodePorts,
        NodeResourcesFit,
        VolumeRestrictions,
        NodeVolumeLimits,
        VolumeBinding,
        VolumeZone,
        PodTopologySpread,
        InterPodAffinity,
        DynamicResources,
    ),
    scores=(
        (TaintToleration, 3),
        (NodeAffinity, 2),
        (NodeResourcesFit, 1),
        (VolumeBinding, 1),  # its capacity score (StorageCapacityScoring, beta and on in v1.37)
        (PodTopologySpread, 2),
        (InterPodAffinity, 2),
        (DynamicResources, 2),
        (NodeResourcesBalancedAllocation, 1),
        (ImageLocality, 1),
    ),
)


# ----------------------------------------------------------------------------- providers

#: v1.9 DefaultProvider / ClusterAutoscalerProvider (algorithmprovider/defaults/defaults.go).
_DEFAULT_PREDICATES: Final = (
    "NoVolumeZoneConflict",
    "MaxEBSVolumeCount",
    "MaxGCEPDVolumeCount",
    "MaxAzureDiskVolumeCount",
    "MatchInterPodAffinity",
    "NoDiskConflict",
    "GeneralPredicates",
    "CheckNodeMemoryPressure",
    "CheckNodeDiskPressure",
    "CheckNodeCondition",
    "PodToleratesNodeTaints",
    "CheckVolumeBinding",
)
_DEFAULT_PRIORITIES: Final = (
    ("SelectorSpreadPriority", 1),
    ("InterPodAffinityPriority", 1),
    ("LeastRequestedPriority", 1),
    ("BalancedResourceAllocation", 1),
    ("NodePreferAvoidPodsPriority", 10000),
    ("NodeAffinityPriority", 1),
    ("TaintTolerationPriority", 1),
)


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    predicates: tuple[str, ...]
    priorities: tuple[tuple[str, int], ...]


PROVIDERS: Final[Mapping[str, Provider]] = {
    DEFAULT_PROVIDER: Provider(DEFAULT_PROVIDER, _DEFAULT_PREDICATES, _DEFAULT_PRIORITIES),
    CLUSTER_AUTOSCALER_PROVIDER: Provider(
        CLUSTER_AUTOSCALER_PROVIDER,
        _DEFAULT_PREDICATES,
        tuple(
            ("MostRequestedPriority", w) if n == "LeastRequestedPriority" else (n, w) for n, w in _DEFAULT_PRIORITIES
        ),
    ),
}

#: v1.9: registered as mandatory and added to every configuration. Decision: added to provider
#: profiles and to policies that use any v1.9 name (or no names at all: v1.9's "no predicates"),
#: not to policies written only with modern plugin names (upstream's modern profiles have no
#: mandatory filter, and node conditions reach them as taints).
MANDATORY_PREDICATES: Final = (CheckNodeCondition.NAME,)


def lookup_provider(name: str) -> Provider | None:
    for key, provider in PROVIDERS.items():
        if key.lower() == name.lower():
            return provider
    return None


# ----------------------------------------------------------------------------- the registry


@dataclass(frozen=True, slots=True)
class Registry:
    """Plugin name -> class, with where each came from; the v1.9 tables are shared by every registry.

    ``origins`` says "built-in" or the entry point a plugin was loaded from; ``problems`` lists
    out-of-tree plugins that could not be loaded (reported when a policy names them).
    """

    plugins: Mapping[str, type[Plugin]]
    origins: Mapping[str, str] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def in_tree(cls) -> Registry:
        return _IN_TREE

    def extended(
        self, extra: Iterable[tuple[type[Plugin], str]], problems: Mapping[str, str] | None = None
    ) -> Registry:
        """This registry plus out-of-tree ``(class, origin)`` pairs; a clashing name is a problem, not a plugin."""
        plugins = dict(self.plugins)
        origins = dict(self.origins)
        found = dict(self.problems)
        found.update(problems or {})
        for plugin, origin in extra:
            name = getattr(plugin, "NAME", None)
            if not isinstance(plugin, type) or not issubclass(plugin, Plugin) or not isinstance(name, str) or not name:
                found[str(name or origin)] = f"{origin}: not a kopf_scheduler.framework.Plugin subclass with a NAME"
                continue
            clash = _find(plugins, name) or _find(LEGACY_PREDICATES, name) or _find(LEGACY_PRIORITIES, name)
            if clash is not None:
                found[name] = f"{origin}: the name {name!r} is already taken by {origins.get(clash, 'a v1.9 name')}"
                continue
            plugins[name] = plugin
            origins[name] = origin
        return Registry(plugins, origins, found)

    # ---- look-ups, case-insensitive

    def plugin(self, name: str) -> type[Plugin] | None:
        key = _find(self.plugins, name)
        return self.plugins[key] if key is not None else None

    def filter_plugin(self, name: str) -> type[Plugin] | None:
        cls = self.plugin(name)
        return cls if cls is not None and issubclass(cls, FilterPlugin) else None

    def score_plugin(self, name: str) -> type[Plugin] | None:
        cls = self.plugin(name)
        return cls if cls is not None and issubclass(cls, ScorePlugin) else None

    def queue_sort_plugin(self, name: str) -> type[QueueSortPlugin] | None:
        cls = self.plugin(name)
        return cls if cls is not None and issubclass(cls, QueueSortPlugin) else None

    def queue_sort_names(self) -> list[str]:
        return sorted(n for n, c in self.plugins.items() if issubclass(c, QueueSortPlugin))

    def problem(self, name: str) -> str | None:
        key = _find(self.problems, name)
        return self.problems[key] if key is not None else None

    def filter_names(self) -> list[str]:
        return sorted(n for n, c in self.plugins.items() if issubclass(c, FilterPlugin))

    def score_names(self) -> list[str]:
        return sorted(n for n, c in self.plugins.items() if issubclass(c, ScorePlugin))

    def out_of_tree(self) -> list[str]:
        return sorted(n for n, o in self.origins.items() if o != BUILT_IN)

    def predicate_names(self) -> list[str]:
        """Every name a policy may list under ``predicates``."""
        return sorted({*LEGACY_PREDICATES, *MANDATORY_PREDICATES, *self.filter_names()})

    def priority_names(self) -> list[str]:
        """Every name a policy may list under ``priorities``."""
        return sorted({*LEGACY_PRIORITIES, *self.score_names()})


BUILT_IN: Final = "built-in"


def _find(table: Mapping[str, Any], name: str) -> str | None:
    if name in table:
        return name
    low = name.lower()
    return next((k for k in table if k.lower() == low), None)


def _check_in_tree() -> Registry:
    plugins: dict[str, type[Plugin]] = {}
    for cls in IN_TREE:
        if cls.NAME in plugins:
            raise RuntimeError(f"two in-tree plugins are named {cls.NAME!r}")
        plugins[cls.NAME] = cls
    for entry in _LEGACY_PREDICATE_LIST:
        if entry.name in plugins:
            raise RuntimeError(f"v1.9 predicate {entry.name!r} is also a plugin name")
    return Registry(plugins, dict.fromkeys(plugins, BUILT_IN))


_IN_TREE: Final = _check_in_tree()


def lookup_legacy_predicate(name: str) -> LegacyPredicate | None:
    key = _find(LEGACY_PREDICATES, name)
    return LEGACY_PREDICATES[key] if key is not None else None


def lookup_legacy_priority(name: str) -> LegacyPriority | None:
    key = _find(LEGACY_PRIORITIES, name)
    return LEGACY_PRIORITIES[key] if key is not None else None
