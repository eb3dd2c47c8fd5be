"""Merge mode IMMEDIATE stages a batch with deltalake, without the engine, when Arrow can
compute the base table's partition columns exactly as the engine does
(``gluon.lake.staging``); other partition expressions go through the engine. Real SQLite
source, the embedded Sail engine, Delta tables read without gluon."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from support.incremental import (
    SEED,
    enable,
    extract,
    lake_state,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.workload import canonical
from typer.testing import Result

from gluon.config import load_settings
from gluon.lake import sql, storage
from gluon.lake.session import open_session
from gluon.lake.staging import arrow_partition_values
from gluon.repo import Repository
from gluon.schema import Column, PartitionColumn

IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
VALUES = [-11, -10, -6, -5, -1, 0, 1, 4, 5, 9, 10, None, 2**40 + 3, -(2**40) - 3]


def test_arrow_partition_values_equal_the_engines(offload_home: Path) -> None:
    column = Column("id", "integer", "bigint")
    changes = pa.table({"id": pa.array(VALUES, pa.int64())})
    parts = [PartitionColumn("id", "", "gl_part_id", sql.as_bigint("id"))] + [
        PartitionColumn("id", str(width), f"gl_part_w{width}", sql.integer_bucket("id", width))
        for width in (1, 5, 7, 1000)
    ]
    values = arrow_partition_values(changes, (column,), tuple(parts))
    assert values is not None
    with open_session(load_settings()) as session:
        frame = session.spark.createDataFrame(changes, schema="id BIGINT")
        engine = frame.selectExpr(*(f"{p.expression} AS {p.lake_column}" for p in parts))
        expected = engine.toArrow()
    for part in parts:
        assert values[part.lake_column].to_pylist() == expected[part.lake_column].to_pylist()


def test_other_partition_expressions_are_left_to_the_engine() -> None:
    name = Column("name", "text", "string")
    amount = Column("amount", "numeric", "decimal(10,2)")
    changes = pa.table({"name": ["a"], "amount": pa.array([1], pa.decimal128(10, 2))})
    prefix = PartitionColumn("name", "1", "gl_part_name", sql.string_prefix("name", 1))
    bucket = PartitionColumn("amount", "10", "gl_part_amount", sql.decimal_bucket("amount", 10))
    assert arrow_partition_values(changes, (name, amount), (prefix,)) is None
    assert arrow_partition_values(changes, (name, amount), (bucket,)) is None


def test_a_sync_of_an_integer_partitioned_table_starts_no_engine(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(30)
    enable(
        run_cli,
        source,
        "CHANGELOG",
        IMMEDIATE,
        "--partition-columns=id",
        "--partition-granularity=5",
    )
    for _ in range(2):
        workload.round(12)
        synced = run_offload_process("-t", source.table, "-x", "--incremental-run-extraction", "-v")
        assert synced.returncode == 0, synced.stderr
        assert "step write: done" in synced.stderr
        assert "step start_engine" not in synced.stderr
    assert _base_rows(source.table) == workload.expected


def test_a_string_partitioned_table_is_staged_through_the_engine(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(30)
    enable(
        run_cli,
        source,
        "CHANGELOG",
        IMMEDIATE,
        "--partition-columns=name",
        "--partition-granularity=1",
    )
    for _ in range(2):
        workload.round(12)
        synced = run_offload_process("-t", source.table, "-x", "--incremental-run-extraction", "-v")
        assert synced.returncode == 0, synced.stderr
        assert "step start_engine" in synced.stderr
    extract(run_cli, source)
    assert _base_rows(source.table) == workload.expected
    assert lake_state(source.schema) == workload.expected


def _base_rows(table: str) -> dict[int, object]:
    record = Repository(load_settings().repo_url).get_table(table.upper())
    assert record is not None
    rows = [canonical(row) for row in storage.read_delta(record.base_path).to_pylist()]
    return {row[0]: row for row in rows}
