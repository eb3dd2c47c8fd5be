"""``gluon verify`` by checksums: a table of 20k rows with 3 rows broken (two in the lake,
one change whose changelog row was lost) is narrowed to exactly those keys, and the bytes
moved from the source stay under 1% of the table (real SQLite and PostgreSQL sources, Sail,
Delta tables tampered with through deltalake, both merge modes, an integer key and a
composite key that starts with text)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import Source, enable, extract, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.methods.base import SourceObject
from gluon.repo import Repository

ROWS = 20_000
KEYS = {
    "integer key": ("id INTEGER PRIMARY KEY", "id"),
    "composite text key": ("PRIMARY KEY (region, id)", "region, id"),
}


def _create(source: Source, key: str) -> None:
    constraint = KEYS[key][0]
    id_column = "id INTEGER NOT NULL" if "PRIMARY KEY (" in constraint else constraint
    extra = f", {constraint}" if "PRIMARY KEY (" in constraint else ""
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.table} ({id_column}, region VARCHAR(20) NOT NULL, "
                f"name VARCHAR(60), amount NUMERIC(12,2), flag BOOLEAN{extra})"
            )
        )
        db.execute(
            sa.text(
                f"INSERT INTO {source.table} (id, region, name, amount, flag) "
                f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS}) "
                "SELECT i, CASE WHEN i % 3 = 0 THEN 'север' ELSE 'south' END, "
                "CASE WHEN i % 7 = 0 THEN NULL ELSE 'name of row ' || i END, "
                "i * 0.25, i % 2 = 0 FROM n"
            )
        )


def _record(source: Source) -> tuple[str, str]:
    repo = Repository(load_settings().repo_url)
    record = repo.get_table(source.table.upper())
    state = repo.incremental.get_state(source.table.upper())
    assert record is not None and state is not None
    log = next(o for o in state.source_objects if o.kind == SourceObject.CHANGELOG_TABLE.value)
    return record.base_path, f"{log.schema}.{log.name}"


@pytest.mark.parametrize("key", list(KEYS))
@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_bisection_finds_three_broken_rows_moving_under_one_percent_of_the_table(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    key: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source, key)
    enable(run_cli, source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    extract(run_cli, source)
    base, changelog = _record(source)
    size = DeltaTable(base).to_pyarrow_table().nbytes

    equal = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert equal.exit_code == 0, equal.stdout + equal.stderr
    [verdict] = json.loads(equal.stdout)
    assert (verdict["equal"], verdict["rows_compared"]) == (True, ROWS)
    assert 0 < verdict["bytes_moved"] < size / 100, (verdict["bytes_moved"], size)

    table = DeltaTable(base)
    table.delete("id = 3")
    DeltaTable(base).update(updates={"name": "'tampered'"}, predicate="id = 5")
    with source.engine.begin() as db:  # a change whose changelog row is lost
        db.execute(sa.text(f"UPDATE {source.table} SET amount = -1 WHERE id = 7"))
        db.execute(sa.text(f"DELETE FROM {changelog}"))

    broken = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert broken.exit_code == 1, broken.stdout + broken.stderr
    [verdict] = json.loads(broken.stdout)
    region = {3: "север", 5: "south", 7: "south"}

    def keys(*ids: int) -> list[list[object]]:
        return [[region[i], i] if key != "integer key" else [i] for i in ids]

    assert verdict["missing_in_lake"] == keys(3)
    assert verdict["extra_in_lake"] == []
    assert sorted(verdict["different_values"], key=repr) == sorted(keys(5, 7), key=repr)
    assert verdict["bytes_moved"] < size / 100, (verdict["bytes_moved"], size)


def test_a_null_key_value_is_a_bucket_like_any_other(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key column PostgreSQL keeps unique with NULL as one value: the row whose key is
    NULL is hashed, bucketed and, once broken in the lake, found by its NULL key."""
    from support.incremental import postgres_source

    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.table} (code VARCHAR(20), val INTEGER, "
                "UNIQUE NULLS NOT DISTINCT (code))"
            )
        )
        db.execute(
            sa.text(f"INSERT INTO {source.table} SELECT 'c' || i, i FROM generate_series(1, 500) i")
        )
        db.execute(sa.text(f"INSERT INTO {source.table} VALUES (NULL, -7)"))
    enable(run_cli, source, "CHANGELOG", "--incremental-key-columns=code")
    base, _ = _record(source)
    equal = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert equal.exit_code == 0, equal.stdout + equal.stderr
    assert json.loads(equal.stdout)[0]["rows_compared"] == 501

    DeltaTable(base).update(updates={"val": "7"}, predicate="code IS NULL")
    broken = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert broken.exit_code == 1, broken.stdout + broken.stderr
    [verdict] = json.loads(broken.stdout)
    assert (verdict["missing_in_lake"], verdict["extra_in_lake"]) == ([], [])
    assert verdict["different_values"] == [[None]]


def _verify_process(source: Source, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """``gluon verify -t TABLE --json`` in a child process (``fault``: where it is killed)."""
    command = "from gluon.cli.app import main; main()"
    return subprocess.run(
        [sys.executable, "-c", command, "verify", "-t", source.table, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **({"GLUON_FAULT": fault} if fault else {})},
        timeout=300,
        check=False,
    )


def test_a_verify_killed_between_levels_resumes_after_the_levels_it_finished(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source, "integer key")
    enable(run_cli, source, "CHANGELOG")
    extract(run_cli, source)
    base, _ = _record(source)
    DeltaTable(base).delete("id = 3")  # one differing bucket at every level: 3 levels

    killed = _verify_process(source, "verify.after_level@1")
    assert killed.returncode == FAULT_EXIT_CODE, killed.stderr
    resumed = _verify_process(source)
    assert resumed.returncode == 1, resumed.stderr
    [after_kill] = json.loads(resumed.stdout)
    again = _verify_process(source)  # the finished run left nothing to resume: a whole search
    [whole] = json.loads(again.stdout)
    assert after_kill["missing_in_lake"] == whole["missing_in_lake"] == [[3]]
    # the rerun did not redo the first level's whole-table pass (16 buckets)
    assert after_kill["buckets_compared"] < whole["buckets_compared"], (after_kill, whole)
    assert (after_kill["resumed_levels"], whole["resumed_levels"]) == (1, 0)


def test_a_verify_killed_and_rerun_after_an_extraction_starts_again(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source, "integer key")
    enable(run_cli, source, "CHANGELOG")
    extract(run_cli, source)
    base, _ = _record(source)
    DeltaTable(base).delete("id = 3")
    killed = _verify_process(source, "verify.after_level@1")
    assert killed.returncode == FAULT_EXIT_CODE, killed.stderr
    with source.engine.begin() as db:  # a change the rerun's extraction ships first
        db.execute(sa.text(f"UPDATE {source.table} SET amount = -1 WHERE id = 9"))
    rerun = run_cli("gluon", "verify", "-t", source.table, "--json")
    [verdict] = json.loads(rerun.stdout)
    assert (rerun.exit_code, verdict["resumed_levels"]) == (1, 0)
    assert verdict["missing_in_lake"] == [[3]]
