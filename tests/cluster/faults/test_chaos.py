"""Availability through a lossy network and an API server restart, on the real control plane.

1. Through ``ChaosProxy`` (netfaults.py: half of the server's chunks split into 1-16 byte pieces, 2% of
   them reset part-way, every connection closed after 0.3-3 s idle, 5% of discovery answers cut
   short), 20 nodes and 300 pods created at 15/s: every pod bound exactly once with exactly one
   Scheduled event, the cache equal to the API server's, no informer ever paused (only lost history
   pauses), Kopf restarted in place when its start-up scan was cut short.
2. Ten start-ups in a row through the proxy, a fifth of the discovery answers cut short: each process
   becomes ready and binds a pod created after it started; none exits.
3. kube-apiserver restarted during a steady stream of pods: the longest gap between two binds is at
   most the time the API server was down plus a little (the watches resume, or pods and nodes relist
   after the 410s a fresh watch cache gives, in well under a second here).

The figures of each test are printed on one line (``-s``).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from kube_helpers import Operator, wait
from netfaults import ChaosProxy, proxied_kubeconfig
from scenario import Rig, binding_requests, log

from kopf_scheduler.cluster.controlplane import free_port

NODES, PODS, RATE = 20, 300, 15.0
STARTUPS = 10
#: test 3: the API server is restarted once this many pods are bound
RESTART_AFTER = 100
#: what an API server restart may cost beyond its downtime (the issue's promise is 2 s; a shared
#: 2-core machine starting kube-apiserver adds its own noise, printed beside the figure)
RESTART_SLACK = 5.0


def names(bodies: list[dict[str, Any]]) -> list[str]:
    return [b["metadata"]["name"] for b in bodies]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, name: str) -> float:
    """The sum of every series of `name` (a family, or a family with the start of its labels:
    ``family{code="<error>"``) in a Prometheus exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and ("{" in name or line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def chaotic(rig: Rig, chaos: ChaosProxy, port: int, *, name: str = "operator") -> Operator:
    config = proxied_kubeconfig(rig.sa_kubeconfig, chaos, rig.tmp_path / f"chaos-{name}.kubeconfig")
    return rig.operator("--insecure-port", str(port), kubeconfig=config, name=name)


def bind_times(rig: Rig) -> list[datetime]:
    return sorted(r.time for r in binding_requests(rig.audit_log, rig.namespace) if r.code == 201 and r.time)


# --------------------------------------------------------------------------- 1. a flaky load balancer


def test_300_pods_through_a_flaky_load_balancer_are_bound_once_each_with_their_event(rig: Rig) -> None:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    port = free_port()
    with ChaosProxy(rig.cp, seed=24) as chaos:
        op = chaotic(rig, chaos, port)
        rig.accepted(op)
        bodies = rig.pods(PODS)
        started = time.monotonic()
        producer = rig.produce(bodies, rate=RATE)
        done = rig.wait_bound(names(bodies), timeout=180, op=op)
        producer.done(60)

        def each_bound_pod_has_one_event() -> bool:
            events = rig.scheduled_events()
            return all(events.get(n) == 1 for n in names(bodies))

        wait(op, each_bound_pod_has_one_event, timeout=60, message="every bound pod has its Scheduled event")
        _, metrics = get(port, "/metrics")
        stats = chaos.stats.line()
        figures = rig.verdict(pods=names(bodies), ops=[op])  # bound once, the cache equal to the API server's
    text = op.text()
    figures.extra.update(
        pods_per_s=round(PODS / (done - started), 1),
        resumes=int(metric(metrics, "kopf_scheduler_informer_watch_resumes_total")),
        relists=int(metric(metrics, "kopf_scheduler_informer_relists_total")),
        pauses=int(metric(metrics, "kopf_scheduler_informer_pauses_total")),
        kopf_restarts=int(metric(metrics, "kopf_scheduler_kopf_restarts_total")),
        request_errors=int(metric(metrics, 'rest_client_requests_total{code="<error>"')),
    )  # fmt: skip
    log(figures.line(f"{PODS} pods at {RATE:g}/s through a flaky load balancer ({stats})"))
    assert figures.bound == PODS and figures.lost == 0 and figures.double_binds == 0
    assert figures.extra["resumes"] > 0 and chaos.stats.idle_closes > 0 and chaos.stats.resets > 0
    assert figures.extra["pauses"] == 0, "a watch that merely ended paused scheduling"
    assert "cannot record Scheduled event" not in text
    assert op.proc.poll() is None, "the operator exited"


# --------------------------------------------------------------------------- 2. start-ups through it


def test_ten_start_ups_in_a_row_through_cut_discovery_answers_all_become_ready(rig: Rig) -> None:
    rig.group.nodes(2, cpu="8", memory="32Gi")
    rig.policy()
    took: list[float] = []
    restarts = 0
    with ChaosProxy(rig.cp, seed=7, discovery_cut=0.2) as chaos:
        for i in range(STARTUPS):
            port = free_port()
            started = time.monotonic()
            op = chaotic(rig, chaos, port, name=f"start-{i}")
            # 20% of discovery answers cut: Kopf may fail several start-ups in a row, each restart after a
            # longer backoff (1 s doubling); the reason /readyz gives is kept for the failure message
            said: list[str] = []

            def ready(port: int = port, said: list[str] = said) -> bool:
                code, text = get(port, "/readyz")
                said[:] = [text.strip()[-300:]]
                return code == 200

            try:
                wait(op, ready, timeout=240, message="the operator is ready")
            except AssertionError as exc:
                raise AssertionError(f"start-up {i}: /readyz said {said}\n{exc}") from None
            body = rig.group.pod(f"after-start-{i}", cpu="10m", memory="16Mi")
            rig.core.create_namespaced_pod(rig.namespace, body)
            rig.wait_bound([f"after-start-{i}"], timeout=120, op=op)
            took.append(time.monotonic() - started)
            restarts += int(metric(get(port, "/metrics")[1], "kopf_scheduler_kopf_restarts_total"))
            assert op.proc.poll() is None, f"start-up {i} exited"
            op.stop()
        cut, asked = chaos.stats.discovery_cut, chaos.stats.discovery
    log(
        f"{STARTUPS} start-ups through cut discovery answers: all ready and binding; "
        f"seconds to the first bind {min(took):.1f}-{max(took):.1f}; discovery answers cut {cut} of {asked}; "
        f"Kopf restarted in place {restarts} times"
    )
    assert cut > 0 and restarts > 0  # the fault happened, and was survived


# --------------------------------------------------------------------------- 3. an API server restart


def test_an_api_server_restart_pauses_scheduling_for_its_downtime_only(rig: Rig) -> None:
    rig.group.nodes(NODES, cpu="8", memory="32Gi")
    rig.policy()
    op = rig.operator()
    rig.accepted(op)
    bodies = rig.pods(PODS)
    producer = rig.produce(bodies, rate=RATE)
    rig.wait_bound(names(bodies), at_least=RESTART_AFTER, timeout=60)
    killed = time.monotonic()
    rig.cp.kill("kube-apiserver")
    rig.cp.restart("kube-apiserver")
    down = time.monotonic() - killed
    rig.wait_bound(names(bodies), timeout=120, op=op)
    producer.done(60)
    figures = rig.verdict(pods=names(bodies), ops=[op], audit_complete=False)
    times = bind_times(rig)
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:])]
    longest = max(gaps)
    text = op.text()
    figures.extra.update(
        apiserver_down_s=round(down, 1), longest_gap_between_binds_s=round(longest, 1),
        relists=text.count("caches synced again"),
    )  # fmt: skip
    log(figures.line("kube-apiserver restarted during a steady stream of pods"))
    assert figures.bound == PODS and figures.lost == 0
    assert longest <= down + RESTART_SLACK, f"the longest gap between binds was {longest:.1f}s, down {down:.1f}s"
