"""tools/controlplane/fetch_go.py: a machine without Go gets the pinned toolchain, or a clear refusal.

A local HTTP server stands in for the Go module proxy ($GOPROXY), so this needs no network.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import platform
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "tools" / "controlplane" / "fetch_go.py"

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"), reason="pins linux only"
)


def toolchain_zip() -> bytes:
    """A module zip shaped like golang.org/toolchain's: a tree under one prefix, bin/go executable."""
    arch = "amd64" if platform.machine() == "x86_64" else "arm64"
    prefix = f"golang.org/toolchain@v0.0.1-go1.26.8.linux-{arch}/"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        go = zipfile.ZipInfo(prefix + "bin/go")
        go.external_attr = 0o755 << 16
        z.writestr(go, "#!/bin/sh\necho go version go1.26.8\n")
        z.writestr(prefix + "VERSION", "go1.26.8\n")
    return buf.getvalue()


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A fake proxy serving `toolchain_zip()` for any path; the paths asked go into the list."""
    body, asked = toolchain_zip(), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()


def fetch(cache: Path, goproxy: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOPROXY": f"{goproxy},direct"}
    return subprocess.run([sys.executable, str(FETCH), str(cache)], env=env, capture_output=True, text=True, timeout=60)


def test_a_zip_that_is_not_the_pinned_one_is_refused_and_nothing_is_installed(
    tmp_path: Path, proxy: tuple[str, list[str]]
) -> None:
    url, asked = proxy
    result = fetch(tmp_path, url)
    assert result.returncode == 1 and "expected" in result.stderr
    assert asked and asked[0].startswith("/golang.org/toolchain/@v/v0.0.1-go1.26.8.linux-")  # the first $GOPROXY entry
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no partial download, no half-unpacked tree


def test_the_pinned_zip_is_unpacked_with_its_modes_and_found_the_second_time(
    tmp_path: Path, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asked = proxy
    sys.path.insert(0, str(FETCH.parent))
    try:
        import fetch_go
    finally:
        sys.path.pop(0)
    target = next(
        iter(k for k in fetch_go.PINNED if k.endswith("amd64" if platform.machine() == "x86_64" else "arm64"))
    )
    monkeypatch.setitem(fetch_go.PINNED, target, hashlib.sha256(toolchain_zip()).hexdigest())
    monkeypatch.setenv("GOPROXY", url)
    assert fetch_go.main(["fetch_go.py", str(tmp_path)]) == 0
    go = tmp_path / "go1.26.8" / "bin" / "go"
    assert subprocess.run([str(go)], capture_output=True, text=True).stdout.strip() == "go version go1.26.8"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go1.26.8"]
    assert fetch_go.main(["fetch_go.py", str(tmp_path)]) == 0 and len(asked) == 1  # found there: not fetched again
