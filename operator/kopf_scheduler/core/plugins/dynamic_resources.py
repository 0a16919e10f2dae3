"""DynamicResources: a pod's ResourceClaims must be allocatable on the node (DRA, structured parameters).

Follows upstream ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` (v1.37.2,
default feature gates); the allocator is ``core/dra/allocator.py``, the cluster's DRA objects and the
allocations in flight are ``core/dra/tracker.py`` (upstream's DRA manager). Every rejection is
UnschedulableAndUnresolvable, as upstream's ``statusUnschedulable`` makes it.

- PreEnqueue (``pre_enqueue``, for the queue): a pod whose claims do not all exist waits.
- PreFilter: SKIP for a pod without ``spec.resourceClaims`` and without extended resources (it costs
  two dictionary lookups). Each claim must exist (``could not find ResourceClaim "<ns>/<name>"``; a
  template's claim must be in ``status.resourceClaimStatuses``: ``pod "<ns>/<pod>": ResourceClaim
  not created yet``), not be deleted, and be owned by the pod when generated from a template. A pod
  requesting an extended resource some DeviceClass serves (DRAExtendedResource, ``core/dra/extended.py``)
  gets one more claim, last: the one an earlier cycle created for it (annotated, owned by the pod), or
  an in-memory one named ``<extended-resources>``. An allocated claim must be reservable
  (``resourceclaim in use``) and restricts the nodes to its allocation's node selector; an unallocated
  one must not be in flight for another pod (``resource claim <ns>/<name> is in the process of being
  allocated``) and its classes must exist (``request <r>: device class <c> does not exist``; not
  checked for the extended-resource claim). The allocator is set up once per cycle, on the slices
  with DeviceTaintRules applied (``DraTracker.patched_slices``).
- Filter: the extended-resource claim first: one from an earlier cycle fails every node (``cannot
  schedule extended resource claim``: PostFilter deletes it); a served resource the node does not
  advertise is asked of DRA (one request per container, ``core/dra/extended.py``), one that no class
  serves and the node lacks fails (``cannot fit resource``). Then allocated claims whose node selector
  does not match: ``resourceclaim not available on the node`` (remembered for PostFilter); the
  unallocated ones (with this node's extended-resource claim) must be allocatable on the node
  (``cannot allocate all claims``); an allocator error (a CEL error, a class that vanished...) is an
  ERROR, and so is a search longer than ``filterTimeout`` (DRASchedulerFilterTimeout, 10 s by default,
  0 disables it; measured with the edge's clock, ``DraTracker.clock``): ``node <n>: timed out trying
  to allocate devices``. The allocation found is kept per node for Score and Reserve.
- PostFilter: when no node fits and an allocated claim was unavailable, a claim reserved for nobody
  (or only for this pod) is deallocated so another node may be tried: the write goes to the tracker's
  outbox (``DraTracker.drain``) and the status is Unschedulable ``deallocation of ResourceClaim
  completed``; an extended-resource claim from an earlier cycle is deleted instead (``deletion of
  ResourceClaim completed``). The next PostFilter plugin, DefaultPreemption, still runs, as upstream.
  A pod whose PreFilter never ran (an earlier PreFilter rejected it) gets upstream's ERROR ``not
  found``, which ends the PostFilter stage.
- Score (weight 2 in the default profile): the prioritized-list score, for each allocated
  ``firstAvailable`` subrequest ``8 - its index``, normalised by the maximum; 0 without claims.
  Each scored node's devices go to ``explain`` as the score's note (``DeviceNote``).
- Reserve: the node's allocations become allocations in flight (the next pod cannot take the devices);
  Unreserve releases them and, for a claim PreBind had already reserved for the pod, queues the patch
  removing the pod from ``reservedFor``; an extended-resource claim PreBind had created is deleted
  (its finalizer removed first).
- PreBindPreFlight: work for every pod with claims or extended resources DRA serves (so the pod is
  nominated to its node before binding, upstream's NominatedNodeNameForExpectation), none without.
- PreBind: the extended-resource claim is created first (``generateName: <pod>-extended-resources-``);
  then for each claim not yet reserved for the pod, add the finalizer if missing (an update),
  then write ``status.allocation`` (when Reserve allocated it) and append the pod to ``reservedFor``
  (a status update), retried on conflicts as upstream's ``retry.DefaultRetry`` (5 tries, re-reading
  the claim); the result is assumed in the tracker and the in-flight allocation released. The pod's
  ``status.extendedResourceClaimStatus`` then names the claim and which request serves which
  container's resource. The writes are pure functions of the claim (``finalizer_write``, ``status_write``).

Not supported (clear errors rather than different decisions): waiting in PreBind for devices'
binding conditions (an ERROR names the devices), PodGroup-scoped claims (DRAWorkloadResourceClaims,
beta, off), node-allocatable resources (alpha). The binding-conditions timeout in Filter is not checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from ..dra.allocator import AllocationError, AllocationTimeout, Allocator, Features, NodeAllocationError
from ..dra.extended import (
    SPECIAL_CLAIM_NAME,
    RequestMapping,
    is_dra_extended_resource_name,
    maps_some_resource,
    requests_and_mappings,
    special_claim_body,
)
from ..dra.objects import (
    ADMIN_ACCESS_LABEL,
    FINALIZER,
    FIRST_AVAILABLE_MAX_SIZE,
    AllocationResult,
    ConsumerReference,
    PodClaims,
    ResourceClaim,
)
from ..dra.parsing import allocation_body, parse_resource_claim
from ..dra.tracker import ApiWrite, DraTracker
from ..framework import basics, interface
from ..framework.arguments import PluginArgsError
from ..framework.basics import CycleState, StateKey, Status
from ..framework.interface import (
    ApiClient,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    FilterPlugin,
    Handle,
    NormalizeScorePlugin,
    PermitHandle,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    ReservePlugin,
    SignFragment,
    SignPlugin,
    VectorScore,
)
from ..framework.nodeinfo import NodeInfo
from ..framework.usage import SCORE_NOTES
from ..model import paths
from ..model.objects import NodeSelectorTerm, Pod
from ..model.specs import parse_duration

if TYPE_CHECKING:
    from ..framework.diagnosis import Diagnosis
    from ..framework.snapshot import ClusterObjects, NodeTable, Snapshot

NAME: Final = "DynamicResources"

ERR_CLAIM_IN_USE: Final = "resourceclaim in use"
ERR_NOT_AVAILABLE: Final = "resourceclaim not available on the node"
ERR_CANNOT_ALLOCATE: Final = "cannot allocate all claims"
MSG_DEALLOCATED: Final = "deallocation of ResourceClaim completed"
MSG_DELETED: Final = "deletion of ResourceClaim completed"
#: DRAExtendedResource: an extended-resource claim of an earlier cycle (PostFilter deletes it)
ERR_STALE_EXTENDED_CLAIM: Final = "cannot schedule extended resource claim"
#: DRAExtendedResource: a requested extended resource neither the node nor a DeviceClass provides
ERR_CANNOT_FIT_RESOURCE: Final = "cannot fit resource"
#: upstream ``ResourceClaimReservedForMaxSize``: a claim with this many consumers takes no more
RESERVED_FOR_MAX_SIZE: Final = 256
#: upstream ``DynamicResourcesFilterTimeoutDefault`` / ``BindingTimeoutDefault`` (seconds)
FILTER_TIMEOUT_DEFAULT: Final = 10.0
BINDING_TIMEOUT_DEFAULT: Final = 600.0
#: upstream ``fwk.ErrNotFound``: PostFilter for a pod whose PreFilter never ran
ERR_STATE_NOT_FOUND: Final = "not found"
RESOURCE_API: Final = "resource.k8s.io/v1"
#: the binding cycle may put the bind time (RFC 3339) here; PreBind writes it as ``allocationTimestamp``
BIND_TIME: Final = StateKey[str]("DynamicResources/bind-time")
#: retry.DefaultRetry's steps
CONFLICT_RETRIES: Final = 5


def claim_not_found(namespace: str, name: str) -> str:
    return f'could not find ResourceClaim "{namespace}/{name}"'


def claim_not_created(pod: Pod) -> str:
    return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'


def claim_deleting(name: str) -> str:
    return f'resourceclaim "{name}" is being deleted'


def claim_in_flight(claim: ResourceClaim) -> str:
    return f"resource claim {claim.key} is in the process of being allocated"


def class_missing(request: str, device_class: str) -> str:
    return f"request {request}: device class {device_class} does not exist"


def timed_out(node: str) -> str:
    return f"node {node}: timed out trying to allocate devices"


@dataclass(frozen=True, slots=True)
class DynamicResourcesArgs:
    """Upstream ``DynamicResourcesArgs``: Go durations ("10s", "500ms"), as ``metav1.Duration`` is written.

    ``filterTimeout``: how long Filter may search one node's devices before the attempt fails with an
    error (DRASchedulerFilterTimeout, beta and on in v1.37; "0s" disables it). ``bindingTimeout`` is
    accepted and validated (at least 1 s) as upstream does; PreBind does not wait for binding conditions
    here (it refuses such devices), so it is not used."""

    filter_timeout: str = "10s"
    binding_timeout: str = "600s"

    def __post_init__(self) -> None:
        filter_timeout = _seconds(self.filter_timeout)
        if filter_timeout is None:
            raise PluginArgsError("filterTimeout", f"not a duration: {self.filter_timeout!r}")
        if filter_timeout < 0:
            raise PluginArgsError("filterTimeout", "must be zero or positive")
        binding_timeout = _seconds(self.binding_timeout)
        if binding_timeout is None:
            raise PluginArgsError("bindingTimeout", f"not a duration: {self.binding_timeout!r}")
        if binding_timeout < 1:
            raise PluginArgsError("bindingTimeout", "must be at least 1s")

    @property
    def filter_seconds(self) -> float:
        seconds = _seconds(self.filter_timeout)
        assert seconds is not None  # checked in __post_init__
        return seconds


def _seconds(value: str) -> float | None:
    """A Go duration in seconds (``time.ParseDuration``: a unit on every number, except a bare "0")."""
    if not isinstance(value, str):
        return None
    text = value[1:] if value[:1] in "+-" else value
    if text == "0":
        return 0.0
    seconds = parse_duration(text) if text else None
    return None if seconds is None else (-seconds if value.startswith("-") else seconds)


# --------------------------------------------------------------------------- the pod's claims


def pod_claims(pod: Pod) -> PodClaims:
    """The pod's claim references (``Pod.resource_claims``, parsed with the pod)."""
    return pod.resource_claims


