#!/usr/bin/env python3
"""Fetch a pinned Go toolchain for a machine without one; print its bin folder.

    python3 tools/controlplane/fetch_go.py [CACHE_DIR]

The control plane is compiled from source (build.sh), so a machine that has nothing needs Go.
Debian's golang-go is too old for k8s.io/kubernetes v1.37 (it needs Go >= 1.26) and too old to
switch toolchains itself, so this script takes the toolchain the way `go` does when it switches:
the module zip ``golang.org/toolchain@v0.0.1-go<VERSION>.<os>-<arch>`` from the first
``$GOPROXY`` entry (default proxy.golang.org), checked against the SHA-256 pinned below,
unpacked with its file modes into ``CACHE_DIR/go<VERSION>`` (default: $KOPF_SCHEDULER_CACHE or
~/.cache/kopf-scheduler). A second run finds it there and only prints the folder.

Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import urllib.request
import zipfile
from pathlib import Path

VERSION = "1.26.8"
#: SHA-256 of the toolchain module zips (as the Go module proxy serves them)
PINNED = {
    "linux-amd64": "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7",
    "linux-arm64": "02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99",
}
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def main(argv: list[str]) -> int:
    default_cache = os.environ.get("KOPF_SCHEDULER_CACHE") or Path.home() / ".cache" / "kopf-scheduler"
    cache = Path(argv[1] if len(argv) > 1 else default_cache)
    target = f"{platform.system().lower()}-{ARCHES.get(platform.machine().lower(), platform.machine().lower())}"
    if target not in PINNED:
        print(f"error: no pinned Go toolchain for {target}; install Go >= 1.26 yourself", file=sys.stderr)
        return 2
    root = cache / f"go{VERSION}"
    go = root / "bin" / "go"
    if go.is_file() and os.access(go, os.X_OK):
        print(root / "bin")
        return 0
    proxy = next((p for p in os.environ.get("GOPROXY", "").split(",") if p.startswith("http")), "https://proxy.golang.org")
    url = f"{proxy.rstrip('/')}/golang.org/toolchain/@v/v0.0.1-go{VERSION}.{target}.zip"
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"go{VERSION}.zip.partial"
    print(f"fetching Go {VERSION} from {url}", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=300) as response, open(partial, "wb") as out:
        shutil.copyfileobj(response, out)
    digest = hashlib.sha256(partial.read_bytes()).hexdigest()
    if digest != PINNED[target]:
        partial.unlink()
        print(f"error: {url} has SHA-256 {digest}, expected {PINNED[target]}", file=sys.stderr)
        return 1
    unpacking = cache / f"go{VERSION}.partial"
    shutil.rmtree(unpacking, ignore_errors=True)
    prefix = f"golang.org/toolchain@v0.0.1-go{VERSION}.{target}/"
    with zipfile.ZipFile(partial) as archive:
        for entry in archive.infolist():
            if not entry.filename.startswith(prefix) or entry.is_dir():
                continue
            dest = unpacking / entry.filename[len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(entry) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (entry.external_attr >> 16) & 0o777
            dest.chmod(mode or 0o644)
    shutil.rmtree(root, ignore_errors=True)
    unpacking.rename(root)
    partial.unlink()
    print(root / "bin")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
