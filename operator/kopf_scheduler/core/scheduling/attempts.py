"""The last scheduling attempt of each pending or recently bound pod, for ``kopf-scheduler explain``.

The operator's loop records every attempt's outcome (``AttemptLog.record``, a few dictionary
operations): it keeps references to what the algorithm built anyway (its ``ScheduleResult``: the
Diagnosis, the per-plugin score arrays, the snapshot's node-name list), copies and formats nothing.
The explanation (``core/scheduling/explanation.py``) is built only when someone asks (``AttemptLog.explanation``,
served by the operator's ``/debug/attempts/NAMESPACE/NAME``).

Records are keyed by namespace/name (a pod recreated under the same name replaces its record). The
attempt after a preemption (the pod waiting for its victims, then landing) keeps a reference to the
attempt that preempted, so the explanation still shows the candidates and victims. Records are kept
in two pools, oldest record first out, so that a stream of bound pods never pushes out the pending
ones ("why is my pod pending?" is the question that matters most):

- pending (unschedulable or failed): at most ``MAX_PENDING`` pods and ``MAX_PENDING_BYTES`` (48 MiB);
- bound: at most ``MAX_BOUND`` pods and ``MAX_BOUND_BYTES`` (16 MiB);
- both: nothing older than ``MAX_AGE_SECONDS`` (600 s). A pod still pending is tried again at least
  every 5 minutes (the unschedulable pool's leftover flush) plus at most 10 s of backoff, so its
  record is renewed before it ages out; a bound pod stays explainable for 10 minutes.

The bytes are an estimate of what a record keeps alive, measured with tracemalloc on 5000 nodes
(``bench/bench_explain.py --memory``): about 128 bytes per rejected node (its
Status and dictionary entry), 16 bytes per scored node (its position and total) plus 16 per score
plugin (raw and normalised score). A pod unschedulable on 5000 nodes holds ~0.6 MiB, so the pending
pool keeps the last ~75 such pods (on 100 nodes, ~3000); a pod scheduled among the 500 nodes scored
on 5000 holds ~32 KiB, so the bound pool keeps the last ~500 (measured 13.0 MiB for an estimated 16;
on 100 nodes ~2500).

What recording costs (same benchmark, paired runs on 5000 nodes): a ``record`` call ~6 us, ~11 us
once a pool is full and it frees the oldest record (whose memory has gone cold); the loop's core
path (~300 us a pod) runs 3-7% slower, which is under 1% of the operator's CPU per pod (2.9 to 22 ms
in bench_e2e: the watch events, the bind and the event dominate).
The node-name list is shared by every record made while the node set stayed the same (8 bytes per
node for each distinct set; not counted). Together at most ~64 MiB, a fraction of what the cache
of such a cluster takes. Pure: time is an argument.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Final

from ..framework.basics import QueuedPodInfo
from ..model.objects import Pod
from .algorithm import ScheduleResult
from .cycle import Bind, Error, Outcome, Unschedulable
from .explanation import Explanation, error_explanation, explanation_of, preemption_of

__all__ = ["MAX_AGE_SECONDS", "Attempt", "AttemptLog", "estimated_bytes"]

MAX_AGE_SECONDS: Final = 600.0
MAX_PENDING: Final = 10_000
MAX_PENDING_BYTES: Final = 48 * 2**20
MAX_BOUND: Final = 10_000
MAX_BOUND_BYTES: Final = 16 * 2**20
#: the estimate's terms (measured; see the module docstring)
RECORD_BYTES: Final = 512
REJECTED_NODE_BYTES: Final = 128
SCORED_NODE_BYTES: Final = 16
SCORE_BYTES: Final = 16


@dataclass(frozen=True, slots=True)
class Attempt:
    """One recorded attempt: the pod as it was tried and what the algorithm returned (None: it raised)."""

    pod: Pod
    result: ScheduleResult | None
    #: the error when ``result`` is None
    message: str
    scheduler_name: str
    #: the pod's attempts so far, this one included
    attempts: int
    at: float
    bytes: int
    #: an earlier attempt of the pod whose preemption nominated it (victims were evicted for it), when this
    #: one did not run preemption itself: the pod usually lands on the next attempt, and users ask why
    preempted: ScheduleResult | None = None

    def explanation(self, now: float) -> Explanation:
        if self.result is None:
            e = error_explanation(self.pod, self.message, scheduler_name=self.scheduler_name, attempts=self.attempts)
        else:
            e = explanation_of(self.pod, self.result, scheduler_name=self.scheduler_name, attempts=self.attempts)
        if self.preempted is not None and self.preempted.post_filter is not None:
            e = replace(e, preemption=preemption_of(self.preempted.post_filter))
        return replace(e, age_seconds=round(now - self.at, 3))


def _preempted(previous: Attempt | None, result: ScheduleResult | None) -> ScheduleResult | None:
    """What a new attempt's record carries of the pod's last preemption (see ``Attempt.preempted``)."""
    if previous is None or (result is not None and result.post_filter is not None):
        return None
    earlier = previous.result
    if earlier is not None and earlier.post_filter is not None and earlier.post_filter.nominated_node:
        return earlier
    return previous.preempted


def estimated_bytes(result: ScheduleResult | None) -> int:
    """What a record of `result` keeps alive, roughly (see the module docstring)."""
    if result is None:
        return RECORD_BYTES
    scored = (
        len(result.scored) * (SCORED_NODE_BYTES + SCORE_BYTES * len(result.plugin_scores))
        if result.scored is not None
        else 0
    )
    return RECORD_BYTES + REJECTED_NODE_BYTES * len(result.diagnosis.node_to_status) + scored


class _Pool:
    """Records in the order they were written; the oldest go first when a bound is passed."""

    __slots__ = ("records", "bytes", "max_pods", "max_bytes")

    def __init__(self, max_pods: int, max_bytes: int) -> None:
        self.records: OrderedDict[str, Attempt] = OrderedDict()
        self.bytes = 0
        self.max_pods = max_pods
        self.max_bytes = max_bytes

    def put(self, key: str, attempt: Attempt) -> None:
        self.pop(key)
        self.records[key] = attempt
        self.bytes += attempt.bytes
        while self.records and (len(self.records) > self.max_pods or self.bytes > self.max_bytes):
            self.bytes -= self.records.popitem(last=False)[1].bytes

    def pop(self, key: str) -> Attempt | None:
        old = self.records.pop(key, None)
        if old is not None:
            self.bytes -= old.bytes
        return old

    def expire(self, before: float) -> None:
        while self.records:
            key, oldest = next(iter(self.records.items()))
            if oldest.at >= before:
                return
            self.pop(key)


class AttemptLog:
    """The last attempt per pod, bounded; see the module docstring."""

    def __init__(
        self,
        *,
        max_age: float = MAX_AGE_SECONDS,
        max_pending: int = MAX_PENDING,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        max_bound: int = MAX_BOUND,
        max_bound_bytes: int = MAX_BOUND_BYTES,
    ) -> None:
        self.max_age = max_age
        self._pending = _Pool(max_pending, max_pending_bytes)
        self._bound = _Pool(max_bound, max_bound_bytes)

    def __len__(self) -> int:
        return len(self._pending.records) + len(self._bound.records)

    @property
    def bytes(self) -> int:
        """The estimate of what the records keep alive."""
        return self._pending.bytes + self._bound.bytes

    def record(self, info: QueuedPodInfo, outcome: Outcome, *, scheduler_name: str, now: float) -> None:
        """Keep `outcome` as `info`'s last attempt (a Skip is no attempt: nothing is kept)."""
        match outcome:
            case Bind(result=result):
                pool, other, message = self._bound, self._pending, ""
            case Unschedulable(result=result) | Error(result=result):
                pool, other, message = self._pending, self._bound, outcome.message
            case _:
                return
        pod = info.pod
        key = pod.key
        previous = other.pop(key) or pool.pop(key)
        preempted = _preempted(previous, result)
        size = estimated_bytes(result) + (estimated_bytes(preempted) if preempted is not None else 0)
        pool.put(key, Attempt(pod, result, message, scheduler_name, info.attempts, now, size, preempted))
        self.expire(now)

    def expire(self, now: float) -> None:
        before = now - self.max_age
        self._pending.expire(before)
        self._bound.expire(before)

    def get(self, namespace: str, name: str, *, now: float) -> Attempt | None:
        self.expire(now)
        key = f"{namespace}/{name}"
        return self._pending.records.get(key) or self._bound.records.get(key)

    def explanation(self, namespace: str, name: str, *, now: float) -> Explanation | None:
        """The explanation of the pod's last attempt (None: none recorded, or it aged out or was pushed out)."""
        attempt = self.get(namespace, name, now=now)
        return attempt.explanation(now) if attempt is not None else None
