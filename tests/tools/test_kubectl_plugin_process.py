"""The kubectl plugin run as kubectl runs it, a process of its own: the exit status and message of a usage
error, and the last line of a completion answer (its habits in-process are tests/unit/test_kubectl_cli.py)."""

from __future__ import annotations

import subprocess
import sys


def test_usage_errors_exit_1_as_kubectls_do() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kopf_scheduler.commands.kubectl", "explain", "web", "-o", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: argument -o/--output: invalid choice: 'xml'")
    assert "See 'kubectl kopf-scheduler explain --help' for usage." in done.stderr


def test_the_completion_script_ends_with_cobras_no_file_directive() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from kopf_scheduler.commands.kubectl import complete; complete()", "ex"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "explain\n:4\n")
