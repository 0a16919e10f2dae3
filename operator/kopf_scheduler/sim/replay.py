"""Replay a recorded trace (``run --record``) through the simulator with a candidate policy, side by side.

The trace (``core/scheduling/trace.py``) is read from the newest run in its directory: the first segment's
checkpoint is the cluster as it stood (its bound pods stay where they are), then every record in
order. The pruned bodies go through the same loader as ``simulate`` (``sim/loader.py``). Events
reach the ``Simulation`` as the operator's watches brought them: nodes added, changed and deleted;
pods bound by someone else, or deleted. A pod of the replayed scheduler name enters the queue when
the recording first attempted it (so the pods are tried in the order the operator popped them) and
the simulation runs the same cycle (``core/scheduling/cycle.py``) until the queue settles; the virtual clock
follows the trace's timestamps. With the policy that recorded the trace, the random tie-break
takes the recorded draws (``FollowingRandom``), so the same inputs give the same placements.

What is compared, recorded against replayed: each pod's node (``differing`` counts the pods placed
differently, placed vs not placed included), per-node requested CPU and memory, the largest
CPU and memory still free on one node (fragmentation), preemptions, gangs (members placed), and the
cluster's CPU and memory utilisation over time. The recorded side is the recorded decisions on
top of everything else the replay holds (nodes, other pods), so the two differ only by our pods.

Limits: only nodes and pods are recorded (not Services, volumes, PDBs...: a policy whose plugins
read them sees none); the recorded side's retries follow the operator's clock, the replay's its
backoffs; a policy changed during the trace is replayed with the version in force at the first
decision (``Trace.policy_versions`` lists them).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..core.config.policy import validate_policy
from ..core.config.profile import Profile
from ..core.config.registry import Registry
from ..core.framework.nodeinfo import NodeInfo
from ..core.model import parsing
from ..core.model.objects import Pod
from ..core.model.resources import Resources
from ..core.scheduling import trace
from ..core.toolkit import gangs
from .loader import load_cluster, load_pods
from .simulator import Simulation, UnreadablePod

__all__ = [
    "FollowingRandom",
    "NodeUse",
    "PodOutcome",
    "ReplayResult",
    "Trace",
    "TraceError",
    "read_trace",
    "recorded_profile",
    "replay",
]

#: utilisation samples kept at most (the PNG and the JSON series)
MAX_SAMPLES: Final = 200
#: outcomes of a recorded decision that leave the pod on a node
_PLACED: Final = frozenset(("bind", "wait", "permit-allowed"))


class TraceError(ValueError):
    """A trace directory that cannot be read or replayed; the message says why."""


@dataclass(slots=True)
class Trace:
    checkpoint: Mapping[str, Any]
    records: list[Mapping[str, Any]]
    #: segment files read, oldest first
    files: list[Path]
    #: records the recorder could not keep up with
    dropped: int = 0

    @property
    def start(self) -> float:
        return float(self.checkpoint.get("t") or 0.0)

    @property
    def end(self) -> float:
        return float(self.records[-1]["t"]) if self.records else self.start

    def decisions(self) -> Iterator[Mapping[str, Any]]:
        return (r for r in self.records if r.get("e") == trace.DECISION)

    def scheduler_names(self) -> list[str]:
        return sorted({str(r.get("scheduler") or "") for r in self.decisions()})

    def policy_versions(self, scheduler_name: str) -> list[Mapping[str, Any]]:
        """Every recorded version of the policy serving `scheduler_name`, oldest first."""
        found = [p for p in self.checkpoint.get("policies") or () if p.get("schedulerName") == scheduler_name]
        found += [r for r in self.records if r.get("e") == trace.POLICY and r.get("schedulerName") == scheduler_name]
        return found


def _segment_seq(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        return -1


def _lines(path: Path) -> list[Mapping[str, Any]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:  # EOFError: a gzip cut short
        raise TraceError(f"{path}: cannot read: {exc}") from None
    out: list[Mapping[str, Any]] = []
    lines = raw.splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                break  # the last line of a segment cut short by a crash
            raise TraceError(f"{path}: line {i + 1} is not JSON") from None
        if isinstance(record, dict):
            out.append(record)
    return out


def read_trace(directory: str | Path) -> Trace:
    """The newest run's records in `directory`, from its oldest segment still kept."""
    d = Path(directory)
    if not d.is_dir():
        raise TraceError(f"{d}: not a directory")
    files = sorted((p for p in d.glob("trace-*.jsonl*") if _segment_seq(p) >= 0), key=_segment_seq)
    if not files:
        raise TraceError(f"{d}: no trace segments (trace-NNNNNN.jsonl[.gz]); record one with run --record {d}")
    segments = [(p, _lines(p)) for p in files]
    segments = [(p, recs) for p, recs in segments if recs and recs[0].get("e") == trace.CHECKPOINT]
    if not segments:
        raise TraceError(f"{d}: no segment begins with a checkpoint")
    run = segments[-1][1][0].get("run")
    segments = [(p, recs) for p, recs in segments if recs[0].get("run") == run]
    records: list[Mapping[str, Any]] = []
    for _, recs in segments:
        records += recs[1:]
    dropped = sum(int(r.get("count") or 0) for r in records if r.get("e") == trace.DROPPED)
    return Trace(segments[0][1][0], records, [p for p, _ in segments], dropped)


