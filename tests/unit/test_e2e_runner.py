"""kopf_scheduler.cluster.e2e's pure parts: reading ginkgo's JSON report, the table, the command line."""

from __future__ import annotations

import json
from pathlib import Path

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.cluster.e2e import CONFORMANCE, E2eInstall, SpecResult, e2e_argv, read_report, table


def _spec(hierarchy: list[str], leaf: str, state: str, kind: str = "It", message: str = "") -> dict[str, object]:
    return {
        "ContainerHierarchyTexts": hierarchy,
        "LeafNodeText": leaf,
        "LeafNodeType": kind,
        "State": state,
        "RunTime": 2_500_000_000,
        "Failure": {"Message": message} if message else None,
    }


def test_the_report_gives_each_spec_its_full_name_state_and_failure(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    specs = [
        _spec(["[sig-scheduling] SchedulerPredicates"], "validates X [Conformance] [Serial]", "passed"),
        _spec(
            ["[sig-scheduling] SchedulerPreemption", "PodTopologySpread Preemption"],
            "validates Y",
            "failed",
            "",
            "boom\nline 2",
        ),
        _spec([], "", "passed", kind="SynchronizedBeforeSuite"),  # setup that passed: left out
        _spec([], "", "failed", kind="SynchronizedBeforeSuite", message="no nodes"),  # failed setup: kept
        _spec(["[sig-node] Pods"], "runs", "skipped"),
    ]
    report.write_text(json.dumps([{"SpecReports": specs}]))
    results = read_report(report)
    assert [r.name for r in results] == [
        "[sig-scheduling] SchedulerPredicates validates X [Conformance] [Serial]",
        "[sig-scheduling] SchedulerPreemption PodTopologySpread Preemption validates Y",
        "SynchronizedBeforeSuite",
        "[sig-node] Pods runs",
    ]
    assert [r.state for r in results] == ["passed", "failed", "failed", "skipped"]
    assert results[0].seconds == 2.5 and results[0].passed and results[0].ran
    assert results[1].failure == "boom\nline 2" and not results[1].passed
    assert not results[3].ran


def test_the_table_has_a_row_per_spec_that_ran_anywhere() -> None:
    ours = [SpecResult("a", "passed", 1), SpecResult("b", "failed", 1, "x"), SpecResult("c", "skipped", 0)]
    theirs = [SpecResult("a", "passed", 1), SpecResult("b", "passed", 1), SpecResult("d", "timedout", 1)]
    rows = table({"kopf-scheduler": ours, "kube-scheduler": theirs})
    assert rows == [
        ("a", {"kopf-scheduler": "passed", "kube-scheduler": "passed"}),
        ("b", {"kopf-scheduler": "FAILED", "kube-scheduler": "passed"}),
        ("d", {"kopf-scheduler": "-", "kube-scheduler": "TIMEDOUT"}),
    ]


def test_the_command_line_selects_and_reports(tmp_path: Path) -> None:
    cp = ControlPlane(tmp_path / "cp", bin_dir=tmp_path / "bin")
    argv = e2e_argv(E2eInstall(tmp_path / "e2e"), cp, CONFORMANCE, tmp_path / "out" / "report.json")
    assert argv[0] == str(tmp_path / "e2e" / "bin" / "e2e.test")
    assert f"--kubeconfig={cp.kubeconfig}" in argv
    assert f"--kubectl-path={tmp_path / 'bin' / 'kubectl'}" in argv
    assert "--ginkgo.focus=\\[sig-scheduling\\].*\\[Conformance\\]" in argv
    assert f"--ginkgo.json-report={tmp_path / 'out' / 'report.json'}" in argv
    assert not any(a.startswith("--ginkgo.skip") for a in argv)
