"""Compaction end to end on real PostgreSQL and SQLite sources with the real Sail engine.

After random DML, extractions and a compaction, the user view must equal the
source; a reader at any step of a compaction, and a compaction killed at any
step and run again, must see the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.incremental import (
    SEED,
    RunCli,
    Source,
    attach_patch_view,
    enable,
    extract,
    lake_rows,
    lake_state,
    methods_for,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.sql import read_statements
from support.workload import Workload

from gluon.compact.steps import STEPS
from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

METHOD_FLAGS = {
    "IN_PLACE": (),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}
PARTITIONED = ("--partition-columns=id", "--partition-granularity=10")


def compact(run_cli: RunCli, source: Source, *flags: str) -> str:
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
    return str(result.stdout)


def single_session_compaction(
    run_cli: RunCli, source: Source, workload: Workload, *flags: str, changes: int = 8
) -> None:
    """The spec's Example 6, with ``changes`` arriving while the compaction is under way."""
    out = compact(run_cli, source, "--incremental-terminate-compaction", *flags)
    assert "stopped at the acknowledgement step" in out
    workload.round(changes)  # extracted into the new control partition
    assert "acknowledged change ingestion diversion" in extract(run_cli, source).stdout
    assert "complete" in compact(run_cli, source, *flags)


def partitions_in_delta(source: Source) -> set[int]:
    rows = lake_rows(
        f"SELECT DISTINCT gl_control_partition FROM {source.schema}_load.items_changes"
    )
    return {int(str(row["gl_control_partition"])) for row in rows}


def prepare(source: Source, run_cli: RunCli, method: str, *offload_flags: str) -> Workload:
    workload = workload_for(source, method, SEED)
    workload.create(60)
    enable(run_cli, source, method, *offload_flags)
    attach_patch_view(workload, source, method)
    for _ in range(2):
        workload.round(15)
        extract(run_cli, source)
    return workload


