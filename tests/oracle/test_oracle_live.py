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
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.capture import changelog, existing
from gluon.capture import objects as capture_objects
from gluon.errors import SourceError
from gluon.methods import get_method, registered_methods
from gluon.methods.base import DML, SourceObject
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


# -- capture (gluon.capture) ---------------------------------------------------------------------
#
# The user needs what docs/operations.md section 13 lists (offload --incremental-print-grants
# prints it); gluon's own preflight checks it first, and a missing privilege FAILS the test,
# naming the privilege and its GRANT, instead of skipping it.

CAPTURE_METHODS = sorted(
    name
    for name, method in registered_methods().items()
    if method.supports_dialect("oracle") and method.source_objects
)

CAPTURE_TABLE = """
CREATE TABLE {table} (
    ID NUMBER(10) PRIMARY KEY,
    NAME VARCHAR2(20),
    AMOUNT NUMBER(12,2),
    NOTES CLOB
) ROWDEPENDENCIES
"""

D = decimal.Decimal

# (name, statements, expected (operation, gl_op, ID, NAME, AMOUNT, NOTES), ordered, table only)
CAPTURE_STEPS: list[tuple[str, list[str], list[tuple[Any, ...]], bool, bool]] = [
    (
        "insert",
        ["INSERT INTO {target} (ID, NAME, AMOUNT, NOTES) VALUES (100, 'x', 0.1, 'long')"],
        [(DML.INSERT, "I", 100, "x", D("0.10"), "long")],
        True,
        False,
    ),
    (
        "update keeping the key",
        ["UPDATE {target} SET NAME = 'a2' WHERE ID = 1"],
        [(DML.UPDATE, "U", 1, "a2", D("1.00"), "n1")],
        True,
        False,
    ),
    (
        "no-op update",
        ["UPDATE {target} SET NAME = NAME, NOTES = NOTES WHERE ID = 2"],
        [],
        True,
        False,
    ),
    (
        "update that changes the key",
        ["UPDATE {target} SET ID = 30 WHERE ID = 3"],
        [
            (DML.UPDATE, "D", 3, None, None, None),
            (DML.UPDATE, "I", 30, "c", D("3.00"), "n3"),
        ],
        True,
        False,
    ),
    (
        "delete",
        ["DELETE FROM {target} WHERE ID = 4"],
        [(DML.DELETE, "D", 4, None, None, None)],
        True,
        False,
    ),
    (
        "merge",
        [
            "MERGE INTO {target} t USING (SELECT 2 AS ID, 'b2' AS NAME FROM DUAL "
            "UNION ALL SELECT 101, 'y' FROM DUAL) s ON (t.ID = s.ID) "
            "WHEN MATCHED THEN UPDATE SET t.NAME = s.NAME "
            "WHEN NOT MATCHED THEN INSERT (ID, NAME) VALUES (s.ID, s.NAME)"
        ],
        [
            (DML.UPDATE, "U", 2, "b2", D("2.00"), "n2"),
            (DML.INSERT, "I", 101, "y", None, None),
        ],
        False,
        True,
    ),
]


def _oracle_objects(source: OracleSource, owners: list[str]) -> list[tuple[Any, ...]]:
    with source.engine.connect() as connection:
        users = connection.execute(
            sa.text("SELECT username FROM all_users WHERE username IN (:a, :b)"),
            {"a": owners[0], "b": owners[-1]},
        )
        objects = connection.execute(
            sa.text(
                "SELECT owner, object_type, object_name FROM all_objects "
                "WHERE owner IN (:a, :b) AND object_name NOT LIKE 'SYS\\_%' ESCAPE '\\'"
            ),
            {"a": owners[0], "b": owners[-1]},
        )
        return sorted([("USER", row[0], "") for row in users] + [tuple(row) for row in objects])


@pytest.fixture
def captured_table(source: OracleSource) -> Iterator[str]:
    table = f"GLUON_C_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(sa.text(CAPTURE_TABLE.format(table=table)))
        for key, name in ((1, "a"), (2, "b"), (3, "c"), (4, "d")):
            connection.execute(
                sa.text(f"INSERT INTO {table} VALUES ({key}, '{name}', {key}, 'n{key}')")
            )
    try:
        yield table
    finally:
        _drop(source, table)


def _require_privileges(
    source: OracleSource, spec: Any, method: Any, objects: list[capture_objects.SourceObjectRef]
) -> None:
    """Fail naming each missing privilege (with its GRANT) before anything is created."""
    hybrid = next((o.schema for o in objects if o.object_type != "SCHEMA"), None)
    create_schema = any(o.kind is SourceObject.HYBRID_SCHEMA for o in objects)
    problems = source.preflight(spec, method, hybrid, create_schema=create_schema)
    assert problems == [], "the test user lacks what enable needs:\n" + "\n".join(problems)


