"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``) -> one SchedulingPolicy spec per profile.

Users bring the file they give kube-scheduler's ``--config``; ``translate`` turns its parsed content
into the specs ``core/config/policy.py`` validates, applying upstream's defaulting and merge rules on the way:

- ``pkg/scheduler/apis/config/v1/default_plugins.go``: the default MultiPoint plugins of v1.37.2 with
  its default feature gates (DynamicResources before DefaultPreemption, NodeDeclaredFeatures last;
  not GangScheduling, whose GenericWorkload gate is off), and ``mergePluginSet``: per extension point,
  the defaults minus the disabled ones (``"*"``: all), a re-enabled default replaced in place, the
  other enabled plugins appended.
- ``pkg/scheduler/framework/runtime/framework.go`` (``expandMultiPointPlugins``): a MultiPoint plugin
  runs at every point it implements unless disabled there; one also listed at that point keeps the
  point's position (overrides first, then MultiPoint's, then the point's others); a point with
  ``"*"`` disabled takes nothing from MultiPoint. Score weights: the Score entry's, else
  MultiPoint's, 0 or none meaning 1.
- ``defaults.go``: one profile named ``default-scheduler`` when none is given or the only one has no
  name; resource weights 0 mean 1 in NodeResourcesFit and NodeResourcesBalancedAllocation args; the
  other args defaults are the plugins' own ``Args`` defaults (the same values).
- ``percentageOfNodesToScore``: the profile's, else the global one (0: adaptive).
- ``extenders`` apply to every profile (upstream builds them once for all), ``parallelism`` and the
  backoffs to every profile as well.

What maps onto this scheduler is honoured; the rest is refused with the field's path
(``profiles[0].plugins.preScore.enabled[1].name: plugin "Foo" is not supported``), unknown fields too.
Decisions (marked *):

- *Filters run in ``registry.FILTER_ORDER`` whatever the profile's filter order (the order only decides
  which rejection a diagnosis names, never where a pod goes).
- *A plugin's PreFilter runs with its Filter and its PreScore with its Score here: a config that enables
  one without the other is refused (a PreScore left without its Score is accepted: it only prepares
  state). Reserve, Permit, PreBind and Bind run for every plugin of the profile that has them, so a
  config that turns one of those off for an enabled plugin is refused too.
- *Every profile honours pods' own DoNotSchedule spread constraints (``core/config/policy.py``), so disabling
  PodTopologySpread's Filter is refused; so is disabling SchedulingGates (our queue always holds
  gated pods) or DefaultBinder (every profile's last Bind plugin).
- *DynamicResources and NodeDeclaredFeatures, when this scheduler's registry has no such plugin,
  are accepted enabled or disabled and do nothing (they pass every pod this scheduler can see; see
  ``registry.DEFAULT_PROFILE``); arguments for them are refused.
- *GangScheduling or Coscheduling enabled anywhere turns ``gangScheduling`` on (it enables both).
- *Process settings (``leaderElection``, ``clientConnection``, ``enableProfiling``,
  ``enableContentionProfiling``, ``delayCacheUntilActive``) are accepted and ignored, with a
  warning: the operator's own flags and deployment set those, not a policy.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..framework.arguments import PluginArgsError, parse_args
from ..framework.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from ..model.specs import FieldError, did_you_mean, is_int, unknown_keys
from ..plugins.default_binder import DefaultBinder
from ..plugins.default_preemption import DefaultPreemption
from ..plugins.pod_topology_spread import PodTopologySpread
from ..plugins.priority_sort import PrioritySort
from . import registry as reg
from .profile import Profile
from .registry import Registry

__all__ = ["API_VERSION", "KIND", "Translation", "load", "translate"]

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
POLICY_API_VERSION: Final = "scheduling.kopf.dev/v1alpha1"
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"

#: accepted and ignored: they configure the process, not its decisions
PROCESS_KEYS: Final = (
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "delayCacheUntilActive",
)
TOP_KEYS: Final = (
    "apiVersion",
    "kind",
    "parallelism",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    *PROCESS_KEYS,
)
PROFILE_KEYS: Final = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
#: every extension point of v1 ``Plugins``, MultiPoint first
POINTS: Final = (
    "multiPoint",
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "placementGenerate",
    "placementScore",
    "podGroupPostFilter",
)
SET_KEYS: Final = ("enabled", "disabled")
PLUGIN_KEYS: Final = ("name", "weight")
PLUGIN_CONFIG_KEYS: Final = ("name", "args")
#: ``ExtenderTLSConfig`` / ``Extender`` keys spelled differently in the SchedulingPolicy
EXTENDER_RENAMES: Final = {"enableHTTPS": "enableHttps"}

#: v1.37.2's default MultiPoint plugins with the default feature gates (name, weight)
DEFAULT_MULTI_POINT: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)

