"""Watch events into the scheduler cache, the pending-pod index and the queues.

Upstream ``pkg/scheduler/eventhandlers.go`` (addPod / updatePod / deletePod, the node handlers and
the move requests of the other watched kinds). Each function takes an object already parsed by
``kube/convert.py``, applies it to the pure core state (``SchedulerCache``, ``PendingPods`` and the
``SchedulingQueue`` of every served scheduler name) and returns what is left for the operator as a
``Routed`` value: the scheduler names whose loops to wake, the cluster event that was broadcast,
a pod whose per-pod records can go. Every cache transition here is legal by construction (the
cache's state of the pod is looked at first), so no event can raise. Time is an argument.

Pods come from two watches, as upstream's do (its scheduler informer filters assigned and unassigned
pods apart): assigned ones (``spec.nodeName`` set, not terminal) from an informer, unassigned ones
from Kopf's handlers (``kube/handlers.py``). A pod moves from the second to the first when it is
bound, and the two streams interleave in any order, so each function touches only what its watch
owns:

- ``route_assigned_pod``: a bound pod (by us or anyone) leaves the pending index and its queue and
  enters the cache (an add, an update, or the confirmation of our assumption): an ``AssignedPodAdd``;
  an update that lowers any of its requests (an in-place resize down; ``Pod.requests`` reads the
  status) is an ``AssignedPodScaleDown`` (upstream ``extractPodScaleDown``, framework/events.go), one
  that changes its labels an ``AssignedPodUpdate``. Deleted, or terminal (upstream's informer filters
  out Succeeded and Failed pods, so they read as deletions): it leaves the cache, an
  ``AssignedPodDelete``.
- ``route_unassigned_pod``: an unbound pod enters the pending index (whether or not its scheduler
  name is served, so a policy created later starts with it); the served queue adds or updates it,
  except while the pod is assumed (its bind is in flight; upstream ignores such updates too). Being
  deleted: it leaves the index and the queue, and an assumption of it is dropped (upstream
  ``handleAssumedPodDeletion``). Its DELETED (deleted, or bound: it left the selector) only takes
  it out of the index and the queue.
- ``route_pod_vanished``: a write answered 404 for a pending pod no watch reported deleted.

Nodes: a new node is a ``NodeAdd``, any other change a ``NodeUpdate``; a deleted node raises
nothing. Services, controllers, volumes, claims, storage classes, PDBs and CSINodes are stored in
``ClusterObjects`` and every change is a ``<Kind>Change`` (PodGroups of both APIs too, in one store
keyed by API group); a namespace is a ``NamespaceChange`` only when its labels changed (namespace
selectors read them).

Each of those is a ``framework.ClusterEvent`` broadcast to every served queue with the objects before
and after (``broadcast``), and each queue moves the unschedulable pods it may help, asking the plugins
that rejected them (their ``EnqueueExtensions`` hints, upstream's QueueingHints; see
``core/state/queueing.py``): routing knows no plugin. A queue's hints are built by ``serve`` from its
profile, with the cache as what they may read (``cluster``). NodeResourcesFit's hint, for one, keeps
a pod bigger than any node where it is when a node joins or frees room: at 5000 nodes joining with
2000 such pods, the operator otherwise did little else (bench/bench_load.py).

Gangs (``core/toolkit/gangs.py``): every pod event keeps ``ClusterObjects.gang_members``; a pod joining a
gang moves that gang's members out of the unschedulable pool (they may have been rejected for
having too few members), and only them.

After a list (the first one, or a relist after lost watch history) the ``route_*_relisted``
functions delete whatever the list no longer holds, as client-go's ``Replace`` does: its deletion
happened while nobody watched (``route_pending_reconciled`` does the same for the pending pods, from
a periodic list). ``CacheSync`` says which kinds are not synced now: every kind at start (upstream
``WaitForCacheSync``), and pods or nodes while they relist after lost history (a 410): no pod is
scheduled meanwhile, so no decision is made on a half-known cluster or on nodes that may be gone.

Limits: no event for a node deleted (upstream's Node/Delete, which PodTopologySpread registers);
pods it could help wait for another event or the queue's 5-minute flush.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from ..config.profile import Profile
from ..framework.interface import ClusterEvent, EnqueueHandle
from ..model.objects import COSCHEDULING_API, WORKLOAD_API, Node, Pod
from ..model.resources import Resources
from ..state.cache import PodState, SchedulerCache
from ..state.queueing import QueueingHints, SchedulingQueue
from ..toolkit import gangs

__all__ = [
    "CHANGE_EVENTS",
    "EVENT_ASSIGNED_POD_ADD",
    "EVENT_ASSIGNED_POD_DELETE",
    "EVENT_ASSIGNED_POD_UPDATE",
    "EVENT_GANG_MEMBER_ADD",
    "EVENT_ASSIGNED_POD_SCALE_DOWN",
    "EVENT_NAMESPACE_CHANGE",
    "EVENT_NODE_ADD",
    "EVENT_NODE_UPDATE",
    "EVENT_POLICY_CHANGE",
    "KIND_COSCHEDULING_POD_GROUP",
    "KIND_POD_GROUP",
    "NOTHING",
    "OBJECT_STORES",
    "CacheSync",
    "PendingPods",
    "Queued",
    "Routed",
    "broadcast",
    "expire_assumed",
    "key_prefix",
    "reports_unreadable",
    "route_namespace",
    "route_namespaces_relisted",
    "route_node",
    "route_node_deleted",
    "route_nodes_relisted",
    "route_object",
    "route_objects_relisted",
    "route_assigned_pod",
    "route_assigned_pods_relisted",
    "route_pending_reconciled",
    "route_pod_vanished",
    "route_unassigned_pod",
    "serve",
]

EVENT_ASSIGNED_POD_ADD: Final = ClusterEvent.ASSIGNED_POD_ADD
EVENT_ASSIGNED_POD_UPDATE: Final = ClusterEvent.ASSIGNED_POD_UPDATE
EVENT_ASSIGNED_POD_DELETE: Final = ClusterEvent.ASSIGNED_POD_DELETE
EVENT_ASSIGNED_POD_SCALE_DOWN: Final = ClusterEvent.ASSIGNED_POD_SCALE_DOWN
EVENT_NODE_ADD: Final = ClusterEvent.NODE_ADD
EVENT_NODE_UPDATE: Final = ClusterEvent.NODE_UPDATE
EVENT_NAMESPACE_CHANGE: Final = ClusterEvent.NAMESPACE_CHANGE
#: a served name's profile changed: every unschedulable pod gets another try (a wildcard: no hint is asked)
EVENT_POLICY_CHANGE: Final = "PolicyChange"

#: the two PodGroup kinds, told apart by API group (``scheduling.k8s.io``, ``scheduling.x-k8s.io``)
KIND_POD_GROUP: Final = "PodGroup"
KIND_COSCHEDULING_POD_GROUP: Final = "PodGroup.scheduling.x-k8s.io"
#: a pod joined a gang: its pending members (only) get another try, whatever rejected them
EVENT_GANG_MEMBER_ADD: Final = "GangMemberAdd"

#: kind -> the ClusterObjects attribute that stores it
OBJECT_STORES: Final[Mapping[str, str]] = {
    "Service": "services",
    "ReplicationController": "controllers",
    "ReplicaSet": "controllers",
    "StatefulSet": "controllers",
    "PersistentVolume": "persistent_volumes",
    "PersistentVolumeClaim": "persistent_volume_claims",
    "StorageClass": "storage_classes",
    "PodDisruptionBudget": "pod_disruption_budgets",
    "CSINode": "csi_nodes",
    "CSIDriver": "csi_drivers",
    "CSIStorageCapacity": "csi_storage_capacities",
    # both PodGroup APIs share one store, keyed by PodGroup.key (api group/ns/name)
    KIND_POD_GROUP: "pod_groups",
    KIND_COSCHEDULING_POD_GROUP: "pod_groups",
}
#: kind -> the event a change of it raises (``<Kind>Change``)
CHANGE_EVENTS: Final[Mapping[str, ClusterEvent]] = {kind: ClusterEvent(f"{kind}Change") for kind in OBJECT_STORES}


def key_prefix(kind: str) -> str:
    """What the ClusterObjects keys of `kind` start with before ``ns/name`` (or ``name``): kinds that
    share a store are told apart, controllers by ``Kind/``, PodGroups by ``<api group>/``
    (``PodGroup.key``); a kind alone in its store has none."""
    if kind == KIND_POD_GROUP:
        return f"{WORKLOAD_API}/"
    if kind == KIND_COSCHEDULING_POD_GROUP:
        return f"{COSCHEDULING_API}/"
    return f"{kind}/" if OBJECT_STORES[kind] == "controllers" else ""


class Queued(Protocol):
    """A served scheduler name, as far as routing is concerned: its queue."""

    @property
    def queue(self) -> SchedulingQueue: ...


@dataclass(frozen=True, slots=True)
class Routed:
    """What is left for the operator after an event was applied."""

    #: scheduler names whose loops should look at their queues now
    wake: tuple[str, ...] = ()
    #: the cluster event broadcast to every queue ("" for none): for logs
    event: str = ""
    #: uid of a pod that is bound or gone: its per-pod records (condition memo) can go
    settled: str = ""


NOTHING: Final = Routed()


class PendingPods:
    """Unbound, live pods by scheduler name, served or not: what a newly served name starts from."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Pod]] = {}

    def put(self, pod: Pod) -> Pod | None:
        """Remember the pod's latest version; returns the previous one, if any."""
        bucket = self._by_name.setdefault(pod.scheduler_name, {})
        old = bucket.get(pod.uid)
        bucket[pod.uid] = pod
        return old

    def pop(self, pod: Pod) -> Pod | None:
        bucket = self._by_name.get(pod.scheduler_name)
        return bucket.pop(pod.uid, None) if bucket is not None else None

    def get(self, scheduler_name: str, uid: str) -> Pod | None:
        return self._by_name.get(scheduler_name, {}).get(uid)

    def of(self, scheduler_name: str) -> list[Pod]:
        return list(self._by_name.get(scheduler_name, {}).values())

    def __iter__(self) -> Iterator[Pod]:
        for bucket in self._by_name.values():
            yield from bucket.values()

    def __len__(self) -> int:
        return sum(len(b) for b in self._by_name.values())


