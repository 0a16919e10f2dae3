"""Leader election without an API server: the pure decision and codec, then whole terms of the operator's
Lease client against simulate's in-memory kube-apiserver model on a virtual clock (client-go's
leaderelection semantics)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import pytest

from kopf_scheduler.core.framework.interface import ApiResponse
from kopf_scheduler.core.model.timestamps import parse_time, rfc3339_micro
from kopf_scheduler.kube.leader import (
    Action,
    ApiLeaseClient,
    LeaderElectionConfig,
    LeaderElector,
    LeaseRecord,
    Observation,
    StoredLease,
    decide,
    lease_body,
    observe,
    released,
    stored_lease_from_body,
)
from kopf_scheduler.sim.kubeapi import KubeApi

if TYPE_CHECKING:
    from kopf_scheduler.edge.client import Api

ME = "me_1"
OTHER = "other_2"
T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
WALL = T0 + timedelta(minutes=1)


def rec(holder: str = OTHER, *, duration: int = 15, transitions: int = 3, renew: datetime = T0) -> LeaseRecord:
    return LeaseRecord(holder, duration, T0 - timedelta(hours=1), renew, transitions)


def stored(record: LeaseRecord, rv: str = "10") -> StoredLease:
    return StoredLease(record, rv)


# --- decide ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "previous", "now", "action", "transitions", "observed_at"),
    [
        pytest.param(None, None, 100.0, Action.CREATE, 0, None, id="no lease: create it"),
        pytest.param(stored(rec()), None, 100.0, Action.WAIT, None, 100.0, id="first sight of a held lease: wait"),
        pytest.param(
            stored(rec()),
            Observation(rec(), 86.0, "10"),
            100.0,
            Action.WAIT,
            None,
            86.0,
            id="unchanged for 14s of a 15s term: still valid",
        ),
        pytest.param(
            stored(rec()),
            Observation(rec(), 85.0, "10"),
            100.0,
            Action.ACQUIRE,
            4,
            85.0,
            id="unchanged for exactly the term: expired, take over (3 + 1 transitions)",
        ),
        pytest.param(
            stored(rec(renew=T0 + timedelta(seconds=2))),
            Observation(rec(), 60.0, "9"),
            100.0,
            Action.WAIT,
            None,
            100.0,
            id="holder renewed since we looked: its term restarts on our clock",
        ),
        pytest.param(
            stored(rec(renew=T0 - timedelta(days=30))),
            None,
            100.0,
            Action.WAIT,
            None,
            100.0,
            id="renewTime long past by the holder's clock: skew is ignored, we wait a full term",
        ),
        pytest.param(stored(rec("")), None, 100.0, Action.ACQUIRE, 4, 100.0, id="released: take it at once"),
        pytest.param(
            stored(rec(duration=0)),
            None,
            100.0,
            Action.ACQUIRE,
            4,
            100.0,
            id="no leaseDurationSeconds: already expired",
        ),
        pytest.param(stored(rec(ME)), None, 100.0, Action.RENEW, 3, 100.0, id="ours: renew, transitions unchanged"),
        pytest.param(
            stored(rec(ME)),
            Observation(rec(ME), 10.0, "10"),
            100.0,
            Action.RENEW,
            3,
            10.0,
            id="ours even though expired on our clock: nobody took it, renew",
        ),
    ],
)
def test_decide(
    current: StoredLease | None,
    previous: Observation | None,
    now: float,
    action: Action,
    transitions: int | None,
    observed_at: float | None,
) -> None:
    decision = decide(current, previous, identity=ME, lease_duration=15, now=now, wall_now=WALL)
    assert decision.action is action
    if transitions is None:
        assert decision.record is None
    else:
        assert decision.record is not None
        assert decision.record.holder_identity == ME
        assert decision.record.lease_transitions == transitions
        assert decision.record.lease_duration_seconds == 15
        assert decision.record.renew_time == WALL
    if observed_at is None:
        assert decision.observation is None
    else:
        assert decision.observation is not None
        assert decision.observation.observed_at == observed_at


def test_renew_keeps_acquire_time_and_takeover_resets_it() -> None:
    mine = rec(ME, duration=60)
    renewal = decide(stored(mine), None, identity=ME, lease_duration=15, now=0.0, wall_now=WALL).record
    assert renewal == LeaseRecord(ME, 15, mine.acquire_time, WALL, 3)
    takeover = decide(stored(rec("")), None, identity=ME, lease_duration=15, now=0.0, wall_now=WALL).record
    assert takeover == LeaseRecord(ME, 15, WALL, WALL, 4)


def test_observe_resource_version_only_change_keeps_the_clock() -> None:
    before = Observation(rec(), 50.0, "10")
    after = observe(before, stored(rec(), rv="11"), now=99.0)
    assert (after.observed_at, after.resource_version) == (50.0, "11")


def test_released_record_lets_anyone_take_over() -> None:
    record = released(rec(ME, transitions=7), wall_now=WALL)
    assert record == LeaseRecord("", 1, WALL, WALL, 7)
    # Another candidate that sees it acquires immediately, with one more transition.
    decision = decide(stored(record), None, identity=OTHER, lease_duration=15, now=0.0, wall_now=WALL)
    assert (decision.action, decision.record and decision.record.lease_transitions) == (Action.ACQUIRE, 8)


# --- codec -----------------------------------------------------------------------------------


def test_microtime_always_has_six_fraction_digits() -> None:
    # The API server parses MicroTime with a fixed ".000000" layout; isoformat() would drop it here.
    assert rfc3339_micro(T0) == "2030-01-02T03:04:05.000000Z"
    assert rfc3339_micro(T0.replace(microsecond=42)) == "2030-01-02T03:04:05.000042Z"
    assert parse_time("2030-01-02T04:04:05.000042+01:00") == T0.replace(microsecond=42)
    assert parse_time(None) is None


def test_lease_body_round_trip() -> None:
    record = LeaseRecord(ME, 15, T0, WALL, 2)
    body = lease_body(record, name="sched", namespace="ns", resource_version="77")
    assert body["metadata"] == {"name": "sched", "namespace": "ns", "resourceVersion": "77"}
    assert body["spec"]["renewTime"] == "2030-01-02T03:05:05.000000Z"
    assert stored_lease_from_body(body) == StoredLease(record, "77")
    assert "resourceVersion" not in lease_body(record, name="s", namespace="n", resource_version=None)["metadata"]


def test_lease_body_with_missing_fields_reads_like_client_go() -> None:
    parsed = stored_lease_from_body({"metadata": {"resourceVersion": "5"}, "spec": {}})
    assert parsed == StoredLease(LeaseRecord("", 0, None, None, 0), "5")


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"lease_duration": 10, "renew_deadline": 10.0}, id="renew deadline not below lease"),
        pytest.param({"renew_deadline": 2.0, "retry_period": 2.0}, id="renew deadline below jittered retry"),
        pytest.param({"retry_period": 0.0}, id="zero retry period"),
        pytest.param({"identity": ""}, id="empty identity"),
    ],
)
def test_config_rejects_unsafe_timing(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(**kwargs)


def test_default_identity_is_unique_per_config() -> None:
    a, b = LeaderElectionConfig(), LeaderElectionConfig()
    assert a.identity != b.identity and "_" in a.identity


# --- whole terms, in memory ------------------------------------------------------------------


class VirtualClock:
    """Time advances only while every task is waiting on it; `run_until` drives it."""

    def __init__(self) -> None:
        self.t = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.t + seconds, future))
        await future

    async def run_until(self, condition: Callable[[], bool], *, limit: float = 120.0) -> None:
        """Let tasks run, jumping to the next wake-up whenever they are all asleep."""
        end = self.t + limit
        while not condition():
            for _ in range(20):
                await asyncio.sleep(0)
            if condition():
                return
            pending = [(at, f) for at, f in self._sleepers if not f.done()]
            assert pending and self.t <= end, f"stuck at t={self.t}"
            self.t = max(self.t, min(at for at, _ in pending))
            self._sleepers = []
            for at, f in pending:
                if at <= self.t:
                    f.set_result(None)
                else:
                    self._sleepers.append((at, f))


LEASES = ("coordination.k8s.io", "v1", "leases")
LEASE_NAME, LEASE_NAMESPACE = "sched", "ns"


@dataclass
class MemoryStore:
    """The Lease as kube-apiserver keeps it (simulate's `KubeApi`: resourceVersions, 404, 409 and their
    bodies), and every record written to it, by whom."""

    kube: KubeApi = field(default_factory=KubeApi)
    writes: list[tuple[str, LeaseRecord]] = field(default_factory=list)

    @property
    def lease(self) -> StoredLease | None:
        body = self.kube.peek(*LEASES, LEASE_NAME, LEASE_NAMESPACE)
        return None if body is None else stored_lease_from_body(body)

    def write(self, who: str, record: LeaseRecord) -> None:
        """Another party writes `record`, whatever the resourceVersion (kubectl, a racing candidate)."""
        self.kube.load(*LEASES, lease_body(record, name=LEASE_NAME, namespace=LEASE_NAMESPACE, resource_version=None))
        self.writes.append((who, record))

    def delete(self) -> None:
        self.kube.delete(*LEASES, LEASE_NAME, LEASE_NAMESPACE)

    def touch(self) -> None:
        """Someone else changes the Lease without taking it (a label, an annotation): a new resourceVersion."""
        body = self.kube.peek(*LEASES, LEASE_NAME, LEASE_NAMESPACE)
        assert body is not None
        self.kube.load(*LEASES, {**body, "metadata": {**body["metadata"], "labels": {"touched": "yes"}}})


class Connection:
    """What `ApiLeaseClient` asks of the operator's `Api`, answered by the store's server: a cut connection
    when `down` (status 0, as the transport reports it), and before each of the next `conflicts` replaces
    someone else touches the Lease, so the server answers that replace 409."""

    def __init__(self, store: MemoryStore, who: str) -> None:
        self.store, self.who = store, who
        self.down = False
        self.conflicts = 0

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> ApiResponse:
        if self.down:
            return ApiResponse(0, error="ConnectionRefusedError: connection refused")
        if method == "PUT" and self.conflicts and self.store.lease is not None:
            self.conflicts -= 1
            self.store.touch()
        answer = self.store.kube.answer(method, path, body)
        if answer.ok and method in ("POST", "PUT"):
            self.store.writes.append((self.who, stored_lease_from_body(answer.body).record))
        return answer


class MemoryClient(ApiLeaseClient):
    """The operator's Lease client over a `Connection` to the store's server."""

    def __init__(self, store: MemoryStore, who: str) -> None:
        self.store = store
        self.connection = Connection(store, who)
        super().__init__(cast("Api", self.connection), name=LEASE_NAME, namespace=LEASE_NAMESPACE)


@dataclass
class Candidate:
    """An elector plus a record of its callbacks; the leading work runs until cancelled."""

    elector: LeaderElector
    client: MemoryClient
    events: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.elector.run(self._lead, self._stop))

    async def _lead(self) -> None:
        self.events.append("started")
        await asyncio.Event().wait()

    async def _stop(self) -> None:
        self.events.append("stopped")


def candidate(store: MemoryStore, clock: VirtualClock, who: str, **config: Any) -> Candidate:
    client = MemoryClient(store, who)
    cfg = LeaderElectionConfig(lease_name="sched", lease_namespace="ns", identity=who, **config)
    return Candidate(LeaderElector(cfg, client, clock=clock, rng=random.Random(0)), client)


def scenario(body: Callable[[MemoryStore, VirtualClock], Awaitable[None]]) -> None:
    async def main() -> None:
        await body(MemoryStore(), VirtualClock())

    asyncio.run(asyncio.wait_for(main(), timeout=10))


def test_single_candidate_creates_renews_and_releases_on_cancel() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        assert a.elector.is_leader and a.elector.leader_identity == "a"
        start = clock.t
        await clock.run_until(lambda: clock.t >= start + 10)
        renewals = [r for who, r in store.writes if who == "a"]
        assert len(renewals) >= 5  # created, then renewed every 2 s
        assert {r.lease_transitions for r in renewals} == {0}
        assert a.task is not None
        a.task.cancel()
        await asyncio.gather(a.task, return_exceptions=True)
        assert a.events == ["started", "stopped"]
        assert store.lease is not None and store.lease.record.holder_identity == ""
        assert store.lease.record.lease_duration_seconds == 1
        assert not a.elector.is_leader

    scenario(body)


def test_standby_takes_over_right_after_a_graceful_release() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        b.start()
        await clock.run_until(lambda: clock.t >= 1030)
        assert b.events == [] and b.elector.leader_identity == "a"
        assert a.task is not None
        a.task.cancel()
        released_at = clock.t
        await clock.run_until(lambda: b.events == ["started"])
        # b retries every 2..4.4 s (jitter), so it needs one retry, not a whole 15 s term.
        assert clock.t - released_at <= 2.0 * (1 + 1.2)
        assert store.lease is not None and store.lease.record == LeaseRecord("b", 15, clock.now(), clock.now(), 1)

    scenario(body)


def test_partitioned_leader_steps_down_before_its_term_ends_and_standby_waits_it_out() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        b.start()
        await clock.run_until(lambda: clock.t >= 1010)
        last_renewal = clock.t
        a.client.connection.down = True
        await clock.run_until(lambda: a.events == ["started", "stopped"])
        lost_at = clock.t
        assert lost_at - last_renewal <= 2.0 + 10.0  # the next renewal plus the renew deadline
        assert not a.elector.is_leader
        await clock.run_until(lambda: b.events == ["started"])
        # b saw a's last write no earlier than it was made, and waited a full 15 s term from there.
        assert clock.t >= last_renewal + 15 - 2.0
        assert clock.t > lost_at  # never two leaders at once
        assert store.lease is not None and store.lease.record.lease_transitions == 1
        assert all(who == "b" for who, _ in store.writes[-1:])

    scenario(body)


def test_renewal_survives_conflicts_within_the_deadline() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        a.client.connection.conflicts = 3  # optimistic write 409s, then the re-read path's write 409s, ...
        start = clock.t
        await clock.run_until(lambda: clock.t >= start + 20)
        assert a.events == ["started"] and a.elector.is_leader
        assert store.lease is not None and store.lease.record.lease_transitions == 0

    scenario(body)


def test_leading_work_that_fails_ends_the_term_and_releases() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        events: list[str] = []

        async def lead() -> None:
            events.append("started")
            raise RuntimeError("boom")

        async def stop() -> None:
            events.append("stopped")

        client = MemoryClient(store, "a")
        elector = LeaderElector(LeaderElectionConfig(identity="a"), client, clock=clock)
        task = asyncio.ensure_future(elector.run(lead, stop))
        await clock.run_until(task.done)
        assert events == ["started", "stopped"]
        assert store.lease is not None and store.lease.record.holder_identity == ""

    scenario(body)


def test_cancel_while_waiting_calls_no_callbacks() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        store.write("x", LeaseRecord("x", 15, T0, T0, 0))
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: clock.t >= 1005)
        assert a.task is not None
        a.task.cancel()
        await asyncio.gather(a.task, return_exceptions=True)
        assert a.events == [] and [who for who, _ in store.writes] == ["x"]

    scenario(body)


# --- fencing: term_valid, the fence every other write asks -------------------------------------


def renewed_at(store: MemoryStore) -> float:
    """The virtual monotonic time of the stored record's last renewal (VirtualClock.now() is T0 + t)."""
    assert store.lease is not None and store.lease.record.renew_time is not None
    return (store.lease.record.renew_time - T0).total_seconds()