def recorded_profile(t: Trace, scheduler_name: str, *, registry: Registry | None = None) -> tuple[Profile, str]:
    """The profile of the policy that served `scheduler_name` at its first decision, and its name and generation."""
    first = next((r for r in t.decisions() if r.get("scheduler") == scheduler_name), None)
    versions = t.policy_versions(scheduler_name)
    if first is not None:
        versions = [v for v in versions if float(v.get("t") or 0) <= float(first["t"])] or versions[:1]
    if not versions:
        raise TraceError(f"the trace holds no policy for schedulerName {scheduler_name}: give --policy")
    chosen = versions[-1]
    profile = validate_policy(chosen.get("spec") or {}, registry=registry)
    if isinstance(profile, list):
        problems = "\n".join(f"  {e.path}: {e.message}" for e in profile)
        raise TraceError(f"the recorded policy {chosen.get('name')} is not valid here:\n{problems}")
    return profile, f"{chosen.get('name')} generation {chosen.get('generation')}"


class FollowingRandom(random.Random):
    """The recorded tie-break draws in order, as long as each asks for the same range; then a seeded RNG."""

    def __init__(self, draws: Sequence[tuple[int, int]], seed: int = 0) -> None:
        super().__init__(seed)
        self._draws = list(draws)
        self._next = 0
        self.followed = 0

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        if stop is None and step == 1 and self._next < len(self._draws) and self._draws[self._next][0] == start:
            value = self._draws[self._next][1]
            self._next += 1
            self.followed += 1
            return value
        return super().randrange(start, stop, step)


@dataclass(slots=True)
class PodOutcome:
    """One pod of the replayed scheduler name: what was recorded and what the replay did."""

    pod: str
    uid: str
    recorded_node: str | None
    recorded_reason: str
    replayed_node: str | None
    replayed_reason: str
    recorded_victims: tuple[str, ...] = ()
    replayed_victims: tuple[str, ...] = ()
    gangs: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return self.recorded_node != self.replayed_node


@dataclass(slots=True)
class NodeUse:
    """Requested over allocatable on one node, recorded and replayed (cpu in millicores, memory in bytes)."""

    node: str
    cpu: int
    memory: int
    recorded_cpu: int
    recorded_memory: int
    replayed_cpu: int
    replayed_memory: int
    #: pods of the replayed scheduler name on the node
    recorded_pods: int = 0
    replayed_pods: int = 0


