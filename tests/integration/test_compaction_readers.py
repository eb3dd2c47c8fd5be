"""Readers across the view switch of a compaction (issue 12, reproduction 9).

A query that started before the switch reads the old base table and the compacted
control partitions. Those are dropped only once ``--incremental-wait-time`` has passed
since the switch, so such a query (and a reader looping across the switch) sees no error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.incremental import (
    RunCli,
    enable,
    extract,
    lake_state,
    sqlite_source,
    workload_for,
)

from gluon.config import load_settings
from gluon.read.catalog import lake_session
from gluon.repo import Repository

METHOD_FLAGS = {
    "IN_PLACE": (),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}
# Long enough for the test's queries after the switch, short enough for a test.
WAIT_MINUTES = "0.2"


def _generation(repo: Repository) -> int:
    state = repo.incremental.get_state("MAIN.ITEMS")
    assert state is not None
    return state.view_generation


@pytest.mark.parametrize("compaction", sorted(METHOD_FLAGS))
def test_queries_started_before_the_switch_finish_without_error(
    compaction: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", 12)
    workload.create(60)
    enable(run_cli, source, "CHANGELOG", "--partition-columns=id", "--partition-granularity=10")
    workload.round(20)
    extract(run_cli, source)
    flags = (
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        *METHOD_FLAGS[compaction],
        f"--incremental-wait-time={WAIT_MINUTES}",  # recorded by the first command of the run
    )
    stopped = run_cli("offload", *flags, "--incremental-terminate-compaction")
    assert stopped.exit_code == 0, stopped.stderr
    extract(run_cli, source)  # acknowledges the diversion
    expected_count = len(workload.expected)
    settings = load_settings()
    repo = Repository(settings.repo_url)
    before = _generation(repo)

    errors: list[str] = []
    counts: list[int] = []
    finished = threading.Event()

    def loop_reader() -> None:
        while not finished.is_set():
            try:
                with lake_session(settings) as session:
                    row = session.sql("SELECT count(*) AS n FROM main.items").collect()[0]
                counts.append(int(row["n"]))
            except Exception as exc:  # every failure is the finding
                errors.append(str(exc))

    with lake_session(settings) as early:  # registered before the switch: the old objects
        assert early.sql("SELECT count(*) AS n FROM main.items").collect()[0]["n"] == (
            expected_count
        )
        reader = threading.Thread(target=loop_reader)
        reader.start()
        compaction_process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from gluon.cli.offload import main; main()",
                *flags,
            ],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while _generation(repo) == before and compaction_process.poll() is None:
                time.sleep(0.05)
            assert _generation(repo) == before + 1, compaction_process.communicate()
            # The views have switched; the query below started before it and must still work.
            after_switch = early.sql("SELECT count(*) AS n FROM main.items").collect()[0]["n"]
            _, err = compaction_process.communicate(timeout=300)
        finally:
            compaction_process.kill()
            finished.set()
            reader.join()
    assert compaction_process.returncode == 0, err
    assert after_switch == expected_count
    assert errors == []
    assert counts and set(counts) == {expected_count}
    assert lake_state("main") == workload.expected
    run = repo.compaction.runs("MAIN.ITEMS")[0]
    steps = [step.step for step in repo.compaction.steps(run.id)]
    assert steps.index("switch_views") < steps.index("wait_for_queries")
    assert steps.index("wait_for_queries") < steps.index("drop_obsolete")