def test_term_valid_ends_once_our_clock_passes_the_last_renewal_plus_the_lease_duration() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        await clock.run_until(lambda: clock.t >= 1005)
        last = renewed_at(store)
        assert a.elector.term_valid() and a.elector.is_leader
        # the process froze right after that renewal; on resuming, before any of its tasks runs:
        clock.t = last + 15 - 0.001
        assert a.elector.term_valid()
        clock.t = last + 15
        assert not a.elector.term_valid() and not a.elector.is_leader
        # nobody took the Lease meanwhile: the next renewal reads it, renews it, and the term goes on (client-go)
        await clock.run_until(a.elector.term_valid)
        assert a.events == ["started"] and renewed_at(store) == clock.t

    scenario(body)


def test_a_read_showing_another_valid_holder_ends_the_term_at_once() -> None:
    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        await clock.run_until(lambda: clock.t >= 1003)
        taken_at = clock.t
        store.write("b", LeaseRecord("b", 15, clock.now(), clock.now(), 1))  # however it happened, b holds it now
        await clock.run_until(lambda: a.events == ["started", "stopped"])
        assert clock.t - taken_at <= 2.0  # the next renewal's read ended it, not the 10 s renew deadline
        assert not a.elector.term_valid() and not a.elector.is_leader and a.elector.leader_identity == "b"
        assert store.lease is not None and store.lease.record.holder_identity == "b"  # not released: it is not ours

    scenario(body)


