"""A DEFERRED view passes base partitions no pending change can touch through without a
join (issue 28 item 3, ``gluon.lake.touched``), pinned to the Delta versions it was derived
from; results always equal the source, a key moving between partitions included.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.incremental import RunCli, enable, extract, sqlite_source

from gluon.config import EngineKind, load_settings
from gluon.lake.session import LakeSession
from gluon.read.catalog import lake_session, refresh_pending

VIEW = "main.items"
ALL = f"SELECT id, region, amount FROM {VIEW}"


def _source_rows(db: Path) -> set[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return set(conn.execute("SELECT id, region, amount FROM items"))


def _view_rows(session: LakeSession) -> set[tuple[object, ...]]:
    rows = [tuple(row.values()) for row in session.sql(ALL).toArrow().to_pylist()]
    assert len(rows) == len({row[0] for row in rows}), "the user view shows a key twice"
    return set(rows)


def _change(db: Path, *statements: str) -> None:
    with sqlite3.connect(db) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.mark.usefixtures("offload_home")
def test_untouched_partitions_pass_through_and_the_view_stays_exact(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "app.db"
    source = sqlite_source(db)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _change(
        db,
        "CREATE TABLE items (id INTEGER PRIMARY KEY, region TEXT NOT NULL, amount INTEGER)",
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199) "
        "INSERT INTO items SELECT i, 'r' || (i / 50), i * 10 FROM n",
    )
    enable(run_cli, source, "CHANGELOG", "--partition-columns=region")
    settings = load_settings()
    if settings.engine != EngineKind.SAIL:
        pytest.skip("the split view is registered by the embedded engine's sessions only")

    # Keys 10-45 only (base partition r0): one updated, one moved to r2, one deleted and
    # inserted again in r3 (a key whose new row lands in a partition the split passes).
    _change(
        db,
        "UPDATE items SET amount = -1 WHERE id BETWEEN 10 AND 20",
        "UPDATE items SET region = 'r2' WHERE id = 30",
        "DELETE FROM items WHERE id = 45",
        "INSERT INTO items VALUES (45, 'r3', 4545)",
        "DELETE FROM items WHERE id = 44",
    )
    extract(run_cli, source)
    with lake_session(settings) as session:
        assert VIEW in session.pinned, "changes in one partition: the view is split"
        assert VIEW not in session.base_only
        assert _view_rows(session) == _source_rows(db)
        registered = _source_rows(db)

        # A change extracted after registration, in a partition the split passes: the
        # session reads the versions it was derived from (no key twice, the state it had)
        # until refresh_pending re-registers the view.
        _change(db, "UPDATE items SET amount = -2 WHERE id = 150")
        extract(run_cli, source)
        assert _view_rows(session) == registered
        refresh_pending(session, ALL)
        assert _view_rows(session) == _source_rows(db)


@pytest.mark.usefixtures("offload_home")
def test_changes_in_every_partition_keep_the_general_view(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "app.db"
    source = sqlite_source(db)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _change(
        db,
        "CREATE TABLE items (id INTEGER PRIMARY KEY, region TEXT NOT NULL, amount INTEGER)",
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99) "
        "INSERT INTO items SELECT i, 'r' || (i / 50), i FROM n",
    )
    enable(run_cli, source, "CHANGELOG", "--partition-columns=region")
    _change(db, "UPDATE items SET amount = 0 WHERE id IN (1, 99)")
    extract(run_cli, source)
    with lake_session(load_settings()) as session:
        assert VIEW not in session.pinned
        assert _view_rows(session) == _source_rows(db)


@pytest.mark.usefixtures("offload_home")
def test_a_batch_of_old_and_new_keys_touches_only_the_old_keys_partitions(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch updating old rows and inserting new keys: its delta file's key range spans
    every base partition, its keys meet one (``gluon.lake.touched`` reads them). A composite
    key of keyword-named columns (a nullable key is refused at enable), NULL values."""
    db = tmp_path / "app.db"
    source = sqlite_source(db)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _change(
        db,
        'CREATE TABLE items ("select" INTEGER NOT NULL, "group" TEXT NOT NULL, '
        'region TEXT NOT NULL, amount INTEGER, PRIMARY KEY ("select", "group"))',
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199) "
        "INSERT INTO items SELECT i, 'g' || (i % 2), 'r' || (i / 50), "
        "CASE WHEN i % 3 = 0 THEN NULL ELSE i * 10 END FROM n",
    )
    enable(run_cli, source, "CHANGELOG", "--partition-columns=region")
    settings = load_settings()
    if settings.engine != EngineKind.SAIL:
        pytest.skip("the split view is registered by the embedded engine's sessions only")
    _change(
        db,
        'UPDATE items SET amount = -1 WHERE "select" BETWEEN 10 AND 20',
        'DELETE FROM items WHERE "select" = 21',
        "INSERT INTO items VALUES (900, 'g0', 'r3', NULL), (901, 'g1', 'r0', 9), "
        "(21, 'g9', 'r2', 2)",
    )
    extract(run_cli, source)
    query = "SELECT `select`, `group`, region, amount FROM main.items"
    with sqlite3.connect(db) as conn:
        expected = set(conn.execute('SELECT "select", "group", region, amount FROM items'))
    with lake_session(settings) as session:
        assert VIEW in session.pinned, "one partition's keys changed: the view is split"
        rows = [tuple(row.values()) for row in session.sql(query).toArrow().to_pylist()]
        assert len(rows) == len({row[:2] for row in rows}), "the user view shows a key twice"
        assert set(rows) == expected


@pytest.mark.usefixtures("offload_home")
def test_an_unpartitioned_base_passes_through_while_only_new_keys_are_pending(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No base file can hold a new key: the whole base passes (touched is empty)."""
    db = tmp_path / "app.db"
    source = sqlite_source(db)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _change(
        db,
        "CREATE TABLE items (id INTEGER PRIMARY KEY, region TEXT NOT NULL, amount INTEGER)",
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99) "
        "INSERT INTO items SELECT i, 'r' || (i / 50), i FROM n",
    )
    enable(run_cli, source, "CHANGELOG")
    settings = load_settings()
    if settings.engine != EngineKind.SAIL:
        pytest.skip("the split view is registered by the embedded engine's sessions only")
    _change(db, "INSERT INTO items VALUES (500, 'r9', 5), (501, 'r9', 6)")
    extract(run_cli, source)
    with lake_session(settings) as session:
        assert VIEW in session.pinned, "only new keys pending: the base passes through"
        assert _view_rows(session) == _source_rows(db)
        _change(db, "UPDATE items SET amount = -1 WHERE id IN (3, 500)")
        extract(run_cli, source)
        refresh_pending(session, ALL)
        assert VIEW not in session.pinned, "an old key changed: the general view"
        assert _view_rows(session) == _source_rows(db)
