"""LoadVariationRiskBalancing: balance the risk of load variation (mean + margin x deviation) across nodes.

Follows scheduler-plugins' Trimaran ``pkg/trimaran/loadvariationriskbalancing`` (``Score`` and
``computeScore``) and ``pkg/trimaran/resourcestats.go``. Per resource (cpu in millicores, memory in
MiB), with the node's allocatable as capacity, the pod's request ``req``, the measured average ``avg``
and standard deviation ``sd`` (percent of capacity, made absolute)::

    mu    = clamp((avg + req) / capacity, 0, 1)
    sigma = clamp(sd / capacity, 0, 1) ** (1 / safeVarianceSensitivity)   (when sensitivity >= 0)
    sigma = clamp(sigma * safeVarianceMargin, 0, 1)
    score = (1 - (mu + sigma) / 2) * 100

The node's score is the lower of the cpu and memory scores (only cpu's when the source measures no
memory), rounded as Go's ``math.Round``. Defaults: margin 1, sensitivity 1.

Ours, not Trimaran's: the metrics come from ``args.metricsSource`` (``core/framework/usage.py``); pods placed
on the node since its sample count at their requests in ``avg`` (Trimaran's LoadVariationRiskBalancing
does not count them); a node without a fresh sample is scored from its requests (``avg`` = what its pods
request, ``sd`` = 0) where upstream scores it 0. metrics-server reports no deviation, so with the
MetricsAPI source ``sd`` is 0 and the score is the mean's alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..framework.arguments import PluginArgsError
from ..framework.basics import MAX_NODE_SCORE, SUCCESS, CycleState, StateKey, Status
from ..framework.interface import PreScorePlugin, ScorePlugin
from ..framework.usage import SCORE_NOTES, MetricsSource, UsageNote, UsageSnapshot, go_round, reading, snapshot_for
from ..model.objects import Pod

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import Snapshot

DEFAULT_SAFE_VARIANCE_MARGIN: Final = 1.0
DEFAULT_SAFE_VARIANCE_SENSITIVITY: Final = 1.0
#: upstream ``MegaFactor``: memory is compared in MiB
MEGA_FACTOR: Final = 1.0 / 1024.0 / 1024.0


@dataclass(frozen=True, slots=True)
class LoadVariationRiskBalancingArgs:
    """Trimaran's ``LoadVariationRiskBalancingArgs``, with ``metricsSource`` for the watcher."""

    safe_variance_margin: float = DEFAULT_SAFE_VARIANCE_MARGIN
    safe_variance_sensitivity: float = DEFAULT_SAFE_VARIANCE_SENSITIVITY
    metrics_source: MetricsSource = field(default_factory=MetricsSource)

    def __post_init__(self) -> None:
        for key, value in (
            ("safeVarianceMargin", self.safe_variance_margin),
            ("safeVarianceSensitivity", self.safe_variance_sensitivity),
        ):
            if not value >= 0 or math.isinf(value):
                raise PluginArgsError(key, f"must be a finite number >= 0, not {value}")


def _clamp(x: float) -> float:
    return max(min(x, 1.0), 0.0)


def risk_score(
    used_avg: float, used_std: float, req: float, capacity: float, *, margin: float, sensitivity: float
) -> float:
    """Upstream ``computeScore`` for one resource (absolute numbers, same unit): 0..100, not rounded."""
    if capacity <= 0:
        return 0.0
    req = max(req, 0.0)
    used_avg = max(min(used_avg, capacity), 0.0)
    used_std = max(min(used_std, capacity), 0.0)
    mu = _clamp((used_avg + req) / capacity)
    sigma = _clamp(used_std / capacity)
    if sensitivity > 0:
        sigma = sigma ** (1 / sensitivity)
    elif sensitivity == 0:
        sigma = 1.0 if sigma >= 1 else 0.0  # Go: Pow(x, +Inf) is 0 for |x| < 1, 1 for x == 1
    sigma = _clamp(sigma * margin)
    risk = (mu + sigma) / 2
    return (1.0 - risk) * MAX_NODE_SCORE


class LoadVariationRiskBalancing(PreScorePlugin[LoadVariationRiskBalancingArgs], ScorePlugin):
    """Score nodes by the risk of their cpu and memory load (mean plus margin x deviation)."""

    NAME = "LoadVariationRiskBalancing"

    def __init__(self, args: LoadVariationRiskBalancingArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[UsageSnapshot | None](f"PreScore{self.name}")

    @property
    def metrics_source(self) -> MetricsSource:
        return self.args.metrics_source

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        state.write(self._key, snapshot_for(snapshot.objects.node_usage, self.args.metrics_source))
        if state.read(SCORE_NOTES) is None:
            state.write(SCORE_NOTES, {})
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        score, note = self.node_score(pod, node, state.read(self._key))
        notes = state.read(SCORE_NOTES)
        if notes is not None:
            notes[(self.name, node.name)] = note
        return score

    def node_score(self, pod: Pod, node: NodeInfo, usage: UsageSnapshot | None) -> tuple[int, UsageNote]:
        """The node's score and the note ``explain`` shows."""
        a = self.args
        r = reading(node, usage, stale_after=a.metrics_source.stale_after)
        alloc = node.allocatable
        cap_cpu = float(alloc.milli_cpu)
        cpu = risk_score(
            r.cpu * cap_cpu / 100,
            r.cpu_std * cap_cpu / 100,
            float(pod.requests.milli_cpu),
            cap_cpu,
            margin=a.safe_variance_margin,
            sensitivity=a.safe_variance_sensitivity,
        )
        if r.memory is None:
            return go_round(cpu), UsageNote(r)
        cap_mem = alloc.memory * MEGA_FACTOR
        memory = risk_score(
            r.memory * cap_mem / 100,
            r.memory_std * cap_mem / 100,
            pod.requests.memory * MEGA_FACTOR,
            cap_mem,
            margin=a.safe_variance_margin,
            sensitivity=a.safe_variance_sensitivity,
        )
        return go_round(min(cpu, memory)), UsageNote(r)
