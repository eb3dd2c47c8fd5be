"""PG_LOGICAL with merge mode IMMEDIATE, discard and disable: the slot confirms only what the
base table (or the decision to drop it) holds.

Real PostgreSQL (wal_level=logical), Sail and Delta tables; the base table is read without
gluon (deltalake). Kills at every side effect of the merge path and of the slot advance are
followed by a re-run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import (
    SEED,
    Source,
    enable,
    extract,
    lake_state,
    postgres_source,
    run_offload_process,
    workload_for,
)
from support.workload import Row, canonical
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.lake import storage
from gluon.naming import TableRef, slot_name
from gluon.repo import Repository

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""
IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
PARTITIONED = ("--partition-columns=id", "--partition-granularity=5")
"""Partitions of five ids: a key change (a new, higher id) moves the row to another one."""


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


def _base_path(source: Source) -> str:
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    return record.base_path


def _base_table(path: str, version: int | None = None) -> dict[int, Row]:
    """The base table read with deltalake (no gluon), by key; a key twice fails."""
    rows = [canonical(row) for row in storage.read_delta(path, version).to_pylist()]
    keys = [row[0] for row in rows]
    assert len(keys) == len(set(keys)), "the base table holds a key twice"
    return {row[0]: row for row in rows}


def _confirmed(source: Source) -> str:
    """The slot's confirmed position (pg_lsn text)."""
    name = slot_name(TableRef("app", "items"), source.engine.url.database)
    with source.engine.connect() as db:
        return str(
            db.execute(
                sa.text(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name = :name"
                ),
                {"name": name},
            ).scalar_one()
        )


FAULT_POINTS = [
    "lake.before_write",
    "extract.after_stage",
    "extract.before_merge_commit",
    "extract.after_merge_commit",
    "extract.after_delta_commit",
    "extract.before_slot_advance",
    "extract.after_slot_advance",
    "extract.before_repository_update",
    "extract.after_stage@2",
    "extract.after_merge_commit@2",
    "extract.before_slot_advance@2",
]


def test_immediate_extraction_killed_at_every_step_matches_the_source(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """Small batches (several per run), kills at each side effect and changes made between
    the kill and the re-run: the base table, read without gluon, equals the source, no
    batch is merged twice and no version of the base table undoes a change."""
    workload = workload_for(source, METHOD, SEED)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT, IMMEDIATE, *PARTITIONED)
    path = _base_path(source)
    assert _base_table(path) == workload.expected
    for point in FAULT_POINTS:
        workload.round(10)
        crashed = run_offload_process(
            "-t",
            source.table,
            "-x",
            "--incremental-run-extraction",
            "--incremental-batch-size=4",
            env={"GLUON_FAULT": point},
        )
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        workload.round(3)
        extract(run_cli, source)
        assert _base_table(path) == workload.expected == workload.source_rows(), (
            f"after a crash at {point}"
        )
    assert lake_state(source.schema) == workload.expected, "gluon's own session"
    batches = [
        entry["gluon.staged_batch"]
        for entry in DeltaTable(path).history()
        if "gluon.staged_batch" in entry
    ]
    assert len(batches) == len(set(batches)), "a staged batch was merged twice"
    # Ids are never reused by the workload: a key that left the base table never returns.
    gone: set[int] = set()
    previous: dict[int, Row] = {}
    for version in range(int(DeltaTable(path).version()) + 1):
        rows = _base_table(path, version)
        assert not gone & set(rows), f"version {version} brings back deleted keys"
        gone |= set(previous) - set(rows)
        previous = rows


