"""Fake plugin classes for policy/registry tests: record their args; raise PluginArgsError on "BAD".

``install(monkeypatch)`` replaces ``registry.resolve`` so profiles build without the real plugin
modules; a plugin raises ``PluginArgsError`` at the path of the first value equal to ``"BAD"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_scheduler.core import registry
from kopf_scheduler.core.arguments import PluginArgsError

BAD = "BAD"


def _find_bad(value: Any, path: str = "") -> str | None:
    if value == BAD:
        return path
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = _find_bad(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _find_bad(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


_CLASSES: dict[str, type] = {}


def fake_class(target: str) -> type:
    if target not in _CLASSES:
        class_name = target.split(":")[1]

        class Fake:
            TARGET = target

            def __init__(self, args: Mapping[str, Any] | None = None, *, name: str | None = None) -> None:
                self.args = dict(args or {})
                self.name = name or class_name
                self.target = target
                bad = _find_bad(self.args)
                if bad is not None:
                    raise PluginArgsError(bad, "is BAD")

            def __repr__(self) -> str:
                return f"<{self.name} {self.args}>"

        Fake.__name__ = class_name
        _CLASSES[target] = Fake
    return _CLASSES[target]


def install(monkeypatch: Any) -> None:
    monkeypatch.setattr(registry, "resolve", fake_class)