def dra_of(objects: ClusterObjects) -> DraTracker:
    """The cluster's DRA store (``ClusterObjects.dra``: one tracker shared by every snapshot)."""
    return objects.dra


def resolve_claims(pod: Pod, refs: PodClaims, tracker: DraTracker) -> list[ResourceClaim] | str:
    """Upstream ``foreachPodResourceClaim``: the pod's claims, or why they cannot be read."""
    out = []
    for ref in refs.claims:
        if ref.resource_claim_name is not None:
            name: str | None = ref.resource_claim_name
            check_owner = False
        elif ref.resource_claim_template_name is not None:
            if ref.name not in refs.statuses:
                return claim_not_created(pod)
            name, check_owner = refs.statuses[ref.name], True
        else:
            where = f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.name}"'
            return f"{where}: none of the supported fields are set"
        if name is None:
            continue  # the controller decided no claim is needed
        claim = tracker.get_claim(pod.namespace, name)
        if claim is None:
            return claim_not_found(pod.namespace, name)
        if claim.deleting:
            return claim_deleting(claim.name)
        if check_owner and not claim.is_controlled_by(pod.uid):
            return (
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                f"{pod.namespace}/{pod.name} (Pod is not owner)"
            )
        out.append(claim)
    return out


def pre_enqueue(pod: Pod, tracker: DraTracker) -> Status:
    """Upstream ``PreEnqueue``: SUCCESS, or why the pod must wait out of the active queue."""
    refs = pod_claims(pod)
    if not refs:
        return basics.SUCCESS
    claims = resolve_claims(pod, refs, tracker)
    return basics.unresolvable(claims) if isinstance(claims, str) else basics.SUCCESS


