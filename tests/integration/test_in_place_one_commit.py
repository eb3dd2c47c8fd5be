"""In-place compaction replaces every changed partition in one Delta commit (issue 28 item 1).

It replaced them 100 partitions per commit: over more than 100 partitions a reader holding
the base table's path (another engine, outside gluon) could read a version between two of
those commits, part compacted and part not. Both ways one is compacted: a merging method's
changes merged by deltalake, and the engine's staged partitions (here when a copy is
retained). Real SQLite, Sail and Delta tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import RunCli

from gluon.config import load_settings
from gluon.repo import Repository

TABLE = "main.wide"
KEY = "MAIN.WIDE"
PARTITIONS = 120
"""More than the 100 partitions one commit replaced."""


def _cli(run_cli: RunCli, *args: str) -> str:
    result = run_cli("offload", "-t", TABLE, "-x", *args)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def _rows(path: str, version: int) -> list[tuple[int, str]]:
    table = DeltaTable(path, version=version).to_pyarrow_table(columns=["k", "val"])
    return sorted((int(row["k"]), str(row["val"])) for row in table.to_pylist())


@pytest.mark.parametrize(
    "flags",
    [(), ("--incremental-retain-obsolete-objects",)],
    ids=["deltalake merge", "engine stage (retaining)"],
)
def test_an_in_place_compaction_over_many_partitions_is_one_commit(
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    flags: tuple[str, ...],
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE wide (k INTEGER PRIMARY KEY, val VARCHAR(10))"))
        db.execute(
            sa.text("INSERT INTO wide VALUES (:k, 'old')"),
            [{"k": k} for k in range(PARTITIONS)],
        )
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _cli(
        run_cli,
        "--partition-columns=k",
        "--partition-granularity=1",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    with engine.begin() as db:  # every partition changes
        db.execute(sa.text("UPDATE wide SET val = 'new'"))
    _cli(run_cli, "--incremental-run-extraction")
    record = Repository(load_settings().repo_url).get_table(KEY)
    assert record is not None
    path = record.base_path
    before = int(DeltaTable(path).version())
    old = [(k, "old") for k in range(PARTITIONS)]
    new = [(k, "new") for k in range(PARTITIONS)]
    assert _rows(path, before) == old

    out = _cli(run_cli, "--incremental-run-compaction", "--incremental-wait-time=0", *flags)
    assert "complete" in out, out

    after = int(DeltaTable(path).version())
    assert _rows(path, after) == new
    # Every version a reader holding the path could have read: all old, or all new.
    for version in range(before + 1, after):
        assert _rows(path, version) in (old, new), f"version {version} is half compacted"
    assert after == before + 1
