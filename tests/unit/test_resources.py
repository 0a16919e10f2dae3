"""A pod's requests as v1.37 computes them: sidecars, pod-level resources, in-place resize.

Tables after upstream ``pkg/scheduler/framework/types_test.go`` (``TestPodInfoCalculateResources``,
``TestCalculatePodResourcesWithResize``) and ``component-helpers/resource/helpers_test.go``. Each
row gives the pod and, as (milli-cpu, memory bytes): ``requests`` (NodeInfo's requested sum and
the filters), ``non_zero`` (NodeInfo's non-zero sum) and ``fit_score`` (what NodeResourcesFit
scores the incoming pod with: the containers only, with the 100m / 200Mi defaults).
"""

from __future__ import annotations

import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.core.model.parsing import ObjectError, parse_pod
from kopf_scheduler.core.model.resources import DEFAULT_MEMORY_REQUEST as DMEM
from kopf_scheduler.core.model.resources import DEFAULT_MILLI_CPU_REQUEST as DCPU
from kopf_scheduler.core.model.resources import ZERO_RESOURCES, QuantityError, Resources

M = 1_000_000  # "1M" of memory


def cpu_mem(p: Pod) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    r, nz, fit = p.requests, p.non_zero_requests, p.container_non_zero_requests
    return (r.milli_cpu, r.memory), (nz.milli_cpu, nz.memory), (fit.milli_cpu, fit.memory)


@pytest.mark.parametrize(
    "pod, requests, non_zero, fit_score",
    [
        pytest.param(make_pod().container().obj(), (0, 0), (DCPU, DMEM), (DCPU, DMEM), id="requestless container"),
        pytest.param(
            make_pod().req(cpu="500m", memory="500M").container(cpu="700m", memory="800M").obj(),
            (1200, 1300 * M),
            (1200, 1300 * M),
            (1200, 1300 * M),
            id="two containers add up",
        ),
        # an explicit zero is not absent: no default for it
        pytest.param(make_pod().req(cpu="0", memory="0").obj(), (0, 0), (0, 0), (0, 0), id="explicit zero keeps zero"),
        # init 2 cpu then containers 1 + 1: max(2, 2) = 2 cpu; memory 3G vs 2G
        pytest.param(
            make_pod()
            .init_container(cpu="2", memory="3G")
            .req(cpu="1", memory="1G")
            .container(cpu="1", memory="1G")
            .obj(),
            (2000, 3000 * M),
            (2000, 3000 * M),
            (2000, 3000 * M),
            id="init containers by max",
        ),
        # sidecar 1 cpu keeps running: containers 1 + sidecar 1 = 2; init after it: 1 + 3 = 4 -> 4
        pytest.param(
            make_pod().init_container(restartable=True, cpu="1").init_container(cpu="3").req(cpu="1").obj(),
            (4000, 0),
            (4000, 2 * DMEM),
            (4000, 2 * DMEM),
            id="sidecar adds to the init peak",
        ),
        # pod-level requests replace the containers' sums for cpu and memory
        pytest.param(
            make_pod()
            .init_container(cpu="500m", memory="500M")
            .req(cpu="500m", memory="500M")
            .pod_requests(cpu="1200m", memory="1200M")
            .obj(),
            (1200, 1200 * M),
            (1200, 1200 * M),
            (500, 500 * M),
            id="pod-level requests win",
        ),
        pytest.param(
            make_pod()
            .init_container(restartable=True, cpu="500m", memory="500M")
            .req(cpu="500m", memory="500M")
            .pod_requests(cpu="1200m", memory="1200M")
            .obj(),
            (1200, 1200 * M),
            (1200, 1200 * M),
            (1000, 1000 * M),
            id="pod-level requests win over a sidecar",
        ),
        # nobody names cpu: the default applies to the non-zero sum only. The Fit scorer sees the
        # containers: c0 100m / 200Mi, init0 100m / 200Mi -> max 100m / 200Mi
        pytest.param(
            make_pod().init_container().container().pod_requests(memory="1200M").obj(),
            (0, 1200 * M),
            (DCPU, 1200 * M),
            (DCPU, DMEM),
            id="pod-level memory only",
        ),
        pytest.param(
            make_pod().init_container().container().pod_requests(cpu="500m").obj(),
            (500, 0),
            (500, DMEM),
            (DCPU, DMEM),
            id="pod-level cpu only",
        ),
        # the API server defaults pod-level requests from pod-level limits
        pytest.param(
            make_pod().container().pod_limits(cpu="2").obj(),
            (2000, 0),
            (2000, DMEM),
            (DCPU, DMEM),
            id="pod-level limits default the requests",
        ),
        # overhead adds to everything
        pytest.param(
            make_pod().req(cpu="1").overhead(cpu="250m", memory="100").obj(),
            (1250, 100),
            (1250, DMEM + 100),
            (1250, DMEM + 100),
            id="overhead",
        ),
    ],
)
def test_requests(pod: Pod, requests: tuple[int, int], non_zero: tuple[int, int], fit_score: tuple[int, int]) -> None:
    assert cpu_mem(pod) == (requests, non_zero, fit_score)


