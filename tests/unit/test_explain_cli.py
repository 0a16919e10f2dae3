"""``kopf-scheduler explain``: asks a real health server's /debug/attempts (in a thread; its insecure port, or
its secure one with the kubeconfig's token), or renders a JSON file."""

from __future__ import annotations

import asyncio
import io
import json
import random
import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import make_node, make_pod, node_info

from kopf_scheduler.commands import main
from kopf_scheduler.commands.explain import endpoint_credentials
from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.framework.basics import QueuedPodInfo
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.scheduling.attempts import AttemptLog
from kopf_scheduler.core.scheduling.cycle import Unschedulable
from kopf_scheduler.core.scheduling.explanation import to_json
from kopf_scheduler.edge.credentials import Credentials, StaticToken
from kopf_scheduler.telemetry.access import TOKEN_REVIEWS, Gate
from kopf_scheduler.telemetry.health import start_health_server
from kopf_scheduler.telemetry.metrics import SchedulerMetrics
from kopf_scheduler.telemetry.serving import self_signed, server_context


def recorded_log() -> AttemptLog:
    """default/big asked for 8 cpu on two 4-cpu nodes, tried once at t=100."""
    pod = make_pod("big").req(cpu="8").obj()
    snapshot = Snapshot.of(
        [node_info(make_node(n).capacity(cpu="4", memory="8Gi", pods="110").obj()) for n in ("a", "b")]
    )
    result = GenericScheduler(default_profile("kopf-scheduler")).schedule(pod, snapshot, rng=random.Random(0))
    log = AttemptLog()
    log.record(
        QueuedPodInfo(pod, 0.0, 0.0, attempts=1),
        Unschedulable(result.message, frozenset(), result=result),
        scheduler_name="kopf-scheduler",
        now=100.0,
    )
    return log


def serving(**secure: Any) -> Iterator[str]:
    """A health server serving recorded_log()'s attempts (as the operator's App does), on a free port."""
    log = recorded_log()

    def lookup(namespace: str, name: str) -> dict[str, Any] | str:
        found = log.explanation(namespace, name, now=102.5)
        return to_json(found) if found is not None else f"no scheduling attempt of {namespace}/{name} is kept"

    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def serve() -> None:
        holder["server"] = await start_health_server(
            "127.0.0.1", 0, ready_check=lambda: (True, ""), metrics=SchedulerMetrics(), attempts=lookup, **secure
        )
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    assert started.wait(10)
    try:
        yield f"{holder['server'].scheme}://127.0.0.1:{holder['server'].port}"
    finally:
        asyncio.run_coroutine_threadsafe(holder["server"].stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def endpoint() -> Iterator[str]:
    """The insecure port (development mode)."""
    yield from serving()


async def reviews(path: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
    """The API server's answers: the token "reader" is alice's, and alice may read /debug."""
    spec = body["spec"]
    if path == TOKEN_REVIEWS:
        known = spec["token"] == "reader"
        return {"status": {"authenticated": known, **({"user": {"username": "alice"}} if known else {})}}, ""
    return {"status": {"allowed": spec["nonResourceAttributes"]["path"].startswith("/debug/")}}, ""


@pytest.fixture
def secure_endpoint() -> Iterator[str]:
    """The secure port: HTTPS with a self-signed certificate, the gate asking `reviews`."""
    chain, key = self_signed()
    yield from serving(tls=server_context(cert_pem=chain, key_pem=key), gate=Gate(reviews))


def token_kubeconfig(tmp_path: Path, token: str) -> Path:
    path = tmp_path / f"{token}.kubeconfig"
    path.write_text(
        yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        })
    )  # fmt: skip
    return path


def test_explain_presents_the_kubeconfigs_credentials_over_https(
    secure_endpoint: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, fast_retries: None
) -> None:
    reader = str(token_kubeconfig(tmp_path, "reader"))
    rc, out, err = explain(
        capsys, "default/big", "--endpoint", secure_endpoint, "--kubeconfig", reader, "--insecure-skip-tls-verify"
    )
    assert (rc, err, out.splitlines()) == (0, "", EXPECTED_TABLE)
    rc, _, err = explain(capsys, "default/big", "--endpoint", secure_endpoint, "--kubeconfig", reader)
    assert rc == 1 and "CERTIFICATE_VERIFY_FAILED" in err and "--insecure-skip-tls-verify" in err
    stranger = str(token_kubeconfig(tmp_path, "stranger"))
    rc, _, err = explain(
        capsys, "default/big", "--endpoint", secure_endpoint, "--kubeconfig", stranger, "--insecure-skip-tls-verify"
    )
    assert rc == 1 and f"{secure_endpoint}/debug/attempts/default/big: HTTP 401: Unauthorized" in err


