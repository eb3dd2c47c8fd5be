"""Key columns that allow NULL (issue 26, item 4).

The lake compares keys NULL-safely, so every row with a NULL key is one row there; a source
that holds several (a nullable key column, a unique constraint whose NULLs are distinct)
lost rows in the lake. Enable refuses such keys in one line, before creating anything,
unless the source itself keeps NULL a single key value (PostgreSQL 15+ ``UNIQUE NULLS NOT
DISTINCT`` over exactly the key columns). A table enabled before the refusal keeps working
and status says why it needs attention. Real SQLite and PostgreSQL sources, Sail, Delta.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import Source, lake_rows, postgres_source, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository

Rows = set[tuple[object, ...]]


def _enable(run_cli: Callable[..., Result], table: str, method: str, *flags: str) -> Result:
    return run_cli(
        "offload",
        "-t",
        table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *flags,
    )


def _extract(run_cli: Callable[..., Result]) -> None:
    result = run_cli("offload", "-t", "app.keyed", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr


def _source_objects(source: Source) -> list[str]:
    """Triggers, tables, schemas and replication slots gluon could have made in the source."""
    with source.engine.connect() as db:
        if source.dialect == "sqlite":
            query = "SELECT type || ' ' || name FROM sqlite_master WHERE name <> 'keyed'"
            return sorted(str(row[0]) for row in db.execute(sa.text(query)))
        found = db.execute(
            sa.text(
                "SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal "
                "UNION ALL SELECT 'schema ' || nspname FROM pg_namespace "
                "WHERE nspname LIKE 'app%' AND nspname <> 'app' "
                "UNION ALL SELECT 'slot ' || slot_name FROM pg_replication_slots "
                "WHERE database = current_database() "
                "UNION ALL SELECT 'table ' || relname FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'app' AND relname NOT LIKE 'keyed%'"
            )
        )
        return sorted(str(row[0]) for row in found)


REFUSED: dict[str, list[tuple[str, str | None, str, str]]] = {
    # dialect: (table definition, key option, method, the columns the refusal names)
    "sqlite": [
        ("(code INTEGER, name TEXT)", "--incremental-key-columns=code", "CHANGELOG", "code"),
        # A rowid table's composite primary key allows NULL unless declared NOT NULL.
        (
            "(code INTEGER, part TEXT, name TEXT, PRIMARY KEY (code, part))",
            None,
            "CHANGELOG",
            "code, part",
        ),
        (
            "(code INTEGER UNIQUE, name TEXT)",
            "--incremental-key-columns=code",
            "UPDATABLE_CHANGELOG",
            "code",
        ),
    ],
    "postgresql": [
        ("(code INTEGER UNIQUE, name TEXT)", "--incremental-key-columns=code", "CHANGELOG", "code"),
        (
            "(code INTEGER UNIQUE, name TEXT)",
            "--incremental-key-columns=code",
            "PG_LOGICAL",
            "code",
        ),
        (
            "(code INTEGER NOT NULL, part TEXT, name TEXT, UNIQUE (code, part))",
            "--incremental-key-columns=code,part",
            "CHANGELOG",
            "part",
        ),
    ],
}


@pytest.mark.parametrize(
    ("dialect", "definition", "key", "method", "named"),
    [(dialect, *case) for dialect, cases in REFUSED.items() for case in cases],
)
def test_a_nullable_key_column_is_refused_before_anything_is_created(
    dialect: str,
    definition: str,
    key: str | None,
    method: str,
    named: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = (
        sqlite_source(tmp_path / "app.db")
        if dialect == "sqlite"
        else postgres_source(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = f"{source.schema}.keyed"
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {table} {definition}"))
        db.execute(sa.text(f"INSERT INTO {table} (code, name) VALUES (1, 'a')"))
    before = _source_objects(source)

    result = _enable(run_cli, table, method, *([key] if key else []))

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1, lines
    verb = "allow" if "," in named else "allows"
    assert f" {named} of {table} {verb} NULL" in lines[0], lines
    assert f"make {named} NOT NULL" in lines[0] and "--incremental-key-columns" in lines[0]
    assert ("NULLS NOT DISTINCT" in lines[0]) == (dialect == "postgresql"), lines
    assert "Traceback" not in result.stderr
    assert _source_objects(source) == before, "the refused enable created source objects"
    repo = Repository(load_settings().repo_url)
    assert repo.incremental.get_state(table.upper()) is None, "the refused enable left a state"
    assert repo.get_table(table.upper()) is None, "the refused enable offloaded the table"
    assert list(offload_home.rglob("_delta_log")) == [], "the refused enable wrote to the lake"


def _pg_rows(source: Source) -> Rows:
    with source.engine.connect() as db:
        rows = db.execute(sa.text("SELECT code, part, name FROM app.keyed"))
        return {tuple(row) for row in rows}


def _lake(source: Source) -> Rows:
    rows = [(r["code"], r["part"], r["name"]) for r in lake_rows("SELECT * FROM app.keyed")]
    assert len(rows) == len(set(rows)), "the lake shows a row twice"
    return set(rows)


@pytest.mark.parametrize("method", ["CHANGELOG", "PG_LOGICAL"])
def test_a_nulls_not_distinct_key_is_accepted_and_its_null_key_kept_exact(
    method: str,
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The source keeps one row per key, NULL included: NULL-safe comparison matches it."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE app.keyed (code INTEGER, part TEXT, name TEXT, "
                "CONSTRAINT keyed_key UNIQUE NULLS NOT DISTINCT (code, part))"
            )
        )
        db.execute(
            sa.text(
                "INSERT INTO app.keyed VALUES (1, NULL, 'a'), (NULL, 'x', 'b'), "
                "(NULL, NULL, 'c'), (2, 'y', 'd')"
            )
        )
        if method == "PG_LOGICAL":
            db.execute(sa.text("ALTER TABLE app.keyed REPLICA IDENTITY FULL"))
    enabled = _enable(run_cli, "app.keyed", method, "--incremental-key-columns=code,part")
    assert enabled.exit_code == 0, enabled.stderr
    with source.engine.begin() as db:
        db.execute(sa.text("UPDATE app.keyed SET name = 'a2' WHERE code = 1 AND part IS NULL"))
        db.execute(sa.text("UPDATE app.keyed SET name = 'c2' WHERE code IS NULL AND part IS NULL"))
        db.execute(sa.text("DELETE FROM app.keyed WHERE code IS NULL AND part = 'x'"))
        db.execute(sa.text("UPDATE app.keyed SET code = NULL WHERE code = 2"))
    _extract(run_cli)
    assert _lake(source) == _pg_rows(source)


def test_a_table_enabled_with_a_key_that_now_allows_null_needs_attention(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table enabled before the refusal (here: its NULLS NOT DISTINCT constraint dropped
    since) keeps extracting; status and the report say its NULL keys are taken as one."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE app.keyed (code INTEGER, part TEXT, name TEXT, "
                "CONSTRAINT keyed_key UNIQUE NULLS NOT DISTINCT (code))"
            )
        )
        db.execute(sa.text("INSERT INTO app.keyed VALUES (1, 'p', 'a')"))
    enabled = _enable(run_cli, "app.keyed", "CHANGELOG", "--incremental-key-columns=code")
    assert enabled.exit_code == 0, enabled.stderr
    clean = run_cli("display_incremental_status", "-t", "app.keyed", "--json")
    assert clean.exit_code == 0, clean.stderr
    assert json.loads(clean.stdout)["nullable_keys"] == []
    with source.engine.begin() as db:
        db.execute(sa.text("ALTER TABLE app.keyed DROP CONSTRAINT keyed_key"))
        db.execute(sa.text("INSERT INTO app.keyed VALUES (2, 'q', 'b')"))
    _extract(run_cli)
    assert _lake(source) == _pg_rows(source)

    text = run_cli("display_incremental_status", "-t", "app.keyed")
    assert text.exit_code == 0, text.stderr
    assert "key column code allows NULL" in text.stdout, text.stdout
    report = run_cli("offload_status_report", "--output-format=json")
    assert report.exit_code == 0, report.stderr
    saved = next(line for line in report.stdout.splitlines() if line.startswith("Report saved"))
    written = Path(saved.removeprefix("Report saved to ")).read_text()
    assert "key column code allows NULL" in written, written
