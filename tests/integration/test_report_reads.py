"""``offload_status_report`` counts every changelog of a database in one query (issue 33
item 4: the report over 200 tables made one round trip per table for it)."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import GLUON_SETTINGS, run_cli
from support.tables import App, enable, extract

from gluon.source.base import SourceDialect


def _report_tables(out: Path, queries: collections.Counter[str]) -> list[dict[str, Any]]:
    """Each table's entry in a new JSON report; ``queries`` counts the source's."""
    queries.clear()
    for old in out.glob("*") if out.exists() else ():
        old.unlink()
    result = run_cli("offload_status_report", "--output-format=json", f"--output-dir={out}")
    assert result.exit_code == 0, result.stderr
    tables: list[dict[str, Any]] = json.loads(next(out.iterdir()).read_text())["tables"]
    return tables


def _report(out: Path, queries: collections.Counter[str]) -> dict[str, int | None]:
    """Each table's changelog rows in a new JSON report; ``queries`` counts the source's."""
    return {table["table"]: table["changelog_rows"] for table in _report_tables(out, queries)}


def _oldest_ages(out: Path, queries: collections.Counter[str]) -> dict[str, float | None]:
    """Each table's oldest pending change's age in a new JSON report."""
    return {
        table["table"]: table["oldest_pending_age_seconds"]
        for table in _report_tables(out, queries)
    }


def _app(url: str, schema: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    """Two CHANGELOG tables with 2 and 3 changes waiting after one extraction each."""
    for name in GLUON_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    if os.environ.get("GLUON_TEST_SPARK_REMOTE"):
        monkeypatch.setenv("SPARK_REMOTE", os.environ["GLUON_TEST_SPARK_REMOTE"])
    monkeypatch.setenv("OFFLOAD_HOME", str(home))
    app = App(url, schema)
    monkeypatch.setenv("GLUON_SOURCE_URL", app.url)
    items, orders = app.create_table("items", 3), app.create_table("orders", 3)
    for table in (items, orders):
        enable(run_cli, table)
        app.change(table, first_key=100)
        extract(run_cli, table)
    app.run(f"INSERT INTO {items} VALUES (200, 'a', 1), (201, 'b', 2)")
    app.run(f"INSERT INTO {orders} VALUES (200, 'a', 1), (201, 'b', 2), (202, 'c', 3)")
    return app


def _count_queries(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """The source's queries by template, counted from now on (they still run)."""
    queries: collections.Counter[str] = collections.Counter()
    run_query = SourceDialect.run_query

    def counted(self: SourceDialect, template: str, *args: Any, **kwargs: Any) -> list[Any]:
        queries[template] += 1
        return run_query(self, template, *args, **kwargs)

    monkeypatch.setattr(SourceDialect, "run_query", counted)
    return queries


def test_changelogs_counted_in_one_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(f"sqlite:///{tmp_path / 'app.db'}", "main", tmp_path / "home", monkeypatch)
    queries = _count_queries(monkeypatch)
    out = tmp_path / "reports"
    assert _report(out, queries) == {"MAIN.ITEMS": 2, "MAIN.ORDERS": 3}
    assert (queries["count_changes_of"], queries["count_changes"]) == (1, 0)
    # The count read every changelog: none is looked up in the catalog again.
    assert queries["object_exists"] == 0

    # One changelog gone: the one query fails, each table is counted alone (as before).
    app.run("DROP TABLE main.main_h_orders_log")
    assert _report(out, queries) == {"MAIN.ITEMS": 2, "MAIN.ORDERS": None}
    assert queries["count_changes"] == 1
    assert queries["object_exists"] == 2  # each table looks its changelog up (one is gone)


def test_changelogs_counted_in_one_query_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _app(pg_url, "public", tmp_path / "home", monkeypatch)
    queries = _count_queries(monkeypatch)
    assert _report(tmp_path / "reports", queries) == {"PUBLIC.ITEMS": 2, "PUBLIC.ORDERS": 3}
    assert (queries["count_changes_of"], queries["count_changes"]) == (1, 0)
    assert queries["object_exists"] == 0