#: upstream plugins this scheduler does without, and the points upstream runs them at
IMPLICIT: Final[Mapping[str, frozenset[str]]] = {
    "SchedulingGates": frozenset({"preEnqueue"}),
    "NodeDeclaredFeatures": frozenset({"preFilter", "filter"}),
    "DynamicResources": frozenset(
        {"preEnqueue", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "preBind"}
    ),
}
#: must stay enabled (see the module docstring)
REQUIRED_IMPLICIT: Final = ("SchedulingGates",)

_POINT_CLASSES: Final[Mapping[str, type[Plugin]]] = {
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
}
#: the points ``spec.plugins`` entries run at (each at all it implements)
_LATE_POINTS: Final = ("reserve", "permit", "preBind", "bind")


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    weight: int | None
    #: where the user wrote it ("" for a default)
    path: str


@dataclass(slots=True)
class _Set:
    enabled: list[_Entry] = field(default_factory=list)
    #: (name, path)
    disabled: list[tuple[str, str]] = field(default_factory=list)

    def disabled_names(self) -> set[str]:
        return {name for name, _ in self.disabled}


@dataclass(frozen=True, slots=True)
class Translation:
    """The SchedulingPolicy manifests, one per profile in file order, and warnings about ignored settings."""

    policies: list[dict[str, Any]]
    warnings: list[str]
    #: per policy: spec path prefix -> the config path it came from (for ``policy.validate_policy``'s errors)
    origins: list[dict[str, str]] = field(default_factory=list)

    def config_path(self, index: int, spec_path: str) -> str:
        """Where in the KubeSchedulerConfiguration the policy `index`'s ``spec_path`` came from."""
        best = ""
        for prefix in self.origins[index] if index < len(self.origins) else ():
            if (spec_path == prefix or spec_path.startswith((prefix + ".", prefix + "["))) and len(prefix) > len(best):
                best = prefix
        if not best:
            return f"profiles[{index}] ({spec_path})"
        return self.origins[index][best] + spec_path[len(best) :]


def _caps(name: str, registry: Registry) -> frozenset[str] | None:
    """The extension points plugin `name` implements here (None: not a plugin this scheduler has)."""
    if name in IMPLICIT and registry.plugin(name) is None:
        return IMPLICIT[name]
    cls = registry.plugin(name)
    if cls is None or cls.NAME != name:  # upstream names are case-sensitive
        return None
    return frozenset(point for point, base in _POINT_CLASSES.items() if issubclass(cls, base))


def _plugin_class(name: str, registry: Registry) -> type[Plugin] | None:
    cls = registry.plugin(name)
    return cls if cls is not None and cls.NAME == name else None


# ----------------------------------------------------------------------------- reading


