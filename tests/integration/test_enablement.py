"""Runs belong to an enablement; compaction runs end truthfully (finished, resumed with their
own options, or abandoned); pending changes can be discarded. Real SQLite/PostgreSQL sources,
the real Sail engine and real Delta tables; the lake's user view is compared with the source.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import query_json
from support.incremental import (
    SEED,
    RunCli,
    Source,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.tables import status_json
from support.workload import Workload

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.lake import storage
from gluon.repo import Repository

KEY = "MAIN.ITEMS"
PARTITIONED = ("--partition-columns=id", "--partition-granularity=10")


def offload(run_cli: RunCli, source: Source, *flags: str) -> object:
    return run_cli("offload", "-t", source.table, *flags)


def compaction(*flags: str) -> tuple[str, ...]:
    return ("-x", "--incremental-run-compaction", "--incremental-wait-time=0", *flags)


def repo() -> Repository:
    return Repository(load_settings().repo_url)


def prepared(source: Source, run_cli: RunCli, *offload_flags: str) -> Workload:
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(60)
    enable(run_cli, source, "CHANGELOG", *offload_flags)
    for _ in range(2):
        workload.round(15)
        extract(run_cli, source)
    return workload


def killed_at(
    run_cli: RunCli,
    source: Source,
    workload: Workload,
    point: str,
    *flags: str,
    changes: int = 5,
) -> None:
    """A compaction (``flags``) acknowledged by an extraction that ships ``changes`` new
    changes, then killed at ``point``."""
    started = offload(run_cli, source, *compaction("--incremental-terminate-compaction", *flags))
    assert started.exit_code == 0, started.stderr  # type: ignore[attr-defined]
    workload.round(changes)
    extract(run_cli, source)  # acknowledges: these changes land in control partition 1
    died = run_offload_process("-t", source.table, *compaction(*flags), env={"GLUON_FAULT": point})
    assert died.returncode == FAULT_EXIT_CODE, died.stderr


def compact_everything(run_cli: RunCli, source: Source, *flags: str) -> None:
    """The spec's single-session compaction with no new changes: the delta table empties."""
    started = offload(run_cli, source, *compaction("--incremental-terminate-compaction", *flags))
    assert started.exit_code == 0, started.stderr  # type: ignore[attr-defined]
    extract(run_cli, source)
    finished = offload(run_cli, source, *compaction(*flags))
    assert finished.exit_code == 0, finished.stderr  # type: ignore[attr-defined]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
