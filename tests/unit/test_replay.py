"""Record and replay: the trace's pruning, the recorder's rotation and bounds, the replay and its reports.

The "live" side of these tests is a ``Simulation`` whose tie-break is a ``DrawLog``, fed to a real
``Recorder`` as the operator's handlers and loop feed it (the real operator records in
tests/cluster/test_replay_e2e.py).
"""

from __future__ import annotations

import gzip
import itertools
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod

from kopf_scheduler.commands import main
from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.model.objects import ANNOTATION_PREFER_AVOID_PODS
from kopf_scheduler.core.model.parsing import parse_node, parse_pod
from kopf_scheduler.core.scheduling import trace
from kopf_scheduler.core.scheduling.cycle import Unschedulable, Wait
from kopf_scheduler.core.state.cache import SchedulerCache
from kopf_scheduler.edge.recorder import DrawLog, Recorder
from kopf_scheduler.sim.png import line_chart
from kopf_scheduler.sim.replay import FollowingRandom, TraceError, read_trace, recorded_profile, replay
from kopf_scheduler.sim.replay_report import report_json, report_markdown
from kopf_scheduler.sim.simulator import Simulation

NAME = "recorded"
SPEC: dict[str, Any] = {"schedulerName": NAME}  # today's default profile: LeastAllocated spreads
BINPACK: dict[str, Any] = {
    "schedulerName": NAME,
    "predicates": [{"name": "NodeResourcesFit"}],
    "priorities": [
        {"name": "NodeResourcesFit", "weight": 1, "argument": {"scoringStrategy": {"type": "MostAllocated"}}}
    ],
}


def profile_of(spec: dict[str, Any]) -> Profile:
    p = validate_policy(spec)
    assert not isinstance(p, list), p
    return p


def ticking(step: float = 0.01) -> Any:
    counter = itertools.count()
    return lambda: 1000.0 + step * next(counter)


def record_live(directory: Path, *, nodes: int = 6, pods: int = 24, **recorder: Any) -> Recorder:
    """A live run stood in by a Simulation of SPEC, recorded as the operator records (see the module docstring)."""
    rec = Recorder(directory, clock=ticking(), **recorder)
    rec.start()
    rec.policy("default", 1, NAME, SPEC)
    node_bodies = [make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods="110").raw() for i in range(nodes)]
    for body in node_bodies:
        rec.node("ADDED", body)
        rec.node("MODIFIED", body)  # a heartbeat: nothing scheduling reads changed
    live = Simulation(SchedulerCache(), profile_of(SPEC))
    live.rng = rng = DrawLog(7)
    for body in node_bodies:
        live.node_changed(parse_node(body))
    for i in range(pods):
        body = make_pod(f"p{i}").scheduler(NAME).req(cpu="500m", memory="1Gi").raw()
        body["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cret"}]
        pod = parse_pod(body)
        rec.pod("ADDED", body)
        placed = live.schedule_one(pod)
        outcome = Wait(pod, placed.node, ()) if placed.node else Unschedulable(placed.message, frozenset())
        rec.decision(pod.key, pod.uid, NAME, outcome, rng.take())
        if placed.node:
            rec.pod("DELETED", body)  # it left the unassigned pods' watch
            rec.pod("ADDED", {**body, "spec": {**body["spec"], "nodeName": placed.node}})
    rec.close()
    return rec


# ----------------------------------------------------------------------------- pruning


def test_prune_pod_keeps_what_scheduling_reads_and_nothing_secret() -> None:
    body = (
        make_pod("web")
        .req(cpu="250m", memory="64Mi")
        .host_port(8080)
        .node_selector(disk="ssd")
        .annotation("kubectl.kubernetes.io/last-applied-configuration", '{"env": "s3cret"}')
        .raw()
    )
    body["spec"]["containers"][0].update(env=[{"name": "PASSWORD", "value": "s3cret"}], command=["run", "--token=x"])
    body["spec"]["volumes"] = [{"name": "t", "secret": {"secretName": "tls", "items": [{"key": "k"}]}}]
    pruned = trace.prune_pod(body)
    text = json.dumps(pruned)
    assert "s3cret" not in text and "--token" not in text and "annotations" not in text
    full, kept = parse_pod(body), parse_pod(pruned)
    for f in ("requests", "host_ports", "node_selector", "priority", "labels", "scheduler_name", "volumes"):
        assert getattr(kept, f) == getattr(full, f), f


