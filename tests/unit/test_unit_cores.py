"""The plugin that spreads a run without the control plane over the cores (tests/unit_cores.py)."""

from __future__ import annotations

import pytest
import unit_cores


@pytest.mark.parametrize(
    ("markexpr", "spread"),
    [
        ("not cluster", True),
        ("not cluster and not tooling", True),
        ("tooling", True),
        ("", False),
        ("cluster", False),
        ("cluster or tooling", False),
        ("not tooling", False),
        ("not (", False),
    ],
)
def test_only_an_expression_that_leaves_out_every_cluster_test_is_spread(markexpr: str, spread: bool) -> None:
    assert unit_cores.selects_no_cluster_test(markexpr) is spread


@pytest.mark.parametrize(
    "args",
    [["-n", "0"], ["-n0"], ["--numprocesses=3"], ["--dist", "loadfile"], ["-p", "no:xdist"], ["--pdb"], ["--co"]],
)
def test_a_choice_on_the_command_line_is_left_alone(args: list[str]) -> None:
    assert unit_cores._chosen_by_user(["-q", "-m", "not cluster", *args])


def test_a_plain_unit_command_is_not_a_choice() -> None:
    assert not unit_cores._chosen_by_user(["-q", "-m", "not cluster", "-p", "no:cacheprovider", "tests/unit"])


def test_workers_are_at_least_one_and_at_most_four() -> None:
    assert 1 <= unit_cores.worker_count() <= 4


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-m", "not cluster"], unit_cores.worker_count()),
        (["-m", "not cluster", "-n", "0"], 0),
        (["-m", "cluster"], None),
        ([], None),
    ],
)
def test_pytest_reads_the_worker_count_the_plugin_added(
    args: list[str], expected: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook as pytest calls it: the options parsed from this repository's pyproject.toml (addopts loads it)."""
    from _pytest.config import _prepareconfig

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test may itself run in a worker
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    config = _prepareconfig([*args, __file__])
    try:
        if expected == 1:  # a one-core machine stays in one process
            expected = None
        assert config.option.numprocesses == expected
    finally:
        config._ensure_unconfigure()
