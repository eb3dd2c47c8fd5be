"""Stopping the service mid-extraction: the run ends after its current batch's commit, as a
success, and the next run ships the rest (``run_extraction(stopping=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import sqlalchemy as sa
from support.incremental import assert_no_duplicate_sequences, lake_rows, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.extract import run_extraction
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.states import ExtractionStatus


def test_a_stopping_extraction_ends_after_one_batch_and_the_next_ships_the_rest(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
