"""The lake on an object store: every command, with the settings only in the env file.

A SQLite table with a composite key, offloaded to ``s3://<bucket>/lake`` on the suite's
S3-compatible server (support/s3.py), its endpoint and credentials only in
``$OFFLOAD_HOME/conf/offload.env`` (issue 29: they never reached the engine or deltalake,
and the first offload failed with ``Kernel error -> Operation not supported``). The view
and the base table are compared with the source value for value; nothing of the lake is
written locally, and the secret access key appears in no output and no log file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.s3 import SECRET_ACCESS_KEY, S3Server
from typer.testing import Result

from gluon.env_file import OBJECT_STORE_PREFIXES
from gluon.repo import OffloadedTable, Repository

RunCli = Callable[..., Result]
Values = tuple[str, ...]
TABLE = "main.pairs"
TABLE_NOW = "main.pairs_now"


def _env_file(home: Path, values: dict[str, str]) -> None:
    (home / "conf").mkdir(exist_ok=True)
    text = "".join(f"{key}={value}\n" for key, value in values.items())
    (home / "conf" / "offload.env").write_text(text, encoding="utf-8")


@pytest.fixture
def lake(
    s3_server: S3Server, s3_bucket: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A SQLite source and an S3 lake root, every setting in the env file only."""
    for key in list(os.environ):
        if key.startswith(OBJECT_STORE_PREFIXES):
            monkeypatch.delenv(key)
    monkeypatch.delenv("OFFLOAD_LAKE_ROOT", raising=False)
    source = offload_home.parent / "app.db"
    root = f"s3://{s3_bucket}/lake"
    _env_file(
        offload_home,
        {"GLUON_SOURCE_URL": f"sqlite:///{source}", "OFFLOAD_LAKE_ROOT": root, **s3_server.env()},
    )
    engine = sa.create_engine(f"sqlite:///{source}")
    with engine.begin() as db:
        for name in ("pairs", "pairs_now"):
            db.exec_driver_sql(
                f"CREATE TABLE {name} (k1 INTEGER NOT NULL, k2 VARCHAR(10) NOT NULL, "
                "val VARCHAR(20), PRIMARY KEY (k1, k2))"
            )
            db.exec_driver_sql(
                f"INSERT INTO {name} VALUES (1, 'a', 'v0'), (1, 'b', 'v0'), (2, 'a', NULL)"
            )
    return root


def _change(offload_home: Path, table: str, round_number: int) -> None:
    engine = sa.create_engine(f"sqlite:///{offload_home.parent / 'app.db'}")
    with engine.begin() as db:
        db.exec_driver_sql(f"UPDATE {table} SET val = 'r{round_number}' WHERE k2 = 'a'")
        db.exec_driver_sql(f"DELETE FROM {table} WHERE k1 = 1 AND k2 = 'b'")
        db.exec_driver_sql(f"INSERT INTO {table} VALUES ({10 + round_number}, 'n', 'new')")
        db.exec_driver_sql(f"UPDATE {table} SET k2 = 'z{round_number}' WHERE k1 = 2")


def _source_rows(offload_home: Path, table: str) -> set[Values]:
    engine = sa.create_engine(f"sqlite:///{offload_home.parent / 'app.db'}")
    with engine.connect() as db:
        return {_text(row) for row in db.exec_driver_sql(f"SELECT k1, k2, val FROM {table}")}


def _text(row: object) -> Values:
    return tuple("" if value is None else str(value) for value in row)  # type: ignore[attr-defined]


def _query_rows(run_cli: RunCli, outputs: list[str], table: str) -> set[Values]:
    result = run_cli("gluon", "query", "--csv", f"SELECT k1, k2, val FROM {table}")
    outputs.append(result.stdout + result.stderr)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()[1:]
    rows = [tuple(line.split(",")) for line in lines]
    assert len(rows) == len(set(rows)), "a row shows twice"
    return set(rows)


def _ok(run_cli: RunCli, outputs: list[str], *args: str) -> str:
    result = run_cli(*args)
    outputs.append(result.stdout + result.stderr)
    assert result.exit_code == 0, f"{args}: {result.stderr}"
    return str(result.stdout)


def _repository(offload_home: Path) -> Repository:
    return Repository(f"sqlite:///{offload_home / 'repo' / 'gluon.db'}")


def _record(offload_home: Path, table: str) -> OffloadedTable:
    record = _repository(offload_home).get_table(table.upper())
    assert record is not None
    return record


def _delta_path(offload_home: Path, table: str) -> str:
    state = _repository(offload_home).incremental.get_state(table.upper())
    assert state is not None
    return state.delta_path


