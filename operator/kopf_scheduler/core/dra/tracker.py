"""The cluster's DRA objects as the scheduler believes them: upstream's ``DefaultDRAManager``.

Upstream ``pkg/scheduler/framework/plugins/dynamicresources/dra_manager.go`` (and the assume cache,
``util/assumecache``): one store, shared by every cycle, holding

- the informers' ResourceClaims, ResourceClaimTemplates, DeviceClasses, ResourceSlices and
  DeviceTaintRules (``set_*`` / ``remove_*``, called by the edge's watch handlers or by ``simulate``'s
  loader);
- the slices as the scheduler uses them (``patched_slices``: upstream's ResourceSlice tracker,
  ``k8s.io/dynamic-resource-allocation/resourceslice/tracker``): each device with the taints of the
  DeviceTaintRules that select it appended to its own (DRADeviceTaintRules, GA in v1.37);
- the extended resource names the DeviceClasses serve (``device_class_for``: upstream's
  ``deviceclass/extendedresourcecache``, DRAExtendedResource): a class's ``extendedResourceName``
  and its implicit ``deviceclass.resource.kubernetes.io/<class>``, kept as upstream keeps them,
  event by event (of two classes naming one resource the newer wins, then the lower name);
- the claims PreBind wrote, until the informer delivers that version or a newer one
  (``assume_claim``; ``restore_claim`` drops one), so the next cycle sees the allocation at once;
- the allocations in flight: made in Reserve for a claim whose status PreBind has not yet
  written (``signal_pending_allocation`` / ``maybe_remove_pending_allocation``), so the next pod
  cannot take the same devices, and a pod sharing that claim waits;
- the ``outbox``: writes the synchronous points (Unreserve, PostFilter) decided and an executor
  must carry out (``drain``), as values.

``allocated_state`` is upstream's ``GatherAllocatedState``: every device held by a claim (admin access
excepted) or by an allocation in flight. ``clock`` is the edge's monotonic clock in seconds (the
operator and ``simulate`` set it): DynamicResources' Filter measures its ``filterTimeout`` with it
(None: no timeout is checked). Pure: no I/O, no clock of its own; mutated only by its owner's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from .allocator import AllocatedState
from .objects import (
    DEVICE_CLASS_RESOURCE_PREFIX,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    FINALIZER,
    DeviceClass,
    DeviceID,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

__all__ = ["ApiWrite", "DraTracker"]


@dataclass(frozen=True, slots=True)
class ApiWrite:
    """One request an executor sends to the API server (the operator's client, or simulate's in-memory one)."""

    method: str
    path: str
    body: Any
    content_type: str = "application/json"
    #: what it is for, in the words of upstream's log and error messages
    purpose: str = ""
    #: sent after this one succeeded (or found nothing to change), in order: a claim's finalizer
    #: removal, then its deletion
    then: tuple[ApiWrite, ...] = ()


@dataclass(slots=True)
class _InFlight:
    claim: ResourceClaim
    sharers: int = 1


def _version(rv: str) -> int | None:
    try:
        return int(rv)
    except ValueError:
        return None


class DraTracker:
    """See the module docstring."""

    def __init__(self) -> None:
        self.claims: dict[str, ResourceClaim] = {}  # ns/name, as the informer has them
        self.templates: dict[str, ResourceClaimTemplate] = {}  # ns/name
        self.classes: dict[str, DeviceClass] = {}  # name
        self.slices: dict[str, ResourceSlice] = {}  # name
        self.taint_rules: dict[str, DeviceTaintRule] = {}  # name
        #: extended resource name -> the DeviceClass serving it (upstream's extended resource cache)
        self._extended: dict[str, DeviceClass] = {}
        #: (slices or rules changed, patched slices)
        self._slices_version = 0
        self._patched: tuple[int, list[ResourceSlice]] | None = None
        #: the edge's monotonic clock (seconds) for DynamicResources' filter timeout; None: no timeout
        self.clock: Callable[[], float] | None = None
        self._assumed: dict[str, ResourceClaim] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self.outbox: list[ApiWrite] = []
        #: bumped on every change of claims or in-flight allocations (``allocated_state`` is cached on it)
        self.generation = 0
        self._state: tuple[int, AllocatedState] | None = None

    # ------------------------------------------------------------------ informers

    def set_claim(self, claim: ResourceClaim) -> None:
        self.claims[claim.key] = claim
        assumed = self._assumed.get(claim.key)
        if assumed is not None:
            new, mine = _version(claim.resource_version), _version(assumed.resource_version)
            if new is None or mine is None or new >= mine or assumed.uid != claim.uid:
                del self._assumed[claim.key]
        self.generation += 1

    def remove_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        self._assumed.pop(key, None)
        self.generation += 1

    def set_template(self, template: ResourceClaimTemplate) -> None:
        self.templates[template.key] = template

    def remove_template(self, key: str) -> None:
        self.templates.pop(key, None)

    def set_class(self, cls: DeviceClass) -> None:
        old = self.classes.get(cls.name)
        self.classes[cls.name] = cls
        self._map_extended(cls, old)

    def remove_class(self, name: str) -> None:
        old = self.classes.pop(name, None)
        if old is not None:
            self._extended.pop(DEVICE_CLASS_RESOURCE_PREFIX + old.name, None)
            if old.extended_resource_name is not None:
                self._extended.pop(old.extended_resource_name, None)

    def set_slice(self, s: ResourceSlice) -> None:
        self.slices[s.name] = s
        self._slices_version += 1

    def remove_slice(self, name: str) -> None:
        if self.slices.pop(name, None) is not None:
            self._slices_version += 1

    def set_taint_rule(self, rule: DeviceTaintRule) -> None:
        self.taint_rules[rule.name] = rule
        self._slices_version += 1

    def remove_taint_rule(self, name: str) -> None:
        if self.taint_rules.pop(name, None) is not None:
            self._slices_version += 1

    # ------------------------------------------------------------------ slices with DeviceTaintRules

    def patched_slices(self) -> list[ResourceSlice]:
        """Upstream ``ListWithDeviceTaintRules``: every slice, each device with the taints of the rules
        that select it appended (the same list until a slice or a rule changes)."""
        cached = self._patched
        if cached is not None and cached[0] == self._slices_version:
            return cached[1]
        rules = list(self.taint_rules.values())
        out = [_patch(s, rules) if rules else s for s in self.slices.values()]
        self._patched = (self._slices_version, out)
        return out

    # ------------------------------------------------------------------ extended resources (DRAExtendedResource)

    def device_class_for(self, resource: str) -> DeviceClass | None:
        """Upstream ``DeviceClassResolver.GetDeviceClass``: the class serving an extended resource, or None."""
        return self._extended.get(resource) if self._extended else None

    def _map_extended(self, new: DeviceClass, old: DeviceClass | None) -> None:
        """Upstream ``updateResourceName2class``, quirks included: a class naming a resource an older
        class (or, at the same age, one with a lower name) serves changes nothing, not even its
        implicit name; an update that keeps the name keeps the first object seen."""
        name = new.extended_resource_name
        rival = self._extended.get(name) if name is not None else None
        if rival is not None:
            if new.created < rival.created:
                return
            if new.created == rival.created and new.name >= rival.name:
                return
        if old is not None:
            self._extended.pop(DEVICE_CLASS_RESOURCE_PREFIX + old.name, None)
            if old.extended_resource_name is not None:
                self._extended.pop(old.extended_resource_name, None)
        if name is not None:
            self._extended[name] = new
        self._extended[DEVICE_CLASS_RESOURCE_PREFIX + new.name] = new

    def extended_resource_claim(self, pod_namespace: str, pod_name: str, pod_uid: str) -> ResourceClaim | None:
        """Upstream ``findExtendedResourceClaim``: a claim the scheduler created for the pod's extended
        resources in an earlier cycle (annotated, controlled by the pod), or None."""
        for claim in self.all_claims():
            if claim.namespace != pod_namespace or claim.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
                continue
            if any(o.name == pod_name and o.controller and o.uid == pod_uid for o in claim.owner_references):
                return claim
        return None

    def in_flight(self) -> Iterable[ResourceClaim]:
        """The claims with an allocation in flight (Reserve made it, PreBind has not written it)."""
        return (f.claim for f in self._in_flight.values())

    # ------------------------------------------------------------------ the assume cache

    def get_claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """The claim as we last know it: our own write if the informer has not caught up yet."""
        key = f"{namespace}/{name}"
        return self._assumed.get(key) or self.claims.get(key)

    def assume_claim(self, claim: ResourceClaim) -> None:
        """Upstream ``AssumeClaimAfterAPICall``: our write's answer, until the informer has it."""
        self._assumed[claim.key] = claim
        self.generation += 1

    def restore_claim(self, key: str) -> None:
        """Upstream ``AssumedClaimRestore``: forget our write, back to the informer's object."""
        if self._assumed.pop(key, None) is not None:
            self.generation += 1

    def all_claims(self) -> Iterable[ResourceClaim]:
        for key, claim in self.claims.items():
            yield self._assumed.get(key, claim)
        for key, claim in self._assumed.items():
            if key not in self.claims:
                yield claim

    # ------------------------------------------------------------------ allocations in flight

    def pending_allocation(self, uid: str) -> ResourceClaim | None:
        """The claim (with its allocation) Reserve made for claim `uid`, until PreBind wrote it."""
        f = self._in_flight.get(uid)
        return None if f is None else f.claim

    def signal_pending_allocation(self, uid: str, allocated: ResourceClaim) -> None:
        """Upstream ``SignalClaimPendingAllocation``: one more sharer when already in flight; nothing
        when the claim turns out to be allocated already."""
        f = self._in_flight.get(uid)
        if f is not None:
            f.sharers += 1
            return
        current = self.get_claim(allocated.namespace, allocated.name)
        if current is not None and current.uid == uid and current.allocation is not None:
            return
        if FINALIZER not in allocated.finalizers:
            allocated = replace(allocated, finalizers=(*allocated.finalizers, FINALIZER))
        self._in_flight[uid] = _InFlight(allocated)
        self.generation += 1

    def maybe_remove_pending_allocation(self, uid: str, *, force: bool = False) -> bool:
        """Upstream ``MaybeRemoveClaimPendingAllocation``: True when the in-flight entry went away."""
        f = self._in_flight.get(uid)
        if f is None:
            return False
        if force or f.sharers == 1:
            del self._in_flight[uid]
            self.generation += 1
            return True
        f.sharers -= 1
        return False

    def allocated_state(self) -> AllocatedState:
        """Upstream ``GatherAllocatedState`` (DRAConsumableCapacity on)."""
        cached = self._state
        if cached is not None and cached[0] == self.generation:
            return cached[1]
        devices: set[DeviceID] = set()
        shared: set[tuple[DeviceID, str]] = set()
        capacity: dict[DeviceID, dict[str, Fraction]] = {}
        claims = [*self.all_claims(), *(f.claim for f in self._in_flight.values())]
        for claim in claims:
            if claim.allocation is None:
                continue
            for r in claim.allocation.results:
                if r.admin_access:
                    continue
                device = r.device_id
                if r.share_id is not None:
                    shared.add((device, r.share_id))
                    if r.consumed_capacity is not None:
                        entry = capacity.setdefault(device, {})
                        for name, value in r.consumed_capacity.items():
                            entry[name] = entry.get(name, Fraction(0)) + value
                    continue
                devices.add(device)
        state = AllocatedState(frozenset(devices), frozenset(shared), capacity)
        self._state = (self.generation, state)
        return state

    # ------------------------------------------------------------------ writes decided in synchronous points

    def drain(self) -> list[ApiWrite]:
        """The writes queued since the last call, oldest first; the caller sends them."""
        out, self.outbox = self.outbox, []
        return out


def _patch(s: ResourceSlice, rules: list[DeviceTaintRule]) -> ResourceSlice:
    """Upstream tracker's ``applyPatches``: the slice with each rule's taint appended to the devices it selects."""
    devices = list(s.devices)
    changed = False
    for rule in rules:
        for i, d in enumerate(devices):
            if rule.selects(s.driver, s.pool, d.name):
                devices[i] = replace(d, taints=(*d.taints, rule.taint))
                changed = True
    return replace(s, devices=tuple(devices)) if changed else s
