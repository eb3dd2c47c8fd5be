"""What an IMMEDIATE sync costs beyond the merge (issue 28 item 4): the first sync after
enabling reads no staged rows (the staging table enabling creates holds none), and a backlog
within the mode's batch size is merged in one commit (each merge rewrites the base files
its keys touch). Real SQLite source, Delta tables, in-process ``offload``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.incremental import SEED, enable, sqlite_source, workload_for
from typer.testing import Result

from gluon.config import load_settings
from gluon.extract import run
from gluon.lake import merge, storage
from gluon.repo import Repository

IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"


def _immediate_table(
    tmp_path: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any]:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(30)
    enable(run_cli, source, "CHANGELOG", IMMEDIATE, "--partition-columns=id")
    return source, workload


def _sync(run_cli: Callable[..., Result], table: str, *extra: str) -> None:
    result = run_cli("offload", "-t", table, "-x", "--incremental-run-extraction", *extra)
    assert result.exit_code == 0, result.stderr


def _merges_of_last_run(table: str) -> int:
    repo = Repository(load_settings().repo_url)
    record = repo.get_table(table.upper())
    assert record is not None
    runs = repo.incremental.extraction_runs(table.upper())
    last = max(one.id for one in runs)
    return sum(
        1 for commit in merge.recent_merges(record.base_path, 20) if commit.extraction_id == last
    )


def test_the_first_sync_after_enabling_reads_no_staged_rows(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, workload = _immediate_table(tmp_path, run_cli, monkeypatch)
    workload.round(12)
    reads: list[str] = []
    real_read = storage.read_delta

    def counted(location: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(location)
        return real_read(location, *args, **kwargs)

    monkeypatch.setattr(storage, "read_delta", counted)
    _sync(run_cli, source.table)
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    assert state.delta_path not in reads  # the empty staging table is told from its log
    monkeypatch.setattr(storage, "read_delta", real_read)
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    merged = {row["id"] for row in storage.read_delta(record.base_path).to_pylist()}
    assert merged == set(workload.expected)


def test_an_immediate_sync_takes_the_modes_batch_size_unless_given_one(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 4 stands for the 500k of IMMEDIATE_BATCH_SIZE: read when the run starts, not when the
    # command line is parsed (whose default is the mode's, unknown until the table is read).
    monkeypatch.setattr(run, "IMMEDIATE_BATCH_SIZE", 4)
    source, workload = _immediate_table(tmp_path, run_cli, monkeypatch)
    workload.round(12)
    _sync(run_cli, source.table)
    assert _merges_of_last_run(source.table) >= 3
    workload.round(12)
    _sync(run_cli, source.table, "--incremental-batch-size=1000")
    assert _merges_of_last_run(source.table) == 1


def test_the_plan_names_each_modes_batch_size(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, workload = _immediate_table(tmp_path, run_cli, monkeypatch)
    workload.round(3)
    plan = run_cli("offload", "-t", source.table, "--incremental-run-extraction")
    assert plan.exit_code == 0, plan.stderr
    assert f"{run.IMMEDIATE_BATCH_SIZE} per batch" in plan.stdout
    given = run_cli(
        "offload", "-t", source.table, "--incremental-run-extraction", "--incremental-batch-size=7"
    )
    assert "7 per batch" in given.stdout
