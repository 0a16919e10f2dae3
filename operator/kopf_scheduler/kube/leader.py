"""Lease-based leader election on coordination.k8s.io/v1, after client-go's tools/leaderelection.

Kopf's peering pauses operators but is not leader election, so replicas of the scheduler elect
one leader through a Lease, with client-go's semantics (the ones kube-scheduler uses):

- a candidate takes the Lease when it is missing, released (empty holderIdentity), or expired;
- "expired" is judged on the candidate's *local* clock: the record must stay unchanged for
  leaseDurationSeconds after this process last saw it change. Clocks of different machines are
  never compared, so skew between nodes cannot hand the lease to two holders;
- every write carries the resourceVersion that was read (optimistic concurrency: a 409 means
  someone else wrote first, and the next attempt re-reads);
- leaseTransitions grows by one whenever the holder changes;
- the leader renews every retry period and gives up when no renewal succeeded within the renew
  deadline, which is shorter than the lease duration, so it stops before anyone may take over.

Layout: the decision (`decide`) and the record codec are pure functions over frozen values, and
the tests drive them with plain numbers. `LeaseClient` is the only I/O: `ApiLeaseClient` sends
our own JSON through the operator's one `Api` (edge/client.py), so the Lease is written with the
same credentials as every bind. `LeaderElector` is the loop around them.

Beyond client-go: fencing. `LeaderElector.term_valid` is what the `Api` asks before every other
write (edge/client.py): a leader that stalled past its lease (a frozen process, a paused VM)
writes nothing once it resumes, before it even learns it lost, and a read that shows another
holder with a valid term ends our term at once instead of after the renew deadline.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from ..core.framework.interface import ApiResponse
from ..core.model import paths
from ..core.model.timestamps import parse_time
from ..edge.client import Api
from . import bodies

__all__ = [
    "Action",
    "ApiLeaseClient",
    "Clock",
    "Decision",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseAPIError",
    "LeaseClient",
    "LeaseConflictError",
    "LeaseRecord",
    "Observation",
    "StoredLease",
    "SystemClock",
    "decide",
    "default_identity",
    "lease_body",
    "observe",
    "released",
    "renewed",
    "stored_lease_from_body",
]

logger = logging.getLogger(__name__)

LEASE_API_VERSION: Final = bodies.LEASE_API_VERSION


def default_identity() -> str:
    """``$POD_NAME`` (deploy/ sets it from the Downward API) or the hostname (the pod name in a cluster,
    but not with hostNetwork) plus a random suffix, unique per process start. ``kubectl kopf-scheduler``
    finds the leader's pod by the part before the suffix.

    The suffix matters: a restarted pod keeps its hostname but must not mistake the Lease
    its previous incarnation held for its own.
    """
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Where the Lease lives and the timing, with client-go's and kube-scheduler's defaults."""

    lease_name: str = "kopf-scheduler"
    lease_namespace: str = "kopf-scheduler"
    identity: str = field(default_factory=default_identity)
    lease_duration: int = 15  # seconds; whole seconds because Lease.spec.leaseDurationSeconds is an int
    renew_deadline: float = 10.0  # seconds the leader keeps retrying a renewal before it gives up
    retry_period: float = 2.0  # seconds between attempts
    jitter_factor: float = 1.2  # candidates wait retry_period * (1 + jitter_factor * U[0, 1))
    release_on_cancel: bool = True  # on a graceful stop, free the Lease so a standby takes over at once

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election identity must not be empty")
        if self.retry_period <= 0 or self.jitter_factor < 0:
            raise ValueError("retry_period must be > 0 and jitter_factor >= 0")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > self.jitter_factor * self.retry_period:
            raise ValueError("renew_deadline must be greater than jitter_factor * retry_period")


# --- the record and its codec (pure) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes (client-go's LeaderElectionRecord)."""

    holder_identity: str  # "" when released
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int


@dataclass(frozen=True, slots=True)
class StoredLease:
    """A record as read from or written to the API server, with the version to write against."""

    record: LeaseRecord
    resource_version: str


def stored_lease_from_body(body: Mapping[str, Any]) -> StoredLease:
    """Read a Lease JSON body. Missing fields read as client-go reads them (empty, 0, None)."""
    spec: Mapping[str, Any] = body.get("spec") or {}
    record = LeaseRecord(
        holder_identity=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=parse_time(spec.get("acquireTime")),
        renew_time=parse_time(spec.get("renewTime")),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
    )
    return StoredLease(record, str(body.get("metadata", {}).get("resourceVersion", "")))


def lease_body(record: LeaseRecord, *, name: str, namespace: str, resource_version: str | None) -> dict[str, Any]:
    """The JSON body that creates (no resource_version) or replaces (with one) the Lease."""
    return bodies.lease(
        name=name,
        namespace=namespace,
        holder=record.holder_identity,
        duration_seconds=record.lease_duration_seconds,
        transitions=record.lease_transitions,
        acquire_time=record.acquire_time,
        renew_time=record.renew_time,
        resource_version=resource_version,
    )