def _create_checked(source: OracleSource, spec: Any, method: Any, objects: Any) -> None:
    _require_privileges(source, spec, method, objects)
    capture_objects.create_source_objects(source, spec, method, objects, ("ID",))


@pytest.mark.parametrize("name", CAPTURE_METHODS)
def test_capture_round_trip(
    source: OracleSource, schema: str, captured_table: str, name: str
) -> None:
    method = get_method(name)
    ref = TableRef(schema, captured_table)
    spec = source.describe_table(ref)
    before = _oracle_objects(source, [schema, f"{schema}_H"])
    objects = capture_objects.plan_source_objects(source, ref, method)
    _create_checked(source, spec, method, objects)
    try:
        capture_objects.create_source_objects(source, spec, method, objects, ("ID",))  # idempotent
        found = {item.kind: item for item in objects}
        targets = []
        if SourceObject.UPDATABLE_VIEW in found:
            view = found[SourceObject.UPDATABLE_VIEW]
            targets.append((f"{view.schema}.{view.name}", "V"))
        if SourceObject.CHANGELOG_TRIGGER in found:
            targets.append((captured_table, "T"))
        log = found[SourceObject.CHANGELOG_TABLE]
        for target, origin in targets:
            for step, statements, expected, ordered, table_only in CAPTURE_STEPS:
                if table_only and origin == "V":
                    continue
                seen = changelog.count_changes(source, objects)
                refused = origin == "V" and any(
                    DML(sql.split()[0].upper()) not in method.captured_dml for sql in statements
                )
                try:
                    with source.engine.begin() as connection:
                        for sql in statements:
                            connection.execute(sa.text(sql.format(target=target)))
                except sa.exc.DatabaseError as exc:
                    assert refused and "ORA-20001" in str(exc), f"{step} on {target}: {exc}"
                changes = changelog.read_changes(source, spec, objects, limit=None).to_pylist()
                with source.engine.connect() as connection:
                    origins: dict[int, str] = dict(
                        connection.execute(
                            sa.text(f"SELECT gl_seq, gl_origin FROM {log.schema}.{log.name}")
                        ).all()
                    )
                added = [
                    (c["gl_op"], origins[c["gl_seq"]], c["id"], c["name"], c["amount"], c["notes"])
                    for c in changes[seen:]
                ]
                wanted = [
                    (op, origin, *values)
                    for dml, op, *values in expected
                    if dml in method.captured_dml
                ]
                if not ordered:
                    added = sorted(added, key=lambda row: (int(row[2]), row[0]))
                    wanted = sorted(wanted, key=lambda row: (int(row[2]), row[0]))
                assert added == wanted, f"{step} on {target}"
        pending = changelog.count_changes(source, objects)
        with source.engine.connect() as connection:  # rolled back: nothing recorded
            transaction = connection.begin()
            connection.execute(sa.text(f"INSERT INTO {targets[0][0]} (ID) VALUES (102)"))
            transaction.rollback()
        assert changelog.count_changes(source, objects) == pending
        rows = changelog.read_changes(source, spec, objects, limit=2)
        assert rows.num_rows == min(2, pending)
        seqs = (
            changelog.read_changes(source, spec, objects, limit=None).column("gl_seq").to_pylist()
        )
        assert seqs == sorted(seqs)
        assert changelog.delete_changes(source, objects, seqs[1:]) == len(seqs) - 1
        assert changelog.count_changes(source, objects) == (1 if seqs else 0)
    finally:
        capture_objects.drop_source_objects(source, objects)
    assert _oracle_objects(source, [schema, f"{schema}_H"]) == before


def test_ora_rowscn_needs_no_capture_objects(
    source: OracleSource, schema: str, captured_table: str
) -> None:
    method = get_method("ORA_ROWSCN")
    ref = TableRef(schema, captured_table)
    method.validate(source.describe_table(ref))
    assert capture_objects.plan_source_objects(source, ref, method) == []


# -- issue 32: each item against the server -------------------------------------------------------


def _fetched_types(source: OracleSource, sql: str) -> list[pa.DataType]:
    """The Arrow types python-oracledb's data frame fetch gives ``sql``'s columns."""
    connection = source.engine.raw_connection()
    try:
        driver: Any = connection.driver_connection
        frames = list(driver.fetch_df_batches(statement=sql, size=10, fetch_decimals=True))
        return list(pa.table(frames[0]).schema.types)
    finally:
        connection.close()


def test_item_1_the_driver_types_numbers_as_gluon_expects(source: OracleSource) -> None:
    from gluon.source.oracle_types import fetched_arrow_type

    types = _fetched_types(
        source, "SELECT CAST(1.5 AS NUMBER(12,2)), CAST(1.5 AS NUMBER), 7 FROM DUAL"
    )
    assert types[0] == fetched_arrow_type(12, 2) == pa.decimal128(12, 2)
    assert types[1] == fetched_arrow_type(0, -127) == pa.float64()


