"""Faults from others under load: the leader SIGKILLed with a standby waiting, another binder racing
ours, a node deleted while pods are assumed on it, an extender that answers garbage or hangs. The
verdict of ``scenario.Rig`` after each; the figures are printed for the issue's closing note.
"""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from extender_server import ExtenderServer
from kube_helpers import wait
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from scenario import CALL_TIMEOUT, Rig, binding_requests, log

#: leader election timing of the replicas (seconds), and client-go's jitter factor (kube/leader.py)
LEASE, RENEW, RETRY, JITTER = 4, 3, 1, 1.2


def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> bool:
    """Bind as another scheduler would (as admin); False when someone was first."""
    body = {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }  # fmt: skip
    try:
        core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False, _request_timeout=CALL_TIMEOUT)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


def test_the_leader_killed_under_load(rig: Rig) -> None:
    rig.group.nodes(20, cpu="8", memory="32Gi")
    rig.policy()
    flags = [
        "--leader-elect",
        "--lease-namespace",
        "kopf-scheduler",
        "--lease-duration",
        str(LEASE),
        "--renew-deadline",
        str(RENEW),
        "--retry-period",
        str(RETRY),
    ]
    leader = rig.operator(*flags, name="replica")
    rig.accepted(leader)
    wait(leader, lambda: "started leading" in leader.text(), message="the first replica leads")
    standby = rig.operator(*flags, name="replica")
    wait(
        standby,
        lambda: "attempting to acquire lease" in standby.text(),
        message="the second replica stands as a candidate",
    )
    pods = [p["metadata"]["name"] for p in rig.pods(400)]
    rig.produce(rig.pods(400))
    rig.wait_bound(pods, at_least=len(pods) // 3, timeout=60)
    leader.stop(signal.SIGKILL)  # no release: the standby must wait the lease out
    killed = time.monotonic()
    wait(standby, lambda: "started leading" in standby.text(), timeout=30, message="the standby took over")
    took = time.monotonic() - killed
    done = rig.wait_bound(pods, timeout=60, op=standby)
    rig.producers[0].done(60)
    figures = rig.verdict(pods=pods, ops=[standby])
    by = Counter(e.reporting_instance for e in rig.events("Scheduled"))
    figures.extra.update(
        takeover_s=round(took, 1),
        all_bound_after_kill_s=round(done - killed, 1),
        scheduled_by_leader=by[leader.identity()],
        by_standby=by[standby.identity()],
    )
    log(figures.line(f"leader SIGKILL, standby takes over (lease {LEASE}s, retry {RETRY}s)"))
    assert figures.bound == len(pods) and figures.lost == 0
    assert set(by) <= {leader.identity(), standby.identity()} and by[standby.identity()] > 0
    # The standby judges expiry on its own clock from when it last saw the Lease change (client-go):
    # the leader's last renewal came at most one retry period before the kill, the standby saw it at
    # its next jittered poll (<= (1 + jitter) x retry later), waited one lease duration from there,
    # and acquires at its next poll after that.
    assert took <= LEASE + 2 * (1 + JITTER) * RETRY, f"takeover took {took:.1f}s"


def test_a_racing_binder_binds_some_of_our_pods_first(rig: Rig) -> None:
    nodes = rig.group.nodes(10, cpu="8", memory="32Gi")
    rig.policy()
    op = rig.operator()
    rig.accepted(op)
    rng = random.Random(7)
    # 1. pods we cannot place (their selector matches no node) wait as unschedulable; another binder places them
    elsewhere = [
        p["metadata"]["name"] for p in rig.pods(20, prefix="elsewhere", node_selector={"e2e.kopf.dev/none": "x"})
    ]
    rig.produce(rig.pods(20, prefix="elsewhere", node_selector={"e2e.kopf.dev/none": "x"})).done(30)
    wait(
        op,
        lambda: {e.involved_object.name for e in rig.events("FailedScheduling")} >= set(elsewhere),
        message="the operator gave up on them",
    )
    for i, name in enumerate(elsewhere):
        assert bind(rig.core, rig.namespace, name, nodes[i % len(nodes)])
    # 2. every third pod is bound by the racer the moment it exists, while our operator tries too
    raced: list[bool] = []

    def race(body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if int(name.rsplit("-", 1)[1]) % 3 == 0:
            raced.append(bind(rig.core, rig.namespace, name, rng.choice(nodes)))

    pods = [p["metadata"]["name"] for p in rig.pods(300)]
    rig.produce(rig.pods(300), after_create=race).done(60)
    rig.wait_bound(pods, timeout=60)
    figures = rig.verdict(pods=pods + elsewhere, ops=[op])
    racer = [
        r
        for r in binding_requests(rig.audit_log, rig.namespace)
        if r.user != "system:serviceaccount:kopf-scheduler:kopf-scheduler"
    ]
    figures.extra.update(
        racer_won=sum(raced) + len(elsewhere), racer_lost=raced.count(False), racer_requests=len(racer)
    )
    log(figures.line("a racing binder"))
    assert figures.bound == len(pods) + len(elsewhere) and figures.lost == 0
    # the unschedulable pods the racer placed are out of the queue: no attempt after they were bound
    dump = op.dump_cache()
    assert sum(q["unschedulable"] + q["backoff"] + q["active"] for q in dump["queue"]) == 0, dump["queue"]


class HeldBinder:
    """An extender whose bind verb holds every request until released, then binds through the API
    server unless the node is gone (a binder that checks its target, as a real one would)."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.held: list[tuple[str, str]] = []  # (pod, node) while waiting
        self.refused: list[tuple[str, str]] = []

    def bind(self, args: Any) -> tuple[int, Any]:
        pod, namespace, node = args["PodName"], args["PodNamespace"], args["Node"]
        with self.lock:
            self.held.append((pod, node))
        self.release.wait(60)
        try:
            self.core.read_node(node, _request_timeout=CALL_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                with self.lock:
                    self.refused.append((pod, node))
                return 200, {"Error": f"node {node} not found"}
            raise
        try:
            bind(self.core, namespace, pod, node)
        except ApiException as exc:
            return 200, {"Error": f"binding refused: {exc.status}"}
        return 200, {"Error": ""}


@pytest.fixture
def held_binder(rig: Rig) -> Iterator[tuple[HeldBinder, ExtenderServer]]:
    binder = HeldBinder(rig.core)
    with ExtenderServer({"bind": binder.bind}) as server:
        try:
            yield binder, server
        finally:
            binder.release.set()


def test_a_node_deleted_while_pods_are_assumed_on_it(rig: Rig, held_binder: tuple[HeldBinder, ExtenderServer]) -> None:
    binder, server = held_binder
    rig.group.nodes(8, cpu="8", memory="32Gi")
    rig.policy({"extenders": [{"urlPrefix": server.url, "bindVerb": "bind", "httpTimeout": "60s"}]})
    op = rig.operator()
    rig.accepted(op)
    pods = [p["metadata"]["name"] for p in rig.pods(200)]
    rig.produce(rig.pods(200))
    wait(op, lambda: len(binder.held) >= 16, timeout=60, message="binds held by the extender")
    with binder.lock:
        victim, _ = Counter(node for _, node in binder.held).most_common(1)[0]
    on_victim = {pod for pod, node in binder.held if node == victim}
    rig.core.delete_node(victim)
    wait(
        op,
        lambda: victim not in {e["node"] for e in op.dump_cache()["node"] if not e["deleted"]},
        message="the operator saw the node go",
    )
    binder.release.set()
    rig.wait_bound(pods, timeout=90)
    rig.producers[0].done(60)
    figures = rig.verdict(pods=pods, ops=[op])
    placed = rig.placement()
    figures.extra.update(assumed_on_deleted_node=len(on_victim), refused_binds=len(binder.refused))
    log(figures.line("a node deleted while pods are assumed on it"))
    assert figures.bound == len(pods) and figures.lost == 0
    assert victim not in placed.values()
    assert on_victim and all(placed[p] not in (None, victim) for p in on_victim), {p: placed[p] for p in on_victim}


def test_an_extender_that_answers_garbage_or_hangs(rig: Rig) -> None:
    calls = itertools.count()
    release = threading.Event()

    def filter_(args: Any) -> tuple[int, Any]:
        match next(calls) % 8:
            case 1:
                return 200, b"{this is not json"
            case 3:
                return 500, {"Error": "internal"}
            case 5:
                return 200, {"NodeNames": 5}
            case 7:
                release.wait(1.0)  # outlives the 300ms httpTimeout
                return 200, {"NodeNames": args["NodeNames"]}
            case _:
                return 200, {"NodeNames": args["NodeNames"]}

    def prioritize(args: Any) -> tuple[int, Any]:
        return 200, [{"Host": n, "Score": 5} for n in args["NodeNames"]]

    with ExtenderServer({"filter": filter_, "prioritize": prioritize}) as server:
        try:
            rig.group.nodes(10, cpu="8", memory="32Gi")
            extender = {
                "urlPrefix": server.url,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 1,
                "nodeCacheCapable": True,
                "httpTimeout": "300ms",
            }
            rig.policy({"extenders": [extender], "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2})
            op = rig.operator()
            rig.accepted(op)
            pods = [p["metadata"]["name"] for p in rig.pods(150)]
            rig.produce(rig.pods(150)).done(60)
            rig.wait_bound(pods, timeout=120)
            figures = rig.verdict(pods=pods, ops=[op])
        finally:
            release.set()
    # every failed attempt is logged; events are one per pod per 30 s (core/framework/recording.py)
    attempts = [line for line in op.text().splitlines() if "error scheduling " in line]
    events = rig.events("FailedScheduling")
    kinds = {
        "not JSON": "decoding the answer of",
        "HTTP 500": "code 500",
        "wrong types": "decoding the filter answer: NodeNames",
        "hang": "context deadline exceeded",
    }
    seen = {kind: sum(1 for line in attempts if needle in line) for kind, needle in kinds.items()}
    figures.extra.update(
        filter_calls=next(calls),
        failed_attempts=len(attempts),
        events=len(events),
        **{k.replace(" ", "_"): v for k, v in seen.items()},
    )
    log(figures.line("an extender answering garbage (1 in 8 calls each: not JSON, HTTP 500, wrong types, a hang)"))
    assert figures.bound == len(pods) and figures.lost == 0
    assert all(seen.values()), seen  # each kind of garbage was met, and reported, not crashed on
    assert events and all(e.message for e in events)
    assert "Traceback" not in op.text()
