"""SchedulerCache: what the scheduler believes is on each node, including its own assumptions.

Upstream ``pkg/scheduler/backend/cache/cache.go``. Pods of *every* scheduler
that are bound to a node count toward that node's usage (the v1.9 bug of
counting only our own pods, issue #63002, is not reproduced).

The life of a pod in the cache is an explicit state machine::

                 assume            finish_binding        add_pod (watch confirms)
    (absent) ──────────► ASSUMED ───────────────► BOUND ───────────────────────► ADDED
        │                  │  ▲                     │  expire(now) after the TTL
        │ add_pod          │  └─ forget ◄───────────┘  ─► (absent)
        ▼                  ▼
      ADDED ◄── update_pod ──  remove_pod ─► (absent)

An illegal transition raises ``CacheError`` and changes nothing. Time is an
argument (``now`` in seconds, any monotonic origin); the cache never reads a clock.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..framework.nodeinfo import NodeInfo, next_generation
from ..framework.snapshot import ClusterObjects, Snapshot
from ..model.objects import Node, Pod, zone_key

#: How long an assumed pod whose binding finished waits for the watch to confirm it.
ASSUMED_POD_TTL_SECONDS: Final = 30.0


class CacheError(Exception):
    """An illegal cache transition (a bug in the caller, or an out-of-order event); nothing changed."""


class PodState(enum.Enum):
    ASSUMED = "assumed"  # placed by us, bind in flight
    BOUND = "bound"  # bind succeeded, waiting for the watch to confirm
    ADDED = "added"  # seen bound in the watch


@dataclass(slots=True)
class _Entry:
    pod: Pod
    state: PodState
    deadline: float | None = None  # for BOUND: when it expires unless confirmed


class SchedulerCache:
    def __init__(self, *, ttl: float = ASSUMED_POD_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _Entry] = {}  # uid -> entry
        #: the entries still ASSUMED or BOUND (upstream's assumedPods set): expiry and counts visit only these
        self._assumed: dict[str, _Entry] = {}
        self.objects = ClusterObjects()
        #: bumped when the set of nodes (not their contents) changes
        self._node_set_version = 0
        #: node names, least recently changed first (upstream keeps a generation-ordered list
        #: for the same reason: a snapshot update visits only what changed since the last one)
        self._recent: OrderedDict[str, None] = OrderedDict()

    # ------------------------------------------------------------------ nodes

    def add_node(self, node: Node) -> None:
        info = self._nodes.get(node.name)
        if info is None:
            self._nodes[node.name] = NodeInfo(node)
            self._node_set_version += 1
        else:
            was_placeholder, old_zone = info.node is None, _zone_of(info.node)
            info.set_node(node)
            if was_placeholder or old_zone != _zone_of(node):
                self._node_set_version += 1
        self._touch(node.name)

    def update_node(self, node: Node) -> None:
        old = self._nodes.get(node.name)
        zone_moved = old is not None and old.node is not None and _zone_of(old.node) != _zone_of(node)
        self.add_node(node)
        if zone_moved:
            self._node_set_version += 1

    def remove_node(self, name: str) -> None:
        """Forget the node. Pods still on it keep a placeholder until they are removed."""
        info = self._nodes.get(name)
        if info is None:
            return
        if info.pods:
            info.node = None
            info.generation = next_generation()
            self._touch(name)
        else:
            del self._nodes[name]
            self._recent.pop(name, None)
        self._node_set_version += 1

    def node_names(self) -> list[str]:
        return [n for n, i in self._nodes.items() if i.node is not None]

    def node_count(self) -> int:
        return sum(1 for i in self._nodes.values() if i.node is not None)

    def get_node_info(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # ------------------------------------------------------------------ pods

    def state_of(self, pod: Pod) -> PodState | None:
        e = self._pods.get(pod.uid)
        return e.state if e is not None else None

    def is_assumed(self, pod: Pod) -> bool:
        e = self._pods.get(pod.uid)
        return e is not None and e.state in (PodState.ASSUMED, PodState.BOUND)

    def get_pod(self, uid: str) -> Pod | None:
        e = self._pods.get(uid)
        return e.pod if e is not None else None

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        return len(self._assumed)

    def assume(self, pod: Pod, node_name: str) -> Pod:
        """Place ``pod`` on ``node_name`` before the bind; returns the pod as stored (with nodeName)."""
        if not node_name:
            raise CacheError(f"assume: no node given for pod {pod.key}")
        if pod.uid in self._pods:
            raise CacheError(
                f"pod {pod.key} is already in the cache ({self._pods[pod.uid].state.value}); cannot assume it"
            )
        placed = pod if pod.node_name == node_name else pod.with_node(node_name)
        self._node_info_for(node_name).add_pod(placed)
        self._pods[pod.uid] = self._assumed[pod.uid] = _Entry(placed, PodState.ASSUMED)
        return placed

    def finish_binding(self, pod: Pod, now: float) -> None:
        """The bind call succeeded: start the TTL after which an unconfirmed assumption is dropped."""
        e = self._pods.get(pod.uid)
        if e is None or e.state is not PodState.ASSUMED:
            raise CacheError(
                f"finish_binding: pod {pod.key} is {e.state.value if e else 'not in the cache'}, not assumed"
            )
        e.state = PodState.BOUND
        e.deadline = now + self.ttl

    def forget(self, pod: Pod) -> None:
        """Undo an assumption (the bind failed). Only assumed pods can be forgotten."""
        e = self._pods.get(pod.uid)
        if e is None or e.state is PodState.ADDED:
            raise CacheError(f"forget: pod {pod.key} is {e.state.value if e else 'not in the cache'}, not assumed")
        if pod.node_name and pod.node_name != e.pod.node_name:
            raise CacheError(f"forget: pod {pod.key} was assumed on {e.pod.node_name}, not {pod.node_name}")
        self._remove_from_node(e.pod)
        del self._pods[pod.uid], self._assumed[pod.uid]

    def add_pod(self, pod: Pod) -> None:
        """The watch shows a bound pod. Confirms an assumption (moving it if the node differs)."""
        if not pod.node_name:
            raise CacheError(f"add_pod: pod {pod.key} is not bound to a node")
        e = self._pods.get(pod.uid)
        if e is not None and e.state is PodState.ADDED:
            raise CacheError(f"add_pod: pod {pod.key} was already added")
        if e is not None:
            self._remove_from_node(e.pod)
        self._node_info_for(pod.node_name).add_pod(pod)
        self._pods[pod.uid] = _Entry(pod, PodState.ADDED)
        self._assumed.pop(pod.uid, None)

    def update_pod(self, old: Pod | None, new: Pod) -> None:
        """A bound pod changed (labels, resources, or it was confirmed on another node)."""
        e = self._pods.get(new.uid)
        if e is None:
            raise CacheError(f"update_pod: pod {new.key} is not in the cache")
        if not new.node_name:
            raise CacheError(f"update_pod: pod {new.key} is not bound to a node")
        if e.state is not PodState.ADDED:
            # An update for an assumed pod confirms it like an add does.
            self.add_pod(new)
            return
        self._remove_from_node(e.pod)
        self._node_info_for(new.node_name).add_pod(new)
        e.pod = new

    def remove_pod(self, pod: Pod) -> None:
        e = self._pods.pop(pod.uid, None)
        if e is None:
            raise CacheError(f"remove_pod: pod {pod.key} is not in the cache")
        self._assumed.pop(pod.uid, None)
        self._remove_from_node(e.pod)

    def expire(self, now: float) -> list[Pod]:
        """Drop bound-but-unconfirmed assumptions whose TTL ran out; returns them."""
        gone = [
            e.pod
            for e in self._assumed.values()
            if e.state is PodState.BOUND and e.deadline is not None and e.deadline <= now
        ]
        for pod in gone:
            self._remove_from_node(pod)
            del self._pods[pod.uid], self._assumed[pod.uid]
        return gone

    def pods(self) -> Iterable[Pod]:
        return (e.pod for e in self._pods.values())

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> Snapshot:
        """A fresh snapshot (the simulator and tests); the loop reuses one with ``update_snapshot``."""
        snap = Snapshot(self.objects)
        self.update_snapshot(snap)
        return snap

    def update_snapshot(self, snap: Snapshot, *, private_objects: bool = False) -> None:
        """Bring ``snap`` up to date, re-cloning only NodeInfos whose generation moved.

        When the set of nodes changed (a node added or removed, a zone relabelled), the node-tree
        order is made again and the snapshot keeps its clones of unchanged nodes (same generation:
        same content), so only the changed nodes are cloned then too.

        The snapshot shares the cache's ``ClusterObjects``, or with ``private_objects`` holds a copy
        of them (re-made only when they changed), for a cycle that runs while the cache changes.
        """
        if not private_objects:
            snap.objects = self.objects
        elif snap.objects is self.objects or snap.objects.generation != self.objects.generation:
            snap.objects = self.objects.copy()
        if snap.node_set_version != self._node_set_version or len(snap) == 0 and self._nodes:
            held = snap.by_name
            infos = []
            for name in self._tree_order():
                current, kept = self._nodes[name], held.get(name)
                infos.append(kept if kept is not None and kept.generation == current.generation else current.clone())
            snap.replace_all(infos)
            snap.node_set_version = self._node_set_version
            return
        since = snap.generation
        top = since
        position = snap.table.position
        for name in reversed(self._recent):
            info = self._nodes.get(name)
            if info is None:
                continue
            if info.generation <= since:
                break  # everything older was already in the snapshot
            top = max(top, info.generation)
            k = position.get(name)
            if k is not None:
                old = snap.node_infos[k]
                snap.replace_one(k, info.clone(), node_changed=info.node is not old.node)
        snap.generation = top

    def _tree_order(self) -> list[str]:
        """Node names with zones interleaved (upstream ``nodeTree.list``): zone A's first, zone B's first, ..."""
        zones: dict[str, list[str]] = {}
        for name, info in self._nodes.items():
            if info.node is not None:
                zones.setdefault(_zone_of(info.node), []).append(name)
        order: list[str] = []
        lists = list(zones.values())
        depth = max((len(x) for x in lists), default=0)
        for i in range(depth):
            for names in lists:
                if i < len(names):
                    order.append(names[i])
        return order

    # ------------------------------------------------------------------ helpers

    def _node_info_for(self, name: str) -> NodeInfo:
        """The NodeInfo a pod is about to be added to; marked as changed."""
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo(None)
        self._touch(name)
        return info

    def _touch(self, name: str) -> None:
        self._recent[name] = None
        self._recent.move_to_end(name)

    def _remove_from_node(self, pod: Pod) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            return
        info.remove_pod(pod)
        if info.node is None and not info.pods:
            del self._nodes[pod.node_name]
            self._recent.pop(pod.node_name, None)
        else:
            self._touch(pod.node_name)


def _zone_of(node: Node | None) -> str:
    return zone_key(node.labels) if node is not None else ""
