"""A change the lake cannot take (issue 26, item 6): extraction names it in one line with the
command that sets just that change aside; setting it aside records it in the repository, where
status, the report and the service's metrics show it, and the other changes ship. Real
PostgreSQL and SQLite sources, the real Sail engine and Delta tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, Source, lake_rows, postgres_source

KEY = "APP.EVENTS"


@pytest.fixture
def pg(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    chosen = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


def run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def ok(result: object) -> object:
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    return result


def enabled_events(run_cli: RunCli, source: Source, method: str = "CHANGELOG") -> str:
    table = f"{source.schema}.events"
    run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, at TIMESTAMPTZ, note TEXT)",
        f"INSERT INTO {table} VALUES (1, '2026-01-01 10:00+00', 'one'), "
        "(2, '2026-01-02 10:00+00', 'two')",
    )
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
        )
    )
    return table


def test_an_infinity_in_the_changelog_is_named_and_set_aside(pg: Source, run_cli: RunCli) -> None:
    table = enabled_events(run_cli, pg)
    run(pg, f"UPDATE {table} SET at = 'infinity' WHERE id = 1")
    run(pg, f"UPDATE {table} SET at = '2026-03-01 10:00+00' WHERE id = 1")
    run(pg, f"UPDATE {table} SET note = 'other' WHERE id = 2")
    failed = run_cli("offload", "-t", table, "-x", "--incremental-run-extraction")
    assert failed.exit_code != 0
    lines = [line for line in failed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, failed.stderr
    print(lines[0])
    assert lines[0].startswith("offload: error: APP.EVENTS: ")
    assert "gl_seq 1 (update of id=1, column at: timestamp infinity" in lines[0]
    assert "change gl_seq 2 of the same key follows" in lines[0]
    command = lines[0].split("set just these changes aside (they are recorded, not lost): ")[1]
    command = command.split(" (docs/")[0]
    assert command == "offload -t app.events -x --incremental-set-aside-changes=1"
    set_aside = ok(run_cli(*command.split()))
    assert "Set aside 1 change(s) of APP.EVENTS (gl_seq 1)" in set_aside.stdout  # type: ignore[attr-defined]
    ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))
    assert lake_rows(f"SELECT id, note FROM {table} ORDER BY id") == [
        {"id": 1, "note": "one"},
        {"id": 2, "note": "other"},
    ]
