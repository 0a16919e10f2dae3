"""The structured allocator (core/dra/allocator.py) against upstream's own cases.

Cases named like upstream's come from dynamic-resource-allocation v0.37.2
``structured/internal/allocatortesting/allocator_testing.go`` with the same objects and the same
expected devices (upstream compares the results of a claim as a set; we compare them in order,
which upstream's search order fixes). Node "node-1" has labels region=region-1, planet=earth.
"""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import pytest
from dra_builders import (
    DRIVER_A,
    DRIVER_B,
    allocated,
    claim,
    claim_obj,
    class_obj,
    device,
    device_class,
    first_available,
    label_selector,
    request,
    resource_slice,
    slice_obj,
)

from kopf_scheduler.core.dra import allocator as alloc_mod
from kopf_scheduler.core.dra.allocator import AllocatedState, AllocationError, Allocator, Features, NodeAllocationError
from kopf_scheduler.core.dra.extended import device_totals
from kopf_scheduler.core.dra.objects import AllocationResult, CapacityRequestPolicy, DeviceCapacity, DeviceID
from kopf_scheduler.core.model.objects import Node, NodeSelectorRequirement, NodeSelectorTerm

POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
NODE1 = Node("node-1", labels={"region": "region-1", "planet": "earth"})
NODE2 = Node("node-2", labels={"region": "region-2", "planet": "earth"})
CLASS_A, CLASS_B = device_class("class-a", DRIVER_A), device_class("class-b", DRIVER_B)

Picked = tuple[str, str, str, str]
DEFAULT_FEATURES = Features()


def allocate(
    claims: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    *,
    classes: list[dict[str, Any]] | None = None,
    node: Node = NODE1,
    in_use: tuple[tuple[str, str, str], ...] = (),
    features: Features = DEFAULT_FEATURES,
) -> list[AllocationResult] | None:
    allocator = Allocator(
        classes={c["metadata"]["name"]: class_obj(c) for c in (classes if classes is not None else [CLASS_A, CLASS_B])},
        slices=[slice_obj(s) for s in slices],
        allocated=AllocatedState(frozenset(DeviceID(*d) for d in in_use)),
        features=features,
    )
    return allocator.allocate(node, [claim_obj(c) for c in claims])


def devices_of(results: list[AllocationResult] | None) -> list[list[Picked]] | None:
    if results is None:
        return None
    return [[(r.request, r.driver, r.pool, r.device) for r in a.results] for a in results]


def local(node: str) -> tuple[NodeSelectorTerm, ...]:
    """Upstream ``localNodeSelector``."""
    return (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node,)),)),)


def one(name: str = "device-1", **kw: Any) -> dict[str, Any]:
    return device(name, **kw)


MEM_1G = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("1Gi")) >= 0'
MEM_2G = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("2Gi")) >= 0'
C0 = "claim-0"


