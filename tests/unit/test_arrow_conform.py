"""The dialect-free half of Arrow-native reads: re-cutting batches and the exact casts.

Also the Oracle read over ``fetch_df_batches``: no Oracle server runs here, so the
connection is a stand-in that returns real python-oracledb DataFrame objects (built
from Arrow) the way ``fetch_df_batches`` does; tests/oracle/test_oracle_live.py reads
a real server when GLUON_ORACLE_DSN is set.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import oracledb
import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.errors import SourceError
from gluon.schema import Column, TableSpec
from gluon.source.arrow import conform, rebatch
from gluon.source.oracle import OracleSource
from gluon.source.postgresql import libpq_uri

SPEC = TableSpec(
    schema="S",
    name="T",
    columns=(
        Column("ID", "NUMBER(19)", "bigint"),
        Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)"),
        Column("AT", "DATE", "timestamp_ntz"),
    ),
)


def _batch(ids: range) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": list(ids)})


def test_rebatch_cuts_the_stream_into_the_requested_rows() -> None:
    stream = [_batch(range(0, 3)), _batch(range(3, 3)), _batch(range(3, 10)), _batch(range(10, 11))]
    cut = list(rebatch(stream, 4))
    assert [batch.num_rows for batch in cut] == [4, 4, 3]
    assert pa.Table.from_batches(cut)["id"].to_pylist() == list(range(11))
    assert list(rebatch([], 4)) == []


def test_numeric_text_becomes_exact_decimals() -> None:
    raw = pa.RecordBatch.from_pydict(
        {
            "id": pa.array(["1", "2"]).cast(pa.decimal128(19, 0)),
            "amount": pa.array(["12.50", None]),
            "at": pa.array([0, None], pa.timestamp("s")),
        }
    )
    batch = conform(raw, SPEC.arrow_schema, SPEC)
    assert batch.schema == SPEC.arrow_schema
    assert batch.column(1).to_pylist() == [decimal.Decimal("12.50"), None]


@pytest.mark.parametrize(
    ("amount", "why"),
    [("1.234", "data loss"), ("12345678901.00", "precision"), ("NaN", "not a valid")],
)
def test_a_value_that_would_change_fails_in_one_line_naming_the_column(
    amount: str, why: str
) -> None:
    raw = pa.RecordBatch.from_pydict(
        {
            "id": pa.array([1]),
            "amount": pa.array([amount]),
            "at": pa.array([None], pa.timestamp("s")),
        }
    )
    with pytest.raises(SourceError) as failure:
        conform(raw, SPEC.arrow_schema, SPEC)
    message = str(failure.value)
    assert message.startswith("column amount of S.T holds a value that does not fit its lake type")
    assert why in message
    assert "\n" not in message


def test_a_float_is_never_taken_for_a_decimal() -> None:
    raw = pa.RecordBatch.from_pydict(
        {"id": pa.array([1]), "amount": pa.array([0.1]), "at": pa.array([None], pa.timestamp("s"))}
    )
    with pytest.raises(SourceError, match="not an exact decimal"):
        conform(raw, SPEC.arrow_schema, SPEC)


def test_libpq_uri_carries_the_connect_arguments_percent_encoded() -> None:
    url = sa.make_url(
        "postgresql+psycopg://u:p%40ss@db:5433/app?sslmode=require&options=-c%20a%3D1"
    )
    uri = libpq_uri(url, {"connect_timeout": 5, "options": "-c a=1 -c statement_timeout=7500"})
    assert uri == (
        "postgresql://u:p%40ss@db:5433/app?sslmode=require&connect_timeout=5"
        "&options=-c%20a%3D1%20-c%20statement_timeout%3D7500"
    )


def _data_frame(table: pa.Table) -> Any:
    """A python-oracledb DataFrame holding ``table``, as ``fetch_df_batches`` yields them."""
    return oracledb.DataFrame._from_arrow(table)  # type: ignore[no-untyped-call]


class _FakeOracleConnection:
    """What ``engine.raw_connection()`` returns, reduced to the calls the read makes."""

    def __init__(self, frames: list[pa.Table]) -> None:
        self.frames = frames
        self.calls: list[dict[str, Any]] = []
        self.closed = False
        self.driver_connection = self

    def fetch_df_batches(self, **arguments: Any) -> Iterator[Any]:
        self.calls.append(arguments)
        for frame in self.frames:
            yield _data_frame(frame)
        raise oracledb.DatabaseError("ORA-01013: user requested cancel of current operation")

    def close(self) -> None:
        self.closed = True


def test_oracle_reads_fetch_data_frames_with_decimals(monkeypatch: pytest.MonkeyPatch) -> None:
    source = OracleSource(sa.create_engine("oracle+oracledb://u:p@db:1521/?service_name=x"))
    frame = pa.table(
        {
            "ID": pa.array([7, 8], pa.decimal128(19, 0)),
            "AMOUNT": pa.array([decimal.Decimal("1.50"), None], pa.decimal128(12, 2)),
            "AT": pa.array([86_400, 0], pa.timestamp("s")),
        }
    )
    connection = _FakeOracleConnection([frame])
    monkeypatch.setattr(source.engine, "raw_connection", lambda: connection)
    statement = sa.text("SELECT ID, AMOUNT, AT FROM S.T WHERE ID > :low")
    batches = source.read_query_batches(SPEC, statement, {"low": 1}, batch_rows=10)
    with pytest.raises(SourceError, match=r"^reading S\.T failed: ORA-01013"):
        next(batches)
    assert connection.calls == [
        {
            "statement": "SELECT ID, AMOUNT, AT FROM S.T WHERE ID > :low",
            "parameters": {"low": 1},
            "size": source.fetch_arraysize,
            "fetch_decimals": True,
        }
    ]
    assert connection.closed
    connection = _FakeOracleConnection([frame])
    connection.fetch_df_batches = lambda **_: iter([_data_frame(frame)])  # type: ignore[method-assign]
    monkeypatch.setattr(source.engine, "raw_connection", lambda: connection)
    rows = pa.Table.from_batches(
        list(source.read_query_batches(SPEC, statement, {"low": 1}, batch_rows=10))
    ).to_pylist()
    assert rows[0] == {
        "id": 7,
        "amount": decimal.Decimal("1.50"),
        "at": dt.datetime(1970, 1, 2),
    }
    assert rows[1]["amount"] is None


@pytest.mark.parametrize(
    ("raw", "target"),
    [
        # ADBC's rendering of PostgreSQL's timestamp 'infinity' (wrapped around).
        (
            pa.array([0, -9222425352054775809], pa.int64()).view(pa.timestamp("us")),
            pa.timestamp("us"),
        ),
        (
            pa.array([-9222425352054775808], pa.int64()).view(pa.timestamp("us", tz="UTC")),
            pa.timestamp("us", tz="UTC"),
        ),
        # ... and of date 'infinity'.
        (pa.array([-2147472692], pa.int32()).view(pa.date32()), pa.date32()),
        # The day after 9999-12-31.
        (pa.array([2932897], pa.int32()).view(pa.date32()), pa.date32()),
    ],
)
def test_dates_and_times_outside_the_years_1_to_9999_are_refused(
    raw: pa.Array, target: pa.DataType
) -> None:
    spec = TableSpec("S", "T", (Column("AT", "timestamp", "timestamp_ntz"),))
    schema = pa.schema([pa.field("at", target)])
    with pytest.raises(SourceError, match="outside the years 1-9999"):
        conform(
            pa.RecordBatch.from_arrays([raw], schema=pa.schema([pa.field("at", raw.type)])),
            schema,
            spec,
        )


def test_the_whole_calendar_passes() -> None:
    spec = TableSpec(
        "S", "T", (Column("AT", "timestamp", "timestamp_ntz"), Column("D", "date", "date"))
    )
    edges = pa.RecordBatch.from_pydict(
        {
            "at": pa.array([dt.datetime.min, dt.datetime.max, None], pa.timestamp("us")),
            "d": pa.array([dt.date.min, dt.date.max, None], pa.date32()),
        }
    )
    assert conform(edges, spec.arrow_schema, spec).to_pylist()[1] == {
        "at": dt.datetime.max,
        "d": dt.date.max,
    }
