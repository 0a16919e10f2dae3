"""The simulation's API server: the pods and nodes of the simulated cluster, answering as kube-apiserver does.

``simulate`` carries out the binding cycle the core planned (``core.scheduling.cycle.BindingPlan``) with the
same plugins the operator runs; their ``ApiClient`` is ``InMemoryApi``, which holds what the
simulation holds and writes nothing anywhere:

- ``POST .../pods/{name}/binding``: 201 for a pending pod it holds (the Binding's uid, when given,
  must be the pod's; its annotations and labels are copied onto the pod, as the pod registry does),
  409 for a pod already bound (or another uid), 404 for a pod it does not hold;
- ``GET`` and ``PATCH`` (merge patch; lists are replaced) of a pod or its ``status``, ``GET`` of a
  node, and the list of nodes (``fieldSelector=metadata.name=...`` selects one): the body the
  simulation read from the files (bound pods from the cluster file, which keep no body, answer a
  minimal one). A patch changes the bodies answered later, not the objects the simulation
  schedules with (nothing in a simulation reads those fields back);
- ``resource.k8s.io/v1`` ResourceClaims (DynamicResources' PreBind, Unreserve and PostFilter
  writes): ``claims``, a ``sim/dra.py`` ``ClaimServer``, answers them;
- anything else: 404, or 405 for another method on a node (the kinds it does not hold).

``drive`` runs a plugin's coroutine to its end without an event loop (``sim/`` imports no asyncio):
every request here answers at once, so nothing a plugin awaits should ever wait. A plugin that
waits on anything else (a timer, a socket) gets an error thrown in at that point, which the binding
cycle reports as the plugin's failure.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Coroutine, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs

from ..core.framework.interface import ApiResponse
from ..core.model.objects import Pod
from ..core.state.cache import SchedulerCache
from .dra import ClaimServer

__all__ = ["InMemoryApi", "SuspendedError", "drive"]

T = TypeVar("T")

_POD: Final = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?:/(?P<sub>binding|status))?$")
_NODE: Final = re.compile(r"^/api/v1/nodes(?:/(?P<name>[^/?]+))?(?:\?(?P<query>.*))?$")
_REASONS: Final[Mapping[int, str]] = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    422: "Invalid",
}
#: how many times ``drive`` throws into a coroutine that keeps waiting before it gives up on it
_MAX_THROWS: Final = 8


def _failure(code: int, message: str) -> ApiResponse:
    return ApiResponse(
        code,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": _REASONS.get(code, ""),
            "code": code,
        },
    )


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch, in place: objects merge, null deletes, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class InMemoryApi:
    """The simulated cluster's API server for PreBind and Bind plugins (see the module docstring)."""

    def __init__(self, cache: SchedulerCache) -> None:
        self._cache = cache
        #: pod bodies by uid: the pending pods handed to ``hold``, and any bound one a request asked for
        self._pods: dict[str, dict[str, Any]] = {}
        #: uids whose body is a copy of their own (the others are the parsed pod's ``source``, copied on write)
        self._owned: set[str] = set()
        #: namespace/name -> uid of the latest pod of that name
        self._names: dict[str, str] = {}
        #: every request of the plugins, in order: (method, path, body)
        self.requests: list[tuple[str, str, Any]] = []
        #: the claims' server (``sim/dra.py``); None: claims are not found
        self.claims: ClaimServer | None = None

    # ------------------------------------------------------------------ the simulator's side

    def hold(self, pod: Pod) -> None:
        """A pod of the simulation is created (pending, or bound from the pods file)."""
        source = pod.source
        meta = (source.get("metadata") or {}) if source is not None else {}
        as_read = (meta.get("name"), meta.get("namespace", pod.namespace), meta.get("uid"))
        if source is not None and as_read == (pod.name, pod.namespace, pod.uid) and not pod.node_name:
            self._pods[pod.uid] = source  # type: ignore[assignment]  # read-only until a write copies it
        else:  # no body, or the simulation renamed the pod (a copy, a duplicate uid)
            body = _minimal(pod) if source is None else copy.deepcopy(dict(source))
            body.setdefault("metadata", {}).update(name=pod.name, namespace=pod.namespace, uid=pod.uid)
            body.setdefault("spec", {})["nodeName"] = pod.node_name
            self._pods[pod.uid] = body
            self._owned.add(pod.uid)
        self._names[pod.key] = pod.uid

    def drop(self, pod: Pod) -> None:
        """A pod is deleted (a preemption victim)."""
        self._pods.pop(pod.uid, None)
        self._owned.discard(pod.uid)
        if self._names.get(pod.key) == pod.uid:
            del self._names[pod.key]

    def bind(self, pod: Pod, node: str, *, annotations: Mapping[str, str] | None = None) -> ApiResponse:
        """Bind `pod` to `node` as pods/binding does (a binder extender's bind lands here too)."""
        return self._bind(pod.namespace, pod.name, pod.uid, node, annotations)

    def _bind(self, ns: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None) -> ApiResponse:
        body = self._body(ns, name, uid)
        if body is None:
            return _failure(404, f'pods "{name}" not found')
        if body["metadata"].get("uid") != uid:
            return _failure(409, f'Operation cannot be fulfilled on pods/binding "{name}": the uid differs')
        spec = body.get("spec") or {}
        if spec.get("nodeName"):
            return _failure(
                409,
                f'Operation cannot be fulfilled on pods/binding "{name}": '
                f'pod {name} is already assigned to node "{spec["nodeName"]}"',
            )
        if not node:
            return _failure(422, "Binding.target.name: Required value")
        # new dicts for what a binding changes (the rest may be the parsed pod's own body: never written)
        metadata = dict(body["metadata"])
        if annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
        status = {k: v for k, v in (body.get("status") or {}).items() if k != "nominatedNodeName"}
        self._pods[uid] = {**body, "metadata": metadata, "spec": {**spec, "nodeName": node}, "status": status}
        return ApiResponse(
            201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        )

    def is_bound(self, pod: Pod) -> bool:
        body = self._pods.get(pod.uid)
        return body is not None and bool((body.get("spec") or {}).get("nodeName"))

    # ------------------------------------------------------------------ the plugins' side (ApiClient)

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", decode: bool = True
    ) -> ApiResponse:
        self.requests.append((method, path, body))
        return self.answer(method, path, body)

    def answer(self, method: str, path: str, body: Any = None) -> ApiResponse:
        """The answer to one request (``request`` without the coroutine)."""
        pod = _POD.match(path)
        if pod is not None:
            return self._pod_request(method, pod["ns"], pod["name"], pod["sub"], body)
        if self.claims is not None and (claimed := self.claims.answer(method, path, body)) is not None:
            code, payload = claimed
            return ApiResponse(code, payload) if code < 300 else _failure(code, str(payload))
        node = _NODE.match(path)
        if node is not None:
            if method != "GET":
                return _failure(405, f"the simulation does not change nodes: {method} {path}")
            return self._nodes(node["name"], node["query"] or "")
        return _failure(404, f"the simulation's API server holds pods and nodes only, not {path}")

    def _nodes(self, name: str | None, query: str) -> ApiResponse:
        """A node by name, or the list of nodes (one, with ``fieldSelector=metadata.name=<name>``)."""
        if name is None:
            selector = parse_qs(query).get("fieldSelector", [""])[0]
            wanted = selector.removeprefix("metadata.name=") if selector.startswith("metadata.name=") else None
            if selector and wanted is None:
                return _failure(400, f"the simulation selects nodes by metadata.name only, not {selector!r}")
            names = [wanted] if wanted is not None else self._cache.node_names()
            items = [body for body in map(self._node_body, names) if body is not None]
            return ApiResponse(200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items})
        body = self._node_body(name)
        return ApiResponse(200, body) if body is not None else _failure(404, f'nodes "{name}" not found')

    def _node_body(self, name: str) -> dict[str, Any] | None:
        info = self._cache.get_node_info(name)
        if info is None or info.node is None:
            return None
        n = info.node
        found = dict(n.source) if n.source is not None else {"metadata": {"name": n.name, "labels": dict(n.labels)}}
        return {"apiVersion": "v1", "kind": "Node", **copy.deepcopy(found)}

    def _pod_request(self, method: str, ns: str, name: str, sub: str | None, body: Any) -> ApiResponse:
        if sub == "binding":
            if method != "POST":
                return _failure(405, f"pods/binding: {method} is not allowed")
            meta = (body or {}).get("metadata") or {}
            uid = meta.get("uid") or self._names.get(f"{ns}/{name}", "")
            target = ((body or {}).get("target") or {}).get("name", "")
            return self._bind(ns, name, uid, target, meta.get("annotations"))
        found = self._body(ns, name, self._names.get(f"{ns}/{name}", ""), write=method != "GET")
        if found is None:
            return _failure(404, f'pods "{name}" not found')
        if method == "GET":
            return ApiResponse(200, copy.deepcopy(found))
        if method != "PATCH" or not isinstance(body, Mapping):
            return _failure(405, f"the simulation answers GET and PATCH of pods: {method}")
        if sub == "status":
            _merge(found.setdefault("status", {}), body.get("status") or {})
        else:
            _merge(found, body)
        return ApiResponse(200, copy.deepcopy(found))

    def _body(self, ns: str, name: str, uid: str, *, write: bool = False) -> dict[str, Any] | None:
        """The body of the pod `uid` named ns/name: a pod held, or one the cache holds (bound); a
        copy of its own when it is to be written."""
        if uid not in self._pods:
            known = next(
                (p for p in self._cache.pods() if p.namespace == ns and p.name == name and (not uid or p.uid == uid)),
                None,
            )
            if known is None:
                return None
            self.hold(known)
            uid = known.uid
        found = self._pods[uid]
        if (found.get("metadata") or {}).get("name") != name:
            return None
        if write and uid not in self._owned:
            found = self._pods[uid] = copy.deepcopy(found)
            self._owned.add(uid)
        return found


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