@dataclass(slots=True)
class ReplayResult:
    scheduler_name: str
    policy: str
    pods: list[PodOutcome] = field(default_factory=list)
    nodes: list[NodeUse] = field(default_factory=list)
    #: samples over time: seconds since the trace began, then recorded and replayed CPU utilisation, memory
    #: utilisation and the share of nodes holding a pod of the replayed scheduler name (fractions)
    series: list[tuple[float, float, float, float, float, float, float]] = field(default_factory=list)
    #: the live span of the replayed decisions (trace timestamps) and how long the replay took
    live_seconds: float = 0.0
    replay_seconds: float = 0.0
    decisions: int = 0
    #: pods attempted in the recording whose body the trace lacks, or that cannot be read
    skipped: list[str] = field(default_factory=list)
    followed_draws: int = 0

    @property
    def differing(self) -> int:
        return sum(1 for p in self.pods if p.differs)


@dataclass(slots=True)
class _Recorded:
    """The recorded side: our pods' last recorded node and what they request, with running totals."""

    node: dict[str, str | None] = field(default_factory=dict)
    reason: dict[str, str] = field(default_factory=dict)
    victims: dict[str, list[str]] = field(default_factory=dict)
    requests: dict[str, Resources] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    cpu: int = 0
    memory: int = 0
    #: node -> our pods recorded on it (nodes with none are dropped)
    per_node: dict[str, int] = field(default_factory=dict)

    def _count(self, uid: str, sign: int) -> None:
        node, req = self.node.get(uid), self.requests.get(uid)
        if not node or req is None or uid in self.gone:
            return
        self.cpu += sign * req.milli_cpu
        self.memory += sign * req.memory
        left = self.per_node.get(node, 0) + sign
        if left:
            self.per_node[node] = left
        else:
            self.per_node.pop(node, None)

    def decide(self, r: Mapping[str, Any]) -> None:
        uid, outcome = str(r["uid"]), str(r.get("outcome") or "")
        if outcome == "skip":
            return
        self._count(uid, -1)
        self.node[uid] = str(r.get("node") or "") if outcome in _PLACED else None
        self._count(uid, +1)
        self.reason[uid] = str(r.get("reason") or "")
        if r.get("victims"):
            self.victims.setdefault(uid, []).extend(str(v) for v in r["victims"])

    def deleted(self, uid: str) -> None:
        self._count(uid, -1)
        self.gone.add(uid)


