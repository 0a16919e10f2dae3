"""`kopf-scheduler demo` end to end: its own control plane (kube-controller-manager included), KWOK, the
operator, 6 nodes and workloads making 30 pods, plus a DaemonSet pod on each node.

Runs the command as a subprocess; the demo starts its own control plane on free ports in
a temporary workdir (beside the session's cluster, which this test does not use).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(180),
]


def test_demo_places_every_schedulable_pod(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopf_scheduler.commands",
            "demo",
            "--nodes",
            "6",
            "--pods",
            "30",
            "--timeout",
            "120",
            "--workdir",
            str(workdir),
            "--record",
            str(tmp_path / "trace"),
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr}\n--- operator.log tail:\n" + "\n".join(
        (workdir / "operator.log").read_text(errors="replace").splitlines()[-40:]
        if (workdir / "operator.log").exists()
        else ["(none)"]
    )
    placed = re.search(r"^placed (\d+) / unschedulable (\d+) \(of 36 pods\)$", out, re.M)
    assert placed, out
    assert int(placed.group(1)) + int(placed.group(2)) == 36
    assert int(placed.group(2)) >= 1, "the demo submits a few impossible pods on purpose"
    assert re.search(r"^throughput: [\d.]+ pods/s", out, re.M), out
    assert "unschedulable, by reason (FailedScheduling events):" in out
    assert re.search(r"^demo-node-00 +zone-a", out, re.M), out
    assert "per zone: " in out and "where to look:" in out
    # the controllers made the pods, and each workload's pods are read by their owner
    rows = {m[0]: m[1:] for m in re.findall(r"^(\w+/[\w-]+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)", out, re.M)}
    assert rows["DaemonSet/node-agent"] == ("6", "6", "6", "6", "0"), out  # every node, cordoned and tainted ones too
    wanted, pods, placed_, running, done = rows["Job/batch"]
    assert wanted == pods == placed_ == done and running == "0", out  # KWOK completed the Job's pods
    for workload in ("StatefulSet/db", "Deployment/inference", "Deployment/cache", "Deployment/gpu"):
        wanted, pods, placed_, running, _ = rows[workload]
        assert wanted == pods == placed_ == running != "0", (workload, out)
    assert re.search(
        r"^volumes: (\d+) of the \1 claims of StatefulSet/db Bound, \1 of them to volumes the .*, \1 for the node "
        r"kopf-scheduler selected$",
        out,
        re.M,
    ), out
    assert re.search(r"^DRA: (\d+) ResourceClaims the resourceclaim controller made .*, \1 allocated", out, re.M)
    assert str(workdir / "operator.log") in out
    assert "OK: every schedulable pod was placed" in out
    # KWOK plays the kubelets: the nodes became Ready through it and every placed pod runs
    assert re.search(r"^      all Ready \(KWOK\) in [\d.]+s$", out, re.M), out
    running = re.search(r"^running: (\d+) of the (\d+) placed pods \(started by KWOK", out, re.M)
    assert running and running.group(1) == running.group(2) == placed.group(1), out
    assert (workdir / "kwok.log").exists()
    assert not (workdir / "state.json").exists(), "the demo must stop its control plane"
    # --record: the operator's trace of the demo replays with its own policy. Not to the same placements: the
    # trace holds nodes and pods only (sim/replay.py's limits), and what the workloads' pods are placed by reads
    # more (default spreading: their ReplicaSets, StatefulSet and Service; the inference pods: their claims).
    # tests/cluster/test_replay_e2e.py holds a replay to the same placements.
    assert f"trace in {tmp_path / 'trace'}: kopf-scheduler replay" in out, out
    replayed = subprocess.run(
        [sys.executable, "-m", "kopf_scheduler.commands", "replay", str(tmp_path / "trace"), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replayed.returncode == 0, replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["pods"] == 36
    assert report["recorded"]["placed"] == int(placed.group(1))