@pytest.mark.parametrize(
    ("claims", "slices", "kwargs", "expected"),
    [
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1")]],
            id="simple",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [
                resource_slice("slice-1", POOL1, one(), node="node-1", driver=DRIVER_B),
                resource_slice("slice-2", POOL2, one(), node="node-2"),
            ],
            {"node": NODE2},
            [[("req-0", DRIVER_A, POOL2, "device-1")]],
            id="other-node",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", MEM_1G), request("req-1", "class-a", MEM_2G))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-1", capacity={"memory": "1Gi"}),
                    device("device-2", capacity={"memory": "2Gi"}),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-1", DRIVER_A, POOL1, "device-2")]],
            id="small-and-large",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", MEM_1G), request("req-1", "class-a", MEM_2G))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-2", capacity={"memory": "2Gi"}),
                    device("device-1", capacity={"memory": "1Gi"}),
                    node="node-1",
                )
            ],
            {},
            # the large device first goes to the small request; the search backtracks
            [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-1", DRIVER_A, POOL1, "device-2")]],
            id="small-and-large-backtrack-requests",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", mode="All"))],
            [resource_slice("slice-1", POOL1, one("device-1"), one("device-2"), node="node-1")],
            {"in_use": ((DRIVER_A, POOL1, "device-1"),)},
            None,
            id="all-devices-some-allocated",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", mode="All"))],
            [resource_slice("slice-1", POOL1, one("device-1"), one("device-2"), node="node-1")],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-0", DRIVER_A, POOL1, "device-2")]],
            id="all-devices-many",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one(), node_selector=label_selector("region", "region-1"))],
            {"node": NODE2},
            None,
            id="unsuccessful-allocation-network-attached-device",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            {"in_use": ((DRIVER_A, POOL1, "device-1"),)},
            None,
            id="already-allocated-devices",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", admin_access=True))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            {"in_use": ((DRIVER_A, POOL1, "device-1"), (DRIVER_A, POOL1, "device-2"))},
            [[("req-0", DRIVER_A, POOL1, "device-1")]],
            id="admin-access-enabled",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a"),
                    request("req-1", "class-a"),
                    constraints=[
                        {"matchAttribute": f"{DRIVER_A}/numa"},
                        {"matchAttribute": f"{DRIVER_A}/driverVersion"},
                        {"matchAttribute": f"{DRIVER_A}/stringAttribute"},
                        {"matchAttribute": f"{DRIVER_A}/boolAttribute"},
                    ],
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    *(
                        device(
                            n,
                            attributes={
                                "driverVersion": {"version": "1.0.0"},
                                "numa": 1,
                                "stringAttribute": "stringAttributeValue",
                                "boolAttribute": True,
                            },
                        )
                        for n in ("device-1", "device-2")
                    ),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-1", DRIVER_A, POOL1, "device-2")]],
            id="with-constraint",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a"),
                    request("req-1", "class-a"),
                    constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}],
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-1", attributes={"numa": 1}),
                    device("device-2", attributes={"numa": 2}),
                    node="node-1",
                )
            ],
            {},
            None,
            id="with-constraint-not-matching-int-attribute",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a"),
                    request("req-1", "class-a"),
                    constraints=[{"requests": ["req-0"], "matchAttribute": f"{DRIVER_A}/driverVersion"}],
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-1", attributes={"driverVersion": {"version": "1.0.0"}}),
                    device("device-2", attributes={"driverVersion": {"version": "2.0.0"}}),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-1", DRIVER_A, POOL1, "device-2")]],
            id="with-constraint-for-request",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a"),
                    request("req-1", "class-a"),
                    constraints=[
                        {"requests": ["req-0"], "matchAttribute": f"{DRIVER_A}/driverVersion"},
                        {"matchAttribute": f"{DRIVER_A}/stringAttribute"},
                    ],
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-1", attributes={"driverVersion": {"version": "1.0.0"}, "stringAttribute": "a"}),
                    device("device-2", attributes={"driverVersion": {"version": "2.0.0"}, "stringAttribute": "b"}),
                    device("device-3", attributes={"driverVersion": {"version": "3.0.0"}, "stringAttribute": "b"}),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-2"), ("req-1", DRIVER_A, POOL1, "device-3")]],
            id="with-constraint-for-request-retry",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a")), claim("claim-1", request("req-0", "class-b"))],
            [
                resource_slice("slice-1", POOL1, one(), node="node-1"),
                resource_slice("slice-2", POOL1, one(), node="node-1", driver=DRIVER_B),
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "device-1")], [("req-0", DRIVER_B, POOL1, "device-1")]],
            id="several-different-drivers",
        ),
    ],
)
def test_upstream_cases(
    claims: list[dict[str, Any]], slices: list[dict[str, Any]], kwargs: dict[str, Any], expected: Any
) -> None:
    got = allocate(claims, slices, **kwargs)
    assert devices_of(got) == expected
    if got is not None and kwargs.get("node", NODE1) is NODE1 and all(s["spec"].get("nodeName") for s in slices):
        assert all(a.node_selector == local("node-1") for a in got)


def test_network_attached_device_selector_is_the_slices() -> None:
    """Upstream "network-attached-device": the allocation is usable where the slice is."""
    got = allocate(
        [claim(C0, request("req-0", "class-a"))],
        [resource_slice("slice-1", POOL1, one(), node_selector=label_selector("region", "region-1"))],
    )
    assert got is not None
    assert devices_of(got) == [[("req-0", DRIVER_A, POOL1, "device-1")]]
    assert got[0].node_selector == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("region", "In", ("region-1",)),)),
    )


def test_many_network_attached_devices_union_of_selectors() -> None:
    """Upstream "many-network-attached-devices": pools in name order, the selectors' union."""
    got = allocate(
        [claim(C0, request("req-0", "class-a", count=4))],
        [
            resource_slice("slice-1", POOL1, one(), node_selector=label_selector("region", "region-1")),
            resource_slice("slice-1", POOL2, one(), all_nodes=True),
            resource_slice("slice-1", POOL3, one(), node_selector=label_selector("planet", "earth")),
            resource_slice(
                "slice-1",
                POOL4,
                one(),
                node_selector={
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                    ]
                },
            ),
        ],
    )
    assert devices_of(got) == [[("req-0", DRIVER_A, p, "device-1") for p in (POOL1, POOL2, POOL3, POOL4)]]
    assert got is not None
    assert got[0].node_selector == (
        NodeSelectorTerm(
            match_expressions=(
                NodeSelectorRequirement("region", "In", ("region-1",)),
                NodeSelectorRequirement("planet", "In", ("earth",)),
            ),
            match_fields=(NodeSelectorRequirement("metadata.name", "In", ("node-1",)),),
        ),
    )


