"""The edge's guarantees (design.md, 2b) on the real control plane: the five situations in which the
hand-written edge used to fail, each reproduced under load, each with client-go's promise asserted.

1. A disconnection during which nodes and their pods are deleted and every resourceVersion expires
   (the operator comes back to 410s): no pod bound to a node that no longer exists, a pod that fits
   nowhere Pending with a FailedScheduling event, the cache equal to the API server's view.
2. A watch that goes silent (no events, no bookmarks, no error, no close): given up after the idle
   deadline, pods created meanwhile bound long before the stall ends, no bind reported as failed
   because it went out on a dead pooled connection.
3. A leader frozen past its lease, then resumed: the standby leads and binds; the old leader writes
   nothing once it runs again, says it stands by, and every pod is bound exactly once.
4. The operator SIGKILLed mid-run: after the restart every bound pod has exactly one Scheduled event.

(5., a login through an exec plugin, is in tests/cluster/test_exec_login.py.)

Sizes: 20 nodes, 300 pods of 100m made by a steady producer (60 more in 3, created as the old leader
wakes up); the fault strikes once a third of them are bound. The figures of each test are printed
on one line.
"""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from kube_helpers import Operator, wait
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from netfaults import StallProxy, expire_resource_versions, proxied_kubeconfig
from scenario import CALL_TIMEOUT, Rig, binding_requests, log

from kopf_scheduler.cluster.controlplane import free_port

NODES, PODS = 20, 300
#: leader election of test 3: the CLI's defaults (client-go's), so a freeze of PAUSE outlives the term
LEASE, RENEW, RETRY, JITTER = 15, 10, 2, 1.2
PAUSE = 35.0
#: test 2: the watches' idle deadline, and how soon after a stall the pods created during it must be bound
IDLE = 15.0
STALL_DEADLINE = 60.0
LEASE_NAMESPACE = "kopf-scheduler"
#: what Kopf logs when a resumed watch gets 410 Gone (kopf/_cogs/clients/watching.py), and what the App
#: logs when the informers listed every kind again after a broken watch (kube/app.py)
KOPF_410 = "Restarting the watch-stream"
RELISTED = "caches synced again"


def names(bodies: list[dict[str, Any]]) -> list[str]:
    return [b["metadata"]["name"] for b in bodies]


