"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay close to each other.

Follows upstream ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`` (v1.37,
``balancedResourceScorer``): the score is the *change* in balance the pod brings. The balance of a
node is ``int((1 - std) * 100)`` of its per-resource fractions requested/allocatable (each capped at
1), over the configured ``resources`` (default cpu and memory, weight 1; weights must be 1); it is
computed with the pod (``with``) and without it (``without``), and the score is
``50 + (50 + with - without) / 2`` in Go integer arithmetic (see ``scoring.balance_change``): 75
when the pod leaves the balance as it was, up to 100 when it improves it, down to 50 when it
worsens it. Upstream sets ``useRequested``: the *real* requests are used, not the non-zero
defaults, for the pod and for the node sums alike. Resources with allocatable 0, and scalar
resources the pod does not request, take no part in either balance.

PreScore returns SKIP when the pod requests none of the configured resources (upstream's
best-effort skip, kubernetes#129138); the score plugin then contributes nothing for that pod.

A configured resource that is an extended resource some DeviceClass serves (DRAExtendedResource) counts,
on a node whose allocatable lacks it, the class's devices the node reaches and how many are allocated,
as NodeResourcesFit's scorers do (``core/dra/extended.py``'s ``dra_vectors``; upstream shares the code).
Upstream v1.37.2 builds this scorer without a CEL cache and panics (kube-scheduler exits) when that class
has selectors; we evaluate them as NodeResourcesFit does.

No NormalizeScore (upstream has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..dra.extended import DraScoring, dra_scoring, dra_vectors
from ..framework.basics import SKIP, SUCCESS, CycleState, StateKey, Status
from ..framework.interface import PreScorePlugin, SignFragment, SignPlugin, VectorScore
from ..model.resources import CPU, MEMORY
from ..toolkit import batching, scoring

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import NodeTable, Snapshot
    from ..model.objects import Pod


@dataclass(frozen=True, slots=True)
class BalancedAllocationArgs:
    """Upstream ``NodeResourcesBalancedAllocationArgs``: the resources, each with weight 1."""

    #: an empty list means the default, cpu and memory
    resources: tuple[scoring.ResourceSpec, ...] = scoring.DEFAULT_RESOURCES

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", scoring.DEFAULT_RESOURCES)
        scoring.check_resources(self.resources, "resources", weight_must_be_one=True, reject_duplicates=True)


class NodeResourcesBalancedAllocation(PreScorePlugin[BalancedAllocationArgs], VectorScore, SignPlugin):
    """Score by how balanced the node's resource use would be with the pod on it."""

    NAME = "NodeResourcesBalancedAllocation"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's requests (not signable when DRA may serve an extended resource)."""
        return batching.resources(pod, snapshot)

    def __init__(self, args: BalancedAllocationArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.resources: tuple[scoring.ResourceSpec, ...] = self.args.resources
        self._cpu_mem = {r.name for r in self.resources} == {CPU, MEMORY} and len(self.resources) == 2
        self._key = StateKey[tuple[int, ...]](f"PreScore{self.name}")
        self._dra_key = StateKey[DraScoring](f"PreScore{self.name}/dra")

    def _pod_requests(self, pod: Pod) -> tuple[int, ...]:
        return scoring.pod_request_list(pod, self.resources, use_requested=True)

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        requests = self._pod_requests(pod)
        if not any(requests):
            # Upstream skips best-effort pods so they do not all pile onto one node.
            return SKIP
        state.write(self._key, requests)
        dra = dra_scoring(self.resources, snapshot.objects.dra)
        if dra is not None:
            state.write(self._dra_key, dra)
        return SUCCESS

    def _requests(self, state: CycleState, pod: Pod) -> tuple[int, ...] | None:
        r = state.read(self._key)
        if r is None:
            r = self._pod_requests(pod)
        return r if any(r) else None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        requests = self._requests(state, pod)
        if requests is None:
            return 0
        requested, allocatable = scoring.node_vectors(self.resources, requests, node, use_requested=True)
        dra = state.read(self._dra_key)
        if dra is not None and node.node is not None:
            dra_vectors(dra, self.resources, requests, node.node, requested, allocatable)
        allocated = [r - p if a else 0 for r, p, a in zip(requested, requests, allocatable)]
        return scoring.balanced_allocation(requested, allocated, allocatable)

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        requests = self._requests(state, pod)
        if requests is None:
            return np.zeros(len(index), dtype=np.int64)
        if state.read(self._dra_key) is not None:  # the per-node form: devices are counted node by node
            return np.fromiter(
                (self.score(state, pod, table.info(k)) for k in index.tolist()), dtype=np.int64, count=len(index)
            )
        if self._cpu_mem:
            # |f_cpu - f_mem| is symmetric, so the resource order does not matter here
            r = pod.requests
            req2, alloc2, positive = scoring.cpu_mem_inputs(table, index, r.milli_cpu, r.memory, use_requested=True)
            if positive:
                allocated = req2 - np.array([[r.milli_cpu], [r.memory]], dtype=np.int64)
                return scoring.balanced_allocation_positive(req2, allocated, alloc2)
        requested, allocatable = scoring.table_vectors(self.resources, requests, table, index, use_requested=True)
        pod_column = np.asarray(requests, dtype=np.int64).reshape(-1, 1)
        allocated = np.where(allocatable > 0, requested - pod_column, 0)
        return scoring.balanced_allocation_nodes(requested, allocated, allocatable)
