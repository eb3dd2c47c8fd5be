"""PG_LOGICAL counts every shipped change exactly once, even when the slot advance after the
Delta commit fails (issue 33: "replication slot ... is active for PID" left a batch that the
next run skipped correctly, but counted nowhere)."""

from __future__ import annotations

import subprocess
import threading
import time
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
    lake_state,
    postgres_source,
    workload_for,
)
from support.locking import PausedCommand
from typer.testing import Result

from gluon import faults
from gluon.config import load_settings
from gluon.errors import GluonError
from gluon.extract.feeds.logical_positions import POSITION_BITS, parse_lsn
from gluon.extract.run import run_extraction
from gluon.naming import TableRef, slot_name
from gluon.repo import Repository

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""
CHANGES = 12


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


def _slot_active(source: Source, slot: str) -> bool:
    with source.engine.connect() as db:
        return bool(
            db.execute(
                sa.text("SELECT active FROM pg_replication_slots WHERE slot_name = :slot"),
                {"slot": slot},
            ).scalar()
        )


def _hold_slot(source: Source, slot: str) -> subprocess.Popen[bytes]:
    """A replication client streaming from ``slot``: while it runs, the slot is active for its
    walsender's PID and ``pg_replication_slot_advance`` fails, as under the service's race."""
    url = source.engine.url
    return subprocess.Popen(
        [
            "pg_recvlogical",
            "-h",
            str(url.host),
            "-p",
            str(url.port),
            "-U",
            str(url.username),
            "-d",
            str(url.database),
            "-S",
            slot,
            "--start",
            "--no-loop",
            "-f",
            "/dev/null",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _fail_the_advance(
    source: Source, slot: str, release: Path, wait: Callable[[float], object]
) -> None:
    """Hold ``slot`` with a replication client while the paused extraction advances it."""
    holder = _hold_slot(source, slot)
    try:
        deadline = time.monotonic() + 60
        while not _slot_active(source, slot):
            assert holder.poll() is None, holder.stderr.read() if holder.stderr else ""
            assert time.monotonic() < deadline, "pg_recvlogical never took the slot"
            time.sleep(0.1)
        release.touch()
        wait(240)
    finally:
        holder.terminate()
        holder.wait(timeout=60)


def _insert_one_by_one(source: Source) -> None:
    """``CHANGES`` inserts, one transaction each: batches split between them."""
    for key in range(1000, 1000 + CHANGES):
        with source.engine.begin() as db:
            db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES ({key}, 'n')"))


def _shipping_a_second_batch(
    source: Source, repo: Repository, table_key: str, slot: str, created_at: int
) -> bool:
    """The slot confirmed a first batch, and a later one is on its way to the lake (the
    repository's shipped_seq is past the slot): the extraction does not read the slot
    again before it advances it."""
    state = repo.incremental.get_state(table_key)
    confirmed = _slot_position(source, slot)
    return (
        state is not None
        and state.shipped_seq is not None
        and confirmed > created_at
        and state.shipped_seq >> POSITION_BITS > confirmed
    )


@pytest.mark.parametrize("merge_mode", ["DEFERRED", "IMMEDIATE"])
def test_a_batch_whose_slot_advance_failed_is_counted_once(
    source: Source, run_cli: Callable[..., Result], tmp_path: Path, merge_mode: str
) -> None:
    workload = workload_for(source, METHOD, SEED + 33)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT, f"--incremental-merge-mode={merge_mode}")
    with source.engine.begin() as db:
        for key in range(1000, 1000 + CHANGES):
            db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES ({key}, 'n')"))
    slot = slot_name(TableRef("app", "items"), source.engine.url.database)
    repo = Repository(load_settings().repo_url)
    table_key = source.table.upper()

    def shipping() -> bool:
        state = repo.incremental.get_state(table_key)
        return state is not None and state.shipped_seq is not None

    with PausedCommand(
        tmp_path,
        "extract.before_slot_advance",
        *("-t", source.table, "-x", "--incremental-run-extraction"),
    ) as held:
        held.wait_until(shipping, "it ships the batch")
        assert held.process is not None
        _fail_the_advance(source, slot, held.release, held.process.wait)
    assert held.returncode != 0
    assert "is active for PID" in held.stderr, held.stderr

    extract(run_cli, source)
    totals = repo.incremental.extraction_totals(table_key)
    assert (totals.succeeded, totals.failed) == (1, 1)
    assert totals.changes_shipped == CHANGES
    assert lake_state(source.schema) == workload.source_rows()
    if merge_mode == "DEFERRED":
        assert_no_duplicate_sequences(source)


def _slot_position(source: Source, slot: str) -> int:
    with source.engine.connect() as db:
        text = db.execute(
            sa.text("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = :s"),
            {"s": slot},
        ).scalar()
    return parse_lsn(str(text))


def test_batches_a_failed_run_shipped_before_its_failure_are_counted(
    source: Source, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """The run ships batch 1 (slot advanced), then batch 2's advance fails: batch 1 left the
    source in a run that failed, batch 2 is skipped by the next run; both counted once."""
    workload = workload_for(source, METHOD, SEED + 34)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    _insert_one_by_one(source)
    slot = slot_name(TableRef("app", "items"), source.engine.url.database)
    repo = Repository(load_settings().repo_url)
    table_key = source.table.upper()
    created_at = _slot_position(source, slot)

    def shipping_the_second_batch() -> bool:
        return _shipping_a_second_batch(source, repo, table_key, slot, created_at)

    with PausedCommand(
        tmp_path,
        "extract.before_slot_advance@2",
        *("-t", source.table, "-x", "--incremental-run-extraction"),
        "--incremental-batch-size=5",
    ) as held:
        held.wait_until(shipping_the_second_batch, "it ships the second batch")
        assert held.process is not None
        _fail_the_advance(source, slot, held.release, held.process.wait)
    assert held.returncode != 0
    assert "is active for PID" in held.stderr, held.stderr

    extract(run_cli, source)
    totals = repo.incremental.extraction_totals(table_key)
    assert (totals.succeeded, totals.failed) == (1, 1)
    assert totals.changes_shipped == CHANGES
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)


def test_a_failed_extraction_tells_the_service_what_it_confirmed(
    source: Source,
    run_cli: Callable[..., Result],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service's ``gluon_service_changes_shipped_total`` takes a failed run's count from
    the error (``changes_taken``): the changes of the batches it counted (each counted once in
    the lake, before its slot advance), as its run row; the next run counts only the rest."""
    workload = workload_for(source, METHOD, SEED + 35)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    _insert_one_by_one(source)
    slot = slot_name(TableRef("app", "items"), source.engine.url.database)
    repo = Repository(load_settings().repo_url)
    table_key = source.table.upper()
    created_at = _slot_position(source, slot)
    release = tmp_path / "release"
    monkeypatch.setattr(faults, "_reached", {})
    monkeypatch.setenv("GLUON_PAUSE", "extract.before_slot_advance@2:240")
    monkeypatch.setenv("GLUON_PAUSE_RELEASE", str(release))
    failures: list[GluonError] = []

    def extraction() -> None:
        try:
            run_extraction(load_settings(), TableRef.parse(source.table), batch_size=5)
        except GluonError as exc:
            failures.append(exc)

    worker = threading.Thread(target=extraction)
    worker.start()
    try:
        deadline = time.monotonic() + 240
        while not _shipping_a_second_batch(source, repo, table_key, slot, created_at):
            assert worker.is_alive(), "the extraction ended before its second batch"
            assert time.monotonic() < deadline, "gave up waiting for the second batch"
            time.sleep(0.1)
        _fail_the_advance(source, slot, release, worker.join)
    finally:
        release.touch()
        worker.join(timeout=240)
    assert len(failures) == 1 and "is active for PID" in str(failures[0])
    failed = repo.incremental.extraction_runs(table_key, limit=1)[0]
    assert failed.status == "failed"
    assert failures[0].changes_taken == failed.rows_read
    assert failed.rows_read > 0
    monkeypatch.delenv("GLUON_PAUSE")
    after = run_extraction(load_settings(), TableRef.parse(source.table), batch_size=5)
    assert failures[0].changes_taken + after.rows_read == CHANGES