# --- the decision (pure) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """The last record this process saw and when (local monotonic seconds) it last changed."""

    record: LeaseRecord
    observed_at: float
    resource_version: str

    @property
    def expires_at(self) -> float:
        """Local monotonic time after which the holder has failed to renew."""
        return self.observed_at + self.record.lease_duration_seconds

    def is_valid(self, now: float) -> bool:
        """True while the holder's term has not run out on our clock."""
        return self.expires_at > now


class Action(enum.Enum):
    """What one attempt does after reading the Lease."""

    CREATE = "create"  # no Lease yet: create one naming us
    ACQUIRE = "acquire"  # released, expired or never ours: take it over (transitions + 1)
    RENEW = "renew"  # ours: move renewTime forward
    WAIT = "wait"  # another holder's term is still running


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `decide`: the action, the record to write (None for WAIT), what we now know."""

    action: Action
    record: LeaseRecord | None
    observation: Observation | None


def observe(previous: Observation | None, current: StoredLease, *, now: float) -> Observation:
    """Remember `current`; restart its clock only when the record differs from what we saw.

    The resourceVersion alone may change (someone edited labels): that neither renews the term
    nor starts a new one, but later writes must carry the new version.
    """
    if previous is not None and previous.record == current.record:
        return replace(previous, resource_version=current.resource_version)
    return Observation(current.record, now, current.resource_version)


def renewed(record: LeaseRecord, *, identity: str, lease_duration: int, wall_now: datetime) -> LeaseRecord:
    """The record a holder writes to extend its own term: acquire time and transitions unchanged."""
    return LeaseRecord(
        holder_identity=identity,
        lease_duration_seconds=lease_duration,
        acquire_time=record.acquire_time or wall_now,
        renew_time=wall_now,
        lease_transitions=record.lease_transitions,
    )


def released(record: LeaseRecord, *, wall_now: datetime) -> LeaseRecord:
    """The record a holder writes to step down: no holder, 1 s term, so anyone may take it now."""
    return LeaseRecord(
        holder_identity="",
        lease_duration_seconds=1,
        acquire_time=wall_now,
        renew_time=wall_now,
        lease_transitions=record.lease_transitions,
    )


def decide(
    current: StoredLease | None,
    previous: Observation | None,
    *,
    identity: str,
    lease_duration: int,
    now: float,
    wall_now: datetime,
) -> Decision:
    """Given the Lease just read (None: not found), decide what to write.

    `now` is local monotonic time (judges expiry), `wall_now` the UTC time written into the
    record (only for humans and other tools; no decision reads it back).
    """
    if current is None:
        fresh = LeaseRecord(identity, lease_duration, wall_now, wall_now, 0)
        return Decision(Action.CREATE, fresh, None)
    seen = observe(previous, current, now=now)
    holder = current.record.holder_identity
    if holder == identity:
        return Decision(
            Action.RENEW,
            renewed(current.record, identity=identity, lease_duration=lease_duration, wall_now=wall_now),
            seen,
        )
    if holder and seen.is_valid(now):
        return Decision(Action.WAIT, None, seen)
    takeover = LeaseRecord(identity, lease_duration, wall_now, wall_now, current.record.lease_transitions + 1)
    return Decision(Action.ACQUIRE, takeover, seen)


# --- I/O -------------------------------------------------------------------------------------


class LeaseAPIError(Exception):
    """The API server could not be asked or refused the request; the attempt failed, retry later."""


class LeaseConflictError(LeaseAPIError):
    """409: someone else created or updated the Lease first."""


class LeaseClient(Protocol):
    """Reads and writes one Lease. Raises LeaseAPIError (or LeaseConflictError) on failure."""

    async def get(self) -> StoredLease | None:
        """The Lease, or None when it does not exist."""
        ...

    async def create(self, record: LeaseRecord) -> StoredLease:
        """Create the Lease; LeaseConflictError when it already exists."""
        ...

    async def replace(self, record: LeaseRecord, *, resource_version: str) -> StoredLease:
        """Overwrite the Lease if it is still at `resource_version`; LeaseConflictError if not."""
        ...


class ApiLeaseClient:
    """LeaseClient over the operator's ``Api``: the credentials and connection pool of every other write.
    Its requests are tried once: the elector tries again every retry period, within its renew deadline."""

    def __init__(self, api: Api, *, name: str, namespace: str) -> None:
        self._api = api
        self._name = name
        self._namespace = namespace
        self._collection = paths.collection(LEASE_API_VERSION, "leases", namespace=namespace)

    async def get(self) -> StoredLease | None:
        response = await self._api.request("GET", f"{self._collection}/{self._name}", retry=False)
        return None if response.gone else self._stored("GET", response)

    async def create(self, record: LeaseRecord) -> StoredLease:
        body = lease_body(record, name=self._name, namespace=self._namespace, resource_version=None)
        return self._stored("POST", await self._api.request("POST", self._collection, body, fence=False, retry=False))

    async def replace(self, record: LeaseRecord, *, resource_version: str) -> StoredLease:
        body = lease_body(record, name=self._name, namespace=self._namespace, resource_version=resource_version)
        return self._stored(
            "PUT", await self._api.request("PUT", f"{self._collection}/{self._name}", body, fence=False, retry=False)
        )

    def _stored(self, method: str, response: ApiResponse) -> StoredLease:
        ref = f"{method} lease {self._namespace}/{self._name}"
        if response.conflict:
            raise LeaseConflictError(f"{ref}: conflict")
        if not response.ok or not isinstance(response.body, Mapping):
            raise LeaseAPIError(f"{ref}: {response.describe()}")
        try:
            return stored_lease_from_body(response.body)
        except (TypeError, ValueError) as exc:  # a body of the wrong shape: this attempt failed
            raise LeaseAPIError(f"{ref}: unreadable Lease: {exc!r}") from exc


class Clock(Protocol):
    """Time for the elector: injectable so tests run terms in microseconds."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; judges expiry."""
        ...

    def now(self) -> datetime:
        """Wall-clock UTC time written into the Lease."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` on this clock."""
        ...


