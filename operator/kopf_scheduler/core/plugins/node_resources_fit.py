"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be.

Follows upstream ``pkg/scheduler/framework/plugins/noderesources/fit.go`` (v1.37):

- Filter (``fitsRequest``): the pod count first ("Too many pods"), then, only when the pod requests
  anything, cpu, memory, ephemeral-storage and each requested scalar resource against
  ``allocatable - requested``; every shortfall is reported as ``Insufficient <name>``. Extended
  resources named in ``ignoredResources``, or whose domain prefix is in ``ignoredResourceGroups``,
  are not checked. The status is Unschedulable, or UnschedulableAndUnresolvable when some request
  alone exceeds the node's allocatable (no preemption can help there), as upstream.
- The pod's request is ``Pod.requests``: pod-level ``spec.resources`` (PodLevelResources, beta and on
  in v1.37) replace the containers' cpu / memory sums.
- Score: the ``scoringStrategy`` (LeastAllocated by default, MostAllocated, RequestedToCapacityRatio)
  over the configured resources, with non-zero (defaulted) cpu/memory requests; see ``core/toolkit/scoring``.
  The incoming pod scores with its *containers'* requests (``Pod.container_non_zero_requests``):
  upstream builds the Fit scorer without the PodLevelResources flag (``getScorer`` in fit.go), while
  the node sums it adds them to do count bound pods' pod-level and resized requests.

Requeueing (``events_to_register``, upstream ``Fit.EventsToRegister`` and its hints): a node added or
grown that the pod fits when empty (an update that adds nothing the pod requests is skipped, as
upstream); room freed by a bound or nominated pod deleted, or shrunk in what the pod requests.
Beyond upstream, room freed on a node the pod cannot fit even empty is skipped too (upstream queues
then): at 5000 nodes joining with 2000 pods bigger than any node, every join or deletion would
otherwise retry every such pod (bench/bench_load.py).

DRA extended resources (DRAExtendedResource, GA in v1.37; upstream ``shouldDelegateResourceToDRA``): an
extended resource some DeviceClass serves (``core/dra/extended.py``) is not checked on a node whose
allocatable has none of it: DynamicResources allocates devices for it there. A DeviceClass added with
(or updated to) an extended resource name the pod requests moves the pod, as upstream's hint does; a
node added or grown where DRA would serve a requested resource too. When the scoring strategy's
resources include such a resource, a node without it in its allocatable scores it by the class's
devices it reaches (allocatable: how many, requested: how many are allocated plus the pod's
request; upstream ``calculateDRAExtendedResourceAllocatableRequest``).

Legacy names mapped here by the registry: PodFitsResources (filter), LeastRequestedPriority,
MostRequestedPriority, RequestedToCapacityRatioPriority (score, with the matching strategy).

Neither pre-filter nor pre-score skips: the pod count always matters, and the score varies by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import numpy.typing as npt

from ..dra.extended import DraScoring, dra_scoring, dra_vectors
from ..dra.extended import delegated as dra_delegated
from ..dra.objects import DEVICE_CLASS_RESOURCE_PREFIX, DeviceClass
from ..framework.arguments import PluginArgsError
from ..framework.basics import SUCCESS, CycleState, StateKey, Status, unresolvable, unschedulable
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from ..model.objects import Node, Pod
from ..model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from ..toolkit import batching, scoring

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..framework.snapshot import NodeTable, Snapshot

REASON_TOO_MANY_PODS: Final = "Too many pods"
REASON_INSUFFICIENT_CPU: Final = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY: Final = "Insufficient memory"
REASON_INSUFFICIENT_EPHEMERAL_STORAGE: Final = "Insufficient ephemeral-storage"
#: the reason for any other resource: ``INSUFFICIENT_FORMAT.format(name)``
INSUFFICIENT_FORMAT: Final = "Insufficient {}"


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    """One shortfall (upstream ``InsufficientResource``)."""

    name: str
    reason: str
    requested: int
    used: int
    capacity: int
    #: the request alone exceeds the node's allocatable: preempting pods cannot make room
    unresolvable: bool = False


