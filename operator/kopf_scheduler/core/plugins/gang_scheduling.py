"""GangScheduling: upstream's all-or-nothing scheduling of a ``scheduling.k8s.io/v1beta1`` PodGroup.

Follows ``pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go`` (v1.37, enabled in
upstream's default profile with the GenericWorkload feature gate). A pod joins a gang through
``spec.schedulingGroup.podGroupName``; the PodGroup's ``spec.schedulingPolicy.gang.minCount`` is
the gang's size (a ``basic`` policy is no gang). The shared decisions are in ``core/toolkit/gangs.py``:

- PreEnqueue, as upstream: the PodGroup must exist and the gang must have at least minCount live
  pods, or the pod stays gated in the queue (never tried, never reported) until a member joins or
  its PodGroup appears (only in a queue that can read the cluster: the operator's and simulate's);
  PreFilter repeats the check (with upstream's texts, as UnschedulableAndUnresolvable) for a pod
  that got in before its gang shrank; otherwise it passes (SKIP: it has no Filter);
- Permit: wait (``permitWaitingTimeSeconds``, upstream's fixed 5 minutes by default) until minCount
  members hold a node, then allow every waiting member;
- Unreserve (ours; upstream's pod-group cycle reverts the whole gang): a member's rejected or
  timed-out wait rejects every waiting member, with how many of the gang fit.

Pod-group cycle (``gangs.PodGroupCycle``; upstream ``schedule_one_podgroup.go`` with GenericWorkload):
when a member is popped, ``core/scheduling/cycle.py`` pulls the gang's other pending members out of the queue
and tries them one after another, each assumed and reserved for the next, checking upstream's
PlacementFeasible (``gangs.placement_feasible``) after each. A gang that cannot reach minCount is
reverted at once (no reservation survives the cycle) and its members read "minCount (4) cannot be
satisfied: 3 scheduled, 0 remaining"; then the profile's pod group PostFilter (DefaultPreemption) may
preempt for the whole gang (``core/toolkit/pod_group_preemption.py``); a feasible one passes Permit together
(quorum met). Not reproduced: placements (PlacementGenerate/Score), CompositePodGroups.

Requeueing (``EventsToRegister``): a member joining is routed to the gang's members directly
(``GangMemberAdd``, upstream's Pod/Add hint); its PodGroup added, or its minCount lowered; and, once the gang has its
PodGroup and enough members (so it was turned down at Permit: too few fit), room that may let more
fit: a node added or changed, a bound pod deleted or shrunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..framework import basics
from ..framework.arguments import PluginArgsError
from ..framework.basics import CycleState, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PermitHandle,
    PermitPlugin,
    PermitResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    QueueingHint,
    ReservePlugin,
    SignFragment,
    SignPlugin,
)
from ..model.objects import WORKLOAD_API, Node, Pod, PodGroup
from ..toolkit import gangs

if TYPE_CHECKING:
    from ..framework.snapshot import ClusterObjects, Snapshot

#: upstream ``permitTimeoutDuration``
DEFAULT_PERMIT_WAITING_TIME_SECONDS: Final = 300
ERR_WAITING_FOR_MEMBERS: Final = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_QUORUM: Final = "waiting for minCount pods from a gang to be scheduled"


def err_no_pod_group(name: str) -> str:
    return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


@dataclass(frozen=True, slots=True)
class GangSchedulingArgs:
    #: how long members wait at Permit for the rest of their gang (1..900 seconds)
    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS

    def __post_init__(self) -> None:
        if not 1 <= self.permit_waiting_time_seconds <= 900:
            raise PluginArgsError(
                "permitWaitingTimeSeconds", "must be 1..900 (upstream caps Permit waits at 15 minutes)"
            )


class GangScheduling(
    PreEnqueuePlugin[GangSchedulingArgs],
    PreFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    EnqueueExtensions,
    gangs.PodGroupCycle,
    SignPlugin,
):
    NAME = "GangScheduling"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: its PreFilter passes or fails a pod whatever the node: nothing to add
        (upstream's plugin has no PreFilter and is not asked)."""
        return ()

    def pod_group(self, pod: Pod, objects: ClusterObjects) -> PodGroup | None:
        """A member of a gang with its PodGroup and minCount members: the cycle tries its pending
        members together (a gang short of them is turned down at PreFilter, upstream's PreEnqueue)."""
        key = gangs.gang_key(pod, WORKLOAD_API)
        group = objects.pod_groups.get(key) if key else None
        if group is None or not group.gang or gangs.pre_filter(group, len(objects.gang_members.get(key, ()))) is None:
            return None
        return group

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        def own_group(pod: Pod, old: object, new: object) -> QueueingHint:
            """Upstream isSchedulableAfterPodGroupAdded/Updated: its PodGroup appeared, or its gang's
            minCount went down (a status write, its condition, requeues nobody)."""
            key = gangs.gang_key(pod, WORKLOAD_API)
            if not key or not isinstance(new, PodGroup) or new.key != key:
                return QueueingHint.QUEUE_SKIP
            if not isinstance(old, PodGroup):
                return QueueingHint.QUEUE
            lower = old.gang and new.gang and new.min_count < old.min_count
            return QueueingHint.QUEUE if lower else QueueingHint.QUEUE_SKIP

        def room(pod: Pod, old: object, new: object) -> QueueingHint:
            key = gangs.gang_key(pod, WORKLOAD_API)
            objects = handle.objects
            complete = gangs.pre_filter(objects.pod_groups.get(key), len(objects.gang_members.get(key, ())))
            if complete is None or (isinstance(old, Node) and isinstance(new, Node) and _same_to_filters(old, new)):
                return QueueingHint.QUEUE_SKIP  # too few members, or a node update no filter reads (a heartbeat)
            return QueueingHint.QUEUE

        return (
            ClusterEventWithHint(ClusterEvent.POD_GROUP_CHANGE, own_group),
            *(
                ClusterEventWithHint(event, room)
                for event in (
                    ClusterEvent.NODE_ADD,
                    ClusterEvent.NODE_UPDATE,
                    ClusterEvent.ASSIGNED_POD_DELETE,
                    ClusterEvent.ASSIGNED_POD_SCALE_DOWN,
                )
            ),
        )

    def pre_enqueue(self, pod: Pod, handle: EnqueueHandle) -> Status:
        status = self._ready(pod, handle.objects)
        return basics.SUCCESS if status.is_skip else status

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        return self._ready(pod, snapshot.objects)

    def _ready(self, pod: Pod, objects: "ClusterObjects") -> Status:
        """Upstream ``preEnqueueHierarchiesDisabled``: the PodGroup exists and the gang has minCount
        live pods (SKIP), or why not (UnschedulableAndUnresolvable, upstream's texts)."""
        key = gangs.gang_key(pod, WORKLOAD_API)
        if not key:
            return basics.SKIP
        group = objects.pod_groups.get(key)
        if group is None:
            return basics.unresolvable(err_no_pod_group(pod.scheduling_group))
        passed = gangs.pre_filter(group, len(objects.gang_members.get(key, ())))
        return passed if passed is not None else basics.unresolvable(ERR_WAITING_FOR_MEMBERS)

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        return basics.SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        key = gangs.gang_key(pod, WORKLOAD_API)
        if key:
            gangs.unreserve(self.name, handle.objects.pod_groups.get(key), key, handle)

    def permit(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> PermitResult:
        key = gangs.gang_key(pod, WORKLOAD_API)
        if not key:
            return PermitResult()
        group = handle.objects.pod_groups.get(key)
        if group is None:
            return PermitResult(
                basics.error(f"failed to get podGroup {pod.namespace}/{pod.scheduling_group}: not found")
            )
        if not group.gang:
            return PermitResult()
        timeout = float(self.args.permit_waiting_time_seconds)
        return gangs.permit(self.name, group, key, handle, timeout=timeout, waiting_reason=WAITING_FOR_QUORUM)


def _same_to_filters(old: Node, new: Node) -> bool:
    """Whether a node update leaves everything the filters read as it was."""
    return (old.labels, old.taints, old.unschedulable, old.conditions, old.allocatable, old.allowed_pod_number) == (
        new.labels,
        new.taints,
        new.unschedulable,
        new.conditions,
        new.allocatable,
        new.allowed_pod_number,
    )
