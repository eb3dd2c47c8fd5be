"""Stopping the service mid-run: an extraction ends after its current batch's commit, as a
success, and the next run ships the rest (``run_extraction(stopping=...)``); a compaction
ends before its next step or in its wait, and the next one resumes it
(``run_compaction(stopping=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import sqlalchemy as sa
from support.incremental import (
    Source,
    assert_no_duplicate_sequences,
    lake_rows,
    sqlite_source,
)
from typer.testing import Result

from gluon.compact import CompactionOptions, run_compaction
from gluon.config import load_settings
from gluon.extract.run import run_extraction
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.states import ExtractionStatus


def _enabled_items(
    tmp_path: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> Source:
    """A SQLite ``items`` table (ids 1 and 2) offloaded with incremental update enabled."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(sa.text("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)"))
        db.execute(sa.text("INSERT INTO items VALUES (1, 'a'), (2, 'b')"))
    enabled = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    return source


def test_a_stopping_extraction_ends_after_one_batch_and_the_next_ships_the_rest(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = _enabled_items(tmp_path, run_cli, monkeypatch)
    with source.engine.begin() as db:
        for key in range(3, 28):
            db.execute(sa.text("INSERT INTO items VALUES (:k, 'new')"), {"k": key})
    settings = load_settings()
    asked: list[int] = []

    def stopping() -> bool:
        asked.append(1)
        return True

    first = run_extraction(settings, TableRef.parse(source.table), batch_size=10, stopping=stopping)
    assert (first.rows_read, asked) == (10, [1])
    runs = Repository(settings.repo_url).incremental.extraction_runs("MAIN.ITEMS", limit=1)
    assert runs[0].status == ExtractionStatus.SUCCESS
    second = run_extraction(settings, TableRef.parse(source.table), batch_size=10)
    assert second.rows_read == 15
    shown = sorted(cast(int, row["id"]) for row in lake_rows("SELECT id FROM main.items"))
    assert shown == list(range(1, 28))
    assert_no_duplicate_sequences(source)


def test_a_stopping_compaction_ends_in_its_wait_and_the_next_one_resumes(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM of the service during a compaction's wait for queries: the run stops there
    (not after the wait), stays open at that step, and the next compaction finishes it."""
    source = _enabled_items(tmp_path, run_cli, monkeypatch)
    with source.engine.begin() as db:
        db.execute(sa.text("UPDATE items SET v = 'changed' WHERE id = 1"))
        db.execute(sa.text("INSERT INTO items VALUES (3, 'c')"))
    settings = load_settings()
    run_extraction(settings, TableRef.parse(source.table))
    repo = Repository(settings.repo_url)
    options = CompactionOptions(table=TableRef.parse(source.table), wait_minutes=0.2)

    def stopping() -> bool:  # asked to stop once the wait for queries has begun
        run = repo.compaction.open_run("MAIN.ITEMS")
        return run is not None and run.current_step == "wait_for_queries"

    first = run_compaction(settings, options, stopping=stopping)
    assert first.stopped and "stopped before finishing step wait_for_queries" in first.message
    run = repo.compaction.open_run("MAIN.ITEMS")
    assert run is not None and run.status == "running"
    finished = {step.step for step in repo.compaction.steps(run.id) if step.status == "success"}
    assert "switch_views" in finished and "wait_for_queries" not in finished
    expected = [(1, "changed"), (2, "b"), (3, "c")]
    shown = [(row["id"], row["v"]) for row in lake_rows("SELECT id, v FROM main.items ORDER BY id")]
    assert shown == expected  # the switched views show the compacted base meanwhile

    second = run_compaction(settings, options)
    assert second.resumed and not second.stopped and "complete" in second.message
    assert repo.compaction.open_run("MAIN.ITEMS") is None
    shown = [(row["id"], row["v"]) for row in lake_rows("SELECT id, v FROM main.items ORDER BY id")]
    assert shown == expected
    assert_no_duplicate_sequences(source)
