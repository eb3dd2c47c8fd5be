"""TRUNCATE end to end on the lake side: a 'T' change in the changelog (shared contract:
every row as of just before its ``gl_seq`` is gone) reaches the merging and insert-only
views, the three compactions and the IMMEDIATE merge, and the lake equals the source.

The 'T' is recorded in the changelog the way the source-side capture records it
(``support.truncate``); the lake is compared with the source read independently: the
user view through gluon, the base table after a compaction or an IMMEDIATE merge through
deltalake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import (
    SEED,
    RunCli,
    Source,
    attach_patch_view,
    enable,
    extract,
    lake_state,
    postgres_source,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.truncate import truncate_through_changelog
from support.workload import Row, Workload, canonical

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.repo.incremental import IncrementalState
from gluon.repo.rejects import RejectedChanges

COMPACTIONS = {
    "IN_PLACE": ("--incremental-in-place-compaction",),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}
PARTITIONED = ("--partition-columns=id", "--partition-granularity=10")
IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"


def _state(source: Source) -> IncrementalState:
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    return state


def _base(source: Source) -> dict[int, Row]:
    """The base table read with deltalake (no gluon, no engine)."""
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    rows = [canonical(row) for row in DeltaTable(record.base_path).to_pyarrow_table().to_pylist()]
    assert len({row[0] for row in rows}) == len(rows), "the base table holds a key twice"
    return {row[0]: row for row in rows}


def _compact(run_cli: RunCli, source: Source, *flags: str) -> None:
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        *flags,
    )
    assert result.exit_code == 0, result.stderr
    assert "complete" in result.stdout


def _with_truncate(run_cli: RunCli, source: Source, method: str, *flags: str) -> Workload:
    """60 rows offloaded, changes, a TRUNCATE with changes before and after it in one batch,
    extracted (the lake shows only what followed the TRUNCATE)."""
    workload = workload_for(source, method, SEED)
    workload.create(60)
    enable(run_cli, source, method, *flags)
    attach_patch_view(workload, source, method)
    workload.round(12)
    extract(run_cli, source)
    workload.round(6)  # shipped with the TRUNCATE, before it
    truncate_through_changelog(source, workload)
    workload.round(10)  # after it
    while not workload.expected:  # an empty table proves little: rows inserted after it
        workload.round(3)
    extract(run_cli, source)
    return workload


@pytest.mark.parametrize("compaction", sorted(COMPACTIONS))
@pytest.mark.parametrize("method", ["CHANGELOG", "CHANGELOG_INSERT"])
def test_views_and_compactions_apply_a_truncate(
    method: str,
    compaction: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = _with_truncate(run_cli, source, method, *PARTITIONED)
    assert lake_state(source.schema) == workload.expected == workload.source_rows()
    assert _state(source).truncates_from(_state(source).view_min_partition)

    _compact(run_cli, source, *COMPACTIONS[compaction])
    assert _base(source) == workload.expected, "the base table after compaction"
    assert lake_state(source.schema) == workload.expected
    # The TRUNCATE is in the base now: the views read without looking for one.
    assert not _state(source).truncates_from(_state(source).view_min_partition)
    workload.round(8)
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected == workload.source_rows()


def test_a_table_never_truncated_renders_the_plain_view(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No 'T' shipped: nothing recorded, so the view pays nothing for TRUNCATE."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(20)
    enable(run_cli, source, "CHANGELOG")
    workload.round(10)
    extract(run_cli, source)
    assert _state(source).truncate_partition is None
    assert lake_state(source.schema) == workload.expected


@pytest.mark.parametrize("method", ["CHANGELOG", "CHANGELOG_INSERT"])
def test_immediate_merge_applies_a_truncate_in_the_batch(
    method: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = _with_truncate(run_cli, source, method, IMMEDIATE, *PARTITIONED)
    assert _base(source) == workload.expected == workload.source_rows()
    assert lake_state(source.schema) == workload.expected


FAULT_POINTS = {
    # DEFERRED: the 'T' recorded in the repository, the append, the changelog delete.
    "DEFERRED": [
        "repo.after_record_truncate",
        "extract.after_delta_commit",
        "extract.before_changelog_delete",
    ],
    # IMMEDIATE: staged, merged (emptying the base) or not, removed from the changelog.
    "IMMEDIATE": [
        "extract.after_stage",
        "extract.before_merge_commit",
        "extract.after_merge_commit",
        "extract.before_changelog_delete",
    ],
}


@pytest.mark.parametrize("mode", sorted(FAULT_POINTS))
def test_an_extraction_killed_while_shipping_a_truncate_loses_and_duplicates_nothing(
    mode: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(30)
    enable(run_cli, source, "CHANGELOG", f"--incremental-merge-mode={mode}", *PARTITIONED)
    for point in FAULT_POINTS[mode]:
        workload.round(4)
        truncate_through_changelog(source, workload)
        workload.round(6)
        crashed = run_offload_process(
            "-t", source.table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
        )
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        workload.round(3)  # changes made between the crash and the re-run
        extract(run_cli, source)
        assert lake_state(source.schema) == workload.expected, f"after a crash at {point}"
        if mode == "IMMEDIATE":
            assert _base(source) == workload.expected, f"the base after a crash at {point}"
    assert workload.expected == workload.source_rows()


def _insert_again(source: Source, workload: Workload, keys: list[int]) -> None:
    """Insert rows with ``keys`` (keys the table held before its TRUNCATE) into the source."""
    with source.engine.begin() as db:
        for key in keys:
            values = {"id": key, "name": f"again {key}", "amount": "1.00", "updated": None}
            db.execute(
                sa.text(f"INSERT INTO {workload.table} VALUES (:id, :name, :amount, :updated)"),
                values,
            )
            workload.expected[key] = canonical(values)


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_insert_only_screening_takes_keys_inserted_again_after_a_truncate(
    mode: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keys the lake showed before a TRUNCATE are new after it: no false duplicate, and the
    'T' itself is no uncaptured update or delete (in the TRUNCATE's batch and in a later
    one)."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG_INSERT", SEED)
    workload.create(20)
    enable(run_cli, source, "CHANGELOG_INSERT", f"--incremental-merge-mode={mode}")
    workload.round(5)
    extract(run_cli, source)
    _insert_again(source, workload, [200])  # a new key, in the TRUNCATE's batch before it
    truncate_through_changelog(source, workload)
    _insert_again(source, workload, [1, 2, 3])  # the same batch as the TRUNCATE
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected == workload.source_rows()
    # A later batch: the lake's 'T' is behind them (and key 200 went with it).
    _insert_again(source, workload, [4, 5, 200])
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected == workload.source_rows()
    summary = RejectedChanges(Repository(load_settings().repo_url).engine).summary(
        source.table.upper()
    )
    assert summary.counts == {}, summary


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_truncate_read_from_a_postgresql_changelog(
    mode: str,
    pg_url: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL's changelog read (its own reader) carries the all-NULL 'T' row."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = _with_truncate(run_cli, source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    assert lake_state(source.schema) == workload.expected == workload.source_rows()
    if mode == "DEFERRED":
        _compact(run_cli, source)
    assert _base(source) == workload.expected


@pytest.mark.parametrize("compaction", ["IN_PLACE", "PARTITION_WISE_FULL"])
def test_a_compaction_of_a_truncate_killed_at_its_rewrite_steps_finishes_exactly(
    compaction: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed while rewriting partitions a TRUNCATE emptied (and right after switching the
    views): readers between the kills and the finished run see exactly the source."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = _with_truncate(run_cli, source, "CHANGELOG", *PARTITIONED)
    flags = ("--incremental-run-compaction", "--incremental-wait-time=0", *COMPACTIONS[compaction])
    for point in ["compact.after_partition", "compact.after_compact", "compact.after_switch_views"]:
        died = run_offload_process("-t", source.table, "-x", *flags, env={"GLUON_FAULT": point})
        assert died.returncode == FAULT_EXIT_CODE, (point, died.stderr)
        assert lake_state(source.schema) == workload.expected, f"reader after {point}"
    finished = run_offload_process("-t", source.table, "-x", *flags)
    assert finished.returncode == 0, finished.stderr
    assert _base(source) == workload.expected == workload.source_rows()
    assert lake_state(source.schema) == workload.expected