def _read_set(raw: Any, path: str, errors: list[FieldError], registry: Registry) -> _Set:
    out = _Set()
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, "must be an object with enabled and disabled lists"))
        return out
    unknown_keys(raw, SET_KEYS, path, errors)
    for key in SET_KEYS:
        items = raw.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            errors.append(FieldError(f"{path}.{key}", "must be a list"))
            continue
        for i, item in enumerate(items):
            where = f"{path}.{key}[{i}]"
            if not isinstance(item, Mapping):
                errors.append(FieldError(where, "must be an object with a name"))
                continue
            unknown_keys(item, PLUGIN_KEYS if key == "enabled" else ("name",), where, errors)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                errors.append(FieldError(f"{where}.name", "required: a non-empty string"))
                continue
            if key == "disabled":
                out.disabled.append((name, where))
                continue
            weight = item.get("weight")
            if weight is not None and (not is_int(weight) or not 0 <= weight <= reg.MAX_WEIGHT):
                errors.append(FieldError(f"{where}.weight", f"must be an integer from 0 to {reg.MAX_WEIGHT}"))
                continue
            if _caps(name, registry) is None:
                known = sorted({*(c.NAME for c in registry.plugins.values()), *IMPLICIT})
                errors.append(
                    FieldError(f"{where}.name", f"plugin {name!r} is not supported{did_you_mean(name, known)}")
                )
                continue
            out.enabled.append(_Entry(name, weight, where))
    return out


def _merge(default: _Set, custom: _Set) -> _Set:
    """Upstream ``mergePluginSet``."""
    disabled = custom.disabled_names() | default.disabled_names()
    custom_by_name = {e.name: e for e in custom.enabled}
    replaced: set[int] = set()
    enabled: list[_Entry] = []
    if "*" not in disabled:
        for entry in default.enabled:
            if entry.name in disabled:
                continue
            if entry.name in custom_by_name:
                entry = custom_by_name[entry.name]
                replaced.add(id(entry))
            enabled.append(entry)
    enabled.extend(e for e in custom.enabled if id(e) not in replaced)
    return _Set(enabled, custom.disabled + default.disabled)


def _expand(
    point: str, merged: _Set, multi: _Set, registry: Registry, where: str, errors: list[FieldError]
) -> list[_Entry]:
    """Upstream ``updatePluginList`` then ``expandMultiPointPlugins`` for one extension point."""
    explicit: list[_Entry] = []
    for entry in merged.enabled:
        caps = _caps(entry.name, registry) or frozenset()
        if point not in caps:
            errors.append(FieldError(f"{entry.path}.name", f"plugin {entry.name!r} has no {point} extension point"))
        elif any(e.name == entry.name for e in explicit):
            errors.append(FieldError(f"{entry.path}.name", f"plugin {entry.name!r} is enabled twice at {point}"))
        else:
            explicit.append(entry)
    disabled = merged.disabled_names()
    if "*" in disabled:
        return explicit
    names = {e.name for e in explicit}
    overrides: set[str] = set()
    from_multi: list[_Entry] = []
    for entry in multi.enabled:
        if point not in (_caps(entry.name, registry) or frozenset()) or entry.name in disabled:
            continue
        if entry.name in names:
            overrides.add(entry.name)
        elif any(e.name == entry.name for e in from_multi):
            errors.append(
                FieldError(f"{entry.path or where + '.multiPoint'}.name", f"plugin {entry.name!r} is enabled twice")
            )
        else:
            from_multi.append(entry)
    first = [e for e in explicit if e.name in overrides]
    rest = [e for e in explicit if e.name not in overrides]
    return first + from_multi + rest


def _score_weights(score: _Set, multi: _Set) -> dict[str, int]:
    """Upstream ``getValidScoreWeights``: the Score entry's weight, else MultiPoint's; 0 or none is 1."""
    weights: dict[str, int] = {}
    for entry in [*score.enabled, *multi.enabled]:
        weights.setdefault(entry.name, entry.weight or 1)
    return weights


# ----------------------------------------------------------------------------- one profile


@dataclass(slots=True)
class _Profile:
    """One profile's effective plugins per extension point."""

    index: int
    raw_plugins: Mapping[str, Any]
    points: dict[str, list[_Entry]]
    weights: dict[str, int]

    def names(self, point: str) -> list[str]:
        return [e.name for e in self.points.get(point, [])]

    def where(self, point: str, name: str) -> str:
        """The user's entry that decided `name` at `point`: a disable of it (or of "*"), else the point."""
        base = f"profiles[{self.index}].plugins"
        for key in (point, "multiPoint"):
            raw = self.raw_plugins.get(key)
            if not isinstance(raw, Mapping):
                continue
            for list_key in ("disabled", "enabled"):
                for i, item in enumerate(raw.get(list_key) or ()):
                    if isinstance(item, Mapping) and item.get("name") in (name, "*"):
                        return f"{base}.{key}.{list_key}[{i}]"
        return f"{base}.{point}"


