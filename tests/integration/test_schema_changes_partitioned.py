"""A column added to the source of a partitioned lake table, then compactions (issue 26).

The base table of a partitioned offload stores its lake partition column
(``gl_part_id``) after the table's columns; a column carried later is appended
after it, so the base's column order is no longer the merged rows' order (table
columns, then the partition column). Found by the lifecycle soak
(``GLUON_STATEFUL_SEED=913``, postgresql-CHANGELOG): an in-place compaction
wrote the merged rows by position, the partition value landed in the added
column and NULL in ``gl_part_id``, and the next in-place compaction, which
rewrote the NULL partition, dropped the rows whose computed partition it had
not listed (with text in the added column, the compaction failed on the cast
instead). Each compaction method is run twice here, and the lake is compared
with the source after each, the base's partition values read with deltalake.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import Source, enable, extract, lake_rows, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository

METHOD_FLAGS = {
    "IN_PLACE": ("--incremental-in-place-compaction",),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}


def _run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(row[name] for name in ("id", "name", "note")) for row in rows)


def _source_rows(source: Source) -> list[tuple[Any, ...]]:
    with source.engine.connect() as db:
        result = db.execute(sa.text(f"SELECT id, name, note FROM {source.table}"))
        return _rows([dict(row._mapping) for row in result])


def _lake_view(source: Source) -> list[tuple[Any, ...]]:
    return _rows(lake_rows(f"SELECT id, name, note FROM {source.schema}.items"))


def _base_partitions(source: Source) -> dict[int, Any]:
    """Each base row's stored lake partition value, read without gluon."""
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None and record.base_path
    rows = DeltaTable(record.base_path).to_pyarrow_table(columns=["id", "gl_part_id"]).to_pylist()
    return {int(row["id"]): row["gl_part_id"] for row in rows}


def _compact(run_cli: Callable[..., Result], source: Source, method: str) -> None:
    done = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        *METHOD_FLAGS[method],
    )
    assert done.exit_code == 0 and "complete" in done.stdout, done.stderr


@pytest.mark.parametrize("note", ["NULL", "'set'"], ids=["note NULL", "note set"])
@pytest.mark.parametrize("method", sorted(METHOD_FLAGS))
def test_compactions_after_an_added_column_keep_every_row_and_value(
    method: str,
    note: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    _run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))",
        *(f"INSERT INTO {table} VALUES ({key}, 'row {key}')" for key in range(1, 26)),
    )
    enable(run_cli, source, "CHANGELOG", "--partition-columns=id", "--partition-granularity=10")
    _run(
        source,
        f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20)",
        f"UPDATE {table} SET name = 'even', note = {note} WHERE id % 2 = 0",
        f"INSERT INTO {table} VALUES (31, 'new', {note})",
    )
    extract(run_cli, source)  # carries the column: the base gains it after gl_part_id
    _compact(run_cli, source, method)
    assert _lake_view(source) == _source_rows(source)
    assert _base_partitions(source) == {key: key // 10 * 10 for key, _, _ in _source_rows(source)}

    # A change in one partition only: the others must keep their rows too.
    _run(source, f"UPDATE {table} SET name = 'again' WHERE id = 3")
    extract(run_cli, source)
    _compact(run_cli, source, method)
    assert _lake_view(source) == _source_rows(source)
    assert _base_partitions(source) == {key: key // 10 * 10 for key, _, _ in _source_rows(source)}


def test_an_increment_after_an_added_column_lands_in_its_partitions(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A partial offload's increment appends to a base whose added column follows gl_part_id."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    _run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))",
        *(f"INSERT INTO {table} VALUES ({key}, 'row {key}')" for key in (1, 2, 11, 1000, 1011)),
    )
    first = run_cli(
        "offload", "-t", table, "-x", "--offload-type=FULL",
        "--offload-predicate=column(id) < numeric(1000)",
        "--partition-columns=id", "--partition-granularity=10",
    )  # fmt: skip
    assert first.exit_code == 0, first.stderr
    enable(run_cli, source, "CHANGELOG")
    _run(
        source,
        f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20)",
        f"UPDATE {table} SET note = 'later' WHERE id >= 1000",
        f"UPDATE {table} SET name = 'changed', note = 'set' WHERE id = 2",
    )
    extract(run_cli, source)
    later = run_cli("offload", "-t", table, "-x", "--offload-predicate=column(id) >= numeric(1000)")
    assert later.exit_code == 0, later.stderr
    assert _lake_view(source) == _source_rows(source)
    assert _base_partitions(source) == {1: 0, 2: 0, 11: 10, 1000: 1000, 1011: 1010}
    _compact(run_cli, source, "IN_PLACE")
    assert _lake_view(source) == _source_rows(source)
    assert _base_partitions(source) == {key: key // 10 * 10 for key, _, _ in _source_rows(source)}


def test_immediate_merges_after_an_added_column_keep_partition_values(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    _run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))",
        *(f"INSERT INTO {table} VALUES ({key}, 'row {key}')" for key in range(1, 16)),
    )
    enable(
        run_cli, source, "CHANGELOG", "--incremental-merge-mode=IMMEDIATE",
        "--partition-columns=id", "--partition-granularity=10",
    )  # fmt: skip
    _run(
        source,
        f"ALTER TABLE {table} ADD COLUMN note VARCHAR(20)",
        f"UPDATE {table} SET note = 'set' WHERE id % 2 = 0",
        f"INSERT INTO {table} VALUES (21, 'new', NULL)",
        f"DELETE FROM {table} WHERE id = 5",
    )
    extract(run_cli, source)
    assert _lake_view(source) == _source_rows(source)
    assert _base_partitions(source) == {key: key // 10 * 10 for key, _, _ in _source_rows(source)}
