"""Pod-group preemption: room for a whole gang at once, chosen over the whole cluster.

Upstream v1.37 ``pkg/scheduler/framework/preemption/podgrouppreemption.go`` (``PodGroupEvaluator``:
Preempt, selectVictimsOnDomain, preemptorEligibleToPreemptOthers, isOngoingPreemption) with the domain
``types.go`` builds for it (``newDomainForWorkloadPreemption``: every node, every victim), and the
DefaultPreemption plugin's ``PodGroupPostFilter``, which prefixes its messages with ``pod group
preemption: ``. The pod-group cycle (``core/scheduling/cycle.py``'s ``schedule_pod_group``, upstream
``podGroupCycle``) runs it when a Workload-API gang could not be placed, and lends it the pod-group
algorithm (``GroupAlgorithm``, upstream's ``PodGroupSchedulingFunc``). The steps:

1. The gang must be eligible: none of its pending members has ``preemptionPolicy: Never`` (upstream's
   rule while the PodGroupPreemptionPolicy gate is off, its default).
2. An ongoing preemption is waited for: when a member's nominated node holds a pod of lower priority
   terminating because a scheduler preempted it, every member keeps its nomination (SUCCESS, ``ongoing
   preemption on nominated nodes``) and nothing more is evicted.
3. The victims (``core/toolkit/preemption.py``'s ``Victim``: pods, or PodGroups disrupted together) of every node
   whose priority is below the gang's (its PodGroup's ``spec.priority``) are removed from a copy of the
   snapshot, and the pod-group algorithm places the members on it; when even that fails, its status is
   the answer.
4. Victims are put back one by one, most important first, PDB-violating ones before the others; each is
   spared when every member still passes the filters on the node it was given (in the algorithm's order,
   each added to the copy and reserved before the next is checked, with the cycle state the algorithm
   left it), and evicted otherwise.
5. The answer: every placed member nominated to its node, the evicted victims' pods (most important
   victim first), ``found a placement for podgroup, preempting N victims``.

Deterministic where upstream is not: victims that tie on every rule keep their snapshot order (upstream's
``sort.Slice`` is not stable). Pure: the executors evict (``kube/preemption.py``, ``sim/simulator.py``).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from ..framework.basics import SUCCESS, Code, CycleState, Status, unresolvable, unschedulable
from ..framework.interface import Handle, Plugin
from ..framework.snapshot import Snapshot
from ..model.objects import PREEMPT_NEVER, Pod, PodGroup
from .preemption import NOT_ELIGIBLE_NEVER, VictimIndex, more_important, split_victims_by_pdb, victim_priority

__all__ = [
    "NO_VICTIMS_FOR_PREEMPTOR",
    "ONGOING",
    "PREFIX",
    "Assignment",
    "GroupAlgorithm",
    "GroupTrial",
    "PodGroupPostFilterPlugin",
    "PodGroupPreemption",
    "found_placement",
    "preempt_pod_group",
]

#: what DefaultPreemption's PodGroupPostFilter puts before every message of its evaluator
PREFIX: Final = "pod group preemption: "
NO_VICTIMS_FOR_PREEMPTOR: Final = "No preemption victims found for incoming preemptor"
ONGOING: Final = "ongoing preemption on nominated nodes"


def found_placement(victims: int) -> str:
    return f"found a placement for podgroup, preempting {victims} victims"


@dataclass(frozen=True, slots=True)
class Assignment:
    """A member the pod-group algorithm placed: the pod on its node (``node_name`` set) and its cycle state."""

    pod: Pod
    state: CycleState

    @property
    def node(self) -> str:
        return self.pod.node_name


@dataclass(frozen=True, slots=True)
class GroupTrial:
    """What the pod-group algorithm answered: the members it placed, in its order, and the gang's status
    (SUCCESS: feasible)."""

    assignments: tuple[Assignment, ...]
    status: Status


class GroupAlgorithm(Protocol):
    """What the pod-group cycle lends its PostFilter (upstream ``PodGroupSchedulingFunc`` and the Reserve
    plugins the evaluator runs)."""

    def schedule(self, snapshot: Snapshot) -> GroupTrial:
        """The gang's members tried on `snapshot`, each placed one added to it and reserved for the next; all
        taken back (unreserved, removed from `snapshot`) before it returns, their cycle states kept."""

    def reserve(self, assignment: Assignment) -> None:
        """Run the Reserve plugins for a member placed on the snapshot again (their verdict is not read)."""

    def unreserve(self, assignment: Assignment) -> None: ...


@dataclass(frozen=True, slots=True)
class PodGroupPreemption:
    """What a PodGroupPostFilter decided (upstream ``PodGroupPostFilterResult`` and its status).

    ``nominations`` (member uid -> node) replace the members' nominations on SUCCESS; a member it does not
    name keeps what its own attempt said. ``victims`` are the pods to evict (most important victim first).
    """

    status: Status
    nominations: Mapping[str, str] = field(default_factory=dict)
    victims: tuple[Pod, ...] = ()
    num_pdb_violations: int = 0
    #: evicted victims that are pod groups (or members of one): upstream's workload disruptions
    group_disruptions: int = 0


class PodGroupPostFilterPlugin(Plugin):
    """A plugin that makes room for a gang the pod-group cycle could not place (upstream's
    ``PodGroupPostFilterPlugin``; DefaultPreemption is one)."""

    @abc.abstractmethod
    def pod_group_post_filter(
        self,
        group: PodGroup,
        members: Sequence[Pod],
        snapshot: Snapshot,
        algorithm: GroupAlgorithm,
        handle: Handle,
        *,
        nominated: Mapping[str, str],
    ) -> PodGroupPreemption:
        """`members` are the gang's pending pods in the cycle's order, `nominated` their nominations now (uid ->
        node); `snapshot` is the cycle's, up to date and left as it is (work on ``snapshot.copy()``)."""