def _effective(raw: Any, index: int, registry: Registry, errors: list[FieldError]) -> _Profile | None:
    path = f"profiles[{index}].plugins"
    raw_plugins: Mapping[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, Mapping):
            errors.append(FieldError(path, "must be an object"))
            return None
        unknown_keys(raw, POINTS, path, errors)
        raw_plugins = raw
    before = len(errors)
    custom = {point: _read_set(raw_plugins.get(point), f"{path}.{point}", errors, registry) for point in POINTS}
    if len(errors) > before:
        return None
    defaults = {point: _Set() for point in POINTS}
    defaults["multiPoint"] = _Set([_Entry(name, weight, "") for name, weight in DEFAULT_MULTI_POINT])
    merged = {point: _merge(defaults[point], custom[point]) for point in POINTS}
    points = {
        point: _expand(point, merged[point], merged["multiPoint"], registry, path, errors)
        for point in POINTS
        if point != "multiPoint"
    }
    return _Profile(index, raw_plugins, points, _score_weights(merged["score"], merged["multiPoint"]))


def _check_pairs(prof: _Profile, registry: Registry, errors: list[FieldError]) -> None:
    """PreFilter with Filter, PreScore with Score (see the module docstring)."""
    for pre, main in (("preFilter", "filter"), ("preScore", "score")):
        pres, mains = prof.names(pre), prof.names(main)
        for name in mains:
            if pre in (_caps(name, registry) or ()) and name not in pres and _plugin_class(name, registry):
                errors.append(
                    FieldError(
                        prof.where(pre, name),
                        f"plugin {name!r} is enabled at {main} but not at {pre}: "
                        f"its {pre} runs with its {main} here, so turning one off alone is not supported",
                    )
                )
        if pre == "preScore":
            continue  # a PreScore alone only prepares state nobody reads
        for name in pres:
            cls = _plugin_class(name, registry)
            if cls is not None and issubclass(cls, FilterPlugin) and name not in mains:
                errors.append(
                    FieldError(
                        prof.where(main, name),
                        f"plugin {name!r} is enabled at {pre} but not at {main}: "
                        f"its {pre} runs with its {main} here, so turning one off alone is not supported",
                    )
                )


def _required(prof: _Profile, registry: Registry, errors: list[FieldError]) -> None:
    if PodTopologySpread.NAME not in prof.names("filter"):
        errors.append(
            FieldError(
                prof.where("filter", PodTopologySpread.NAME),
                "disabling PodTopologySpread's filter is not supported: kopf-scheduler honours every pod's own "
                "DoNotSchedule topology spread constraints",
            )
        )
    for name in REQUIRED_IMPLICIT:
        if registry.plugin(name) is None and not all(name in prof.names(p) for p in IMPLICIT[name]):
            errors.append(
                FieldError(
                    prof.where("preEnqueue", name),
                    f"disabling {name} is not supported: kopf-scheduler's queue always holds gated pods back",
                )
            )
    binders = prof.names("bind")
    if not binders or binders[-1] != DefaultBinder.NAME:
        errors.append(
            FieldError(
                prof.where("bind", DefaultBinder.NAME),
                "DefaultBinder must be the last Bind plugin: kopf-scheduler ends every profile's Bind plugins with it",
            )
        )
    for point in ("postBind", "placementGenerate", "placementScore", "podGroupPostFilter"):
        for entry in prof.points.get(point, []):
            errors.append(FieldError(f"{entry.path}.name", f"{point} plugins are not supported"))


