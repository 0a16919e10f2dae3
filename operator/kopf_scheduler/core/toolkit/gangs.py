"""Gangs: pods that are bound all together or not at all, for both PodGroup APIs.

The part the two gang plugins share (``plugins/gang_scheduling.py`` for upstream's Workload API,
``plugins/coscheduling.py`` for scheduler-plugins' CRD), upstream's ``PodGroupManager`` in our shape:

- membership: a pod belongs to ``scheduling.k8s.io`` PodGroup ``spec.schedulingGroup.podGroupName``
  and to ``scheduling.x-k8s.io`` PodGroup ``metadata.labels["scheduling.x-k8s.io/pod-group"]``, both
  in its namespace. ``ClusterObjects.gang_members`` holds, per PodGroup key, the uids of the live
  pods naming it (pending or bound, any scheduler; terminal pods are gone), kept by
  ``update_members`` from the pod watch (``core/scheduling/routing.py``) and by ``simulate``;
- the decisions: a gang with fewer members than its minimum is not tried (``pre_filter``, also
  GangScheduling's PreEnqueue); a Workload-API gang is decided in one pod-group cycle
  (``PodGroupCycle``, ``placement_feasible``); a coscheduling member that fits nowhere rejects its
  waiting siblings (``GangPostFilter``, ``post_filter_rejection``); a member
  that fits waits at Permit, assumed, until as many members hold a node (assumed or bound) as the
  minimum, then every waiting member is allowed at once (``permit``); when one member's wait is
  rejected or times out, every other waiting member is rejected with it (``unreserve``), so
  nothing is half-bound and no reservation outlives the gang's timeout;
- the status each API shows (``pod_group_status``);
- the pod-group cycle's arithmetic (``placement_feasible``, upstream GangScheduling's
  PlacementFeasible): ``core/scheduling/cycle.py`` tries a Workload-API gang's pending members together and
  keeps their reservations only when at least minCount members then hold a node.

Pure: the cache is reached through the ``PermitHandle`` the runtime lends.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Final

from ..framework.basics import SKIP, SUCCESS, Code, Status
from ..framework.interface import PermitHandle, PermitResult, Plugin
from ..framework.snapshot import ClusterObjects
from ..model.objects import COSCHEDULING_API, LABEL_POD_GROUP, WORKLOAD_API, Pod, PodGroup

__all__ = [
    "GangCounts",
    "GangPostFilter",
    "GangRejection",
    "PodGroupCycle",
    "post_filter_rejection",
    "placement_feasible",
    "gang_key",
    "member_keys",
    "permit",
    "pod_group_status",
    "rejection_message",
    "unreserve",
    "update_members",
]

#: the coscheduling CRD's status.phase values the scheduler writes (scheduler-plugins' PodGroupPhase)
PHASE_PENDING: Final = "Pending"
PHASE_SCHEDULING: Final = "Scheduling"
PHASE_SCHEDULED: Final = "Scheduled"
PHASE_RUNNING: Final = "Running"


def gang_key(pod: Pod, api: str) -> str:
    """The key (``PodGroup.key``) of the `api` PodGroup `pod` names, "" when it names none."""
    if api == WORKLOAD_API:
        name = pod.scheduling_group
    elif api == COSCHEDULING_API:
        name = pod.labels.get(LABEL_POD_GROUP, "")
    else:
        raise ValueError(f"unknown PodGroup API {api!r}")
    return f"{api}/{pod.namespace}/{name}" if name else ""


def member_keys(pod: Pod) -> tuple[str, ...]:
    """Every PodGroup key the pod names (none, one, or one of each API)."""
    return tuple(k for k in (gang_key(pod, WORKLOAD_API), gang_key(pod, COSCHEDULING_API)) if k)


def update_members(members: MutableMapping[str, frozenset[str]], pod: Pod, *, present: bool) -> tuple[str, ...]:
    """Add `pod` to its gangs (or, with `present` False, remove it); returns the keys it newly joined.

    O(1) for a pod outside any gang. A pod's group is fixed at creation (``schedulingGroup`` is
    immutable; relabelling a pod to another coscheduling group is not followed: it counts in both).
    """
    joined = []
    for key in member_keys(pod):
        uids = members.get(key, frozenset())
        if present and pod.uid not in uids:
            members[key] = uids | {pod.uid}
            joined.append(key)
        elif not present and pod.uid in uids:
            rest = uids - {pod.uid}
            if rest:
                members[key] = rest
            else:
                del members[key]
    return tuple(joined)


@dataclass(frozen=True, slots=True)
class GangCounts:
    """A gang's members right now: all live ones, those holding a node (assumed or bound), those waiting."""

    members: int
    placed: int
    waiting: tuple[str, ...]


def counts(key: str, handle: PermitHandle) -> GangCounts:
    uids = handle.objects.gang_members.get(key, frozenset())
    waiting = tuple(w.pod.uid for w in handle.iterate_waiting_pods() if w.pod.uid in uids)
    return GangCounts(len(uids), sum(1 for uid in uids if handle.is_placed(uid)), waiting)


def rejection_message(group: PodGroup, placed: int) -> str:
    """What every member of a gang that did not come together reads (its FailedScheduling event)."""
    return (
        f"gang {group.namespace}/{group.name}: only {placed} of the {group.min_count} pods it needs fit; "
        "none is bound and every reservation is released"
    )


