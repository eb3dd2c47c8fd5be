"""CHANGELOG on declaratively partitioned PostgreSQL tables (issue 26 deliverable 1).

The capture triggers go on the partitioned table: PostgreSQL clones the row
trigger to every partition, including partitions created or attached later;
the TRUNCATE statement trigger sees a TRUNCATE of the whole table. An UPDATE
of the partition column moves the row: PostgreSQL fires DELETE on the old
partition and INSERT on the new one. The lake is compared with the source
value for value: through ``gluon query``'s view for DEFERRED, read from the
Delta folder with deltalake for IMMEDIATE.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows, postgres_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.lake import storage
from gluon.repo import Repository

RunCli = Callable[..., Result]
Row = tuple[object, ...]

LIST_TABLE = (
    "CREATE TABLE app.items (id integer, region text, name text, amount numeric(10,2), "
    "PRIMARY KEY (id, region)) PARTITION BY LIST (region)",
    "CREATE TABLE app.items_eu PARTITION OF app.items FOR VALUES IN ('eu')",
    "CREATE TABLE app.items_us PARTITION OF app.items FOR VALUES IN ('us')",
)

TWO_LEVEL_TABLE = (
    "CREATE TABLE app.items (id integer, day date, name text, amount numeric(10,2), "
    "PRIMARY KEY (id, day)) PARTITION BY RANGE (day)",
    "CREATE TABLE app.items_2024 PARTITION OF app.items "
    "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY HASH (id)",
    "CREATE TABLE app.items_2024_h0 PARTITION OF app.items_2024 "
    "FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE app.items_2024_h1 PARTITION OF app.items_2024 "
    "FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "CREATE TABLE app.items_2025 PARTITION OF app.items "
    "FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')",
)


def run(url: str, *statements: str) -> None:
    with sa.create_engine(url).begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def query(url: str, statement: str) -> list[Row]:
    with sa.create_engine(url).connect() as db:
        return [tuple(row) for row in db.execute(sa.text(statement))]


def offload(run_cli: RunCli, *args: str) -> Result:
    result = run_cli("offload", "-t", "app.items", "-x", *args)
    assert result.exit_code == 0, result.stdout + result.stderr
    return result


def source_rows(url: str, columns: str) -> set[Row]:
    return set(query(url, f"SELECT {columns} FROM app.items"))


def lake_view(columns: str) -> set[Row]:
    names = [name.strip() for name in columns.split(",")]
    rows = lake_rows(f"SELECT {columns} FROM app.items")
    found = [tuple(row[name] for name in names) for row in rows]
    assert len(found) == len(set(found)), "the view shows a row twice"
    return set(found)


def lake_base(columns: str) -> set[Row]:
    record = Repository(load_settings().repo_url).get_table("APP.ITEMS")
    assert record is not None
    names = [name.strip() for name in columns.split(",")]
    rows = storage.read_delta(record.base_path).to_pylist()
    found = [tuple(row[name] for name in names) for row in rows]
    assert len(found) == len(set(found)), "the base table holds a row twice"
    return set(found)


def capture_triggers(url: str) -> list[Row]:
    """(table, trigger, enabled) of every non-internal trigger, partitions included."""
    return query(
        url,
        "SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal ORDER BY 1, 2",
    )


@pytest.fixture
def pg(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = postgres_source(pg_url).url
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    return url


def test_list_partitioned_table_deferred(pg: str, run_cli: RunCli) -> None:
    columns = "id, region, name, amount"
    run(
        pg,
        *LIST_TABLE,
        "INSERT INTO app.items VALUES (1, 'eu', 'a', 1.10), (2, 'us', 'b', 2.20), "
        "(3, 'eu', 'c', NULL), (4, 'us', 'd', 4.40)",
    )
    enabled = offload(
        run_cli, "--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG"
    )
    # The spec's Table 3, note 12: possible, not recommended; said once.
    assert enabled.stderr.count("which is not recommended") == 1, enabled.stderr
    assert ("items_eu", "items_ct", "O") in capture_triggers(pg)
    assert ("items", "items_ct_truncate", "O") in capture_triggers(pg)
    assert lake_view(columns) == source_rows(pg, columns)  # the initial offload
    run(
        pg,
        "INSERT INTO app.items VALUES (5, 'eu', 'e', 5.50), (6, 'us', 'f', 6.60)",
        "UPDATE app.items SET amount = 9.99 WHERE id = 2",
        "UPDATE app.items SET region = 'us', name = 'moved' WHERE id = 1",  # eu -> us
        "DELETE FROM app.items WHERE id = 4",
        # a partition created after enable gets the row trigger
        "CREATE TABLE app.items_asia PARTITION OF app.items FOR VALUES IN ('asia')",
        "INSERT INTO app.items VALUES (7, 'asia', 'g', 7.70)",
        "UPDATE app.items SET region = 'asia' WHERE id = 3",  # eu -> asia
        # a table attached after enable, then written
        "CREATE TABLE app.items_africa (LIKE app.items)",
        "ALTER TABLE app.items ATTACH PARTITION app.items_africa FOR VALUES IN ('africa')",
        "INSERT INTO app.items VALUES (8, 'africa', 'h', 8.80)",
        "UPDATE app.items SET region = 'africa', id = 80 WHERE id = 5",
    )
    offload(run_cli, "--incremental-run-extraction")
    assert lake_view(columns) == source_rows(pg, columns)
    assert ("items_africa", "items_ct", "O") in capture_triggers(pg)
    status = run_cli("display_incremental_status", "-t", "app.items")
    assert status.exit_code == 0, status.stderr
    assert "missing" not in status.stdout and "disabled" not in status.stdout

    # A disabled clone on one partition is reported: that partition's changes are lost.
    run(pg, "ALTER TABLE app.items_us DISABLE TRIGGER items_ct")
    status = run_cli("display_incremental_status", "-t", "app.items")
    assert "capture trigger app_h.items_ct on app.items is disabled" in status.stdout
    run(pg, "ALTER TABLE app.items_us ENABLE TRIGGER items_ct")

    # Repair re-creates the triggers on the parent and every partition.
    offload(
        run_cli,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-recreate-capture-objects",
    )
    run(pg, "UPDATE app.items SET name = 'after repair' WHERE id = 8")
    offload(run_cli, "--incremental-run-extraction")
    assert lake_view(columns) == source_rows(pg, columns)
    offload(run_cli, "--incremental-run-compaction", "--incremental-wait-time=0")
    assert lake_base(columns) == source_rows(pg, columns)

    offload(run_cli, "--incremental-updates-disabled")
    assert capture_triggers(pg) == []


@pytest.mark.parametrize(
    ("method", "warned"),
    [("CHANGELOG", True), ("PG_LOGICAL", True), ("UPDATABLE", False), ("UPDATABLE_INSERT", False)],
)
def test_a_full_offload_of_a_partitioned_table_warns_of_methods_tracking_every_dml(
    pg: str, run_cli: RunCli, method: str, warned: bool
) -> None:
    """Table 3, note 12: CHANGELOG-like methods track every DML of a (sub)partitioned table
    offloaded FULL, bulk loads included: not recommended; UPDATABLE* methods are the way.
    The plan says it too (nothing runs, nothing changes)."""
    run(pg, *LIST_TABLE)
    plan = run_cli(
        "offload",
        "-t",
        "app.items",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )
    assert plan.exit_code == 0, plan.stderr
    lines = [line for line in plan.stderr.splitlines() if "not recommended" in line]
    if warned:
        assert lines == [
            f"offload: warning: app.items is a partitioned table offloaded FULL: {method} "
            "captures every change to it, bulk loads included, which is not recommended "
            "(incremental update is not built for large partitioned tables); offload its "
            "partitions with --partition-names or --offload-predicate and replay later changes "
            "with a method of the updatable view (UPDATABLE, UPDATABLE_CHANGELOG, "
            "UPDATABLE_INSERT)"
        ], plan.stderr
    else:
        assert lines == [], plan.stderr
    assert Repository(load_settings().repo_url).get_table("APP.ITEMS") is None


def test_two_level_range_hash_table_compacted(pg: str, run_cli: RunCli) -> None:
    columns = "id, day, name, amount"
    run(
        pg,
        *TWO_LEVEL_TABLE,
        "INSERT INTO app.items SELECT g, DATE '2024-03-01' + g, 'r' || g, g * 1.5 "
        "FROM generate_series(1, 12) g",
    )
    offload(run_cli, "--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")
    assert {row[0] for row in capture_triggers(pg)} == {
        "items",
        "items_2024",
        "items_2024_h0",
        "items_2024_h1",
        "items_2025",
    }
    run(
        pg,
        "UPDATE app.items SET day = day + 365 WHERE id <= 3",  # 2024 -> 2025 (first level)
        "UPDATE app.items SET id = id + 100 WHERE id IN (4, 5)",  # another hash partition
        "UPDATE app.items SET name = NULL, amount = 0 WHERE id = 6",
        "DELETE FROM app.items WHERE id = 7",
        "INSERT INTO app.items VALUES (50, '2025-06-01', 'new', 1.25)",
    )
    offload(run_cli, "--incremental-run-extraction")
    assert lake_view(columns) == source_rows(pg, columns)
    offload(run_cli, "--incremental-run-compaction", "--incremental-wait-time=0")
    assert lake_base(columns) == source_rows(pg, columns)
    assert (50, dt.date(2025, 6, 1), "new", Decimal("1.25")) in lake_base(columns)
    run(pg, "TRUNCATE app.items")
    assert query(pg, "SELECT gl_op FROM app_h.items_log") == [("T",)]


def test_list_partitioned_table_immediate_keyed_by_a_column_outside_the_partitioning(
    pg: str, run_cli: RunCli
) -> None:
    """No primary key, --incremental-key-columns=id: a row moving to another partition keeps
    its key, so the DELETE on its old partition must not remove it from the lake."""
    columns = "id, region, name"
    run(
        pg,
        "CREATE TABLE app.items (id integer NOT NULL, region text, name text) "
        "PARTITION BY LIST (region)",
        "CREATE TABLE app.items_eu PARTITION OF app.items FOR VALUES IN ('eu')",
        "CREATE TABLE app.items_us PARTITION OF app.items FOR VALUES IN ('us')",
        "INSERT INTO app.items VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'eu', 'c')",
    )
    offload(
        run_cli,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-merge-mode=IMMEDIATE",
        "--incremental-key-columns=id",
    )
    run(
        pg,
        "UPDATE app.items SET region = 'us', name = 'moved' WHERE id = 1",
        "UPDATE app.items SET region = 'eu' WHERE id = 2",
        "DELETE FROM app.items WHERE id = 3",
        "INSERT INTO app.items VALUES (4, 'us', 'd')",
    )
    offload(run_cli, "--incremental-run-extraction")
    expected = source_rows(pg, columns)
    assert expected == {(1, "us", "moved"), (2, "eu", "b"), (4, "us", "d")}
    assert lake_base(columns) == expected


def test_a_key_shifting_update_moving_rows_between_partitions(pg: str, run_cli: RunCli) -> None:
    """Under a deferrable key, one statement moves a row into the key another row of the same
    statement leaves by moving to another partition: the moving row's DELETE on its old
    partition must not remove what the other row moved into that key."""
    columns = "id, region, name"
    run(
        pg,
        "CREATE TABLE app.items (id integer, region text, name text, "
        "PRIMARY KEY (id, region) DEFERRABLE INITIALLY DEFERRED) PARTITION BY LIST (region)",
        "CREATE TABLE app.items_eu PARTITION OF app.items FOR VALUES IN ('eu')",
        "CREATE TABLE app.items_us PARTITION OF app.items FOR VALUES IN ('us')",
        "INSERT INTO app.items VALUES (1, 'us', 'one'), (2, 'us', 'two'), (3, 'eu', 'three')",
    )
    offload(run_cli, "--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")
    run(
        pg,
        # (1, us) -> (2, us) stays in its partition; (2, us) -> (2, eu) moves partition
        "UPDATE app.items SET id = CASE id WHEN 1 THEN 2 ELSE id END, "
        "region = CASE id WHEN 2 THEN 'eu' ELSE region END WHERE region = 'us'",
    )
    offload(run_cli, "--incremental-run-extraction")
    expected = source_rows(pg, columns)
    assert expected == {(2, "us", "one"), (2, "eu", "two"), (3, "eu", "three")}
    assert lake_view(columns) == expected
