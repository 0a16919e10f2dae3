"""NodePorts: host-port conflicts (incl. the 0.0.0.0 wildcard), SKIP without host ports, vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import Code, CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.plugins.node_ports import ERR_REASON, NodePorts, conflicts, fits

# A port is (protocol, hostIP, port); "" hostIP means the 0.0.0.0 default.
Port = tuple[str, str, int]


def pod_with(*ports: Port, name: str = "p"):
    b = make_pod(name)
    for proto, ip, port in ports:
        b.host_port(port, protocol=proto, host_ip=ip)
    return b.obj()


@pytest.mark.parametrize(
    "want, existing, fit",
    [
        pytest.param([], [], True, id="no ports"),
        pytest.param([("UDP", "127.0.0.1", 8080)], [], True, id="nothing running"),
        pytest.param([("UDP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 8080)], False, id="same udp port"),
        pytest.param([("TCP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 8080)], True, id="other protocol"),
        pytest.param([("TCP", "127.0.0.1", 8000)], [("TCP", "127.0.0.1", 8080)], True, id="other port"),
        pytest.param(
            [("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8080)],
            [("UDP", "127.0.0.1", 8080)],
            False,
            id="one of two conflicts",
        ),
        pytest.param([("TCP", "127.0.0.2", 8001)], [("TCP", "127.0.0.1", 8001)], True, id="second ip, same port"),
        pytest.param(
            [("TCP", "", 8001)], [("TCP", "127.0.0.1", 8001)], False, id="wanted wildcard blocks a specific ip"
        ),
        pytest.param(
            [("TCP", "127.0.0.1", 8001)], [("TCP", "", 8001)], False, id="existing wildcard blocks a specific ip"
        ),
        pytest.param([("TCP", "0.0.0.0", 8001)], [("TCP", "0.0.0.0", 8001)], False, id="wildcard against wildcard"),
        pytest.param([("UDP", "", 8001)], [("TCP", "127.0.0.1", 8001)], True, id="wildcard, other protocol"),
        pytest.param(
            [("TCP", "", 8001)],
            [("UDP", "", 8001), ("TCP", "127.0.0.2", 9000)],
            True,
            id="wildcard, no same proto+port",
        ),
    ],
)
def test_filter(want, existing, fit):
    pod = pod_with(*want)
    info = node_info(make_node("n1").obj(), pod_with(*existing, name="old"))
    plugin = NodePorts()
    state = CycleState()
    snap = Snapshot.of([info])
    pre = plugin.pre_filter(state, pod, snap)
    assert pre.is_skip is (not want)
    status = plugin.filter(state, pod, info)
    if fit:
        assert status.is_success
    else:
        assert status.code is Code.UNSCHEDULABLE  # preemption may free the port
        assert status.reasons == (ERR_REASON,) == ("node(s) didn't have free ports for the requested pod ports",)
    assert fits(pod, info) == status


def test_ports_freed_when_the_pod_leaves():
    old = pod_with(("TCP", "", 80), name="old")
    info = node_info(make_node("n1").obj(), old)
    pod = pod_with(("TCP", "10.0.0.1", 80))
    assert not fits(pod, info).is_success
    info.remove_pod(old.with_node("n1"))
    assert fits(pod, info).is_success


def test_sidecar_ports_count():
    # upstream util.GetHostPorts: restartable init containers keep their host ports for the pod's life
    running = make_pod("old").init_host_port(9000).obj()
    info = node_info(make_node("n1").obj(), running)
    assert fits(pod_with(("TCP", "", 9000)), info).reasons == (ERR_REASON,)
    wanting = make_pod("new").init_host_port(9000).obj()
    state = CycleState()
    assert NodePorts().pre_filter(state, wanting, Snapshot.of([info])).is_success
    assert NodePorts().filter(state, wanting, info).reasons == (ERR_REASON,)


def test_plain_init_container_ports_do_not_count():
    plain = make_pod("new").init_host_port(9000, restartable=False).obj()
    assert NodePorts().pre_filter(CycleState(), plain, Snapshot.of([])).is_skip


def test_conflicts_helper():
    used = {("TCP", "10.0.0.1", 80): 1}
    assert conflicts(("TCP", "0.0.0.0", 80), used)
    assert not conflicts(("TCP", "10.0.0.2", 80), used)


def test_args_and_name():
    assert NodePorts().name == NodePorts.NAME == "NodePorts"
    assert NodePorts(name="PodFitsPorts").name == "PodFitsPorts"
    with pytest.raises(PluginArgsError, match="ports: unknown field: this plugin takes no arguments"):
        NodePorts.new({"ports": []})


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_filter(seed):
    rng = random.Random(seed)
    ips = ["", "10.0.0.1", "10.0.0.2"]

    def rand_port():
        return (rng.choice(["TCP", "UDP"]), rng.choice(ips), rng.choice([80, 443, 8080]))

    infos = []
    for i in range(30):
        olds = [
            pod_with(*[rand_port() for _ in range(rng.randint(0, 2))], name=f"o{i}{j}")
            for j in range(rng.randint(0, 2))
        ]
        infos.append(node_info(make_node(f"n{i}").obj(), *olds))
    snap = Snapshot.of(infos)
    plugin = NodePorts()
    pod = pod_with(*[rand_port() for _ in range(rng.randint(1, 2))])
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    index = np.array(rng.sample(range(30), 20), dtype=np.intp)
    got = plugin.filter_nodes(state, pod, snap.table, index)
    assert got.tolist() == [plugin.filter(state, pod, snap.node_infos[k]).is_success for k in index.tolist()]
