"""``parsing.parse_bound``: the assigned-pod informer's copy of a pod we bound reuses the assumed pod, and
reads exactly what ``parse_pod`` would read of it; anything a bind does not change sends it to the parser.

The bound bodies are made as kube-apiserver v1.37 makes them from the pending ones (seen on the local
control plane): ``spec.nodeName``, a ``PodScheduled`` condition, the node's topology labels copied onto the
pod (PodTopologyLabels), a new resourceVersion, the same ``metadata.generation``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from builders import make_pod

from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import PENDING_ONLY_FIELDS, parse_bound, parse_pod

NODE = "node-1"


def shapes() -> list[Any]:
    base = make_pod("p").uid("u1").scheduler("ours").req(cpu="100m", memory="500Mi").lim(cpu="100m", memory="500Mi")
    anti = make_pod("a").uid("u2").label(color="green")
    anti.pod_affinity("kubernetes.io/hostname", {"color": "green"}, anti=True)
    spread = make_pod("s").uid("u3").label(color="blue")
    spread.spread(5, "topology.kubernetes.io/zone", "DoNotSchedule", {"matchLabels": {"color": "blue"}})
    owned = make_pod("o").uid("u4").owner("ReplicaSet", "rs", "rs-uid").annotation("a", "b")
    owned.toleration("k", "v", "NoSchedule").node_affinity_in("topology.kubernetes.io/zone", "zone1")
    return [
        pytest.param(base.raw(), id="requests and limits"),
        pytest.param(anti.raw(), id="anti-affinity"),
        pytest.param(spread.raw(), id="spread"),
        pytest.param(owned.raw(), id="owner, annotation, toleration, node affinity"),
    ]


def pending(raw: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(raw)
    body["metadata"].update(resourceVersion="100", generation=1)
    body["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return body


def bound(body: dict[str, Any], node: str = NODE) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["spec"]["nodeName"] = node
    out["metadata"]["resourceVersion"] = "105"
    out["metadata"].setdefault("labels", {})["topology.kubernetes.io/zone"] = "zone2"
    out["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-12-06T08:07:59Z"}
    ]
    return out


def fields(pod: Pod) -> dict[str, Any]:
    return {f.name: getattr(pod, f.name) for f in dataclasses.fields(pod)}


def assumed(body: dict[str, Any], node: str = NODE) -> Pod:
    return parse_pod(body).with_node(node)


@pytest.mark.parametrize("raw", shapes())
def test_our_bind_seen_reads_as_the_parser_reads_it(raw: dict[str, Any]) -> None:
    body = pending(raw)
    seen = bound(body)
    reused = parse_bound(seen, assumed(body))
    assert reused is not None
    assert fields(reused) == fields(parse_pod(seen))
    assert reused.labels["topology.kubernetes.io/zone"] == "zone2" and reused.scheduled_at is not None


def change(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    *parents, last = path.split(".")
    target = out
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = value
    return out


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("metadata.generation", 2, id="the spec changed"),
        pytest.param("metadata.generation", None, id="no generation given"),
        pytest.param("metadata.annotations", {"new": "x"}, id="annotations changed"),
        pytest.param("metadata.ownerReferences", [{"uid": "x", "kind": "RS", "name": "n"}], id="adopted"),
        pytest.param("metadata.deletionTimestamp", "2026-12-06T08:08:00Z", id="being deleted"),
        pytest.param("spec.nodeName", "node-2", id="bound elsewhere"),
        pytest.param("status.startTime", "2026-12-06T08:08:00Z", id="a kubelet started it"),
        pytest.param("status.phase", "Running", id="running"),
        pytest.param("status.conditions", [{"type": "DisruptionTarget", "status": "True"}], id="another condition"),
    ],
)
def test_anything_else_that_changed_sends_the_pod_to_the_parser(path: str, value: Any) -> None:
    body = pending(shapes()[0].values[0])
    seen = change(bound(body), path, value)
    if path == "metadata.generation" and value is None:
        body["metadata"].pop("generation")
        del seen["metadata"]["generation"]
    assert parse_bound(seen, assumed(body)) is None


def test_the_fields_left_at_defaults_are_exactly_those_the_parser_reads_only_of_a_pending_pod() -> None:
    """``PENDING_ONLY_FIELDS`` names what ``parse_pod`` reads of an unbound pod alone: a pod with every one
    of them set differs from its bound version in those fields and in what the bind writes, nothing else."""
    pod = make_pod("rich").uid("u9").req(cpu="100m").lim(cpu="200m").node_selector(disk="ssd")
    pod.toleration("k", "v", "NoSchedule").spread(1, "zone", "DoNotSchedule", {"matchLabels": {"a": "b"}})
    pod.set("spec.schedulingGates", [{"name": "gate"}]).nominated("node-9")
    pod.set("spec.resourceClaims", [{"name": "c", "resourceClaimName": "claim"}])
    body = pending(pod.raw())
    body["status"]["nominatedNodeName"] = "node-9"
    seen = bound(body)
    seen["status"].pop("nominatedNodeName", None)
    before, after = fields(parse_pod(body)), fields(parse_pod(seen))
    differing = {name for name in before if before[name] != after[name]}
    assert differing - {"node_name", "labels", "resource_version", "scheduled_at"} == set(PENDING_ONLY_FIELDS)
