"""Changelog deletes use the changelog's key: on PostgreSQL whatever its statistics say, on
SQLite one statement per batch, a range search of the key per run of ``gl_seq``.

A changelog is emptied by every extraction and refilled by the application, so the
planner's statistics are usually stale: analyzed while (nearly) empty, they claim a
changelog of a million rows holds one. The delete of each extracted batch then ran as
a sequential scan with a linear search of the batch's array for every row (the
array arrived as ``integer[]``, so ``bigint = ANY`` could not be hashed): 1M changes
in batches of 100k did not finish in minutes (issue 14). Each batch's delete must
reach its rows through the primary key.

The plans come from the server (``auto_explain`` into the test cluster's log), for
every statement the extraction runs.

SQLite deleted in 500-value ``IN`` lists (2,000 statements per 1M changes); it now
deletes by the runs PostgreSQL uses (``capture.sequence_runs``), bound as OR-ed
``BETWEEN`` pairs: the statements the extraction sends are recorded and each one's
``EXPLAIN QUERY PLAN`` must search the key by range, never scan the changelog.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import Source, enable, lake_rows, sqlite_source
from support.postgres import PostgresServer
from typer.testing import Result

ROWS = 24_000
BATCH = 2_000  # 12 batches: more than ten deletes from one changelog


def _delete_plans(log: str) -> list[str]:
    """The logged plans (text format) of the DELETE statements on the changelog."""
    entries: list[list[str]] = []
    for line in log.splitlines():
        if line[:1].isspace() and entries:
            entries[-1].append(line)
        else:
            entries.append([line])
    plans = ["\n".join(entry) for entry in entries if "plan:" in entry[0]]
    return [plan for plan in plans if "Query Text: DELETE FROM app_h.items_log" in plan]


def test_every_batch_delete_uses_the_changelog_key(
    pg_url: str,
    pg_server: PostgresServer,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = sa.create_engine(pg_url)
    database = sa.make_url(pg_url).database
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        db.execute(sa.text("CREATE TABLE app.items (id integer PRIMARY KEY, v text NOT NULL)"))
        db.execute(
            sa.text(f"INSERT INTO app.items SELECT g, 'a' FROM generate_series(1, {ROWS}) g")
        )
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    enable(run_cli, Source("postgresql", pg_url, "app"), "CHANGELOG")
    with engine.begin() as db:
        # Autovacuum must not refresh the statistics half-way: the test sets them itself.
        db.execute(sa.text("ALTER TABLE app_h.items_log SET (autovacuum_enabled = false)"))
        db.execute(sa.text("UPDATE app.items SET v = 'b'"))
    with engine.begin() as db:
        # What autovacuum leaves after an extraction emptied the changelog: analyzed with
        # no live row, the pages still there (ANALYZE's pg_class update survives the rollback).
        db.execute(sa.text("DELETE FROM app_h.items_log"))
        db.execute(sa.text("ANALYZE app_h.items_log"))
        db.rollback()
    with engine.connect() as db:
        pages, tuples = db.execute(
            sa.text(
                "SELECT relpages, reltuples FROM pg_class WHERE oid = 'app_h.items_log'::regclass"
            )
        ).one()
    assert pages > 0 and tuples == 0, (pages, tuples)
    with engine.begin() as db:
        for setting in (
            "session_preload_libraries = 'auto_explain'",
            "auto_explain.log_min_duration = 0",
        ):
            db.execute(sa.text(f'ALTER DATABASE "{database}" SET {setting}'))
    engine.dispose()  # the next sessions load auto_explain
    start = pg_server.log_file.stat().st_size

    result = run_cli(
        "offload",
        "-t",
        "app.items",
        "-x",
        "--incremental-run-extraction",
        f"--incremental-batch-size={BATCH}",
    )
    assert result.exit_code == 0, result.stderr

    with pg_server.log_file.open(errors="replace") as log:
        log.seek(start)
        plans = _delete_plans(log.read())
    assert len(plans) == ROWS // BATCH, f"{len(plans)} delete plans logged"
    scans = [plan for plan in plans if "Seq Scan on items_log" in plan]
    shown = "\n".join(line[:160] for line in scans[0].splitlines()) if scans else ""
    assert not scans, f"{len(scans)} of {len(plans)} deletes scanned the whole changelog:\n{shown}"
    with engine.connect() as db:
        assert db.execute(sa.text("SELECT count(*) FROM app_h.items_log")).scalar() == 0
    assert lake_rows("SELECT count(*) AS n FROM app.items") == [{"n": ROWS}]


KEY_RANGE_SEARCH = re.compile(r"^SEARCH \S+ USING INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)$")


def test_sqlite_deletes_each_batch_in_one_statement_by_key_ranges(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    engine = source.engine
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE main.items (id integer PRIMARY KEY, v text NOT NULL)"))
        db.execute(
            sa.text("INSERT INTO main.items (id, v) VALUES (:id, 'a')"),
            [{"id": key} for key in range(1, ROWS + 1)],
        )
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    enable(run_cli, source, "CHANGELOG")
    with engine.begin() as db:
        db.execute(sa.text("UPDATE main.items SET v = 'b'"))
        # Holes in gl_seq (as rolled-back changes leave): a batch is then several runs.
        db.execute(sa.text("DELETE FROM main.main_h_items_log WHERE gl_seq % 1000 = 0"))
        changes = db.execute(sa.text("SELECT count(*) FROM main.main_h_items_log")).scalar_one()
    engine.dispose()

    deletes: list[tuple[str, Any]] = []

    def record(conn: sa.Connection, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().startswith("DELETE FROM main.main_h_items_log"):
            deletes.append((statement, parameters))

    sa.event.listen(sa.Engine, "before_cursor_execute", record)
    try:
        result = run_cli(
            "offload",
            "-t",
            source.table,
            "-x",
            "--incremental-run-extraction",
            f"--incremental-batch-size={BATCH}",
        )
    finally:
        sa.event.remove(sa.Engine, "before_cursor_execute", record)
    assert result.exit_code == 0, result.stderr

    assert len(deletes) == math.ceil(changes / BATCH), f"{len(deletes)} DELETE statements"
    with closing(sqlite3.connect(tmp_path / "app.db")) as source_db:
        for statement, parameters in deletes:
            explained = source_db.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            plan = [row[-1] for row in explained]
            searches = [step for step in plan if KEY_RANGE_SEARCH.match(step)]
            scans = [step for step in plan if step.startswith("SCAN")]
            assert searches and not scans, f"{statement[:200]}\n{plan}"
        assert source_db.execute("SELECT count(*) FROM main_h_items_log").fetchone() == (0,)
    assert lake_rows("SELECT count(*) AS n FROM main.items") == [{"n": ROWS}]