def _spec_plugins(prof: _Profile, registry: Registry, spec: dict[str, Any], errors: list[FieldError]) -> None:
    """Filters, scores, queue sort, preemption, gang and late plugins into `spec`."""
    base = f"profiles[{prof.index}].plugins"

    def own(names: list[str]) -> list[str]:
        return [n for n in names if _plugin_class(n, registry) is not None]

    filters = own(prof.names("filter"))
    scores = own(prof.names("score"))
    spec["predicates"] = [{"name": n} for n in filters if _plugin_class(n, registry) not in reg.GANG_PLUGINS]
    spec["priorities"] = [{"name": n, "weight": prof.weights.get(n, 1)} for n in scores]
    if not filters and not scores:
        errors.append(FieldError(base, "a profile with no Filter and no Score plugins is not supported"))
    sorts = prof.names("queueSort")
    if len(sorts) != 1:
        errors.append(FieldError(f"{base}.queueSort", f"exactly one QueueSort plugin is required, got {len(sorts)}"))
    elif sorts[0] != PrioritySort.NAME:
        spec["queueSort"] = [{"name": sorts[0]}]
    every = {n for point in prof.points.values() for n in (e.name for e in point)}
    gang = [n for n in every if _plugin_class(n, registry) in reg.GANG_PLUGINS]
    spec["gangScheduling"] = {"enabled": bool(gang)}
    post = own(prof.names("postFilter"))
    spec["preemption"] = DefaultPreemption.NAME in post
    instanced = set(filters) | set(scores)
    late: list[str] = []
    for point in _LATE_POINTS:
        for name in own(prof.names(point)):
            cls = _plugin_class(name, registry)
            if name not in instanced and name not in late and cls not in (*reg.GANG_PLUGINS, DefaultBinder):
                late.append(name)
    if late:
        spec["plugins"] = [{"name": n} for n in late]
    for name in sorted(every):
        cls = _plugin_class(name, registry)
        if cls is None or cls in reg.GANG_PLUGINS or cls is DefaultBinder:
            continue
        runs = name in instanced or name in late
        for point in (*_LATE_POINTS, "postFilter"):
            if point == "postFilter" and cls is DefaultPreemption:
                continue
            if runs and point in (_caps(name, registry) or ()) and name not in prof.names(point):
                errors.append(
                    FieldError(
                        prof.where(point, name),
                        f"plugin {name!r} runs at {point} whenever the profile enables it here; "
                        f"disabling only its {point} is not supported",
                    )
                )
        if not runs and cls is not DefaultPreemption and name in prof.names("postFilter"):
            errors.append(
                FieldError(prof.where("postFilter", name), f"plugin {name!r} at postFilter alone is not supported")
            )


def _plugin_config(
    raw: Any, index: int, registry: Registry, errors: list[FieldError]
) -> list[tuple[int, dict[str, Any]]]:
    """``pluginConfig`` into the SchedulingPolicy's ``pluginConfig``, upstream defaults applied."""
    path = f"profiles[{index}].pluginConfig"
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(FieldError(path, "must be a list"))
        return []
    out: list[tuple[int, dict[str, Any]]] = []
    seen: dict[str, str] = {}
    for j, item in enumerate(raw):
        where = f"{path}[{j}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError(where, "must be an object with name and args"))
            continue
        unknown_keys(item, PLUGIN_CONFIG_KEYS, where, errors)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"{where}.name", "required: a non-empty string"))
            continue
        if name in seen:
            errors.append(FieldError(f"{where}.name", f"repeated config for plugin {name!r} (also at {seen[name]})"))
            continue
        seen[name] = where
        args = item.get("args")
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            errors.append(FieldError(f"{where}.args", "must be an object"))
            continue
        args = dict(args)
        kind, api_version = args.pop("kind", None), args.pop("apiVersion", None)
        if kind is not None and kind != f"{name}Args":
            errors.append(FieldError(f"{where}.args.kind", f"must be {name + 'Args'!r}, got {kind!r}"))
            continue
        if api_version is not None and api_version != API_VERSION:
            errors.append(FieldError(f"{where}.args.apiVersion", f"must be {API_VERSION!r}, got {api_version!r}"))
            continue
        cls = _plugin_class(name, registry)
        if cls is None:
            if name in IMPLICIT and not args:
                continue
            what = "arguments for it are" if name in IMPLICIT else f"plugin {name!r} is"
            errors.append(FieldError(f"{where}.name", f"{what} not supported"))
            continue
        args = _default_args(name, args)
        try:
            parse_args(cls.Args, args)
        except PluginArgsError as exc:
            errors.append(FieldError(f"{where}.args" + (f".{exc.field}" if exc.field else ""), exc.message))
            continue
        out.append((j, {"name": name, "args": args}))
    return out


