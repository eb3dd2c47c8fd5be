"""Merge mode IMMEDIATE: each extraction merges its changes into the base table.

Real PostgreSQL and SQLite sources, the embedded Sail engine and Delta tables.
The base table is read WITHOUT gluon (deltalake -> pyarrow, Polars' Delta
reader) and compared with the source; kills at every side effect of the merge
path are followed by a re-run, and the base table's Delta history is checked
for a version that undoes a change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
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
    sqlite_source,
    workload_for,
)
from support.workload import Row, canonical
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.lake import storage
from gluon.lake.merge import app_id
from gluon.repo import Repository

IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
PARTITIONED = ("--partition-columns=id", "--partition-granularity=5")
"""Partitions of five ids: a key change (a new, higher id) moves the row to another one."""


def _base_path(source: Source) -> str:
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    return record.base_path


def _by_key(rows: list[dict[str, object]]) -> dict[int, Row]:
    found = [canonical(row) for row in rows]
    keys = [row[0] for row in found]
    assert len(keys) == len(set(keys)), "the base table holds a key twice"
    return {row[0]: row for row in found}


def read_with_deltalake(path: str, version: int | None = None) -> dict[int, Row]:
    return _by_key(storage.read_delta(path, version).to_pylist())


def read_with_polars(path: str) -> dict[int, Row]:
    return _by_key(pl.read_delta(path).to_dicts())


def assert_never_backwards(path: str) -> None:
    """No version of the base table undoes a change: ids are never reused by the workload
    (inserts and key changes take new ones), so a key that left the table never comes back,
    and a row image replaced by another never reappears."""
    gone: set[int] = set()
    replaced: dict[int, set[Row]] = {}
    previous: dict[int, Row] = {}
    for version in range(int(DeltaTable(path).version()) + 1):
        rows = read_with_deltalake(path, version)
        assert not gone & set(rows), f"version {version} brings back deleted keys"
        for key, row in previous.items():
            if key not in rows:
                gone.add(key)
            elif rows[key] != row:
                replaced.setdefault(key, set()).add(row)
        for key, row in rows.items():
            assert row not in replaced.get(key, set()), f"version {version} undoes {key}"
        previous = rows


def test_immediate_extraction_matches_the_source_read_without_gluon(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE, *PARTITIONED)
    path = _base_path(source)
    for round_number in range(4):
        workload.round(15)
        extract(run_cli, source)
        expected = workload.source_rows()
        assert expected == workload.expected
        assert read_with_deltalake(path) == expected, f"round {round_number}: deltalake"
        assert read_with_polars(path) == expected, f"round {round_number}: polars"
    assert lake_state(source.schema) == workload.expected, "gluon's own session"
    assert_never_backwards(path)
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    applied = DeltaTable(path).transaction_version(app_id(state.table_key, state.enablement_id))
    assert applied is not None


def test_nulls_deletes_and_key_changes_across_partitions(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(6)
    enable(run_cli, source, "CHANGELOG", IMMEDIATE, *PARTITIONED)
    with workload.engine.begin() as db:
        db.exec_driver_sql("UPDATE items SET name = NULL, amount = NULL WHERE id = 1")
        db.exec_driver_sql("UPDATE items SET id = 42, name = 'moved' WHERE id = 2")
        db.exec_driver_sql("UPDATE items SET name = 'first' WHERE id = 3")
        db.exec_driver_sql("UPDATE items SET name = 'second' WHERE id = 3")
        db.exec_driver_sql("DELETE FROM items WHERE id = 4")
        db.exec_driver_sql("INSERT INTO items (id, name) VALUES (50, 'born and')")
        db.exec_driver_sql("DELETE FROM items WHERE id = 50")
    extract(run_cli, source)
    path = _base_path(source)
    rows = read_with_deltalake(path)
    assert rows == workload.source_rows()
    assert rows[1][1:3] == (None, None)
    assert 2 not in rows and rows[42][1] == "moved" and rows[3][1] == "second"
    assert 4 not in rows and 50 not in rows
    partitions = {
        row["id"]: {key: value for key, value in row.items() if key.startswith("gl_part")}
        for row in storage.read_delta(path).to_pylist()
    }
    assert partitions[42] != partitions[1], "the moved row stayed in its old partition"
    assert read_with_polars(path) == rows


FAULT_POINTS = [
    "lake.before_write",
    "lake.after_write",
    "extract.after_stage",
    "extract.before_merge_commit",
    "extract.after_merge_commit",
    "extract.after_delta_commit",
    "extract.before_changelog_delete",
    "extract.after_changelog_delete",
    "extract.before_repository_update",
    "extract.after_stage@2",
    "extract.after_merge_commit@2",
    "extract.before_changelog_delete@2",
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_killed_immediate_extraction_loses_duplicates_and_undoes_nothing(
    dialect: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = (
        sqlite_source(tmp_path / "app.db")
        if dialect == "sqlite"
        else postgres_source(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE, *PARTITIONED)
    path = _base_path(source)
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
        workload.round(3)  # changes made between the crash and the re-run
        extract(run_cli, source)
        assert read_with_deltalake(path) == workload.expected, f"after a crash at {point}"
    assert read_with_polars(path) == workload.source_rows()
    assert_never_backwards(path)
    batches = [
        entry["gluon.staged_batch"]
        for entry in DeltaTable(path).history()
        if "gluon.staged_batch" in entry
    ]
    assert len(batches) == len(set(batches)), "a staged batch was merged twice"


def test_switching_modes_is_refused_and_disable_keeps_the_base_table(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    switch = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-merge-mode=DEFERRED",
    )
    assert switch.exit_code != 0
    lines = [line for line in switch.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--incremental-updates-disabled" in lines[0], lines
    bad = run_cli(
        "offload",
        "-t",
        source.table,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-merge-mode=SOMETIMES",
    )
    assert bad.exit_code != 0 and "IMMEDIATE" in bad.stderr and "Traceback" not in bad.stderr
    workload.round(20)
    extract(run_cli, source)

    status = run_cli("display_incremental_status", "-t", source.table, "--json")
    assert status.exit_code == 0, status.stderr
    extraction = json.loads(status.stdout)["extraction"]
    assert extraction["merge_mode"] == "IMMEDIATE"
    assert extraction["merged_versions"], extraction
    text = run_cli("display_incremental_status", "-t", source.table)
    assert "IMMEDIATE" in text.stdout and "read one back" in text.stdout

    compacted = run_cli("offload", "-t", source.table, "-x", "--incremental-run-compaction")
    assert compacted.exit_code == 0, compacted.stderr
    assert "compacted" in compacted.stdout and "vacuumed" in compacted.stdout
    assert read_with_deltalake(_base_path(source)) == workload.expected

    settings = load_settings()
    state = Repository(settings.repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    disabled = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr
    assert read_with_deltalake(_base_path(source)) == workload.expected
    assert storage.delta_version(state.delta_path) is None, "the staging table is left"
    assert lake_state(source.schema) == workload.expected

    # Enabled again: a new staging table whose versions start from 0 again, while the base
    # table still holds the transaction versions of the first enabling.
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    workload.round(20)
    extract(run_cli, source)
    assert read_with_deltalake(_base_path(source)) == workload.expected


def test_insert_only_method_appends_and_the_plan_says_merge(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG_INSERT", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG_INSERT", IMMEDIATE)
    path = _base_path(source)
    for _ in range(3):
        workload.round(12)
        plan = run_cli("offload", "-t", source.table, "--incremental-run-extraction")
        assert plan.exit_code == 0 and "merge it into the base table" in plan.stdout, plan.stdout
        extract(run_cli, source)
        assert read_with_deltalake(path) == workload.expected
    assert read_with_polars(path) == workload.source_rows()
    operations = {
        entry["operation"] for entry in DeltaTable(path).history() if "gluon.staged_batch" in entry
    }
    assert operations == {"WRITE"}, operations


def test_a_column_added_in_the_source_reaches_the_base_table(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    workload.round(5)
    extract(run_cli, source)
    key = min(workload.source_rows())  # a row that exists, whatever the seed
    with workload.engine.begin() as db:
        db.exec_driver_sql("ALTER TABLE items ADD COLUMN extra VARCHAR(10)")
        db.exec_driver_sql(f"UPDATE items SET extra = 'x' WHERE id = {key}")
    extract(run_cli, source)
    rows = storage.read_delta(_base_path(source)).to_pylist()
    extra = {row["id"]: row["extra"] for row in rows}
    assert extra[key] == "x" and {value for k, value in extra.items() if k != key} <= {None}


def test_discard_drops_a_staged_batch_the_base_table_has_not_merged(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Discard means every change not in the base table: a batch staged by a run killed
    before its merge too (the next extraction must not merge it); a batch merged by a run
    killed before the changelog delete is in the base table already and stays."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    path = _base_path(source)
    for point, merged in (("extract.after_stage", False), ("extract.after_merge_commit", True)):
        workload.round(10)
        crashed = run_offload_process(
            "-t", source.table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
        )
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        before = read_with_deltalake(path)
        plan = run_cli("offload", "-t", source.table, "--incremental-discard-changes")
        assert plan.exit_code == 0, plan.stderr
        pending = re.search(r"delete (\d+) changes from the changelog", plan.stdout)
        staged = re.search(r"discard the (\d+) changes of staged batch \d+", plan.stdout)
        assert pending is not None, plan.stdout
        if merged:
            assert staged is None and "delta table" not in plan.stdout, plan.stdout
        else:  # the batch holds every pending change (one batch)
            assert staged is not None and staged[1] == pending[1], plan.stdout
        done = run_cli("offload", "-t", source.table, "-x", "--incremental-discard-changes")
        assert done.exit_code == 0, done.stderr
        count = "0" if merged else pending[1]
        assert f"and {count} staged changes" in done.stdout, done.stdout
        extract(run_cli, source)
        assert read_with_deltalake(path) == before, f"after a discard following {point}"
    assert_never_backwards(path)


def test_a_reset_sequence_reusing_the_staged_batchs_gl_seq_loses_nothing(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The staging table keeps the last batch merged; a changelog sequence reset that
    climbs back over it hands its gl_seq to new changes. Finishing a staged batch removes
    its gl_seq from the changelog only for a run that did not succeed, so the new changes
    stay and are merged after the base, in changelog order (the lifecycle soak, seed 913,
    lost them: the start of every extraction deleted them as the last batch's)."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    workload.round(3)
    extract(run_cli, source)
    with source.engine.begin() as db:
        shipped = db.execute(sa.text("SELECT seq FROM sqlite_sequence")).scalar_one()
        db.execute(sa.text("UPDATE sqlite_sequence SET seq = 0"))
    workload.round(shipped + 2)  # the sequence climbs back over every shipped gl_seq
    with source.engine.connect() as db:
        waiting = db.execute(sa.text("SELECT count(*) FROM main_h_items_log")).scalar_one()
    assert waiting >= shipped

    extract(run_cli, source)

    assert read_with_deltalake(_base_path(source)) == workload.source_rows()


def test_immediate_is_refused_for_a_method_whose_feed_has_no_batches(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create()
    refused = run_cli(
        "offload",
        "-t",
        source.table,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=ORA_ROWSCN",
        IMMEDIATE,
    )
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
    # The methods listed are those whose feed merges numbered batches (the feed declares it).
    assert lines[0].endswith(
        "--incremental-merge-mode=IMMEDIATE needs one of CHANGELOG, CHANGELOG_INSERT, "
        "PG_LOGICAL, UPDATABLE, UPDATABLE_CHANGELOG, UPDATABLE_INSERT; ORA_ROWSCN reads "
        "changes by position: use --incremental-merge-mode=DEFERRED"
    ), lines


def test_an_immediate_compaction_keeps_the_files_of_retained_base_versions(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its vacuum ignored the retained base versions (``keep_versions``) that a DEFERRED
    compaction's vacuum keeps: with no retention, it deleted their files."""
    from gluon.repo.common import now
    from gluon.repo.compaction import ObsoleteObject

    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    path = _base_path(source)
    kept_version = int(DeltaTable(path).version())
    kept_rows = read_with_deltalake(path, kept_version)
    repo = Repository(load_settings().repo_url)
    record = repo.get_table(source.table.upper())
    assert record is not None
    # What a compaction run with --incremental-retain-obsolete-objects records for the base
    # version it replaced (gluon.compact.steps.drop_obsolete).
    repo.compaction.retain(
        ObsoleteObject(
            table_key=record.table_key,
            kind="base table version",
            name="kept_before",
            location=path,
            retained_at=now(),
            compaction_run_id=None,
            enablement_id=None,
            delta_version=kept_version,
        )
    )
    for _ in range(2):  # each merge rewrites files the kept version reads
        workload.round(15)
        extract(run_cli, source)
    compacted = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-vacuum-retention-hours=0",
    )
    assert compacted.exit_code == 0, compacted.stderr
    assert read_with_deltalake(path) == workload.expected
    assert read_with_deltalake(path, kept_version) == kept_rows


@pytest.mark.parametrize(
    ("flag", "execute"),
    [
        ("--incremental-full-compaction", True),
        ("--incremental-partition-wise-full-compaction", True),
        ("--incremental-in-place-compaction", False),
    ],
)
def test_a_compaction_method_is_refused_on_an_immediate_table(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    execute: bool,
) -> None:
    """IMMEDIATE has no delta table to merge: a compaction method would be ignored."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG", IMMEDIATE)
    workload.round(10)
    extract(run_cli, source)
    version = storage.delta_version(_base_path(source))
    args = ("-x",) if execute else ()
    refused = run_cli("offload", "-t", source.table, *args, "--incremental-run-compaction", flag)
    assert refused.exit_code == 2, refused.stdout
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "IMMEDIATE" in lines[0] and flag in lines[0], lines
    assert "Traceback" not in refused.stderr
    assert storage.delta_version(_base_path(source)) == version
    assert read_with_deltalake(_base_path(source)) == workload.expected