@pytest.mark.parametrize(
    "pod, requests",
    [
        pytest.param(
            make_pod()
            .container("c0", cpu="500m", memory="500M")
            .container_status("c0", actual={"cpu": "500m", "memory": "500M"})
            .obj(),
            (500, 500 * M),
            id="no pending resize",
        ),
        # upstream: pod-level spec 700m, pod-level status 500m, container status 700m -> 700m
        pytest.param(
            make_pod()
            .container("c0", cpu="500m", memory="500M")
            .pod_requests(cpu="700m", memory="500M")
            .pod_status_resources(actual={"cpu": "500m", "memory": "500M"})
            .container_status("c0", actual={"cpu": "700m", "memory": "500M"})
            .obj(),
            (700, 500 * M),
            id="pod-level resources, no pending resize",
        ),
        # deferred: spec asks 700m / 800M, 500m / 500M run: the larger counts
        pytest.param(
            make_pod()
            .container("c0", cpu="700m", memory="800M")
            .container_status("c0", actual={"cpu": "500m", "memory": "500M"})
            .resize_pending("Deferred")
            .obj(),
            (700, 800 * M),
            id="deferred resize counts the spec",
        ),
        # a resize down that has not happened yet: 500m asked, 900m still runs
        pytest.param(
            make_pod()
            .container("c0", cpu="500m", memory="500M")
            .container_status("c0", actual={"cpu": "900m", "memory": "500M"})
            .obj(),
            (900, 500 * M),
            id="shrinking pod counts what still runs",
        ),
        # allocated but not yet actuated: allocated counts
        pytest.param(
            make_pod()
            .container("c0", cpu="500m", memory="500M")
            .container_status("c0", allocated={"cpu": "800m", "memory": "500M"})
            .obj(),
            (800, 500 * M),
            id="allocated resources count",
        ),
        # infeasible: the spec is not what runs; only status counts
        pytest.param(
            make_pod()
            .container("c0", cpu="700m", memory="800M")
            .container_status("c0", actual={"cpu": "500m", "memory": "500M"})
            .resize_pending("Infeasible")
            .obj(),
            (500, 500 * M),
            id="infeasible resize ignores the spec",
        ),
        pytest.param(
            make_pod()
            .init_container(restartable=True, cpu="500m")
            .container("c0", cpu="500m")
            .container_status("init0", actual={"cpu": "900m"}, init=True)
            .obj(),
            (1400, 0),
            id="resized sidecar",
        ),
        # pod-level status maps, when both are set, stand for the containers' statuses
        pytest.param(
            make_pod()
            .container("c0", cpu="500m", memory="500M")
            .container_status("c0", actual={"cpu": "2", "memory": "500M"})
            .pod_status_resources(actual={"cpu": "600m", "memory": "500M"}, allocated={"cpu": "600m", "memory": "500M"})
            .obj(),
            (600, 500 * M),
            id="pod-level status replaces container statuses",
        ),
    ],
)
def test_requests_follow_in_place_resize(pod: Pod, requests: tuple[int, int]) -> None:
    assert (pod.requests.milli_cpu, pod.requests.memory) == requests


def test_fit_score_requests_ignore_status() -> None:
    p = (
        make_pod()
        .container("c0", cpu="700m", memory="800M")
        .container_status("c0", actual={"cpu": "900m", "memory": "1G"})
        .obj()
    )
    assert (p.requests.milli_cpu, p.container_non_zero_requests.milli_cpu) == (900, 700)


