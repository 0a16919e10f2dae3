"""The fault suite's StallProxy (tests/cluster/faults/netfaults.py) in front of a plain local server, no
control plane: bytes flow; a stall silences the connections open at the time, in both directions,
while a new connection works; resume delivers what was held, in order; cut resets; block refuses
new connections until unblock. And the kubeconfig that goes through the proxy.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

FAULTS = Path(__file__).resolve().parents[1] / "cluster" / "faults"
#: how long a stalled connection is watched for a byte that must not come: every byte the test sent is
#: at the proxy by then (its ``held`` says so), and one the stall did not hold arrives within
#: milliseconds on loopback
SILENCE = 0.05


def _load_netfaults() -> ModuleType:
    """The fault package's module, imported as the fault suite imports it (``netfaults``), without
    putting its folder on sys.path for the whole run."""
    if "netfaults" in sys.modules:
        return sys.modules["netfaults"]
    spec = importlib.util.spec_from_file_location("netfaults", FAULTS / "netfaults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["netfaults"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


netfaults = _load_netfaults()
StallProxy = netfaults.StallProxy


class LineServer(socketserver.ThreadingTCPServer):
    """Echoes each line back; a line starting with ``slow`` once ``slow_answer`` is set (an answer in flight
    at a stall: ``slow_received`` says the line arrived)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.resets = 0
        self.slow_received = threading.Event()
        self.slow_answer = threading.Event()


class Handler(socketserver.StreamRequestHandler):
    server: LineServer

    def handle(self) -> None:
        try:
            for line in self.rfile:
                if line.startswith(b"slow"):
                    self.server.slow_received.set()
                    self.server.slow_answer.wait(5)
                self.wfile.write(line)
        except ConnectionResetError:
            self.server.resets += 1


@pytest.fixture
def server() -> Iterator[LineServer]:
    srv = LineServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def proxy(server: LineServer) -> Iterator[StallProxy]:
    with StallProxy(server.server_address) as p:
        yield p


def connect(proxy: StallProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read(sock: socket.socket, n: int, timeout: float = 2.0) -> bytes:
    sock.settimeout(timeout)
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def silent(sock: socket.socket, seconds: float = SILENCE) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b"never"
    except TimeoutError:
        return True


def until(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def test_bytes_flow_both_ways(proxy: StallProxy) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"hello\n")
        assert read(sock, 6) == b"hello\n"
        assert proxy.connections == 1 and proxy.accepted == 1


def test_a_stall_silences_open_connections_while_new_ones_work_and_resume_delivers_in_order(
    proxy: StallProxy, server: LineServer
) -> None:
    with connect(proxy) as old:
        old.sendall(b"before\n")
        assert read(old, 7) == b"before\n"
        old.sendall(b"slow answer\n")  # reaches the server; its answer comes back during the stall
        assert server.slow_received.wait(2)
        assert proxy.stall() == 1
        server.slow_answer.set()
        old.sendall(b"held\n")  # client -> server, held
        big = b"x" * (1 << 20) + b"\n"
        old.settimeout(2)
        old.sendall(big)  # the proxy keeps reading: a megabyte fits, nothing blocks, the window stays open
        assert until(lambda: proxy.held >= len(b"slow answer\n") + len(b"held\n") + len(big))  # all at the proxy
        assert silent(old)  # neither the slow answer (server -> client) nor an echo
        with connect(proxy) as new:  # a reconnecting client recovers
            new.sendall(b"fresh\n")
            assert read(new, 6) == b"fresh\n"
        assert proxy.held >= len(b"slow answer\n") + len(b"held\n") + len(big)
        assert proxy.resume() >= len(big)
        assert read(old, 12) == b"slow answer\n"
        assert read(old, 5) == b"held\n"
        assert read(old, len(big), timeout=5) == big
        assert proxy.held == 0
        old.sendall(b"after\n")
        assert read(old, 6) == b"after\n"


def test_cut_resets_both_sides(proxy: StallProxy, server: LineServer) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"hi\n")
        assert read(sock, 3) == b"hi\n"
        proxy.stall()
        assert proxy.cut() == 1
        sock.settimeout(2)
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
    assert until(lambda: proxy.connections == 0)
    assert until(lambda: server.resets == 1)
    with connect(proxy) as sock:
        sock.sendall(b"again\n")
        assert read(sock, 6) == b"again\n"


def test_block_refuses_new_connections_until_unblock(proxy: StallProxy) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"hi\n")
        assert read(sock, 3) == b"hi\n"
        assert proxy.block() == 1 and proxy.blocked
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    proxy.unblock()
    with connect(proxy) as sock:
        sock.sendall(b"back\n")
        assert read(sock, 5) == b"back\n"


@pytest.mark.parametrize(
    ("host", "server_name"),
    [
        pytest.param("127.0.0.1", None, id="an IP the serving certificate names: kept as it is"),
        pytest.param("localhost", "localhost", id="a DNS name: checked as tls-server-name"),
    ],
)
def test_the_proxied_kubeconfig_points_at_the_proxy(tmp_path: Path, host: str, server_name: str | None) -> None:
    original = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [
            {"name": "ours", "cluster": {"server": f"https://{host}:6443", "certificate-authority-data": "Q0E="}},
            {"name": "other", "cluster": {"server": "https://example.org:6443"}},
        ],
        "users": [{"name": "u", "user": {"token": "secret"}}],
        "contexts": [{"name": "c", "context": {"cluster": "ours", "user": "u"}}],
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(original))
    proxy = StallProxy(f"https://{host}:6443")  # not started: only its address is read
    proxy.port = 41234
    out = netfaults.proxied_kubeconfig(path, proxy, tmp_path / "proxied")
    config = json.loads(out.read_text())
    ours, other = (c["cluster"] for c in config["clusters"])
    assert ours["server"] == "https://127.0.0.1:41234" and ours.get("tls-server-name") == server_name
    assert ours["certificate-authority-data"] == "Q0E=" and config["users"] == original["users"]
    assert other == original["clusters"][1]["cluster"]
    assert out.stat().st_mode & 0o777 == 0o600
