"""Crashes under load: kube-apiserver, etcd and the operator SIGKILLed while a few hundred pods are in
flight, then started again; the verdict of ``scenario.Rig`` after each (nothing lost, nothing bound
twice, the cache equal to the API server's view).

Sizes: 20 nodes of 8 cpu, 400 pods of 100m made by a steady producer (a workload controller that
retries through the outage) plus 4 pods too big for any node, which must end Pending with a
FailedScheduling event. The fault strikes when a third of the pods are bound.
"""

from __future__ import annotations

import signal
import time

from kube_helpers import wait
from scenario import Rig, log

NODES, PODS, TOO_BIG = 20, 400, 4
#: "every schedulable pod bound within 60 s of the restart"
RECOVERY_DEADLINE = 60.0


def start(rig: Rig) -> tuple[list[str], list[str]]:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    rig.accepted(rig.operator())
    pods = rig.pods(PODS)
    too_big = rig.pods(TOO_BIG, prefix="too-big", cpu="64")
    rig.produce(too_big + pods)
    return [p["metadata"]["name"] for p in pods], [p["metadata"]["name"] for p in too_big]


def at_fault(rig: Rig, pods: list[str]) -> dict[str, int]:
    """Wait for a third of the pods to be bound; then how far the run got (the fault strikes next)."""
    rig.wait_bound(pods, at_least=PODS // 3, timeout=60)
    bound = sum(1 for name, node in rig.placement().items() if node and name in set(pods))
    return {"created_at_fault": rig.producers[0].created, "bound_at_fault": bound}


def test_the_api_server_killed_and_restarted(rig: Rig) -> None:
    pods, too_big = start(rig)
    progress = at_fault(rig, pods)
    rig.cp.kill("kube-apiserver")
    down = time.monotonic()
    rig.cp.restart("kube-apiserver")  # its start takes seconds: the outage
    ready = time.monotonic()
    done = rig.wait_bound(pods, timeout=RECOVERY_DEADLINE)
    rig.producers[0].done(RECOVERY_DEADLINE)
    # binds whose answers the kill cut off may have no audit record: at most one success per pod, then
    figures = rig.verdict(pods=pods + too_big, ops=rig.operators, audit_complete=False)
    figures.extra.update(progress, outage_s=round(ready - down, 1), all_bound_after_restart_s=round(done - ready, 1))
    log(figures.line("kube-apiserver SIGKILL + restart"))
    assert figures.bound == PODS and figures.pending == TOO_BIG and figures.lost == 0


def etcd_is_missed(rig: Rig) -> bool:
    """The API server's readiness says it cannot reach etcd."""
    try:
        rig.cp.request("GET", "/readyz/etcd", timeout=5)
    except (OSError, ValueError):  # urllib's HTTPError (500) is an OSError
        return True
    return False


def test_etcd_killed_and_restarted(rig: Rig) -> None:
    pods, too_big = start(rig)
    progress = at_fault(rig, pods)
    rig.cp.kill("etcd")
    down = time.monotonic()
    wait(rig.operators[0], lambda: etcd_is_missed(rig), timeout=60, message="the API server noticed that etcd is gone")
    rig.cp.restart("etcd")
    ready = time.monotonic()
    done = rig.wait_bound(pods, timeout=RECOVERY_DEADLINE)
    rig.producers[0].done(RECOVERY_DEADLINE)
    # a bind whose etcd write was cut off may be committed and still answered 409 ("Unavailable"):
    # at most one success per pod in the audit log, then
    figures = rig.verdict(pods=pods + too_big, ops=rig.operators, audit_complete=False)
    figures.extra.update(progress, outage_s=round(ready - down, 1), all_bound_after_restart_s=round(done - ready, 1))
    log(figures.line("etcd SIGKILL + restart"))
    assert figures.bound == PODS and figures.pending == TOO_BIG and figures.lost == 0


def test_the_operator_killed_mid_batch_and_started_again(rig: Rig) -> None:
    pods, too_big = start(rig)
    first = rig.operators[0]
    progress = at_fault(rig, pods)
    assumed = {key.split("/", 1)[1] for entry in first.dump_cache()["node"] for key in entry["assumed"]}
    first.stop(signal.SIGKILL)
    killed = time.monotonic()
    bound_at_kill = {name for name, node in rig.placement().items() if node}
    second = rig.operator(name="restarted")
    done = rig.wait_bound(pods, timeout=RECOVERY_DEADLINE, op=second)
    rig.producers[0].done(RECOVERY_DEADLINE)
    figures = rig.verdict(pods=pods + too_big, ops=[second])
    figures.extra.update(
        progress,
        assumed_at_kill=len(assumed),
        of_them_unbound=len(assumed - bound_at_kill),
        bound_at_kill=len(bound_at_kill & set(pods)),
        all_bound_after_kill_s=round(done - killed, 1),
    )
    log(figures.line("operator SIGKILL mid-batch + restart"))
    assert figures.bound == PODS and figures.pending == TOO_BIG and figures.lost == 0
    # the verdict saw every pod bound exactly once: the assumed-but-unbound ones were scheduled again
