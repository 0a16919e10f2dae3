"""``Informer`` (edge/informer.py) against the in-process fake API server (tests/fakeapi.py), with client-go's
reflector semantics: list in pages, hand over the keys, synced; watch from the list's resourceVersion; a watch
that ends for any reason but lost history (the server's timeout, a chunk cut short, a reset, an idle close, a
silent stall, an error status) is resumed from its last resourceVersion with no list, and the kind stays
synced; a 410 (or a resync, or watches that keep failing to start) lists again, and only a kind that pauses
(pods, nodes) is unsynced until that list is in.

Every test records what the informer hands its ``Feed`` and ``on_sync`` in one ordered log. Sync tests around
``asyncio.run``: this project has no pytest-asyncio.

Time: the informer's pauses (``RESUME_PAUSE``, ``BACKOFF_FIRST``) and the client's retry pauses are cut to
milliseconds for every test (``quick_pauses``), and the informers take ``NoJitter`` (each pause is its
nominal length, the shortest the jitter allows); a test about a pause sets its own. Waits are on what the
test expects to see (the log, the requests the server recorded), never a fixed sleep, except where a test
proves that something does NOT happen for a while: that while is a few times the interval it is held against.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from builders import make_node
from fakeapi import FakeApiServer

from kopf_scheduler.edge import client as client_module
from kopf_scheduler.edge import informer as informer_module
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.edge.informer import Feed, Informer

NODES = "/api/v1/nodes"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"


class NoJitter(random.Random):
    """An rng whose draws are all 0.0: every jittered pause ([x, 2x)) lasts x."""

    def random(self) -> float:
        return 0.0


@pytest.fixture(autouse=True)
def quick_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Milliseconds for the pauses no test here is about (see the module docstring)."""
    monkeypatch.setattr(informer_module, "RESUME_PAUSE", 0.002)
    monkeypatch.setattr(informer_module, "RESUME_PAUSE_MAX", 0.004)
    monkeypatch.setattr(informer_module, "BACKOFF_FIRST", 0.005)
    monkeypatch.setattr(client_module, "RETRY_PAUSES", (0.002,) * len(client_module.RETRY_PAUSES))


