"""HTTPExtender: the wire format (pure tables), then real calls to a local HTTP(S) server in a thread:
without an event loop (as ``simulate`` calls), then from worker threads with the operator's loop running.

TLS uses a throw-away PKI from ``kopf_scheduler.cluster.certs``: its serving certificate is valid
for 127.0.0.1, localhost and kubernetes, and its admin certificate is a client certificate of the
same CA.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import json
import os
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod, node_info
from extender_server import ExtenderServer

from kopf_scheduler.cluster.certs import Pki, create_pki
from kopf_scheduler.core.config.extenders import (
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
    ExtenderTLSConfig,
    HostPriority,
)
from kopf_scheduler.core.model.parsing import parse_pod
from kopf_scheduler.edge.extenders import (
    TIMEOUT_REASON,
    HTTPExtender,
    decode_binding_result,
    decode_filter_result,
    decode_host_priorities,
    encode_extender_args,
    pod_json,
    setup_problems,
)
from kopf_scheduler.edge.transport import Pool

NODES = [node_info(make_node(f"n{i}").obj()) for i in range(3)]


# ----------------------------------------------------------------------------- the wire format


def test_extender_args_with_nodes_or_names() -> None:
    full = json.loads(encode_extender_args(b'{"metadata":{"name":"p"}}', nodes=[b'{"metadata":{"name":"n0"}}']))
    assert full == {
        "Pod": {"metadata": {"name": "p"}},
        "Nodes": {"metadata": {}, "items": [{"metadata": {"name": "n0"}}]},
        "NodeNames": None,
    }
    names = json.loads(encode_extender_args(b"{}", node_names=["n0", "n1"]))
    assert names == {"Pod": {}, "Nodes": None, "NodeNames": ["n0", "n1"]}


def test_the_pod_goes_out_as_the_api_server_gave_it() -> None:
    body = make_pod("web").req(cpu="1").raw()
    body["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    body["metadata"]["creationTimestamp"] = _dt.datetime(2024, 5, 1, 12, 0, tzinfo=_dt.UTC)  # as YAML files give it
    sent = json.loads(pod_json(parse_pod(body)))
    assert sent["spec"] == body["spec"] and sent["metadata"]["name"] == "web"
    assert "managedFields" not in sent["metadata"], "trimmed, as upstream's informers do"
    assert sent["metadata"]["creationTimestamp"] == "2024-05-01T12:00:00Z"


def test_a_bound_pod_keeps_no_body() -> None:
    body = make_pod("bound").raw()
    body["spec"]["nodeName"] = "n0"
    assert parse_pod(body).source is None


@pytest.mark.parametrize(
    "answer,cache_capable,expected",
    [
        pytest.param(
            {"NodeNames": ["n0"], "FailedNodes": {"n1": "busy"}},
            True,
            ExtenderFilterResult(("n0",), {"n1": "busy"}),
            id="names, node-cache capable",
        ),  # fmt: skip
        pytest.param(
            {"nodenames": ["n0"], "failedAndUnresolvableNodes": {"n2": "never"}},
            True,
            ExtenderFilterResult(("n0",), {}, {"n2": "never"}),
            id="keys in any case, as Go reads them",
        ),  # fmt: skip
        pytest.param(
            {"Nodes": {"items": [{"metadata": {"name": "n2"}}]}}, False, ExtenderFilterResult(("n2",)), id="a NodeList"
        ),
        pytest.param(
            {"NodeNames": ["n0"]}, False, ExtenderFilterResult(()), id="names count only when node-cache capable"
        ),
        pytest.param(
            {"NodeNames": None, "Nodes": {"items": [{"metadata": {"name": "n1"}}]}},
            True,
            ExtenderFilterResult(("n1",)),
            id="null names: the NodeList counts",
        ),  # fmt: skip
        pytest.param({}, True, ExtenderFilterResult(()), id="an empty answer keeps no node"),
        pytest.param(None, False, ExtenderFilterResult(()), id="null keeps no node"),
        pytest.param(
            {"Error": "no GPU inventory", "NodeNames": ["n0"]},
            True,
            ExtenderFilterResult(error="no GPU inventory"),
            id="the extender's error",
        ),
        pytest.param(
            {"NodeNames": "n0"},
            True,
            ExtenderFilterResult(error="decoding the filter answer: NodeNames: expected a list of node names"),
            id="names not a list",
        ),
        pytest.param(
            {"FailedNodes": ["n1"]},
            True,
            ExtenderFilterResult(
                error="decoding the filter answer: FailedNodes: expected an object of node names to messages"
            ),
            id="failed not a map",
        ),  # fmt: skip
        pytest.param(
            [],
            True,
            ExtenderFilterResult(error="decoding the filter answer: expected an ExtenderFilterResult object"),
            id="not an object",
        ),
    ],
)
def test_decode_filter_result(answer: Any, cache_capable: bool, expected: ExtenderFilterResult) -> None:
    assert decode_filter_result(answer, node_cache_capable=cache_capable) == expected


@pytest.mark.parametrize(
    "answer,expected",
    [
        pytest.param(
            [{"Host": "n0", "Score": 7}, {"host": "n1", "score": 0}],
            ExtenderPrioritizeResult((HostPriority("n0", 7), HostPriority("n1", 0))),
            id="any case",
        ),
        pytest.param(None, ExtenderPrioritizeResult(), id="null is empty"),
        pytest.param(
            [{"Host": "n0", "Score": 7.5}],
            ExtenderPrioritizeResult(
                error="decoding the prioritize answer: [0]: expected {Host: string, Score: integer}"
            ),
            id="a fractional score",
        ),
        pytest.param(
            {"n0": 7},
            ExtenderPrioritizeResult(error="decoding the prioritize answer: expected a HostPriorityList (a list)"),
            id="a map",
        ),
    ],
)  # fmt: skip
def test_decode_host_priorities(answer: Any, expected: ExtenderPrioritizeResult) -> None:
    assert decode_host_priorities(answer) == expected


@pytest.mark.parametrize(
    "answer,error",
    [
        ({}, ""),
        (None, ""),
        ({"Error": ""}, ""),
        ({"error": "node gone"}, "node gone"),
        ("x", "decoding the bind answer: expected an ExtenderBindingResult object"),
    ],
)
def test_decode_binding_result(answer: Any, error: str) -> None:
    assert decode_binding_result(answer) == error


# ----------------------------------------------------------------------------- calls over HTTP


def extender(url: str, **kw: Any) -> HTTPExtender:
    return HTTPExtender(ExtenderConfig(url_prefix=url, **kw))


def test_filter_sends_the_pod_and_the_nodes() -> None:
    def answer(args: Any) -> tuple[int, Any]:
        return 200, {"Nodes": {"items": args["Nodes"]["items"][1:]}, "FailedNodes": {"n0": "n0 is full"}}

    pod = make_pod("web").req(cpu="1").obj()
    with ExtenderServer({"filter": answer}) as srv:
        result = extender(srv.url + "/", filter_verb="filter").filter(pod, NODES)
    assert result == ExtenderFilterResult(("n1", "n2"), {"n0": "n0 is full"})
    verb, body, headers = srv.requests[0]
    assert verb == "filter", "one slash between the prefix (trailing slash trimmed) and the verb"
    assert headers["Content-Type"] == "application/json"
    assert body["Pod"]["metadata"]["name"] == "web" and body["Pod"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1"}
    }
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n0", "n1", "n2"]
    assert body["Nodes"]["items"][0]["status"]["allocatable"]["cpu"] == "4", "whole Node objects"
    assert body["NodeNames"] is None


def test_a_node_cache_capable_extender_gets_names_only() -> None:
    with ExtenderServer({"filter": lambda args: (200, {"NodeNames": args["NodeNames"][:1]})}) as srv:
        result = extender(srv.url, filter_verb="filter", node_cache_capable=True).filter(make_pod().obj(), NODES)
    assert result.nodes == ("n0",)
    assert srv.requests[0][1]["Nodes"] is None and srv.requests[0][1]["NodeNames"] == ["n0", "n1", "n2"]


def test_prioritize_and_bind() -> None:
    routes = {
        "prioritize": lambda args: (200, [{"Host": n, "Score": i} for i, n in enumerate(args["NodeNames"])]),
        "bind": lambda args: (
            200,
            {"Error": ""} if args["Node"] == "n1" else {"Error": f"cannot bind to {args['Node']}"},
        ),
    }
    pod = make_pod("web").obj()
    with ExtenderServer(routes) as srv:
        ext = extender(srv.url, prioritize_verb="prioritize", bind_verb="bind", node_cache_capable=True)
        assert ext.prioritize(pod, NODES) == ExtenderPrioritizeResult(tuple(HostPriority(f"n{i}", i) for i in range(3)))
        assert ext.bind(pod, "n1") == ""
        assert ext.bind(pod, "n2") == "cannot bind to n2"
    assert srv.requests[1][1] == {"PodName": "web", "PodNamespace": "default", "PodUID": pod.uid, "Node": "n1"}


def test_a_status_other_than_200_is_an_error() -> None:
    with ExtenderServer({"filter": lambda args: (500, {"oops": True})}) as srv:
        result = extender(srv.url, filter_verb="filter").filter(make_pod().obj(), NODES)
    assert result.error == f"failed filter with extender at URL {srv.url}/filter, code 500"


def test_an_answer_that_is_not_json_is_an_error() -> None:
    with ExtenderServer({"filter": lambda args: (200, b"<html>")}) as srv:
        result = extender(srv.url, filter_verb="filter").filter(make_pod().obj(), NODES)
    assert result.error.startswith(f"decoding the answer of {srv.url}/filter: Expecting value")


def test_a_hanging_extender_times_out() -> None:
    answer = threading.Event()

    def hang(args: Any) -> tuple[int, Any]:
        answer.wait(5)  # until the call is over
        return 200, {}

    with ExtenderServer({"filter": hang}) as srv:
        t0 = time.monotonic()
        result = extender(srv.url, filter_verb="filter", http_timeout_seconds=0.02).filter(make_pod().obj(), NODES)
        elapsed = time.monotonic() - t0
        answer.set()
    assert result.error == f'Post "{srv.url}/filter": {TIMEOUT_REASON}'
    assert elapsed < 1.5, "httpTimeout bounds the call"


def test_an_unreachable_extender_is_an_error() -> None:
    with ExtenderServer({}) as srv:
        url = srv.url
    result = extender(url, filter_verb="filter").filter(make_pod().obj(), NODES)
    assert result.error == f'Post "{url}/filter": dial tcp 127.0.0.1:{srv.port}: connect: connection refused'


def test_connections_are_kept_alive() -> None:
    with ExtenderServer({"filter": lambda args: (200, {})}) as srv:
        ext = extender(srv.url, filter_verb="filter")
        for _ in range(5):
            assert ext.filter(make_pod().obj(), NODES).error == ""
    assert srv.connections == 1


def test_a_connection_the_server_dropped_is_replaced() -> None:
    with ExtenderServer({"filter": lambda args: (200, {})}, close_after_answer=True) as srv:
        ext = extender(srv.url, filter_verb="filter")
        results = [ext.filter(make_pod().obj(), NODES) for _ in range(3)]
    assert [r.error for r in results] == ["", "", ""]
    assert srv.connections == 3


def test_a_changed_node_is_encoded_again() -> None:
    with ExtenderServer({"filter": lambda args: (200, {})}) as srv:
        ext = extender(srv.url, filter_verb="filter")
        ext.filter(make_pod().obj(), NODES[:1])
        ext.filter(make_pod().obj(), [node_info(make_node("n0").label(gpu="yes").obj())])
    assert [body["Nodes"]["items"][0]["metadata"]["labels"].get("gpu") for _, body, _ in srv.requests] == [None, "yes"]


# ----------------------------------------------------------------------------- on the operator's event loop


def test_calls_from_worker_threads_run_on_the_operators_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the operator makes them: its loop runs here, attempts and binds call from worker threads, and
    every call's I/O runs on the loop, through one pool of keep-alive connections."""
    loops: list[asyncio.AbstractEventLoop] = []
    send = Pool.send

    async def spy(self: Pool, request: bytes, **kwargs: Any) -> tuple[int, bytes]:
        loops.append(asyncio.get_running_loop())
        return await send(self, request, **kwargs)

    monkeypatch.setattr(Pool, "send", spy)

    async def main(url: str) -> list[str]:
        loop = asyncio.get_running_loop()
        ext = HTTPExtender(ExtenderConfig(url_prefix=url, filter_verb="filter", bind_verb="bind"), loop=loop)
        with ThreadPoolExecutor(4) as pool:
            errors = [(await loop.run_in_executor(pool, ext.filter, make_pod().obj(), NODES)).error for _ in range(3)]
            errors.append(await loop.run_in_executor(pool, ext.bind, make_pod().obj(), "n1"))
        ext.close()
        assert loops == [loop] * 4
        return errors

    with ExtenderServer({"filter": lambda args: (200, {}), "bind": lambda args: (200, {})}) as srv:
        assert asyncio.run(main(srv.url)) == ["", "", "", ""]
    assert srv.connections == 1