def _default_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """v1 defaulting our ``Args`` do not do themselves: resource weights 0 mean 1."""
    holder: Any = args
    if name == "NodeResourcesFit":
        holder = args.get("scoringStrategy")
    elif name != "NodeResourcesBalancedAllocation":
        return args
    if isinstance(holder, dict) and isinstance(holder.get("resources"), list):
        holder["resources"] = [
            {**r, "weight": 1} if isinstance(r, Mapping) and r.get("weight") == 0 else r for r in holder["resources"]
        ]
    return args


def _percentage(value: Any, path: str, errors: list[FieldError]) -> int | None:
    if value is None:
        return None
    if not is_int(value) or not 0 <= value <= 100:
        errors.append(FieldError(path, f"must be an integer from 0 to 100, got {value!r}"))
        return None
    return int(value)


def _profile(
    raw: Any, index: int, global_percentage: int | None, registry: Registry, errors: list[FieldError]
) -> tuple[dict[str, Any], dict[str, str]] | None:
    path = f"profiles[{index}]"
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return None
    unknown_keys(raw, PROFILE_KEYS, path, errors)
    spec: dict[str, Any] = {}
    name = raw.get("schedulerName")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.schedulerName", "required: a non-empty string"))
    spec["schedulerName"] = name
    before = len(errors)
    prof = _effective(raw.get("plugins"), index, registry, errors)
    if prof is not None and len(errors) == before:
        _check_pairs(prof, registry, errors)
        _required(prof, registry, errors)
        _spec_plugins(prof, registry, spec, errors)
    origins = {"spec": path, "spec.schedulerName": f"{path}.schedulerName", "spec.extenders": "extenders"}
    origins.update((f"spec.{key}", key) for key in ("parallelism", "podInitialBackoffSeconds", "podMaxBackoffSeconds"))
    config = _plugin_config(raw.get("pluginConfig"), index, registry, errors)
    if config:
        spec["pluginConfig"] = [entry for _, entry in config]
        origins.update((f"spec.pluginConfig[{k}]", f"{path}.pluginConfig[{j}]") for k, (j, _) in enumerate(config))
    own = _percentage(raw.get("percentageOfNodesToScore"), f"{path}.percentageOfNodesToScore", errors)
    percentage = own if own is not None else global_percentage
    if percentage:
        spec["percentageOfNodesToScore"] = percentage
    return spec, origins


# ----------------------------------------------------------------------------- the entry point


def _globals(config: Mapping[str, Any], errors: list[FieldError]) -> dict[str, Any]:
    """The settings every profile's spec shares."""
    shared: dict[str, Any] = {}
    parallelism = config.get("parallelism")
    if parallelism is not None:
        if not is_int(parallelism) or parallelism <= 0:
            errors.append(FieldError("parallelism", f"must be a positive integer, got {parallelism!r}"))
        else:
            shared["parallelism"] = parallelism
    for key in ("podInitialBackoffSeconds", "podMaxBackoffSeconds"):
        value = config.get(key)
        if value is not None:
            if not is_int(value) or value <= 0:
                errors.append(FieldError(key, f"must be a positive integer, got {value!r}"))
            else:
                shared[key] = value
    extenders = config.get("extenders")
    if extenders is not None:
        if not isinstance(extenders, list):
            errors.append(FieldError("extenders", "must be a list"))
        else:
            shared["extenders"] = [
                {EXTENDER_RENAMES.get(k, k): v for k, v in e.items()} if isinstance(e, Mapping) else e
                for e in extenders
            ]
            for i, e in enumerate(extenders):
                # upstream validation; the SchedulingPolicy would default a missing weight to 1
                if (
                    isinstance(e, Mapping)
                    and e.get("prioritizeVerb")
                    and not (is_int(e.get("weight")) and e["weight"] > 0)
                ):
                    errors.append(FieldError(f"extenders[{i}].weight", "must have a positive weight applied to it"))
    return shared


