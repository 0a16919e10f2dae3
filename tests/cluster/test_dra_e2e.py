"""DynamicResources end to end: `kopf-scheduler run` and upstream kube-scheduler v1.37.2 side by side.

The second test: extended resources backed by DRA and DeviceTaintRules (see its docstring).

The apiserver serves ``resource.k8s.io/v1`` (DynamicResourceAllocation is GA). Each side gets two plain
Node objects and its own driver: a DeviceClass selecting it and, on its first node only, a
ResourceSlice of two devices (``gpu-0``, ``gpu-1``); nothing else publishes devices. On each side,
with the same objects (renamed), the operator (deploy/rbac.yaml's ServiceAccount, so the RBAC is
tested for real) and upstream must:

- bind a pod whose claim asks for one device to the node of the slice, and write the claim's
  finalizer, ``status.allocation`` (``gpu-0``, pinned to that node) and ``reservedFor`` (the pod);
- keep a pod whose claim asks for two devices (one is left) pending with the same message;
- keep a pod whose claim does not exist out of the active queue (no attempt, no condition) and bind
  it once the claim is created (PreEnqueue, then the ResourceClaim event);
- refuse a pod whose PersistentVolumeClaim does not exist with the same message: VolumeBinding's
  PreFilter rejects it, and DynamicResources' PostFilter, whose PreFilter never ran, answers ERROR
  ``not found``, which ends the PostFilter stage before DefaultPreemption (no preemption tail).

Then ``simulate --from-cluster`` reads the same classes, slices and (allocated) claims and refuses the
two-device pod with the operator's message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.commands import main

pytestmark = pytest.mark.cluster

POLICY = "e2e-dra"
UPSTREAM = "default-scheduler"
RESOURCE = ("resource.k8s.io", "v1")
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    op = Operator(tmp_path_factory.mktemp("operator") / "operator.log", ["--policy", POLICY], sa_kubeconfig)
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})  # today's default profile
        wait_accepted(custom, POLICY, op)
        yield op
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture(scope="module")
def upstream(control_plane: ControlPlane) -> Iterator[str]:
    name = "kube-scheduler-dra"
    control_plane.start_kube_scheduler(name=name)
    try:
        yield name
    finally:
        control_plane.stop_process(name)


def served_kinds(control_plane: ControlPlane) -> set[str]:
    found = control_plane.request("GET", "/apis/resource.k8s.io/v1")
    return {r["name"] for r in found["resources"]}


def create(custom: client.CustomObjectsApi, plural: str, body: dict[str, Any], namespace: str | None = None) -> None:
    if namespace is None:
        custom.create_cluster_custom_object(*RESOURCE, plural, body)
    else:
        custom.create_namespaced_custom_object(*RESOURCE, namespace, plural, body)


def claim_body(name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


class Side:
    """One scheduler's share of the cluster: its nodes, driver, class, slice and pods."""

    def __init__(self, scheduler: str, tag: str, group: Group, custom: client.CustomObjectsApi, namespace: str) -> None:
        self.scheduler, self.tag, self.group, self.custom, self.namespace = scheduler, tag, group, custom, namespace
        self.driver = f"{tag}-{group.id}.example.com"
        self.device_class = f"gpu-{tag}-{group.id}"
        self.nodes = group.nodes(2, labels={"dra-side": tag})
        cel = {"expression": f'device.driver == "{self.driver}"'}
        create(
            custom,
            "deviceclasses",
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": self.device_class},
             "spec": {"selectors": [{"cel": cel}]}},
        )  # fmt: skip
        create(
            custom,
            "resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{self.nodes[0]}-{tag}"},
                "spec": {
                    "driver": self.driver,
                    "nodeName": self.nodes[0],
                    "pool": {"name": self.nodes[0], "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                },
            },
        )

    def claim(self, name: str, count: int = 1) -> None:
        create(
            self.custom, "resourceclaims", claim_body(f"{self.tag}-{name}", self.device_class, count), self.namespace
        )

    def pod(self, name: str, claim: str = "", pvc: str = "") -> str:
        body = self.group.pod(f"{self.tag}-{name}", self.scheduler, node_selector={"dra-side": self.tag})
        if claim:
            body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{self.tag}-{claim}"}]
        if pvc:
            body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}]
        client.CoreV1Api(self.group.api).create_namespaced_pod(self.namespace, body)
        return f"{self.tag}-{name}"

    def delete(self) -> None:
        for plural, name in (("resourceslices", f"{self.nodes[0]}-{self.tag}"), ("deviceclasses", self.device_class)):
            self.custom.delete_cluster_custom_object(*RESOURCE, plural, name)

    def read_claim(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *RESOURCE, self.namespace, "resourceclaims", f"{self.tag}-{name}"
        )
        return got