def test_httptimeout_bounds_a_call_on_the_operators_loop() -> None:
    answer = threading.Event()

    def hang(args: Any) -> tuple[int, Any]:
        answer.wait(5)  # until the call is over
        return 200, {}

    async def main(url: str) -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        ext = HTTPExtender(ExtenderConfig(url_prefix=url, filter_verb="filter", http_timeout_seconds=0.02), loop=loop)
        t0 = time.monotonic()
        result = await asyncio.to_thread(ext.filter, make_pod().obj(), NODES)
        return result.error, time.monotonic() - t0

    with ExtenderServer({"filter": hang}) as srv:
        error, elapsed = asyncio.run(main(srv.url))
        answer.set()
    assert error == f'Post "{srv.url}/filter": {TIMEOUT_REASON}' and elapsed < 1.5


def test_a_call_on_the_loops_own_thread_is_an_error_not_a_deadlock() -> None:
    async def main(url: str) -> str:
        ext = HTTPExtender(ExtenderConfig(url_prefix=url, filter_verb="filter"), loop=asyncio.get_running_loop())
        return ext.filter(make_pod().obj(), NODES).error

    with ExtenderServer({"filter": lambda args: (200, {})}) as srv:
        assert asyncio.run(main(srv.url)) == f'Post "{srv.url}/filter": a blocking call on its own event loop\'s thread'
    assert srv.requests == []


