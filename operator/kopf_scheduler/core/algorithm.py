"""The generic scheduling algorithm: pre-filter -> filter -> pre-score -> score -> normalise -> select_host.

Follows today's upstream ``pkg/scheduler/schedule_one.go``:

- Nodes are visited in snapshot order starting at ``next_start_node_index``
  (which rotates by the number of nodes processed), and the search stops once
  ``num_feasible_nodes_to_find`` feasible nodes are found (adaptive
  percentageOfNodesToScore: all nodes below 100; else ``50 - N/125`` percent,
  at least 5 %, at least 100 nodes). With no score plugins one node suffices.
- A node's status is that of the first filter that rejects it, unless
  ``always_check_all_predicates`` collects every rejection.
- A pod nominated to a node (``status.nominatedNodeName``) tries that node first.
- Exactly one feasible node is chosen without scoring.
- Ties at the top score are broken uniformly at random with the caller's RNG.
- A plugin that raises becomes an ERROR status naming it; the attempt fails
  with that error and the caller carries on.
- HTTP extenders (``core/extenders.py``) run after the filter plugins, one after the other on
  the nodes still feasible (``findNodesThatPassExtenders``), and add their weighted scores after
  the score plugins (``prioritizeNodes``); see ``_filter_with_extenders`` and
  ``_score_with_extenders``. A failing filter extender fails the attempt unless it is ignorable;
  a failing prioritize call only loses that extender's scores, as upstream.

A filter or score plugin may also be a ``VectorFilter`` / ``VectorScore`` (a form over the
snapshot's ``NodeTable``); when every active filter is, the vector forms replace the per-node
loop, with the per-node form called only to explain the nodes that failed. Which plugin runs at
which point is decided with ``isinstance`` once per profile (``GenericScheduler.__init__``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .diagnosis import NO_NODES_AVAILABLE, Diagnosis, NodeScore
from .extenders import EXTENDER_SCORE_SCALE, Extender, ExtenderConfig, ExtenderFilterResult, ExtenderPrioritizeResult
from .framework import (
    Code,
    CycleState,
    FilterPlugin,
    NormalizeScorePlugin,
    Plugin,
    PreFilterPlugin,
    PreScorePlugin,
    Status,
    VectorFilter,
    VectorScore,
)
from .nodeinfo import NodeInfo
from .objects import Pod
from .profile import Profile
from .snapshot import Snapshot

MIN_FEASIBLE_NODES_TO_FIND: Final = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: Final = 5
#: upstream ``framework.ExtenderName``: the "plugin" a pod is unschedulable for when extenders rejected nodes
EXTENDER_NAME: Final = "Extender"


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """Upstream ``numFeasibleNodesToFind``: how many feasible nodes to look for before scoring."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return num_all_nodes
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class ScheduleResult:
    """The outcome of one attempt. Exactly one of: ``node`` set; unschedulable (``diagnosis``); ``error``."""

    node: str | None
    diagnosis: Diagnosis
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    error: str | None = None
    #: filled when ``explain=True``: every scored node's total and parts
    scores: list[NodeScore] = field(default_factory=list)
    #: extender failures the attempt went on without (ignorable filters, prioritize calls): for the log
    extender_errors: list[str] = field(default_factory=list)

    @property
    def unschedulable(self) -> bool:
        return self.node is None and self.error is None

    @property
    def message(self) -> str:
        """What a user reads: the bind target, the FitError text, or the error."""
        if self.node is not None:
            return f"scheduled to {self.node}"
        return self.error if self.error is not None else self.diagnosis.message()


