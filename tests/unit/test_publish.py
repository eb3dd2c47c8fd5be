"""Publishing a staged table as the next version of a base table (gluon/lake/publish.py).

Real Delta tables written with deltalake; read back by deltalake and Polars by path.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from gluon.lake import publish


def _rows(path: str) -> list[dict[str, object]]:
    return sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda row: str(row["k"]))


def test_partition_values_that_need_escaping_are_published_readable(tmp_path: Path) -> None:
    """The staged log holds each file's path URL-encoded (a space, ':', '/', '%' in a
    partition value); the publish must name the files, not their encoding twice."""
    base = str(tmp_path / "t_data")
    write_deltalake(base, pa.table({"k": [1], "r": ["old"]}), partition_by=["r"])
    stage = publish.stage_location(base, 3)
    staged = pa.table({"k": [10, 20, 30], "r": ["a b:c/d%e", "plain", None]})
    write_deltalake(stage, staged, partition_by=["r"])

    version = publish.publish(base, stage, 3)

    assert version == 1 and publish.published(base, 3)
    expected = sorted(staged.to_pylist(), key=lambda row: str(row["k"]))
    assert _rows(base) == expected
    import polars

    assert sorted(polars.read_delta(base).to_dicts(), key=lambda row: str(row["k"])) == expected
    # A re-run after the commit changes nothing.
    assert publish.publish(base, stage, 3) == 1


def test_a_folder_without_a_table_is_created_by_the_publish(tmp_path: Path) -> None:
    base = str(tmp_path / "t_data")
    stage = publish.stage_location(base, 7)
    write_deltalake(stage, pa.table({"k": [1, 2]}))
    assert not publish.published(base, 7)

    assert publish.publish(base, stage, 7) == 0
    assert _rows(base) == [{"k": 1}, {"k": 2}]
    publish.remove_stage_log(stage)
    assert not (Path(stage) / "_delta_log").exists()
    assert _rows(base) == [{"k": 1}, {"k": 2}], "the data files stay: they are the base's"


def test_the_object_store_listing_gives_the_log_s_partition_values(tmp_path: Path) -> None:
    """On an object store the add actions come from deltalake's typed listing: written back
    to text, they must equal what the log holds (dates, timestamps, booleans, NULL)."""
    import datetime as dt

    stage = str(tmp_path / "t_data" / "gluon_compacted_r2")
    table = pa.table(
        {
            "k": [1, 2],
            "d": [dt.date(2024, 1, 2), None],
            "t": [dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.datetime(2024, 1, 1)],
            "b": [True, False],
        }
    )
    write_deltalake(stage, table, partition_by=["d", "t", "b"])

    from_log = publish.staged_add_actions(stage, "gluon_compacted_r2")
    listed = publish.snapshot_add_actions(stage, "gluon_compacted_r2")

    assert [(a.path, a.size, dict(a.partition_values)) for a in listed] == [
        (a.path, a.size, dict(a.partition_values)) for a in from_log
    ]