# ----------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return create_pki(tmp_path_factory.mktemp("pki"))


def server_tls(pki: Pki, *, client_certs: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.serving.cert, pki.serving.key)
    if client_certs:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki.ca.cert)
    return ctx


def ok(args: Any) -> tuple[int, Any]:
    return 200, {"NodeNames": args["NodeNames"]}


def call(url: str, tls: ExtenderTLSConfig) -> str:
    ext = extender(url, filter_verb="filter", node_cache_capable=True, tls=tls, http_timeout_seconds=3)
    return ext.filter(make_pod().obj(), NODES).error


@pytest.mark.parametrize(
    "tls,problem",
    [
        pytest.param(lambda p: ExtenderTLSConfig(ca_data=p.ca.cert.read_bytes()), "", id="the CA as data"),
        pytest.param(lambda p: ExtenderTLSConfig(ca_file=str(p.ca.cert)), "", id="the CA as a file"),
        pytest.param(
            lambda p: ExtenderTLSConfig(), "CERTIFICATE_VERIFY_FAILED", id="verified by default: an unknown CA fails"
        ),
        pytest.param(lambda p: ExtenderTLSConfig(insecure=True), "", id="insecure skips verification"),
        pytest.param(
            lambda p: ExtenderTLSConfig(ca_file=str(p.ca.cert), server_name="kubernetes"), "",
            id="serverName names another SAN",
        ),
        pytest.param(
            lambda p: ExtenderTLSConfig(ca_file=str(p.ca.cert), server_name="wrong.example"),
            "CERTIFICATE_VERIFY_FAILED",
            id="serverName that the certificate lacks",
        ),
    ],
)  # fmt: skip
def test_https(pki: Pki, tls: Any, problem: str) -> None:
    with ExtenderServer({"filter": ok}, tls=server_tls(pki)) as srv:
        error = call(srv.url, tls(pki))
    assert (problem in error) if problem else error == ""


