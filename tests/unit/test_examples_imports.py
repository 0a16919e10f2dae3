"""The examples' tests import nothing of kopf_scheduler but ``framework`` and ``testing``.

An out-of-tree plugin is written against ``kopf_scheduler.framework`` and tested with
``kopf_scheduler.testing``; everything else may change under its authors. The examples are what they
copy, so their tests keep to those two: every import under ``examples/*/tests/`` (at the top and inside
functions, ``importlib.import_module`` and ``__import__`` of a literal name too) is read with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("kopf_scheduler.framework", "kopf_scheduler.testing")


def kopf_scheduler_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a kopf_scheduler module in `path`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "kopf_scheduler":  # from kopf_scheduler import testing: kopf_scheduler.testing
                names = [f"kopf_scheduler.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found.extend(
            (node.lineno, name) for name in names if name == "kopf_scheduler" or name.startswith("kopf_scheduler.")
        )
    return found


def test_the_examples_tests_use_only_the_framework_and_the_test_kit() -> None:
    files = sorted(ROOT.glob("examples/*/tests/**/*.py"))
    assert ROOT / "examples/cost-aware-plugin/tests/test_cost_aware.py" in files
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, name in kopf_scheduler_imports(path)
        if name not in ALLOWED
    ]
    assert wrong == [], "import only kopf_scheduler.framework and kopf_scheduler.testing here (or extend the kit)"


@pytest.mark.parametrize(
    ("source", "modules"),
    [
        pytest.param("from kopf_scheduler.framework import Pod", ["kopf_scheduler.framework"], id="from framework"),
        pytest.param("from kopf_scheduler import testing, core", ["kopf_scheduler.testing", "kopf_scheduler.core"]),
        pytest.param("import kopf_scheduler.sim.loader as loader", ["kopf_scheduler.sim.loader"], id="import as"),
        pytest.param("import kopf_scheduler", ["kopf_scheduler"], id="the package itself"),
        pytest.param(
            "def f():\n    from kopf_scheduler.commands import main", ["kopf_scheduler.commands"], id="in a function"
        ),
        pytest.param(
            "import importlib\nimportlib.import_module('kopf_scheduler.edge.plugins')",
            ["kopf_scheduler.edge.plugins"],
            id="import_module",
        ),
        pytest.param("__import__('kopf_scheduler.core')", ["kopf_scheduler.core"], id="__import__"),
        pytest.param("import kopf_schedulerx\nfrom . import kopf_scheduler", [], id="neither"),
    ],
)
def test_the_scan_sees_every_form_of_import(tmp_path: Path, source: str, modules: list[str]) -> None:
    path = tmp_path / "test_sample.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert [name for _, name in kopf_scheduler_imports(path)] == modules