def test_item_1_a_number_12_2_change_round_trips_exactly(
    source: OracleSource, schema: str, captured_table: str
) -> None:
    method = get_method("CHANGELOG")
    ref = TableRef(schema, captured_table)
    spec = source.describe_table(ref)
    objects = capture_objects.plan_source_objects(source, ref, method)
    _create_checked(source, spec, method, objects)
    try:
        with source.engine.begin() as connection:
            connection.execute(
                sa.text(f"UPDATE {captured_table} SET AMOUNT = 9999999999.99 WHERE ID = 1")
            )
        changes = changelog.read_changes(source, spec, objects, limit=None)
        assert changes.schema.field("amount").type == pa.decimal128(12, 2)
        assert changes.column("amount").to_pylist() == [D("9999999999.99")]
    finally:
        capture_objects.drop_source_objects(source, objects)


def test_item_3_a_trigger_that_does_not_compile_is_dropped(
    source: OracleSource, schema: str, captured_table: str
) -> None:
    method = get_method("CHANGELOG")
    ref = TableRef(schema, captured_table)
    spec = source.describe_table(ref)
    objects = capture_objects.plan_source_objects(source, ref, method)
    _require_privileges(source, spec, method, objects)
    # A column the table does not have: the trigger body's :NEW.GHOST cannot compile.
    from gluon.schema import Column

    ghost = replace(spec, columns=(*spec.columns, Column("GHOST", "NUMBER(5)", "decimal(5,0)")))
    trigger = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TRIGGER)
    try:
        with pytest.raises(SourceError) as failed:
            capture_objects.create_source_objects(source, ghost, method, objects, ("ID",))
        assert "did not compile and was dropped" in str(failed.value)
        assert "\n" not in str(failed.value)
        assert not capture_objects.object_exists(source, trigger)
        with source.engine.begin() as connection:  # the application's DML still works
            connection.execute(sa.text(f"UPDATE {captured_table} SET NAME = 'z' WHERE ID = 1"))
    finally:
        capture_objects.drop_source_objects(source, objects)


def test_item_3_status_reports_a_trigger_a_dropped_column_invalidated(
    source: OracleSource, schema: str, captured_table: str
) -> None:
    method = get_method("CHANGELOG")
    ref = TableRef(schema, captured_table)
    spec = source.describe_table(ref)
    objects = capture_objects.plan_source_objects(source, ref, method)
    _create_checked(source, spec, method, objects)
    try:
        assert existing.capture_problems(source, spec, objects) == []
        with source.engine.begin() as connection:
            connection.execute(sa.text(f"ALTER TABLE {captured_table} DROP COLUMN NAME"))
        (problem,) = existing.capture_problems(source, spec, objects)
        assert "is INVALID" in problem and "DROP TRIGGER" in problem
    finally:
        capture_objects.drop_source_objects(source, objects)


