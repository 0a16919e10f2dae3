"""Preemption: which lower-priority pods to evict so that a pod that fits nowhere fits somewhere.

Upstream v1.37 ``pkg/scheduler/framework/preemption/preemption.go`` (``Evaluator``: findCandidates,
DryRunPreemption, SelectCandidate, pickOneNodeForPreemption), ``preemption/util.go``
(FilterVictimsWithPDBViolation, MoreImportantVictim, PodTerminatingByPreemption) and the
DefaultPreemption plugin's PodEligibleToPreemptOthers, SelectVictimsOnNode and
calculateNumCandidates (``framework/plugins/defaultpreemption/default_preemption.go``).

``preempt`` decides; it evicts nothing. The cycle turns its answer into the pod's nomination and
the operator deletes the victims (``core/cycle.py``, ``kube/loop.py``); ``simulate`` removes them
from its cache. The steps:

1. The pod must be eligible: not ``preemptionPolicy: Never``, and not already waiting for
   victims of an earlier preemption to terminate on its nominated node.
2. Only nodes whose filter status is Unschedulable can be helped by removing pods; an
   UnschedulableAndUnresolvable node (wrong selector, taint...) cannot.
3. Dry run on each such node, from an offset drawn from the caller's RNG, on clones of the
   NodeInfo and of the cycle state: remove every lower-priority pod (telling the
   PreFilterExtensions), check the pod fits (nominated pods of equal or higher priority counted),
   then put pods back most important first, PDB-violating ones before the others, keeping each
   that still leaves room. Stop once enough candidates were found (``min_candidate_nodes_*``)
   and at least one violates no PDB.
4. Choose among candidates: fewest PDB violations, then the lowest highest-victim priority, the
   smallest sum of victim priorities, the fewest victims, the latest start of the
   highest-priority victims, then the first.

Messages are upstream's: the ``0/N nodes are available: ...`` text of the dry run when no node can
be helped (``Preemption is not helpful for scheduling`` for the nodes it did not try), ``No
preemption victims found for incoming pod``, ``not eligible due to preemptionPolicy=Never.``.

Where we are deterministic and upstream is not (decisions):

- Nodes are dry-run one after another in snapshot order from the offset; upstream runs them in
  parallel (its own tests use parallelism 1 for the candidate limits) and lists the nodes with
  explicit statuses in Go map order.
- The last tie-break is the first candidate in dry-run order (non-violating ones first);
  upstream's is the first key of a Go map.
- A pod without ``status.startTime`` counts as started after every pod that has one (upstream
  uses the time of the check); two such pods keep their order on the node.

Not modelled: pod groups (GenericWorkload, beta and off by default in v1.37), so every victim is
one pod; extenders' ProcessPreemption; a custom IsEligiblePod / MoreImportantVictim. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from .diagnosis import Diagnosis
from .framework import (
    SUCCESS,
    Candidate,
    Code,
    CycleState,
    Handle,
    PostFilterResult,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from .nodeinfo import NodeInfo
from .objects import PREEMPT_NEVER, Pod, PodDisruptionBudget
from .snapshot import Snapshot

__all__ = [
    "IN_MEMORY",
    "NO_VICTIMS",
    "PREEMPTED",
    "NOT_ELIGIBLE_NEVER",
    "NOT_ELIGIBLE_TERMINATING",
    "NOT_HELPFUL",
    "Candidate",
    "calculate_num_candidates",
    "dry_run_preemption",
    "filter_victims_with_pdb_violation",
    "more_important_first",
    "pick_one_node_for_preemption",
    "pod_eligible_to_preempt_others",
    "preempt",
    "select_victims_on_node",
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


# --------------------------------------------------------------------------- eligibility and limits


def pod_eligible_to_preempt_others(pod: Pod, snapshot: Snapshot, nominated_node_status: Status) -> tuple[bool, str]:
    """Whether `pod` may preempt, and why not (upstream ``PodEligibleToPreemptOthers``).

    A pod already nominated waits while a lower-priority pod on its nominated node is terminating
    because of preemption, unless the filters now find that node UnschedulableAndUnresolvable.
    """
    if pod.preemption_policy == PREEMPT_NEVER:
        return False, NOT_ELIGIBLE_NEVER
    if pod.nominated_node_name:
        if nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        info = snapshot.get(pod.nominated_node_name)
        if info is not None:
            for other in info.iter_pods():
                if other.priority < pod.priority and other.terminating_by_preemption:
                    return False, NOT_ELIGIBLE_TERMINATING
    return True, ""


def calculate_num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """How many candidates the dry run looks for: `percentage` % of the nodes, at least `absolute`, at most all."""
    return min(max(num_nodes * percentage // 100, absolute), num_nodes)


# --------------------------------------------------------------------------- victims on one node


def more_important_first(pods: Iterable[Pod]) -> list[Pod]:
    """Higher priority first, then the earlier start (upstream ``MoreImportantVictim`` for single pods).

    A pod without a start time counts as started last; ties keep the given order.
    """
    return sorted(pods, key=lambda p: (-p.priority, p.start_time if p.start_time is not None else math.inf))


def filter_victims_with_pdb_violation(
    victims: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[Pod], list[Pod]]:
    """Split `victims` (in order) into those whose eviction would violate a PDB and the others.

    Each PDB's ``disruptionsAllowed`` is spent by the victims it selects, in order; a victim
    violates when it drives any budget below zero. Pods listed in ``disruptedPods`` were already
    counted by the API server and spend nothing; a pod without labels matches no PDB.
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

    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in victims:
        (violating if violates(pod) else non_violating).append(pod)
    return violating, non_violating


