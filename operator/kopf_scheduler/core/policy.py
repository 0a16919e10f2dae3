"""SchedulingPolicy spec -> a validated, ready-to-run ``Profile``, or the list of what is wrong with it.

The spec is the ``SchedulingPolicy`` custom resource's ``spec`` (crds/schedulingpolicy.yaml): the v1.9
Policy file's content in camelCase, plus a few modern profile settings. Names resolve through
``core/registry.py`` (both the v1.9 names and today's plugin names; see its docstring for how).

Rules (decisions marked *):

- ``schedulerName`` is required.
- ``algorithmProvider`` (DefaultProvider | ClusterAutoscalerProvider) *or* explicit ``predicates`` /
  ``priorities``; both together is an error (v1.9's AlgorithmSource was one-of). *With none of the
  three, the DefaultProvider is used (v1.9's default when no Policy is given).
- v1.9 list rules: a missing or empty ``predicates`` list (with ``priorities`` given) means only the
  mandatory predicates; an empty or missing ``priorities`` list means EqualPriority (unless extenders
  are configured, whose scores then decide, as in v1.9's PrioritizeNodes).
- *Mandatory CheckNodeCondition is added to provider profiles and to policies that use any v1.9 name
  (or no names at all), not to policies written only with modern plugin names, and *EqualPriority
  for an empty priorities list likewise applies only to those (a modern profile with no score
  plugins scores every node 1 and stops at the first feasible node, as upstream today).
- Filters run in ``registry.FILTER_ORDER`` whatever order the policy lists them; entries that enable
  the same plugin instance are de-duplicated (GeneralPredicates + PodFitsResources -> one
  NodeResourcesFit). Listing the same predicate or priority twice is an error, and so are two
  priority names that configure the same scorer (NodeAffinity + NodeAffinityPriority): which weight
  was meant would be a guess.
- Priority ``weight`` is an integer in ``registry.MIN_WEIGHT..MAX_WEIGHT`` (1..1,000,000); *when
  omitted it is the name's default weight (1; NodePreferAvoidPods 10000); v1.9 rejected a missing
  weight.
- ``argument``: for v1.9 names, exactly one of the v1.9 argument keys (predicates:
  ``serviceAffinity {labels}``, ``labelsPresence {labels, presence}``; priorities:
  ``serviceAntiAffinity {label}``, ``labelPreference {label, presence}``,
  ``requestedToCapacityRatioArguments {shape, resources}``), under a user-chosen name; for modern
  plugin names, the plugin's own arguments (e.g. NodeResourcesFit ``scoringStrategy``). Plugin
  argument errors (``PluginArgsError``) are reported at their field path in the spec.
- ``hardPodAffinitySymmetricWeight`` 1..100 becomes InterPodAffinity's ``hardPodAffinityWeight``; 0 means
  unset (the plugin's default, 1), as in v1.9 and the CRD.
- ``argument.resources`` on a resource priority (Least/MostRequested, RequestedToCapacityRatio,
  BalancedResourceAllocation and their plugin names) chooses the resources and their weights.
- ``parallelism`` (1..1024) is validated and kept in the normalised spec; Profile has no field for it.
- ``percentageOfNodesToScore`` 0..100 (0 = adaptive); backoffs > 0 seconds, max >= initial.
- Extenders: ``urlPrefix`` required; a ``prioritizeVerb`` needs ``weight`` > 0 (default 1); at most
  one extender may have a ``bindVerb``; ``httpTimeout`` is a duration ("5s", "1m30s", "500ms") or a
  number of seconds.
- ``schedulerName`` must be a DNS-1123 subdomain (as the CRD's pattern).
- *Names are matched case-insensitively and written back in their canonical spelling.

Pure: no I/O. Plugin modules are imported lazily when a profile is built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from . import registry
from .plugins import PluginArgsError
from .profile import (
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    ExtenderConfig,
    Profile,
)

#: v1.9 api/validation: predicate / priority names.
NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])$")
MAX_HARD_POD_AFFINITY_WEIGHT: Final = 100
MAX_PARALLELISM: Final = 1024
#: DNS-1123 subdomain, as the CRD's schedulerName pattern
SCHEDULER_NAME_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DEFAULT_EXTENDER_TIMEOUT_SECONDS: Final = 5.0

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
)
PREDICATE_KEYS: Final = ("name", "argument")
PRIORITY_KEYS: Final = ("name", "weight", "argument")
EXTENDER_KEYS: Final = (
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "bindVerb",
    "weight",
    "enableHttps",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
)
TLS_KEYS: Final = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
MANAGED_RESOURCE_KEYS: Final = ("name", "ignoredByScheduler")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem in a spec: where (``spec.priorities[2].weight``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# ----------------------------------------------------------------------------- small checks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unknown_keys(obj: Mapping[str, Any], allowed: Sequence[str], path: str, errors: list[FieldError]) -> None:
    for key in obj:
        if key in allowed:
            continue
        hint = registry.suggest(str(key), list(allowed))
        tail = f"; did you mean {hint!r}?" if hint else f" (allowed: {', '.join(allowed)})"
        errors.append(FieldError(f"{path}.{key}", f"unknown field{tail}"))


def _did_you_mean(name: str, pool: Sequence[str]) -> str:
    hint = registry.suggest(name, list(pool))
    return f"; did you mean {hint!r}?" if hint else ""


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float | None:
    """A Go-style duration ("5s", "1m30s", "250ms") or a number of seconds -> seconds; None if invalid."""
    if _is_number(value):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(value):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    return total if pos == len(value) else None


# ----------------------------------------------------------------------------- plugin requests


@dataclass(slots=True)
class _Request:
    """One plugin instance wanted by one spec entry, with where its args came from."""

    ref: registry.PluginRef
    path: str
    #: (plugin args field prefix, spec path prefix) pairs for error mapping, longest first
    field_map: tuple[tuple[str, str], ...] = ()
    order: int = 0


@dataclass(slots=True)
class _Instance:
    ref: registry.PluginRef
    args: dict[str, Any]
    requests: list[_Request] = field(default_factory=list)
    plugin: Any = None


@dataclass(frozen=True, slots=True)
class _Built:
    """One valid predicates[] / priorities[] item: canonical name, normalised entry, plugin requests."""

    name: str
    normal: dict[str, Any]
    requests: list[_Request]
    weight: int
    legacy: bool


def _map_field(instance: _Instance, plugin_field: str) -> str:
    """The spec path of a plugin-args field: via the longest matching prefix of any contributing entry."""
    best: tuple[int, str] | None = None
    for req in instance.requests:
        for prefix, spec_prefix in req.field_map:
            if prefix and not (plugin_field == prefix or plugin_field.startswith((prefix + ".", prefix + "["))):
                continue
            rest = plugin_field[len(prefix):]
            if rest and rest[0] not in ".[":
                rest = "." + rest
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), spec_prefix + rest)
    if best is not None:
        return best[1]
    first = instance.requests[0].path
    return f"{first}.argument.{plugin_field}" if plugin_field else first


# ----------------------------------------------------------------------------- predicates / priorities


def _argument_style(
    argument: Mapping[str, Any], kinds: Mapping[str, registry.ArgumentKind], path: str, errors: list[FieldError]
) -> registry.ArgumentKind | None | bool:
    """The v1.9 argument kind used, None if none is, False (after reporting) if the argument is malformed."""
    used = [k for k in argument if k in kinds]
    if not used:
        return None
    if len(argument) != 1:
        errors.append(FieldError(f"{path}.argument", f"exactly one of {', '.join(kinds)} is required, got {', '.join(map(str, argument))}"))
        return False
    kind = kinds[used[0]]
    body = argument[kind.key]
    if not isinstance(body, Mapping):
        errors.append(FieldError(f"{path}.argument.{kind.key}", "must be an object"))
        return False
    before = len(errors)
    _unknown_keys(body, kind.fields, f"{path}.argument.{kind.key}", errors)
    return kind if len(errors) == before else False


def _check_name(item: Any, path: str, allowed: Sequence[str], errors: list[FieldError]) -> str | None:
    if not isinstance(item, Mapping):
        errors.append(FieldError(path, "must be an object with a name"))
        return None
    _unknown_keys(item, allowed, path, errors)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        errors.append(FieldError(f"{path}.name", "required: a non-empty string"))
        return None
    if not NAME_PATTERN.match(name):
        errors.append(FieldError(f"{path}.name", f"invalid name {name!r}: letters, digits and '-', at least 2 characters, starting and ending with a letter or digit"))
        return None
    return name


def _name_and_argument(
    item: Any, path: str, keys: Sequence[str], errors: list[FieldError]
) -> tuple[str, Mapping[str, Any] | None] | None:
    """The checked name and argument object of one predicates[] / priorities[] item, or None after reporting."""
    name = _check_name(item, path, keys, errors)
    if name is None:
        return None
    argument = item.get("argument")
    if argument is not None and not isinstance(argument, Mapping):
        errors.append(FieldError(f"{path}.argument", "must be an object"))
        return None
    return name, argument


def _predicate_requests(item: Any, path: str, order: int, errors: list[FieldError]) -> _Built | None:
    """One predicates[] item, or None after reporting what is wrong with it."""
    checked = _name_and_argument(item, path, PREDICATE_KEYS, errors)
    if checked is None:
        return None
    name, argument = checked
    entry = registry.lookup_predicate(name)
    if argument:
        kind = _argument_style(argument, registry.ARGUMENT_PREDICATES, path, errors)
        if kind is False:
            return None
        if isinstance(kind, registry.ArgumentKind):
            body = dict(argument[kind.key])
            ref = registry.PluginRef(kind.target, kind.fixed_name or name, body, kind.slot)
            req = _Request(ref, path, (("", f"{path}.argument.{kind.key}"),), order)
            canonical = name
            return _Built(canonical, {"name": canonical, "argument": {kind.key: body}}, [req], 0, True)
        if entry is None:
            errors.append(_unknown_predicate(name, path))
            return None
        if not entry.takes_args:
            errors.append(FieldError(f"{path}.argument", f"{entry.name} takes no argument (v1.9 arguments, under a name of your own: {', '.join(registry.ARGUMENT_PREDICATES)})"))
            return None
        (ref,) = entry.filters
        ref = registry.PluginRef(ref.target, ref.name, {**ref.args, **argument}, ref.slot)
        return _Built(entry.name, {"name": entry.name, "argument": dict(argument)}, [_Request(ref, path, (("", f"{path}.argument"),), order)], 0, False)
    if entry is None:
        errors.append(_unknown_predicate(name, path))
        return None
    reqs = [_Request(ref, path, (), order) for ref in entry.filters]
    return _Built(entry.name, {"name": entry.name}, reqs, 0, entry.legacy)


def _unknown_predicate(name: str, path: str) -> FieldError:
    if registry.lookup_priority(name) is not None:
        return FieldError(f"{path}.name", f"{name!r} is a priority, not a predicate; list it under spec.priorities")
    hint = _did_you_mean(name, list(registry.PREDICATES))
    if hint:
        return FieldError(f"{path}.name", f"unknown predicate {name!r}{hint}")
    return FieldError(
        f"{path}.name",
        f"unknown predicate {name!r} (a custom predicate needs argument.serviceAffinity or argument.labelsPresence)",
    )


def _unknown_priority(name: str, path: str) -> FieldError:
    if registry.lookup_predicate(name) is not None:
        return FieldError(f"{path}.name", f"{name!r} is a predicate, not a priority; list it under spec.predicates")
    hint = _did_you_mean(name, list(registry.PRIORITIES))
    if hint:
        return FieldError(f"{path}.name", f"unknown priority {name!r}{hint}")
    return FieldError(
        f"{path}.name",
        f"unknown priority {name!r} (a custom priority needs argument.serviceAntiAffinity, argument.labelPreference "
        "or argument.requestedToCapacityRatioArguments)",
    )


def _priority_request(item: Any, path: str, order: int, errors: list[FieldError]) -> _Built | None:
    """One priorities[] item (one request), or None after reporting what is wrong with it."""
    checked = _name_and_argument(item, path, PRIORITY_KEYS, errors)
    if checked is None:
        return None
    name, argument = checked
    entry = registry.lookup_priority(name)
    result: _Built | None = None
    default_weight = entry.weight if entry is not None else 1
    if argument and entry is not None and entry.resources_arg and set(argument) == {"resources"}:
        assert entry.scorer is not None
        ref = entry.scorer
        args = registry.with_resources(ref.args, entry.resources_arg, argument["resources"])
        ref = registry.PluginRef(ref.target, ref.name, args, "")
        fmap: tuple[tuple[str, str], ...] = ((entry.resources_arg, f"{path}.argument.resources"), ("", f"{path}.argument"))
        normal_arg = {"resources": argument["resources"]}
        result = _Built(entry.name, {"name": entry.name, "argument": normal_arg}, [_Request(ref, path, fmap, order)], default_weight, entry.legacy)
    elif argument:
        kind = _argument_style(argument, registry.ARGUMENT_PRIORITIES, path, errors)
        if kind is False:
            return None
        if isinstance(kind, registry.ArgumentKind):
            body = dict(argument[kind.key])
            canonical = name
            if kind.key == "requestedToCapacityRatioArguments":
                args = registry.rtcr_args(body)
                fmap = tuple((p, f"{path}.argument.{kind.key}.{s}") for p, s in registry.RTCR_FIELD_MAP)
                fmap += (("", f"{path}.argument.{kind.key}"),)
            else:
                args = body
                fmap = (("", f"{path}.argument.{kind.key}"),)
            ref = registry.PluginRef(kind.target, kind.fixed_name or name, args, "")
            result = _Built(canonical, {"name": canonical, "argument": {kind.key: body}}, [_Request(ref, path, fmap, order)], default_weight, True)
        elif entry is None:
            errors.append(_unknown_priority(name, path))
            return None
        elif not entry.takes_args:
            what = "takes only argument.resources" if entry.resources_arg else "takes no argument"
            errors.append(FieldError(f"{path}.argument", f"{entry.name} {what} (v1.9 arguments, under a name of your own: {', '.join(registry.ARGUMENT_PRIORITIES)})"))
            return None
        else:
            assert entry.scorer is not None
            ref = registry.PluginRef(entry.scorer.target, entry.scorer.name, {**entry.scorer.args, **argument}, "")
            result = _Built(entry.name, {"name": entry.name, "argument": dict(argument)}, [_Request(ref, path, (("", f"{path}.argument"),), order)], default_weight, False)
    else:
        if entry is None:
            errors.append(_unknown_priority(name, path))
            return None
        assert entry.scorer is not None
        result = _Built(entry.name, {"name": entry.name}, [_Request(entry.scorer, path, (), order)], default_weight, entry.legacy)
    weight = item.get("weight", None)
    if weight is None:
        weight = result.weight
    elif not _is_int(weight) or not registry.MIN_WEIGHT <= weight <= registry.MAX_WEIGHT:
        errors.append(FieldError(f"{path}.weight", f"must be an integer from {registry.MIN_WEIGHT} to {registry.MAX_WEIGHT}, got {weight!r}"))
        return None
    normal = {"name": result.name, "weight": weight, **({"argument": result.normal["argument"]} if "argument" in result.normal else {})}
    return _Built(result.name, normal, result.requests, weight, result.legacy)


# ----------------------------------------------------------------------------- extenders


def _extenders(value: Any, errors: list[FieldError]) -> tuple[list[ExtenderConfig], list[dict[str, Any]]]:
    configs: list[ExtenderConfig] = []
    normal: list[dict[str, Any]] = []
    if value is None:
        return configs, normal
    if not isinstance(value, list):
        errors.append(FieldError("spec.extenders", "must be a list"))
        return configs, normal
    binder: str | None = None
    for i, ext in enumerate(value):
        path = f"spec.extenders[{i}]"
        if not isinstance(ext, Mapping):
            errors.append(FieldError(path, "must be an object"))
            continue
        before = len(errors)
        _unknown_keys(ext, EXTENDER_KEYS, path, errors)
        url = ext.get("urlPrefix")
        if not isinstance(url, str) or not url:
            errors.append(FieldError(f"{path}.urlPrefix", "required: a non-empty URL"))
        verbs: dict[str, str] = {}
        for key in ("filterVerb", "prioritizeVerb", "bindVerb"):
            verb = ext.get(key, "")
            if not isinstance(verb, str):
                errors.append(FieldError(f"{path}.{key}", "must be a string"))
                verb = ""
            verbs[key] = verb
        weight = ext.get("weight")
        if weight is None:
            weight = 1
        elif not _is_int(weight) or weight > registry.MAX_WEIGHT or weight < 0:
            errors.append(FieldError(f"{path}.weight", f"must be an integer from 1 to {registry.MAX_WEIGHT}, got {weight!r}"))
            weight = 1
        if verbs["prioritizeVerb"] and weight <= 0:
            errors.append(FieldError(f"{path}.weight", "an extender with a prioritizeVerb needs a positive weight"))
        if verbs["bindVerb"]:
            if binder is not None:
                errors.append(FieldError(f"{path}.bindVerb", f"only one extender may bind; {binder} already has a bindVerb"))
            else:
                binder = path
        flags: dict[str, bool] = {}
        for key in ("enableHttps", "nodeCacheCapable", "ignorable"):
            flag = ext.get(key, False)
            if not isinstance(flag, bool):
                errors.append(FieldError(f"{path}.{key}", "must be a boolean"))
                flag = False
            flags[key] = flag
        timeout = DEFAULT_EXTENDER_TIMEOUT_SECONDS
        if "httpTimeout" in ext:
            parsed = parse_duration(ext["httpTimeout"])
            if parsed is None or parsed <= 0:
                errors.append(FieldError(f"{path}.httpTimeout", f"must be a positive duration such as \"5s\" or a number of seconds, got {ext['httpTimeout']!r}"))
            else:
                timeout = parsed
        tls = ext.get("tlsConfig")
        if tls is not None:
            if not isinstance(tls, Mapping):
                errors.append(FieldError(f"{path}.tlsConfig", "must be an object"))
            else:
                _unknown_keys(tls, TLS_KEYS, f"{path}.tlsConfig", errors)
        managed: list[str] = []
        resources = ext.get("managedResources", [])
        if not isinstance(resources, list):
            errors.append(FieldError(f"{path}.managedResources", "must be a list"))
            resources = []
        for j, res in enumerate(resources):
            rpath = f"{path}.managedResources[{j}]"
            if not isinstance(res, Mapping):
                errors.append(FieldError(rpath, "must be an object with a name"))
                continue
            _unknown_keys(res, MANAGED_RESOURCE_KEYS, rpath, errors)
            rname = res.get("name")
            if not isinstance(rname, str) or not rname:
                errors.append(FieldError(f"{rpath}.name", "required: a resource name"))
                continue
            if not isinstance(res.get("ignoredByScheduler", False), bool):
                errors.append(FieldError(f"{rpath}.ignoredByScheduler", "must be a boolean"))
            managed.append(rname)
        if len(errors) != before:
            continue
        configs.append(
            ExtenderConfig(
                url_prefix=str(url),
                filter_verb=verbs["filterVerb"],
                prioritize_verb=verbs["prioritizeVerb"],
                bind_verb=verbs["bindVerb"],
                weight=weight,
                enable_https=flags["enableHttps"],
                http_timeout_seconds=timeout,
                node_cache_capable=flags["nodeCacheCapable"],
                ignorable=flags["ignorable"],
                managed_resources=tuple(managed),
            )
        )
        normal.append({k: ext[k] for k in EXTENDER_KEYS if k in ext} | {"weight": weight, "httpTimeout": _render_seconds(timeout)})
    return configs, normal


def _render_seconds(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    if seconds * 1000 == int(seconds * 1000):
        return f"{int(seconds * 1000)}ms"
    return f"{seconds:g}s"


# ----------------------------------------------------------------------------- the entry point


def validate_policy(spec: Mapping[str, Any], *, source: str = "") -> Profile | list[FieldError]:
    """Validate a SchedulingPolicy spec into a Profile with live plugins, or return every error found."""
    errors: list[FieldError] = []
    if not isinstance(spec, Mapping):
        return [FieldError("spec", "must be an object")]
    _unknown_keys(spec, SPEC_KEYS, "spec", errors)
    normal: dict[str, Any] = {}

    scheduler_name = spec.get("schedulerName")
    if not isinstance(scheduler_name, str) or not scheduler_name.strip():
        errors.append(FieldError("spec.schedulerName", "required: the name pods select with spec.schedulerName"))
        scheduler_name = ""
    elif len(scheduler_name) > 253 or not SCHEDULER_NAME_PATTERN.match(scheduler_name):
        errors.append(FieldError("spec.schedulerName", f"invalid scheduler name {scheduler_name!r}: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"))
    normal["schedulerName"] = scheduler_name

    provider_name = spec.get("algorithmProvider")
    has_lists = "predicates" in spec or "priorities" in spec
    provider: registry.Provider | None = None
    if provider_name is not None:
        if not isinstance(provider_name, str):
            errors.append(FieldError("spec.algorithmProvider", "must be a string"))
        else:
            provider = registry.lookup_provider(provider_name)
            if provider is None:
                hint = _did_you_mean(provider_name, list(registry.PROVIDERS))
                errors.append(FieldError("spec.algorithmProvider", f"unknown algorithm provider {provider_name!r}{hint or ' (known: ' + ', '.join(registry.PROVIDERS) + ')'}"))
        if has_lists:
            errors.append(FieldError("spec.algorithmProvider", "give either algorithmProvider or predicates/priorities, not both"))
    elif not has_lists:
        provider = registry.PROVIDERS[registry.DEFAULT_PROVIDER]

    filter_requests: list[_Request] = []
    score_requests: list[tuple[_Request, int, str]] = []
    legacy_style = provider is not None
    order = 0

    if provider is not None:
        normal["algorithmProvider"] = provider.name
        for pname in provider.predicates:
            entry = registry.PREDICATES[pname]
            for ref in entry.filters:
                filter_requests.append(_Request(ref, "spec.algorithmProvider", (), order))
                order += 1
        for pname, weight in provider.priorities:
            entry = registry.PRIORITIES[pname]
            assert entry.scorer is not None
            score_requests.append((_Request(entry.scorer, "spec.algorithmProvider", (), order), weight, pname))
            order += 1
    else:
        names_seen = 0
        modern_only = True
        for key, builder in (("predicates", _predicate_requests), ("priorities", _priority_request)):
            items = spec.get(key)
            if items is None:
                items = []
            if not isinstance(items, list):
                errors.append(FieldError(f"spec.{key}", "must be a list"))
                continue
            seen: dict[str, str] = {}
            out: list[dict[str, Any]] = []
            for i, item in enumerate(items):
                path = f"spec.{key}[{i}]"
                built = builder(item, path, order, errors)
                order += 1
                if built is None:
                    continue
                canonical = built.name
                if canonical.lower() in seen:
                    errors.append(FieldError(f"{path}.name", f"duplicate {key[:-1]} {canonical!r} (also at {seen[canonical.lower()]})"))
                    continue
                seen[canonical.lower()] = path
                out.append(built.normal)
                names_seen += 1
                modern_only = modern_only and not built.legacy
                if key == "predicates":
                    filter_requests.extend(built.requests)
                else:
                    score_requests.extend((req, built.weight, canonical) for req in built.requests)
            normal[key] = out
        legacy_style = names_seen == 0 or not modern_only

    # -- scalar settings
    hard_weight = spec.get("hardPodAffinitySymmetricWeight")
    if hard_weight == 0 and _is_int(hard_weight):
        hard_weight = None  # 0 = unset: the plugin default (1), as v1.9 and the CRD say
    if hard_weight is not None:
        if not _is_int(hard_weight) or not 0 <= hard_weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            errors.append(FieldError("spec.hardPodAffinitySymmetricWeight", f"must be an integer from 0 to {MAX_HARD_POD_AFFINITY_WEIGHT}, got {hard_weight!r}"))
            hard_weight = None
        else:
            normal["hardPodAffinitySymmetricWeight"] = hard_weight
    check_all = spec.get("alwaysCheckAllPredicates", False)
    if not isinstance(check_all, bool):
        errors.append(FieldError("spec.alwaysCheckAllPredicates", "must be a boolean"))
        check_all = False
    normal["alwaysCheckAllPredicates"] = check_all
    percentage = spec.get("percentageOfNodesToScore", 0)
    if not _is_int(percentage) or not 0 <= percentage <= 100:
        errors.append(FieldError("spec.percentageOfNodesToScore", f"must be an integer from 0 (adaptive) to 100, got {percentage!r}"))
        percentage = 0
    normal["percentageOfNodesToScore"] = percentage
    backoff: dict[str, float] = {}
    for key, default in (("podInitialBackoffSeconds", DEFAULT_POD_INITIAL_BACKOFF_SECONDS), ("podMaxBackoffSeconds", DEFAULT_POD_MAX_BACKOFF_SECONDS)):
        value = spec.get(key, default)
        if not _is_number(value) or value <= 0:
            errors.append(FieldError(f"spec.{key}", f"must be a positive number of seconds, got {value!r}"))
            value = default
        backoff[key] = float(value)
        normal[key] = value
    if backoff["podMaxBackoffSeconds"] < backoff["podInitialBackoffSeconds"] and not any(e.path.endswith("BackoffSeconds") for e in errors):
        errors.append(FieldError("spec.podMaxBackoffSeconds", f"must be at least podInitialBackoffSeconds ({normal['podInitialBackoffSeconds']})"))

    parallelism = spec.get("parallelism")
    if parallelism is not None:
        # carried in the normalised spec for the runtime; the core algorithm is single-threaded
        if not _is_int(parallelism) or not 1 <= parallelism <= MAX_PARALLELISM:
            errors.append(FieldError("spec.parallelism", f"must be an integer from 1 to {MAX_PARALLELISM}, got {parallelism!r}"))
        else:
            normal["parallelism"] = parallelism

    extenders, normal_extenders = _extenders(spec.get("extenders"), errors)
    if "extenders" in spec:
        normal["extenders"] = normal_extenders

    # -- v1.9 rules for legacy-style policies
    if legacy_style:
        present = {r.ref.key for r in filter_requests}
        for pname in registry.MANDATORY_PREDICATES:
            for ref in registry.PREDICATES[pname].filters:
                if ref.key not in present:
                    filter_requests.append(_Request(ref, "spec.predicates", (), order))
                    order += 1
        if not score_requests and not spec.get("extenders"):
            equal = registry.PRIORITIES["EqualPriority"]
            assert equal.scorer is not None
            score_requests.append((_Request(equal.scorer, "spec.priorities", (), order), 1, "EqualPriority"))

    if errors:
        return errors

    # -- group requests into instances
    instances: dict[tuple[str, str | None], _Instance] = {}

    def want(req: _Request) -> _Instance | None:
        inst = instances.get(req.ref.key)
        if inst is None:
            inst = instances[req.ref.key] = _Instance(req.ref, dict(req.ref.args))
        else:
            for k, v in req.ref.args.items():
                if k in inst.args and inst.args[k] != v:
                    other = inst.requests[0].path
                    errors.append(FieldError(f"{req.path}.argument", f"conflicting arguments for {req.ref.name or req.ref.target.split(':')[1]} ({k!r} differs from {other})"))
                    return None
                inst.args[k] = v
        inst.requests.append(req)
        return inst

    filter_instances: list[_Instance] = []
    for req in filter_requests:
        inst = want(req)
        if inst is not None and inst not in filter_instances:
            filter_instances.append(inst)
    scored: dict[int, tuple[_Instance, int]] = {}
    owner: dict[int, str] = {}
    for req, weight, pname in score_requests:
        inst = want(req)
        if inst is None:
            continue
        if id(inst) in scored:
            errors.append(FieldError(req.path, f"{pname} configures the same scorer as {owner[id(inst)]}; list it once"))
            continue
        scored[id(inst)] = (inst, weight)
        owner[id(inst)] = pname
    if hard_weight is not None:
        for inst in instances.values():
            if inst.ref.target == registry.INTER_POD_AFFINITY:
                inst.args.setdefault("hardPodAffinityWeight", hard_weight)
                if inst.args["hardPodAffinityWeight"] != hard_weight:
                    errors.append(FieldError("spec.hardPodAffinitySymmetricWeight", "conflicts with the InterPodAffinity argument hardPodAffinityWeight"))
                inst.requests.append(_Request(inst.ref, "spec", (("hardPodAffinityWeight", "spec.hardPodAffinitySymmetricWeight"),), order))
    if errors:
        return errors

    # -- build live plugins
    for inst in instances.values():
        try:
            cls = registry.resolve(inst.ref.target)
        except (ImportError, AttributeError, TypeError) as exc:
            errors.append(FieldError(inst.requests[0].path, f"plugin {inst.ref.target} is not available: {exc}"))
            continue
        try:
            inst.plugin = cls(inst.args or None, name=inst.ref.name)
        except PluginArgsError as exc:
            errors.append(FieldError(_map_field(inst, exc.field), exc.message))
    if errors:
        return errors

    filter_instances.sort(key=lambda inst: (registry.filter_rank(inst.ref.slot), min(r.order for r in inst.requests)))
    profile = Profile(
        scheduler_name=scheduler_name,
        filters=tuple(inst.plugin for inst in filter_instances),
        scorers=tuple((inst.plugin, weight) for inst, weight in scored.values()),
        always_check_all_predicates=check_all,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=backoff["podInitialBackoffSeconds"],
        pod_max_backoff_seconds=backoff["podMaxBackoffSeconds"],
        extenders=tuple(extenders),
        source=source or (provider.name if provider is not None else f"policy {scheduler_name}"),
        spec=normal,
    )
    return profile


def default_profile(scheduler_name: str = "default-scheduler") -> Profile:
    """The v1.9 DefaultProvider profile (raises if it cannot be built: a bug or a missing plugin)."""
    result = validate_policy({"schedulerName": scheduler_name, "algorithmProvider": registry.DEFAULT_PROVIDER})
    if isinstance(result, list):
        raise RuntimeError("DefaultProvider does not build: " + "; ".join(map(str, result)))
    return result
