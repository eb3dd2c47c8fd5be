"""Which dictionary rows Oracle's ``find_table`` picks for a ``-t`` name.

Oracle's rules: an unquoted name means its upper-case form, a quoted one means itself.
``-t`` keeps no trace of the quotes, so the table is the one named exactly as typed or
as Oracle folds an unquoted name (both existing: ambiguous, refused by ``describe_table``).
The rendered query runs here against SQLite holding an ``ALL_TABLES`` of recorded rows:
its WHERE clause is plain SQL both databases read alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from gluon.source import connect
from gluon.source.oracle import OracleSource

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"

DICTIONARY = [
    ("APP", "ORDERS"),  # CREATE TABLE app.orders
    ("APP", "Orders"),  # CREATE TABLE app."Orders"
    ("APP", "lines"),  # CREATE TABLE app."lines"
    ("App", "ITEMS"),  # CREATE USER "App"; CREATE TABLE "App".items
]


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)  # builds the engine; nothing connects
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


@pytest.fixture(scope="module")
def dictionary() -> Iterator[sa.Engine]:
    engine = sa.create_engine("sqlite://")
    with engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE all_tables (owner TEXT, table_name TEXT, dependencies TEXT, "
                "partitioned TEXT)"
            )
        )
        for owner, name in DICTIONARY:
            db.execute(
                sa.text("INSERT INTO all_tables VALUES (:o, :t, 'DISABLED', 'NO')"),
                {"o": owner, "t": name},
            )
    yield engine
    engine.dispose()


def found(
    source: OracleSource, dictionary: sa.Engine, schema: str, table: str
) -> list[tuple[str, str]]:
    with dictionary.connect() as db:
        rows = db.execute(sa.text(source.render("find_table")), {"schema": schema, "table": table})
        return [(row.table_schema, row.table_name) for row in rows]


@pytest.mark.parametrize(
    ("schema", "table", "expected"),
    [
        ("app", "orders", [("APP", "ORDERS")]),  # unquoted: never the quoted "Orders"
        ("APP", "ORDERS", [("APP", "ORDERS")]),
        ("app", "Orders", [("APP", "ORDERS"), ("APP", "Orders")]),  # ambiguous: refused
        ("app", "lines", [("APP", "lines")]),  # quoted lower case, exactly
        ("app", "LINES", []),  # "lines" is not LINES
        ("App", "items", [("App", "ITEMS")]),  # a quoted schema name, exactly
        ("app", "items", []),  # APP is not "App"
    ],
)
def test_a_name_matches_as_typed_or_as_oracle_folds_it(
    source: OracleSource,
    dictionary: sa.Engine,
    schema: str,
    table: str,
    expected: list[tuple[str, str]],
) -> None:
    assert found(source, dictionary, schema, table) == expected


def test_dictionary_columns_are_compared_bare(source: OracleSource) -> None:
    """A function on OWNER or TABLE_NAME makes Oracle read every row of ALL_TABLES
    (no index on the dictionary's names applies)."""
    rendered = source.render("find_table")
    assert not re.search(r"\w+\(\s*t\.(owner|table_name)", rendered, re.IGNORECASE), rendered
