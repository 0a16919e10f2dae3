"""Record on the real control plane, replay offline: `kopf-scheduler run --record`, then `kopf-scheduler replay`.

The operator schedules pods onto identical nodes (so most placements are random tie-breaks among
equal scores) while it records; it is stopped, which writes the last segment. Replaying the trace
with the policy that recorded it reproduces every placement (``differing == 0``); a bin-packing
candidate (NodeResourcesFit with MostAllocated) places differently and leaves whole nodes free.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kube_helpers import ROOT, Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

pytestmark = pytest.mark.cluster

POLICY = "e2e-replay"
PODS = 12
BINPACK = {
    "kind": "SchedulingPolicy",
    "spec": {
        "schedulerName": POLICY,
        "predicates": [{"name": "NodeResourcesFit"}],
        "priorities": [
            {"name": "NodeResourcesFit", "weight": 1, "argument": {"scoringStrategy": {"type": "MostAllocated"}}}
        ],
    },
}


def replay(trace: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "kopf_scheduler.commands", "replay", str(trace), "--output", "json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_replaying_a_recording_with_its_own_policy_reproduces_it(
    sa_kubeconfig: Path,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    namespace: str,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api)
    trace = tmp_path / "trace"
    op = Operator(tmp_path / "operator.log", ["--policy", POLICY, "--record", str(trace)], sa_kubeconfig)
    try:
        with Group(api, scheduler=POLICY) as group:
            create_policy(custom, POLICY, {"schedulerName": POLICY})
            wait_accepted(custom, POLICY, op)
            nodes = group.nodes(4, cpu="4", memory="16Gi")
            names = [f"p-{i}" for i in range(PODS)]
            for name in names:
                core.create_namespaced_pod(namespace, group.pod(name, cpu="500m", memory="1Gi"))
            placed = wait(
                op,
                lambda: (
                    (p := {n: core.read_namespaced_pod(n, namespace).spec.node_name for n in names})
                    and all(p.values())
                    and p
                ),
                timeout=60,
                message="every pod bound",
            )
            assert set(placed.values()) <= set(nodes)
            op.stop()  # SIGTERM: the recorder writes what is queued and gzips the segment
    finally:
        op.stop()
        delete_policy(custom, POLICY)
    assert sorted(p.name for p in trace.iterdir()) == ["trace-000001.jsonl.gz"], op.tail()

    same = replay(trace)
    assert same["pods"] == PODS and same["differing"] == 0, same
    assert same["followed_draws"], "identical nodes: the recorded tie-breaks were followed"

    candidate = tmp_path / "binpack.yaml"
    candidate.write_text(json.dumps(BINPACK))
    binpack = replay(trace, "--policy", str(candidate))
    assert isinstance(binpack["differing"], int) and binpack["differing"] > 0, binpack
    recorded, replayed = binpack["recorded"], binpack["replayed"]
    assert isinstance(recorded, dict) and isinstance(replayed, dict)
    assert recorded["placed"] == replayed["placed"] == PODS
    # on this test's nodes (the cluster may hold other tests' nodes): bin packing leaves some empty
    rows = binpack["nodes"]
    assert isinstance(rows, list)
    ours = [n for n in rows if n["node"] in nodes]
    assert len(ours) == 4
    empty_recorded = sum(1 for n in ours if n["recorded"]["cpu_millis"] == 0)
    empty_replayed = sum(1 for n in ours if n["replayed"]["cpu_millis"] == 0)
    assert empty_replayed > empty_recorded, ours
