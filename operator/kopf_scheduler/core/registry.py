"""The one list of scheduling names: every v1.9 predicate / priority and every plugin name -> implementation.

Reference: upstream ``pkg/scheduler/framework/plugins/legacy_registry.go`` (v1.19-v1.22), which
turned a v1.9 Policy name into framework plugins + arguments + weight, and the v1.9
``algorithmprovider/defaults/defaults.go`` for the two algorithm providers.

Shape:

- ``PREDICATES`` and ``PRIORITIES`` map a canonical name to an ``Entry``. A predicate entry lists the
  filter plugins it enables (``GeneralPredicates`` enables four); a priority entry names one score
  plugin and its default weight. Modern plugin names appear in both tables when the plugin has both
  a filter and a score (NodeAffinity, TaintToleration, InterPodAffinity, NodeResourcesFit...).
- Plugins are referenced as ``"module:Class"`` strings under ``kopf_scheduler.core.plugins`` and
  imported lazily (``resolve``), so this module imports before every plugin module exists.
- Names are matched case-insensitively (``lookup``) and normalised to the canonical spelling; v1.9
  was case-sensitive, but a case slip is never a different plugin, so we accept it.
- ``FILTER_ORDER`` is the canonical evaluation order of filters, whatever order a policy lists them.
- Argument-style v1.9 names (any user-chosen name with ``argument.labelsPresence`` etc.) are not in
  the tables; ``ARGUMENT_PREDICATES`` / ``ARGUMENT_PRIORITIES`` say which plugin each argument key
  builds and how its fields map onto the plugin's arguments.

Instance naming (decision): a plugin instance is named by its class's ``NAME`` (the modern plugin
name), except (a) argument-style v1.9 entries, named by the user (as in v1.9), and (b) the legacy
resource priorities that upstream v1.19-1.22 ran as their own plugins: LeastRequestedPriority ->
``NodeResourcesLeastAllocated``, MostRequestedPriority -> ``NodeResourcesMostAllocated``,
RequestedToCapacityRatioPriority -> ``RequestedToCapacityRatio`` (all NodeResourcesFit with a
scoring strategy). Entries resolving to the same (class, name) share one instance, so
GeneralPredicates + PodFitsResources build one NodeResourcesFit filter, and MatchInterPodAffinity +
InterPodAffinityPriority one InterPodAffinity plugin.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

PLUGIN_PACKAGE: Final = "kopf_scheduler.core.plugins"

#: v1.9 weights must be > 0; the upper bound is ours (v1.9: MaxInt/10). With scores <= 100 and a few
#: dozen scorers, 10^6 keeps every total far inside int64 while allowing NodePreferAvoidPods' 10000.
MIN_WEIGHT: Final = 1
MAX_WEIGHT: Final = 1_000_000

DEFAULT_PROVIDER: Final = "DefaultProvider"
CLUSTER_AUTOSCALER_PROVIDER: Final = "ClusterAutoscalerProvider"

# ----------------------------------------------------------------------------- plugin targets

NODE_RESOURCES_FIT: Final = "node_resources_fit:NodeResourcesFit"
BALANCED_ALLOCATION: Final = "balanced_allocation:NodeResourcesBalancedAllocation"
RESOURCE_LIMITS: Final = "resource_limits:NodeResourceLimits"
NODE_UNSCHEDULABLE: Final = "node_unschedulable:NodeUnschedulable"
NODE_NAME: Final = "node_name:NodeName"
NODE_PORTS: Final = "node_ports:NodePorts"
NODE_AFFINITY: Final = "node_affinity:NodeAffinity"
TAINT_TOLERATION: Final = "taint_toleration:TaintToleration"
CHECK_NODE_CONDITION: Final = "node_conditions:CheckNodeCondition"
CHECK_NODE_MEMORY_PRESSURE: Final = "node_conditions:CheckNodeMemoryPressure"
CHECK_NODE_DISK_PRESSURE: Final = "node_conditions:CheckNodeDiskPressure"
CHECK_NODE_PID_PRESSURE: Final = "node_conditions:CheckNodePIDPressure"
NO_EXECUTE_TAINTS: Final = "node_conditions:PodToleratesNodeNoExecuteTaints"
NODE_LABEL_PRESENCE: Final = "node_label:CheckNodeLabelPresence"
NODE_LABEL_PRIORITY: Final = "node_label:NodeLabelPriority"
NODE_PREFER_AVOID_PODS: Final = "node_prefer_avoid_pods:NodePreferAvoidPods"
IMAGE_LOCALITY: Final = "image_locality:ImageLocality"
EQUAL_PRIORITY: Final = "equal_priority:EqualPriority"
INTER_POD_AFFINITY: Final = "inter_pod_affinity:InterPodAffinity"
SELECTOR_SPREAD: Final = "selector_spread:SelectorSpread"
SERVICE_AFFINITY: Final = "service_affinity:ServiceAffinity"
SERVICE_ANTI_AFFINITY: Final = "service_affinity:ServiceAffinity"  # one class: filter + score
VOLUME_RESTRICTIONS: Final = "volume_restrictions:VolumeRestrictions"
VOLUME_ZONE: Final = "volume_zone:VolumeZone"
NODE_VOLUME_LIMITS: Final = "node_volume_limits:NodeVolumeLimits"
EBS_LIMITS: Final = "node_volume_limits:EBSLimits"
GCEPD_LIMITS: Final = "node_volume_limits:GCEPDLimits"
AZURE_DISK_LIMITS: Final = "node_volume_limits:AzureDiskLimits"
VOLUME_BINDING: Final = "volume_binding:VolumeBinding"

#: Canonical filter order (a filter's "slot"; the first rejection decides a node's status).
#: Decision: upstream v1.37's default MultiPoint order for the plugins that still exist
#: (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
#: VolumeRestrictions, EBS/GCEPD limits, NodeVolumeLimits, AzureDisk limits, VolumeBinding,
#: VolumeZone, InterPodAffinity), because that peer is what our diagnoses are compared with; the
#: v1.9-only filters sit where the ordered legacy evaluation (legacy_registry.go predicateOrdering)
#: put them relative to those: CheckNodeCondition first; NoExecute taints right after
#: TaintToleration; CheckNodeLabelPresence and ServiceAffinity after VolumeRestrictions, before the
#: volume limits; memory/PID/disk pressure after VolumeZone, before InterPodAffinity (the
#: most expensive filter stays last). The legacy order differs in putting NodePorts before
#: NodeAffinity before NodeResourcesFit and TaintToleration after VolumeRestrictions.
FILTER_ORDER: Final[tuple[str, ...]] = (
    "CheckNodeCondition",
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "PodToleratesNodeNoExecuteTaints",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "CheckNodeLabelPresence",
    "ServiceAffinity",
    "EBSLimits",
    "GCEPDLimits",
    "NodeVolumeLimits",
    "AzureDiskLimits",
    "VolumeBinding",
    "VolumeZone",
    "CheckNodeMemoryPressure",
    "CheckNodePIDPressure",
    "CheckNodeDiskPressure",
    "InterPodAffinity",
)
_SLOT_RANK: Final = {slot: i for i, slot in enumerate(FILTER_ORDER)}


def filter_rank(slot: str) -> int:
    """Position of a filter slot in ``FILTER_ORDER`` (unknown slots sort last, stably)."""
    return _SLOT_RANK.get(slot, len(FILTER_ORDER))


# ----------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin instance to build: class, instance name (None = class NAME), fixed args, filter slot."""

    target: str
    name: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    slot: str = ""

    @property
    def key(self) -> tuple[str, str | None]:
        """Entries with the same key share one live instance."""
        return (self.target, self.name)


