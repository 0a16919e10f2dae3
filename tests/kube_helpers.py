"""Helpers for tests against the real local control plane (see conftest.py).

The control plane has no kubelet (its kube-controller-manager does the rest), so
these helpers play that part: create Node objects with a Ready status (or, with
``kwok=True``, for KWOK to make Ready and run their pods: the ``kwok`` fixture),
and force-delete the pods of a namespace being deleted (no kubelet confirms a
graceful deletion on a plain node). The second half runs our operator as a subprocess
(``Operator``) and manages SchedulingPolicies and per-test node groups for the
end-to-end tests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kopf_scheduler.cluster.bodies import (
    NO_PRESSURE,
    PAUSE_IMAGE,
    NodeBody,
    fake_node_ip,
    node_body,
    pod_body,
    timestamp,
)
from kopf_scheduler.cluster.kwok import kwok_node

__all__ = [
    "GROUP",
    "GROUP_LABEL",
    "PLURAL",
    "ROOT",
    "VERSION",
    "Group",
    "Operator",
    "accepted",
    "create_policy",
    "delete_policy",
    "replace_spec",
    "wait",
    "wait_accepted",
    "create_nodes",
    "delete_all_nodes",
    "delete_namespace",
    "make_pod_body",
    "wait_for",
]

T = TypeVar("T")


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
    index: int,
    *,
    cpu: str,
    memory: str,
    pods: int,
    labels: Mapping[str, str] | None,
    zone: str | None,
    taints: Sequence[Mapping[str, str]] | None,
    conditions: Mapping[str, str] | None,
) -> NodeBody:
    """A node as a fake kubelet registers it: platform labels, capacity == allocatable, no pressure."""
    body = node_body(name).hostname().platform().labels(labels or {})
    if zone is not None:
        body.zone(zone)
    if taints:
        body.taints(taints)
    now = timestamp()
    return (
        body.capacity({"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"})
        .conditions(
            {"Ready": "True", **NO_PRESSURE, **(conditions or {})}, reason="Fake{type}", heartbeat=now, transition=now
        )
        .address(fake_node_ip(index))
        .node_info()
    )


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
    kwok: bool = False,
) -> list[str]:
    """Create `n` Nodes named `<name_prefix><i>` and set their status; return the names.

    Status goes through the status subresource (a create ignores it). Every
    node gets capacity == allocatable, Ready=True plus no pressure conditions
    (override with e.g. ``conditions={"Ready": "False"}``), and, when `zones`
    is given, topology.kubernetes.io/zone round-robin over them. `taints` are
    dicts like ``{"key": "k", "value": "v", "effect": "NoSchedule"}``.

    With `kwok`, the nodes are KWOK's (the ``kwok`` fixture must run): created with their status
    but no conditions, in one create, and KWOK makes them Ready and runs the pods bound to them.
    The caller waits for Ready (``Kwok.wait_nodes_ready``) if it matters; `conditions` is refused.
    """
    if kwok and conditions:
        raise ValueError("KWOK writes a KWOK node's conditions: conditions= would be overwritten")
    core = client.CoreV1Api(api)

    def one(i: int) -> str:
        name = f"{name_prefix}{i}"
        zone = zones[i % len(zones)] if zones else None
        body = _node_body(
            name, i, cpu=cpu, memory=memory, pods=pods, labels=labels, zone=zone, taints=taints, conditions=conditions
        )
        if kwok:
            core.create_node(kwok_node(body).obj())
        else:
            core.create_node(body.manifest())
            core.patch_node_status(name, body.status())
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
    body = pod_body(name, namespace or None).labels(labels or {})
    body.automount_service_account_token(False).termination_grace_period(0)
    for i in range(containers):
        body.container(f"c{i}", PAUSE_IMAGE, **requests)
    if scheduler_name:
        body.scheduler(scheduler_name)
    if node_selector:
        body.node_selector_map(node_selector)
    if tolerations:
        body.tolerations(tolerations)
    if affinity:
        body.affinity(affinity)
    if priority_class_name:
        body.priority_class(priority_class_name)
    return body.obj()


def delete_namespace(api: client.ApiClient, name: str) -> None:
    """Delete a namespace; the namespace controller deletes what it holds, then the namespace.

    Its pods are force-deleted first: on a plain node no kubelet would confirm a graceful deletion,
    and the namespace would stay Terminating until their grace periods ran out.
    """
    core = client.CoreV1Api(api)
    try:
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


# --------------------------------------------------------------------------- the operator and its policies

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL = "scheduling.kopf.dev", "v1alpha1", "schedulingpolicies"
#: a label each e2e test puts on its own nodes and selects in its pods
GROUP_LABEL = "e2e.kopf.dev/group"


class Operator:
    """One `kopf-scheduler run` subprocess, its log in a file (``--verbose`` unless told otherwise)."""

    def __init__(
        self,
        log: Path,
        args: Sequence[str],
        kubeconfig: Path,
        *,
        env: Mapping[str, str] | None = None,
        verbose: bool = True,
    ) -> None:
        self.log = log
        self.args = list(args)
        if env is None:
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")]),
            }
        self._file = open(log, "wb")
        flags = ["--verbose"] if verbose else []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kopf_scheduler.commands",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--secure-port",
                "0",
                *flags,
                *args,
            ],
            stdout=self._file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        """The log's last lines, cache dumps left out (one dump fills a tail)."""
        kept = [line for line in self.text().splitlines() if "cache dump: " not in line]
        return "\n".join(kept[-lines:])

    def problems(self, most: int = 12) -> str:
        """The log's warnings and errors, each kind once (numbers aside) with how often and its first
        example, most frequent first: what a failure's message shows before the tail."""
        seen: Counter[str] = Counter()
        first: dict[str, str] = {}
        for line in self.text().splitlines():
            for level in ("[WARNING ]", "[ERROR   ]", "[CRITICAL]"):
                if level in line:
                    what = level.strip("[] ") + " " + line.split(level, 1)[1].strip()[:120]
                    kind = re.sub(r"\d+", "N", what)
                    seen[kind] += 1
                    first.setdefault(kind, what)
        return "\n".join(f"{count:5d} x {first[kind]}" for kind, count in seen.most_common(most))

    def identity(self) -> str:
        """The process's identity (its events' reportingInstance), from its leader-election or startup log line."""
        for line in self.text().splitlines():
            if "attempting to acquire lease" in line:
                return line.rsplit("] ", 1)[1].split(":", 1)[0].strip()
            if "kopf-scheduler " in line and " started; API server " in line:
                return line.split("kopf-scheduler ", 1)[1].split(" started; ", 1)[0].strip()
        return ""

    def dump_cache(self, timeout: float = 30.0) -> dict[str, list[dict[str, Any]]]:
        """SIGUSR2, then the dump it logs (``core/state/dump.py``): {"node": [...], "queue": [...], "end": [...]}."""
        prefix, end = "cache dump: ", "cache dump: end "
        before = self.text().count(end)
        self.proc.send_signal(signal.SIGUSR2)
        wait(
            self, lambda: self.text().count(end) > before, timeout=timeout, message="the operator logged its cache dump"
        )
        dumped = [line.split(prefix, 1)[1] for line in self.text().splitlines() if prefix in line]
        ends = [i for i, line in enumerate(dumped) if line.startswith("end ")]
        first = ends[before - 1] + 1 if before else 0
        out: dict[str, list[dict[str, Any]]] = {}
        for line in dumped[first : ends[before] + 1]:
            kind, _, body = line.partition(" ")
            out.setdefault(kind, []).append(json.loads(body))
        return out

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._file.close()


