"""core/dra/parsing.py: every malformed field of a DRA object is refused with its path; what parses means what
the API says (defaults, quantities); ``allocation_body`` is the exact way back of ``parse_allocation``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kopf_scheduler.core.dra.objects import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
    DeviceToleration,
    OpaqueConfiguration,
)
from kopf_scheduler.core.dra.parsing import (
    allocation_body,
    parse_allocation,
    parse_device_class,
    parse_device_taint_rule,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
    quantity_text,
)
from kopf_scheduler.core.model.fields import ObjectError
from kopf_scheduler.core.model.objects import NodeSelectorRequirement, NodeSelectorTerm


def slice_body(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com", "pool": {"name": "p"}, **spec}}


def device(**fields: Any) -> dict[str, Any]:
    return {"name": "d0", **fields}


SLICE = "resourceslice s: spec"
DEV = f"{SLICE}.devices[0]"


@pytest.mark.parametrize(
    "body, message",
    [
        pytest.param([], "resourceslice: expected an object", id="not an object"),
        pytest.param({"metadata": {"name": 5}}, "resourceslice: metadata.name: expected a string, got 5", id="name"),
        pytest.param(slice_body(driver=1), f"{SLICE}.driver: expected a string, got 1", id="driver"),
        pytest.param(
            slice_body(pool={"name": "p", "generation": True}),
            f"{SLICE}.pool.generation: expected an integer, got True",
            id="generation bool",
        ),
        pytest.param(
            slice_body(pool={"name": "p", "generation": "x1"}),
            f"{SLICE}.pool.generation: expected an integer, got 'x1'",
            id="generation text",
        ),
        pytest.param(slice_body(allNodes="yes"), f"{SLICE}.allNodes: expected true or false, got 'yes'", id="allNodes"),
        pytest.param(slice_body(nodeSelector=[]), f"{SLICE}.nodeSelector: expected a node selector object", id="sel"),
        pytest.param(slice_body(devices=[7]), f"{DEV}: expected a device object", id="device"),
        pytest.param(slice_body(devices=[{}]), f"{DEV}.name: required", id="device name"),
        pytest.param(
            slice_body(devices=[device(attributes={"a": 1})]),
            f"{DEV}.attributes.a: expected an attribute object",
            id="attribute object",
        ),
        pytest.param(
            slice_body(devices=[device(attributes={"a": {"int": 1, "string": "x"}})]),
            f"{DEV}.attributes.a: exactly one of int, bool, string, version, ints, bools, strings, versions"
            " must be set",
            id="two attribute kinds",
        ),
        pytest.param(
            slice_body(devices=[device(attributes={"a": {"ints": 3}})]),
            f"{DEV}.attributes.a.ints: expected a list",
            id="list kind not a list",
        ),
        pytest.param(
            slice_body(devices=[device(attributes={"a": {"int": True}})]),
            f"{DEV}.attributes.a.int: expected int, got True",
            id="bool is no int",
        ),
        pytest.param(
            slice_body(devices=[device(attributes={"a": {"strings": ["x", 2]}})]),
            f"{DEV}.attributes.a.strings: expected a list of string, got 2",
            id="strings",
        ),
        pytest.param(
            slice_body(devices=[device(capacity={"mem": "1Gi"})]),
            f"{DEV}.capacity.mem: expected {{value}}",
            id="capacity",
        ),
        pytest.param(
            slice_body(devices=[device(capacity={"mem": {"value": "1Qi"}})]),
            f"{DEV}.capacity.mem.value: ",
            id="capacity quantity",
        ),
        pytest.param(
            slice_body(devices=[device(capacity={"mem": {"value": "1Gi", "requestPolicy": 1}})]),
            f"{DEV}.capacity.mem.requestPolicy: expected an object",
            id="request policy",
        ),
        pytest.param(
            slice_body(devices=[device(capacity={"mem": {"value": "1Gi", "requestPolicy": {"validRange": 2}}})]),
            f"{DEV}.capacity.mem.requestPolicy.validRange: expected an object",
            id="valid range",
        ),
        pytest.param(
            slice_body(devices=[device(consumesCounters=[1])]),
            f"{DEV}.consumesCounters[0]: expected an object",
            id="consumes",
        ),
        pytest.param(
            slice_body(devices=[device(consumesCounters=[{"counterSet": "c", "counters": {"m": 3}}])]),
            f"{DEV}.consumesCounters[0].counters.m: expected {{value}}",
            id="counter",
        ),
        pytest.param(
            slice_body(devices=[device(consumesCounters=[{"counterSet": "c", "compatibilityGroups": [1]}])]),
            f"{DEV}.consumesCounters[0].compatibilityGroups[0]: expected a string, got 1",
            id="compatibility groups",
        ),
        pytest.param(slice_body(devices=[device(taints=["t"])]), f"{DEV}.taints[0]: expected a taint object", id="t"),
    ],
)
def test_a_malformed_slice_names_its_field(body, message):
    with pytest.raises(ObjectError) as caught:
        parse_resource_slice(body)
    assert str(caught.value).startswith(message)


def test_a_slice_device_as_the_api_means_it():
    rs = parse_resource_slice(
        slice_body(
            pool={"name": "p", "generation": "3"},
            sharedCounters=[{"name": "cs", "counters": {"mem": {"value": "8Gi"}}}, "ignored"],
            devices=[
                device(
                    attributes={"model": {"string": "a100"}, "ids": {"ints": [1, 2]}},
                    capacity={
                        "mem": {
                            "value": "4Gi",
                            "requestPolicy": {
                                "default": "1Gi",
                                "validValues": ["1Gi", "2Gi"],
                                "validRange": {"min": "500m", "step": "1"},
                            },
                        }
                    },
                    taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    bindsToNode=True,
                    allowMultipleAllocations=False,
                )
            ],
        )
    )
    assert rs.generation == 3 and rs.resource_slice_count == 1 and rs.node_name is None
    assert rs.shared_counters[0].name == "cs" and rs.shared_counters[0].counters == {"mem": Fraction(8 * 2**30)}
    (d,) = rs.devices
    assert d.attributes["ids"].value == (1, 2) and d.attributes["model"].value == "a100"
    policy = d.capacity["mem"].request_policy
    assert policy is not None
    assert policy.default == 2**30 and policy.valid_values == (2**30, 2**31)
    assert policy.valid_range == (Fraction(1, 2), None, Fraction(1))
    assert d.taints[0].effect == "NoSchedule" and d.binds_to_node and d.allow_multiple_allocations is False


def claim_body(*requests: Any, **devices: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


CLAIM = "resourceclaim ns/c: spec.devices"


@pytest.mark.parametrize(
    "body, message",
    [
        pytest.param(claim_body(1), f"{CLAIM}.requests[0]: expected a request object", id="request"),
        pytest.param(
            claim_body({"name": "r", "exactly": {"deviceClassName": "g"}, "firstAvailable": [{"name": "s"}]}),
            f"{CLAIM}.requests[0]: exactly one of exactly, firstAvailable must be set",
            id="both",
        ),
        pytest.param(
            claim_body({"name": "r", "exactly": 3}), f"{CLAIM}.requests[0].exactly: expected an object", id="x"
        ),
        pytest.param(
            claim_body({"name": "r", "exactly": {"selectors": [1]}}),
            f"{CLAIM}.requests[0].exactly.selectors[0]: expected a selector object",
            id="selector",
        ),
        pytest.param(
            claim_body({"name": "r", "exactly": {"selectors": [{"cel": "x"}]}}),
            f"{CLAIM}.requests[0].exactly.selectors[0].cel: expected {{expression}}",
            id="cel",
        ),
        pytest.param(
            claim_body({"name": "r", "exactly": {"capacity": 1}}),
            f"{CLAIM}.requests[0].exactly.capacity: expected {{requests}}",
            id="capacity",
        ),
        pytest.param(
            claim_body({"name": "r", "exactly": {"tolerations": [1]}}),
            f"{CLAIM}.requests[0].exactly.tolerations[0]: expected a toleration object",
            id="toleration",
        ),
        pytest.param(claim_body(constraints=[1]), f"{CLAIM}.constraints[0]: expected a constraint object", id="cons"),
        pytest.param(claim_body(config=[1]), f"{CLAIM}.config[0]: expected an object", id="config"),
        pytest.param(
            claim_body(config=[{"opaque": 1}]),
            f"{CLAIM}.config[0].opaque: expected {{driver, parameters}}",
            id="opaque",
        ),
        pytest.param(
            {**claim_body(), "status": {"reservedFor": [1]}},
            "resourceclaim ns/c: status.reservedFor[0]: expected an object",
            id="reserved",
        ),
        pytest.param(
            {**claim_body(), "status": {"devices": [1]}},
            "resourceclaim ns/c: status.devices[0]: expected an object",
            id="device status",
        ),
        pytest.param(
            {**claim_body(), "status": {"allocation": 1}},
            "resourceclaim ns/c: status.allocation: expected an object",
            id="allocation",
        ),
        pytest.param(
            {**claim_body(), "status": {"allocation": {"devices": {"results": [1]}}}},
            "resourceclaim ns/c: status.allocation.devices.results[0]: expected an object",
            id="result",
        ),
        pytest.param(
            {**claim_body(), "status": {"allocation": {"devices": {"config": [1]}}}},
            "resourceclaim ns/c: status.allocation.devices.config[0]: expected an object",
            id="allocation config",
        ),
    ],
)
def test_a_malformed_claim_names_its_field(body, message):
    with pytest.raises(ObjectError) as caught:
        parse_resource_claim(body)
    assert str(caught.value) == message


def test_a_claim_request_gets_the_api_servers_defaults():
    claim = parse_resource_claim(
        claim_body(
            {"name": "one", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"mem": "1Gi"}}}},
            {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "adminAccess": True}]},
            constraints=[{"requests": ["one"], "matchAttribute": "gpu.example.com/model"}],
        )
    )
    one, every, alt = claim.spec.requests
    assert one.exactly is not None and one.exactly.count == 1 and one.exactly.allocation_mode == "ExactCount"
    assert one.exactly.capacity == {"mem": 2**30}
    assert every.exactly is not None and every.exactly.count == 0 and every.exactly.allocation_mode == "All"
    # a sub-request has no adminAccess of its own
    assert alt.first_available[0].name == "big" and alt.first_available[0].spec.admin_access is None
    assert claim.spec.constraints[0].match_attribute == "gpu.example.com/model"
    assert claim.namespace == "ns" and not claim.deleting


@pytest.mark.parametrize(
    "parse, body, message",
    [
        pytest.param(
            parse_device_class,
            {"metadata": {"name": "g"}, "spec": {"config": [1]}},
            "deviceclass g: spec.config[0]: expected an object",
            id="class config",
        ),
        pytest.param(
            parse_device_taint_rule,
            {"metadata": {"name": "r"}, "spec": {"deviceSelector": 1, "taint": {}}},
            "devicetaintrule r: spec.deviceSelector: expected an object",
            id="rule selector",
        ),
        pytest.param(
            parse_device_taint_rule,
            {"metadata": {"name": "r"}, "spec": {}},
            "devicetaintrule r: spec.taint: required",
            id="rule taint",
        ),
        pytest.param(
            parse_resource_claim_template,
            {"metadata": {"name": "t"}, "spec": {"metadata": {"labels": 1}}},
            "resourceclaimtemplate default/t: spec.metadata.labels: expected an object, got int",
            id="template labels",
        ),
    ],
)
def test_other_dra_objects_name_their_bad_field(parse, body, message):
    with pytest.raises(ObjectError) as caught:
        parse(body)
    assert str(caught.value) == message


def test_a_device_taint_rule_and_a_template_parse():
    rule = parse_device_taint_rule(
        {
            "metadata": {"name": "r"},
            "spec": {"deviceSelector": {"driver": "d", "device": "x"}, "taint": {"key": "k", "effect": "NoExecute"}},
        }
    )
    assert rule.selector is not None and (rule.selector.driver, rule.selector.pool, rule.selector.device) == (
        "d",
        None,
        "x",
    )
    assert rule.taint.key == "k" and rule.taint.effect == "NoExecute"
    template = parse_resource_claim_template(
        {
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {
                "metadata": {"labels": {"a": "b"}, "annotations": {"n": None}},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "g"}}]}},
            },
        }
    )
    assert template.labels == {"a": "b"} and template.annotations == {"n": ""}
    assert template.spec.requests[0].exactly is not None and template.spec.requests[0].exactly.count == 1


@pytest.mark.parametrize(
    "q, text",
    [
        (Fraction(3), "3"),
        (Fraction(1, 2), "500m"),
        (Fraction(1, 10**6), "1000n"),
        (Fraction(1, 3), str(1 / 3)),
    ],
)
def test_quantity_text(q, text):
    assert quantity_text(q) == text


def test_allocation_body_is_the_way_back_of_parse_allocation():
    allocation = AllocationResult(
        results=(
            DeviceRequestAllocationResult(
                request="r",
                driver="gpu.example.com",
                pool="p",
                device="d0",
                admin_access=False,
                tolerations=(DeviceToleration("k", "Equal", "v", "NoExecute", 30),),
                binding_conditions=("Attached",),
                binding_failure_conditions=("Failed",),
                share_id="s1",
                consumed_capacity={"mem": Fraction(1, 2)},
            ),
            DeviceRequestAllocationResult(request="r", driver="gpu.example.com", pool="p", device="d1"),
        ),
        config=(
            DeviceAllocationConfiguration("FromClaim", ("r",), OpaqueConfiguration("gpu.example.com", {"a": 1})),
            DeviceAllocationConfiguration("FromClass", (), OpaqueConfiguration("gpu.example.com", None)),
        ),
        node_selector=(
            NodeSelectorTerm(
                match_expressions=(NodeSelectorRequirement("zone", "In", ("a",)),),
                match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),),
            ),
        ),
        allocation_timestamp="2026-12-06T00:00:00Z",
    )
    body = allocation_body(allocation)
    assert body["devices"]["results"][0]["consumedCapacity"] == {"mem": "500m"}
    assert body["devices"]["results"][0]["tolerations"] == [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}
    ]
    assert body["devices"]["results"][1] == {"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "d1"}
    assert body["devices"]["config"][1] == {"source": "FromClass", "opaque": {"driver": "gpu.example.com"}}
    assert parse_allocation(body) == allocation
