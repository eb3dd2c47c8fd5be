"""Repository migrations: a new repository and one upgraded from the previous release's
schema both match ``gluon.repo.models``, and an upgrade keeps every row.

The previous release's repository is a frozen fixture (``tests/support/repository_v9``):
the DDL gluon 0.1.0's numbered migrations 1-9 created, plus a row in every table.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from gluon.errors import ConfigError, RepositoryError
from gluon.repo import Repository, migrations, models

FIXTURE = Path(__file__).parents[1] / "support" / "repository_v9"
KEY = "APP.ORDERS"


def _url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'repo.db'}"
    return str(request.getfixturevalue("pg_url"))


def _statements(name: str) -> list[str]:
    text = "\n".join(
        line for line in (FIXTURE / name).read_text().splitlines() if not line.startswith("--")
    )
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def _version_9_repository(url: str, backend: str) -> None:
    """Build the repository as the previous release left it, rows included."""
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        for statement in _statements(f"{backend}.sql") + _statements("rows.sql"):
            connection.exec_driver_sql(statement)
    engine.dispose()


def _differences(engine: sa.Engine) -> list[Any]:
    """What ``alembic check`` would report: the repository's schema against the models."""

    def ours(name: str | None, kind: str, parent: Any) -> bool:
        return not (kind == "table" and name == migrations.legacy_schema_version.name)

    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "version_table": migrations.VERSION_TABLE,
                "include_name": ours,
                "compare_type": True,
            },
        )
        return list(compare_metadata(context, models.metadata))


DEFAULTED_COLUMNS = {("incremental_state", "merge_mode"): "DEFERRED"}
"""Columns added after version 9 that an upgrade fills with their default (checked below)."""


def _all_rows(engine: sa.Engine) -> dict[str, list[dict[str, Any]]]:
    """Every row of the models' tables the database has, with the columns it has now."""
    existing = set(sa.inspect(engine).get_table_names())
    tables = [table for table in models.metadata.sorted_tables if table.name in existing]
    present = sa.MetaData()
    present.reflect(engine, only=[table.name for table in tables])
    with engine.connect() as connection:
        return {
            table.name: [
                dict(row)
                for row in connection.execute(
                    sa.select(present.tables[table.name]).order_by(
                        *(present.tables[table.name].c[c.name] for c in table.primary_key.columns)
                    )
                ).mappings()
            ]
            for table in tables
        }


def _kept(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """``after`` without the columns added since ``before`` (checked empty, or their default),
    and without the tables added since (checked empty)."""
    kept: dict[str, list[dict[str, Any]]] = {}
    for name, rows in after.items():
        if name not in before:
            assert rows == [], f"table {name}, new since, holds rows after the upgrade"
            continue
        known = set(before[name][0]) if before[name] else set()
        added = [{k: v for k, v in row.items() if k not in known} for row in rows]
        assert all(
            value == DEFAULTED_COLUMNS.get((name, column))
            for row in added
            for column, value in row.items()
        ), (name, added)
        kept[name] = [{k: v for k, v in row.items() if k in known} for row in rows]
    return kept


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_new_repository_matches_the_models(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Fails when a model column is added without a revision that adds it."""
    repo = Repository(_url(backend, request, tmp_path), create=True)
    assert repo.revision == migrations.head()
    assert _differences(repo.engine) == []
    repo.engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_version_9_repository_upgrades_and_keeps_its_rows(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = _url(backend, request, tmp_path)
    _version_9_repository(url, backend)
    before = sa.create_engine(url)
    rows = _all_rows(before)
    before.dispose()
    assert all(rows.values()), "the fixture has a row in every table"

    repo = Repository(url)  # an existing repository: no create=True needed

    assert repo.revision == migrations.head()
    assert _differences(repo.engine) == []
    assert _kept(rows, _all_rows(repo.engine)) == rows
    # Stamped, not re-run: revision 0008 did not add a second installation id.
    assert repo.installation_id == "0123456789abcdef0123456789abcdef"
    with repo.engine.connect() as connection:
        assert migrations.current_revision(connection) == migrations.head()
    state = repo.incremental.get_state(KEY)
    assert state is not None and state.shipped_seq == 41 and state.enablement_id == 1
    assert state.merge_mode == "DEFERRED", "revision 0011 gives existing tables the default"
    table = repo.get_table(KEY)
    assert table is not None and table.row_count == 1200
    # New rows get fresh ids after the ones the old release wrote.
    run_id = repo.incremental.start_extraction(KEY, enablement_id=1)
    assert run_id == 2
    # Opening it again applies nothing.
    assert _all_rows(Repository(url).engine) == _all_rows(repo.engine)
    repo.engine.dispose()


def test_each_numbered_migration_maps_to_a_revision(tmp_path: Path) -> None:
    """A repository stopped at any numbered migration upgrades to the models' schema."""
    for number, revision in migrations.LEGACY_REVISIONS.items():
        url = f"sqlite:///{tmp_path / f'repo_{number}.db'}"
        engine = sa.create_engine(url)
        # The schema up to the revision, recorded the old way (numbered migrations).
        with engine.connect() as connection:
            command.upgrade(migrations._config(connection), revision)
            connection.commit()
            connection.exec_driver_sql(f"DROP TABLE {migrations.VERSION_TABLE}")
            migrations.legacy_schema_version.create(connection)
            for applied in range(1, number + 1):
                connection.execute(
                    migrations.legacy_schema_version.insert().values(
                        version=applied, description="-", applied_at=dt.datetime(2026, 1, 1)
                    )
                )
            connection.commit()
        engine.dispose()
        repo = Repository(url)
        assert _differences(repo.engine) == [], number
        assert len(repo.installation_id) == 32
        repo.engine.dispose()


def test_a_repository_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'repo.db'}"
    Repository(url, create=True).engine.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"UPDATE {migrations.VERSION_TABLE} SET version_num = '9999'")
    engine.dispose()
    with pytest.raises(RepositoryError, match="newer gluon release"):
        Repository(url)


def test_an_empty_database_is_not_a_repository(tmp_path: Path) -> None:
    path = tmp_path / "repo.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE unrelated (x INTEGER)")
    engine.dispose()
    with pytest.raises(ConfigError, match="holds no gluon repository"):
        Repository(f"sqlite:///{path}")
