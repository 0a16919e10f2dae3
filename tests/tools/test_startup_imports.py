"""What the operator imports before its first bind: the kubernetes client is not among it.

Importing the official client costs 0.3-0.4 s (about 700 generated model modules) on the path from
process start to the first bind. Kopf imports it, when installed, only to recognise its models in
``kopf.adopt`` and its kin; ``kopf_scheduler.kube`` imports Kopf with the client hidden, and gives it
back to everyone else. A fresh interpreter shows what a start imports.
"""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_kopf_comes_without_the_kubernetes_client() -> None:
    code = (
        "import sys, kopf_scheduler.kube\n"
        "print('kopf' in sys.modules, sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
        "import kubernetes.client\n"  # still there for whoever asks
        "print(kubernetes.client.V1Pod.__name__)\n"
    )
    assert _run(code).splitlines() == ["True []", "V1Pod"]


def test_an_imported_client_is_left_to_kopf() -> None:
    """Whoever imported the client first (a plugin, a test) keeps Kopf's full support of its models."""
    code = (
        "import kubernetes.client, kopf_scheduler.kube\n"
        "from kopf._cogs.helpers import thirdparty\n"
        "print(thirdparty.V1ObjectMetaSync is kubernetes.client.V1ObjectMeta)\n"
    )
    assert _run(code) == "True"
