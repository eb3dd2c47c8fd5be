"""PG_LOGICAL against the shared capture contract's DML scenario, concurrent sessions and a
transaction larger than the extraction's batch.

The contract (``support.capture_contract``) checks the changelog rows a trigger writes; a
slot has no changelog, so here each step is extracted and the changes it shipped are read
from the delta table: the same rows, operations and order the contract expects of the
application table (origin ``T``), except that the WAL logs an UPDATE that changes no value
as a change (its row image, unchanged: the lake shows the same row).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.capture_contract import COLUMNS, STEPS, CaptureEnv, Step
from support.incremental import SEED as WORKLOAD_SEED
from support.incremental import (
    assert_no_duplicate_sequences,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    workload_for,
)
from typer.testing import Result

from gluon.extract.feeds.logical_positions import POSITION_BITS
from gluon.methods import registered_methods
from gluon.source import connect

METHOD = "PG_LOGICAL"

UNCHANGED = {
    "update that changes nothing": (2, 3),
    "update to the same value": (2,),
    "update NULL to NULL": (11,),
    "upsert that changes nothing": (3,),
}
"""Steps whose UPDATE changes no value: the WAL still logs the rows (trigger methods skip them)."""


@pytest.fixture
def env(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CaptureEnv]:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    source = connect(pg_url)

    def create_table(name: str, primary_key: bool) -> None:
        key = " PRIMARY KEY" if primary_key else ""
        environment.run(
            f"CREATE TABLE app.{name} (id integer{key}, name text, amount numeric(12,2), "
            "noted date)"
        )

    environment = CaptureEnv(source, "app", create_table, lambda: None, {})
    environment.run("CREATE SCHEMA app")
    yield environment
    source.engine.dispose()


def _shipped(seen: int) -> list[tuple[Any, ...]]:
    """The changes in the delta table after the first ``seen``, as (gl_op, id, name, amount,
    noted), in gl_seq order."""
    rows = lake_rows(
        f"SELECT {COLUMNS}, gl_op, gl_seq FROM app_load.orders_changes ORDER BY gl_seq"
    )
    return [
        (row["gl_op"], row["id"], row["name"], row["amount"], row["noted"]) for row in rows[seen:]
    ]


def _expected(step: Step, env: CaptureEnv) -> list[tuple[Any, ...]]:
    if step.rollback:
        return []
    wanted = [(op, *values) for _, op, values in step.expected]
    unchanged = UNCHANGED.get(step.name, ())
    if unchanged:
        keys = ", ".join(str(key) for key in unchanged)
        images = env.query(f"SELECT {COLUMNS} FROM app.orders WHERE id IN ({keys}) ORDER BY id")
        wanted += [("U", *row) for row in images]
    return wanted


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda row: (row[1], row[0]))


def test_the_contract_scenario_reaches_the_lake_in_commit_order(
    env: CaptureEnv, run_cli: Callable[..., Result]
) -> None:
    """Every step of the contract (inserts, updates, NULLs, multi-row statements, a key
    change as delete + insert, deletes, upserts, a rolled-back transaction), one extraction
    per step: exactly the step's changes are shipped, in statement order."""
    env.create_table("orders", True)
    env.seed("orders")
    done = run_cli(
        "offload",
        "-t",
        "app.orders",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
    )
    assert done.exit_code == 0, done.stderr
    method = registered_methods()[METHOD]
    seen = 0
    for step in STEPS:
        env.run(
            *(sql.format(target="app.orders") for sql in step.statements), rollback=step.rollback
        )
        extracted = run_cli("offload", "-t", "app.orders", "-x", "--incremental-run-extraction")
        assert extracted.exit_code == 0, extracted.stderr
        added = _shipped(seen)
        seen += len(added)
        wanted = _expected(step, env)
        assert all(dml in method.captured_dml for dml, _, _ in step.expected)
        if step.ordered and step.name not in UNCHANGED:
            assert added == wanted, step.name
        else:
            assert _sorted(added) == _sorted(wanted), step.name
    shown = lake_rows(f"SELECT {COLUMNS} FROM app.orders ORDER BY id")
    assert [tuple(row.values()) for row in shown] == env.rows("app.orders")


