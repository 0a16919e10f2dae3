"""sim/loader.py: what ``simulate`` reads from its files, and how it refuses what it cannot read (the file and the
object named, never a traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import make_node, make_pod

from kopf_scheduler.sim.loader import (
    ManifestError,
    PolicyFileError,
    iter_documents,
    load_cluster,
    load_policy,
    load_scheduler_config,
    read_documents,
)


def test_lists_are_flattened_and_their_items_get_the_lists_kind():
    text = """
kind: PodList
items:
- metadata: {name: a}
- 7
---
---
kind: List
items:
- {kind: Node, metadata: {name: n}}
"""
    assert [(d.get("kind"), d["metadata"]["name"]) for d in iter_documents(text, "f.yaml")] == [
        ("Pod", "a"),
        ("Node", "n"),
    ]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("a: [", "f.yaml: not valid YAML: ", id="yaml"),
        pytest.param("kind: Node\n---\n- 1\n", "f.yaml: document 2 is not an object", id="not an object"),
    ],
)
def test_an_unreadable_stream_names_the_file(text, message):
    with pytest.raises(ManifestError) as caught:
        list(iter_documents(text, "f.yaml"))
    assert str(caught.value).startswith(message)


def test_a_missing_file_says_so(tmp_path: Path):
    with pytest.raises(ManifestError, match=r"missing.yaml: No such file or directory$"):
        read_documents(tmp_path / "missing.yaml")


def test_every_kind_the_scheduler_reads_is_stored_and_the_rest_counted():
    docs = [
        make_node("n1").raw(),
        {"kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"a": "b"}}},
        {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns"}, "spec": {"selector": {}}},
        {"kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "ns"}, "spec": {}},
        {"kind": "StorageClass", "metadata": {"name": "sc"}, "provisioner": "x"},
        {"kind": "CSINode", "metadata": {"name": "n1"}, "spec": {"drivers": []}},
        {"kind": "CSIDriver", "metadata": {"name": "d"}, "spec": {}},
        {"kind": "CSIStorageCapacity", "metadata": {"name": "cap", "namespace": "ns"}, "storageClassName": "sc"},
        {"kind": "PodDisruptionBudget", "metadata": {"name": "pdb", "namespace": "ns"}, "spec": {}},
        {"kind": "ConfigMap", "metadata": {"name": "cm"}},
        {"kind": "ConfigMap", "metadata": {"name": "cm2"}},
        {"metadata": {"name": "nameless"}},
    ]
    loaded = load_cluster(docs, source="c.yaml")
    objs = loaded.cache.objects
    assert list(objs.services) == ["ns/s"] and list(objs.controllers) == ["ReplicaSet/ns/rs"]
    assert list(objs.persistent_volumes) == ["pv"] and list(objs.storage_classes) == ["sc"]
    assert len(objs.persistent_volume_claims) == 1 and list(objs.csi_nodes) == ["n1"]
    assert list(objs.csi_drivers) == ["d"] and list(objs.csi_storage_capacities) == ["ns/cap"]
    assert list(objs.pod_disruption_budgets) == ["ns/pdb"]
    assert loaded.ignored == {"ConfigMap": 2, "<no kind>": 1}


@pytest.mark.parametrize(
    "docs, message",
    [
        pytest.param(
            [{"kind": "PriorityClass", "metadata": {"name": "p"}, "value": "high"}],
            "c.yaml: ",
            id="bad PriorityClass",
        ),
        pytest.param(
            [{"kind": "PodGroup", "apiVersion": "example.com/v1", "metadata": {"name": "g"}}],
            "c.yaml: PodGroup of apiVersion 'example.com/v1': expected scheduling.k8s.io/v1beta1 or"
            " scheduling.x-k8s.io/v1alpha1",
            id="PodGroup of an unknown API",
        ),
        pytest.param(
            [
                {
                    "kind": "PodGroup",
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "metadata": {"name": "g"},
                    "spec": {"priorityClassName": "gold"},
                }
            ],
            "c.yaml: podgroup default/g: no PriorityClass with name gold was found",
            id="PodGroup of an unknown PriorityClass",
        ),
        pytest.param(
            [{"kind": "NodeMetrics", "metadata": {"name": "ghost"}, "usage": {"cpu": "1"}}],
            "c.yaml: NodeMetrics 'ghost': no such Node in the file",
            id="NodeMetrics of no node",
        ),
        pytest.param(
            [make_node("n1").annotation("kopf-scheduler.io/usage", "cpu=lots").raw()],
            "c.yaml: ",
            id="bad usage annotation",
        ),
    ],
)
def test_what_cannot_be_loaded_names_the_file(docs, message):
    with pytest.raises(ManifestError) as caught:
        load_cluster(docs, source="c.yaml")
    assert str(caught.value).startswith(message)


def test_bound_pods_count_and_finished_ones_do_not():
    done = make_pod("done").node("n1").raw()
    done["status"] = {"phase": "Succeeded"}
    loaded = load_cluster([make_node("n1").raw(), make_pod("run").node("n1").raw(), done, make_pod("wait").raw()])
    info = loaded.cache.get_node_info("n1")
    assert info is not None and [p.name for p in info.iter_pods()] == ["run"]
    assert [p.name for p in loaded.pending_in_cluster] == ["wait"]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("[1, 2]", "a policy must be an object", id="not an object"),
        pytest.param("kind: Foo", "expected kind SchedulingPolicy or Policy, got 'Foo'", id="unknown kind"),
        pytest.param("{kind: Policy, predicates: 3}", "not a valid v1.9 Policy:\n  ", id="bad legacy policy"),
        pytest.param(
            "{kind: SchedulingPolicy, spec: {priorities: [{name: Nope}]}}", "invalid policy:\n  ", id="bad policy"
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles: [{schedulerName: a}, {schedulerName: b}]\n",
            "2 profiles: choose with simulate --config instead of --policy",
            id="two profiles",
        ),
    ],
)
def test_a_policy_file_that_cannot_be_used_says_why(tmp_path: Path, text, message):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_missing_policy_or_configuration_file_says_so(tmp_path: Path):
    with pytest.raises(PolicyFileError, match="cannot read policy"):
        load_policy(tmp_path / "none.yaml")
    with pytest.raises(PolicyFileError, match="cannot read configuration"):
        load_scheduler_config(tmp_path / "none.yaml")


def test_an_unusable_configuration_names_its_fields(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: 3\n")
    with pytest.raises(PolicyFileError) as caught:
        load_scheduler_config(path)
    assert str(caught.value).startswith(f"{path}: not a usable KubeSchedulerConfiguration:\n  profiles")


def test_a_single_profile_configuration_is_a_policy(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: solo}]\n"
    )
    assert load_policy(path).scheduler_name == "solo"