class GenericScheduler:
    """Runs one Profile. Holds only the rotating start index between pods (upstream ``nextStartNodeIndex``).

    A profile with extenders needs ``extender_factory``, which makes the ``Extender`` each of its
    ``ExtenderConfig`` is called through (the edge's HTTP client; a fake in tests).
    """

    def __init__(self, profile: Profile, *, extender_factory: Callable[[ExtenderConfig], Extender] | None = None) -> None:
        self.profile = profile
        self.next_start_node_index = 0
        self._filters: list[FilterPlugin] = list(profile.filters)
        self._scorers = list(profile.scorers)
        self._vector_filters = [isinstance(p, VectorFilter) for p in self._filters]
        if profile.extenders and extender_factory is None:
            raise ValueError(f"profile {profile.scheduler_name!r} has {len(profile.extenders)} extender(s): pass an extender_factory")
        built = [extender_factory(c) for c in profile.extenders] if extender_factory is not None else []
        #: upstream ``buildExtenders``: ignorable extenders are called after the others
        self.extenders: tuple[Extender, ...] = tuple(sorted(built, key=lambda e: e.is_ignorable))
        #: upstream ``hasExtenderFilters() || hasScoring()``: look for more than one feasible node
        self._extenders_choose = any(e.is_filter or e.is_prioritizer for e in self.extenders)

    # ------------------------------------------------------------------ entry point

    def schedule(self, pod: Pod, snapshot: Snapshot, *, rng: random.Random, explain: bool = False) -> ScheduleResult:
        n = len(snapshot)
        diagnosis = Diagnosis(num_all_nodes=n)
        if n == 0:
            return ScheduleResult(None, diagnosis, error=NO_NODES_AVAILABLE)
        state = CycleState()

        active, failure = self._run_pre_filters(state, pod, snapshot, diagnosis)
        if failure is not None:
            return failure

        feasible: list[int] | None = None
        skipped: list[str] = []
        if pod.nominated_node_name:
            feasible = self._evaluate_nominated(state, pod, snapshot, active)
            if feasible and self.extenders:
                feasible, err = self._filter_with_extenders(pod, snapshot, feasible, diagnosis, skipped)
                if err is not None:  # upstream logs it and searches every node
                    skipped.append(f"nominated node {pod.nominated_node_name}: {err}")
        evaluated = 0
        if not feasible:
            want = num_feasible_nodes_to_find(n, self.profile.percentage_of_nodes_to_score)
            if not self._scorers and not self._extenders_choose:
                want = 1
            feasible, evaluated, err = self._find_feasible(state, pod, snapshot, active, want, diagnosis)
            if err is not None:
                return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, error=err)
            self.next_start_node_index = (self.next_start_node_index + evaluated) % n
            if self.extenders:
                feasible, err = self._filter_with_extenders(pod, snapshot, feasible, diagnosis, skipped)
                if err is not None:
                    return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, error=err, extender_errors=skipped)
        else:
            evaluated = 1

        if not feasible:
            return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, extender_errors=skipped)
        if len(feasible) == 1 and not explain:
            return ScheduleResult(snapshot.node_infos[feasible[0]].name, diagnosis, evaluated_nodes=evaluated, feasible_nodes=1, extender_errors=skipped)

        totals, parts, err = self._prioritize(state, pod, snapshot, feasible, explain)
        if err is not None:
            return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, feasible_nodes=len(feasible), error=err)
        if self.extenders:
            self._score_with_extenders(pod, snapshot, feasible, totals, parts, explain, skipped)
        chosen = select_host(totals, rng)
        result = ScheduleResult(
            snapshot.node_infos[feasible[chosen]].name, diagnosis, evaluated_nodes=evaluated, feasible_nodes=len(feasible),
            extender_errors=skipped,
        )
        if explain:
            result.scores = [
                NodeScore(snapshot.node_infos[k].name, int(totals[i]), tuple(p[i] for p in parts)) for i, k in enumerate(feasible)
            ]
        return result

    # ------------------------------------------------------------------ filtering

    def _run_pre_filters(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[list[int], ScheduleResult | None]:
        """Indices of the filters to run for this pod, or a finished result when a pre-filter rejects."""
        active: list[int] = []
        for j, plugin in enumerate(self._filters):
            if isinstance(plugin, PreFilterPlugin):
                status = _call(plugin, plugin.pre_filter, state, pod, snapshot)
                if status.code is Code.SKIP:
                    continue
                if status.code is Code.ERROR:
                    return active, ScheduleResult(None, diagnosis, error=f"running PreFilter plugin {plugin.name!r}: {status.message}")
                if not status.is_success:
                    diagnosis.pre_filter_msg = status.message
                    diagnosis.unschedulable_plugins.add(plugin.name)
                    return active, ScheduleResult(None, diagnosis)
            active.append(j)
        return active, None

    def _evaluate_nominated(self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[int]) -> list[int] | None:
        info = snapshot.get(pod.nominated_node_name)
        if info is None:
            return None
        for j in active:
            plugin = self._filters[j]
            if not _call(plugin, plugin.filter, state, pod, info).is_success:
                return None
        return [snapshot.table.position[info.name]]

    def _find_feasible(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, active: list[int], want: int, diagnosis: Diagnosis
    ) -> tuple[list[int], int, str | None]:
        """The first ``want`` feasible node positions in rotated order, nodes processed, and an error if any."""
        n = len(snapshot)
        start = self.next_start_node_index % n
        order = np.arange(start, start + n, dtype=np.intp)
        if start:
            order[n - start :] -= n
        if not active:
            return order[:want].tolist(), min(want, n), None
        check_all = self.profile.always_check_all_predicates
        if not check_all and all(self._vector_filters[j] for j in active):
            return self._find_feasible_vector(state, pod, snapshot, active, want, diagnosis, order)
        return self._find_feasible_scalar(state, pod, snapshot, active, want, diagnosis, order, check_all)

    def _find_feasible_vector(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        active: list[int],
        want: int,
        diagnosis: Diagnosis,
        order: npt.NDArray[np.intp],
    ) -> tuple[list[int], int, str | None]:
        n = len(order)
        table = snapshot.table
        alive = order
        rejected: list[tuple[int, npt.NDArray[np.intp]]] = []  # (filter index, positions it rejected)
        for j in active:
            plugin = self._filters[j]
            assert isinstance(plugin, VectorFilter)
            try:
                mask = plugin.filter_nodes(state, pod, table, alive)
            except Exception as exc:  # a plugin bug must not take the scheduler down
                return [], n, f"running Filter plugin {plugin.name!r}: {type(exc).__name__}: {exc}"
            if not mask.all():
                rejected.append((j, alive[~mask]))
                alive = alive[mask]
            if alive.size == 0:
                break
        # Rank in visiting order tells how far the sequential search would have gone.
        start = int(order[0])
        if alive.size > want:
            alive = alive[:want]
            processed = int((alive[-1] - start) % n) + 1
        else:
            processed = n
        for j, positions in rejected:
            plugin = self._filters[j]
            if processed < n:
                positions = positions[((positions - start) % n) < processed]
            for k in positions.tolist():
                info = snapshot.node_infos[k]
                status = _call(plugin, plugin.filter, state, pod, info)
                if status.is_success:  # the two forms disagree: trust the vector, but say so
                    status = Status(Code.UNSCHEDULABLE, (f"rejected by {plugin.name}",), plugin.name)
                if status.code is Code.ERROR:
                    return [], processed, f"running Filter plugin {plugin.name!r}: {status.message}"
                diagnosis.node_to_status[info.name] = status
                diagnosis.unschedulable_plugins.add(plugin.name)
        return alive.tolist(), processed, None

    def _find_feasible_scalar(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        active: list[int],
        want: int,
        diagnosis: Diagnosis,
        order: npt.NDArray[np.intp],
        check_all: bool,
    ) -> tuple[list[int], int, str | None]:
        infos = snapshot.node_infos
        plugins = [self._filters[j] for j in active]
        feasible: list[int] = []
        processed = 0
        for k in order.tolist():
            processed += 1
            info = infos[k]
            failed: Status | None = None
            for plugin in plugins:
                status = _call(plugin, plugin.filter, state, pod, info)
                if status.is_success:
                    continue
                if status.code is Code.ERROR:
                    return [], processed, f"running Filter plugin {plugin.name!r}: {status.message}"
                diagnosis.unschedulable_plugins.add(plugin.name)
                if failed is None:
                    failed = status
                    if not check_all:
                        break
                else:
                    failed = Status(max(failed.code, status.code), failed.reasons + status.reasons, failed.plugin)
            if failed is None:
                feasible.append(k)
                if len(feasible) >= want:
                    break
            else:
                diagnosis.node_to_status[info.name] = failed
        return feasible, processed, None

    # ------------------------------------------------------------------ scoring

    def _prioritize(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: list[int], explain: bool
    ) -> tuple[npt.NDArray[np.int64], list[list[tuple[str, int, int]]], str | None]:
        m = len(feasible)
        totals = np.zeros(m, dtype=np.int64)
        parts: list[list[tuple[str, int, int]]] = []
        if not self._scorers:
            if not self.extenders:
                totals += 1  # upstream: with no score plugins and no extenders every node scores 1
            return totals, parts, None
        index = np.asarray(feasible, dtype=np.intp)
        infos: list[NodeInfo] | None = None
        for plugin, weight in self._scorers:
            if isinstance(plugin, PreScorePlugin):
                if infos is None:
                    infos = _pick(snapshot.node_infos, feasible)
                status = _call(plugin, plugin.pre_score, state, pod, infos, snapshot)
                if status.code is Code.SKIP:
                    continue
                if not status.is_success:
                    return totals, parts, f"running PreScore plugin {plugin.name!r}: {status.message}"
            try:
                if isinstance(plugin, VectorScore):
                    raw = np.asarray(plugin.score_nodes(state, pod, snapshot.table, index), dtype=np.int64)
                else:
                    if infos is None:
                        infos = _pick(snapshot.node_infos, feasible)
                    raw = np.fromiter((plugin.score(state, pod, info) for info in infos), dtype=np.int64, count=m)
                scores = plugin.normalize_scores(state, pod, raw) if isinstance(plugin, NormalizeScorePlugin) else raw
            except Exception as exc:
                return totals, parts, f"running Score plugin {plugin.name!r}: {type(exc).__name__}: {exc}"
            totals += scores * weight
            if explain:
                parts.append([(plugin.name, int(v), weight) for v in scores.tolist()])
        return totals, parts, None


    # ------------------------------------------------------------------ extenders

    def _filter_with_extenders(
        self, pod: Pod, snapshot: Snapshot, feasible: list[int], diagnosis: Diagnosis, skipped: list[str]
    ) -> tuple[list[int], str | None]:
        """Upstream ``findNodesThatPassExtenders``: each interested filter extender in turn keeps some of
        the feasible nodes; its failed nodes get its reasons. Returns the nodes left, or the error of a
        non-ignorable extender (an ignorable one's goes to ``skipped``). *Keeping a node it was not sent
        is an error whether the extender got names or Node objects (upstream accepts unknown Node
        objects from the latter and scores them as empty nodes)."""
        infos = snapshot.node_infos
        position = snapshot.table.position
        before = len(feasible)
        for ext in self.extenders:
            if not feasible:
                break
            if not ext.is_filter or not ext.is_interested(pod):
                continue
            nodes = _pick(infos, feasible)
            try:
                result = ext.filter(pod, nodes)
            except Exception as exc:  # an Extender bug: an error like any other
                result = ExtenderFilterResult(error=f"{type(exc).__name__}: {exc}")
            if not result.error:
                sent = {info.name for info in nodes}
                stray = next((name for name in result.nodes if name not in sent), None)
                if stray is not None:
                    result = ExtenderFilterResult(error=f"extender {ext.name!r} claims a filtered node {stray!r} which is not found in the input node list")
            if result.error:
                if ext.is_ignorable:
                    skipped.append(f"skipped ignorable extender {ext.name}: {result.error}")
                    continue
                return feasible, result.error
            for name, reason in result.failed_and_unresolvable.items():
                diagnosis.node_to_status[name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), ext.name)
            for name, reason in result.failed.items():
                if name not in result.failed_and_unresolvable:
                    diagnosis.node_to_status[name] = Status(Code.UNSCHEDULABLE, (reason,), ext.name)
            feasible = [position[name] for name in dict.fromkeys(result.nodes)]
        if len(feasible) != before:
            diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
        return feasible, None

    def _score_with_extenders(
        self,
        pod: Pod,
        snapshot: Snapshot,
        feasible: list[int],
        totals: npt.NDArray[np.int64],
        parts: list[list[tuple[str, int, int]]],
        explain: bool,
        skipped: list[str],
    ) -> None:
        """Upstream ``prioritizeNodes``, the extenders' part: each interested prioritizer's 0..10 scores,
        scaled to 0..MAX_NODE_SCORE and times its weight, add to the totals. A failed call adds nothing."""
        nodes = _pick(snapshot.node_infos, feasible)
        index = {info.name: i for i, info in enumerate(nodes)}
        for ext in self.extenders:
            if not ext.is_prioritizer or not ext.is_interested(pod):
                continue
            try:
                result = ext.prioritize(pod, nodes)
            except Exception as exc:  # an Extender bug: an error like any other
                result = ExtenderPrioritizeResult(error=f"{type(exc).__name__}: {exc}")
            if result.error:
                skipped.append(f"extender {ext.name} gave no scores: {result.error}")
                continue
            scaled = np.zeros(len(nodes), dtype=np.int64)
            for hp in result.scores:
                i = index.get(hp.host)
                if i is not None:
                    scaled[i] += hp.score * EXTENDER_SCORE_SCALE
            totals += scaled * ext.weight
            if explain:
                parts.append([(ext.name, int(v), ext.weight) for v in scaled.tolist()])


def select_host(totals: npt.NDArray[np.int64], rng: random.Random) -> int:
    """Index of the highest total; ties broken uniformly at random (upstream reservoir sampling)."""
    top = totals.max()
    ties = np.flatnonzero(totals == top)
    if ties.size == 1:
        return int(ties[0])
    return int(ties[rng.randrange(ties.size)])


def _pick(items: list[NodeInfo], positions: list[int]) -> list[NodeInfo]:
    return list(itemgetter(*positions)(items)) if len(positions) > 1 else [items[k] for k in positions]


def _call(plugin: Plugin, method: Any, *args: Any) -> Status:
    """Run one plugin method; stamp its name; turn an exception into an ERROR status."""
    try:
        status = method(*args)
    except Exception as exc:  # a strange pod must never crash the loop
        return Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",), plugin.name)
    if status is None:
        return Status(Code.SUCCESS, (), plugin.name)
    stamped: Status = status.with_plugin(plugin.name)
    return stamped
