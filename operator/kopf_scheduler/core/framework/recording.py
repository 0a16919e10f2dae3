"""How often the operator reports on a pod: the FailedScheduling repeat limit and the PodScheduled memo.

- ``RepeatLimiter``: at most one FailedScheduling event per pod and action (Scheduling, Binding)
  per ``REPEAT_INTERVAL`` seconds, whatever its message; the rest are dropped. Upstream's events
  broadcaster (client-go ``tools/events/event_broadcaster.go``, ``getKey``) folds a pod's events of
  one reason and action into one series whatever their note, and writes the series again only
  every 30 minutes. The message is no part of the key because it changes when nothing the user
  can act on did ("0/2455 nodes are available" and "0/3532 ..." while nodes join), which flooded
  the API server with events under load (bench/bench_load.py). We send nothing for a repeat; the
  latest message is always in the pod's PodScheduled condition (``ConditionMemo``), and the next
  event after the interval carries it. One departure: a rejection at Permit (a gang that did not
  gather in time) is a series of its own (``stage``), so every member of the gang gets an event
  saying how many of the gang fit even when its filters failed moments before; it comes once per
  gang and wait, so it cannot flood.
- ``ConditionMemo``: PodScheduled=False/Unschedulable is written only when its message differs
  from the last one written for that pod (upstream ``updatePod`` in schedule_one.go skips the
  patch when ``UpdatePodCondition`` finds the condition unchanged).

Both are bounded: past ``capacity`` entries the least recently used goes first, which costs at
most one repeated write, never a missed one. Time is an argument (seconds, any monotonic origin).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["DEFAULT_CAPACITY", "REPEAT_INTERVAL", "STAGE_PERMIT", "ConditionMemo", "RepeatLimiter"]

REPEAT_INTERVAL: Final = 30.0
DEFAULT_CAPACITY: Final = 50_000
#: the stage of a rejection at Permit, limited apart from the filters' failures
STAGE_PERMIT: Final = "Permit"


class RepeatLimiter:
    """Allows one FailedScheduling event per (pod uid, action, stage) per `interval` seconds."""

    def __init__(self, *, interval: float = REPEAT_INTERVAL, capacity: int = DEFAULT_CAPACITY) -> None:
        if interval < 0 or capacity < 1:
            raise ValueError("RepeatLimiter: need interval >= 0 and capacity >= 1")
        self.interval = interval
        self.capacity = capacity
        #: (uid, action, stage) -> when it was last allowed; oldest first
        self._sent: OrderedDict[tuple[str, str, str], float] = OrderedDict()

    def allow(self, uid: str, action: str, now: float, *, stage: str = "") -> bool:
        """True (and remembered) unless an event of this action and `stage` ("": the filters; "Permit")
        went out for this pod less than `interval` ago."""
        sent = self._sent
        while sent:  # entries are in sending order: drop the expired ones from the front
            oldest = next(iter(sent.values()))
            if now - oldest < self.interval:
                break
            sent.popitem(last=False)
        key = (uid, action, stage)
        if key in sent:
            return False
        sent[key] = now
        if len(sent) > self.capacity:
            sent.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._sent)


class ConditionMemo:
    """The last PodScheduled=False message written per pod."""

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("ConditionMemo: need capacity >= 1")
        self.capacity = capacity
        self._written: OrderedDict[str, str] = OrderedDict()

    def should_write(self, uid: str, message: str) -> bool:
        """True when `message` differs from the last one written for `uid`; it is then remembered as written."""
        written = self._written
        if written.get(uid) == message:
            written.move_to_end(uid)
            return False
        written[uid] = message
        written.move_to_end(uid)
        if len(written) > self.capacity:
            written.popitem(last=False)
        return True

    def write_failed(self, uid: str, message: str) -> None:
        """The write of `message` did not happen: the next failure writes again."""
        if self._written.get(uid) == message:
            del self._written[uid]

    def forget(self, uid: str) -> None:
        """The pod is bound or gone."""
        self._written.pop(uid, None)

    def __len__(self) -> int:
        return len(self._written)
