"""gluon owns what it creates and touches nothing else (issue 12, reproductions 1 and 2).

Real PostgreSQL and SQLite sources, the embedded engine, real Delta tables. Each
test drives the ``offload`` command the way a user would and checks the source
catalog and the lake afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import Source, lake_rows, postgres_source, sqlite_source
from typer.testing import Result

from gluon.capture.ownership import LAKE_MARKER, lake_table_marker
from gluon.config import load_settings
from gluon.repo import Repository

RunCli = Callable[..., Result]
METHOD = "--incremental-extraction-method=CHANGELOG"


@pytest.fixture(params=["sqlite", "postgresql"])
def source(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Source:
    chosen = (
        sqlite_source(tmp_path / "app.db")
        if request.param == "sqlite"
        else postgres_source(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    with chosen.engine.begin() as db:
        db.execute(
            sa.text(f"CREATE TABLE {chosen.schema}.items (id integer PRIMARY KEY, name text)")
        )
        db.execute(sa.text(f"INSERT INTO {chosen.schema}.items VALUES (1, 'a'), (2, 'b')"))
    return chosen


def run(source: Source, statement: str) -> None:
    with source.engine.begin() as db:
        db.execute(sa.text(statement))


def source_rows(source: Source, table: str) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        return [tuple(row) for row in db.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1"))]


def table_exists(source: Source, schema: str, table: str) -> bool:
    inspector = sa.inspect(source.engine)
    return table in inspector.get_table_names(schema=schema)


def refused(result: Result, *fragments: str) -> str:
    lines = error_lines(result)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def enable(run_cli: RunCli, source: Source, *extra: str) -> Result:
    return run_cli(
        "offload", "-t", source.table, "-x", "--incremental-updates-enabled", METHOD, *extra
    )


def test_changelog_table_naming_the_application_table_is_refused(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    """Reproduction 1: the application table named as changelog is never adopted or dropped."""
    result = enable(run_cli, source, f"--incremental-changelog-table={source.table}")
    refused(result, "items", "not shaped like gluon's", "--incremental-changelog-table")
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")  # the application still writes
    assert source_rows(source, source.table) == [(1, "a"), (2, "b"), (3, "c")]
    assert Repository(load_settings().repo_url).incremental.get_state(source.table.upper()) is None
    # Not even with the take-over option: it is not shaped like a changelog.
    result = enable(
        run_cli,
        source,
        f"--incremental-changelog-table={source.table}",
        "--incremental-take-over-objects",
    )
    refused(result, "not shaped like gluon's")
    assert source_rows(source, source.table) == [(1, "a"), (2, "b"), (3, "c")]


def test_changelog_table_naming_an_unrelated_table_is_refused(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    other = f"{source.schema}.audit"
    run(source, f"CREATE TABLE {other} (id integer, note text)")
    run(source, f"INSERT INTO {other} VALUES (1, 'keep me')")
    result = enable(run_cli, source, f"--incremental-changelog-table={other}")
    refused(result, "audit", "not gluon's")
    assert source_rows(source, other) == [(1, "keep me")]


def test_disable_keeps_a_changelog_replaced_behind_its_back(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    """Disable drops only what it owns: a foreign table now under the changelog's name stays."""
    log = f"{source.schema}.items_log_x"
    assert enable(run_cli, source, f"--incremental-changelog-table={log}").exit_code == 0
    run(source, f"DROP TABLE {log}")
    run(source, f"CREATE TABLE {log} (id integer, note text)")
    run(source, f"INSERT INTO {log} VALUES (1, 'the application now keeps data here')")
    result = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
    assert result.exit_code == 0, result.stderr
    assert "kept table" in result.stdout and "items_log_x" in result.stdout
    assert source_rows(source, log) == [(1, "the application now keeps data here")]
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")  # our trigger is gone
    assert source_rows(source, log) == [(1, "the application now keeps data here")]


