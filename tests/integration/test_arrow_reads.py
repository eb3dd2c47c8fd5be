"""Source reads into Arrow through the driver's own Arrow path (ADBC on PostgreSQL).

The type round trips are in test_offload_postgres.py; these tests pin what the
Arrow path adds: no value passes through a Python converter, bind values travel
as parameters (``:name`` compiled to ``$n``; strings and non-negative integers as
literals), the driver's batches are re-cut to
the caller's row count, and the ADBC connection carries the source timeouts.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon import source as sources
from gluon.config import SourceTimeouts
from gluon.errors import SourceError
from gluon.schema import Column, TableSpec
from gluon.source import arrow as arrow_conversion

ITEMS = TableSpec(
    schema="public",
    name="items",
    columns=(
        Column("id", "bigint", "bigint", nullable=False),
        Column("amount", "numeric(12,2)", "decimal(12,2)"),
        Column("label", "text", "string"),
        Column("updated_at", "timestamp without time zone", "timestamp_ntz"),
        Column("day", "date", "date"),
    ),
    primary_key=("id",),
)


@pytest.fixture
def items_url(pg_url: str) -> Iterator[str]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE items (id bigint PRIMARY KEY, amount numeric(12,2), label text, "
            "updated_at timestamp, day date)"
        )
        connection.exec_driver_sql(
            "INSERT INTO items SELECT g, g * 1.25, CASE WHEN mod(g, 7) = 0 THEN NULL "
            "ELSE 'item ' || g END, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second', "
            "DATE '2024-01-01' + mod(g, 30) FROM generate_series(1, 2500) AS g"
        )
        connection.exec_driver_sql("INSERT INTO items VALUES (9000, 0.05, 'O''Brien', NULL, NULL)")
    engine.dispose()
    yield pg_url


def _no_python_conversion(*_: object, **__: object) -> pa.RecordBatch:
    raise AssertionError("a PostgreSQL read converted values one by one in Python")


def test_postgres_reads_convert_no_value_in_python(
    items_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gluon.source.base imports the per-value path from here when it needs it (lazily).
    monkeypatch.setattr(arrow_conversion, "to_batch", _no_python_conversion)
    source = sources.connect(items_url)
    batches = list(source.read_batches(ITEMS, batch_rows=1000))
    assert [batch.num_rows for batch in batches] == [1000, 1000, 501]
    assert all(batch.schema == ITEMS.arrow_schema for batch in batches)
    rows = {row["id"]: row for row in pa.Table.from_batches(batches).to_pylist()}
    assert rows[3] == {
        "id": 3,
        "amount": decimal.Decimal("3.75"),
        "label": "item 3",
        "updated_at": dt.datetime(2024, 1, 1, 0, 0, 3),
        "day": dt.date(2024, 1, 4),
    }
    assert rows[7]["label"] is None
    assert rows[9000]["amount"] == decimal.Decimal("0.05")


def test_postgres_bind_values_travel_as_parameters(items_url: str) -> None:
    source = sources.connect(items_url)
    where = "label = :label OR (amount >= :low AND day = :day AND updated_at < :before)"
    params = {
        "label": "O'Brien",
        "low": decimal.Decimal("3000.00"),
        "day": dt.date(2024, 1, 11),
        "before": dt.datetime(2024, 1, 1, 0, 40, 30),
    }
    batches = list(source.read_batches(ITEMS, batch_rows=100, where=where, params=params))
    ids = sorted(pa.Table.from_batches(batches, schema=ITEMS.arrow_schema)["id"].to_pylist())
    assert ids == [2410, 9000]
    assert source.count_matching(ITEMS, where, params) == 2


def test_postgres_integer_binds_leave_the_read_on_copy(
    items_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC streams a query without parameters through COPY; with any, it runs it prepared and
    holds the whole result before the first batch. A changelog batch binds only integers
    (its LIMIT): they go as literals, so the read sends no parameter at all."""
    from gluon.source.postgresql import PostgreSQLSource

    sent: list[tuple[str, list[object]]] = []
    stream = PostgreSQLSource._stream

    def spy(self: PostgreSQLSource, spec: TableSpec, sql: str, values: list[object]) -> object:
        sent.append((sql, values))
        return stream(self, spec, sql, values)

    monkeypatch.setattr(PostgreSQLSource, "_stream", spy)
    source = sources.connect(items_url)
    where = "id > :above AND id <= :below AND label <> :label"
    params = {"above": 2400, "below": 9000, "label": "item 2401"}
    batches = list(source.read_batches(ITEMS, batch_rows=50, where=where, params=params))
    ids = pa.Table.from_batches(batches, schema=ITEMS.arrow_schema)["id"].to_pylist()
    # Every seventh label is NULL, which <> leaves out.
    assert sorted(ids) == [*(g for g in range(2402, 2501) if g % 7), 9000]
    assert [values for _, values in sent] == [[]]
    assert "2400" in sent[0][0] and "9000" in sent[0][0]
    # Negative integers and booleans stay parameters (a literal -1 after a minus is a comment).
    sent.clear()
    list(source.read_batches(ITEMS, batch_rows=50, where="id > :low", params={"low": -1}))
    assert [values for _, values in sent] == [[-1]]


