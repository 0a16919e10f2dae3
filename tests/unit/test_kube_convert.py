"""kube/convert.py: the operator's one reader of raw bodies. A body the parser refuses is an ``ObjectError`` naming
it, even when the parser itself trips; what can be read of a refused pod is kept to report on it; the keys of the
cache's stores; a SchedulingPolicy's metadata as plain data."""

from __future__ import annotations

import pytest

from kopf_scheduler.core.model.fields import ObjectError
from kopf_scheduler.kube import convert


def test_a_parser_that_trips_is_an_object_error_naming_the_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    def trips(body: object) -> object:
        raise KeyError("spec")

    monkeypatch.setitem(convert.OTHER_KINDS, "Service", (trips, True))
    with pytest.raises(ObjectError) as caught:
        convert.parse_other("Service", {"metadata": {"name": "s"}})
    assert str(caught.value) == "Service: cannot read: KeyError('spec')"


def test_a_controller_body_without_its_kind_gets_it() -> None:
    rs = convert.parse_other("ReplicaSet", {"metadata": {"name": "rs", "namespace": "ns"}, "spec": {"selector": {}}})
    assert (rs.kind, rs.namespace, rs.name) == ("ReplicaSet", "ns", "rs")


def test_what_can_be_read_of_a_refused_pod() -> None:
    ref = convert.pod_ref({"metadata": {"name": "p", "uid": "u"}, "spec": {"schedulerName": 7, "nodeName": "n1"}})
    assert ref == convert.PodRef("default", "p", "u", 7, "n1")
    assert convert.pod_ref({"metadata": [], "spec": "x"}) == convert.PodRef(
        "default", "", "", "default-scheduler", None
    )


@pytest.mark.parametrize(
    "kind, body, key",
    [
        pytest.param("StorageClass", {"metadata": {"name": "fast", "namespace": "x"}}, "fast", id="cluster-scoped"),
        pytest.param("Service", {"metadata": {"name": "s"}}, "default/s", id="namespaced, default namespace"),
        pytest.param("ReplicaSet", {"metadata": {"name": "r", "namespace": "a"}}, "ReplicaSet/a/r", id="controller"),
    ],
)
def test_object_keys(kind: str, body: dict[str, object], key: str) -> None:
    assert convert.object_key(kind, body) == key


def test_dra_keys_and_namespace_labels() -> None:
    assert convert.dra_key("ResourceClaim", {"metadata": {"name": "c"}}) == "default/c"
    assert convert.dra_key("DeviceClass", {"metadata": {"name": "gpu", "namespace": "x"}}) == "gpu"
    assert convert.namespace_labels({"metadata": {"name": "ns", "labels": {"a": 1}}}) == ("ns", {"a": "1"})
    assert convert.namespace_labels({"metadata": {"name": "ns", "labels": ["a"]}}) == ("ns", {})


def test_policy_metadata_is_plain_data_and_a_bad_generation_is_zero() -> None:
    meta = convert.policy_meta(
        {
            "metadata": {"name": "p", "generation": "two", "uid": "u", "creationTimestamp": "t"},
            "spec": {"schedulerName": "s", "predicates": ({"name": "NodeName"},)},
        }
    )
    assert (meta.name, meta.generation, meta.uid, meta.created, meta.scheduler_name) == ("p", 0, "u", "t", "s")
    assert meta.spec == {"schedulerName": "s", "predicates": [{"name": "NodeName"}]}
    assert type(meta.spec["predicates"]) is list
