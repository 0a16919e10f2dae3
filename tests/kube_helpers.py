"""Helpers for tests against the real local control plane (see conftest.py).

The control plane has no kubelet and no controller-manager, so these helpers
play their parts: create Node objects with a Ready status, mark bound pods
Running (FakeKubelet), and tear namespaces down (the namespace controller
would otherwise leave them Terminating forever).
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

__all__ = [
    "FakeKubelet",
    "create_nodes",
    "delete_all_nodes",
    "delete_namespace",
    "make_pod_body",
    "wait_for",
]

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
ZONE_LABEL = "topology.kubernetes.io/zone"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, message: str = "") -> T:
    """Call `predicate` until it returns something truthy, and return that; TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout}s: {message or predicate!r} (last value: {result!r})")
        time.sleep(interval)


# --------------------------------------------------------------------------- nodes


def _node_body(
    name: str,
    *,
    labels: Mapping[str, str] | None,
    zone: str | None,
    taints: Sequence[Mapping[str, str]] | None,
) -> dict[str, Any]:
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **(labels or {}),
    }
    if zone is not None:
        node_labels[ZONE_LABEL] = zone
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": spec}


def _node_status(
    index: int, *, cpu: str, memory: str, pods: int, conditions: Mapping[str, str] | None
) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    statuses = {
        "Ready": "True",
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        **(conditions or {}),
    }
    now = _now()
    return {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": f"Fake{kind}",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
                for kind, status in statuses.items()
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.128.{index // 250}.{index % 250 + 1}"}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.37.2",
                "containerRuntimeVersion": "fake://0",
                "kernelVersion": "",
                "osImage": "fake",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
    }


def create_nodes(
    api: client.ApiClient,
    n: int,
    *,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    zones: Sequence[str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    conditions: Mapping[str, str] | None = None,
    name_prefix: str = "node-",
) -> list[str]:
    """Create `n` Nodes named `<name_prefix><i>` and set their status; return the names.

    Status goes through the status subresource (a create ignores it). Every
    node gets capacity == allocatable, Ready=True plus no pressure conditions
    (override with e.g. ``conditions={"Ready": "False"}``), and, when `zones`
    is given, topology.kubernetes.io/zone round-robin over them. `taints` are
    dicts like ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.
    """
    core = client.CoreV1Api(api)

    def one(i: int) -> str:
        name = f"{name_prefix}{i}"
        zone = zones[i % len(zones)] if zones else None
        core.create_node(
            _node_body(name, labels=labels, zone=zone, taints=taints)
        )
        core.patch_node_status(name, _node_status(i, cpu=cpu, memory=memory, pods=pods, conditions=conditions))
        return name

    with ThreadPoolExecutor(max_workers=max(1, min(8, n))) as pool:
        return list(pool.map(one, range(n)))


def delete_all_nodes(api: client.ApiClient) -> None:
    """Delete every Node and wait until none is listed."""
    core = client.CoreV1Api(api)
    core.delete_collection_node()
    wait_for(lambda: not core.list_node().items, timeout=30, message="all nodes deleted")


# --------------------------------------------------------------------------- pods & namespaces


def make_pod_body(
    name: str,
    *,
    namespace: str | None = None,
    scheduler_name: str | None = None,
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    affinity: Mapping[str, Any] | None = None,
    priority_class_name: str | None = None,
    containers: int = 1,
) -> dict[str, Any]:
    """A minimal pod manifest (pause containers requesting `cpu`/`memory` each).

    `scheduler_name` None means the cluster default (default-scheduler).
    The pod mounts no ServiceAccount token: there is no token controller.
    """
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": f"c{i}", "image": PAUSE_IMAGE, "resources": {"requests": requests} if requests else {}}
            for i in range(containers)
        ],
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def delete_namespace(api: client.ApiClient, name: str) -> None:
    """Delete a namespace and its pods for good, doing the absent namespace controller's job.

    Pods are force-deleted first (no kubelet will confirm a graceful delete),
    then the namespace's `kubernetes` finalizer is cleared so it disappears
    instead of staying Terminating.
    """
    core = client.CoreV1Api(api)
    try:
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)
        ns = core.read_namespace(name)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    if ns.spec and ns.spec.finalizers:
        core.replace_namespace_finalize(
            name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}}
        )


# --------------------------------------------------------------------------- fake kubelet


class FakeKubelet:
    """Plays every node's kubelet: bound pods become Running, deleted bound pods go away.

    Watches pods (in `namespace`, or all) in a daemon thread. Nothing runs;
    only the status a scheduler and its users look at is written. Use as a
    context manager or call start()/stop().
    """

    def __init__(self, api: client.ApiClient, namespace: str | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.started: set[str] = set()  # "namespace/name" of pods marked Running
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> FakeKubelet:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fake-kubelet", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _list(self, **kwargs: Any) -> Any:
        if self.namespace:
            return self.core.list_namespaced_pod(self.namespace, **kwargs)
        return self.core.list_pod_for_all_namespaces(**kwargs)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listing = self._list()
                for pod in listing.items:
                    self._handle(pod)
                self._watch = watch.Watch()
                func = self.core.list_namespaced_pod if self.namespace else self.core.list_pod_for_all_namespaces
                args = (self.namespace,) if self.namespace else ()
                for event in self._watch.stream(
                    func, *args, resource_version=listing.metadata.resource_version, timeout_seconds=5
                ):
                    if self._stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._handle(event["object"])
            except ApiException as exc:
                if exc.status != 410:  # 410 Gone: our resourceVersion expired; relist
                    self.errors.append(exc)
                    self._stop.wait(0.5)
            except Exception as exc:  # keep playing kubelet; tests can inspect .errors
                if not self._stop.is_set():
                    self.errors.append(exc)
                    self._stop.wait(0.5)

    def _handle(self, pod: Any) -> None:
        if not pod.spec.node_name:
            return
        ns, name = pod.metadata.namespace, pod.metadata.name
        try:
            if pod.metadata.deletion_timestamp is not None:
                self.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
            elif (pod.status.phase or "Pending") == "Pending":
                self.core.patch_namespaced_pod_status(name, ns, self._running_status(pod))
                self.started.add(f"{ns}/{name}")
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone or changed meanwhile: the watch brings news
                raise

    @staticmethod
    def _running_status(pod: Any) -> dict[str, Any]:
        now = _now()
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        return {
            "status": {
                "phase": "Running",
                "startTime": now,
                "hostIP": "10.128.0.1",
                "podIP": "10.244.0.1",
                "conditions": conditions,
                "containerStatuses": [
                    {
                        "name": c.name,
                        "image": c.image,
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "started": True,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in pod.spec.containers
                ],
            }
        }
