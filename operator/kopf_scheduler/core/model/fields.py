"""Reading a field of an API body with its path in every error: what both parsers share (``core/model/parsing.py``
for the kinds the scheduler reads, ``core/dra/parsing.py`` for ``resource.k8s.io``).

A field that is absent (or null) reads as empty; one of the wrong type raises ``ObjectError`` naming
``<where>.<key>``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ObjectError", "integer", "list_at", "object_at", "without_managed_fields"]


class ObjectError(ValueError):
    """An API body the scheduler cannot read; the message names the field."""


def integer(value: Any, where: str, default: int = 0) -> int:
    """An integer field (a JSON number or its decimal string, as the API's int-or-string fields allow);
    `default` when absent; ``ObjectError`` naming `where` otherwise (a bool is no integer)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ObjectError(f"{where}: expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ObjectError(f"{where}: expected an integer, got {value!r}") from None


def object_at(body: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """``body[key]``, an object ({} when absent)."""
    value = body.get(key)
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):  # JSON's dict first: the ABC check is slow
        raise ObjectError(f"{where}.{key}: expected an object, got {type(value).__name__}")
    return value


def list_at(body: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``body[key]``, a list ([] when absent)."""
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    return value


def without_managed_fields(body: Mapping[str, Any], meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The body to keep of an object whose metadata is `meta`: as read, or a shallow copy whose metadata lacks
    ``managedFields`` (as upstream's informers trim it)."""
    if "managedFields" not in meta:
        return body
    return {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
