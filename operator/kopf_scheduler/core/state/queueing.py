"""SchedulingQueue: the pending pods, in the order the scheduler should try them.

Upstream ``pkg/scheduler/backend/queue/scheduling_queue.go`` (``PriorityQueue``, with QueueingHints).
Pending pods live in exactly one of:

- ``active``: a heap ordered by the profile's QueueSort plugin (``less``; by default PrioritySort:
  higher ``Pod.priority`` first, then the earlier enqueue time); ``sort_by`` re-sorts it;
- ``backoff``: pods waiting out their backoff, ordered by expiry; backoff is
  ``initial * 2**(attempts - 1)`` capped at ``max`` (1 s / 10 s by default),
  counted from the last failure;
- ``unschedulable``: pods whose last attempt failed. They wait for a cluster event after which one
  of the plugins that rejected them may let them through (below), an update of their own spec, or
  the leftover timeout (``pod_max_in_unschedulable``, 5 min by default, upstream's
  ``podMaxInUnschedulablePodsDuration``), so no pod stays longer whatever the plugins declare;
- ``gated``: pods with scheduling gates, and pods a PreEnqueue plugin refuses
  (``framework.PreEnqueuePlugin``, asked on every add and move; upstream ``runPreEnqueuePlugins``):
  never popped, never reported. A refused pod is on record as rejected by that plugin, so the events
  it registers (or an update of the pod) let it be asked again.

A cluster event (``move_all_to_active_or_backoff``, a ``ClusterEvent`` with the objects before and
after) moves a pod of the pool when it is worth it (upstream ``isPodWorthRequeuing``, with the
profile's ``QueueingHints``): the pod has no rejecting plugin on record; or one of its rejecting
plugins declares no events (``EnqueueExtensions``: it gets every event, as upstream's default); or one
registered the event and its hint answers QUEUE (no hint, a hint that raises, or an event without
objects count as QUEUE). An event that is not a ``ClusterEvent`` (``PolicyChange``) is a wildcard:
every pod moves. The pool is indexed by rejecting plugin, so an event visits only the pods that a
plugin registered for it, or one that declares nothing, rejected. ``move_pods`` moves given pods (a
gang that gained a member) without asking anyone; ``pop_members`` takes a popped gang member's
siblings along (the pod-group cycle, ``core/scheduling/cycle.py``); ``hold`` keeps a pod group's members in
backoff until a time (scheduler-plugins' PodGroup backoff).

Every ``pop`` counts a scheduling cycle (``scheduling_cycle``, upstream ``SchedulingCycle()``). Upstream
has one queue for every profile; here each served scheduler name has its own, and the queues of one
scheduler share their ``CycleCounter`` (``routing.serve``), so the count is the scheduler's, as
opportunistic batching needs (``core/toolkit/batching.py``: only the very next cycle may reuse a ranking).
``first_ready`` picks among such queues the one whose ready pod comes first, as one queue would.

A popped pod is *in flight* until ``add_unschedulable``, ``add_backoff`` or ``done``. Updates and
deletes that arrive meanwhile are remembered and applied when the attempt ends: the requeued info
carries the latest pod; a pod deleted in flight is dropped. Cluster events that arrive meanwhile are
remembered too (at most ``MAX_IN_FLIGHT_EVENTS``; past that, as if one moved it) and, when the attempt
fails, judged against the plugins that rejected it this time (upstream ``inFlightEvents``,
``determineSchedulingHintForInFlightPod``): one that would have moved it sends it to backoff instead
of the pool, as does a change of its own spec or a ``move_pods`` during the attempt.

Pure: time is always an argument (``now`` in seconds, any monotonic origin); nothing here sleeps,
reads a clock or starts a thread. The loop asks ``next_ready_at(now)`` when to wake. The counts the
metrics want are values: ``take_incoming`` (pods in per queue and event since the last call) and
``unschedulable_plugin_counts``.

Limits: pods are keyed by uid; the queue does not look at ``node_name`` (the caller deletes a pod
from the queue once it is bound). A pod that failed with no rejecting plugin on record waits in the
pool for any event (upstream sends it straight to backoff). A pod's own update moves it when
anything but its status changed (upstream asks its rejectors' hints about the kind of update).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..framework.basics import Code, QueuedPodInfo, Status, priority_sort_less
from ..framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    EnqueueHandle,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    QueueingHint,
    QueueingHintFn,
    ReservePlugin,
)
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import ClusterObjects
from ..model.objects import Pod

DEFAULT_POD_INITIAL_BACKOFF_SECONDS: Final = 1.0
DEFAULT_POD_MAX_BACKOFF_SECONDS: Final = 10.0
#: upstream ``DefaultPodMaxInUnschedulablePodsDuration``
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS: Final = 300.0
#: cluster events remembered for one pod in flight; a pod waiting long at Permit sees many
#: (every bind is an AssignedPodAdd): past this, it fails to backoff as if one had moved it
MAX_IN_FLIGHT_EVENTS: Final = 100

# Sub-queue names, as in the ``scheduler_pending_pods{queue}`` metric.
ACTIVE: Final = "active"
BACKOFF: Final = "backoff"
UNSCHEDULABLE: Final = "unschedulable"
GATED: Final = "gated"

# Event labels of ``scheduler_queue_incoming_pods_total{queue,event}`` raised by the queue itself
# (cluster events are ``framework.ClusterEvent``s).
EVENT_POD_ADD: Final = "PodAdd"
EVENT_POD_UPDATE: Final = "PodUpdate"
EVENT_SCHEDULE_ATTEMPT_FAILURE: Final = "ScheduleAttemptFailure"
EVENT_BACKOFF_COMPLETE: Final = "BackoffComplete"
EVENT_UNSCHEDULABLE_TIMEOUT: Final = "UnschedulableTimeout"

#: Pod fields whose change never makes a pod schedulable (status and bookkeeping); the body (``source``)
#: is compared apart, without them (``_without_bookkeeping``)
_IGNORED_FIELDS: Final = frozenset(
    {"resource_version", "generation", "phase", "nominated_node_name", "start_time", "disruption_target", "source"}
)
#: what upstream's ``isPodUpdated`` strips from a pod's metadata before comparing
_BOOKKEEPING_METADATA: Final = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})
_COMPARED_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Pod) if f.name not in _IGNORED_FIELDS)
_CLUSTER_EVENTS: Final = frozenset(ClusterEvent)
#: the extension points that can reject a pod: only their declarations count
_REJECTING: Final = (PreFilterPlugin, FilterPlugin, ReservePlugin, PermitPlugin)


LessFunc = Callable[[QueuedPodInfo, QueuedPodInfo], bool]


class CycleCounter:
    """The scheduling cycles counted so far (upstream ``PriorityQueue.schedulingCycle``), shared by the
    queues of one scheduler."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


