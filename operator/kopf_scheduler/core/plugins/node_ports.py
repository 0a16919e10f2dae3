"""NodePorts: the pod's host ports must be free on the node.

Follows today's upstream ``pkg/scheduler/framework/plugins/nodeports/node_ports.go`` and the
conflict rule of ``HostPortInfo.CheckConflict`` (v1.9: ``PodFitsHostPorts``, alias
``PodFitsPorts``). A wanted port is (protocol, host IP, port) with a hostPort > 0 from the sidecar
(restartable init) containers and the regular containers (``Pod.host_ports``, upstream
``util.GetHostPorts``); an empty protocol means TCP and an empty IP 0.0.0.0. It
conflicts with a port in use on the node when protocol and port are equal and either IP is
0.0.0.0 or both IPs are equal. Ports of the incoming pod are not checked against each other.
A conflict is Unschedulable (preemption can free the port).

PreFilter returns SKIP when the pod wants no host port, as upstream does. ``filter_nodes`` is a
loop over the nodes' port maps (these change with every bound pod, so there is no cached
column); it exists so that a pod with host ports still takes the vectorised path for the other
filters.

Requeueing (upstream ``EventsToRegister``): a bound pod deleted that held a conflicting port, or a
node added. Host ports cannot change on a pod, so no update helps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import NoArgs
from ..framework.basics import CycleState, StateKey, Status
from ..framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    PreFilterPlugin,
    QueueingHint,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from ..framework.nodeinfo import NodeInfo, PortKey
from ..model.objects import Pod
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

ERR_REASON: Final = "node(s) didn't have free ports for the requested pod ports"

DEFAULT_PROTOCOL: Final = "TCP"
WILDCARD_IP: Final = "0.0.0.0"


def wanted_ports(pod: Pod) -> tuple[PortKey, ...]:
    """The pod's host ports as (protocol, host IP, port), defaults applied, hostPort 0 dropped."""
    return tuple(
        (p.protocol or DEFAULT_PROTOCOL, p.host_ip or WILDCARD_IP, p.host_port)
        for p in pod.host_ports
        if p.host_port > 0
    )


def conflicts(want: PortKey, used: Mapping[PortKey, int]) -> bool:
    """Upstream ``HostPortInfo.CheckConflict`` for one wanted port against the ports in use."""
    protocol, ip, port = want
    if ip == WILDCARD_IP:
        return any(p == port and proto == protocol for proto, _, p in used)
    return (protocol, ip, port) in used or (protocol, WILDCARD_IP, port) in used


def fits_ports(wanted: Iterable[PortKey], node_info: NodeInfo) -> bool:
    used = node_info.used_ports
    if not used:
        return True
    return not any(conflicts(w, used) for w in wanted)


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    """The filter's verdict for one node, without cycle state."""
    return basics.SUCCESS if fits_ports(wanted_ports(pod), node_info) else basics.unschedulable(ERR_REASON)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    """The pod's host ports, defaults applied (never empty: PreFilter skips a pod without any)."""

    wanted: tuple[PortKey, ...]


class NodePorts(PreFilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    NAME = "NodePorts"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the pod's host ports (upstream ``HostPortsSigner``)."""
        ports = sorted({p.host_port for p in pod.host_ports if p.host_port})
        return batching.fragment(batching.HOST_PORTS_SIGNER, tuple(ports))

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[_PreFilterState](f"PreFilter{self.name}")

    def _wanted(self, state: CycleState, pod: Pod) -> tuple[PortKey, ...]:
        cached = state.read(self._key)
        return cached.wanted if cached is not None else wanted_ports(pod)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        wanted = wanted_ports(pod)
        if not wanted:
            return basics.SKIP
        state.write(self._key, _PreFilterState(wanted))
        return basics.SUCCESS

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return basics.SUCCESS if fits_ports(self._wanted(state, pod), node) else basics.unschedulable(ERR_REASON)

    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        wanted = self._wanted(state, pod)
        if not wanted:
            return np.ones(len(index), dtype=np.bool_)
        info = table.info
        return np.fromiter((fits_ports(wanted, info(k)) for k in index.tolist()), dtype=np.bool_, count=len(index))

    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """Upstream: a bound pod that held a port the pod wants deleted; a node added (no hint)."""
        return (
            ClusterEventWithHint(ClusterEvent.ASSIGNED_POD_DELETE, after_pod_deleted),
            ClusterEventWithHint(ClusterEvent.NODE_ADD),
        )


def after_pod_deleted(pod: Pod, old: object, new: object) -> QueueingHint:
    """Upstream ``isSchedulableAfterAssignedPodDeleted``: the deleted pod held (or was nominated with) a
    host port that conflicts with one the pod wants."""
    if not isinstance(old, Pod):
        return QueueingHint.QUEUE
    if not old.node_name and not old.nominated_node_name:
        return QueueingHint.QUEUE_SKIP
    freed = dict.fromkeys(wanted_ports(old), 1)
    if freed and any(conflicts(want, freed) for want in wanted_ports(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE_SKIP
