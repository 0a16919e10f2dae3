"""Preemption: which lower-priority pods to evict so that a pod that fits nowhere fits somewhere.

Upstream v1.37 ``pkg/scheduler/framework/preemption/preemption.go`` (``Evaluator``: findCandidates,
DryRunPreemption, GetVictimsOnNode, SelectCandidate, pickOneNodeForPreemption), ``preemption/types.go``
(``Victim``, ``DomainVictim``, getCrossNodesVictims), ``preemption/util.go`` (FilterVictimsWithPDBViolation,
MoreImportantVictim, GetPodPriority, PodTerminatingByPreemption) and the DefaultPreemption plugin's
PodEligibleToPreemptOthers, SelectVictimsOnNode and calculateNumCandidates
(``framework/plugins/defaultpreemption/default_preemption.go``), as they run with the GenericWorkload gate on
(upstream's default profile has GangScheduling then, and so does ours). A whole pod group preempting is
``core/toolkit/pod_group_preemption.py``'s, on the victims this module models.

``preempt`` decides; it evicts nothing. The cycle turns its answer into the pod's nomination and
the operator deletes the victims (``core/scheduling/cycle.py``, ``kube/loop.py``); ``simulate`` removes them
from its cache. The steps:

1. The pod must be eligible: not ``preemptionPolicy: Never``, and not already waiting for
   victims of an earlier preemption to terminate on its nominated node.
2. Only nodes whose filter status is Unschedulable can be helped by removing pods; an
   UnschedulableAndUnresolvable node (wrong selector, taint...) cannot.
3. Dry run on each such node, from an offset drawn from the caller's RNG, on clones of the
   NodeInfo and of the cycle state: remove every victim of lower priority (telling the
   PreFilterExtensions), check the pod fits (nominated pods of equal or higher priority counted),
   then put victims back most important first, PDB-violating ones before the others, keeping each
   that still leaves room. Stop once enough candidates were found (``min_candidate_nodes_*``)
   and at least one violates no PDB.
4. Choose among candidates: fewest PDB violations, then the lowest highest-victim priority, the
   smallest sum of victim priorities, the fewest victims, the latest start of the
   highest-priority victims, then the first.

Victims (``Victim``, upstream's preemption unit): a pod is one victim, unless it belongs to a
``scheduling.k8s.io`` PodGroup whose ``disruptionMode`` is ``all``: then every member of that group holding
a node anywhere in the cluster is one victim, evicted or spared whole (its members on other nodes are
removed from the dry run's cycle state through the PreFilterExtensions only, as upstream). A victim's
priority is its PodGroup's (``spec.priority``) for a member of one, else the pod's. Victims are ranked
by ``more_important``: priority, then a group member before a lone pod, then the larger group, then the
earlier start. A victim violates the PDBs when any of its pods does, and counts each such pod. A
coscheduling PodGroup (``scheduling.x-k8s.io``) is nothing to preemption, as in scheduler-plugins: its
members are victims one by one, at their own priority.

Messages are upstream's: the ``0/N nodes are available: ...`` text of the dry run when no node can
be helped (``Preemption is not helpful for scheduling`` for the nodes it did not try), ``No
preemption victims found for incoming pod``, ``not eligible due to preemptionPolicy=Never.``.

Where we are deterministic and upstream is not (decisions):

- Nodes are dry-run one after another in snapshot order from the offset; upstream runs them in
  parallel (its own tests use parallelism 1 for the candidate limits) and lists the nodes with
  explicit statuses in Go map order.
- The last tie-break is the first candidate in dry-run order (non-violating ones first);
  upstream's is the first key of a Go map. Victims that tie on every rule keep their order on the
  node (upstream's ``sort.Slice`` is not stable); a group's members are in snapshot order.
- A pod without ``status.startTime`` counts as started after every pod that has one (upstream
  uses the time of the check); two such pods keep their order on the node.

Not modelled: extenders' ProcessPreemption; a custom IsEligiblePod / MoreImportantVictim;
CompositePodGroups. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..framework.basics import SUCCESS, Code, CycleState, Status, error, unresolvable, unschedulable
from ..framework.diagnosis import Diagnosis
from ..framework.interface import Candidate, Handle, PostFilterResult
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import ClusterObjects, Snapshot
from ..model.objects import PREEMPT_NEVER, WORKLOAD_API, Pod, PodDisruptionBudget

__all__ = [
    "IN_MEMORY",
    "NO_VICTIMS",
    "PREEMPTED",
    "NOT_ELIGIBLE_NEVER",
    "NOT_ELIGIBLE_TERMINATING",
    "NOT_HELPFUL",
    "VICTIM_POD",
    "VICTIM_POD_GROUP",
    "Candidate",
    "Evaluator",
    "Victim",
    "VictimIndex",
    "calculate_num_candidates",
    "dry_run_preemption",
    "filter_victims_with_pdb_violation",
    "more_important",
    "pick_one_node_for_preemption",
    "pod_eligible_to_preempt_others",
    "preempt",
    "select_victims_on_node",
    "split_victims_by_pdb",
    "victim_priority",
]

NOT_ELIGIBLE_NEVER: Final = "not eligible due to preemptionPolicy=Never."
#: upstream's reason for a victim waiting at Permit, preempted in memory (``waitingPod.Preempt``): it is not
#: deleted, its wait ends in an error and it backs off; its Preempted event ends with ``IN_MEMORY``
PREEMPTED: Final = "preempted"
IN_MEMORY: Final = " (in kube-scheduler memory)."
NOT_ELIGIBLE_TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
_NO_VICTIMS_STATUS: Final = unresolvable(NO_VICTIMS)
#: added to every priority before summing, so that negative priorities still add up (upstream MaxInt32+1)
PRIORITY_OFFSET: Final = 2**31


# --------------------------------------------------------------------------- victims: pods, or groups evicted whole

#: a victim's kind (upstream's EntityKeyType): a pod outside any PodGroup, or a PodGroup (all its members, or
#: one member of a group disrupted one by one: upstream types both as pod groups)
VICTIM_POD: Final = "pod"
VICTIM_POD_GROUP: Final = "podgroup"


@dataclass(frozen=True, slots=True)
class Victim:
    """One unit of eviction (upstream ``Victim`` / ``DomainVictim``): its pods (on any nodes), its priority
    (the PodGroup's for a member of one), and its kind."""

    pods: tuple[Pod, ...]
    priority: int
    kind: str = VICTIM_POD

    @property
    def is_group(self) -> bool:
        return self.kind != VICTIM_POD

    @property
    def earliest_start(self) -> float:
        """The earliest ``status.startTime`` of its pods (a pod without one counts as started last)."""
        return min(p.start_time if p.start_time is not None else math.inf for p in self.pods)

    @staticmethod
    def of(pod: Pod) -> Victim:
        """A pod as a victim of its own priority (upstream's victims with GenericWorkload off)."""
        return Victim((pod,), pod.priority)


def victim_priority(pod: Pod, objects: ClusterObjects) -> int:
    """Upstream ``GetPodPriority``: the priority of the ``scheduling.k8s.io`` PodGroup the pod names, when
    there is one; else the pod's own."""
    if pod.scheduling_group:
        group = objects.pod_groups.get(f"{WORKLOAD_API}/{pod.namespace}/{pod.scheduling_group}")
        if group is not None:
            return group.priority
    return pod.priority


def more_important(victim: Victim) -> tuple[int, int, int, float]:
    """The sort key of upstream ``MoreImportantVictim`` (most important first): higher priority, then a
    pod group before a pod, then more pods, then the earlier start."""
    return (-victim.priority, -1 if victim.is_group else 0, -len(victim.pods), victim.earliest_start)


class VictimIndex:
    """How the pods of a snapshot make victims (upstream ``getCrossNodesVictims``): built once per
    preemption; the members of each group disrupted together are found (in snapshot order) only when a
    victim needs them."""

    __slots__ = ("_snapshot", "_together", "_members")

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        groups = snapshot.objects.pod_groups
        #: PodGroup keys whose members are evicted together
        self._together = {k for k, g in groups.items() if g.api == WORKLOAD_API and g.disrupted_together}
        self._members: dict[str, list[Pod]] | None = None

    @property
    def trivial(self) -> bool:
        """No pod of the cluster names a Workload PodGroup, and there is none: every victim is a pod of its
        own priority (``core/toolkit/gangs.py`` keeps every live pod's PodGroup keys, PodGroup or not)."""
        objects, prefix = self._snapshot.objects, f"{WORKLOAD_API}/"
        return not any(k.startswith(prefix) for k in objects.gang_members) and not any(
            g.api == WORKLOAD_API for g in objects.pod_groups.values()
        )

    def victims(self, pods: Iterable[Pod]) -> list[Victim]:
        """`pods` as victims, in order, each group disrupted together once (with its members on every node)."""
        objects = self._snapshot.objects
        out: list[Victim] = []
        seen: set[str] = set()
        for pod in pods:
            if not pod.scheduling_group:
                out.append(Victim.of(pod))
                continue
            key = f"{WORKLOAD_API}/{pod.namespace}/{pod.scheduling_group}"
            priority = victim_priority(pod, objects)
            if key not in self._together:
                out.append(Victim((pod,), priority, VICTIM_POD_GROUP))
            elif key not in seen:
                seen.add(key)
                out.append(Victim(tuple(self._members_of(key)) or (pod,), priority, VICTIM_POD_GROUP))
        return out

    def _members_of(self, key: str) -> list[Pod]:
        if self._members is None:
            self._members = {k: [] for k in self._together}
            for info in self._snapshot.node_infos:
                for pod in info.iter_pods():
                    if pod.scheduling_group:
                        members = self._members.get(f"{WORKLOAD_API}/{pod.namespace}/{pod.scheduling_group}")
                        if members is not None:
                            members.append(pod)
        return self._members.get(key, [])


# --------------------------------------------------------------------------- eligibility and limits


def pod_eligible_to_preempt_others(pod: Pod, snapshot: Snapshot, nominated_node_status: Status) -> tuple[bool, str]:
    """Whether `pod` may preempt, and why not (upstream ``PodEligibleToPreemptOthers``).

    A pod already nominated waits while a pod of lower priority (a PodGroup member: its group's) on its
    nominated node is terminating because of preemption, unless the filters now find that node
    UnschedulableAndUnresolvable.
    """
    if pod.preemption_policy == PREEMPT_NEVER:
        return False, NOT_ELIGIBLE_NEVER
    if pod.nominated_node_name:
        if nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        info = snapshot.get(pod.nominated_node_name)
        if info is not None:
            for other in info.iter_pods():
                if other.terminating_by_preemption and victim_priority(other, snapshot.objects) < pod.priority:
                    return False, NOT_ELIGIBLE_TERMINATING
    return True, ""


def calculate_num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """How many candidates the dry run looks for: `percentage` % of the nodes, at least `absolute`, at most all."""
    return min(max(num_nodes * percentage // 100, absolute), num_nodes)


# --------------------------------------------------------------------------- victims on one node


def split_victims_by_pdb(
    victims: Sequence[Victim], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """Upstream ``FilterVictimsWithPDBViolation``: `victims` (in order) that would violate a PDB, each with
    how many of its pods do, and the others.

    Each PDB's ``disruptionsAllowed`` is spent by the pods it selects, in order; a pod violates when it
    drives any budget below zero, and a victim when any of its pods does. Pods listed in
    ``disruptedPods`` were already counted by the API server and spend nothing; a pod without labels
    matches no PDB.
    """
    allowed = [pdb.disruptions_allowed for pdb in pdbs]

    def violates(pod: Pod) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.selects(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    non_violating: list[Victim] = []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violates(pod))
        if count:
            violating.append((victim, count))
        else:
            non_violating.append(victim)
    return violating, non_violating


def filter_victims_with_pdb_violation(
    victims: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[Pod], list[Pod]]:
    """``split_victims_by_pdb`` for pods that are victims on their own: the violating pods and the others."""
    violating, non_violating = split_victims_by_pdb([Victim.of(p) for p in victims], pdbs)
    return [v.pods[0] for v, _ in violating], [v.pods[0] for v in non_violating]


def select_victims_on_node(
    state: CycleState,
    pod: Pod,
    info: NodeInfo,
    pdbs: Sequence[PodDisruptionBudget],
    handle: Handle,
    victims: Sequence[Victim] | None = None,
    *,
    snapshot: Snapshot | None = None,
) -> tuple[list[Pod], int, Status]:
    """The fewest victims to evict so that `pod` fits `info`, their pods (most important victim first), the
    PDB violations that costs, and a status.

    `victims` are the node's (``VictimIndex.victims`` of its pods; None: each pod on its own). `state` and
    `info` are clones the caller gives away: they are changed. A victim's pods on other nodes are not
    removed from them, only told to the PreFilterExtensions with that node of `snapshot`, as upstream's
    ``SelectVictimsOnNode`` does.
    """
    candidates = [Victim.of(p) for p in info.iter_pods()] if victims is None else victims
    potential = [v for v in candidates if v.priority < pod.priority]
    if not potential:
        return [], 0, _NO_VICTIMS_STATUS
    moves = _VictimMoves(state, pod, info, handle, snapshot)
    for victim in potential:
        status = moves.move(victim, add=False)
        if not status.is_success:
            return [], 0, status
    status = handle.run_filter_plugins_with_nominated_pods(state, pod, info)
    if not status.is_success:
        return [], 0, status

    violating, non_violating = split_victims_by_pdb(sorted(potential, key=more_important), pdbs)
    evicted: list[Victim] = []
    num_violating = 0
    for victim, count in [*violating, *((v, 0) for v in non_violating)]:
        fits = moves.reprieve(victim)
        if isinstance(fits, Status):
            return [], 0, fits
        if not fits:
            evicted.append(victim)
            num_violating += count
    if violating and non_violating:
        evicted.sort(key=more_important)
    return [p for v in evicted for p in v.pods], num_violating, SUCCESS


class _VictimMoves:
    """Victims leaving and coming back during ``select_victims_on_node``: their pods on the node tried are
    removed from (added to) its clone, every pod is told to the PreFilterExtensions with its own node."""

    __slots__ = ("state", "pod", "info", "handle", "snapshot")

    def __init__(self, state: CycleState, pod: Pod, info: NodeInfo, handle: Handle, snapshot: Snapshot | None) -> None:
        self.state, self.pod, self.info, self.handle, self.snapshot = state, pod, info, handle, snapshot

    def move(self, victim: Victim, *, add: bool) -> Status:
        """Take the victim out (`add` False) or put it back; an ERROR when an extension fails."""
        info, handle = self.info, self.handle
        for p in victim.pods:
            node = info if p.node_name == info.name or self.snapshot is None else self.snapshot.get(p.node_name)
            if node is None:
                continue
            if node is info:
                if add:
                    info.add_pod(p)
                else:
                    info.remove_pod(p)
            if add:
                status = handle.run_pre_filter_extension_add_pod(self.state, self.pod, p, node)
            else:
                status = handle.run_pre_filter_extension_remove_pod(self.state, self.pod, p, node)
            if not status.is_success:
                return _as_error(status)
        return SUCCESS

    def reprieve(self, victim: Victim) -> Status | bool:
        """Put `victim` back; keep it when the pod still fits (True), else take it out again (False)."""
        status = self.move(victim, add=True)
        if not status.is_success:
            return status
        if self.handle.run_filter_plugins_with_nominated_pods(self.state, self.pod, self.info).is_success:
            return True
        status = self.move(victim, add=False)
        return status if not status.is_success else False


def _as_error(status: Status) -> Status:
    return status if status.code is Code.ERROR else Status(Code.ERROR, status.reasons, status.plugin)


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True, slots=True)
class Evaluator:
    """What a preemption dry run asks of the framework besides the pod and the nodes (upstream's
    ``preemption.Evaluator``, whose method ``DryRunPreemption`` is): the cycle's `handle` (this profile's
    filters and extensions, the nominated pods) and the `snapshot` that makes the pods of Workload
    PodGroups victims together (``VictimIndex``); None: each pod is a victim of its own."""

    handle: Handle
    snapshot: Snapshot | None = None


def dry_run_preemption(
    evaluator: Evaluator,
    state: CycleState,
    pod: Pod,
    potential: Sequence[NodeInfo],
    pdbs: Sequence[PodDisruptionBudget],
    offset: int,
    num_candidates: int,
) -> tuple[list[Candidate], dict[str, Status], list[str]]:
    """Candidates (PDB-respecting ones first), the statuses of the nodes that gave none, and errors.

    Nodes are tried from `potential[offset]` on, wrapping around, each on clones. Each list holds at
    most `num_candidates`; the run stops once it has `num_candidates` in all and at least one that
    violates no PDB (upstream ``DryRunPreemption`` with parallelism 1). With the `evaluator`'s snapshot,
    the pods of Workload PodGroups are victims as ``VictimIndex`` makes them; without, each pod is one.
    """
    handle, snapshot = evaluator.handle, evaluator.snapshot
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[str] = []
    n = len(potential)
    priority = pod.priority
    index = VictimIndex(snapshot) if snapshot is not None else None
    grouped = index is not None and not index.trivial
    for i in range(n):
        info = potential[(offset + i) % n]
        victims: list[Victim] | None = None
        if grouped:
            assert index is not None
            victims = index.victims(info.iter_pods())
            lower = any(v.priority < priority for v in victims)
        else:
            lower = any(p.priority < priority for p in info.pods.values())
        if not lower:
            statuses[info.name] = _NO_VICTIMS_STATUS  # what select_victims_on_node says, without the clones
            continue
        pods, violations, status = select_victims_on_node(
            state.clone(), pod, info.clone(), pdbs, handle, victims, snapshot=snapshot
        )
        if status.is_success and pods:
            bucket = non_violating if violations == 0 else violating
            if len(bucket) < num_candidates:
                bucket.append(Candidate(info.name, tuple(pods), violations))
            if non_violating and len(non_violating) + len(violating) >= num_candidates:
                break
            continue
        if status.is_success:
            status = error(f'expected at least one victim pod on node "{info.name}"')
        if status.code is Code.ERROR:
            errors.append(status.message)
        statuses[info.name] = status
    return non_violating + violating, statuses, errors


def _highest_victims_earliest_start(c: Candidate) -> float:
    """The earliest start among the victims of the highest priority (upstream ``GetEarliestPodStartTime``)."""
    top = c.victims[0].priority
    starts = [v.start_time if v.start_time is not None else math.inf for v in c.victims if v.priority == top]
    return min(starts)


#: upstream pickOneNodeForPreemption's score functions, in order: the highest score wins, ties go on
_SCORES: Final[tuple[Callable[[Candidate], float], ...]] = (
    lambda c: -c.num_pdb_violations,
    lambda c: -c.victims[0].priority,
    lambda c: -sum(v.priority + PRIORITY_OFFSET for v in c.victims),
    lambda c: -len(c.victims),
    _highest_victims_earliest_start,
)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> Candidate | None:
    """The best candidate; see the module docstring for the order of the criteria."""
    remaining = list(candidates)
    if not remaining:
        return None
    for score in _SCORES:
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0]


# --------------------------------------------------------------------------- the whole decision


def preempt(
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    diagnosis: Diagnosis,
    handle: Handle,
    *,
    min_candidate_nodes_percentage: int,
    min_candidate_nodes_absolute: int,
) -> PostFilterResult:
    """Upstream ``Evaluator.Preempt`` without the actuation: a nomination and its victims, or why not.

    Statuses (messages without the ``preemption:`` prefix the plugin adds): SUCCESS ``found a
    potential placement ...`` with the node and victims; UNSCHEDULABLE with the dry run's FitError
    text and a cleared nomination (""); UNSCHEDULABLE (not eligible) or ERROR leaving the
    nomination as it is (None).
    """
    eligible, why = pod_eligible_to_preempt_others(pod, snapshot, diagnosis.status_of(pod.nominated_node_name))
    if not eligible:
        return PostFilterResult(unschedulable(why))
    all_nodes = snapshot.node_infos
    rejected, absent = diagnosis.node_to_status, diagnosis.absent_nodes_status
    potential = [
        info
        for name, info in zip(snapshot.table.names, all_nodes)
        if rejected.get(name, absent).code is Code.UNSCHEDULABLE
    ]
    candidates: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[str] = []
    if potential:
        pdbs = [pdb for _, pdb in sorted(snapshot.objects.pod_disruption_budgets.items())]
        offset = handle.rng.randrange(len(potential))
        wanted = calculate_num_candidates(len(potential), min_candidate_nodes_percentage, min_candidate_nodes_absolute)
        candidates, statuses, errors = dry_run_preemption(
            Evaluator(handle, snapshot), state, pod, potential, pdbs, offset, wanted
        )
    if errors and not candidates:
        return PostFilterResult(error(_aggregate(errors)), node_statuses=statuses)
    best = pick_one_node_for_preemption(candidates)
    if best is None:
        fit = Diagnosis(
            num_all_nodes=len(all_nodes), node_to_status=statuses, absent_nodes_status=unresolvable(NOT_HELPFUL)
        )
        return PostFilterResult(unschedulable(fit.message()), nominated_node="", node_statuses=statuses)
    found = f"found a potential placement for pod on node {best.node}, preempting {len(best.victims)} victims"
    return PostFilterResult(Status(Code.SUCCESS, (found,)), best.node, best.victims, tuple(candidates), statuses)


def _aggregate(messages: Sequence[str]) -> str:
    """apimachinery's ``NewAggregate(errs).Error()``: one message as it is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
