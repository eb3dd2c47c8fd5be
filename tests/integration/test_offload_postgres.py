"""Offload from a real PostgreSQL database into the lake (embedded Sail + Delta), end to end.

Every type gluon maps (``TYPE_MAP`` and ``TEXT_TYPES`` in
gluon/source/postgresql.py, numeric with and without a precision, enums and
domains) is offloaded with the CLI and read back with ``gluon query --json``
and with the Python API, then compared value for value with the rows
SQLAlchemy reads from the source. Columns gluon reads as text are compared
with the server's own text rendering (``col::text``); timestamptz values are
compared as UTC instants, with the database's time zone set to New York so a
wrong offset cannot go unnoticed.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from support.cli import assert_plan_printed, error_lines, query_json
from support.lake import (
    LakeColumn,
    assert_arrow_schema,
    assert_lake_matches,
    delta_partitions,
    delta_version,
    lake_table_dir,
    read_arrow,
)
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository

RunCli = Callable[..., Result]

TS_NTZ = pa.timestamp("us")
TS_UTC = pa.timestamp("us", tz="UTC")


def as_text(name: str, declared: str) -> LakeColumn:
    """A column gluon reads as the server's text rendering."""
    return LakeColumn(name, declared, pa.string(), "text", f"{name}::text")


# Every type, by the table that maps it (gluon/source/postgresql.py).
ALL_TYPES: list[LakeColumn] = [
    LakeColumn("id", "integer PRIMARY KEY", pa.int32(), "int"),
    # TYPE_MAP
    LakeColumn("c_smallint", "smallint", pa.int16(), "int"),
    LakeColumn("c_integer", "integer", pa.int32(), "int"),
    LakeColumn("c_bigint", "bigint", pa.int64(), "int"),
    LakeColumn("c_real", "real", pa.float32(), "float32"),
    LakeColumn("c_double", "double precision", pa.float64(), "float64"),
    LakeColumn("c_boolean", "boolean", pa.bool_(), "bool"),
    LakeColumn("c_text", "text", pa.string(), "text"),
    LakeColumn("c_varchar", "varchar(40)", pa.string(), "text"),
    LakeColumn("c_varchar_unbounded", "character varying", pa.string(), "text"),
    LakeColumn("c_char", "char(6)", pa.string(), "text"),
    LakeColumn("c_name", "name", pa.string(), "text"),
    LakeColumn("c_qchar", '"char"', pa.string(), "text"),
    LakeColumn("c_date", "date", pa.date32(), "date"),
    LakeColumn("c_timestamp", "timestamp", TS_NTZ, "timestamp_ntz"),
    LakeColumn("c_timestamp_3", "timestamp(3)", TS_NTZ, "timestamp_ntz"),
    LakeColumn("c_timestamptz", "timestamptz", TS_UTC, "timestamp_utc"),
    LakeColumn("c_bytea", "bytea", pa.binary(), "binary"),
    # numeric with a precision up to 38: exact decimals
    LakeColumn("c_numeric_38_10", "numeric(38,10)", pa.decimal128(38, 10), "decimal"),
    LakeColumn("c_numeric_12_2", "numeric(12,2)", pa.decimal128(12, 2), "decimal"),
    LakeColumn("c_numeric_38_0", "numeric(38,0)", pa.decimal128(38, 0), "decimal"),
    LakeColumn("c_numeric_38_38", "numeric(38,38)", pa.decimal128(38, 38), "decimal"),
    LakeColumn("c_numeric_5", "numeric(5)", pa.decimal128(5, 0), "decimal"),
    # numeric without a precision, or past 38 digits: the exact text
    as_text("c_numeric", "numeric"),
    as_text("c_numeric_50_5", "numeric(50,5)"),
    # TEXT_TYPES
    as_text("c_uuid", "uuid"),
    as_text("c_json", "json"),
    as_text("c_jsonb", "jsonb"),
    as_text("c_xml", "xml"),
    as_text("c_inet", "inet"),
    as_text("c_cidr", "cidr"),
    as_text("c_macaddr", "macaddr"),
    as_text("c_macaddr8", "macaddr8"),
    as_text("c_time", "time"),
    as_text("c_timetz", "timetz"),
    as_text("c_interval", "interval"),
    as_text("c_bit", "bit(4)"),
    as_text("c_varbit", "varbit(8)"),
    as_text("c_enum", "mood"),  # USER-DEFINED: an enum
    as_text("c_citext", "citext"),  # USER-DEFINED: an extension's base type
    # a domain over text reports its base type
    LakeColumn("c_domain", "short_text", pa.string(), "text"),
]