class CacheSync:
    """The watched kinds not synced now (upstream ``WaitForCacheSync``, and the reflector's relist):
    every kind is waited for at start, and a kind whose relist pauses scheduling until it listed again."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self._waiting = dict.fromkeys(kinds)
        self._kinds = frozenset(self._waiting)

    def listed(self, kind: str) -> bool:
        """`kind` delivered a complete list; True exactly when that completes the sync."""
        if kind not in self._waiting:
            return False
        del self._waiting[kind]
        return not self._waiting

    def broken(self, kind: str) -> None:
        """`kind` lost its history: not synced until it lists again."""
        if kind in self._kinds:
            self._waiting[kind] = None

    @property
    def synced(self) -> bool:
        return not self._waiting

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(self._waiting)


# --------------------------------------------------------------------------- pods


def route_assigned_pod(
    pod: Pod, *, deleted: bool, cache: SchedulerCache, pending: PendingPods, served: Mapping[str, Queued], now: float
) -> Routed:
    """The watch of assigned pods (``spec.nodeName`` set, not terminal) saw `pod` added, changed or
    deleted (a pod that turns terminal leaves that watch as a deletion); see the module docstring."""
    cached = cache.get_pod(pod.uid)
    gone = deleted or pod.is_terminal or not pod.node_name
    joined = gangs.update_members(cache.objects.gang_members, pod, present=not gone)
    if joined:
        _gang_grew(joined, cache, served, now)
    _leave_pending(pod, pending, served)
    if gone:
        if cached is None:
            return Routed(settled=pod.uid)
        cache.remove_pod(cached)
        return _settled(broadcast(EVENT_ASSIGNED_POD_DELETE, served, now, old=cached), pod.uid)
    if cache.state_of(pod) is PodState.ADDED:
        assert cached is not None
        cache.update_pod(cached, pod)
        changes = []
        if _scaled_down(cached.requests, pod.requests):
            changes.append(broadcast(EVENT_ASSIGNED_POD_SCALE_DOWN, served, now, old=cached, new=pod))
        if cached.labels != pod.labels:
            changes.append(broadcast(EVENT_ASSIGNED_POD_UPDATE, served, now, old=cached, new=pod))
        return _settled(_merge(changes), pod.uid)
    cache.add_pod(pod)  # new to us, or the watch confirming our assumption (maybe on another node)
    wake = tuple(
        name
        for name, s in served.items()
        if s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, now, new=pod)
    )
    return Routed(wake, EVENT_ASSIGNED_POD_ADD, pod.uid)


def route_unassigned_pod(
    pod: Pod, *, gone: bool, cache: SchedulerCache, pending: PendingPods, served: Mapping[str, Queued], now: float
) -> Routed:
    """The watch of unassigned pods (Kopf's, ``spec.nodeName=``) saw `pod`; `gone` for its DELETED,
    which means deleted *or bound* (a pod that stops matching a watch's selector leaves it as a
    deletion), so it never touches the cache: the assigned-pod watch, the bind's answer or the
    assumption's expiry settle a cached pod. Events of the two watches interleave in any order: an
    unassigned pod the cache holds as confirmed is a stale event and changes nothing."""
    state = cache.state_of(pod)
    present = not (gone or pod.is_terminal) or state is not None  # a bound member stays a member
    joined = gangs.update_members(cache.objects.gang_members, pod, present=present)
    if joined:
        _gang_grew(joined, cache, served, now)
    if gone or pod.is_terminal:
        _leave_pending(pod, pending, served)
        return Routed(settled=pod.uid) if state is None else NOTHING
    if state is PodState.ADDED:
        return NOTHING
    if pod.deleting:
        _leave_pending(pod, pending, served)
        cached = cache.get_pod(pod.uid)
        if cached is None:
            return NOTHING
        cache.forget(cached)  # an assumed pod being deleted: free what it holds (upstream handleAssumedPodDeletion)
        return broadcast(EVENT_ASSIGNED_POD_DELETE, served, now, old=cached)
    old = pending.put(pod)
    holder = served.get(pod.scheduler_name)
    if holder is None or state is not None:
        return NOTHING
    if old is None:
        holder.queue.add(pod, now)
    else:
        holder.queue.update(old, pod, now)
    return Routed(wake=(pod.scheduler_name,))


def route_pod_vanished(
    pod: Pod, *, cache: SchedulerCache, pending: PendingPods, served: Mapping[str, Queued], now: float
) -> Routed:
    """A write about an unassigned pod of ours answered 404: it was deleted, though no watch said so
    (Kopf's relist after a 410 does not report deletions). Its assumption, if any, is undone."""
    if cache.is_assumed(pod):
        cache.forget(pod)
    return route_unassigned_pod(pod, gone=True, cache=cache, pending=pending, served=served, now=now)


def _gang_grew(keys: tuple[str, ...], cache: SchedulerCache, served: Mapping[str, Queued], now: float) -> None:
    """A pod joined gangs: their members waiting for it (too few members) get another try
    (upstream GangScheduling's UnscheduledPod/Add hint), no other pod."""
    uids = [uid for key in keys for uid in cache.objects.gang_members.get(key, ())]
    for s in served.values():
        s.queue.move_pods(uids, EVENT_GANG_MEMBER_ADD, now)


def route_assigned_pods_relisted(
    uids: set[str], *, cache: SchedulerCache, pending: PendingPods, served: Mapping[str, Queued], now: float
) -> Routed:
    """A list of every assigned pod held `uids`: the confirmed pods we know that it lacks were deleted
    (or turned terminal) meanwhile. Assumptions stay: their binds are in flight, or bound after the list."""
    gone = [p for p in cache.pods() if p.uid not in uids and cache.state_of(p) is PodState.ADDED]
    return _merge(
        route_assigned_pod(p, deleted=True, cache=cache, pending=pending, served=served, now=now) for p in gone
    )


def route_pending_reconciled(
    listed: Container[str],
    known_before: Iterable[str],
    *,
    cache: SchedulerCache,
    pending: PendingPods,
    served: Mapping[str, Queued],
    now: float,
) -> Routed:
    """A list of every unassigned pod held `listed`: the pending pods we knew before it was asked for
    (`known_before`) that it lacks were deleted or bound meanwhile (client-go's Replace, for the pod
    set Kopf watches: its relist after a 410 does not report deletions)."""
    before = set(known_before)
    gone = [p for p in pending if p.uid in before and p.uid not in listed]
    return _merge(
        route_unassigned_pod(p, gone=True, cache=cache, pending=pending, served=served, now=now) for p in gone
    )


def reports_unreadable(scheduler_name: object, node_name: object, served: Mapping[str, Queued]) -> bool:
    """Whether a pod body the parser refused is a pending pod of ours (it gets a Warning event)."""
    return not node_name and isinstance(scheduler_name, str) and scheduler_name in served


def _scaled_down(old: Resources, new: Resources) -> bool:
    """Some request is lower than before (a scalar gone counts as lowered to 0)."""
    if new.milli_cpu < old.milli_cpu or new.memory < old.memory or new.ephemeral_storage < old.ephemeral_storage:
        return True
    return any(new.scalar.get(name, 0) < amount for name, amount in old.scalar.items())


def _leave_pending(pod: Pod, pending: PendingPods, served: Mapping[str, Queued]) -> None:
    if pending.pop(pod) is not None:
        holder = served.get(pod.scheduler_name)
        if holder is not None:
            holder.queue.delete(pod)


def _settled(routed: Routed, uid: str) -> Routed:
    return Routed(routed.wake, routed.event, uid)


def _merge(routed: Iterable[Routed]) -> Routed:
    """Several routed events as one: every loop to wake, the last event broadcast (settled pods
    are left out: the bounded condition memo lets a deleted pod's entry age out)."""
    wake: dict[str, None] = {}
    event = ""
    for r in routed:
        wake.update(dict.fromkeys(r.wake))
        event = r.event or event
    return Routed(tuple(wake), event)


# --------------------------------------------------------------------------- nodes and the rest


def route_node(node: Node, *, cache: SchedulerCache, served: Mapping[str, Queued], now: float) -> Routed:
    """A node was added or changed."""
    info = cache.get_node_info(node.name)
    old = info.node if info is not None else None
    if old is None:
        cache.add_node(node)
        return broadcast(EVENT_NODE_ADD, served, now, new=node)
    cache.update_node(node)
    return broadcast(EVENT_NODE_UPDATE, served, now, old=old, new=node)


def route_node_deleted(name: str, *, cache: SchedulerCache) -> Routed:
    """A node is gone; pods still bound to it keep a placeholder until they go too."""
    cache.remove_node(name)
    return NOTHING


def route_nodes_relisted(names: set[str], *, cache: SchedulerCache) -> Routed:
    """A list of every node held `names`: the nodes we know that it lacks were deleted meanwhile."""
    for name in [n for n in cache.node_names() if n not in names]:
        route_node_deleted(name, cache=cache)
    return NOTHING


def route_object(
    kind: str, key: str, obj: object | None, *, cache: SchedulerCache, served: Mapping[str, Queued], now: float
) -> Routed:
    """A Service, controller, volume, claim, storage class, PDB or CSINode changed (None: deleted)."""
    store: dict[str, object] = getattr(cache.objects, OBJECT_STORES[kind])
    old = store.pop(key, None) if obj is None else store.get(key)
    if obj is not None:
        store[key] = obj
    cache.objects.generation += 1
    return broadcast(CHANGE_EVENTS[kind], served, now, old=old, new=obj)


def route_objects_relisted(
    kind: str, keys: set[str], *, cache: SchedulerCache, served: Mapping[str, Queued], now: float
) -> Routed:
    """A list of every `kind` held `keys`: the objects of that kind we know that it lacks are gone."""
    store: dict[str, object] = getattr(cache.objects, OBJECT_STORES[kind])
    prefix = key_prefix(kind)
    gone = [k for k in store if k not in keys and k.startswith(prefix)]
    return _merge(route_object(kind, k, None, cache=cache, served=served, now=now) for k in gone)


def route_namespace(
    name: str, labels: Mapping[str, str] | None, *, cache: SchedulerCache, served: Mapping[str, Queued], now: float
) -> Routed:
    """A namespace's labels (None: deleted)."""
    known = cache.objects.namespace_labels
    if labels is None:
        if known.pop(name, None) is not None:
            cache.objects.generation += 1
        return NOTHING
    old = known.get(name)
    if old == labels:
        return NOTHING
    known[name] = labels
    cache.objects.generation += 1
    return broadcast(EVENT_NAMESPACE_CHANGE, served, now, old=old, new=labels)


def route_namespaces_relisted(
    names: set[str], *, cache: SchedulerCache, served: Mapping[str, Queued], now: float
) -> Routed:
    """A list of every namespace held `names`: the namespaces we know that it lacks are gone."""
    gone = [n for n in cache.objects.namespace_labels if n not in names]
    return _merge(route_namespace(n, None, cache=cache, served=served, now=now) for n in gone)


# --------------------------------------------------------------------------- moves and served names


def broadcast(
    event: str,
    served: Mapping[str, Queued],
    now: float,
    *,
    old: object = None,
    new: object = None,
    keep: Container[str] = (),
) -> Routed:
    """A cluster event that changed `old` into `new` (None: not there; both None: the objects are not
    known, so no hint is asked), to every served name's queue: each moves the unschedulable pods it may
    help, except those of `keep` (a gang that was just rejected rests together)."""
    wake = tuple(
        name
        for name, s in served.items()
        if s.queue.move_all_to_active_or_backoff(event, now, old=old, new=new, keep=keep)
    )
    return Routed(wake, event)


def expire_assumed(cache: SchedulerCache, served: Mapping[str, Queued], now: float) -> tuple[tuple[Pod, ...], Routed]:
    """Drop bound assumptions the watch never confirmed (their resources are free again): a move."""
    gone = tuple(cache.expire(now))
    return gone, _merge(broadcast(EVENT_ASSIGNED_POD_DELETE, served, now, old=pod) for pod in gone)


def serve(
    profile: Profile,
    queue: SchedulingQueue | None,
    *,
    pending: PendingPods,
    now: float,
    cluster: EnqueueHandle | None = None,
    share: SchedulingQueue | None = None,
) -> SchedulingQueue:
    """The queue of a scheduler name that starts being served with `profile` (`queue` None: a new
    queue holding the name's pending pods), or goes on being served with a new one: its QueueSort
    (the active queue is re-sorted), its plugins' requeueing hints and its backoff settings follow
    it, and every unschedulable pod gets another try. `cluster` is what the hints may read (the
    scheduler's cache; None: nothing, so most hints answer QUEUE). A new queue counts its scheduling
    cycles with `share` (another served name's queue: upstream counts one queue's cycles for every profile)."""
    hints = QueueingHints((*profile.filters, *profile.pre_filter_only, *profile.plugins), cluster)
    less = profile.queue_sort.less
    if queue is None:
        queue = SchedulingQueue(
            less=less,
            hints=hints,
            pod_initial_backoff=profile.pod_initial_backoff_seconds,
            pod_max_backoff=profile.pod_max_backoff_seconds,
        )
        if share is not None:
            queue.cycles = share.cycles
        for pod in pending.of(profile.scheduler_name):
            queue.add(pod, now)
        return queue
    queue.hints = hints
    queue.sort_by(less)
    queue.pod_initial_backoff = profile.pod_initial_backoff_seconds
    queue.pod_max_backoff = profile.pod_max_backoff_seconds
    queue.move_all_to_active_or_backoff(EVENT_POLICY_CHANGE, now)
    return queue
