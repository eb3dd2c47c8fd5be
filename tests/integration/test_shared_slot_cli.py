"""Tables enabled into their database's shared slot through the CLI
(``--incremental-pg-logical-slot=database``, issue 33 item 1): two tables of one database,
one DEFERRED (a composite key of keyword names, changed by UPDATEs), one IMMEDIATE (NULLs and
TOASTed values), a writer, extractions in any order, the lake equal to the source value for
value; a kill at each new fault point; one table disabled, the other goes on; a bad scope
refused in one line with nothing created.

Real PostgreSQL (wal_level=logical), Sail and Delta tables.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows, run_offload_process
from support.statements import configured_source, run_sql
from support.tables import ok
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

ORDERS = "app.orders"
DOCS = "app.docs"
SETUP = (
    "CREATE SCHEMA IF NOT EXISTS app",
    'CREATE TABLE app.orders ("select" INTEGER, "order" TEXT, v TEXT, '
    'PRIMARY KEY ("select", "order"))',
    "INSERT INTO app.orders SELECT g % 5, 'o' || g, 'v' || g FROM generate_series(1, 30) g",
    "CREATE TABLE app.docs (id INTEGER PRIMARY KEY, n INTEGER, body TEXT)",
    "ALTER TABLE app.docs ALTER COLUMN body SET STORAGE EXTERNAL",
    "ALTER TABLE app.docs REPLICA IDENTITY FULL",
    "INSERT INTO app.docs SELECT g, CASE WHEN g % 3 = 0 THEN NULL ELSE g END, "
    "CASE WHEN g % 4 = 0 THEN NULL ELSE repeat(md5(g::text), 400) END "
    "FROM generate_series(1, 30) g",
)
SHARED = "--incremental-pg-logical-slot=database"


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    return configured_source(pg_url, monkeypatch, *SETUP)


def _source(engine: sa.Engine, table: str) -> list[tuple[Any, ...]]:
    with engine.connect() as db:
        return sorted(tuple(row) for row in db.execute(sa.text(f"SELECT * FROM {table}")))


def _lake(table: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in lake_rows(f"SELECT * FROM {table}"))


def _enable(run_cli: Callable[..., Result], table: str, mode: str) -> None:
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=PG_LOGICAL",
            f"--incremental-merge-mode={mode}",
            SHARED,
        )
    )


def _extract(run_cli: Callable[..., Result], table: str) -> None:
    ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))


def _writer(engine: sa.Engine, round_: int) -> None:
    run_sql(
        engine,
        f'UPDATE app.orders SET "select" = "select" + 10, v = \'k{round_}\' '
        f'WHERE "select" = {round_ % 5}',
        f"INSERT INTO app.orders VALUES (100 + {round_}, 'new', NULL)",
        f"DELETE FROM app.orders WHERE \"order\" = 'o{round_ + 1}'",
    )
    run_sql(
        engine,
        f"UPDATE app.docs SET n = NULL WHERE id % 5 = {round_ % 5}",
        f"UPDATE app.docs SET n = {round_}, body = NULL WHERE id = {round_ + 2}",
        f"INSERT INTO app.docs VALUES (200 + {round_}, NULL, repeat('x', 9000))",
        f"DELETE FROM app.docs WHERE id = {round_ + 20}",
    )


def _matches(engine: sa.Engine, *tables: str) -> None:
    for table in tables:
        assert _lake(table) == _source(engine, table), table


def test_two_member_tables_in_both_merge_modes_match_the_source(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    _enable(run_cli, ORDERS, "DEFERRED")
    _writer(engine, 0)  # between the enables: orders' to ship, in docs' copy
    _enable(run_cli, DOCS, "IMMEDIATE")
    state = Repository(load_settings().repo_url).incremental.get_state("APP.ORDERS")
    assert state is not None
    assert [item.kind for item in state.source_objects] == ["shared_slot_table"]
    for round_, table in enumerate([ORDERS, DOCS, DOCS, ORDERS], start=1):
        _writer(engine, round_)
        _extract(run_cli, table)
    _extract(run_cli, ORDERS)
    _extract(run_cli, DOCS)
    _matches(engine, ORDERS, DOCS)
    points = ("extract.before_shared_position", "extract.after_shared_position")
    for round_, point in enumerate(points, start=10):
        _writer(engine, 2 * round_)
        for table in (ORDERS, DOCS):
            crashed = run_offload_process(
                "-t",
                table,
                "-x",
                "--incremental-run-extraction",
                "--incremental-batch-size=3",
                env={"GLUON_FAULT": point},
            )
            assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        _writer(engine, 2 * round_ + 1)
        _extract(run_cli, DOCS)
        _extract(run_cli, ORDERS)
        _matches(engine, ORDERS, DOCS)
    ok(run_cli("offload", "-t", DOCS, "-x", "--incremental-updates-disabled"))
    _writer(engine, 30)
    _extract(run_cli, ORDERS)
    _matches(engine, ORDERS)
    with engine.connect() as db:
        published = db.execute(
            sa.text("SELECT tablename FROM pg_publication_tables WHERE pubname LIKE 'gluondb%'")
        ).scalars()
        assert sorted(published) == ["orders"]
    ok(
        run_cli(
            "offload",
            "-t",
            ORDERS,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
        )
    )
    ok(run_cli("offload", "-t", ORDERS, "-x", "--incremental-updates-disabled"))
    with engine.connect() as db:
        slots = db.execute(
            sa.text("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'gluondb%'")
        ).scalar_one()
        assert slots == 0  # the last member dropped the shared slot


def test_a_bad_slot_scope_is_one_line_and_creates_nothing(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    refused = run_cli(
        "offload",
        "-t",
        ORDERS,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
        "--incremental-pg-logical-slot=cluster",
    )
    assert refused.exit_code == 2, refused.stdout
    assert refused.stderr.strip().splitlines() == [
        "offload: error: --incremental-pg-logical-slot must be table or database, not 'cluster'"
    ], refused.stderr
    assert Repository(load_settings().repo_url, create=True).get_table("APP.ORDERS") is None
    with engine.connect() as db:
        slots = db.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar_one()
    assert slots == 0


ENABLE_DOCS = (
    "-t",
    DOCS,
    "-x",
    "--incremental-updates-enabled",
    "--incremental-extraction-method=PG_LOGICAL",
    "--incremental-merge-mode=IMMEDIATE",
    SHARED,
)


@pytest.mark.parametrize(
    "point",
    [
        "repo.after_hold_slot_position",
        "capture.after_publish_table",
        "repo.after_save_slot_position",
        "lake.before_write",
        "lake.after_write",
        "lake.before_write@2",
        "lake.after_write@2",
        "enable.fail_after_capture",
    ],
)
def test_an_enable_killed_or_failed_anywhere_and_run_again_ships_each_change_once(
    engine: sa.Engine, run_cli: Callable[..., Result], point: str
) -> None:
    _enable(run_cli, ORDERS, "DEFERRED")
    _writer(engine, 1)
    died = run_offload_process(*ENABLE_DOCS, env={"GLUON_FAULT": point})
    if point == "enable.fail_after_capture":  # a failure: the enable undoes itself
        assert died.returncode == 1, died.stderr
        assert "the enable was undone" in died.stderr, died.stderr
        assert Repository(load_settings().repo_url).slot_positions.get("APP.DOCS") is None
    else:
        assert died.returncode == FAULT_EXIT_CODE, died.stderr
    _writer(engine, 2)
    _extract(run_cli, ORDERS)  # the other table goes on meanwhile
    ok(run_cli("offload", *ENABLE_DOCS))
    _writer(engine, 3)
    _extract(run_cli, DOCS)
    _extract(run_cli, ORDERS)
    _matches(engine, ORDERS, DOCS)


def test_status_disable_and_other_methods_on_a_member_table(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    _enable(run_cli, ORDERS, "DEFERRED")
    _writer(engine, 1)
    status = ok(run_cli("display_incremental_status", "-t", ORDERS))
    assert "Changes waiting in the replication slot:" in status.stdout, status.stdout
    assert "(in slot gluondb_" in status.stdout, status.stdout
    refused = run_cli("offload", "-t", ORDERS, "-x", "--incremental-updates-disabled")
    assert refused.exit_code == 1, refused.stdout
    assert "changes in its database's shared replication slot" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    other = run_cli(
        "offload",
        "-t",
        DOCS,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        SHARED,
    )
    assert other.exit_code == 2, other.stderr
    assert "--incremental-pg-logical-slot=database is for log-based extraction" in other.stderr
    assert Repository(load_settings().repo_url).incremental.get_state("APP.DOCS") is None
