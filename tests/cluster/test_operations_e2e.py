"""Operating beside the default scheduler, with the live operator on the real control plane: what a
Prometheus scrape of /metrics finds after pods are scheduled (the families the kubernetes-mixin scheduler
dashboard and ours select by), pods held by scheduling gates as a queueing controller such as Kueue holds
them, and a namespace moved over by the README's MutatingAdmissionPolicy
(examples/namespace-scheduler/mutating-admission-policy.yaml).

Scheduling gates (upstream SchedulingGates plugin, a PreEnqueue plugin): a pod created with
``spec.schedulingGates`` never enters the active queue, so it gets no attempt, no FailedScheduling event
and no PodScheduled condition from the scheduler (the API server sets ``PodScheduled=False`` with reason
``SchedulingGated`` itself); it is counted in ``scheduler_pending_pods{queue="gated"}``. Once another
controller removes the last gate (gates can only be removed after creation), the update moves it to the
active queue and it is scheduled.
"""

from __future__ import annotations

import functools
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import ROOT, Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.cluster.controlplane import free_port

pytestmark = pytest.mark.cluster

POLICY = "e2e-metrics"
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture(scope="module")
def operator(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Operator, int]]:
    port = free_port()
    op = Operator(
        tmp_path_factory.mktemp("operator") / "operator.log",
        ["--policy", POLICY, "--insecure-port", str(port)],
        sa_kubeconfig,
        verbose=False,
    )
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})
        wait_accepted(custom, POLICY, op)
        yield op, port
    finally:
        delete_policy(custom, POLICY)
        op.stop()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of /metrics: (sample name, labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def samples(
    scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str
) -> list[tuple[dict[str, str], float]]:
    return [(dict(labels), value) for (n, labels), value in scraped.items() if n == name]


def bound(core: client.CoreV1Api, namespace: str, names: list[str]) -> bool:
    return all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names)


