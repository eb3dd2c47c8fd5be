"""Insert-only methods (CHANGELOG_INSERT, UPDATABLE_INSERT) never show a key twice.

The delta view of an insert-only method appends every insert, so the lake
shows a key twice as soon as the source lets one in twice. These tests run the
real ``offload`` command against real SQLite and PostgreSQL sources and read
the lake's user view with the embedded engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli, Source, postgres_source, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository

INSERT_ONLY = ("CHANGELOG_INSERT", "UPDATABLE_INSERT")


@pytest.fixture(params=["sqlite", "postgresql"])
def source(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Source:
    if request.param == "sqlite":
        chosen = sqlite_source(tmp_path / "app.db")
    else:
        chosen = postgres_source(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


def create_events(source: Source, constraint: str = "") -> None:
    """``events`` (code, seq, note): no primary key; ``constraint`` is appended to the DDL."""
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.schema}.events (code INTEGER NOT NULL, "
                f"seq INTEGER, note VARCHAR(20){constraint})"
            )
        )
        db.execute(
            sa.text(
                f"INSERT INTO {source.schema}.events VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 2, 'c')"
            )
        )


def enable_events(run_cli: RunCli, source: Source, method: str, *extra: str) -> Result:
    return run_cli(
        "offload",
        "-t",
        f"{source.schema}.events",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *extra,
    )


def source_objects(source: Source) -> set[str]:
    """Names of the tables, views and triggers in the source (to see that nothing was made)."""
    inspector = sa.inspect(source.engine)
    schemas = [source.schema] + ([f"{source.schema}_h"] if source.dialect == "postgresql" else [])
    names: set[str] = set()
    for schema in schemas:
        if schema not in inspector.get_schema_names():
            continue
        names |= set(inspector.get_table_names(schema=schema))
        names |= set(inspector.get_view_names(schema=schema))
    return names


# -- deliverable 1: a key constraint is required --------------------------------------------


@pytest.mark.parametrize("method", INSERT_ONLY)
def test_unique_data_without_a_constraint_is_refused(
    method: str, source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    # The data is unique today, but nothing stops a second insert of code 1 tomorrow.
    create_events(source)
    result = enable_events(run_cli, source, method, "--incremental-key-columns=code")
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "needs a primary key or unique constraint on exactly (code)" in lines[0]
    assert "--incremental-no-verify-primary-key" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.exit_code == 1
    assert source_objects(source) == {"events"}
    assert (
        Repository(load_settings().repo_url).incremental.get_state(
            f"{source.schema}.events".upper()
        )
        is None
    )
    assert list(offload_home.rglob("_delta_log")) == []


@pytest.mark.parametrize(
    ("constraint", "keys", "accepted"),
    [
        (", UNIQUE (code)", "code", True),
        (", UNIQUE (code, seq)", "code,seq", False),  # seq is nullable: NULL keys repeat
        (", UNIQUE (seq, code)", "code", False),  # not exactly the key columns
        (", PRIMARY KEY (code)", "", True),
    ],
)
def test_a_unique_constraint_on_exactly_the_key_columns_is_accepted(
    constraint: str, keys: str, accepted: bool, source: Source, run_cli: RunCli
) -> None:
    create_events(source, constraint)
    extra = (f"--incremental-key-columns={keys}",) if keys else ()
    result = enable_events(run_cli, source, "CHANGELOG_INSERT", *extra)
    if accepted:
        assert result.exit_code == 0, result.stderr
    else:
        assert result.exit_code == 1
        assert "needs a primary key or unique constraint" in result.stderr


def create_unique_index(source: Source, name: str, where: str = "") -> str:
    """A unique index on events (code); SQLite names the schema on the index, not the table."""
    if source.dialect == "sqlite":
        return f"CREATE UNIQUE INDEX {source.schema}.{name} ON events (code) {where}"
    return f"CREATE UNIQUE INDEX {name} ON {source.schema}.events (code) {where}"


def test_a_unique_index_counts_and_a_partial_one_does_not(source: Source, run_cli: RunCli) -> None:
    create_events(source)
    with source.engine.begin() as db:
        db.execute(sa.text(create_unique_index(source, "events_partial", "WHERE seq > 0")))
    extra = "--incremental-key-columns=code"
    assert enable_events(run_cli, source, "CHANGELOG_INSERT", extra).exit_code == 1
    with source.engine.begin() as db:
        db.execute(sa.text(create_unique_index(source, "events_code")))
    result = enable_events(run_cli, source, "CHANGELOG_INSERT", extra)
    assert result.exit_code == 0, result.stderr


def test_no_verify_accepts_a_table_without_a_constraint(source: Source, run_cli: RunCli) -> None:
    create_events(source)
    result = enable_events(
        run_cli,
        source,
        "CHANGELOG_INSERT",
        "--incremental-key-columns=code",
        "--incremental-no-verify-primary-key",
    )
    assert result.exit_code == 0, result.stderr


def test_no_verify_help_states_the_risk(run_cli: RunCli) -> None:
    result = run_cli("offload", "--help")
    text = " ".join(result.stdout.split())
    assert "a key inserted twice shows twice in the user view" in text
