"""Run a selection without the control plane on every core (pytest-xdist), unasked.

`python -m pytest -m "not cluster"` (README, Tests) is the feedback a developer waits for: the unit and tools tests
need no shared state, so this plugin (loaded by `-p unit_cores` in pyproject's addopts) adds `-n <cores>` to such a
run. It stays out of the way whenever that could surprise: a marker expression that may select cluster tests (CI's
full command has none: its cluster tests share one control plane per process), a worker count or `--dist` chosen on
the command line, `-p no:xdist`, a debugger (`--pdb`, `--trace`), `--collect-only`, or pytest-xdist not installed.
`-n 0` runs in one process again. Workers are capped at four: each collects the whole selection (about 4 s of CPU).

pytest's documentation shows this hook adding `-n` the same way ("Dynamically adding command line options").
"""

from __future__ import annotations

import importlib.util
import os

import pytest

_MAX_WORKERS = 4
_USER_CHOICES = ("-n", "--numprocesses", "--dist", "--pdb", "--trace", "--collect-only", "--co", "-h", "--help")


def selects_no_cluster_test(markexpr: str) -> bool:
    """Whether the `-m` expression is false for a test marked `cluster` alone (tests/cluster/ has no other marker)."""
    if not markexpr.strip():
        return False
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pragma: no cover - pytest moved its private parser: stay in one process
        return False
    try:
        return not Expression.compile(markexpr).evaluate(_a_cluster_test)
    except SyntaxError:  # pytest itself reports the malformed expression
        return False


def _a_cluster_test(name: str, /, **_: str | int | bool | None) -> bool:
    return name == "cluster"


def worker_count() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, _MAX_WORKERS))


def _chosen_by_user(args: list[str]) -> bool:
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _USER_CHOICES or (arg.startswith("-n") and arg[2:].isdigit()) or arg == "no:xdist":
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or importlib.util.find_spec("xdist") is None:
        return
    if _chosen_by_user(args) or not selects_no_cluster_test(early_config.known_args_namespace.markexpr or ""):
        return
    workers = worker_count()
    if workers > 1:
        args[:] = [*args, "-n", str(workers)]