def claim_change_hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Upstream ``isSchedulableAfterClaimChange``: a deleted claim queues the pod when it held devices;
    a deallocated claim always does (its devices are free); otherwise only a change of one of the
    pod's own claims does (upstream also skips one that left the status alone)."""
    if new is None:
        held = isinstance(old, ResourceClaim) and old.allocation is not None
        return QueueingHint.QUEUE if held else QueueingHint.QUEUE_SKIP
    if not isinstance(new, ResourceClaim):
        return QueueingHint.QUEUE
    if isinstance(old, ResourceClaim) and old.allocation is not None and new.allocation is None:
        return QueueingHint.QUEUE
    refs = pod.resource_claims
    if new.namespace == pod.namespace:
        names = {r.resource_claim_name for r in refs.claims} | set(refs.statuses.values())
        if new.name in names:
            return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP


def admin_access_forbidden(claim: ResourceClaim, namespace_labels: Mapping[str, str]) -> str | None:
    """The API server's check (``AuthorizedForAdmin``) of a claim asking for admin access: its
    namespace needs the label ``resource.kubernetes.io/admin-access: "true"``. The scheduler never
    checks it (the API server refuses such claims, and such allocations); ``simulate``, which has no
    API server, refuses such claims with this message."""
    for i, request in enumerate(claim.spec.requests):
        if request.exactly is not None and request.exactly.admin_access:
            if namespace_labels.get(ADMIN_ACCESS_LABEL) == "true":
                return None
            return (
                f"spec.devices.requests[{i}].adminAccess: Forbidden: admin access to devices requires the "
                f"`{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
            )
    return None


# --------------------------------------------------------------------------- cycle state


@dataclass(slots=True)
class PodClaimsState:
    """Upstream ``stateData``: shared (not copied) by clones of the cycle state, as upstream's pointer is."""

    #: the pod's claims (upstream ``claimStore``): its own, then the extended-resource claim if any
    claims: tuple[ResourceClaim, ...] = ()
    #: how many of ``claims`` are the pod's own (the rest is the extended-resource claim)
    user_claims: int = 0
    #: the extended-resource claim's uid at PreFilter (its allocation in flight is filed under it)
    initial_extended_uid: str = ""
    #: the pod's requested scalar resources (upstream ``draExtendedResource.podScalarResources``)
    pod_scalar: Mapping[str, int] = field(default_factory=dict)
    #: per claim: the node selector of its allocation (None: every node)
    available_on: tuple[tuple[NodeSelectorTerm, ...] | None, ...] = ()
    allocator: Allocator | None = None
    #: node -> the allocations of the unallocated claims, in order
    node_allocations: dict[str, list[AllocationResult]] = field(default_factory=dict)
    #: node -> that node's extended-resource claim and the containers' request mappings
    node_extended: dict[str, tuple[ResourceClaim, tuple[RequestMapping, ...]]] = field(default_factory=dict)
    #: indices of allocated claims some node could not use
    unavailable: set[int] = field(default_factory=set)
    #: index -> the allocation Reserve made
    reserved: dict[int, AllocationResult] = field(default_factory=dict)
    #: the cluster's DRA store (PreBind assumes the claims it writes there)
    tracker: DraTracker | None = None
    #: Filter's time allowed per node, in seconds (0: none)
    filter_timeout: float = 0.0

    @property
    def extended(self) -> ResourceClaim | None:
        """Upstream ``claimStore.extendedResourceClaim``: the extended-resource claim, or None."""
        return self.claims[self.user_claims] if len(self.claims) > self.user_claims else None


