"""Profile: a validated, ready-to-run scheduling configuration for one scheduler name.

A ``SchedulingPolicy`` (``core/config/policy.py``) is validated into a Profile; the algorithm
(``core/scheduling/algorithm.py``) only ever reads Profiles. Plugins are live instances: one plugin class may
appear twice (e.g. NodeResourcesFit as the filter and again as a MostAllocated scorer), because each
entry is configured separately. The lists per extension point are computed once here, with
``isinstance``, so nothing per pod asks a plugin what it can do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..framework.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from ..plugins.priority_sort import PrioritySort
from .extenders import ExtenderConfig

__all__ = ["Profile"]

DEFAULT_POD_INITIAL_BACKOFF_SECONDS: Final = 1.0
DEFAULT_POD_MAX_BACKOFF_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str
    #: filter plugins in evaluation order (the first failing one decides a node's status)
    filters: tuple[FilterPlugin, ...] = ()
    #: (score plugin, weight)
    scorers: tuple[tuple[ScorePlugin, int], ...] = ()
    #: PreFilter plugins without a Filter (the gang plugins), run after the filters' PreFilters
    pre_filter_only: tuple[PreFilterPlugin, ...] = ()
    #: called in order when no node fits (preemption)
    post_filters: tuple[PostFilterPlugin, ...] = ()
    #: reserve, permit, pre-bind and bind run in this order for every plugin of the profile that has them
    plugins: tuple[Plugin, ...] = ()
    always_check_all_predicates: bool = False
    #: 0 means adaptive (upstream's default); otherwise 1..100
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = DEFAULT_POD_INITIAL_BACKOFF_SECONDS
    pod_max_backoff_seconds: float = DEFAULT_POD_MAX_BACKOFF_SECONDS
    extenders: tuple[ExtenderConfig, ...] = ()
    #: human description of where this came from ("DefaultProvider", "policy bin-packing gen 3")
    source: str = ""
    #: the normalised spec this profile was built from (for explaining decisions)
    spec: Mapping[str, Any] = field(default_factory=dict)
    #: orders the scheduler name's active queue (one per profile; ``spec.queueSort``)
    queue_sort: QueueSortPlugin = field(default_factory=PrioritySort)
    #: the extension points' plugins, computed once from the fields above (``__post_init__``)
    _points: _Points = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_points", _Points.of(self.filters, self.pre_filter_only, self.plugins))

    @property
    def filter_names(self) -> list[str]:
        return [p.name for p in self.filters]

    @property
    def score_names(self) -> list[tuple[str, int]]:
        return [(p.name, w) for p, w in self.scorers]

    # ---- extension points, in profile order

    @property
    def pre_filters(self) -> tuple[PreFilterPlugin, ...]:
        return self._points.pre_filters

    @property
    def reservers(self) -> tuple[ReservePlugin, ...]:
        return self._points.reservers

    @property
    def permitters(self) -> tuple[PermitPlugin, ...]:
        return self._points.permitters

    @property
    def pre_binders(self) -> tuple[PreBindPlugin, ...]:
        """PreBind plugins, in profile order: the binding cycle runs each before the bind."""
        return self._points.pre_binders

    @property
    def binders(self) -> tuple[BindPlugin, ...]:
        """Bind plugins, in profile order, DefaultBinder last (``core/config/policy.py`` appends it to every
        profile): the binding cycle asks each until one does not answer SKIP."""
        return self._points.binders


@dataclass(frozen=True, slots=True)
class _Points:
    """A profile's plugins per extension point, in profile order."""

    pre_filters: tuple[PreFilterPlugin, ...]
    reservers: tuple[ReservePlugin, ...]
    permitters: tuple[PermitPlugin, ...]
    pre_binders: tuple[PreBindPlugin, ...]
    binders: tuple[BindPlugin, ...]

    @staticmethod
    def of(
        filters: tuple[FilterPlugin, ...], pre_filter_only: tuple[PreFilterPlugin, ...], plugins: tuple[Plugin, ...]
    ) -> _Points:
        return _Points(
            tuple(p for p in filters if isinstance(p, PreFilterPlugin)) + tuple(pre_filter_only),
            tuple(p for p in plugins if isinstance(p, ReservePlugin)),
            tuple(p for p in plugins if isinstance(p, PermitPlugin)),
            tuple(p for p in plugins if isinstance(p, PreBindPlugin)),
            tuple(p for p in plugins if isinstance(p, BindPlugin)),
        )
