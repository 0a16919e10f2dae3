"""Collection shared by every test folder.

``pytest -m "not cluster"`` (the unit tests' command) would import every module of tests/cluster/ only for
``-m`` to deselect all of their tests (tests/cluster/conftest.py marks each one ``cluster``): about a second of
imports (the Kubernetes client, the control plane's helpers) and collection for nothing. With exactly that
expression the folder is not collected at all; any other ``-m`` (or none) collects it as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CLUSTER_TESTS = Path(__file__).resolve().parent / "cluster"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == CLUSTER_TESTS and " ".join(str(config.option.markexpr).split()) == "not cluster":
        return True
    return None  # pytest decides as usual
