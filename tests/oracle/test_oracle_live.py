"""OracleSource against a live Oracle database (skipped without GLUON_TEST_ORACLE_DSN).

GLUON_TEST_ORACLE_DSN is an SQLAlchemy URL such as
``oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1``. The
tests create their tables in the connecting user's schema and drop them again.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.naming import TableRef
from gluon.source import connect
from gluon.source.oracle import OracleSource

DSN = os.environ.get("GLUON_TEST_ORACLE_DSN")

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(
        not DSN,
        reason="no Oracle database: set GLUON_TEST_ORACLE_DSN to an SQLAlchemy URL "
        "(oracle+oracledb://user:password@host:port/?service_name=...)",
    ),
]

UTC = dt.UTC
LONG_TEXT = "gluon-" * 40_000  # 240,000 characters: past any fixed fetch buffer
LONG_BYTES = bytes(range(256)) * 1_000

CREATE_TYPES = """
CREATE TABLE {table} (
    ORDER_ID NUMBER(10) NOT NULL,
    LINE_NO NUMBER(5) NOT NULL,
    AMOUNT NUMBER(12,2),
    HUNDREDS NUMBER(5,-2),
    ANY_NUMBER NUMBER,
    WHOLE INTEGER,
    APPROX FLOAT(126),
    RATIO BINARY_FLOAT,
    MEASURE BINARY_DOUBLE,
    CREATED DATE NOT NULL,
    UPDATED_AT TIMESTAMP(6),
    NANOS_AT TIMESTAMP(9),
    ZONED_AT TIMESTAMP(6) WITH TIME ZONE,
    ZONED_NANOS_AT TIMESTAMP(9) WITH TIME ZONE,
    LOCAL_AT TIMESTAMP(6) WITH LOCAL TIME ZONE,
    NAME VARCHAR2(100 CHAR) NOT NULL,
    NATIONAL_NAME NVARCHAR2(30),
    FLAG CHAR(3),
    NOTES CLOB,
    CHECKSUM RAW(16),
    PAYLOAD BLOB,
    DURATION INTERVAL DAY(2) TO SECOND(6),
    "lower_case" VARCHAR2(10),
    CONSTRAINT {table}_PK PRIMARY KEY (ORDER_ID, LINE_NO)
) ROWDEPENDENCIES
"""

INSERT_FULL = """
INSERT INTO {table} VALUES (
    1, 1, 1234.5, 12345, -0.5, 12345678901234567890123456789012345678, 1.25,
    1.5, 2.25,
    TO_DATE('2024-03-01 13:14:15', 'YYYY-MM-DD HH24:MI:SS'),
    TIMESTAMP '2024-03-01 12:34:56.123456',
    TIMESTAMP '2024-03-01 12:34:56.123456789',
    TIMESTAMP '2024-03-01 12:00:00.5 +02:00',
    TIMESTAMP '2024-03-01 12:00:00.123456789 -05:30',
    TIMESTAMP '2024-03-01 12:00:00 +00:00',
    'Zoë', N'Ωmega', 'AB',
    :notes, HEXTORAW('00FF10'), :payload,
    INTERVAL '1 02:03:04.5' DAY TO SECOND,
    'quoted'
)
"""

INSERT_SPARSE = """
INSERT INTO {table} (ORDER_ID, LINE_NO, CREATED, NAME, ANY_NUMBER, APPROX)
VALUES (1, 2, DATE '2024-01-31', 'second', 123.456, 0.1)
"""

EXPECTED_LAKE_TYPES = {
    "ORDER_ID": "decimal(10,0)",
    "LINE_NO": "decimal(5,0)",
    "AMOUNT": "decimal(12,2)",
    "HUNDREDS": "decimal(7,0)",
    "ANY_NUMBER": "string",
    "WHOLE": "decimal(38,0)",
    "APPROX": "string",
    "RATIO": "float",
    "MEASURE": "double",
    "CREATED": "timestamp_ntz",
    "UPDATED_AT": "timestamp_ntz",
    "NANOS_AT": "string",
    "ZONED_AT": "timestamp",
    "ZONED_NANOS_AT": "string",
    "LOCAL_AT": "timestamp",
    "NAME": "string",
    "NATIONAL_NAME": "string",
    "FLAG": "string",
    "NOTES": "string",
    "CHECKSUM": "binary",
    "PAYLOAD": "binary",
    "DURATION": "string",
    "lower_case": "string",
}

EXPECTED_FULL_ROW = {
    "order_id": decimal.Decimal(1),
    "line_no": decimal.Decimal(1),
    "amount": decimal.Decimal("1234.50"),
    "hundreds": decimal.Decimal(12300),
    "any_number": "-0.5",
    "whole": decimal.Decimal("12345678901234567890123456789012345678"),
    "approx": "1.25",
    "ratio": 1.5,
    "measure": 2.25,
    "created": dt.datetime(2024, 3, 1, 13, 14, 15),
    "updated_at": dt.datetime(2024, 3, 1, 12, 34, 56, 123456),
    "nanos_at": "2024-03-01T12:34:56.123456789",
    "zoned_at": dt.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=UTC),
    "zoned_nanos_at": "2024-03-01T17:30:00.123456789Z",
    "local_at": dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC),
    "name": "Zoë",
    "national_name": "Ωmega",
    "flag": "AB ",
    "notes": LONG_TEXT,
    "checksum": b"\x00\xff\x10",
    "payload": LONG_BYTES,
    "duration": "+01 02:03:04.500000",
    "lower_case": "quoted",
}


@pytest.fixture
def source() -> Iterator[OracleSource]:
    assert DSN is not None
    dialect = connect(DSN)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


@pytest.fixture
def schema(source: OracleSource) -> str:
    with source.engine.connect() as connection:
        return str(connection.execute(sa.text("SELECT USER FROM DUAL")).scalar_one())


def _drop(source: OracleSource, table: str) -> None:
    with source.engine.begin() as connection:
        connection.execute(sa.text(f"DROP TABLE {table} CASCADE CONSTRAINTS PURGE"))


@pytest.fixture
def types_table(source: OracleSource) -> Iterator[str]:
    table = f"GLUON_T_{uuid.uuid4().hex[:8].upper()}"
    insert = sa.text(INSERT_FULL.format(table=table)).bindparams(
        sa.bindparam("notes", type_=sa.Text()),
        sa.bindparam("payload", type_=sa.LargeBinary()),
    )
    with source.engine.begin() as connection:
        connection.execute(sa.text(CREATE_TYPES.format(table=table)))
    try:
        with source.engine.begin() as connection:
            connection.execute(insert, {"notes": LONG_TEXT, "payload": LONG_BYTES})
            connection.execute(sa.text(INSERT_SPARSE.format(table=table)))
        yield table
    finally:
        _drop(source, table)


def test_check_connection(source: OracleSource) -> None:
    source.check_connection()
    assert source.server_identifier_length() in (30, 128)


def test_describe_table(source: OracleSource, schema: str, types_table: str) -> None:
    spec = source.describe_table(TableRef.parse(f"{schema.lower()}.{types_table.lower()}"))
    assert (spec.schema, spec.name) == (schema, types_table)
    assert {column.name: column.lake_type for column in spec.columns} == EXPECTED_LAKE_TYPES
    assert spec.primary_key == ("ORDER_ID", "LINE_NO")
    assert spec.options == {"rowdependencies": "ENABLED"}
    assert spec.partition_kind is None
    assert not spec.column("ORDER_ID").nullable
    assert spec.column("AMOUNT").nullable


def test_read_batches(source: OracleSource, schema: str, types_table: str) -> None:
    spec = source.describe_table(TableRef(schema, types_table))
    assert source.count_rows(spec) == 2
    batches = list(source.read_batches(spec, batch_rows=1))
    assert [batch.num_rows for batch in batches] == [1, 1]
    table = pa.Table.from_batches(batches)
    assert table.schema == spec.arrow_schema
    rows = sorted(table.to_pylist(), key=lambda row: row["line_no"])
    assert rows[0] == EXPECTED_FULL_ROW
    sparse = rows[1]
    assert sparse["created"] == dt.datetime(2024, 1, 31)
    assert sparse["any_number"] == "123.456"
    assert sparse["approx"] == "0.1"
    assert sparse["amount"] is None and sparse["notes"] is None and sparse["zoned_at"] is None


def test_text_numbers_ignore_the_session_decimal_separator(
    source: OracleSource, schema: str, types_table: str
) -> None:
    @sa.event.listens_for(source.engine, "connect")
    def german(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("ALTER SESSION SET NLS_NUMERIC_CHARACTERS = ',.'")

    source.engine.dispose()  # new connections get the session setting
    spec = source.describe_table(TableRef(schema, types_table))
    rows = pa.Table.from_batches(list(source.read_batches(spec, batch_rows=10))).to_pylist()
    assert sorted(row["any_number"] for row in rows) == ["-0.5", "123.456"]


def test_rowdependencies_off_and_range_partitioning(source: OracleSource, schema: str) -> None:
    table = f"GLUON_P_{uuid.uuid4().hex[:8].upper()}"
    ddl = f"""
        CREATE TABLE {table} (
            SALE_ID NUMBER(12) PRIMARY KEY,
            SOLD_ON DATE NOT NULL,
            AMOUNT NUMBER(12,2)
        )
        PARTITION BY RANGE (SOLD_ON) (
            PARTITION P2023 VALUES LESS THAN (DATE '2024-01-01'),
            PARTITION PMAX VALUES LESS THAN (MAXVALUE)
        )
    """
    try:
        with source.engine.begin() as connection:
            connection.execute(sa.text(ddl))
    except sa.exc.DatabaseError as exc:
        if "ORA-00439" in str(exc):  # feature not enabled: Partitioning
            pytest.skip("this Oracle edition has no partitioning")
        raise
    try:
        spec = source.describe_table(TableRef(schema, table))
        assert spec.partition_kind == "RANGE"
        assert spec.partition_columns == ("SOLD_ON",)
        assert spec.options == {"rowdependencies": "DISABLED"}
        assert spec.primary_key == ("SALE_ID",)
    finally:
        _drop(source, table)
