"""The generic scheduling algorithm: pre-filter -> filter -> pre-score -> score -> normalise -> select_host.

Follows today's upstream ``pkg/scheduler/schedule_one.go``:

- Nodes are visited in snapshot order starting at ``next_start_node_index``
  (which rotates by the number of nodes processed), and the search stops once
  ``num_feasible_nodes_to_find`` feasible nodes are found (adaptive
  percentageOfNodesToScore: all nodes below 100; else ``50 - N/125`` percent,
  at least 5 %, at least 100 nodes). With no score plugins one node suffices.
- A node's status is that of the first filter that rejects it, unless
  ``always_check_all_predicates`` collects every rejection.
- A pod nominated to a node (``status.nominatedNodeName``) tries that node first; so does a pod the
  profile's opportunistic batching gives a hint (``core/toolkit/batching.py``: the next best node of the
  previous pod with the same signature, in the very next cycle), which then goes there unscored.
- Nominated pods (``Nominator``, the queue's) are counted where they are nominated: a node
  holding nominated pods of equal or higher priority than the pod is filtered twice, once with
  them added (through the PreFilterExtensions, on clones) and once without, and must pass both
  (upstream ``RunFilterPluginsWithNominatedPods``), so a lower-priority pod does not take the
  room preemption made for another.
- When no node fits, the PostFilter plugins run (upstream ``RunPostFilterPlugins``: preemption);
  their message ends the FitError text and their ``PostFilterResult`` (a nomination, victims)
  comes back in ``ScheduleResult.post_filter``.
- Exactly one feasible node is chosen without scoring.
- Ties at the top score are broken uniformly at random with the caller's RNG.
- A plugin that raises becomes an ERROR status naming it; the attempt fails
  with that error and the caller carries on.
- HTTP extenders (``core/config/extenders.py``) run after the filter plugins, one after the other on
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

import dataclasses
import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt

from ..config.extenders import (
    EXTENDER_SCORE_SCALE,
    Extender,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
)
from ..config.profile import Profile
from ..framework import instrumentation as ins
from ..framework.basics import SKIP, SUCCESS, Code, CycleState, Status
from ..framework.diagnosis import NO_NODES_AVAILABLE, Diagnosis, NodeScore, PluginScore
from ..framework.interface import (
    FilterPlugin,
    Handle,
    NormalizeScorePlugin,
    Plugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from ..framework.nodeinfo import NodeInfo
from ..framework.snapshot import NodeTable, Snapshot
from ..model.objects import Pod
from ..state.queueing import Nominator
from ..toolkit.batching import (
    FLUSH_FILTER_ERROR,
    FLUSH_NODE_MISSING,
    FLUSH_NORMALIZE_ERROR,
    FLUSH_PRESCORE_ERROR,
    FLUSH_RESCORE_ERROR,
    OpportunisticBatch,
    Ranking,
    Signature,
    signed_by,
)

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


#: one score plugin's (or prioritizing extender's) part of an attempt: its name, its weight, and per scored node
#: its raw score and its normalised one (0..MAX_NODE_SCORE; an extender's 0..10 times 10), as the algorithm had them
PluginScores = tuple[str, int, npt.NDArray[np.int64], npt.NDArray[np.int64]]


@dataclass(slots=True)
class ScheduleResult:
    """The outcome of one attempt. Exactly one of: ``node`` set; unschedulable (``diagnosis``); ``error``.

    What explains the attempt is kept by reference, at no cost to the attempt: the snapshot's node
    names (``NodeTable.names``, a list never changed in place), the positions of the scored nodes,
    their totals and each score plugin's arrays; ``scores`` builds the per-node view on demand.
    """

    node: str | None
    diagnosis: Diagnosis
    evaluated_nodes: int = 0
    feasible_nodes: int = 0
    error: str | None = None
    #: unschedulable: what the PostFilter plugins decided (None: the profile has none)
    post_filter: PostFilterResult | None = None
    #: extender failures the attempt went on without (ignorable filters, prioritize calls): for the log
    extender_errors: list[str] = field(default_factory=list)
    #: a node was chosen: the cycle's state, which the Reserve and Permit plugins read next
    state: CycleState | None = None
    #: the snapshot's node names, in snapshot order (``scored`` indexes it)
    node_names: Sequence[str] = ()
    #: positions of the scored nodes (empty when nothing was scored: one feasible node, unless ``explain``);
    #: the array scoring indexed with, not the list of feasible nodes (500 int objects on 5000 nodes)
    scored: npt.NDArray[np.intp] | None = None
    #: per scored node, its total (same order as ``scored``)
    totals: npt.NDArray[np.int64] | None = None
    #: per score plugin and prioritizing extender, in profile order: see ``PluginScores``
    plugin_scores: list[PluginScores] = field(default_factory=list)
    #: positions the pre-filters admitted when they narrowed the nodes (None: they did not)
    admitted: npt.NDArray[np.intp] | None = None
    #: opportunistic batching's hint was the node, placed there unscored (``core/toolkit/batching.py``)
    hinted: bool = False

    @property
    def unschedulable(self) -> bool:
        return self.node is None and self.error is None

    @property
    def message(self) -> str:
        """What a user reads: the bind target, the FitError text, or the error."""
        if self.node is not None:
            return f"scheduled to {self.node}"
        return self.error if self.error is not None else self.diagnosis.message()

    @property
    def scores(self) -> list[NodeScore]:
        """Every scored node's total and per-plugin parts (raw, normalised, weight), in scoring order."""
        if self.totals is None or self.scored is None:
            return []
        columns = [
            (name, weight, raw.tolist(), normalised.tolist()) for name, weight, raw, normalised in self.plugin_scores
        ]
        return [
            NodeScore(
                self.node_names[k],
                int(total),
                tuple(PluginScore(name, raw[i], normalised[i], weight) for name, weight, raw, normalised in columns),
            )
            for i, (k, total) in enumerate(zip(self.scored.tolist(), self.totals.tolist()))
        ]