def test_a_second_installation_cannot_adopt_the_capture_objects(
    source: Source,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Reproduction 2: a second OFFLOAD_HOME enabling the same table is refused; the first
    installation keeps every change."""
    assert enable(run_cli, source).exit_code == 0
    first_home = offload_home
    second_home = tmp_path / "second_home"
    second_home.mkdir()
    monkeypatch.setenv("OFFLOAD_HOME", str(second_home))
    line = refused(enable(run_cli, source), "another gluon installation", "ITEMS")
    assert "--incremental-take-over-objects" in line
    assert not (second_home / "lake" / f"{source.schema}_load.db").exists()

    monkeypatch.setenv("OFFLOAD_HOME", str(first_home))
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")
    run(source, f"UPDATE {source.table} SET name = 'B' WHERE id = 2")
    assert (
        run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction").exit_code == 0
    )
    assert lake_items(source) == source_rows(source, source.table)


def lake_items(source: Source) -> list[tuple[object, ...]]:
    """The lake's user view of the table, as (id, name) rows in key order."""
    rows = lake_rows(f"SELECT id, name FROM {source.schema}.items ORDER BY id")
    return [(row["id"], row["name"]) for row in rows]


def test_take_over_after_a_lost_repository(
    source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    """The repository is lost: the re-created one may take the leftovers over, explicitly."""
    assert enable(run_cli, source).exit_code == 0
    (offload_home / "repo" / "gluon.db").unlink()
    for leftover in (offload_home / "repo").iterdir():
        leftover.unlink()
    refused(
        enable(run_cli, source, "--reset-backend-table"),
        "another gluon installation",
        "--incremental-take-over-objects",
    )
    result = enable(run_cli, source, "--reset-backend-table", "--incremental-take-over-objects")
    assert result.exit_code == 0, result.stderr
    run(source, f"INSERT INTO {source.table} VALUES (3, 'c')")
    assert (
        run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction").exit_code == 0
    )
    assert lake_items(source) == [(1, "a"), (2, "b"), (3, "c")]
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    marker = lake_table_marker(state.delta_path)
    assert marker is not None
    assert marker.installation_id == Repository(load_settings().repo_url).installation_id
    assert (Path(state.delta_path) / LAKE_MARKER).is_file()


def test_a_delta_table_of_another_installation_is_refused(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two installations sharing a lake root, each with its own source: the second may not
    enable over the first one's delta table."""
    lake = tmp_path / "shared_lake"
    monkeypatch.setenv("OFFLOAD_LAKE_ROOT", str(lake))
    sources = []
    for name in ("one", "two"):
        chosen = sqlite_source(tmp_path / f"{name}.db")
        run(chosen, "CREATE TABLE items (id integer PRIMARY KEY, name text)")
        sources.append(chosen)
    monkeypatch.setenv("GLUON_SOURCE_URL", sources[0].url)
    assert enable(run_cli, sources[0]).exit_code == 0
    delta = next(lake.rglob(LAKE_MARKER)).parent
    before = sorted(path.name for path in delta.rglob("*"))
    second_home = tmp_path / "second_home"
    second_home.mkdir()
    monkeypatch.setenv("OFFLOAD_HOME", str(second_home))
    monkeypatch.setenv("GLUON_SOURCE_URL", sources[1].url)
    base = lake / "main.db" / "items_data"
    base_before = sorted(path.name for path in base.rglob("*"))
    refused(
        run_cli("offload", "-t", "main.items", "-x", "--incremental-updates-enabled", METHOD),
        "base table already exists",
        "another gluon installation",
    )
    refused(
        run_cli("offload", "-t", "main.items", "-x"),
        "base table already exists",
        "--reset-backend-table",
    )
    refused(
        run_cli(
            "offload",
            "-t",
            "main.items",
            "-x",
            "--reset-backend-table",
            "--incremental-updates-enabled",
            METHOD,
        ),
        "delta table already exists",
        "another gluon installation",
    )
    assert sorted(path.name for path in delta.rglob("*")) == before
    assert sorted(path.name for path in base.rglob("*")) == base_before
    assert not table_exists(sources[1], "main", "main_h_items_log")


def test_objects_of_a_table_enabled_before_markers_are_still_dropped(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgraded installation: the table was enabled by a gluon that marked nothing. Its
    recorded, gluon-shaped objects are its own; disable drops them all."""
    chosen = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    run(chosen, "CREATE TABLE app.items (id integer PRIMARY KEY, name text)")
    assert enable(run_cli, chosen).exit_code == 0
    for unmark in (
        "TABLE app_h.items_log",
        "SEQUENCE app_h.items_seq",
        "FUNCTION app_h.items_ct()",
    ):
        run(chosen, f"COMMENT ON {unmark} IS NULL")
    run(chosen, "COMMENT ON SCHEMA app_h IS NULL")
    repo = Repository(load_settings().repo_url)
    with repo.engine.begin() as db:  # the installation id came with the upgrade, later
        db.execute(sa.text("UPDATE installation SET created_at = '2999-01-01 00:00:00'"))
    result = run_cli("offload", "-t", "app.items", "-x", "--incremental-updates-disabled")
    assert result.exit_code == 0, result.stderr
    assert "kept" not in result.stdout
    with chosen.engine.connect() as db:
        left = db.execute(
            sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = 'app_h'")
        ).scalar()
    assert left == 0