def test_item_3_plsql_reserved_word_columns_are_captured(source: OracleSource, schema: str) -> None:
    table = f"GLUON_R_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(
            sa.text(
                f'CREATE TABLE {table} (ID NUMBER(10) PRIMARY KEY, "END" VARCHAR2(5), '
                '"CASE" NUMBER(3), "EXCEPTION" VARCHAR2(5))'
            )
        )
    method = get_method("UPDATABLE_CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        objects = capture_objects.plan_source_objects(source, ref, method)
        _create_checked(source, spec, method, objects)
        try:
            with source.engine.begin() as connection:
                connection.execute(sa.text(f"INSERT INTO {table} VALUES (1, 'e', 2, 'x')"))
            changes = changelog.read_changes(source, spec, objects, limit=None).to_pylist()
            assert [(c["end"], c["case"], c["gl_op"]) for c in changes] == [("e", D(2), "I")]
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_items_2_5_7_the_preflight_passes_and_the_current_scn_reads(
    source: OracleSource, schema: str, captured_table: str
) -> None:
    from gluon.extract.feeds.rowscn import RowscnFeed

    for name in CAPTURE_METHODS:
        method = get_method(name)
        ref = TableRef(schema, captured_table)
        objects = capture_objects.plan_source_objects(source, ref, method)
        _require_privileges(source, source.describe_table(ref), method, objects)
    assert RowscnFeed.initial_position(source) is not None  # V$DATABASE, no DBMS_FLASHBACK


def test_item_4_a_27_character_table_fits_the_servers_limit(
    source: OracleSource, schema: str
) -> None:
    table = "GLUON_" + uuid.uuid4().hex[:21].upper()  # 27 characters
    with source.engine.begin() as connection:
        connection.execute(sa.text(CAPTURE_TABLE.format(table=table)))
    method = get_method("UPDATABLE_CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        objects = capture_objects.plan_source_objects(source, ref, method)
        limit = source.server_identifier_length()
        assert all(len(o.name.encode()) <= limit for o in objects)
        _create_checked(source, spec, method, objects)
        capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_item_9_strings_as_wide_as_the_server_allows(source: OracleSource, schema: str) -> None:
    extended = source.server_max_string_size() == "EXTENDED"
    width = 8000 if extended else 4000
    table = f"GLUON_S_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(
            sa.text(f"CREATE TABLE {table} (ID NUMBER(10) PRIMARY KEY, NOTE VARCHAR2(20))")
        )
    method = get_method("CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        objects = capture_objects.plan_source_objects(source, ref, method)
        _create_checked(source, spec, method, objects)
        try:
            with source.engine.begin() as connection:  # widened after enable
                connection.execute(sa.text(f"ALTER TABLE {table} MODIFY (NOTE VARCHAR2({width}))"))
                connection.execute(
                    sa.text(f"INSERT INTO {table} VALUES (1, RPAD('x', {width}, 'x'))")
                )
            assert changelog.count_changes(source, objects) == 1
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_item_11_the_repository_upsert_is_atomic_on_oracle(source: OracleSource) -> None:
    import threading

    from gluon.repo.common import insert_or_update

    name = f"GLUON_U_{uuid.uuid4().hex[:8].upper()}"
    metadata = sa.MetaData()
    table = sa.Table(
        name,
        metadata,
        sa.Column("table_key", sa.String(100), unique=True, nullable=False),
        sa.Column("status", sa.String(20)),
    )
    metadata.create_all(source.engine)
    errors: list[BaseException] = []

    def save(status: str) -> None:
        try:
            insert_or_update(
                source.engine, table, "APP.T", {"table_key": "APP.T", "status": status}
            )
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=save, args=(f"s{i}",)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with source.engine.connect() as connection:
            assert connection.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 1
    finally:
        metadata.drop_all(source.engine)


def test_item_12_a_bc_nanosecond_timestamp_keeps_its_sign(
    source: OracleSource, schema: str
) -> None:
    table = f"GLUON_B_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(
            sa.text(f"CREATE TABLE {table} (ID NUMBER(10) PRIMARY KEY, AT TIMESTAMP(9))")
        )
        connection.execute(
            sa.text(
                f"INSERT INTO {table} VALUES (1, TO_TIMESTAMP('-0044-03-15 12:00:00.123456789', "
                "'SYYYY-MM-DD HH24:MI:SS.FF9'))"
            )
        )
        connection.execute(
            sa.text(f"INSERT INTO {table} VALUES (2, TIMESTAMP '2024-03-01 00:00:00.5')")
        )
    try:
        spec = source.describe_table(TableRef(schema, table))
        rows = pa.Table.from_batches(list(source.read_batches(spec, batch_rows=10))).to_pylist()
        assert sorted(row["at"] for row in rows) == [
            "-0044-03-15T12:00:00.123456789",
            "2024-03-01T00:00:00.500000000",
        ]
    finally:
        _drop(source, table)


def test_an_added_default_moves_no_rowscn_and_a_read_from_scn_zero_shows_it(
    source: OracleSource, schema: str
) -> None:
    """The premise of ORA_ROWSCN's carry of an ADD COLUMN ... DEFAULT: the default is kept as
    metadata (no row's ORA_ROWSCN moves past the SCN before the ALTER), and the feed's
    query read from SCN 0 ships every row with it."""
    table = f"GLUON_A_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(
            sa.text(
                f"CREATE TABLE {table} (ID NUMBER(9) PRIMARY KEY, NAME VARCHAR2(20)) "
                "ROWDEPENDENCIES"
            )
        )
        connection.execute(
            sa.text(f"INSERT INTO {table} SELECT LEVEL, 'row' FROM DUAL CONNECT BY LEVEL <= 5")
        )
    try:
        before = int(source.run_query("current_scn")[0][0])
        with source.engine.begin() as connection:
            connection.execute(
                sa.text(f"ALTER TABLE {table} ADD (NOTE VARCHAR2(10) DEFAULT 'preset' NOT NULL)")
            )
        upto = int(source.run_query("current_scn")[0][0])
        sql = source.render(
            "read_rowscn_changes", schema=schema, table=table, columns=['"ID"', '"NOTE"']
        )
        with source.engine.connect() as connection:
            moved = connection.execute(
                sa.text(f"SELECT COUNT(*) FROM {table} WHERE ORA_ROWSCN > :scn"), {"scn": before}
            ).scalar_one()
            rows = connection.execute(sa.text(sql), {"since": 0, "upto": upto}).all()
        assert moved == 0
        assert sorted((int(r[0]), r[1]) for r in rows) == [(i, "preset") for i in range(1, 6)]
    finally:
        _drop(source, table)
