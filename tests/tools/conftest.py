"""Tests that start programs: tools/'s shell scripts (``build.sh`` with a fake ``go`` on PATH, ``fetch_go.py``
against a local module proxy), the commands and a fresh interpreter as subprocesses, ``lint-imports``.

Every test under tests/tools/ is marked ``tooling``. None needs Go, a network or the control plane, but each
pays for a process or two (an interpreter starting without bytecode caches takes about a second on 2 cores),
so they live apart from the pure logic of tests/unit/: ``python -m pytest -q tests/unit`` skips them,
``python -m pytest -q -m "not cluster"`` and ``python -m pytest -q tests`` run them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``tooling`` (before ``-m`` deselects)."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.tooling)