def node_of(core: client.CoreV1Api, namespace: str, pod: str) -> str | None:
    name: str | None = core.read_namespaced_pod(pod, namespace).spec.node_name
    return name


def unschedulable_message(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    """The message of the pod's PodScheduled=False condition ("" when it has none)."""
    conditions = core.read_namespaced_pod(pod, namespace).status.conditions or []
    return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")


def test_claims_are_allocated_and_refused_as_upstream_does(
    control_plane: ControlPlane,
    operator: Operator,
    upstream: str,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert {"resourceclaims", "resourceslices", "deviceclasses", "resourceclaims/status"} <= served_kinds(control_plane)
    core = client.CoreV1Api(api)
    with Group(api) as group:
        sides = [Side(POLICY, "ours", group, custom, namespace), Side(UPSTREAM, "up", group, custom, namespace)]
        try:
            check(sides, operator, core, custom, namespace, kubeconfig, tmp_path, capsys)
        finally:
            for side in sides:
                side.delete()


def check(
    sides: list[Side],
    operator: Operator,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ours, up = sides
    time.sleep(2)  # both schedulers' informers have the slices and classes before the first pod

    # one device: bound to the node of the slice, the claim allocated and reserved for the pod
    for side in sides:
        side.claim("one")
        side.pod("first", "one")
    for side in sides:
        wait(operator, lambda s=side: node_of(core, namespace, f"{s.tag}-first"), message=f"{side.tag}-first bound")
        assert node_of(core, namespace, f"{side.tag}-first") == side.nodes[0]
    claims = {side.tag: wait(operator, lambda s=side: (c := s.read_claim("one")).get("status") and c) for side in sides}
    first = core.read_namespaced_pod(f"{ours.tag}-first", namespace)
    claim = claims["ours"]
    assert FINALIZER in claim["metadata"]["finalizers"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "ours-first", "uid": first.metadata.uid}]
    allocation = claim["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"], result["request"]) == (
        ours.driver,
        ours.nodes[0],
        "gpu-0",
        "gpu",
    )
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [ours.nodes[0]]}]}]
    # upstream allocated the same device of its own slice, the same way
    (theirs,) = claims["up"]["status"]["allocation"]["devices"]["results"]
    assert (theirs["pool"], theirs["device"]) == (up.nodes[0], "gpu-0")
    assert FINALIZER in claims["up"]["metadata"]["finalizers"]

    # two devices wanted, one left: pending, with upstream's message
    for side in sides:
        side.claim("two", count=2)
        side.pod("second", "two")
    messages = {
        side.tag: wait(
            operator,
            lambda s=side: unschedulable_message(core, namespace, f"{s.tag}-second"),
            message=f"{side.tag}-second unschedulable",
        )
        for side in sides
    }
    assert "cannot allocate all claims" in messages["up"]
    assert messages["ours"] == messages["up"]
    assert node_of(core, namespace, "ours-second") is None

    # a claim that does not exist yet: no attempt (PreEnqueue), then bound once it is created
    for side in sides:
        side.pod("late", "late")
    time.sleep(3)
    for side in sides:
        assert node_of(core, namespace, f"{side.tag}-late") is None
        assert unschedulable_message(core, namespace, f"{side.tag}-late") == ""
        side.claim("late")
    for side in sides:
        wait(operator, lambda s=side: node_of(core, namespace, f"{s.tag}-late"), message=f"{side.tag}-late bound")
        late = side.read_claim("late")["status"]["allocation"]["devices"]["results"]
        assert [r["device"] for r in late] == ["gpu-1"]

    # no such PersistentVolumeClaim: VolumeBinding's PreFilter, then DynamicResources' PostFilter ERROR
    for side in sides:
        side.pod("no-pvc", pvc="nope")
    refused = {
        side.tag: wait(
            operator,
            lambda s=side: unschedulable_message(core, namespace, f"{s.tag}-no-pvc"),
            message=f"{side.tag}-no-pvc unschedulable",
        )
        for side in sides
    }
    assert refused["up"].endswith('persistentvolumeclaim "nope" not found. not found'), refused["up"]
    assert refused["ours"] == refused["up"]

    # simulate --from-cluster: the same objects, the same refusal for the two-device pod
    pod = ours.group.pod("ours-second", POLICY, namespace=namespace, node_selector={"dra-side": "ours"})
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "ours-two"}]
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump(pod))
    args = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), "--pods", str(pods), "--output", "json"]
    rc = main(args)
    out = capsys.readouterr()
    assert rc == 0, out.err
    (placement,) = json.loads(out.out)["placements"]
    assert (placement["node"], placement["message"]) == (None, messages["ours"])


