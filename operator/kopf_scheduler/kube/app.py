"""The one App object of a scheduler process, kept in the Kopf memo (never a module global).

It holds the core state (the SchedulerCache, the pending-pod index, the PolicyBook of every
SchedulingPolicy, the repeat limiter and condition memo of what we report) and, per served
scheduler name, a ``PolicyState``: the core's ``Serving`` plus what the loop runs with (its
GenericScheduler, queue, snapshot, RNG and the asyncio event that wakes it).

Every decision is made in the core (``core/config/ownership.py``, ``core/scheduling/routing.py``); the App carries
out what they return: ``perform`` wakes loops and drops per-pod records, ``_carry_out`` starts,
switches and stops serving scheduler names. Every request goes through ``self.api``
(``edge/client.py``), whose fence (the leader elector's ``term_valid``) stops writes of a replica
that may have lost its Lease.

The loops schedule only on a cluster the App believes current (``current``): every informer's
kind synced (``CacheSync``: at start, and again while pods or nodes relist after lost history, a 410;
a watch that merely ended is resumed and pauses nothing), and the process not frozen since the
watchdog last ran. The watchdog ticks every ``TICK`` seconds; a gap of
more than ``FREEZE_GAP`` (SIGSTOP, a paused VM, a starved host) means any watch may have missed
anything, so every informer lists again; until the watchdog has run, ``current`` is already false.

A policy's HTTP extenders are ``edge.extenders.HTTPExtender`` objects held by its
GenericScheduler; their blocking calls are made from ``run_blocking``'s thread pool, and their I/O
runs on this process's event loop (the extender client is given it). A policy whose extenders
cannot be set up (unreadable TLS files) is rejected like an invalid one.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from ..core.config.extenders import ExtenderConfig
from ..core.config.ownership import PolicyBook, PolicyMeta, Serving, Settlement
from ..core.config.policy import validate_policy
from ..core.framework.recording import ConditionMemo, RepeatLimiter
from ..core.framework.snapshot import Snapshot
from ..core.framework.usage import MetricsSource
from ..core.framework.waiting import WaitingPods
from ..core.model import paths
from ..core.scheduling import explanation, routing
from ..core.scheduling.algorithm import GenericScheduler
from ..core.scheduling.attempts import AttemptLog
from ..core.scheduling.cycle import Parked
from ..core.state.cache import SchedulerCache
from ..core.state.queueing import SchedulingQueue
from ..edge.client import Api
from ..edge.extenders import HTTPExtender, setup_problems
from ..edge.informer import Informer
from ..edge.plugins import installed_registry
from ..edge.recorder import DrawLog, Recorder
from ..edge.usage import UsagePollers
from ..telemetry.metrics import QUEUES, SchedulerMetrics
from . import bodies

__all__ = ["App", "PolicyState", "prepare_collector_for_lists"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: binds in flight at once per process (upstream binds in goroutines without a bound). Measured
#: on the local control plane, 1,000 queued pods onto 50 nodes: 16 -> 160 pods/s, 64 -> 206 pods/s
#: (the algorithm takes ~0.6 ms a pod; the bind round trip under load dominates)
BIND_CONCURRENCY: Final = 64
#: other writes (events, pod conditions) in flight at once
WRITE_CONCURRENCY: Final = 16
#: threads for blocking extender calls: one attempt per policy with extenders, plus extender binds
EXTENDER_THREADS: Final = 32
#: seconds between the watchdog's ticks, and the gap between two that means the process was frozen
TICK: Final = 0.5
FREEZE_GAP: Final = 5.0
POLICY_GROUP: Final = "scheduling.kopf.dev"
POLICY_VERSION: Final = "v1alpha1"
POLICY_PLURAL: Final = "schedulingpolicies"


@dataclass(slots=True)
class PolicyState:
    """A served scheduler name: the core's Serving and what its loop runs with."""

    serving: Serving
    scheduler: GenericScheduler
    queue: SchedulingQueue
    snapshot: Snapshot
    rng: random.Random = field(default_factory=random.Random)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def policy(self) -> str:
        return self.serving.policy

    @property
    def scheduler_name(self) -> str:
        return self.serving.scheduler_name


