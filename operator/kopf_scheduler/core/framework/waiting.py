"""Pods waiting at Permit: upstream's ``waitingPodsMap`` (pkg/scheduler/framework/runtime/waiting_pods_map.go).

A pod one or more Permit plugins answered WAIT is assumed in the cache and held here, with a
deadline per waiting plugin. A plugin lets it go with ``allow`` (once every waiting plugin has, the
pod may be bound) or ``reject``; a deadline that passes rejects it with upstream's text
("rejected due to timeout after waiting 5m0s at plugin GangScheduling"). Upstream arms a timer per
plugin and a goroutine blocks on the outcome; here time is an argument: ``expired(now)`` names the
pods whose deadline has passed, ``next_deadline()`` says when to look again, and settled pods stay
in the map, with their outcome, until the runtime takes them (``take_settled``), so a plugin's
later ``allow`` or ``reject`` of a settled pod changes nothing (upstream: the first signal wins).

``payload`` is whatever the runtime needs to finish the pod (its cycle state and queue entry);
plugins read only ``pod``, ``node_name`` and ``pending``. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from ..model.objects import Pod
from .basics import SUCCESS, Code, Status

__all__ = ["MAX_PERMIT_TIMEOUT_SECONDS", "WaitingPod", "WaitingPods", "go_duration", "timeout_message"]

#: upstream ``maxTimeout``: a Permit plugin's WAIT is capped at 15 minutes
MAX_PERMIT_TIMEOUT_SECONDS: Final = 15 * 60.0

P = TypeVar("P")


def go_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration.String`` writes whole and fractional seconds: 300 -> "5m0s", 1.5 -> "1.5s"."""
    if seconds <= 0:
        return "0s"
    whole_minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(whole_minutes), 60)
    secs = f"{rest:.9f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def timeout_message(seconds: float, plugin: str) -> str:
    """Upstream's status text for a pod whose wait at `plugin` ran out."""
    return f"rejected due to timeout after waiting {go_duration(seconds)} at plugin {plugin}"


@dataclass(slots=True, eq=False)
class WaitingPod(Generic[P]):
    """One pod at Permit: where it is assumed, who still has to allow it, and how it ended."""

    pod: Pod
    node_name: str
    payload: P
    #: when it started to wait
    since: float
    #: waiting plugin -> (deadline, its timeout in seconds)
    pending: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: None while waiting; SUCCESS once every plugin allowed it; UNSCHEDULABLE (with the plugin) when rejected;
    #: ERROR when a preemption took its place
    outcome: Status | None = None

    @property
    def waiting(self) -> bool:
        return self.outcome is None


class WaitingPods(Generic[P]):
    """The waiting pods by uid, in the order they started to wait."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod[P]] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[WaitingPod[P]]:
        """Every pod still waiting (settled ones are left out)."""
        return iter([w for w in self._pods.values() if w.waiting])

    def get(self, uid: str) -> WaitingPod[P] | None:
        """The pod if it is still waiting."""
        w = self._pods.get(uid)
        return w if w is not None and w.waiting else None

    def add(self, pod: Pod, node_name: str, payload: P, timeouts: Mapping[str, float], *, now: float) -> WaitingPod[P]:
        """Start waiting for the plugins of `timeouts` (plugin -> seconds, capped at 15 minutes)."""
        pending = {}
        for plugin, seconds in timeouts.items():
            seconds = min(max(seconds, 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
            pending[plugin] = (now + seconds, seconds)
        w = WaitingPod(pod, node_name, payload, now, pending)
        self._pods[pod.uid] = w
        return w

    def allow(self, uid: str, plugin: str) -> None:
        """`plugin` lets the pod go; the last one to do so settles it with SUCCESS."""
        w = self.get(uid)
        if w is None:
            return
        w.pending.pop(plugin, None)
        if not w.pending:
            w.outcome = SUCCESS

    def reject(self, uid: str, plugin: str, message: str) -> None:
        """The pod is unschedulable: it settles at once, whoever else was waiting."""
        w = self.get(uid)
        if w is not None:
            w.outcome = Status(Code.UNSCHEDULABLE, (message,), plugin)

    def preempt(self, uid: str, plugin: str, message: str) -> bool:
        """Upstream ``waitingPod.Preempt``: a preemption takes the pod's place; it settles at once with an
        ERROR (not unschedulable: it backs off and is tried again). False when it was not waiting."""
        w = self.get(uid)
        if w is None:
            return False
        w.outcome = Status(Code.ERROR, (message,), plugin)
        return True

    def expired(self, now: float) -> list[tuple[WaitingPod[P], str, float]]:
        """Waiting pods with a deadline at or before `now`: (pod, the plugin, its timeout), earliest first.
        They are not settled here: the runtime rejects them (``timeout_message``) once their plugins
        had their say (a gang's unreserve rejects its siblings first)."""
        out = []
        for w in self:
            plugin, (deadline, seconds) = min(w.pending.items(), key=lambda kv: kv[1][0])
            if deadline <= now:
                out.append((deadline, w, plugin, seconds))
        out.sort(key=lambda t: t[0])
        return [(w, plugin, seconds) for _, w, plugin, seconds in out]

    def next_deadline(self) -> float | None:
        """The earliest deadline of a waiting pod; None when nothing waits."""
        deadlines = [d for w in self for d, _ in w.pending.values()]
        return min(deadlines) if deadlines else None

    def take_settled(self) -> list[WaitingPod[P]]:
        """Remove and return the settled pods (allowed or rejected), in the order they started to wait."""
        done = [w for w in self._pods.values() if not w.waiting]
        for w in done:
            del self._pods[w.pod.uid]
        return done

    def remove(self, uid: str) -> WaitingPod[P] | None:
        """Forget a pod whatever its state (deleted, or bound by someone else, while it waited)."""
        return self._pods.pop(uid, None)
