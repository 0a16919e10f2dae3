"""``Api`` (edge/client.py) against the in-process fake API server (tests/fakeapi.py): the one status rule,
the fence, the connection pool (keep-alive, maximum idle age, dropped after a timeout), bearer tokens
(refreshed when stale, retried once after a 401 when the refresh changed them) and the watch's idle deadline;
then the transport under it (edge/transport.py): which requests are sent again on a new connection, how a
refused connection reads, and ``LoopBridge`` for blocking callers.

Connections are counted server-side: the ``Api`` talks to the fake through ``CountingProxy``, a TCP relay
that counts the connections it accepts. Sync tests around ``asyncio.run``: this project has no pytest-asyncio.

Time: waits are on what the test expects (a request the server recorded, a connection count); the idle age of
pooled connections runs on a frozen ``MovingClock`` (tests/clocks.py); deadlines a test proves are a few tens
of milliseconds, held against bookmarks a few times more frequent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest
from builders import make_node
from clocks import MovingClock
from fakeapi import FakeApiServer

from kopf_scheduler.core.framework.interface import ApiResponse
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.edge.transport import LoopBridge, LostConnection, Pool
from kopf_scheduler.kube.bodies import MERGE_PATCH

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"


class CountingProxy:
    """A TCP relay in front of the fake that counts the connections clients open to it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.accepted = 0
        self.open = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self.open -= 1

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


class FakeToken:
    """A TokenSource whose refresh moves to the next of `values`; `stale` until refreshed when asked."""

    def __init__(self, *values: str, stale: bool = False) -> None:
        self.values = list(values)
        self.index = 0
        self.is_stale = stale
        self.refreshes = 0

    def current(self) -> str:
        return self.values[self.index]

    def stale(self) -> bool:
        return self.is_stale

    def refresh(self) -> bool:
        self.refreshes += 1
        self.is_stale = False
        if self.index + 1 < len(self.values):
            self.index += 1
            return True
        return False

    @property
    def expiration(self) -> datetime | None:
        return None


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `condition` holds (polled every millisecond), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


Scenario = Callable[[FakeApiServer, CountingProxy], Awaitable[None]]


def run(scenario: Scenario, **server_args: Any) -> None:
    async def main() -> None:
        async with FakeApiServer(**server_args) as server:
            proxy = CountingProxy(server.port)
            await proxy.start()
            try:
                await asyncio.wait_for(scenario(server, proxy), 8)
            finally:
                await proxy.stop()

    asyncio.run(main())


def make_api(url: str, *, token: FakeToken | None = None, **kwargs: Any) -> Api:
    return Api(Credentials(server=url, source="test", token=token), **kwargs)


async def first_event(api: Api) -> str:
    """The type of the first event of a watch of nodes (from the current state: an ADDED per node)."""
    async with contextlib.aclosing(api.watch(NODES, {}, timeout=60)) as stream:
        async for event in stream:
            return str(event["type"])
    return ""


def writes(server: FakeApiServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.requests if r.method != "GET"]


# ---- the one status rule


@pytest.mark.parametrize(
    ("response", "ok", "gone", "conflict", "described"),
    [
        pytest.param(ApiResponse(201, {"kind": "Pod"}), True, False, False, "HTTP 201 {'kind': 'Pod'}", id="2xx is ok"),
        pytest.param(
            ApiResponse(404, {"message": 'pods "x" not found'}),
            False,
            True,
            False,
            'HTTP 404 pods "x" not found',
            id="404 is gone",
        ),
        pytest.param(
            ApiResponse(409, {"message": "already bound"}),
            False,
            False,
            True,
            "HTTP 409 already bound",
            id="409 is a conflict",
        ),
        pytest.param(ApiResponse(500, "plain text"), False, False, False, "HTTP 500 plain text", id="a text body"),
        pytest.param(
            ApiResponse(0, error="TimeoutError: no answer"),
            False,
            False,
            False,
            "TimeoutError: no answer",
            id="no answer",
        ),
        pytest.param(
            ApiResponse(0, fenced=True),
            False,
            False,
            False,
            "not sent: this replica is not the leader (its term ended or may have ended)",
            id="fenced",
        ),
        pytest.param(ApiResponse(0), False, False, False, "no answer", id="nothing known"),
    ],
)
def test_response_status_rule(response: ApiResponse, ok: bool, gone: bool, conflict: bool, described: str) -> None:
    assert (response.ok, response.gone, response.conflict) == (ok, gone, conflict)
    assert response.describe() == described


