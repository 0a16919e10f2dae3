"""Watch events of ``resource.k8s.io`` objects into the DRA tracker and the queues.

The DRA counterpart of ``core/scheduling/routing.py``'s ``route_object``: a ResourceClaim, DeviceClass or
ResourceSlice (parsed by ``core/dra/parsing.py``) goes into ``ClusterObjects.dra`` (the one
``DraTracker`` every cycle reads) and its change is broadcast as a ``ClusterEvent`` with the objects
before and after, so the queues move the pods DynamicResources rejected (its hints decide). A
ResourceClaimTemplate is stored without an event (upstream's plugin never waits for one: the pod
waits for the generated claim). A DeviceTaintRule changes the slices the scheduler sees: when it
changes some device's taints, that is a ResourceSlice change (upstream's slice tracker sends an
update of each slice whose taints changed; the queue's answer is the same for one or several).
After a list, ``route_dra_relisted`` deletes what the list lacks.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..dra.objects import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from ..dra.tracker import DraTracker
from ..framework.interface import ClusterEvent
from ..state.cache import SchedulerCache
from .routing import NOTHING, Queued, Routed, broadcast

__all__ = ["DRA_KINDS", "route_dra_object", "route_dra_relisted"]

DraObject = ResourceClaim | ResourceClaimTemplate | DeviceClass | ResourceSlice | DeviceTaintRule

#: the watched kinds -> the event a change raises (None: stored only)
DRA_KINDS: Final[Mapping[str, ClusterEvent | None]] = {
    "ResourceClaim": ClusterEvent.RESOURCE_CLAIM_CHANGE,
    "ResourceClaimTemplate": None,
    "DeviceClass": ClusterEvent.DEVICE_CLASS_CHANGE,
    "ResourceSlice": ClusterEvent.RESOURCE_SLICE_CHANGE,
    "DeviceTaintRule": ClusterEvent.RESOURCE_SLICE_CHANGE,
}


def _store(tracker: DraTracker, kind: str) -> Mapping[str, DraObject]:
    stores: dict[str, Mapping[str, DraObject]] = {
        "ResourceClaim": tracker.claims,
        "ResourceClaimTemplate": tracker.templates,
        "DeviceClass": tracker.classes,
        "ResourceSlice": tracker.slices,
        "DeviceTaintRule": tracker.taint_rules,
    }
    return stores[kind]


def _put(tracker: DraTracker, obj: DraObject) -> None:
    if isinstance(obj, ResourceClaim):
        tracker.set_claim(obj)
    elif isinstance(obj, ResourceClaimTemplate):
        tracker.set_template(obj)
    elif isinstance(obj, DeviceClass):
        tracker.set_class(obj)
    elif isinstance(obj, DeviceTaintRule):
        tracker.set_taint_rule(obj)
    else:
        tracker.set_slice(obj)


def _remove(tracker: DraTracker, kind: str, key: str) -> None:
    if kind == "ResourceClaim":
        tracker.remove_claim(key)
    elif kind == "ResourceClaimTemplate":
        tracker.remove_template(key)
    elif kind == "DeviceClass":
        tracker.remove_class(key)
    elif kind == "DeviceTaintRule":
        tracker.remove_taint_rule(key)
    else:
        tracker.remove_slice(key)


def route_dra_object(
    kind: str,
    key: str,
    obj: DraObject | None,
    *,
    cache: SchedulerCache,
    served: Mapping[str, Queued],
    now: float,
) -> Routed:
    """A DRA object of `kind` under `key` (``ns/name`` for claims and templates, else the name)
    changed into `obj` (None: deleted)."""
    tracker = cache.objects.dra
    old = _store(tracker, kind).get(key)
    before = _taints(tracker) if kind == "DeviceTaintRule" else None
    if obj is None:
        if old is None:
            return NOTHING
        _remove(tracker, kind, key)
    else:
        _put(tracker, obj)
    event = DRA_KINDS[kind]
    if event is None:
        return NOTHING
    if before is not None:
        if before == _taints(tracker):
            return NOTHING  # no device's taints changed: upstream's tracker sends no slice event
        return broadcast(event, served, now)
    return broadcast(event, served, now, old=old, new=obj)


def _taints(tracker: DraTracker) -> list[tuple[object, ...]]:
    """Every device's taints in the slices as the scheduler sees them (rules applied)."""
    return [tuple(d.taints for d in s.devices) for s in tracker.patched_slices()]


def route_dra_relisted(
    kind: str, keys: set[str], *, cache: SchedulerCache, served: Mapping[str, Queued], now: float
) -> Routed:
    """A list of every `kind` held `keys`: the objects of that kind we know that it lacks are gone."""
    gone = [k for k in _store(cache.objects.dra, kind) if k not in keys]
    wake: list[str] = []
    for key in gone:
        routed = route_dra_object(kind, key, None, cache=cache, served=served, now=now)
        wake.extend(n for n in routed.wake if n not in wake)
    return Routed(tuple(wake), DRA_KINDS[kind] or "") if gone else NOTHING