class SystemClock:
    """The real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class LeaderElector:
    """Runs terms of leadership: wait for the Lease, lead while renewing it, stop when renewal fails.

    One instance per process and Lease; `run` may be called again after it returns to stand as a
    candidate once more (or the process may exit, as kube-scheduler does).
    """

    def __init__(
        self,
        config: LeaderElectionConfig,
        client: LeaseClient,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._client = client
        self._clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._observation: Observation | None = None
        self._leading = False
        self._running = False
        self._reported_leader = ""
        #: local monotonic time at which the last write naming us was sent (None: no term of ours)
        self._renewed_at: float | None = None

    @property
    def identity(self) -> str:
        return self._config.identity

    @property
    def is_leader(self) -> bool:
        """True while we lead: the Lease we last saw names us and our term has not run out on our clock."""
        obs = self._observation
        return self.term_valid() and obs is not None and obs.record.holder_identity == self.identity

    def term_valid(self) -> bool:
        """The fence every write asks: our last successful renewal plus the lease duration is still
        ahead on our own monotonic clock. A standby may take over only after it saw that renewal
        unchanged for the lease duration on its clock, which started after we sent it, so while this
        holds no one else can hold the Lease. False the instant a process that slept past its
        term resumes, before any of its tasks learns of it; false once a read showed the Lease is not
        ours (another holder, or none: deleted or released), until our own write makes it ours again."""
        renewed = self._renewed_at
        return self._leading and renewed is not None and self._clock.monotonic() < renewed + self._config.lease_duration

    @property
    def leader_identity(self) -> str:
        """The holder we last saw ("" if none or released); for logs, metrics and /readyz."""
        return self._observation.record.holder_identity if self._observation else ""

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> None:
        """Wait to acquire the Lease, then run `on_started_leading()` as a task while renewing.

        The term ends when renewal fails for renew_deadline, when the leading work returns or
        raises, or when `run` is cancelled. Then the work is cancelled and awaited, the Lease is
        released (graceful stop and release_on_cancel only, and only after the work stopped, so two
        leaders never overlap), and `on_stopped_leading()` is awaited. A cancel before the Lease is
        acquired calls neither callback.
        """
        if self._running:
            raise RuntimeError("LeaderElector.run() is already running")
        self._running = True
        try:
            await self._acquire()
            await self._lead(on_started_leading, on_stopped_leading)
        finally:
            self._running = False

    async def _lead(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], Awaitable[None]],
    ) -> None:
        self._leading = True
        logger.info("%s: started leading on lease %s", self.identity, self._lease_ref)
        work = asyncio.ensure_future(on_started_leading())
        renewing = asyncio.ensure_future(self._renew_until_lost())
        graceful = True
        try:
            done, _ = await asyncio.wait({work, renewing}, return_when=asyncio.FIRST_COMPLETED)
            if renewing in done:
                graceful = False
                logger.warning(
                    "%s: lost lease %s: no renewal within %.1fs",
                    self.identity,
                    self._lease_ref,
                    self._config.renew_deadline,
                )
            elif not work.cancelled() and work.exception() is not None:
                logger.error("%s: the leading work failed; stepping down", self.identity, exc_info=work.exception())
            else:
                logger.info("%s: the leading work finished; stepping down", self.identity)
        finally:
            self._leading = False
            for task in (renewing, work):
                task.cancel()
            await asyncio.gather(renewing, work, return_exceptions=True)
            if graceful and self._config.release_on_cancel:
                await self._release()
            logger.info("%s: stopped leading on lease %s", self.identity, self._lease_ref)
            await on_stopped_leading()

    async def _acquire(self) -> None:
        """Try until the Lease is ours, with a jittered pause between attempts (client-go's JitterUntil)."""
        logger.info("%s: attempting to acquire lease %s", self.identity, self._lease_ref)
        while not await self._attempt():
            period = self._config.retry_period
            await self._clock.sleep(period * (1.0 + self._config.jitter_factor * self._rng.random()))

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; return when one renewal could not succeed within the deadline."""
        while True:
            await self._clock.sleep(self._config.retry_period)
            deadline = self._clock.monotonic() + self._config.renew_deadline
            while not await self._attempt():
                if self._renewed_at is None:  # a read showed another holder with a valid term: over now
                    logger.warning(
                        "%s: lease %s is held by %s; stepping down",
                        self.identity,
                        self._lease_ref,
                        self.leader_identity,
                    )
                    return
                if self._clock.monotonic() + self._config.retry_period >= deadline:
                    return
                await self._clock.sleep(self._config.retry_period)

    async def _attempt(self) -> bool:
        """One try-acquire-or-renew; True when the Lease names us after it. Never raises API errors."""
        try:
            async with asyncio.timeout(self._config.renew_deadline):
                return await self._try_acquire_or_renew()
        except (LeaseAPIError, TimeoutError) as exc:
            logger.info("%s: lease %s attempt failed: %s", self.identity, self._lease_ref, exc or "timed out")
            return False
        finally:
            self._report_leader()

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self._config
        now, wall_now = self._clock.monotonic(), self._clock.now()
        obs = self._observation
        # Fast path: a holder with a valid term writes against the version it last saw, skipping
        # the read; a conflict or error falls through to the read-decide-write path.
        if self._leading and obs is not None and obs.record.holder_identity == cfg.identity and obs.is_valid(now):
            record = renewed(obs.record, identity=cfg.identity, lease_duration=cfg.lease_duration, wall_now=wall_now)
            try:
                self._remember(await self._client.replace(record, resource_version=obs.resource_version), now)
                return True
            except LeaseAPIError as exc:
                logger.info("%s: optimistic renewal failed (%s); re-reading the lease", cfg.identity, exc)
        current = await self._client.get()
        decision = decide(
            current,
            self._observation,
            identity=cfg.identity,
            lease_duration=cfg.lease_duration,
            # the record is the server's at some moment up to the answer: a holder's term is counted
            # from the answer, never from before the read was sent (client-go stamps it so)
            now=self._clock.monotonic(),
            wall_now=wall_now,
        )
        if decision.observation is not None:
            self._observation = decision.observation
        if decision.record is None:
            self._renewed_at = None  # another holder's term runs: ours is over, whatever our clock says
            return False
        if decision.action is not Action.RENEW:
            # the Lease does not name us (deleted, released or expired): anyone may take it at once,
            # so our term is over unless the write below makes it ours again
            self._renewed_at = None
        if decision.action is Action.CREATE:
            stored = await self._client.create(decision.record)
        else:
            assert decision.observation is not None
            stored = await self._client.replace(decision.record, resource_version=decision.observation.resource_version)
        self._remember(stored, now)
        return True

    def _remember(self, stored: StoredLease, written_at: float) -> None:
        # Our term is counted from *before* the request: the server may have applied the write at
        # any moment during it, so this is the conservative end of the window.
        self._observation = Observation(stored.record, written_at, stored.resource_version)
        self._renewed_at = written_at if stored.record.holder_identity == self.identity else None

    async def _release(self) -> None:
        obs = self._observation
        if obs is None or obs.record.holder_identity != self.identity:
            return
        record = released(obs.record, wall_now=self._clock.now())
        now = self._clock.monotonic()
        try:
            async with asyncio.timeout(self._config.renew_deadline):
                self._remember(await self._client.replace(record, resource_version=obs.resource_version), now)
        except (LeaseAPIError, TimeoutError) as exc:
            logger.warning("%s: could not release lease %s: %s", self.identity, self._lease_ref, exc or "timed out")
        else:
            logger.info("%s: released lease %s", self.identity, self._lease_ref)

    def _report_leader(self) -> None:
        holder = self.leader_identity
        if holder != self._reported_leader:
            self._reported_leader = holder
            logger.info("lease %s: leader is now %r", self._lease_ref, holder or "(none)")

    @property
    def _lease_ref(self) -> str:
        return f"{self._config.lease_namespace}/{self._config.lease_name}"
