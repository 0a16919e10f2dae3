"""``run --record DIR``: a bounded, rotating trace of what scheduling saw, written off the loop's path.

The loop and the watch handlers only append a tuple to a bounded deque (``Recorder.node``, ``pod``,
``policy``, ``decision``, ``permit``: well under a microsecond, no lock, no wake-up); one writer
thread wakes every ``FLUSH_INTERVAL`` seconds, takes what has gathered, prunes the bodies
(``core/scheduling/trace.py``), drops changes that leave the pruned body as it was, encodes JSON lines and
writes them. A writer woken per record (a ``queue.Queue``) cost the loop more than twice its time
on bench/bench_replay.py: every put handed the GIL to the writer and back. When the writer falls
behind and the deque is full, records are left out and counted (a ``dropped`` record says how
many); the loop never waits on the disk.

Files: the segment being written is ``trace-NNNNNN.jsonl``; past ``segment_bytes`` it is gzipped to
``trace-NNNNNN.jsonl.gz`` and a new one begins, opening with a checkpoint of every node, pod and
policy the writer knows (its mirror of the pruned bodies), so any segment replays from its start.
At most ``segments`` files are kept, the oldest removed first: the trace never takes more than
about ``segments x segment_bytes`` before compression. Each checkpoint names its run (the
recorder's start time), so a directory reused by a later run is read from that run only. On close
the current segment is gzipped too.

Limits: only nodes, pods, policies and decisions are recorded (``replay`` says what that leaves
out); what a relist finds gone after lost watch history is not recorded as deleted.

``DrawLog`` is the random tie-break of a recorded policy: it notes each ``randrange`` draw so the
decision record carries them and a replay with the same policy breaks ties the same way.
"""

from __future__ import annotations

import collections
import gzip
import json
import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..core.scheduling import trace
from ..core.scheduling.cycle import Outcome

__all__ = ["DEFAULT_SEGMENTS", "DEFAULT_SEGMENT_BYTES", "DrawLog", "Recorder"]

logger = logging.getLogger(__name__)

#: bytes of JSON lines per segment before it is gzipped and the next begins
DEFAULT_SEGMENT_BYTES: Final = 32 * 1024 * 1024
#: segments kept, the one being written included
DEFAULT_SEGMENTS: Final = 8
#: records waiting for the writer at most; more are dropped and counted
QUEUE_CAPACITY: Final = 200_000
#: seconds between the writer's rounds
FLUSH_INTERVAL: Final = 0.1


