"""PostgreSQL statement-level capture (transition tables): which trigger a table gets, and
what a multi-row statement records (templates/postgresql/_statement_capture.sql.j2)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.capture_contract import CaptureEnv, enable
from support.incremental import lake_rows, postgres_source
from typer.testing import Result

from gluon.capture.existing import capture_problems
from gluon.methods import registered_methods
from gluon.source import connect
from gluon.source.base import SourceDialect

CHANGELOG = registered_methods()["CHANGELOG"]
LEVELS = (
    "SELECT t.tgname, (t.tgtype & 1) = 1 AS row_level, t.tgoldtable IS NOT NULL "
    "OR t.tgnewtable IS NOT NULL AS transitions FROM pg_trigger t "
    "WHERE t.tgrelid = 'app.{table}'::regclass AND NOT t.tgisinternal ORDER BY t.tgname"
)


@pytest.fixture
def env(pg_url: str) -> Iterator[CaptureEnv]:
    source = connect(pg_url)

    def create_table(name: str, primary_key: bool) -> None:
        key = " PRIMARY KEY" if primary_key else ""
        environment.run(
            # IF NOT EXISTS: a test may create its table with another key first
            f"CREATE TABLE IF NOT EXISTS app.{name} (id integer{key}, name text, "
            "amount numeric(12,2), noted date)"
        )

    environment = CaptureEnv(source, "app", create_table, lambda: None, {})
    environment.run("CREATE SCHEMA app")
    yield environment
    source.engine.dispose()


def test_a_plain_table_gets_one_statement_trigger_per_event(env: CaptureEnv) -> None:
    enabled = enable(env, CHANGELOG, seed=False)
    assert env.query(LEVELS.format(table="orders")) == [
        ("orders_ct", False, True),
        ("orders_ct_delete", False, True),
        ("orders_ct_insert", False, True),
        ("orders_ct_truncate", False, False),
    ]
    assert capture_problems(env.source, enabled.spec, enabled.objects) == []


def test_an_insert_only_method_keeps_the_row_trigger(env: CaptureEnv) -> None:
    """CHANGELOG_INSERT records uncaptured updates and deletes by key: the row path."""
    enable(env, registered_methods()["CHANGELOG_INSERT"], seed=False)
    assert env.query(LEVELS.format(table="orders")) == [
        ("orders_ct", True, False),
        ("orders_ct_truncate", False, False),
    ]


def test_multi_row_statements_record_each_row_once_in_statement_order(env: CaptureEnv) -> None:
    enabled = enable(env, CHANGELOG, seed=False)
    env.run(
        "INSERT INTO app.orders (id, name) SELECT g, 'n' || g FROM generate_series(1, 4) g",
        # 1 and 2 change, 3 is written unchanged (no change), 4 is untouched
        "UPDATE app.orders SET name = CASE WHEN id = 3 THEN name ELSE 'x' || id END WHERE id <= 3",
        "DELETE FROM app.orders WHERE id IN (2, 4)",
    )
    changes = [(op, key, name) for op, _, key, name, _, _ in enabled.changes()]
    assert sorted(changes[:4]) == [("I", k, f"n{k}") for k in (1, 2, 3, 4)]
    assert sorted(changes[4:6]) == [("U", 1, "x1"), ("U", 2, "x2")]
    assert sorted(changes[6:]) == [("D", 2, None), ("D", 4, None)]


def test_keys_shifted_onto_each_other_delete_only_the_key_left_empty(env: CaptureEnv) -> None:
    """UPDATE id = id + 1 under a deferrable key: 2 and 3 are still held afterwards (by the
    rows that moved into them), only 1 is gone, 4 is new."""
    env.run(
        "CREATE TABLE app.shifted (id integer, name text, amount numeric(12,2), noted date, "
        "CONSTRAINT shifted_pk PRIMARY KEY (id) DEFERRABLE INITIALLY IMMEDIATE)"
    )
    env.run("INSERT INTO app.shifted (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    enabled = enable(env, CHANGELOG, table="shifted", seed=False)
    env.run("UPDATE app.shifted SET id = id + 1")
    changes = sorted((op, key, name) for op, _, key, name, _, _ in enabled.changes())
    assert changes == [("D", 1, None), ("I", 4, "c"), ("U", 2, "a"), ("U", 3, "b")]


def _in_statement_groups(
    changes: list[tuple[str, int, str | None]], groups: list[list[tuple[str, int, str | None]]]
) -> list[list[tuple[str, int, str | None]]]:
    """``changes`` cut into consecutive runs as long as ``groups``' (one run per statement),
    each sorted: within one statement the order of its changes is free (they are of
    different keys), across statements it is the statements' order."""
    runs, start = [], 0
    for group in groups:
        runs.append(sorted(changes[start : start + len(group)], key=repr))
        start += len(group)
    assert start == len(changes), changes
    return runs


