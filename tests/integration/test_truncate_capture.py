"""TRUNCATE reaches the changelog (issue 26 item 5, capture half).

PostgreSQL: a statement trigger ``AFTER TRUNCATE`` (same function as the row
trigger) records one change with ``gl_op = 'T'`` and every table column NULL,
in ``gl_seq`` order with the row changes around it, on every method with a
changelog trigger; status names the trigger when it is disabled or missing,
and re-creating the capture objects brings it back. SQLite has no TRUNCATE:
``DELETE`` without ``WHERE`` fires the row triggers (SQLite's truncate
optimization is off for a table with triggers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows, postgres_source, sqlite_source
from typer.testing import Result

RunCli = Callable[..., Result]


def run(url: str, *statements: str) -> None:
    with sa.create_engine(url).begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def query(url: str, statement: str) -> list[tuple[object, ...]]:
    with sa.create_engine(url).connect() as db:
        return [tuple(row) for row in db.execute(sa.text(statement))]


def enable(run_cli: RunCli, table: str, method: str, *extra: str) -> Result:
    return run_cli(
        "offload",
        "-t",
        table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *extra,
    )


@pytest.fixture
def pg(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = postgres_source(pg_url).url
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run(
        url,
        "CREATE TABLE app.items (id integer PRIMARY KEY, name text)",
        "INSERT INTO app.items VALUES (1, 'a'), (2, 'b')",
    )
    return url


CHANGELOG = "SELECT gl_op, gl_origin, id, name FROM app_h.items_log ORDER BY gl_seq"


@pytest.mark.parametrize("method", ["CHANGELOG", "CHANGELOG_INSERT", "UPDATABLE_CHANGELOG"])
def test_truncate_is_one_change_in_order(pg: str, run_cli: RunCli, method: str) -> None:
    assert enable(run_cli, "app.items", method).exit_code == 0
    run(
        pg,
        "INSERT INTO app.items VALUES (3, 'c')",
        "TRUNCATE app.items",
        "INSERT INTO app.items VALUES (1, 'after')",
    )
    assert query(pg, CHANGELOG) == [
        ("I", "T", 3, "c"),
        ("T", "T", None, None),
        ("I", "T", 1, "after"),
    ]
    if method == "CHANGELOG_INSERT":
        return  # insert-only screening of a 'T' is the lake side's (the truncate package)
    result = run_cli("offload", "-t", "app.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    shipped = lake_rows("SELECT gl_seq, gl_op, id, name FROM app_load.items_changes")
    by_seq = sorted(shipped, key=lambda row: int(str(row["gl_seq"])))
    assert [(row["gl_op"], row["id"], row["name"]) for row in by_seq] == [
        ("I", 3, "c"),
        ("T", None, None),
        ("I", 1, "after"),
    ]


def test_status_names_a_disabled_or_missing_truncate_trigger_and_repair_restores_it(
    pg: str, run_cli: RunCli
) -> None:
    assert enable(run_cli, "app.items", "CHANGELOG").exit_code == 0
    run(pg, "ALTER TABLE app.items DISABLE TRIGGER items_ct_truncate")
    status = run_cli("display_incremental_status", "-t", "app.items")
    expected = "capture trigger items_ct_truncate (for TRUNCATE) on app.items is disabled"
    assert expected in status.stdout
    run(pg, "DROP TRIGGER items_ct_truncate ON app.items")
    status = run_cli("display_incremental_status", "-t", "app.items")
    expected = "capture trigger items_ct_truncate (for TRUNCATE) on app.items is missing"
    assert expected in status.stdout
    assert "--incremental-recreate-capture-objects" in status.stdout
    # Tables enabled before TRUNCATE was captured have no such trigger: status says so, and
    # cron's extractions go on shipping what the row trigger records.
    extracted = run_cli("offload", "-t", "app.items", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    repaired = enable(run_cli, "app.items", "CHANGELOG", "--incremental-recreate-capture-objects")
    assert repaired.exit_code == 0, repaired.stderr
    status = run_cli("display_incremental_status", "-t", "app.items")
    assert "items_truncate" not in status.stdout
    run(pg, "TRUNCATE app.items")
    assert query(pg, CHANGELOG) == [("T", "T", None, None)]
    discarded = run_cli("offload", "-t", "app.items", "-x", "--incremental-discard-changes")
    assert discarded.exit_code == 0, discarded.stderr
    disabled = run_cli("offload", "-t", "app.items", "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr
    assert query(pg, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal") == []


def test_a_changelog_checked_without_truncate_is_widened_when_capture_is_recreated(
    pg: str, run_cli: RunCli
) -> None:
    """A changelog created before TRUNCATE was captured allows only I, U and D: re-creating
    the capture objects widens its check, so a TRUNCATE never fails on it."""
    assert enable(run_cli, "app.items", "CHANGELOG").exit_code == 0
    (check,) = query(
        pg,
        "SELECT conname FROM pg_constraint WHERE conrelid = 'app_h.items_log'::regclass "
        "AND pg_get_constraintdef(oid) LIKE '%gl_op%'",
    )
    run(
        pg,
        f'ALTER TABLE app_h.items_log DROP CONSTRAINT "{check[0]}", '
        "ADD CHECK (gl_op IN ('I', 'U', 'D'))",
    )
    repaired = enable(run_cli, "app.items", "CHANGELOG", "--incremental-recreate-capture-objects")
    assert repaired.exit_code == 0, repaired.stderr
    run(pg, "TRUNCATE app.items")
    assert query(pg, CHANGELOG) == [("T", "T", None, None)]
    with pytest.raises(sa.exc.IntegrityError):
        run(pg, "INSERT INTO app_h.items_log (gl_seq, gl_op, gl_origin) VALUES (-1, 'X', 'T')")


def test_sqlite_delete_without_where_records_every_row(
    tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    url = sqlite_source(tmp_path / "app.db").url
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    run(
        url,
        "CREATE TABLE items (id integer PRIMARY KEY, name text)",
        "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    assert enable(run_cli, "main.items", "CHANGELOG").exit_code == 0
    run(url, "DELETE FROM items")
    assert query(url, "SELECT gl_op, id FROM main_h_items_log ORDER BY id") == [
        ("D", 1),
        ("D", 2),
        ("D", 3),
    ]
