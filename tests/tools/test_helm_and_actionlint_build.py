"""tools/helm/build.sh and tools/actionlint/build.sh with a fake `go`: pinned, built once under concurrency,
cached, built again when the stamp changes (the chart's own checks are tests/unit/test_chart.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELM_BUILD = ROOT / "tools" / "helm" / "build.sh"
ACTIONLINT_BUILD = ROOT / "tools" / "actionlint" / "build.sh"


FAKE_GO = r"""#!/usr/bin/env bash
# fake go: `go build ... -o OUT PKG`; writes an executable stub at OUT and logs the call
echo "$*" >> "$FAKE_GO_LOG"
sleep "${FAKE_GO_SECONDS:-0}"  # a build that takes a while, when a test asks for one
out=""
while (($#)); do
  case $1 in
    -o) out=$2; shift 2 ;;
    -ldflags) shift 2 ;;
    *) shift ;;
  esac
done
printf '#!/bin/sh\n' > "$out"; chmod +x "$out"
"""


def _fake_go_env(tmp_path: Path) -> dict[str, str]:
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    go = fake_bin / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "FAKE_GO_LOG": str(tmp_path / "go.log")}


def test_helm_build_two_concurrent_callers_share_one_build(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    env["FAKE_GO_SECONDS"] = "0.3"  # the second caller (started at once) finds the first one building
    cache = tmp_path / "cache"
    runs = [
        subprocess.Popen(
            ["bash", str(HELM_BUILD), str(cache)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    (bin_dir,) = {out.strip() for out, _ in outputs}
    assert re.search(r"/helm-v4\.\d+\.\d+/bin$", bin_dir), bin_dir
    assert os.access(Path(bin_dir) / "helm", os.X_OK)
    (call,) = (tmp_path / "go.log").read_text().splitlines()
    assert "helm.sh/helm/v4/cmd/helm" in call and "internal/version.version=v4." in call
    assert any("waiting for it" in err for _, err in outputs)


def test_helm_build_warm_cache_returns_without_go_and_a_new_stamp_rebuilds(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    cache = tmp_path / "cache"
    bin_dir = subprocess.run(
        ["bash", str(HELM_BUILD), str(cache)], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "go.log").unlink()
    warm = subprocess.run(["bash", str(HELM_BUILD), str(cache)], env=env, check=True, capture_output=True, text=True)
    assert warm.stdout.strip() == bin_dir
    assert not (tmp_path / "go.log").exists()
    (Path(bin_dir) / ".stamp").write_text("stale\n")
    subprocess.run(["bash", str(HELM_BUILD), str(cache)], env=env, check=True, capture_output=True)
    assert len((tmp_path / "go.log").read_text().splitlines()) == 1


# --- tools/actionlint/build.sh ---------------------------------------------------------------


def test_actionlint_is_pinned_and_built_once_then_cached(tmp_path: Path) -> None:
    go_mod = (ROOT / "tools" / "actionlint" / "go.mod").read_text()
    assert re.search(r"^require github\.com/rhysd/actionlint v1\.\d+\.\d+$", go_mod, re.M), go_mod
    env = _fake_go_env(tmp_path)
    cache = tmp_path / "cache"
    built = subprocess.run(["bash", str(ACTIONLINT_BUILD), str(cache)], env=env, check=True, capture_output=True)
    bin_dir = built.stdout.decode().strip()
    assert re.search(r"/actionlint-v1\.\d+\.\d+/bin$", bin_dir) and os.access(Path(bin_dir) / "actionlint", os.X_OK)
    (call,) = (tmp_path / "go.log").read_text().splitlines()
    assert "github.com/rhysd/actionlint/cmd/actionlint" in call and "actionlint.version=1." in call
    warm = subprocess.run(["bash", str(ACTIONLINT_BUILD), str(cache)], env=env, check=True, capture_output=True)
    assert warm.stdout.decode().strip() == bin_dir and len((tmp_path / "go.log").read_text().splitlines()) == 1
