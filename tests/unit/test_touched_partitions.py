"""Which base partitions pending changes may touch, from real Delta logs (gluon.lake.touched)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from gluon.lake.touched import touched_partitions


def _base(path: Path, *, partitioned: bool = True) -> str:
    ids = list(range(40))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i:02d}" for i in ids]),
            "region": pa.array([f"r{i // 10}" for i in ids]),
        }
    )
    write_deltalake(str(path), table, partition_by=["region"] if partitioned else None)
    return str(path)


def _delta(path: Path, ids: list[int | None], *, control: int = 1) -> str:
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"c{i}" for i in ids]),
            "region": pa.array(["r0"] * len(ids)),
            "gl_seq": pa.array(range(len(ids)), pa.int64()),
            "gl_op": pa.array(["U"] * len(ids)),
            "gl_extraction_id": pa.array([1] * len(ids), pa.int64()),
            "gl_control_partition": pa.array([control] * len(ids), pa.int32()),
        }
    )
    write_deltalake(str(path), table, partition_by=["gl_control_partition"], mode="append")
    return str(path)


def test_only_partitions_whose_key_range_meets_a_change_are_touched(tmp_path: Path) -> None:
    base = _base(tmp_path / "base")
    delta = _delta(tmp_path / "delta", [3, 7])
    _delta(tmp_path / "delta", [25], control=2)
    found = touched_partitions(base, delta, ("id",), min_partition=1)
    assert found is not None
    assert found.columns == ("region",)
    assert found.touched == (("r0",), ("r2",))
    assert (found.base_version, found.delta_version) == (0, 1)
    # Changes below the view's range are in the base already: not pending.
    later = touched_partitions(base, delta, ("id",), min_partition=2)
    assert later is not None and later.touched == (("r2",),)


def test_partitions_are_touched_by_the_changed_keys_not_by_a_file_range(tmp_path: Path) -> None:
    """One delta file whose keys are far apart (an update of an old row and inserts of new
    keys, shipped in one batch) spans every base file's range; its keys meet two."""
    base = _base(tmp_path / "base")
    delta = _delta(tmp_path / "delta", [3, 38, 1000, 1001])
    found = touched_partitions(base, delta, ("id",), min_partition=1)
    assert found is not None
    assert found.touched == (("r0",), ("r3",))
    # inserts of new keys only: no base file can hold them
    inserts = touched_partitions(
        base, _delta(tmp_path / "d2", [-5, 1000]), ("id",), min_partition=1
    )
    assert inserts is not None and inserts.touched == ()


def test_a_composite_key_is_bounded_by_its_integer_column(tmp_path: Path) -> None:
    base = _base(tmp_path / "base")
    delta = _delta(tmp_path / "delta", [12])
    found = touched_partitions(base, delta, ("name", "id"), min_partition=1)
    assert found is not None and found.touched == (("r1",),)


def test_the_general_view_is_kept_where_statistics_cannot_say(tmp_path: Path) -> None:
    base = _base(tmp_path / "base")
    # every partition touched
    every = _delta(tmp_path / "d1", [1, 15, 25, 39])
    assert touched_partitions(base, every, ("id",), min_partition=1) is None
    # a NULL key pending: NULL base keys are not in min/max
    assert (
        touched_partitions(base, _delta(tmp_path / "d2", [3, None]), ("id",), min_partition=1)
        is None
    )
    # a string key: Delta may truncate its statistics
    assert (
        touched_partitions(base, _delta(tmp_path / "d3", [3]), ("name",), min_partition=1) is None
    )
    # an unpartitioned base
    flat = _base(tmp_path / "flat", partitioned=False)
    assert touched_partitions(flat, _delta(tmp_path / "d4", [3]), ("id",), min_partition=1) is None


def test_an_unpartitioned_base_passes_through_when_only_new_keys_are_pending(
    tmp_path: Path,
) -> None:
    flat = _base(tmp_path / "flat", partitioned=False)
    found = touched_partitions(flat, _delta(tmp_path / "d", [40, 41]), ("id",), min_partition=1)
    assert found is not None and found.columns == () and found.touched == ()