@dataclass(frozen=True, slots=True)
class Entry:
    """A registered predicate (``filters``) or priority (``scorer`` + ``weight``) name."""

    name: str
    filters: tuple[PluginRef, ...] = ()
    scorer: PluginRef | None = None
    weight: int = 1
    #: True for v1.9 Policy names, False for modern plugin names
    legacy: bool = True
    #: modern names pass ``argument`` to the plugin as its args; legacy names take none
    takes_args: bool = False
    #: another name this one is an alias of (for documentation and tests)
    alias_of: str = ""
    #: where an ``argument.resources`` list goes in the plugin's args ("" = not accepted); the
    #: SchedulingPolicy CRD lets resource-based priorities choose their resources and weights
    resources_arg: str = ""


def _f(target: str, slot: str, *, name: str | None = None, args: Mapping[str, Any] | None = None) -> PluginRef:
    return PluginRef(target, name, dict(args or {}), slot)


def _s(target: str, *, name: str | None = None, args: Mapping[str, Any] | None = None) -> PluginRef:
    return PluginRef(target, name, dict(args or {}), "")


_FIT = _f(NODE_RESOURCES_FIT, "NodeResourcesFit")
_NAME = _f(NODE_NAME, "NodeName")
_PORTS = _f(NODE_PORTS, "NodePorts")
_AFFINITY = _f(NODE_AFFINITY, "NodeAffinity")
_UNSCHED = _f(NODE_UNSCHEDULABLE, "NodeUnschedulable")
_TAINTS = _f(TAINT_TOLERATION, "TaintToleration")
_IPA = _f(INTER_POD_AFFINITY, "InterPodAffinity")
_RESTRICTIONS = _f(VOLUME_RESTRICTIONS, "VolumeRestrictions")
_ZONE = _f(VOLUME_ZONE, "VolumeZone")
_BINDING = _f(VOLUME_BINDING, "VolumeBinding")
_EBS = _f(EBS_LIMITS, "EBSLimits")
_GCEPD = _f(GCEPD_LIMITS, "GCEPDLimits")
_AZURE = _f(AZURE_DISK_LIMITS, "AzureDiskLimits")
_CSI = _f(NODE_VOLUME_LIMITS, "NodeVolumeLimits")
_CONDITION = _f(CHECK_NODE_CONDITION, "CheckNodeCondition")
_MEMORY = _f(CHECK_NODE_MEMORY_PRESSURE, "CheckNodeMemoryPressure")
_DISK = _f(CHECK_NODE_DISK_PRESSURE, "CheckNodeDiskPressure")
_PID = _f(CHECK_NODE_PID_PRESSURE, "CheckNodePIDPressure")
_NO_EXECUTE = _f(NO_EXECUTE_TAINTS, "PodToleratesNodeNoExecuteTaints")


