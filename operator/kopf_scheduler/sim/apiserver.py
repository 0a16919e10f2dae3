"""The simulation's API server: the pods, nodes, PersistentVolumes, PersistentVolumeClaims and ResourceClaims
of the simulated cluster, answering as kube-apiserver does.

``simulate`` carries out the binding cycle the core planned (``core.scheduling.cycle.BindingPlan``) with the
same plugins the operator runs; their ``ApiClient`` is ``InMemoryApi``, which holds what the
simulation holds and writes nothing anywhere. Its pods, nodes and claims live in ``sim/kubeapi.py``'s
``KubeApi``, the one implementation of kube-apiserver's object semantics (``tests/fakeapi.py`` serves
the same over HTTP), so the answers are the real ones, Status bodies and messages included:

- ``POST .../pods/{name}/binding``: 201 for a pending pod (the Binding's uid and resourceVersion,
  when given, are preconditions: 409 when they are not the pod's; its annotations and labels are
  copied onto the pod; ``nominatedNodeName`` goes and PodScheduled is set, as the pod registry
  does), 409 for a pod already bound, 404 for a pod it does not hold, 400 for a Binding named
  otherwise than its URL, and ValidatePodBinding's unknown 500 for one without a target node;
- ``GET`` and ``PATCH`` (merge, strategic-merge or JSON patch) or ``PUT`` of a pod or its ``status``;
  ``GET`` of a node and lists of pods and nodes (field and label selectors). A write changes the
  bodies answered later, not the objects the simulation schedules with (nothing in a simulation
  reads those fields back);
- ``GET``, ``PATCH`` and ``PUT`` of PersistentVolumes and PersistentVolumeClaims (VolumeBinding's PreBind:
  a PV's ``claimRef``, a claim's selected node, preconditioned on resourceVersions); each change is told to
  ``volume_changed`` (kind, key, the object as stored), as their watches bring them to the operator, so the
  next pod sees a PV taken;
- every request on ``resource.k8s.io/v1`` ResourceClaims and their ``status`` (DynamicResources'
  PreBind, Unreserve and PostFilter writes: updates with resourceVersion conflicts, strategic-merge
  patches of ``reservedFor`` and of finalizers, the creation of a pod's extended-resource claim
  by ``generateName``, deletion held by finalizers). Each change of a claim made by a request is
  told to ``claim_changed`` (key, the claim as stored, or None when it is gone), as the claims'
  watch brings it to the operator (a body that cannot be read is skipped, as the operator's watch
  skips it);
- anything else: 404 for the kinds it does not hold, 405 for the writes the simulation would not
  see (creating or deleting pods or volumes, changing nodes).

It holds the pods, nodes, volumes and claims of the cluster it is given (the cache's PVs and PVCs and the DRA
tracker's claims are replaced by the ones stored, which carry the server's resourceVersions), then what the simulation
tells it (``hold``, ``drop``, ``node_changed``, and ``create_claim`` for the resourceclaim
controller's claims: these are not told back, the simulation puts them in its tracker itself,
before their pod is queued; a cluster's scheduler also gets their ADDED event, whose only hint,
DynamicResources', queues the pods using the claim: none yet). One pod per
namespace/name, as in a cluster: a pod held under the name of another replaces it. Times come from
the simulation's clock, new uids from a counter and ``generateName``'s suffixes from the object
(``sim/dra.py``'s ``name_suffix``), so runs repeat.

``drive`` runs a plugin's coroutine to its end without an event loop (``sim/`` imports no asyncio):
every request here answers at once, so nothing a plugin awaits should ever wait. A plugin that
waits on anything else (a timer, a socket) gets an error thrown in at that point, which the binding
cycle reports as the plugin's failure.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import random
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, Final, TypeVar

from ..core.dra.objects import ResourceClaim
from ..core.dra.parsing import parse_resource_claim
from ..core.framework.interface import ApiResponse
from ..core.model import paths
from ..core.model.objects import Node, PersistentVolume, PersistentVolumeClaim, Pod
from ..core.model.parsing import ObjectError, parse_persistent_volume, parse_persistent_volume_claim
from ..core.state.cache import SchedulerCache
from .dra import name_suffix
from .kubeapi import Change, KubeApi, status_body

__all__ = ["InMemoryApi", "SuspendedError", "drive"]

T = TypeVar("T")

#: the core kinds the simulation holds: what it reads and writes of them is served, the rest refused
_HELD: Final = frozenset({"pods", "nodes", "persistentvolumes", "persistentvolumeclaims"})
#: the volumes and claims (VolumeBinding's PreBind writes them): plural -> the kind its changes are routed as
_VOLUMES: Final = {"persistentvolumes": "PersistentVolume", "persistentvolumeclaims": "PersistentVolumeClaim"}
#: ResourceClaims: every request on them is served
_CLAIMS: Final = ("resource.k8s.io", "v1", "resourceclaims")
#: how many times ``drive`` throws into a coroutine that keeps waiting before it gives up on it
_MAX_THROWS: Final = 8
_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _refused(code: int, message: str) -> ApiResponse:
    return ApiResponse(code, status_body(code, message))


class InMemoryApi:
    """The simulated cluster's API server for PreBind and Bind plugins (see the module docstring).

    `clock` is the simulation's (seconds since its start), for the times the server stamps; `claim_changed`
    is told of each change a request makes to a claim, `volume_changed` of each to a PV or PVC (None: nobody
    is)."""

    def __init__(
        self,
        cache: SchedulerCache,
        clock: Callable[[], float] = lambda: 0.0,
        claim_changed: Callable[[str, ResourceClaim | None], None] | None = None,
        volume_changed: Callable[[str, str, PersistentVolume | PersistentVolumeClaim], None] | None = None,
    ) -> None:
        uids = itertools.count(1)
        self.kube = KubeApi(
            history_limit=1_000,
            changed=self._changed,
            clock=lambda: _EPOCH + _dt.timedelta(seconds=clock()),
            new_uid=lambda: f"simulated-{next(uids)}",
            rng=random.Random(0),
            name_suffix=name_suffix,
        )
        #: every request of the plugins, in order: (method, path, body)
        self.requests: list[tuple[str, str, Any]] = []
        self.claim_changed = claim_changed
        self.volume_changed = volume_changed
        #: within `_quietly` (the simulation's own loads and claims): changes not told to `claim_changed`
        self._quiet = False
        for name in cache.node_names():
            info = cache.get_node_info(name)
            if info is not None and info.node is not None:
                self.node_changed(info.node)
        for pod in cache.pods():
            self.hold(pod)
        tracker = cache.objects.dra
        for claim in list(tracker.claims.values()):
            if claim.source is not None:  # a claim read without its body cannot be served
                tracker.set_claim(self._load_claim(claim.source))
        # as stored: PreBind's writes are preconditioned on the server's resourceVersions
        volumes, claims = cache.objects.persistent_volumes, cache.objects.persistent_volume_claims
        for name, pv in list(volumes.items()):
            if pv.source is not None:
                volumes[name] = parse_persistent_volume(self._load_volume("persistentvolumes", pv.source))
        for key, pvc in list(claims.items()):
            if pvc.source is not None:
                claims[key] = parse_persistent_volume_claim(self._load_volume("persistentvolumeclaims", pvc.source))

    # ------------------------------------------------------------------ the simulator's side

    def hold(self, pod: Pod) -> None:
        """A pod of the simulation is created (pending, or bound from the pods file), or bound by someone else."""
        body = dict(pod.source) if pod.source is not None else _minimal(pod)
        meta = {**(body.get("metadata") or {}), "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        spec = {k: v for k, v in (body.get("spec") or {}).items() if k != "nodeName"}
        if pod.node_name:
            spec["nodeName"] = pod.node_name
        self.kube.load("", "v1", "pods", {**body, "metadata": meta, "spec": spec})

    def drop(self, pod: Pod) -> None:
        """A pod is deleted (a preemption victim, or by someone else)."""
        if self._held(pod) is not None:
            self.kube.delete("", "v1", "pods", pod.name, pod.namespace)

    def node_changed(self, node: Node | None, name: str = "") -> None:
        """A node is added or changed (`node`), or deleted (None and its `name`)."""
        if node is None:
            self.kube.delete("", "v1", "nodes", name)
            return
        found = (
            node.source if node.source is not None else {"metadata": {"name": node.name, "labels": dict(node.labels)}}
        )
        self.kube.load("", "v1", "nodes", dict(found))

    def _load_claim(self, body: Mapping[str, Any]) -> ResourceClaim:
        """A claim of the cluster, stored as read; the claim as stored (at the server's resourceVersion)."""
        with self._quietly():
            self.kube.load(*_CLAIMS, body)
        meta = body.get("metadata") or {}
        stored = self.kube.peek(*_CLAIMS, str(meta.get("name") or ""), meta.get("namespace") or "default")
        assert stored is not None
        return parse_resource_claim(stored)

    def _load_volume(self, plural: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A PV or claim of the cluster, stored as read; its body as stored."""
        with self._quietly():
            self.kube.load("", "v1", plural, body)
        meta = body.get("metadata") or {}
        namespace = (meta.get("namespace") or "default") if plural == "persistentvolumeclaims" else None
        stored = self.kube.peek("", "v1", plural, str(meta.get("name") or ""), namespace)
        assert stored is not None
        return stored

    def create_claim(self, body: Mapping[str, Any]) -> ResourceClaim | str:
        """The resourceclaim controller's POST of a claim (``generateName`` names it): the claim as created,
        or the API server's refusal. The simulation keeps the claim itself: `claim_changed` is not told."""
        meta = body.get("metadata") or {}
        path = paths.collection("/".join(_CLAIMS[:2]), _CLAIMS[2], namespace=meta.get("namespace") or "default")
        with self._quietly():
            answer = self.kube.answer("POST", path, body)
        if not answer.ok:
            return answer.detail()
        return parse_resource_claim(answer.body)

    @contextlib.contextmanager
    def _quietly(self) -> Iterator[None]:
        """The simulation's own writes within: their changes are not told to `claim_changed`."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def _changed(self, change: Change) -> None:
        """A change stored by a request: a claim's is told to `claim_changed`, a PV's or PVC's to `volume_changed`,
        as their watches would bring them."""
        if self._quiet:
            return
        plural = change.resource.key[2]
        if plural in _VOLUMES and change.resource.key[0] == "" and self.volume_changed is not None:
            if change.type != "DELETED":  # the simulation deletes neither
                try:
                    volume = _parse_volume(plural, change.obj)
                except ObjectError:
                    return  # the operator's watch skips an object it cannot read
                self.volume_changed(_VOLUMES[plural], _volume_key(volume), volume)
            return
        if self.claim_changed is None or change.resource.key != _CLAIMS:
            return
        meta = change.obj["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        if change.type == "DELETED":
            self.claim_changed(key, None)
            return
        try:
            claim = parse_resource_claim(change.obj)
        except ObjectError:
            return  # the operator's watch skips a claim it cannot read
        self.claim_changed(key, claim)

    def bind(self, pod: Pod, node: str, *, annotations: Mapping[str, str] | None = None) -> ApiResponse:
        """Bind `pod` to `node` through pods/binding (a binder extender's bind lands here too)."""
        meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if annotations:
            meta["annotations"] = dict(annotations)
        binding = {"metadata": meta, "target": {"kind": "Node", "name": node}}
        return self.kube.answer("POST", paths.pod(pod.namespace, pod.name, "binding"), binding)

    def is_bound(self, pod: Pod) -> bool:
        held = self._held(pod)
        return held is not None and bool((held.get("spec") or {}).get("nodeName"))

    def _held(self, pod: Pod) -> Mapping[str, Any] | None:
        """The stored body of `pod` (its name, its uid), or None."""
        found = self.kube.peek("", "v1", "pods", pod.name, pod.namespace)
        return found if found is not None and found["metadata"].get("uid") == pod.uid else None

    # ------------------------------------------------------------------ the plugins' side (ApiClient)

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", decode: bool = True
    ) -> ApiResponse:
        self.requests.append((method, path, body))
        return self.answer(method, path, body, content_type=content_type)

    def answer(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> ApiResponse:
        """The answer to one request (``request`` without the coroutine)."""
        parts = path.partition("?")[0].strip("/").split("/")
        if parts[:3] == ["apis", *_CLAIMS[:2]]:
            named = parts[3:4] == ["namespaces"]
            if ((parts[5:6] if named else parts[3:4]) or [""])[0] == _CLAIMS[2]:
                return self.kube.answer(method, path, body, content_type=content_type)
        named = parts[2:3] == ["namespaces"]
        kind = (parts[4:5] if named else parts[2:3]) or [""]
        if parts[:2] != ["api", "v1"] or kind[0] not in _HELD:
            return _refused(404, f"the simulation's API server holds pods, nodes and resource claims only, not {path}")
        if method != "GET":
            if kind[0] == "nodes":
                return _refused(405, f"the simulation does not change nodes: {method} {path}")
            binding = method == "POST" and parts[-1] == "binding"
            one = len(parts) >= (6 if named else 4)  # a named object, not a collection
            if not binding and (method not in ("PATCH", "PUT") or not one):
                return _refused(
                    405, f"the simulation writes pods through pods/binding, and objects by PATCH and PUT only: {method}"
                )
        return self.kube.answer(method, path, body, content_type=content_type)


def _parse_volume(plural: str, body: Mapping[str, Any]) -> PersistentVolume | PersistentVolumeClaim:
    if plural == "persistentvolumes":
        return parse_persistent_volume(body)
    return parse_persistent_volume_claim(body)


def _volume_key(volume: PersistentVolume | PersistentVolumeClaim) -> str:
    """The key the cluster objects keep it under: a PV's name, a claim's namespace/name."""
    return volume.key if isinstance(volume, PersistentVolumeClaim) else volume.name


def _minimal(pod: Pod) -> dict[str, Any]:
    """A body for a pod read without one (bound pods of the cluster file)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
        },
        "spec": {"nodeName": pod.node_name, "schedulerName": pod.scheduler_name, "priority": pod.priority},
        "status": {"phase": pod.phase},
    }


class SuspendedError(RuntimeError):
    """Thrown into a plugin's coroutine that waited on something the simulation cannot provide."""


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end without an event loop. A bare yield (``asyncio.sleep(0)``) is stepped
    over; waiting on anything else gets a ``SuspendedError`` thrown in at that point (the binding
    cycle turns it into the plugin's failure), and a coroutine that goes on waiting is closed and
    the error raised here."""
    value: Any = None
    throws = 0
    try:
        while True:
            if value is None:
                value = coro.send(None)
                continue
            throws += 1
            if throws > _MAX_THROWS:
                coro.close()
                raise SuspendedError(f"a coroutine kept waiting on {value!r} in a simulation")
            value = coro.throw(
                SuspendedError(
                    f"waited on {value!r}: in a simulation only the in-memory API server can be awaited, "
                    "and it answers at once"
                )
            )
    except StopIteration as done:
        result: T = done.value
        return result
