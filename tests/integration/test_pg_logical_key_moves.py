"""PG_LOGICAL on a table whose replica identity is FULL and whose key is given by the user
(no unique index on it): one transaction may move rows onto each other's keys, each move
shipped as a delete of the old key and a write of the new. Applied by key in order, the
delete of a key another row had just moved onto lost that row (``SET id = id + 1`` left one
row of three); each such transaction now ships its net change per key
(``gluon.source.key_moves``). Real PostgreSQL, Sail and Delta tables, both slot scopes and
both merge modes; the lake is read without gluon's extraction code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli
from support.statements import configured_source, run_sql

from gluon.config import load_settings
from gluon.lake import storage
from gluon.repo import Repository

TABLE = (
    "CREATE TABLE app.nokey (id int NOT NULL, flag boolean, note text)",
    "ALTER TABLE app.nokey REPLICA IDENTITY FULL",
    "INSERT INTO app.nokey VALUES (1, false, 's1'), (2, false, 's2'), (3, false, 's3')",
)
SCENARIOS: dict[str, tuple[str, ...]] = {
    "shifted up": ("UPDATE app.nokey SET id = id + 1",),
    "shifted down": ("UPDATE app.nokey SET id = id - 1",),
    "two keys swapped": (
        "UPDATE app.nokey SET id = CASE id WHEN 1 THEN 2 WHEN 2 THEN 1 END WHERE id IN (1, 2)",
    ),
    "shifted, then a shifted row updated": (
        "UPDATE app.nokey SET id = id + 1",
        "UPDATE app.nokey SET note = note || 'x' WHERE id = 2",
    ),
    "shifted over two statements": (
        "UPDATE app.nokey SET id = id + 1 WHERE id = 2",
        "UPDATE app.nokey SET id = id + 1 WHERE id <> 3 OR note NOT LIKE 's2%'",
    ),
    "shifted, a row inserted where one left, another deleted": (
        "UPDATE app.nokey SET id = id + 1",
        "INSERT INTO app.nokey VALUES (1, true, 'new')",
        "DELETE FROM app.nokey WHERE id = 5",
    ),
    "a row moved onto another's key, then deleted": (
        "UPDATE app.nokey SET id = 4 WHERE note = 'new'",  # where s2x is
        "DELETE FROM app.nokey WHERE note = 'new'",
    ),
    "rows alike but for the key shifted": (
        "UPDATE app.nokey SET flag = false, note = 'same'",
        "UPDATE app.nokey SET id = id + 1",
    ),
}
"""Each one transaction, in this order, on the table as the one before left it."""
Rows = set[tuple[object, ...]]


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    return configured_source(pg_url, monkeypatch, "CREATE SCHEMA IF NOT EXISTS app")


def _offload(run_cli: RunCli, *flags: str) -> None:
    result = run_cli("offload", "-t", "app.nokey", "-x", *flags)
    assert result.exit_code == 0, result.stderr


def _enable(engine: sa.Engine, run_cli: RunCli, scope: str, *flags: str) -> None:
    """The FULL-identity table with the user's key, offloaded with PG_LOGICAL in ``scope``."""
    run_sql(engine, *TABLE)
    _offload(
        run_cli,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
        "--incremental-key-columns=id",
        f"--incremental-pg-logical-slot={scope}",
        *flags,
    )


def _source(engine: sa.Engine) -> Rows:
    with engine.connect() as db:
        return {tuple(row) for row in db.execute(sa.text("SELECT id, flag, note FROM app.nokey"))}


def _lake(run_cli: RunCli, mode: str) -> Rows:
    columns = ["id", "flag", "note"]
    if mode == "IMMEDIATE":
        record = Repository(load_settings().repo_url).get_table("APP.NOKEY")
        assert record is not None
        stored = {column.view_name: column.lake_name for column in record.spec().columns}
        rows = storage.read_delta(record.base_path).to_pylist()
        return {tuple(row[stored[column]] for column in columns) for row in rows}
    result = run_cli("gluon", "query", "--json", "SELECT * FROM app.nokey")
    assert result.exit_code == 0, result.stderr
    return {tuple(row[column] for column in columns) for row in json.loads(result.stdout)}


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
@pytest.mark.parametrize("scope", ["table", "database"])
def test_keys_moved_onto_each_other_in_one_transaction_reach_the_lake(
    engine: sa.Engine, run_cli: RunCli, scope: str, mode: str
) -> None:
    _enable(engine, run_cli, scope, f"--incremental-merge-mode={mode}")
    for name, statements in SCENARIOS.items():
        run_sql(engine, *statements)
        _offload(run_cli, "--incremental-run-extraction")
        assert _lake(run_cli, mode) == _source(engine), name
    if mode == "DEFERRED":
        _offload(run_cli, "--incremental-run-compaction", "--incremental-wait-time=0")
        assert _lake(run_cli, mode) == _source(engine)


@pytest.mark.parametrize("scope", ["table", "database"])
def test_a_transaction_leaving_two_rows_under_one_key_is_refused(
    engine: sa.Engine, run_cli: RunCli, scope: str
) -> None:
    """The user's key is not unique: the extraction says so in one line, ships nothing;
    a discard moves past the transaction."""
    _enable(engine, run_cli, scope)
    run_sql(engine, "UPDATE app.nokey SET id = 5 WHERE id IN (1, 2)")
    result = run_cli("offload", "-t", "app.nokey", "-x", "--incremental-run-extraction")
    assert result.exit_code != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "app.nokey" in lines[0].lower() and "not unique" in lines[0], lines[0]
    assert _lake(run_cli, "DEFERRED") == {(1, False, "s1"), (2, False, "s2"), (3, False, "s3")}
    # The way out: discard the change (or rebuild); the extraction then goes on.
    _offload(run_cli, "--incremental-discard-changes")
    run_sql(engine, "UPDATE app.nokey SET note = 'after' WHERE id = 3")
    _offload(run_cli, "--incremental-run-extraction")
    assert (3, False, "after") in _lake(run_cli, "DEFERRED")
