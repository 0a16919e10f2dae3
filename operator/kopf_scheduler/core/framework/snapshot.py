"""The per-cycle view of the cluster: NodeInfo clones in node-tree order, plus node arrays.

Upstream ``pkg/scheduler/backend/cache/snapshot.go``. The scheduling loop owns
one ``Snapshot`` and asks the cache to bring it up to date before each cycle
(``SchedulerCache.update_snapshot``); only NodeInfos whose generation moved are
re-cloned, and only their rows of the ``NodeTable`` are rewritten (when the set of
nodes changed, the kept rows are copied over column by column). Between two
updates nothing mutates it, so plugins may read it freely during a cycle.

``NodeTable`` keeps, per node position, the numbers vectorised plugins need
(allocatable, requested, non-zero requested, pod counts) as numpy arrays, and
builds derived columns (one label key's values, distinct taint sets, a scalar
resource) on first use, dropping them when the nodes they came from change.

``ClusterObjects`` holds the non-node objects some plugins consult (services,
controllers, volumes, namespaces); the cache keeps it and the snapshot shares it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..dra.tracker import DraTracker
from ..model.objects import (
    Controller,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Service,
    StorageClass,
    Taint,
)
from ..model.resources import saturated
from .nodeinfo import NodeInfo
from .usage import UsageSnapshot

IntArray = npt.NDArray[np.int64]


@dataclass(slots=True)
class ClusterObjects:
    """What plugins consult beside nodes and pods, keyed as the API names them."""

    services: dict[str, Service] = field(default_factory=dict)  # ns/name
    controllers: dict[str, Controller] = field(default_factory=dict)  # kind/ns/name
    persistent_volumes: dict[str, PersistentVolume] = field(default_factory=dict)  # name
    persistent_volume_claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)  # ns/name
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)  # name
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)  # node name
    csi_drivers: dict[str, CSIDriver] = field(default_factory=dict)  # name
    csi_storage_capacities: dict[str, CSIStorageCapacity] = field(default_factory=dict)  # ns/name
    pod_disruption_budgets: dict[str, PodDisruptionBudget] = field(default_factory=dict)  # ns/name
    namespace_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)  # ns
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)  # api group/ns/name (PodGroup.key), both APIs
    #: PodGroup.key -> uids of the live pods naming that group, bound or not (``core/toolkit/gangs.py`` keeps it)
    gang_members: dict[str, frozenset[str]] = field(default_factory=dict)
    #: metrics source key -> measured node utilisation (``core/framework/usage.py``; the edge's pollers publish it)
    node_usage: dict[str, UsageSnapshot] = field(default_factory=dict)
    #: the DRA objects and allocations in flight (DynamicResources): one store shared by every
    #: snapshot and copy (``copy`` keeps the reference), as upstream's DRA manager is shared
    dra: DraTracker = field(default_factory=DraTracker)
    #: bumped on every change, so per-pod caches keyed on it stay valid until something changes
    generation: int = 0

    def copy(self) -> ClusterObjects:
        """A copy that later changes to these dictionaries do not touch (their values are immutable)."""
        out = dataclasses.replace(self)
        for f in dataclasses.fields(self):
            if isinstance(store := getattr(self, f.name), dict):
                setattr(out, f.name, dict(store))
        return out

    def services_of(self, pod: Pod) -> list[Service]:
        """Services in the pod's namespace whose (non-empty) selector matches the pod."""
        out = []
        for svc in self.services.values():
            if (
                svc.namespace == pod.namespace
                and svc.selector
                and all(pod.labels.get(k) == v for k, v in svc.selector.items())
            ):
                out.append(svc)
        return out

    def owning_controller(self, pod: Pod) -> Controller | None:
        """The controller (ReplicationController, ReplicaSet, StatefulSet) the pod's controller reference names.

        Looked up by kind and name in the pod's namespace, as upstream ``helper.DefaultSelector`` does
        (the API version of the reference is not compared).
        """
        ref = pod.controller_ref
        if ref is None:
            return None
        return self.controllers.get(f"{ref.kind}/{pod.namespace}/{ref.name}")

    def controllers_of(
        self, pod: Pod, kinds: Iterable[str] = ("ReplicationController", "ReplicaSet", "StatefulSet")
    ) -> list[Controller]:
        """Controllers of the given kinds in the pod's namespace whose selector matches the pod."""
        wanted = set(kinds)
        return [
            c
            for c in self.controllers.values()
            if c.kind in wanted
            and c.namespace == pod.namespace
            and c.selector is not None
            and not c.selector.is_empty
            and c.selector.matches(pod.labels)
        ]