def test_local_and_network_attached_devices_pin_to_the_node() -> None:
    """Upstream "local-and-network-attached-devices": once a device is node-local, the claim is that node's."""
    got = allocate(
        [claim(C0, request("req-0", "class-a", count=2))],
        [
            resource_slice("slice-1", POOL1, one(), node_selector=label_selector("region", "region-1")),
            resource_slice("slice-1", POOL2, one(), node="node-1"),
        ],
    )
    assert devices_of(got) == [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-0", DRIVER_A, POOL2, "device-1")]]
    assert got is not None and got[0].node_selector == local("node-1")


def test_admin_access_disabled_is_an_error() -> None:
    """Upstream "admin-access-disabled" (the gate off; v1.37 locks it on)."""
    with pytest.raises(AllocationError) as err:
        allocate(
            [claim(C0, request("req-0", "class-a", admin_access=True))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            features=Features(admin_access=False),
        )
    assert (
        str(err.value) == "claim default/claim-0, request req-0: admin access is requested, but the feature is disabled"
    )


def test_admin_access_results_are_marked() -> None:
    got = allocate(
        [claim(C0, request("req-0", "class-a", admin_access=True))],
        [resource_slice("slice-1", POOL1, one(), node="node-1")],
        in_use=((DRIVER_A, POOL1, "device-1"),),
    )
    assert got is not None and got[0].results[0].admin_access is True


@pytest.mark.parametrize(
    ("claims", "slices", "message"),
    [
        pytest.param(
            [claim(C0, request("req-0", "class-x"))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            "claim default/claim-0, request req-0: could not retrieve device class class-x: "
            'deviceclass.resource.k8s.io "class-x" not found',
            id="unknown-class",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", mode="All"))],
            [resource_slice("slice-1", POOL1, one(), node="node-1", count=2)],
            "claim default/claim-0, request req-0: asks for all devices, but resource pool "
            "driver-a/pool-1 is currently being updated",
            id="all-devices-of-the-incomplete-pool",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", f'device.attributes["{DRIVER_A}"].model == "a100"'))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            "claim default/claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime "
            "error: no such key: model. "
            "consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields",
            id="CEL runtime error",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", "device.driver =="))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            "claim default/claim-0: selector #0: CEL compile error: compilation failed: "
            "ERROR: <input>:1:17: Syntax error:",
            id="CEL compile error",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=33))],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            "claim default/claim-0, request req-0: adding 33 devices exceeds the claim limit of 32, "
            "with 0 already accounted for",
            id="too-many-devices-single-request",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"), constraints=[{"requests": ["req-0"]}])],
            [resource_slice("slice-1", POOL1, one(), node="node-1")],
            "claim default/claim-0, constraint #0: empty constraint (unsupported constraint type?)",
            id="unknown-constraint",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a", mode="All"),
                    constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}],
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("device-1", attributes={"numa": 1}),
                    device("device-2", attributes={"numa": 2}),
                    node="node-1",
                )
            ],
            "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim "
            "constraint would not be satisfied",
            id="with-constraint-not-matching-int-attribute-all-devices",
        ),
    ],
)
def test_errors(claims: list[dict[str, Any]], slices: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(AllocationError) as err:
        allocate(claims, slices)
    assert str(err.value).startswith(message)


def test_invalid_pool_fails_only_this_node() -> None:
    with pytest.raises(NodeAllocationError) as err:
        allocate(
            [claim(C0, request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one(), one(), node="node-1")],  # duplicate device name
        )
    assert str(err.value) == "invalid resource pools were encountered"


# --------------------------------------------------------------------------- our own cases


@pytest.mark.parametrize(
    ("claims", "slices", "kwargs", "expected"),
    [
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3))],
            [resource_slice("slice-1", POOL1, *(one(f"gpu-{i}") for i in range(4)), node="node-1")],
            {},
            [[("req-0", DRIVER_A, POOL1, f"gpu-{i}") for i in range(3)]],
            id="exact count takes the first devices in slice order",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=2))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), one("gpu-1"), node="node-1")],
            {"in_use": ((DRIVER_A, POOL1, "gpu-0"),)},
            None,
            id="a device allocated elsewhere is not taken",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a")), claim("claim-1", request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), one("gpu-1"), node="node-1")],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-0")], [("req-0", DRIVER_A, POOL1, "gpu-1")]],
            id="two claims of one pod do not share a device",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a")), claim("claim-1", request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), node="node-1")],
            {},
            None,
            id="two claims and one device",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-model"))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("gpu-0", attributes={"model": "t4"}),
                    device("gpu-1", attributes={"model": "a100"}),
                    node="node-1",
                )
            ],
            {
                "classes": [
                    device_class("class-model", DRIVER_A, f'device.attributes["{DRIVER_A}"].model == "a100"'),
                ]
            },
            [[("req-0", DRIVER_A, POOL1, "gpu-1")]],
            id="class selector",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-model", f'device.attributes["{DRIVER_A}"].index > 0'))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("gpu-0", attributes={"model": "a100", "index": 0}),
                    device("gpu-1", attributes={"model": "t4", "index": 1}),
                    device("gpu-2", attributes={"model": "a100", "index": 2}),
                    node="node-1",
                )
            ],
            {
                "classes": [
                    device_class("class-model", DRIVER_A, f'device.attributes["{DRIVER_A}"].model == "a100"'),
                ]
            },
            [[("req-0", DRIVER_A, POOL1, "gpu-2")]],
            id="class and claim selectors both hold",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request(
                        "req-0",
                        "class-a",
                        f'device.capacity["{DRIVER_A}"].memory.isGreaterThan(quantity("16Gi"))',
                        f'device.attributes["{DRIVER_A}"].driverVersion.isGreaterThan(semver("1.2.0"))',
                    ),
                )
            ],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("gpu-0", capacity={"memory": "16Gi"}, attributes={"driverVersion": {"version": "1.3.0"}}),
                    device("gpu-1", capacity={"memory": "40Gi"}, attributes={"driverVersion": {"version": "1.1.0"}}),
                    device("gpu-2", capacity={"memory": "40Gi"}, attributes={"driverVersion": {"version": "1.2.1"}}),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-2")]],
            id="capacity quantity and semver comparisons",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), node="node-2")],
            {},
            None,
            id="another node's local slice",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [
                resource_slice("slice-b", POOL2, one("gpu-0"), node="node-1"),
                resource_slice("slice-a", POOL1, one("gpu-9"), all_nodes=True),
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-9")]],
            id="pools in name order, network-attached ones included",
        ),
        pytest.param(
            [claim(C0, first_available("req-0", request("big", "class-a", count=2), request("small", "class-a")))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), node="node-1")],
            {},
            [[("req-0/small", DRIVER_A, POOL1, "gpu-0")]],
            id="firstAvailable falls back to the next subrequest",
        ),
        pytest.param(
            [claim(C0, first_available("req-0", request("big", "class-a", count=2), request("small", "class-a")))],
            [resource_slice("slice-1", POOL1, one("gpu-0"), one("gpu-1"), node="node-1")],
            {},
            [[("req-0/big", DRIVER_A, POOL1, "gpu-0"), ("req-0/big", DRIVER_A, POOL1, "gpu-1")]],
            id="firstAvailable prefers the first subrequest",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    one("gpu-0", taints=[{"key": "broken", "effect": "NoSchedule"}]),
                    one("gpu-1"),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-1")]],
            id="a tainted device is skipped",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", tolerations=[{"key": "broken", "operator": "Exists"}]))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    one("gpu-0", taints=[{"key": "broken", "effect": "NoSchedule"}]),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-0")]],
            id="a tolerated taint",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", capacity={"memory": "20Gi"}))],
            [
                resource_slice(
                    "slice-1",
                    POOL1,
                    device("gpu-0", capacity={"memory": "16Gi"}),
                    device("gpu-1", capacity={"memory": "40Gi"}),
                    node="node-1",
                )
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-1")]],
            id="capacity requests filter devices",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a"))],
            [
                resource_slice("slice-old", POOL1, one("gpu-0"), node="node-1", generation=1),
                resource_slice("slice-new", POOL1, one("gpu-1"), node="node-1", generation=2),
            ],
            {},
            [[("req-0", DRIVER_A, POOL1, "gpu-1")]],
            id="only the newest generation of a pool",
        ),
    ],
)
def test_allocations(
    claims: list[dict[str, Any]], slices: list[dict[str, Any]], kwargs: dict[str, Any], expected: Any
) -> None:
    assert devices_of(allocate(claims, slices, **kwargs)) == expected


