"""Coscheduling: scheduler-plugins' all-or-nothing scheduling of a ``scheduling.x-k8s.io/v1alpha1`` PodGroup.

Follows kubernetes-sigs/scheduler-plugins ``pkg/coscheduling`` (the PodGroup CRD this project ships
as ``crds/scheduling.x-k8s.io_podgroups.yaml``). A pod joins the PodGroup of its namespace named by
its label ``scheduling.x-k8s.io/pod-group``; ``spec.minMember`` is the gang's size and
``spec.scheduleTimeoutSeconds`` how long members wait at Permit (else ``permitWaitingTimeSeconds``,
60 by default as there). The shared decisions are in ``core/toolkit/gangs.py``:

- PreFilter: a gang with fewer live pods than minMember is rejected with scheduler-plugins' text
  (UnschedulableAndUnresolvable here: no preemption brings a missing member; theirs is
  Unschedulable); a pod whose PodGroup does not exist passes, as there, and Permit rejects it;
- Permit: wait until minMember members hold a node (assumed or bound), then allow every waiting one;
- Unreserve: a member's rejected or timed-out wait rejects every waiting member;
- PostFilter (``gangs.GangPostFilter``, run by ``core/scheduling/cycle.py`` after preemption found nothing, as
  scheduler-plugins' multiPoint puts it after DefaultPreemption): a member that fits nowhere rejects
  its gang at once unless minMember members hold a node already or the gap is at most
  ``podGroupRejectPercentage`` (10 by default) of minMember: every waiting member is rejected at
  Permit ("optimistic rejection in PostFilter", releasing its reservation), the member's FitError
  ends "PodGroup NS/NAME gets rejected due to Pod P is unschedulable even after PostFilter", and
  with ``podGroupBackoffSeconds`` (0, off, by default) the PodGroup backs off when it has minMember
  pods: none of its members is tried before that (scheduler-plugins rejects them at PreFilter with
  "podGroup NS/NAME failed recently"; here they wait in the queue's backoff).

Not reproduced: ``minResources`` (a pre-check of the cluster's free capacity) and the QueueSort that
orders members by their PodGroup's creation time.

Requeueing (``EventsToRegister``): a member joining is routed to the gang's members directly
(``GangMemberAdd``, upstream's Pod/Add hint); its PodGroup added or changed; and, once the gang has its
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
    PreFilterPlugin,
    QueueingHint,
    ReservePlugin,
    SignFragment,
    SignPlugin,
)
from ..model.objects import COSCHEDULING_API, Node, Pod, PodGroup
from ..toolkit import gangs

if TYPE_CHECKING:
    from ..framework.snapshot import Snapshot

#: scheduler-plugins' ``PermitWaitingTimeSeconds`` default
DEFAULT_PERMIT_WAITING_TIME_SECONDS: Final = 60
#: scheduler-plugins' ``PodGroupBackoffSeconds`` and ``PodGroupRejectPercentage`` defaults
DEFAULT_POD_GROUP_BACKOFF_SECONDS: Final = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE: Final = 10
ERR_POD_GROUP_NOT_FOUND: Final = "PodGroup not found"
WAITING_FOR_MEMBERS: Final = "waiting for minMember pods of the PodGroup to be scheduled"


def err_not_enough_siblings(pod: Pod, members: int, min_member: int) -> str:
    return (
        f"pre-filter pod {pod.name} cannot find enough sibling pods,"
        f" current pods number: {members}, minMember of group: {min_member}"
    )


def err_gang_rejected(group: PodGroup, pod: Pod) -> str:
    """scheduler-plugins' PostFilter status when it turns a gang down."""
    name = f"{group.namespace}/{group.name}"
    return f"PodGroup {name} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    #: how long members wait at Permit when their PodGroup sets no scheduleTimeoutSeconds (1..900)
    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS
    #: how long a PodGroup turned down by PostFilter is held back (scheduler-plugins' default 0: not at all)
    pod_group_backoff_seconds: int = DEFAULT_POD_GROUP_BACKOFF_SECONDS
    #: PostFilter leaves the gang alone when at most this share (percent) of minMember is missing
    pod_group_reject_percentage: int = DEFAULT_POD_GROUP_REJECT_PERCENTAGE

    def __post_init__(self) -> None:
        if not 1 <= self.permit_waiting_time_seconds <= 900:
            raise PluginArgsError(
                "permitWaitingTimeSeconds", "must be 1..900 (upstream caps Permit waits at 15 minutes)"
            )
        if not 0 <= self.pod_group_backoff_seconds <= 3600:
            raise PluginArgsError("podGroupBackoffSeconds", "must be 0..3600 (0: no backoff)")
        if not 0 <= self.pod_group_reject_percentage <= 100:
            raise PluginArgsError("podGroupRejectPercentage", "must be 0..100")