def test_a_run_after_a_completed_one_confirms_nothing_twice(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """IMMEDIATE finishes the last staged batch at every run (merged and confirmed already):
    confirming it again must not move the slot backwards, which PostgreSQL refuses."""
    workload = workload_for(source, METHOD, SEED + 1)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT, IMMEDIATE)
    workload.round(10)
    extract(run_cli, source)
    with source.engine.begin() as db:  # another table's changes move the slot further
        db.execute(sa.text("CREATE TABLE app.other (id int PRIMARY KEY)"))
        db.execute(sa.text("INSERT INTO app.other SELECT generate_series(1, 20)"))
    extract(run_cli, source)
    past_the_other_table = _confirmed(source)
    extract(run_cli, source)
    assert _confirmed(source) == past_the_other_table
    workload.round(5)
    extract(run_cli, source)
    assert _base_table(_base_path(source)) == workload.source_rows()


def _discard(run_cli: Callable[..., Result], source: Source, *, execute: bool) -> Result:
    result = run_cli(
        "offload",
        "-t",
        source.table,
        *(("-x",) if execute else ()),
        "--incremental-discard-changes",
    )
    assert result.exit_code == 0, result.stderr
    return result


@pytest.mark.parametrize("merge_mode", ["DEFERRED", "IMMEDIATE"])
def test_discard_advances_the_slot_past_the_changes_and_keeps_later_ones(
    source: Source, run_cli: Callable[..., Result], merge_mode: str
) -> None:
    workload = workload_for(source, METHOD, SEED + 2)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT, f"--incremental-merge-mode={merge_mode}")
    # DEFERRED: the delta table's changes go too (the base table as last compacted stays);
    # IMMEDIATE: what the extraction merged stays.
    kept = lake_state(source.schema)
    workload.round(10)
    extract(run_cli, source)
    if merge_mode == "IMMEDIATE":
        kept = lake_state(source.schema)
    with source.engine.begin() as db:
        db.execute(sa.text("UPDATE app.items SET name = 'unwanted' WHERE id % 2 = 0"))
        db.execute(sa.text("INSERT INTO app.items (id, name) VALUES (900, 'unwanted')"))
    unwanted = sum(1 for key in workload.source_rows() if key % 2 == 0 and key != 900) + 1
    plan = _discard(run_cli, source, execute=False)
    assert f"confirm the {unwanted} changes replication slot" in plan.stdout, plan.stdout
    refused = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
    assert refused.exit_code == 1, refused.stdout
    assert f"has {unwanted} changes in the replication slot" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    done = _discard(run_cli, source, execute=True)
    assert re.search(rf"(?i)discarded {unwanted} changes from the replication slot", done.stdout), (
        done.stdout
    )
    extract(run_cli, source)
    assert lake_state(source.schema) == kept, "a discarded change reached the lake"
    with source.engine.begin() as db:  # committed after the discard: captured
        db.execute(sa.text("INSERT INTO app.items (id, name) VALUES (901, 'wanted')"))
    extract(run_cli, source)
    assert lake_state(source.schema)[901][1] == "wanted"
    assert 900 not in lake_state(source.schema)
    if merge_mode == "DEFERRED":
        compacted = run_cli(
            "offload",
            "-t",
            source.table,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
        )
        assert compacted.exit_code == 0, compacted.stderr
    disabled = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr


def test_discard_drops_a_staged_batch_and_its_changes_in_the_slot(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """A run killed after staging, before its merge: discard empties the staging table and
    advances the slot past the batch; the next extraction merges neither."""
    workload = workload_for(source, METHOD, SEED + 3)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT, IMMEDIATE)
    path = _base_path(source)
    before = _base_table(path)
    workload.round(10)
    crashed = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        env={"GLUON_FAULT": "extract.after_stage"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    plan = _discard(run_cli, source, execute=False)
    staged = re.search(r"discard the (\d+) changes of staged batch \d+", plan.stdout)
    pending = re.search(r"confirm the (\d+) changes replication slot", plan.stdout)
    assert staged is not None and pending is not None, plan.stdout
    assert staged[1] == pending[1], plan.stdout
    _discard(run_cli, source, execute=True)
    extract(run_cli, source)
    assert _base_table(path) == before
