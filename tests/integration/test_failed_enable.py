"""An enable that fails leaves nothing behind (issue 26, item 7): values the lake cannot take
are found before any capture object exists, and an enable that fails after its capture
objects exist drops them and forgets the ``enabling`` state, so a re-enable after the fix
ships nothing the failed attempt captured. Real PostgreSQL (CHANGELOG and PG_LOGICAL) and
SQLite sources, the real Sail engine and Delta tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, Source, lake_rows, postgres_source, sqlite_source

from gluon.config import load_settings
from gluon.repo import Repository

CASES = [("postgresql", "CHANGELOG"), ("postgresql", "PG_LOGICAL"), ("sqlite", "CHANGELOG")]


@pytest.fixture(params=CASES, ids=["-".join(case) for case in CASES])
def case(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Source, str]:
    dialect, method = request.param
    if dialect == "sqlite":
        chosen = sqlite_source(tmp_path / "app.db")
    else:
        chosen = postgres_source(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen, method


def run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def capture_objects_left(source: Source) -> list[str]:
    """Every trigger, function, changelog, sequence, hybrid schema and slot in the source."""
    queries = (
        [
            "SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal",
            "SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname LIKE '%\\_h'",
            "SELECT 'function ' || proname FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE nspname NOT IN ('pg_catalog', 'information_schema')",
            "SELECT c.relkind::text || ' ' || relname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE nspname NOT IN ('pg_catalog', "
            "'information_schema', 'pg_toast') AND relname NOT IN ('items', 'items_pkey')",
            "SELECT 'slot ' || slot_name FROM pg_replication_slots",
        ]
        if source.dialect == "postgresql"
        else [
            "SELECT type || ' ' || name FROM sqlite_master "
            "WHERE name NOT LIKE 'items%' AND name <> 'sqlite_sequence'",
        ]
    )
    with source.engine.connect() as db:
        found = [row[0] for query in queries for row in db.execute(sa.text(query))]
        if source.dialect == "sqlite" and sa.inspect(db).has_table("sqlite_sequence"):
            query = "SELECT 'sequence of ' || name FROM sqlite_sequence"
            found += [row[0] for row in db.execute(sa.text(query))]
        return found


def enable_command(source: Source, method: str) -> list[str]:
    return [
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    ]


def one_error_line(result: Any) -> str:
    assert result.exit_code != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return str(lines[0])


def assert_not_enabled(run_cli: RunCli, source: Source) -> None:
    key = source.table.upper()
    assert Repository(load_settings().repo_url).incremental.get_state(key) is None
    shown = run_cli("display_incremental_status", "-t", source.table, "--json")
    assert shown.exit_code == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert (document["incremental_enabled"], document["incremental_state"]) == (False, None)


def source_rows(source: Source) -> list[dict[str, Any]]:
    with source.engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT id, note FROM {source.table} ORDER BY id"))
        return [dict(row._mapping) for row in rows]


def lake_equals_source(run_cli: RunCli, source: Source) -> None:
    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    assert lake_rows(f"SELECT id, note FROM {source.table} ORDER BY id") == source_rows(source)


def test_a_value_the_lake_cannot_take_is_refused_before_any_capture_object(
    case: tuple[Source, str], run_cli: RunCli
) -> None:
    source, method = case
    if source.dialect == "postgresql":
        create = f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, at DATE, note TEXT)"
        bad, fixed = "'infinity'", "'2026-01-01'"
        named = "column at (date) holds infinity in the row id=2"
    else:
        create = f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, at INTEGER, note TEXT)"
        bad, fixed = "'soon'", "7"
        named = "column at (bigint) holds soon in the row id=2"
    run(source, create, f"INSERT INTO {source.table} VALUES (1, {fixed}, 'a'), (2, {bad}, 'b')")
    line = one_error_line(run_cli(*enable_command(source, method)))
    assert f"holds values the lake cannot take: {named}" in line
    assert "no capture object was created" in line
    assert capture_objects_left(source) == []
    # What a capture object would have captured now, poison included, must never ship.
    run(source, f"UPDATE {source.table} SET note = 'b2' WHERE id = 2")
    run(source, f"UPDATE {source.table} SET at = {fixed} WHERE id = 2")
    again = run_cli(*enable_command(source, method))
    assert again.exit_code == 0, again.stderr
    run(source, f"INSERT INTO {source.table} VALUES (3, {fixed}, 'c')")
    lake_equals_source(run_cli, source)


@pytest.mark.parametrize("with_offload", [False, True], ids=["offloaded", "initial-offload"])
def test_an_enable_failing_after_its_capture_objects_exist_undoes_itself(
    case: tuple[Source, str], run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, with_offload: bool
) -> None:
    """The failure is injected after the trigger, changelog, sequence and slot exist (and the
    copy of an enable with the initial offload is done), where creating the delta table
    could fail."""
    source, method = case
    run(
        source,
        f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, note TEXT)",
        f"INSERT INTO {source.table} VALUES (1, 'a'), (2, 'b')",
    )
    if not with_offload:
        assert run_cli("offload", "-t", source.table, "-x").exit_code == 0
    monkeypatch.setenv("GLUON_FAULT", "enable.fail_after_capture")
    line = one_error_line(run_cli(*enable_command(source, method)))
    monkeypatch.delenv("GLUON_FAULT")
    assert "the enable was undone (its capture objects were dropped" in line
    assert capture_objects_left(source) == []
    assert_not_enabled(run_cli, source)
    if with_offload:
        # The same command copies again: a change between the attempts reaches the lake
        # (an enable of a table offloaded earlier captures from then on, as documented).
        run(source, f"UPDATE {source.table} SET note = 'b2' WHERE id = 2")
    again = run_cli(*enable_command(source, method))
    assert again.exit_code == 0, again.stderr
    run(
        source,
        f"UPDATE {source.table} SET note = 'a2' WHERE id = 1",
        f"INSERT INTO {source.table} VALUES (3, 'c')",
    )
    lake_equals_source(run_cli, source)