# --------------------------------------------------------------------------- what v1.37 turns on by default

RULE_KEY = "example.com/broken"


class GatesSide:
    """One scheduler's share for DRAExtendedResource and DRADeviceTaintRules: two nodes, a DeviceClass serving an
    extended resource of its own, three devices on the first node, a DeviceTaintRule tainting ``gpu-0``."""

    def __init__(self, scheduler: str, tag: str, group: Group, custom: client.CustomObjectsApi, namespace: str) -> None:
        self.scheduler, self.tag, self.group, self.custom, self.namespace = scheduler, tag, group, custom, namespace
        self.driver = f"x{tag}-{group.id}.example.com"
        self.device_class = f"xgpu-{tag}-{group.id}"
        self.resource = f"example.com/xgpu-{tag}-{group.id}"
        self.nodes = group.nodes(2, labels={"dra-gates": tag})
        self.rule = f"{self.nodes[0]}-gpu-0"
        cel = {"expression": f'device.driver == "{self.driver}"'}
        spec = {"selectors": [{"cel": cel}], "extendedResourceName": self.resource}
        meta = {"name": self.device_class}
        create(custom, "deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta,
                                         "spec": spec})  # fmt: skip
        pool = {"name": self.nodes[0], "generation": 1, "resourceSliceCount": 1}
        devices = [{"name": f"gpu-{i}"} for i in range(3)]
        create(
            custom,
            "resourceslices",
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{self.nodes[0]}-x"},
             "spec": {"driver": self.driver, "nodeName": self.nodes[0], "pool": pool, "devices": devices}},
        )  # fmt: skip
        selector = {"driver": self.driver, "pool": self.nodes[0], "device": "gpu-0"}
        create(
            custom,
            "devicetaintrules",
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": self.rule},
             "spec": {"deviceSelector": selector, "taint": {"key": RULE_KEY, "effect": "NoSchedule"}}},
        )  # fmt: skip

    def pod(self, name: str, count: int) -> str:
        body = self.group.pod(f"{self.tag}-{name}", self.scheduler, node_selector={"dra-gates": self.tag})
        resources = body["spec"]["containers"][0]["resources"]
        for kind in ("requests", "limits"):
            resources.setdefault(kind, {})[self.resource] = str(count)
        client.CoreV1Api(self.group.api).create_namespaced_pod(self.namespace, body)
        return f"{self.tag}-{name}"

    def extended_claim(self, core: client.CoreV1Api, pod: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The claim the scheduler created for the pod's extended resources, and the pod's status of it."""
        status = core.read_namespaced_pod_status(pod, self.namespace).to_dict()["status"]
        ext = status.get("extended_resource_claim_status")
        if not ext:
            return None
        got: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *RESOURCE, self.namespace, "resourceclaims", ext["resource_claim_name"]
        )
        return (got, ext) if (got.get("status") or {}).get("allocation") else None

    def delete(self) -> None:
        for plural, name in (
            ("devicetaintrules", self.rule),
            ("resourceslices", f"{self.nodes[0]}-x"),
            ("deviceclasses", self.device_class),
        ):
            try:
                self.custom.delete_cluster_custom_object(*RESOURCE, plural, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def normalized(side: GatesSide, claim: dict[str, Any], ext: dict[str, Any], pod: str) -> dict[str, Any]:
    """A side's claim and pod status with its own names (side, class, resource) replaced by placeholders."""
    text = json.dumps(
        {
            "name": claim["metadata"]["name"][:-5],
            "generateName": claim["metadata"].get("generateName"),
            "annotations": claim["metadata"].get("annotations"),
            "owners": [(o["kind"], o["name"], o.get("controller")) for o in claim["metadata"]["ownerReferences"]],
            "finalizers": claim["metadata"].get("finalizers"),
            "spec": claim["spec"],
            "results": [(r["request"], r["device"]) for r in claim["status"]["allocation"]["devices"]["results"]],
            "reservedFor": [(r["resource"], r["name"]) for r in claim["status"]["reservedFor"]],
            "mappings": ext["request_mappings"],
        },
        sort_keys=True,
    )
    for own, placeholder in ((side.resource, "RESOURCE"), (side.device_class, "CLASS"), (f"{side.tag}-", "SIDE-")):
        text = text.replace(own, placeholder)
    out: dict[str, Any] = json.loads(text)
    return out


def test_extended_resources_and_device_taint_rules_as_upstream_does(
    operator: Operator,
    upstream: str,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
) -> None:
    """An extended resource a DeviceClass serves, on a node without it in its allocatable: both sides create the
    same claim (``<pod>-extended-resources-``, annotated, owned by the pod) with the same request, allocate the
    devices the DeviceTaintRule leaves (gpu-1, gpu-2) and write the same ``extendedResourceClaimStatus``; a pod
    wanting one more stays pending with the same message; deleting the rule lets it have gpu-0."""
    core = client.CoreV1Api(api)
    with Group(api) as group:
        sides = [GatesSide(s, tag, group, custom, namespace) for s, tag in ((POLICY, "ours"), (UPSTREAM, "up"))]
        try:
            time.sleep(2)  # both schedulers' informers have the classes, slices and rules
            for side in sides:
                side.pod("ext", 2)
            written = {}
            for side in sides:
                wait(operator, lambda s=side: node_of(core, namespace, f"{s.tag}-ext"), message=f"{side.tag}-ext bound")
                assert node_of(core, namespace, f"{side.tag}-ext") == side.nodes[0]
                claim, ext = wait(operator, lambda s=side: s.extended_claim(core, f"{s.tag}-ext"))
                written[side.tag] = normalized(side, claim, ext, f"{side.tag}-ext")
            ours = written["ours"]
            assert ours["results"] == [["container-0-request-1", "gpu-1"], ["container-0-request-1", "gpu-2"]]
            assert ours["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
            assert ours["owners"] == [["Pod", "SIDE-ext", True]] and FINALIZER in ours["finalizers"]
            assert ours == written["up"]

            for side in sides:
                side.pod("more", 1)
            messages = {
                side.tag: wait(
                    operator,
                    lambda s=side: unschedulable_message(core, namespace, f"{s.tag}-more"),
                    message=f"{side.tag}-more unschedulable",
                )
                for side in sides
            }
            assert "cannot allocate all claims" in messages["up"] and messages["ours"] == messages["up"]

            for side in sides:  # the taint goes: the pending pods get gpu-0
                custom.delete_cluster_custom_object(*RESOURCE, "devicetaintrules", side.rule)
            for side in sides:
                wait(operator, lambda s=side: node_of(core, namespace, f"{s.tag}-more"), message=f"{side.tag}-more")
                _, ext = wait(operator, lambda s=side: s.extended_claim(core, f"{s.tag}-more"))
                claim = side.custom.get_namespaced_custom_object(
                    *RESOURCE, namespace, "resourceclaims", ext["resource_claim_name"]
                )
                assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
        finally:
            for side in sides:
                side.delete()