@pytest.mark.parametrize(
    "tls,problem",
    [
        pytest.param(
            lambda p: ExtenderTLSConfig(ca_file=str(p.ca.cert), cert_file=str(p.admin.cert), key_file=str(p.admin.key)),
            "",
            id="files",
        ),
        pytest.param(
            lambda p: ExtenderTLSConfig(
                ca_file=str(p.ca.cert), cert_data=p.admin.cert.read_bytes(), key_data=p.admin.key.read_bytes()
            ),
            "",
            id="data",
        ),
        pytest.param(lambda p: ExtenderTLSConfig(ca_file=str(p.ca.cert)), 'Post "', id="no client certificate"),
    ],
)  # fmt: skip
def test_client_certificates(pki: Pki, tls: Any, problem: str) -> None:
    with ExtenderServer({"filter": ok}, tls=server_tls(pki, client_certs=True)) as srv:
        error = call(srv.url, tls(pki))
    assert error.startswith(problem) if problem else error == ""
    assert bool(srv.requests) is not bool(problem)


def test_a_rotated_ca_file_is_read_again(pki: Pki, tmp_path: Path) -> None:
    other = create_pki(tmp_path / "other")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(other.ca.cert.read_bytes())
    with ExtenderServer({"filter": ok}, tls=server_tls(pki)) as srv:
        ext = extender(
            srv.url, filter_verb="filter", node_cache_capable=True, tls=ExtenderTLSConfig(ca_file=str(ca_file))
        )
        assert "CERTIFICATE_VERIFY_FAILED" in ext.filter(make_pod().obj(), NODES).error
        ca_file.write_bytes(pki.ca.cert.read_bytes())
        os.utime(ca_file, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
        assert ext.filter(make_pod().obj(), NODES).error == ""


def test_setup_problems_name_the_field(pki: Pki, tmp_path: Path) -> None:
    good = ExtenderConfig(url_prefix="https://e", tls=ExtenderTLSConfig(ca_file=str(pki.ca.cert)))
    missing = ExtenderConfig(url_prefix="https://e", tls=ExtenderTLSConfig(ca_file=str(tmp_path / "nope.crt")))
    not_pem = ExtenderConfig(url_prefix="https://e", tls=ExtenderTLSConfig(ca_data=base64.b64decode("aGVsbG8=")))
    problems = setup_problems([good, missing, not_pem])
    assert [p.path for p in problems] == ["spec.extenders[1].tlsConfig", "spec.extenders[2].tlsConfig"]
    assert problems[0].message.startswith("cannot set up TLS: [Errno 2] No such file or directory")