def test_401_is_unauthorized() -> None:
    assert ApiResponse(401).unauthorized and not ApiResponse(403).unauthorized and not ApiResponse(0).unauthorized


def test_response_detail_is_the_status_message_cut_to_the_limit() -> None:
    assert ApiResponse(422, {"message": "x" * 500, "code": 422}).detail() == "x" * 300
    assert ApiResponse(422, {"message": "abcdef"}).detail(limit=3) == "abc"
    assert ApiResponse(400, {"no": "message"}).detail() == "{'no': 'message'}"


def test_answers_of_the_fake_become_responses() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url)
        try:
            created = await api.request("POST", NODES, make_node("n1").body)
            assert created.ok and created.status == 201 and created.body["metadata"]["name"] == "n1"
            again = await api.request("POST", NODES, make_node("n1").body)
            assert again.conflict and again.detail() == 'nodes "n1" already exists'
            missing = await api.request("GET", f"{NODES}/zzz")
            assert missing.gone and missing.describe() == 'HTTP 404 nodes "zzz" not found'
        finally:
            await api.close()

    run(scenario)


# ---- fencing


def test_a_fenced_write_sends_nothing_while_reads_go() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        allowed = False
        api = make_api(server.url, fence=lambda: allowed)
        try:
            for method, path in (
                ("POST", NODES),
                ("PUT", f"{NODES}/n1"),
                ("PATCH", f"{NODES}/n1"),
                ("DELETE", f"{NODES}/n1"),
            ):
                response = await api.request(method, path, make_node("n1").body)
                assert (response.status, response.fenced, response.ok) == (0, True, False)
            assert server.requests == []  # nothing reached the server
            assert not api.may_write()

            listed = await api.request("GET", NODES)
            assert listed.ok and [(r.method, r.path) for r in server.requests] == [("GET", NODES)]

            lease = await api.request(
                "POST", NODES, make_node("lease-like").body, fence=False
            )  # the Lease's own writes
            assert lease.status == 201 and writes(server) == [("POST", NODES)]

            allowed = True
            assert (await api.request("POST", NODES, make_node("n2").body)).status == 201
            assert writes(server) == [("POST", NODES), ("POST", NODES)]
        finally:
            await api.close()

    run(scenario)


# ---- retries


@pytest.mark.parametrize("truncated", [False, True], ids=["reset", "cut short"])
def test_an_idempotent_write_whose_answer_is_lost_is_sent_again(truncated: bool, fast_retries: None) -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url)
        try:
            server.add("", "v1", "nodes", make_node("n1").body)
            server.lose_answers("PATCH", f"^{NODES}/n1$", truncated=truncated)
            patched = await api.request(
                "PATCH", f"{NODES}/n1", {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE_PATCH
            )
            assert patched.ok and patched.retried and writes(server) == [("PATCH", f"{NODES}/n1")] * 2
        finally:
            await api.close()

    run(scenario)


def test_a_post_is_sent_again_only_when_its_caller_says_so_and_a_409_then_says_it_landed(
    fast_retries: None,
) -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url)
        try:
            server.lose_answers("POST", f"^{NODES}$")
            lost = await api.request("POST", NODES, make_node("n1").body)
            assert lost.status == 0 and not lost.retried and len(writes(server)) == 1
            server.lose_answers("POST", f"^{NODES}$")
            again = await api.request("POST", NODES, make_node("n2").body, retry=True)
            assert again.conflict and again.retried and len(writes(server)) == 3  # our first try created it
        finally:
            await api.close()

    run(scenario)


def test_an_overloaded_server_is_asked_again_and_other_errors_are_not(fast_retries: None) -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url)
        try:
            server.fail("GET", f"^{NODES}$", 503, times=2)
            server.fail("GET", f"^{NODES}$", 429, times=1)
            listed = await api.request("GET", NODES)
            assert listed.ok and listed.retried and len(server.requests) == 4
            server.fail("GET", f"^{NODES}$", 500, times=1)
            failed = await api.request("GET", NODES)
            assert failed.status == 500 and not failed.retried and len(server.requests) == 5
            server.fail("GET", f"^{NODES}$", 503, times=10)
            given_up = await api.request("GET", NODES)
            assert given_up.status == 503 and given_up.retried and len(server.requests) == 5 + 4  # 3 retries
        finally:
            await api.close()

    run(scenario)


