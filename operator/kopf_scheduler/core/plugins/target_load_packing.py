"""TargetLoadPacking: pack nodes up to a target CPU utilisation, then spread (a best-fit bin packing on load).

Follows scheduler-plugins' Trimaran ``pkg/trimaran/targetloadpacking/targetloadpacking.go``. The pod's
predicted CPU is, per container, its cpu limit, else its cpu request x ``defaultRequestsMultiplier``
(rounded), else ``defaultRequests.cpu`` (upstream ``PredictUtilisation``), plus the pod overhead. With
``U`` the node's measured CPU in millicores (utilisation percent x the node's cpu capacity), ``M`` the
predicted CPU of the pods placed on the node since the sample and ``P`` the pod's,
``predicted = 100 (U + M + P) / capacity`` and, with ``T = targetUtilization``:

- ``predicted <= T``: ``round((100 - T) predicted / T + T)`` (from T on an idle node up to 100 at the target);
- ``T < predicted <= 100``: ``round(T (100 - predicted) / (100 - T))`` (down to 0 at full load);
- ``predicted > 100``: 0.

``round`` is Go's ``math.Round`` (halves away from zero). Capacity is the node's ``status.capacity``
cpu, as upstream (its allocatable when capacity is not reported).

Ours, not Trimaran's: the metrics come from ``args.metricsSource`` (``core/framework/usage.py``; upstream's
``watcherAddress`` / ``metricProvider`` are replaced by it), the pods placed since the sample are the
cache's pods that were not on the node when the sample arrived plus, as upstream, those scheduled less
than 60 s before the sample (``core.framework.usage.reading``), and a node without a fresh sample is scored from
its requests (``U`` = the cpu its pods request, ``M`` = 0) where upstream scores it 0; ``explain`` shows
which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..framework.arguments import PluginArgsError
from ..framework.basics import SUCCESS, CycleState, StateKey, Status
from ..framework.interface import PreScorePlugin, ScorePlugin
from ..framework.usage import SCORE_NOTES, MetricsSource, UsageNote, UsageSnapshot, go_round, reading, snapshot_for
from ..model.objects import Container, Pod
from ..model.resources import QuantityError, to_milli

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import Snapshot

DEFAULT_TARGET_UTILIZATION: Final = 40
DEFAULT_REQUESTS_MILLI_CPU: Final = 1000
DEFAULT_REQUESTS_MULTIPLIER: Final = "1.5"


@dataclass(frozen=True, slots=True)
class TargetLoadPackingArgs:
    """Trimaran's ``TargetLoadPackingArgs`` (defaults of its v1 API), with ``metricsSource`` for the watcher."""

    target_utilization: int = DEFAULT_TARGET_UTILIZATION
    default_requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": f"{DEFAULT_REQUESTS_MILLI_CPU}m"})
    default_requests_multiplier: str = DEFAULT_REQUESTS_MULTIPLIER
    metrics_source: MetricsSource = field(default_factory=MetricsSource)

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization < 100:
            raise PluginArgsError("targetUtilization", f"must be between 1 and 99, not {self.target_utilization}")
        unknown = sorted(set(self.default_requests) - {"cpu"})
        if unknown:
            raise PluginArgsError(f"defaultRequests.{unknown[0]}", "only cpu is predicted")
        try:
            if self.default_milli_cpu < 0:
                raise PluginArgsError("defaultRequests.cpu", "must not be negative")
        except QuantityError as exc:
            raise PluginArgsError("defaultRequests.cpu", str(exc)) from None
        try:
            multiplier = float(self.default_requests_multiplier)
        except ValueError:
            raise PluginArgsError(
                "defaultRequestsMultiplier", f"unable to parse {self.default_requests_multiplier!r} as a number"
            ) from None
        if not multiplier >= 0 or math.isinf(multiplier):
            raise PluginArgsError("defaultRequestsMultiplier", "must be a finite number >= 0")

    @property
    def default_milli_cpu(self) -> int:
        return to_milli(self.default_requests.get("cpu", f"{DEFAULT_REQUESTS_MILLI_CPU}m"))

    @property
    def multiplier(self) -> float:
        return float(self.default_requests_multiplier)


def predict_container(container: Container, *, multiplier: float, default_milli_cpu: int) -> int:
    """Upstream ``PredictUtilisation``: the cpu limit, else the request x multiplier, else the default."""
    if container.limits.milli_cpu:
        return container.limits.milli_cpu
    if container.requests.milli_cpu:
        return go_round(container.requests.milli_cpu * multiplier)
    return default_milli_cpu


def predict_pod(pod: Pod, *, multiplier: float, default_milli_cpu: int) -> int:
    """The pod's predicted cpu in millicores: its containers' predictions plus its overhead."""
    total = sum(
        predict_container(c, multiplier=multiplier, default_milli_cpu=default_milli_cpu) for c in pod.containers
    )
    return total + pod.overhead.milli_cpu


def packing_score(predicted: float, target: int) -> int:
    """The score of a node whose predicted utilisation is `predicted` percent (see the module docstring)."""
    if predicted > target:
        if predicted > 100:
            return 0
        return go_round(target * (100 - predicted) / (100 - target))
    return go_round((100 - target) * predicted / target + target)


class TargetLoadPacking(PreScorePlugin, ScorePlugin):
    """Score nodes by their predicted CPU utilisation with the pod, best at ``targetUtilization``."""

    NAME = "TargetLoadPacking"
    Args = TargetLoadPackingArgs

    def __init__(self, args: TargetLoadPackingArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.args: TargetLoadPackingArgs
        self._multiplier = self.args.multiplier
        self._default = self.args.default_milli_cpu
        self._key = StateKey[tuple[UsageSnapshot | None, int]](f"PreScore{self.name}")

    @property
    def metrics_source(self) -> MetricsSource:
        return self.args.metrics_source

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        usage = snapshot_for(snapshot.objects.node_usage, self.args.metrics_source)
        state.write(self._key, (usage, predict_pod(pod, multiplier=self._multiplier, default_milli_cpu=self._default)))
        if state.read(SCORE_NOTES) is None:
            state.write(SCORE_NOTES, {})
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        found = state.read(self._key)
        usage, pod_cpu = found if found is not None else (None, self._predict(pod))
        note = self.predicted_utilization(node, usage, pod_cpu)
        assert note.predicted_cpu is not None
        notes = state.read(SCORE_NOTES)
        if notes is not None:
            notes[(self.name, node.name)] = note
        return packing_score(note.predicted_cpu, self.args.target_utilization)

    def _predict(self, pod: Pod) -> int:
        return predict_pod(pod, multiplier=self._multiplier, default_milli_cpu=self._default)

    def predicted_utilization(self, node: NodeInfo, usage: UsageSnapshot | None, pod_cpu: int) -> UsageNote:
        """The node's predicted cpu percent with the pod (of `pod_cpu` millicores), with the reading it used."""
        r = reading(node, usage, stale_after=self.args.metrics_source.stale_after)
        capacity = node.node.capacity.milli_cpu if node.node is not None else 0
        capacity = capacity or node.allocatable.milli_cpu
        if r.from_metrics:
            used = r.measured_cpu / 100 * capacity
            missing = sum(self._predict(p) for p in r.added)
        else:
            used, missing = float(node.requested.milli_cpu), 0
        predicted = 100 * (used + pod_cpu + missing) / capacity if capacity else 0.0
        return UsageNote(r, predicted, missing)
