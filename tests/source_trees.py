"""The nodes of a Python file's syntax tree, parsed and walked once per test process: ``nodes(path)``.

Several unit tests read the whole package's trees (declared dependencies, raw API paths, who runs the
cycle's and the binding's steps, parameter counts); parsing and walking its ~150 modules takes about a
second, which each of them paid again. The nodes (about 70 MB for the package) are shared: a test must not
change one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["nodes"]


def nodes(path: Path) -> list[ast.AST]:
    """Every node of the module at `path` (read as UTF-8), in ``ast.walk`` order, the root first."""
    return _walk(path.resolve())


@functools.cache
def _walk(path: Path) -> list[ast.AST]:
    return list(ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
