"""The shared slot is PG_LOGICAL's default (issue 33 item 1): a table enabled without
``--incremental-pg-logical-slot`` joins its database's shared slot when it can be a member;
one that cannot (stored generated columns, a user who does not own it) gets a slot of its
own, with an INFO line saying why; an explicit ``=database`` still refuses such a table in
one line, changing nothing; tables enabled with a slot of their own keep it, next to
members enabled later.

Real PostgreSQL (wal_level=logical), Sail and Delta tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, lake_rows
from support.tables import compact, extract, ok

from gluon.config import load_settings
from gluon.repo import Repository

ENABLE = ("-x", "--incremental-updates-enabled", "--incremental-extraction-method=PG_LOGICAL")
SETUP = (
    "CREATE SCHEMA IF NOT EXISTS app",
    "CREATE TABLE app.orders (id INTEGER PRIMARY KEY, v TEXT)",
    "INSERT INTO app.orders SELECT g, 'o' || g FROM generate_series(1, 20) g",
    "CREATE TABLE app.items (id INTEGER PRIMARY KEY, n INTEGER)",
    "INSERT INTO app.items SELECT g, g FROM generate_series(1, 20) g",
    "CREATE TABLE app.gen (id INTEGER PRIMARY KEY, twice BIGINT GENERATED ALWAYS AS "
    "(id * 2) STORED)",
    "INSERT INTO app.gen (id) SELECT generate_series(1, 5)",
)


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    _run(engine, *SETUP)
    return engine


def _run(engine: sa.Engine, *statements: str) -> None:
    with engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _one(engine: sa.Engine, query: str) -> Any:
    with engine.connect() as db:
        return db.execute(sa.text(query)).scalar_one()


def _kinds(table_key: str) -> list[str]:
    state = Repository(load_settings().repo_url).incremental.get_state(table_key)
    assert state is not None
    return [item.kind for item in state.source_objects]


def _slots(engine: sa.Engine) -> list[str]:
    with engine.connect() as db:
        rows = db.execute(sa.text("SELECT slot_name FROM pg_replication_slots ORDER BY 1"))
        return [str(row[0]) for row in rows]


def _published(engine: sa.Engine) -> list[str]:
    with engine.connect() as db:
        rows = db.execute(
            sa.text("SELECT schemaname || '.' || tablename FROM pg_publication_tables")
        )
        return sorted(str(row[0]) for row in rows)


def _matches(engine: sa.Engine, table: str) -> None:
    with engine.connect() as db:
        source = sorted(tuple(row) for row in db.execute(sa.text(f"SELECT * FROM {table}")))
    lake = sorted(tuple(row.values()) for row in lake_rows(f"SELECT * FROM {table}"))
    assert lake == source, table


def _cycle(run_cli: RunCli, table: str) -> None:
    extract(run_cli, table)
    compact(run_cli, table)


def test_a_table_enabled_without_the_option_joins_the_shared_slot(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    ok(run_cli("offload", "-t", "app.orders", *ENABLE))
    assert _kinds("APP.ORDERS") == ["shared_slot_table"]
    assert _published(engine) == ["app.orders"]
    slots = _slots(engine)
    assert len(slots) == 1 and slots[0].startswith("gluondb_"), slots  # no slot of its own
    _run(
        engine,
        "UPDATE app.orders SET v = 'changed' WHERE id < 5",
        "DELETE FROM app.orders WHERE id = 9",
    )
    _cycle(run_cli, "app.orders")
    _matches(engine, "app.orders")


def test_a_table_with_a_generated_column_gets_its_own_slot_and_says_why(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    result = ok(run_cli("offload", "-t", "app.gen", "-v", *ENABLE))
    said = [line for line in result.stderr.splitlines() if "slot of its own" in line]
    assert len(said) == 1, result.stderr
    assert "generated columns (twice)" in said[0], said[0]
    assert "--incremental-pg-logical-slot=table" in said[0], said[0]
    assert _kinds("APP.GEN") == ["replication_slot"]
    assert [slot for slot in _slots(engine) if not slot.startswith("gluondb_")] == _slots(engine)
    assert len(_slots(engine)) == 1 and _published(engine) == []
    _run(engine, "INSERT INTO app.gen (id) VALUES (50)", "UPDATE app.gen SET id = 60 WHERE id = 1")
    _cycle(run_cli, "app.gen")
    _matches(engine, "app.gen")  # the generated values too


def test_an_explicit_database_scope_still_refuses_a_table_that_cannot_be_a_member(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    refused = run_cli("offload", "-t", "app.gen", *ENABLE, "--incremental-pg-logical-slot=database")
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
    assert "generated columns (twice)" in lines[0], lines[0]
    assert "--incremental-pg-logical-slot=table" in lines[0], lines[0]
    assert _slots(engine) == [] and _published(engine) == []
    assert Repository(load_settings().repo_url).get_table("APP.GEN") is None


def test_a_table_with_its_own_slot_and_a_member_enabled_later_both_stay_exact(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """As after an upgrade: a table enabled with a slot of its own (the old default, said
    with =table), then a table enabled with the new default."""
    ok(run_cli("offload", "-t", "app.items", *ENABLE, "--incremental-pg-logical-slot=table"))
    _run(engine, "UPDATE app.items SET n = n + 100 WHERE id % 2 = 0")
    ok(run_cli("offload", "-t", "app.orders", *ENABLE))
    assert _kinds("APP.ITEMS") == ["replication_slot"]
    assert _kinds("APP.ORDERS") == ["shared_slot_table"]
    assert len(_slots(engine)) == 2 and _published(engine) == ["app.orders"]
    for round_ in range(2):
        _run(
            engine,
            f"UPDATE app.items SET n = {round_} WHERE id % 3 = {round_}",
            f"INSERT INTO app.items VALUES ({100 + round_}, NULL)",
            f"UPDATE app.orders SET v = 'r{round_}' WHERE id % 4 = {round_}",
            f"DELETE FROM app.orders WHERE id = {10 + round_}",
        )
        for table in ("app.items", "app.orders"):
            _cycle(run_cli, table)
            _matches(engine, table)


def test_a_table_the_user_does_not_own_gets_its_own_slot(
    engine: sa.Engine, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ALTER PUBLICATION ... ADD TABLE needs the table's owner, a slot of its own only
    REPLICATION: a user with REPLICATION who does not own the table is not refused."""
    database = engine.url.database
    role = f"reader_{database}"[:60]
    _run(
        engine,
        f"CREATE ROLE {role} LOGIN REPLICATION",
        f"GRANT ALL ON DATABASE {database} TO {role}",
        f"GRANT USAGE, CREATE ON SCHEMA app TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {role}",
    )
    url = engine.url.set(username=role)
    monkeypatch.setenv("GLUON_SOURCE_URL", url.render_as_string(hide_password=False))
    refused = run_cli(
        "offload", "-t", "app.orders", *ENABLE, "--incremental-pg-logical-slot=database"
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
    assert f"{role} does not own app.orders" in lines[0], lines[0]
    assert _slots(engine) == [] and _published(engine) == []
    result = ok(run_cli("offload", "-t", "app.orders", "-v", *ENABLE))
    said = [line for line in result.stderr.splitlines() if "slot of its own" in line]
    assert len(said) == 1 and f"{role} does not own app.orders" in said[0], result.stderr
    assert _kinds("APP.ORDERS") == ["replication_slot"]
    _run(engine, "UPDATE app.orders SET v = 'by the app' WHERE id = 3")
    _cycle(run_cli, "app.orders")
    _matches(engine, "app.orders")


def test_a_deferrable_primary_key_is_refused_in_either_scope(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """A DEFERRABLE primary key is no replica identity (published, the application's UPDATEs
    would fail; a slot of its own would get no old keys): enable refuses it in one line,
    with the default scope as with =database, before creating anything."""
    _run(
        engine,
        "CREATE TABLE app.shifted (id INTEGER PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v TEXT)",
        "INSERT INTO app.shifted SELECT g, 's' || g FROM generate_series(1, 10) g",
    )
    for scope in ((), ("--incremental-pg-logical-slot=database",)):
        refused = run_cli("offload", "-t", "app.shifted", *ENABLE, *scope)
        lines = refused.stderr.strip().splitlines()
        assert refused.exit_code != 0 and len(lines) == 1, refused.stderr
        assert "primary key of app.shifted is DEFERRABLE" in lines[0], lines[0]
        assert _slots(engine) == [] and _published(engine) == []