def test_a_scrape_after_scheduling_has_process_request_and_framework_families(
    operator: tuple[Operator, int], api: client.ApiClient, namespace: str, sa_kubeconfig: Path
) -> None:
    op, port = operator
    core = client.CoreV1Api(api)
    server = yaml.safe_load(sa_kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    host = server.split("://", 1)[1].rstrip("/")
    with Group(api, scheduler=POLICY) as group:
        group.nodes(3)
        names: list[str] = []
        # the plugin histogram is sampled in 10% of cycles: schedule batches until one was (0.9^200 ~ 1e-9)
        for batch in range(10):
            more = [f"m-{batch}-{i}" for i in range(20)]
            for name in more:
                core.create_namespaced_pod(namespace, group.pod(name, cpu="10m", memory="16Mi"))
            names += more
            wait(op, functools.partial(bound, core, namespace, list(names)), timeout=60, message=f"{len(names)} bound")
            if samples(scrape(port), "scheduler_plugin_execution_duration_seconds_count"):
                break
        scraped = scrape(port)

    (cpu,) = samples(scraped, "process_cpu_seconds_total")
    assert cpu[1] > 0
    assert samples(scraped, "process_resident_memory_bytes")[0][1] > 10 * 2**20
    assert samples(scraped, "python_info")

    requests = samples(scraped, "rest_client_requests_total")
    assert {labels["host"] for labels, _ in requests} == {host}
    binds = sum(v for labels, v in requests if labels["method"] == "POST" and labels["code"] == "201")
    assert binds >= len(names)  # a bind each, and events
    assert any(labels["method"] == "GET" and labels["code"] == "200" for labels, _ in requests)  # lists, watches
    posts = [
        v for labels, v in samples(scraped, "rest_client_request_duration_seconds_count") if labels["verb"] == "POST"
    ]
    assert posts and posts[0] >= len(names)

    points = {
        (labels["extension_point"], labels["status"]): v
        for labels, v in samples(scraped, "scheduler_framework_extension_point_duration_seconds_count")
        if labels["profile"] == POLICY
    }
    assert points[("Filter", "Success")] >= len(names)
    assert points[("PreFilter", "Success")] >= len(names)
    assert points[("Bind", "Success")] >= len(names)

    plugins = samples(scraped, "scheduler_plugin_execution_duration_seconds_count")
    assert plugins, "no cycle was sampled"
    assert 0 < sum(v for labels, v in plugins if labels["extension_point"] == "Bind") < len(names)
    for labels, _ in plugins:
        assert labels["extension_point"] in {
            "PreFilter",
            "Filter",
            "PreScore",
            "Score",
            "Reserve",
            "Permit",
            "PreBindPreFlight",  # upstream's label for the pre-flights (NominatedNodeNameForExpectation)
            "PreBind",
            "Bind",
        }
        assert labels["status"] in {"Success", "Skip", "Unschedulable", "UnschedulableAndUnresolvable"}
    assert any(labels["plugin"] == "DefaultBinder" for labels, _ in plugins)

    e2e = samples(scraped, "scheduler_e2e_scheduling_duration_seconds_count")
    assert sum(v for _, v in e2e) >= len(names)  # the mixin's scheduling rate panel


def gated_pod(group: Group, name: str) -> dict[str, Any]:
    body = group.pod(name, cpu="10m", memory="16Mi")
    body["spec"]["schedulingGates"] = [{"name": GATE}]
    return body


def test_gated_pods_wait_quietly_until_the_gate_is_removed(
    operator: tuple[Operator, int], api: client.ApiClient, namespace: str
) -> None:
    op, port = operator
    core = client.CoreV1Api(api)
    names = [f"gated-{i}" for i in range(3)]
    with Group(api, scheduler=POLICY) as group:
        group.nodes(1)
        for name in names:
            core.create_namespaced_pod(namespace, gated_pod(group, name))
        gauge = wait(
            op,
            lambda: (v := scrape(port).get(("scheduler_pending_pods", frozenset({("queue", "gated")})))) == 3 and v,
            message="three gated pods counted",
        )
        assert gauge == 3
        time.sleep(3)
        for name in names:
            pod = core.read_namespaced_pod(name, namespace)
            assert pod.spec.node_name is None
            conditions = {c.type: c for c in pod.status.conditions or []}
            assert conditions["PodScheduled"].reason == "SchedulingGated"  # the API server's, not ours
        events = core.list_namespaced_event(namespace).items
        assert not [e for e in events if e.reason == "FailedScheduling"], "a gated pod was attempted"

        # the queueing controller admits the workload: it removes its gate, here with a JSON patch
        for name in names:
            core.patch_namespaced_pod(name, namespace, [{"op": "remove", "path": "/spec/schedulingGates"}])
        wait(op, lambda: bound(core, namespace, names), timeout=30, message="admitted pods bound")

        def scheduled() -> set[str]:
            return {
                e.involved_object.name for e in core.list_namespaced_event(namespace).items if e.reason == "Scheduled"
            }

        wait(op, lambda: set(names) <= scheduled(), message="a Scheduled event each")  # written right after each bind
        assert scrape(port).get(("scheduler_pending_pods", frozenset({("queue", "gated")}))) == 0


NAMESPACE_POLICY = ROOT / "examples" / "namespace-scheduler" / "mutating-admission-policy.yaml"


def test_a_labelled_namespace_sends_its_pods_to_us_through_the_admission_policy(
    operator: tuple[Operator, int], api: client.ApiClient, namespace: str, control_plane: ControlPlane
) -> None:
    op, _ = operator
    core = client.CoreV1Api(api)
    control_plane.kubectl("apply", "-f", str(NAMESPACE_POLICY))
    try:
        with Group(api) as group:  # pods that name no scheduler
            group.nodes(1)
            core.patch_namespace(namespace, {"metadata": {"labels": {"scheduling.kopf.dev/scheduler-name": POLICY}}})

            def created(name: str, **kwargs: Any) -> str:
                """Create until the policy is in force (its informer may lag the apply); the pod's schedulerName."""
                body = group.pod(name, cpu="10m", memory="16Mi", **kwargs)
                pod = core.create_namespaced_pod(namespace, body)
                return str(pod.spec.scheduler_name)

            tries = iter(range(100))
            moved = wait(
                op,
                lambda: (n := f"moved-{next(tries)}") and created(n) == POLICY and n,
                message="the admission policy set the schedulerName",
            )
            other = created("named-its-own", scheduler="someone-else")
            assert other == "someone-else"
            wait(op, lambda: bound(core, namespace, [moved]), message="the moved pod bound by us")

            def scheduled() -> bool:  # our event (no other scheduler runs here), written right after the bind
                items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={moved}").items
                return any(e.reason == "Scheduled" for e in items)

            wait(op, scheduled, message="its Scheduled event")
            assert core.read_namespaced_pod("named-its-own", namespace).spec.node_name is None
    finally:
        control_plane.kubectl("delete", "-f", str(NAMESPACE_POLICY), "--ignore-not-found")


def test_the_manifest_folders_apply_with_kubectl_apply_f(control_plane: ControlPlane, sa_kubeconfig: Path) -> None:
    """``kubectl apply -f crds/`` (and -f of crds/optional/ and deploy/policies/) works as it does for any folder
    of manifests: their kustomizations are named ``Kustomization``, which kubectl's -f does not read. The
    policies go through a server-side dry run only: created for real, other tests' operators would serve them."""
    applied = control_plane.kubectl("apply", "-f", str(ROOT / "crds"), check=False)
    assert applied.returncode == 0, applied.stderr
    assert "schedulingpolicies.scheduling.kopf.dev" in applied.stdout
    optional = control_plane.kubectl("apply", "-f", str(ROOT / "crds" / "optional"), "--dry-run=server", check=False)
    assert optional.returncode == 0, optional.stderr
    policies = control_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "policies"), "--dry-run=server", check=False)
    assert policies.returncode == 0, policies.stderr
    assert policies.stdout.count("(server dry run)") == len(list((ROOT / "deploy" / "policies").glob("*.yaml")))