def test_interleaved_sessions_reach_the_lake_in_commit_order(
    pg_url: str, offload_home: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that began first but commits last: an extraction in between ships only
    what was committed; the late commit comes next, ordered after the other, so its change
    to the same row wins."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    source = postgres_source(pg_url)
    workload = workload_for(source, METHOD, WORKLOAD_SEED)
    workload.create(5)
    enable(run_cli, source, METHOD)
    with source.engine.connect() as slow:
        transaction = slow.begin()
        slow.execute(sa.text("UPDATE app.items SET name = 'slow' WHERE id = 1"))
        slow.execute(sa.text("INSERT INTO app.items (id, name) VALUES (100, 'slow')"))
        with source.engine.begin() as fast:
            fast.execute(sa.text("UPDATE app.items SET name = 'fast' WHERE id = 2"))
        extract(run_cli, source)
        shown = lake_state("app")
        assert shown[2][1] == "fast" and shown[1][1] != "slow" and 100 not in shown

        def last_writer() -> None:  # waits on the slow session's row lock
            with source.engine.begin() as db:
                db.execute(sa.text("UPDATE app.items SET name = 'last' WHERE id = 1"))

        blocked = threading.Thread(target=last_writer)
        blocked.start()
        transaction.commit()
        blocked.join()
    extract(run_cli, source)
    assert lake_state("app") == workload.source_rows()
    assert lake_state("app")[1][1] == "last" and lake_state("app")[100][1] == "slow"
    assert_no_duplicate_sequences(source)


def test_writers_during_extractions_lose_and_repeat_nothing(
    pg_url: str, offload_home: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    source = postgres_source(pg_url)
    workload = workload_for(source, METHOD, WORKLOAD_SEED + 1)
    workload.create(50)
    enable(run_cli, source, METHOD)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                workload.round(1)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    def other_session() -> None:
        engine = sa.create_engine(source.url)
        try:
            number = 5000
            while not stop.is_set():
                number += 1
                with engine.begin() as db:  # a multi-row statement and a rolled-back one
                    db.execute(
                        sa.text(
                            "INSERT INTO app.items (id, name) SELECT :id + g, 'other' "
                            "FROM generate_series(0, 2) g"
                        ),
                        {"id": number * 10},
                    )
                with engine.connect() as db:
                    db.execute(sa.text("UPDATE app.items SET name = 'never'"))
                    db.rollback()
        except BaseException as exc:
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=writer), threading.Thread(target=other_session)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(4):
            extract(run_cli, source)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    extract(run_cli, source)
    assert lake_state("app") == workload.source_rows()
    assert_no_duplicate_sequences(source)


def test_a_transaction_larger_than_the_batch_ships_whole_and_once(
    pg_url: str, offload_home: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction of 2,500 changes (inserts, updates, key changes, deletes) between small
    ones, extracted 100 changes per batch: a batch ends only at a commit, so that
    transaction is one batch larger than the bound; the lake equals the source after it."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    source = postgres_source(pg_url)
    workload = workload_for(source, METHOD, WORKLOAD_SEED + 2)
    workload.create(20)
    enable(run_cli, source, METHOD)
    workload.round(30)
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                "INSERT INTO app.items (id, name, amount) "
                "SELECT 10000 + g, 'big', g FROM generate_series(1, 1000) g"
            )
        )
        db.execute(sa.text("UPDATE app.items SET amount = amount + 1 WHERE id > 10000"))
        db.execute(sa.text("UPDATE app.items SET id = id + 5000 WHERE id > 10900"))
        db.execute(sa.text("DELETE FROM app.items WHERE id BETWEEN 10001 AND 10300"))
    workload.round(30)
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        "--incremental-batch-size=100",
    )
    assert result.exit_code == 0, result.stderr
    assert lake_state("app") == workload.source_rows()
    assert_no_duplicate_sequences(source)
    # 1,000 inserts, 1,000 updates, 100 key changes (a delete and an insert each), 300 deletes
    commits = Counter(
        int(str(row["gl_seq"])) >> POSITION_BITS
        for row in lake_rows("SELECT gl_seq FROM app_load.items_changes")
    )
    assert [n for n in commits.values() if n > 1000] == [2500], commits