def translate(config: Any, *, registry: Registry | None = None) -> Translation | list[FieldError]:
    """A parsed KubeSchedulerConfiguration as SchedulingPolicy manifests (one per profile), or every error found.

    The specs still go through ``policy.validate_policy`` (``validate`` below does both).
    """
    plugins = registry if registry is not None else Registry.in_tree()
    if not isinstance(config, Mapping):
        return [FieldError("", "a KubeSchedulerConfiguration must be an object")]
    errors: list[FieldError] = []
    if config.get("kind") != KIND:
        errors.append(FieldError("kind", f"must be {KIND!r}, got {config.get('kind')!r}"))
    if config.get("apiVersion") != API_VERSION:
        errors.append(FieldError("apiVersion", f"must be {API_VERSION!r}, got {config.get('apiVersion')!r}"))
    for key in config:
        if key not in TOP_KEYS:
            hint = did_you_mean(str(key), TOP_KEYS)
            errors.append(FieldError(str(key), f"unknown field{hint or ' (allowed: ' + ', '.join(TOP_KEYS) + ')'}"))
    warnings = [
        f"{key}: a process setting, ignored (the operator's flags and deployment set it)"
        for key in PROCESS_KEYS
        if key in config
    ]
    shared = _globals(config, errors)
    global_percentage = _percentage(config.get("percentageOfNodesToScore"), "percentageOfNodesToScore", errors)
    raw_profiles = config.get("profiles")
    if raw_profiles is None or raw_profiles == []:
        raw_profiles = [{}]
    if not isinstance(raw_profiles, list):
        errors.append(FieldError("profiles", "must be a list"))
        return errors
    if len(raw_profiles) == 1 and isinstance(raw_profiles[0], Mapping) and raw_profiles[0].get("schedulerName") is None:
        raw_profiles = [{**raw_profiles[0], "schedulerName": DEFAULT_SCHEDULER_NAME}]
    specs: list[dict[str, Any]] = []
    origins: list[dict[str, str]] = []
    names: dict[str, int] = {}
    for i, raw in enumerate(raw_profiles):
        built = _profile(raw, i, global_percentage, plugins, errors)
        if built is None:
            continue
        spec, origin = built
        origins.append(origin)
        name = spec.get("schedulerName")
        if isinstance(name, str) and name:
            if name in names:
                errors.append(FieldError(f"profiles[{i}].schedulerName", f"duplicate (also profiles[{names[name]}])"))
            names.setdefault(name, i)
        specs.append({**spec, **shared})
    _same_queue_sort(specs, errors)
    if errors:
        return errors
    return Translation([_manifest(spec) for spec in specs], warnings, origins)


def load(config: Any, *, registry: Registry | None = None) -> tuple[list[Profile], list[str]] | list[FieldError]:
    """A KubeSchedulerConfiguration as validated Profiles (one per profile, file order) and warnings, or its
    errors, every one at its path in the configuration."""
    from .policy import validate_policy

    translated = translate(config, registry=registry)
    if isinstance(translated, list):
        return translated
    profiles: list[Profile] = []
    errors: list[FieldError] = []
    for i, manifest in enumerate(translated.policies):
        name = manifest["spec"]["schedulerName"]
        result = validate_policy(
            manifest["spec"], source=f"KubeSchedulerConfiguration profile {name}", registry=registry
        )
        if isinstance(result, list):
            errors.extend(FieldError(translated.config_path(i, e.path), e.message) for e in result)
        else:
            profiles.append(result)
    return errors or (profiles, translated.warnings)


def _same_queue_sort(specs: Sequence[Mapping[str, Any]], errors: list[FieldError]) -> None:
    """Upstream validation: every profile has the same QueueSort plugin."""
    first = specs[0].get("queueSort") if specs else None
    for i, spec in enumerate(specs[1:], start=1):
        if spec.get("queueSort") != first:
            errors.append(
                FieldError(f"profiles[{i}].plugins.queueSort", "every profile must use the same QueueSort plugin")
            )


def _manifest(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "SchedulingPolicy",
        "metadata": {"name": spec["schedulerName"]},
        "spec": dict(spec),
    }
