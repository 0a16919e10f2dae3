"""Upstream's own scheduling e2e specs against kopf-scheduler: every [Conformance] spec of [sig-scheduling]
(e2e.test v1.37.2, the 11 specs every conformant cluster's scheduler passes) on a control plane of its own,
with kube-controller-manager and KWOK nodes, kopf-scheduler serving ``default-scheduler`` with upstream's
default profile under deploy/rbac.yaml's identity (``kopf_scheduler.cluster.e2e``).

About 8 minutes: the hostPort spec alone waits 5 minutes for a pod that must stay pending. The whole
[sig-scheduling] set, with upstream kube-scheduler as the reference, is ``kopf-scheduler cluster e2e --tests
sig-scheduling --scheduler both`` (README, "Upstream's e2e tests").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.cluster import e2e

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1500)]

CONFORMANCE_SPECS = 11


def test_every_sig_scheduling_conformance_spec_passes(tmp_path: Path, e2e_install: e2e.E2eInstall) -> None:
    results = e2e.run_suite(tmp_path / "e2e", "kopf-scheduler", e2e.CONFORMANCE, install=e2e_install)
    ran = [r for r in results if r.ran]
    failed = [f"{r.name}: {r.state}\n{r.failure}" for r in ran if not r.passed]
    log = tmp_path / "e2e" / "kopf-scheduler.log"
    assert not failed, (
        "\n\n".join(failed)
        + "\n--- kopf-scheduler.log tail:\n"
        + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    )
    assert len(ran) == CONFORMANCE_SPECS, [r.name for r in ran]
    assert all("[Conformance]" in r.name and r.name.startswith("[sig-scheduling]") for r in ran)
