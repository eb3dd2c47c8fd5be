"""PG_LOGICAL end to end: changes read from a logical replication slot, real PostgreSQL and Sail.

The cluster runs with wal_level=logical (tests/support/postgres.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import (
    SEED,
    Source,
    assert_no_duplicate_sequences,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    run_offload_process,
    workload_for,
)
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.naming import TableRef, slot_name
from gluon.repo import Repository

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


def _slots(source: Source) -> list[str]:
    with source.engine.connect() as db:
        rows = db.execute(
            sa.text(
                "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"
            )
        )
        return [row[0] for row in rows]


def test_changes_from_two_sessions_reach_the_lake_once(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload = workload_for(source, METHOD, SEED)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    database = source.engine.url.database
    assert _slots(source) == [slot_name(TableRef("app", "items"), database)]
    with source.engine.connect() as db:
        triggers = db.execute(sa.text("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal"))
        assert triggers.scalar_one() == 0, "PG_LOGICAL creates no trigger"
    workload.round(3)
    plan = run_cli("offload", "-t", source.table, "--incremental-run-extraction")
    assert plan.exit_code == 0, plan.stderr
    assert "the replication slot is advanced past the transactions read" in plan.stdout, plan.stdout
    assert "changelog" not in plan.stdout, plan.stdout
    for round_number in range(3):
        workload.round(15)
        # Another session: a multi-row statement, a key change and a rolled-back change.
        other = sa.create_engine(source.url)
        with other.begin() as db:
            db.execute(sa.text("UPDATE app.items SET amount = amount + 1 WHERE id % 3 = 0"))
        with other.connect() as db:
            db.execute(sa.text("DELETE FROM app.items"))
            db.rollback()
        other.dispose()
        workload.expected = workload.source_rows()
        extract(run_cli, source)
        assert lake_state(source.schema) == workload.expected, f"round {round_number}"
    assert_no_duplicate_sequences(source)
    status = run_cli("display_incremental_status", "-t", source.table)
    assert status.exit_code == 0, status.stderr
    assert "WAL retained by the slot:" in status.stdout, status.stdout
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert result.exit_code == 0, result.stderr
    assert lake_state(source.schema) == workload.expected, "after compaction"
    result = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
    assert result.exit_code == 0, result.stderr
    assert _slots(source) == [], "disable drops the slot"


def test_small_batches_split_the_stream_between_transactions(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload = workload_for(source, METHOD, SEED + 1)
    workload.create()
    enable(run_cli, source, METHOD)
    workload.round(30)
    with source.engine.begin() as db:  # another table's changes: read past, never shipped
        db.execute(sa.text("CREATE TABLE app.other (id int PRIMARY KEY)"))
        db.execute(sa.text("INSERT INTO app.other SELECT generate_series(1, 50)"))
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        "--incremental-batch-size=4",
    )
    assert result.exit_code == 0, result.stderr
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)


def test_offload_under_a_concurrent_writer_misses_nothing(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload = workload_for(source, METHOD, SEED + 2)
    workload.create(rows=200)
    stop = threading.Event()

    def write() -> None:
        engine = sa.create_engine(source.url)
        number = 1000
        while not stop.is_set():
            number += 1
            with engine.begin() as db:
                db.execute(
                    sa.text("INSERT INTO app.items (id, name, amount) VALUES (:id, 'w', 1)"),
                    {"id": number},
                )
                db.execute(
                    sa.text("UPDATE app.items SET amount = amount + 1 WHERE id = :id"),
                    {"id": number % 200},
                )
        engine.dispose()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        enable(run_cli, source, METHOD)
    finally:
        stop.set()
        writer.join()
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)


@pytest.mark.parametrize(
    "point",
    [
        # Before the Delta commit (merge mode DEFERRED): a slot advanced any earlier than after
        # the commit loses the batch here (issue 26, item 10).
        "lake.before_write",
        "extract.before_delta_commit",
        "extract.after_delta_commit",
        "extract.before_slot_advance",
        "extract.after_slot_advance",
        "extract.before_repository_update",
    ],
)
def test_a_crash_around_the_slot_advance_loses_and_repeats_nothing(
    source: Source, run_cli: Callable[..., Result], point: str
) -> None:
    workload = workload_for(source, METHOD, SEED + 3)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    workload.round(20)
    crashed = run_offload_process(
        "-t", source.table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    workload.round(5)
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)


def test_a_table_without_a_key_in_the_wal_is_refused_in_one_line(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    with source.engine.begin() as db:
        db.execute(sa.text("CREATE TABLE app.items (id int NOT NULL, name text)"))
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        "--incremental-key-columns=id",
    )
    assert result.exit_code != 0
    assert "REPLICA IDENTITY FULL" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert _slots(source) == []


def test_a_slot_gluon_did_not_record_is_never_taken(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """A slot takes no ownership mark: one this installation did not record (another
    installation's, a user's) is refused, not read or dropped."""
    workload = workload_for(source, METHOD, SEED + 4)
    workload.create()
    name = slot_name(TableRef("app", "items"), source.engine.url.database)
    with source.engine.connect() as db:
        db.execute(sa.text(f"SELECT pg_create_logical_replication_slot('{name}', 'test_decoding')"))
        db.commit()
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        OWN_SLOT,
    )
    assert result.exit_code != 0
    assert "already exists" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert _slots(source) == [name]


def _lake_ids(source: Source) -> tuple[set[int], set[int]]:
    """The ids in the base table (the offload's copy) and those the delta table inserts,
    read from the lake's tables directly rather than through the user view."""
    key = TableRef("app", "items").key
    repo = Repository(load_settings().repo_url)
    record, state = repo.get_table(key), repo.incremental.get_state(key)
    assert record is not None and state is not None
    base = {int(str(row["id"])) for row in lake_rows(f"SELECT id FROM {record.base_table}")}
    inserted = [
        int(str(row["id"]))
        for row in lake_rows(f"SELECT id FROM {state.delta_table} WHERE gl_op = 'I'")
    ]
    assert len(inserted) == len(set(inserted)), "an insert was shipped twice"
    return base, set(inserted)


class _Writer:
    """Inserts rows with new ids, one transaction each, until stopped (another session)."""

    def __init__(self, source: Source, first: int) -> None:
        self.engine = sa.create_engine(source.url)
        self.next_id = first
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._write)

    def _write(self) -> None:
        while not self.stop.is_set():
            with self.engine.begin() as db:
                db.execute(
                    sa.text("INSERT INTO app.items (id, name, amount) VALUES (:id, 'w', 1)"),
                    {"id": self.next_id},
                )
            self.next_id += 1

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.engine.dispose()