def is_extended_resource(name: str) -> bool:
    """Upstream ``IsExtendedResourceName``: domain-prefixed, outside ``kubernetes.io``, not ``requests.*``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def insufficient_resources(
    request: Resources,
    node_info: NodeInfo,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
    delegated: frozenset[str] = frozenset(),
) -> list[InsufficientResource]:
    """Upstream ``fitsRequest``: every way ``request`` does not fit on ``node_info``, in check order.
    `delegated`: the requested resources DRA serves where the node has none (``core/dra/extended.py``)."""
    out: list[InsufficientResource] = []
    allowed = node_info.allowed_pod_number
    count = len(node_info.pods)
    if count + 1 > allowed:
        out.append(InsufficientResource(PODS, REASON_TOO_MANY_PODS, 1, count, allowed))
    if not (request.milli_cpu or request.memory or request.ephemeral_storage or request.scalar):
        return out
    alloc = node_info.allocatable
    used = node_info.requested
    for name, reason, want, have, cap in (
        (CPU, REASON_INSUFFICIENT_CPU, request.milli_cpu, used.milli_cpu, alloc.milli_cpu),
        (MEMORY, REASON_INSUFFICIENT_MEMORY, request.memory, used.memory, alloc.memory),
        (
            EPHEMERAL_STORAGE,
            REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
            request.ephemeral_storage,
            used.ephemeral_storage,
            alloc.ephemeral_storage,
        ),
    ):
        if want > 0 and want > cap - have:
            out.append(InsufficientResource(name, reason, want, have, cap, want > cap))
    for name, want in request.scalar.items():
        if want == 0:
            continue
        if is_extended_resource(name) and (name in ignored_resources or name.split("/", 1)[0] in ignored_groups):
            continue
        cap = alloc.scalar.get(name, 0)
        if cap <= 0 and name in delegated:
            continue
        have = used.scalar.get(name, 0)
        if want > cap - have:
            out.append(InsufficientResource(name, INSUFFICIENT_FORMAT.format(name), want, have, cap, want > cap))
    return out


def fits(pod: Pod, node_info: NodeInfo, delegated: frozenset[str] = frozenset()) -> Status:
    """The filter's verdict without arguments (upstream ``Fits``: no ignored resources), as a Status."""
    shortfalls = insufficient_resources(pod.requests, node_info, delegated=delegated)
    return _status_of(shortfalls) if shortfalls else SUCCESS


def _status_of(shortfalls: list[InsufficientResource]) -> Status:
    reasons = tuple(r.reason for r in shortfalls)
    if any(r.unresolvable for r in shortfalls):
        return unresolvable(*reasons)
    return unschedulable(*reasons)


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """Upstream ``ScoringStrategy``: how NodeResourcesFit scores, over which resources."""

    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    #: an empty list means the default, cpu and memory with weight 1
    resources: tuple[scoring.ResourceSpec, ...] = scoring.DEFAULT_RESOURCES
    requested_to_capacity_ratio: scoring.RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        if not self.resources:
            object.__setattr__(self, "resources", scoring.DEFAULT_RESOURCES)
        scoring.check_resources(self.resources, "resources")
        if self.type == scoring.REQUESTED_TO_CAPACITY_RATIO and self.requested_to_capacity_ratio is None:
            raise PluginArgsError("requestedToCapacityRatio", "required for type RequestedToCapacityRatio")


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    """Upstream ``NodeResourcesFitArgs``."""

    #: extended resources the filter does not check
    ignored_resources: tuple[str, ...] = ()
    #: extended-resource domains (the part before "/") the filter does not check
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = ScoringStrategy()

    def __post_init__(self) -> None:
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                raise PluginArgsError(f"ignoredResourceGroups[{i}]", "resource group name can't contain '/'")
        for key, names in (
            ("ignoredResources", self.ignored_resources),
            ("ignoredResourceGroups", self.ignored_resource_groups),
        ):
            for i, name in enumerate(names):
                if not name:
                    raise PluginArgsError(f"{key}[{i}]", "must be a non-empty string")


