"""The application never breaks because of gluon's privileges (issue 12, reproduction 4).

A second PostgreSQL role with nothing but SELECT/INSERT/UPDATE/DELETE on the
application table writes it while incremental update is enabled: its writes
succeed, and its changes are captured, extracted and shown by the lake.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import Source, lake_rows, postgres_source
from typer.testing import Result

RunCli = Callable[..., Result]


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    chosen = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    with chosen.engine.begin() as db:
        db.execute(sa.text("CREATE TABLE app.items (id integer PRIMARY KEY, name text)"))
        db.execute(sa.text("INSERT INTO app.items VALUES (1, 'a'), (2, 'b')"))
    return chosen


@pytest.fixture
def writer(source: Source) -> Iterator[tuple[str, sa.Engine]]:
    """A role that may only read and write app.items (and use schema app); its engine."""
    role = f"app_writer_{uuid.uuid4().hex[:8]}"
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        db.execute(sa.text(f"GRANT USAGE ON SCHEMA app TO {role}"))
        db.execute(sa.text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON app.items TO {role}"))
    engine = sa.create_engine(sa.engine.make_url(source.url).set(username=role, password=None))
    try:
        yield role, engine
    finally:
        engine.dispose()
        with source.engine.begin() as db:
            db.execute(sa.text(f"DROP OWNED BY {role}"))
            db.execute(sa.text(f"DROP ROLE {role}"))


def enable(run_cli: RunCli, method: str) -> None:
    result = run_cli(
        "offload",
        "-t",
        "app.items",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )
    assert result.exit_code == 0, result.stderr


def extract(run_cli: RunCli) -> None:
    result = run_cli("offload", "-t", "app.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr


def lake_items() -> list[tuple[object, ...]]:
    return [(row["id"], row["name"]) for row in lake_rows("SELECT * FROM app.items ORDER BY id")]


def source_items(source: Source) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        return [tuple(row) for row in db.execute(sa.text("SELECT * FROM app.items ORDER BY id"))]


@pytest.mark.parametrize("method", ["CHANGELOG", "UPDATABLE_CHANGELOG"])
def test_a_role_without_privileges_on_capture_objects_writes_the_table(
    source: Source, writer: tuple[str, sa.Engine], run_cli: RunCli, method: str
) -> None:
    enable(run_cli, method)
    _, engine = writer
    with engine.begin() as db:
        db.execute(sa.text("INSERT INTO app.items VALUES (3, 'c')"))
        db.execute(sa.text("UPDATE app.items SET name = 'B' WHERE id = 2"))
        db.execute(sa.text("DELETE FROM app.items WHERE id = 1"))
    # The pinned search_path: a caller's own objects never stand in for gluon's.
    with engine.begin() as db:
        db.execute(sa.text("SET search_path = app, public"))
        db.execute(sa.text("INSERT INTO app.items VALUES (4, 'd')"))
    extract(run_cli)
    assert source_items(source) == [(2, "B"), (3, "c"), (4, "d")]
    assert lake_items() == source_items(source)


def test_a_role_granted_the_updatable_view_patches_through_it(
    source: Source, writer: tuple[str, sa.Engine], run_cli: RunCli
) -> None:
    """Grants on the view (and its schema) are all a patching role needs: the view's trigger
    writes the changelog with gluon's rights."""
    enable(run_cli, "UPDATABLE")
    role, engine = writer
    with source.engine.begin() as db:
        db.execute(sa.text(f"GRANT USAGE ON SCHEMA app_h TO {role}"))
        db.execute(sa.text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON app_h.items_uv TO {role}"))
    with engine.begin() as db:
        db.execute(sa.text("UPDATE app_h.items_uv SET name = 'patched' WHERE id = 1"))
        db.execute(sa.text("INSERT INTO app_h.items_uv VALUES (9, 'lake only')"))
    extract(run_cli)
    assert source_items(source) == [(1, "a"), (2, "b")]  # the view never reaches the table
    assert lake_items() == [(1, "patched"), (2, "b"), (9, "lake only")]