def test_partitionable_devices_share_counters() -> None:
    """Two partitions of one GPU consume its memory counter: only one fits at a time."""
    counters = resource_slice(
        "slice-counters",
        POOL1,
        node="node-1",
        count=2,
        sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}],
    )
    partitions = resource_slice(
        "slice-partitions",
        POOL1,
        *(
            device(
                f"gpu-0-part-{i}",
                consumesCounters=[{"counterSet": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}],
            )
            for i in range(2)
        ),
        node="node-1",
        count=2,
    )
    one_part = allocate([claim(C0, request("req-0", "class-a"))], [counters, partitions])
    assert devices_of(one_part) == [[("req-0", DRIVER_A, POOL1, "gpu-0-part-0")]]
    assert allocate([claim(C0, request("req-0", "class-a", count=2))], [counters, partitions]) is None
    taken = allocate(
        [claim(C0, request("req-0", "class-a"))], [counters, partitions], in_use=((DRIVER_A, POOL1, "gpu-0-part-1"),)
    )
    assert taken is None


def test_config_from_class_and_claim() -> None:
    """Upstream "with-class-device-config" and "claim-with-device-config": class configs first, per class."""
    opaque = {"opaque": {"driver": DRIVER_A, "parameters": {"k": "v"}}}
    got = allocate(
        [claim(C0, request("req-0", "class-c"), config=[{"requests": ["req-0"], **opaque}])],
        [resource_slice("slice-1", POOL1, one(), node="node-1")],
        classes=[device_class("class-c", DRIVER_A, config=[opaque])],
    )
    assert got is not None
    config = [(c.source, c.requests, c.opaque.driver if c.opaque else None) for c in got[0].config]
    assert config == [("FromClass", (), DRIVER_A), ("FromClaim", (), DRIVER_A)]  # both apply to every request