def sqlite(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    return source


@pytest.fixture(params=["sqlite", "postgresql"])
def source(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Source:
    if request.param == "sqlite":
        chosen = sqlite_source(tmp_path / "app.db")
    else:
        chosen = postgres_source(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


# -- issue 11, reproduction 2 ------------------------------------------------------------------


def test_unfinished_compaction_blocks_disable_and_reenable_keeps_new_changes(
    source: Source, run_cli: RunCli
) -> None:
    """Killed after switch_views, disable used to succeed; the re-enabled table's next
    compaction then resumed the stale run and deleted the new changes."""
    workload = prepared(source, run_cli)
    key = source.table.upper()
    # No change arrives during the compaction: nothing is left in the delta table's live
    # partitions, which is what let disable through.
    killed_at(run_cli, source, workload, "compact.after_switch_views", changes=0)
    run_id = repo().compaction.runs(key)[0].id

    refused = offload(run_cli, source, "-x", "--incremental-updates-disabled")
    assert refused.exit_code == 1  # type: ignore[attr-defined]
    line = one_line(refused.stderr)  # type: ignore[attr-defined]
    assert f"compaction run {run_id} of {key} is unfinished" in line
    assert "--incremental-run-compaction" in line
    assert "--incremental-abandon-compaction" not in line  # the views switched: finish only
    assert repo().incremental.get_state(key) is not None, "a refused disable changed nothing"
    # Abandoning is refused too, with the way forward.
    abandon = offload(run_cli, source, "-x", "--incremental-abandon-compaction")
    assert abandon.exit_code == 1  # type: ignore[attr-defined]
    assert "has switched its views: finish it" in one_line(abandon.stderr)  # type: ignore[attr-defined]

    assert offload(run_cli, source, *compaction()).exit_code == 0  # type: ignore[attr-defined]
    compact_everything(run_cli, source)  # what arrived during the first one
    disabled = offload(run_cli, source, "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr  # type: ignore[attr-defined]
    first = repo().incremental.enablements(key)
    enable(run_cli, source, "CHANGELOG")
    state = repo().incremental.get_state(key)
    assert state is not None and state.enablement_id not in {e["id"] for e in first}

    workload.round(2)
    extract(run_cli, source)
    compact_everything(run_cli, source)
    assert lake_state(source.schema) == workload.expected
    # Only this enablement's runs are this enablement's.
    runs = repo().compaction.runs(key, enablement_id=state.enablement_id)
    assert [run.status for run in runs] == ["success"]
    assert run_id not in {run.id for run in runs}
    # Status shows this enablement; --history adds the earlier one.
    current = status_json(run_cli, source.table)
    assert current["compaction"]["completed_runs"] == 1
    assert current["extraction"]["runs"] == 2
    every = run_cli("display_incremental_status", "-t", source.table, "--json", "--history")
    assert every.exit_code == 0, every.stderr
    earlier = json.loads(every.stdout)
    assert earlier["compaction"]["completed_runs"] == 2  # the resumed run, and this one
    assert earlier["extraction"]["runs"] > 2


def test_a_run_of_an_earlier_enablement_is_never_resumed(sqlite: Source, run_cli: RunCli) -> None:
    workload = prepared(sqlite, run_cli)
    killed_at(run_cli, sqlite, workload, "compact.after_switch_views")
    stale = repo().compaction.runs(KEY)[0]
    # The run as the old code left it: open, belonging to an enablement that is gone.
    from gluon.repo import models

    with repo().engine.begin() as db:
        db.execute(
            models.compaction_runs.update()
            .where(models.compaction_runs.c.id == stale.id)
            .values(enablement_id=-1)
        )
    workload.round(4)
    extract(run_cli, sqlite)
    compact_everything(run_cli, sqlite)
    assert lake_state("main") == workload.expected
    latest = repo().compaction.runs(KEY)[0]
    assert latest.id != stale.id and latest.status == "success"


# -- issue 11, reproduction 3 ------------------------------------------------------------------


def test_a_resumed_compaction_keeps_the_options_it_started_with(
    sqlite: Source, run_cli: RunCli
) -> None:
    workload = prepared(sqlite, run_cli)
    started = offload(
        run_cli,
        sqlite,
        *compaction(
            "--incremental-full-compaction",
            "--incremental-retain-obsolete-objects",
            "--incremental-terminate-compaction",
        ),
    )
    assert started.exit_code == 0, started.stderr  # type: ignore[attr-defined]
    old_base = repo().get_table(KEY).base_path  # type: ignore[union-attr]
    workload.round(5)
    extract(run_cli, sqlite)
    # The resume names neither the method, nor retain, and a different wait time: the note
    # names the wait time it keeps; the method and retain it keeps were not asked otherwise.
    resumed = offload(
        run_cli, sqlite, "-x", "--incremental-run-compaction", "--incremental-wait-time=0.01"
    )
    assert resumed.exit_code == 0, resumed.stderr  # type: ignore[attr-defined]
    note = one_line(resumed.stderr)  # type: ignore[attr-defined]
    assert note.startswith("offload: note: resuming compaction run")
    assert note.endswith(
        ": --incremental-wait-time=0 (this command's differing options are not used)"
    )
    run = repo().compaction.runs(KEY)[0]
    assert run.method == "FULL" and run.status == "success"
    steps = {step.step: step.detail for step in repo().compaction.steps(run.id)}
    assert steps["wait_for_queries"] == "no wait", "the recorded wait time applies"
    retained = {o.kind: o for o in repo().compaction.retained(KEY)}
    assert "base table version" in retained, "the recorded retain applies"
    kept = retained["base table version"]
    assert kept.location == old_base and kept.delta_version is not None  # one path (issue 28)
    assert lake_state("main") == workload.expected


def test_a_resume_that_gives_no_options_prints_no_note(sqlite: Source, run_cli: RunCli) -> None:
    """The recorded options differ from this command's defaults only: nothing to note."""
    workload = prepared(sqlite, run_cli)
    started = offload(
        run_cli,
        sqlite,
        *compaction(
            "--incremental-full-compaction",
            "--incremental-retain-obsolete-objects",
            "--incremental-vacuum-retention-hours=1",
            "--incremental-terminate-compaction",
        ),
    )
    assert started.exit_code == 0, started.stderr  # type: ignore[attr-defined]
    workload.round(5)
    extract(run_cli, sqlite)
    resumed = offload(run_cli, sqlite, "-x", "--incremental-run-compaction")
    assert resumed.exit_code == 0, resumed.stderr  # type: ignore[attr-defined]
    assert resumed.stderr == ""  # type: ignore[attr-defined]
    run = repo().compaction.runs(KEY)[0]
    assert run.method == "FULL" and run.status == "success"
    steps = {step.step: step.detail for step in repo().compaction.steps(run.id)}
    assert steps["wait_for_queries"] == "no wait", "the recorded wait time applies"
    assert {o.kind for o in repo().compaction.retained(KEY)} >= {"base table version"}
    assert lake_state("main") == workload.expected


# -- abandoning a compaction run ----------------------------------------------------------------


def test_abandon_before_the_acknowledgement_withdraws_the_diversion(
    source: Source, run_cli: RunCli
) -> None:
    workload = prepared(source, run_cli)
    key = source.table.upper()
    terminated = offload(run_cli, source, *compaction("--incremental-terminate-compaction"))
    assert terminated.exit_code == 0, terminated.stderr  # type: ignore[attr-defined]
    run_id = repo().compaction.runs(key)[0].id
    state = repo().incremental.get_state(key)
    assert state is not None and state.requested_partition == 1

    plan = offload(run_cli, source, "--incremental-abandon-compaction")
    assert plan.exit_code == 0, plan.stderr  # type: ignore[attr-defined]
    assert "nothing was changed" in plan.stdout  # type: ignore[attr-defined]
    assert "withdraw the request to divert change ingestion to control partition 1" in (
        plan.stdout  # type: ignore[attr-defined]
    )
    assert repo().compaction.get_run(run_id).status == "waiting"  # type: ignore[union-attr]

    done = offload(run_cli, source, "-x", "--incremental-abandon-compaction")
    assert done.exit_code == 0, done.stderr  # type: ignore[attr-defined]
    assert f"Compaction run {run_id} of {key} abandoned" in done.stdout  # type: ignore[attr-defined]
    assert repo().compaction.get_run(run_id).status == "abandoned"  # type: ignore[union-attr]
    state = repo().incremental.get_state(key)
    assert state is not None and state.requested_partition is None

    workload.round(5)
    extracted = extract(run_cli, source)
    assert "acknowledged" not in extracted.stdout and "control partition 0" in extracted.stdout
    assert lake_state(source.schema) == workload.expected
    compact_everything(run_cli, source)
    assert lake_state(source.schema) == workload.expected
    latest = repo().compaction.runs(key)[0]
    assert latest.id != run_id and latest.status == "success"


@pytest.mark.parametrize(
    "flags",
    [("--incremental-full-compaction",), ("--incremental-partition-wise-full-compaction",), ()],
    ids=["full", "partition-wise", "in-place"],
)
def test_abandon_after_compact_deletes_what_the_run_wrote(
    flags: tuple[str, ...], sqlite: Source, run_cli: RunCli
) -> None:
    workload = prepared(sqlite, run_cli, *PARTITIONED)
    killed_at(run_cli, sqlite, workload, "compact.after_compact", *flags)
    run = repo().compaction.runs(KEY)[0]
    written = [
        p for p in (run.progress.get("staged_base"), run.progress.get("staged")) if p is not None
    ]
    if flags:
        assert written and all(storage.delta_version(str(p)) is not None for p in written)
    else:  # merged into the base by deltalake, staged nothing (the views merge it again)
        assert run.progress.get("merged_without_engine") and written == []

    refused = offload(run_cli, sqlite, "-x", "--incremental-updates-disabled")
    assert "--incremental-abandon-compaction" in one_line(refused.stderr)  # type: ignore[attr-defined]

    done = offload(run_cli, sqlite, "-x", "--incremental-abandon-compaction")
    assert done.exit_code == 0, done.stderr  # type: ignore[attr-defined]
    assert all(storage.delta_version(str(p)) is None for p in written)
    assert lake_state("main") == workload.expected
    workload.round(5)
    extract(run_cli, sqlite)
    compact_everything(run_cli, sqlite, *flags)
    assert lake_state("main") == workload.expected


def test_abandon_refuses_without_an_unfinished_run(sqlite: Source, run_cli: RunCli) -> None:
    prepared(sqlite, run_cli)
    refused = offload(run_cli, sqlite, "-x", "--incremental-abandon-compaction")
    assert refused.exit_code == 1  # type: ignore[attr-defined]
    assert "no unfinished compaction run" in one_line(refused.stderr)  # type: ignore[attr-defined]


# -- discarding pending changes ------------------------------------------------------------------


def test_discard_changes_counts_then_drops_them_and_disable_succeeds(
    source: Source, run_cli: RunCli
) -> None:
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(40)
    enable(run_cli, source, "CHANGELOG")
    as_offloaded = lake_state(source.schema)
    workload.round(10)
    extract(run_cli, source)
    shipped = lake_state(source.schema)
    assert shipped != as_offloaded
    workload.round(6)  # stays in the changelog
    in_lake = len(lake_rows(f"SELECT gl_seq FROM {source.schema}_load.items_changes"))
    state = repo().incremental.get_state(source.table.upper())
    assert state is not None
    log = next(o for o in state.source_objects if o.kind == "changelog_table")
    changelog = log.name if source.dialect == "sqlite" else f"{log.schema}.{log.name}"
    with source.engine.connect() as db:
        in_changelog = int(db.execute(sa.text(f"SELECT COUNT(*) FROM {changelog}")).scalar_one())
    assert in_lake and in_changelog

    refused = offload(run_cli, source, "-x", "--incremental-updates-disabled")
    assert refused.exit_code == 1  # type: ignore[attr-defined]
    assert "--incremental-discard-changes" in one_line(refused.stderr)  # type: ignore[attr-defined]

    plan = offload(run_cli, source, "--incremental-discard-changes")
    assert plan.exit_code == 0, plan.stderr  # type: ignore[attr-defined]
    assert f"delete {in_changelog} changes from the changelog" in plan.stdout  # type: ignore[attr-defined]
    assert f"delete {in_lake} changes from delta table" in plan.stdout  # type: ignore[attr-defined]
    assert lake_state(source.schema) == shipped, "counting changed nothing"

    done = offload(run_cli, source, "-x", "--incremental-discard-changes")
    assert done.exit_code == 0, done.stderr  # type: ignore[attr-defined]
    assert (
        f"Discarded {in_changelog} changes from the changelog and {in_lake} changes" in done.stdout  # type: ignore[attr-defined]
    )
    assert lake_state(source.schema) == as_offloaded
    disabled = offload(run_cli, source, "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr  # type: ignore[attr-defined]
    assert lake_state(source.schema) == as_offloaded


# -- true state ----------------------------------------------------------------------------------


def test_finished_runs_carry_no_old_error_and_snapshots_say_how_to_read_them(
    sqlite: Source, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = prepared(sqlite, run_cli)
    full = "--incremental-full-compaction"
    offload(run_cli, sqlite, *compaction("--incremental-terminate-compaction", full))
    extract(run_cli, sqlite)
    monkeypatch.setenv("GLUON_FAULT", "compact.snapshot_unavailable")
    failed = offload(run_cli, sqlite, *compaction(full))
    assert failed.exit_code == 1  # type: ignore[attr-defined]
    assert repo().compaction.runs(KEY)[0].message
    monkeypatch.delenv("GLUON_FAULT")
    finished = offload(run_cli, sqlite, *compaction(full))
    assert finished.exit_code == 0, finished.stderr  # type: ignore[attr-defined]
    run = repo().compaction.runs(KEY)[0]
    assert run.status == "success" and run.message is None, "a finished run keeps no old error"

    # The base keeps its path (issue 28): the version before the full compaction is still
    # there (vacuum keeps files for 168 hours by default), and the printed query reads it.
    entries = {
        e["role"]: e
        for e in status_json(run_cli, sqlite.table)["compaction"]["snapshot"]["entries"]
    }
    assert entries["base"]["readable"] == "engine"
    assert query_json(entries["base"]["query"]), "the printed query reads the base version back"
    delta = entries["delta"]
    assert delta["readable"] == "engine"
    assert query_json(delta["query"]), "the printed query reads the delta version back"

    # Enough commits for a newer checkpoint: the engine can no longer time-travel there, so
    # status prints a deltalake command, which works.
    for _ in range(11):
        workload.round(1)
        extract(run_cli, sqlite)
    entries = {
        e["role"]: e
        for e in status_json(run_cli, sqlite.table)["compaction"]["snapshot"]["entries"]
    }
    delta = entries["delta"]
    assert delta["readable"] == "deltalake" and delta["query"] == ""
    command = delta["command"].split("  # ")[0]
    assert command.startswith("python -c ")
    code = shlex.split(command)[2]
    # Three times: a read through deltalake's pyarrow dataset aborted at exit 2 times in 3.
    for _ in range(3):
        read = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
        )
        assert read.returncode == 0, read.stderr
        assert read.stdout.startswith("pyarrow.Table"), read.stdout
    assert lake_state("main") == workload.expected


def test_retained_objects_are_queryable_and_outlive_disable(
    sqlite: Source, run_cli: RunCli
) -> None:
    """Unpartitioned in-place retains the base it overwrites; retained control partitions are
    copied to a table of their own; each has a name `gluon query` knows, after disable too."""
    workload = workload_for(sqlite, "CHANGELOG", SEED)
    workload.create(30)
    enable(run_cli, sqlite, "CHANGELOG")
    as_offloaded = lake_state("main")
    workload.round(8)
    extract(run_cli, sqlite)
    in_delta = len(lake_rows("SELECT gl_seq FROM main_load.items_changes"))
    killed_at(
        run_cli,
        sqlite,
        workload,
        "compact.after_compact",
        "--incremental-retain-obsolete-objects",
        changes=0,
    )
    resumed = offload(run_cli, sqlite, *compaction("--incremental-retain-obsolete-objects"))
    assert resumed.exit_code == 0, resumed.stderr  # type: ignore[attr-defined]
    compact_everything(run_cli, sqlite)
    retained = repo().compaction.retained(KEY)
    kinds = [item.kind for item in retained]
    assert sorted(kinds) == ["base table before compaction", "control partitions"], kinds
    names = {item.kind: item.name for item in retained}
    old_base = query_json(f"SELECT * FROM {names['base table before compaction']}")
    assert len(old_base) == len(as_offloaded)
    assert len(query_json(f"SELECT * FROM {names['control partitions']}")) == in_delta

    disabled = offload(run_cli, sqlite, "-x", "--incremental-updates-disabled")
    assert disabled.exit_code == 0, disabled.stderr  # type: ignore[attr-defined]
    assert len(query_json(f"SELECT * FROM {names['control partitions']}")) == in_delta
    shown = status_json(run_cli, sqlite.table)
    assert lake_state("main") == workload.expected
    assert shown is not None


def test_an_enable_killed_before_dating_its_enablement_is_finished_by_a_rerun(
    sqlite: Source, run_cli: RunCli
) -> None:
    """Found by the lifecycle model (seed 302): an enable that died after saving the enabled
    state, before its last write, was refused on re-run ("already enabled") and its enablement
    stayed undated."""
    workload = workload_for(sqlite, "CHANGELOG", SEED)
    workload.create(30)
    assert offload(run_cli, sqlite, "-x").exit_code == 0  # type: ignore[attr-defined]
    enable_flags = (
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    died = run_offload_process(
        "-t", sqlite.table, *enable_flags, env={"GLUON_FAULT": "repo.before_enablement_finished"}
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    again = offload(run_cli, sqlite, *enable_flags)
    assert again.exit_code == 0, again.stderr  # type: ignore[attr-defined]
    enablement = repo().incremental.enablements(KEY)[0]
    assert enablement["enabled_at"] is not None
    refused = offload(run_cli, sqlite, *enable_flags)
    assert refused.exit_code == 1 and "already enabled" in refused.stderr  # type: ignore[attr-defined]
    workload.round(10)
    extract(run_cli, sqlite)
    assert lake_state("main") == workload.expected
