"""The merging view's SELECT (``templates/lake/merge_view.sql.j2``) on the real engine.

Rows: a base table and a delta table written as Delta tables, merged by
:func:`gluon.lake.sql.merged_rows` and compared with the latest state computed here
(NULL keys, several changes per key, a delete then a re-insert, keys sharing one
``gl_seq`` as ORA_ROWSCN's do, changes outside the partitions read). Plan: the latest
change per key is found without a window over every change, a filter on the key
reaches every scan (a point lookup reads only the files that may hold the key), and a
read session probes the base against one table of the changes, not a repartitioned one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gluon.config import EngineKind, load_settings
from gluon.lake import sql
from gluon.lake.session import LakeSession, open_session
from gluon.read.catalog import lake_session
from gluon.repo import Repository

COLUMNS = ["k1", "k2", "v"]
KEYS = ["k1", "k2"]
Row = tuple[Any, ...]

BASE: list[Row] = [
    (1, "a", "base 1a"),
    (2, "a", "base 2a"),
    (3, None, "base 3-"),
    (4, "a", "base 4a"),
]
# (k1, k2, v, gl_seq, gl_op, gl_control_partition, gl_extraction_id)
CHANGES: list[Row] = [
    (1, "a", "old", 10, "U", 0, 1),  # compacted already: below the partitions read
    (1, "a", "1a first", 20, "U", 1, 2),
    (1, "a", "1a second", 21, "U", 2, 3),
    # ORA_ROWSCN re-reads a row version a run that died before recording its SCN shipped
    # (it has no unique gl_seq to skip by): the same key and gl_seq twice, shown once.
    (1, "a", "1a second", 21, "U", 2, 4),
    (2, "a", None, 22, "D", 1, 2),  # deleted
    (3, None, "3- again", 23, "D", 1, 2),  # NULL key part: deleted, then inserted again
    (3, None, "3- again", 30, "I", 2, 3),
    (5, None, "5- new", 30, "I", 2, 3),  # a new key sharing gl_seq 30 with another key
    (6, "b", "6b new", 24, "I", 1, 2),
    (6, "b", None, 31, "D", 2, 3),  # inserted then deleted: never shown
]
LOW = 1


def _expected() -> set[Row]:
    latest: dict[Row, Row] = {}
    for change in sorted((c for c in CHANGES if c[5] >= LOW), key=lambda c: c[3]):
        latest[change[:2]] = change
    rows = {row for row in BASE if row[:2] not in latest}
    return rows | {change[:3] for change in latest.values() if change[4] != "D"}


def _write(
    session: LakeSession, location: Path, rows: list[Row], schema: pa.Schema, *by: str
) -> str:
    table = pa.Table.from_pylist(
        [dict(zip(schema.names, row, strict=True)) for row in rows], schema
    )
    frame = session.spark.createDataFrame(table)
    session.write(frame, str(location), mode="overwrite", partition_by=by)
    return f"delta.`{location}`"


def _tables(session: LakeSession, tmp_path: Path) -> tuple[str, str]:
    columns = [pa.field("k1", pa.int64()), pa.field("k2", pa.string()), pa.field("v", pa.string())]
    base = _write(session, tmp_path / "base", BASE, pa.schema(columns))
    change_columns = [
        pa.field("gl_seq", pa.int64()),
        pa.field("gl_op", pa.string()),
        pa.field("gl_control_partition", pa.int32()),
        pa.field("gl_extraction_id", pa.int64()),
    ]
    delta = _write(
        session,
        tmp_path / "delta",
        CHANGES,
        pa.schema(columns + change_columns),
        sql.CONTROL_PARTITION,
    )
    return base, delta


def _merged(base: str, delta: str) -> str:
    return sql.merged_rows(
        "merge", columns=COLUMNS, keys=KEYS, base=base, delta=delta, low=LOW, high=None
    )


@pytest.mark.usefixtures("offload_home")
def test_the_merged_rows_are_each_keys_latest_state(tmp_path: Path) -> None:
    with open_session(load_settings()) as session:
        base, delta = _tables(session, tmp_path)
        rows = session.sql(_merged(base, delta)).collect()
    shown = [tuple(row) for row in rows]
    assert len(shown) == len(set(shown))
    assert set(shown) == _expected()


@pytest.mark.usefixtures("offload_home")
def test_the_latest_change_needs_no_window_and_a_key_filter_reaches_every_scan(
    tmp_path: Path,
) -> None:
    with open_session(load_settings()) as session:
        base, delta = _tables(session, tmp_path)
        lookup = f"SELECT * FROM ({_merged(base, delta)}) gl_view WHERE k1 = 6"
        # the engine's own session: EXPLAIN is a diagnosis, outside gluon's portable subset
        explained = session.spark.sql(f"EXPLAIN {lookup}").collect()
    plan = "\n".join(str(row[0]) for row in explained)
    assert "WindowAggExec" not in plan, plan
    scans = [line for line in plan.splitlines() if "DataSourceExec" in line]
    assert len(scans) >= 3, plan
    assert all("k1@0 = 6" in scan for scan in scans), plan


@pytest.mark.usefixtures("offload_home")
def test_the_latest_change_takes_an_anti_join_not_an_aggregate(tmp_path: Path) -> None:
    """Each change is kept unless a later change of its key exists: one hash join, where a
    MAX(gl_seq) aggregate plus a semi-join on it cost twice as much at a 10% delta."""
    with open_session(load_settings()) as session:
        base, delta = _tables(session, tmp_path)
        explained = session.spark.sql(f"EXPLAIN {_merged(base, delta)}").collect()
    plan = "\n".join(str(row[0]) for row in explained)
    assert "AggregateExec" not in plan, plan
    joins = [line for line in plan.splitlines() if "HashJoinExec" in line]
    assert len(joins) == 2 and all("RightAnti" in join or "LeftAnti" in join for join in joins), (
        plan
    )


@pytest.mark.usefixtures("offload_home")
def test_a_read_session_probes_every_base_row_against_one_table_of_the_changes(
    tmp_path: Path,
) -> None:
    """Past DataFusion's default 1 MiB build side (131k bigint keys), the engine hash-
    repartitioned every base row to probe the changes; a read session (``lake_session``)
    builds one table of the changes and probes it where the base rows are read."""
    settings = load_settings()
    if settings.engine != EngineKind.SAIL:
        pytest.skip("the join options are the embedded engine's")
    changes, rows = 200_000, 400_000
    key = pa.array(range(rows), pa.int64())
    base_rows = pa.table({"k1": key, "k2": pa.repeat(pa.scalar("a"), rows), "v": key})
    delta_rows = base_rows.slice(0, changes).append_column(
        "gl_seq", pa.array(range(changes), pa.int64())
    )
    for name, value in [("gl_op", "U"), ("gl_control_partition", 1), ("gl_extraction_id", 1)]:
        column = pa.repeat(
            pa.scalar(value, pa.string() if name == "gl_op" else pa.int64()), changes
        )
        delta_rows = delta_rows.append_column(name, column)
    with lake_session(settings, Repository(settings.repo_url, create=True)) as session:
        relations = []
        for name, table, by in [
            ("base", base_rows, ()),
            ("delta", delta_rows, ("gl_control_partition",)),
        ]:
            location = tmp_path / name
            session.write(
                session.spark.createDataFrame(table),
                str(location),
                mode="overwrite",
                partition_by=by,
            )
            relations.append(f"delta.`{location}`")
        explained = session.spark.sql(
            f"EXPLAIN SELECT COUNT(*) FROM ({_merged(*relations)})"
        ).collect()
    plan = "\n".join(str(row[0]) for row in explained)
    joins = [line for line in plan.splitlines() if "HashJoinExec" in line]
    assert len(joins) == 2 and all("mode=CollectLeft" in join for join in joins), plan
    assert "RepartitionExec: partitioning=Hash" not in plan, plan