def select_victims_on_node(
    state: CycleState, pod: Pod, info: NodeInfo, pdbs: Sequence[PodDisruptionBudget], handle: Handle
) -> tuple[list[Pod], int, Status]:
    """The fewest pods to evict from `info` so that `pod` fits, the PDB violations that costs, and a status.

    `state` and `info` are clones the caller gives away: they are changed. Upstream
    ``SelectVictimsOnNode`` for single-pod victims.
    """
    potential = [p for p in info.iter_pods() if p.priority < pod.priority]
    if not potential:
        return [], 0, _NO_VICTIMS_STATUS
    for victim in potential:
        info.remove_pod(victim)
        status = handle.run_pre_filter_extension_remove_pod(state, pod, victim, info)
        if not status.is_success:
            return [], 0, _as_error(status)
    status = handle.run_filter_plugins_with_nominated_pods(state, pod, info)
    if not status.is_success:
        return [], 0, status

    ranked = more_important_first(potential)
    rank = {p.uid: i for i, p in enumerate(ranked)}
    violating, non_violating = filter_victims_with_pdb_violation(ranked, pdbs)
    victims: list[Pod] = []

    def reprieve(victim: Pod) -> Status | bool:
        """Put `victim` back; keep it when the pod still fits, else evict it. An error stops."""
        info.add_pod(victim)
        status = handle.run_pre_filter_extension_add_pod(state, pod, victim, info)
        if not status.is_success:
            return _as_error(status)
        if handle.run_filter_plugins_with_nominated_pods(state, pod, info).is_success:
            return True
        info.remove_pod(victim)
        status = handle.run_pre_filter_extension_remove_pod(state, pod, victim, info)
        if not status.is_success:
            return _as_error(status)
        victims.append(victim)
        return False

    num_violating = 0
    for victim in violating:
        fits = reprieve(victim)
        if isinstance(fits, Status):
            return [], 0, fits
        if not fits:
            num_violating += 1
    for victim in non_violating:
        fits = reprieve(victim)
        if isinstance(fits, Status):
            return [], 0, fits
    if violating and non_violating:
        victims.sort(key=lambda p: rank[p.uid])
    return victims, num_violating, SUCCESS


def _as_error(status: Status) -> Status:
    return status if status.code is Code.ERROR else Status(Code.ERROR, status.reasons, status.plugin)


# --------------------------------------------------------------------------- candidates


def dry_run_preemption(
    state: CycleState,
    pod: Pod,
    potential: Sequence[NodeInfo],
    pdbs: Sequence[PodDisruptionBudget],
    offset: int,
    num_candidates: int,
    handle: Handle,
) -> tuple[list[Candidate], dict[str, Status], list[str]]:
    """Candidates (PDB-respecting ones first), the statuses of the nodes that gave none, and errors.

    Nodes are tried from `potential[offset]` on, wrapping around, each on clones. Each list holds at
    most `num_candidates`; the run stops once it has `num_candidates` in all and at least one that
    violates no PDB (upstream ``DryRunPreemption`` with parallelism 1).
    """
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[str] = []
    n = len(potential)
    priority = pod.priority
    for i in range(n):
        info = potential[(offset + i) % n]
        if all(p.priority >= priority for p in info.pods.values()):
            statuses[info.name] = _NO_VICTIMS_STATUS  # what select_victims_on_node says, without the clones
            continue
        victims, violations, status = select_victims_on_node(state.clone(), pod, info.clone(), pdbs, handle)
        if status.is_success and victims:
            bucket = non_violating if violations == 0 else violating
            if len(bucket) < num_candidates:
                bucket.append(Candidate(info.name, tuple(victims), violations))
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
        candidates, statuses, errors = dry_run_preemption(state, pod, potential, pdbs, offset, wanted, handle)
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