def test_prune_node_keeps_prefer_avoid_pods_only() -> None:
    body = make_node("n1").annotation(ANNOTATION_PREFER_AVOID_PODS, "{}").annotation("other", "x").raw()
    pruned = trace.prune_node(body)
    assert pruned["metadata"]["annotations"] == {ANNOTATION_PREFER_AVOID_PODS: "{}"}
    assert parse_node(pruned).allocatable == parse_node(body).allocatable


# ----------------------------------------------------------------------------- recording


def test_recorder_writes_a_checkpoint_then_changes_and_drops_unchanged_ones(tmp_path: Path) -> None:
    record_live(tmp_path, nodes=2, pods=3)
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["trace-000001.jsonl.gz"]
    lines = [json.loads(line) for line in gzip.open(files[0], "rt")]
    assert lines[0]["e"] == trace.CHECKPOINT and lines[0]["nodes"] == []
    kinds = [r["e"] for r in lines[1:]]
    assert kinds.count(trace.NODE) == 2  # the two heartbeats were not written
    assert kinds.count(trace.DECISION) == 3 and kinds.count(trace.POLICY) == 1
    assert "s3cret" not in files[0].read_bytes().decode("latin-1")


def test_recorder_rotates_within_its_bound_and_every_segment_opens_with_a_checkpoint(tmp_path: Path) -> None:
    record_live(tmp_path, nodes=4, pods=60, segment_bytes=4096, segments=3)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 3 and all(f.suffix == ".gz" for f in files)
    for f in files:
        first = json.loads(gzip.open(f, "rt").readline())
        assert first["e"] == trace.CHECKPOINT
    later = json.loads(gzip.open(files[0], "rt").readline())
    assert len(later["nodes"]) == 4  # the nodes of the rotated-away segments are in the checkpoint
    t = read_trace(tmp_path)
    assert t.files == files
    result = replay(t, profile_of(SPEC), scheduler_name=NAME)
    assert result.pods and not result.skipped or all("oldest segment" in s for s in result.skipped)


def test_recorder_counts_what_it_cannot_keep_up_with(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, capacity=2, clock=ticking())
    for i in range(5):  # the writer has not started: the queue fills
        rec.node("ADDED", make_node(f"n{i}").raw())
    rec.start()
    rec.close()
    t = read_trace(tmp_path)
    assert t.dropped == 3 and sum(1 for r in t.records if r["e"] == trace.NODE) == 2


def test_a_reused_directory_is_read_from_its_newest_run(tmp_path: Path) -> None:
    record_live(tmp_path, nodes=2, pods=2)
    record_live(tmp_path, nodes=3, pods=5)
    t = read_trace(tmp_path)
    assert len(t.files) == 1 and t.files[0].name == "trace-000002.jsonl.gz"
    assert len(list(t.decisions())) == 5


def test_draw_log_and_following_random_agree() -> None:
    live = DrawLog(3)
    values = [live.randrange(n) for n in (5, 7, 2)]
    follower = FollowingRandom(live.take(), seed=99)
    assert [follower.randrange(n) for n in (5, 7, 2)] == values and follower.followed == 3
    assert live.take() == []
    assert FollowingRandom([(5, 4)]).randrange(6) in range(6)  # another range: its own draw


# ----------------------------------------------------------------------------- replaying


