"""Repository records are mapped to rows by field name, with conversions only where stored
differently (gluon/repo/common.RecordMapping)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import sqlalchemy as sa

from gluon.repo import RECORDS, OffloadedTable, models
from gluon.repo.common import RecordMapping
from gluon.repo.compaction import OBSOLETE_OBJECTS, RUNS, STEPS
from gluon.repo.incremental import (
    EXTRACTION_RUNS,
    STATES,
    IncrementalState,
    SourceObjectRecord,
)
from gluon.repo.increments import INCREMENTS
from gluon.repo.locks import LOCKS, LockRecord
from gluon.repo.rejects import REJECTED, RejectedChange
from gluon.schema import Column, PartitionColumn

MAPPINGS: list[tuple[RecordMapping[Any], sa.Table]] = [
    (RECORDS, models.offloaded_tables),
    (STATES, models.incremental_state),
    (EXTRACTION_RUNS, models.extraction_runs),
    (RUNS, models.compaction_runs),
    (STEPS, models.compaction_steps),
    (OBSOLETE_OBJECTS, models.obsolete_objects),
    (INCREMENTS, models.offload_increments),
    (LOCKS, models.table_locks),
    (REJECTED, models.rejected_changes),
]


@pytest.mark.parametrize(("mapping", "table"), MAPPINGS, ids=[table.name for _, table in MAPPINGS])
def test_every_field_is_stored_in_a_column_of_its_table(
    mapping: RecordMapping[Any], table: sa.Table
) -> None:
    columns = {how.column for how in mapping.converted.values()}
    assert columns <= set(table.columns.keys())


def _offloaded_table() -> OffloadedTable:
    return OffloadedTable(
        table_key="SH.SALES",
        source_dialect="sqlite",
        source_schema="main",
        source_table="sales",
        lake_schema="sh",
        lake_table="sales",
        base_table="sales_data",
        base_path="/lake/sh.db/sales_data",
        columns=(Column(name="id", source_type="INTEGER", lake_type="bigint", nullable=False),),
        primary_key=("id",),
        partitioning=(),
        offload_type="FULL",
        status="offloaded",
        row_count=2,
        offloaded_at=dt.datetime(2024, 1, 5, 12, 0),
    )


def test_a_record_survives_a_round_trip_through_its_row() -> None:
    record = _offloaded_table()
    row = RECORDS.to_row(record)
    assert json.loads(row["primary_key_json"]) == ["id"]
    assert RECORDS.from_row({**row, "updated_at": dt.datetime(2024, 1, 6)}) == record


def test_tuples_of_records_are_stored_as_json_objects() -> None:
    state = IncrementalState(
        table_key="SH.SALES",
        method="CHANGELOG",
        status="enabled",
        key_columns=("id",),
        source_objects=(SourceObjectRecord("trigger", "main", "sales_trg", "TRIGGER"),),
        delta_table="sales_delta",
        delta_path="/lake/sh_load.db/sales_delta",
    )
    row = STATES.to_row(state)
    assert json.loads(row["source_objects_json"]) == [
        {"kind": "trigger", "schema": "main", "name": "sales_trg", "object_type": "TRIGGER"}
    ]
    assert STATES.from_row(row) == state


def test_a_renamed_column_and_nullable_json() -> None:
    since = dt.datetime(2024, 1, 5, 12, 0)
    assert LOCKS.to_row(LockRecord("extract", 42, "node-a", since)) == {
        "command": "extract",
        "pid": 42,
        "host": "node-a",
        "acquired_at": since,
    }
    change = RejectedChange(gl_seq=7, reason="uncaptured_delete", key={"id": 1})
    row = REJECTED.to_row(change)
    assert row["row_json"] is None
    assert REJECTED.from_row(row) == change


def test_values_converts_only_the_fields_given() -> None:
    columns = (Column(name="id", source_type="INTEGER", lake_type="bigint", nullable=False),)
    assert RECORDS.values(
        columns=columns, partitioning=(PartitionColumn("id", "", "gl_part_id", "id"),)
    ).keys() == {
        "columns_json",
        "partitioning_json",
    }


def test_a_missing_column_fails_and_a_converter_must_name_a_field() -> None:
    row = RECORDS.to_row(_offloaded_table())
    del row["status"]
    with pytest.raises(KeyError):
        RECORDS.from_row(row)
    with pytest.raises(ValueError, match="not fields of LockRecord"):
        RecordMapping(LockRecord, acquired_at=LOCKS.converted["since"])