def _resources_strategy(kind: str) -> dict[str, Any]:
    return {"scoringStrategy": {"type": kind, "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}


_LEAST = _s(NODE_RESOURCES_FIT, name="NodeResourcesLeastAllocated", args=_resources_strategy("LeastAllocated"))
_MOST = _s(NODE_RESOURCES_FIT, name="NodeResourcesMostAllocated", args=_resources_strategy("MostAllocated"))
_RTCR_NAME: Final = "RequestedToCapacityRatio"


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


def rtcr_args(argument: Mapping[str, Any]) -> dict[str, Any]:
    """Policy ``requestedToCapacityRatioArguments {shape, resources}`` -> NodeResourcesFit args."""
    strategy: dict[str, Any] = {"type": "RequestedToCapacityRatio"}
    if "resources" in argument:
        strategy["resources"] = argument["resources"]
    else:
        strategy["resources"] = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    strategy["requestedToCapacityRatio"] = {"shape": argument.get("shape", [])}
    return {"scoringStrategy": strategy}



#: upstream v1.15+ default shape when RequestedToCapacityRatioPriority has no argument (least-requested-like)
DEFAULT_RTCR_SHAPE: Final = ({"utilization": 0, "score": 10}, {"utilization": 100, "score": 0})
_RTCR = _s(NODE_RESOURCES_FIT, name="RequestedToCapacityRatio", args=rtcr_args({"shape": [dict(p) for p in DEFAULT_RTCR_SHAPE]}))


def _pred(name: str, *filters: PluginRef, alias_of: str = "") -> Entry:
    return Entry(name, filters=filters, legacy=True, alias_of=alias_of)


def _modern_pred(name: str, ref: PluginRef) -> Entry:
    return Entry(name, filters=(ref,), legacy=False, takes_args=True)


def _prio(name: str, ref: PluginRef, weight: int = 1, *, alias_of: str = "", resources_arg: str = "") -> Entry:
    return Entry(name, scorer=ref, weight=weight, legacy=True, alias_of=alias_of, resources_arg=resources_arg)


def _modern_prio(name: str, ref: PluginRef, weight: int = 1, *, resources_arg: str = "") -> Entry:
    return Entry(name, scorer=ref, weight=weight, legacy=False, takes_args=True, resources_arg=resources_arg)


_STRATEGY_RESOURCES: Final = "scoringStrategy.resources"


_PREDICATE_LIST: Final = (
    # v1.9 Policy predicates
    _pred("PodFitsResources", _FIT),
    _pred("HostName", _NAME),
    _pred("PodFitsHost", _NAME, alias_of="HostName"),
    _pred("PodFitsHostPorts", _PORTS),
    _pred("PodFitsPorts", _PORTS, alias_of="PodFitsHostPorts"),
    _pred("MatchNodeSelector", _AFFINITY),
    _pred("GeneralPredicates", _FIT, _NAME, _PORTS, _AFFINITY),
    _pred("NoDiskConflict", _RESTRICTIONS),
    _pred("NoVolumeZoneConflict", _ZONE),
    _pred("MaxEBSVolumeCount", _EBS),
    _pred("MaxGCEPDVolumeCount", _GCEPD),
    _pred("MaxAzureDiskVolumeCount", _AZURE),
    _pred("MaxCSIVolumeCountPred", _CSI),
    _pred("MatchInterPodAffinity", _IPA),
    _pred("PodToleratesNodeTaints", _TAINTS),
    _pred("PodToleratesNodeNoExecuteTaints", _NO_EXECUTE),
    _pred("CheckNodeMemoryPressure", _MEMORY),
    _pred("CheckNodeDiskPressure", _DISK),
    _pred("CheckNodePIDPressure", _PID),
    _pred("CheckNodeCondition", _CONDITION),
    _pred("CheckNodeUnschedulable", _UNSCHED),
    _pred("CheckVolumeBinding", _BINDING),
    # modern plugin names (filter side)
    _modern_pred("NodeUnschedulable", _UNSCHED),
    _modern_pred("NodeName", _NAME),
    _modern_pred("NodePorts", _PORTS),
    _modern_pred("NodeAffinity", _AFFINITY),
    _modern_pred("NodeResourcesFit", _FIT),
    _modern_pred("TaintToleration", _TAINTS),
    _modern_pred("InterPodAffinity", _IPA),
    _modern_pred("VolumeRestrictions", _RESTRICTIONS),
    _modern_pred("VolumeZone", _ZONE),
    _modern_pred("NodeVolumeLimits", _CSI),
    _modern_pred("EBSLimits", _EBS),
    _modern_pred("GCEPDLimits", _GCEPD),
    _modern_pred("AzureDiskLimits", _AZURE),
    _modern_pred("VolumeBinding", _BINDING),
    _modern_pred("NodeLabel", _f(NODE_LABEL_PRESENCE, "CheckNodeLabelPresence")),
    _modern_pred("ServiceAffinity", _f(SERVICE_AFFINITY, "ServiceAffinity")),
)

_PRIORITY_LIST: Final = (
    # v1.9 Policy priorities, default weights as v1.9 factory/defaults
    _prio("LeastRequestedPriority", _LEAST, resources_arg=_STRATEGY_RESOURCES),
    _prio("MostRequestedPriority", _MOST, resources_arg=_STRATEGY_RESOURCES),
    _prio("RequestedToCapacityRatioPriority", _RTCR, resources_arg=_STRATEGY_RESOURCES),
    _prio("BalancedResourceAllocation", _s(BALANCED_ALLOCATION), resources_arg="resources"),
    _prio("SelectorSpreadPriority", _s(SELECTOR_SPREAD)),
    _prio("ServiceSpreadingPriority", _s(SELECTOR_SPREAD, name="ServiceSpreading", args={"servicesOnly": True})),
    _prio("InterPodAffinityPriority", _s(INTER_POD_AFFINITY)),
    _prio("NodeAffinityPriority", _s(NODE_AFFINITY)),
    _prio("TaintTolerationPriority", _s(TAINT_TOLERATION)),
    _prio("NodePreferAvoidPodsPriority", _s(NODE_PREFER_AVOID_PODS), 10000),
    _prio("ImageLocalityPriority", _s(IMAGE_LOCALITY)),
    _prio("EqualPriority", _s(EQUAL_PRIORITY)),
    _prio("ResourceLimitsPriority", _s(RESOURCE_LIMITS)),
    # modern plugin names (score side); weight 1 unless given (the Policy weight, not v1.37's profile weights)
    _modern_prio("NodeResourcesFit", _s(NODE_RESOURCES_FIT), resources_arg=_STRATEGY_RESOURCES),
    _modern_prio("NodeResourcesBalancedAllocation", _s(BALANCED_ALLOCATION), resources_arg="resources"),
    _modern_prio("NodeAffinity", _s(NODE_AFFINITY)),
    _modern_prio("TaintToleration", _s(TAINT_TOLERATION)),
    _modern_prio("InterPodAffinity", _s(INTER_POD_AFFINITY)),
    _modern_prio("ImageLocality", _s(IMAGE_LOCALITY)),
    _modern_prio("SelectorSpread", _s(SELECTOR_SPREAD)),
    _modern_prio("NodePreferAvoidPods", _s(NODE_PREFER_AVOID_PODS), 10000),
    _modern_prio("NodeResourceLimits", _s(RESOURCE_LIMITS)),
    _modern_prio("NodeLabel", _s(NODE_LABEL_PRIORITY)),
    _modern_prio("ServiceAffinity", _s(SERVICE_ANTI_AFFINITY)),
)

PREDICATES: Final[Mapping[str, Entry]] = {e.name: e for e in _PREDICATE_LIST}
PRIORITIES: Final[Mapping[str, Entry]] = {e.name: e for e in _PRIORITY_LIST}

#: Every modern plugin name (either table); a policy naming only these is "modern-style".
MODERN_NAMES: Final[frozenset[str]] = frozenset(e.name for e in (*_PREDICATE_LIST, *_PRIORITY_LIST) if not e.legacy)

_PRED_BY_LOWER: Final = {k.lower(): v for k, v in PREDICATES.items()}
_PRIO_BY_LOWER: Final = {k.lower(): v for k, v in PRIORITIES.items()}

#: A ``requestedToCapacityRatioArguments`` argument builds the plugin ``RequestedToCapacityRatio``
#: whatever the policy entry is called (upstream kubernetes#83472 did the same).
RTCR_PRIORITY: Final = "RequestedToCapacityRatioPriority"


# ----------------------------------------------------------------------------- argument-style names


@dataclass(frozen=True, slots=True)
class ArgumentKind:
    """A v1.9 argument key (``labelsPresence`` ...): the plugin it builds and its fields."""

    key: str
    target: str
    slot: str
    #: fields of the argument object -> plugin argument names (same names in our plugins)
    fields: tuple[str, ...]
    #: instance name; None = the policy entry's own name (v1.9: user-chosen)
    fixed_name: str | None = None


ARGUMENT_PREDICATES: Final[Mapping[str, ArgumentKind]] = {
    "serviceAffinity": ArgumentKind("serviceAffinity", SERVICE_AFFINITY, "ServiceAffinity", ("labels",)),
    "labelsPresence": ArgumentKind("labelsPresence", NODE_LABEL_PRESENCE, "CheckNodeLabelPresence", ("labels", "presence")),
}
ARGUMENT_PRIORITIES: Final[Mapping[str, ArgumentKind]] = {
    "serviceAntiAffinity": ArgumentKind("serviceAntiAffinity", SERVICE_ANTI_AFFINITY, "", ("label",)),
    "labelPreference": ArgumentKind("labelPreference", NODE_LABEL_PRIORITY, "", ("label", "presence")),
    "requestedToCapacityRatioArguments": ArgumentKind(
        "requestedToCapacityRatioArguments", NODE_RESOURCES_FIT, "", ("shape", "resources"), fixed_name=_RTCR_NAME
    ),
}


#: where a NodeResourcesFit error field from ``rtcr_args`` comes from in the policy argument
RTCR_FIELD_MAP: Final = (
    ("scoringStrategy.requestedToCapacityRatio.shape", "shape"),
    ("scoringStrategy.resources", "resources"),
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
        tuple(("MostRequestedPriority", w) if n == "LeastRequestedPriority" else (n, w) for n, w in _DEFAULT_PRIORITIES),
    ),
}

#: v1.9: registered as mandatory and added to every configuration. Decision: added to provider
#: profiles and to policies that use any v1.9 name (or no names at all: v1.9's "no predicates"),
#: not to policies written only with modern plugin names (upstream's modern profiles have no
#: mandatory filter, and node conditions reach them as taints).
MANDATORY_PREDICATES: Final = ("CheckNodeCondition",)


# ----------------------------------------------------------------------------- look-ups


def lookup_predicate(name: str) -> Entry | None:
    """The predicate entry for ``name`` (case-insensitive), or None."""
    return _PRED_BY_LOWER.get(name.lower())


def lookup_priority(name: str) -> Entry | None:
    """The priority entry for ``name`` (case-insensitive), or None."""
    return _PRIO_BY_LOWER.get(name.lower())


def lookup_provider(name: str) -> Provider | None:
    for key, provider in PROVIDERS.items():
        if key.lower() == name.lower():
            return provider
    return None


def all_names() -> list[str]:
    """Every registered predicate, priority and provider name (sorted, unique)."""
    return sorted({*PREDICATES, *PRIORITIES, *PROVIDERS})


def suggest(name: str, candidates: "list[str] | tuple[str, ...] | None" = None) -> str | None:
    """The closest registered name to a misspelled ``name`` (difflib, case-insensitive), or None."""
    pool = list(candidates) if candidates is not None else all_names()
    if not name or not pool:
        return None
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    if match:
        return lowered[match[0]]
    # a name missing its "Priority"/"Pred" suffix or prefix, e.g. "NodeAffinityPrio"
    for low, original in lowered.items():
        if len(name) >= 6 and (low.startswith(name.lower()) or name.lower().startswith(low)):
            return original
    return None


def resolve(target: str) -> type:
    """Import ``"module:Class"`` from the plugins package (raises ImportError / AttributeError)."""
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(f"{PLUGIN_PACKAGE}.{module_name}")
    cls = getattr(module, class_name)
    if not isinstance(cls, type):
        raise TypeError(f"{target} is not a class")
    return cls


def all_targets() -> list[str]:
    """Every ``module:Class`` the registry refers to (for the resolution test)."""
    refs: set[str] = set()
    for e in (*_PREDICATE_LIST, *_PRIORITY_LIST):
        refs.update(r.target for r in e.filters)
        if e.scorer is not None:
            refs.add(e.scorer.target)
    for kind in (*ARGUMENT_PREDICATES.values(), *ARGUMENT_PRIORITIES.values()):
        refs.add(kind.target)
    return sorted(refs)