@dataclass(frozen=True, slots=True)
class Turn:
    """What the scheduling queue says of a pod's attempt (upstream reads both off its ``SchedulingQueue``): the
    pods preemption nominated (its nominator; None: there are none), the scheduling cycle the pod was popped
    in (None: a one-off evaluation, which opportunistic batching neither hints at nor keeps a ranking from,
    ``core/toolkit/batching.py``) and the clock's reading, in the queue's time. The executor makes one per attempt."""

    nominator: Nominator | None = None
    cycle: int | None = None
    now: float = 0.0


@dataclass(frozen=True, slots=True)
class _Search:
    """One pod's feasibility search, made once per attempt after its pre-filters (upstream passes the
    framework, the cycle state, the pod and the diagnosis down ``findNodesThatFitPod``'s calls): what every
    step reads. `active` holds the indices of the filters to run for the pod, `filters` those plugins in
    that order; `nominated` the nominated pods each node must leave room for (``_nominated_positions``)."""

    state: CycleState
    pod: Pod
    snapshot: Snapshot
    diagnosis: Diagnosis
    active: list[int]
    filters: list[FilterPlugin]
    nominated: dict[int, list[Pod]]


class GenericScheduler:
    """Runs one Profile. Holds only the rotating start index between pods (upstream ``nextStartNodeIndex``).

    A profile with extenders needs ``extender_factory``, which makes the ``Extender`` each of its
    ``ExtenderConfig`` is called through (the edge's HTTP client; a fake in tests).

    An ``exhaustive`` scheduler filters every node and scores every feasible one, a pod's nomination
    notwithstanding, and records why each rejected node was rejected: what ``kopf_scheduler.testing``
    shows of a plugin. It chooses among them as any other; but upstream stops looking at
    ``num_feasible_nodes_to_find`` feasible nodes (one, without score plugins), tries a nominated node
    alone, and binds a single feasible node unscored, so the operator and ``simulate`` never use it.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        extender_factory: Callable[[ExtenderConfig], Extender] | None = None,
        exhaustive: bool = False,
    ) -> None:
        self.profile = profile
        self.exhaustive = exhaustive
        self.next_start_node_index = 0
        #: opportunistic batching's ranking and counts (``core/toolkit/batching.py``), kept between pods
        self.batch = OpportunisticBatch()
        #: the plugins whose fragments make a pod's signature; None: the profile signs no pod
        self.signers = _signers(profile)
        self._filters: list[FilterPlugin] = list(profile.filters)
        self._scorers = list(profile.scorers)
        self._vector_filters = [isinstance(p, VectorFilter) for p in self._filters]
        self._extensions = [p for p in self._filters if isinstance(p, PreFilterExtensions)]
        #: what each pod's pre-filtering and scoring asks of the plugins, asked once here (``isinstance`` on
        #: the extension points' ABCs costs more than most plugins' answers): (filter index or -1, the
        #: plugin's PreFilter or None), then (plugin, weight, its PreScore or None, vector form, normalises)
        self._pre_filter_plan: tuple[tuple[int, Plugin, PreFilterPlugin | None], ...] = (
            *((j, p, p if isinstance(p, PreFilterPlugin) else None) for j, p in enumerate(self._filters)),
            *((-1, p, p) for p in profile.pre_filter_only),
        )
        self._score_plan: tuple[tuple[ScorePlugin, int, PreScorePlugin | None, bool, bool], ...] = tuple(
            (
                p,
                w,
                p if isinstance(p, PreScorePlugin) else None,
                isinstance(p, VectorScore),
                isinstance(p, NormalizeScorePlugin),
            )
            for p, w in self._scorers
        )
        if profile.extenders and extender_factory is None:
            raise ValueError(
                f"profile {profile.scheduler_name!r} has {len(profile.extenders)} extender(s): pass an extender_factory"
            )
        built = [extender_factory(c) for c in profile.extenders] if extender_factory is not None else []
        #: upstream ``buildExtenders``: ignorable extenders are called after the others
        self.extenders: tuple[Extender, ...] = tuple(sorted(built, key=lambda e: e.is_ignorable))
        #: upstream ``hasExtenderFilters() || hasScoring()``: look for more than one feasible node
        self._extenders_choose = any(e.is_filter or e.is_prioritizer for e in self.extenders)

    # ------------------------------------------------------------------ entry point

    def schedule(
        self,
        pod: Pod,
        snapshot: Snapshot,
        *,
        rng: random.Random,
        explain: bool = False,
        state: CycleState | None = None,
        post_filter: bool = True,
        turn: Turn | None = None,
    ) -> ScheduleResult:
        """Place `pod`; `turn` is what the queue says of the attempt (``Turn``: the nominated pods, the
        scheduling cycle that lets opportunistic batching hint at a node and keep this pod's ranking, the
        clock); None: no nominated pods, and the pod is scheduled on its own. With `explain`, a single
        feasible node is scored too (upstream binds it unscored), so that its scores can be read; the chosen
        node is the same. `state` is the attempt's fresh cycle state (upstream's caller makes it), whose
        recorder times the extension points, and each plugin call when it samples them
        (``core/framework/instrumentation.py``); it keeps them for later points. None: a state without a recorder.
        Without `post_filter` no PostFilter runs on a failure (a member of a pod-group cycle: upstream
        runs the pod group's PostFilter instead)."""
        if state is None:
            state = CycleState()
        result = self._schedule(pod, snapshot, state, rng=rng, explain=explain, post_filter=post_filter, turn=turn)
        result.node_names = snapshot.table.names
        return result

    def _wanted(self, candidates: int) -> int:
        """How many feasible nodes to look for among `candidates` before scoring: upstream's number
        (``num_feasible_nodes_to_find``), or one when nothing scores, or all of them when exhaustive."""
        if self.exhaustive:
            return candidates
        if not self._scorers and not self._extenders_choose:
            return 1
        return num_feasible_nodes_to_find(candidates, self.profile.percentage_of_nodes_to_score)

    def sign(self, pod: Pod, snapshot: Snapshot) -> Signature | None:
        """The pod's signature under this profile (``core/toolkit/batching.py``), or None: not signable. A plugin that
        refuses is asked first next time (the order changes no signature)."""
        signers = self.signers
        if signers is None:
            return None
        signature, refused = signed_by(signers, pod, snapshot)
        if refused > 0:
            self.signers = (signers[refused], *signers[:refused], *signers[refused + 1 :])
        return signature

    def _schedule(
        self,
        pod: Pod,
        snapshot: Snapshot,
        state: CycleState,
        *,
        rng: random.Random,
        explain: bool,
        post_filter: bool,
        turn: Turn | None,
    ) -> ScheduleResult:
        n = len(snapshot)
        diagnosis = Diagnosis(num_all_nodes=n)
        if n == 0:
            return ScheduleResult(None, diagnosis, error=NO_NODES_AVAILABLE)
        recorder = state.recorder

        started = recorder.clock() if recorder is not None else 0.0
        active, failure = self._run_pre_filters(state, pod, snapshot, diagnosis)
        if recorder is not None:
            recorder.extension_point(ins.PRE_FILTER, _pre_filter_code(failure), recorder.clock() - started)
            started = recorder.clock()
        nominator = turn.nominator if turn is not None else None
        if failure is not None:
            return (
                self._run_post_filters(state, pod, snapshot, failure, rng, nominator)
                if failure.unschedulable and post_filter
                else failure
            )
        nominated = self._nominated_positions(pod, snapshot, nominator)
        search = _Search(state, pod, snapshot, diagnosis, active, [self._filters[j] for j in active], nominated)

        signature: Signature | None = None
        hint = ""
        cycle, now = (turn.cycle, turn.now) if turn is not None else (None, 0.0)
        if cycle is not None:  # upstream asks for a hint even for a nominated pod (which then gets none)
            signature = self.sign(pod, snapshot)
            hint = self._hint(search, signature, rng, cycle=cycle, now=now)
        feasible: list[int] | None = None
        skipped: list[str] = []
        if (pod.nominated_node_name or hint) and not self.exhaustive:
            feasible = self._evaluate_nominated(search, pod.nominated_node_name or hint)
            if feasible and self.extenders:
                feasible, err = self._filter_with_extenders(pod, snapshot, feasible, diagnosis, skipped)
                if err is not None:  # upstream logs it and searches every node
                    skipped.append(f"nominated node {pod.nominated_node_name}: {err}")
        evaluated = 0
        only: npt.NDArray[np.intp] | None = None
        if not feasible:
            only = _admitted(state, snapshot, diagnosis)
            want = self._wanted(n if only is None else len(only))
            # the rejected nodes' statuses only matter when nothing fits (or to explain), and the
            # extenders may still reject every node the filters kept
            explain_all = explain or self.exhaustive or bool(self.extenders)
            feasible, evaluated, err = self._find_feasible(search, want, only, explain_all)
            if (
                recorder is not None
            ):  # upstream: Success, or Error when a filter failed; the nominated node's try included
                recorder.extension_point(
                    ins.FILTER, Code.SUCCESS if err is None else Code.ERROR, recorder.clock() - started
                )
            if err is not None:
                return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, error=err)
            self.next_start_node_index = (self.next_start_node_index + evaluated) % n
            if self.extenders:
                feasible, err = self._filter_with_extenders(pod, snapshot, feasible, diagnosis, skipped)
                if err is not None:
                    return ScheduleResult(
                        None, diagnosis, evaluated_nodes=evaluated, error=err, extender_errors=skipped
                    )
        else:
            evaluated = 1

        if not feasible:
            unfit = ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, extender_errors=skipped)
            return self._run_post_filters(state, pod, snapshot, unfit, rng, nominator) if post_filter else unfit
        if len(feasible) == 1 and not explain and not self.exhaustive:
            name = snapshot.node_infos[feasible[0]].name
            if cycle is not None:
                self.batch.store(signature, hint, name, None, 0, cycle, now)
            return ScheduleResult(
                name,
                diagnosis,
                evaluated_nodes=evaluated,
                feasible_nodes=1,
                extender_errors=skipped,
                state=state,
                admitted=only,
                hinted=bool(hint) and name == hint,
            )

        index, totals, parts, err = self._prioritize(state, pod, snapshot, feasible)
        if err is not None:
            return ScheduleResult(None, diagnosis, evaluated_nodes=evaluated, feasible_nodes=len(feasible), error=err)
        if self.extenders:
            self._score_with_extenders(pod, snapshot, feasible, totals, parts, skipped)
        chosen = select_host(totals, rng)
        name = snapshot.node_infos[feasible[chosen]].name
        if cycle is not None:
            others = functools.partial(_ranking_without, snapshot, index, totals, parts, chosen)
            self.batch.store(signature, hint, name, others, len(index) - 1, cycle, now)
        return ScheduleResult(
            name,
            diagnosis,
            evaluated_nodes=evaluated,
            feasible_nodes=len(feasible),
            extender_errors=skipped,
            state=state,
            scored=index,
            totals=totals,
            plugin_scores=parts,
            admitted=only,
            hinted=bool(hint) and name == hint,
        )

    # ------------------------------------------------------------------ filtering

    def _run_pre_filters(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[list[int], ScheduleResult | None]:
        """Indices of the filters to run for this pod, or a finished result when a pre-filter rejects.

        Upstream ``RunPreFilterPlugins`` over the filters' PreFilters, then the profile's
        PreFilter-only plugins (the gang plugins): UnschedulableAndUnresolvable stops at once; Unschedulable
        lets the other pre-filters run (preemption may help) and the last such status is reported;
        node names admitted by pre-filters (``CycleState.admit_only``) are intersected as they
        come, and an empty intersection rejects the pod.
        """
        active: list[int] = []
        rejected: Status | None = None
        sampled = state.sample_plugins
        for j, plugin, pre_filter in self._pre_filter_plan:  # j < 0: a PreFilter without a Filter, never active
            if pre_filter is not None:
                status = (
                    _timed_call(state, ins.PRE_FILTER, plugin, pre_filter.pre_filter, state, pod, snapshot)
                    if sampled
                    else _call(plugin, pre_filter.pre_filter, state, pod, snapshot)
                )
                if status.code is Code.SKIP:
                    state.node_names.pop(plugin.name, None)
                    state.skip_filter.add(plugin.name)
                    continue
                if status.code is Code.ERROR:
                    return active, ScheduleResult(
                        None, diagnosis, error=f"running PreFilter plugin {plugin.name!r}: {status.message}"
                    )
                if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return active, _pre_filter_rejected(diagnosis, status)
                if not status.is_success:
                    rejected = status
                elif plugin.name in state.node_names and (none_left := _no_node_admitted(state)) is not None:
                    return active, _pre_filter_rejected(diagnosis, none_left)
            if j >= 0:
                active.append(j)
        if rejected is not None:
            return active, _pre_filter_rejected(diagnosis, rejected)
        return active, None

    def _evaluate_nominated(self, search: _Search, node: str) -> list[int] | None:
        """Upstream ``evaluateNominatedNode``: `node` (the pod's nomination, or batching's hint) alone,
        with the nominated pods counted; its position when it passes."""
        snapshot = search.snapshot
        info = snapshot.get(node)
        if info is None:
            return None
        k = snapshot.table.position[info.name]
        status = self._run_filters_with_nominated(
            search.state, search.pod, info, search.filters, search.nominated.get(k, ()), check_all=False
        )
        return [k] if status.is_success else None

    # ------------------------------------------------------------------ opportunistic batching

    def _hint(self, search: _Search, signature: Signature | None, rng: random.Random, *, cycle: int, now: float) -> str:
        """Upstream ``GetNodeHint``: the best node left of the previous pod's ranking, or "" (see
        ``core/toolkit/batching.py``). The node the previous pod took is filtered for this one first: still
        feasible, it is rescored and competes again (``refreshHintCandidates``)."""
        state, pod, snapshot = search.state, search.pod, search.snapshot
        batch = self.batch
        if not batch.compatible(pod, signature, cycle, now):
            batch.no_hint()
            return ""
        last = snapshot.get(batch.last_node)
        if last is None:
            batch.flush(FLUSH_NODE_MISSING)
            batch.no_hint()
            return ""
        status = _run_filters(state, pod, last, search.filters, False, None)
        if status.is_success:
            if not self._rescore(state, pod, snapshot, last):
                batch.no_hint()
                return ""
        elif not status.is_rejected:
            batch.flush(FLUSH_FILTER_ERROR)
            batch.no_hint()
            return ""
        return batch.take_hint(rng)

    def _rescore(self, state: CycleState, pod: Pod, snapshot: Snapshot, last: NodeInfo) -> bool:
        """Upstream ``rescoreHintedNode``: PreScore over the kept nodes and `last` (on a clone of the
        state), `last`'s raw scores, then every candidate normalised again with the kept raw scores."""
        batch = self.batch
        ranking = batch.ranking
        assert ranking is not None
        position = snapshot.table.position
        alive = ranking.alive()
        names = [ranking.names[i] for i in alive.tolist()]
        if any(name not in position for name in names):
            return batch.flush(FLUSH_NODE_MISSING)
        infos = [*(snapshot.node_infos[position[name]] for name in names), last]
        clone = state.clone()
        scoring: list[tuple[ScorePlugin, int]] = []
        for plugin, weight in self._scorers:
            if isinstance(plugin, PreScorePlugin):
                status = _call(plugin, plugin.pre_score, clone, pod, infos, snapshot)
                if status.code is Code.SKIP:
                    continue
                if not status.is_success:
                    return batch.flush(FLUSH_PRESCORE_ERROR)
            scoring.append((plugin, weight))
        kept = len(names)
        totals = np.zeros(kept + 1, dtype=np.int64)
        raws: dict[str, npt.NDArray[np.int64]] = {}
        for plugin, weight in scoring:
            try:
                fresh = int(plugin.score(clone, pod, last))
            except Exception:
                return batch.flush(FLUSH_RESCORE_ERROR)
            cached = ranking.raw.get(plugin.name)
            raw = np.append(cached[alive] if cached is not None else np.zeros(kept, dtype=np.int64), fresh)
            raw = raw.astype(np.int64)
            try:
                scores = (
                    plugin.normalize_scores(clone, pod, raw.copy()) if isinstance(plugin, NormalizeScorePlugin) else raw
                )
            except Exception:
                return batch.flush(FLUSH_NORMALIZE_ERROR)
            totals += np.asarray(scores, dtype=np.int64) * weight
            raws[plugin.name] = raw
        batch.replace(Ranking([*names, last.name], totals, raws))
        return True

    def _find_feasible(
        self,
        search: _Search,
        want: int,
        only: npt.NDArray[np.intp] | None = None,
        explain_all: bool = True,
    ) -> tuple[list[int], int, str | None]:
        """The first ``want`` feasible node positions in rotated order, nodes processed, and an error if any.

        ``only``: the positions pre-filters admitted (upstream visits just those, rotated the same way).
        Without ``explain_all``, the vector form records the rejected nodes' statuses only when no
        node is feasible: asking each filter's per-node form why is a Python call per rejected node.
        """
        active = search.active
        n = len(search.snapshot)
        start = self.next_start_node_index % n
        order = np.arange(start, start + n, dtype=np.intp)
        if start:
            order[n - start :] -= n
        if only is not None:
            order = np.roll(only, -(self.next_start_node_index % len(only))) if len(only) else only
        if not active:
            return order[:want].tolist(), min(want, len(order)), None
        check_all = self.profile.always_check_all_predicates
        if only is None and not check_all and all(self._vector_filters[j] for j in active):
            return self._find_feasible_vector(search, want, order, explain_all)
        return self._find_feasible_scalar(search, want, order, check_all)

    def _find_feasible_vector(
        self, search: _Search, want: int, order: npt.NDArray[np.intp], explain_all: bool
    ) -> tuple[list[int], int, str | None]:
        snapshot, diagnosis, nominated = search.snapshot, search.diagnosis, search.nominated
        n = len(order)
        masked = self._vector_masks(search.state, search.pod, snapshot.table, search.active, order)
        if isinstance(masked, str):
            return [], n, masked
        alive, rejected = masked
        # Rank in visiting order tells how far the sequential search would have gone.
        start = int(order[0])
        held: dict[int, Status] = {}  # nodes with nominated pods that fail the two-pass check
        if nominated:
            checked = self._hold_nominated(search, start=start, n=n)
            if isinstance(checked, str):
                return [], n, checked
            held = checked
            if held:
                alive = alive[~np.isin(alive, np.fromiter(held, dtype=np.intp, count=len(held)))]
        if alive.size > want:
            alive = alive[:want]
            processed = int((alive[-1] - start) % n) + 1
        else:
            processed = n
        for j, positions in rejected:
            if processed < n:
                positions = positions[((positions - start) % n) < processed]
            problem = self._record_vector_rejections(
                search, self._filters[j], positions, held, brief=not explain_all and bool(alive.size)
            )
            if problem is not None:
                return [], processed, problem
        for k, status in held.items():
            if processed == n or (k - start) % n < processed:
                diagnosis.node_to_status[snapshot.node_infos[k].name] = status
        return alive.tolist(), processed, None

    def _vector_masks(
        self, state: CycleState, pod: Pod, table: NodeTable, active: list[int], order: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.intp], list[tuple[int, npt.NDArray[np.intp]]]] | str:
        """Every active filter over the nodes still alive, in order: the nodes that pass them all and,
        per filter index, the positions it rejected; or the error of a filter that raised."""
        alive = order
        rejected: list[tuple[int, npt.NDArray[np.intp]]] = []  # (filter index, positions it rejected)
        for j in active:
            plugin = self._filters[j]
            assert isinstance(plugin, VectorFilter)
            started = state.recorder.clock() if state.sample_plugins and state.recorder is not None else None
            try:
                mask = plugin.filter_nodes(state, pod, table, alive)
            except Exception as exc:  # a plugin bug must not take the scheduler down
                return f'running "{plugin.name}" filter plugin: {type(exc).__name__}: {exc}'
            if started is not None and state.recorder is not None:
                code = Code.SUCCESS if mask.all() else Code.UNSCHEDULABLE
                state.recorder.plugin(ins.FILTER, plugin.name, code, state.recorder.clock() - started)
            if not mask.all():
                rejected.append((j, alive[~mask]))
                alive = alive[mask]
            if alive.size == 0:
                break
        return alive, rejected

    def _hold_nominated(self, search: _Search, *, start: int, n: int) -> dict[int, Status] | str:
        """The nodes with nominated pods that fail the two-pass check, and why (visited from `start` in
        rotated order over `n` nodes); or an error's message."""
        state, pod, plugins, nominated = search.state, search.pod, search.filters, search.nominated
        infos, rejectors = search.snapshot.node_infos, search.diagnosis.unschedulable_plugins
        held: dict[int, Status] = {}
        for k in sorted(nominated, key=lambda k: (k - start) % n):
            status = self._run_filters_with_nominated(
                state, pod, infos[k], plugins, nominated[k], check_all=False, rejectors=rejectors
            )
            if status.code is Code.ERROR:
                return status.message
            if not status.is_success:
                held[k] = status
        return held

    def _record_vector_rejections(
        self,
        search: _Search,
        plugin: FilterPlugin,
        positions: npt.NDArray[np.intp],
        held: dict[int, Status],
        *,
        brief: bool,
    ) -> str | None:
        """What one filter rejected, into the diagnosis: with `brief` (a node fits and nobody asked to
        explain every node) only the positions, else a status per node. An error's message, or None."""
        diagnosis = search.diagnosis
        if brief:
            if positions.size:
                diagnosis.unschedulable_plugins.add(plugin.name)
                diagnosis.unasked[plugin.name] = positions  # kept by reference, read only to explain
            return None
        if not positions.size:
            return None
        assert isinstance(plugin, VectorFilter)  # this path runs only when every active filter is one
        state, pod, snapshot = search.state, search.pod, search.snapshot
        table = snapshot.table
        try:
            batch = plugin.filter_statuses(state, pod, table, positions)
        except Exception:  # the per-node form below says the same, or reports the error
            batch = None
        if batch is not None:
            distinct, which = batch
            stamped = [status.with_plugin(plugin.name) for status in distinct]
            names = table.names
            for k, i in zip(positions.tolist(), which.tolist(), strict=True):
                if k not in held:
                    diagnosis.node_to_status[names[k]] = stamped[i]
            diagnosis.unschedulable_plugins.add(plugin.name)
            return None
        for k in positions.tolist():
            if k in held:
                continue
            info = snapshot.node_infos[k]
            status = _call(plugin, plugin.filter, state, pod, info)
            if status.is_success:  # the two forms disagree: trust the vector, but say so
                status = Status(Code.UNSCHEDULABLE, (f"rejected by {plugin.name}",), plugin.name)
            if status.code is Code.ERROR:
                return f'running "{plugin.name}" filter plugin: {status.message}'
            diagnosis.node_to_status[info.name] = status
            diagnosis.unschedulable_plugins.add(plugin.name)
        return None

    def _find_feasible_scalar(
        self, search: _Search, want: int, order: npt.NDArray[np.intp], check_all: bool
    ) -> tuple[list[int], int, str | None]:
        state, pod, diagnosis, nominated = search.state, search.pod, search.diagnosis, search.nominated
        infos = search.snapshot.node_infos
        plugins = search.filters
        rejectors = diagnosis.unschedulable_plugins
        feasible: list[int] = []
        processed = 0
        for k in order.tolist():
            processed += 1
            info = infos[k]
            if k in nominated:
                status = self._run_filters_with_nominated(
                    state, pod, info, plugins, nominated[k], check_all=check_all, rejectors=rejectors
                )
            else:
                status = _run_filters(state, pod, info, plugins, check_all, rejectors)
            if status.code is Code.ERROR:
                return [], processed, status.message
            if status.is_success:
                feasible.append(k)
                if len(feasible) >= want:
                    break
            else:
                diagnosis.node_to_status[info.name] = status
        return feasible, processed, None

    # ------------------------------------------------------------------ nominated pods

    @staticmethod
    def _nominated_positions(pod: Pod, snapshot: Snapshot, nominator: Nominator | None) -> dict[int, list[Pod]]:
        """Node position -> the pods nominated there that `pod` must leave room for: those of equal or
        higher priority, other than itself (upstream ``addGENominatedPods``)."""
        out: dict[int, list[Pod]] = {}
        if not nominator:
            return out
        position = snapshot.table.position
        for name in nominator.node_names():
            k = position.get(name)
            if k is None:
                continue
            pods = [p for p in nominator.pods_for_node(name) if p.priority >= pod.priority and p.uid != pod.uid]
            if pods:
                out[k] = pods
        return out

    def _run_filters_with_nominated(
        self,
        state: CycleState,
        pod: Pod,
        info: NodeInfo,
        plugins: list[FilterPlugin],
        nominated: Sequence[Pod],
        *,
        check_all: bool,
        rejectors: set[str] | None = None,
    ) -> Status:
        """Upstream ``RunFilterPluginsWithNominatedPods``: with `nominated` added to clones of the state
        and the node (when there are any), then as the node is; the first rejection is the status."""
        if nominated:
            with_state, with_info = state.clone(), info.clone()
            for other in nominated:
                with_info.add_pod(other)
                status = self._run_pre_filter_extensions(with_state, pod, other, with_info, add=True)
                if not status.is_success:
                    return status
            status = _run_filters(with_state, pod, with_info, plugins, check_all, rejectors)
            if not status.is_success:
                return status
        return _run_filters(state, pod, info, plugins, check_all, rejectors)

    def _run_pre_filter_extensions(
        self, state: CycleState, pod: Pod, other: Pod, info: NodeInfo, *, add: bool
    ) -> Status:
        """Upstream ``RunPreFilterExtensionAddPod`` / ``RemovePod``: tell every PreFilterExtensions
        plugin not skipped for this pod that `other` joins (leaves) `info`; an ERROR on any failure."""
        for plugin in self._extensions:
            if plugin.name in state.skip_filter:
                continue
            status = _call(plugin, plugin.add_pod if add else plugin.remove_pod, state, pod, other, info)
            if not status.is_success:
                what = "AddPod" if add else "RemovePod"
                return Status(
                    Code.ERROR, (f'running {what} on PreFilter plugin "{plugin.name}": {status.message}',), plugin.name
                )
        return SUCCESS

    # ------------------------------------------------------------------ post-filter

    def handle(self, rng: random.Random, nominator: Nominator | None = None) -> Handle:
        """The ``Handle`` a PostFilter plugin gets for a cycle of this profile (public for plugin tests)."""
        return _CycleHandle(self, rng, nominator)

    def _run_post_filters(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        result: ScheduleResult,
        rng: random.Random,
        nominator: Nominator | None,
    ) -> ScheduleResult:
        """Upstream ``RunPostFilterPlugins`` on an unschedulable result: the first plugin that succeeds,
        finds the pod unresolvable or fails decides; otherwise the rejections add up, and the last
        result that nominates (or clears) is kept. The message ends the FitError text."""
        plugins = self.profile.post_filters
        if not plugins:
            return result
        handle = self.handle(rng, nominator)
        kept: PostFilterResult | None = None
        last = PostFilterResult(SUCCESS)
        reasons: list[str] = []
        rejector = ""
        final: PostFilterResult | None = None
        recorder = state.recorder
        started = recorder.clock() if recorder is not None else 0.0
        for plugin in plugins:
            begun = recorder.clock() if recorder is not None and state.sample_plugins else None
            try:
                answer = plugin.post_filter(state, pod, snapshot, result.diagnosis, handle)
            except Exception as exc:  # a plugin bug must not take the scheduler down
                answer = PostFilterResult(Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",)))
            status = answer.status.with_plugin(plugin.name)
            if begun is not None and recorder is not None:
                recorder.plugin(ins.POST_FILTER, plugin.name, status.code, recorder.clock() - begun)
            if status.is_success or status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                final = dataclasses.replace(answer, status=status)
                break
            if not status.is_rejected:
                final = PostFilterResult(
                    Status(Code.ERROR, status.reasons, plugin.name), node_statuses=answer.node_statuses
                )
                break
            if answer.nominated_node is not None:
                kept = answer
            # the rejector: the first plugin that said why (upstream names the first that failed, which
            # shows nowhere there; DynamicResources fails without a word for a pod without claims)
            if status.reasons and not reasons:
                rejector = plugin.name
            reasons.extend(status.reasons)
            rejector = rejector or plugin.name
            last = answer
        if final is None:
            rejected = Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)
            final = (
                dataclasses.replace(kept, status=rejected)
                if kept is not None
                else PostFilterResult(rejected, node_statuses=last.node_statuses)
            )
        result.diagnosis.post_filter_msg = final.status.message
        result.post_filter = final
        if recorder is not None:
            recorder.extension_point(ins.POST_FILTER, final.status.code, recorder.clock() - started)
        return result

    # ------------------------------------------------------------------ scoring

    def _prioritize(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: list[int]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64], list[PluginScores], str | None]:
        """The feasible positions as an array, their totals, and each plugin's raw and normalised arrays (kept
        for explanations: a tuple per plugin, and a copy of the raw scores when normalising may work in place)."""
        m = len(feasible)
        totals = np.zeros(m, dtype=np.int64)
        parts: list[PluginScores] = []
        index = np.asarray(feasible, dtype=np.intp)
        if not self._scorers:
            if not self.extenders:
                totals += 1  # upstream: with no score plugins and no extenders every node scores 1
            return index, totals, parts, None
        infos: list[NodeInfo] | None = None
        # upstream RunPreScorePlugins then RunScorePlugins: every PreScore first (SKIP drops the plugin's
        # Score), each point timed as a whole when the edge lent a recorder
        point = ins.point_started(state)
        sampled = state.sample_plugins
        scoring: list[tuple[ScorePlugin, int, bool, bool]] = []
        for plugin, weight, pre_score, vector, normalises in self._score_plan:
            if pre_score is not None:
                if infos is None:
                    infos = _pick(snapshot.node_infos, feasible)
                status = (
                    _timed_call(state, ins.PRE_SCORE, plugin, pre_score.pre_score, state, pod, infos, snapshot)
                    if sampled
                    else _call(plugin, pre_score.pre_score, state, pod, infos, snapshot)
                )
                if status.code is Code.SKIP:
                    continue
                if status.code is not Code.SUCCESS:
                    ins.point_done(state, point, ins.PRE_SCORE, Code.ERROR)
                    return index, totals, parts, f"running PreScore plugin {plugin.name!r}: {status.message}"
            scoring.append((plugin, weight, vector, normalises))
        ins.point_done(state, point, ins.PRE_SCORE, Code.SUCCESS)
        point = ins.point_started(state)
        for plugin, weight, vector, normalises in scoring:
            began = ins.plugin_started(state) if sampled else None
            try:
                if vector:
                    raw = np.asarray(
                        cast(VectorScore, plugin).score_nodes(state, pod, snapshot.table, index), dtype=np.int64
                    )
                else:
                    if infos is None:
                        infos = _pick(snapshot.node_infos, feasible)
                    raw = np.fromiter((plugin.score(state, pod, info) for info in infos), dtype=np.int64, count=m)
                scores = (
                    cast(NormalizeScorePlugin, plugin).normalize_scores(state, pod, raw.copy()) if normalises else raw
                )
            except Exception as exc:
                ins.plugin_done(state, began, ins.SCORE, plugin.name, Code.ERROR)
                ins.point_done(state, point, ins.SCORE, Code.ERROR)
                return index, totals, parts, f"running Score plugin {plugin.name!r}: {type(exc).__name__}: {exc}"
            if began is not None:
                ins.plugin_done(state, began, ins.SCORE, plugin.name, Code.SUCCESS)
            totals += scores * weight
            parts.append((plugin.name, weight, raw, scores))
        ins.point_done(state, point, ins.SCORE, Code.SUCCESS)
        return index, totals, parts, None

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
                    result = ExtenderFilterResult(
                        error=f"extender {ext.name!r} claims a filtered node {stray!r}"
                        " which is not found in the input node list"
                    )
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
        parts: list[PluginScores],
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
            raw = np.zeros(len(nodes), dtype=np.int64)
            for hp in result.scores:
                i = index.get(hp.host)
                if i is not None:
                    raw[i] += hp.score
            scaled = raw * EXTENDER_SCORE_SCALE
            totals += scaled * ext.weight
            parts.append((ext.name, ext.weight, raw, scaled))


