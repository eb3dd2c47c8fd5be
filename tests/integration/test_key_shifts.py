"""Multi-row statements that move keys onto each other (issue 26 item 9).

A primary key ``DEFERRABLE INITIALLY DEFERRED`` lets ``UPDATE t SET id = id + 1``
move 1..5 to 2..6 in one statement: a row lands on a key another row of the
same statement leaves. The lake must end as the source does, read without
gluon (deltalake) for IMMEDIATE and through ``gluon query`` for DEFERRED.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.incremental import (
    RunCli,
    Source,
    enable,
    extract,
    lake_rows,
    postgres_source,
    sqlite_source,
)

from gluon.config import load_settings
from gluon.lake import storage
from gluon.repo import Repository

MODES = ["DEFERRED", "IMMEDIATE"]


def _create(source: Source, rows: int = 5) -> None:
    with source.engine.begin() as db:
        db.exec_driver_sql(
            "CREATE TABLE app.items (id integer PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, "
            "name text)"
        )
        db.exec_driver_sql(
            f"INSERT INTO app.items SELECT g, 'row ' || g FROM generate_series(1, {rows}) g"
        )


def _source_rows(source: Source) -> dict[int, tuple[object, ...]]:
    with source.engine.connect() as db:
        return {row[0]: tuple(row) for row in db.exec_driver_sql("SELECT id, name FROM app.items")}


def _lake_rows(source: Source, mode: str) -> dict[int, tuple[object, ...]]:
    if mode == "DEFERRED":
        rows = lake_rows(f"SELECT id, name FROM {source.schema}.items")
    else:
        record = Repository(load_settings().repo_url).get_table(source.table.upper())
        assert record is not None
        rows = storage.read_delta(record.base_path).to_pylist()
    found: dict[int, tuple[object, ...]] = {
        int(str(row["id"])): (row["id"], row["name"]) for row in rows
    }
    assert len(found) == len(rows), "the lake holds a key twice"
    return found


@pytest.fixture
def pg_source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    return source


@pytest.mark.parametrize("mode", MODES)
def test_a_statement_shifting_keys_onto_each_other_keeps_every_row(
    pg_source: Source, run_cli: RunCli, mode: str
) -> None:
    _create(pg_source)
    enable(run_cli, pg_source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    with pg_source.engine.begin() as db:
        db.exec_driver_sql("UPDATE app.items SET id = id + 1")
    extract(run_cli, pg_source)
    expected = _source_rows(pg_source)
    assert sorted(expected) == [2, 3, 4, 5, 6]
    assert _lake_rows(pg_source, mode) == expected


def test_swaps_and_keys_changed_many_times_stay_exact(pg_source: Source, run_cli: RunCli) -> None:
    """Two keys swapped in one statement, one key moved away and back in one transaction, a
    shift downwards, a shift upwards over a key inserted meanwhile: the lake ends as the
    source. (ON CONFLICT takes no deferrable key as arbiter: the capture contract's upserts
    cover it on an immediate key.)"""
    _create(pg_source, rows=8)
    enable(run_cli, pg_source, "CHANGELOG")
    with pg_source.engine.begin() as db:
        db.exec_driver_sql(
            "UPDATE app.items SET id = CASE id WHEN 1 THEN 2 ELSE 1 END, name = name || '!' "
            "WHERE id IN (1, 2)"
        )
        db.exec_driver_sql("UPDATE app.items SET id = 30 WHERE id = 3")
        db.exec_driver_sql("UPDATE app.items SET id = 31 WHERE id = 30")
        db.exec_driver_sql("UPDATE app.items SET id = 3, name = 'back' WHERE id = 31")
        db.exec_driver_sql("DELETE FROM app.items WHERE id = 4")
        db.exec_driver_sql("UPDATE app.items SET id = id - 1 WHERE id >= 5")
        db.exec_driver_sql("INSERT INTO app.items VALUES (8, 'new')")
    extract(run_cli, pg_source)
    assert _lake_rows(pg_source, "DEFERRED") == _source_rows(pg_source)
    with pg_source.engine.begin() as db:
        db.exec_driver_sql("UPDATE app.items SET id = id + 10")
        db.exec_driver_sql("INSERT INTO app.items VALUES (20, 'after the shift')")
        db.exec_driver_sql("UPDATE app.items SET id = id - 10 WHERE id > 12")
    extract(run_cli, pg_source)
    expected = _source_rows(pg_source)
    assert len(expected) == 9
    assert _lake_rows(pg_source, "DEFERRED") == expected


def test_upserts_stay_exact(pg_source: Source, run_cli: RunCli) -> None:
    """INSERT ... ON CONFLICT DO UPDATE (an immediate key: ON CONFLICT takes no deferrable
    one), including an upsert that changes the key of the conflicting row."""
    with pg_source.engine.begin() as db:
        db.exec_driver_sql("CREATE TABLE app.items (id integer PRIMARY KEY, name text)")
        db.exec_driver_sql(
            "INSERT INTO app.items SELECT g, 'row ' || g FROM generate_series(1, 4) g"
        )
    enable(run_cli, pg_source, "CHANGELOG")
    with pg_source.engine.begin() as db:
        db.exec_driver_sql(
            "INSERT INTO app.items VALUES (1, 'one'), (9, 'nine') "
            "ON CONFLICT (id) DO UPDATE SET name = excluded.name"
        )
        db.exec_driver_sql(
            "INSERT INTO app.items VALUES (2, 'two') "
            "ON CONFLICT (id) DO UPDATE SET id = excluded.id + 100, name = excluded.name"
        )
        db.exec_driver_sql("INSERT INTO app.items VALUES (3, 'same') ON CONFLICT (id) DO NOTHING")
    extract(run_cli, pg_source)
    expected = _source_rows(pg_source)
    assert sorted(expected) == [1, 3, 4, 9, 102]
    assert _lake_rows(pg_source, "DEFERRED") == expected


@pytest.mark.parametrize("order", ["ASC", "DESC"])
def test_sqlite_key_columns_without_a_unique_index_shift_exactly(
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    order: str,
) -> None:
    """SQLite checks a unique index row by row, but key columns named with
    --incremental-key-columns need none: UPDATE ... SET id = id + 1 then moves rows onto
    keys other rows of the statement leave. SQLite fires row triggers as each row changes;
    the rows are visited in either order (a descending index)."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id integer NOT NULL, name text)")
        db.exec_driver_sql(f"CREATE INDEX items_id ON items (id {order})")
        db.exec_driver_sql(
            "INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')"
        )
    enable(run_cli, source, "CHANGELOG", "--incremental-key-columns=id")
    with source.engine.begin() as db:
        db.exec_driver_sql("UPDATE items SET id = id + 1 WHERE id > 0")
        db.exec_driver_sql(
            "UPDATE items SET id = CASE id WHEN 2 THEN 3 ELSE 2 END WHERE id IN (2, 3)"
        )
    extract(run_cli, source)
    with source.engine.connect() as db:
        expected = {row[0]: tuple(row) for row in db.exec_driver_sql("SELECT id, name FROM items")}
    assert expected == {2: (2, "two"), 3: (3, "one"), 4: (4, "three"), 5: (5, "four")}
    assert _lake_rows(source, "DEFERRED") == expected