class Overtaken(MemoryClient):
    """The next create or replace loses the race: `winner` writes its record just before it."""

    winner: LeaseRecord | None = None

    def _overtake(self) -> None:
        if self.winner is not None:
            record, self.winner = self.winner, None
            self.store.write(record.holder_identity, record)

    async def create(self, record: LeaseRecord) -> StoredLease:
        self._overtake()
        return await super().create(record)

    async def replace(self, record: LeaseRecord, *, resource_version: str) -> StoredLease:
        if self.store.lease is not None and self.store.lease.resource_version == resource_version:
            self._overtake()  # only a write that would have succeeded is overtaken
        return await super().replace(record, resource_version=resource_version)


@pytest.mark.parametrize("how", ["deleted", "released"])
def test_a_lease_that_no_longer_names_us_ends_the_term_when_taking_it_back_fails(how: str) -> None:
    """The Lease was deleted or released under a leader (kubectl, a namespace reset): anyone may take it at
    once, without waiting out our term, so a leader that loses the race to take it back must stop writing."""

    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        client = Overtaken(store, "a")
        a = Candidate(
            LeaderElector(
                LeaderElectionConfig(lease_name="sched", lease_namespace="ns", identity="a"), client, clock=clock
            ),
            client,
        )
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        await clock.run_until(lambda: clock.t >= 1003)
        assert store.lease is not None
        if how == "deleted":
            store.delete()
        else:
            store.write("admin", released(store.lease.record, wall_now=clock.now()))
        client.winner = LeaseRecord("b", 15, clock.now(), clock.now(), 1)  # b takes it first, without waiting
        await clock.run_until(lambda: store.lease is not None and store.lease.record.holder_identity == "b")
        assert not a.elector.term_valid() and not a.elector.is_leader  # b's term runs: ours must not
        await clock.run_until(lambda: a.events == ["started", "stopped"])
        assert store.lease is not None and store.lease.record.holder_identity == "b"

    scenario(body)