def _pre_filter_rejected(diagnosis: Diagnosis, status: Status) -> ScheduleResult:
    """A pre-filter rejection: its message stands for every node (upstream sets it as the absent nodes' status)."""
    diagnosis.pre_filter_msg = status.message
    diagnosis.absent_nodes_status = status
    if status.plugin:
        diagnosis.unschedulable_plugins.add(status.plugin)
    return ScheduleResult(None, diagnosis)


def _no_node_admitted(state: CycleState) -> Status | None:
    """Upstream's rejection when the pre-filters' node-name sets have nothing in common, else None."""
    if frozenset.intersection(*state.node_names.values()):
        return None
    plugins = sorted(state.node_names)
    if len(plugins) == 1:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"node(s) didn't satisfy plugin {plugins[0]}",))
    return Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously",)
    )


def _admitted(state: CycleState, snapshot: Snapshot, diagnosis: Diagnosis) -> npt.NDArray[np.intp] | None:
    """Positions of the nodes every pre-filter admitted (None: no pre-filter narrowed), in snapshot order.

    Upstream ``findNodesThatFitPod`` with a PreFilterResult: names not in the snapshot are dropped,
    and every node left out counts as UnschedulableAndUnresolvable
    "node(s) didn't satisfy plugin(s) [<plugins that narrowed>]".
    """
    if not state.node_names:
        return None
    plugins = sorted(state.node_names)
    diagnosis.absent_nodes_status = Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]",)
    )
    diagnosis.unschedulable_plugins.update(plugins)
    position = snapshot.table.position
    names = frozenset.intersection(*state.node_names.values())
    return np.array(sorted(position[name] for name in names if name in position), dtype=np.intp)


