"""Profile: a validated, ready-to-run scheduling configuration for one scheduler name.

A ``SchedulingPolicy`` (``core/policy.py``) is validated into a Profile; the
algorithm (``core/algorithm.py``) only ever reads Profiles. Plugins are live
instances: one plugin class may appear twice (e.g. NodeResourcesFit as the
filter and again as a MostAllocated scorer), because each entry is configured
separately.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DEFAULT_POD_INITIAL_BACKOFF_SECONDS: Final = 1.0
DEFAULT_POD_MAX_BACKOFF_SECONDS: Final = 10.0
DEFAULT_HARD_POD_AFFINITY_WEIGHT: Final = 1


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """An HTTP extender (v1.9 Policy ``extenders``); the operator calls it, the core only carries it."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 1
    enable_https: bool = False
    http_timeout_seconds: float = 5.0
    node_cache_capable: bool = False
    ignorable: bool = False
    managed_resources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str
    #: filter plugins in evaluation order (the first failing one decides a node's status)
    filters: tuple[Any, ...] = ()
    #: (score plugin, weight)
    scorers: tuple[tuple[Any, int], ...] = ()
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

    @property
    def filter_names(self) -> list[str]:
        return [p.name for p in self.filters]

    @property
    def score_names(self) -> list[tuple[str, int]]:
        return [(p.name, w) for p, w in self.scorers]
