"""Framework timings without a clock: the edge lends a ``FrameworkRecorder``, the cycle reports to it.

Upstream (pkg/scheduler/framework/runtime/framework.go, schedule_one.go) observes two histograms:

- ``scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}``: every
  cycle, the whole of each extension point (Filter over all nodes at once);
- ``scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}``: each plugin call,
  but only in a sample of cycles (``pluginMetricsSamplePercent`` = 10, drawn per cycle with
  ``state.SetRecordPluginMetrics``), so the hot path pays a clock read per plugin call in one cycle
  out of ten and nothing in the others.

The core has no clock and draws nothing: the edge decides whether a cycle is sampled and passes its
recorder (``clock`` and the two observers) on the ``CycleState`` (``CycleState.recorder``,
``CycleState.sample_plugins``). Without a recorder nothing is timed (``simulate``, tests). A vector
Filter or Score plugin runs once over every node, so a sampled cycle has one observation of it
where upstream has one per node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .basics import Code

if TYPE_CHECKING:
    from .basics import CycleState

__all__ = [
    "BIND",
    "FILTER",
    "PERMIT",
    "PLUGIN_METRICS_SAMPLE_PERCENT",
    "POST_FILTER",
    "PRE_BIND",
    "PRE_FILTER",
    "PRE_SCORE",
    "RESERVE",
    "SCORE",
    "STATUS_LABELS",
    "plugin_done",
    "plugin_started",
    "point_done",
    "point_started",
]

#: upstream schedule_one.go: the share of cycles whose plugins are timed one by one
PLUGIN_METRICS_SAMPLE_PERCENT: Final = 10

# upstream pkg/scheduler/metrics/metrics.go extension point label values
PRE_FILTER: Final = "PreFilter"
FILTER: Final = "Filter"
POST_FILTER: Final = "PostFilter"
PRE_SCORE: Final = "PreScore"
SCORE: Final = "Score"
RESERVE: Final = "Reserve"
PERMIT: Final = "Permit"
PRE_BIND_PRE_FLIGHT: Final = "PreBindPreFlight"
PRE_BIND: Final = "PreBind"
BIND: Final = "Bind"

#: upstream ``Code.String()``: the status label values
STATUS_LABELS: Final[dict[Code, str]] = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def point_started(state: CycleState) -> float | None:
    """The clock when the cycle has a recorder, for ``point_done``; None otherwise."""
    return state.recorder.clock() if state.recorder is not None else None


def point_done(state: CycleState, started: float | None, point: str, code: Code) -> None:
    """An extension point begun at `started` (``point_started``) ended with `code`."""
    if started is not None and state.recorder is not None:
        state.recorder.extension_point(point, code, state.recorder.clock() - started)


def plugin_started(state: CycleState) -> float | None:
    """The clock when this cycle's plugins are sampled, for ``plugin_done``; None otherwise."""
    return state.recorder.clock() if state.sample_plugins and state.recorder is not None else None


def plugin_done(state: CycleState, started: float | None, point: str, plugin: str, code: Code) -> None:
    """Plugin `plugin`'s call at `point`, begun at `started` (``plugin_started``), ended with `code`."""
    if started is not None and state.recorder is not None:
        state.recorder.plugin(point, plugin, code, state.recorder.clock() - started)
