"""ImageLocality: prefer nodes that already hold the pod's container images, weighted by spread.

Follows today's upstream ``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``
(v1.9 ``ImageLocalityPriority`` had neither the spread factor nor init containers):

- Image names of the pod are normalised as upstream ``normalizedImageName``: ``:latest`` is
  appended when the name has no tag (no ``:`` after the last ``/``). Node image names
  (``status.images[].names``) are used as reported.
- For each init and regular container, and each image volume, whose image the node has, add
  ``int(size * nodes_having_image / total_nodes)`` (float64, truncated), where the count is over
  every node of the snapshot. A container listed twice counts twice.
- Score = ``100 * (clamp(sum, 23Mi, 1000Mi * images) - 23Mi) // (1000Mi * images - 23Mi)``, where
  ``images`` counts the containers and image volumes.
  No normalisation.

Size: upstream keeps the size first recorded for a name cluster-wide; we use the size the node
itself reports (the same unless nodes disagree about one image name).

Upstream has no PreScore; ours returns SKIP when no node has any of the pod's images (every node
scores 0, a constant). ``score_nodes`` uses a cached index image name -> (node positions, sizes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..framework import basics
from ..framework.arguments import NoArgs
from ..framework.basics import MAX_NODE_SCORE, CycleState, StateKey, Status
from ..framework.interface import PreScorePlugin, SignFragment, SignPlugin, VectorScore
from ..framework.nodeinfo import NodeInfo
from ..model.objects import Node, Pod
from ..toolkit import batching

if TYPE_CHECKING:
    from ..framework.snapshot import NodeTable, Snapshot

MB: Final = 1024 * 1024
MIN_THRESHOLD: Final = 23 * MB
MAX_CONTAINER_THRESHOLD: Final = 1000 * MB
#: ``Volume.kind`` of an image volume (its ``ident`` is the image reference)
IMAGE_VOLUME: Final = "image"

IntArray = npt.NDArray[np.int64]
_COLUMN: Final = ("ImageLocality", "images")


def normalized_image_name(name: str) -> str:
    """Upstream ``normalizedImageName``: add ``:latest`` when the reference carries no tag."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: Pod) -> tuple[str, ...]:
    """Normalised images of the init containers, the regular containers, then the image volumes
    (ImageVolume, GA in v1.36): one entry per container or volume, as upstream ``sumImageScores``."""
    containers = tuple(normalized_image_name(c.image) for c in pod.init_containers + pod.containers)
    return containers + tuple(normalized_image_name(v.ident) for v in pod.volumes if v.kind == IMAGE_VOLUME)


def node_image_sizes(node: Node) -> dict[str, int]:
    """Image name -> size on one node (the first entry naming it wins)."""
    out: dict[str, int] = {}
    for img in node.images:
        for n in img.names:
            out.setdefault(n, img.size_bytes)
    return out


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """Upstream ``scaledImageScore``: size times the fraction of nodes having the image (float64)."""
    return int(float(size) * (float(num_nodes) / float(total_nodes)))


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """Upstream ``calculatePriority``."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if max_threshold <= MIN_THRESHOLD:
        return 0
    s = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (s - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def image_index(table: NodeTable) -> dict[str, tuple[npt.NDArray[np.intp], IntArray]]:
    """Image name -> (positions of the nodes having it, its size on each of them)."""

    def build(infos: list[NodeInfo]) -> dict[str, tuple[npt.NDArray[np.intp], IntArray]]:
        acc: dict[str, tuple[list[int], list[int]]] = {}
        for k, info in enumerate(infos):
            if info.node is None:
                continue
            for name, size in node_image_sizes(info.node).items():
                ks, sizes = acc.setdefault(name, ([], []))
                ks.append(k)
                sizes.append(size)
        return {n: (np.asarray(ks, dtype=np.intp), np.asarray(sz, dtype=np.int64)) for n, (ks, sz) in acc.items()}

    return table.derived(_COLUMN, build)  # type: ignore[return-value]


def score_node(pod: Pod, node: Node, num_nodes: Mapping[str, int], total_nodes: int) -> int:
    """One node's score; ``num_nodes`` counts, per image name, the snapshot's nodes having it."""
    images = pod_images(pod)
    sizes = node_image_sizes(node)
    total = 0
    for image in images:
        size = sizes.get(image)
        if size is not None:
            total += scaled_image_score(size, num_nodes.get(image, 1), total_nodes)
    return calculate_priority(total, len(images))


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    """How many nodes of ``table`` hold each of the pod's images (only those some node holds)."""

    table: NodeTable
    counts: Mapping[str, int]
    total: int


class ImageLocality(PreScorePlugin, VectorScore, SignPlugin):
    NAME = "ImageLocality"

    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> tuple[SignFragment, ...] | Status:
        """OpportunisticBatching: the images of the pod's containers and init containers."""
        images = sorted({normalized_image_name(c.image) for c in (*pod.containers, *pod.init_containers)})
        return batching.fragment(batching.IMAGE_NAMES_SIGNER, tuple(images))

    def __init__(self, args: NoArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self._key = StateKey[_PreScoreState](f"PreScore{self.name}")

    def _state(self, state: CycleState, pod: Pod, table: NodeTable) -> _PreScoreState:
        cached = state.read(self._key)
        if cached is not None and cached.table is table:
            return cached
        index = image_index(table)
        counts = {img: len(index[img][0]) for img in set(pod_images(pod)) if img in index}
        return _PreScoreState(table, counts, len(table))

    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        computed = self._state(state, pod, snapshot.table)
        if not computed.counts:
            return basics.SKIP  # no node has any of the images: 0 everywhere
        state.write(self._key, computed)
        return basics.SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        if node.node is None:
            return 0
        cached = state.read(self._key)
        if cached is None:  # called without PreScore (no snapshot at hand): the spread factor is taken as 1
            return score_node(pod, node.node, {}, 1)
        return score_node(pod, node.node, cached.counts, cached.total)

    def score_nodes(self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]) -> IntArray:
        computed = self._state(state, pod, table)
        images = pod_images(pod)
        if not computed.counts:
            return np.full(len(index), calculate_priority(0, len(images)), dtype=np.int64)
        by_image = image_index(table)
        sums = np.zeros(len(table), dtype=np.int64)
        for image in images:
            entry = by_image.get(image)
            if entry is None:
                continue
            positions, sizes = entry
            spread = float(len(positions)) / float(computed.total)
            sums[positions] += (sizes.astype(np.float64) * spread).astype(np.int64)
        n = len(images)
        max_threshold = MAX_CONTAINER_THRESHOLD * n
        if max_threshold <= MIN_THRESHOLD:
            return np.zeros(len(index), dtype=np.int64)
        s = np.clip(sums[index], MIN_THRESHOLD, max_threshold)
        return MAX_NODE_SCORE * (s - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