def pod_group_order(info: QueuedPodInfo) -> tuple[int, int, float, str]:
    """The order of a pod group's members in its cycle (upstream ``PodGroupMemberPodsOrderingFunc``):
    higher priority first, then more attempts (older), then the earlier enqueue time, then the name."""
    return (-info.pod.priority, -info.attempts, info.timestamp, info.pod.name)


def is_pod_updated(old: Pod | None, new: Pod) -> bool:
    """Whether ``new`` differs from ``old`` in anything but status and resourceVersion.

    Upstream ``isPodUpdated``: only such an update can make an unschedulable pod schedulable.
    """
    if old is None:
        return True
    if old is new:
        return False
    if any(getattr(old, f) != getattr(new, f) for f in _COMPARED_FIELDS):
        return True
    if old.source is new.source:
        return False
    if old.source is None or new.source is None:
        return True
    return _without_bookkeeping(old.source) != _without_bookkeeping(new.source)


def _without_bookkeeping(body: Mapping[str, Any]) -> dict[str, Any]:
    """A pod's body as upstream's ``isPodUpdated`` compares it: no status (but the resource claims' statuses),
    resourceVersion, generation, managed fields or finalizers."""
    meta = body.get("metadata")
    status = body.get("status")
    if isinstance(meta, Mapping):
        meta = {k: v for k, v in meta.items() if k not in _BOOKKEEPING_METADATA}
    return {
        **{k: v for k, v in body.items() if k not in ("metadata", "status")},
        "metadata": meta,
        "status": status.get("resourceClaimStatuses") if isinstance(status, Mapping) else None,
    }


class _NoCluster:
    """The handle of a queue that was given none: no node, no object (hints then mostly answer QUEUE)."""

    def __init__(self) -> None:
        self.objects = ClusterObjects()

    def get_node_info(self, name: str) -> NodeInfo | None:
        return None


