"""Upstream's own scheduling e2e specs against kopf-scheduler (e2e.test v1.37.2, ``kopf_scheduler.cluster.e2e``):
every ``[sig-scheduling]`` spec, the 11 [Conformance] ones included, on a control plane of its own with
kube-controller-manager and KWOK nodes, kopf-scheduler serving ``default-scheduler`` with upstream's default
profile under deploy/rbac.yaml's identity; all but the specs upstream passes here and we do not yet
(``e2e.KNOWN_FAILURES``, each an open issue: remove it there when it passes).

About 10 minutes on 2 cores (592 s measured with 33 specs): the hostPort [Conformance] spec alone waits 5 minutes for a
pod that must stay pending. With upstream kube-scheduler as the reference: ``kopf-scheduler cluster e2e
--tests sig-scheduling --scheduler both`` (README, "Upstream's e2e tests").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.cluster import e2e

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(2700)]

CONFORMANCE_SPECS = 11


def test_every_sig_scheduling_spec_passes_but_the_known_failures(tmp_path: Path, e2e_install: e2e.E2eInstall) -> None:
    results = e2e.run_suite(tmp_path / "e2e", "kopf-scheduler", e2e.CI, install=e2e_install)
    ran = [r for r in results if r.ran]
    failed = [f"{r.name}: {r.state}\n{r.failure}" for r in ran if not r.passed]
    log = tmp_path / "e2e" / "kopf-scheduler.log"
    assert not failed, (
        "\n\n".join(failed)
        + "\n--- kopf-scheduler.log tail:\n"
        + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    )
    assert all(r.name.startswith("[sig-scheduling]") for r in ran)
    assert sum("[Conformance]" in r.name for r in ran) == CONFORMANCE_SPECS
    assert not [r.name for r in ran if any(known in r.name for known in e2e.KNOWN_FAILURES)]
    assert len(ran) >= 33, [r.name for r in ran]  # 35 in v1.37.2