class Recorder:
    """What the informer did, in order: ("ADDED", name), ("relisted", names), ("synced", bool)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        #: (action, reason) of every restart the informer reported, and when (time.monotonic())
        self.restarts: list[tuple[str, str]] = []
        self.restarted_at: list[float] = []
        #: when each (type, name) was last applied (time.monotonic())
        self.applied_at: dict[tuple[str, str], float] = {}

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        self.log.append((kind, body["metadata"]["name"]))
        self.applied_at[kind, body["metadata"]["name"]] = time.monotonic()

    def relisted(self, keys: set[str]) -> None:
        self.log.append(("relisted", frozenset(keys)))

    def on_sync(self, kind: str, synced: bool) -> None:
        self.log.append(("synced", synced))

    def on_restart(self, kind: str, action: str, reason: str) -> None:
        self.restarts.append((action, reason))
        self.restarted_at.append(time.monotonic())

    def feed(self, path: str = NODES, *, optional: bool = False, pauses: bool = False) -> Feed:
        return Feed(
            "Node",
            path,
            self.apply,
            lambda body: str(body["metadata"]["name"]),
            self.relisted,
            optional=optional,
            pauses=pauses,
        )

    def informer(self, api: Api, **feed_args: Any) -> Informer:
        return Informer(api, self.feed(**feed_args), on_sync=self.on_sync, on_restart=self.on_restart, rng=NoJitter())

    def syncs(self) -> list[bool]:
        return [value for what, value in self.log if what == "synced"]

    def since(self, mark: int) -> list[tuple[str, Any]]:
        return self.log[mark:]

    async def wait(self, condition: Callable[[], bool], timeout: float = 3.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out; log: {self.log}"
            await asyncio.sleep(0.001)


Scenario = Callable[[FakeApiServer, Api, Recorder], Awaitable[None]]


def run(scenario: Scenario, *, watch_idle_timeout: float = 5.0, **server_args: Any) -> None:
    async def main() -> None:
        async with FakeApiServer(**server_args) as server:
            api = Api(Credentials(server=server.url, source="test"), timeout=2.0, watch_idle_timeout=watch_idle_timeout)
            try:
                await asyncio.wait_for(scenario(server, api, Recorder()), 8)
            finally:
                await api.close()

    asyncio.run(main())


async def running(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.sleep(0)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def lists(server: FakeApiServer, path: str = NODES) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == path and r.query.get("watch") != "1"]


def watches(server: FakeApiServer, path: str = NODES) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == path and r.query.get("watch") == "1"]


def add_nodes(server: FakeApiServer, *names: str) -> None:
    for name in names:
        server.add("", "v1", "nodes", make_node(name).body)


def test_lists_in_pages_applies_every_item_then_hands_over_the_keys_then_is_synced() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b", "c", "d", "e")
        informer = Informer(api, rec.feed(), on_sync=rec.on_sync, page=2, rng=NoJitter())
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True])
            assert rec.log == [
                *[("ADDED", n) for n in "abcde"],
                ("relisted", frozenset("abcde")),
                ("synced", True),
            ]
            assert informer.synced
            pages = lists(server)
            assert [q["limit"] for q in pages] == ["2", "2", "2"] and "continue" not in pages[0]
            assert all("continue" in q for q in pages[1:]) and "resourceVersion" not in pages[0]  # a consistent read
            await rec.wait(lambda: len(watches(server)) == 1)
            watch = watches(server)[0]
            assert watch["resourceVersion"] == server.resource_version  # from the list's resourceVersion
            assert watch["allowWatchBookmarks"] == "true" and 300 <= int(watch["timeoutSeconds"]) < 600
        finally:
            await stop(task)

    run(scenario)


def test_watch_events_are_applied_in_order() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        task = await running(Informer(api, rec.feed(), on_sync=rec.on_sync, rng=NoJitter()))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            mark = len(rec.log)
            add_nodes(server, "c")
            a = server.get("", "v1", "nodes", "a")
            assert a is not None
            server.update("", "v1", "nodes", {**a, "metadata": {**a["metadata"], "labels": {"x": "1"}}})
            server.delete("", "v1", "nodes", "b")
            await rec.wait(lambda: len(rec.log) == mark + 3)
            assert rec.since(mark) == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]
            assert rec.syncs() == [True] and len(lists(server)) == 1
        finally:
            await stop(task)

    run(scenario)


def test_the_server_ending_a_watch_is_watched_again_from_the_last_resource_version() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        task = await running(Informer(api, rec.feed(), on_sync=rec.on_sync, rng=NoJitter()))
        try:
            await rec.wait(lambda: server.open_watches == 1)
            add_nodes(server, "b")
            seen_at = server.resource_version
            server.add("", "v1", "namespaces", {"metadata": {"name": "elsewhere"}})  # moves the global resourceVersion
            assert server.end_watches() == 1  # what the watch's timeoutSeconds does: "b" is sent, then a clean end
            await rec.wait(lambda: len(watches(server)) == 2)
            assert watches(server)[1]["resourceVersion"] == seen_at  # the last one the watch delivered
            add_nodes(server, "c")
            await rec.wait(lambda: ("ADDED", "c") in rec.log)
            assert rec.log == [
                ("ADDED", "a"),
                ("relisted", frozenset("a")),
                ("synced", True),
                ("ADDED", "b"),
                ("ADDED", "c"),
            ]
            assert len(lists(server)) == 1  # no relist, never unsynced
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("how", ["compacted", "injected"])
@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_a_410_relists_and_what_vanished_goes_only_a_kind_that_pauses_is_unsynced_meanwhile(
    how: str, pauses: bool
) -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        server.hold("GET", f"^{NODES}$", watch=True)  # the watch after the list arrives late
        task = await running(rec.informer(api, pauses=pauses))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            server.delete("", "v1", "nodes", "b")  # meanwhile: a deletion the watch will never deliver
            if how == "compacted":
                server.compact()  # the watch's resourceVersion is now too old: a 410 inside the stream
            else:
                server.fail("GET", f"^{NODES}$", 410, watch=True)  # the watch is answered 410
            server.release()
            await rec.wait(lambda: ("relisted", frozenset("a")) in rec.log)
            server.clear_faults()
            relist = [("ADDED", "a"), ("relisted", frozenset("a"))]
            if pauses:
                relist = [("synced", False), *relist, ("synced", True)]
            assert rec.log == [("ADDED", "a"), ("ADDED", "b"), ("relisted", frozenset("ab")), ("synced", True), *relist]
            assert len(lists(server)) == 2 and rec.restarts == [("relist", "expired")]
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("cut", ["truncated", "reset", "closed"])
def test_a_watch_cut_by_the_network_resumes_from_its_resource_version_with_no_list(cut: str) -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        task = await running(rec.informer(api, pauses=True))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            add_nodes(server, "c")
            await rec.wait(lambda: ("ADDED", "c") in rec.log)
            seen_at = server.resource_version
            server.hold("GET", f"^{NODES}$", watch=True)  # the resumed watch comes back after these writes
            assert server.cut_watches(cut) == 1
            server.delete("", "v1", "nodes", "b")
            add_nodes(server, "d")
            await rec.wait(lambda: len(watches(server)) == 2)
            server.release()
            await rec.wait(lambda: ("ADDED", "d") in rec.log)
            assert watches(server)[1]["resourceVersion"] == seen_at  # from the last event it delivered
            assert rec.log[-2:] == [("DELETED", "b"), ("ADDED", "d")]  # replayed by the server, in order
            assert rec.syncs() == [True] and len(lists(server)) == 1  # never unsynced, never listed again
            assert rec.restarts == [("resume", "broken")]
        finally:
            await stop(task)

    run(scenario)


def test_a_burst_of_breaks_never_unsyncs_and_never_lists() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        task = await running(rec.informer(api, pauses=True))
        try:
            for i, cut in enumerate(["truncated", "reset", "closed"] * 4):
                await rec.wait(lambda i=i, cut=cut: len(watches(server)) == i + 1 and server.cut_watches(cut) == 1)
            add_nodes(server, "z")
            await rec.wait(lambda: ("ADDED", "z") in rec.log)
            assert rec.syncs() == [True] and len(lists(server)) == 1
            assert rec.restarts == [("resume", "broken")] * 12
        finally:
            await stop(task)

    run(scenario)


IDLE_DEADLINE = 0.1  # the client's watch_idle_timeout; bookmarks every 0.01 s leave 90 ms of slack
BOOKMARKS = 0.01


def test_a_watch_silent_past_the_idle_deadline_is_resumed_and_what_it_missed_is_replayed() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        task = await running(rec.informer(api, pauses=True))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            await asyncio.sleep(1.7 * IDLE_DEADLINE)  # bookmarks keep a healthy watch alive past the deadline
            assert len(watches(server)) == 1 and rec.restarts == []
            add_nodes(server, "c")
            await rec.wait(lambda: ("ADDED", "c") in rec.log)
            server.stall_watches()
            server.delete("", "v1", "nodes", "b")  # withheld by the stalled stream
            await rec.wait(lambda: len(watches(server)) == 2)
            assert rec.restarts[0] == ("resume", "idle")
            # the deadline, counted from the last thing received: "c" or a later bookmark (5 ms for timer slop)
            assert rec.restarted_at[0] - rec.applied_at["ADDED", "c"] >= IDLE_DEADLINE - 0.005
            server.drop_watches()  # the stalled streams never deliver what they held
            server.resume_watches()
            await rec.wait(lambda: ("DELETED", "b") in rec.log)  # a later watch replays it from the resourceVersion
            assert rec.syncs() == [True] and len(lists(server)) == 1
        finally:
            await stop(task)

    run(scenario, watch_idle_timeout=IDLE_DEADLINE, bookmark_interval=BOOKMARKS)


@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_watches_that_keep_failing_to_start_back_off_then_list_again(
    pauses: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "BACKOFF_FIRST", 0.005)
    monkeypatch.setattr(informer_module, "BLIND_LIMIT", 60.0)  # only the failures in a row count here
    monkeypatch.setattr(informer_module, "RELIST_AFTER", 3)  # 3 doubling backoffs show it

    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        task = await running(rec.informer(api, pauses=pauses))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            server.fail("GET", f"^{NODES}$", 503, times=informer_module.RELIST_AFTER, watch=True)
            server.drop_watches()
            await rec.wait(lambda: len(lists(server)) == 2 and informer_module.RELIST_AFTER + 2 <= len(watches(server)))
            assert rec.restarts == [
                ("resume", "broken"),
                *[("resume", "error")] * informer_module.RELIST_AFTER,
                ("relist", "watch-failures"),
            ]
            answered = [r for r in server.requests if r.path == NODES and r.query.get("watch") == "1"][1:]
            gaps = [later.time - earlier.time for earlier, later in zip(answered, answered[1:])]
            # backing off: 5 ms doubling (NoJitter: each pause is its nominal length; a busy machine only adds)
            assert all(gap >= informer_module.BACKOFF_FIRST * 2**i for i, gap in enumerate(gaps[:3])), gaps
            assert rec.syncs() == ([True, False, True] if pauses else [True])  # a kind that pauses was blind
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_a_kind_that_pauses_is_not_left_blind_for_long_it_is_unsynced_and_listed_again(
    pauses: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "BLIND_LIMIT", 0.01)
    monkeypatch.setattr(informer_module, "RELIST_AFTER", 1000)  # only blindness may relist here

    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        task = await running(rec.informer(api, pauses=pauses))
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            server.fail("GET", f"^{NODES}$", 503, times=1000, watch=True)  # no watch can start: the kind is blind
            server.delete("", "v1", "nodes", "b")
            cut_at = time.monotonic()
            server.cut_watches("reset")
            if pauses:
                await rec.wait(lambda: ("relisted", frozenset("a")) in rec.log)
                relists = [reason for action, reason in rec.restarts if action == "relist"]
                assert rec.syncs() == [True, False, True] and relists == ["blind"]
            else:
                # a watch asked for after 3 blind limits: the blindness was weighed before it (and ignored)
                later = cut_at + 3 * informer_module.BLIND_LIMIT
                await rec.wait(lambda: any(r.time > later for r in server.requests if r.query.get("watch") == "1"))
                assert rec.syncs() == [True] and len(lists(server)) == 1  # it keeps trying to watch
                assert {reason for _, reason in rec.restarts} == {"broken", "error"}
            server.clear_faults()
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_a_server_that_cannot_be_reached_unsyncs_a_kind_that_pauses_at_once_until_it_is_listed_again(
    pauses: bool,
) -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b")
        informer = rec.informer(api, pauses=pauses)
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            await server.stop()  # an outage: connections refused
            await rec.wait(lambda: len(rec.restarts) >= 2)
            assert informer.synced is not pauses  # nothing is bound on what may have changed unseen
            server.delete("", "v1", "nodes", "b")
            await server.start()  # back, on the same port
            if pauses:
                await rec.wait(lambda: informer.synced and ("relisted", frozenset("a")) in rec.log)
                assert rec.syncs() == [True, False, True] and ("relist", "unreachable") in rec.restarts
            else:
                await rec.wait(lambda: ("DELETED", "b") in rec.log)  # resumed: the server replays it
                assert rec.syncs() == [True] and len(lists(server)) == 1
        finally:
            await stop(task)

    run(scenario)


def test_a_list_cut_short_mid_page_asks_for_that_page_again() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a", "b", "c", "d", "e")
        server.lose_answers("GET", f"^{NODES}$", truncated=True)  # the first page's answer is cut short
        informer = Informer(api, rec.feed(), on_sync=rec.on_sync, page=2, rng=NoJitter())
        informer._backoff = 0.01
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True])
            assert rec.log == [*[("ADDED", n) for n in "abcde"], ("relisted", frozenset("abcde")), ("synced", True)]
            server.lose_answers("GET", f"^{NODES}$")  # a page reset: asked again with the same continue token
            informer.resync()
            await rec.wait(lambda: rec.log.count(("relisted", frozenset("abcde"))) == 2)
            pages = [bool(q.get("continue")) for q in lists(server)]
            assert pages == [False, False, True, True] * 2  # each list: its first page twice, then the two others
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_resync_lists_again_and_unsyncs_only_a_kind_that_pauses(pauses: bool) -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        informer = rec.informer(api, pauses=pauses)
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True] and len(watches(server)) == 1)
            informer.resync()
            assert informer.synced is not pauses and rec.syncs() == ([True, False] if pauses else [True])
            # the relist applied (the second list's request alone may not be answered yet)
            await rec.wait(lambda: rec.log.count(("relisted", frozenset("a"))) == 2 and informer.synced)
            assert rec.log[-3 if pauses else -2 :] == [("ADDED", "a"), ("relisted", frozenset("a"))] + (
                [("synced", True)] if pauses else []
            )
            assert rec.restarts == [("relist", "resync")]
        finally:
            await stop(task)

    run(scenario)


def test_an_optional_kind_that_is_not_served_counts_as_synced_and_empty() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        informer = Informer(api, rec.feed(PODGROUPS, optional=True), on_sync=rec.on_sync, rng=NoJitter())
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True])
            assert rec.log == [("relisted", frozenset()), ("synced", True)] and watches(server, PODGROUPS) == []
            # installed later: found again when asked (every ABSENT_RETRY seconds, or on a resync)
            server.register("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
            server.add(
                "scheduling.x-k8s.io", "v1alpha1", "podgroups", {"metadata": {"name": "g"}, "spec": {"minMember": 2}}
            )
            informer.resync()
            await rec.wait(lambda: ("relisted", frozenset("g")) in rec.log)
            assert rec.log[-2:] == [("ADDED", "g"), ("relisted", frozenset("g"))] and rec.syncs() == [True]
        finally:
            await stop(task)

    run(scenario)


def test_a_kind_that_must_exist_and_is_not_served_never_counts_as_synced() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        task = await running(Informer(api, rec.feed(PODGROUPS), on_sync=rec.on_sync, rng=NoJitter()))
        try:
            await rec.wait(lambda: len(lists(server, PODGROUPS)) >= 3)
            assert rec.log == []
        finally:
            await stop(task)

    run(scenario)


def test_a_failing_list_backs_off_and_stays_unsynced() -> None:
    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        server.fail("GET", f"^{NODES}$", 500, times=3, watch=False)
        informer = rec.informer(api, pauses=True)
        task = await running(informer)
        try:
            await rec.wait(lambda: rec.syncs() == [True])
            answered = [(r.time, r.status) for r in server.requests if r.path == NODES and r.query.get("watch") != "1"]
            assert [status for _, status in answered] == [500, 500, 500, 200]
            gaps = [later - earlier for (earlier, _), (later, _) in zip(answered, answered[1:])]
            first = informer_module.BACKOFF_FIRST  # 5 ms (quick_pauses), doubling
            assert gaps[0] >= first and gaps[1] >= 2 * first and gaps[2] >= 4 * first, gaps
            assert rec.log == [("ADDED", "a"), ("relisted", frozenset("a")), ("synced", True)]  # nothing before

            # a kind that pauses, relisting after lost history: a failing list keeps it unsynced
            server.fail("GET", f"^{NODES}$", 500, times=2, watch=False)  # 500: not retried by the client itself
            informer.resync()
            await rec.wait(lambda: [r.status for r in server.requests if r.path == NODES].count(500) == 3 + 2)
            assert rec.syncs() == [True, False] and not informer.synced  # both lists failed: still unsynced
            await rec.wait(lambda: rec.syncs() == [True, False, True])
        finally:
            await stop(task)

    run(scenario)


@pytest.mark.parametrize("pauses", [True, False], ids=["a kind that pauses", "any other kind"])
def test_an_unexpected_error_never_ends_the_informer_it_lists_again(
    monkeypatch: pytest.MonkeyPatch, pauses: bool
) -> None:
    """An informer that died would leave its kind counted synced while nothing of it arrives: an error
    nobody expected (here the client's watch raising what it never should) is logged, the kind
    (unsynced meanwhile when it pauses) listed again, and its events flow as before."""

    async def scenario(server: FakeApiServer, api: Api, rec: Recorder) -> None:
        add_nodes(server, "a")
        real_watch, failures = api.watch, [RuntimeError("Session is closed")]

        def watch(path: str, params: Mapping[str, str], *, timeout: float) -> Any:
            if failures:
                raise failures.pop()
            return real_watch(path, params, timeout=timeout)

        monkeypatch.setattr(api, "watch", watch)
        task = await running(rec.informer(api, pauses=pauses))
        try:
            await rec.wait(lambda: len(lists(server)) == 2 and len(watches(server)) == 1)
            add_nodes(server, "b")
            await rec.wait(lambda: ("ADDED", "b") in rec.log)
            assert not task.done()
            assert rec.restarts == [("relist", "failure")]
            assert rec.syncs() == ([True, False, True] if pauses else [True])
            assert rec.log.count(("relisted", frozenset("a"))) == 2
        finally:
            await stop(task)

    run(scenario)
