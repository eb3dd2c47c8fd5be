"""An Oracle composite-partitioned table without a server: its spec and the rows the
``list_partitions`` / ``list_subpartitions`` dictionary queries return for it.

``APP.SALES_C`` is RANGE partitioned by month on ``SOLD_ON`` (a DATE), LIST
subpartitioned on ``REGION``; ``APP.SALES_H`` is RANGE-HASH (on ``SALE_ID``). The
HIGH_VALUE texts are Oracle's own spelling of each bound.
"""

from __future__ import annotations

from typing import Any

from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"

COLUMNS = (
    Column("SALE_ID", "NUMBER(12)", "decimal(12,0)", nullable=False),
    Column("SOLD_ON", "DATE", "timestamp_ntz", nullable=False),
    Column("REGION", "VARCHAR2(8)", "string"),
    Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)"),
)


def _spec(name: str) -> TableSpec:
    return TableSpec(
        schema="APP",
        name=name,
        columns=COLUMNS,
        primary_key=("SALE_ID",),
        partition_columns=("SOLD_ON",),
        partition_kind="RANGE",
    )


RANGE_LIST = _spec("SALES_C")
RANGE_HASH = _spec("SALES_H")
PLAIN = TableSpec(schema="APP", name="PLAIN", columns=COLUMNS, primary_key=("SALE_ID",))


def _to_date(day: str) -> str:
    return f"TO_DATE(' {day} 00:00:00', 'SYYYY-MM-DD HH24:MI:SS', 'NLS_CALENDAR=GREGORIAN')"


PARTITIONS = [
    {"PARTITION_NAME": "P2017_02", "PARTITION_POSITION": 2, "HIGH_VALUE": _to_date("2017-03-01")},
    {"PARTITION_NAME": "P2017_01", "PARTITION_POSITION": 1, "HIGH_VALUE": _to_date("2017-02-01")},
    {"PARTITION_NAME": "PMAX", "PARTITION_POSITION": 3, "HIGH_VALUE": "MAXVALUE"},
]


def _subpartition(
    partition: str, name: str, position: int, high: str | None, kind: str
) -> dict[str, Any]:
    columns = "REGION" if kind == "LIST" else "SALE_ID"
    return {
        "PARTITION_NAME": partition,
        "SUBPARTITION_NAME": name,
        "SUBPARTITION_POSITION": position,
        "HIGH_VALUE": high,
        "SUBPARTITIONING_TYPE": kind,
        "SUBPARTITION_COLUMNS": columns,
    }


DICTIONARY: dict[str, dict[str, list[dict[str, Any]]]] = {
    "SALES_C": {
        "list_partitions": PARTITIONS,
        "list_subpartitions": [
            _subpartition("P2017_01", "P2017_01_EMEA", 1, "'EMEA'", "LIST"),
            _subpartition("P2017_01", "P2017_01_REST", 2, "DEFAULT", "LIST"),
            _subpartition("P2017_02", "P2017_02_EU", 1, "'EMEA', 'O''NEIL'", "LIST"),
            _subpartition("P2017_02", "P2017_02_NONE", 2, "NULL", "LIST"),
            _subpartition("P2017_02", "P2017_02_APAC", 3, "'APAC'", "LIST"),
            _subpartition("PMAX", "PMAX_EMEA", 1, "'EMEA'", "LIST"),
            _subpartition("PMAX", "PMAX_REST", 2, "DEFAULT", "LIST"),
        ],
    },
    "SALES_H": {
        "list_partitions": PARTITIONS,
        "list_subpartitions": [
            _subpartition("P2017_01", "SYS_SUBP101", 1, None, "HASH"),
            _subpartition("P2017_01", "SYS_SUBP102", 2, None, "HASH"),
        ],
    },
    "PLAIN": {"list_partitions": [], "list_subpartitions": []},
}


class RecordedOracle(OracleSource):
    """OracleSource answering the dictionary queries above (nothing connects)."""

    def _dictionary(self, template: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        rows = DICTIONARY[params["table"]][template]
        return [{key.lower(): value for key, value in row.items()} for row in rows]


def recorded_oracle() -> RecordedOracle:
    """A RecordedOracle on the engine :func:`gluon.source.connect` builds for ``URL``."""
    return RecordedOracle(connect(URL).engine)