class NodeTable:
    """Node arrays in snapshot order; rows are rewritten in place when a node changes."""

    __slots__ = (
        "names",
        "position",
        "alloc_cpu",
        "alloc_mem",
        "alloc_eph",
        "alloc_pods",
        "req_cpu",
        "req_mem",
        "req_eph",
        "pod_count",
        "nz_cpu",
        "nz_mem",
        "has_node",
        "generation",
        "_infos",
        "_derived",
    )

    #: the columns a row holds (``_write_row`` writes them; a rebuild copies them for kept rows)
    _COLUMNS = (
        "alloc_cpu", "alloc_mem", "alloc_eph", "alloc_pods", "req_cpu", "req_mem", "req_eph",
        "pod_count", "nz_cpu", "nz_mem", "has_node", "generation",
    )  # fmt: skip

    def __init__(self, infos: list[NodeInfo], *, previous: NodeTable | None = None) -> None:
        """The table of `infos`; rows of NodeInfos `previous` already holds (the same objects) are
        copied from it column by column instead of being written one by one."""
        n = len(infos)
        self._infos = infos
        #: never changed in place (a new node set builds a new table): explanations keep a reference
        self.names = [i.name for i in infos]
        self.position = {name: k for k, name in enumerate(self.names)}

        def z() -> IntArray:
            return np.zeros(n, dtype=np.int64)

        self.alloc_cpu, self.alloc_mem, self.alloc_eph, self.alloc_pods = z(), z(), z(), z()
        self.req_cpu, self.req_mem, self.req_eph, self.pod_count = z(), z(), z(), z()
        self.nz_cpu, self.nz_mem = z(), z()
        self.has_node = np.zeros(n, dtype=np.bool_)
        #: each row's NodeInfo generation: per-node caches compare it to know which rows changed
        self.generation = z()
        self._derived: dict[object, object] = {}
        fresh: list[int] = list(range(n))
        if previous is not None and len(previous):
            old_infos, old_position = previous._infos, previous.position
            source = np.fromiter(
                ((j if (j := old_position.get(i.name, -1)) >= 0 and old_infos[j] is i else -1) for i in infos),
                dtype=np.intp,
                count=n,
            )
            kept = np.flatnonzero(source >= 0)
            for column in self._COLUMNS:
                getattr(self, column)[kept] = getattr(previous, column)[source[kept]]
            fresh = np.flatnonzero(source < 0).tolist()
        for k in fresh:
            self._write_row(k, infos[k])

    def __len__(self) -> int:
        return len(self.names)

    def _write_row(self, k: int, info: NodeInfo) -> None:
        node = info.node
        if node is not None:
            a = node.allocatable
            self.alloc_cpu[k], self.alloc_mem[k], self.alloc_eph[k] = a.milli_cpu, a.memory, a.ephemeral_storage
            self.alloc_pods[k] = node.allowed_pod_number
            self.has_node[k] = True
        self.generation[k] = info.generation
        r = info.requested  # sums of pods, each within MAX_AMOUNT: saturated so they fit the int64 columns
        self.req_cpu[k], self.req_mem[k], self.req_eph[k] = (
            saturated(r.milli_cpu),
            saturated(r.memory),
            saturated(r.ephemeral_storage),
        )
        self.pod_count[k] = len(info.pods)
        nz = info.non_zero_requested
        self.nz_cpu[k], self.nz_mem[k] = saturated(nz.milli_cpu), saturated(nz.memory)

    def update_row(self, k: int, info: NodeInfo, *, node_changed: bool) -> None:
        """Rewrite one node's row after its NodeInfo changed; drop derived columns it feeds."""
        self._infos[k] = info
        self._write_row(k, info)
        if node_changed:
            self._derived.clear()
        else:
            # Pod changes only affect the per-pod derived columns (scalar requests).
            for key in [key for key in self._derived if isinstance(key, tuple) and key[0] == "scalar_req"]:
                del self._derived[key]

    def info(self, k: int) -> NodeInfo:
        return self._infos[k]

    # ---- derived columns, built on first use

    def derived(self, key: object, build: Callable[[list[NodeInfo]], object]) -> object:
        """A cached column computed from the NodeInfos; plugins name their own keys."""
        try:
            return self._derived[key]
        except KeyError:
            value = self._derived[key] = build(self._infos)
            return value

    def label_column(self, key: str) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
        """Per node, the id of its value for label ``key`` (-1 when absent), and the value -> id vocabulary."""

        def build(infos: list[NodeInfo]) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
            vocab: dict[str, int] = {}
            ids = np.full(len(infos), -1, dtype=np.int32)
            for k, info in enumerate(infos):
                if info.node is not None:
                    v = info.node.labels.get(key)
                    if v is not None:
                        ids[k] = vocab.setdefault(v, len(vocab))
            return ids, vocab

        return self.derived(("label", key), build)  # type: ignore[return-value]

    def taint_sets(self) -> tuple[npt.NDArray[np.int32], list[tuple[Taint, ...]]]:
        """Per node, the id of its distinct taint tuple, and the tuples themselves (id 0 is no taints)."""

        def build(infos: list[NodeInfo]) -> tuple[npt.NDArray[np.int32], list[tuple[Taint, ...]]]:
            sets: list[tuple[Taint, ...]] = [()]
            ids_of: dict[tuple[Taint, ...], int] = {(): 0}
            ids = np.zeros(len(infos), dtype=np.int32)
            for k, info in enumerate(infos):
                taints = info.node.taints if info.node is not None else ()
                if taints:
                    if taints not in ids_of:
                        ids_of[taints] = len(sets)
                        sets.append(taints)
                    ids[k] = ids_of[taints]
            return ids, sets

        return self.derived("taints", build)  # type: ignore[return-value]

    def scalar_allocatable(self, name: str) -> IntArray:
        def build(infos: list[NodeInfo]) -> IntArray:
            return np.array([i.allocatable.scalar.get(name, 0) for i in infos], dtype=np.int64)

        return self.derived(("scalar_alloc", name), build)  # type: ignore[return-value]

    def scalar_requested(self, name: str) -> IntArray:
        def build(infos: list[NodeInfo]) -> IntArray:
            return np.array([saturated(i.requested.scalar.get(name, 0)) for i in infos], dtype=np.int64)

        return self.derived(("scalar_req", name), build)  # type: ignore[return-value]