def _signers(profile: Profile) -> tuple[SignPlugin, ...] | None:
    """Upstream ``computeBatchablePlugins``: the profile's PreFilter, Filter, PreScore and Score plugins,
    each once, when every one is a ``SignPlugin`` and there are no extenders; None otherwise."""
    if profile.extenders:
        return None
    found: dict[str, Plugin] = {}
    for plugin in [*profile.filters, *profile.pre_filter_only, *(p for p, _ in profile.scorers)]:
        found.setdefault(plugin.name, plugin)
    signers = tuple(p for p in found.values() if isinstance(p, SignPlugin))
    return signers if len(signers) == len(found) else None


def _ranking_without(
    snapshot: Snapshot,
    index: npt.NDArray[np.intp],
    totals: npt.NDArray[np.int64],
    parts: list[PluginScores],
    chosen: int,
) -> Ranking:
    """The scored nodes but the chosen one (upstream's heap after its Pop), with each plugin's raw scores."""
    keep = np.ones(len(index), dtype=np.bool_)
    keep[chosen] = False
    names = snapshot.table.names
    return Ranking(
        [names[k] for k in index[keep].tolist()],
        totals[keep].copy(),
        {name: np.asarray(raw, dtype=np.int64)[keep] for name, _, raw, _ in parts},
    )


