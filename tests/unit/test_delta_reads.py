"""Reading Delta tables into Arrow with deltalake, in a process that then exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from gluon.lake import storage


def _table(tmp_path: Path) -> Path:
    path = tmp_path / "items"
    for start in (0, 10):
        rows = pa.table({"id": list(range(start, start + 10)), "tags": [[1, 2]] * 10})
        write_deltalake(str(path), rows, mode="append")
    return path


def test_versions_and_columns_read_back(tmp_path: Path) -> None:
    path = _table(tmp_path)
    assert storage.read_delta(str(path)).num_rows == 20
    assert sorted(storage.read_delta(str(path), 0).column("id").to_pylist()) == list(range(10))
    assert storage.read_delta(f"file://{path}", 1, ["id"]).column_names == ["id"]


def test_a_process_that_read_a_table_exits_cleanly(tmp_path: Path) -> None:
    """Read through deltalake's own filesystem handler, such a process aborted at exit
    ("terminate called without an active exception") 2 times in 3."""
    path = _table(tmp_path)
    code = (
        "from gluon.lake import storage; "
        f"print(storage.read_delta({str(path)!r}).num_rows, "
        f"storage.delta_dataset({str(path)!r}, 0).to_table().num_rows)"
    )
    for _ in range(3):
        read = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
        )
        assert read.returncode == 0, read.stderr
        assert read.stdout.split() == ["20", "10"]