@dataclass(frozen=True, slots=True)
class DeviceNote:
    """The devices the allocator found on one node for the pod's unallocated claims, for ``explain``
    (``SCORE_NOTES``), formatted only when read: ``claim gpu: r -> driver-a/node-1/gpu-0``."""

    claims: tuple[ResourceClaim, ...]
    allocations: tuple[AllocationResult, ...]

    def __str__(self) -> str:
        return "; ".join(
            f"claim {claim.name}: "
            + (", ".join(f"{r.request} -> {r.driver}/{r.pool}/{r.device}" for r in allocation.results) or "no devices")
            for claim, allocation in zip(self.claims, self.allocations, strict=False)
        )


def compute_score(claims: Sequence[ResourceClaim], allocations: Sequence[AllocationResult]) -> int:
    """Upstream ``computeScore``: each allocated subrequest scores 8 minus its index in ``firstAvailable``."""
    score = 0
    pending = iter(allocations)
    for claim in claims:
        allocation = claim.allocation if claim.allocation is not None else next(pending, None)
        if allocation is None:
            raise ValueError("number of allocations is smaller than number of claims needing allocation")
        chosen = {r.request for r in allocation.results if r.request.count("/") == 1}
        for request in claim.spec.requests:
            if request.exactly is not None:
                continue
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX_SIZE - i
    return score


# --------------------------------------------------------------------------- PreBind's writes


def claim_path(claim: ResourceClaim, *, status: bool = False) -> str:
    return paths.item(
        RESOURCE_API, "resourceclaims", claim.name, namespace=claim.namespace, subresource="status" if status else ""
    )


def _body_of(claim: ResourceClaim) -> dict[str, Any]:
    if claim.source is None:
        raise ValueError(f"claim {claim.key}: its body is not kept, so it cannot be updated")
    return dict(claim.source)


def finalizer_write(claim: ResourceClaim) -> ApiWrite | None:
    """The update adding the scheduler's finalizer to a claim it allocates (None: already there)."""
    if FINALIZER in claim.finalizers:
        return None
    body = _body_of(claim)
    meta = dict(body.get("metadata") or {})
    meta["finalizers"] = [*claim.finalizers, FINALIZER]
    body["metadata"] = meta
    return ApiWrite("PUT", claim_path(claim), body, purpose=f"add finalizer to claim {claim.key}")


def status_write(
    claim: ResourceClaim, allocation: AllocationResult | None, binding: ConsumerReference, *, now: str | None = None
) -> ApiWrite | str:
    """Upstream ``bindClaim``'s status update on the claim as last read: the allocation (if any) and
    the reservation, or why it cannot be written (the claim changed meanwhile)."""
    if claim.deleting:
        return f"claim {claim.key} got deleted in the meantime"
    body = _body_of(claim)
    status = dict(body.get("status") or {})
    if allocation is not None:
        if claim.allocation is not None:
            return f"claim {claim.key} got allocated elsewhere in the meantime"
        if now is not None:
            allocation = dataclasses.replace(allocation, allocation_timestamp=now)
        status["allocation"] = allocation_body(allocation)
    elif claim.allocation is None:
        return f"claim {claim.key} got deallocated elsewhere in the meantime"
    elif now is not None and claim.allocation.allocation_timestamp is None:
        status["allocation"] = {**status.get("allocation", {}), "allocationTimestamp": now}
    status["reservedFor"] = [*(status.get("reservedFor") or []), binding.body()]
    body["status"] = status
    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
    return ApiWrite("PUT", claim_path(claim, status=True), body, purpose=f"{what} claim {claim.key}")