def test_the_fence_is_asked_again_before_each_try(fast_retries: None) -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        allowed = [True]
        api = make_api(server.url, fence=lambda: allowed[-1])
        try:
            server.add("", "v1", "nodes", make_node("n1").body)
            server.lose_answers("PATCH", f"^{NODES}/n1$")
            server.hold("PATCH", f"^{NODES}/n1$")
            request = asyncio.create_task(
                api.request("PATCH", f"{NODES}/n1", {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE_PATCH)
            )
            await until(lambda: len(writes(server)) == 1)  # the first try is at the server, held
            allowed.append(False)  # the term ends while the first try is on the wire
            server.release()
            response = await request
            assert response.fenced and response.retried and len(writes(server)) == 1
        finally:
            await api.close()

    run(scenario)


# ---- the connection pool


def test_keep_alive_reuses_one_connection() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(proxy.url)
        try:
            for _ in range(4):
                assert (await api.request("GET", NODES)).ok
            assert (await api.request("POST", NODES, make_node("n1").body)).ok
            assert proxy.accepted == 1 and len(server.requests) == 5
        finally:
            await api.close()

    run(scenario)


def test_a_pooled_connection_older_than_the_maximum_idle_age_is_not_reused() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        clock = MovingClock(frozen=True, start=1000.0)
        api = make_api(proxy.url, max_idle_age=90, clock=clock)
        try:
            assert (await api.request("GET", NODES)).ok
            clock.advance(89)
            assert (await api.request("GET", NODES)).ok  # young enough: reused
            assert proxy.accepted == 1
            clock.advance(91)
            assert (await api.request("GET", NODES)).ok
            assert proxy.accepted == 2
            await until(lambda: proxy.open == 1)  # the old one was closed, not merely left aside
        finally:
            await api.close()

    run(scenario)


def test_a_timeout_drops_the_idle_connections() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(proxy.url, timeout=0.1)
        try:
            server.hold("GET", f"^{NODES}$")
            both = asyncio.gather(api.request("GET", NODES), api.request("GET", NODES))
            await until(lambda: len(server.requests) == 2)  # both at the server at once: two connections
            server.release()
            results = await both
            assert all(r.ok for r in results) and proxy.accepted == 2  # two connections, both idle now

            server.stall_connections()
            t0 = time.monotonic()
            stalled = await api.request("GET", NODES, retry=False)
            assert stalled.status == 0 and stalled.error.startswith("TimeoutError") and time.monotonic() - t0 < 1.0
            server.resume_connections()

            assert (await api.request("GET", NODES)).ok
            assert proxy.accepted == 3  # a fresh connection: the other idle one went with the timeout
        finally:
            await api.close()

    run(scenario)


# ---- tokens


def test_a_401_with_a_token_that_changed_on_refresh_is_sent_once_more() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        token = FakeToken("one", "two")
        server.require_token("two")
        api = make_api(server.url, token=token)
        try:
            response = await api.request("POST", NODES, make_node("n1").body)
            assert response.status == 201 and token.refreshes == 1
            assert [(r.headers["Authorization"], r.status) for r in server.requests] == [
                ("Bearer one", 401),
                ("Bearer two", 201),
            ]
        finally:
            await api.close()

    run(scenario)


def test_a_401_is_retried_only_once() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        token = FakeToken("one", "two", "three")  # every refresh changes it, none is accepted
        server.require_token("four")
        api = make_api(server.url, token=token)
        try:
            response = await api.request("GET", NODES)
            assert response.status == 401 and token.refreshes == 1 and len(server.requests) == 2
        finally:
            await api.close()

    run(scenario)


def test_a_401_with_a_token_that_did_not_change_is_not_retried() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        token = FakeToken("one")
        server.require_token("two")
        api = make_api(server.url, token=token)
        try:
            assert (await api.request("GET", NODES)).status == 401
            assert token.refreshes == 1 and len(server.requests) == 1
        finally:
            await api.close()

    run(scenario)


def test_a_stale_token_is_refreshed_before_it_is_sent() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        token = FakeToken("expiring", "fresh", stale=True)
        server.require_token("fresh")
        api = make_api(server.url, token=token)
        try:
            assert (await api.request("GET", NODES)).ok
            assert token.refreshes == 1
            assert [r.headers["Authorization"] for r in server.requests] == ["Bearer fresh"]  # no 401 round trip

            token.values.append("fresher")
            token.is_stale = True
            server.require_token("fresher")
            server.add("", "v1", "nodes", make_node("n1").body)
            assert await first_event(api) == "ADDED"  # watches too
            assert token.refreshes == 2 and server.requests[-1].headers["Authorization"] == "Bearer fresher"
        finally:
            await api.close()

    run(scenario)


def test_a_watch_answered_401_is_opened_once_more_with_the_refreshed_token() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        token = FakeToken("one", "two")
        server.require_token("two")
        api = make_api(server.url, token=token)
        try:
            server.add("", "v1", "nodes", make_node("n1").body)
            assert await first_event(api) == "ADDED" and token.refreshes == 1
            assert [r.status for r in server.requests] == [401, 200]
        finally:
            await api.close()

    run(scenario)


# ---- watches


def test_a_watch_streams_events_and_bookmarks_keep_it_alive() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url, watch_idle_timeout=0.1)
        try:
            server.add("", "v1", "nodes", make_node("n1").body)
            seen: list[tuple[str, str]] = []
            t0 = time.monotonic()
            async with contextlib.aclosing(
                api.watch(NODES, {"allowWatchBookmarks": "true", "resourceVersion": "1"}, timeout=60)
            ) as stream:
                async for event in stream:
                    seen.append((event["type"], event["object"]["metadata"].get("name", "")))
                    if len(seen) == 3:
                        server.add("", "v1", "nodes", make_node("n2").body)
                    if time.monotonic() - t0 > 0.2:  # two idle deadlines: bookmarks every 0.01 s kept it alive
                        break
            assert seen[0] == ("ADDED", "n1") and ("ADDED", "n2") in seen
            assert {t for t, _ in seen} == {"ADDED", "BOOKMARK"}  # no ERROR
            assert server.requests[-1].query["timeoutSeconds"] == "60" and server.requests[-1].query["watch"] == "1"
        finally:
            await api.close()

    run(scenario, bookmark_interval=0.01)