def select_host(totals: npt.NDArray[np.int64], rng: random.Random) -> int:
    """Index of the highest total; ties broken uniformly at random (upstream reservoir sampling)."""
    top = totals.max()
    ties = np.flatnonzero(totals == top)
    if ties.size == 1:
        return int(ties[0])
    return int(ties[rng.randrange(ties.size)])


def _pick(items: list[NodeInfo], positions: list[int]) -> list[NodeInfo]:
    return list(itemgetter(*positions)(items)) if len(positions) > 1 else [items[k] for k in positions]


class _CycleHandle:
    """The ``Handle`` PostFilter plugins get: this cycle's filters, extensions, nominations and RNG."""

    __slots__ = ("_scheduler", "_nominator", "rng")

    def __init__(self, scheduler: GenericScheduler, rng: random.Random, nominator: Nominator | None) -> None:
        self._scheduler = scheduler
        self._nominator = nominator
        self.rng = rng

    def nominated_pods_for_node(self, node_name: str) -> Sequence[Pod]:
        return self._nominator.pods_for_node(node_name) if self._nominator else ()

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        sched = self._scheduler
        plugins = [p for p in sched._filters if p.name not in state.skip_filter]
        nominated = [
            p for p in self.nominated_pods_for_node(node.name) if p.priority >= pod.priority and p.uid != pod.uid
        ]
        return sched._run_filters_with_nominated(
            state, pod, node, plugins, nominated, check_all=sched.profile.always_check_all_predicates
        )

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status:
        return self._scheduler._run_pre_filter_extensions(state, pod, added, node, add=True)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status:
        return self._scheduler._run_pre_filter_extensions(state, pod, removed, node, add=False)


