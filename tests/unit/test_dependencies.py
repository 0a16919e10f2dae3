"""Every third-party distribution the package imports is declared in pyproject.toml.

A fresh virtualenv is the real test of the dependency list (``.ci/run`` installs into one);
this catches an undeclared import in seconds, before anyone's install breaks. Imports are read
with ``ast`` from every module under operator/ (top-level and inside functions alike, since a
lazily imported module is still needed by the command that imports it) and mapped to their
distributions with ``importlib.metadata.packages_distributions()``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from source_trees import nodes

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "operator"


def _canonical(name: str) -> str:
    """PEP 503 normalisation: ``PyYAML`` and ``pyyaml``, ``prometheus_client`` and ``prometheus-client`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(*, extras: tuple[str, ...] = ()) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return {_canonical(re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0]) for req in requirements}


def _imported_top_levels(path: Path) -> set[str]:
    names: set[str] = set()
    for node in nodes(path):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_imported_distribution_is_declared() -> None:
    distributions = importlib.metadata.packages_distributions()
    declared = _declared()
    missing: dict[str, set[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for top in _imported_top_levels(path):
            if top in sys.stdlib_module_names or top == "kopf_scheduler" or top == "__future__":
                continue
            owners = {_canonical(d) for d in distributions.get(top, [])}
            if not owners:
                missing.setdefault(f"{top} (no installed distribution provides it)", set()).add(
                    str(path.relative_to(ROOT))
                )
            elif not owners & declared:
                missing.setdefault(f"{top} (from {', '.join(sorted(owners))})", set()).add(str(path.relative_to(ROOT)))
    assert not missing, "imported but not declared in [project] dependencies:\n" + "\n".join(
        f"  {name}: {', '.join(sorted(files))}" for name, files in sorted(missing.items())
    )


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    import numpy.linalg\n    from yaml import safe_load\n    from . import sibling\n")
    assert _imported_top_levels(module) == {"numpy", "yaml"}
