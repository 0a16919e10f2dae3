"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods to make room for it.

Upstream ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`` (v1.9: the
alpha pod priority and preemption of ``generic_scheduler.go``). The decision is
``core/toolkit/preemption.py``'s ``preempt``; this plugin holds the arguments and prefixes its messages
with ``preemption: `` as upstream's PostFilter does. It is also the PodGroupPostFilter of the pod-group
cycle (upstream's ``PodGroupPostFilter``, GenericWorkload): a Workload-API gang that could not be placed
preempts as a whole (``core/toolkit/pod_group_preemption.py``), its messages prefixed with ``pod group
preemption: ``. A SchedulingPolicy gets it through ``spec.preemption`` (default true, as every upstream
profile enables it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..framework.arguments import PluginArgsError
from ..framework.basics import CycleState, Status
from ..framework.diagnosis import Diagnosis
from ..framework.interface import Handle, PostFilterPlugin, PostFilterResult
from ..framework.snapshot import Snapshot
from ..model.objects import Pod, PodGroup
from ..toolkit.pod_group_preemption import (
    PREFIX,
    GroupAlgorithm,
    PodGroupPostFilterPlugin,
    PodGroupPreemption,
    preempt_pod_group,
)
from ..toolkit.preemption import preempt


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    """Upstream ``DefaultPreemptionArgs`` with its defaults and validation: the dry run looks for
    ``min_candidate_nodes_percentage`` % of the nodes it may help, at least
    ``min_candidate_nodes_absolute`` of them."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def __post_init__(self) -> None:
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            raise PluginArgsError("minCandidateNodesPercentage", "not in valid range [0, 100]")
        if self.min_candidate_nodes_absolute < 0:
            raise PluginArgsError("minCandidateNodesAbsolute", "not in valid range [0, inf)")
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise PluginArgsError(
                "minCandidateNodesPercentage", "cannot be zero at the same time as minCandidateNodesAbsolute"
            )


class DefaultPreemption(PostFilterPlugin[DefaultPreemptionArgs], PodGroupPostFilterPlugin):
    NAME = "DefaultPreemption"

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis, handle: Handle
    ) -> PostFilterResult:
        args = self.args
        result = preempt(
            state, pod, snapshot, diagnosis, handle,
            min_candidate_nodes_percentage=args.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute=args.min_candidate_nodes_absolute,
        )  # fmt: skip
        status = result.status
        if not status.message:
            return result
        return dataclasses.replace(
            result, status=Status(status.code, (f"preemption: {status.message}",), status.plugin)
        )

    def pod_group_post_filter(
        self,
        group: PodGroup,
        members: Sequence[Pod],
        snapshot: Snapshot,
        algorithm: GroupAlgorithm,
        handle: Handle,
        *,
        nominated: Mapping[str, str],
    ) -> PodGroupPreemption:
        result = preempt_pod_group(group, members, snapshot, algorithm, handle, nominated=nominated)
        status = result.status
        if not status.message:
            return result
        return dataclasses.replace(result, status=Status(status.code, (PREFIX + status.message,), status.plugin))
