"""Broken capture is detected, reported, and has a way out through gluon commands.

Issue 12, reproductions 5 (a disabled trigger) and 7 (a changelog dropped behind
gluon's back): extraction ships what it has and exits 1 naming the problem;
status and report list it under needs attention; re-running the enable names
what is missing and ``--incremental-recreate-capture-objects`` repairs the
application's DML; disable works with objects missing and says which.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import Source, lake_rows, postgres_source, sqlite_source
from typer.testing import Result

RunCli = Callable[..., Result]
ENABLE = ("--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")


def run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def source_items(source: Source) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        query = f"SELECT id, name FROM {source.table} ORDER BY id"
        return [tuple(row) for row in db.execute(sa.text(query))]


def lake_items(source: Source) -> list[tuple[object, ...]]:
    rows = lake_rows(f"SELECT id, name FROM {source.schema}.items ORDER BY id")
    return [(row["id"], row["name"]) for row in rows]


def offload(run_cli: RunCli, source: Source, *args: str) -> Result:
    return run_cli("offload", "-t", source.table, "-x", *args)


def one_error(result: Result, exit_code: int, *fragments: str) -> str:
    lines = error_lines(result)
    assert result.exit_code == exit_code, result.stdout + result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def report_text(run_cli: RunCli, source: Source, out: Path) -> str:
    """The text status report of the table (saved in ``out``)."""
    result = run_cli("offload_status_report", f"--table={source.table}", f"--output-dir={out}")
    assert result.exit_code == 0, result.stderr
    (path,) = sorted(out.glob("*.txt"))
    text = path.read_text()
    path.unlink()
    return text


@pytest.fixture(params=["sqlite", "postgresql"])
def source(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> Source:
    chosen = (
        sqlite_source(tmp_path / "app.db")
        if request.param == "sqlite"
        else postgres_source(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    run(
        chosen,
        f"CREATE TABLE {chosen.table} (id integer PRIMARY KEY, name text)",
        f"INSERT INTO {chosen.table} VALUES (1, 'a'), (2, 'b')",
    )
    assert offload(run_cli, chosen, *ENABLE).exit_code == 0
    return chosen


def changelog(source: Source) -> str:
    return "main.main_h_items_log" if source.dialect == "sqlite" else "app_h.items_log"


def test_disabled_trigger_is_reported_by_extraction_and_status(
    pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    run(
        source,
        "CREATE TABLE app.items (id integer PRIMARY KEY, name text)",
        "INSERT INTO app.items VALUES (1, 'a')",
    )
    assert offload(run_cli, source, *ENABLE).exit_code == 0
    run(source, "INSERT INTO app.items VALUES (2, 'b')")
    # Capture is one statement trigger per event (the INSERT one ends in _insert): any of
    # them disabled is capture disabled, named in the way out.
    run(source, "ALTER TABLE app.items DISABLE TRIGGER items_ct_insert")
    run(source, "INSERT INTO app.items VALUES (3, 'lost')")
    line = one_error(
        offload(run_cli, source, "--incremental-run-extraction"),
        1,
        "shipped 1 changes",
        "capture trigger app_h.items_ct on app.items is disabled",
        "ALTER TABLE app.items ENABLE TRIGGER items_ct_insert),",
        "--reset-backend-table",
    )
    assert "Nothing" not in line
    assert lake_items(source) == [(1, "a"), (2, "b")]  # what was captured is shipped
    status = run_cli("display_incremental_status", "-t", "app.items")
    assert status.exit_code == 0, status.stderr
    assert "is disabled" in status.stdout
    report = report_text(run_cli, source, offload_home)
    assert "Nothing needs attention" not in report
    assert "capture trigger app_h.items_ct on app.items is disabled" in report

    # The way out the message gives: enable it again; capture and status are back to normal.
    run(source, "ALTER TABLE app.items ENABLE TRIGGER items_ct_insert")
    run(source, "INSERT INTO app.items VALUES (4, 'd')")
    assert offload(run_cli, source, "--incremental-run-extraction").exit_code == 0
    assert lake_items(source) == [(1, "a"), (2, "b"), (4, "d")]  # 3 was lost while disabled
    assert "Nothing needs attention" in report_text(run_cli, source, offload_home)


def test_dropped_changelog_has_a_way_out_by_recreating(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    """Reproduction 7: the changelog is dropped behind gluon's back; the application's DML
    fails; gluon names the problem everywhere and re-creates the objects on request."""
    run(source, f"DROP TABLE {changelog(source)}")
    with pytest.raises(sa.exc.DBAPIError):
        run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")  # the application is broken
    one_error(offload(run_cli, source, "--incremental-run-extraction"), 1, "is missing")
    report = report_text(run_cli, source, offload_home)
    assert "Nothing needs attention" not in report and "is missing" in report
    line = one_error(
        offload(run_cli, source, *ENABLE), 1, "already enabled", "missing", "items_log"
    )
    assert "--incremental-recreate-capture-objects" in line

    result = offload(run_cli, source, *ENABLE, "--incremental-recreate-capture-objects")
    assert result.exit_code == 0, result.stderr
    assert "Re-created table" in result.stdout and "--reset-backend-table" in result.stdout
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")  # the application works again
    assert offload(run_cli, source, "--incremental-run-extraction").exit_code == 0
    assert lake_items(source) == source_items(source) == [(1, "a"), (2, "b"), (3, "c")]


def delete_trigger(source: Source) -> str:
    """The capture trigger that records the table's deletes (one per event on both)."""
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%delete'"
        if source.dialect == "sqlite"
        else "SELECT tgname FROM pg_trigger WHERE tgrelid = 'app.items'::regclass "
        "AND tgname LIKE '%delete'"
    )
    with source.engine.connect() as db:
        (name,) = db.execute(sa.text(query)).scalars().all()
    return name if source.dialect == "sqlite" else f"{name} ON {source.table}"