class QueueingHints:
    """One profile's requeueing rules (upstream ``QueueingHintMap``): per ``ClusterEvent``, the plugins
    registered for it and their hints, and which plugins declared their events at all.

    Built from a profile's plugins: those that can reject a pod (PreFilter, Filter, Reserve, Permit, as
    upstream's ``shouldHaveEnqueueExtensions``) and subclass ``EnqueueExtensions`` are asked once; the
    others (and rejecting names the profile does not have, like the extenders') get every event.
    ``handle`` is what the hints may read of the cluster.
    """

    __slots__ = ("_by_event", "_cluster", "_pre_enqueue", "declared")

    def __init__(self, plugins: Iterable[Plugin] = (), handle: EnqueueHandle | None = None) -> None:
        self._by_event: dict[str, dict[str, tuple[QueueingHintFn | None, ...]]] = {}
        declared: set[str] = set()
        seen = handle if handle is not None else _NoCluster()
        plugins = list(plugins)
        #: the PreEnqueue plugins, once each; only with a cluster to read (a queue given none admits every pod)
        self._pre_enqueue: tuple[PreEnqueuePlugin, ...] = tuple(
            {p.name: p for p in plugins if isinstance(p, PreEnqueuePlugin)}.values() if handle is not None else ()
        )
        self._cluster = seen
        for plugin in plugins:
            if (
                not isinstance(plugin, EnqueueExtensions)
                or not isinstance(plugin, _REJECTING)
                or plugin.name in declared
            ):
                continue
            declared.add(plugin.name)
            for registered in plugin.events_to_register(seen):
                by_plugin = self._by_event.setdefault(str(registered.event), {})
                by_plugin[plugin.name] = (*by_plugin.get(plugin.name, ()), registered.hint)
        #: the plugins that declared their events (the others: every event may help the pods they rejected)
        self.declared: frozenset[str] = frozenset(declared)

    def pre_enqueue(self, pod: Pod) -> Status | None:
        """Upstream ``runPreEnqueuePlugins``: the first PreEnqueue plugin that turns `pod` away (its
        status, naming it), or None: the pod may enter the active queue. A plugin that raises turns it away."""
        for plugin in self._pre_enqueue:
            try:
                status = plugin.pre_enqueue(pod, self._cluster)
            except Exception as exc:  # a plugin bug must not take the queue down
                status = Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",))
            if not status.is_success:
                return status.with_plugin(plugin.name)
        return None

    def registered(self, event: str) -> Mapping[str, tuple[QueueingHintFn | None, ...]]:
        """The plugins registered for `event`, with their hints (None: no hint)."""
        return self._by_event.get(event, {})

    def judge(self, event: str, old: object, new: object) -> Callable[[QueuedPodInfo], bool]:
        """Upstream ``isPodWorthRequeuing`` for one event that changed `old` into `new`, to ask of many
        pods: may it make a pod that its last attempt's rejectors turned down schedulable? See the
        module docstring."""
        if event not in _CLUSTER_EVENTS:
            return _always
        registered = self._by_event.get(event, {})
        declared = self.declared
        unknown = old is None and new is None

        def worth(info: QueuedPodInfo) -> bool:
            rejectors = info.unschedulable_plugins
            if not rejectors:
                return True
            for plugin in rejectors:
                if plugin not in declared:
                    return True
                for hint in registered.get(plugin, ()):
                    if hint is None or unknown or _asks_queue(hint, info.pod, old, new):
                        return True
            return False

        return worth


def _always(info: QueuedPodInfo) -> bool:
    return True


def _asks_queue(hint: QueueingHintFn, pod: Pod, old: object, new: object) -> bool:
    try:
        return hint(pod, old, new) is not QueueingHint.QUEUE_SKIP
    except Exception:  # upstream: a hint's error counts as Queue, so the pod cannot get stuck
        return True


class _ActiveItem:
    """A heap entry for the active queue; ordering delegates to the queue's ``less``."""

    __slots__ = ("info", "seq", "less")

    def __init__(self, info: QueuedPodInfo, seq: int, less: LessFunc) -> None:
        self.info, self.seq, self.less = info, seq, less

    def __lt__(self, other: "_ActiveItem") -> bool:
        if self.less(self.info, other.info):
            return True
        if self.less(other.info, self.info):
            return False
        return self.seq < other.seq  # equal under ``less``: first pushed first


@dataclass(slots=True)
class _Flight:
    """A popped pod whose attempt has not finished yet."""

    info: QueuedPodInfo
    latest: Pod | None = None  # the newest version seen while in flight
    deleted: bool = False
    #: something that may make it schedulable happened during the attempt (its own spec changed, its
    #: gang grew, a wildcard event, too many events to remember)
    moved: bool = False
    #: cluster events during the attempt, (event, old, new): judged when it fails
    events: list[tuple[str, object, object]] = field(default_factory=list)

    def record(self, event: str, old: object, new: object) -> None:
        if self.moved:
            return
        if event not in _CLUSTER_EVENTS or len(self.events) >= MAX_IN_FLIGHT_EVENTS:
            self.moved, self.events = True, []
        else:
            self.events.append((event, old, new))