def test_allocated_claim_devices_are_in_use() -> None:
    """An allocated claim's devices count as in use (tracker.allocated_state), admin access excepted."""
    from kopf_scheduler.core.dra.tracker import DraTracker

    tracker = DraTracker()
    tracker.set_claim(claim_obj(allocated(claim("other", request("r", "class-a")), ("r", DRIVER_A, POOL1, "gpu-0"))))
    admin = allocated(claim("admin", request("r", "class-a", admin_access=True)), ("r", DRIVER_A, POOL1, "gpu-1"))
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    tracker.set_claim(claim_obj(admin))
    assert tracker.allocated_state().devices == frozenset({DeviceID(DRIVER_A, POOL1, "gpu-0")})


# --------------------------------------------------------------------------- consumable capacity
# After upstream's incubating/consumable_capacity_test.go (v0.37.2): which share of a device's capacity a request
# consumes (rounded up to the policy's range step or next valid value), which values break the policy, and the
# requests the range arithmetic cannot represent (a fatal error, never a wrapped value).


MAX64 = Q(2**63 - 1)
TOO_BIG_FOR_MILLI = Q(9224372036854776 * 1000)


def rng(low=None, high=None, step=None):
    return (low, high, step)


def policy(default=None, values=(), valid_range=None):
    return CapacityRequestPolicy(default=default, valid_values=tuple(values), valid_range=valid_range)


@pytest.mark.parametrize(
    "requested, value, pol, fractional, expected",
    [
        pytest.param(None, Q(1), policy(), False, Q(1), id="empty"),
        pytest.param(None, Q(2), policy(Q(1), valid_range=rng(Q(1))), False, Q(1), id="min in range"),
        pytest.param(None, Q(2), policy(Q(1), [Q(1)]), False, Q(1), id="default in set"),
        pytest.param(Q(2), Q(2), policy(Q(1), valid_range=rng(Q(1))), False, Q(2), id="more than min in range"),
        pytest.param(Q(1), Q(2), policy(Q(1), valid_range=rng(Q(2))), False, Q(2), id="less than min in range"),
        pytest.param(Q(2), Q(3), policy(Q(1), valid_range=rng(Q(1), step=Q(2))), False, Q(3), id="step round up"),
        pytest.param(Q(2), Q(2), policy(Q(1), valid_range=rng(Q(1), step=Q(1))), False, Q(2), id="step no remaining"),
        pytest.param(
            Q(1, 4), Q(1), policy(Q(1, 5), valid_range=rng(Q(1, 5), Q(1), Q(1, 10))), True, Q(3, 10), id="0.25 to 0.3"
        ),
        pytest.param(
            Q(2, 5), Q(1), policy(Q(1, 5), valid_range=rng(Q(1, 5), Q(1), Q(1, 10))), True, Q(2, 5), id="0.4 aligned"
        ),
        pytest.param(Q(2), Q(3), policy(Q(1), [Q(1), Q(2), Q(3)]), False, Q(2), id="valid value in set"),
        pytest.param(Q(2), Q(3), policy(Q(1), [Q(1), Q(3)]), False, Q(3), id="set round up"),
        pytest.param(Q(3), Q(3), policy(Q(1), [Q(1), Q(2)]), False, Q(3), id="larger than set"),
        pytest.param(
            MAX64 - 1, MAX64, policy(Q(1), valid_range=rng(Q(1), step=Q(2))), False, MAX64, id="rounds to MaxInt64"
        ),
        pytest.param(Q(5), Q(9), None, False, Q(5), id="no policy: as requested"),
    ],
)
def test_consumed_capacity(requested, value, pol, fractional, expected):
    assert alloc_mod._consumed(requested, DeviceCapacity(value, pol), fractional) == expected


@pytest.mark.parametrize(
    "requested, pol, fractional",
    [
        pytest.param(Q(2**64 + 3), policy(Q(0), valid_range=rng(Q(0), step=Q(3))), False, id="above MaxInt64"),
        pytest.param(MAX64, policy(Q(0), valid_range=rng(Q(0), step=Q(2))), False, id="rounded above MaxInt64"),
        pytest.param(
            TOO_BIG_FOR_MILLI,
            policy(Q(1), valid_range=rng(Q(1, 10), step=Q(1, 10))),
            True,
            id="fractional step, request not milli-representable",
        ),
    ],
)
def test_unrepresentable_requests_are_refused(requested, pol, fractional):
    with pytest.raises(alloc_mod._CapacityError, match="capacity request cannot be represented"):
        alloc_mod._consumed(requested, DeviceCapacity(requested, pol), fractional)