class App:
    """Shared state of one process; see the module docstring."""

    def __init__(
        self,
        api: Api,
        *,
        identity: str,
        metrics: SchedulerMetrics | None = None,
        leader_election: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` is what ``now`` reads: the time every scheduling decision is made at (backoffs, Permit
        deadlines, assumptions' TTL, the repeat limiter). Only tests replace it, with a clock they can move
        forward (``tests/unit/test_executors.py``: time passes while the operator is idle, as ``simulate``'s
        does); the watchdog's freeze detection and the informers keep the real monotonic clock."""
        self.api = api
        self._clock = clock
        self.identity = identity
        self.metrics = metrics or SchedulerMetrics()
        api.observe = functools.partial(self.metrics.observe_request, api.metrics_host)  # rest_client_* families
        self.metrics.before_render(self.record_queues)
        self.cache = SchedulerCache()
        self.cache.objects.dra.clock = time.monotonic  # DynamicResources' filterTimeout (core has no clock)
        self.pending = routing.PendingPods()
        self.policies = PolicyBook()
        #: served scheduler name -> its state
        self.states: dict[str, PolicyState] = {}
        #: pods assumed and waiting at Permit (gangs), for every served name: a gang may span profiles
        self.waiting: WaitingPods[Parked] = WaitingPods()
        #: uid -> the write nominating a waiting pod to its node, while in flight: its bind or its
        #: rejection's clearing waits for it (``kube/loop.py``)
        self.nominating: dict[str, asyncio.Task[Any]] = {}
        #: policy name -> the status last decided for it (a new leader writes them again)
        self.policy_statuses: dict[str, Mapping[str, Any]] = {}
        #: PodGroup key -> the status last written (kube/podgroups.py writes only changes)
        self.pod_group_statuses: dict[str, Any] = {}
        self.condition_memo = ConditionMemo()
        self.failed_scheduling_limiter = RepeatLimiter()
        #: the last attempt of each pending or recently bound pod, for /debug/attempts (``explain``)
        self.attempts = AttemptLog()
        #: uids of the pods this process bound while a Scheduled-event recovery runs (None: none runs);
        #: their events are its own to write (``kube/events.recover_scheduled``)
        self.binding_here: set[str] | None = None
        self.recoveries = 0
        #: ``run --record``: the trace of what scheduling saw (``edge/recorder.py``)
        self.recorder: Recorder | None = None
        #: draws which cycles time their plugins one by one (core/framework/instrumentation.py); apart from the
        #: policies' tie-break RNGs, so sampling never shifts their draws
        self.sampling = random.Random()
        self.leading = asyncio.Event()
        if not leader_election:
            self.leading.set()
        #: the kinds not synced now (None: the informers have not started)
        self.sync: routing.CacheSync | None = None
        #: the informers, one per kind (``start_informers`` in kube/handlers.py)
        self.informers: list[Informer] = []
        #: every kind listed at least once since start
        self.ever_synced = False
        #: set whenever the cache turns current again (the loops wait on it)
        self.synced = asyncio.Event()
        #: kind -> when it started relisting after lost history (the pause it causes is timed)
        self._paused_since: dict[str, float] = {}
        self.bind_slots = asyncio.Semaphore(BIND_CONCURRENCY)
        self.write_slots = asyncio.Semaphore(WRITE_CONCURRENCY)
        self.started = False
        #: run by ``kopf-scheduler run``'s Kopf supervisor, which stops it (Kopf's cleanup leaves it be)
        self.supervised = False
        self._tick = time.monotonic()
        self._tasks: set[asyncio.Task[Any]] = set()
        #: awaited by Kopf's cleanup activity, before the API session closes
        self.on_shutdown: list[Callable[[], Awaitable[None]]] = [self._stop_blocking_calls]
        self._blocking = ThreadPoolExecutor(max_workers=EXTENDER_THREADS, thread_name_prefix="extender")
        #: node metrics pollers of the load-aware plugins' sources (``edge/usage.py``)
        self.usage = UsagePollers(api=api, cache=self.cache)
        self.on_shutdown.append(self._stop_usage)

    def now(self) -> float:
        return self._clock()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Fire and forget, keeping a reference so the task is not garbage-collected mid-flight."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call (an extender's HTTP request) in the extender thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self._blocking, functools.partial(fn, *args, **kwargs))

    async def _stop_blocking_calls(self) -> None:
        self._blocking.shutdown(wait=False, cancel_futures=True)

    def perform(self, routed: routing.Routed) -> None:
        """What a routed watch event leaves to do: wake loops, drop a settled pod's records."""
        for name in routed.wake:
            state = self.states.get(name)
            if state is not None:
                state.wakeup.set()
        if routed.settled:
            self.condition_memo.forget(routed.settled)

    def record_queues(self) -> None:
        """Every served queue's counts into the metrics (before each scrape): pods in by queue and event,
        the unschedulable pool by rejecting plugin, the pending pods summed over the queues (upstream has
        one queue for every profile) and the cache's size, so no gauge lags behind an idle loop."""
        pending = dict.fromkeys(QUEUES, 0)
        for name, state in self.states.items():
            self.metrics.observe_queue(name, state.queue.take_incoming(), state.queue.unschedulable_plugin_counts())
            for queue, count in state.queue.pending_counts().items():
                if queue in pending:
                    pending[queue] += count
        self.metrics.set_pending_pods(pending)  # type: ignore[arg-type]  # the keys are QUEUES
        self.metrics.set_cache_size(
            nodes=self.cache.node_count(), pods=self.cache.pod_count(), assumed_pods=self.cache.assumed_count()
        )

    def wake(self) -> None:
        for state in self.states.values():
            state.wakeup.set()

    def kind_synced(self, kind: str, synced: bool) -> None:
        """An informer listed its kind (`synced`), or a kind that pauses the loops (pods, nodes) lost its
        history and lists again; the last kind to list lets the loops schedule. Every pause is timed."""
        if self.sync is None:
            return
        now = time.monotonic()
        if not synced:
            if self.ever_synced:
                logger.warning("%s: history lost; nothing is scheduled until the kind is listed again", kind)
                self._paused_since.setdefault(kind, now)
            self.sync.broken(kind)
            self.synced.clear()
            return
        since = self._paused_since.pop(kind, None)
        if since is not None:
            self.metrics.observe_informer_pause(kind, now - since)
        if not self.sync.listed(kind):
            return
        first = not self.ever_synced
        self.ever_synced = True
        logger.info(
            "caches %s: %d nodes, %d pods bound, %d pending%s",
            "synced" if first else "synced again",
            self.cache.node_count(),
            self.cache.pod_count(),
            len(self.pending),
            "" if since is None else f"; scheduling paused for {now - since:.2f}s",
        )
        self.synced.set()
        self.wake()
        if first:  # after the first cycle has begun: a full collection of a large cache takes 0.1-0.2 s
            asyncio.get_running_loop().call_later(FREEZE_AFTER_SYNC, _freeze_heap)

    def informer_restarted(self, kind: str, action: str, reason: str) -> None:
        """An informer's watch ended and was resumed, or its kind is listed again (``edge/informer.py``)."""
        self.metrics.observe_informer_restart(kind, action, reason)

    def current(self) -> bool:
        """Whether decisions may be made and carried out now (see the module docstring)."""
        return self.sync is not None and self.sync.synced and time.monotonic() - self._tick < FREEZE_GAP

    async def watchdog(self) -> None:
        """Tick forever; after a gap that means the process was frozen, list every kind again."""
        self._tick = time.monotonic()  # a slow start is no freeze
        while True:
            await asyncio.sleep(TICK)
            now = time.monotonic()
            gap, self._tick = now - self._tick, now
            if gap > FREEZE_GAP and self.informers:
                logger.warning("the process did not run for %.1fs (frozen or starved): listing every kind again", gap)
                for informer in self.informers:
                    informer.resync()

    def ready(self) -> tuple[bool, str]:
        if not self.started or self.sync is None:
            return False, "starting"
        if not self.sync.synced:
            what = "initial lists" if not self.ever_synced else "lists (after lost watch history)"
            return False, f"waiting for the {what} of {', '.join(self.sync.waiting)}"
        return True, f"{len(self.states)} scheduler name(s) served, {self.cache.node_count()} nodes"

    def explain(self, namespace: str, name: str) -> dict[str, Any] | str:
        """The JSON explanation of the pod's last attempt, or why there is none (the debug endpoint's answer)."""
        found = self.attempts.explanation(namespace, name, now=self.now())
        if found is None:
            minutes = self.attempts.max_age / 60
            return (
                f"no scheduling attempt of {namespace}/{name} is kept"
                f" (not tried by this scheduler, or last tried over {minutes:g} minutes ago)"
            )
        return explanation.to_json(found)

    def state_for_policy(self, policy: str) -> PolicyState | None:
        serving = self.policies.served_by(policy)
        state = self.states.get(serving.scheduler_name) if serving is not None else None
        return state if state is not None and state.policy == policy else None

    # ------------------------------------------------------------------ policies

    def observe_policy(self, meta: PolicyMeta) -> Mapping[str, Mapping[str, Any]]:
        """Validate and settle a policy; returns {policy name: status} to write."""
        if self.recorder is not None:
            self.recorder.policy(meta.name, meta.generation, meta.scheduler_name, meta.spec)
        validated = validate_policy(
            meta.spec,
            source=f"SchedulingPolicy {meta.name} generation {meta.generation}",
            registry=installed_registry(),
        )
        if not isinstance(validated, list) and validated.extenders:
            validated = setup_problems(validated.extenders) or validated
        return self._carry_out(self.policies.observe(meta, validated, now=datetime.now(UTC)))

    def delete_policy(self, name: str) -> Mapping[str, Mapping[str, Any]]:
        return self._carry_out(self.policies.delete(name, now=datetime.now(UTC)))

    def _carry_out(self, settlement: Settlement) -> Mapping[str, Mapping[str, Any]]:
        now = self.now()
        for sname in settlement.stop:
            state = self.states.pop(sname, None)
            if state is not None:
                self.metrics.observe_queue(sname, state.queue.take_incoming(), {})  # its last counts; gauges to 0
                _close_extenders(state.scheduler)
                state.wakeup.set()
                self.metrics.forget_policy(state.policy)
                logger.info("scheduler name %r no longer served (SchedulingPolicy %s)", sname, state.policy)
        for serving in settlement.serve:
            state = self.states.get(serving.scheduler_name)
            profile = serving.profile
            scheduler = GenericScheduler(profile, extender_factory=_extender_client)
            if state is None:
                share = next((s.queue for s in self.states.values()), None)  # one count of scheduling cycles
                queue = routing.serve(profile, None, pending=self.pending, now=now, cluster=self.cache, share=share)
                rng = DrawLog() if self.recorder is not None else random.Random()
                state = PolicyState(serving, scheduler, queue, Snapshot(self.cache.objects), rng)
                self.states[serving.scheduler_name] = state
            else:
                if state.policy != serving.policy:
                    self.metrics.forget_policy(state.policy)
                routing.serve(profile, state.queue, pending=self.pending, now=now, cluster=self.cache)
                _close_extenders(state.scheduler)
                state.serving, state.scheduler = serving, scheduler
            self.metrics.set_policy_generation(serving.policy, serving.generation)
            logger.info(
                "scheduler name %r served by SchedulingPolicy %s generation %d",
                serving.scheduler_name,
                serving.policy,
                serving.generation,
            )
            state.wakeup.set()
        self._poll_usage()
        return settlement.statuses

    def _poll_usage(self) -> None:
        """Poll the metrics sources the served profiles' load-aware plugins name, and only those."""
        sources = [
            source
            for state in self.states.values()
            for plugin, _ in state.scheduler.profile.scorers
            if isinstance(source := getattr(plugin, "metrics_source", None), MetricsSource)
        ]
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): the next settlement on the loop starts them
        self.usage.sync(sources)

    async def _stop_usage(self) -> None:
        self.usage.stop()

    async def write_policy_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Patch a policy's status (only the leader writes: a standby's patch is fenced and left to the leader)."""
        self.policy_statuses[name] = status
        path = paths.item(f"{POLICY_GROUP}/{POLICY_VERSION}", POLICY_PLURAL, name, subresource="status")
        response = await self.api.request(
            "PATCH", path, bodies.policy_status_patch(status), content_type=bodies.MERGE_PATCH
        )
        if not response.ok and not response.gone and not response.fenced:
            logger.warning("cannot write the status of SchedulingPolicy %s: %s", name, response.describe())

    async def rewrite_policy_statuses(self) -> None:
        """A new leader writes what it decided of every policy while it stood by (its writes were fenced)."""
        for name, status in list(self.policy_statuses.items()):
            if name in self.policies.records:
                await self.write_policy_status(name, status)


def prepare_collector_for_lists() -> None:
    """Before the first lists: the imported modules (Kopf, aiohttp, numpy, ours: about 150,000
    objects) go to the collector's permanent generation and its thresholds are the tuned ones at
    once. With Python's defaults the initial lists' allocations set off full collections that walk
    the modules and the growing cache again and again: applying 15000 nodes cost 51-64 µs a node
    with them, 36-44 µs without (the same nodes parsed and cached in one process)."""
    gc.freeze()
    _tune_gc()


#: seconds from the first sync to ``_freeze_heap``: the first pods are decided and bound first
FREEZE_AFTER_SYNC: Final = 1.0


def _freeze_heap() -> None:
    """Collect the start-up garbage, then move every object alive (modules, Kopf, the initial cache)
    to the collector's permanent generation (``gc.freeze``).

    Python's full collections walk every tracked object: with the cache of a large cluster that
    is hundreds of thousands of objects, a pause of 100-200 ms each time the heap grew by a
    quarter (measured: 287 ms of full collections in a 4000-pod run, the longest 103 ms). Frozen
    objects are never walked again; they are still freed by reference counting when dropped, as
    the cache's pods and nodes are (they hold no reference cycles). Objects made later are
    collected as usual.
    """
    gc.collect()
    gc.freeze()


#: the collector's thresholds from the first lists on (Python's defaults: 700, 10, 10). Every Kopf
#: event leaves objects in reference cycles (wrappers, loggers, tasks), so young collections run
#: every few events; each walks every young object, most of them already garbage or about to be.
#: Fewer, larger young collections cost less in all (bench/bench_kopf.py).
GC_THRESHOLDS: Final = (20_000, 20, 100)


def _tune_gc() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def _extender_client(config: ExtenderConfig) -> HTTPExtender:
    """An extender's client whose I/O runs on the running event loop (its calls come from the extender threads)."""
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # no loop (a test building policies outside one): the client runs its own
        loop = None
    return HTTPExtender(config, loop=loop)


def _close_extenders(scheduler: GenericScheduler) -> None:
    """Close the idle connections of a scheduler that is replaced (a call in flight finishes first)."""
    for ext in scheduler.extenders:
        if isinstance(ext, HTTPExtender):
            ext.close()
