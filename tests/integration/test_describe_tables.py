"""``describe_tables``: every table's columns, keys and partitioning in one catalog query a
database (issue 33 item 4: the report over 200 tables made four catalog queries a table),
each table described exactly as ``describe_table`` describes it alone, and a table the
batched read cannot describe (missing, named twice in case, a refused type) described
alone, so its own error names it."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gluon import source as sources
from gluon.errors import GluonError, SourceError
from gluon.naming import TableRef
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect

CATALOG_QUERIES = ("find_table", "describe_columns", "primary_key", "partitioning")

POSTGRES_TABLES = (
    'CREATE TABLE app."order" ("select" INTEGER PRIMARY KEY, "from" TEXT, "Group" NUMERIC(8,2))',
    "CREATE TABLE app.lines (order_id BIGINT, line_no SMALLINT, sku VARCHAR(20) NOT NULL, "
    "note TEXT, PRIMARY KEY (line_no, order_id))",
    "CREATE TABLE app.events (id INTEGER, day DATE NOT NULL, payload JSONB, "
    "PRIMARY KEY (id, day)) PARTITION BY RANGE (day)",
    "CREATE TABLE app.events_2024 PARTITION OF app.events "
    "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')",
    "CREATE TABLE app.by_list (region TEXT, id INTEGER, PRIMARY KEY (region, id)) "
    "PARTITION BY LIST (region)",
    "CREATE TABLE app.no_key (a INTEGER, b TIMESTAMPTZ, c BYTEA, d UUID)",
    "CREATE TABLE app.refused (id INTEGER PRIMARY KEY, tags INTEGER[])",
    'CREATE TABLE app."Twice" (id INTEGER PRIMARY KEY)',
    'CREATE TABLE app."twice" (id INTEGER PRIMARY KEY)',
    'CREATE SCHEMA "Mixed"',
    'CREATE TABLE "Mixed"."CamelCase" ("Id" INTEGER PRIMARY KEY, "Value" REAL)',
)
POSTGRES_REFS = (
    TableRef("app", "order"),
    TableRef("APP", "LINES"),
    TableRef("app", "events"),
    TableRef("app", "by_list"),
    TableRef("app", "no_key"),
    TableRef("app", "refused"),
    TableRef("app", "twice"),
    TableRef("app", "missing"),
    TableRef("nowhere", "order"),
    TableRef("mixed", "camelcase"),
)


def _count_queries(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    queries: collections.Counter[str] = collections.Counter()
    run_query = SourceDialect.run_query

    def counted(self: SourceDialect, template: str, *args: Any, **kwargs: Any) -> list[Any]:
        queries[template] += 1
        return run_query(self, template, *args, **kwargs)

    monkeypatch.setattr(SourceDialect, "run_query", counted)
    return queries


def _alone(source: SourceDialect, refs: tuple[TableRef, ...]) -> dict[TableRef, object]:
    """Each table described alone: its spec, or its error's type and line."""
    described: dict[TableRef, object] = {}
    for ref in refs:
        try:
            described[ref] = source.describe_table(ref)
        except GluonError as exc:
            described[ref] = (type(exc), str(exc))
    return described


def _spec(described: dict[TableRef, object], ref: TableRef) -> TableSpec:
    found = described[ref]
    assert isinstance(found, TableSpec), found
    return found


def _together(source: SourceDialect, refs: tuple[TableRef, ...]) -> dict[TableRef, object]:
    return {
        ref: found if isinstance(found, TableSpec) else (type(found), str(found))
        for ref, found in source.describe_tables(refs).items()
    }


def test_postgresql_tables_described_together_as_alone(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        for statement in POSTGRES_TABLES:
            db.execute(sa.text(statement))
    source = sources.connect(pg_url)
    alone = _alone(source, POSTGRES_REFS)
    events = _spec(alone, TableRef("app", "events"))
    assert (events.partition_kind, events.partition_columns) == ("RANGE", ("day",))
    assert _spec(alone, TableRef("APP", "LINES")).primary_key == ("line_no", "order_id")
    assert not isinstance(alone[TableRef("app", "twice")], TableSpec)
    assert not isinstance(alone[TableRef("app", "refused")], TableSpec)

    queries = _count_queries(monkeypatch)
    assert _together(source, POSTGRES_REFS) == alone
    # One query for every table; only the four it cannot describe are read alone.
    assert queries["describe_tables"] == 1
    assert queries["find_table"] == 4, queries

    # A column dropped and one added: the batched read sees the table as it is now.
    with engine.begin() as db:
        db.execute(sa.text('ALTER TABLE app."order" DROP COLUMN "from"'))
        db.execute(sa.text('ALTER TABLE app."order" ADD COLUMN "to" VARCHAR(10)'))
    engine.dispose()
    refs = (TableRef("app", "order"), TableRef("app", "lines"))
    queries.clear()
    together = _together(source, refs)
    assert together == _alone(source, refs)
    names = [column.name for column in _spec(together, TableRef("app", "order")).columns]
    assert names == ["select", "Group", "to"]
    assert queries["describe_tables"] == 1


def test_postgresql_batched_read_failing_describes_each_alone(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batched query refused (a catalog view the user may not read, a timeout): every
    table is described alone, and the missing one is still named."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE public.items (id INTEGER PRIMARY KEY, v TEXT)"))
    engine.dispose()
    source = sources.connect(pg_url)
    refs = (TableRef("public", "items"), TableRef("public", "gone"))
    expected = _alone(source, refs)
    queries = _count_queries(monkeypatch)
    counted = SourceDialect.run_query

    def refused(self: SourceDialect, template: str, *args: Any, **kwargs: Any) -> list[Any]:
        if template == "describe_tables":
            raise SourceError("postgresql query describe_tables failed: permission denied")
        return counted(self, template, *args, **kwargs)

    monkeypatch.setattr(SourceDialect, "run_query", refused)
    together = _together(source, refs)
    assert together == expected
    assert "PUBLIC.GONE" in str(together[TableRef("public", "gone")])
    assert queries["find_table"] == 2


SQLITE_TABLES = (
    'CREATE TABLE "order" ("select" INTEGER PRIMARY KEY, "from" TEXT, amount NUMERIC(8,2))',
    "CREATE TABLE lines (order_id BIGINT, line_no INT, sku VARCHAR(20) NOT NULL, "
    "PRIMARY KEY (line_no, order_id))",
    "CREATE TABLE Mixed (Id INTEGER, Value REAL)",
    "CREATE TABLE refused (id INTEGER PRIMARY KEY, shape GEOMETRY)",
)
SQLITE_REFS = (
    TableRef("main", "order"),
    TableRef("MAIN", "LINES"),
    TableRef("main", "mixed"),
    TableRef("main", "refused"),
    TableRef("main", "missing"),
    TableRef("other", "lines"),
)


def test_sqlite_tables_described_together_as_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as db:
        for statement in SQLITE_TABLES:
            db.execute(sa.text(statement))
    engine.dispose()
    source = sources.connect(url)
    alone = _alone(source, SQLITE_REFS)
    assert _spec(alone, TableRef("MAIN", "LINES")).primary_key == ("line_no", "order_id")
    assert not isinstance(alone[TableRef("main", "refused")], TableSpec)

    queries = _count_queries(monkeypatch)
    assert _together(source, SQLITE_REFS) == alone
    assert queries["describe_tables"] == 1
    assert queries["find_table"] == 2, queries  # refused and missing; "other" has no database