def readyz(port: int) -> str:
    """The operator's /readyz text ("" while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.read().decode()
    except OSError:
        return ""


def listed(rig: Rig) -> dict[str, str | None]:
    """``Rig.placement``, waiting out an API server that does not answer yet (one just restarted)."""
    return wait(None, rig.placement, timeout=30, message="the API server lists the pods")


def standing_by(port: int) -> str:
    """The /readyz text when it says ready and standing by, else ""."""
    text = readyz(port)
    return text if text.startswith("ok") and "(standby)" in text else ""


def delete_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _request_timeout=CALL_TIMEOUT)
    except ApiException as exc:
        if exc.status != 404:
            raise


def proxied(rig: Rig, proxy: StallProxy, *flags: str) -> Operator:
    """An operator whose every connection (Kopf's, the informers', the writes') goes through `proxy`."""
    config = proxied_kubeconfig(rig.sa_kubeconfig, proxy, rig.tmp_path / "proxied.kubeconfig")
    op = rig.operator(*flags, kubeconfig=config)
    rig.accepted(op)
    return op


# --------------------------------------------------------------------------- 1. disconnection, deletions, 410s


def test_a_disconnection_with_deletions_and_410s(rig: Rig, stall_proxy: StallProxy) -> None:
    general = rig.group.nodes(NODES - 4, cpu="8", memory="32Gi")
    big = rig.group.nodes(4, cpu="32", memory="128Gi")
    rig.policy()
    op = proxied(rig, stall_proxy)
    small = rig.pods(PODS)
    producer = rig.produce(small)
    rig.wait_bound(names(small), at_least=PODS // 3, timeout=60)

    stall_proxy.block()  # connections cut, new ones refused: the operator hears nothing from here on
    blocked = time.monotonic()
    doomed = set(big + general[:2])  # every node of the big shape, and two others
    for node in doomed:
        rig.core.delete_node(node, _request_timeout=CALL_TIMEOUT)

    def orphans() -> set[str]:
        """The pods bound to a deleted node (no kubelet and no garbage collector here: deleted as admin)."""
        out = {name for name, node in listed(rig).items() if node in doomed}
        for name in out:
            delete_pod(rig.core, rig.namespace, name)
        return out

    deleted = orphans()
    shaped = rig.pods(4, prefix="big", cpu="12")  # only a node of the deleted shape could hold one
    nowhere = rig.pods(1, prefix="nowhere", cpu="64")  # no node ever holds it
    for body in shaped + nowhere:
        rig.core.create_namespaced_pod(rig.namespace, body, _request_timeout=CALL_TIMEOUT)
    expire_resource_versions(rig.cp)  # every resourceVersion the operator holds is now too old: 410 Gone
    deleted |= orphans()  # a bind the cut left in flight at the API server may have landed since
    # the API server may read, after the block, a request the proxy passed on before it (a CI run saw a bind to a
    # doomed node received just after the deletions began, answered 504): sent knowing nothing of the deletions.
    # Nothing gets through while blocked; whatever the operator sends from the unblock on must know of them.
    reconnected_at = datetime.now(UTC)
    stall_proxy.unblock()
    unblocked = time.monotonic()

    remaining = [n for n in names(small) if n not in deleted]
    done = rig.wait_bound(remaining, timeout=90, op=op)

    def all_reported_unschedulable() -> bool:
        return set(names(shaped + nowhere)) <= {e.involved_object.name for e in rig.events("FailedScheduling")}

    wait(op, all_reported_unschedulable, timeout=60,
         message="the pods of the deleted shape and the one that fits nowhere reported unschedulable")  # fmt: skip
    placed = listed(rig)
    assert not any(placed[n] for n in names(shaped + nowhere)), {n: placed[n] for n in names(shaped + nowhere)}
    fresh = rig.group.nodes(2, cpu="32", memory="128Gi")  # the shape is back, under new names
    rig.wait_bound(names(shaped), timeout=60, op=op)
    producer.done(60)

    pods = remaining + names(shaped + nowhere)
    figures = rig.verdict(pods=pods, ops=[op])
    placed = listed(rig)
    existing = {n.metadata.name for n in rig.core.list_node(_request_timeout=CALL_TIMEOUT).items}
    requests = binding_requests(rig.audit_log, rig.namespace)
    late = [r for r in requests if r.node in doomed and r.time is not None and r.time >= reconnected_at]
    text = op.text()
    figures.extra.update(
        blocked_s=round(unblocked - blocked, 1), all_bound_after_unblock_s=round(done - unblocked, 1),
        nodes_deleted=len(doomed), pods_deleted=len(deleted), binds_to_deleted_nodes=len(late),
        watches_410=text.count(KOPF_410), relists=text.count(RELISTED),
    )  # fmt: skip
    log(figures.line("a disconnection with node and pod deletions, then 410s"))
    assert not late, f"bindings to deleted nodes sent after the reconnection: {late[:5]}"
    assert all(node in existing for node in placed.values() if node), {
        p: n for p, n in placed.items() if n and n not in existing
    }
    assert all(placed[n] in fresh for n in names(shaped)), {n: placed[n] for n in names(shaped)}
    assert figures.bound == len(pods) - 1 and figures.pending == 1 and not placed[names(nowhere)[0]]
    # the fault happened: Kopf resumed its pod watch and got 410 Gone; the informers listed everything again
    assert f"{KOPF_410} for pods.v1" in text and figures.extra["relists"] > 0


# --------------------------------------------------------------------------- 2. a silently stalled watch


def test_a_silently_stalled_watch(rig: Rig, stall_proxy: StallProxy) -> None:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    op = proxied(rig, stall_proxy, "--watch-idle-timeout", f"{IDLE:g}")
    warm = rig.pods(PODS // 3, prefix="warm")
    rig.produce(warm).done(60)
    rig.wait_bound(names(warm), timeout=60)  # the binds and events left keep-alive connections in the pool

    accepted_before = stall_proxy.accepted
    stalled = stall_proxy.stall()  # watches and pooled connections go silent; new connections work
    stalled_at = time.monotonic()
    try:
        during = rig.pods(PODS - len(warm), prefix="during")
        rig.produce(during).done(60)
        done = rig.wait_bound(names(during), timeout=STALL_DEADLINE, op=op)
        held = stall_proxy.held
    finally:
        resumed = stall_proxy.resume()
    took = done - stalled_at

    pods = names(warm) + names(during)
    figures = rig.verdict(pods=pods, ops=[op])
    failed = [e for e in rig.events("FailedScheduling") if e.involved_object.name in set(pods)]
    text = op.text()
    figures.extra.update(
        connections_stalled=stalled,
        reconnections=stall_proxy.accepted - accepted_before,
        all_bound_after_stall_s=round(took, 1),
        idle_watches_given_up=text.count(f"nothing received for {IDLE:g}s"),
        bytes_held=held,
        bytes_released=resumed,
        failed_scheduling=len(failed),
    )  # fmt: skip
    log(figures.line(f"a silently stalled watch (idle deadline {IDLE:g}s)"))
    assert figures.bound == len(pods) and figures.lost == 0
    assert took < STALL_DEADLINE  # and the stall lasted until after they were all bound
    assert not failed, [f"{e.involved_object.name}: {e.message}" for e in failed[:5]]


# --------------------------------------------------------------------------- 3. a leader frozen past its lease


def lease_of(rig: Rig) -> client.V1Lease:
    name = f"kopf-scheduler-{rig.scheduler}"  # kube/handlers.shard_name: one --policy shard, named by it
    return client.CoordinationV1Api(rig.api).read_namespaced_lease(name, LEASE_NAMESPACE, _request_timeout=CALL_TIMEOUT)


def test_a_leader_frozen_past_its_lease_writes_nothing_once_resumed(rig: Rig) -> None:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    flags = ["--leader-elect", "--lease-namespace", LEASE_NAMESPACE, "--lease-duration", str(LEASE)]
    flags += ["--renew-deadline", str(RENEW), "--retry-period", str(RETRY)]
    ports = free_port(), free_port()
    leader = rig.operator(*flags, "--insecure-port", str(ports[0]), name="replica")
    rig.accepted(leader)
    wait(leader, lambda: "started leading" in leader.text(), message="the first replica leads")
    standby = rig.operator(*flags, "--insecure-port", str(ports[1]), name="replica")
    wait(
        standby,
        lambda: "attempting to acquire lease" in standby.text(),
        message="the second replica stands as a candidate",
    )
    wait(standby, lambda: standing_by(ports[1]), message="the standby is ready")
    bodies = rig.pods(PODS)
    producer = rig.produce(bodies)
    pods = names(bodies)
    rig.wait_bound(pods, at_least=PODS // 3, timeout=60)

    pause = rig.pause(leader)
    wait(
        standby,
        lambda: "started leading" in standby.text(),
        timeout=LEASE + 4 * (1 + JITTER) * RETRY,
        message="the standby took over",
    )
    took = pause.seconds
    ours = standby.identity()

    def new_leader_binds() -> bool:
        return any(r.identity == ours and r.code == 201 for r in binding_requests(rig.audit_log, rig.namespace))

    wait(standby, new_leader_binds, message="the new leader binds")
    transitions = lease_of(rig).spec.lease_transitions
    time.sleep(max(0.0, PAUSE - pause.seconds))  # the freeze lasts PAUSE seconds in all, well past the lease
    late = rig.pods(PODS // 5, prefix="late")
    late_producer = rig.produce(late)  # pods keep coming as the old leader wakes up: its handlers see them too
    rig.resume(leader)
    assert pause.resumed is not None

    resumed_ready = readyz(ports[0])  # its term is over on its own clock the instant it runs again
    wait(
        leader,
        lambda: "not leading; the scheduling loops pause" in leader.text(),
        timeout=30,
        message="the old leader stepped down",
    )
    # it lists every kind again (the watchdog saw the freeze), then stands by, ready
    old_ready = wait(leader, lambda: standing_by(ports[0]), message="the old leader is a ready standby")
    pods += names(late)
    done = rig.wait_bound(pods, timeout=90, op=standby)
    producer.done(60)
    late_producer.done(60)
    figures = rig.verdict(pods=pods, ops=[standby, leader])
    after = rig.writes_by(leader, since=pause.resumed)
    lease = lease_of(rig)
    by = Counter(e.reporting_instance for e in rig.events("Scheduled"))
    figures.extra.update(
        frozen_s=round(pause.seconds, 1), takeover_s=round(took, 1),
        all_bound_after_resume_s=round(done - (pause.resumed_at or 0), 1),
        writes_after_resume=len(after), lease_writes_after_resume=sum(1 for w in after if w.resource == "leases"),
        scheduled_by_old=by[leader.identity()], by_new=by[ours], old_calls_off=leader.text().count("not binding "),
    )  # fmt: skip
    log(figures.line(f"a leader frozen {PAUSE:g}s past its {LEASE}s lease, then resumed"))
    # nothing but Lease requests, and none of them took the Lease back: the holder and the transitions are the new
    # leader's
    assert not [w for w in after if w.resource != "leases"], [
        (w.verb, w.resource, w.subresource, w.name, w.code) for w in after
    ][:10]
    assert lease.spec.holder_identity == ours and lease.spec.lease_transitions == transitions, lease.spec
    assert "(leading)" not in resumed_ready and "(leading)" not in old_ready, (resumed_ready, old_ready)
    assert "(leading)" in readyz(ports[1])
    assert figures.bound == len(pods) and figures.lost == 0
    assert by[ours] > 0


# --------------------------------------------------------------------------- 4. SIGKILL mid-run


def test_the_operator_killed_mid_run_leaves_no_bind_without_its_event(rig: Rig) -> None:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    first = rig.operator()
    rig.accepted(first)
    bodies = rig.pods(PODS)
    producer = rig.produce(bodies)
    pods = names(bodies)
    rig.wait_bound(pods, at_least=PODS // 3, timeout=60)
    first.stop(signal.SIGKILL)
    killed = time.monotonic()
    bound_at_kill = {n for n, node in rig.placement().items() if node}
    without_event = bound_at_kill - set(rig.scheduled_events())
    second = rig.operator(name="restarted")
    done = rig.wait_bound(pods, timeout=60, op=second)
    producer.done(60)
    figures = rig.verdict(pods=pods, ops=[second])

    def each_bound_pod_has_one_event() -> bool:
        events = rig.scheduled_events()
        return all(events.get(n) == 1 for n in pods)

    wait(second, each_bound_pod_has_one_event, timeout=30, message="every bound pod has its Scheduled event")
    events = rig.scheduled_events()
    figures.extra.update(
        bound_at_kill=len(bound_at_kill), of_them_without_event=len(without_event),
        all_bound_after_kill_s=round(done - killed, 1),
        events=sum(events.get(n, 0) for n in pods),
    )  # fmt: skip
    log(figures.line("operator SIGKILL mid-run + restart: Scheduled events"))
    assert figures.bound == len(pods) and figures.lost == 0
    assert {n: c for n, c in events.items() if n in set(pods) and c != 1} == {}
