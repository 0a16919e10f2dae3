"""tools/kwok/build.sh with a fake `go`: its stamp, lock and stage copy, and how ``ensure_kwok`` uses it
(the pin and what KWOK is started with are tests/unit/test_kwok_tools.py; the real build runs before
tests/cluster).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from kopf_scheduler.cluster import BuildError, GoNotFoundError, ensure_kwok
from kopf_scheduler.cluster.kwok import ENV_KWOK_DIR, HEARTBEAT_STAGES, LIFECYCLE_STAGES, KwokInstall

ROOT = Path(__file__).resolve().parents[2]
KWOK_BUILD = ROOT / "tools" / "kwok" / "build.sh"


# --- tools/kwok/build.sh with a fake go ------------------------------------------------------

FAKE_GO = r"""#!/usr/bin/env bash
# fake go: `go mod download -json MOD` prints a Dir (a fake module); `go build ... -o OUT PKG`
# writes an executable stub at OUT. Every call is logged.
echo "$*" >> "$FAKE_GO_LOG"
if [[ $1 == mod ]]; then
  printf '{\n\t"Path": "sigs.k8s.io/kwok",\n\t"Version": "v0.8.0",\n\t"Dir": "%s",\n\t"Sum": "h1:x="\n}\n' \
    "$FAKE_KWOK_MODULE"
  exit 0
fi
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

STAGE = "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: {name}\n"


def _fake_module(root: Path) -> Path:
    """The layout of kwok's kustomize/stage: stages, and what is not a stage (kustomizations, RBAC, testdata)."""
    stage_dir = root / "kustomize" / "stage"
    for relative in (*LIFECYCLE_STAGES, *HEARTBEAT_STAGES, "pod/general/pod-create.yaml"):
        path = stage_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(STAGE.format(name=path.stem))
        (path.parent / "kustomization.yaml").write_text("kind: Kustomization\nresources: []\n")
        (path.parent / "testdata").mkdir(exist_ok=True)
        (path.parent / "testdata" / "x.input.yaml").write_text("kind: Pod\n")
    (stage_dir / "volume" / "rbac").mkdir(parents=True)
    (stage_dir / "volume" / "rbac" / "role.yaml").write_text("kind: ClusterRole\n")
    for path in stage_dir.rglob("*.yaml"):
        path.chmod(0o444)  # as the module cache has them
    return root


def _fake_go_env(tmp_path: Path) -> dict[str, str]:
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    go = fake_bin / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_KWOK_MODULE": str(_fake_module(tmp_path / "module")),
    }


def _go_calls(tmp_path: Path, verb: str) -> list[str]:
    log = tmp_path / "go.log"
    return [c for c in log.read_text().splitlines() if c.startswith(verb)] if log.exists() else []


def test_kwok_build_two_concurrent_callers_share_one_build(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    env["FAKE_GO_SECONDS"] = "0.3"  # the second caller (started at once) finds the first one building
    cache = tmp_path / "cache"
    runs = [
        subprocess.Popen(
            ["bash", str(KWOK_BUILD), str(cache)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    (out,) = {stdout.strip() for stdout, _ in outputs}
    assert out == str(cache / "kwok-v0.8.0")
    assert os.access(Path(out) / "bin" / "kwok", os.X_OK)
    (call,) = _go_calls(tmp_path, "build")
    assert "sigs.k8s.io/kwok/cmd/kwok" in call and "pkg/consts.Version=0.8.0" in call
    assert any("waiting for it" in err for _, err in outputs)


def test_kwok_build_copies_the_stages_of_the_module_download(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    out = Path(
        subprocess.run(
            ["bash", str(KWOK_BUILD), str(tmp_path / "cache")], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    copied = sorted(str(p.relative_to(out / "stages")) for p in (out / "stages").rglob("*") if p.is_file())
    assert copied == sorted([*LIFECYCLE_STAGES, *HEARTBEAT_STAGES, "pod/general/pod-create.yaml"])
    assert (out / "stages" / "pod" / "fast" / "pod-ready.yaml").read_text() == STAGE.format(name="pod-ready")
    assert os.access(out / "stages" / "pod" / "fast" / "pod-ready.yaml", os.W_OK)  # the cache can be removed
    install = KwokInstall(out).check()
    assert install.stages() == [out / "stages" / s for s in LIFECYCLE_STAGES]


def test_kwok_build_warm_cache_returns_without_go_and_a_new_stamp_rebuilds(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    cache = tmp_path / "cache"
    out = subprocess.run(
        ["bash", str(KWOK_BUILD), str(cache)], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "go.log").unlink()
    no_go = {**env, "PATH": "/usr/bin:/bin"}  # a warm cache needs no go at all
    warm = subprocess.run(["bash", str(KWOK_BUILD), str(cache)], env=no_go, check=True, capture_output=True, text=True)
    assert warm.stdout.strip() == out
    (Path(out) / ".stamp").write_text("stale\n")
    subprocess.run(["bash", str(KWOK_BUILD), str(cache)], env=env, check=True, capture_output=True)
    assert len(_go_calls(tmp_path, "build")) == 1


def _path_without_go(farm: Path) -> str:
    farm.mkdir()
    for tool in ("bash", "dirname", "awk", "cat", "sha256sum", "cut", "mkdir"):
        found = shutil.which(tool)
        assert found, tool
        (farm / tool).symlink_to(found)
    return str(farm)


def test_missing_go_is_a_clear_error(tmp_path: Path) -> None:
    env = {"PATH": _path_without_go(tmp_path / "bin"), "HOME": str(tmp_path)}
    with pytest.raises(GoNotFoundError, match="cannot build KWOK: Go is not installed") as raised:
        ensure_kwok(tmp_path / "cache", env=env, echo=False)
    assert ENV_KWOK_DIR in str(raised.value)


def test_a_prebuilt_kwok_is_used_as_it_is(tmp_path: Path) -> None:
    env = _fake_go_env(tmp_path)
    out = subprocess.run(
        ["bash", str(KWOK_BUILD), str(tmp_path / "cache")], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert ensure_kwok(env={ENV_KWOK_DIR: out}).root == Path(out)
    (Path(out) / "stages" / "pod" / "fast" / "pod-complete.yaml").unlink()
    with pytest.raises(BuildError, match="pod-complete.yaml"):
        ensure_kwok(env={ENV_KWOK_DIR: out})