def test_the_server_ending_a_watch_ends_the_stream_without_an_error() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url, watch_idle_timeout=60)  # the end must come from the server, not the idle deadline
        try:
            events: list[dict[str, Any]] = []

            async def read() -> None:
                async for event in api.watch(NODES, {"resourceVersion": "1"}, timeout=60):
                    events.append(event)

            reader = asyncio.create_task(read())
            deadline = time.monotonic() + 5
            while server.open_watches == 0:
                assert time.monotonic() < deadline, "the watch never opened"
                await asyncio.sleep(0.001)
            assert server.end_watches() == 1  # what the watch's timeoutSeconds does, now
            await asyncio.wait_for(reader, 10)
            assert events == []
        finally:
            await api.close()

    run(scenario)


def test_a_stalled_watch_is_given_up_after_the_idle_deadline() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url, watch_idle_timeout=0.05)
        try:
            server.stall_watches()
            t0 = time.monotonic()
            events = [e async for e in api.watch(NODES, {"allowWatchBookmarks": "true"}, timeout=60)]
            assert len(events) == 1 and events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 0
            assert events[0]["object"]["message"] == "nothing received for 0.05s"
            assert 0.05 <= time.monotonic() - t0 < 2.0
        finally:
            await api.close()

    run(scenario, bookmark_interval=0.01)


def test_a_watch_answered_with_an_error_status_is_one_error_event_with_its_code() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        api = make_api(server.url)
        try:
            server.fail("GET", f"^{NODES}$", 410, watch=True)
            events = [e async for e in api.watch(NODES, {"resourceVersion": "1"}, timeout=60)]
            assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]
            server.drop_watches()
        finally:
            await api.close()

    run(scenario)


# ---- the transport


class OneAnswerPerConnection:
    """Answers the first request on each connection (keep-alive), then reads the next one and hangs up
    without answering: a request lost on a reused connection, after the server read it."""

    def __init__(self) -> None:
        self.accepted = 0
        self.requests = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
        writer.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


REQUEST = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


def test_a_request_lost_on_a_reused_connection_is_sent_again_only_when_replayable() -> None:
    async def main() -> None:
        server = OneAnswerPerConnection()
        pool = Pool("127.0.0.1", await server.start(), timeout=5)
        try:
            assert await pool.send(REQUEST, replayable=True) == (200, b"ok")
            assert await pool.send(REQUEST, replayable=True) == (200, b"ok")  # lost, then sent on a new connection
            assert (server.accepted, server.requests) == (2, 3)
            with pytest.raises(LostConnection):  # a POST's rule: the server read it and may have acted
                await pool.send(REQUEST, replayable=False)
            assert (server.accepted, server.requests) == (2, 4)
        finally:
            pool.close()
            server.close()

    asyncio.run(main())