class Nominator:
    """Pods nominated to nodes by preemption (upstream ``nominator``), keyed by uid.

    The queue keeps one, fed from ``status.nominatedNodeName`` and from preemption decisions; the
    algorithm reads it to count nominated pods on the nodes it filters (``core/scheduling/algorithm.py``).
    """

    __slots__ = ("_by_node", "_node_of")

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self._node_of)

    def pods_for_node(self, node_name: str) -> list[Pod]:
        """The pods nominated to ``node_name``, in nomination order."""
        return list(self._by_node.get(node_name, {}).values())

    def node_of(self, uid: str) -> str:
        """The node ``uid`` is nominated to ("" when none)."""
        return self._node_of.get(uid, "")

    def node_names(self) -> list[str]:
        """Nodes with at least one nominated pod."""
        return list(self._by_node)

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (default: its ``status.nominatedNodeName``); "" on both clears it."""
        self.delete(pod.uid)
        node = node_name or pod.nominated_node_name
        if not node:
            return
        self._node_of[pod.uid] = node
        self._by_node.setdefault(node, {})[pod.uid] = pod

    def update(self, old: Pod | None, new: Pod) -> None:
        # An update without a nominatedNodeName on either side keeps an in-memory
        # nomination (the status write may not have reached the watch yet).
        keep = ""
        if (old is None or not old.nominated_node_name) and not new.nominated_node_name:
            keep = self._node_of.get(new.uid, "")
        self.add(new, keep)

    def copy(self) -> Nominator:
        """An independent copy, for an attempt decided off the event loop while watch events change this one."""
        out = Nominator()
        out._by_node = {node: dict(pods) for node, pods in self._by_node.items()}
        out._node_of = dict(self._node_of)
        return out

    def delete(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node[node]
        del pods[uid]
        if not pods:
            del self._by_node[node]


class SchedulingQueue:
    """Active heap, backoff heap, unschedulable pool and gated pods; see the module docstring."""

    def __init__(
        self,
        *,
        less: LessFunc = priority_sort_less,
        hints: QueueingHints | None = None,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF_SECONDS,
        pod_max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS,
    ) -> None:
        if pod_initial_backoff < 0 or pod_max_backoff < pod_initial_backoff:
            raise ValueError("backoff: need 0 <= pod_initial_backoff <= pod_max_backoff")
        self.less = less
        #: the profile's requeueing rules (none given: every plugin gets every event)
        self.hints = hints if hints is not None else QueueingHints()
        self.pod_initial_backoff = pod_initial_backoff
        self.pod_max_backoff = pod_max_backoff
        self.pod_max_in_unschedulable = pod_max_in_unschedulable
        #: pods entering each sub-queue, by (queue, event): ``scheduler_queue_incoming_pods_total``
        self.incoming: Counter[tuple[str, str]] = Counter()
        self._incoming_taken: Counter[tuple[str, str]] = Counter()

        self._active: dict[str, QueuedPodInfo] = {}
        self._backoff: dict[str, QueuedPodInfo] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, _Flight] = {}
        #: the unschedulable pool by rejecting plugin (what an event visits), and its pods with none
        self._by_plugin: dict[str, dict[str, None]] = {}
        self._no_rejector: dict[str, None] = {}
        #: pods held in backoff until a time whatever their own backoff (a pod group backing off)
        self._held: dict[str, float] = {}
        #: pods nominated to nodes (read by the algorithm; fed by watch updates and preemption)
        self.nominator = Nominator()
        #: the scheduling cycles popped, counted with the other queues of the same scheduler
        self.cycles = CycleCounter()
        # Heaps with lazy deletion: an entry is live while its seq is the pod's current seq
        # and the pod is still in that sub-queue.
        self._seq = itertools.count()
        self._current: dict[str, int] = {}
        self._active_heap: list[_ActiveItem] = []
        self._backoff_heap: list[tuple[float, int, str]] = []
        self._leftover_heap: list[tuple[float, int, str]] = []

    # ------------------------------------------------------------------ inspection

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._gated)

    def __contains__(self, pod: object) -> bool:
        """Whether a pod (or uid) is pending in one of the sub-queues (in-flight pods are not)."""
        uid = pod.uid if isinstance(pod, Pod) else pod
        if not isinstance(uid, str):
            return False
        return uid in self._active or uid in self._backoff or uid in self._unschedulable or uid in self._gated

    def pending_counts(self) -> dict[str, int]:
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable),
            GATED: len(self._gated),
        }

    def where(self, pod: Pod | str) -> str | None:
        """The sub-queue holding the pod, ``"in_flight"``, or ``None`` when the queue does not know it."""
        uid = pod.uid if isinstance(pod, Pod) else pod
        for name, sub in (
            (ACTIVE, self._active),
            (BACKOFF, self._backoff),
            (UNSCHEDULABLE, self._unschedulable),
            (GATED, self._gated),
        ):
            if uid in sub:
                return name
        return "in_flight" if uid in self._in_flight else None

    def get(self, pod: Pod | str) -> QueuedPodInfo | None:
        uid = pod.uid if isinstance(pod, Pod) else pod
        for sub in (self._active, self._backoff, self._unschedulable, self._gated):
            if uid in sub:
                return sub[uid]
        f = self._in_flight.get(uid)
        return f.info if f is not None else None

    def pending_pods(self) -> list[Pod]:
        """Every pending pod (debugging); not in any particular order."""
        return [i.pod for sub in (self._active, self._backoff, self._unschedulable, self._gated) for i in sub.values()]

    def unschedulable_plugin_counts(self) -> dict[str, int]:
        """Pods in the unschedulable pool per rejecting plugin (``scheduler_unschedulable_pods``)."""
        return {plugin: len(uids) for plugin, uids in self._by_plugin.items() if uids}

    def take_incoming(self) -> Counter[tuple[str, str]]:
        """Pods that entered each sub-queue, by (queue, event), since the last call (for the metrics)."""
        out = self.incoming - self._incoming_taken
        self._incoming_taken = self.incoming.copy()
        return out

    def backoff_duration(self, info: QueuedPodInfo) -> float:
        """``initial * 2**(attempts-1)`` capped at the max; no backoff before the first attempt."""
        if info.attempts <= 0:
            return 0.0
        duration = self.pod_initial_backoff
        for _ in range(1, info.attempts):
            duration *= 2
            if duration >= self.pod_max_backoff:
                return self.pod_max_backoff
        return min(duration, self.pod_max_backoff)

    def next_ready_at(self, now: float) -> float | None:
        """When the loop should call ``pop`` next: ``now`` if a pod is ready, else the earliest
        backoff expiry or unschedulable-leftover deadline; ``None`` when nothing will become ready
        by time alone (empty, or only gated pods)."""
        if self._active:
            return now
        best: float | None = None
        top = self._peek(self._backoff_heap, self._backoff)
        if top is not None:
            best = top
        top = self._peek(self._leftover_heap, self._unschedulable)
        if top is not None and (best is None or top < best):
            best = top
        if best is None:
            return None
        return max(best, now)

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        return self.nominator.pods_for_node(node_name)

    def nominated_node_of(self, pod: Pod | str) -> str | None:
        uid = pod.uid if isinstance(pod, Pod) else pod
        return self.nominator.node_of(uid) or None

    # ------------------------------------------------------------------ the profile

    def sort_by(self, less: LessFunc) -> None:
        """Order the active queue by `less` from now on (the profile's QueueSort changed): re-sorted at once."""
        self.less = less
        items = [_ActiveItem(info, self._next_seq(uid), less) for uid, info in self._active.items()]
        heapq.heapify(items)
        self._active_heap = items

    # ------------------------------------------------------------------ informer events

    def add(self, pod: Pod, now: float) -> None:
        """A new pending pod: active, or gated when it has scheduling gates."""
        if pod.uid in self or pod.uid in self._in_flight:
            self.update(None, pod, now)
            return
        info = QueuedPodInfo(pod, timestamp=now, added_at=now)
        if pod.scheduling_gates or self._turned_away(info):
            self._gated[pod.uid] = info
            self.incoming[(GATED, EVENT_POD_ADD)] += 1
        else:
            info.initial_attempt_timestamp = now
            self._push_active(info)
            self.incoming[(ACTIVE, EVENT_POD_ADD)] += 1
        self.nominator.add(pod)

    def update(self, old: Pod | None, new: Pod, now: float) -> None:
        """A pending pod changed. Updated in place; an unschedulable pod whose spec changed and a
        gated pod whose gates are gone move to active (or backoff while still backing off); an
        unknown pod is added as new (upstream ``Update``)."""
        uid = new.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            if flight.deleted:
                return
            before = flight.latest if flight.latest is not None else flight.info.pod
            if is_pod_updated(before if old is None else old, new):
                flight.moved = True
            flight.latest = new
            self.nominator.update(old, new)
            return
        if uid in self._active:
            info = self._active[uid]
            info.pod = new
            self._push_active(info)  # the sort key may have changed
        elif uid in self._backoff:
            self._backoff[uid].pod = new  # expiry does not depend on the pod
        elif uid in self._unschedulable:
            info = self._unschedulable[uid]
            spec_changed = is_pod_updated(info.pod if old is None else old, new)
            info.pod = new
            if spec_changed:
                self._remove_unschedulable(uid)
                self._to_active_or_backoff(info, now, EVENT_POD_UPDATE)
        elif uid in self._gated:
            info = self._gated[uid]
            info.pod = new
            if not new.scheduling_gates and not self._turned_away(info):
                del self._gated[uid]
                self._to_active_or_backoff(info, now, EVENT_POD_UPDATE)
        else:
            self.add(new, now)
            return
        self.nominator.update(old, new)

    def delete(self, pod: Pod) -> None:
        """The pod is gone (deleted, or bound by someone): drop it from wherever it is."""
        uid = pod.uid
        self.nominator.delete(uid)
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.deleted = True
            return
        self._active.pop(uid, None)
        self._backoff.pop(uid, None)
        self._gated.pop(uid, None)
        self._held.pop(uid, None)
        self._remove_unschedulable(uid)
        self._current.pop(uid, None)
        self._compact()

    # ------------------------------------------------------------------ the scheduling loop

    @property
    def scheduling_cycle(self) -> int:
        """The cycle of the pod popped last (upstream ``SchedulingCycle()``), counted over the shared queues."""
        return self.cycles.value

    def peek(self, now: float) -> QueuedPodInfo | None:
        """The pod ``pop`` would return now, left in the queue (due backoff and leftover pods move first)."""
        self.flush_backoff_completed(now)
        self.flush_unschedulable_leftover(now)
        heap = self._active_heap
        while heap:
            item = heap[0]
            uid = item.info.uid
            if self._current.get(uid) == item.seq and uid in self._active:
                return self._active[uid]
            heapq.heappop(heap)
        return None

    def pop(self, now: float) -> QueuedPodInfo | None:
        """The next pod to schedule, or ``None``. Moves due backoff and leftover pods first."""
        self.flush_backoff_completed(now)
        self.flush_unschedulable_leftover(now)
        heap = self._active_heap
        while heap:
            item = heapq.heappop(heap)
            uid = item.info.uid
            if self._current.get(uid) != item.seq or uid not in self._active:
                continue
            info = self._active.pop(uid)
            del self._current[uid]
            info.attempts += 1
            self._in_flight[uid] = _Flight(info)
            self.cycles.value += 1
            return info
        return None

    def pop_members(self, uids: Iterable[str], now: float) -> list[QueuedPodInfo]:
        """The other pending members of a pod group popped with one of them (upstream pops a pod group
        as one entity): those in active, backoff or the unschedulable pool leave it and are in flight.
        Gated pods and pods already in flight stay where they are. In no particular order
        (``pod_group_order`` sorts the group)."""
        infos = []
        for uid in uids:
            info = self._active.pop(uid, None) or self._backoff.pop(uid, None)
            if info is None and uid in self._unschedulable:
                info = self._unschedulable[uid]
                self._remove_unschedulable(uid)
            if info is None:
                continue
            self._current.pop(uid, None)  # its heap entries go stale
            info.attempts += 1
            self._in_flight[uid] = _Flight(info)
            infos.append(info)
        self._compact()
        return infos

    def hold(self, uids: Iterable[str], until: float) -> None:
        """A pod group backs off as a whole (scheduler-plugins' PodGroup backoff): none of these pods
        is popped before `until`. Pending ones move to backoff now; one in flight, or requeued later,
        goes to backoff when its attempt ends, until then at least."""
        for uid in uids:
            self._held[uid] = max(until, self._held.get(uid, until))
            info = self._active.pop(uid, None) or self._backoff.pop(uid, None)
            if info is None and uid in self._unschedulable:
                info = self._unschedulable[uid]
                self._remove_unschedulable(uid)
            if info is not None:
                self._push_backoff(info)

    def add_unschedulable(self, info: QueuedPodInfo, now: float, *, plugins: Iterable[str] = ()) -> bool:
        """The attempt failed: `plugins` rejected the pod. It waits in the unschedulable pool, or in
        backoff when something during the attempt may have changed its fate (see the module
        docstring). Returns whether it was queued (False: deleted meanwhile, or already pending)."""
        target = self._finish_attempt(info, now, plugins)
        if target is None:
            return False
        info, flight = target
        if self._held.get(info.uid, now) > now or (
            flight is not None
            and (flight.moved or any(self.hints.judge(e, old, new)(info) for e, old, new in flight.events))
        ):
            self._push_backoff(info)
            self.incoming[(BACKOFF, EVENT_SCHEDULE_ATTEMPT_FAILURE)] += 1
        else:
            self._add_unschedulable_pool(info)
            self.incoming[(UNSCHEDULABLE, EVENT_SCHEDULE_ATTEMPT_FAILURE)] += 1
        self.nominator.add(info.pod, self.nominator.node_of(info.uid))
        return True

    def add_backoff(self, info: QueuedPodInfo, now: float) -> bool:
        """The attempt ended in an error (bind failure, plugin error): retry after the backoff."""
        target = self._finish_attempt(info, now, ())
        if target is None:
            return False
        info, _ = target
        self._push_backoff(info)
        self.incoming[(BACKOFF, EVENT_SCHEDULE_ATTEMPT_FAILURE)] += 1
        self.nominator.add(info.pod, self.nominator.node_of(info.uid))
        return True

    def done(self, pod: Pod | str) -> None:
        """The attempt finished and the pod leaves the queue (it was bound, or given up on).

        Updates remembered while in flight are discarded: the watch delivers the bound pod to the
        cache. A no-op when the pod is not in flight (e.g. ``add_unschedulable`` already ended it).
        """
        uid = pod.uid if isinstance(pod, Pod) else pod
        if self._in_flight.pop(uid, None) is not None:
            self.nominator.delete(uid)

    # ------------------------------------------------------------------ moves

    def move_all_to_active_or_backoff(
        self, event: str, now: float, *, old: Any = None, new: Any = None, keep: Container[str] = ()
    ) -> int:
        """A cluster event changed `old` into `new` (upstream ``MoveAllToActiveOrBackoffQueue``): the
        pods of the pool it may help move (see the module docstring), except those of `keep` (uids: a
        gang that was just rejected rests together); pods in flight remember it. Returns how many moved."""
        for flight in self._in_flight.values():
            flight.record(event, old, new)
        candidates = self._candidates(event)
        gated = [i for i in self._gated.values() if i.pre_enqueue is not None and i.uid not in keep]
        if not candidates and not gated:
            return 0
        worth = self.hints.judge(event, old, new)
        moving = [info for info in candidates if info.uid not in keep and worth(info)]
        for info in moving:
            self._remove_unschedulable(info.uid)
            self._to_active_or_backoff(info, now, event)
        return len(moving) + self._release_gated([i for i in gated if worth(i)], now, event)

    def move_pods(self, uids: Iterable[str], event: str, now: float) -> int:
        """An event that concerns only these pods (a new member of their gang): those in the
        unschedulable pool move; in-flight ones count it as a move request. Returns how many moved."""
        moved = 0
        for uid in uids:
            flight = self._in_flight.get(uid)
            if flight is not None:
                flight.moved = True
            info = self._unschedulable.get(uid)
            if info is not None:
                self._remove_unschedulable(uid)
                self._to_active_or_backoff(info, now, event)
                moved += 1
            gated = self._gated.get(uid)
            if gated is not None and gated.pre_enqueue is not None:
                moved += self._release_gated((gated,), now, event)
        return moved

    def flush_unschedulable_leftover(self, now: float) -> int:
        """Pods that stayed in the pool for ``pod_max_in_unschedulable`` seconds or more move back."""
        moved = 0
        while self._leftover_heap:  # re-read: moving a pod may compact the heaps
            deadline, seq, uid = self._leftover_heap[0]
            if self._current.get(uid) != seq or uid not in self._unschedulable:
                heapq.heappop(self._leftover_heap)
                continue
            if deadline > now:
                break
            heapq.heappop(self._leftover_heap)
            info = self._unschedulable[uid]
            self._remove_unschedulable(uid)
            self._to_active_or_backoff(info, now, EVENT_UNSCHEDULABLE_TIMEOUT)
            moved += 1
        return moved

    def flush_backoff_completed(self, now: float) -> int:
        """Pods whose backoff expired (expiry <= now) move to active."""
        moved = 0
        while self._backoff_heap:  # re-read: moving a pod may compact the heaps
            expiry, seq, uid = self._backoff_heap[0]
            if self._current.get(uid) != seq or uid not in self._backoff:
                heapq.heappop(self._backoff_heap)
                continue
            if expiry > now:
                break
            heapq.heappop(self._backoff_heap)
            info = self._backoff.pop(uid)
            self._held.pop(uid, None)
            self._push_active(info)
            self.incoming[(ACTIVE, EVENT_BACKOFF_COMPLETE)] += 1
            moved += 1
        return moved

    def add_nominated_pod(self, pod: Pod, node_name: str) -> None:
        """Preemption chose ``node_name`` for ``pod`` (before the status write reaches the watch)."""
        self.nominator.add(pod, node_name)

    def delete_nominated_pod(self, pod: Pod | str) -> None:
        self.nominator.delete(pod.uid if isinstance(pod, Pod) else pod)

    # ------------------------------------------------------------------ internals

    def _candidates(self, event: str) -> list[QueuedPodInfo]:
        """The pods of the pool an event can concern: rejected by no plugin on record, by a plugin
        registered for it or by one that declares nothing (all of them for a wildcard)."""
        pool = self._unschedulable
        if not pool or event not in _CLUSTER_EVENTS:
            return list(pool.values())
        registered = self.hints.registered(event)
        declared = self.hints.declared
        groups = [
            pods
            for plugin, pods in self._by_plugin.items()
            if pods and (plugin in registered or plugin not in declared)
        ]
        if self._no_rejector:
            groups.append(self._no_rejector)
        if len(groups) > 1:  # a pod with several rejectors is in several groups: once is enough
            groups = [dict.fromkeys(uid for pods in groups for uid in pods)]
        return [pool[uid] for pods in groups for uid in pods]

    def _finish_attempt(
        self, info: QueuedPodInfo, now: float, plugins: Iterable[str]
    ) -> tuple[QueuedPodInfo, _Flight | None] | None:
        uid = info.uid
        flight = self._in_flight.pop(uid, None)
        if flight is not None:
            if flight.deleted:
                return None
            if flight.latest is not None:
                info.pod = flight.latest
        if uid in self:
            return None
        info.timestamp = now
        info.last_failure_at = now
        info.unschedulable_plugins = frozenset(plugins)
        return info, flight

    def _to_active_or_backoff(self, info: QueuedPodInfo, now: float, event: str) -> None:
        if self._turned_away(info):  # upstream moveToActiveQ runs the PreEnqueue plugins again
            self._gated[info.uid] = info
            self.incoming[(GATED, event)] += 1
            return
        if self._backoff_expiry(info) > now:
            self._push_backoff(info)
            self.incoming[(BACKOFF, event)] += 1
        else:
            self._push_active(info)
            self.incoming[(ACTIVE, event)] += 1
        if info.initial_attempt_timestamp is None:
            info.initial_attempt_timestamp = now

    def _turned_away(self, info: QueuedPodInfo) -> bool:
        """Whether a PreEnqueue plugin keeps the pod out (remembered on `info`, as its rejector)."""
        status = self.hints.pre_enqueue(info.pod)
        info.pre_enqueue = status
        if status is not None:
            info.unschedulable_plugins = frozenset({status.plugin})
        return status is not None

    def _release_gated(self, infos: Iterable[QueuedPodInfo], now: float, event: str) -> int:
        """Pods a PreEnqueue plugin gated that an event may let in: those it now passes move on."""
        moved = 0
        for info in list(infos):
            if info.pod.scheduling_gates or self._turned_away(info):
                continue
            del self._gated[info.uid]
            self._to_active_or_backoff(info, now, event)
            moved += 1
        return moved

    def _backoff_expiry(self, info: QueuedPodInfo) -> float:
        base = info.last_failure_at if info.last_failure_at is not None else info.timestamp
        expiry = base + self.backoff_duration(info)
        held = self._held.get(info.uid)
        return expiry if held is None else max(expiry, held)

    def _next_seq(self, uid: str) -> int:
        seq = self._current[uid] = next(self._seq)
        return seq

    def _push_active(self, info: QueuedPodInfo) -> None:
        self._active[info.uid] = info
        heapq.heappush(self._active_heap, _ActiveItem(info, self._next_seq(info.uid), self.less))
        self._compact()

    def _push_backoff(self, info: QueuedPodInfo) -> None:
        self._backoff[info.uid] = info
        heapq.heappush(self._backoff_heap, (self._backoff_expiry(info), self._next_seq(info.uid), info.uid))
        self._compact()

    def _add_unschedulable_pool(self, info: QueuedPodInfo) -> None:
        uid = info.uid
        self._unschedulable[uid] = info
        if not info.unschedulable_plugins:
            self._no_rejector[uid] = None
        for plugin in sorted(info.unschedulable_plugins):  # sorted: the same visiting order every run
            self._by_plugin.setdefault(plugin, {})[uid] = None
        deadline = info.timestamp + self.pod_max_in_unschedulable
        heapq.heappush(self._leftover_heap, (deadline, self._next_seq(uid), uid))
        self._compact()

    def _remove_unschedulable(self, uid: str) -> None:
        info = self._unschedulable.pop(uid, None)
        if info is None:
            return
        self._no_rejector.pop(uid, None)
        for plugin in info.unschedulable_plugins:
            pods = self._by_plugin.get(plugin)
            if pods is not None:
                pods.pop(uid, None)

    def _peek(self, heap: list[tuple[float, int, str]], live: dict[str, QueuedPodInfo]) -> float | None:
        """The first live key of a lazily deleted heap, dropping stale tops on the way."""
        cur = self._current
        while heap:
            key, seq, uid = heap[0]
            if cur.get(uid) == seq and uid in live:
                return key
            heapq.heappop(heap)
        return None

    def _compact(self) -> None:
        """Rebuild a heap when its stale entries outnumber the live ones (bounded memory)."""
        cur = self._current
        heap = self._active_heap
        if len(heap) > 64 and len(heap) > 2 * len(self._active):
            live = [it for it in heap if cur.get(it.info.uid) == it.seq and it.info.uid in self._active]
            heapq.heapify(live)
            self._active_heap = live
        for name, sub in (("_backoff_heap", self._backoff), ("_leftover_heap", self._unschedulable)):
            entries: list[tuple[float, int, str]] = getattr(self, name)
            if len(entries) > 64 and len(entries) > 2 * len(sub):
                kept = [e for e in entries if cur.get(e[2]) == e[1] and e[2] in sub]
                heapq.heapify(kept)
                setattr(self, name, kept)


def first_ready(
    queues: Iterable[SchedulingQueue],
    now: float,
    *,
    less: LessFunc,
    arrival: Callable[[QueuedPodInfo], int] | None = None,
) -> SchedulingQueue | None:
    """Of the queues of one scheduler (one per scheduler name), the one whose ready pod a single queue
    for all of them would pop first: upstream has one queue, sorted by its first profile's QueueSort
    (`less`). Pods `less` cannot order go by `arrival` when given, else to the queue listed first.
    None when no queue has a ready pod."""
    best: tuple[SchedulingQueue, QueuedPodInfo] | None = None
    for queue in queues:
        head = queue.peek(now)
        if head is None:
            continue
        if best is None or less(head, best[1]):
            best = (queue, head)
        elif arrival is not None and not less(best[1], head) and arrival(head) < arrival(best[1]):
            best = (queue, head)
    return best[0] if best is not None else None
