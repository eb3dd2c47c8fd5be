"""Checkpoints of the base table: every writer of it checkpoints every ten commits.

A base table merged into batch after batch (merge mode IMMEDIATE) or published to by
compactions got a checkpoint only every 100 commits (deltalake's default) or never (the
publishing commits), so every reader, gluon's and everyone else's, replayed a longer log.
Real SQLite source, Delta tables read without gluon (deltalake, Polars); a kill at the
checkpoint leaves a table that reads as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.incremental import (
    SEED,
    enable,
    extract,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.workload import canonical
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.lake import storage
from gluon.lake.checkpoints import CHECKPOINT_INTERVAL, checkpoint_due, newest_checkpoint
from gluon.lake.publish import publish, stage_location
from gluon.repo import Repository

IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"


def _base_path(table: str) -> str:
    record = Repository(load_settings().repo_url).get_table(table.upper())
    assert record is not None
    return record.base_path


def _rows(records: list[dict[str, object]]) -> dict[object, tuple[object, ...]]:
    return {row[0]: row for row in map(canonical, records)}


def _extract_in_small_batches(table: str, env: dict[str, str] | None = None) -> int:
    done = run_offload_process(
        "-t", table, "-x", "--incremental-run-extraction", "--incremental-batch-size=2", env=env
    )
    return done.returncode


def test_checkpoint_rule() -> None:
    assert not checkpoint_due(0, None)
    assert not checkpoint_due(CHECKPOINT_INTERVAL - 2, None)
    assert checkpoint_due(CHECKPOINT_INTERVAL - 1, None)  # ten commits: versions 0 to 9
    assert not checkpoint_due(CHECKPOINT_INTERVAL + 5, 10)
    assert checkpoint_due(CHECKPOINT_INTERVAL + 10, 10)
    assert checkpoint_due(CHECKPOINT_INTERVAL + 13, 10), "a skipped multiple still checkpoints"


def test_immediate_base_is_checkpointed_and_read_equal_by_outside_readers(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    path = _base_path(source.table)
    workload.round(40)
    assert _extract_in_small_batches(source.table) == 0
    version = int(DeltaTable(path).version())
    assert version > CHECKPOINT_INTERVAL, "the test needs more commits than the interval"
    newest = newest_checkpoint(path)
    assert newest is not None, f"no checkpoint after {version} commits"
    assert version - newest < CHECKPOINT_INTERVAL
    expected = workload.source_rows()
    assert _rows(storage.read_delta(path).to_pylist()) == expected
    assert _rows(pl.read_delta(path).to_dicts()) == expected


def test_a_kill_at_the_checkpoint_leaves_a_readable_base(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    path = _base_path(source.table)
    workload.round(40)
    crashed = _extract_in_small_batches(source.table, {"GLUON_FAULT": "lake.checkpoint"})
    assert crashed == FAULT_EXIT_CODE, "the extraction never reached a checkpoint"
    committed = int(DeltaTable(path).version())
    assert pl.read_delta(path).height == storage.read_delta(path).num_rows  # readable
    assert newest_checkpoint(path) is None
    extract(run_cli, source)
    assert int(DeltaTable(path).version()) > committed
    expected = workload.source_rows()
    assert _rows(storage.read_delta(path).to_pylist()) == expected
    assert _rows(pl.read_delta(path).to_dicts()) == expected
    assert newest_checkpoint(path) is not None


def test_publishing_checkpoints_and_keeps_older_versions_readable(tmp_path: Path) -> None:
    """A full compaction's publish commit checkpoints when due; a version before it (one a
    compaction retains) is still read by deltalake (log entries are kept)."""
    base = str(tmp_path / "base")
    for number in range(CHECKPOINT_INTERVAL - 1):  # versions 0 to 8
        write_deltalake(base, pa.table({"id": [number]}), mode="append")
    assert newest_checkpoint(base) is None
    stage = stage_location(base, 7)
    write_deltalake(stage, pa.table({"id": [100, 101]}))
    version = publish(base, stage, 7)
    assert version == CHECKPOINT_INTERVAL - 1
    assert newest_checkpoint(base) == version
    assert sorted(pl.read_delta(base)["id"].to_list()) == [100, 101]
    assert sorted(storage.read_delta(base, 3).column("id").to_pylist()) == [0, 1, 2, 3]
