"""Typed plugin arguments: a frozen dataclass per plugin, parsed from a policy's JSON with field paths.

The one way to declare arguments. A plugin sets ``Args = FooArgs`` where ``FooArgs`` is a frozen
dataclass; ``parse_args(FooArgs, raw)`` turns the JSON object a SchedulingPolicy carries into an
instance, or raises ``PluginArgsError`` naming the offending field (``scoringStrategy.resources[1].weight``).

Field types understood: ``bool``, ``int`` (never a bool), ``float`` (an int is accepted), ``str``,
``Literal[...]``, ``tuple[T, ...]`` (from a JSON list), ``Mapping[str, T]`` / ``dict[str, T]``,
``T | None``, and nested frozen dataclasses. The JSON key is the field's name in camelCase unless
``field(metadata={"key": "..."})`` says otherwise. Unknown keys are errors (with a suggestion),
fields without a default are required. Cross-field and range checks live in the dataclass's
``__post_init__``, which raises ``PluginArgsError`` with a path relative to that dataclass; the
parser prefixes the path, so the same checks guard typed construction in code and tests.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin

__all__ = ["NO_ARGS", "NoArgs", "PluginArgsError", "json_key", "parse_args"]

A = TypeVar("A")


class PluginArgsError(ValueError):
    """Invalid plugin arguments; ``field`` is the path inside the arguments (e.g. ``shape[1].score``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def under(self, prefix: str) -> PluginArgsError:
        """The same error with ``prefix`` in front of its path."""
        if not prefix:
            return self
        if not self.field:
            return PluginArgsError(prefix, self.message)
        joiner = "" if self.field.startswith("[") else "."
        return PluginArgsError(f"{prefix}{joiner}{self.field}", self.message)


@dataclasses.dataclass(frozen=True, slots=True)
class NoArgs:
    """The arguments of a plugin that takes none."""


NO_ARGS: Final = NoArgs()


def json_key(field: dataclasses.Field[Any]) -> str:
    """The JSON key of a dataclass field: ``metadata["key"]`` or the name in camelCase."""
    explicit = field.metadata.get("key")
    if explicit:
        return str(explicit)
    head, *rest = field.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def parse_args(cls: type[A], raw: Any) -> A:
    """``raw`` (a JSON object, or None for "no arguments") as an instance of the dataclass ``cls``."""
    if isinstance(raw, cls):
        return raw
    if raw is None:
        raw = {}
    value: A = _parse_dataclass(cls, raw, "")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _parse_dataclass(cls: type[Any], raw: Any, path: str) -> Any:
    if not isinstance(raw, Mapping):
        if cls is NoArgs:
            raise PluginArgsError(path, "takes no arguments")
        raise PluginArgsError(path, f"must be an object, not {_kind(raw)}")
    fields = {json_key(f): f for f in dataclasses.fields(cls) if f.init}
    for key in raw:
        if key not in fields:
            if not fields:
                raise PluginArgsError(_join(path, str(key)), "unknown field: this plugin takes no arguments")
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(fields)})"
            raise PluginArgsError(_join(path, str(key)), f"unknown field{hint}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, f in fields.items():
        where = _join(path, key)
        if key in raw:
            values[f.name] = _convert(hints[f.name], raw[key], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise PluginArgsError(where, "required")
    try:
        return cls(**values)
    except PluginArgsError as exc:
        raise exc.under(path) from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _convert(hint: Any, value: Any, path: str) -> Any:
    """`value` read as the type `hint` says, or ``PluginArgsError`` at `path`; ``TypeError`` for a hint
    this reader does not support (a plugin author's mistake, not a user's)."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _convert_optional(hint, value, path)
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices or isinstance(value, bool) != any(isinstance(c, bool) for c in choices):
            raise PluginArgsError(path, f"unsupported value {value!r}: one of {', '.join(map(repr, choices))}")
        return value
    if origin is tuple:
        return _convert_tuple(hint, value, path)
    if origin in (dict, Mapping, typing.Mapping):
        return _convert_mapping(hint, value, path)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _parse_dataclass(hint, value, path)
    return _convert_scalar(hint, value, path)


def _convert_optional(hint: Any, value: Any, path: str) -> Any:
    """``T | None``: None, or a T (a union of two real types is not supported)."""
    options = get_args(hint)
    if value is None and type(None) in options:
        return None
    rest = [o for o in options if o is not type(None)]
    if len(rest) == 1:
        return _convert(rest[0], value, path)
    raise TypeError(f"unsupported argument type {hint!r}")


def _convert_tuple(hint: Any, value: Any, path: str) -> tuple[Any, ...]:
    item, *more = get_args(hint)
    if more != [Ellipsis]:
        raise TypeError(f"unsupported argument type {hint!r}: use tuple[T, ...]")
    if not isinstance(value, (list, tuple)):
        raise PluginArgsError(path, f"must be a list, not {_kind(value)}")
    return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))


def _convert_mapping(hint: Any, value: Any, path: str) -> dict[str, Any]:
    key_type, item = get_args(hint)
    if key_type is not str:
        raise TypeError(f"unsupported argument type {hint!r}: keys must be str")
    if not isinstance(value, Mapping):
        raise PluginArgsError(path, f"must be an object, not {_kind(value)}")
    return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}


def _convert_scalar(hint: Any, value: Any, path: str) -> Any:
    """bool, int, float (an integer is accepted), str, or Any as it is."""
    if hint is bool:
        if not isinstance(value, bool):
            raise PluginArgsError(path, f"must be a boolean, not {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PluginArgsError(path, f"must be an integer, not {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PluginArgsError(path, f"must be a number, not {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise PluginArgsError(path, f"must be a string, not {_kind(value)}")
        return value
    if hint is Any:
        return value
    raise TypeError(f"unsupported argument type {hint!r}")