def test_replay_with_the_recorded_policy_reproduces_every_placement(tmp_path: Path) -> None:
    record_live(tmp_path)
    t = read_trace(tmp_path)
    profile, name = recorded_profile(t, NAME)
    assert name == "default generation 1"
    result = replay(t, profile, scheduler_name=NAME)
    assert len(result.pods) == 24 and result.differing == 0
    assert result.followed_draws > 0  # identical nodes: the ties were broken as recorded


def test_replay_without_the_recorded_draws_breaks_ties_its_own_way(tmp_path: Path) -> None:
    record_live(tmp_path)
    result = replay(read_trace(tmp_path), profile_of(SPEC), scheduler_name=NAME, seed=5, follow_draws=False)
    assert result.differing > 0


def test_a_bin_packing_candidate_places_differently_and_uses_fewer_nodes(tmp_path: Path) -> None:
    record_live(tmp_path)
    result = replay(read_trace(tmp_path), profile_of(BINPACK), scheduler_name=NAME)
    report = json.loads(report_json(result))
    assert report["differing"] == result.differing > 0
    assert report["recorded"]["placed"] == report["replayed"]["placed"] == 24
    assert report["replayed"]["nodes_with_pods"] < report["recorded"]["nodes_with_pods"] == 6
    assert report["replayed"]["largest_free_cpu_millis"] == 4000  # bin packing leaves whole nodes free
    assert report["recorded"]["largest_free_cpu_millis"] < 4000
    assert report["series"] and len(report["nodes"]) == 6
    md = report_markdown(result)
    assert f"**{result.differing}** of 24 pods placed differently" in md and "| pods placed | 24 | 24 |" in md


def test_unschedulable_pods_and_preemptions_are_compared(tmp_path: Path) -> None:
    record_live(tmp_path, nodes=1, pods=10)  # 4 cpu: 8 pods of 500m fit, 2 do not
    small = {**SPEC, "percentageOfNodesToScore": 100}
    result = replay(read_trace(tmp_path), profile_of(small), scheduler_name=NAME)
    report = json.loads(report_json(result))
    assert report["recorded"]["unschedulable"] == report["replayed"]["unschedulable"] == 2
    assert report["differing"] == 0 and report["only_recorded_placed"] == []


def test_read_trace_refuses_what_is_not_a_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no trace segments"):
        read_trace(tmp_path)
    (tmp_path / "trace-000001.jsonl").write_text('{"e": "node"}\n')
    with pytest.raises(TraceError, match="checkpoint"):
        read_trace(tmp_path)


def test_read_trace_keeps_the_newest_run_and_forgives_only_a_last_line_cut_short(tmp_path: Path) -> None:
    def segment(name: str, *records: dict[str, object], tail: str = "") -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
        return path

    segment("trace-000001.jsonl", {"e": "checkpoint", "run": "old"}, {"e": "node", "n": 1})
    segment("trace-000002.jsonl", {"e": "checkpoint", "run": "new"}, {"e": "node", "n": 2}, tail='{"e": "no')
    with gzip.open(tmp_path / "trace-000003.jsonl.gz", "wt") as f:
        f.write(json.dumps({"e": "checkpoint", "run": "new"}) + "\n" + json.dumps({"e": "dropped", "count": 3}) + "\n")
    (tmp_path / "trace-notanumber.jsonl").write_text("ignored")
    t = read_trace(tmp_path)
    assert [r.get("n") for r in t.records] == [2, None]  # the old run left out; the cut-short line forgiven
    assert t.dropped == 3 and [p.name for p in t.files] == ["trace-000002.jsonl", "trace-000003.jsonl.gz"]

    segment("trace-000004.jsonl", {"e": "checkpoint", "run": "new"}, tail='garbage\n{"e": "node"}\n')
    with pytest.raises(TraceError, match=r"trace-000004.jsonl: line 2 is not JSON"):
        read_trace(tmp_path)
    (tmp_path / "trace-000004.jsonl").unlink()
    (tmp_path / "trace-000005.jsonl.gz").write_bytes(gzip.compress(b'{"e": "checkpoint"}\n')[:-12])  # cut short
    with pytest.raises(TraceError, match=r"trace-000005.jsonl.gz: cannot read: "):
        read_trace(tmp_path)
    with pytest.raises(TraceError, match="not a directory"):
        read_trace(tmp_path / "trace-000001.jsonl")


