"""PrioritySort: the default QueueSort plugin, higher priority first, then the earlier enqueue time.

Follows upstream ``pkg/scheduler/framework/plugins/queuesort/priority_sort.go``: ``Less`` compares the
pods' priorities (``spec.priority``, resolved from the PriorityClass by admission) and, when they are
equal, their enqueue timestamps (a pod that failed re-enters with the time of its failure, so it
queues behind pods that came meanwhile). Every profile has it unless its policy names another
QueueSort plugin in ``spec.queueSort``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..framework.basics import priority_sort_less
from ..framework.interface import QueueSortPlugin

if TYPE_CHECKING:
    from ..framework.basics import QueuedPodInfo


class PrioritySort(QueueSortPlugin):
    NAME = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return priority_sort_less(a, b)
