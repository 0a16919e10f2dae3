"""HTTP extenders (v1.9 Policy ``extenders``): their validated configuration.

Reference: v1.9 ``plugin/pkg/scheduler/api/types.go`` (``ExtenderConfig``) and today's
``pkg/scheduler/apis/config/validation`` for the rules: ``urlPrefix`` is required; a
``prioritizeVerb`` needs a positive ``weight`` (default 1); at most one extender may have a
``bindVerb``; ``httpTimeout`` is a duration ("5s", "1m30s", "500ms") or a number of seconds.

Pure: the operator performs the HTTP calls; this module only says what to call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .specs import FieldError, is_int, parse_duration, unknown_keys

__all__ = ["EXTENDER_KEYS", "MANAGED_RESOURCE_KEYS", "TLS_KEYS", "ExtenderConfig", "validate_extenders"]

DEFAULT_EXTENDER_TIMEOUT_SECONDS: Final = 5.0
#: extender weights, as priority weights
MAX_EXTENDER_WEIGHT: Final = 1_000_000

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
class ExtenderConfig:
    """One HTTP extender: the operator calls it, the core only carries its configuration."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 1
    enable_https: bool = False
    http_timeout_seconds: float = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    node_cache_capable: bool = False
    ignorable: bool = False
    managed_resources: tuple[str, ...] = ()


def validate_extenders(value: Any, errors: list[FieldError]) -> tuple[list[ExtenderConfig], list[dict[str, Any]]]:
    """``spec.extenders`` -> configurations and their normalised form; problems go to ``errors``."""
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
        unknown_keys(ext, EXTENDER_KEYS, path, errors)
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
        elif not is_int(weight) or weight > MAX_EXTENDER_WEIGHT or weight < 0:
            errors.append(FieldError(f"{path}.weight", f"must be an integer from 1 to {MAX_EXTENDER_WEIGHT}, got {weight!r}"))
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
                unknown_keys(tls, TLS_KEYS, f"{path}.tlsConfig", errors)
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
            unknown_keys(res, MANAGED_RESOURCE_KEYS, rpath, errors)
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
