"""Capture on PostgreSQL: the shared contract (``support.capture_contract``) plus what
only PostgreSQL shows: a hybrid schema, and concurrent writers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.capture_contract import CaptureContract, CaptureEnv, enable, snapshot_rows

from gluon.capture import changelog
from gluon.capture import objects as capture_objects
from gluon.errors import SourceError
from gluon.methods import registered_methods
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.naming import TableRef
from gluon.source import connect

# The contract is about capture objects in schemas (changelog, triggers, views): PG_LOGICAL
# creates a replication slot only, covered by tests/integration/test_pg_logical.py.
METHODS = sorted(
    name
    for name, m in registered_methods().items()
    if m.supports_dialect("postgresql") and not m.has_object(SourceObject.REPLICATION_SLOT)
)

NAMES = {
    SourceObject.CHANGELOG_SEQUENCE: ("app_h", "orders_seq"),
    SourceObject.CHANGELOG_TABLE: ("app_h", "orders_log"),
    SourceObject.CHANGELOG_TRIGGER: ("app_h", "orders_ct"),
    SourceObject.UPDATABLE_VIEW: ("app_h", "orders_uv"),
    SourceObject.UPDATABLE_TRIGGER: ("app_h", "orders_uv"),
    SourceObject.LAKE_ROWS_TABLE: ("app_h", "orders_lk"),
}

# Every object in the user schemas, with its definition (no oids: they change on re-creation).
USER_SCHEMA = (
    "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
)
CATALOG = f"""
SELECT 'schema', n.nspname, '', ''
FROM pg_namespace n WHERE {USER_SCHEMA}
UNION ALL
SELECT 'class', n.nspname, c.relname,
       c.relkind::text || ' ' || COALESCE(pg_get_viewdef(c.oid), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_SCHEMA}
UNION ALL
SELECT 'column', n.nspname, c.relname || '.' || a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {USER_SCHEMA} AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'proc', n.nspname, p.proname, p.prosrc
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {USER_SCHEMA}
UNION ALL
SELECT 'trigger', n.nspname, c.relname || '.' || t.tgname, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {USER_SCHEMA} AND NOT t.tgisinternal
"""


@pytest.fixture(params=METHODS)
def method(request: pytest.FixtureRequest) -> type[ExtractionMethod]:
    return registered_methods()[request.param]


@pytest.fixture
def env(pg_url: str) -> Iterator[CaptureEnv]:
    source = connect(pg_url)

    def create_table(name: str, primary_key: bool) -> None:
        key = " PRIMARY KEY" if primary_key else ""
        environment.run(
            f"CREATE TABLE app.{name} (id integer{key}, name text, amount numeric(12,2), "
            "noted date)"
        )

    def snapshot() -> Any:
        return snapshot_rows(source, CATALOG)

    environment = CaptureEnv(source, "app", create_table, snapshot, NAMES)
    environment.run("CREATE SCHEMA app")
    yield environment
    source.engine.dispose()


class TestPostgresCapture(CaptureContract):
    def test_a_lower_sequence_committed_after_the_read_is_not_lost(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        """A transaction draws gl_seq, another one draws a higher one and commits first; the
        extraction reads, the first transaction commits, the extraction deletes what it read:
        the first transaction's change survives (a "gl_seq <= highest read" delete would lose
        it) and is read next."""
        enabled = enable(env, method, seed=False)
        target = enabled.targets()[0][0]
        insert = f"INSERT INTO {target} (id, name) VALUES (:id, :name)"
        with env.source.engine.connect() as slow:
            transaction = slow.begin()
            slow.execute(sa.text(insert), {"id": 1, "name": "slow"})
            env.run(insert.replace(":id", "2").replace(":name", "'fast'"))
            first = changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=None)
            assert first.column("id").to_pylist() == [2]
            seqs = first.column("gl_seq").to_pylist()
            transaction.commit()
        assert changelog.delete_changes(env.source, enabled.objects, seqs) == 1
        second = changelog.read_changes(env.source, enabled.spec, enabled.objects, limit=None)
        assert second.column("id").to_pylist() == [1]
        assert second.column("gl_seq").to_pylist()[0] < seqs[0]

    def test_an_existing_hybrid_schema_is_used_and_kept(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.run("CREATE SCHEMA app_h", "CREATE TABLE app_h.other (id integer)")
        env.create_table("orders", True)
        before = env.snapshot()
        ref = TableRef("app", "orders")
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        assert all(item.kind is not SourceObject.HYBRID_SCHEMA for item in objects)
        spec = env.source.describe_table(ref)
        capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        capture_objects.drop_source_objects(env.source, objects)
        assert env.snapshot() == before

    def test_a_shared_hybrid_schema_outlives_the_table_that_created_it(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        first = enable(env, method, table="orders")
        second = enable(env, method, table="returns")
        assert first.objects[0].kind is SourceObject.HYBRID_SCHEMA
        assert all(item.kind is not SourceObject.HYBRID_SCHEMA for item in second.objects)
        capture_objects.drop_source_objects(env.source, first.objects)
        env.run("INSERT INTO app.returns (id, name) VALUES (500, 'still captured')")
        target = second.targets()[-1]
        if target[1] == "T":
            assert [row[2] for row in second.changes()] == [500]
        capture_objects.drop_source_objects(env.source, second.objects)
        assert env.query("SELECT 1 FROM pg_namespace WHERE nspname = 'app_h'") == [(1,)]

    def test_names_past_the_length_limit_are_shortened(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        table = "t" * 60
        enabled = enable(env, method, table=table, seed=False)
        assert all(len(item.name) <= 63 for item in enabled.objects)
        target = enabled.targets()[0][0]
        env.run(f"INSERT INTO {target} (id, name) VALUES (1, 'long')")
        assert [row[2] for row in enabled.changes()] == [1]

    def test_a_user_trigger_with_the_same_name_is_never_dropped(
        self, env: CaptureEnv, method: type[ExtractionMethod]
    ) -> None:
        env.create_table("orders", True)
        env.run(
            "CREATE FUNCTION app.mine() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NULL; END $$",
            "CREATE TRIGGER orders_ct AFTER INSERT ON app.orders "
            "FOR EACH ROW EXECUTE FUNCTION app.mine()",
        )
        ref = TableRef("app", "orders")
        spec = env.source.describe_table(ref)
        objects = capture_objects.plan_source_objects(env.source, ref, method)
        if method.has_object(SourceObject.CHANGELOG_TRIGGER):
            with pytest.raises(SourceError, match="already exists"):
                capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        else:
            capture_objects.create_source_objects(env.source, spec, method, objects, ("id",))
        capture_objects.drop_source_objects(env.source, objects)
        mine = (
            "SELECT p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE t.tgname = 'orders_ct'"
        )
        assert env.query(mine) == [("mine",)]
