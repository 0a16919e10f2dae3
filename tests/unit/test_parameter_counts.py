"""Issue 29: no function in ``kopf_scheduler.core`` takes more than seven parameters.

A function that needs more is missing a concept: the arguments that always travel together want a name
(``cycle.CycleContext``, ``algorithm.Turn``, ``preemption.Evaluator``...). Counted as Python binds them:
positional-only, positional, keyword-only, ``*args`` and ``**kwargs``, not a method's ``self`` or ``cls``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from source_trees import nodes

import kopf_scheduler.core

MAX_PARAMETERS = 7
CORE = Path(kopf_scheduler.core.__file__).parent


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = function.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    count = len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return count - 1 if positional and positional[0] in ("self", "cls") else count


def too_long(walked: Iterable[ast.AST], where: str) -> list[str]:
    """`where:line name (count)` for each function among the `walked` nodes of a module over the limit."""
    return [
        f"{where}:{node.lineno} {node.name} ({parameters(node)} parameters)"
        for node in walked
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > MAX_PARAMETERS
    ]


def test_no_core_function_takes_more_than_seven_parameters() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) > 30  # the walk found the core, not an empty folder
    offenders = [line for path in modules for line in too_long(nodes(path), str(path.relative_to(CORE.parent)))]
    assert not offenders, "more than 7 parameters (group the ones that travel together):\n" + "\n".join(offenders)


def test_the_count_is_python_s_binding_less_self() -> None:
    source = """
def eight(a, b, /, c, d, *args, e, f, **kwargs): ...
def seven(a, b, c, d, e, f, g): ...
class C:
    def method(self, a, b, c, d, e, f, g): ...
    @classmethod
    def make(cls, a, b, c, d, e, f, g, h): ...
    async def later(self, *, a, b, c, d, e, f, g, h): ...
"""
    found = too_long(ast.walk(ast.parse(source)), "x.py")
    assert found == ["x.py:2 eight (8 parameters)", "x.py:7 make (8 parameters)", "x.py:8 later (8 parameters)"]
