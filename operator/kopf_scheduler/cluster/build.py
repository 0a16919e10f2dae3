"""Find, and if needed build, the pinned control-plane binaries.

The binaries come from `tools/controlplane/build.sh`, which compiles etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the Go module proxy into a cache
folder and is a no-op when that folder is already complete. This module only
locates the script, runs it and turns its failures into readable errors.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

__all__ = [
    "BINARIES",
    "BuildError",
    "GoNotFoundError",
    "controlplane_dir",
    "ensure_binaries",
    "run_build_script",
]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

#: Points at a tools/controlplane checkout (the folder holding build.sh).
ENV_CONTROLPLANE_DIR = "KOPF_SCHEDULER_CONTROLPLANE_DIR"
#: Points straight at a folder of prebuilt binaries; no build is attempted.
ENV_BIN_DIR = "KOPF_SCHEDULER_BIN_DIR"

_GO_MISSING_EXIT = 2  # build.sh's exit status when `go` is not on PATH


class BuildError(RuntimeError):
    """The control-plane binaries could not be found or built."""


class GoNotFoundError(BuildError):
    """A build is needed but no Go toolchain is on PATH."""


def controlplane_dir() -> Path:
    """Return the tools/controlplane folder: from $KOPF_SCHEDULER_CONTROLPLANE_DIR, or the repo.

    The package is installed editable, so the repository root is found by
    walking up from this file (then from the working directory).
    """
    explicit = os.environ.get(ENV_CONTROLPLANE_DIR)
    if explicit:
        path = Path(explicit).expanduser()
        if not (path / "build.sh").is_file():
            raise BuildError(f"${ENV_CONTROLPLANE_DIR}={explicit} has no build.sh")
        return path.resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for parent in start.parents if start.is_file() else (start, *start.parents):
            candidate = parent / "tools" / "controlplane"
            if (candidate / "build.sh").is_file():
                return candidate
    raise BuildError(
        "cannot find tools/controlplane/build.sh: install kopf-scheduler editable from its "
        f"repository (pip install -e .), or set ${ENV_CONTROLPLANE_DIR} to that folder, "
        f"or set ${ENV_BIN_DIR} to a folder with prebuilt {', '.join(BINARIES)}"
    )


def _check_bin_dir(path: Path) -> Path:
    missing = [b for b in BINARIES if not os.access(path / b, os.X_OK)]
    if missing:
        raise BuildError(f"{path} lacks executable {', '.join(missing)}")
    return path


def ensure_binaries(
    cache_dir: Path | None = None,
    *,
    env: dict[str, str] | None = None,
    echo: bool = True,
) -> Path:
    """Return the folder holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.

    Runs build.sh, which returns at once when the cache is warm and compiles
    everything (15-30 minutes on 2 cores) when it is cold. Progress goes to
    stderr when `echo` is true. `cache_dir` overrides the cache root
    (default: $KOPF_SCHEDULER_CACHE or ~/.cache/kopf-scheduler); `env` replaces
    the environment the script runs in.
    """
    environ = dict(os.environ if env is None else env)
    prebuilt = environ.get(ENV_BIN_DIR)
    if prebuilt and cache_dir is None:
        return _check_bin_dir(Path(prebuilt).expanduser().resolve())

    script = controlplane_dir() / "build.sh"
    return _check_bin_dir(
        run_build_script(script, "the control plane", cache_dir, environ, echo, prebuilt_env=ENV_BIN_DIR)
    )


def run_build_script(
    script: Path,
    what: str,
    cache_dir: Path | None,
    environ: dict[str, str],
    echo: bool,
    *,
    prebuilt_env: str,
) -> Path:
    """Run one of tools/*/build.sh (``bash SCRIPT [CACHE_DIR]``) and return the folder it prints last.

    Its stderr (progress, compiler output) is echoed when `echo` is true and the last 40 lines go
    into the error. Exit status 2 is the scripts' "no Go on PATH": :class:`GoNotFoundError`, naming
    `what` is being built and `prebuilt_env`, the variable that points at a prebuilt copy instead.
    """
    cmd = ["bash", str(script)] + ([str(cache_dir)] if cache_dir is not None else [])
    tail: collections.deque[str] = collections.deque(maxlen=40)
    try:
        proc = subprocess.Popen(cmd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError as exc:  # no bash at all
        raise BuildError(f"cannot run {script}: {exc}") from exc
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        tail.append(line.rstrip("\n"))
        if echo:
            sys.stderr.write(line)
            sys.stderr.flush()
    stdout = proc.stdout.read()
    rc = proc.wait()

    log = "\n".join(tail)
    if rc == _GO_MISSING_EXIT:
        raise GoNotFoundError(
            f"cannot build {what}: Go is not installed or not on PATH.\n"
            "Install Go >= 1.26 (GOTOOLCHAIN=go1.27.3 also works through the module proxy), "
            f"or set ${prebuilt_env} to a prebuilt copy.\n{log}"
        )
    if rc != 0:
        raise BuildError(f"{script} failed with exit status {rc}; last output:\n{log}")
    lines = stdout.strip().splitlines()
    if not lines:
        raise BuildError(f"{script} printed no folder")
    return Path(lines[-1])