def unreserve_write(claim: ResourceClaim, pod: Pod) -> ApiWrite:
    """Upstream Unreserve's strategic-merge patch removing the pod from ``reservedFor``."""
    body = {"metadata": {"uid": claim.uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
    return ApiWrite(
        "PATCH",
        claim_path(claim, status=True),
        body,
        "application/strategic-merge-patch+json",
        purpose=f"unreserve claim {claim.key}",
    )


def deallocate_write(claim: ResourceClaim) -> ApiWrite:
    """Upstream PostFilter's status update clearing ``reservedFor``, ``allocation`` and ``devices``."""
    body = _body_of(claim)
    body["status"] = {
        k: v for k, v in (body.get("status") or {}).items() if k not in ("reservedFor", "allocation", "devices")
    }
    return ApiWrite("PUT", claim_path(claim, status=True), body, purpose=f"deallocate claim {claim.key}")


def delete_write(claim: ResourceClaim) -> ApiWrite:
    """Upstream ``deleteClaim`` (an extended-resource claim the scheduler created): the claim's
    finalizer removed (a patch, as upstream's update re-read on conflicts comes to), then the claim deleted."""
    delete = ApiWrite("DELETE", claim_path(claim), None, purpose=f"delete claim {claim.key}")
    unprotect = {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
    return ApiWrite(
        "PATCH",
        claim_path(claim),
        unprotect,
        "application/strategic-merge-patch+json",
        purpose=f"update resourceclaim {claim.key}",
        then=(delete,),
    )


def claims_path(namespace: str) -> str:
    return paths.collection(RESOURCE_API, "resourceclaims", namespace=namespace)


def create_body(claim: ResourceClaim) -> dict[str, Any]:
    """Upstream ``createExtendedResourceClaimInAPI``: the node's extended-resource claim without what the
    API server sets (name, uid: ``generateName`` names it) and without status."""
    body = _body_of(claim)
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in ("name", "uid", "resourceVersion")}
    return {**{k: v for k, v in body.items() if k != "status"}, "metadata": meta}


def extended_status_body(claim_name: str, mappings: Sequence[RequestMapping]) -> dict[str, Any]:
    """The pod's ``status.extendedResourceClaimStatus`` patch (upstream ``patchPodExtendedResourceClaimStatus``)."""
    status = {"requestMappings": [m.body() for m in mappings], "resourceClaimName": claim_name}
    return {"status": {"extendedResourceClaimStatus": status}}


def pod_binding(pod: Pod) -> ConsumerReference:
    return ConsumerReference(resource="pods", name=pod.name, uid=pod.uid)


def extended_claim_uid(pod: Pod) -> str:
    """The in-memory extended-resource claim's temporary uid (upstream draws a random one; any uid no
    claim has does, and a pod is in one cycle at a time)."""
    return f"{pod.uid}/extended-resources"


# --------------------------------------------------------------------------- the plugin


class DynamicResources(
    PreEnqueuePlugin[DynamicResourcesArgs],
    EnqueueExtensions,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    VectorScore,
    NormalizeScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    SignPlugin,
):
    """See the module docstring."""

    NAME = NAME
    #: its weight in upstream's default profile
    DEFAULT_WEIGHT = 2

    # ------------------------------------------------------------------ queueing

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: pods with claims are not signable (upstream: whether a claim is local to
        one node is not simple to tell); others add nothing."""
        if pod.resource_claims:
            return basics.unschedulable("pods with dra resource claims are not signable")
        return ()

    def pre_enqueue(self, pod: Pod, handle: EnqueueHandle) -> Status:
        if not pod.resource_claims:
            return basics.SUCCESS
        return pre_enqueue(pod, handle.objects.dra)

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream ``EventsToRegister``: nodes (topology), the pod's own claims, classes and slices.
        The pod's own update (a generated claim's name in its status) moves it by itself."""
        return (
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
            ClusterEventWithHint(ClusterEvent.NODE_UPDATE),
            ClusterEventWithHint(ClusterEvent.RESOURCE_CLAIM_CHANGE, claim_change_hint),
            ClusterEventWithHint(ClusterEvent.DEVICE_CLASS_CHANGE),
            ClusterEventWithHint(ClusterEvent.RESOURCE_SLICE_CHANGE),
        )

    def __init__(self, args: DynamicResourcesArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.features = Features()
        self.filter_timeout = self.args.filter_seconds
        self._key = StateKey[PodClaimsState](f"PreFilter{self.name}")

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        refs = pod_claims(pod)
        s = PodClaimsState()
        state.write(self._key, s)
        scalar = pod.requests.scalar
        if not refs and not scalar:
            return basics.SKIP
        tracker = dra_of(snapshot.objects)
        user: list[ResourceClaim] = []
        if refs:
            resolved = resolve_claims(pod, refs, tracker)
            if isinstance(resolved, str):
                return basics.unresolvable(resolved)
            user = resolved
        extended = self._pre_filter_extended(pod, tracker, s) if scalar and tracker.classes else None
        claims = [*user, extended] if extended is not None else user
        if not claims:
            return basics.SKIP
        available_on: list[tuple[NodeSelectorTerm, ...] | None] = []
        to_allocate = 0
        for claim in claims:
            if claim.allocation is not None:
                if len(claim.reserved_for) >= RESERVED_FOR_MAX_SIZE and not claim.is_reserved_for(pod.uid):
                    return basics.unresolvable(ERR_CLAIM_IN_USE)
                available_on.append(claim.allocation.node_selector)
                continue
            available_on.append(None)
            to_allocate += 1
            if tracker.pending_allocation(claim.uid) is not None:
                return basics.unresolvable(claim_in_flight(claim))
            if claim is extended:
                continue  # its requests depend on the node (Filter)
            checked = self._check_classes(claim, tracker)
            if checked is not None:
                return checked
        s.claims, s.user_claims, s.available_on, s.tracker = tuple(claims), len(user), tuple(available_on), tracker
        s.filter_timeout = self.filter_timeout if tracker.clock is not None else 0.0
        if to_allocate:
            s.allocator = Allocator(
                classes=tracker.classes,
                slices=tracker.patched_slices(),
                allocated=tracker.allocated_state(),
                features=self.features,
            )
        return basics.SUCCESS

    def _pre_filter_extended(self, pod: Pod, tracker: DraTracker, s: PodClaimsState) -> ResourceClaim | None:
        """Upstream ``preFilterExtendedResources``: the pod's extended-resource claim (one an earlier cycle
        created, or a new in-memory one), or None when no requested resource is served by a DeviceClass."""
        scalar = pod.requests.scalar
        if not maps_some_resource(scalar, tracker):
            return None
        s.pod_scalar = scalar
        found = tracker.extended_resource_claim(pod.namespace, pod.name, pod.uid)
        claim = found if found is not None else parse_resource_claim(special_claim_body(pod, extended_claim_uid(pod)))
        s.initial_extended_uid = claim.uid
        return claim

    def _check_classes(self, claim: ResourceClaim, tracker: DraTracker) -> Status | None:
        for request in claim.spec.requests:
            if request.exactly is not None:
                names = [(request.name, request.exactly.device_class_name)]
            elif request.first_available:
                names = [(f"{request.name}/{sub.name}", sub.spec.device_class_name) for sub in request.first_available]
            else:
                return basics.unresolvable(f"resource claim {claim.key}, request {request.name}: unknown request type")
            for request_name, class_name in names:
                if not class_name:
                    return basics.error(f"request {request_name}: unsupported request type")
                if class_name not in tracker.classes:
                    return basics.unresolvable(class_missing(request_name, class_name))
        return None

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s = state.read(self._key)
        if s is None:
            return basics.error(ERR_STATE_NOT_FOUND)
        if not s.claims:
            return basics.SUCCESS
        if node.node is None:
            return basics.error("node not found")
        return filter_node(s, pod, node)

    # ------------------------------------------------------------------ PostFilter

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis, handle: Handle
    ) -> PostFilterResult:
        s = state.read(self._key)
        if s is None:
            return PostFilterResult(basics.error(ERR_STATE_NOT_FOUND))
        if not s.claims:
            return PostFilterResult(basics.Status(basics.Code.UNSCHEDULABLE))
        outbox = dra_of(snapshot.objects).outbox
        extended = s.extended
        stale = extended is not None and extended.name != SPECIAL_CLAIM_NAME
        for index in sorted(s.unavailable):  # upstream picks one at random (map order): we take the first
            claim = s.claims[index]
            if index >= s.user_claims:  # the extended-resource claim: one of an earlier cycle is deleted
                if stale:
                    break
                continue
            if not claim.reserved_for or (len(claim.reserved_for) == 1 and claim.reserved_for[0].uid == pod.uid):
                outbox.append(deallocate_write(claim))
                return PostFilterResult(basics.unschedulable(MSG_DEALLOCATED))
        if extended is not None and stale:
            outbox.append(delete_write(extended))
            return PostFilterResult(basics.unschedulable(MSG_DELETED))
        return PostFilterResult(basics.Status(basics.Code.UNSCHEDULABLE))

    # ------------------------------------------------------------------ Score

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        """Not upstream's (it has no PreScore): SKIP where its Score gives every node 0 (no claim to
        allocate), so a pod without claims costs the score stage nothing. Otherwise leaves each node's
        devices as a note for ``explain``."""
        s = state.read(self._key)
        if s is None or not s.node_allocations:
            return basics.SKIP
        notes = state.read(SCORE_NOTES)
        if notes is None:
            state.write(SCORE_NOTES, notes := {})
        unallocated = tuple(c for c in s.claims if c.allocation is None)
        for node, allocations in s.node_allocations.items():
            notes[(self.name, node)] = DeviceNote(unallocated, tuple(allocations))
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s = state.read(self._key)
        if s is None or not s.claims:
            return 0
        allocations = s.node_allocations.get(node.name)
        return 0 if allocations is None else compute_score(s.claims, allocations)

    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        s = state.read(self._key)
        if s is None or not s.claims or not s.node_allocations:
            return np.zeros(len(index), dtype=np.int64)
        names = table.names
        return np.fromiter(
            (
                compute_score(s.claims, a) if (a := s.node_allocations.get(names[k])) is not None else 0
                for k in index.tolist()
            ),
            dtype=np.int64,
            count=len(index),
        )

    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return interface.default_normalize(scores)

    # ------------------------------------------------------------------ Reserve / Unreserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        s = state.read(self._key)
        if s is None or not s.claims:
            return basics.SUCCESS
        pending = [i for i, c in enumerate(s.claims) if c.allocation is None]
        if not pending:
            return basics.SUCCESS
        if s.allocator is None:
            return basics.SUCCESS
        allocations = s.node_allocations.get(node_name)
        if not allocations:
            if all(i >= s.user_claims for i in pending):
                return basics.SUCCESS  # only extended resources, all from the node's device plugins
            return basics.error("claim allocation not found for node")
        if len(allocations) != len(pending):
            n = len(pending)
            return basics.error(
                f"internal error, have {len(allocations)} allocations, {n} claims to allocate, want {n} claims"
            )
        tracker = dra_of(handle.objects)
        for index, allocation in zip(pending, allocations):
            s.reserved[index] = allocation
            claim = s.claims[index]
            if index >= s.user_claims:  # the in-memory claim: this node's copy, with its requests
                claim = s.node_extended[node_name][0]
            tracker.signal_pending_allocation(claim.uid, dataclasses.replace(claim, allocation=allocation))
        return basics.SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        s = state.read(self._key)
        if s is None or not s.claims:
            return
        tracker = dra_of(handle.objects)
        for claim in s.claims[: s.user_claims]:
            if tracker.maybe_remove_pending_allocation(claim.uid):
                tracker.restore_claim(claim.key)
            if claim.allocation is not None and claim.is_reserved_for(pod.uid):
                tracker.outbox.append(unreserve_write(claim, pod))
        extended = s.extended
        if extended is None:
            return
        if tracker.maybe_remove_pending_allocation(s.initial_extended_uid):
            tracker.restore_claim(extended.key)
        if extended.name != SPECIAL_CLAIM_NAME:  # PreBind created it: it must not outlive the attempt
            tracker.outbox.append(delete_write(extended))

    # ------------------------------------------------------------------ PreBind

    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Upstream ``PreBindPreFlight``: PreBind has work for every pod with claims (allocated and
        reserved ones included: upstream looks only at whether there are any)."""
        s = state.read(self._key)
        return basics.SUCCESS if s is not None and s.claims else basics.SKIP

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        """Upstream ``PreBind`` / ``bindClaim`` (see the module docstring)."""
        s = state.read(self._key)
        if s is None or not s.claims:
            return basics.SKIP
        tracker = s.tracker
        now = state.read(BIND_TIME)
        done: list[str] = []  # the uids whose allocation in flight PreBind published
        claims = list(s.claims)
        for index, claim in enumerate(claims):
            if claim.is_reserved_for(pod.uid):
                continue
            allocation = s.reserved.get(index)
            extended = index >= s.user_claims
            if extended and allocation is None and not claim.spec.requests:
                continue  # extended resources served by the node's device plugins: nothing to write
            if extended and claim.name == SPECIAL_CLAIM_NAME:
                created = await create_extended_claim(client, s, node_name)
                if isinstance(created, str):
                    return basics.error(created)
                claims[index] = claim = created
                s.claims = tuple(claims)  # Unreserve deletes it from now on
            bound = await bind_claim(client, claim, allocation, pod_binding(pod), now=now)
            if isinstance(bound, str):
                if extended and tracker is not None and claim.name != SPECIAL_CLAIM_NAME:
                    tracker.assume_claim(claim)  # upstream waits for the created claim in its cache
                return basics.error(bound)
            if tracker is not None:
                tracker.assume_claim(bound)
            if extended:
                written = await write_extended_status(client, pod, bound.name, s.node_extended.get(node_name))
                if written is not None:
                    return basics.error(written)
            claims[index] = bound
            s.claims = tuple(claims)  # at once, as upstream: a later failure's Unreserve sees this reservation
            if allocation is not None:
                done.append(s.initial_extended_uid if extended else bound.uid)
        waiting = [
            f"<driver={r.driver}, pool={r.pool}> {r.device}"
            for c in s.claims
            if c.allocation is not None
            for r in c.allocation.results
            if r.binding_conditions
        ]
        if waiting:
            return basics.error(
                "waiting for binding conditions is not supported by kopf-scheduler; devices: " + "; ".join(waiting)
            )
        if tracker is not None:
            for uid in done:
                tracker.maybe_remove_pending_allocation(uid, force=True)
        return basics.SUCCESS


def filter_extended(
    s: PodClaimsState, pod: Pod, node: NodeInfo
) -> tuple[ResourceClaim | None, tuple[RequestMapping, ...], Status | None]:
    """Upstream ``filterExtendedResources``: this node's copy of the extended-resource claim with the
    requests DRA must serve here, and the containers' mappings; (None, (), None) when DRA has nothing to
    do for the pod's extended resources here; or why the node does not fit."""
    claim = s.extended
    if claim is None or s.tracker is None:
        return None, (), None
    if claim.spec.requests:
        return None, (), basics.unresolvable(ERR_STALE_EXTENDED_CLAIM)
    allocatable = node.allocatable.scalar
    wanted: dict[str, int] = {}
    for name, amount in s.pod_scalar.items():
        if not amount or not is_dra_extended_resource_name(name):
            continue
        if s.tracker.device_class_for(name) is not None and allocatable.get(name, 0) == 0:
            wanted[name] = amount
        elif name not in allocatable:
            return None, (), basics.unresolvable(ERR_CANNOT_FIT_RESOURCE)
    if s.user_claims == 0 and not wanted:
        return None, (), None
    if claim.allocation is not None:
        return None, (), None
    requests, mappings = requests_and_mappings(pod, wanted, s.tracker)
    body = special_claim_body(pod, claim.uid, requests) if claim.name == SPECIAL_CLAIM_NAME else None
    if body is None:  # a claim of an earlier cycle without requests: this node's requests added
        body = _body_of(claim)
        body["spec"] = {**(body.get("spec") or {}), "devices": {"requests": list(requests)}} if requests else {}
    return parse_resource_claim(body), mappings, None


def filter_node(s: PodClaimsState, pod: Pod, info: NodeInfo) -> Status:
    """Upstream ``Filter`` for one node, with the cycle's claims (the pure helper tests and preemption call)."""
    node = info.node
    assert node is not None
    node_claim, mappings, status = filter_extended(s, pod, info)
    if status is not None:
        return status
    if node_claim is None and s.user_claims == 0:
        return basics.SUCCESS
    unavailable = [
        i for i, sel in enumerate(s.available_on) if sel is not None and not any(t.matches(node) for t in sel)
    ]
    for i, claim in enumerate(s.claims):
        if claim.allocation is not None and i not in unavailable and binding_failed(claim):
            unavailable.append(i)
    allocations: list[AllocationResult] | None = None
    if s.allocator is not None:
        to_allocate = [
            node_claim if i >= s.user_claims and node_claim is not None else c
            for i, c in enumerate(s.claims)
            if c.allocation is None
        ]
        expired = None
        clock = s.tracker.clock if s.tracker is not None else None
        if s.filter_timeout > 0 and clock is not None:
            deadline = clock() + s.filter_timeout
            expired = lambda: clock() >= deadline  # noqa: E731 - the allocator asks it at every step
        try:
            allocations = s.allocator.allocate(node, to_allocate, expired=expired)
        except AllocationTimeout:
            return basics.error(timed_out(node.name))
        except NodeAllocationError as exc:
            return basics.unresolvable(str(exc))
        except AllocationError as exc:
            return basics.error(str(exc))
        if allocations is None or len(allocations) != len(to_allocate):
            return basics.unresolvable(ERR_CANNOT_ALLOCATE)
    if unavailable:
        s.unavailable.update(unavailable)
        return basics.unresolvable(ERR_NOT_AVAILABLE)
    if allocations is not None:
        s.node_allocations[node.name] = allocations
        if node_claim is not None:
            s.node_extended[node.name] = (node_claim, mappings)
    return basics.SUCCESS


def binding_failed(claim: ResourceClaim) -> bool:
    """Upstream ``isClaimReadyForBinding``'s error: some device's binding failure condition is True."""
    if claim.allocation is None:
        return False
    for r in claim.allocation.results:
        if not r.binding_conditions:
            continue
        status = next((d for d in claim.devices if (d.driver, d.pool, d.device) == (r.driver, r.pool, r.device)), None)
        if status is None:
            continue
        for cond in status.conditions:
            if cond.type in r.binding_failure_conditions and cond.status == "True":
                return True
    return False


async def bind_claim(
    client: ApiClient,
    claim: ResourceClaim,
    allocation: AllocationResult | None,
    binding: ConsumerReference,
    *,
    now: str | None = None,
) -> ResourceClaim | str:
    """Upstream ``bindClaim``: the claim as written, or the error's text. Conflicts re-read the claim."""
    from ..dra.parsing import parse_resource_claim

    latest = claim
    for attempt in range(CONFLICT_RETRIES):
        if attempt:
            got = await client.request("GET", claim_path(claim))
            if not got.ok:
                return f"get updated claim {claim.key} after conflict: {got.detail()}"
            latest = parse_resource_claim(got.body)
        if allocation is not None and latest.allocation is None:
            write = finalizer_write(latest)
            if write is not None:
                answer = await client.request(write.method, write.path, write.body)
                if answer.conflict:
                    continue
                if not answer.ok:
                    return f"add finalizer to claim {claim.key}: {answer.detail()}"
                latest = parse_resource_claim(answer.body)
        update = status_write(latest, allocation, binding, now=now)
        if isinstance(update, str):
            return update
        answer = await client.request(update.method, update.path, update.body)
        if answer.conflict:
            continue
        if not answer.ok:
            return f"{update.purpose}: {answer.detail()}"
        return parse_resource_claim(answer.body)
    what = "add allocation and reservation to" if allocation is not None else "add reservation to"
    return f"{what} claim {claim.key}: conflict"


async def create_extended_claim(client: ApiClient, s: PodClaimsState, node_name: str) -> ResourceClaim | str:
    """Upstream ``createExtendedResourceClaimInAPI``: the node's extended-resource claim created (the API
    server names it from ``generateName``), or the error's text."""
    from ..dra.parsing import parse_resource_claim

    found = s.node_extended.get(node_name)
    if found is None:
        return f"extended resource claim not found for node {node_name}"
    claim = found[0]
    answer = await client.request("POST", claims_path(claim.namespace), create_body(claim))
    if not answer.ok:
        return f"create claim for extended resources {claim.namespace}/: {answer.detail()}"
    return parse_resource_claim(answer.body)


async def write_extended_status(
    client: ApiClient, pod: Pod, claim_name: str, found: tuple[ResourceClaim, tuple[RequestMapping, ...]] | None
) -> str | None:
    """Upstream ``patchPodExtendedResourceClaimStatus``: the pod's ``status.extendedResourceClaimStatus``
    written; None, or the error's text."""
    mappings = found[1] if found is not None else ()
    if not mappings:
        return f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus"
    path = paths.pod(pod.namespace, pod.name, "status")
    answer = await client.request(
        "PATCH", path, extended_status_body(claim_name, mappings), content_type="application/strategic-merge-patch+json"
    )
    if not answer.ok:
        return f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {answer.detail()}"
    return None
