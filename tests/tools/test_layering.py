"""The core and the simulator do no I/O: they import nothing from Kopf, a Kubernetes client or asyncio.

Checked two ways: the import-linter contract in pyproject.toml (the whole import
graph, run here when import-linter is installed), and a fresh interpreter that
imports every core module and then looks at what got loaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "kopf",
    "kubernetes",
    "prometheus_client",
    "aiohttp",
    "asyncio",
    "kopf_scheduler.kube",
    "kopf_scheduler.telemetry",
)


def test_core_and_sim_import_nothing_that_does_io() -> None:
    code = f"""
import importlib, pkgutil, sys
sys.path.insert(0, {str(ROOT / "operator")!r})
import kopf_scheduler.core, kopf_scheduler.core.plugins, kopf_scheduler.sim
for pkg in (kopf_scheduler.core, kopf_scheduler.core.plugins, kopf_scheduler.sim):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
def forbidden(m):
    return m.split(".")[0] in {FORBIDDEN!r} or any(m == f or m.startswith(f + ".") for f in {FORBIDDEN!r})
bad = sorted(m for m in sys.modules if forbidden(m))
print(",".join(bad))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"core/sim pulled in: {out}"


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter not installed")
def test_import_linter_contract() -> None:
    result = subprocess.run(["lint-imports"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
