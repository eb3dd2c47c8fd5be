"""Source schema changes never make the application's DML fail (issue 12, reproduction 5).

The capture trigger keeps recording after ADD COLUMN, DROP COLUMN and widened
columns: a dropped column is recorded as NULL, widened values fit the
changelog. (Detecting the change at extraction and evolving the lake is
``gluon.schema``'s business; this file checks the capture side only.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import Source, postgres_source, sqlite_source
from typer.testing import Result

RunCli = Callable[..., Result]


def run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def rows(source: Source, query: str) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        return [tuple(row) for row in db.execute(sa.text(query))]


def enable(run_cli: RunCli, source: Source, method: str = "CHANGELOG") -> None:
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )
    assert result.exit_code == 0, result.stderr


@pytest.fixture
def pg(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    run(
        source,
        "CREATE TABLE app.items (id integer PRIMARY KEY, name varchar(10), qty integer, "
        "price numeric(6,2), extra text)",
        "INSERT INTO app.items VALUES (1, 'a', 1, 1.50, 'x'), (2, 'b', 2, 2.50, 'y')",
    )
    return source


LOG = "SELECT gl_op, id, name, qty, price FROM app_h.items_log ORDER BY gl_seq"


@pytest.mark.parametrize("method", ["CHANGELOG", "CHANGELOG_INSERT"])
def test_postgres_dml_survives_add_drop_and_widen(pg: Source, run_cli: RunCli, method: str) -> None:
    enable(run_cli, pg, method)
    inserts_only = method == "CHANGELOG_INSERT"

    run(pg, "ALTER TABLE app.items ADD COLUMN note text")
    run(pg, "INSERT INTO app.items VALUES (3, 'c', 3, 3.50, 'z', 'new column')")
    run(pg, "ALTER TABLE app.items DROP COLUMN extra")
    run(pg, "INSERT INTO app.items (id, name, qty, price) VALUES (4, 'd', 4, 4.50)")
    if not inserts_only:
        run(pg, "UPDATE app.items SET name = 'B' WHERE id = 2")
        run(pg, "DELETE FROM app.items WHERE id = 1")
    run(pg, "ALTER TABLE app.items ALTER COLUMN name TYPE varchar(50)")
    run(pg, "ALTER TABLE app.items ALTER COLUMN qty TYPE bigint")
    run(pg, "ALTER TABLE app.items ALTER COLUMN price TYPE numeric(14,4)")
    long_name = "a name longer than ten characters"
    run(
        pg,
        "INSERT INTO app.items (id, name, qty, price) "
        f"VALUES (5, '{long_name}', 5000000000, 123456.7891)",
    )
    if not inserts_only:
        run(pg, "UPDATE app.items SET qty = 6000000000 WHERE id = 4")

    logged = rows(pg, LOG)
    if inserts_only:
        assert [row[:3] for row in logged] == [("I", 3, "c"), ("I", 4, "d"), ("I", 5, long_name)]
    else:
        assert [row[:3] for row in logged] == [
            ("I", 3, "c"),
            ("I", 4, "d"),
            ("U", 2, "B"),
            ("D", 1, None),
            ("I", 5, long_name),
            ("U", 4, "d"),
        ]
        assert logged[-1][3] == 6_000_000_000
    inserted = next(row for row in logged if row[1] == 5)
    assert inserted[3] == 5_000_000_000 and str(inserted[4]) == "123456.7891"
    # A dropped column is recorded as NULL from then on (its changelog column stays).
    extra = rows(pg, "SELECT id, extra FROM app_h.items_log ORDER BY gl_seq")
    assert extra[0] == (3, "z") and all(value is None for _, value in extra[1:])


@pytest.fixture
def lite(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    run(
        source,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(10), qty integer, extra text)",
        "INSERT INTO items VALUES (1, 'a', 1, 'x'), (2, 'b', 2, 'y')",
    )
    return source


def test_sqlite_dml_survives_add_column_and_sqlite_refuses_dropping_a_captured_one(
    lite: Source, run_cli: RunCli
) -> None:
    enable(run_cli, lite)
    run(lite, "ALTER TABLE items ADD COLUMN note text")
    run(lite, "INSERT INTO items VALUES (3, 'a longer name than declared', 3, 'z', 'n')")
    run(lite, "UPDATE items SET name = 'B', note = 'm' WHERE id = 2")
    run(lite, "DELETE FROM items WHERE id = 1")
    # SQLite itself refuses to drop a column a trigger reads; the application's DML goes on.
    with pytest.raises(sa.exc.OperationalError, match="extra"):
        run(lite, "ALTER TABLE items DROP COLUMN extra")
    run(lite, "INSERT INTO items VALUES (4, 'd', 4, 'w', NULL)")
    logged = rows(lite, "SELECT gl_op, id, name FROM main_h_items_log ORDER BY gl_seq")
    assert logged == [
        ("I", 3, "a longer name than declared"),
        ("U", 2, "B"),
        ("D", 1, None),
        ("I", 4, "d"),
    ]
