"""A reader that leaves early (``kopf-scheduler simulate ... | head``) ends the command quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "operator" / "kopf_scheduler" / "sim" / "examples"


def test_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "---\n".join(
            f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p-{k}-{'x' * 200}, namespace: default}}\n"
            "spec: {containers: [{name: c, image: i, resources: {requests: {cpu: 1m}}}]}\n"
            for k in range(600)
        )
    )  # long names make the table of 600 pods about 210 kB: more than a pipe (64 kB) and Python's buffer hold
    command = [sys.executable, "-m", "kopf_scheduler.commands", "simulate", "--cluster", str(EXAMPLES / "cluster.yaml")]
    proc = subprocess.Popen([*command, "--pods", str(pods)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"POD")
    proc.stdout.close()  # as `head -1` does
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