def test_credentials_go_over_https_only() -> None:
    user = Credentials(server="https://api:6443", source="k", token=StaticToken("t"), certificate_data=b"PEM")
    over_https = endpoint_credentials("https://10.0.0.5:10259/", user, insecure=True)
    assert (over_https.server, over_https.token, over_https.certificate_data, over_https.insecure) == (
        "https://10.0.0.5:10259", user.token, b"PEM", True,
    )  # fmt: skip
    over_http = endpoint_credentials("http://127.0.0.1:8080", user)
    assert over_http.token is None and over_http.certificate_data is None


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["explain", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


EXPECTED_TABLE = [
    "pod default/big: unschedulable",
    "  scheduler kopf-scheduler, attempt 1, 2.5s ago",
    "  0/2 nodes are available: 2 Insufficient cpu. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    "  2 nodes: 0 feasible, 2 rejected",
    "",
    "NODE  RESULT        PLUGIN            REASONS",
    "a     unresolvable  NodeResourcesFit  Insufficient cpu",
    "b     unresolvable  NodeResourcesFit  Insufficient cpu",
    "",
    "preemption (DefaultPreemption): 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
]


def test_explain_asks_the_operator_and_prints_a_table(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = explain(capsys, "default/big", "--endpoint", endpoint)
    assert (rc, err) == (0, "")
    assert out.splitlines() == EXPECTED_TABLE


def test_explain_json_is_the_endpoints_json(endpoint: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, _ = explain(capsys, "default/big", "--endpoint", endpoint, "--output", "json")
    data = json.loads(out)
    assert rc == 0 and (data["pod"], data["outcome"], data["ageSeconds"]) == ("default/big", "unschedulable", 2.5)
    saved = tmp_path / "attempt.json"
    saved.write_text(out)
    rc, table, _ = explain(capsys, "--input", str(saved))  # e.g. fetched through the API server's pod proxy
    assert rc == 0 and table.splitlines() == EXPECTED_TABLE


def test_a_pod_without_a_kept_attempt_is_an_error(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = explain(capsys, "default/other", "--endpoint", endpoint)
    assert (rc, out) == (1, "")
    assert (
        err
        == f"error: {endpoint}/debug/attempts/default/other: HTTP 404: no scheduling attempt of default/other is kept\n"
    )


def test_no_operator_listening_is_an_error_that_says_where_it_looked(
    capsys: pytest.CaptureFixture[str], fast_retries: None
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    rc, _, err = explain(capsys, "default/big", "--endpoint", f"http://127.0.0.1:{port}")
    assert rc == 1 and f"cannot reach the operator at http://127.0.0.1:{port}" in err


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param("big", id="no namespace"),
        pytest.param("a/b/c", id="too many parts"),
        pytest.param("/big", id="empty namespace"),
    ],
)
def test_the_pod_is_namespace_slash_name(capsys: pytest.CaptureFixture[str], pod: str) -> None:
    rc, _, err = explain(capsys, pod)
    assert rc == 2 and "NAMESPACE/NAME" in err


def test_an_endpoint_that_is_not_http_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = explain(capsys, "default/big", "--endpoint", "ftp://127.0.0.1:1/")
    assert (rc, out, err) == (1, "", "error: --endpoint ftp://127.0.0.1:1: expected an http:// or https:// URL\n")


def test_an_unreadable_input_or_one_that_is_no_explanation_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "missing.json"
    rc, _, err = explain(capsys, "--input", str(missing))
    assert rc == 2 and err.startswith(f"error: {missing}: [Errno 2] No such file or directory")
    not_json = tmp_path / "attempt.json"
    not_json.write_text("<html>")
    rc, _, err = explain(capsys, "--input", str(not_json))
    assert rc == 2 and err.startswith(f"error: {not_json}: Expecting value")
    monkeypatch.setattr("sys.stdin", io.StringIO('{"pod": "default/big"}'))  # JSON, but no explanation
    rc, out, err = explain(capsys, "--input", "-")
    assert (rc, out) == (2, "") and err.startswith("error: ")


def test_a_kubeconfig_given_for_https_must_load(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "kubeconfig"
    rc, out, err = explain(capsys, "default/big", "--endpoint", "https://127.0.0.1:1", "--kubeconfig", str(missing))
    assert (rc, out) == (2, "") and err.startswith("error: ") and str(missing) in err