class SlowFirstRead(MemoryClient):
    """The first get is in flight `latency` virtual seconds and answered at its end (`answering` runs then)."""

    def __init__(
        self, store: MemoryStore, who: str, *, clock: VirtualClock, latency: float, answering: Callable[[], None]
    ) -> None:
        super().__init__(store, who)
        self.clock, self.latency, self.answering = clock, latency, answering

    async def get(self) -> StoredLease | None:
        if self.latency:
            latency, self.latency = self.latency, 0.0
            await self.clock.sleep(latency)
            self.answering()
        return await super().get()


def test_a_standby_counts_the_holders_term_from_when_its_read_returned() -> None:
    """The holder's fence stays open until its last renewal plus the lease duration (on its clock); a standby
    whose read was slow saw a record that may have been written just before the answer, so the holder's
    term is counted from the answer, not from when the read was sent (client-go stamps its observation so)."""

    async def body(store: MemoryStore, clock: VirtualClock) -> None:
        a = candidate(store, clock, "a")
        a.start()
        await clock.run_until(lambda: a.events == ["started"])
        last_renewal: list[float] = []

        def partition_a() -> None:  # the server answers b's read; a is cut off right after
            a.client.connection.down = True
            last_renewal.append(renewed_at(store))

        client = SlowFirstRead(store, "b", clock=clock, latency=8.0, answering=partition_a)
        b = Candidate(
            LeaderElector(
                LeaderElectionConfig(lease_name="sched", lease_namespace="ns", identity="b"),
                client,
                clock=clock,
                rng=random.Random(0),
            ),
            client,
        )
        b.start()
        await clock.run_until(lambda: b.events == ["started"])
        assert last_renewal and clock.t >= last_renewal[0] + 15  # a's term had run out, on a clock they share

    scenario(body)