def preempt_pod_group(
    group: PodGroup,
    members: Sequence[Pod],
    snapshot: Snapshot,
    algorithm: GroupAlgorithm,
    handle: Handle,
    *,
    nominated: Mapping[str, str],
) -> PodGroupPreemption:
    """Upstream ``PodGroupEvaluator.Preempt`` without the actuation; messages without the plugin's prefix.

    Statuses: SUCCESS with the nominations and victims (none for an ongoing preemption); UNSCHEDULABLE (not
    eligible, or the algorithm's own status when the gang cannot be placed even without the victims);
    UNSCHEDULABLE_AND_UNRESOLVABLE (nothing of lower priority anywhere); ERROR (a plugin failed).
    """
    if any(p.preemption_policy == PREEMPT_NEVER for p in members):
        return PodGroupPreemption(unschedulable(NOT_ELIGIBLE_NEVER))
    priority = group.priority
    if _ongoing(priority, nominated.values(), snapshot):
        return PodGroupPreemption(Status(Code.SUCCESS, (ONGOING,)), {p.uid: nominated.get(p.uid, "") for p in members})
    index = VictimIndex(snapshot)
    potential = [v for v in index.victims(snapshot.all_pods()) if v.priority < priority]
    if not potential:
        return PodGroupPreemption(unresolvable(NO_VICTIMS_FOR_PREEMPTOR))

    work = snapshot.copy()
    for victim in potential:
        for pod in victim.pods:
            work.remove_pod(pod)
    trial = algorithm.schedule(work)
    if not trial.status.is_success:
        return PodGroupPreemption(trial.status)
    domain = _Domain(work, trial.assignments, algorithm, handle)
    pdbs = [pdb for _, pdb in sorted(snapshot.objects.pod_disruption_budgets.items())]
    violating, non_violating = split_victims_by_pdb(sorted(potential, key=more_important), pdbs)
    evicted = []
    violations = 0
    for victim, count in [*violating, *((v, 0) for v in non_violating)]:
        spared = domain.reprieve(victim.pods)
        if isinstance(spared, Status):
            return PodGroupPreemption(_as_error(spared))
        if not spared:
            evicted.append(victim)
            violations += count
    evicted.sort(key=more_important)
    pods = tuple(p for v in evicted for p in v.pods)
    return PodGroupPreemption(
        Status(Code.SUCCESS, (found_placement(len(pods)),)),
        {a.pod.uid: a.node for a in trial.assignments},
        pods,
        violations,
        sum(1 for v in evicted if v.is_group),
    )


class _Domain:
    """The cluster with every potential victim gone and the gang's placement (upstream's domain in
    ``selectVictimsOnDomain``): victims come back one by one while the members are checked where they were
    placed."""

    __slots__ = ("work", "assignments", "algorithm", "handle")

    def __init__(
        self, work: Snapshot, assignments: Sequence[Assignment], algorithm: GroupAlgorithm, handle: Handle
    ) -> None:
        self.work, self.assignments, self.algorithm, self.handle = work, assignments, algorithm, handle

    def tell(self, victim_pods: Sequence[Pod], *, add: bool) -> Status:
        """Every placed member's PreFilterExtensions hear that the victim's pods came back (or left again)."""
        handle = self.handle
        for pod in victim_pods:
            node = self.work.get(pod.node_name)
            if node is None:
                continue
            for a in self.assignments:
                if add:
                    status = handle.run_pre_filter_extension_add_pod(a.state, a.pod, pod, node)
                else:
                    status = handle.run_pre_filter_extension_remove_pod(a.state, a.pod, pod, node)
                if not status.is_success:
                    return status
        return SUCCESS

    def reprieve(self, victim_pods: Sequence[Pod]) -> bool | Status:
        """Put the victim back: True when every member still fits where it was placed (the victim is spared),
        each member added and reserved before the next is checked, and taken back afterwards."""
        work = self.work
        for pod in victim_pods:
            work.add_pod(pod)
        status = self.tell(victim_pods, add=True)
        if not status.is_success:
            return status
        added: list[Assignment] = []
        try:
            for a in self.assignments:
                node = work.get(a.node)
                if (
                    node is None
                    or not self.handle.run_filter_plugins_with_nominated_pods(a.state, a.pod, node).is_success
                ):
                    for pod in victim_pods:
                        work.remove_pod(pod)
                    status = self.tell(victim_pods, add=False)
                    return status if not status.is_success else False
                work.add_pod(a.pod)
                self.algorithm.reserve(a)
                added.append(a)
            return True
        finally:
            for a in reversed(added):
                self.algorithm.unreserve(a)
                work.remove_pod(a.pod)


def _ongoing(priority: int, nodes: Iterable[str], snapshot: Snapshot) -> bool:
    """Upstream ``isOngoingPreemption``: a member's nominated node holds a pod of lower priority that is
    terminating because a scheduler preempted it."""
    for name in {n for n in nodes if n}:
        info = snapshot.get(name)
        if info is None:
            continue
        for pod in info.iter_pods():
            if pod.terminating_by_preemption and victim_priority(pod, snapshot.objects) < priority:
                return True
    return False


def _as_error(status: Status) -> Status:
    return status if status.code is Code.ERROR else Status(Code.ERROR, status.reasons, status.plugin)