TYPES_DDL = [
    "CREATE TYPE sales.mood AS ENUM ('sad', 'ok', 'happy', 'ünïcödé 😀')",
    "CREATE DOMAIN sales.short_text AS varchar(20)",
]

UNICODE = "Grüße, Zoë — naïve café 😀 日本語 ✓"

# One row per INSERT, as SQL literals so the source holds exactly what is written.
ALL_TYPES_ROWS: list[dict[str, str]] = [
    {  # ordinary values, unicode, NUL bytes, microseconds, full-precision decimals
        "id": "1",
        "c_smallint": "12",
        "c_integer": "1234",
        "c_bigint": "1234567890123",
        "c_real": "1.1",
        "c_double": "3.141592653589793",
        "c_boolean": "true",
        "c_text": f"'{UNICODE}'",
        "c_varchar": "'ascii only'",
        "c_varchar_unbounded": "'tab\tand\nnewline, ''quotes'', \\ backslash'",
        "c_char": "'ab'",
        "c_name": "'pg_name'",
        "c_qchar": "'x'",
        "c_date": "'2024-02-29'",
        "c_timestamp": "'2024-02-29 13:14:15.123456'",
        "c_timestamp_3": "'2024-02-29 13:14:15.123'",
        "c_timestamptz": "'2024-02-29 13:14:15.654321+05:30'",
        "c_bytea": "'\\x0001020300ff00'::bytea",
        "c_numeric_38_10": "1234567890123456789012345678.1234567891",
        "c_numeric_12_2": "1234567890.12",
        "c_numeric_38_0": "12345678901234567890123456789012345678",
        "c_numeric_38_38": "0.12345678901234567890123456789012345678",
        "c_numeric_5": "99999",
        "c_numeric": "123456789012345678901234567890123456789012345678901234567890"
        ".000000000000000000000000000000000001",
        "c_numeric_50_5": "123456789012345678901234567890123456789012345.12345",
        "c_uuid": "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
        "c_json": """'{"b": 1,   "a": [1, 2.50, null], "é": "😀"}'""",
        "c_jsonb": """'{"b": 1,   "a": [1, 2.50, null], "é": "😀"}'""",
        "c_xml": "'<a lang=\"de\">Grüße</a>'",
        "c_inet": "'192.168.0.1/24'",
        "c_cidr": "'10.0.0.0/8'",
        "c_macaddr": "'08:00:2b:01:02:03'",
        "c_macaddr8": "'08:00:2b:01:02:03:04:05'",
        "c_time": "'23:59:59.999999'",
        "c_timetz": "'12:34:56.789+05:30'",
        "c_interval": "'1 year 2 mons 3 days 04:05:06.789'",
        "c_bit": "B'1010'",
        "c_varbit": "B'101'",
        "c_enum": "'ünïcödé 😀'",
        "c_citext": "'MiXeD CaSe'",
        "c_domain": "'domain value'",
    },
    {  # extremes and negatives, empty strings
        "id": "2",
        "c_smallint": "-32768",
        "c_integer": "-2147483648",
        "c_bigint": "-9223372036854775808",
        "c_real": "-3.4e38",
        "c_double": "-1.7976931348623157e308",
        "c_boolean": "false",
        "c_text": "''",
        "c_varchar": "''",
        "c_varchar_unbounded": "'𝔘𝔫𝔦𝔠𝔬𝔡𝔢 beyond the BMP: 🧪🚀'",
        "c_char": "''",
        "c_name": "''",
        "c_qchar": "''",
        "c_date": "'0001-01-01'",
        "c_timestamp": "'0001-01-01 00:00:00'",
        "c_timestamp_3": "'1899-12-31 23:59:59.999'",
        "c_timestamptz": "'1900-01-01 00:00:00.000001+00'",
        "c_bytea": "'\\x00'::bytea",
        "c_numeric_38_10": "-9999999999999999999999999999.9999999999",
        "c_numeric_12_2": "-9999999999.99",
        "c_numeric_38_0": "-99999999999999999999999999999999999999",
        "c_numeric_38_38": "-0.00000000000000000000000000000000000001",
        "c_numeric_5": "-99999",
        "c_numeric": "-0.000000000000000000000000000000000000000000000000000000000001",
        "c_numeric_50_5": "-1.00000",
        "c_uuid": "'00000000-0000-0000-0000-000000000000'",
        "c_json": "'[]'",
        "c_jsonb": "'{}'",
        "c_xml": "''",
        "c_inet": "'::1'",
        "c_cidr": "'2001:db8::/32'",
        "c_macaddr": "'ff:ff:ff:ff:ff:ff'",
        "c_macaddr8": "'ff:ff:ff:ff:ff:ff:ff:ff'",
        "c_time": "'00:00:00'",
        "c_timetz": "'00:00:00-12'",
        "c_interval": "'-1 days -00:00:00.000001'",
        "c_bit": "B'0000'",
        "c_varbit": "B''",
        "c_enum": "'sad'",
        "c_citext": "''",
        "c_domain": "''",
    },
    {"id": "3"},  # every other column NULL
    {  # special floats and numerics, the far end of the calendar, an empty bytea
        "id": "4",
        "c_real": "'NaN'",
        "c_double": "'Infinity'",
        "c_numeric_12_2": "0",
        "c_numeric_38_10": "0.0000000001",
        "c_numeric": "'NaN'",
        "c_numeric_50_5": "0",
        "c_date": "'9999-12-31'",
        "c_timestamp": "'9999-12-31 23:59:59.999999'",
        "c_timestamptz": "'9999-12-31 23:59:59.999999+00'",
        "c_bytea": "''::bytea",
        "c_interval": "'0'",
    },
    {  # the other infinities, and a timestamptz in daylight saving time
        "id": "5",
        "c_real": "'-Infinity'",
        "c_double": "'NaN'",
        "c_numeric": "1e-300",
        "c_timestamptz": "'2024-07-04 12:00:00 America/Los_Angeles'",
    },
]


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[sa.Engine]:
    """The test's fresh database as GLUON_SOURCE_URL (schema ``sales``, New York time)."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    database = sa.engine.make_url(pg_url).database
    with engine.begin() as connection:
        connection.exec_driver_sql(f"ALTER DATABASE {database} SET timezone TO 'America/New_York'")
        connection.exec_driver_sql("CREATE SCHEMA sales")
    engine.dispose()  # new connections get the database's time zone
    yield engine
    engine.dispose()


def create_table(
    engine: sa.Engine, table: str, columns: list[LakeColumn], rows: list[dict[str, str]]
) -> None:
    ddl = ", ".join(f"{column.name} {column.declared}" for column in columns)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE sales.{table} ({ddl})")
        for row in rows:
            connection.exec_driver_sql(
                f"INSERT INTO sales.{table} ({', '.join(row)}) "
                f"VALUES ({', '.join(row.values())})".replace("%", "%%")
            )


def source_rows(engine: sa.Engine, table: str, columns: list[LakeColumn]) -> list[dict[str, Any]]:
    select = ", ".join(column.select for column in columns)
    with engine.connect() as connection:
        result = connection.execute(sa.text(f"SELECT {select} FROM sales.{table} ORDER BY 1"))
        return [dict(row) for row in result.mappings()]


def offload(run_cli: RunCli, table: str, *options: str) -> Result:
    result = run_cli("offload", "-t", table, "-x", *options)
    assert result.exit_code == 0, result.stderr
    return result


def repository() -> Repository:
    return Repository(load_settings().repo_url)


@pytest.fixture
def all_types(source: sa.Engine) -> sa.Engine:
    with source.begin() as connection:
        connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS citext")
        for statement in TYPES_DDL:
            connection.exec_driver_sql(statement)
    # The enum, domain and extension types resolve through the search path.
    with source.begin() as connection:
        connection.exec_driver_sql("SET search_path TO sales, public")
        ddl = ", ".join(f"{column.name} {column.declared}" for column in ALL_TYPES)
        connection.exec_driver_sql(f"CREATE TABLE sales.all_types ({ddl})")
        for row in ALL_TYPES_ROWS:
            connection.exec_driver_sql(
                f"INSERT INTO sales.all_types ({', '.join(row)}) "
                f"VALUES ({', '.join(row.values())})".replace("%", "%%")
            )
    return source


# -- every type ------------------------------------------------------------------------------


def test_every_type_round_trips_exactly(
    all_types: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    expected = source_rows(all_types, "all_types", ALL_TYPES)
    result = offload(run_cli, "Sales.All_Types")  # -t is case-insensitive
    assert "Offloaded SALES.ALL_TYPES: 5 rows, query it as sales.all_types" in result.stdout
    assert result.stderr == ""

    assert_lake_matches("sales.all_types", expected, ALL_TYPES)

    record = repository().get_table("SALES.ALL_TYPES")
    assert record is not None
    assert (record.status, record.row_count, record.source_dialect) == (
        "offloaded",
        5,
        "postgresql",
    )
    assert (record.source_schema, record.source_table) == ("sales", "all_types")
    assert record.primary_key == ("id",)
    assert delta_version(lake_table_dir(offload_home, "sales", "all_types")) >= 0


def test_exact_values_survive_in_the_json_output(all_types: sa.Engine, run_cli: RunCli) -> None:
    offload(run_cli, "sales.all_types")
    rows = {row["id"]: row for row in query_json("SELECT * FROM sales.all_types")}
    assert rows[1]["c_numeric_38_10"] == "1234567890123456789012345678.1234567891"
    assert rows[2]["c_numeric_38_10"] == "-9999999999999999999999999999.9999999999"
    assert rows[1]["c_numeric_38_0"] == "12345678901234567890123456789012345678"
    assert rows[2]["c_numeric_38_38"] == "-0.00000000000000000000000000000000000001"
    assert rows[1]["c_numeric"] == (
        "123456789012345678901234567890123456789012345678901234567890"
        ".000000000000000000000000000000000001"
    )
    assert rows[2]["c_numeric"] == "-0." + "0" * 59 + "1"
    assert rows[4]["c_numeric"] == "NaN"
    assert rows[1]["c_timestamp"] == "2024-02-29T13:14:15.123456"
    assert rows[1]["c_timestamptz"] == "2024-02-29T07:44:15.654321+00:00"
    assert rows[5]["c_timestamptz"] == "2024-07-04T19:00:00+00:00"
    assert rows[1]["c_char"] == "ab    "  # char(n) keeps its padding
    assert rows[1]["c_jsonb"] == '{"a": [1, 2.50, null], "b": 1, "é": "😀"}'
    assert rows[1]["c_json"] == '{"b": 1,   "a": [1, 2.50, null], "é": "😀"}'
    assert rows[4]["c_double"] == "Infinity"
    assert rows[5]["c_double"] == "NaN"


def test_a_numeric_nan_in_a_constrained_column_fails_in_one_line(
    source: sa.Engine, run_cli: RunCli
) -> None:
    columns = [
        LakeColumn("id", "integer PRIMARY KEY", pa.int32(), "int"),
        LakeColumn("amount", "numeric(12,2)", pa.decimal128(12, 2), "decimal"),
    ]
    create_table(source, "prices", columns, [{"id": "1", "amount": "'NaN'"}])
    result = run_cli("offload", "-t", "sales.prices", "-x")
    assert result.exit_code == 1
    (line,) = error_lines(result)
    assert "amount" in line


# -- empty table -----------------------------------------------------------------------------


def test_an_empty_table_becomes_an_empty_lake_table_with_its_schema(
    all_types: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    with all_types.begin() as connection:
        connection.exec_driver_sql("TRUNCATE sales.all_types")
    result = offload(run_cli, "sales.all_types")
    assert "Offloaded SALES.ALL_TYPES: 0 rows" in result.stdout

    assert query_json("SELECT * FROM sales.all_types") == []
    table = read_arrow("SELECT * FROM sales.all_types")
    assert table.num_rows == 0
    assert_arrow_schema(table, ALL_TYPES)
    assert delta_version(lake_table_dir(offload_home, "sales", "all_types")) == 0
    record = repository().get_table("SALES.ALL_TYPES")
    assert record is not None
    assert (record.status, record.row_count) == ("offloaded", 0)


# -- volume ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_million_rows(source: sa.Engine, run_cli: RunCli) -> None:
    with source.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE sales.big (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL, "
            "label text NOT NULL, sold_at timestamptz NOT NULL)"
        )
        connection.exec_driver_sql(
            "INSERT INTO sales.big SELECT i, mod(i, 100000) / 100.0 - 500, "
            "'étiquette-' || mod(i, 9973), "
            "timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' "
            "FROM generate_series(1, 1000000) AS i"
        )
    with source.connect() as connection:
        count, ids, amount, labels = connection.execute(
            sa.text("SELECT count(*), sum(id), sum(amount), count(DISTINCT label) FROM sales.big")
        ).one()
    assert (count, ids, labels) == (1_000_000, 500_000_500_000, 9973)

    result = offload(run_cli, "sales.big")
    assert "Offloaded SALES.BIG: 1000000 rows" in result.stdout

    (lake,) = query_json(
        "SELECT count(*) AS n, sum(id) AS ids, sum(amount) AS amount, "
        "count(DISTINCT label) AS labels, max(sold_at) AS last FROM sales.big"
    )
    assert lake["n"] == count
    assert lake["ids"] == ids
    assert decimal.Decimal(lake["amount"]) == amount
    assert lake["labels"] == labels
    assert lake["last"] == "2024-01-12T13:46:40+00:00"


# -- partitioning ----------------------------------------------------------------------------

ORDERS = [
    LakeColumn("id", "integer PRIMARY KEY", pa.int32(), "int"),
    LakeColumn("sold_on", "date", pa.date32(), "date"),
    LakeColumn("amount", "numeric(10,2)", pa.decimal128(10, 2), "decimal"),
]
ORDERS_ROWS = [
    {"id": ident, "sold_on": sold_on, "amount": amount}
    for ident, sold_on, amount in [
        ("-5", "'2023-12-31'", "1.50"),
        ("0", "'2024-01-01'", "2.00"),
        ("1", "'2024-01-31'", "NULL"),
        ("999", "'2024-02-01'", "-3.25"),
        ("1000", "'2024-02-29'", "4.00"),
        ("1999", "'2024-03-15'", "5.10"),
        ("2000", "NULL", "6.00"),
        ("2500", "'2024-03-31'", "7.77"),
    ]
]


@pytest.mark.parametrize(
    ("column", "granularity", "expected"),
    [
        ("sold_on", "M", {"2023-12", "2024-01", "2024-02", "2024-03", None}),
        (
            "sold_on",
            "D",
            {"2023-12-31", "2024-01-01", "2024-01-31", "2024-02-01", "2024-02-29", None}
            | {"2024-03-15", "2024-03-31"},
        ),
        ("id", "1000", {"-1000", "0", "1000", "2000"}),
    ],
)
def test_partitioned_offload(
    source: sa.Engine,
    offload_home: Path,
    run_cli: RunCli,
    column: str,
    granularity: str,
    expected: set[str | None],
) -> None:
    create_table(source, "orders", ORDERS, ORDERS_ROWS)
    offload(
        run_cli,
        "sales.orders",
        f"--partition-columns={column}",
        f"--partition-granularity={granularity}",
    )
    part = f"gl_part_{column}"
    partitions = delta_partitions(lake_table_dir(offload_home, "sales", "orders"))
    assert all(list(p) == [part] for p in partitions)
    assert {p[part] for p in partitions} == expected
    assert len(partitions) == len(expected)

    for row in read_arrow(f"SELECT id, sold_on, {part} FROM sales.orders_data").to_pylist():
        if column == "id":
            assert row[part] == (row["id"] // 1000) * 1000
        elif row["sold_on"] is None:
            assert row[part] is None
        else:
            assert row[part] == row["sold_on"].isoformat()[: {"M": 7, "D": 10}[granularity]]

    assert_lake_matches("sales.orders", source_rows(source, "orders", ORDERS), ORDERS)


# -- plan only -------------------------------------------------------------------------------


def test_without_execute_only_the_steps_are_printed(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "orders", ORDERS, ORDERS_ROWS)
    result = run_cli("offload", "-t", "sales.orders", "--partition-columns=id")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert_plan_printed(result.stdout, "SALES.ORDERS")
    assert "sales.orders_data" in result.stdout
    assert "gl_part_id" in result.stdout
    assert not lake_table_dir(offload_home, "sales", "orders").exists()
    assert repository().get_table("SALES.ORDERS") is None


# -- offloading again ------------------------------------------------------------------------


def test_offloading_again_needs_reset_backend_table(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "orders", ORDERS, ORDERS_ROWS)
    offload(run_cli, "sales.orders", "--partition-columns=sold_on")
    location = lake_table_dir(offload_home, "sales", "orders")
    version = delta_version(location)
    before = repository().get_table("SALES.ORDERS")

    again = run_cli("offload", "-t", "sales.orders", "-x", "--partition-columns=sold_on")
    assert again.exit_code == 1
    (line,) = error_lines(again)
    assert "SALES.ORDERS is already offloaded" in line
    assert "--reset-backend-table" in line
    assert delta_version(location) == version
    assert repository().get_table("SALES.ORDERS") == before

    with source.begin() as connection:
        connection.exec_driver_sql("DELETE FROM sales.orders WHERE id < 1000")
        connection.exec_driver_sql("UPDATE sales.orders SET amount = -amount")
        connection.exec_driver_sql("INSERT INTO sales.orders VALUES (7, '2024-05-05', 12.34)")
    reset = run_cli(
        "offload",
        "-t",
        "sales.orders",
        "-x",
        "--reset-backend-table",
        "--partition-columns=sold_on",
    )
    assert reset.exit_code == 0, reset.stderr
    assert "Offloaded SALES.ORDERS: 5 rows" in reset.stdout
    # The reset published its new copy, partitioned anew, at the same path in one commit.
    new_location = lake_table_dir(offload_home, "sales", "orders")
    assert new_location == location and delta_version(location) == version + 1
    assert_lake_matches("sales.orders", source_rows(source, "orders", ORDERS), ORDERS)
    assert {p["gl_part_sold_on"] for p in delta_partitions(new_location)} == {
        "2024-02",
        "2024-03",
        "2024-05",
        None,
    }