@pytest.mark.xfail(
    strict=True,
    reason="upstream refuses a milli-step rounding that passes MaxInt64 milli units; _round_up_range has no such guard",
)
def test_a_fractional_step_rounding_past_the_milli_range_is_refused():
    requested = Q(2**63 - 2, 1000)
    pol = policy(Q(1, 10), valid_range=rng(Q(1, 10), step=Q(1, 10)))
    with pytest.raises(alloc_mod._CapacityError):
        alloc_mod._consumed(requested, DeviceCapacity(Q(2**63 - 1, 1000), pol), True)


@pytest.mark.parametrize(
    "value, pol, fractional, violates",
    [
        pytest.param(Q(1), None, False, False, id="no constraint"),
        pytest.param(Q(1), policy(Q(1), valid_range=rng(Q(1), Q(2))), False, False, id="less than maximum"),
        pytest.param(Q(2), policy(Q(1), valid_range=rng(Q(1), Q(1))), False, True, id="more than maximum"),
        pytest.param(Q(1), policy(Q(1), [Q(1)]), False, False, id="in set"),
        pytest.param(Q(2), policy(Q(1), [Q(1)]), False, True, id="not in set"),
        pytest.param(
            Q(3, 10), policy(Q(1, 5), valid_range=rng(Q(1, 5), Q(1), Q(1, 10))), True, False, id="0.3 aligned"
        ),
        pytest.param(Q(1, 4), policy(Q(1, 5), valid_range=rng(Q(1, 5), Q(1), Q(1, 10))), True, True, id="0.25 off"),
        pytest.param(
            TOO_BIG_FOR_MILLI, policy(Q(1), valid_range=rng(Q(1), step=Q(1))), True, True, id="not milli-representable"
        ),
        pytest.param(Q(4), policy(Q(1), valid_range=rng(Q(1), step=Q(2))), False, True, id="integer step off"),
        pytest.param(Q(5), policy(Q(1), valid_range=rng(Q(1), step=Q(2))), False, False, id="integer step on"),
    ],
)
def test_policy_violations(value, pol, fractional, violates):
    assert alloc_mod._violates_policy(value, DeviceCapacity(Q(100), pol), fractional) is violates


@pytest.mark.parametrize(
    "valid_range, fractional, milli",
    [
        pytest.param(rng(Q(1, 5), Q(1), Q(1, 10)), False, False, id="fractional disabled"),
        pytest.param(rng(Q(1, 5), Q(1), Q(1, 10)), True, True, id="fractional fits milli"),
        pytest.param(rng(Q(1), Q(3), Q(1)), True, True, id="integers fit milli"),
        pytest.param(rng(TOO_BIG_FOR_MILLI, step=Q(1)), True, False, id="min overflows milli"),
        pytest.param(rng(Q(1), step=Q(0)), True, False, id="step below one milli"),
    ],
)
def test_milli_arithmetic_is_used_when_lossless(valid_range, fractional, milli):
    assert alloc_mod._use_milli(valid_range, fractional) is milli


def test_capacity_fits_sums_what_is_held_and_what_is_being_allocated():
    capacity = {
        "mem": DeviceCapacity(Q(10), policy(Q(2), valid_range=rng(Q(1), step=Q(1)))),
        "bw": DeviceCapacity(Q(1)),
    }
    # a request of a capacity the device does not have
    assert not alloc_mod.capacity_fits({}, {"gpu": Q(1)}, capacity, None, False)
    # no request: the default (2 of mem) and the whole value of a capacity without policy (1 of bw)
    assert alloc_mod.capacity_fits({"mem": Q(8)}, None, capacity, None, False)
    assert not alloc_mod.capacity_fits({"mem": Q(8)}, None, capacity, {"mem": Q(1)}, False)
    assert not alloc_mod.capacity_fits({"bw": Q(1, 2)}, {"mem": Q(1)}, capacity, None, False)


def test_capacity_fits_an_unrepresentable_request_beats_a_soft_mismatch():
    capacity = {
        "capacity-0": DeviceCapacity(Q(1)),
        "capacity-1": DeviceCapacity(MAX64 + 1, policy(valid_range=rng(Q(0), step=Q(2)))),
    }
    with pytest.raises(alloc_mod._CapacityError, match='capacity "capacity-1": capacity request cannot be represented'):
        alloc_mod.capacity_fits({}, {"capacity-0": Q(2), "capacity-1": MAX64}, capacity, None, False)


# --------------------------------------------------------------------------- pools (upstream's pool cases)


def counters(**values: str) -> dict[str, Any]:
    return {k: {"value": v} for k, v in values.items()}


def consumes(counter_set: str, **values: str) -> dict[str, Any]:
    return {"consumesCounters": [{"counterSet": counter_set, "counters": counters(**values)}]}


def counter_slice(name: str, pool: str, *sets: tuple[str, dict[str, Any]], count: int = 1) -> dict[str, Any]:
    return resource_slice(
        name, pool, node="node-1", count=count, sharedCounters=[{"name": n, "counters": c} for n, c in sets]
    )


