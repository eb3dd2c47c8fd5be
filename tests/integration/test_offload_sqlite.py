"""Offload from a real SQLite file into the lake (embedded Sail + Delta), end to end.

Every declared type gluon maps (``NAMED_TYPES`` and ``AFFINITY_RULES`` in
gluon/source/sqlite.py, plus NUMERIC/DECIMAL with and without a precision) is
offloaded with the CLI and read back with ``gluon query --json`` and with the
Python API, then compared value for value with the rows SQLAlchemy reads from
the file. SQLite keeps NUMERIC(p,s) values as INTEGER or REAL (at most 17
significant digits), so "full precision" here means every digit SQLite holds.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
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

# Every declared type, by the rule that maps it (gluon/source/sqlite.py).
ALL_TYPES: list[LakeColumn] = [
    LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
    # AFFINITY_RULES "INT"
    LakeColumn("c_int", "INT", pa.int64(), "int"),
    LakeColumn("c_tinyint", "TINYINT", pa.int64(), "int"),
    LakeColumn("c_smallint", "SMALLINT", pa.int64(), "int"),
    LakeColumn("c_mediumint", "MEDIUMINT", pa.int64(), "int"),
    LakeColumn("c_bigint", "BIGINT", pa.int64(), "int"),
    LakeColumn("c_unsigned_big_int", "UNSIGNED BIG INT", pa.int64(), "int"),
    LakeColumn("c_int8", "INT8", pa.int64(), "int"),
    # "CHAR", "CLOB", "TEXT"
    LakeColumn("c_character", "CHARACTER(20)", pa.string(), "text"),
    LakeColumn("c_varchar", "VARCHAR(255)", pa.string(), "text"),
    LakeColumn("c_varying_character", "VARYING CHARACTER(255)", pa.string(), "text"),
    LakeColumn("c_nchar", "NCHAR(55)", pa.string(), "text"),
    LakeColumn("c_native_character", "NATIVE CHARACTER(70)", pa.string(), "text"),
    LakeColumn("c_nvarchar", "NVARCHAR(100)", pa.string(), "text"),
    LakeColumn("c_text", "TEXT", pa.string(), "text"),
    LakeColumn("c_clob", "CLOB", pa.string(), "text"),
    # "BLOB"
    LakeColumn("c_blob", "BLOB", pa.binary(), "binary"),
    # "REAL", "FLOA", "DOUB"
    LakeColumn("c_real", "REAL", pa.float64(), "float64"),
    LakeColumn("c_double", "DOUBLE", pa.float64(), "float64"),
    LakeColumn("c_double_precision", "DOUBLE PRECISION", pa.float64(), "float64"),
    LakeColumn("c_float", "FLOAT", pa.float64(), "float64"),
    # NUMERIC / DECIMAL with a precision up to 38: exact decimals
    LakeColumn("c_decimal_38_10", "DECIMAL(38,10)", pa.decimal128(38, 10), "decimal"),
    LakeColumn("c_decimal_12_2", "DECIMAL(12,2)", pa.decimal128(12, 2), "decimal"),
    LakeColumn("c_numeric_10", "NUMERIC(10)", pa.decimal128(10, 0), "decimal"),
    # ... without one, or past 38 digits: the exact number as text
    LakeColumn("c_numeric", "NUMERIC", pa.string(), "number_text"),
    LakeColumn("c_decimal", "DECIMAL", pa.string(), "number_text"),
    LakeColumn("c_numeric_50_5", "NUMERIC(50,5)", pa.string(), "number_text"),
    # NAMED_TYPES
    LakeColumn("c_boolean", "BOOLEAN", pa.bool_(), "bool"),
    LakeColumn("c_bool", "BOOL", pa.bool_(), "bool"),
    LakeColumn("c_date", "DATE", pa.date32(), "date"),
    LakeColumn("c_datetime", "DATETIME", TS_NTZ, "timestamp_ntz"),
    LakeColumn("c_timestamp", "TIMESTAMP", TS_NTZ, "timestamp_ntz"),
    LakeColumn("c_json", "JSON", pa.string(), "text"),
]

UNICODE = "Grüße, Zoë — naïve café 😀 日本語 ✓"

ALL_TYPES_ROWS: list[dict[str, Any]] = [
    {  # ordinary values, unicode, NUL bytes in a blob
        "id": 1,
        "c_int": 42,
        "c_tinyint": 7,
        "c_smallint": -300,
        "c_mediumint": 8_000_000,
        "c_bigint": 1_234_567_890_123,
        "c_unsigned_big_int": 2**62,
        "c_int8": -1,
        "c_character": "fixed",
        "c_varchar": UNICODE,
        "c_varying_character": "é",
        "c_nchar": "😀",
        "c_native_character": "Ωmega",
        "c_nvarchar": "tab\tand\nnewline",
        "c_text": UNICODE * 20,
        "c_clob": "a 'quoted' \"text\" with \\ backslash",
        "c_blob": b"\x00\x01\x02\x00\xff\xfe\x00",
        "c_real": 1.5,
        "c_double": 3.141592653589793,
        "c_double_precision": 2.5e-300,
        "c_float": 1e300,
        "c_decimal_38_10": "12345678.1234567",  # 15 significant digits: SQLite keeps all
        "c_decimal_12_2": "1234567890.12",
        "c_numeric_10": 1234567890,
        "c_numeric": 42,
        "c_decimal": "0.1",
        "c_numeric_50_5": "123.45",
        "c_boolean": True,
        "c_bool": False,
        "c_date": "2024-02-29",
        "c_datetime": "2024-02-29 13:14:15.123456",
        "c_timestamp": "2024-02-29T13:14:15.000001",
        "c_json": json.dumps({"a": [1, 2.5, None], "é": "😀"}, ensure_ascii=False),
    },
    {  # extremes and negatives
        "id": 2,
        "c_int": -(2**63),
        "c_tinyint": -128,
        "c_smallint": 32767,
        "c_mediumint": -8_388_608,
        "c_bigint": 2**63 - 1,
        "c_unsigned_big_int": 0,
        "c_int8": 2**63 - 1,
        "c_character": " leading and trailing  ",
        "c_varchar": "x" * 255,
        "c_varying_character": "null\u0000byte",
        "c_nchar": "\u200b",
        "c_native_character": "Z",
        "c_nvarchar": "Ünïcödé",
        "c_text": "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 beyond the BMP: 🧪🚀",
        "c_clob": "line1\r\nline2",
        "c_blob": b"\x00",
        "c_real": -1.7976931348623157e308,
        "c_double": 5e-324,
        "c_double_precision": -0.1,
        "c_float": 123456789.123456789,
        # SQLite stores it as REAL (17 significant digits); the lake keeps every one of them.
        # 28 integer digits: see test_a_28_digit_decimal_stored_as_real.
        "c_decimal_38_10": "-1234567890123456.5",
        "c_decimal_12_2": "-9999999999.99",
        "c_numeric_10": -9999999999,
        "c_numeric": 2**63 - 1,  # huge and exact (INTEGER storage)
        "c_decimal": "123456789012345678901234567890",  # huge (REAL storage)
        "c_numeric_50_5": "-0.000000000000000000000000001",  # tiny
        "c_boolean": False,
        "c_bool": True,
        "c_date": "0001-01-01",
        "c_datetime": "0001-01-01 00:00:00",
        "c_timestamp": "9999-12-31 23:59:59.999999",
        "c_json": "[]",
    },
    # every column NULL except the key
    {"id": 3, **{column.name: None for column in ALL_TYPES[1:]}},
    {  # empty strings and blobs, zeros, the far end of the calendar
        "id": 4,
        "c_int": 0,
        "c_tinyint": 0,
        "c_smallint": 0,
        "c_mediumint": 0,
        "c_bigint": 0,
        "c_unsigned_big_int": 0,
        "c_int8": 0,
        "c_character": "",
        "c_varchar": "",
        "c_varying_character": "",
        "c_nchar": "",
        "c_native_character": "",
        "c_nvarchar": "",
        "c_text": "",
        "c_clob": "",
        "c_blob": b"",
        "c_real": 0.0,
        "c_double": 0.0,
        "c_double_precision": 0.0,
        "c_float": 0.0,
        "c_decimal_38_10": 9_223_372_036_854_775_807,  # 19 digits, exact (INTEGER storage)
        "c_decimal_12_2": "0.01",
        "c_numeric_10": 0,
        "c_numeric": "1e-300",
        "c_decimal": -(2**63),
        "c_numeric_50_5": 0,
        "c_boolean": None,
        "c_bool": None,
        "c_date": "9999-12-31",
        "c_datetime": "1970-01-01 00:00:00",
        "c_timestamp": "1899-12-31 23:59:59.999999",
        "c_json": "",
    },
]


@pytest.fixture
def source(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[sa.Engine]:
    """An empty SQLite file as GLUON_SOURCE_URL; yields an engine on it."""
    path = offload_home.parent / "app.db"
    url = f"sqlite:///{path}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    yield engine
    engine.dispose()


def create_table(
    engine: sa.Engine, table: str, columns: list[LakeColumn], rows: list[dict[str, Any]]
) -> None:
    ddl = ", ".join(f'"{column.name}" {column.declared}' for column in columns)
    names = [column.name for column in columns]
    with engine.begin() as connection:
        connection.exec_driver_sql(f'CREATE TABLE "{table}" ({ddl})')
        if rows:
            placeholders = ", ".join(f":{name}" for name in names)
            connection.execute(
                sa.text(f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({placeholders})'),
                rows,
            )


def source_rows(engine: sa.Engine, table: str) -> list[dict[str, Any]]:
    with engine.connect() as connection:
        result = connection.execute(sa.text(f'SELECT * FROM "{table}" ORDER BY 1'))
        return [dict(row) for row in result.mappings()]


def offload(run_cli: RunCli, table: str, *options: str) -> Result:
    result = run_cli("offload", "-t", table, "-x", *options)
    assert result.exit_code == 0, result.stderr
    return result


def repository() -> Repository:
    return Repository(load_settings().repo_url)


# -- every type ------------------------------------------------------------------------------


def test_every_type_round_trips_exactly(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "all_types", ALL_TYPES, ALL_TYPES_ROWS)
    expected = source_rows(source, "all_types")
    # The source holds what the comments above say it does.
    with source.connect() as connection:
        storage = {
            row[0]: tuple(row[1:])
            for row in connection.execute(
                sa.text(
                    "SELECT id, typeof(c_decimal_38_10), typeof(c_numeric), typeof(c_decimal) "
                    "FROM all_types"
                )
            )
        }
    assert storage[2] == ("real", "integer", "real")
    assert storage[4][0] == "integer"

    result = offload(run_cli, "main.all_types")
    assert "Offloaded MAIN.ALL_TYPES: 4 rows, query it as main.all_types" in result.stdout
    assert result.stderr == ""

    assert_lake_matches("main.all_types", expected, ALL_TYPES)

    record = repository().get_table("MAIN.ALL_TYPES")
    assert record is not None
    assert (record.status, record.row_count, record.offload_type) == ("offloaded", 4, "FULL")
    assert record.source_dialect == "sqlite"
    assert record.primary_key == ("id",)
    assert [column.name for column in record.columns] == [c.name for c in ALL_TYPES]
    assert delta_version(lake_table_dir(offload_home, "main", "all_types")) >= 0


DECIMALS = [
    LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
    LakeColumn("d", "DECIMAL(38,10)", pa.decimal128(38, 10), "decimal"),
    LakeColumn("m", "DECIMAL(12,2)", pa.decimal128(12, 2), "decimal"),
]


def test_decimals_keep_every_digit_sqlite_holds(source: sa.Engine, run_cli: RunCli) -> None:
    rows = [
        {"id": 1, "d": 2**63 - 1, "m": "-9999999999.99"},  # INTEGER storage: exact
        {"id": 2, "d": "-1234567890123456.5", "m": 27.5 * 1.1},  # REAL storage
        {"id": 3, "d": "12345678.1234567", "m": "0.01"},
        {"id": 4, "d": "-0.0000000001", "m": -0.005},
    ]
    create_table(source, "decimals", DECIMALS, rows)
    offload(run_cli, "main.decimals")
    lake = {row["id"]: (row["d"], row["m"]) for row in query_json("SELECT * FROM main.decimals")}
    assert lake == {
        1: ("9223372036854775807.0000000000", "-9999999999.99"),
        2: ("-1234567890123456.5000000000", "30.25"),  # REAL noise beyond the scale is dropped
        3: ("12345678.1234567000", "0.01"),
        4: ("-0.0000000001", "0.00"),  # rounded half to even at the declared scale
    }


def test_a_28_digit_decimal_stored_as_real(source: sa.Engine, run_cli: RunCli) -> None:
    """Quantizing a REAL to the declared scale needs all 38 digits (regression in ab85b49)."""
    rows: list[dict[str, Any]] = [
        {"id": 1, "d": "-1234567890123456789012345678.1234567890", "m": None},
        {"id": 2, "d": 1e18, "m": None},
    ]
    create_table(source, "decimals", DECIMALS, rows)
    result = run_cli("offload", "-t", "main.decimals", "-x")
    assert result.exit_code == 0, result.stderr
    lake = {row["id"]: row["d"] for row in query_json("SELECT id, d FROM main.decimals")}
    assert lake == {
        1: "-1234567890123456900000000000.0000000000",  # every digit SQLite keeps
        2: "1000000000000000000.0000000000",
    }


def test_sqlite_timestamps_with_an_offset_become_utc_like_sqlites_datetime(
    source: sa.Engine, run_cli: RunCli
) -> None:
    columns = [
        LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
        LakeColumn("ts", "TIMESTAMP", TS_NTZ, "timestamp_ntz"),
    ]
    create_table(source, "zoned", columns, [{"id": 1, "ts": "2024-01-31T12:00:00+02:00"}])
    with source.connect() as connection:
        sqlite_utc = connection.execute(sa.text("SELECT datetime(ts) FROM zoned")).scalar_one()
    offload(run_cli, "main.zoned")
    (row,) = query_json("SELECT ts FROM main.zoned")
    assert dt.datetime.fromisoformat(row["ts"]) == dt.datetime.fromisoformat(sqlite_utc)


# -- empty table -----------------------------------------------------------------------------


def test_an_empty_table_becomes_an_empty_lake_table_with_its_schema(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "empty", ALL_TYPES, [])
    result = offload(run_cli, "main.empty")
    assert "Offloaded MAIN.EMPTY: 0 rows" in result.stdout

    assert query_json("SELECT * FROM main.empty") == []
    table = read_arrow("SELECT * FROM main.empty")
    assert table.num_rows == 0
    assert_arrow_schema(table, ALL_TYPES)
    assert delta_version(lake_table_dir(offload_home, "main", "empty")) == 0
    record = repository().get_table("MAIN.EMPTY")
    assert record is not None
    assert (record.status, record.row_count) == ("offloaded", 0)


# -- volume ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_million_rows(source: sa.Engine, run_cli: RunCli) -> None:
    with source.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE big (id INTEGER PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, "
            "label TEXT NOT NULL, sold_on DATE NOT NULL)"
        )
        connection.exec_driver_sql(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) "
            "INSERT INTO big SELECT i, (i % 100000) / 100.0, 'étiquette-' || (i % 9973), "
            "date('2024-01-01', '+' || (i % 366) || ' days') FROM n"
        )
    with source.connect() as connection:
        # amount has at most two decimals: summing whole cents is exact in SQLite.
        count, ids, cents, labels = connection.execute(
            sa.text(
                "SELECT count(*), sum(id), sum(CAST(round(amount * 100) AS INTEGER)), "
                "count(DISTINCT label) FROM big"
            )
        ).one()
    assert (count, ids, labels) == (1_000_000, 500_000_500_000, 9973)

    result = offload(run_cli, "main.big")
    assert "Offloaded MAIN.BIG: 1000000 rows" in result.stdout

    (lake,) = query_json(
        "SELECT count(*) AS n, sum(id) AS ids, sum(amount) AS amount, "
        "count(DISTINCT label) AS labels, min(sold_on) AS first, max(sold_on) AS last "
        "FROM main.big"
    )
    assert lake["n"] == count
    assert lake["ids"] == ids
    assert decimal.Decimal(lake["amount"]) == decimal.Decimal(cents) / 100
    assert lake["labels"] == labels
    assert (lake["first"], lake["last"]) == ("2024-01-01", "2024-12-31")


# -- partitioning ----------------------------------------------------------------------------

SALES = [
    LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
    LakeColumn("sold_on", "DATE", pa.date32(), "date"),
    LakeColumn("amount", "DECIMAL(10,2)", pa.decimal128(10, 2), "decimal"),
]
SALES_ROWS = [
    {"id": ident, "sold_on": sold_on, "amount": amount}
    for ident, sold_on, amount in [
        (-5, "2023-12-31", "1.50"),
        (0, "2024-01-01", "2.00"),
        (1, "2024-01-31", None),
        (999, "2024-02-01", "-3.25"),
        (1000, "2024-02-29", "4.00"),
        (1999, "2024-03-15", "5.10"),
        (2000, None, "6.00"),
        (2500, "2024-03-31", "7.77"),
    ]
]


@pytest.mark.parametrize(
    ("column", "granularity", "expected"),
    [
        ("sold_on", "M", {"2023-12", "2024-01", "2024-02", "2024-03", None}),
        ("sold_on", "Y", {"2023", "2024", None}),
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
    create_table(source, "sales", SALES, SALES_ROWS)
    offload(
        run_cli,
        "main.sales",
        f"--partition-columns={column}",
        f"--partition-granularity={granularity}",
    )
    part = f"gl_part_{column}"
    partitions = delta_partitions(lake_table_dir(offload_home, "main", "sales"))
    assert all(list(p) == [part] for p in partitions)
    assert {p[part] for p in partitions} == expected
    assert len(partitions) == len(expected)

    # Each row sits in the partition its value belongs to.
    for row in read_arrow(f"SELECT id, sold_on, {part} FROM main.sales_data").to_pylist():
        if column == "id":
            assert row[part] == (row["id"] // 1000) * 1000
        elif row["sold_on"] is None:
            assert row[part] is None
        else:
            assert row[part] == row["sold_on"].isoformat()[: {"Y": 4, "M": 7}[granularity]]

    # The user view shows the source's columns only, and every row.
    assert_lake_matches("main.sales", source_rows(source, "sales"), SALES)
    record = repository().get_table("MAIN.SALES")
    assert record is not None
    assert [p.lake_column for p in record.partitioning] == [part]


# -- plan only -------------------------------------------------------------------------------


def test_without_execute_only_the_steps_are_printed(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "sales", SALES, SALES_ROWS)
    result = run_cli(
        "offload", "-t", "main.sales", "--partition-columns=sold_on", "--partition-granularity=M"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert_plan_printed(result.stdout, "MAIN.SALES")
    assert "main.sales_data" in result.stdout
    assert str(lake_table_dir(offload_home, "main", "sales")) in result.stdout
    assert "gl_part_sold_on" in result.stdout

    assert not lake_table_dir(offload_home, "main", "sales").exists()
    assert not (offload_home / "lake" / "main.db").exists()
    assert repository().get_table("MAIN.SALES") is None
    assert repository().list_tables() == []
    # Nothing to query either.
    query = run_cli("gluon", "query", "SELECT * FROM main.sales")
    assert query.exit_code == 1
    assert len(error_lines(query)) == 1


# -- offloading again ------------------------------------------------------------------------


def test_offloading_again_needs_reset_backend_table(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "sales", SALES, SALES_ROWS)
    offload(run_cli, "main.sales")
    location = lake_table_dir(offload_home, "main", "sales")
    version = delta_version(location)
    before = repository().get_table("MAIN.SALES")

    again = run_cli("offload", "-t", "MAIN.Sales", "-x")
    assert again.exit_code == 1
    (line,) = error_lines(again)
    assert line.startswith("offload: error: MAIN.SALES is already offloaded")
    assert "--reset-backend-table" in line
    assert delta_version(location) == version
    assert repository().get_table("MAIN.SALES") == before
    assert_lake_matches("main.sales", source_rows(source, "sales"), SALES)

    with source.begin() as connection:
        connection.exec_driver_sql("DELETE FROM sales WHERE id IN (-5, 2000)")
        connection.exec_driver_sql("UPDATE sales SET amount = 99.99 WHERE id = 1")
        connection.exec_driver_sql("INSERT INTO sales VALUES (3000, '2025-01-01', 0.5)")
    reset = run_cli("offload", "-t", "main.sales", "-x", "--reset-backend-table")
    assert reset.exit_code == 0, reset.stderr
    assert "Offloaded MAIN.SALES: 7 rows" in reset.stdout
    # The reset published its new copy at the same path, in one overwrite commit.
    assert lake_table_dir(offload_home, "main", "sales") == location
    assert delta_version(location) == version + 1
    assert_lake_matches("main.sales", source_rows(source, "sales"), SALES)
    after = repository().get_table("MAIN.SALES")
    assert after is not None and before is not None
    assert (after.status, after.row_count) == ("offloaded", 7)
    assert after.offloaded_at is not None and before.offloaded_at is not None
    assert after.offloaded_at >= before.offloaded_at


def test_reset_after_the_source_gained_a_column(source: sa.Engine, run_cli: RunCli) -> None:
    create_table(source, "sales", SALES, SALES_ROWS)
    offload(run_cli, "main.sales")
    with source.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE sales ADD COLUMN note TEXT")
        connection.exec_driver_sql("UPDATE sales SET note = 'n' || id")
    reset = run_cli("offload", "-t", "main.sales", "-x", "--reset-backend-table")
    assert reset.exit_code == 0, reset.stderr
    columns = [*SALES, LakeColumn("note", "TEXT", pa.string(), "text")]
    assert_lake_matches("main.sales", source_rows(source, "sales"), columns)


def test_reset_with_other_partitioning(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "sales", SALES, SALES_ROWS)
    offload(run_cli, "main.sales", "--partition-columns=sold_on", "--partition-granularity=Y")
    reset = run_cli(
        "offload",
        "-t",
        "main.sales",
        "-x",
        "--reset-backend-table",
        "--partition-columns=id",
        "--partition-granularity=1000",
    )
    assert reset.exit_code == 0, reset.stderr
    partitions = delta_partitions(lake_table_dir(offload_home, "main", "sales"))
    assert {p.get("gl_part_id") for p in partitions} == {"-1000", "0", "1000", "2000"}
    assert_lake_matches("main.sales", source_rows(source, "sales"), SALES)


def test_a_failed_reset_keeps_the_previous_offload_queryable(
    source: sa.Engine, offload_home: Path, run_cli: RunCli
) -> None:
    create_table(source, "sales", SALES, SALES_ROWS)
    offload(run_cli, "main.sales")
    expected = source_rows(source, "sales")
    version = delta_version(lake_table_dir(offload_home, "main", "sales"))
    with source.begin() as connection:  # SQLite keeps text that is not a number as text
        connection.exec_driver_sql("INSERT INTO sales VALUES (4000, '2024-04-01', 'n/a')")
    reset = run_cli("offload", "-t", "main.sales", "-x", "--reset-backend-table")
    assert reset.exit_code == 1
    (line,) = error_lines(reset)
    assert "amount" in line
    assert delta_version(lake_table_dir(offload_home, "main", "sales")) == version
    assert_lake_matches("main.sales", expected, SALES)


# -- values that do not fit ------------------------------------------------------------------


def test_a_blob_in_a_text_column_is_refused_not_mangled(source: sa.Engine, run_cli: RunCli) -> None:
    columns = [
        LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
        LakeColumn("note", "TEXT", pa.string(), "text"),
    ]
    create_table(source, "notes", columns, [{"id": 1, "note": b"\x00\xff"}])
    result = run_cli("offload", "-t", "main.notes", "-x")
    assert result.exit_code == 1
    (line,) = error_lines(result)
    assert "note" in line


def test_a_value_that_does_not_fit_its_lake_type_fails_in_one_line(
    source: sa.Engine, run_cli: RunCli
) -> None:
    columns = [
        LakeColumn("id", "INTEGER PRIMARY KEY", pa.int64(), "int"),
        LakeColumn("qty", "INTEGER", pa.int64(), "int"),
    ]
    create_table(source, "bad_values", columns, [{"id": 1, "qty": "twelve"}])
    result = run_cli("offload", "-t", "main.bad_values", "-x")
    assert result.exit_code == 1
    (line,) = error_lines(result)
    assert "qty" in line
    assert "twelve" in line