def _run_filters(
    state: CycleState,
    pod: Pod,
    info: NodeInfo,
    plugins: Sequence[FilterPlugin],
    check_all: bool,
    rejectors: set[str] | None,
) -> Status:
    """Upstream ``RunFilterPlugins`` on one node: SUCCESS, the first rejection (every rejection merged
    when `check_all`; the rejecting plugins go into `rejectors`), or an ERROR naming the plugin."""
    failed: Status | None = None
    sampled = state.sample_plugins
    for plugin in plugins:
        if sampled:
            status = _timed_call(state, ins.FILTER, plugin, plugin.filter, state, pod, info)
        else:
            status = _call(plugin, plugin.filter, state, pod, info)
        if status.is_success:
            continue
        if status.code is Code.ERROR:
            # upstream RunFilterPlugins' wrapping, word for word (the text of the attempt's error)
            return Status(Code.ERROR, (f'running "{plugin.name}" filter plugin: {status.message}',), plugin.name)
        if rejectors is not None:
            rejectors.add(plugin.name)
        if failed is None:
            failed = status
            if not check_all:
                break
        else:
            failed = Status(max(failed.code, status.code), failed.reasons + status.reasons, failed.plugin)
    return failed if failed is not None else SUCCESS


def _pre_filter_code(failure: ScheduleResult | None) -> Code:
    """The PreFilter extension point's status label: Success, Error, or the rejection's code."""
    if failure is None:
        return Code.SUCCESS
    if failure.error is not None:
        return Code.ERROR
    return failure.diagnosis.absent_nodes_status.code


def _timed_call(state: CycleState, point: str, plugin: Plugin, method: Any, *args: Any) -> Status:
    """``_call``, timed as `plugin` at `point` when the cycle is sampled (``core/framework/instrumentation.py``)."""
    recorder = state.recorder
    if recorder is None or not state.sample_plugins:
        return _call(plugin, method, *args)
    started = recorder.clock()
    status = _call(plugin, method, *args)
    recorder.plugin(point, plugin.name, status.code, recorder.clock() - started)
    return status


def _call(plugin: Plugin, method: Any, *args: Any) -> Status:
    """Run one plugin method; stamp its name on anything but SUCCESS and SKIP themselves (nothing reads
    whose they were, and most calls answer one of them); turn an exception into an ERROR status."""
    try:
        status = method(*args)
    except Exception as exc:  # a strange pod must never crash the loop
        return Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",), plugin.name)
    if status is None or status is SUCCESS or status is SKIP:
        return SUCCESS if status is None else status
    stamped: Status = status.with_plugin(plugin.name)
    return stamped