class NodeResourcesFit(
    PreFilterPlugin[NodeResourcesFitArgs], VectorFilter, PreScorePlugin, VectorScore, EnqueueExtensions, SignPlugin
):
    """Filter on requests vs allocatable; score by the configured allocation strategy."""

    NAME = "NodeResourcesFit"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's requests (not signable when DRA may serve an extended resource)."""
        return batching.resources(pod, snapshot)

    def __init__(self, args: NodeResourcesFitArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.ignored_resources = frozenset(self.args.ignored_resources)
        self.ignored_resource_groups = frozenset(self.args.ignored_resource_groups)
        self.strategy = self.args.scoring_strategy
        self._weights = tuple(s.weight for s in self.strategy.resources)
        rtcr = self.strategy.requested_to_capacity_ratio
        self._shape: scoring.Shape = rtcr.scaled if rtcr is not None else ()
        self._shape_table = scoring.shape_table(self._shape) if self._shape else None
        # (cpu weight, memory weight) when the strategy scores exactly cpu and memory: the fast path
        by_name = {r.name: r.weight for r in self.strategy.resources}
        self._cpu_mem_weights: tuple[int, int] | None = None
        if len(self.strategy.resources) == 2 and set(by_name) == {CPU, MEMORY}:
            self._cpu_mem_weights = (by_name[CPU], by_name[MEMORY])
        self._filter_key = StateKey[Resources](f"PreFilter{self.name}")
        self._dra_key = StateKey[frozenset[str]](f"PreFilter{self.name}/dra")
        self._score_key = StateKey[tuple[int, ...]](f"PreScore{self.name}")
        self._dra_score_key = StateKey[DraScoring](f"PreScore{self.name}/dra")

    # ------------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(self._filter_key, pod.requests)
        if pod.requests.scalar:
            state.write(self._dra_key, dra_delegated(pod.requests.scalar, snapshot.objects.dra))
        return SUCCESS

    def _delegated(self, state: CycleState) -> frozenset[str]:
        return state.read(self._dra_key) or frozenset()

    def _request(self, state: CycleState, pod: Pod) -> Resources:
        r = state.read(self._filter_key)
        return r if r is not None else pod.requests

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        shortfalls = insufficient_resources(
            self._request(state, pod),
            node,
            self.ignored_resources,
            self.ignored_resource_groups,
            self._delegated(state),
        )
        return _status_of(shortfalls) if shortfalls else SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        r = self._request(state, pod)
        delegated = self._delegated(state)
        # Work on whole columns and gather once: cheaper than gathering every column first.
        ok = table.pod_count < table.alloc_pods
        if r.milli_cpu or r.memory or r.ephemeral_storage or r.scalar:
            if r.milli_cpu > 0:
                ok &= table.req_cpu <= table.alloc_cpu - r.milli_cpu
            if r.memory > 0:
                ok &= table.req_mem <= table.alloc_mem - r.memory
            if r.ephemeral_storage > 0:
                ok &= table.req_eph <= table.alloc_eph - r.ephemeral_storage
            for name, want in r.scalar.items():
                if want == 0:
                    continue
                if is_extended_resource(name) and (
                    name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_resource_groups
                ):
                    continue
                alloc = table.scalar_allocatable(name)
                fit = table.scalar_requested(name) <= alloc - want
                ok &= (fit | (alloc <= 0)) if name in delegated else fit
        return ok[index]

    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> tuple[list[Status], npt.NDArray[np.intp]] | None:
        """``filter``'s statuses over many nodes: each shortfall of ``insufficient_resources`` as a
        column, in its check order; the nodes grouped by which shortfalls they have."""
        r = self._request(state, pod)
        delegated = self._delegated(state)
        # (reason, short of it per node, the request alone exceeds allocatable per node)
        checks: list[tuple[str, npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]] = [
            (REASON_TOO_MANY_PODS, table.pod_count[index] + 1 > table.alloc_pods[index], None)
        ]
        if r.milli_cpu or r.memory or r.ephemeral_storage or r.scalar:
            for reason, want, used, alloc in (
                (REASON_INSUFFICIENT_CPU, r.milli_cpu, table.req_cpu, table.alloc_cpu),
                (REASON_INSUFFICIENT_MEMORY, r.memory, table.req_mem, table.alloc_mem),
                (REASON_INSUFFICIENT_EPHEMERAL_STORAGE, r.ephemeral_storage, table.req_eph, table.alloc_eph),
            ):
                if want > 0:
                    cap = alloc[index]
                    checks.append((reason, want > cap - used[index], want > cap))
            for name, want in r.scalar.items():
                if want == 0 or (
                    is_extended_resource(name)
                    and (name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_resource_groups)
                ):
                    continue
                cap = table.scalar_allocatable(name)[index]
                short = want > cap - table.scalar_requested(name)[index]
                if name in delegated:
                    short &= cap > 0
                checks.append((INSUFFICIENT_FORMAT.format(name), short, want > cap))
        if len(checks) > 31:  # the key below holds two bits a check
            return None
        key = np.zeros(len(index), dtype=np.int64)
        for bit, (_, short, alone) in enumerate(checks):
            key |= short.astype(np.int64) << (2 * bit)
            if alone is not None:
                key |= (short & alone).astype(np.int64) << (2 * bit + 1)
        distinct, which = np.unique(key, return_inverse=True)
        statuses = []
        for k in distinct.tolist():
            reasons = tuple(reason for bit, (reason, _, _) in enumerate(checks) if k >> (2 * bit) & 1)
            if not reasons:  # filter_nodes rejected a node no check finds short: let the per-node form say
                return None
            unfixable = any(k >> (2 * bit + 1) & 1 for bit in range(len(checks)))
            statuses.append(unresolvable(*reasons) if unfixable else unschedulable(*reasons))
        return statuses, which.reshape(-1).astype(np.intp)

    # ------------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        # No SKIP: upstream never skips, and the score differs between nodes for any pod.
        state.write(self._score_key, scoring.pod_request_list(pod, self.strategy.resources, use_requested=False))
        dra = dra_scoring(self.strategy.resources, snapshot.objects.dra)
        if dra is not None:
            state.write(self._dra_score_key, dra)
        return SUCCESS

    def _pod_requests(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        r = state.read(self._score_key)
        return r if r is not None else scoring.pod_request_list(pod, self.strategy.resources, use_requested=False)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        pod_requests = self._pod_requests(state, pod)
        requested, allocatable = scoring.node_vectors(self.strategy.resources, pod_requests, node, use_requested=False)
        dra = state.read(self._dra_score_key)
        if dra is not None and node.node is not None:
            dra_vectors(dra, self.strategy.resources, pod_requests, node.node, requested, allocatable)
        kind = self.strategy.type
        if kind == scoring.LEAST_ALLOCATED:
            return scoring.least_allocated(requested, allocatable, self._weights)
        if kind == scoring.MOST_ALLOCATED:
            return scoring.most_allocated(requested, allocatable, self._weights)
        return scoring.requested_to_capacity_ratio(requested, allocatable, self._weights, self._shape)

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        pod_requests = self._pod_requests(state, pod)
        kind = self.strategy.type
        dra = state.read(self._dra_score_key)
        if dra is not None:  # the per-node form: devices are counted node by node
            return np.fromiter(
                (self.score(state, pod, table.info(k)) for k in index.tolist()), dtype=np.int64, count=len(index)
            )
        if self._cpu_mem_weights is not None and kind != scoring.REQUESTED_TO_CAPACITY_RATIO:
            nz = pod.container_non_zero_requests
            requested, allocatable, positive = scoring.cpu_mem_inputs(
                table, index, nz.milli_cpu, nz.memory, use_requested=False
            )
            if positive:
                if kind == scoring.LEAST_ALLOCATED:
                    return scoring.least_allocated_positive(requested, allocatable, self._cpu_mem_weights)
                return scoring.most_allocated_positive(requested, allocatable, self._cpu_mem_weights)
        requested, allocatable = scoring.table_vectors(
            self.strategy.resources, pod_requests, table, index, use_requested=False
        )
        if kind == scoring.LEAST_ALLOCATED:
            return scoring.least_allocated_nodes(requested, allocatable, self._weights)
        if kind == scoring.MOST_ALLOCATED:
            return scoring.most_allocated_nodes(requested, allocatable, self._weights)
        assert self._shape_table is not None
        return scoring.requested_to_capacity_ratio_nodes(requested, allocatable, self._weights, self._shape_table)

    # ------------------------------------------------------------------ requeueing

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Nodes added or grown; room freed by a bound pod deleted or shrunk; a DeviceClass serving a
        requested extended resource (see the module docstring)."""

        def room_freed(pod: Pod, old: object, new: object) -> QueueingHint:
            return self._after_room_freed(handle, pod, old, new)

        def node_changed(pod: Pod, old: object, new: object) -> QueueingHint:
            return self._after_node_change(handle, pod, old, new)

        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD, node_changed),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE, node_changed),
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, room_freed),
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_SCALE_DOWN, room_freed),
            ClusterEventWithHint(ClusterEvent.DEVICE_CLASS_CHANGE, _after_device_class_change),
        )

    def _fits_empty(self, pod: Pod, node: Node, delegated: frozenset[str] = frozenset()) -> bool:
        """Upstream ``isFit``: the pod's requests fit `node` with nothing on it (``insufficient_resources``
        on an empty node, written out: a node joining asks it of every pod that fits nowhere)."""
        if node.allowed_pod_number < 1:
            return False
        r, alloc = pod.requests, node.allocatable
        if r.milli_cpu > alloc.milli_cpu or r.memory > alloc.memory or r.ephemeral_storage > alloc.ephemeral_storage:
            return False
        for name, want in r.scalar.items():
            cap = alloc.scalar.get(name, 0)
            if want > cap and not (
                (
                    is_extended_resource(name)
                    and (name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_resource_groups)
                )
                or (cap <= 0 and name in delegated)
            ):
                return False
        return True

    def _after_node_change(self, handle: EnqueueHandle, pod: Pod, old: object, new: object) -> QueueingHint:
        """Upstream ``isSchedulableAfterNodeChange``: a node the pod fits when empty, new or grown in
        what the pod requests (or in the number of pods it takes), or where DRA serves what it requests."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        delegated = dra_delegated(pod.requests.scalar, handle.objects.dra) if pod.requests.scalar else frozenset()
        if not self._fits_empty(pod, new, delegated):
            return QueueingHint.QUEUE_SKIP
        if not isinstance(old, Node) or _grew_for(pod.requests, old, new, delegated):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def _after_room_freed(self, handle: EnqueueHandle, pod: Pod, old: object, new: object) -> QueueingHint:
        """Upstream ``isSchedulableAfterAssignedPodDelete`` / ``...ScaleDown``: a pod that held room (bound
        or nominated) gave back some of what this pod requests; ours: on a node the pod fits when empty."""
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        if isinstance(new, Pod) and not _shrank_for(pod.requests, old.requests, new.requests):
            return QueueingHint.QUEUE_SKIP
        if not old.node_name:
            return QueueingHint.QUEUE if old.nominated_node_name else QueueingHint.QUEUE_SKIP
        info = handle.get_node_info(old.node_name)
        if info is None or info.node is None:
            return QueueingHint.QUEUE
        delegated = dra_delegated(pod.requests.scalar, handle.objects.dra) if pod.requests.scalar else frozenset()
        return QueueingHint.QUEUE if self._fits_empty(pod, info.node, delegated) else QueueingHint.QUEUE_SKIP


def _after_device_class_change(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterDeviceClassEvent``: a class added whose implicit name the pod requests,
    or added or updated with an extended resource name the pod requests (a changed one, for an update)."""
    if not isinstance(new, DeviceClass):
        return QueueingHint.QUEUE_SKIP  # upstream registers additions and updates only
    requested = pod.requests.scalar
    if isinstance(old, DeviceClass):
        if (old.extended_resource_name or "") == (new.extended_resource_name or ""):
            return QueueingHint.QUEUE_SKIP
    elif DEVICE_CLASS_RESOURCE_PREFIX + new.name in requested:
        return QueueingHint.QUEUE
    if new.extended_resource_name is not None and new.extended_resource_name in requested:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def _grew_for(request: Resources, old: Node, new: Node, delegated: frozenset[str] = frozenset()) -> bool:
    """Upstream ``haveAnyRequestedResourcesIncreased``: more pods allowed, or more of a requested resource,
    or a requested resource DRA serves on the new node."""
    if new.allowed_pod_number > old.allowed_pod_number:
        return True
    before, after = old.allocatable, new.allocatable
    if (
        (request.milli_cpu > 0 and after.milli_cpu > before.milli_cpu)
        or (request.memory > 0 and after.memory > before.memory)
        or (request.ephemeral_storage > 0 and after.ephemeral_storage > before.ephemeral_storage)
    ):
        return True
    return any(
        want > 0
        and (
            after.scalar.get(name, 0) > before.scalar.get(name, 0)
            or (name in delegated and after.scalar.get(name, 0) <= 0)
        )
        for name, want in request.scalar.items()
    )


def _shrank_for(request: Resources, before: Resources, after: Resources) -> bool:
    """Upstream ``haveEnoughRelevantResourcesDecreased``: a resource the pod requests went down."""
    if (
        (request.milli_cpu > 0 and after.milli_cpu < before.milli_cpu)
        or (request.memory > 0 and after.memory < before.memory)
        or (request.ephemeral_storage > 0 and after.ephemeral_storage < before.ephemeral_storage)
    ):
        return True
    return any(
        want > 0 and after.scalar.get(name, 0) < before.scalar.get(name, 0) for name, want in request.scalar.items()
    )
