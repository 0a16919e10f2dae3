"""The operator end to end: `kopf-scheduler run` as a subprocess against the real control plane.

The operator runs with the deploy/ ServiceAccount's token (deploy/rbac.yaml applied for real), so
a missing permission fails here. One operator process serves the policies of most tests (a
`--policy` shard, so it leaves the leader-election test's policy to its own replicas); every test
makes its own namespace and its own nodes, labelled with a per-test group that its pods select,
so tests never see each other's nodes. The operator's log goes to a file; its tail is printed
when a test fails.
"""

from __future__ import annotations

import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kube_helpers import (
    GROUP,
    PLURAL,
    ROOT,
    VERSION,
    Group,
    Operator,
    accepted,
    create_policy,
    delete_policy,
    replace_spec,
    wait,
    wait_accepted,
)
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.cluster.controlplane import free_port

pytestmark = pytest.mark.cluster

T = TypeVar("T")

SHARD = ("e2e-basic", "e2e-edit", "e2e-dup-a", "e2e-dup-b")
BASIC = "e2e-basic"  # policy and schedulerName served from the module's start


@pytest.fixture(scope="module")
def operator(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    args = [a for name in SHARD for a in ("--policy", name)]
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", args, sa_kubeconfig)
    try:
        create_policy(custom, BASIC, {"schedulerName": BASIC, "algorithmProvider": "DefaultProvider"})
        wait_accepted(custom, BASIC, op)
        yield op
    finally:
        for name in SHARD:
            delete_policy(custom, name)
        op.stop()


_running: list[Operator] = []


@pytest.fixture(autouse=True)
def _print_operator_logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        for op in _running:
            text = f"\n--- operator log tail ({op.log}) ---\n{op.tail(80)}\n"
            if reporter is not None:
                reporter.write_line(text)
            else:
                print(text, file=sys.stderr)


@pytest.fixture(autouse=True)
def _track(operator: Operator) -> Iterator[None]:
    _running.append(operator)
    yield
    _running.remove(operator)


@pytest.fixture
def group(api: client.ApiClient) -> Iterator[Group]:
    with Group(api, scheduler=BASIC) as g:
        yield g


def node_of(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name


def events_of(core: client.CoreV1Api, namespace: str, reason: str, pod: str | None = None) -> list[Any]:
    items = core.list_namespaced_event(namespace).items
    return [e for e in items if e.reason == reason and (pod is None or e.involved_object.name == pod)]


# --------------------------------------------------------------------------- tests


def test_binds_respecting_selector_taints_and_resources(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    (ssd,) = group.nodes(labels={"disk": "ssd"})
    (dedicated,) = group.nodes(
        labels={"role": "dedicated"}, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    )
    (small,) = group.nodes(cpu="1")
    toleration = {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
    core.create_namespaced_pod(namespace, group.pod("wants-ssd", node_selector={"disk": "ssd"}))
    core.create_namespaced_pod(
        namespace, group.pod("tolerates", node_selector={"role": "dedicated"}, tolerations=[toleration])
    )
    core.create_namespaced_pod(namespace, group.pod("big", cpu="3"))
    for i in range(6):
        core.create_namespaced_pod(namespace, group.pod(f"plain-{i}"))
    core.create_namespaced_pod(namespace, group.pod("not-ours", scheduler=None))

    ours = ["wants-ssd", "tolerates", "big", *(f"plain-{i}" for i in range(6))]
    placed = wait(
        operator,
        lambda: (p := {n: node_of(core, namespace, n) for n in ours}) and all(p.values()) and p,
        message="all bound",
    )
    assert placed["wants-ssd"] == ssd
    assert placed["tolerates"] == dedicated
    assert placed["big"] == ssd  # 3 cpu: too big for `small`, `dedicated` is tainted
    assert all(placed[f"plain-{i}"] in (ssd, small) for i in range(6)), placed
    scheduled = wait(operator, lambda: len(e := events_of(core, namespace, "Scheduled")) >= len(ours) and e)
    assert sorted(e.involved_object.name for e in scheduled) == sorted(ours)
    event = next(e for e in scheduled if e.involved_object.name == "big")
    assert event.message == f"Successfully assigned {namespace}/big to {ssd}"
    assert event.reporting_component == "kopf-scheduler"
    assert event.involved_object.uid == core.read_namespaced_pod("big", namespace).metadata.uid
    # default-scheduler's pod is left alone: not bound, no event, no condition written by us
    time.sleep(1.0)
    other = core.read_namespaced_pod("not-ours", namespace)
    assert other.spec.node_name is None
    assert not [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == "not-ours"]
    assert not [c for c in other.status.conditions or [] if c.type == "PodScheduled"]
    assert not (other.metadata.annotations or {}), "the operator must write nothing onto pods"


def test_impossible_pod_gets_failed_scheduling_and_condition(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(2)
    core.create_namespaced_pod(namespace, group.pod("huge", cpu="64"))
    (event,) = wait(
        operator, lambda: events_of(core, namespace, "FailedScheduling", "huge"), message="FailedScheduling"
    )
    assert event.type == "Warning"
    assert "Insufficient cpu" in event.message, event.message
    assert event.reporting_component == "kopf-scheduler" and event.action == "Scheduling"

    def condition() -> Any:
        pod = core.read_namespaced_pod("huge", namespace)
        return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)

    cond = wait(operator, condition, message="PodScheduled condition")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert "Insufficient cpu" in cond.message
    assert node_of(core, namespace, "huge") is None


def test_a_pods_do_not_schedule_spread_constraint_holds_under_a_policy_that_does_not_name_it(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group
) -> None:
    # BASIC is the v1.9 DefaultProvider: no PodTopologySpread listed, yet every profile filters with it
    core = client.CoreV1Api(api)
    zone_key = f"e2e.kopf.dev/zone-{group.id}"  # only this test's nodes carry it, so no other node is a domain
    zone_of = {name: "a" for name in group.nodes(2, labels={zone_key: "a"})} | {
        name: "b" for name in group.nodes(1, labels={zone_key: "b"})
    }
    selector = {"matchLabels": {"app": "spread"}}

    def body(name: str, *, zone: str | None = None, policy: str | None = None) -> dict[str, Any]:
        pod = group.pod(name, labels={"app": "spread"}, node_selector={zone_key: zone} if zone else None)
        constraint: dict[str, Any] = {
            "maxSkew": 1,
            "topologyKey": zone_key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector,
        }
        if policy:
            constraint["nodeAffinityPolicy"] = policy
        pod["spec"]["topologySpreadConstraints"] = [constraint]
        return pod

    names = [f"spread-{i}" for i in range(6)]
    for name in names:
        core.create_namespaced_pod(namespace, body(name))
    placed = wait(
        operator,
        lambda: (p := {n: node_of(core, namespace, n) for n in names}) and all(p.values()) and p,
        message="all bound",
    )
    per_zone = [zone_of[str(node)] for node in placed.values()]
    assert sorted(per_zone) == ["a", "a", "a", "b", "b", "b"], placed  # the skew never exceeded 1, so 6 pods end 3/3
    # pinned to zone a, counting zone b too (nodeAffinityPolicy Ignore): 3 + 1 - 3 <= 1 fits, then 4 + 1 - 3 does not
    core.create_namespaced_pod(namespace, body("pinned-1", zone="a", policy="Ignore"))
    assert zone_of[str(wait(operator, lambda: node_of(core, namespace, "pinned-1"), message="pinned-1 bound"))] == "a"
    core.create_namespaced_pod(namespace, body("pinned-2", zone="a", policy="Ignore"))
    (event,) = wait(
        operator, lambda: events_of(core, namespace, "FailedScheduling", "pinned-2"), message="FailedScheduling"
    )
    assert "2 node(s) didn't match pod topology spread constraints" in event.message, event.message
    assert node_of(core, namespace, "pinned-2") is None


def test_live_policy_edits_change_the_next_decision_and_invalid_edits_are_rejected(
    operator: Operator, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    busy, idle = group.nodes(2)
    least = {
        "schedulerName": "e2e-edit",
        "predicates": [{"name": "GeneralPredicates"}, {"name": "PodToleratesNodeTaints"}],
        "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
    }
    create_policy(custom, "e2e-edit", least)
    wait_accepted(custom, "e2e-edit", operator)
    preload = group.pod("preload", scheduler=None, cpu="2", memory="8Gi")
    preload["spec"]["nodeName"] = busy
    core.create_namespaced_pod(namespace, preload)
    time.sleep(1.0)  # let the watch deliver the preloaded pod to the cache

    core.create_namespaced_pod(namespace, group.pod("spread", scheduler="e2e-edit"))
    assert wait(operator, lambda: node_of(core, namespace, "spread")) == idle  # LeastRequested: the emptier node

    most = {**least, "priorities": [{"name": "MostRequestedPriority", "weight": 1}]}
    gen = replace_spec(custom, "e2e-edit", most)
    status = wait_accepted(custom, "e2e-edit", operator, generation=gen)
    assert status["_status"]["activeGeneration"] == gen
    core.create_namespaced_pod(namespace, group.pod("packed", scheduler="e2e-edit"))
    assert wait(operator, lambda: node_of(core, namespace, "packed")) == busy  # MostRequested: the busier node

    broken = {**most, "priorities": [{"name": "MostRequestedPriority", "weight": 1}, {"name": "NoSuchPriority"}]}
    bad_gen = replace_spec(custom, "e2e-edit", broken)
    rejected = wait_accepted(custom, "e2e-edit", operator, generation=bad_gen, status="False")
    assert rejected["reason"] == "Invalid"
    assert "spec.priorities[1]" in rejected["message"], rejected["message"]
    assert rejected["_status"]["activeGeneration"] == gen  # the last good profile stays in force
    core.create_namespaced_pod(namespace, group.pod("still-packed", scheduler="e2e-edit"))
    assert wait(operator, lambda: node_of(core, namespace, "still-packed")) == busy


def test_same_scheduler_name_older_policy_wins_and_delete_stops_scheduling(
    operator: Operator, api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(1)
    spec = {"schedulerName": "e2e-dup", "algorithmProvider": "DefaultProvider"}
    create_policy(custom, "e2e-dup-a", spec)
    wait_accepted(custom, "e2e-dup-a", operator)
    time.sleep(1.1)  # creationTimestamp has whole seconds
    create_policy(custom, "e2e-dup-b", spec)
    conflict = wait_accepted(custom, "e2e-dup-b", operator, status="False")
    assert conflict["reason"] == "Conflict" and "e2e-dup-a" in conflict["message"]
    assert accepted(custom, "e2e-dup-a")["status"] == "True"  # type: ignore[index]

    core.create_namespaced_pod(namespace, group.pod("first", scheduler="e2e-dup"))
    wait(operator, lambda: node_of(core, namespace, "first"), message="bound by e2e-dup-a")

    delete_policy(custom, "e2e-dup-a")  # the newer claimant takes the name over
    wait_accepted(custom, "e2e-dup-b", operator)
    core.create_namespaced_pod(namespace, group.pod("second", scheduler="e2e-dup"))
    wait(operator, lambda: node_of(core, namespace, "second"), message="bound by e2e-dup-b")

    delete_policy(custom, "e2e-dup-b")  # nobody serves e2e-dup now: pods stay Pending
    core.create_namespaced_pod(namespace, group.pod("orphan", scheduler="e2e-dup"))
    time.sleep(2.0)
    assert node_of(core, namespace, "orphan") is None
    assert not events_of(core, namespace, "FailedScheduling", "orphan")


def test_wait_for_first_consumer_claims_are_provisioned_and_bound_where_the_pod_goes(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group
) -> None:
    """VolumeBinding's PreBind, with the real PV controller (kube-controller-manager): a claim of a
    WaitForFirstConsumer class is told the pod's node (the in-tree hostPath provisioner then provisions and
    binds it), and a local PV the pod's claim matches on one node is bound to that claim. The operator writes
    with the deploy/ ServiceAccount's token, so the RBAC rules are tested too."""
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    _, pinned = group.nodes(2)
    provisioned, local = f"{namespace}-hostpath", f"{namespace}-local"
    for name, provisioner in ((provisioned, "kubernetes.io/host-path"), (local, "kubernetes.io/no-provisioner")):
        storage.create_storage_class(
            {
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
                "reclaimPolicy": "Delete",
            }
        )
    pv = f"{namespace}-local-pv"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "storageClassName": local,
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [pinned]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    try:
        for claim, sc in (("made", provisioned), ("found", local)):
            core.create_namespaced_persistent_volume_claim(
                namespace,
                {
                    "metadata": {"name": claim},
                    "spec": {
                        "storageClassName": sc,
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                },
            )
            body = group.pod(f"uses-{claim}")
            body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            core.create_namespaced_pod(namespace, body)

        def bound(claim: str) -> Any:
            found = core.read_namespaced_persistent_volume_claim(claim, namespace)
            return found if found.status.phase == "Bound" else None

        made = wait(operator, lambda: bound("made"), timeout=30, message="the provisioned claim Bound")
        node = node_of(core, namespace, "uses-made")
        assert node and made.metadata.annotations["volume.kubernetes.io/selected-node"] == node
        assert core.read_persistent_volume(made.spec.volume_name).spec.host_path is not None  # the provisioner's
        found = wait(operator, lambda: bound("found"), timeout=30, message="the local PV's claim Bound")
        assert found.spec.volume_name == pv and node_of(core, namespace, "uses-found") == pinned
        ref = core.read_persistent_volume(pv).spec.claim_ref
        assert (ref.namespace, ref.name, ref.uid) == (namespace, "found", found.metadata.uid)
    finally:
        for name in ("uses-made", "uses-found"):
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        for claim in ("made", "found"):
            core.delete_namespaced_persistent_volume_claim(claim, namespace)
        core.delete_persistent_volume(pv)
        for name in (provisioned, local):
            storage.delete_storage_class(name)


def test_pod_deleted_while_queued_is_not_bound(
    operator: Operator, api: client.ApiClient, namespace: str, group: Group
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(1, cpu="1")
    core.create_namespaced_pod(namespace, group.pod("doomed", cpu="8"))
    wait(operator, lambda: events_of(core, namespace, "FailedScheduling", "doomed"), message="doomed is unschedulable")
    core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)
    wait(operator, lambda: not [p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == "doomed"])
    group.nodes(1, cpu="16")  # a node that would fit: moves unschedulable pods back to active
    core.create_namespaced_pod(namespace, group.pod("witness", cpu="8"))  # proves the loop ran after the node came
    wait(operator, lambda: node_of(core, namespace, "witness"), message="witness bound")
    # the Scheduled event is written after the bind, asynchronously: wait for it, then look at them all
    wait(operator, lambda: events_of(core, namespace, "Scheduled", "witness"), message="witness's Scheduled event")
    bound = [e.involved_object.name for e in events_of(core, namespace, "Scheduled")]
    assert bound == ["witness"]
    assert "Traceback" not in operator.text()


def test_two_replicas_with_leader_election_bind_once_and_fail_over(
    operator: Operator,
    sa_kubeconfig: Path,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api)
    group.nodes(3)
    flags = [
        "--leader-elect",
        "--lease-namespace",
        "kopf-scheduler",
        "--policy",
        "e2e-ha",
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        "1",
    ]
    first = Operator(tmp_path / "replica-1.log", flags, sa_kubeconfig)
    _running.append(first)
    second: Operator | None = None
    try:
        create_policy(custom, "e2e-ha", {"schedulerName": "e2e-ha", "algorithmProvider": "DefaultProvider"})
        wait_accepted(custom, "e2e-ha", first)
        wait(first, lambda: "started leading" in first.text(), message="first replica leads")
        second = Operator(tmp_path / "replica-2.log", flags, sa_kubeconfig)
        _running.append(second)
        wait(second, second.identity, message="second replica stands as a candidate")

        names = [f"ha-{i}" for i in range(10)]
        for n in names:
            core.create_namespaced_pod(namespace, group.pod(n, scheduler="e2e-ha"))
        wait(first, lambda: all(node_of(core, namespace, n) for n in names), message="all bound")
        scheduled = wait(first, lambda: len(e := events_of(core, namespace, "Scheduled")) >= len(names) and e)
        assert sorted(e.involved_object.name for e in scheduled) == sorted(names)  # exactly once each
        assert {e.reporting_instance for e in scheduled} == {first.identity()}
        assert "started leading" not in second.text()
        # Shards leave each other's policies alone (no finalizer tug of war over e2e-basic)
        rv = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, BASIC)["metadata"]["resourceVersion"]
        time.sleep(1.5)
        assert custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, BASIC)["metadata"]["resourceVersion"] == rv

        started = time.monotonic()
        first.stop(signal.SIGKILL)  # no release: the standby waits out the lease
        later = [f"after-{i}" for i in range(5)]
        for n in later:
            core.create_namespaced_pod(namespace, group.pod(n, scheduler="e2e-ha"))
        wait(second, lambda: all(node_of(core, namespace, n) for n in later), timeout=20, message="standby took over")
        took = time.monotonic() - started
        assert took < 4 + 3 + 4, f"failover took {took:.1f}s"
        events = [e for e in events_of(core, namespace, "Scheduled") if e.involved_object.name in later]
        wait(
            second,
            lambda: (
                len([e for e in events_of(core, namespace, "Scheduled") if e.involved_object.name in later])
                == len(later)
            ),
        )
        events = [e for e in events_of(core, namespace, "Scheduled") if e.involved_object.name in later]
        assert {e.reporting_instance for e in events} == {second.identity()}
    finally:
        delete_policy(custom, "e2e-ha")
        for op in (first, second):
            if op is not None:
                op.stop()
                _running.remove(op)


def test_nothing_is_scheduled_and_readyz_says_not_ready_until_the_node_list_is_in(
    operator: Operator,
    control_plane: ControlPlane,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    group: Group,
    tmp_path: Path,
) -> None:
    """Upstream's WaitForCacheSync: a ServiceAccount that may not list nodes yet keeps the operator
    unready and its loop idle (a pod waits without an attempt: no "0/0 nodes" FailedScheduling);
    once the permission comes, the nodes list, /readyz turns ready and the pod is bound."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    role = next(
        d for d in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()) if d["kind"] == "ClusterRole"
    )
    for rule in role["rules"]:
        rule["resources"] = [r for r in rule["resources"] if r != "nodes"]
    role["rules"] = [rule for rule in role["rules"] if rule["resources"]]  # metrics.k8s.io grants nodes only
    sa = "kopf-scheduler-no-nodes"
    names = [f"e2e-sync-{group.id}", f"e2e-sync-nodes-{group.id}"]
    rbac.create_cluster_role({**role, "metadata": {"name": names[0]}})
    rbac.create_cluster_role(
        {
            "metadata": {"name": names[1]},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}],
        }
    )
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": "kopf-scheduler"}]

    def bind(name: str) -> None:
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
        rbac.create_cluster_role_binding({"metadata": {"name": name}, "roleRef": ref, "subjects": subject})

    bind(names[0])
    port = free_port()
    kubeconfig = control_plane.service_account_kubeconfig("kopf-scheduler", sa, path=tmp_path / "sa.kubeconfig")
    op = Operator(tmp_path / "operator.log", ["--policy", "e2e-sync", "--insecure-port", str(port)], kubeconfig)
    _running.append(op)

    def readyz() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    try:
        create_policy(custom, "e2e-sync", {"schedulerName": "e2e-sync"})
        wait_accepted(custom, "e2e-sync", op)
        group.nodes(1)
        core.create_namespaced_pod(namespace, group.pod("early", scheduler="e2e-sync"))
        code, text = wait(op, lambda: (r := readyz())[0] == 503 and r, message="/readyz answers 503")
        assert "waiting for the initial lists of Node" in text
        time.sleep(2.0)
        assert node_of(core, namespace, "early") is None, "scheduled before the node list was in"
        assert not events_of(core, namespace, "FailedScheduling", "early"), "an attempt on a cluster without its nodes"
        assert readyz()[0] == 503

        bind(names[1])
        code, text = wait(op, lambda: (r := readyz())[0] == 200 and r, timeout=40, message="/readyz turns ready")
        assert "nodes" in text
        assert wait(op, lambda: node_of(core, namespace, "early"), message="bound once synced") in group.names
    finally:
        delete_policy(custom, "e2e-sync")
        op.stop()
        _running.remove(op)
        for name in names:
            rbac.delete_cluster_role_binding(name)
            rbac.delete_cluster_role(name)