def test_the_offload_and_the_slot_neither_overlap_nor_leave_a_gap(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """Inserts committed while the enable runs (held 2 s right after the slot's creation,
    before the copy's read) are in the copy or in the slot's stream, never both."""
    workload = workload_for(source, METHOD, SEED + 5)
    workload.create(rows=100)
    with _Writer(source, first=10_000) as writer:
        enabled = run_offload_process(
            "-t",
            source.table,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={METHOD}",
            env={"GLUON_PAUSE": "capture.after_create_object:2"},
        )
        assert enabled.returncode == 0, enabled.stderr
    assert writer.next_id > 10_000, "the writer wrote nothing during the enable"
    extract(run_cli, source)
    base, inserted = _lake_ids(source)
    written = set(range(10_000, writer.next_id))
    assert base & inserted == set(), "rows in the copy were shipped again from the slot"
    assert written <= base | inserted
    assert written & base and written & inserted, "the writes did not span the boundary"
    assert lake_state(source.schema) == workload.source_rows()


def test_a_crash_after_creating_the_slot_is_repaired_by_the_same_command(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """The snapshot the slot exported dies with the crashed run: the re-run makes the slot
    again with its own copy, so rows inserted in between are not shipped twice."""
    workload = workload_for(source, METHOD, SEED + 6)
    workload.create(rows=50)
    crashed = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        OWN_SLOT,
        env={"GLUON_FAULT": "capture.after_create_object"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    name = slot_name(TableRef("app", "items"), source.engine.url.database)
    assert _slots(source) == [name]
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                "INSERT INTO app.items (id, name, amount) "
                "SELECT g, 'between', 1 FROM generate_series(20000, 20009) g"
            )
        )
    enable(run_cli, source, METHOD, OWN_SLOT)
    with source.engine.begin() as db:
        db.execute(sa.text("INSERT INTO app.items (id, name, amount) VALUES (30000, 'after', 1)"))
    extract(run_cli, source)
    base, inserted = _lake_ids(source)
    assert set(range(20000, 20010)) <= base
    assert inserted == {30000}
    assert lake_state(source.schema) == workload.source_rows()


def test_another_table_without_a_replica_identity_does_not_stop_the_extraction(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """The slot carries every table's changes: a DELETE on a table that logs no key (no
    primary key, the default replica identity) is not ours to read, and must not fail ours."""
    workload = workload_for(source, METHOD, SEED + 6)
    workload.create()
    enable(run_cli, source, METHOD)
    with source.engine.begin() as db:
        db.execute(sa.text("CREATE TABLE app.unkeyed (id int, note text)"))
        db.execute(sa.text("INSERT INTO app.unkeyed SELECT g, 'x' FROM generate_series(1, 5) g"))
    workload.round(10)
    with source.engine.begin() as db:
        db.execute(sa.text("DELETE FROM app.unkeyed WHERE id <= 2"))
        db.execute(sa.text("UPDATE app.unkeyed SET note = 'y'"))
    workload.round(10)
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)
