"""Compaction across waits: the engine's idle session timeout, acknowledging by itself.

Issue 16: a compaction held its engine session across ``--incremental-wait-time``
and the acknowledgement wait, so the embedded engine (whose idle sessions end
after 15 minutes) failed the next step; and with no extraction scheduled it
waited for an acknowledgement forever.
"""

from __future__ import annotations

import re
import select
from pathlib import Path
from typing import IO

import pytest
from support.incremental import (
    SEED,
    RunCli,
    Source,
    assert_no_duplicate_sequences,
    attach_patch_view,
    enable,
    extract,
    lake_rows,
    lake_state,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.locking import PausedCommand
from support.workload import Workload

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

METHOD_FLAGS = {
    "IN_PLACE": ("--incremental-in-place-compaction",),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}
IDLE_SESSION_SECONDS = "2"
"""The embedded engine's idle session timeout in these tests (the default is 15 minutes)."""


def partitions_in_delta(source: Source) -> set[int]:
    rows = lake_rows(
        f"SELECT DISTINCT gl_control_partition FROM {source.schema}_load.items_changes"
    )
    return {int(str(row["gl_control_partition"])) for row in rows}


def prepare(source: Source, run_cli: RunCli, method: str = "CHANGELOG") -> Workload:
    """A table with changes in the lake, ready to compact."""
    workload = workload_for(source, method, SEED)
    workload.create(30)
    enable(run_cli, source, method)
    attach_patch_view(workload, source, method)
    workload.round(10)
    extract(run_cli, source)
    return workload


def offload_args(source: Source, *flags: str) -> tuple[str, ...]:
    return ("-t", source.table, "-x", *flags)


COMPACT = ("--incremental-run-compaction", "--incremental-wait-time=0")
FAST_ACK = {"GLUON_ACK_POLL_SECONDS": "0.2"}


def test_a_wait_longer_than_the_engine_idle_timeout_completes(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No engine session is held across a wait: 6 s of wait for queries, 2 s idle timeout.

    The README's one command, with no extraction scheduled: it acknowledges the diversion
    itself, compacts, waits, drops the compacted partition (the step that used to fail).
    """
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    engine = {"SAIL_SPARK__SESSION_TIMEOUT_SECS": IDLE_SESSION_SECONDS}
    finished = run_offload_process(
        *offload_args(source, "--incremental-run-compaction", "--incremental-wait-time=0.1"),
        env=engine,
    )
    assert finished.returncode == 0, finished.stderr
    assert "complete" in finished.stdout
    run = Repository(load_settings().repo_url).compaction.runs("MAIN.ITEMS")[0]
    assert run.status == "success"
    assert lake_state(source.schema) == workload.expected


@pytest.mark.parametrize("compaction", sorted(METHOD_FLAGS))
def test_with_no_extraction_running_one_command_completes(
    compaction: str,
    source: Source,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 16: with no extraction scheduled, a compaction waited forever for one."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    workload.round(6)  # captured, not extracted: the compaction's own extraction ships them
    result = run_offload_process(*offload_args(source, *COMPACT, *METHOD_FLAGS[compaction]))
    assert result.returncode == 0, result.stderr
    assert "complete" in result.stdout
    repo = Repository(load_settings().repo_url)
    run = repo.compaction.runs(source.table.upper())[0]
    steps = {step.step: step.detail for step in repo.compaction.steps(run.id)}
    shipped = re.match(
        r"acknowledged by this compaction's extraction \((\d+) changes to control partition 1\)",
        str(steps["await_acknowledgement"]),
    )
    assert shipped and int(shipped[1]) > 0, steps
    assert lake_state(source.schema) == workload.expected
    assert_no_duplicate_sequences(source)
    # The changes it shipped stay in the new control partition, for the next compaction.
    assert partitions_in_delta(source) == {1}


def read_line(stream: IO[str], within: float = 120.0) -> str:
    """The next line of a child's output (fails rather than hangs if none comes)."""
    ready, _, _ = select.select([stream], [], [], within)
    assert ready, f"no output within {within} s"
    return stream.readline()


def test_a_running_extraction_is_waited_for_visibly_and_acknowledges(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extraction holding the lock (a cron run) acknowledges; the wait shows without -v."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    repo = Repository(load_settings().repo_url)
    before_ack = "compact.before_await_acknowledgement"
    with PausedCommand(tmp_path, before_ack, *offload_args(source, *COMPACT), env=FAST_ACK) as c:
        c.wait_until(
            lambda: repo.incremental.get_state("MAIN.ITEMS").requested_partition == 1,  # type: ignore[union-attr]
            "the compaction requests a diversion",
        )
        workload.round(5)
        extraction = ("--incremental-run-extraction",)
        before_update = "extract.before_repository_update"
        with PausedCommand(tmp_path, before_update, *offload_args(source, *extraction)) as e:
            e.wait_for_lock("MAIN.ITEMS", "extraction")
            c.release.touch()  # the compaction goes on to find the extraction lock held
            assert c.process is not None and c.process.stderr is not None
            line = read_line(c.process.stderr)
            assert line.startswith(
                f"offload: waiting for the running extraction (pid {e.pid} on "
            ), line
            assert "of MAIN.ITEMS to acknowledge change ingestion diversion to control " in line
            assert line.rstrip().endswith("so far"), line
        assert e.returncode == 0, e.stderr
        assert "acknowledged change ingestion diversion" in e.stdout
    assert c.returncode == 0, c.stderr
    assert "complete" in c.stdout
    run = repo.compaction.runs("MAIN.ITEMS")[0]
    steps = {step.step: step.detail for step in repo.compaction.steps(run.id)}
    assert str(steps["await_acknowledgement"]).startswith("acknowledged at "), steps
    assert lake_state(source.schema) == workload.expected


def test_the_acknowledgement_timeout_fails_with_one_line(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    before_update = "extract.before_repository_update"
    extraction = offload_args(source, "--incremental-run-extraction")
    with PausedCommand(tmp_path, before_update, *extraction) as held:
        held.wait_for_lock("MAIN.ITEMS", "extraction")
        timeout = "--incremental-acknowledgement-timeout=1"
        refused = run_offload_process(*offload_args(source, *COMPACT, timeout), env=FAST_ACK)
    assert held.returncode == 0, held.stderr
    assert refused.returncode == 1, refused.stderr
    lines = [
        line for line in refused.stderr.splitlines() if not line.startswith("offload: waiting")
    ]
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(
        "offload: error: compaction step await_acknowledgement failed: gave up after "
    ), lines
    assert (
        "s (--incremental-acknowledgement-timeout=1) waiting for the running extraction (pid "
        in lines[0]
    )
    assert "to acknowledge change ingestion diversion to control partition 1" in lines[0]
    # Run again without an extraction running: it acknowledges itself and finishes.
    finished = run_offload_process(*offload_args(source, *COMPACT, timeout), env=FAST_ACK)
    assert finished.returncode == 0, finished.stderr
    assert lake_state(source.schema) == workload.expected


def test_without_x_extraction_and_compaction_print_their_steps_and_change_nothing(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16: both stopped with "needs -x" instead of printing a plan like offload."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    workload.round(3)
    repo = Repository(load_settings().repo_url)
    before = repo.incremental.get_state("MAIN.ITEMS")
    timeout = "--incremental-acknowledgement-timeout=30"
    planned = run_cli("offload", "-t", source.table, "--incremental-run-compaction", timeout)
    assert planned.exit_code == 0, planned.stderr
    assert planned.stdout.startswith("Steps for MAIN.ITEMS (nothing was changed; add -x")
    assert "ask extractions to write to a new control partition 1" in planned.stdout
    assert "no extraction is running: run the acknowledging extraction" in planned.stdout
    assert "wait 15 minutes for queries" in planned.stdout
    stopping = run_cli(
        "offload",
        "-t",
        source.table,
        "--incremental-run-compaction",
        "--incremental-terminate-compaction",
    )
    assert stopping.exit_code == 0, stopping.stderr
    assert "stop here (--incremental-terminate-compaction)" in stopping.stdout
    assert "point the user view" not in stopping.stdout
    extraction = run_cli("offload", "-t", source.table, "--incremental-run-extraction")
    assert extraction.exit_code == 0, extraction.stderr
    assert "Steps for MAIN.ITEMS (nothing was changed; add -x" in extraction.stdout
    assert "captured changes of MAIN.ITEMS" in extraction.stdout
    assert "control partition 0" in extraction.stdout
    assert repo.compaction.runs("MAIN.ITEMS") == []
    assert repo.incremental.get_state("MAIN.ITEMS") == before
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected


@pytest.mark.parametrize(
    "point", ["extract.after_delta_commit", "extract.before_repository_update"]
)
def test_killed_in_its_own_extraction_a_rerun_finishes(
    point: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compaction killed inside the extraction it runs: nothing lost or shipped twice."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = prepare(source, run_cli)
    workload.round(5)
    died = run_offload_process(*offload_args(source, *COMPACT), env={"GLUON_FAULT": point})
    assert died.returncode == FAULT_EXIT_CODE, (died.stdout, died.stderr)
    finished = run_offload_process(*offload_args(source, *COMPACT))
    assert finished.returncode == 0, finished.stderr
    assert "complete" in finished.stdout
    assert_no_duplicate_sequences(source)
    assert lake_state(source.schema) == workload.expected
