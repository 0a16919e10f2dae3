"""``kopf-scheduler cluster`` without a control plane: what it says about a workdir where nothing runs, and the
arguments it refuses before starting anything (tests/cluster/ runs up, status and down for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.commands import main


def test_status_of_a_workdir_where_nothing_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "status", "--workdir", str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"not running (workdir {tmp_path})\n"


def test_a_negative_node_count_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "up", "--nodes", "-1", "--workdir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "error: --nodes must be 0 or more, not -1\n"
    assert list(tmp_path.iterdir()) == []  # no certificate, kubeconfig or process was made


def test_down_where_nothing_runs_stops_nothing_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "down", "--workdir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == f"stopped the control plane in {tmp_path}\n"