class DrawLog(random.Random):
    """A ``random.Random`` that remembers its ``randrange(n)`` draws until ``take`` hands them over."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed)
        self.draws: list[tuple[int, int]] = []

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        value = super().randrange(start, stop, step)
        if stop is None and step == 1:
            self.draws.append((start, value))
        return value

    def take(self) -> list[tuple[int, int]]:
        draws, self.draws = self.draws, []
        return draws


class Recorder:
    """Appends what scheduling saw to the trace in `directory` (see the module docstring)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segments: int = DEFAULT_SEGMENTS,
        capacity: int = QUEUE_CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if segment_bytes < 1024 or segments < 1 or capacity < 1:
            raise ValueError("Recorder: need segment_bytes >= 1024, segments >= 1, capacity >= 1")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.segments = segments
        self.clock = clock
        self.run_id = f"{clock():.3f}-{uuid.uuid4().hex[:8]}"
        self.capacity = capacity
        self._queue: collections.deque[Any] = collections.deque()
        self._dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # the writer thread's own state
        self._nodes: dict[str, dict[str, Any]] = {}
        self._pods: dict[str, dict[str, Any]] = {}
        self._policies: dict[str, dict[str, Any]] = {}
        #: pod key -> whether its last decision placed it (for pods still known)
        self._placed: dict[str, bool] = {}
        self._file: Any = None
        self._path: Path | None = None
        self._seq = 0
        self._written = 0
        self.records = 0
        #: CPU seconds the writer thread has spent (its cost to the process, whose GIL it shares)
        self.writer_seconds = 0.0

    # ------------------------------------------------------------------ the hot path

    def _put(self, item: Any) -> None:
        if len(self._queue) < self.capacity:
            self._queue.append(item)
        else:
            self._dropped += 1

    def node(self, op: str, body: Mapping[str, Any]) -> None:
        self._put((self.clock(), trace.NODE, op, body))

    def pod(self, op: str, body: Mapping[str, Any]) -> None:
        self._put((self.clock(), trace.POD, op, body))

    def policy(self, name: str, generation: int, scheduler_name: str, spec: Mapping[str, Any]) -> None:
        record = {"e": trace.POLICY, "name": name, "generation": generation, "schedulerName": scheduler_name}
        self._put((self.clock(), trace.POLICY, "", {**record, "spec": spec}))

    def decision(
        self, key: str, uid: str, scheduler_name: str, outcome: Outcome, draws: Sequence[tuple[int, int]] = ()
    ) -> None:
        record = trace.decision_record(
            self.clock(), key=key, uid=uid, scheduler_name=scheduler_name, outcome=outcome, draws=draws
        )
        self._put((record["t"], trace.DECISION, "", record))

    def permit(self, key: str, uid: str, scheduler_name: str, *, node: str = "", reason: str = "") -> None:
        """A pod waiting at Permit was allowed (bound to `node`) or rejected (`reason`)."""
        record: dict[str, Any] = {"t": self.clock(), "e": trace.DECISION, "pod": key, "uid": uid}
        record["scheduler"] = scheduler_name
        if node:
            record.update(outcome="permit-allowed", node=node)
        else:
            record.update(outcome="permit-rejected", reason=reason)
        self._put((record["t"], trace.DECISION, "", record))

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = sorted(self.directory.glob("trace-*.jsonl*"))
        for left in existing:  # a previous run's unfinished segment
            if left.suffix == ".jsonl":
                _compress(left)
        seqs = [_seq_of(p) for p in self.directory.glob("trace-*.jsonl.gz")]
        self._seq = max(seqs, default=0)
        self._open_segment()
        self._thread = threading.Thread(target=self._write_forever, name="trace-recorder", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Write what is queued, gzip the current segment and stop the writer (blocks until done)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    # ------------------------------------------------------------------ the writer thread

    def _write_forever(self) -> None:
        while True:
            stop = self._stop.wait(FLUSH_INTERVAL)
            began = time.thread_time()
            pending = self._queue
            while pending:
                entry = pending.popleft()
                try:
                    self._write_entry(entry)
                except Exception:  # a strange body must not stop the trace
                    logger.exception("trace recorder: cannot record %s", entry[1])
            if self._dropped:
                dropped, self._dropped = self._dropped, 0
                self._write({"t": self.clock(), "e": trace.DROPPED, "count": dropped})
            self._file.flush()
            self.writer_seconds += time.thread_time() - began
            if stop:
                self._finish_segment()
                return

    def _write_entry(self, entry: tuple[float, str, str, Any]) -> None:
        t, kind, op, body = entry
        if kind == trace.NODE:
            self._node_change(t, op, body)
        elif kind == trace.POD:
            self._pod_change(t, op, body)
        elif kind == trace.POLICY:
            record = {"t": t, **body}
            self._policies[body["name"]] = record
            self._write(record)
        else:
            if body.get("e") == trace.DECISION:
                self._placed[str(body.get("uid"))] = bool(body.get("node"))
            self._write(body)

    def _node_change(self, t: float, op: str, body: Mapping[str, Any]) -> None:
        name = _node_key(body)
        if op == "DELETED":
            if self._nodes.pop(name, None) is not None:
                self._write({"t": t, "e": trace.NODE, "op": op, "obj": {"kind": "Node", "metadata": {"name": name}}})
            return
        pruned = trace.prune_node(body)
        if self._nodes.get(name) != pruned:  # else nothing scheduling reads changed (a heartbeat)
            self._nodes[name] = pruned
            self._write({"t": t, "e": trace.NODE, "op": op, "obj": pruned})

    def _pod_change(self, t: float, op: str, body: Mapping[str, Any]) -> None:
        """A pod's change. Deletions carry only the pod's identity, and so does the binding of a pod
        whose decision is in the trace (its body is the pending one's, written before, with ``ref``)."""
        key = _pod_key(body)
        meta = body.get("metadata") or {}
        node = str((body.get("spec") or {}).get("nodeName") or "")
        ref = {
            "kind": "Pod",
            "metadata": {"uid": meta.get("uid"), "namespace": meta.get("namespace"), "name": meta.get("name")},
            "spec": {"nodeName": node},
        }
        known = self._pods.get(key)
        if op == "DELETED":
            # an unassigned pod's DELETED also means "bound": keep a placed pod's body for its binding
            if node or not self._placed.get(key):
                self._pods.pop(key, None)
                self._placed.pop(key, None)
            self._write({"t": t, "e": trace.POD, "op": op, "obj": ref})
            return
        if node and key in self._placed and known is not None and not known["spec"].get("nodeName"):
            self._pods[key] = {**known, "spec": {**known["spec"], "nodeName": node}}
            self._write({"t": t, "e": trace.POD, "op": op, "ref": True, "obj": ref})
            return
        pruned = trace.prune_pod(body)
        if known != pruned:  # else nothing scheduling reads changed (a status message)
            self._pods[key] = pruned
            self._write({"t": t, "e": trace.POD, "op": op, "obj": pruned})

    def _write(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        data = line.encode()
        self._file.write(data)
        self._written += len(data)
        self.records += 1
        if self._written >= self.segment_bytes:
            self._finish_segment()
            self._open_segment()

    def _open_segment(self) -> None:
        self._seq += 1
        self._path = self.directory / f"trace-{self._seq:06d}.jsonl"
        self._file = self._path.open("wb")
        self._written = 0
        checkpoint = {
            "t": self.clock(),
            "e": trace.CHECKPOINT,
            "run": self.run_id,
            "nodes": list(self._nodes.values()),
            "pods": list(self._pods.values()),
            "policies": list(self._policies.values()),
        }
        data = (json.dumps(checkpoint, separators=(",", ":"), default=str) + "\n").encode()
        self._file.write(data)
        self._written += len(data)
        kept = sorted(self.directory.glob("trace-*.jsonl.gz"), key=_seq_of)
        for old in kept[: max(0, len(kept) - (self.segments - 1))]:
            old.unlink(missing_ok=True)

    def _finish_segment(self) -> None:
        self._file.close()
        assert self._path is not None
        _compress(self._path)


def _compress(path: Path) -> None:
    with path.open("rb") as src, gzip.open(f"{path}.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(path)


def _seq_of(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        return 0


def _node_key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _pod_key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")