def test_oldest_changes_read_in_one_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oldest pending change of every changelog of a database comes from one query, not
    one ``oldest_change`` a table; a changelog that cannot be read makes each table read
    its own (and only that one's is unknown)."""
    app = _app(f"sqlite:///{tmp_path / 'app.db'}", "main", tmp_path / "home", monkeypatch)
    queries = _count_queries(monkeypatch)
    out = tmp_path / "reports"
    ages = _oldest_ages(out, queries)
    assert sorted(ages) == ["MAIN.ITEMS", "MAIN.ORDERS"]
    assert all(age is not None and age >= 0 for age in ages.values()), ages
    assert (queries["oldest_changes_of"], queries["oldest_change"]) == (1, 0)

    app.run("DROP TABLE main.main_h_orders_log")
    ages = _oldest_ages(out, queries)
    assert ages["MAIN.ITEMS"] is not None and ages["MAIN.ORDERS"] is None, ages
    assert queries["oldest_change"] == 1


def test_oldest_changes_read_in_one_query_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _app(pg_url, "public", tmp_path / "home", monkeypatch)
    queries = _count_queries(monkeypatch)
    ages = _oldest_ages(tmp_path / "reports", queries)
    assert sorted(ages) == ["PUBLIC.ITEMS", "PUBLIC.ORDERS"]
    assert all(age is not None and age >= 0 for age in ages.values()), ages
    assert (queries["oldest_changes_of"], queries["oldest_change"]) == (1, 0)


def _drift(out: Path, queries: collections.Counter[str]) -> dict[str, list[str]]:
    """Each table's schema findings (``schema_changed``, ``schema_refused``) in a new report."""
    return {
        table["table"]: [
            finding["code"]
            for finding in table.get("findings", [])
            if finding["code"].startswith("schema_")
        ]
        for table in _report_tables(out, queries)
    }


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_tables_described_in_one_catalog_query(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema drift check reads every table's columns, keys and types in one catalog
    query a database (it made four a table: find_table, describe_columns, primary_key,
    partitioning); a column added or dropped still shows."""
    if dialect == "sqlite":
        app = _app(f"sqlite:///{tmp_path / 'app.db'}", "main", tmp_path / "home", monkeypatch)
    else:
        app = _app(request.getfixturevalue("pg_url"), "public", tmp_path / "home", monkeypatch)
    items, orders = (f"{app.schema.upper()}.{name}" for name in ("ITEMS", "ORDERS"))
    queries = _count_queries(monkeypatch)
    out = tmp_path / "reports"
    assert _drift(out, queries) == {items: [], orders: []}
    assert queries["describe_tables"] == 1, queries
    described_alone = ("find_table", "describe_columns", "primary_key", "partitioning")
    assert [queries[template] for template in described_alone] == [0, 0, 0, 0], queries

    app.run(f"ALTER TABLE {app.schema}.items ADD COLUMN added_later INTEGER")
    dropped: list[str] = []
    if dialect == "postgresql":  # SQLite drops no column a trigger names
        app.run(f"ALTER TABLE {app.schema}.orders DROP COLUMN amount")
        dropped = ["schema_refused"]
    assert _drift(out, queries) == {items: ["schema_changed"], orders: dropped}
    assert queries["describe_tables"] == 1, queries
    assert queries["describe_columns"] == 0, queries


def _capture_findings(out: Path, queries: collections.Counter[str]) -> dict[str, list[str]]:
    """Each table's ``capture_broken`` messages in a new report."""
    return {
        table["table"]: [
            finding["message"]
            for finding in table.get("findings", [])
            if finding["code"] == "capture_broken"
        ]
        for table in _report_tables(out, queries)
    }


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_capture_triggers_checked_in_one_query(
    dialect: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture check reads every table's trigger state in one query a database (it made
    one a table); a trigger disabled or dropped is still reported on its own table."""
    if dialect == "sqlite":
        app = _app(f"sqlite:///{tmp_path / 'app.db'}", "main", tmp_path / "home", monkeypatch)
    else:
        app = _app(request.getfixturevalue("pg_url"), "public", tmp_path / "home", monkeypatch)
    items, orders = (f"{app.schema.upper()}.{name}" for name in ("ITEMS", "ORDERS"))
    queries = _count_queries(monkeypatch)
    out = tmp_path / "reports"
    assert _capture_findings(out, queries) == {items: [], orders: []}
    assert (queries["capture_trigger_states"], queries["capture_trigger_state"]) == (1, 0)

    if dialect == "sqlite":  # SQLite triggers cannot be disabled: they are dropped
        triggers = app.engine.connect().execute(
            sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'orders'")
        )
        app.run(*(f'DROP TRIGGER main."{name}"' for (name,) in triggers))
        broken = "is missing"
    else:
        app.run(f"ALTER TABLE {app.schema}.orders DISABLE TRIGGER USER")
        broken = "is disabled"
    found = _capture_findings(out, queries)
    assert found[items] == [] and found[orders], found
    assert all("orders" in message.lower() for message in found[orders]), found
    assert broken in found[orders][0], found
    assert (queries["capture_trigger_states"], queries["capture_trigger_state"]) == (1, 0)
