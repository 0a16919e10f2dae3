"""Syntax trees of Python files, parsed once per test process: ``tree(path)``.

Several unit tests read the whole package's trees (declared dependencies, raw API paths, who runs the
cycle's and the binding's steps, parameter counts); parsing its ~150 modules takes about a second, which
each of them paid again. The trees (about 70 MB for the package) are shared: a test must not change one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["tree"]


def tree(path: Path) -> ast.Module:
    """The module at `path`, parsed (read as UTF-8) the first time any test asks for it."""
    return _parse(path.resolve())


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
