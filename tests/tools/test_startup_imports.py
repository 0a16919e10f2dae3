"""What ``kopf-scheduler run`` imports before its first bind: the kubernetes client is not among it.

Importing the official client costs 0.3-0.4 s (about 700 generated model modules) on the path from
process start to the first bind. Kopf imports it, when installed, only to recognise its models in
``kopf.adopt`` and its kin; ``kopf_scheduler.kube`` imports Kopf with the client hidden, and gives it
back to everyone else (static credentials do without it: tests/tools/test_credentials_import.py).
A fresh interpreter shows what a start imports.
"""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """\
import sys
from kopf_scheduler.commands import main
assert main(["run", "--record", "unused", "--record-segments", "0"]) == 2  # refused once run() imported Kopf
from kopf_scheduler.kube import app, handlers, leader, login, serving, supervision  # what _serve imports
print('kopf' in sys.modules, sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))
import kubernetes.client
print(kubernetes.client.V1Pod.__name__)
"""


def test_the_operator_imports_kopf_without_the_kubernetes_client() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True []", "V1Pod"]  # and the client is still there for whoever asks
