"""VolumeBinding's Reserve and PreBind (upstream ``AssumePodVolumes`` and ``bindAPIUpdate``): a delayed claim's PV
is bound to it, a claim to provision is told its node, each write preconditioned on the resourceVersion the
cycle read. Run through simulate, whose in-memory API server holds the PVs and claims with kube-apiserver's
semantics (resourceVersions, merge patches, 409s) and brings each write back as the operator's watch would."""

from __future__ import annotations

import asyncio
from typing import Any

from kopf_scheduler.core.config.policy import default_profile
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.model.objects import ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_SELECTED_NODE
from kopf_scheduler.core.plugins.volume_binding import ERR_REASON_BIND_CONFLICT, VolumeBinding
from kopf_scheduler.sim.loader import load_cluster, load_pods
from kopf_scheduler.sim.simulator import Simulation

HOST = "kubernetes.io/hostname"


def node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def storage_class(name: str, provisioner: str) -> dict[str, Any]:
    return {
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def claim(name: str, sc: str, *, uid: str = "", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or f"uid-{name}",
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {
            "storageClassName": sc,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    }


def local_pv(name: str, on: str) -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": HOST, "operator": "In", "values": [on]}]}]
                }
            },
        },
        "status": {"phase": "Available"},
    }


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


def simulate(cluster: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Simulation, list[Any]]:
    sim = Simulation(load_cluster(cluster).cache, default_profile("default-scheduler"))
    result = sim.run(load_pods(pods))
    return sim, result.placements


def stored(sim: Simulation, plural: str, name: str, namespace: str | None = None) -> Any:
    found = sim.api.kube.peek("", "v1", plural, name, namespace)
    assert found is not None
    return found


def patches(sim: Simulation) -> list[tuple[str, Any]]:
    return [(path, body) for method, path, body in sim.api.requests if method == "PATCH"]


def test_a_claim_to_provision_is_told_its_node_before_the_pod_is_bound() -> None:
    sim, (placed,) = simulate(
        [node("n1"), storage_class("fast", "csi.example.com"), claim("data", "fast")], [pod("db", "data")]
    )
    assert placed.node == "n1"
    pvc = stored(sim, "persistentvolumeclaims", "data", "default")
    assert pvc["metadata"]["annotations"] == {ANNOTATION_SELECTED_NODE: "n1"}
    (path, body), *_ = patches(sim)
    assert path == "/api/v1/namespaces/default/persistentvolumeclaims/data"
    assert body["metadata"]["resourceVersion"]  # preconditioned on what the cycle read
    # the write came back as the claims' watch brings it: the cache's claim names its node
    assert sim.cache.objects.persistent_volume_claims["default/data"].selected_node == "n1"
    # then the pod was bound (PreBind before Bind)
    assert [m for m, _, _ in sim.api.requests][-1] == "POST"


def test_a_static_pv_is_bound_to_its_claim_and_no_other_pod_takes_it() -> None:
    sim, (first, second) = simulate(
        [
            node("n1"),
            node("n2"),
            storage_class("local", "kubernetes.io/no-provisioner"),
            local_pv("pv-n2", "n2"),
            claim("a", "local"),
            claim("b", "local"),
        ],
        [pod("one", "a"), pod("two", "b")],
    )
    assert first.node == "n2"  # where its one matching PV is
    pv = stored(sim, "persistentvolumes", "pv-n2")
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"], ref["kind"]) == (
        "default",
        "a",
        "uid-a",
        "PersistentVolumeClaim",
    )
    assert ref["resourceVersion"]  # the claim's, as upstream's reference carries it
    assert pv["metadata"]["annotations"] == {ANNOTATION_BOUND_BY_CONTROLLER: "yes"}
    # the PV now belongs to claim a (the write came back through the watch): b finds none to bind
    assert second.node is None and ERR_REASON_BIND_CONFLICT in second.message


def test_nothing_is_written_for_claims_already_bound_or_a_node_already_selected() -> None:
    sim, (placed,) = simulate(
        [
            node("n1"),
            storage_class("fast", "csi.example.com"),
            claim("data", "fast", annotations={ANNOTATION_SELECTED_NODE: "n1"}),
        ],
        [pod("db", "data")],
    )
    assert placed.node == "n1" and patches(sim) == []


def test_a_write_refused_by_the_server_fails_the_binding_cycle_with_its_reason() -> None:
    """The PV changed since the cycle read it (another scheduler bound it): the server answers 409 to the
    preconditioned patch, PreBind fails, and the pod is not bound."""
    sim = Simulation(
        load_cluster(
            [
                node("n1"),
                storage_class("local", "kubernetes.io/no-provisioner"),
                local_pv("pv1", "n1"),
                claim("a", "local"),
            ]
        ).cache,
        default_profile("default-scheduler"),
    )
    plugin = next(p for p in sim.profile.pre_binders if isinstance(p, VolumeBinding))
    (the_pod,) = load_pods([pod("one", "a")])
    state = CycleState()
    snapshot = sim.cache.snapshot()
    assert plugin.pre_filter(state, the_pod, snapshot).is_success  # type: ignore[arg-type]
    info = snapshot.get("n1")
    assert info is not None and plugin.filter(state, the_pod, info).is_success  # type: ignore[arg-type]
    assert plugin.reserve(state, the_pod, "n1", sim).is_success  # type: ignore[arg-type]
    assert plugin.pre_bind_pre_flight(state, the_pod, "n1").is_success  # type: ignore[arg-type]
    # someone else writes the PV meanwhile: its resourceVersion moves on
    answer = sim.api.answer(
        "PATCH",
        "/api/v1/persistentvolumes/pv1",
        {"metadata": {"labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    assert answer.ok
    status = asyncio.run(plugin.pre_bind(state, the_pod, "n1", sim.api))  # type: ignore[arg-type]
    assert status.code == Code.ERROR
    assert status.message == (  # the server's Status message, as upstream's PreBind returns the client's error
        'Operation cannot be fulfilled on persistentvolumes "pv1": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )


def test_a_pv_whose_claim_ref_names_another_uid_belongs_to_an_older_claim() -> None:
    """Upstream ``IsVolumeBoundToClaim``: a claim deleted and created again under its name is another claim; a
    PV pre-bound by name only (no uid) is the claim's."""
    from kopf_scheduler.core.model.parsing import parse_persistent_volume, parse_persistent_volume_claim
    from kopf_scheduler.core.plugins.volume_binding import bound_to_claim

    pvc = parse_persistent_volume_claim(claim("a", "local", uid="new"))

    def pv_with(ref: dict[str, str]) -> Any:
        body = local_pv("pv1", "n1")
        body["spec"]["claimRef"] = {"namespace": "default", "name": "a", **ref}
        return parse_persistent_volume(body)

    assert bound_to_claim(pv_with({"uid": "new"}), pvc)
    assert bound_to_claim(pv_with({}), pvc)
    assert not bound_to_claim(pv_with({"uid": "old"}), pvc)
