"""OracleSource without a database: dictionary rows -> Columns and TableSpec, and the knobs.

The dictionary rows live in ``fixtures/dictionary.json`` (upper-case keys, as
Oracle names the columns); the dialect also accepts SQLAlchemy's lower-case keys.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oracledb
import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.capture import objects
from gluon.errors import NotFoundError, SourceError, UnsupportedError, UsageError
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec, arrow_type, decimal_parts, is_lake_type
from gluon.source import connect, dialect_class
from gluon.source.arrow import converter_for
from gluon.source.oracle import OracleSource
from gluon.source.oracle_types import (
    column_from_dictionary,
    declared_type,
    fetched_arrow_type,
    output_type_handler,
    table_spec_from_dictionary,
)

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "dictionary.json").read_text())
URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"


def recorded(table: str, query: str) -> Any:
    return FIXTURES[table][query]


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)  # builds the engine; nothing connects
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


# ---------------------------------------------------------------------------
# Type table
# ---------------------------------------------------------------------------

# COLUMN_NAME -> (source_type, lake_type, nullable, read_as_text)
EXPECTED_TYPES: dict[str, tuple[str, str, bool, bool]] = {
    "ORDER_ID": ("NUMBER(10)", "decimal(10,0)", False, False),
    "LINE_NO": ("NUMBER(5)", "decimal(5,0)", False, False),
    "AMOUNT": ("NUMBER(12,2)", "decimal(12,2)", True, False),
    "FULL_PRECISION": ("NUMBER(38,38)", "decimal(38,38)", True, False),
    "HUNDREDS": ("NUMBER(5,-2)", "decimal(7,0)", True, False),
    "HUGE_ROUNDED": ("NUMBER(38,-5)", "string", True, True),
    "TINY_FRACTION": ("NUMBER(3,5)", "decimal(5,5)", True, False),
    "WHOLE": ("NUMBER(*,0)", "decimal(38,0)", True, False),
    "STAR_SCALE": ("NUMBER(*,2)", "decimal(38,2)", True, False),
    "ANY_NUMBER": ("NUMBER", "string", True, True),
    "APPROX": ("FLOAT(126)", "string", True, True),
    "RATIO": ("BINARY_FLOAT", "float", True, False),
    "MEASURE": ("BINARY_DOUBLE", "double", True, False),
    "CREATED": ("DATE", "timestamp_ntz", False, False),
    "UPDATED_AT": ("TIMESTAMP(6)", "timestamp_ntz", True, False),
    "LOGGED_AT": ("TIMESTAMP(3)", "timestamp_ntz", True, False),
    "NANOS_AT": ("TIMESTAMP(9)", "string", True, True),
    "ZONED_AT": ("TIMESTAMP(6) WITH TIME ZONE", "timestamp", True, False),
    "ZONED_NANOS_AT": ("TIMESTAMP(9) WITH TIME ZONE", "string", True, True),
    "LOCAL_AT": ("TIMESTAMP(6) WITH LOCAL TIME ZONE", "timestamp", True, False),
    "NAME": ("VARCHAR2(100 CHAR)", "string", False, False),
    "LEGACY_CODE": ("VARCHAR2(50)", "string", True, False),
    "NATIONAL_NAME": ("NVARCHAR2(30)", "string", True, False),
    "FLAG": ("CHAR(1)", "string", True, False),
    "NATIONAL_FLAG": ("NCHAR(10)", "string", True, False),
    "NOTES": ("CLOB", "string", True, False),
    "NATIONAL_NOTES": ("NCLOB", "string", True, False),
    "CHECKSUM": ("RAW(16)", "binary", True, False),
    "PAYLOAD": ("BLOB", "binary", True, False),
    "ROW_ADDRESS": ("ROWID", "string", True, True),
    "LOGICAL_ADDRESS": ("UROWID", "string", True, True),
    "DURATION": ("INTERVAL DAY(2) TO SECOND(6)", "string", True, True),
    "TENURE": ("INTERVAL YEAR(2) TO MONTH", "string", True, True),
    "lower_case": ("VARCHAR2(10)", "string", True, False),
}

REFUSED_TYPES = {
    "OLD_TEXT": "LONG",
    "OLD_BYTES": "LONG RAW",
    "SCAN": "BFILE",
    "DOC": "SYS.XMLTYPE",
    "ADDRESS": "APP.ADDRESS_T",
    "PHONES": "APP.PHONE_LIST_T",
    "TAGS": "APP.TAG_TABLE_T",
    "ATTRIBUTES": "JSON",
}


def test_fixture_covers_every_expected_type() -> None:
    names = [row["COLUMN_NAME"] for row in recorded("OFFLOAD_TYPES", "describe_columns")]
    assert names == list(EXPECTED_TYPES)


@pytest.mark.parametrize(
    "row", recorded("OFFLOAD_TYPES", "describe_columns"), ids=lambda row: row["COLUMN_NAME"]
)
def test_column_from_dictionary(row: dict[str, Any]) -> None:
    source_type, lake_type, nullable, read_as_text = EXPECTED_TYPES[row["COLUMN_NAME"]]
    assert column_from_dictionary(row) == Column(
        row["COLUMN_NAME"], source_type, lake_type, nullable, read_as_text
    )
    assert is_lake_type(lake_type)


def test_lower_case_keys_as_sqlalchemy_returns_them() -> None:
    row = recorded("OFFLOAD_TYPES", "describe_columns")[2]
    lowered = {key.lower(): value for key, value in row.items()}
    assert column_from_dictionary(lowered) == column_from_dictionary(row)


@pytest.mark.parametrize(
    "row",
    [row for row in recorded("LEGACY_TYPES", "describe_columns") if row["COLUMN_NAME"] != "ID"],
    ids=lambda row: row["COLUMN_NAME"],
)
def test_refused_types(row: dict[str, Any]) -> None:
    assert column_from_dictionary(row) is None
    assert declared_type(row) == REFUSED_TYPES[row["COLUMN_NAME"]]


@pytest.mark.parametrize(
    ("precision", "scale", "lake_type"),
    [
        (1, 0, "decimal(1,0)"),
        (38, 0, "decimal(38,0)"),
        (38, 10, "decimal(38,10)"),
        (10, -28, "decimal(38,0)"),  # p - s == 38: still exact
        (10, -29, "string"),  # p - s == 39
        (2, 38, "decimal(38,38)"),  # s > p
        (2, 39, "string"),
        (None, -1, "string"),  # NUMBER(*,-1): 39 digits
        (None, 39, "string"),
    ],
)
def test_number_edges(precision: int | None, scale: int | None, lake_type: str) -> None:
    row = {"COLUMN_NAME": "N", "DATA_TYPE": "NUMBER", "DATA_PRECISION": precision}
    column = column_from_dictionary({**row, "DATA_SCALE": scale, "NULLABLE": "Y"})
    assert column is not None
    assert column.lake_type == lake_type
    assert column.read_as_text == (lake_type == "string")


def test_timestamp_fraction_from_data_scale_when_the_type_has_none() -> None:
    row = {"COLUMN_NAME": "T", "DATA_TYPE": "TIMESTAMP", "DATA_SCALE": 9, "NULLABLE": "Y"}
    column = column_from_dictionary(row)
    assert column is not None and column.read_as_text


def test_boolean_23ai() -> None:
    column = column_from_dictionary({"COLUMN_NAME": "B", "DATA_TYPE": "BOOLEAN", "NULLABLE": "N"})
    assert column == Column("B", "BOOLEAN", "boolean", nullable=False)


# ---------------------------------------------------------------------------
# TableSpec
# ---------------------------------------------------------------------------


def spec_of(table: str) -> TableSpec:
    return table_spec_from_dictionary(
        recorded(table, "find_table"),
        recorded(table, "describe_columns"),
        recorded(table, "primary_key"),
        recorded(table, "partitioning"),
    )


def test_table_spec_with_two_column_key_and_rowdependencies() -> None:
    spec = spec_of("OFFLOAD_TYPES")
    assert (spec.schema, spec.name) == ("APP", "OFFLOAD_TYPES")
    assert [column.name for column in spec.columns] == list(EXPECTED_TYPES)
    assert spec.primary_key == ("ORDER_ID", "LINE_NO")
    assert spec.partition_kind is None and spec.partition_columns == ()
    assert spec.options == {"rowdependencies": "ENABLED"}
    assert len(spec.arrow_schema) == len(EXPECTED_TYPES)


def test_table_spec_range_partitioned_without_rowdependencies() -> None:
    spec = spec_of("SALES")
    assert spec.partition_kind == "RANGE"
    assert spec.partition_columns == ("SOLD_ON", "REGION")
    assert spec.primary_key == ("SALE_ID",)
    assert spec.options == {"rowdependencies": "DISABLED"}
    assert spec.column("sold_on") == Column("SOLD_ON", "DATE", "timestamp_ntz", nullable=False)


def test_reference_partitioning_has_a_kind_but_no_key_columns() -> None:
    rows = [{"PARTITIONING_TYPE": "REFERENCE", "COLUMN_NAME": None, "COLUMN_POSITION": None}]
    spec = table_spec_from_dictionary(
        recorded("SALES", "find_table"), recorded("SALES", "describe_columns"), [], rows
    )
    assert (spec.partition_kind, spec.partition_columns) == ("REFERENCE", ())


def test_refused_columns_are_listed_together() -> None:
    with pytest.raises(UnsupportedError) as error:
        spec_of("LEGACY_TYPES")
    message = str(error.value)
    assert "APP.LEGACY_TYPES" in message
    for name, declared in REFUSED_TYPES.items():
        assert f"{name} ({declared})" in message
    assert "ID (" not in message


# ---------------------------------------------------------------------------
# describe_table over recorded rows (run_query replaced)
# ---------------------------------------------------------------------------


class FakeRow:
    """What SQLAlchemy returns: ``_mapping`` with lower-case keys."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._mapping = {key.lower(): value for key, value in values.items()}


