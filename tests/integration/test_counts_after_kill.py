"""Every change an extraction ships is counted exactly once, even when the extraction is
killed between batches (issue 33 item 4, "every shipped change counted"): a run killed after
it confirmed some batches in the source (changelog rows deleted, slot advanced) never finishes
its run row, yet those changes never come back; the next run re-reads a batch the dead run
committed to the lake but did not confirm. Both must end in the repository's count once.
"""

from __future__ import annotations

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
    run_offload_process,
    workload_for,
)
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

CHANGES = 12
BATCH = 5

CASES = [
    # A kill after a batch left the source: its changes never come back.
    ("CHANGELOG", "DEFERRED", "extract.after_changelog_delete@2"),
    ("PG_LOGICAL", "DEFERRED", "extract.after_slot_advance@2"),
    ("PG_LOGICAL", "IMMEDIATE", "extract.after_slot_advance@2"),
    # A kill after a batch is in the lake, before it leaves the source: the next run
    # re-reads it (and must not count it a second time).
    ("CHANGELOG", "IMMEDIATE", "extract.before_changelog_delete@2"),
    ("PG_LOGICAL", "DEFERRED", "extract.before_slot_advance@2"),
    # A kill right after the Delta commit of the second batch.
    ("CHANGELOG", "DEFERRED", "extract.after_delta_commit@2"),
    ("PG_LOGICAL", "IMMEDIATE", "extract.after_merge_commit@2"),
]


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


@pytest.mark.parametrize(("method", "merge_mode", "point"), CASES)
def test_a_run_killed_between_batches_loses_no_count(
    source: Source, run_cli: Callable[..., Result], method: str, merge_mode: str, point: str
) -> None:
    workload = workload_for(source, method, SEED + 330)
    workload.create()
    # The slot's fault points are the table's own slot's (a member saves its position).
    own_slot = ("--incremental-pg-logical-slot=table",) if "slot_advance" in point else ()
    enable(run_cli, source, method, f"--incremental-merge-mode={merge_mode}", *own_slot)
    for key in range(1000, 1000 + CHANGES):  # one transaction each: batches split between them
        with source.engine.begin() as db:
            db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES ({key}, 'n')"))

    died = run_offload_process(
        *("-t", source.table, "-x", "--incremental-run-extraction"),
        f"--incremental-batch-size={BATCH}",
        env={"GLUON_FAULT": point},
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    extract(run_cli, source)

    totals = Repository(load_settings().repo_url).incremental.extraction_totals(
        source.table.upper()
    )
    assert totals.changes_shipped == CHANGES
    assert lake_state(source.schema) == workload.source_rows()
    if merge_mode == "DEFERRED":
        assert_no_duplicate_sequences(source)
