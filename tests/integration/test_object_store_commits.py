"""Delta commits on an object store are not lost when two writers race (issue 29).

Two processes append to one Delta table on the suite's S3 server at the same time, each
through one of gluon's write paths: the engine's (embedded Sail, ``LakeSession.write``
with gluon's retry of a lost commit race, as extraction and compaction write) and
deltalake's (``write_deltalake``, as IMMEDIATE merges write). Settings come from the env
file as for every command (gluon.config.export_object_store). Every append a writer saw
succeed must be in the table exactly once, and every commit its own Delta version: with
a plain put, a commit that lost the race would overwrite the winner's log entry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from support.s3 import S3Server

from gluon.env_file import OBJECT_STORE_PREFIXES

APPENDS = 8

WRITER = """
import sys
from gluon.config import export_object_store, load_settings

path, location, name = sys.argv[1], sys.argv[2], sys.argv[3]
settings = load_settings()
export_object_store(settings)
if path == "engine":
    from gluon.lake.session import open_session, retry_commit

    with open_session(settings) as lake:
        lake.spark.createDataFrame([(name, -1)], "writer STRING, n INT").collect()
        print("ready", flush=True)
        sys.stdin.readline()  # both writers start together
        for n in range(int(sys.argv[4])):
            frame = lake.spark.createDataFrame([(name, n)], "writer STRING, n INT")
            try:
                retry_commit(lambda: lake.write(frame, location, mode="append"))
            except Exception as exc:
                print(f"failed {n}: {exc}", file=sys.stderr)
            else:
                print(n, flush=True)
else:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    DeltaTable(location).version()
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(int(sys.argv[4])):
        batch = pa.table({"writer": [name], "n": pa.array([n], pa.int32())})
        try:
            write_deltalake(location, batch, mode="append")
        except Exception as exc:
            print(f"failed {n}: {exc}", file=sys.stderr)
        else:
            print(n, flush=True)
"""


@pytest.fixture
def location(
    s3_server: S3Server, s3_bucket: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A Delta table with one row on the S3 server; the settings in the env file only."""
    from deltalake import write_deltalake

    for key in list(os.environ):
        if key.startswith(OBJECT_STORE_PREFIXES):
            monkeypatch.delenv(key)
    root = f"s3://{s3_bucket}/lake"
    settings = {"OFFLOAD_LAKE_ROOT": root, **s3_server.env()}
    (offload_home / "conf").mkdir()
    (offload_home / "conf" / "offload.env").write_text(
        "".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8"
    )
    table = f"{root}/race"
    seed = pa.table({"writer": ["seed"], "n": pa.array([0], pa.int32())})
    write_deltalake(table, seed, storage_options=s3_server.env())
    return table


def test_two_writers_racing_on_s3_lose_no_commit(location: str, s3_server: S3Server) -> None:
    from deltalake import DeltaTable

    writers = {
        name: subprocess.Popen(
            [sys.executable, "-c", WRITER, path, location, name, str(APPENDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for name, path in (("engine", "engine"), ("deltalake", "deltalake"))
    }
    for process in writers.values():  # each has started its engine or read the table
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready", process.communicate()[1]
    for process in writers.values():
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    succeeded: dict[str, list[int]] = {}
    for name, process in writers.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        succeeded[name] = [int(line) for line in stdout.split()]
        assert succeeded[name], f"no append of the {name} writer succeeded: {stderr}"

    table = DeltaTable(location, storage_options=s3_server.env())
    rows = table.to_pyarrow_table().to_pylist()
    found = sorted((row["writer"], row["n"]) for row in rows)
    expected = sorted([("seed", 0)] + [(name, n) for name, ns in succeeded.items() for n in ns])
    assert found == expected, "an append a writer saw succeed is missing, or shows twice"
    commits = sum(len(ns) for ns in succeeded.values())
    assert table.version() == commits, "two appends share a Delta version"