def test_a_key_changed_by_several_statements_keeps_their_order(env: CaptureEnv) -> None:
    enabled = enable(env, CHANGELOG, seed=False)
    env.run(
        # one transaction (env.run)
        "INSERT INTO app.orders (id, name) VALUES (1, 'first')",
        "UPDATE app.orders SET id = 2 WHERE id = 1",
        "UPDATE app.orders SET id = 1, name = 'back' WHERE id = 2",
        "DELETE FROM app.orders WHERE id = 1",
        "INSERT INTO app.orders (id, name) VALUES (1, 'last')",
        "INSERT INTO app.orders (id, name) VALUES (2, 'two'), (3, 'three')",
        # one statement: 2 changes in place, 3 moves to 5
        "UPDATE app.orders SET id = CASE id WHEN 3 THEN 5 ELSE id END, name = name || '!' "
        "WHERE id IN (2, 3)",
        "DELETE FROM app.orders WHERE id = 5",
        "INSERT INTO app.orders (id, name) VALUES (5, 'again')",
    )
    statements: list[list[tuple[str, int, str | None]]] = [
        [("I", 1, "first")],
        [("D", 1, None), ("I", 2, "first")],
        [("D", 2, None), ("I", 1, "back")],
        [("D", 1, None)],
        [("I", 1, "last")],
        [("I", 2, "two"), ("I", 3, "three")],
        [("U", 2, "two!"), ("D", 3, None), ("I", 5, "three!")],
        [("D", 5, None)],
        [("I", 5, "again")],
    ]
    changes = [(op, key, name) for op, _, key, name, _, _ in enabled.changes()]
    assert _in_statement_groups(changes, statements) == [
        sorted(group, key=repr) for group in statements
    ]


def test_a_nullable_key_pairs_null_with_null(env: CaptureEnv) -> None:
    env.run(
        "CREATE TABLE app.nullable (id integer, name text, amount numeric(12,2), noted date, "
        "CONSTRAINT nullable_id UNIQUE NULLS NOT DISTINCT (id))"
    )
    env.run("INSERT INTO app.nullable (id, name) VALUES (NULL, 'a'), (1, 'b')")
    enabled = enable(env, CHANGELOG, table="nullable", keys=("id",), seed=False)
    env.run("UPDATE app.nullable SET name = name || '!'")
    changes = sorted(
        ((op, key, name) for op, _, key, name, _, _ in enabled.changes()),
        key=lambda change: (change[1] is not None, change),
    )
    assert changes == [("U", None, "a!"), ("U", 1, "b!")]


def test_a_key_whose_text_changes_is_a_delete_and_an_insert(env: CaptureEnv) -> None:
    """numeric 1.0 = 1.00, but the lake tells their text apart: an UPDATE between them is
    a delete and an insert (keys of such types pair by their text, integers by value)."""
    env.run(
        "CREATE TABLE app.exact (id numeric PRIMARY KEY, name text, amount numeric, noted date)"
    )
    env.run("INSERT INTO app.exact (id, name) VALUES (1.0, 'a'), (2, 'b')")
    enabled = enable(env, CHANGELOG, table="exact", seed=False)
    env.run("UPDATE app.exact SET id = CASE WHEN id = 1 THEN 1.00 ELSE id END, name = name || '!'")
    changes = sorted((op, str(key), name) for op, _, key, name, _, _ in enabled.changes())
    assert changes == [("D", "1.0", None), ("I", "1.00", "a!"), ("U", "2", "b!")]


def test_dml_goes_on_after_a_column_is_dropped(env: CaptureEnv) -> None:
    """The statement no longer plans with the dropped column: it records through to_jsonb,
    the dropped column as NULL, and the application's statement succeeds."""
    enabled = enable(env, CHANGELOG, seed=False)
    env.run("INSERT INTO app.orders (id, name, amount) VALUES (1, 'a', 1.5)")
    env.run("ALTER TABLE app.orders DROP COLUMN name")
    env.run(
        "UPDATE app.orders SET amount = 2.5 WHERE id = 1",
        "INSERT INTO app.orders (id, amount) VALUES (2, 3.5)",
        "DELETE FROM app.orders WHERE id = 1",
    )
    rows = env.query(f"SELECT gl_op, id, name, amount FROM {enabled.log} ORDER BY gl_seq")
    assert [(op, key, name, str(amount)) for op, key, name, amount in rows] == [
        ("I", 1, "a", "1.50"),
        ("U", 1, None, "2.50"),
        ("I", 2, None, "3.50"),
        ("D", 1, None, "None"),
    ]