def _keys_under(s3_server: S3Server, location: str) -> list[str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    return s3_server.keys(bucket, prefix.rstrip("/") + "/")


def _items(value: object) -> Iterator[tuple[str, object]]:
    """Every (key, value) pair in a JSON document, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key), item
            yield from _items(item)
    elif isinstance(value, list):
        for item in value:
            yield from _items(item)


COMPACTIONS = (
    ("--incremental-vacuum-retention-hours=0",),
    ("--incremental-full-compaction",),
    ("--incremental-partition-wise-full-compaction", "--incremental-retain-obsolete-objects"),
)


def test_every_command_works_with_the_lake_on_s3(
    lake: str, s3_server: S3Server, s3_bucket: str, offload_home: Path, run_cli: RunCli
) -> None:
    outputs: list[str] = []
    offload = ("offload", "-t")
    for table, mode in ((TABLE, "DEFERRED"), (TABLE_NOW, "IMMEDIATE")):
        _ok(
            run_cli,
            outputs,
            *offload,
            table,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
            f"--incremental-merge-mode={mode}",
        )
    for round_number, flags in enumerate(COMPACTIONS, start=1):
        for table in (TABLE, TABLE_NOW):
            _change(offload_home, table, round_number)
            _ok(run_cli, outputs, *offload, table, "-x", "--incremental-run-extraction")
            assert _query_rows(run_cli, outputs, table) == _source_rows(offload_home, table)
        old_base = _record(offload_home, TABLE).base_path
        old_keys = _keys_under(s3_server, old_base)
        assert old_keys, f"nothing of the base table under {old_base}"
        compacted = ("--incremental-run-compaction", "--incremental-wait-time=0", *flags)
        _ok(run_cli, outputs, *offload, TABLE, "-x", *compacted)
        assert _query_rows(run_cli, outputs, TABLE) == _source_rows(offload_home, TABLE)
        # Every method commits to the base at its one path (issue 28); the vacuum of the
        # first round removed the files the in-place rewrite replaced.
        assert _record(offload_home, TABLE).base_path == old_base
        kept = set(_keys_under(s3_server, old_base))
        assert kept
        if round_number == 1:
            assert kept != set(old_keys)

    status = json.loads(_ok(run_cli, outputs, "display_incremental_status", "-t", TABLE, "--json"))
    partitions = [value for _, value in _items(status) if isinstance(value, dict)]
    sizes = [(part["files"], part["size_bytes"]) for part in partitions if "size_bytes" in part]
    assert any(files for files, _ in sizes), sizes  # read from the Delta log on S3
    assert all((files > 0) == (size > 0) for files, size in sizes), sizes
    snapshots = [value for key, value in _items(status) if key == "readable"]
    # The last compaction kept its old base: its versions are read back by the engine.
    assert snapshots and set(snapshots) == {"engine"}, snapshots
    for query in [value for key, value in _items(status) if key == "query" and value]:
        _ok(run_cli, outputs, "gluon", "query", "--csv", str(query))  # VERSION AS OF on s3://
    report_dir = offload_home.parent / "report"
    _ok(
        run_cli,
        outputs,
        "offload_status_report",
        "--output-format=json",
        f"--output-dir={report_dir}",
    )
    shell = subprocess.run(
        [sys.executable, "-c", "from gluon.cli.app import main; main()", "shell", "--csv"],
        input=f"SELECT count(*) AS n FROM {TABLE};\n",
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )
    outputs.append(shell.stdout + shell.stderr)
    assert shell.returncode == 0, shell.stderr
    assert str(len(_source_rows(offload_home, TABLE))) in shell.stdout.split(), shell.stdout

    # Changes discarded, then both tables disabled: their delta tables leave the bucket.
    before = _query_rows(run_cli, outputs, TABLE_NOW)
    _change(offload_home, TABLE_NOW, 9)
    _ok(run_cli, outputs, *offload, TABLE_NOW, "-x", "--incremental-discard-changes")
    _ok(run_cli, outputs, *offload, TABLE_NOW, "-x", "--incremental-run-extraction")
    assert _query_rows(run_cli, outputs, TABLE_NOW) == before
    delta_tables = [_delta_path(offload_home, table) for table in (TABLE, TABLE_NOW)]
    for table in (TABLE, TABLE_NOW):
        _ok(run_cli, outputs, *offload, table, "-x", "--incremental-updates-disabled")
    for location in delta_tables:
        assert _keys_under(s3_server, location) == [], f"{location} is left behind"

    keys = s3_server.keys(s3_bucket)
    assert any(key.endswith("_gluon_owner.json") for key in keys), "no ownership marker"
    assert not (offload_home / "lake").exists(), "a lake file was written locally"
    for log_file in (offload_home / "log").rglob("*"):
        if log_file.is_file():
            assert SECRET_ACCESS_KEY not in log_file.read_text(errors="replace"), log_file
    for output in outputs:
        assert SECRET_ACCESS_KEY not in output


def test_a_lake_session_reads_an_s3_lake_with_settings_only_in_the_env_file(
    lake: str, s3_server: S3Server
) -> None:
    """No command ran first to put the env file's settings where the engine reads them."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from gluon.config import load_settings
    from gluon.lake.session import open_session

    location = f"{lake}/api_table"
    write_deltalake(location, pa.table({"id": [1, 2]}), storage_options=s3_server.env())
    with open_session(load_settings()) as session:
        rows = session.sql(f"SELECT count(*) AS n FROM delta.`{location}`").collect()
    assert rows[0]["n"] == 2
