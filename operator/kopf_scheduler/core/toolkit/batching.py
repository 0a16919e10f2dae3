"""Opportunistic batching: upstream ``pkg/scheduler/framework/runtime/batch.go`` (OpportunisticBatching, beta
and on by default since v1.35).

A pod's *signature* (``sign_pod``) gathers what the profile's PreFilter, Filter, PreScore and Score plugins
read of it (each a ``framework.SignPlugin``: its requests, tolerations, node affinity, host ports, volumes,
images...); two pods with the same signature get the same verdicts and scores on the same nodes. A profile
signs no pod when one of those plugins is not a ``SignPlugin`` or when it has extenders, and a plugin may
refuse a pod (pod affinity, topology spread constraints, spread defaults, DRA claims), which then never
batches.

After a pod was scheduled with scores, the ranking of the other scored nodes (their raw scores per plugin
and totals) is kept (``store``). The next pod, when it comes in the very next scheduling cycle
(``queueing.SchedulingQueue.scheduling_cycle``; a pod-group cycle's members share one), has the same
signature, no nomination and the ranking is at most ``MAX_BATCH_AGE`` seconds old (``compatible``), gets
a *hint*: the best node left. Before, the node the previous pod went to is filtered for the new pod: when
it is still feasible (the pods do not go one per node) it is rescored, added back and every candidate
normalised again (upstream ``refreshHintCandidates``, done by the algorithm). The algorithm then filters
the hinted node alone (as a nominated node) and, when it passes, schedules the pod there without looking
at any other node; the ranking keeps its remaining nodes for the next pod. Otherwise the pod is scheduled
as usual and its own ranking replaces the kept one.

Counts for the metrics, as upstream's labels (``take_counts``): ``batch_attempts_total{result}``,
``batch_cache_flushed_total{reason}``, ``batch_rescore_attempts_total``. Pure: time (``now``, seconds of
any monotonic origin) is an argument; a tie at the top of the ranking is broken with the caller's RNG
(upstream pops its heap, whose order among equal totals is its own).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..dra.extended import delegated
from ..framework.basics import Code, Status
from ..framework.interface import SignFragment, SignPlugin
from ..model.objects import Pod

if TYPE_CHECKING:
    from ..framework.snapshot import Snapshot

__all__ = [
    "MAX_BATCH_AGE",
    "OpportunisticBatch",
    "Ranking",
    "Signature",
    "sign_pod",
    "signed_by",
]

#: upstream ``maxBatchAge``: a ranking older than this is not reused
MAX_BATCH_AGE: Final = 0.5

#: upstream ``fwk.SchedulerNameSignerName``: every signature starts with the pod's scheduler name
SCHEDULER_NAME_SIGNER: Final = "v1.Pod.Spec.SchedulerName"
# upstream's signer names (kube-scheduler/framework/signers.go), for the plugins' fragments
RESOURCES_SIGNER: Final = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
TOLERATIONS_SIGNER: Final = "v1.Pod.Spec.Tolerations"
VOLUMES_SIGNER: Final = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
HOST_PORTS_SIGNER: Final = "v1.Pod.Spec.HostPorts()"
NODE_AFFINITY_SIGNER: Final = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR_SIGNER: Final = "v1.Pod.Spec.NodeSelector"
NODE_NAME_SIGNER: Final = "v1.Pod.Spec.NodeName"
IMAGE_NAMES_SIGNER: Final = "v1.Pod.Spec.Containers.Images"
LABELS_SIGNER: Final = "v1.Pod.ObjectMeta.Labels"
#: volume sources upstream's VolumesSigner leaves out
SYNTHETIC_VOLUMES: Final = frozenset({"configMap", "secret"})

# upstream's metric label values (pkg/scheduler/metrics/metrics.go)
NO_HINT: Final = "no_hint"
HINT_USED: Final = "hint_used"
HINT_NOT_USED: Final = "hint_not_used"
FLUSH_POD_SKIPPED: Final = "pod_skipped"
FLUSH_POD_NOMINATED: Final = "pod_nominated"
FLUSH_NODE_MISSING: Final = "node_missing"
FLUSH_EMPTY_LIST: Final = "empty_list"
FLUSH_EXPIRED: Final = "expired"
FLUSH_POD_INCOMPATIBLE: Final = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE: Final = "pod_not_batchable"
FLUSH_FILTER_ERROR: Final = "filter_error"
FLUSH_PRESCORE_ERROR: Final = "prescore_error"
FLUSH_RESCORE_ERROR: Final = "rescore_error"
FLUSH_NORMALIZE_ERROR: Final = "normalize_error"

#: a pod's signature: its fragments by key, sorted by key (two pods compare equal when every fragment does)
Signature = tuple[tuple[str, object], ...]


def sign_pod(plugins: Sequence[SignPlugin], pod: Pod, snapshot: Snapshot) -> Signature | None:
    """Upstream ``SignPod``: the pod's scheduler name and every plugin's fragments, or None when a plugin
    cannot sign the pod (it answered a Status, or raised)."""
    return signed_by(plugins, pod, snapshot)[0]


def signed_by(plugins: Sequence[SignPlugin], pod: Pod, snapshot: Snapshot) -> tuple[Signature | None, int]:
    """``sign_pod``, and the position of the plugin that refused (-1: none). The order of `plugins` does not
    change the signature, so a caller may ask the one that refused last time first (most pods of a profile
    whose spread defaults refuse every pod then cost one call)."""
    fragments: dict[str, object] = {SCHEDULER_NAME_SIGNER: pod.scheduler_name}
    for i, plugin in enumerate(plugins):
        try:
            signed = plugin.sign_pod(pod, snapshot)
        except Exception:  # a plugin bug: the pod is not signable, nothing worse
            return None, i
        if isinstance(signed, Status):
            return None, i
        for fragment in signed:
            fragments[fragment.key] = fragment.value
    return tuple(sorted(fragments.items(), key=_key)), -1


def _key(item: tuple[str, object]) -> str:
    return item[0]


def fragment(key: str, value: object) -> tuple[SignFragment]:
    """One fragment, as the plugins' ``sign_pod`` returns them."""
    return (SignFragment(key, value),)