class PodGroupCycle(Plugin):
    """A plugin whose gangs are scheduled in one pod-group cycle (upstream's GenericWorkload
    ``scheduleOnePodGroup``): ``core/scheduling/cycle.py`` asks it, for a popped pod, which gang to try whole."""

    @abc.abstractmethod
    def pod_group(self, pod: Pod, objects: ClusterObjects) -> PodGroup | None:
        """The gang `pod` is tried with, or None (no gang, no PodGroup yet, not a gang policy)."""


#: scheduler-plugins' text for the waiting members a gang's PostFilter rejects
OPTIMISTIC_REJECTION: Final = "optimistic rejection in PostFilter"


@dataclass(frozen=True, slots=True)
class GangRejection:
    """A gang turned down when one member fit nowhere: what that member's FitError gains, and for
    how long the gang's members are held back (its PodGroup's backoff; 0: none)."""

    status: Status
    members: frozenset[str]
    backoff_seconds: float = 0.0


class GangPostFilter(Plugin):
    """A gang plugin's PostFilter that acts on the waiting pods (scheduler-plugins' Coscheduling
    ``PostFilter``). Upstream runs it with the framework handle's waiting pods; here the algorithm
    (which may run off the loop) has none, so ``core/scheduling/cycle.py`` runs it when an attempt ends
    unschedulable and no earlier PostFilter (preemption) nominated the pod or found it unresolvable."""

    @abc.abstractmethod
    def reject_gang(self, pod: Pod, handle: PermitHandle) -> GangRejection | None:
        """Reject `pod`'s gang's waiting members (``handle.reject``) when the gang is out of reach;
        None: `pod` is in no such gang, or the gang stands (enough placed, or a small gap)."""


def post_filter_rejection(
    plugin: str, group: PodGroup, key: str, pod: Pod, handle: PermitHandle, *, reject_fraction: float
) -> bool:
    """scheduler-plugins' Coscheduling ``PostFilter`` decision for `pod`'s gang, which has
    ``group.min_count`` members to place: nothing when as many hold a node already, or when the gap
    (the share of minMember not placed) is at most `reject_fraction`; otherwise every waiting member
    is rejected at once ("optimistic rejection in PostFilter") and True is returned."""
    now = counts(key, handle)
    if now.placed >= group.min_count:
        return False
    if (group.min_count - now.placed) / group.min_count <= reject_fraction:
        return False
    for uid in now.waiting:
        handle.reject(uid, plugin, OPTIMISTIC_REJECTION)
    return True


def placement_feasible(min_count: int, scheduled: int, remaining: int) -> Status:
    """Upstream ``PlacementFeasible``: UNSCHEDULABLE once the members left cannot bring the gang to
    `min_count`, WAIT while they still may, SUCCESS once `scheduled` (members holding a node, before
    and in this cycle) reaches it. Its texts are the ones upstream's pods and PodGroup read."""
    if remaining + scheduled < min_count:
        return Status(
            Code.UNSCHEDULABLE,
            (f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining",),
        )
    if scheduled < min_count:
        return Status(
            Code.WAIT, (f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining",)
        )
    return SUCCESS


def placed_members(key: str, objects: ClusterObjects, is_placed: Callable[[str], bool]) -> int:
    """How many members of gang `key` hold a node (assumed or bound)."""
    return sum(1 for uid in objects.gang_members.get(key, ()) if is_placed(uid))


def pre_filter(group: PodGroup | None, members: int) -> Status | None:
    """SKIP for a pod outside any gang or in a gang with enough members; None: the caller rejects."""
    if group is None or not group.gang:
        return SKIP
    return SKIP if members >= group.min_count else None


def permit(
    plugin: str, group: PodGroup, key: str, handle: PermitHandle, *, timeout: float, waiting_reason: str
) -> PermitResult:
    """Upstream ``permitPodGroup``: the pod (assumed already) waits until `group.min_count` members
    hold a node; the member that completes the gang allows every waiting member and passes."""
    now = counts(key, handle)
    if now.placed < group.min_count:
        return PermitResult(Status(Code.WAIT, (waiting_reason,)), timeout)
    for uid in now.waiting:
        handle.allow(uid, plugin)
    return PermitResult(SUCCESS)


def unreserve(plugin: str, group: PodGroup | None, key: str, handle: PermitHandle) -> None:
    """A member's attempt is undone: every member still waiting (the pod itself too, when its own
    wait timed out) is rejected with the gang's message. Before the runtime forgets anyone, so the
    count is how many held a node."""
    if group is None:
        return
    now = counts(key, handle)
    if not now.waiting:
        return
    message = rejection_message(group, now.placed)
    for uid in now.waiting:
        handle.reject(uid, plugin, message)


def pod_group_status(group: PodGroup, pods: Iterable[Pod], *, waiting: int) -> Mapping[str, object]:
    """The coscheduling CRD's status fields the scheduler owns: ``phase``, ``scheduled`` (bound
    members), ``running``. `pods` are the members' latest versions (bound or not); `waiting` how
    many are assumed at Permit. Phases as scheduler-plugins: Pending (not enough members placed
    yet), Scheduling (some are), Scheduled (enough are bound), Running (enough run)."""
    members = list(pods)
    scheduled = sum(1 for p in members if p.node_name)
    running = sum(1 for p in members if p.node_name and p.phase == "Running")
    if running >= group.min_count:
        phase = PHASE_RUNNING
    elif scheduled >= group.min_count:
        phase = PHASE_SCHEDULED
    elif scheduled or waiting:
        phase = PHASE_SCHEDULING
    else:
        phase = PHASE_PENDING
    return {"phase": phase, "scheduled": scheduled, "running": running}
