"""Member tables of their database's shared slot (issue 33 item 1): status, the report and
``--json`` show each member's own changes waiting and its oldest one, counted from one
decoding of the slot for all the members a report covers; a member lagging past
GLUON_PG_LOGICAL_MAX_RETAINED_WAL is left out (warned about, refused in one line, rebuilt by
the commands the line gives); discarding a member's changes skips them in the slot, and
setting aside is refused in one line with the way out, as is a table with generated columns
(pgoutput does not send their values); a column added to a member reaches the lake, with
changes from both sides of the ALTER in one extraction, in both merge modes.

Real PostgreSQL (wal_level=logical), Sail and Delta tables.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from support.incremental import lake_rows, run_offload_process
from support.statements import configured_source, run_sql
from support.tables import ok
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.source import pgoutput, shared_batches, shared_shipping
from gluon.status.lag import table_lag

SETUP = (
    "CREATE SCHEMA IF NOT EXISTS app",
    "CREATE TABLE app.orders (id INTEGER PRIMARY KEY, v TEXT)",
    "INSERT INTO app.orders SELECT g, 'o' || g FROM generate_series(1, 20) g",
    "CREATE TABLE app.docs (id INTEGER PRIMARY KEY, v TEXT)",
    "INSERT INTO app.docs SELECT g, 'd' || g FROM generate_series(1, 20) g",
    "CREATE TABLE app.other (id INTEGER PRIMARY KEY)",
)
SHARED = "--incremental-pg-logical-slot=database"


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    return configured_source(pg_url, monkeypatch, *SETUP)


def enable(run_cli: Callable[..., Result], table: str) -> None:
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=PG_LOGICAL",
            SHARED,
        )
    )


def status_json(run_cli: Callable[..., Result], table: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(
        ok(run_cli("display_incremental_status", "-t", table, "--json")).stdout
    )
    return status


def test_a_shared_slot_past_the_wal_threshold_gives_a_members_way_out(
    engine: sa.Engine, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """Disabling one member does not drop a shared slot: the warning says what releases it."""
    enable(run_cli, "app.orders")
    enable(run_cli, "app.docs")
    run_sql(engine, "UPDATE app.orders SET v = 'w'")
    status = ok(
        run_cli("display_incremental_status", "-t", "app.orders", "--wal-retained-threshold=0")
    )
    assert "WARNING: above 0 MiB" in status.stdout, status.stdout
    assert "each table of the shared slot" in status.stdout, status.stdout
    assert "which drops the slot" not in status.stdout
    out = tmp_path / "report"
    ok(run_cli("offload_status_report", f"--output-dir={out}", "--wal-retained-threshold=0"))
    (report,) = out.glob("*.txt")
    assert "each table of the shared slot" in report.read_text()


def test_status_and_report_count_each_member_from_one_decoding(
    engine: sa.Engine,
    run_cli: Callable[..., Result],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    enable(run_cli, "app.orders")
    enable(run_cli, "app.docs")
    before = time.time()
    time.sleep(1.1)  # the oldest pending change commits a measurable while ago
    run_sql(
        engine, "UPDATE app.orders SET v = 'x' WHERE id <= 4", "DELETE FROM app.orders WHERE id = 5"
    )
    run_sql(engine, "INSERT INTO app.other SELECT generate_series(1, 50)")  # not published
    run_sql(
        engine, "INSERT INTO app.docs VALUES (100, 'a'), (101, 'b')", "UPDATE app.docs SET v = 'y'"
    )
    time.sleep(1.1)

    status = status_json(run_cli, "app.orders")
    backlog, lag = status["changelog"], status["lag"]
    assert backlog["rows"] == 5, backlog
    assert backlog["slot"]["retained_bytes"] > 0, backlog
    assert lag["backlog"] == 5, lag
    waited = lag["oldest_pending_age_seconds"]
    assert waited is not None and 1.0 <= waited <= time.time() - before + 1, lag
    assert table_lag(load_settings(), "APP.ORDERS").backlog == 5  # the lag entry point too
    text = ok(run_cli("display_incremental_status", "-t", "app.docs")).stdout
    assert "24 (in slot " in text, text  # 2 inserts, then 22 rows updated

    # One decoding for both members, by the batch decoder the extraction uses (issue 33
    # item 2): the scalar decoder fails if status calls it.
    decodings: list[int] = []
    streamed = shared_batches.slot_messages

    def counted(*args: Any, **kwargs: Any) -> Generator[pa.Array]:
        decodings.append(1)
        return streamed(*args, **kwargs)

    def scalar_path(*_: object, **__: object) -> None:
        raise AssertionError("status decoded the shared slot with the scalar decoder")

    monkeypatch.setattr(shared_batches, "slot_messages", counted)
    for module, name in (
        (pgoutput, "transactions"),
        (pgoutput, "table_rows"),
        (shared_shipping, "table_changes"),
    ):
        monkeypatch.setattr(module, name, scalar_path)
    out = tmp_path / "report"
    ok(
        run_cli(
            "offload_status_report",
            "--output-format=json",
            "--output-level=detail",
            f"--output-dir={out}",
        )
    )
    (path,) = out.iterdir()
    report = json.loads(path.read_text())
    rows = {
        table["status"]["table_key"]: table["status"]["changelog"]["rows"]
        for table in _tables(report)
    }
    assert rows == {"APP.ORDERS": 5, "APP.DOCS": 24}, rows
    assert len(decodings) == 1, "one decoding of the shared slot for both members"

    monkeypatch.setattr(shared_batches, "slot_messages", streamed)
    ok(run_cli("offload", "-t", "app.orders", "-x", "--incremental-run-extraction"))
    assert status_json(run_cli, "app.orders")["changelog"]["rows"] == 0
    assert status_json(run_cli, "app.docs")["changelog"]["rows"] == 24


def _tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    tables: list[dict[str, Any]] = report["tables"]
    return tables


def test_a_member_past_the_wal_bound_is_left_out_warned_about_and_rebuilt(
    engine: sa.Engine,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    offload_home: Path,
) -> None:
    monkeypatch.setenv("GLUON_PG_LOGICAL_MAX_RETAINED_WAL", "1")  # MiB
    enable(run_cli, "app.orders")
    enable(run_cli, "app.docs")
    run_sql(engine, "UPDATE app.orders SET v = 'stuck' WHERE id <= 3")  # never extracted
    run_sql(
        engine,
        "INSERT INTO app.docs SELECT g, repeat(md5(g::text), 8) FROM generate_series(1000, 9000) g",
    )
    ok(run_cli("offload", "-t", "app.docs", "-x", "--incremental-run-extraction"))
    logged = "".join(path.read_text() for path in (offload_home / "log").glob("offload_*.log"))
    assert "WARNING" in logged and "APP.ORDERS was left out of shared slot" in logged

    status = status_json(run_cli, "app.orders")
    (problem,) = status["changelog"]["capture_problems"]
    assert "left out of shared slot" in problem and "GLUON_PG_LOGICAL_MAX_RETAINED_WAL" in problem
    assert status["changelog"]["rows"] is None
    assert status_json(run_cli, "app.docs")["changelog"]["rows"] == 0
    refused = run_cli("offload", "-t", "app.orders", "-x", "--incremental-run-extraction")
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code == 1 and len(lines) == 1, refused.stderr
    assert "then offload -t APP.ORDERS -x --reset-backend-table" in lines[0], lines[0]

    # The way back the line gives: disable, then a new copy into the slot.
    ok(run_cli("offload", "-t", "APP.ORDERS", "-x", "--incremental-updates-disabled"))
    ok(
        run_cli(
            "offload",
            "-t",
            "APP.ORDERS",
            "-x",
            "--reset-backend-table",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=PG_LOGICAL",
            SHARED,
        )
    )
    run_sql(
        engine, "DELETE FROM app.orders WHERE id = 7", "UPDATE app.docs SET v = 'z' WHERE id = 1"
    )
    for table in ("app.orders", "app.docs"):
        ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))
        assert _lake(table) == _source(engine, table), table


def test_discard_skips_the_members_changes_and_set_aside_is_refused_in_one_line(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    enable(run_cli, "app.orders")
    enable(run_cli, "app.docs")
    run_sql(
        engine,
        "UPDATE app.orders SET v = 'gone' WHERE id <= 3",
        "DELETE FROM app.orders WHERE id = 4",
    )
    run_sql(engine, "UPDATE app.docs SET v = 'kept' WHERE id <= 2")
    plan = ok(run_cli("offload", "-t", "app.orders", "--incremental-discard-changes"))
    assert "past the 4 changes of it the slot keeps" in plan.stdout, plan.stdout
    assert status_json(run_cli, "app.orders")["changelog"]["rows"] == 4  # a plan changes nothing
    died = run_offload_process(
        "-t",
        "app.orders",
        "-x",
        "--incremental-discard-changes",
        env={"GLUON_FAULT": "extract.before_shared_position"},
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    assert status_json(run_cli, "app.orders")["changelog"]["rows"] == 4  # nothing discarded
    done = ok(run_cli("offload", "-t", "app.orders", "-x", "--incremental-discard-changes"))
    assert "Discarded 4 changes from its database's shared replication slot" in done.stdout
    assert status_json(run_cli, "app.orders")["changelog"]["rows"] == 0
    assert status_json(run_cli, "app.docs")["changelog"]["rows"] == 2  # the other member's stay

    run_sql(engine, "UPDATE app.orders SET v = 'after' WHERE id = 9")
    for table in ("app.orders", "app.docs"):
        ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))
    assert [row for row in _lake("app.orders") if row[1] in {"gone", "after"}] == [(9, "after")]
    assert len(_lake("app.orders")) == 20  # the discarded DELETE never reached the lake
    assert _lake("app.docs") == _source(engine, "app.docs")

    refused = run_cli("offload", "-t", "app.orders", "-x", "--incremental-set-aside-changes=5")
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
    assert "--incremental-discard-changes" in lines[0], lines[0]

    # Killed once its position is saved: the changes are discarded, the slot confirmed by
    # the next command that confirms it.
    run_sql(engine, "UPDATE app.orders SET v = 'dropped' WHERE id = 10")
    died = run_offload_process(
        "-t",
        "app.orders",
        "-x",
        "--incremental-discard-changes",
        env={"GLUON_FAULT": "extract.after_shared_position"},
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    assert status_json(run_cli, "app.orders")["changelog"]["rows"] == 0
    ok(run_cli("offload", "-t", "app.orders", "-x", "--incremental-discard-changes"))
    ok(run_cli("offload", "-t", "app.orders", "-x", "--incremental-run-extraction"))
    assert "dropped" not in {row[1] for row in _lake("app.orders")}


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_column_added_to_a_member_reaches_the_lake_with_changes_on_both_sides(
    engine: sa.Engine, run_cli: Callable[..., Result], mode: str
) -> None:
    for table in ("app.orders", "app.docs"):
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
    # Changes before and after the ALTER wait in the slot for one extraction: the slot
    # describes the table again in between.
    run_sql(
        engine,
        "UPDATE app.orders SET v = 'before' WHERE id <= 2",
        "DELETE FROM app.orders WHERE id = 3",
    )
    run_sql(engine, "ALTER TABLE app.orders ADD COLUMN note TEXT")
    run_sql(
        engine,
        "UPDATE app.orders SET note = 'n' || id WHERE id BETWEEN 2 AND 5",
        "INSERT INTO app.orders VALUES (50, 'new', 'noted'), (51, 'bare', NULL)",
        "UPDATE app.docs SET v = 'other' WHERE id = 1",
    )
    for table in ("app.orders", "app.docs"):
        ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))
        assert _lake(table) == _source(engine, table), table
    run_sql(engine, "UPDATE app.orders SET note = NULL, v = 'after' WHERE id = 4")
    ok(run_cli("offload", "-t", "app.orders", "-x", "--incremental-run-extraction"))
    assert _lake("app.orders") == _source(engine, "app.orders")


def _source(engine: sa.Engine, table: str) -> list[tuple[Any, ...]]:
    with engine.connect() as db:
        return sorted(tuple(row) for row in db.execute(sa.text(f"SELECT * FROM {table}")))


def _lake(table: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in lake_rows(f"SELECT * FROM {table}"))


def test_a_table_with_generated_columns_is_refused_as_a_member_in_one_line(
    engine: sa.Engine, run_cli: Callable[..., Result]
) -> None:
    run_sql(
        engine,
        "CREATE TABLE app.gen (id INTEGER PRIMARY KEY, twice BIGINT GENERATED ALWAYS AS "
        "(id * 2) STORED)",
        "INSERT INTO app.gen (id) SELECT generate_series(1, 5)",
    )
    refused = run_cli(
        "offload",
        "-t",
        "app.gen",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
        SHARED,
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
    assert "generated columns (twice)" in lines[0], lines[0]
    assert "--incremental-pg-logical-slot=table" in lines[0], lines[0]
    with engine.connect() as db:
        slots = db.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar()
        publications = db.execute(sa.text("SELECT count(*) FROM pg_publication")).scalar()
    assert (slots, publications) == (0, 0), "nothing created"
    assert Repository(load_settings().repo_url).get_table("APP.GEN") is None
