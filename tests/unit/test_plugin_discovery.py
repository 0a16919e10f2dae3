"""Out-of-tree plugins from the ``kopf_scheduler.plugins`` entry-point group: found, or reported."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from kopf_scheduler.edge.plugins import GROUP, load_registry

PLUGIN_MODULE = """
from kopf_scheduler.framework import ScorePlugin


class Thrifty(ScorePlugin):
    NAME = "Thrifty"

    def score(self, state, pod, node):
        return 7


class NotAPlugin:
    NAME = "NotAPlugin"
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "thrifty_plugin.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "thrifty_plugin"


def _ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=GROUP)


def test_a_plugin_entry_point_joins_the_registry(plugin_module: str) -> None:
    registry = load_registry([_ep("thrifty", f"{plugin_module}:Thrifty")])
    cls = registry.score_plugin("Thrifty")
    assert cls is not None and cls.__name__ == "Thrifty"
    assert registry.out_of_tree() == ["Thrifty"]
    assert registry.origins["Thrifty"].startswith(f"{plugin_module}:Thrifty (entry point 'thrifty'")
    assert registry.score_plugin("NodeAffinity") is not None  # the built-ins stay


@pytest.mark.parametrize(
    "value, problem",
    [
        pytest.param("no_such_module_xyz:Plugin", "cannot be imported: ModuleNotFoundError", id="missing module"),
        pytest.param("{module}:NotAPlugin", "not a kopf_scheduler.framework.Plugin subclass", id="not a plugin"),
    ],
)
def test_a_broken_entry_point_is_a_problem_not_a_crash(plugin_module: str, value: str, problem: str) -> None:
    registry = load_registry([_ep("broken", value.format(module=plugin_module))])
    assert registry.out_of_tree() == []
    assert any(problem in text for text in registry.problems.values()), registry.problems


def test_no_entry_points_is_the_in_tree_registry() -> None:
    registry = load_registry([])
    assert registry.out_of_tree() == [] and not registry.problems
