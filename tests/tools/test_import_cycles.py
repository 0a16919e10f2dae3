"""No import cycle anywhere in kopf_scheduler, imports under ``TYPE_CHECKING`` included.

import-linter's layers contract on the core's rooms (pyproject.toml) forbids cycles between rooms; this
checks single modules, inside a room too (``framework/basics.py`` is the leaf that keeps
``framework/interface.py``, the snapshot, the queue and the rest from importing each other). grimp, the
graph import-linter builds, counts every import statement, those under ``if TYPE_CHECKING:`` and inside
functions as well.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")

ROOT = Path(__file__).resolve().parents[2]


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (an iterative walk: no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_graph() -> dict[str, set[str]]:
    sys.path.insert(0, str(ROOT / "operator"))
    try:
        graph = grimp.build_graph("kopf_scheduler", cache_dir=None)
    finally:
        sys.path.remove(str(ROOT / "operator"))
    ours = {m for m in graph.modules if m.split(".")[0] == "kopf_scheduler"}
    return {m: set(graph.find_modules_directly_imported_by(m)) & ours for m in ours}


def test_no_import_cycle_among_modules() -> None:
    cycles = strongly_connected(package_graph())
    assert cycles == [], "import cycles (TYPE_CHECKING imports count): " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