def labels_value(labels: Mapping[str, str]) -> Mapping[str, str]:
    """A mapping as a fragment's value (mappings compare equal whatever their order)."""
    return labels


#: upstream's refusal when a DeviceClass serves one of the pod's extended resources (DRAExtendedResource)
DRA_EXTENDED_NOT_SIGNABLE: Final = "signature disabled when dra extended resources are used in the cluster"


def resources(pod: Pod, snapshot: Snapshot) -> tuple[SignFragment] | Status:
    """NodeResourcesFit's and BalancedAllocation's fragment: what the pod requests (upstream
    ``computePodResourceRequest``), with the scorers' non-zero defaults; not signable when DRA may serve
    one of its extended resources (which devices it gets depends on more than the pod)."""
    scalar = pod.requests.scalar
    if scalar and delegated(scalar, snapshot.objects.dra):
        return Status(Code.UNSCHEDULABLE, (DRA_EXTENDED_NOT_SIGNABLE,))
    return fragment(RESOURCES_SIGNER, (pod.requests, pod.non_zero_requests, pod.container_non_zero_requests))


def tolerations(pod: Pod) -> tuple[SignFragment]:
    """TaintToleration's and NodeUnschedulable's fragment (upstream ``TolerationsSigner``)."""
    return fragment(TOLERATIONS_SIGNER, pod.tolerations)


def volumes(pod: Pod) -> tuple[SignFragment]:
    """The volume plugins' fragment (upstream ``VolumesSigner``): every source but ConfigMaps and Secrets."""
    return fragment(VOLUMES_SIGNER, tuple(v for v in pod.volumes if v.kind not in SYNTHETIC_VOLUMES))


#: a taken node's total in a ``Ranking`` (lower than any score)
TAKEN: Final = np.iinfo(np.int64).min


