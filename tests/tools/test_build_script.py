"""tools/controlplane/build.sh: concurrent callers wait for one build instead of clobbering it.

A fake ``go`` on PATH stands in for the compiler (it writes executable stubs where ``-o`` points
and logs each call), so this runs in a second without Go or a network.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "controlplane" / "build.sh"

FAKE_GO = r"""#!/usr/bin/env bash
# fake go: `go build ... -o OUT PKG...`; OUT ending in / gets one stub per package's last element
echo "$*" >> "$FAKE_GO_LOG"
sleep "${FAKE_GO_SECONDS:-0}"  # a build that takes a while, when a test asks for one
out=""; pkgs=()
while (($#)); do
  case $1 in
    -o) out=$2; shift 2 ;;
    -ldflags) shift 2 ;;
    build|-trimpath) shift ;;
    *) pkgs+=("$1"); shift ;;
  esac
done
if [[ $out == */ ]]; then
  for p in "${pkgs[@]}"; do printf '#!/bin/sh\n' > "$out/${p##*/}"; chmod +x "$out/${p##*/}"; done
else
  printf '#!/bin/sh\n' > "$out"; chmod +x "$out"
fi
"""


def _env(tmp_path: Path) -> dict[str, str]:
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    go = fake_bin / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "FAKE_GO_LOG": str(tmp_path / "go.log")}


def test_two_concurrent_builds_share_one_build(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env["FAKE_GO_SECONDS"] = "0.3"  # the second caller (started at once) finds the first one building
    cache = tmp_path / "cache"
    runs = [
        subprocess.Popen(
            ["bash", str(BUILD), str(cache)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    bins = {out.strip() for out, _ in outputs}
    assert len(bins) == 1
    (bin_dir,) = bins
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kubectl"):
        assert os.access(Path(bin_dir) / name, os.X_OK)
    calls = (tmp_path / "go.log").read_text().splitlines()
    assert len(calls) == 2, calls  # one build's worth: the Kubernetes binaries, then etcd
    assert any("waiting for it" in err for _, err in outputs)


def test_a_warm_cache_returns_without_go(tmp_path: Path) -> None:
    env = _env(tmp_path)
    cache = tmp_path / "cache"
    subprocess.run(["bash", str(BUILD), str(cache)], env=env, check=True, capture_output=True)
    (tmp_path / "go.log").unlink()
    warm = subprocess.run(["bash", str(BUILD), str(cache)], env=env, check=True, capture_output=True, text=True)
    assert warm.stdout.strip().endswith("/bin")
    assert not (tmp_path / "go.log").exists()