def test_postgres_arrow_reads_carry_the_timeouts_and_the_url_options(pg_url: str) -> None:
    url = sa.engine.make_url(pg_url).update_query_dict({"options": "-c search_path=pg_catalog"})
    source = sources.connect(
        url.render_as_string(hide_password=False),
        SourceTimeouts(connect_seconds=5, statement_seconds=7.5, lock_seconds=2),
    )
    names = ("statement_timeout", "lock_timeout", "search_path")
    spec = TableSpec("pg_catalog", "settings", tuple(Column(n, "text", "string") for n in names))
    statement = sa.text("SELECT " + ", ".join(f"current_setting('{n}')" for n in names))
    batches = list(source.read_query_batches(spec, statement, {}, batch_rows=10))
    assert pa.Table.from_batches(batches).to_pylist() == [
        {"statement_timeout": "7500ms", "lock_timeout": "2s", "search_path": "pg_catalog"}
    ]


def test_a_failed_postgres_read_is_one_source_error(items_url: str) -> None:
    source = sources.connect(items_url)
    missing = TableSpec("public", "no_such_table", ITEMS.columns)
    with pytest.raises(
        SourceError, match=r"^reading public\.no_such_table failed: .*no_such_table"
    ):
        list(source.read_batches(missing, batch_rows=10))


def test_postgres_string_values_compare_with_uuid_enum_and_text_columns(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TYPE mood AS ENUM ('happy', 'sad')")
        connection.exec_driver_sql(
            "CREATE TABLE tagged (id int PRIMARY KEY, ref uuid, feeling mood, note text)"
        )
        connection.exec_driver_sql(
            "INSERT INTO tagged VALUES "
            "(1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy', 'plain'), "
            "(2, 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'sad', 'plain'), "
            "(3, NULL, NULL, E'back\\\\slash ''quoted'''), "
            "(4, NULL, 'happy', 'plain')"
        )
    engine.dispose()
    spec = TableSpec(
        "public",
        "tagged",
        (
            Column("id", "integer", "int", nullable=False),
            Column("ref", "uuid", "string", read_as_text=True),
            Column("feeling", "mood", "string", read_as_text=True),
            Column("note", "text", "string"),
        ),
    )
    source = sources.connect(pg_url)
    where = "ref = :p0 OR feeling = :p1 OR note = :p2"
    params = {
        "p0": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "p1": "sad",
        "p2": "back\\slash 'quoted'",
    }
    batches = list(source.read_batches(spec, batch_rows=10, where=where, params=params))
    rows = pa.Table.from_batches(batches, schema=spec.arrow_schema).to_pylist()
    assert sorted(row["id"] for row in rows) == [1, 2, 3]
    assert {row["id"]: row["note"] for row in rows}[3] == "back\\slash 'quoted'"


@pytest.mark.parametrize(
    ("column", "declared", "lake", "value"),
    [
        ("ts", "timestamp", "timestamp_ntz", "infinity"),
        ("tz", "timestamptz", "timestamp", "-infinity"),
        ("d", "date", "date", "infinity"),
    ],
)
def test_postgres_infinity_fails_the_read_in_one_line(
    pg_url: str, column: str, declared: str, lake: str, value: str
) -> None:
    """ADBC hands infinities over as wrapped-around numbers; psycopg refused them, so must we."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE events (id int PRIMARY KEY, {column} {declared})")
        connection.exec_driver_sql(f"INSERT INTO events VALUES (1, NULL), (2, '{value}')")
    engine.dispose()
    spec = TableSpec(
        "public",
        "events",
        (Column("id", "integer", "int", nullable=False), Column(column, declared, lake)),
    )
    source = sources.connect(pg_url)
    with pytest.raises(SourceError) as failure:
        list(source.read_batches(spec, batch_rows=10))
    message = str(failure.value)
    assert message.startswith(f"column {column} of public.events holds a value that does not fit")
    assert "outside the years 1-9999" in message
    assert "\n" not in message