class Coscheduling(
    PreFilterPlugin[CoschedulingArgs], ReservePlugin, PermitPlugin, EnqueueExtensions, gangs.GangPostFilter, SignPlugin
):
    NAME = "Coscheduling"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: its PreFilter passes or fails a pod whatever the node: nothing to add."""
        return ()

    def reject_gang(self, pod: Pod, handle: PermitHandle) -> gangs.GangRejection | None:
        key = gangs.gang_key(pod, COSCHEDULING_API)
        group = handle.objects.pod_groups.get(key) if key else None
        if group is None:
            return None  # scheduler-plugins answers "can not find pod group"; Permit says so for members here
        fraction = self.args.pod_group_reject_percentage / 100.0
        if not gangs.post_filter_rejection(self.name, group, key, pod, handle, reject_fraction=fraction):
            return None
        members = handle.objects.gang_members.get(key, frozenset())
        backoff = self.args.pod_group_backoff_seconds if len(members) >= group.min_count else 0
        status = basics.Status(basics.Code.UNSCHEDULABLE, (err_gang_rejected(group, pod),), self.name)
        return gangs.GangRejection(status, members, float(backoff))

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        def own_group(pod: Pod, old: object, new: object) -> QueueingHint:
            """Its PodGroup added or its spec changed (scheduler-plugins asks no hint: any update; a
            status write, ours each time the gang's phase moves, would requeue the gang it just turned down)."""
            key = gangs.gang_key(pod, COSCHEDULING_API)
            if not key or not any(isinstance(g, PodGroup) and g.key == key for g in (old, new)):
                return QueueingHint.QUEUE_SKIP
            if isinstance(old, PodGroup) and isinstance(new, PodGroup) and _same_spec(old, new):
                return QueueingHint.QUEUE_SKIP
            return QueueingHint.QUEUE

        def room(pod: Pod, old: object, new: object) -> QueueingHint:
            key = gangs.gang_key(pod, COSCHEDULING_API)
            objects = handle.objects
            complete = gangs.pre_filter(objects.pod_groups.get(key), len(objects.gang_members.get(key, ())))
            if complete is None or (isinstance(old, Node) and isinstance(new, Node) and _same_to_filters(old, new)):
                return QueueingHint.QUEUE_SKIP  # too few members, or a node update no filter reads (a heartbeat)
            return QueueingHint.QUEUE

        return (
            ClusterEventWithHint(ClusterEvent.COSCHEDULING_POD_GROUP_CHANGE, own_group),
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

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: "Snapshot") -> Status:
        key = gangs.gang_key(pod, COSCHEDULING_API)
        if not key:
            return basics.SKIP
        group = snapshot.objects.pod_groups.get(key)
        members = len(snapshot.objects.gang_members.get(key, ()))
        passed = gangs.pre_filter(group, members)
        if passed is not None:
            return passed
        assert group is not None
        return basics.unresolvable(err_not_enough_siblings(pod, members, group.min_count))

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        return basics.SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        key = gangs.gang_key(pod, COSCHEDULING_API)
        if key:
            gangs.unreserve(self.name, handle.objects.pod_groups.get(key), key, handle)

    def permit(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> PermitResult:
        key = gangs.gang_key(pod, COSCHEDULING_API)
        if not key:
            return PermitResult()
        group = handle.objects.pod_groups.get(key)
        if group is None:
            return PermitResult(basics.unresolvable(ERR_POD_GROUP_NOT_FOUND))
        timeout = group.schedule_timeout_seconds or self.args.permit_waiting_time_seconds
        return gangs.permit(self.name, group, key, handle, timeout=float(timeout), waiting_reason=WAITING_FOR_MEMBERS)


def _same_spec(old: PodGroup, new: PodGroup) -> bool:
    return (old.min_count, old.schedule_timeout_seconds) == (new.min_count, new.schedule_timeout_seconds)


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