class Snapshot:
    """NodeInfo clones in node-tree order (zones interleaved), a NodeTable, and the cluster objects."""

    __slots__ = (
        "node_infos", "by_name", "table", "objects", "generation", "node_set_version",
        "_with_affinity", "_with_anti_affinity", "_pvc_uses",
    )  # fmt: skip

    def __init__(self, objects: ClusterObjects | None = None) -> None:
        self.node_infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.table = NodeTable([])
        self.objects = objects if objects is not None else ClusterObjects()
        #: the highest NodeInfo generation this snapshot has seen
        self.generation = 0
        #: the cache's node-set version this snapshot was last rebuilt at (-1: never)
        self.node_set_version = -1
        #: names of the nodes holding pods with any pod (anti-)affinity term / required anti-affinity
        self._with_affinity: set[str] = set()
        self._with_anti_affinity: set[str] = set()
        #: "ns/claim" -> pods on any node using it (upstream keeps a set of used claims for the same reason)
        self._pvc_uses: dict[str, int] = {}

    @classmethod
    def of(cls, infos: Iterable[NodeInfo], objects: ClusterObjects | None = None) -> "Snapshot":
        """A snapshot straight from NodeInfos (tests, preemption what-ifs); order as given."""
        snap = cls(objects)
        snap.replace_all([i for i in infos if i.node is not None])
        return snap

    def replace_all(self, infos: list[NodeInfo]) -> None:
        """Hold `infos` (the node set changed); rows of NodeInfos held before are copied, not rewritten."""
        self.node_infos = infos
        self.by_name = {i.name: i for i in infos}
        self.table = NodeTable(list(infos), previous=self.table)
        self.generation = max(int(self.table.generation.max()) if infos else 0, self.generation)
        self._with_affinity = {i.name for i in infos if i.pods_with_affinity}
        self._with_anti_affinity = {i.name for i in infos if i.pods_with_required_anti_affinity}
        self._pvc_uses = {}
        for info in infos:
            if info.pvc_ref_counts:
                _count(self._pvc_uses, info.pvc_ref_counts, 1)

    def replace_one(self, k: int, info: NodeInfo, *, node_changed: bool) -> None:
        old = self.node_infos[k]
        self.node_infos[k] = info
        self.by_name[info.name] = info
        self.table.update_row(k, info, node_changed=node_changed)
        _mark(self._with_affinity, info.name, bool(info.pods_with_affinity))
        _mark(self._with_anti_affinity, info.name, bool(info.pods_with_required_anti_affinity))
        if old.pvc_ref_counts or info.pvc_ref_counts:
            _count(self._pvc_uses, old.pvc_ref_counts, -1)
            _count(self._pvc_uses, info.pvc_ref_counts, 1)

    def pvc_uses(self, claim: str) -> int:
        """Pods on any node of the snapshot using the PVC ``ns/claim`` (O(1))."""
        return self._pvc_uses.get(claim, 0)

    def __len__(self) -> int:
        return len(self.node_infos)

    def get(self, node_name: str) -> NodeInfo | None:
        return self.by_name.get(node_name)

    def nodes(self) -> list[Node]:
        return [i.node for i in self.node_infos if i.node is not None]

    @property
    def any_pods_with_affinity(self) -> bool:
        """Some node holds a pod with a pod (anti-)affinity term (kept per change: O(1))."""
        return bool(self._with_affinity)

    @property
    def any_pods_with_required_anti_affinity(self) -> bool:
        return bool(self._with_anti_affinity)

    @property
    def have_pods_with_affinity(self) -> list[NodeInfo]:
        """NodeInfos holding at least one pod with a pod (anti-)affinity term, in snapshot order."""
        return self._in_order(self._with_affinity)

    @property
    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return self._in_order(self._with_anti_affinity)

    def _in_order(self, names: set[str]) -> list[NodeInfo]:
        position = self.table.position
        return [self.node_infos[k] for k in sorted(position[n] for n in names)]

    def all_pods(self) -> Iterable[Pod]:
        for info in self.node_infos:
            yield from info.pods.values()

    # ---- what-ifs (preemption): a private copy changed pod by pod, as upstream's snapshot mutations

    def copy(self) -> Snapshot:
        """A snapshot of clones of these NodeInfos (same order, same objects), to change with ``add_pod`` and
        ``remove_pod`` while this one stays as it is."""
        return Snapshot.of([info.clone() for info in self.node_infos], self.objects)

    def add_pod(self, pod: Pod) -> bool:
        """Count `pod` on its node (``pod.node_name``); False when the snapshot has no such node. The node's
        NodeInfo is replaced by a changed clone, so NodeInfos handed out before stay as they were."""
        return self._change(pod, add=True)

    def remove_pod(self, pod: Pod) -> bool:
        """Stop counting `pod` (by uid) on its node; False when it is not there."""
        return self._change(pod, add=False)

    def _change(self, pod: Pod, *, add: bool) -> bool:
        k = self.table.position.get(pod.node_name)
        if k is None:
            return False
        info = self.node_infos[k].clone()
        if add:
            info.add_pod(pod)
        elif not info.remove_pod(pod):
            return False
        self.replace_one(k, info, node_changed=False)
        self.generation = max(self.generation, info.generation)
        return True


def _mark(names: set[str], name: str, present: bool) -> None:
    if present:
        names.add(name)
    else:
        names.discard(name)


def _count(totals: dict[str, int], counts: Mapping[str, int], sign: int) -> None:
    for key, n in counts.items():
        left = totals.get(key, 0) + sign * n
        if left:
            totals[key] = left
        else:
            totals.pop(key, None)
