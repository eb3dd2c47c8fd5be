"""Tests written to catch specific wrong implementations (issue 11, point 8).

Each test names the mutation it catches; each was seen to fail with that
mutation applied. Real PostgreSQL/SQLite sources, real Sail and Delta.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import (
    SEED,
    RunCli,
    Source,
    assert_no_duplicate_sequences,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.locking import PausedCommand
from support.workload import canonical

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository


def test_a_lower_sequence_committed_after_the_read_is_not_deleted(
    pg_url: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches ``ChangelogFeed.done`` deleting ``gl_seq <= max`` instead of the rows read.

    A transaction draws a lower ``gl_seq`` but commits only after an extraction has
    read a higher one; deleting by watermark would drop that change unshipped.
    """
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(10)
    enable(run_cli, source, "CHANGELOG")
    extract(run_cli, source)
    engine = source.engine
    slow = engine.connect()
    try:
        slow_tx = slow.begin()
        slow.execute(sa.text("UPDATE app.items SET name = 'slow' WHERE id = 1"))  # draws gl_seq n
        with engine.begin() as fast:  # draws n + 1 and commits first
            fast.execute(sa.text("UPDATE app.items SET name = 'fast' WHERE id = 2"))
        with PausedCommand(
            tmp_path,
            "extract.before_changelog_delete",
            "-t",
            source.table,
            "-x",
            "--incremental-run-extraction",
        ) as extraction:
            extraction.wait_until(
                lambda: _shipped(source) == 1, "the extraction commits the fast change"
            )
            slow_tx.commit()  # n becomes visible before the extraction deletes what it read
        assert extraction.returncode == 0, extraction.stderr
    finally:
        slow.close()
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.source_rows()
    assert lake_state(source.schema)[1][1] == "slow"


def _shipped(source: Source) -> int:
    rows = lake_rows(f"SELECT COUNT(*) AS n FROM {source.schema}_load.items_changes")
    return int(str(rows[0]["n"]))


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_rerun_after_a_diversion_does_not_ship_twice(
    dialect: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches the shipped-``gl_seq`` check looking only in the partition being written.

    An extraction dies after its Delta commit into partition 0; a compaction then
    diverts ingestion to partition 1; the re-run reads the same changes again and
    must recognise them in partition 0.
    """
    source = _source(dialect, request, tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(15)
    enable(run_cli, source, "CHANGELOG")
    workload.round(12)
    crashed = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        env={"GLUON_FAULT": "extract.after_delta_commit"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    stopped = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-terminate-compaction",
    )
    assert stopped.exit_code == 0, stopped.stderr
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None and state.requested_partition == 1
    extract(run_cli, source)  # the re-run, diverted to partition 1
    assert_no_duplicate_sequences(source)
    assert lake_state(source.schema) == workload.expected
    finished = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert finished.exit_code == 0, finished.stderr
    assert lake_state(source.schema) == workload.expected


def _source(dialect: str, request: pytest.FixtureRequest, tmp_path: Path) -> Source:
    if dialect == "sqlite":
        return sqlite_source(tmp_path / "app.db")
    return postgres_source(request.getfixturevalue("pg_url"))


def _no_key_table(source: Source) -> None:
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.schema}.items (id INTEGER UNIQUE NULLS NOT DISTINCT, "
                "name VARCHAR(40), amount NUMERIC(12,2), updated TIMESTAMP)"
            )
        )
        db.execute(
            sa.text(f"INSERT INTO {source.schema}.items VALUES (:id, :name, :amount, NULL)"),
            [
                {"id": None, "name": "no key", "amount": "1.00"},
                {"id": 1, "name": "one", "amount": "2.00"},
                {"id": 2, "name": "two", "amount": "3.00"},
                {"id": 3, "name": "three", "amount": "4.00"},
            ],
        )


def _source_rows(source: Source) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT * FROM {source.schema}.items"))
        return sorted((_canonical(row._mapping) for row in rows), key=repr)


def _lake_rows(source: Source) -> list[tuple[object, ...]]:
    return sorted(
        (_canonical(row) for row in lake_rows(f"SELECT * FROM {source.schema}.items")), key=repr
    )


def _canonical(row: object) -> tuple[object, ...]:
    values = dict(row)  # type: ignore[call-overload]
    key = values["id"]
    values["id"] = 0 if key is None else key  # canonical() wants an int key
    return (key is None, *canonical(values))


@pytest.mark.parametrize(
    "dialect, partitioning",
    [
        ("postgresql", ()),
        ("postgresql", ("--partition-columns=name", "--partition-granularity=1")),
    ],
    ids=["postgresql", "postgresql-partitioned"],
)
def test_key_columns_without_a_primary_key_and_a_null_key(
    dialect: str,
    partitioning: tuple[str, ...],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table with no primary key, keyed by ``--incremental-key-columns`` on a nullable column
    the source keeps unique, NULL included (``UNIQUE NULLS NOT DISTINCT``: gluon refuses other
    nullable keys, SQLite's among them, see test_nullable_keys.py).

    Catches keys compared with ``=`` instead of ``<=>`` in the merging view: the NULL
    key's base row would stay visible beside (or after the delete of) its change; and,
    partitioned, in the in-place compaction's search for the base partitions to rewrite.
    """
    source = _source(dialect, request, tmp_path)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _no_key_table(source)
    enable(run_cli, source, "CHANGELOG", "--incremental-key-columns=id", *partitioning)
    assert _lake_rows(source) == _source_rows(source)
    table = f"{source.schema}.items"
    with source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {table} SET name = 'changed' WHERE id IS NULL"))
        db.execute(sa.text(f"UPDATE {table} SET amount = 9 WHERE id = 1"))
        db.execute(sa.text(f"INSERT INTO {table} VALUES (4, 'four', 5, NULL)"))
    extract(run_cli, source)
    assert _lake_rows(source) == _source_rows(source)
    with source.engine.begin() as db:
        db.execute(sa.text(f"DELETE FROM {table} WHERE id IS NULL"))
        db.execute(sa.text(f"DELETE FROM {table} WHERE id = 2"))
    extract(run_cli, source)
    assert _lake_rows(source) == _source_rows(source)
    with source.engine.begin() as db:
        db.execute(sa.text(f"INSERT INTO {table} VALUES (NULL, 'again', 6, NULL)"))
    for flags in ((), ("--incremental-full-compaction",)):
        with source.engine.begin() as db:
            db.execute(sa.text(f"UPDATE {table} SET name = :n WHERE id IS NULL"), {"n": str(flags)})
        extract(run_cli, source)
        compacted = run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
            "--incremental-terminate-compaction",
            *flags,
        )
        assert compacted.exit_code == 0, compacted.stderr
        extract(run_cli, source)
        finished = run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
        )
        assert finished.exit_code == 0, finished.stderr
        assert _lake_rows(source) == _source_rows(source)
        with source.engine.begin() as db:
            db.execute(sa.text(f"UPDATE {table} SET amount = 7 WHERE id IS NULL"))
            db.execute(sa.text(f"DELETE FROM {table} WHERE id = 3"))
        extract(run_cli, source)
        assert _lake_rows(source) == _source_rows(source)
