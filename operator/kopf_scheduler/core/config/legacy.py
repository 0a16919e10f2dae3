"""Import a v1.9 scheduler Policy file (``kind: Policy``, apiVersion v1) into a SchedulingPolicy spec.

Accepts the JSON/YAML document as text or as an already parsed mapping: the ``--policy-config-file``
format (OpenShift 3.x's ``scheduler.json`` is one), or the ConfigMap that wraps it under the data key
``policy.cfg``. Output is a ``SchedulingPolicy`` spec dict (see ``core/config/policy.py``), or a list of
``FieldError`` whose paths point into the Policy document (``predicates[2].argument``,
``data[policy.cfg].extenders[0].httpTimeout`` for a ConfigMap).

Conversions:

- Keys match case-insensitively, as v1.9's JSON decoding (Go's encoding/json) did; so ``BindVerb``
  (the v1.9 key: the field had no json tag) and ``bindVerb`` both work. Unknown keys are errors.
- ``httpTimeout`` (nanoseconds in v1.9 JSON) becomes a duration string (``5000000000`` -> ``"5s"``).
- ``kind`` / ``apiVersion`` are checked (``Policy`` / ``v1``) when present and dropped.
- The result is validated with ``validate_policy`` so a bad name is reported at import time.

Pure: parsing text is the only work done; no files are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..model.specs import FieldError, closest
from .extenders import EXTENDER_KEYS, MANAGED_RESOURCE_KEYS, TLS_KEYS
from .policy import validate_policy

SCHEDULING_POLICY_API_VERSION: Final = "scheduling.kopf.dev/v1alpha1"
SCHEDULING_POLICY_KIND: Final = "SchedulingPolicy"
POLICY_CONFIGMAP_KEY: Final = "policy.cfg"

#: v1.9 Policy top-level keys -> spec keys (``alwaysCheckAllPredicates`` arrived in v1.10; accepted).
POLICY_KEYS: Final = {
    "kind": "",
    "apiVersion": "",
    "predicates": "predicates",
    "priorities": "priorities",
    "extenders": "extenders",
    "hardPodAffinitySymmetricWeight": "hardPodAffinitySymmetricWeight",
    "alwaysCheckAllPredicates": "alwaysCheckAllPredicates",
}
PREDICATE_KEYS: Final = ("name", "argument")
PRIORITY_KEYS: Final = ("name", "weight", "argument")
PREDICATE_ARGUMENT_KEYS: Final = {"serviceAffinity": ("labels",), "labelsPresence": ("labels", "presence")}
PRIORITY_ARGUMENT_KEYS: Final = {
    "serviceAntiAffinity": ("label",),
    "labelPreference": ("label", "presence"),
    "requestedToCapacityRatioArguments": ("shape", "resources"),
}
SHAPE_KEYS: Final = ("utilization", "score")
RESOURCE_KEYS: Final = ("name", "weight")


def _canonical(obj: Mapping[str, Any], allowed: Sequence[str], path: str, errors: list[FieldError]) -> dict[str, Any]:
    """Keys of ``obj`` renamed to their canonical spelling (case-insensitive); unknown keys reported."""
    by_lower = {k.lower(): k for k in allowed}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        canonical = by_lower.get(str(key).lower())
        if canonical is None:
            hint = closest(str(key), list(allowed))
            tail = f"; did you mean {hint!r}?" if hint else f" (allowed: {', '.join(allowed)})"
            errors.append(FieldError(f"{path}{key}", f"unknown field{tail}"))
            continue
        if canonical in out:
            errors.append(FieldError(f"{path}{key}", f"duplicate of {canonical!r}"))
            continue
        out[canonical] = value
    return out


def _list(value: Any, path: str, errors: list[FieldError]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(FieldError(path, "must be a list"))
        return []
    return value


def _argument(
    value: Any, kinds: Mapping[str, Sequence[str]], path: str, errors: list[FieldError]
) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return None
    arg = _canonical(value, list(kinds), f"{path}.", errors)
    out: dict[str, Any] = {}
    for key, body in arg.items():
        if body is None:
            continue
        if not isinstance(body, Mapping):
            errors.append(FieldError(f"{path}.{key}", "must be an object"))
            continue
        inner = _canonical(body, kinds[key], f"{path}.{key}.", errors)
        if key == "requestedToCapacityRatioArguments":
            for sub, keys in (("shape", SHAPE_KEYS), ("resources", RESOURCE_KEYS)):
                if sub in inner:
                    inner[sub] = [
                        _canonical(p, keys, f"{path}.{key}.{sub}[{i}].", errors) if isinstance(p, Mapping) else p
                        for i, p in enumerate(_list(inner[sub], f"{path}.{key}.{sub}", errors))
                    ]
        out[key] = inner
    return out


def format_duration_ns(ns: int) -> str:
    """Nanoseconds -> a Go-style duration string in the largest exact unit ("5s", "250ms", "1500us")."""
    for unit, size in (
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def _extender(value: Any, path: str, errors: list[FieldError]) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return None
    ext = _canonical(value, EXTENDER_KEYS, f"{path}.", errors)
    if "httpTimeout" in ext:
        ns = ext["httpTimeout"]
        if isinstance(ns, bool) or not isinstance(ns, (int, float)) or ns <= 0:
            errors.append(
                FieldError(f"{path}.httpTimeout", f"must be a positive number of nanoseconds (v1.9 JSON), got {ns!r}")
            )
        else:
            ext["httpTimeout"] = format_duration_ns(int(ns))
    if isinstance(ext.get("tlsConfig"), Mapping):
        ext["tlsConfig"] = _canonical(ext["tlsConfig"], TLS_KEYS, f"{path}.tlsConfig.", errors)
    if isinstance(ext.get("managedResources"), list):
        ext["managedResources"] = [
            _canonical(r, MANAGED_RESOURCE_KEYS, f"{path}.managedResources[{i}].", errors)
            if isinstance(r, Mapping)
            else r
            for i, r in enumerate(ext["managedResources"])
        ]
    return ext


def _parse(doc: Mapping[str, Any] | str | bytes) -> tuple[Any, list[FieldError]]:
    if isinstance(doc, bytes):
        try:
            doc = doc.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, [FieldError("", f"not valid JSON or YAML: not UTF-8 text: {exc}")]
    if not isinstance(doc, str):
        return doc, []
    try:
        return json.loads(doc), []
    except ValueError:
        pass
    try:
        import yaml  # PyYAML: only needed for YAML text

        return yaml.safe_load(doc), []
    except Exception as exc:  # yaml.YAMLError and friends: report, don't raise
        return None, [FieldError("", f"not valid JSON or YAML: {exc}")]


def import_policy(
    doc: Mapping[str, Any] | str | bytes, *, scheduler_name: str = "default-scheduler", validate: bool = True
) -> dict[str, Any] | list[FieldError]:
    """A v1.9 Policy (or its ConfigMap) -> a SchedulingPolicy spec dict, or the errors found."""
    found = _policy_document(doc)
    if isinstance(found, list):
        return found
    data, prefix = found
    errors: list[FieldError] = []
    policy = _canonical(data, list(POLICY_KEYS), prefix, errors)
    kind = policy.get("kind", "Policy")
    if kind == "KubeSchedulerConfiguration":
        errors.append(
            FieldError(
                f"{prefix}kind",
                "a KubeSchedulerConfiguration is not a v1.9 Policy: "
                "`kopf-scheduler config import` translates it (core/config/scheduler_config.py)",
            )
        )
    elif kind != "Policy":
        errors.append(FieldError(f"{prefix}kind", f"must be 'Policy', got {kind!r}"))
    api_version = policy.get("apiVersion", "v1")
    if api_version != "v1":
        errors.append(FieldError(f"{prefix}apiVersion", f"must be 'v1', got {api_version!r}"))

    spec: dict[str, Any] = {"schedulerName": scheduler_name}
    for key, allowed, kinds in (
        ("predicates", PREDICATE_KEYS, PREDICATE_ARGUMENT_KEYS),
        ("priorities", PRIORITY_KEYS, PRIORITY_ARGUMENT_KEYS),
    ):
        if key in policy:
            spec[key] = _named_items(policy[key], allowed, kinds, f"{prefix}{key}", errors)
    if "extenders" in policy:
        exts = [
            _extender(e, f"{prefix}extenders[{i}]", errors)
            for i, e in enumerate(_list(policy["extenders"], f"{prefix}extenders", errors))
        ]
        spec["extenders"] = [e for e in exts if e is not None]
    for key in ("hardPodAffinitySymmetricWeight", "alwaysCheckAllPredicates"):
        if key in policy:
            value = policy[key]
            # v1.9: a zero hardPodAffinitySymmetricWeight means "not set" (the flag's value is used)
            if key == "hardPodAffinitySymmetricWeight" and value == 0 and not isinstance(value, bool):
                continue
            spec[key] = value
    # A Policy with no predicates and no priorities meant the provider's defaults (DefaultProvider);
    # said explicitly, because a SchedulingPolicy without them runs today's default profile.
    if "predicates" not in spec and "priorities" not in spec:
        spec["algorithmProvider"] = "DefaultProvider"
    if errors:
        return errors
    if validate:
        result = validate_policy(spec)
        if isinstance(result, list):
            return [FieldError(prefix + e.path.removeprefix("spec.").removeprefix("spec"), e.message) for e in result]
    return spec


def _policy_document(doc: Mapping[str, Any] | str | bytes) -> tuple[Mapping[str, Any], str] | list[FieldError]:
    """The Policy object, from the document or from its ConfigMap's ``policy.cfg`` (then with the prefix
    its field paths take), or the errors found."""
    data, errors = _parse(doc)
    if errors:
        return errors
    prefix = ""
    if isinstance(data, Mapping) and str(data.get("kind", "")).lower() == "configmap":
        cm_data = data.get("data")
        if not isinstance(cm_data, Mapping) or POLICY_CONFIGMAP_KEY not in cm_data:
            return [FieldError("data", f"the ConfigMap has no {POLICY_CONFIGMAP_KEY!r} key")]
        prefix = f"data[{POLICY_CONFIGMAP_KEY}]."
        data, errors = _parse(cm_data[POLICY_CONFIGMAP_KEY])
        if errors:
            return [FieldError(f"data[{POLICY_CONFIGMAP_KEY}]", e.message) for e in errors]
    if not isinstance(data, Mapping):
        return [FieldError(prefix.rstrip(".") or "policy", "must be an object (a v1.9 Policy)")]
    return data, prefix


def _named_items(
    value: Any, allowed: Sequence[str], kinds: Mapping[str, Sequence[str]], path: str, errors: list[FieldError]
) -> list[dict[str, Any]]:
    """The predicates or priorities at `path`: each a named object, its argument checked."""
    items = []
    for i, item in enumerate(_list(value, path, errors)):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError(where, "must be an object with a name"))
            continue
        entry = _canonical(item, allowed, f"{where}.", errors)
        arg = _argument(entry.pop("argument", None), kinds, f"{where}.argument", errors)
        if arg:
            entry["argument"] = arg
        items.append(entry)
    return items


def to_manifest(spec: Mapping[str, Any], *, name: str, namespace: str | None = None) -> dict[str, Any]:
    """A full SchedulingPolicy object around ``spec`` (for ``kubectl apply``)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": SCHEDULING_POLICY_API_VERSION,
        "kind": SCHEDULING_POLICY_KIND,
        "metadata": metadata,
        "spec": dict(spec),
    }
