"""Statements stay within what the engine handles, however many partitions a compaction
touches (issue 12, reproduction 8: an OR of ~900 partition predicates overflowed the
engine's stack and killed the process).

Partition-wise full compaction writes 100 partitions per statement, and computes each
key's latest change once for all of them (issue 14): staged in a table dropped at the end,
not aggregated again by each partition write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, lake_rows, run_offload_process
from support.sql import read_statements

from gluon.config import load_settings
from gluon.lake import storage
from gluon.repo import Repository

PARTITIONS = 2000
METHOD_FLAGS = {
    # A retained copy keeps in-place compaction on the engine (without it, a merging method's
    # in-place run is one deltalake MERGE): the limit under test is the engine's.
    "IN_PLACE": ("--incremental-retain-obsolete-objects",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}


def _extract(run_cli: RunCli, table: str) -> None:
    result = run_cli("offload", "-t", table, "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("compaction", sorted(METHOD_FLAGS))
def test_compaction_of_2000_affected_partitions(
    compaction: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    recorded_sql_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE wide (id INTEGER PRIMARY KEY, label TEXT)"))
        db.execute(
            sa.text("INSERT INTO wide (id, label) VALUES (:id, 'before')"),
            [{"id": key} for key in range(1, PARTITIONS + 1)],
        )
    table = "main.wide"
    enabled = run_cli(
        "offload",
        "-t",
        table,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--partition-columns=id",
        "--partition-granularity=1",
    )
    assert enabled.exit_code == 0, enabled.stderr
    with engine.begin() as db:  # one changed key in each of the 2,000 partitions
        db.execute(sa.text("UPDATE wide SET label = 'after ' || id"))
    _extract(run_cli, table)
    flags = (
        "-t",
        table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        *METHOD_FLAGS[compaction],  # from the first command: a resumed run keeps its method
    )
    stopped = run_cli("offload", *flags, "--incremental-terminate-compaction")
    assert stopped.exit_code == 0, stopped.stderr
    _extract(run_cli, table)  # acknowledges the diversion
    # In a child process: an engine crash must fail the test, not kill pytest.
    already = len(read_statements(recorded_sql_path))
    finished = run_offload_process(*flags)
    assert finished.returncode == 0, (finished.returncode, finished.stderr[-2000:])
    assert "complete" in finished.stdout
    repo = Repository(load_settings().repo_url)
    run = repo.compaction.runs("MAIN.WIDE")[0]
    assert run.status == "success"
    assert run.method == compaction
    assert len(run.progress["partitions"]) >= PARTITIONS
    with engine.connect() as db:
        source = {row.id: row.label for row in db.execute(sa.text("SELECT id, label FROM wide"))}
    lake = {row["id"]: row["label"] for row in lake_rows("SELECT id, label FROM main.wide")}
    assert lake == source
    assert len(lake_rows("SELECT * FROM main_load.wide_changes")) == 0
    if compaction == "PARTITION_WISE_FULL":
        sent = [s["text"] for s in read_statements(recorded_sql_path)[already:]]
        writes = [text for text in sent if "REPLACE WHERE" in text.upper()]
        assert len(writes) >= PARTITIONS // 100
        # the latest change per key is found by an anti-join against later changes (gl_later)
        recomputing = [text for text in writes if "GL_LATER" in text.upper()]
        assert not recomputing, f"{len(recomputing)} partition writes searched every change"
        assert storage.delta_version(run.progress["latest_changes"]) is None


def test_a_query_oring_1500_terms_runs(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's query with a long OR list (the engine's default stack held ~900 terms)."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    with sa.create_engine(url).begin() as db:
        db.execute(sa.text("CREATE TABLE nums (id INTEGER PRIMARY KEY)"))
        db.execute(sa.text("INSERT INTO nums (id) VALUES (:id)"), [{"id": n} for n in range(3000)])
    offloaded = run_cli("offload", "-t", "main.nums", "-x")
    assert offloaded.exit_code == 0, offloaded.stderr
    terms = " OR ".join(f"(id = {n})" for n in range(0, 3000, 2))
    # In a child process: an engine crash must fail the test, not kill pytest.
    queried = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gluon.cli.app import main; main()",
            "query",
            "--json",
            f"SELECT count(*) AS n FROM main.nums WHERE {terms}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert queried.returncode == 0, (queried.returncode, queried.stderr[-2000:])
    assert json.loads(queried.stdout) == [{"n": 1500}]