@dataclass(slots=True)
class Ranking:
    """Scored nodes not taken yet (upstream ``SortedScoredNodes``): per node its name and total, and per
    scoring plugin its raw scores (aligned with ``names``), to normalise again when a node is rescored. A node
    taken keeps its place with the total ``TAKEN`` (nothing is copied per pop)."""

    names: list[str]
    totals: npt.NDArray[np.int64]
    raw: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    left: int = -1

    def __post_init__(self) -> None:
        if self.left < 0:
            self.left = len(self.names)

    def __len__(self) -> int:
        return self.left

    def alive(self) -> npt.NDArray[np.intp]:
        """The positions of the nodes not taken."""
        return np.flatnonzero(self.totals != TAKEN)

    def pop(self, rng: random.Random) -> str:
        """The best node, taken; a tie broken with `rng`."""
        top = np.flatnonzero(self.totals == self.totals.max())
        i = int(top[0]) if top.size == 1 else int(top[rng.randrange(top.size)])
        self.totals[i] = TAKEN
        self.left -= 1
        return self.names[i]


@dataclass(slots=True)
class _Kept:
    signature: Signature
    ranking: Ranking
    created: float


class OpportunisticBatch:
    """One profile's batching state (upstream ``OpportunisticBatch``); see the module docstring."""

    __slots__ = ("_kept", "_last_cycle", "last_node", "attempts", "flushed", "rescores", "batched")

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self._last_cycle = -2
        #: the node the last pod this profile scheduled went to
        self.last_node = ""
        #: ``batch_attempts_total`` by result, ``batch_cache_flushed_total`` by reason, rescores: since taken
        self.attempts: Counter[str] = Counter()
        self.flushed: Counter[str] = Counter()
        self.rescores = 0
        #: pods scheduled on a hint (upstream ``batchedPods``)
        self.batched = 0

    @property
    def ranking(self) -> Ranking | None:
        return self._kept.ranking if self._kept is not None else None

    def compatible(self, pod: Pod, signature: Signature | None, cycle: int, now: float) -> bool:
        """Upstream ``batchStateCompatible``: may `pod`, tried in scheduling cycle `cycle` at `now`, use the
        kept ranking? Each reason it may not is counted as a flush (the ranking itself stays until the
        next ``store``, as upstream's)."""
        kept = self._kept
        if kept is None or not kept.ranking:
            return False
        if cycle != self._last_cycle + 1 and cycle != self._last_cycle:  # a pod-group cycle's members share one
            return self.flush(FLUSH_POD_SKIPPED)
        if pod.nominated_node_name:
            return self.flush(FLUSH_POD_NOMINATED)
        if signature is None or signature != kept.signature:
            return self.flush(FLUSH_POD_INCOMPATIBLE)
        if now > kept.created + MAX_BATCH_AGE:
            return self.flush(FLUSH_EXPIRED)
        return True

    def flush(self, reason: str) -> bool:
        """Count a reason the ranking cannot be used now (upstream ``logUnusableState``); False, for returns."""
        self.flushed[reason] += 1
        return False

    def replace(self, ranking: Ranking) -> None:
        """The kept ranking, rescored (upstream ``rescoreHintedNode``)."""
        assert self._kept is not None
        self._kept.ranking = ranking
        self.rescores += 1

    def take_hint(self, rng: random.Random) -> str:
        """Pop the best node of the kept ranking as the hint."""
        assert self._kept is not None
        return self._kept.ranking.pop(rng)

    def no_hint(self) -> None:
        self.attempts[NO_HINT] += 1

    def store(
        self,
        signature: Signature | None,
        hinted: str,
        chosen: str,
        others: Callable[[], Ranking] | None,
        count: int,
        cycle: int,
        now: float,
    ) -> None:
        """Upstream ``StoreScheduleResults``: `chosen` is where the pod of cycle `cycle` goes (`hinted` the
        hint it had, "" for none); `others` makes the ranking of the `count` other scored nodes (None: not
        scored), only when it is kept."""
        self._last_cycle, self.last_node = cycle, chosen
        if hinted and hinted == chosen:
            self.attempts[HINT_USED] += 1
            self.batched += 1
            return
        if hinted:
            self.attempts[HINT_NOT_USED] += 1
        if signature is not None and others is not None and count:
            self._kept = _Kept(signature, others(), now)
            return
        self.flush(FLUSH_EMPTY_LIST if others is None or not count else FLUSH_POD_NOT_BATCHABLE)
        self._kept = None

    def take_counts(self) -> tuple[Counter[str], Counter[str], int]:
        """The attempts, flushes and rescores counted since the last call (for the metrics)."""
        out = (self.attempts, self.flushed, self.rescores)
        self.attempts, self.flushed, self.rescores = Counter(), Counter(), 0
        return out