def wait(op_or_none: Operator | None, predicate: Callable[[], T], timeout: float = 20.0, message: str = "") -> T:
    try:
        return wait_for(predicate, timeout=timeout, interval=0.2, message=message)
    except TimeoutError as exc:
        tail = (
            f"\n--- the operator's warnings and errors ---\n{op_or_none.problems()}"
            f"\n--- operator log tail ---\n{op_or_none.tail(40)}"
            if op_or_none is not None
            else ""
        )
        raise AssertionError(f"{exc}{tail}") from None


def create_policy(custom: client.CustomObjectsApi, name: str, spec: Mapping[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": dict(spec),
    }
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)


def replace_spec(custom: client.CustomObjectsApi, name: str, spec: Mapping[str, Any]) -> int:
    obj = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    obj["spec"] = dict(spec)
    return int(custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, obj)["metadata"]["generation"])


def delete_policy(custom: client.CustomObjectsApi, name: str, timeout: float = 15.0) -> None:
    """Delete; if the finalizer is still there after `timeout` (no operator left), drop it."""
    try:
        custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.2)
    try:
        custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": None}})
    except ApiException as exc:
        if exc.status != 404:
            raise


def accepted(custom: client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    obj = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Accepted":
            return {**cond, "_status": obj.get("status") or {}, "_generation": obj["metadata"]["generation"]}
    return None


def wait_accepted(
    custom: client.CustomObjectsApi, name: str, op: Operator | None, *, generation: int = 1, status: str = "True"
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        c = accepted(custom, name)
        ok = c is not None and c["status"] == status and c["_status"].get("observedGeneration") == generation
        return c if ok else None

    return wait(op, check, message=f"policy {name} Accepted={status} at generation {generation}")


class Group:
    """Nodes of one test: unique names and a label its pods select; deleted afterwards."""

    def __init__(self, api: client.ApiClient, *, scheduler: str | None = None) -> None:
        self.api = api
        #: the schedulerName of this group's pods unless a pod names another
        self.scheduler = scheduler
        self.id = uuid.uuid4().hex[:6]
        self.names: list[str] = []

    def nodes(self, n: int = 1, *, labels: Mapping[str, str] | None = None, **kwargs: Any) -> list[str]:
        prefix = f"e2e-{self.id}-{len(self.names)}-"
        names = create_nodes(self.api, n, labels={GROUP_LABEL: self.id, **(labels or {})}, name_prefix=prefix, **kwargs)
        self.names += names
        return names

    def pod(
        self, name: str, scheduler: str | None = "", *, node_selector: Mapping[str, str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """A pod body for one of this group's nodes; ``scheduler=None`` leaves it to the default scheduler."""
        return make_pod_body(
            name,
            scheduler_name=self.scheduler if scheduler == "" else scheduler,
            node_selector={GROUP_LABEL: self.id, **(node_selector or {})},
            **kwargs,
        )

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        core = client.CoreV1Api(self.api)
        for name in self.names:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
