"""SchedulingPolicy spec -> a validated, ready-to-run ``Profile``, or the list of what is wrong with it.

The spec is the ``SchedulingPolicy`` custom resource's ``spec`` (crds/schedulingpolicy.yaml): the v1.9
Policy file's content in camelCase, plus a few modern profile settings. Names resolve through a
``registry.Registry`` (both the v1.9 names and plugin names, including out-of-tree plugins when the
caller passes a registry that has them; see ``core/config/registry.py`` for how).

``validate_policy`` runs in stages, each a function below: the scheduler name; the algorithm
source (a provider, or the predicates and priorities lists, each item resolved to plugin requests);
the scalar settings; the extenders; the v1.9 defaults for v1.9-style policies; the PodTopologySpread
filter every profile gets; grouping requests into plugin instances; building the plugins with their
typed arguments. Every stage reports into one error list, so a spec with three mistakes gets three
field errors.

Rules (decisions marked *):

- ``schedulerName`` is required: a DNS-1123 subdomain, as the CRD's pattern.
- ``algorithmProvider`` (DefaultProvider | ClusterAutoscalerProvider) *or* explicit ``predicates`` /
  ``priorities``; both together is an error (v1.9's AlgorithmSource was one-of). With none of the
  three, today's upstream default profile runs (``registry.DEFAULT_PROFILE``: v1.37's plugins,
  order and weights); the v1.9 providers keep their v1.9 meaning when named.
- v1.9 list rules: a missing or empty ``predicates`` list (with ``priorities`` given) means only the
  mandatory predicates; an empty or missing ``priorities`` list means EqualPriority (unless extenders
  are configured, whose scores then decide, as in v1.9's PrioritizeNodes).
- *Mandatory CheckNodeCondition is added to provider profiles and to policies that use any v1.9 name
  (or no names at all), not to policies written only with plugin names, and *EqualPriority for an
  empty priorities list likewise applies only to those (a modern profile with no score plugins
  scores every node 1 and stops at the first feasible node, as upstream today).
- A plugin name under ``predicates`` enables the plugin's filter (it must have one), under
  ``priorities`` its score; ``argument`` is the plugin's own arguments, parsed into its typed
  ``Args`` (errors at their field path in the spec). A name no installed plugin has is rejected with
  the installed names.
- Filters run in ``registry.FILTER_ORDER`` whatever order the policy lists them (out-of-tree ones
  after, in listed order); entries that enable the same plugin instance are de-duplicated
  (GeneralPredicates + PodFitsResources -> one NodeResourcesFit). Listing the same predicate or
  priority twice is an error, and so are two priority names that configure the same scorer
  (NodeAffinity + NodeAffinityPriority): which weight was meant would be a guess.
- Priority ``weight`` is an integer in ``registry.MIN_WEIGHT..MAX_WEIGHT`` (1..1,000,000); *when
  omitted it is the name's default weight (1; NodePreferAvoidPods 10000); v1.9 rejected a missing
  weight.
- v1.9 argument-style entries: exactly one of the v1.9 argument keys (predicates:
  ``serviceAffinity {labels}``, ``labelsPresence {labels, presence}``; priorities:
  ``serviceAntiAffinity {label}``, ``labelPreference {label, presence}``,
  ``requestedToCapacityRatioArguments {shape, resources}``), under a user-chosen name.
- ``argument.resources`` on a resource priority (Least/MostRequested, RequestedToCapacityRatio,
  BalancedResourceAllocation and their plugin names) chooses the resources and their weights.
- *Every profile filters with PodTopologySpread, so a pod's own DoNotSchedule topology spread
  constraints hold under any policy (``_honour_own_spread_constraints``).
- ``hardPodAffinitySymmetricWeight`` 1..100 becomes InterPodAffinity's ``hardPodAffinityWeight``; 0 means
  unset (the plugin's default, 1), as in v1.9 and the CRD.
- ``parallelism`` (1..1024) is validated and kept in the normalised spec; Profile has no field for it.
- ``preemption`` (boolean, default true, as upstream enables DefaultPreemption in every profile)
  adds a DefaultPreemption PostFilter with its default arguments. DefaultPreemption is not a
  predicate or priority name: this switch is the one way to enable or disable it.
- ``gangScheduling`` (default ``{enabled: true}``) adds the gang plugins of both PodGroup APIs
  (``registry.GANG_PLUGINS``: GangScheduling for ``scheduling.k8s.io`` PodGroups, Coscheduling for
  ``scheduling.x-k8s.io`` ones) as PreFilter (after the filters' own), Reserve and Permit plugins;
  ``permitWaitingTimeSeconds`` (1..900) replaces both plugins' default wait (300 s and 60 s; a
  coscheduling PodGroup's ``scheduleTimeoutSeconds`` still wins); ``podGroupBackoffSeconds`` (0..3600,
  default 0) and ``podGroupRejectPercentage`` (0..100, default 10) are Coscheduling's PostFilter
  settings, as scheduler-plugins'. *On by default, as upstream's
  default profile has GangScheduling when the GenericWorkload gate is on: pods outside a gang
  skip it at no cost. Like DefaultPreemption, they are not predicate names.
- ``percentageOfNodesToScore`` 0..100 (0 = adaptive); backoffs > 0 seconds, max >= initial.
- ``pluginConfig`` (upstream's ``[{name, args}]``, one entry per plugin) configures the plugin's own instance
  wherever the policy enables it, DefaultPreemption, the gang plugins and the QueueSort plugin included
  (``core/config/scheduler_config.py`` writes it from a KubeSchedulerConfiguration); an entry's ``argument``
  may add keys to it, a different value for one of its keys is an error.
- ``plugins`` (a list of ``{name, argument}``) enables installed plugins at their Reserve, Permit,
  PreBind and Bind points (filters and scores have their own lists; a plugin listed in both is one
  instance). Bind plugins are asked in the listed order; DefaultBinder (upstream's default binder)
  ends every profile's Bind plugins and needs no entry; the gang plugins and DefaultPreemption have
  their own switches.
- ``queueSort`` (a list of at most one ``{name, argument}``, upstream's ``plugins.queueSort``) names the
  QueueSort plugin that orders the scheduler name's queue; none means PrioritySort. Two are refused
  (upstream: one queue sort plugin per profile). A policy edit that changes it re-sorts the queue.
- Extenders: see ``core/config/extenders.py``. The resources they manage with ``ignoredByScheduler`` are
  added to every NodeResourcesFit instance's ``ignoredResources`` (*upstream replaces that list;
  we keep the policy's own entries too).
- *Names are matched case-insensitively and written back in their canonical spelling.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..framework.arguments import PluginArgsError
from ..framework.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from ..model.specs import FieldError, did_you_mean, is_int, is_number, parse_duration, unknown_keys
from ..plugins.coscheduling import Coscheduling
from ..plugins.default_binder import DefaultBinder
from ..plugins.default_preemption import DefaultPreemption
from ..plugins.inter_pod_affinity import InterPodAffinity
from ..plugins.node_resources_fit import NodeResourcesFit
from ..plugins.pod_topology_spread import PodTopologySpread
from ..plugins.priority_sort import PrioritySort
from . import registry
from .extenders import ExtenderConfig, validate_extenders
from .profile import DEFAULT_POD_INITIAL_BACKOFF_SECONDS, DEFAULT_POD_MAX_BACKOFF_SECONDS, Profile
from .registry import DEFAULT_PROFILE, PluginRef, Registry

__all__ = ["FieldError", "default_profile", "default_provider_profile", "parse_duration", "validate_policy"]

#: v1.9 api/validation: predicate / priority names.
NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])$")
MAX_HARD_POD_AFFINITY_WEIGHT: Final = 100
MAX_PARALLELISM: Final = 1024
#: upstream caps a Permit wait at 15 minutes
MAX_PERMIT_WAITING_TIME_SECONDS: Final = 900
#: DNS-1123 subdomain, as the CRD's schedulerName pattern
SCHEDULER_NAME_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

SPEC_KEYS: Final = (
    "schedulerName",
    "algorithmProvider",
    "predicates",
    "priorities",
    "extenders",
    "hardPodAffinitySymmetricWeight",
    "alwaysCheckAllPredicates",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "parallelism",
    "preemption",
    "gangScheduling",
    "plugins",
    "queueSort",
    "pluginConfig",
)
GANG_KEYS: Final = ("enabled", "permitWaitingTimeSeconds", "podGroupBackoffSeconds", "podGroupRejectPercentage")
#: Coscheduling's own settings under spec.gangScheduling: (key, bounds)
COSCHEDULING_KEYS: Final = (("podGroupBackoffSeconds", 0, 3600), ("podGroupRejectPercentage", 0, 100))
PREDICATE_KEYS: Final = ("name", "argument")
PRIORITY_KEYS: Final = ("name", "weight", "argument")
PLUGIN_KEYS: Final = ("name", "argument")
QUEUE_SORT_KEYS: Final = ("name", "argument")
PLUGIN_CONFIG_KEYS: Final = ("name", "args")
#: the extension points ``spec.plugins`` enables (Filter and Score have their own lists)
PLUGIN_POINTS: Final = (ReservePlugin, PermitPlugin, PreBindPlugin, BindPlugin)


# ----------------------------------------------------------------------------- plugin requests


@dataclass(slots=True)
class _Request:
    """One plugin instance wanted by one spec entry, with where its args came from."""

    ref: PluginRef
    path: str
    #: (plugin args field prefix, spec path prefix) pairs for error mapping
    field_map: tuple[tuple[str, str], ...] = ()
    order: int = 0


@dataclass(slots=True)
class _Instance:
    ref: PluginRef
    args: dict[str, Any]
    requests: list[_Request] = field(default_factory=list)
    plugin: Plugin | None = None


@dataclass(frozen=True, slots=True)
class _Item:
    """One valid predicates[] / priorities[] item: canonical name, normalised entry, plugin requests."""

    name: str
    normal: dict[str, Any]
    requests: list[_Request]
    weight: int
    v19: bool


@dataclass(slots=True)
class _Requests:
    """What the algorithm source asks for."""

    filters: list[_Request] = field(default_factory=list)
    #: (request, weight, the policy name that asked)
    scores: list[tuple[_Request, int, str]] = field(default_factory=list)
    #: ``spec.plugins``: Reserve, Permit, PreBind and Bind plugins
    others: list[_Request] = field(default_factory=list)
    v19_style: bool = True
    next_order: int = 0


def _map_field(instance: _Instance, plugin_field: str) -> str:
    """The spec path of a plugin-args field: via the longest matching prefix of any contributing entry."""
    best: tuple[int, str] | None = None
    for req in instance.requests:
        for prefix, spec_prefix in req.field_map:
            if prefix and not (plugin_field == prefix or plugin_field.startswith((prefix + ".", prefix + "["))):
                continue
            rest = plugin_field[len(prefix) :]
            if rest and rest[0] not in ".[":
                rest = "." + rest
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), spec_prefix + rest)
    if best is not None:
        return best[1]
    first = instance.requests[0].path
    return f"{first}.argument.{plugin_field}" if plugin_field else first


# ----------------------------------------------------------------------------- stage: names


def _scheduler_name(spec: Mapping[str, Any], errors: list[FieldError]) -> str:
    name = spec.get("schedulerName")
    if not isinstance(name, str) or not name.strip():
        errors.append(FieldError("spec.schedulerName", "required: the name pods select with spec.schedulerName"))
        return ""
    if len(name) > 253 or not SCHEDULER_NAME_PATTERN.match(name):
        errors.append(
            FieldError(
                "spec.schedulerName",
                f"invalid scheduler name {name!r}: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')",
            )
        )
    return name


def _provider(spec: Mapping[str, Any], errors: list[FieldError]) -> registry.Provider | None:
    """The v1.9 algorithm provider the spec names, if any."""
    name = spec.get("algorithmProvider")
    has_lists = "predicates" in spec or "priorities" in spec
    if name is None:
        return None
    if has_lists:
        errors.append(
            FieldError("spec.algorithmProvider", "give either algorithmProvider or predicates/priorities, not both")
        )
    if not isinstance(name, str):
        errors.append(FieldError("spec.algorithmProvider", "must be a string"))
        return None
    provider = registry.lookup_provider(name)
    if provider is None:
        hint = did_you_mean(name, list(registry.PROVIDERS)) or " (known: " + ", ".join(registry.PROVIDERS) + ")"
        errors.append(FieldError("spec.algorithmProvider", f"unknown algorithm provider {name!r}{hint}"))
    return provider


# ----------------------------------------------------------------------------- stage: list items


def _name_and_argument(
    item: Any, path: str, keys: Sequence[str], errors: list[FieldError]
) -> tuple[str, Mapping[str, Any] | None] | None:
    """The checked name and argument object of one predicates[] / priorities[] item, or None after reporting."""
    if not isinstance(item, Mapping):
        errors.append(FieldError(path, "must be an object with a name"))
        return None
    unknown_keys(item, keys, path, errors)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.name", "required: a non-empty string"))
        return None
    if not NAME_PATTERN.match(name):
        errors.append(
            FieldError(
                f"{path}.name",
                f"invalid name {name!r}: letters, digits and '-', at least 2 characters, "
                "starting and ending with a letter or digit",
            )
        )
        return None
    argument = item.get("argument")
    if argument is not None and not isinstance(argument, Mapping):
        errors.append(FieldError(f"{path}.argument", "must be an object"))
        return None
    return name, argument


def _argument_kind(
    argument: Mapping[str, Any], kinds: Mapping[str, registry.ArgumentKind], path: str, errors: list[FieldError]
) -> registry.ArgumentKind | None | bool:
    """The v1.9 argument kind used, None if none is, False (after reporting) if the argument is malformed."""
    used = [k for k in argument if k in kinds]
    if not used:
        return None
    if len(argument) != 1:
        errors.append(
            FieldError(
                f"{path}.argument",
                f"exactly one of {', '.join(kinds)} is required, got {', '.join(map(str, argument))}",
            )
        )
        return False
    kind = kinds[used[0]]
    body = argument[kind.key]
    if not isinstance(body, Mapping):
        errors.append(FieldError(f"{path}.argument.{kind.key}", "must be an object"))
        return False
    before = len(errors)
    unknown_keys(body, kind.fields, f"{path}.argument.{kind.key}", errors)
    return kind if len(errors) == before else False


def _argument_style(
    kind: registry.ArgumentKind,
    name: str,
    argument: Mapping[str, Any],
    path: str,
    order: int,
    weight: int,
    errors: list[FieldError],
) -> _Item | None:
    body = dict(argument[kind.key])
    where = f"{path}.argument.{kind.key}"
    try:
        translated = kind.translate(body)
    except PluginArgsError as exc:
        errors.append(FieldError(f"{where}.{exc.field}", exc.message))
        return None
    fmap = tuple((prefix, f"{where}.{v19}") for prefix, v19 in kind.field_map) + (("", where),)
    ref = PluginRef(kind.cls, kind.fixed_name or name, translated)
    return _Item(name, {"name": name, "argument": {kind.key: body}}, [_Request(ref, path, fmap, order)], weight, True)


def _unknown(name: str, path: str, *, want: str, registry_: Registry) -> FieldError:
    """The error for a name that resolves to nothing usable as a ``want`` ("predicate" or "priority")."""
    other = "priority" if want == "predicate" else "predicate"
    other_list = "spec.priorities" if want == "predicate" else "spec.predicates"
    other_found: object
    if want == "predicate":
        names, other_found = (
            registry_.predicate_names(),
            registry.lookup_legacy_priority(name) or registry_.score_plugin(name),
        )
    else:
        names, other_found = (
            registry_.priority_names(),
            registry.lookup_legacy_predicate(name) or registry_.filter_plugin(name),
        )
    if registry_.queue_sort_plugin(name) is not None:
        return FieldError(f"{path}.name", f"{name!r} is a QueueSort plugin, not a {want}; name it in spec.queueSort")
    gang = registry_.plugin(name)
    if gang is not None and gang in registry.GANG_PLUGINS:
        return FieldError(
            f"{path}.name",
            f"{gang.NAME} is a gang plugin, not a {want}; spec.gangScheduling (enabled by default) enables it",
        )
    if registry_.plugin(name) is DefaultPreemption:
        return FieldError(
            f"{path}.name",
            f"{DefaultPreemption.NAME} is a PostFilter plugin, not a {want}; spec.preemption (default true) enables it",
        )
    if other_found is not None:
        kind = "a score plugin" if want == "predicate" else "a filter plugin"
        if registry_.plugin(name) is None:
            kind = f"a {other}"
        return FieldError(f"{path}.name", f"{name!r} is {kind}, not a {want}; list it under {other_list}")
    problem = registry_.problem(name)
    if problem is not None:
        return FieldError(f"{path}.name", f"plugin {name!r} is installed but cannot be used: {problem}")
    hint = did_you_mean(name, names)
    if hint:
        return FieldError(f"{path}.name", f"unknown {want} {name!r}{hint}")
    extra = registry_.out_of_tree()
    kinds = registry.ARGUMENT_PREDICATES if want == "predicate" else registry.ARGUMENT_PRIORITIES
    plugins = registry_.filter_names() if want == "predicate" else registry_.score_names()
    return FieldError(
        f"{path}.name",
        f"unknown {want} {name!r}: no plugin of that name is installed (out-of-tree plugins installed: "
        f"{', '.join(extra) if extra else 'none'}; {'filter' if want == 'predicate' else 'score'} plugins: "
        f"{', '.join(plugins)}); a v1.9 custom {want} needs argument.{' or argument.'.join(kinds)}",
    )


def _predicate(item: Any, path: str, order: int, errors: list[FieldError], registry_: Registry) -> _Item | None:
    """One predicates[] item, or None after reporting what is wrong with it."""
    checked = _name_and_argument(item, path, PREDICATE_KEYS, errors)
    if checked is None:
        return None
    name, argument = checked
    if argument:
        kind = _argument_kind(argument, registry.ARGUMENT_PREDICATES, path, errors)
        if kind is False:
            return None
        if isinstance(kind, registry.ArgumentKind):
            return _argument_style(kind, name, argument, path, order, 0, errors)
    legacy = registry.lookup_legacy_predicate(name)
    if legacy is not None:
        if argument:
            errors.append(
                FieldError(
                    f"{path}.argument",
                    f"{legacy.name} takes no argument "
                    f"(v1.9 arguments, under a name of your own: {', '.join(registry.ARGUMENT_PREDICATES)})",
                )
            )
            return None
        return _Item(
            legacy.name, {"name": legacy.name}, [_Request(ref, path, (), order) for ref in legacy.filters], 0, True
        )
    cls = registry_.filter_plugin(name)
    if cls is None:
        errors.append(_unknown(name, path, want="predicate", registry_=registry_))
        return None
    ref = PluginRef(cls, None, dict(argument or {}))
    normal: dict[str, Any] = {"name": cls.NAME, **({"argument": dict(argument)} if argument else {})}
    return _Item(
        cls.NAME, normal, [_Request(ref, path, (("", f"{path}.argument"),), order)], 0, registry.is_v19_name(cls.NAME)
    )


def _priority(item: Any, path: str, order: int, errors: list[FieldError], registry_: Registry) -> _Item | None:
    """One priorities[] item, or None after reporting what is wrong with it."""
    checked = _name_and_argument(item, path, PRIORITY_KEYS, errors)
    if checked is None:
        return None
    name, argument = checked
    legacy = registry.lookup_legacy_priority(name)
    cls = registry_.score_plugin(name) if legacy is None else None
    base = legacy.scorer if legacy is not None else (PluginRef(cls) if cls is not None else None)
    default_weight = (
        legacy.weight
        if legacy is not None
        else (cls.DEFAULT_WEIGHT if cls is not None and issubclass(cls, ScorePlugin) else 1)
    )
    built: _Item | None = None
    if argument and base is not None and base.cls in registry.RESOURCES_ARGUMENT and set(argument) == {"resources"}:
        where = registry.RESOURCES_ARGUMENT[base.cls]
        ref = PluginRef(base.cls, base.name, registry.with_resources(base.args, where, argument["resources"]))
        fmap = ((where, f"{path}.argument.resources"), ("", f"{path}.argument"))
        canonical = legacy.name if legacy is not None else base.cls.NAME
        built = _Item(
            canonical,
            {"name": canonical, "argument": {"resources": argument["resources"]}},
            [_Request(ref, path, fmap, order)],
            default_weight,
            legacy is not None,
        )
    elif argument:
        kind = _argument_kind(argument, registry.ARGUMENT_PRIORITIES, path, errors)
        if kind is False:
            return None
        if isinstance(kind, registry.ArgumentKind):
            built = _argument_style(kind, name, argument, path, order, default_weight, errors)
            if built is None:
                return None
        elif legacy is not None:
            what = (
                "takes only argument.resources"
                if legacy.scorer.cls in registry.RESOURCES_ARGUMENT
                else "takes no argument"
            )
            errors.append(
                FieldError(
                    f"{path}.argument",
                    f"{legacy.name} {what} "
                    f"(v1.9 arguments, under a name of your own: {', '.join(registry.ARGUMENT_PRIORITIES)})",
                )
            )
            return None
    if built is None:
        if base is None:
            errors.append(_unknown(name, path, want="priority", registry_=registry_))
            return None
        if legacy is not None:
            built = _Item(legacy.name, {"name": legacy.name}, [_Request(base, path, (), order)], default_weight, True)
        else:
            ref = PluginRef(base.cls, None, dict(argument or {}))
            normal: dict[str, Any] = {"name": base.cls.NAME, **({"argument": dict(argument)} if argument else {})}
            built = _Item(
                base.cls.NAME,
                normal,
                [_Request(ref, path, (("", f"{path}.argument"),), order)],
                default_weight,
                registry.is_v19_name(base.cls.NAME),
            )
    weight = item.get("weight", None)
    if weight is None:
        weight = built.weight
    elif not is_int(weight) or not registry.MIN_WEIGHT <= weight <= registry.MAX_WEIGHT:
        errors.append(
            FieldError(
                f"{path}.weight",
                f"must be an integer from {registry.MIN_WEIGHT} to {registry.MAX_WEIGHT}, got {weight!r}",
            )
        )
        return None
    normal = {
        "name": built.name,
        "weight": weight,
        **({"argument": built.normal["argument"]} if "argument" in built.normal else {}),
    }
    return _Item(built.name, normal, built.requests, weight, built.v19)


# ----------------------------------------------------------------------------- stage: algorithm source


def _from_provider(provider: registry.Provider, registry_: Registry) -> _Requests:
    out = _Requests()
    path = "spec.algorithmProvider"
    for name in provider.predicates:
        legacy = registry.lookup_legacy_predicate(name)
        refs = legacy.filters if legacy is not None else (PluginRef(_must(registry_.filter_plugin(name), name)),)
        for ref in refs:
            out.filters.append(_Request(ref, path, (), out.next_order))
            out.next_order += 1
    for name, weight in provider.priorities:
        scorer = registry.LEGACY_PRIORITIES[name].scorer
        out.scores.append((_Request(scorer, path, (), out.next_order), weight, name))
        out.next_order += 1
    return out


def _from_plugin_profile(profile: registry.PluginProfile) -> _Requests:
    out = _Requests(v19_style=False)
    path = "spec"
    for cls in profile.filters:
        out.filters.append(_Request(PluginRef(cls), path, (), out.next_order))
        out.next_order += 1
    for cls, weight in profile.scores:
        out.scores.append((_Request(PluginRef(cls), path, (), out.next_order), weight, cls.NAME))
        out.next_order += 1
    return out


def _must(cls: type[Plugin] | None, name: str) -> type[Plugin]:
    if cls is None:
        raise RuntimeError(f"provider name {name!r} is not registered")  # a bug in the registry tables
    return cls


def _from_lists(
    spec: Mapping[str, Any], normal: dict[str, Any], errors: list[FieldError], registry_: Registry
) -> _Requests:
    out = _Requests()
    names_seen = 0
    plugin_names_only = True
    for key, parse in (("predicates", _predicate), ("priorities", _priority)):
        items = spec.get(key)
        if items is None:
            items = []
        if not isinstance(items, list):
            errors.append(FieldError(f"spec.{key}", "must be a list"))
            continue
        seen: dict[str, str] = {}
        listed: list[dict[str, Any]] = []
        for i, raw in enumerate(items):
            path = f"spec.{key}[{i}]"
            item = parse(raw, path, out.next_order, errors, registry_)
            out.next_order += 1
            if item is None:
                continue
            if item.name.lower() in seen:
                errors.append(
                    FieldError(
                        f"{path}.name",
                        f"duplicate {key[:-1].replace('ie', 'y')} {item.name!r} (also at {seen[item.name.lower()]})",
                    )
                )
                continue
            seen[item.name.lower()] = path
            listed.append(item.normal)
            names_seen += 1
            plugin_names_only = plugin_names_only and not item.v19
            if key == "predicates":
                out.filters.extend(item.requests)
            else:
                out.scores.extend((req, item.weight, item.name) for req in item.requests)
        normal[key] = listed
    out.v19_style = names_seen == 0 or not plugin_names_only
    return out


def _from_plugins(
    spec: Mapping[str, Any], normal: dict[str, Any], errors: list[FieldError], registry_: Registry, out: _Requests
) -> None:
    """``spec.plugins``: plugins enabled at their Reserve, Permit, PreBind and Bind points (each
    runs at every one of those it implements; one that also filters or scores shares its instance
    with its predicates / priorities entry). Bind plugins are asked in the listed order, before
    DefaultBinder."""
    items = spec.get("plugins")
    if items is None:
        return
    if not isinstance(items, list):
        errors.append(FieldError("spec.plugins", "must be a list"))
        return
    seen: dict[str, str] = {}
    listed: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        path = f"spec.plugins[{i}]"
        checked = _name_and_argument(raw, path, PLUGIN_KEYS, errors)
        if checked is None:
            continue
        name, argument = checked
        cls = registry_.plugin(name)
        if cls is None or not issubclass(cls, PLUGIN_POINTS) or cls in (*registry.GANG_PLUGINS, DefaultBinder):
            errors.append(_not_a_plugin_entry(name, cls, path, registry_))
            continue
        if cls.NAME.lower() in seen:
            errors.append(
                FieldError(f"{path}.name", f"duplicate plugin {cls.NAME!r} (also at {seen[cls.NAME.lower()]})")
            )
            continue
        seen[cls.NAME.lower()] = path
        listed.append({"name": cls.NAME, **({"argument": dict(argument)} if argument else {})})
        ref = PluginRef(cls, None, dict(argument or {}))
        out.others.append(_Request(ref, path, (("", f"{path}.argument"),), out.next_order))
        out.next_order += 1
    normal["plugins"] = listed


def _not_a_plugin_entry(name: str, cls: type[Plugin] | None, path: str, registry_: Registry) -> FieldError:
    """Why `name` cannot be a ``spec.plugins`` entry."""
    where = f"{path}.name"
    if cls in registry.GANG_PLUGINS:
        return FieldError(where, f"{name} is a gang plugin; spec.gangScheduling (enabled by default) enables it")
    if cls is DefaultBinder:
        return FieldError(where, f"{DefaultBinder.NAME} is every profile's last Bind plugin; it needs no entry")
    if cls is DefaultPreemption:
        return FieldError(
            where, f"{DefaultPreemption.NAME} is a PostFilter plugin; spec.preemption (default true) enables it"
        )
    if cls is not None:
        return FieldError(
            where,
            f"{cls.NAME!r} has no Reserve, Permit, PreBind or Bind point: "
            "a filter goes under spec.predicates, a score under spec.priorities",
        )
    problem = registry_.problem(name)
    if problem is not None:
        return FieldError(where, f"plugin {name!r} is installed but cannot be used: {problem}")
    usable = sorted(
        n
        for n, c in registry_.plugins.items()
        if issubclass(c, PLUGIN_POINTS) and c not in (*registry.GANG_PLUGINS, DefaultBinder)
    )
    hint = did_you_mean(name, usable)
    if hint:
        return FieldError(where, f"unknown plugin {name!r}{hint}")
    return FieldError(
        where,
        f"unknown plugin {name!r}: no plugin of that name is installed (plugins with a Reserve, Permit, "
        f"PreBind or Bind point: {', '.join(usable) if usable else 'none'})",
    )


def _add_v19_defaults(requests: _Requests, *, has_extenders: bool) -> None:
    """v1.9: the mandatory predicates always; EqualPriority when nothing else scores."""
    present = {r.ref.key for r in requests.filters}
    for name in registry.MANDATORY_PREDICATES:
        ref = PluginRef(_must(registry.Registry.in_tree().filter_plugin(name), name))
        if ref.key not in present:
            requests.filters.append(_Request(ref, "spec.predicates", (), requests.next_order))
            requests.next_order += 1
    if not requests.scores and not has_extenders:
        equal = _must(registry.Registry.in_tree().score_plugin("EqualPriority"), "EqualPriority")
        requests.scores.append((_Request(PluginRef(equal), "spec.priorities", (), requests.next_order), 1, equal.NAME))


def _honour_own_spread_constraints(requests: _Requests) -> None:
    """Add a PodTopologySpread filter unless a predicate already enables one.

    Decision (issue 10): a pod's own DoNotSchedule topology spread constraints are honoured under
    every policy, whatever its predicates. The plugin's PreFilter returns SKIP for a pod without
    DoNotSchedule constraints, so other pods pay nothing for it. A policy listing PodTopologySpread
    only under priorities gets that same instance as the filter (one instance per plugin and name,
    as upstream's MultiPoint), so its ``List`` default constraints with DoNotSchedule filter too.
    """
    if any(r.ref.cls is PodTopologySpread for r in requests.filters):
        return
    requests.filters.append(_Request(PluginRef(PodTopologySpread), "spec.predicates", (), requests.next_order))
    requests.next_order += 1


# ----------------------------------------------------------------------------- stage: scalar settings


@dataclass(slots=True)
class _Settings:
    hard_pod_affinity_weight: int | None = None
    always_check_all_predicates: bool = False
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = DEFAULT_POD_INITIAL_BACKOFF_SECONDS
    pod_max_backoff_seconds: float = DEFAULT_POD_MAX_BACKOFF_SECONDS
    preemption: bool = True
    gang_scheduling: bool = True
    #: None: each gang plugin's own default
    permit_waiting_time_seconds: int | None = None
    #: ``spec.pluginConfig``: canonical plugin name -> (index, args)
    plugin_config: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    #: Coscheduling's PostFilter settings given (camelCase keys), the others its defaults
    coscheduling: dict[str, int] = field(default_factory=dict)


def _gang_settings(spec: Mapping[str, Any], out: _Settings, normal: dict[str, Any], errors: list[FieldError]) -> None:
    raw = spec.get("gangScheduling", {})
    if not isinstance(raw, Mapping):
        errors.append(FieldError("spec.gangScheduling", "must be an object"))
        return
    unknown_keys(raw, GANG_KEYS, "spec.gangScheduling", errors)
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        errors.append(FieldError("spec.gangScheduling.enabled", "must be a boolean"))
        enabled = True
    out.gang_scheduling = enabled
    normal["gangScheduling"] = {"enabled": enabled}
    wait = raw.get("permitWaitingTimeSeconds")
    if wait is not None:
        if not is_int(wait) or not 1 <= wait <= MAX_PERMIT_WAITING_TIME_SECONDS:
            errors.append(
                FieldError(
                    "spec.gangScheduling.permitWaitingTimeSeconds",
                    f"must be an integer from 1 to {MAX_PERMIT_WAITING_TIME_SECONDS}, got {wait!r}",
                )
            )
        else:
            out.permit_waiting_time_seconds = normal["gangScheduling"]["permitWaitingTimeSeconds"] = wait
    for key, low, high in COSCHEDULING_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if not is_int(value) or not low <= value <= high:
            errors.append(
                FieldError(f"spec.gangScheduling.{key}", f"must be an integer from {low} to {high}, got {value!r}")
            )
        else:
            out.coscheduling[key] = normal["gangScheduling"][key] = value


def _queue_sort(
    spec: Mapping[str, Any],
    normal: dict[str, Any],
    errors: list[FieldError],
    registry_: Registry,
    plugin_config: Mapping[str, tuple[int, dict[str, Any]]] | None = None,
) -> QueueSortPlugin | None:
    """``spec.queueSort``: the one QueueSort plugin, built with its arguments (None: PrioritySort)."""
    items = spec.get("queueSort")
    if items is None:
        return None
    if not isinstance(items, list):
        errors.append(FieldError("spec.queueSort", "must be a list"))
        return None
    chosen: QueueSortPlugin | None = None
    listed: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        path = f"spec.queueSort[{i}]"
        checked = _name_and_argument(raw, path, QUEUE_SORT_KEYS, errors)
        if checked is None:
            continue
        name, argument = checked
        if i > 0:
            errors.append(
                FieldError(
                    f"{path}.name",
                    f"only one QueueSort plugin orders a profile's queue, and spec.queueSort[0] names one already; "
                    f"remove {name!r} or the other",
                )
            )
            continue
        cls = registry_.queue_sort_plugin(name)
        if cls is None:
            problem = registry_.problem(name)
            known = registry_.queue_sort_names()
            if problem:
                what = f"plugin {name!r} is installed but cannot be used: {problem}"
            elif registry_.plugin(name) is None:
                what = f"unknown QueueSort plugin {name!r}{did_you_mean(name, known)} (installed: {', '.join(known)})"
            else:
                what = f"{name!r} is not a QueueSort plugin (installed: {', '.join(known)})"
            errors.append(FieldError(f"{path}.name", what))
            continue
        try:
            chosen = cls.new(argument or (plugin_config or {}).get(cls.NAME, (0, None))[1] or None)
        except PluginArgsError as exc:
            errors.append(FieldError(f"{path}.argument" + (f".{exc.field}" if exc.field else ""), exc.message))
            continue
        listed.append({"name": cls.NAME, **({"argument": dict(argument)} if argument else {})})
    normal["queueSort"] = listed
    return chosen


def _gang_plugins(settings: _Settings) -> tuple[Plugin, ...]:
    if not settings.gang_scheduling:
        return ()
    wait = settings.permit_waiting_time_seconds
    raw: dict[str, int] = {} if wait is None else {"permitWaitingTimeSeconds": wait}
    return tuple(
        cls.new({**_configured(settings, cls), **raw, **(settings.coscheduling if cls is Coscheduling else {})} or None)
        for cls in registry.GANG_PLUGINS
    )


def _configured(settings: _Settings, cls: type[Plugin]) -> dict[str, Any]:
    """The ``spec.pluginConfig`` args of `cls` (empty without an entry)."""
    return settings.plugin_config.get(cls.NAME, (0, {}))[1]


def _plugin_config(
    spec: Mapping[str, Any], normal: dict[str, Any], errors: list[FieldError], registry_: Registry
) -> dict[str, tuple[int, dict[str, Any]]]:
    """``spec.pluginConfig`` (upstream's ``pluginConfig``): each plugin's arguments, once, checked against its
    ``Args``; they configure the plugin's own instance wherever the policy enables it (an entry's ``argument``
    may add to them, not contradict them). Arguments of a plugin the policy does not enable change nothing."""
    items = spec.get("pluginConfig")
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    if items is None:
        return out
    if not isinstance(items, list):
        errors.append(FieldError("spec.pluginConfig", "must be a list"))
        return out
    listed: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        path = f"spec.pluginConfig[{i}]"
        if not isinstance(raw, Mapping):
            errors.append(FieldError(path, "must be an object with name and args"))
            continue
        unknown_keys(raw, PLUGIN_CONFIG_KEYS, path, errors)
        name, args = raw.get("name"), raw.get("args")
        cls = registry_.plugin(name) if isinstance(name, str) and name else None
        if cls is None:
            known = sorted(registry_.plugins)
            errors.append(FieldError(f"{path}.name", f"unknown plugin {name!r}{did_you_mean(str(name), known)}"))
            continue
        if args is not None and not isinstance(args, Mapping):
            errors.append(FieldError(f"{path}.args", "must be an object"))
            continue
        if cls.NAME in out:
            errors.append(FieldError(f"{path}.name", f"repeated config for plugin {cls.NAME!r}"))
            continue
        try:
            cls.new(args or None)
        except PluginArgsError as exc:
            errors.append(FieldError(f"{path}.args" + (f".{exc.field}" if exc.field else ""), exc.message))
            continue
        out[cls.NAME] = (i, dict(args or {}))
        listed.append({"name": cls.NAME, "args": dict(args or {})})
    normal["pluginConfig"] = listed
    return out


def _apply_plugin_config(out: _Instances, settings: _Settings, errors: list[FieldError], order: int) -> None:
    """Merge ``spec.pluginConfig`` args into the plugins' own instances (not the v1.9 named ones)."""
    for inst in out.by_key.values():
        if inst.ref.name is not None or inst.ref.cls.NAME not in settings.plugin_config:
            continue
        index, args = settings.plugin_config[inst.ref.cls.NAME]
        where = f"spec.pluginConfig[{index}].args"
        for k, v in args.items():
            if k in inst.args and inst.args[k] != v:
                errors.append(FieldError(f"{where}.{k}", f"conflicts with {inst.requests[0].path}.argument.{k}"))
            inst.args[k] = v
        inst.requests.append(_Request(inst.ref, where, (("", where),), order))


def _settings(spec: Mapping[str, Any], normal: dict[str, Any], errors: list[FieldError]) -> _Settings:
    out = _Settings()
    hard_weight = spec.get("hardPodAffinitySymmetricWeight")
    if hard_weight == 0 and is_int(hard_weight):
        hard_weight = None  # 0 = unset: the plugin default (1), as v1.9 and the CRD say
    if hard_weight is not None:
        if not is_int(hard_weight) or not 0 <= hard_weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            errors.append(
                FieldError(
                    "spec.hardPodAffinitySymmetricWeight",
                    f"must be an integer from 0 to {MAX_HARD_POD_AFFINITY_WEIGHT}, got {hard_weight!r}",
                )
            )
        else:
            out.hard_pod_affinity_weight = hard_weight
            normal["hardPodAffinitySymmetricWeight"] = hard_weight
    check_all = spec.get("alwaysCheckAllPredicates", False)
    if not isinstance(check_all, bool):
        errors.append(FieldError("spec.alwaysCheckAllPredicates", "must be a boolean"))
        check_all = False
    out.always_check_all_predicates = normal["alwaysCheckAllPredicates"] = check_all
    percentage = spec.get("percentageOfNodesToScore", 0)
    if not is_int(percentage) or not 0 <= percentage <= 100:
        errors.append(
            FieldError(
                "spec.percentageOfNodesToScore", f"must be an integer from 0 (adaptive) to 100, got {percentage!r}"
            )
        )
        percentage = 0
    out.percentage_of_nodes_to_score = normal["percentageOfNodesToScore"] = percentage
    bad_backoff = False
    for key, default in (
        ("podInitialBackoffSeconds", DEFAULT_POD_INITIAL_BACKOFF_SECONDS),
        ("podMaxBackoffSeconds", DEFAULT_POD_MAX_BACKOFF_SECONDS),
    ):
        value = spec.get(key, default)
        if not is_number(value) or value <= 0:
            errors.append(FieldError(f"spec.{key}", f"must be a positive number of seconds, got {value!r}"))
            value, bad_backoff = default, True
        normal[key] = value
    out.pod_initial_backoff_seconds = float(normal["podInitialBackoffSeconds"])
    out.pod_max_backoff_seconds = float(normal["podMaxBackoffSeconds"])
    if out.pod_max_backoff_seconds < out.pod_initial_backoff_seconds and not bad_backoff:
        errors.append(
            FieldError(
                "spec.podMaxBackoffSeconds",
                f"must be at least podInitialBackoffSeconds ({normal['podInitialBackoffSeconds']})",
            )
        )
    preemption = spec.get("preemption", True)
    if not isinstance(preemption, bool):
        errors.append(FieldError("spec.preemption", "must be a boolean"))
        preemption = True
    out.preemption = normal["preemption"] = preemption
    _gang_settings(spec, out, normal, errors)
    parallelism = spec.get("parallelism")
    if parallelism is not None:
        # carried in the normalised spec for the runtime; the core algorithm is single-threaded
        if not is_int(parallelism) or not 1 <= parallelism <= MAX_PARALLELISM:
            errors.append(
                FieldError("spec.parallelism", f"must be an integer from 1 to {MAX_PARALLELISM}, got {parallelism!r}")
            )
        else:
            normal["parallelism"] = parallelism
    return out


# ----------------------------------------------------------------------------- stage: instances and plugins


@dataclass(slots=True)
class _Instances:
    by_key: dict[tuple[type[Plugin], str], _Instance] = field(default_factory=dict)
    filters: list[_Instance] = field(default_factory=list)
    scored: list[tuple[_Instance, int]] = field(default_factory=list)


def _group(requests: _Requests, settings: _Settings, errors: list[FieldError]) -> _Instances:
    """Requests with the same (class, instance name) become one instance, their arguments merged."""
    out = _Instances()

    def want(req: _Request) -> _Instance | None:
        inst = out.by_key.get(req.ref.key)
        if inst is None:
            inst = out.by_key[req.ref.key] = _Instance(req.ref, dict(req.ref.args))
        else:
            for k, v in req.ref.args.items():
                if k in inst.args and inst.args[k] != v:
                    errors.append(
                        FieldError(
                            f"{req.path}.argument",
                            f"conflicting arguments for {req.ref.instance_name} "
                            f"({k!r} differs from {inst.requests[0].path})",
                        )
                    )
                    return None
                inst.args[k] = v
        inst.requests.append(req)
        return inst

    for req in requests.filters:
        inst = want(req)
        if inst is not None and inst not in out.filters:
            out.filters.append(inst)
    owner: dict[int, str] = {}
    for req, weight, asked_by in requests.scores:
        inst = want(req)
        if inst is None:
            continue
        if id(inst) in owner:
            errors.append(
                FieldError(req.path, f"{asked_by} configures the same scorer as {owner[id(inst)]}; list it once")
            )
            continue
        owner[id(inst)] = asked_by
        out.scored.append((inst, weight))
    for req in requests.others:
        want(req)
    _apply_plugin_config(out, settings, errors, requests.next_order)
    hard = settings.hard_pod_affinity_weight
    if hard is not None:
        for inst in out.by_key.values():
            if inst.ref.cls is InterPodAffinity:
                inst.args.setdefault("hardPodAffinityWeight", hard)
                if inst.args["hardPodAffinityWeight"] != hard:
                    errors.append(
                        FieldError(
                            "spec.hardPodAffinitySymmetricWeight",
                            "conflicts with the InterPodAffinity argument hardPodAffinityWeight",
                        )
                    )
                inst.requests.append(
                    _Request(
                        inst.ref,
                        "spec",
                        (("hardPodAffinityWeight", "spec.hardPodAffinitySymmetricWeight"),),
                        requests.next_order,
                    )
                )
    return out


def _ignore_extender_resources(instances: _Instances, extenders: list[ExtenderConfig]) -> None:
    """Upstream ``buildExtenders``: NodeResourcesFit leaves the extenders' ``ignoredByScheduler`` resources alone."""
    ignored = [name for ext in extenders for name in ext.ignored_by_scheduler]
    if not ignored:
        return
    for inst in instances.by_key.values():
        if inst.ref.cls is NodeResourcesFit:
            own = inst.args.get("ignoredResources", [])
            if isinstance(own, list):  # else the arguments parser reports it
                inst.args["ignoredResources"] = own + [name for name in ignored if name not in own]


def _build(instances: _Instances, errors: list[FieldError]) -> None:
    for inst in instances.by_key.values():
        try:
            inst.plugin = inst.ref.cls.new(inst.args or None, name=inst.ref.name)
        except PluginArgsError as exc:
            errors.append(FieldError(_map_field(inst, exc.field), exc.message))


# ----------------------------------------------------------------------------- the entry point


def validate_policy(
    spec: Mapping[str, Any], *, source: str = "", registry: Registry | None = None
) -> Profile | list[FieldError]:
    """Validate a SchedulingPolicy spec into a Profile with live plugins, or return every error found.

    ``registry`` resolves plugin names (default: the in-tree plugins; the operator and ``simulate``
    pass one that includes the installed out-of-tree plugins).
    """
    plugins = registry if registry is not None else Registry.in_tree()
    if not isinstance(spec, Mapping):
        return [FieldError("spec", "must be an object")]
    errors: list[FieldError] = []
    unknown_keys(spec, SPEC_KEYS, "spec", errors)
    normal: dict[str, Any] = {}
    normal["schedulerName"] = scheduler_name = _scheduler_name(spec, errors)

    provider = _provider(spec, errors)
    if provider is not None:
        normal["algorithmProvider"] = provider.name
        requests = _from_provider(provider, plugins)
    elif "algorithmProvider" in spec:
        requests = _Requests()  # an unknown provider, already reported
    elif "predicates" in spec or "priorities" in spec:
        requests = _from_lists(spec, normal, errors, plugins)
    else:
        requests = _from_plugin_profile(DEFAULT_PROFILE)

    _from_plugins(spec, normal, errors, plugins, requests)
    plugin_config = _plugin_config(spec, normal, errors, plugins)
    queue_sort = _queue_sort(spec, normal, errors, plugins, plugin_config)
    settings = _settings(spec, normal, errors)
    settings.plugin_config = plugin_config
    extenders, normal_extenders = validate_extenders(spec.get("extenders"), errors)
    if "extenders" in spec:
        normal["extenders"] = normal_extenders
    if requests.v19_style:
        _add_v19_defaults(requests, has_extenders=bool(spec.get("extenders")))
    _honour_own_spread_constraints(requests)
    if errors:
        return errors

    instances = _group(requests, settings, errors)
    if errors:
        return errors
    _ignore_extender_resources(instances, extenders)
    _build(instances, errors)
    if errors:
        return errors
    if not source:
        lists = "predicates" in spec or "priorities" in spec
        source = (
            provider.name if provider is not None else f"policy {scheduler_name}" if lists else DEFAULT_PROFILE.name
        )
    return _profile(scheduler_name, instances, settings, extenders, source, normal, queue_sort)


def _profile(
    name: str,
    instances: _Instances,
    settings: _Settings,
    extenders: list[ExtenderConfig],
    source: str,
    normal: dict[str, Any],
    queue_sort: QueueSortPlugin | None = None,
) -> Profile:
    filters = sorted(
        instances.filters, key=lambda inst: (registry.filter_rank(inst.ref.cls), min(r.order for r in inst.requests))
    )
    filter_plugins: list[FilterPlugin] = []
    for inst in filters:
        assert isinstance(inst.plugin, FilterPlugin)  # the registry resolved the name as a filter plugin
        filter_plugins.append(inst.plugin)
    scorers: list[tuple[ScorePlugin, int]] = []
    for inst, weight in instances.scored:
        assert isinstance(inst.plugin, ScorePlugin)
        scorers.append((inst.plugin, weight))
    everything: list[Plugin] = []
    for inst in instances.by_key.values():
        assert inst.plugin is not None
        everything.append(inst.plugin)
    gang = _gang_plugins(settings)
    everything.extend(gang)
    everything.append(DefaultBinder())  # every profile's last Bind plugin (upstream's default profile)
    return Profile(
        scheduler_name=name,
        filters=tuple(filter_plugins),
        pre_filter_only=tuple(p for p in gang if isinstance(p, PreFilterPlugin)),
        scorers=tuple(scorers),
        post_filters=tuple(p for p in everything if isinstance(p, PostFilterPlugin))
        + ((DefaultPreemption.new(_configured(settings, DefaultPreemption) or None),) if settings.preemption else ()),
        plugins=tuple(everything),
        always_check_all_predicates=settings.always_check_all_predicates,
        percentage_of_nodes_to_score=settings.percentage_of_nodes_to_score,
        pod_initial_backoff_seconds=settings.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=settings.pod_max_backoff_seconds,
        extenders=tuple(extenders),
        source=source,
        spec=normal,
        queue_sort=queue_sort if queue_sort is not None else PrioritySort(),
    )


def default_profile(scheduler_name: str = "default-scheduler") -> Profile:
    """Today's upstream default profile (raises if it cannot be built: a bug or a missing plugin)."""
    return _built({"schedulerName": scheduler_name})


def default_provider_profile(scheduler_name: str = "default-scheduler") -> Profile:
    """The v1.9 DefaultProvider profile."""
    return _built({"schedulerName": scheduler_name, "algorithmProvider": registry.DEFAULT_PROVIDER})


def _built(spec: Mapping[str, Any]) -> Profile:
    result = validate_policy(spec)
    if isinstance(result, list):
        raise RuntimeError(f"{spec} does not build: " + "; ".join(map(str, result)))
    return result
