"""CostAware: an out-of-tree kopf-scheduler score plugin that prefers cheaper nodes.

Nodes carry their price as a label, ``example.com/hourly-cost: "0.42"`` (a decimal number). Among
the nodes a pod fits, the cheapest scores 100 and the most expensive 0, linearly in between; a
node without the label (or with a value that is not a non-negative decimal) scores 0, so unpriced
capacity is the last resort. When every priced node costs the same, each scores 100.

Use it in a SchedulingPolicy like any built-in plugin, after ``pip install`` of this package::

    priorities:
      - {name: CostAware, weight: 5, argument: {label: example.com/hourly-cost}}

It shows the whole plugin contract: a ``ScorePlugin`` (with ``PreScorePlugin`` to look at every
feasible node once per pod), typed arguments validated by the plugin's own dataclass (named on the
extension points: ``ScorePlugin[CostAwareArgs]``), and typed cycle state. ``cost_aware.binding`` adds
two plugins of the binding cycle that talk to the API server: ``HourlyCostAnnotation`` (PreBind: stamps
the price on the pod) and ``PricedBinder`` (Bind: binds pods on priced nodes itself, the price on the
Binding; DefaultBinder binds the others). The tests (``tests/``) import nothing of kopf_scheduler but
``kopf_scheduler.framework`` and the test kit, ``kopf_scheduler.testing``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

from kopf_scheduler.framework import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    NodeInfo,
    PluginArgsError,
    Pod,
    PreScorePlugin,
    ScorePlugin,
    Snapshot,
    StateKey,
    Status,
)

__all__ = [
    "CostAware",
    "CostAwareArgs",
    "HourlyCostAnnotation",
    "PricedBinder",
    "hourly_cost",
    "valid_label_key",
]

DEFAULT_LABEL: Final = "example.com/hourly-cost"
#: a qualified label key: an optional DNS prefix and "/", then a name of 1..63 characters
_LABEL_KEY: Final = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def valid_label_key(key: str) -> bool:
    """Whether `key` is a qualified label (or annotation) key: ``[prefix/]name``."""
    return bool(_LABEL_KEY.match(key))


@dataclass(frozen=True, slots=True)
class CostAwareArgs:
    """``argument`` of the plugin in a SchedulingPolicy."""

    #: the node label that holds the hourly cost
    label: str = DEFAULT_LABEL

    def __post_init__(self) -> None:
        if not valid_label_key(self.label):
            raise PluginArgsError("label", f"{self.label!r} is not a valid label key")


def hourly_cost(node: NodeInfo, label: str = DEFAULT_LABEL) -> Decimal | None:
    """The node's cost from its label, or None when it has none (or not a non-negative decimal)."""
    if node.node is None:
        return None
    raw = node.node.labels.get(label)
    if raw is None:
        return None
    try:
        cost = Decimal(raw)
    except InvalidOperation:
        return None
    return cost if cost.is_finite() and cost >= 0 else None


@dataclass(frozen=True, slots=True)
class _PriceRange:
    """The cheapest and dearest priced feasible node for this pod."""

    low: Decimal
    high: Decimal


class CostAware(PreScorePlugin[CostAwareArgs], ScorePlugin[CostAwareArgs]):
    NAME = "CostAware"  # its Args is CostAwareArgs, named above: self.args is one to type checkers too

    def __init__(self, args: CostAwareArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.label: str = self.args.label
        self._range = StateKey[_PriceRange](f"PreScore{self.name}")

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        costs = [c for c in (hourly_cost(n, self.label) for n in nodes) if c is not None]
        if not costs:
            return SKIP  # no feasible node is priced: every node would score 0
        state.write(self._range, _PriceRange(min(costs), max(costs)))
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        cost = hourly_cost(node, self.label)
        prices = state.read(self._range)
        if cost is None or prices is None:
            return 0
        if prices.high == prices.low:
            return MAX_NODE_SCORE
        return int((prices.high - cost) * MAX_NODE_SCORE / (prices.high - prices.low))


from .binding import HourlyCostAnnotation, PricedBinder  # noqa: E402  (it imports this module's helpers)