def test_devices_split_across_different_slices() -> None:
    found = allocate(
        [claim(C0, request("req-0", "class-a", count=2))],
        [
            resource_slice("slice-1", POOL1, one(), node="node-1"),
            resource_slice("slice-2", POOL2, one(), node="node-1"),
        ],
    )
    assert devices_of(found) == [[("req-0", DRIVER_A, POOL1, "device-1"), ("req-0", DRIVER_A, POOL2, "device-1")]]


def test_a_slice_of_an_older_generation_is_obsolete() -> None:
    # two slices announced, one of a newer generation: the pool's current generation has one slice, incomplete
    found = allocate(
        [claim(C0, request("req-0", "class-a"))],
        [
            resource_slice("slice-1", POOL1, one("device-1"), node="node-1", count=2),
            resource_slice("slice-1-newer", POOL1, one("device-2"), node="node-1", count=2, generation=2),
        ],
    )
    assert found is None


def test_a_pool_whose_other_slices_are_newer_elsewhere_is_skipped() -> None:
    # this node's slice is of generation 1; the pool's generation 2 lives on another node: obsolete here
    found = allocate(
        [claim(C0, request("req-0", "class-a"))],
        [
            resource_slice("slice-1", POOL1, one("device-1"), node="node-1", count=2),
            resource_slice("slice-2", POOL1, one("device-2"), node="node-2", count=2, generation=2),
        ],
    )
    assert found is None


def test_a_pool_complete_across_nodes_is_used() -> None:
    # two slices of one pool, one on another node: the pool is complete, this node sees its own device
    found = allocate(
        [claim(C0, request("req-0", "class-a"))],
        [
            resource_slice("slice-1", POOL1, one("device-1"), node="node-1", count=2),
            resource_slice("slice-2", POOL1, one("device-2"), node="node-2", count=2),
        ],
    )
    assert devices_of(found) == [[("req-0", DRIVER_A, POOL1, "device-1")]]


@pytest.mark.parametrize(
    "slices",
    [
        pytest.param(
            [
                resource_slice("slice-1", POOL1, one(), node="node-1", count=2),
                resource_slice("slice-1-2", POOL1, one(), node="node-1", count=2),
            ],
            id="duplicate-slice",
        ),
        pytest.param(
            [
                resource_slice("slice-1", POOL1, one("device-1"), node="node-1", count=4),
                counter_slice("slice-2", POOL1, ("counter-set-1", {}), count=4),
                resource_slice("slice-3", POOL1, one("device-2"), node="node-1", count=4),
                counter_slice("slice-4", POOL1, ("counter-set-1", {}), count=4),
            ],
            id="partitionable-devices-same-counter-set-name-in-different-resource-slices",
        ),
        pytest.param(
            [
                resource_slice("slice-1", POOL1, one(**consumes("counter-set-2")), node="node-1", count=2),
                counter_slice("slice-2", POOL1, ("counter-set-1", {}), count=2),
            ],
            id="partitionable-devices-device-counter-consumption-references-unknown-counter-set",
        ),
        pytest.param(
            [
                resource_slice(
                    "slice-1", POOL1, one(**consumes("counter-set-1", memory="8Gi")), node="node-1", count=2
                ),
                counter_slice("slice-2", POOL1, ("counter-set-1", counters(**{"other-memory": "8Gi"})), count=2),
            ],
            id="partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
        ),
        pytest.param(
            [
                resource_slice("slice-1", POOL1, one(**consumes("counter-set-1", memory="8Gi")), node="node-1"),
                counter_slice("slice-2", POOL2, ("counter-set-1", counters(memory="8Gi"))),
            ],
            id="partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
        ),
    ],
)
def test_an_invalid_pool_fails_only_this_node(slices: list[dict[str, Any]]) -> None:
    with pytest.raises(NodeAllocationError) as err:
        allocate([claim(C0, request("req-0", "class-a"))], slices)
    assert str(err.value) == "invalid resource pools were encountered"


def test_without_partitionable_devices_slices_with_counters_are_ignored() -> None:
    slices = [
        resource_slice("slice-1", POOL1, one(**consumes("counter-set-1", memory="8Gi")), node="node-1", count=2),
        counter_slice("slice-2", POOL1, ("counter-set-1", counters(memory="8Gi")), count=2),
        resource_slice("slice-3", POOL2, one("plain"), node="node-1"),
    ]
    found = allocate([claim(C0, request("req-0", "class-a"))], slices, features=Features(partitionable_devices=False))
    # pool-1 is two slices, one of them (the counter set) not seen: incomplete; pool-2's plain device is used
    assert devices_of(found) == [[("req-0", DRIVER_A, POOL2, "plain")]]


# --------------------------------------------------------------------------- distinctAttribute (upstream's cases)

NUMA, TEXT = f"{DRIVER_A}/numa", f"{DRIVER_A}/stringAttribute"