def replay(
    t: Trace, profile: Profile, *, scheduler_name: str, seed: int = 0, follow_draws: bool = True
) -> ReplayResult:
    """Run the trace's arrivals through a ``Simulation`` of `profile` (see the module docstring)."""
    import time

    started = time.perf_counter()
    ckpt = t.checkpoint
    decided = {str(r["uid"]) for r in t.decisions() if r.get("scheduler") == scheduler_name}
    pending_docs = {_uid(p): p for p in ckpt.get("pods") or () if not (p.get("spec") or {}).get("nodeName")}
    bound_docs = [p for p in ckpt.get("pods") or () if (p.get("spec") or {}).get("nodeName")]
    loaded = load_cluster([*(ckpt.get("nodes") or ()), *bound_docs], source=f"{t.files[0]}: checkpoint")
    sim = Simulation(loaded.cache, dataclasses.replace(profile), seed=seed)
    draws = [
        (int(d[0]), int(d[1]))
        for r in t.decisions()
        if r.get("scheduler") == scheduler_name
        for d in r.get("draws") or ()
    ]
    follower = FollowingRandom(draws if follow_draws else (), seed)
    sim.rng = follower
    out = ReplayResult(scheduler_name, "")
    recorded = _Recorded()
    submitted: dict[str, Pod] = {}
    missing: set[str] = set()  # attempted, but the trace lacks the pod or it cannot be read
    first_t = last_t = None
    stride = max(1, len(decided) // MAX_SAMPLES)
    for r in t.records:
        sim.clock = max(sim.clock, float(r.get("t") or 0.0) - t.start)
        kind = r.get("e")
        if kind == trace.NODE:
            _node_event(sim, r)
        elif kind == trace.POD:
            _pod_event(sim, r, decided, pending_docs, submitted, recorded, loaded.priority_classes)
        elif kind == trace.DECISION and r.get("scheduler") == scheduler_name:
            uid = str(r["uid"])
            out.decisions += 1
            first_t = first_t if first_t is not None else float(r["t"])
            last_t = float(r["t"])
            if uid in missing:
                continue
            if uid not in submitted:
                pod = _arrival(uid, r, pending_docs, loaded.priority_classes, out.skipped)
                if pod is None:
                    missing.add(uid)
                    continue
                pod = dataclasses.replace(pod, scheduler_name=profile.scheduler_name)
                submitted[uid] = pod
                recorded.requests[uid] = pod.requests
                gangs.update_members(sim.cache.objects.gang_members, pod, present=True)
                sim.schedule_one(pod)
            recorded.decide(r)
            if out.decisions % stride == 0:
                out.series.append(_sample(sim, r, t.start, submitted, recorded))
    out.live_seconds = (last_t - first_t) if first_t is not None and last_t is not None else 0.0
    out.followed_draws = follower.followed
    out.pods = _outcomes(sim, submitted, recorded)
    out.nodes = _node_use(sim, submitted, recorded)
    out.replay_seconds = time.perf_counter() - started
    return out


def _infos(sim: Simulation) -> Iterator[NodeInfo]:
    for name in sim.cache.node_names():
        info = sim.cache.get_node_info(name)
        if info is not None:
            yield info


def _uid(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")


def _node_event(sim: Simulation, r: Mapping[str, Any]) -> None:
    body = r.get("obj") or {}
    if r.get("op") == "DELETED":
        sim.node_changed(None, str((body.get("metadata") or {}).get("name") or ""))
        return
    try:
        node = parsing.parse_node(body)
    except parsing.ObjectError:
        return  # the operator skipped it too
    sim.node_changed(node)


def _pod_event(
    sim: Simulation,
    r: Mapping[str, Any],
    decided: set[str],
    pending_docs: dict[str, Mapping[str, Any]],
    submitted: Mapping[str, Pod],
    recorded: _Recorded,
    classes: Mapping[str, Any],
) -> None:
    body = r.get("obj") or {}
    uid, deleted = _uid(body), r.get("op") == "DELETED"
    node = str((body.get("spec") or {}).get("nodeName") or "")
    if not node:  # the unassigned pods' watch: an arrival, a change, or gone (deleted or bound)
        if uid not in submitted:
            if not deleted:
                pending_docs[uid] = body
        elif deleted and not recorded.node.get(uid):  # never placed live: deleted, not bound
            recorded.deleted(uid)
            if sim.cache.get_pod(uid) is not None:
                sim.assigned_pod_changed(submitted[uid], deleted=True)
            else:
                sim.pending_pod_deleted(uid)
        return
    if uid in decided:  # one of ours: the replay placed it its own way; only its deletion counts
        if deleted:
            recorded.deleted(uid)
            if uid in submitted:
                sim.assigned_pod_changed(submitted[uid], deleted=True)
        return
    if r.get("ref"):  # bound by another scheduler name of the trace: its pending body, on its node
        pending = pending_docs.get(uid)
        if pending is None:
            return
        body = {**pending, "spec": {**(pending.get("spec") or {}), "nodeName": node}}
    if deleted:
        held = sim.cache.get_pod(uid)
        if held is not None:
            sim.assigned_pod_changed(held, deleted=True)
        return
    pods = load_pods([body], source="trace", priority_classes=classes)
    if pods and isinstance(pods[0], Pod):
        sim.assigned_pod_changed(pods[0], deleted=False)


def _arrival(
    uid: str, r: Mapping[str, Any], pending_docs: Mapping[str, Mapping[str, Any]], classes: Any, skipped: list[str]
) -> Pod | None:
    doc = pending_docs.get(uid)
    if doc is None:
        skipped.append(f"{r.get('pod')}: not in the trace (it arrived before the oldest segment kept)")
        return None
    pods = load_pods([doc], source="trace", priority_classes=classes)
    if pods and isinstance(pods[0], Pod):
        return pods[0]
    skipped.append(f"{r.get('pod')}: {pods[0].message if pods and isinstance(pods[0], UnreadablePod) else 'no pod'}")
    return None


def _sample(
    sim: Simulation, r: Mapping[str, Any], start: float, submitted: Mapping[str, Pod], recorded: _Recorded
) -> tuple[float, float, float, float, float, float, float]:
    cpu = memory = used_cpu = used_memory = count = 0
    for info in _infos(sim):
        count += 1
        cpu += info.allocatable.milli_cpu
        memory += info.allocatable.memory
        used_cpu += info.requested.milli_cpu
        used_memory += info.requested.memory
    ours_cpu = ours_memory = 0
    ours_nodes = set()
    for held in map(sim.cache.get_pod, submitted):
        if held is not None:
            requests = held.requests
            ours_cpu += requests.milli_cpu
            ours_memory += requests.memory
            ours_nodes.add(held.node_name)
    rec_cpu, rec_memory, rec_nodes = recorded.cpu, recorded.memory, len(recorded.per_node)
    base_cpu, base_memory = used_cpu - ours_cpu, used_memory - ours_memory
    return (
        float(r["t"]) - start,
        (base_cpu + rec_cpu) / cpu if cpu else 0.0,
        used_cpu / cpu if cpu else 0.0,
        (base_memory + rec_memory) / memory if memory else 0.0,
        used_memory / memory if memory else 0.0,
        rec_nodes / count if count else 0.0,
        len(ours_nodes) / count if count else 0.0,
    )


def _outcomes(sim: Simulation, submitted: Mapping[str, Pod], recorded: _Recorded) -> list[PodOutcome]:
    out = []
    for uid, pod in submitted.items():
        placed = sim.placement(uid)
        out.append(
            PodOutcome(
                pod.key,
                uid,
                recorded.node.get(uid) or None,
                recorded.reason.get(uid, ""),
                placed.node,
                placed.message,
                tuple(recorded.victims.get(uid, ())),
                placed.victims,
                gangs.member_keys(pod),
            )
        )
    return out


def _node_use(sim: Simulation, submitted: Mapping[str, Pod], recorded: _Recorded) -> list[NodeUse]:
    ours: dict[str, list[int]] = {}
    for uid in submitted:
        held = sim.cache.get_pod(uid)
        if held is not None and held.node_name:
            acc = ours.setdefault(held.node_name, [0, 0, 0])
            acc[0] += held.requests.milli_cpu
            acc[1] += held.requests.memory
            acc[2] += 1
    theirs: dict[str, list[int]] = {}
    for uid, node in recorded.node.items():
        if node and uid not in recorded.gone and uid in recorded.requests:
            acc = theirs.setdefault(node, [0, 0, 0])
            acc[0] += recorded.requests[uid].milli_cpu
            acc[1] += recorded.requests[uid].memory
            acc[2] += 1
    out = []
    for info in sorted(_infos(sim), key=lambda i: i.name):
        mine, rec = ours.get(info.name, [0, 0, 0]), theirs.get(info.name, [0, 0, 0])
        base_cpu, base_memory = info.requested.milli_cpu - mine[0], info.requested.memory - mine[1]
        out.append(
            NodeUse(
                info.name,
                info.allocatable.milli_cpu,
                info.allocatable.memory,
                base_cpu + rec[0],
                base_memory + rec[1],
                info.requested.milli_cpu,
                info.requested.memory,
                rec[2],
                mine[2],
            )
        )
    return out