def test_node_info_sums_follow_resize() -> None:
    node = make_node("n").capacity(cpu="4", memory="8Gi", pods="10").obj()
    before = make_pod("p").uid("u").container("c0", cpu="500m").obj()
    after = make_pod("p").uid("u").container("c0", cpu="500m").container_status("c0", actual={"cpu": "1500m"}).obj()
    info = node_info(node, before)
    assert (info.requested.milli_cpu, info.non_zero_requested.milli_cpu) == (500, 500)
    info.add_pod(after.with_node("n"))  # same uid: replaces
    assert (info.requested.milli_cpu, info.non_zero_requested.milli_cpu) == (1500, 1500)


def test_host_ports_include_sidecars_first() -> None:
    p = make_pod().init_host_port(9000).init_host_port(9001, restartable=False).host_port(80).obj()
    # upstream GetHostPorts: restartable init containers, then containers; plain init containers never
    assert [hp.host_port for hp in p.host_ports] == [9000, 80]


@pytest.mark.parametrize(
    "status, field",
    [
        pytest.param(
            {"containerStatuses": [{"name": "c0", "allocatedResources": {"cpu": "lots"}}]},
            "status.containerStatuses[0].allocatedResources.cpu",
            id="bad allocated",
        ),
        pytest.param(
            {"resources": {"requests": {"memory": "x"}}}, "status.resources.requests.memory", id="bad pod-level status"
        ),
    ],
)
def test_bad_status_resources_name_the_field(status: dict[str, object], field: str) -> None:
    body = make_pod("p").container("c0").raw()
    body["status"].update(status)
    with pytest.raises(ObjectError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_pod(body)


def test_a_bound_pod_is_read_only_for_what_placed_pods_are_read_for() -> None:
    # the same body, pending and bound: placement-only fields are left at their defaults once bound
    b = (
        make_pod("p")
        .req(cpu="1")
        .lim(cpu="2")
        .label(app="a")
        .toleration("k", effect="NoSchedule")
        .node_selector(disk="ssd")
    )
    b.spread(1, "zone", selector={"matchLabels": {"app": "a"}}).host_port(80)
    pending, bound = b.obj(), b.node("n1").obj()
    assert (
        pending.tolerations
        and pending.node_selector
        and pending.topology_spread_constraints
        and pending.source is not None
    )
    assert pending.limits.milli_cpu == 2000 and pending.container_non_zero_requests.milli_cpu == 1000
    assert (bound.tolerations, bound.node_selector, bound.topology_spread_constraints, bound.source) == (
        (),
        {},
        (),
        None,
    )
    assert bound.limits == ZERO_RESOURCES and bound.container_non_zero_requests == ZERO_RESOURCES
    # what the cache and the plugins read of placed pods is all there
    for field in (
        "uid",
        "labels",
        "requests",
        "non_zero_requests",
        "host_ports",
        "affinity",
        "volumes",
        "priority",
        "containers",
    ):
        assert getattr(bound, field) == getattr(pending, field), field


def test_a_bound_pod_with_placement_fields_the_parser_refuses_still_counts_on_its_node() -> None:
    body = make_pod("p").req(cpu="1").node("n1").raw()
    body["spec"]["tolerations"] = ["not an object"]
    assert parse_pod(body).requests.milli_cpu == 1000
    body["spec"].pop("nodeName")
    with pytest.raises(ObjectError, match="tolerations"):
        parse_pod(body)


def test_a_list_read_again_is_the_same_vector_and_a_bad_one_is_refused_every_time() -> None:
    """Resources.from_mapping keeps the vectors of quantity-string lists (nodes repeat a few shapes)."""
    shape = {"cpu": "4", "memory": "32Gi", "pods": "110", "example.com/gpu": "2"}
    first = Resources.from_mapping(shape)
    again = Resources.from_mapping(dict(shape))
    assert again == first == Resources(4000, 32 * 2**30, 0, {"example.com/gpu": 2})
    for where in ("node a: status.capacity", "node b: status.capacity"):
        with pytest.raises(QuantityError, match=f"^{where}.cpu: "):
            Resources.from_mapping({"cpu": "four"}, where=where)
    assert Resources.from_mapping({"example.com/gpu": "1"}).get("example.com/gpu") == 1
    assert Resources.from_mapping({"example.com/gpu": 1}).get("example.com/gpu") == 1
    with pytest.raises(QuantityError):  # True == 1 in a key: only lists of strings are looked up
        Resources.from_mapping({"example.com/gpu": True})