def replay(table: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    def run_query(template: str, params: dict[str, Any] | None = None, **_: Any) -> list[FakeRow]:
        calls.append((template, dict(params or {})))
        rows = recorded(table, template)
        return [FakeRow(row) for row in ([rows] if isinstance(rows, dict) else rows)]

    return run_query


def test_describe_table_queries_with_the_dictionary_spelling(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(source, "run_query", replay("SALES", calls))
    spec = source.describe_table(TableRef.parse("app.sales"))
    assert spec == spec_of("SALES")
    assert calls[0] == ("find_table", {"schema": "app", "table": "sales"})
    exact = {"schema": "APP", "table": "SALES"}
    assert calls[1:] == [
        ("describe_columns", exact),
        ("primary_key", exact),
        ("partitioning", exact),
    ]


def test_describe_table_skips_partitioning_of_a_plain_table(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(source, "run_query", replay("OFFLOAD_TYPES", calls))
    assert source.describe_table(TableRef.parse("APP.OFFLOAD_TYPES")) == spec_of("OFFLOAD_TYPES")
    assert [template for template, _ in calls] == ["find_table", "describe_columns", "primary_key"]


def test_nullable_key_columns_follow_the_dictionary(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Oracle has no NULLS NOT DISTINCT: a key column that allows NULL is reported (enable
    refuses it) even under a unique constraint on exactly the key columns (issue 26)."""
    unique = [  # the unique_keys template's rows: a constraint on (ORDER_ID, AMOUNT)
        FakeRow({"INDEX_ID": "U1", "COLUMN_NAME": "ORDER_ID", "POSITION": 1}),
        FakeRow({"INDEX_ID": "U1", "COLUMN_NAME": "AMOUNT", "POSITION": 2}),
    ]
    asked: list[str] = []

    def run_query(template: str, *args: Any, **kwargs: Any) -> list[FakeRow]:
        asked.append(template)
        return unique

    monkeypatch.setattr(source, "run_query", run_query)
    spec = spec_of("OFFLOAD_TYPES")
    assert source.nullable_key_columns(spec, ("ORDER_ID", "LINE_NO")) == ()
    assert asked == [], "NOT NULL key columns need no dictionary query"
    assert source.nullable_key_columns(spec, ("ORDER_ID", "AMOUNT")) == ("AMOUNT",)
    assert asked == ["unique_keys"]
    assert source.one_null_key_hint == ""


def test_describe_table_not_found(source: OracleSource, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "run_query", lambda *args, **kwargs: [])
    with pytest.raises(NotFoundError, match=r"APP\.MISSING does not exist"):
        source.describe_table(TableRef.parse("APP.MISSING"))


def test_describe_table_ambiguous_case(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = [
        FakeRow({"TABLE_SCHEMA": "APP", "TABLE_NAME": "T", "DEPENDENCIES": "DISABLED"}),
        FakeRow({"TABLE_SCHEMA": "APP", "TABLE_NAME": "t", "DEPENDENCIES": "DISABLED"}),
    ]
    monkeypatch.setattr(source, "run_query", lambda *args, **kwargs: found)
    with pytest.raises(UsageError, match=r'"APP"\."T", "APP"\."t"'):
        source.describe_table(TableRef.parse("APP.T"))


# ---------------------------------------------------------------------------
# Registry, engine, quoting, identifier length
# ---------------------------------------------------------------------------


def test_registered_with_its_capabilities() -> None:
    cls = dialect_class("oracle")
    assert cls is OracleSource
    assert cls.max_identifier_length == 128
    assert cls.legacy_identifier_length == 30
    assert (cls.has_schemas, cls.name_case) == (True, "upper")


def test_engine_options_are_accepted_by_the_oracledb_dialect(source: OracleSource) -> None:
    assert source.engine.dialect.name == "oracle"
    assert source.engine.dialect.driver == "oracledb"
    assert getattr(source.engine.dialect, "arraysize", None) == OracleSource.fetch_arraysize
    assert sa.event.contains(source.engine, "connect", _installer())


def _installer() -> Any:
    from gluon.source import oracle_types

    return oracle_types.install_output_type_handler


def test_the_handler_is_installed_once_per_engine(source: OracleSource) -> None:
    OracleSource(source.engine)
    listeners = source.engine.pool.dispatch.connect
    assert sum(1 for listener in listeners if listener is _installer()) == 1


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("ORDER_ID", "ORDER_ID"),
        ("lower_case", '"lower_case"'),
        ("Mixed", '"Mixed"'),
        ("DATE", '"DATE"'),
        ("ROWNUM", '"ROWNUM"'),
        ("FILE", '"FILE"'),
        ("A$B#C", "A$B#C"),
        ("_X", '"_X"'),
        ("WITH SPACE", '"WITH SPACE"'),
        ('QUO"TE', '"QUO""TE"'),
    ],
)
def test_quote_treats_names_as_exact(source: OracleSource, name: str, quoted: str) -> None:
    assert source.quote(name) == quoted


@pytest.mark.parametrize(
    ("compatible", "length"),
    [
        ("11.2.0.4.0", 30),
        ("12.1.0.2", 30),
        ("12.2.0", 128),
        ("19.0.0", 128),
        ("23.6.0", 128),
        (None, 128),
        ("", 128),
        ("unknown", 128),
    ],
)
def test_identifier_length_for(compatible: str | None, length: int) -> None:
    assert OracleSource.identifier_length_for(compatible) == length


def test_a_subclass_can_lower_the_identifier_length() -> None:
    class LegacyOracle(OracleSource):
        name = ""  # not registered: keeps the registry's "oracle" entry intact
        max_identifier_length = 30

    assert LegacyOracle.identifier_length_for("19.0.0") == 30
    assert dialect_class("oracle") is OracleSource


def test_server_identifier_length_reads_compatible(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[str]]:
        seen.append(template)
        return [("11.2.0.4.0",)]

    monkeypatch.setattr(source, "run_query", run_query)
    assert source.server_identifier_length() == 30
    assert seen == ["compatible"]


def test_server_identifier_length_falls_back_to_sqlalchemy(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run_query(*args: Any, **kwargs: Any) -> list[Any]:
        raise SourceError("oracle query compatible failed: ORA-00942")

    checked: list[bool] = []
    monkeypatch.setattr(source, "run_query", run_query)
    monkeypatch.setattr(source, "check_connection", lambda: checked.append(True))
    monkeypatch.setattr(source.engine.dialect, "max_identifier_length", 30)
    assert source.server_identifier_length() == 30
    assert checked == [True]


# ---------------------------------------------------------------------------
# Driver values
# ---------------------------------------------------------------------------


class FakeCursor:
    arraysize = 1000

    def var(self, type_: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return (type_, kwargs)


def fallback(*args: Any) -> str:
    return "sqlalchemy"


@pytest.mark.parametrize(
    ("default_type", "precision", "scale", "expected"),
    [
        (oracledb.DB_TYPE_NUMBER, 5, -2, decimal.Decimal),  # NUMBER(5,-2)
        (oracledb.DB_TYPE_NUMBER, 126, -127, decimal.Decimal),  # FLOAT(126)
        (oracledb.DB_TYPE_NUMBER, 12, 2, decimal.Decimal),
        (oracledb.DB_TYPE_NUMBER, 10, 0, "sqlalchemy"),  # int
        (oracledb.DB_TYPE_NUMBER, 0, -127, "sqlalchemy"),  # unconstrained
        (oracledb.DB_TYPE_BINARY_FLOAT, 0, 0, oracledb.DB_TYPE_BINARY_FLOAT),
        (oracledb.DB_TYPE_BINARY_DOUBLE, 0, 0, oracledb.DB_TYPE_BINARY_DOUBLE),
        (oracledb.DB_TYPE_CLOB, 0, 0, oracledb.DB_TYPE_LONG),
        (oracledb.DB_TYPE_NCLOB, 0, 0, oracledb.DB_TYPE_LONG_NVARCHAR),
        (oracledb.DB_TYPE_BLOB, 0, 0, oracledb.DB_TYPE_LONG_RAW),
        (oracledb.DB_TYPE_VARCHAR, 0, 0, "sqlalchemy"),
        (oracledb.DB_TYPE_TIMESTAMP, 0, 6, "sqlalchemy"),
    ],
)
def test_output_type_handler(default_type: Any, precision: int, scale: int, expected: Any) -> None:
    handler = output_type_handler(fallback)
    result = handler(FakeCursor(), "C", default_type, 22, precision, scale)
    if expected == "sqlalchemy":
        assert result == "sqlalchemy"
    else:
        assert result == (expected, {"arraysize": FakeCursor.arraysize})


def test_output_type_handler_without_fallback() -> None:
    handler = output_type_handler(None)
    assert handler(FakeCursor(), "C", oracledb.DB_TYPE_VARCHAR, 10, 0, 0) is None


UTC = dt.UTC


@pytest.mark.parametrize(
    ("lake_type", "driver_value", "arrow_value"),
    [
        # NUMBER(5,-2) arrives as a Decimal with a positive exponent.
        ("decimal(7,0)", decimal.Decimal("1.23E+4"), decimal.Decimal("12300")),
        ("decimal(38,0)", 12345678901234567890123456789012345678, None),
        ("decimal(12,2)", decimal.Decimal("1234.5"), decimal.Decimal("1234.50")),
        ("float", 1.5, 1.5),
        ("timestamp_ntz", dt.datetime(2024, 3, 1, 13, 14, 15), None),
        # SYS_EXTRACT_UTC returns a naive UTC datetime: Arrow reads it as UTC.
        ("timestamp", dt.datetime(2024, 3, 1, 10, 0, 0, 500000), None),
        ("string", "2024-03-01T12:34:56.123456789", None),
        ("binary", b"\x00\xff", None),
    ],
)
def test_driver_values_reach_arrow_exactly(
    lake_type: str, driver_value: Any, arrow_value: Any
) -> None:
    column = Column("C", "", lake_type)
    converted = converter_for(column)(driver_value)
    array = pa.array([converted], type=arrow_type(lake_type))
    value = array.to_pylist()[0]
    if lake_type == "timestamp":
        assert value == driver_value.replace(tzinfo=UTC)
    elif lake_type == "decimal(38,0)":
        assert value == decimal.Decimal(driver_value)
    else:
        assert value == (driver_value if arrow_value is None else arrow_value)


# ---------------------------------------------------------------------------
# Select list
# ---------------------------------------------------------------------------


def test_select_list_casts_by_declared_type(source: OracleSource) -> None:
    spec = spec_of("OFFLOAD_TYPES")
    expressions = dict(zip((c.name for c in spec.columns), source.select_list(spec), strict=True))
    assert expressions["ORDER_ID"] == "CAST(ORDER_ID AS NUMBER(10,0))"
    assert expressions["lower_case"] == '"lower_case"'
    assert expressions["ANY_NUMBER"].startswith("REGEXP_REPLACE(TO_CHAR(ANY_NUMBER, 'TM9'")
    assert expressions["APPROX"].startswith("REGEXP_REPLACE(TO_CHAR(APPROX, 'TM9'")
    assert expressions["HUGE_ROUNDED"].startswith("REGEXP_REPLACE(TO_CHAR(HUGE_ROUNDED, 'TM9'")
    assert expressions["NANOS_AT"] == "LTRIM(TO_CHAR(NANOS_AT, 'SYYYY-MM-DD\"T\"HH24:MI:SS.FF9'))"
    assert expressions["ZONED_NANOS_AT"] == (
        'LTRIM(TO_CHAR(SYS_EXTRACT_UTC(ZONED_NANOS_AT), \'SYYYY-MM-DD"T"HH24:MI:SS.FF9"Z"\'))'
    )
    assert expressions["ZONED_AT"] == "CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6))"
    assert expressions["LOCAL_AT"] == "CAST(SYS_EXTRACT_UTC(LOCAL_AT) AS TIMESTAMP(6))"
    assert expressions["UPDATED_AT"] == "UPDATED_AT"
    assert expressions["ROW_ADDRESS"] == "CAST(ROW_ADDRESS AS VARCHAR2(4000))"
    assert expressions["LOGICAL_ADDRESS"] == "CAST(LOGICAL_ADDRESS AS VARCHAR2(4000))"
    assert expressions["DURATION"] == "TO_CHAR(DURATION)"
    assert expressions["TENURE"] == "TO_CHAR(TENURE)"
    assert all("\n" not in expression for expression in expressions.values())


def test_select_statement_has_no_accidental_bind_parameters(source: OracleSource) -> None:
    # 'HH24:MI:SS' must not turn into :MI / :SS bind parameters in sqlalchemy.text().
    spec = spec_of("OFFLOAD_TYPES")
    sql = source.render(
        "select_rows", schema=spec.schema, table=spec.name, columns=source.select_list(spec)
    )
    compiled = sa.text(sql).compile(dialect=source.engine.dialect)
    assert compiled.params == {}
    assert str(compiled) == sql


# ---------------------------------------------------------------------------
# Fixed-point columns through python-oracledb's Arrow fetch (issue 32 item 1)
# ---------------------------------------------------------------------------

_CAST = re.compile(r"^CAST\((.+) AS NUMBER\((\d+),(\d+)\)\)$")


@pytest.mark.parametrize(
    ("precision", "scale", "expected"),
    [
        (12, 2, pa.decimal128(12, 2)),
        (38, 0, pa.decimal128(38, 0)),
        (0, -127, pa.float64()),  # plain NUMBER, as the changelog stores it
        (126, -127, pa.float64()),  # FLOAT(126)
    ],
)
def test_the_driver_fetches_numbers_by_described_precision(
    precision: int, scale: int, expected: pa.DataType
) -> None:
    assert fetched_arrow_type(precision, scale) == expected


def test_a_plain_number_changelog_column_would_arrive_as_double() -> None:
    # What the changelog declares for NUMBER(12,2): the read must not select it raw.
    assert objects.changelog_type("oracle", "NUMBER(12,2)") == "NUMBER"
    assert fetched_arrow_type(0, -127) == pa.float64()


def test_every_fixed_point_column_is_read_at_its_lake_precision(source: OracleSource) -> None:
    """The changelog widens NUMBER(p,s) to NUMBER: the read query casts each fixed-point
    column back to its lake type, so the driver's Arrow type is exactly the lake type."""
    spec = spec_of("OFFLOAD_TYPES")
    decimals = [column for column in spec.columns if decimal_parts(column.lake_type)]
    assert {column.name for column in decimals} >= {"AMOUNT", "WHOLE", "HUNDREDS"}
    expressions = dict(zip((c.name for c in spec.columns), source.select_list(spec), strict=True))
    for column in decimals:
        match = _CAST.match(expressions[column.name])
        assert match, f"{column.name} is selected raw: {expressions[column.name]}"
        assert match.group(1) == source.quote(column.name)
        described = fetched_arrow_type(int(match.group(2)), int(match.group(3)))
        assert described == arrow_type(column.lake_type), column.name


def test_a_number_12_2_change_round_trips_exactly(source: OracleSource) -> None:
    """The Arrow batch the driver hands over for the changelog read of NUMBER(12,2) conforms
    to the lake type without loss (a DOUBLE batch is refused)."""
    from gluon.source.arrow import conform

    spec = TableSpec("APP", "T", (Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)"),))
    (expression,) = source.select_list(spec)
    match = _CAST.match(expression)
    assert match
    fetched = fetched_arrow_type(int(match.group(2)), int(match.group(3)))
    value = decimal.Decimal("1234567890.12")
    batch = pa.record_batch([pa.array([value], fetched)], names=["AMOUNT"])
    conformed = conform(batch, pa.schema(spec.arrow_schema), spec)
    assert conformed.column(0).to_pylist() == [value]
    double = pa.record_batch([pa.array([1234567890.12], pa.float64())], names=["AMOUNT"])
    with pytest.raises(SourceError, match="not an exact decimal"):
        conform(double, pa.schema(spec.arrow_schema), spec)


def _batched_rows(tables: dict[str, str]) -> list[FakeRow]:
    """The describe_tables rows of the recorded ``tables`` (name -> recorded table), as the
    query joins them: each column with its table's find_table row, key and partition places."""
    rows: list[FakeRow] = []
    for recorded_as in tables.values():
        table = {key.lower(): value for key, value in recorded(recorded_as, "find_table").items()}
        keys = {row["COLUMN_NAME"]: row["POSITION"] for row in recorded(recorded_as, "primary_key")}
        parts = recorded(recorded_as, "partitioning")
        placed = {row["COLUMN_NAME"]: row["COLUMN_POSITION"] for row in parts}
        for column in recorded(recorded_as, "describe_columns"):
            name = column["COLUMN_NAME"]
            values = {
                **table,
                **column,
                "KEY_POSITION": keys.get(name),
                "PARTITIONING_TYPE": parts[0]["PARTITIONING_TYPE"] if parts else None,
                "PARTITION_POSITION": placed.get(name),
            }
            rows.append(FakeRow(values))
    return rows


def test_describe_tables_in_one_query_as_described_alone(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every recorded table (34 types and a two-column key, RANGE on two columns, refused
    legacy types) described from the one batched query equals its describe_table; a table
    the batch does not find, or whose types are refused, is described alone."""
    recorded_tables = {"OFFLOAD_TYPES": "OFFLOAD_TYPES", "SALES": "SALES"}
    refs = [TableRef("app", "offload_types"), TableRef("APP", "SALES")]
    asked: list[str] = []

    def batched(template: str, params: dict[str, Any] | None = None, **_: Any) -> list[Any]:
        asked.append(template)
        assert template == "describe_tables", template
        assert params == {"s0": "app", "t0": "offload_types", "s1": "APP", "t1": "SALES"}
        return _batched_rows(recorded_tables)

    monkeypatch.setattr(source, "run_query", batched)
    described = source.describe_tables(refs)
    assert asked == ["describe_tables"]
    assert described == {
        TableRef("app", "offload_types"): spec_of("OFFLOAD_TYPES"),
        TableRef("APP", "SALES"): spec_of("SALES"),
    }
    assert described[TableRef("APP", "SALES")].partition_columns == ("SOLD_ON", "REGION")  # type: ignore[union-attr]


def test_describe_tables_reference_partitioned_and_missing(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = [
        FakeRow(
            {
                **row._mapping,
                "partitioned": "YES",
                "partitioning_type": "REFERENCE",
                "partition_position": None,
            }
        )
        for row in _batched_rows({"SALES": "SALES"})
    ]
    monkeypatch.setattr(source, "run_query", lambda *args, **kwargs: reference)
    together = source._describe_together([TableRef("APP", "SALES"), TableRef("APP", "GONE")])
    assert list(together) == [TableRef("APP", "SALES")]  # GONE: described alone
    spec = together[TableRef("APP", "SALES")]
    assert (spec.partition_kind, spec.partition_columns) == ("REFERENCE", ())