def test_capture_takes_no_subtransaction(env: CaptureEnv) -> None:
    """The statement path picks its dropped-column fallback by a catalog check, not by an
    EXCEPTION block: a block would run each statement's changelog write in a subtransaction
    that takes a transaction id of its own (ids are handed out in order, cluster-wide, and
    nothing else writes while the test runs)."""
    enabled = enable(env, CHANGELOG, seed=False)
    current = sa.text("SELECT pg_current_xact_id()::text::bigint")
    with env.source.engine.connect() as db:
        with db.begin():
            for statement in (
                "INSERT INTO app.orders (id, name) VALUES (1, 'a')",
                "UPDATE app.orders SET name = 'b' WHERE id = 1",
                "DELETE FROM app.orders WHERE id = 1",
            ):
                db.execute(sa.text(statement))
            captured = db.execute(current).scalar_one()
        with db.begin():
            following = db.execute(current).scalar_one()
    assert following - captured == 1  # no id was taken in between, by a subtransaction
    changes = [(op, key, name) for op, _, key, name, _, _ in enabled.changes()]
    assert changes == [("I", 1, "a"), ("U", 1, "b"), ("D", 1, None)]


def test_a_row_trigger_enabled_before_works_until_recreate_installs_statement_triggers(
    pg_url: str,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    """A table enabled before statement-level capture has the row trigger (made here by
    hand on the function, whose row path is the one it had then): it keeps capturing and
    status sees nothing wrong; --incremental-recreate-capture-objects installs the statement
    triggers, and the lake stays equal to the table throughout."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {table} (id integer PRIMARY KEY, name text)"))
        db.execute(sa.text(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')"))
    enable_args = ("--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")
    assert run_cli("offload", "-t", table, "-x", *enable_args).exit_code == 0
    dialect = connect(source.url)
    # The row trigger of a table enabled before (the function still has that row path).
    for statement in (
        "DROP TRIGGER items_ct_insert ON app.items",
        "DROP TRIGGER items_ct_delete ON app.items",
        "DROP TRIGGER items_ct ON app.items",
        "CREATE TRIGGER items_ct AFTER INSERT OR UPDATE OR DELETE ON app.items "
        "FOR EACH ROW EXECUTE FUNCTION app_h.items_ct()",
    ):
        with source.engine.begin() as db:
            db.execute(sa.text(statement))
    levels = LEVELS.format(table="items")
    assert query(dialect, levels) == [
        ("items_ct", True, False),
        ("items_ct_truncate", False, False),
    ]

    def in_step(*statements: str) -> None:
        with source.engine.begin() as db:
            for statement in statements:
                db.execute(sa.text(statement))
        extracted = run_cli("offload", "-t", table, "-x", "--incremental-run-extraction")
        assert extracted.exit_code == 0, extracted.stderr
        assert lake_rows("SELECT id, name FROM app.items ORDER BY id") == [
            dict(zip(("id", "name"), row, strict=True))
            for row in query(dialect, f"SELECT id, name FROM {table} ORDER BY id")
        ]

    in_step(f"UPDATE {table} SET name = name || '!'", f"INSERT INTO {table} VALUES (3, 'c')")
    status = run_cli("display_incremental_status", "-t", table)
    assert status.exit_code == 0 and "is disabled" not in status.stdout, status.stdout

    repaired = run_cli(
        "offload", "-t", table, "-x", *enable_args, "--incremental-recreate-capture-objects"
    )
    assert repaired.exit_code == 0, repaired.stderr
    assert query(dialect, levels) == [
        ("items_ct", False, True),
        ("items_ct_delete", False, True),
        ("items_ct_insert", False, True),
        ("items_ct_truncate", False, False),
    ]
    in_step(f"UPDATE {table} SET id = id + 10 WHERE id = 1", f"DELETE FROM {table} WHERE id = 2")
    dialect.engine.dispose()


def query(dialect: SourceDialect, statement: str) -> list[tuple[object, ...]]:
    with dialect.engine.connect() as db:
        return [tuple(row) for row in db.execute(sa.text(statement))]


def test_a_partition_enabled_on_its_own_captures_writes_through_its_parent(
    env: CaptureEnv,
) -> None:
    """A statement naming the partitioned table fires no statement trigger of its
    partitions: a partition (and an inheritance child) keeps the row trigger."""
    env.run(
        "CREATE TABLE app.parted (id integer PRIMARY KEY, name text, amount numeric(12,2), "
        "noted date) PARTITION BY RANGE (id)",
        "CREATE TABLE app.parted_low PARTITION OF app.parted FOR VALUES FROM (0) TO (100)",
    )
    enabled = enable(env, CHANGELOG, table="parted_low", seed=False)
    env.run(
        "INSERT INTO app.parted (id, name) VALUES (1, 'a'), (2, 'b')",
        "UPDATE app.parted SET name = 'c' WHERE id = 1",
        "DELETE FROM app.parted WHERE id = 2",
    )
    assert [(op, key, name) for op, _, key, name, _, _ in enabled.changes()] == [
        ("I", 1, "a"),
        ("I", 2, "b"),
        ("U", 1, "c"),
        ("D", 2, None),
    ]
