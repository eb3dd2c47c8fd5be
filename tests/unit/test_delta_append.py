"""The engine-free append of a batch of changes (``gluon.lake.delta_append``), on real Delta
tables written by deltalake."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from gluon.lake.checkpoints import CHECKPOINT_INTERVAL
from gluon.lake.delta_append import append_without_engine

PARTITION = "gl_partition"


def _rows(start: int, count: int = 3) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            PARTITION: pa.array([0] * count, pa.int32()),
        }
    )


def test_appends_commit_once_each_and_checkpoint_every_interval(tmp_path: Path) -> None:
    location = str(tmp_path / "changes")
    write_deltalake(location, _rows(0), partition_by=[PARTITION])
    for batch in range(1, CHECKPOINT_INTERVAL + 2):
        assert append_without_engine(location, _rows(batch * 3), PARTITION)
    table = DeltaTable(location)
    assert table.version() == CHECKPOINT_INTERVAL + 1
    ids = table.to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == list(range((CHECKPOINT_INTERVAL + 2) * 3))
    log = tmp_path / "changes" / "_delta_log"
    checkpoints = sorted(path.name for path in log.glob("*.checkpoint.parquet"))
    # gluon.lake.checkpoints: one once ten commits (versions 0 to 9) have no checkpoint
    assert checkpoints == [f"{CHECKPOINT_INTERVAL - 1:020d}.checkpoint.parquet"]


def test_no_table_or_another_schema_writes_nothing(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    assert not append_without_engine(missing, _rows(0), PARTITION)
    assert not (tmp_path / "missing").exists()
    location = str(tmp_path / "changes")
    write_deltalake(location, _rows(0), partition_by=[PARTITION])
    wider = _rows(3).append_column("extra", pa.array([1, 2, 3], pa.int64()))
    assert not append_without_engine(location, wider, PARTITION)
    assert DeltaTable(location).version() == 0