def test_one_dropped_event_trigger_is_reported(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    """Capture is one trigger per event on both dialects: the delete one dropped behind
    gluon's back loses every delete, so it is capture missing, though the others remain."""
    run(source, f"DROP TRIGGER {delete_trigger(source)}")
    run(source, f"DELETE FROM {source.table} WHERE id = 2")  # not captured
    one_error(offload(run_cli, source, "--incremental-run-extraction"), 1, "is missing")
    report = report_text(run_cli, source, offload_home)
    assert "Nothing needs attention" not in report and "is missing" in report

    result = offload(run_cli, source, *ENABLE, "--incremental-recreate-capture-objects")
    assert result.exit_code == 0, result.stderr
    run(source, f"DELETE FROM {source.table} WHERE id = 1")  # captured again
    assert offload(run_cli, source, "--incremental-run-extraction").exit_code == 0
    assert lake_items(source) == [(2, "b")]  # the lost delete stays lost until a re-offload
    assert "is missing" not in report_text(run_cli, source, offload_home)


def test_disable_works_with_the_changelog_dropped(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    run(source, f"DROP TABLE {changelog(source)}")
    result = offload(run_cli, source, "--incremental-updates-disabled")
    assert result.exit_code == 0, result.stderr
    assert "already gone" in result.stdout and "items_log" in result.stdout
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")  # nothing of gluon's is left
    assert source_items(source) == [(1, "a"), (2, "b"), (3, "c")]
    assert lake_items(source) == [(1, "a"), (2, "b")]
    # And the table can be enabled again from scratch.
    assert offload(run_cli, source, *ENABLE).exit_code == 0


def test_recreate_needs_an_enabled_table(source: Source, run_cli: RunCli) -> None:
    assert offload(run_cli, source, "--incremental-updates-disabled").exit_code == 0
    one_error(
        offload(run_cli, source, *ENABLE, "--incremental-recreate-capture-objects"),
        1,
        "not enabled",
    )
    one_error(offload(run_cli, source, "--incremental-recreate-capture-objects"), 2, "goes with")
