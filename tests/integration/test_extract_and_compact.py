"""``--incremental-run-extraction --incremental-run-compaction``: one command brings the
base table up to date (ships the captured changes, then merges them into the base), on a
real SQLite source with the real Sail engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import error_lines
from support.incremental import (
    SEED,
    RunCli,
    enable,
    extract,
    lake_rows,
    lake_state,
    sqlite_source,
    workload_for,
)

BOTH = ("--incremental-run-extraction", "--incremental-run-compaction")


def test_one_command_extracts_and_compacts_into_the_base(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(40)
    enable(run_cli, source, "CHANGELOG", "--partition-columns=id", "--partition-granularity=10")
    workload.round(10)
    extract(run_cli, source)
    workload.round(12)  # captured, not extracted: the command must ship these first

    plan = run_cli("offload", "-t", source.table, *BOTH)
    assert plan.exit_code == 0, plan.stderr
    extraction, compaction = plan.stdout.split("Steps for")[1:]  # the extraction's plan first
    assert "captured changes" in extraction and "compaction run" in compaction, plan.stdout

    result = run_cli("offload", "-t", source.table, "-x", *BOTH, "--incremental-wait-time=0")
    assert result.exit_code == 0, result.stderr
    assert "complete" in result.stdout, result.stdout
    assert lake_state(source.schema) == workload.expected
    # Every change, those of the last round too, is in the base: nothing is left to merge.
    pending = lake_rows(f"SELECT COUNT(*) AS n FROM {source.schema}_load.items_changes")
    assert pending == [{"n": 0}]


def test_an_option_neither_action_takes_is_refused(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    result = run_cli("offload", "-t", source.table, *BOTH, "--partition-columns=id")
    assert result.exit_code == 2, result.stderr
    [line] = error_lines(result)
    assert "--partition-columns does nothing with --incremental-run-extraction or " in line
    third = run_cli("offload", "-t", source.table, *BOTH, "--incremental-discard-changes")
    assert third.exit_code == 2, third.stderr
    assert "use only one of" in error_lines(third)[0]


def test_one_command_opens_the_repository_and_the_source_once(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both parts and the compaction's acknowledging extraction share one repository (one
    migration check) and one source, as the service's runs do (issue 28 item 5)."""
    import gluon.repo
    import gluon.source

    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(20)
    enable(run_cli, source, "CHANGELOG")
    workload.round(8)
    opened: list[str] = []
    real_open, real_connect = gluon.repo._open, gluon.source._connect

    def open_repository(*args: object, **kwargs: object) -> object:
        opened.append("repository")
        return real_open(*args, **kwargs)  # type: ignore[arg-type]

    def connect_source(*args: object, **kwargs: object) -> object:
        opened.append("source")
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gluon.repo, "_open", open_repository)
    monkeypatch.setattr(gluon.source, "_connect", connect_source)
    result = run_cli("offload", "-t", source.table, "-x", *BOTH, "--incremental-wait-time=0")
    assert result.exit_code == 0, result.stderr
    assert "complete" in result.stdout, result.stdout
    assert sorted(opened) == ["repository", "source"]
    assert lake_state(source.schema) == workload.expected
    workload.round(5)  # the next command opens its own again (nothing is kept past exit)
    opened.clear()
    result = run_cli("offload", "-t", source.table, "-x", *BOTH, "--incremental-wait-time=0")
    assert result.exit_code == 0, result.stderr
    assert sorted(opened) == ["repository", "source"]
    assert lake_state(source.schema) == workload.expected
