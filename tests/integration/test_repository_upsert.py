"""The repository's upsert is the dialect's native one: a second save replaces the row, and
two nodes saving the same new key at once both succeed."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import oracle

from gluon.repo import OffloadedTable, Repository, _to_row, models
from gluon.repo.common import insert_or_update, upsert_statement
from gluon.repo.incremental import IncrementalState
from gluon.schema import Column

KEY = "APP.ORDERS"
RECORD = OffloadedTable(
    table_key=KEY,
    source_dialect="postgresql",
    source_schema="APP",
    source_table="ORDERS",
    lake_schema="app",
    lake_table="orders",
    base_table="app_load.orders",
    base_path="/lake/app_load/orders",
    columns=(Column(name="ID", source_type="integer", lake_type="INT", nullable=False),),
    primary_key=("ID",),
    partitioning=(),
    offload_type="FULL",
    status="offloading",
)
STATE = IncrementalState(
    table_key=KEY,
    method="CHANGELOG",
    status="enabling",
    key_columns=("ID",),
    source_objects=(),
    delta_table="app_load.orders_changes",
    delta_path="/lake/app_load/orders_changes",
)


def _url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'repo.db'}"
    return str(request.getfixturevalue("pg_url"))


def _ids(repo: Repository) -> list[int]:
    table = models.offloaded_tables
    with repo.engine.connect() as connection:
        return list(connection.execute(sa.select(table.c.id)).scalars())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_second_save_replaces_the_row(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    repo = Repository(_url(backend, request, tmp_path), create=True)
    repo.save_table(RECORD)
    [first_id] = _ids(repo)
    offloaded = replace(RECORD, status="offloaded", row_count=12)
    repo.save_table(offloaded)
    assert repo.get_table(KEY) == offloaded
    assert _ids(repo) == [first_id]

    repo.incremental.save_state(STATE)
    enabled = replace(STATE, status="enabled", view_generation=3, shipped_seq=41)
    repo.incremental.save_state(enabled)
    assert repo.incremental.get_state(KEY) == enabled
    repo.engine.dispose()


def _wait_for_a_lock_wait(engine: sa.Engine) -> None:
    """Until another session of this database waits on a row lock (the racing save)."""
    deadline = time.monotonic() + 60
    with engine.connect() as connection:
        while time.monotonic() < deadline:
            waiting = connection.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar()
            if waiting:
                return
            connection.rollback()
            time.sleep(0.05)
    raise AssertionError("the concurrent save never waited for the first one's row")


def test_two_nodes_saving_a_new_key_at_once_both_succeed(pg_url: str) -> None:
    """Update-then-insert lost this race: both updates found no row and the second insert
    failed on the unique key."""
    repo = Repository(pg_url, create=True)
    other_node = Repository(pg_url)
    errors: list[BaseException] = []
    offloaded = replace(RECORD, status="offloaded", row_count=12)

    def save() -> None:
        try:
            other_node.save_table(offloaded)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with repo.engine.begin() as first:  # the first node's save, not yet committed
        first.execute(models.offloaded_tables.insert().values(**_to_row(RECORD)))
        racing = threading.Thread(target=save)
        racing.start()
        _wait_for_a_lock_wait(repo.engine)
    racing.join()

    assert errors == []
    assert repo.get_table(KEY) == offloaded
    assert len(_ids(repo)) == 1
    repo.engine.dispose()
    other_node.engine.dispose()


def test_oracle_has_no_single_statement_upsert() -> None:
    """Oracle's MERGE is not atomic (two sessions both take WHEN NOT MATCHED, one gets
    ORA-00001): the repository inserts and updates on a unique violation instead."""
    # SQLAlchemy's Oracle dialect has an unannotated constructor.
    dialect = oracle.dialect()  # type: ignore[no-untyped-call]
    row = {"table_key": KEY, "method": "CHANGELOG", "status": "enabled"}
    assert upsert_statement(dialect, models.incremental_state, row) is None


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_insert_or_update_replaces_the_row(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    repo = Repository(_url(backend, request, tmp_path), create=True)
    table = models.offloaded_tables
    insert_or_update(repo.engine, table, KEY, _to_row(RECORD))
    [first_id] = _ids(repo)
    offloaded = replace(RECORD, status="offloaded", row_count=12)
    insert_or_update(repo.engine, table, KEY, _to_row(offloaded))
    assert repo.get_table(KEY) == offloaded
    assert _ids(repo) == [first_id]
    repo.engine.dispose()


def test_insert_or_update_wins_the_race_for_a_new_key(pg_url: str) -> None:
    """The path Oracle takes, raced on PostgreSQL: the second node's insert waits for the
    first node's uncommitted insert of the key, fails on the unique key once it commits,
    and updates the row instead of failing."""
    repo = Repository(pg_url, create=True)
    other_node = Repository(pg_url)
    errors: list[BaseException] = []
    offloaded = replace(RECORD, status="offloaded", row_count=12)

    def save() -> None:
        try:
            insert_or_update(other_node.engine, models.offloaded_tables, KEY, _to_row(offloaded))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    with repo.engine.begin() as first:  # the first node's save, not yet committed
        first.execute(models.offloaded_tables.insert().values(**_to_row(RECORD)))
        racing = threading.Thread(target=save)
        racing.start()
        _wait_for_a_lock_wait(repo.engine)
    racing.join()

    assert errors == []
    assert repo.get_table(KEY) == offloaded
    assert len(_ids(repo)) == 1
    repo.engine.dispose()
    other_node.engine.dispose()