# ----------------------------------------------------------------------------- the command and the chart


def test_png_is_a_valid_image_of_the_asked_size() -> None:
    data = line_chart([[(0.0, 0.1), (1.0, 0.5)], [(0.0, 0.2), (1.0, 0.9)]], width=120, height=60)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (120, 60)
    idat_len = struct.unpack(">I", data[33:37])[0]
    assert data[37:41] == b"IDAT"
    raw = zlib.decompress(data[41 : 41 + idat_len])
    assert len(raw) == height * (1 + 3 * width)
    assert bytes((31, 119, 180)) in raw and bytes((255, 127, 14)) in raw


def test_replay_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_live(tmp_path / "trace")
    candidate = tmp_path / "binpack.yaml"
    candidate.write_text(json.dumps({"kind": "SchedulingPolicy", "spec": BINPACK}))
    assert main(["replay", str(tmp_path / "trace"), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["differing"] == 0
    png = tmp_path / "util.png"
    assert main(["replay", str(tmp_path / "trace"), "--policy", str(candidate), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "placed differently" in out and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["replay", str(tmp_path / "nothing")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_a_pending_pod_deleted_live_is_not_placed_by_the_replay(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, clock=ticking())
    rec.start()
    rec.policy("default", 1, NAME, SPEC)
    rec.node("ADDED", make_node("small").capacity(cpu="1", memory="4Gi", pods="110").raw())
    body = make_pod("big").scheduler(NAME).req(cpu="2").raw()
    pod = parse_pod(body)
    rec.pod("ADDED", body)
    rec.decision(pod.key, pod.uid, NAME, Unschedulable("0/1 nodes are available: 1 Insufficient cpu.", frozenset()))
    rec.pod("DELETED", body)  # the user deleted it while it was pending
    rec.node("ADDED", make_node("large").capacity(cpu="8", memory="4Gi", pods="110").raw())  # room, too late
    rec.close()
    t = read_trace(tmp_path)
    deleted = next(r for r in t.records if r["e"] == trace.POD and r["op"] == "DELETED")
    assert deleted["obj"]["spec"] == {"nodeName": ""} and "containers" not in json.dumps(deleted)  # identity only
    result = replay(t, profile_of(SPEC), scheduler_name=NAME)
    assert [(p.recorded_node, p.replayed_node) for p in result.pods] == [(None, None)]


def test_pods_bound_under_another_scheduler_name_are_replayed_where_they_went(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, clock=ticking())
    rec.start()
    rec.policy("default", 1, NAME, SPEC)
    for name in ("a", "b"):
        rec.node("ADDED", make_node(name).capacity(cpu="2", memory="4Gi", pods="110").raw())
    other = make_pod("other").scheduler("someone-else").req(cpu="2").raw()
    rec.pod("ADDED", other)
    rec.decision("default/other", other["metadata"]["uid"], "someone-else", Wait(parse_pod(other), "a", ()))
    rec.pod("ADDED", {**other, "spec": {**other["spec"], "nodeName": "a"}})  # written as a reference
    ours = make_pod("ours").scheduler(NAME).req(cpu="1").raw()
    rec.pod("ADDED", ours)
    rec.decision("default/ours", ours["metadata"]["uid"], NAME, Wait(parse_pod(ours), "b", ()))
    rec.close()
    t = read_trace(tmp_path)
    assert any(r.get("ref") for r in t.records)
    result = replay(t, profile_of(SPEC), scheduler_name=NAME)  # "a" is full: the pod of the other name holds it
    assert [(p.pod, p.replayed_node) for p in result.pods] == [("default/ours", "b")] and result.differing == 0