@pytest.mark.parametrize("compaction", sorted(METHOD_FLAGS))
def test_compaction_keeps_the_latest_state(
    compaction: str,
    source: Source,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG", *PARTITIONED)
    assert lake_state(source.schema) == workload.expected
    single_session_compaction(run_cli, source, workload, *METHOD_FLAGS[compaction])
    assert lake_state(source.schema) == workload.expected
    # The compacted control partition is gone; the one written during the compaction stays.
    assert partitions_in_delta(source) == {1}
    # Later rounds and a second compaction keep working.
    workload.round(10)
    extract(run_cli, source)
    single_session_compaction(run_cli, source, workload, *METHOD_FLAGS[compaction])
    assert lake_state(source.schema) == workload.expected
    assert partitions_in_delta(source) <= {2}


def test_every_method_compacts_in_place(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every extraction method (merging and insert-only) survives an in-place compaction."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    for method in methods_for("sqlite"):
        workload = prepare(source, run_cli, method, *PARTITIONED)
        # Named explicitly: an insert-only table's default compaction is FULL.
        in_place = "--incremental-in-place-compaction"
        single_session_compaction(run_cli, source, workload, in_place)
        assert lake_state(source.schema) == workload.expected, method
        # Compact what arrived during the first compaction, with nothing new arriving.
        single_session_compaction(run_cli, source, workload, in_place, changes=0)
        disabled = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
        assert disabled.exit_code == 0, disabled.stderr
        assert lake_state(source.schema) == workload.expected, method
        _forget_table(source, workload)


def _forget_table(source: Source, workload: Workload) -> None:
    import shutil

    import sqlalchemy as sa

    settings = load_settings()
    Repository(settings.repo_url).delete_table(source.table.upper())
    with workload.engine.begin() as db:
        db.execute(sa.text(f"DROP TABLE {workload.table}"))
    shutil.rmtree(settings.lake_root, ignore_errors=True)


@pytest.mark.parametrize("compaction", sorted(METHOD_FLAGS))
def test_killed_at_every_step_readers_see_the_source_and_a_rerun_finishes(
    compaction: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG", *PARTITIONED)
    flags = ("--incremental-run-compaction", "--incremental-wait-time=0", *METHOD_FLAGS[compaction])
    points = [f"compact.after_{step.name}" for step in STEPS]
    if compaction != "FULL":
        points.insert(points.index("compact.after_compact"), "compact.after_partition")
    if compaction != "IN_PLACE":
        # The staged base published to the one base path, the views not yet switched.
        points.insert(points.index("compact.after_switch_views"), "compact.after_publish")
    for point in points:
        if point == "compact.after_await_acknowledgement":
            workload.round(5)
            extract(run_cli, source)  # acknowledges; its changes land in the new partition
        died = run_offload_process("-t", source.table, "-x", *flags, env={"GLUON_FAULT": point})
        assert died.returncode == FAULT_EXIT_CODE, (point, died.stdout, died.stderr)
        # A reader between the steps sees exactly the source.
        assert lake_state(source.schema) == workload.expected, f"reader after {point}"
    finished = run_offload_process("-t", source.table, "-x", *flags)
    assert finished.returncode == 0, finished.stderr
    assert lake_state(source.schema) == workload.expected
    assert partitions_in_delta(source) == {1}


def base_files_by_partition(path: str) -> dict[str, set[str]]:
    files: dict[str, set[str]] = {}
    for uri in DeltaTable(path).file_uris():
        part = next(p for p in uri.split("/") if p.startswith("gl_part_id="))
        files.setdefault(part, set()).add(uri)
    return files


@pytest.mark.parametrize(
    "flags",
    [(), ("--incremental-retain-obsolete-objects",)],
    ids=["deltalake merge", "engine (retaining)"],
)
def test_in_place_leaves_unchanged_partitions_untouched(
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    recorded_sql_path: Path,
    flags: tuple[str, ...],
) -> None:
    """A merging method's changes are merged by deltalake without the engine (no statement
    sent); retaining a copy, the engine stages the partitions. Either way only the files of
    changed partitions are replaced."""
    import sqlalchemy as sa

    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(100)  # ids 1..100: partitions 0, 10, ..., 100
    enable(run_cli, source, "CHANGELOG", *PARTITIONED)
    with workload.engine.begin() as db:
        db.execute(sa.text("UPDATE main.items SET name = 'changed' WHERE id IN (12, 15)"))
        db.execute(sa.text("DELETE FROM main.items WHERE id = 47"))
        db.execute(sa.text("UPDATE main.items SET id = 1000 WHERE id = 100"))  # a new partition
    extract(run_cli, source)
    base_path = Repository(load_settings().repo_url).get_table("MAIN.ITEMS").base_path  # type: ignore[union-attr]
    before = base_files_by_partition(base_path)
    already = len(read_statements(recorded_sql_path))
    single_session_compaction(run_cli, source, workload, *flags, changes=0)
    after = base_files_by_partition(base_path)
    sent = [s["text"] for s in read_statements(recorded_sql_path)[already:]]
    if not flags:
        assert sent == [], "the engine was used"
    else:
        # The staging read names the partitions as literals, which the engine prunes the
        # base scan on (a semi-join with the listed partitions' table read every file).
        staging = [text for text in sent if "gl_compacted" in text]
        assert staging, "no staging statement recorded"
        assert all("gl_listed" not in text for text in staging), staging
    changed = {"gl_part_id=10", "gl_part_id=40", "gl_part_id=100"}
    assert "gl_part_id=1000" in after and "gl_part_id=1000" not in before
    for part, files in before.items():
        if part in changed:
            assert after.get(part) != files, f"{part} should have been rewritten"
        else:
            assert after[part] == files, f"{part} has no changes but was rewritten"
    assert lake_state("main") == workload.source_rows()


def test_multi_session_compaction_acknowledges_itself_without_an_extraction(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec's Example 7 with no extraction scheduled: one command completes.

    It runs the acknowledging extraction itself (issue 16: it used to wait forever). Waiting
    for a running extraction's acknowledgement: tests/integration/test_compaction_waits.py.
    """
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG")
    workload.round(5)
    compaction = run_offload_process(
        "-t", source.table, "-x", "--incremental-run-compaction", "--incremental-wait-time=0", "-v"
    )
    assert compaction.returncode == 0, compaction.stderr
    assert "acknowledged change ingestion diversion to control partition 1" in compaction.stderr
    assert "complete" in compaction.stdout
    assert lake_state(source.schema) == workload.expected


def test_threshold_wait_time_retain_and_snapshot(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG")
    repo = Repository(load_settings().repo_url)
    pending = len(lake_rows("SELECT * FROM main_load.items_changes"))

    # Threshold: fewer changes than asked for -> exit 0, nothing recorded.
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        f"--incremental-delta-threshold={pending + 1}",
    )
    assert result.exit_code == 0 and "nothing to compact" in result.stdout
    assert repo.compaction.runs("MAIN.ITEMS") == []

    # Snapshot: refused when it cannot be recorded ...
    full = "--incremental-full-compaction"
    # The run records its options when it starts; the resumes below keep them.
    wait_and_retain = ("--incremental-wait-time=0.05", "--incremental-retain-obsolete-objects")
    compact(run_cli, source, "--incremental-terminate-compaction", full, *wait_and_retain)
    extract(run_cli, source)
    monkeypatch.setenv("GLUON_FAULT", "compact.snapshot_unavailable")
    refused = run_cli("offload", "-t", source.table, "-x", "--incremental-run-compaction", full)
    assert refused.exit_code == 1
    assert "--incremental-run-compaction-without-snapshot" in refused.stderr
    monkeypatch.delenv("GLUON_FAULT")

    # ... recorded otherwise, and readable with VERSION AS OF; wait time and retain honoured.
    before = lake_state("main")
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-full-compaction",
        "--incremental-wait-time=0.05",
        "--incremental-retain-obsolete-objects",
    )
    assert result.exit_code == 0, result.stderr
    run = repo.compaction.runs("MAIN.ITEMS")[0]
    steps = {step.step: step.detail for step in repo.compaction.steps(run.id)}
    assert steps["wait_for_queries"] == "waited 0.05 minutes after the switch"
    recorded = {step.step: step for step in repo.compaction.steps(run.id)}
    wait, switch = recorded["wait_for_queries"], recorded["switch_views"]
    assert wait.finished_at is not None
    # The wait counts from the switch (recorded inside switch_views), not from its own start.
    assert (wait.finished_at - switch.started_at).total_seconds() >= 3.0, "it did not wait"
    assert run.snapshot is not None
    base = run.snapshot["base"]
    old_rows = lake_rows(
        f"SELECT COUNT(*) AS n FROM delta.`{base['path']}` VERSION AS OF {base['version']}"
    )
    assert old_rows == [{"n": 60}], "the snapshot version should hold the base as offloaded"
    retained = repo.compaction.retained("MAIN.ITEMS")
    assert {o.kind for o in retained} == {"base table version", "control partitions"}
    # The base keeps its path: what is retained is the snapshot's version of it.
    old_base = next(o for o in retained if o.kind == "base table version")
    assert old_base.location == base["path"] and old_base.delta_version == base["version"]
    assert lake_state("main") == before == workload.expected

    # Without a snapshot: the same fault no longer stops a compaction that allows it.
    workload.round(6)
    extract(run_cli, source)
    compact(run_cli, source, "--incremental-terminate-compaction")
    extract(run_cli, source)
    monkeypatch.setenv("GLUON_FAULT", "compact.snapshot_unavailable")
    allowed = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-run-compaction-without-snapshot",
    )
    assert allowed.exit_code == 0, allowed.stderr
    monkeypatch.delenv("GLUON_FAULT")
    latest = repo.compaction.runs("MAIN.ITEMS")[0]
    assert latest.status == "success" and latest.snapshot is None
    assert lake_state("main") == workload.expected


def test_extractions_keep_running_during_a_compaction(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Extractions race the compaction's commits (appends vs its delete): nothing is lost."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG", *PARTITIONED)
    compaction = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gluon.cli.offload import main; main()",
            "-t",
            source.table,
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
        ],
        env={**os.environ, "GLUON_ACK_POLL_SECONDS": "0.2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while compaction.poll() is None:
            workload.round(3)
            extracted = run_offload_process(
                "-t", source.table, "-x", "--incremental-run-extraction"
            )
            # Refused (exit 3) while the compaction runs the acknowledging extraction itself.
            assert extracted.returncode == 0 or (
                extracted.returncode == 3 and "locked by a running extraction" in extracted.stderr
            ), extracted.stderr
        _, err = compaction.communicate(timeout=60)
    finally:
        compaction.kill()
    assert compaction.returncode == 0, err
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected


def test_the_view_switch_leaves_the_compacted_control_partition_behind(
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the switch the views read the compacted base and the new control partition only
    (issue 26, item 10). A merging view that still read the compacted partition would show the
    same rows (re-applying a key's latest change to a base that holds it changes nothing), so
    the check is what the views read: the table's view range, as status shows it, starts at
    the new partition while the compacted one still exists (the compaction killed right after
    the switch, before it drops the partition)."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli, "CHANGELOG")
    died = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        env={"GLUON_FAULT": "compact.after_switch_views"},
    )
    assert died.returncode == FAULT_EXIT_CODE, (died.stdout, died.stderr)
    key = source.table.upper()
    repo = Repository(load_settings().repo_url)
    run = repo.compaction.open_run(key)
    state = repo.incremental.get_state(key)
    assert run is not None and state is not None and run.new_partition is not None
    assert state.view_min_partition == run.new_partition
    status = run_cli("display_incremental_status", "-t", source.table, "--json")
    assert status.exit_code == 0, status.stderr
    roles = {
        part["partition"]: part["role"]
        for part in json.loads(status.stdout)["ingestion"]["partitions"]
    }
    assert roles[run.compacted_partition] == "compacted, no longer read by the views", roles
    assert partitions_in_delta(source) == {run.compacted_partition}  # not dropped yet
    assert lake_state(source.schema) == workload.expected