def with_values(key: str, *values: Any) -> list[dict[str, Any]]:
    return [one(f"device-{i}", attributes={key: v} if v is not None else None) for i, v in enumerate(values, 1)]


@pytest.mark.parametrize(
    ("claims", "devices", "expected"),
    [
        pytest.param(
            [
                claim(
                    C0,
                    *(request(f"req-{i}", "class-a") for i in range(4)),
                    constraints=[
                        {"distinctAttribute": f"{DRIVER_A}/boolAttribute", "requests": ["req-0", "req-1"]},
                        {"distinctAttribute": f"{DRIVER_A}/driverVersion", "requests": ["req-0", "req-1", "req-2"]},
                        {"distinctAttribute": NUMA},
                    ],
                )
            ],
            [
                one(
                    f"device-{i}",
                    attributes={"driverVersion": {"version": version}, "numa": i - 1, "boolAttribute": flag},
                    allowMultipleAllocations=True,
                )
                for i, version, flag in (
                    (1, "1.0.0", True),
                    (2, "1.0.1", False),
                    (3, "1.0.2", True),
                    (4, "1.0.0", True),
                )
            ],
            [[(f"req-{i}", DRIVER_A, POOL1, f"device-{i + 1}") for i in range(4)]],
            id="with-distinct-constraints",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3), constraints=[{"distinctAttribute": TEXT}])],
            with_values("stringAttribute", "value1", "value2", "value1"),
            None,
            id="distinct-constraint-single-request-count-3-not-distinct",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3), constraints=[{"distinctAttribute": TEXT}])],
            with_values("stringAttribute", "value1", "value2", "value3"),
            [[("req-0", DRIVER_A, POOL1, f"device-{i}") for i in (1, 2, 3)]],
            id="distinct-constraint-single-request-count-3-all-distinct",
        ),
        pytest.param(
            [
                claim(
                    C0,
                    request("req-0", "class-a", count=2),
                    request("req-1", "class-a"),
                    constraints=[{"distinctAttribute": TEXT, "requests": ["req-0", "req-1"]}],
                )
            ],
            with_values("stringAttribute", "value1", "value2", "value1"),
            None,
            id="distinct-constraint-two-requests-with-count-not-distinct",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3), constraints=[{"distinctAttribute": NUMA}])],
            with_values("numa", None, None, None),
            None,
            id="distinct-constraint-single-request-multiple-devices-attribute-not-set",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3), constraints=[{"distinctAttribute": NUMA}])],
            with_values("numa", 1, 2, 2, 2),
            None,
            id="distinct-constraint-single-request-not-enough-distinct-values",
        ),
        pytest.param(
            [claim(C0, request("req-0", "class-a", count=3), constraints=[{"distinctAttribute": NUMA}])],
            with_values("numa", 1, 2, 1, 3),
            [[("req-0", DRIVER_A, POOL1, f"device-{i}") for i in (1, 2, 4)]],
            id="distinct-constraint-single-request-multiple-devices-attribute-set",
        ),
    ],
)
def test_distinct_attribute(
    claims: list[dict[str, Any]], devices: list[dict[str, Any]], expected: list[list[Picked]] | None
) -> None:
    found = allocate(claims, [resource_slice("slice-1", POOL1, *devices, node="node-1")])
    assert devices_of(found) == expected


# --------------------------------------------------------------------------- extended resources scored by devices


def test_device_totals_count_the_classs_devices_this_node_reaches_and_those_allocated() -> None:
    per_device = resource_slice(
        "per-device",
        POOL3,
        one("everywhere", allNodes=True),
        one("mine", nodeName="node-1"),
        one("by-label", nodeSelector=label_selector("region", "region-1")),
        one("elsewhere", nodeName="node-2"),
        perDeviceNodeSelection=True,
    )
    slices = [
        slice_obj(resource_slice("local", POOL1, one("a"), one("b"), node="node-1")),
        slice_obj(resource_slice("remote", POOL2, one("c"), node="node-2")),
        slice_obj(resource_slice("other-region", POOL4, one("d"), node_selector=label_selector("region", "region-2"))),
        slice_obj(per_device),
    ]
    gpu = class_obj(device_class("gpu", DRIVER_A, 'device.driver == "x"'))
    in_use = AllocatedState(frozenset({DeviceID(DRIVER_A, POOL1, "b"), DeviceID(DRIVER_A, POOL2, "c")}))

    def every(expression: str, driver: str, found: Any) -> bool | str:
        return True

    def not_b(expression: str, driver: str, found: Any) -> bool | str:
        return found.name != "b"

    def broken(expression: str, driver: str, found: Any) -> bool | str:
        return "no such key: model"

    # local a and b (b allocated), and the three per-device ones this node reaches
    assert device_totals(NODE1, gpu, in_use, slices, every) == (5, 1)
    assert device_totals(NODE1, gpu, in_use, slices, not_b) == (4, 0)
    # a selector that fails on a device: the resource counts as absent
    assert device_totals(NODE1, gpu, in_use, slices, broken) == (0, 0)