def test_a_refused_connection_reads_as_gos_dialer_says_it(fast_retries: None) -> None:
    async def main() -> ApiResponse:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        api = make_api(f"http://127.0.0.1:{port}")
        try:
            response = await api.request("GET", NODES)
        finally:
            await api.close()
        assert response.error == f"ConnectError: dial tcp 127.0.0.1:{port}: connect: connection refused"
        return response

    assert asyncio.run(main()).status == 0


def test_a_loop_bridge_runs_a_worker_threads_call_on_the_loop() -> None:
    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        bridge = LoopBridge(loop)
        assert await asyncio.to_thread(bridge.run, where(), timeout=5) is loop
        with pytest.raises(RuntimeError, match="its own event loop's thread"):  # it would wait for itself
            bridge.run(where(), timeout=5)

    asyncio.run(main())


def test_a_loop_bridge_gives_up_after_its_timeout_and_cancels_the_call() -> None:
    cancelled = asyncio.Event()

    async def hang() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> None:
        bridge = LoopBridge(asyncio.get_running_loop())
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.to_thread(bridge.run, hang(), timeout=0.02)
        assert time.monotonic() - t0 < 2
        await asyncio.wait_for(cancelled.wait(), 2)

    asyncio.run(main())


def test_without_a_loop_the_caller_runs_one_private_loop_for_every_call() -> None:
    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    bridge = LoopBridge()
    first = bridge.run(where(), timeout=5)
    assert bridge.run(where(), timeout=5) is first  # one loop: its connections stay alive between calls
    closed: list[bool] = []
    bridge.close(lambda: closed.append(True))
    assert closed == [True] and first.is_closed()


def test_extra_headers_go_with_the_request_and_line_breaks_in_them_are_refused() -> None:
    """The kubectl plugin's token for the operator rides in a header of its own (telemetry/access.py)."""
    heads: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        api = make_api(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", token=FakeToken("user-token"))
        try:
            response = await api.request("GET", "/x", headers={"Kopf-Scheduler-Authorization": "Bearer minted"})
            assert response.ok
            with pytest.raises(ValueError, match="line break"):
                await api.request("GET", "/x", headers={"X-Evil": "a\r\nHost: elsewhere"})
        finally:
            await api.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 8))
    (head,) = heads
    assert b"\r\nKopf-Scheduler-Authorization: Bearer minted\r\n" in head
    assert b"\r\nAuthorization: Bearer user-token\r\n" in head  # the client's own credentials still go


# ---- one-off paged lists


def test_list_each_visits_every_page_and_returns_the_answer_that_ends_it() -> None:
    async def scenario(server: FakeApiServer, proxy: CountingProxy) -> None:
        for name in ("n1", "n2", "n3", "n4", "n5"):
            server.add("", "v1", "nodes", make_node(name).label(pool="a" if name != "n4" else "b").body)
        api = make_api(server.url)
        try:
            names: list[str] = []
            done = await api.list_each(NODES, lambda item: names.append(item["metadata"]["name"]), limit=2)
            assert done is None and names == ["n1", "n2", "n3", "n4", "n5"]
            assert [r.path for r in server.requests if r.method == "GET"] == [NODES] * 3  # pages of 2, 2 and 1
            selected: list[str] = []
            done = await api.list_each(
                NODES, lambda item: selected.append(item["metadata"]["name"]), query="&labelSelector=pool%3Da", limit=2
            )
            assert done is None and selected == ["n1", "n2", "n3", "n5"]

            def compact_after_the_first_page(item: Any) -> None:  # the continue token expires meanwhile
                if server.get("", "v1", "nodes", "n9") is None:
                    server.add("", "v1", "nodes", make_node("n9").body)
                    server.compact()

            expired = await api.list_each(NODES, compact_after_the_first_page, limit=2)
            assert expired is not None and expired.status == 410
            server.fail("GET", NODES, 500)
            failed = await api.list_each(NODES, lambda item: None)
            assert failed is not None and failed.status == 500
        finally:
            await api.close()

    run(scenario)
