"""Issue 32 items 12 and 13 against a live Oracle database (skipped without
GLUON_TEST_ORACLE_DSN, as ``test_oracle_live.py``): what the server-less tests decide,
checked where only a server can tell. Tables are created in the connecting user's schema
and dropped again; a missing privilege fails naming its GRANT (``_create_checked``).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
import sqlalchemy as sa
from test_oracle_live import CAPTURE_TABLE, _create_checked, _drop, _fetched_types

from gluon.capture import changelog
from gluon.capture import objects as capture_objects
from gluon.errors import UsageError
from gluon.extract.schema_changes import SchemaChanges, _alter_capture_tables
from gluon.methods import get_method
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.source import connect
from gluon.source.oracle import OracleSource

DSN = os.environ.get("GLUON_TEST_ORACLE_DSN")

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(
        not DSN,
        reason="no Oracle database: set GLUON_TEST_ORACLE_DSN to an SQLAlchemy URL "
        "(oracle+oracledb://user:password@host:port/?service_name=...)",
    ),
]


@pytest.fixture
def source() -> Iterator[OracleSource]:
    assert DSN is not None
    dialect = connect(DSN)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


@pytest.fixture
def schema(source: OracleSource) -> str:
    with source.engine.connect() as connection:
        return str(connection.execute(sa.text("SELECT USER FROM DUAL")).scalar_one())


def _run(source: OracleSource, *statements: str) -> None:
    with source.engine.begin() as connection:
        for statement in statements:
            connection.execute(sa.text(statement))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8].upper()}"


def test_item_12_table_x_and_table_x_uv_capture_side_by_side(
    source: OracleSource, schema: str
) -> None:
    """Table X_UV's changelog trigger and table X's updatable trigger were both X_UV."""
    base = _unique("GLUON_N")
    tables = [base, f"{base}_UV"]
    for table in tables:
        _run(source, CAPTURE_TABLE.format(table=table))
    enabled: list[list[capture_objects.SourceObjectRef]] = []
    try:
        for table, method_name in zip(tables, ("UPDATABLE_CHANGELOG", "CHANGELOG"), strict=True):
            method = get_method(method_name)
            ref = TableRef(schema, table)
            objects = capture_objects.plan_source_objects(source, ref, method)
            _create_checked(source, source.describe_table(ref), method, objects)
            enabled.append(objects)
        for table in tables:
            _run(source, f"INSERT INTO {table} (ID, NAME) VALUES (1, 'one')")
        assert [changelog.count_changes(source, objects) for objects in enabled] == [1, 1]
        triggers = [o for objects in enabled for o in objects if o.object_type == "TRIGGER"]
        assert len({(o.schema, o.name) for o in triggers}) == len(triggers)
    finally:
        for objects in reversed(enabled):
            capture_objects.drop_source_objects(source, objects)
        for table in tables:
            _drop(source, table)


def test_item_12_a_table_is_found_by_its_exact_dictionary_name(
    source: OracleSource, schema: str
) -> None:
    upper = _unique("GLUON_F")
    mixed = upper.lower().capitalize()  # a quoted mixed-case table beside it
    _run(
        source,
        f"CREATE TABLE {upper} (ID NUMBER(10) PRIMARY KEY)",
        f"CREATE TABLE {_quoted(mixed)} (ID NUMBER(10) PRIMARY KEY, EXTRA NUMBER(3))",
    )
    try:
        # Unquoted, as typed: ORACLE's upper-case table, never the quoted mixed-case one.
        assert source.describe_table(TableRef(schema.lower(), upper.lower())).name == upper
        # As typed or folded: both exist, so the name is ambiguous and refused in one line.
        with pytest.raises(UsageError, match="differ only in case"):
            source.describe_table(TableRef(schema, mixed))
    finally:
        _drop(source, upper)
        _drop(source, _quoted(mixed))


def test_item_12_the_rowscn_query_streams_in_scn_order_with_shared_scns(
    source: OracleSource, schema: str
) -> None:
    """What RowscnFeed's bookkeeping relies on: rows in ORA_ROWSCN order, the rows of one
    transaction sharing its SCN, read in batches of the asked size."""
    from gluon.extract.feeds.rowscn import RowscnFeed

    table = _unique("GLUON_W")
    _run(source, CAPTURE_TABLE.format(table=table))
    try:
        since = RowscnFeed.initial_position(source)
        assert since is not None
        _run(source, *(f"INSERT INTO {table} (ID) VALUES ({key})" for key in (1, 2, 3)))
        _run(source, f"INSERT INTO {table} (ID) VALUES (4)", f"INSERT INTO {table} (ID) VALUES (5)")
        spec = source.describe_table(TableRef(schema, table))
        sql = source.render(
            "read_rowscn_changes",
            schema=spec.schema,
            table=spec.name,
            columns=source.select_list(spec),
        )
        upto = RowscnFeed.initial_position(source)
        batches = list(
            source.read_query_batches(
                spec,
                sa.text(sql),
                {"since": since, "upto": upto},
                batch_rows=2,
                extra_fields=capture_objects.change_fields(),
            )
        )
        assert [batch.num_rows for batch in batches] == [2, 2, 1]
        scns = pa.Table.from_batches(batches).column("gl_seq").to_pylist()
        assert scns == sorted(scns)
        assert len(set(scns)) == 2  # one SCN per transaction (ROWDEPENDENCIES)
    finally:
        _drop(source, table)


def test_item_12_a_number_key_without_precision_meets_its_changes(
    source: OracleSource, schema: str
) -> None:
    table = _unique("GLUON_K")
    _run(
        source,
        f"CREATE TABLE {table} (ID NUMBER PRIMARY KEY, NAME VARCHAR2(20))",
        f"INSERT INTO {table} VALUES (1.50, 'a')",
        f"INSERT INTO {table} VALUES (-0.25, 'b')",
    )
    method = get_method("CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        assert spec.column("ID").lake_type == "string"
        objects = capture_objects.plan_source_objects(source, ref, method)
        _create_checked(source, spec, method, objects)
        try:
            _run(source, f"UPDATE {table} SET NAME = 'z'")
            rows = pa.Table.from_batches(list(source.read_batches(spec, batch_rows=10)))
            changes = changelog.read_changes(source, spec, objects, limit=None)
            assert sorted(rows.column("id").to_pylist()) == ["-0.25", "1.5"]
            assert sorted(changes.column("id").to_pylist()) == ["-0.25", "1.5"]
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_item_12_zoned_timestamps_reach_the_year_9999(source: OracleSource, schema: str) -> None:
    table = _unique("GLUON_Z")
    _run(
        source,
        f"CREATE TABLE {table} (ID NUMBER(10) PRIMARY KEY, AT TIMESTAMP(6) WITH TIME ZONE, "
        "LOCAL_AT TIMESTAMP(3) WITH LOCAL TIME ZONE)",
        f"INSERT INTO {table} VALUES (1, TIMESTAMP '9999-12-31 23:59:59.999999 +00:00', "
        "TIMESTAMP '9999-12-30 12:00:00.5 +00:00')",
    )
    try:
        spec = source.describe_table(TableRef(schema, table))
        (row,) = pa.Table.from_batches(list(source.read_batches(spec, batch_rows=10))).to_pylist()
        assert row["at"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
        assert row["local_at"] == dt.datetime(9999, 12, 30, 12, 0, 0, 500000, tzinfo=dt.UTC)
        expression = source.select_list(spec)[1]
        (fetched,) = _fetched_types(source, f"SELECT {expression} FROM {table}")
        assert fetched == pa.timestamp("us")
    finally:
        _drop(source, table)


def test_item_12_a_quote_in_a_table_name(source: OracleSource, schema: str) -> None:
    table = _unique("GLUON_O'Q")
    _run(source, CAPTURE_TABLE.format(table=_quoted(table)))
    method = get_method("UPDATABLE_CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        objects = capture_objects.plan_source_objects(source, ref, method)
        _create_checked(source, spec, method, objects)
        try:
            _run(source, f"INSERT INTO {_quoted(table)} (ID, NAME) VALUES (1, 'one')")
            assert changelog.count_changes(source, objects) == 1
            # What a schema change records (item 13: record_table_images on Oracle).
            context = capture_objects.script_context(source, spec, method, objects, ("ID",))
            script = source.render("record_table_images", **context, where="")
            source.execute_in_transaction(
                [(statement, {}) for statement in source.split_script(script)], what="images"
            )
            assert changelog.count_changes(source, objects) == 2
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, _quoted(table))


def test_item_13_a_changelog_follows_an_added_and_a_widened_column(
    source: OracleSource, schema: str
) -> None:
    """``_alter_capture_tables``: the changelog gets the wide type, never the declared one."""
    table = _unique("GLUON_A")
    _run(source, CAPTURE_TABLE.format(table=table))
    method = get_method("CHANGELOG")
    ref = TableRef(schema, table)
    try:
        spec = source.describe_table(ref)
        objects = capture_objects.plan_source_objects(source, ref, method)
        _create_checked(source, spec, method, objects)
        try:
            _run(
                source,
                f"ALTER TABLE {table} ADD (RATE NUMBER(20,2))",
                f"ALTER TABLE {table} MODIFY (NAME VARCHAR2(60))",
            )
            after = source.describe_table(ref)
            changes = SchemaChanges(
                columns=after.columns, added=(after.column("RATE"),), widened=()
            )
            retyped = SchemaChanges(columns=after.columns, retyped=(after.column("NAME"),))
            _alter_capture_tables(source, objects, changes)
            _alter_capture_tables(source, objects, retyped)
            log = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TABLE)
            logged = source.describe_table(TableRef(log.schema, log.name))
            assert logged.column("RATE").source_type == "NUMBER"
            assert logged.column("NAME").source_type.startswith("VARCHAR2(")
            assert logged.column("NAME").source_type not in ("VARCHAR2(60)", "VARCHAR2(20)")
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def _captured(
    source: OracleSource, schema: str, table: str, method_name: str, **plan: str
) -> tuple[TableRef, list[capture_objects.SourceObjectRef]]:
    method = get_method(method_name)
    ref = TableRef(schema, table)
    objects = capture_objects.plan_source_objects(source, ref, method, **plan)
    _create_checked(source, source.describe_table(ref), method, objects)
    return ref, objects


def test_item_13_an_update_shifting_keys_onto_each_other(source: OracleSource, schema: str) -> None:
    """Oracle checks the key at statement end: ``SET ID = ID + 1`` succeeds, and the compound
    trigger records a delete only for a key no row holds once the statement is done."""
    table = _unique("GLUON_H")
    _run(source, CAPTURE_TABLE.format(table=table))
    _run(source, *(f"INSERT INTO {table} (ID, NAME) VALUES ({k}, 'n{k}')" for k in (1, 2, 3, 4)))
    try:
        ref, objects = _captured(source, schema, table, "CHANGELOG")
        try:
            _run(source, f"UPDATE {table} SET ID = ID + 1")
            spec = source.describe_table(ref)
            changes = changelog.read_changes(source, spec, objects, limit=None).to_pylist()
            deleted = [int(c["id"]) for c in changes if c["gl_op"] == "D"]
            inserted = sorted(int(c["id"]) for c in changes if c["gl_op"] == "I")
            assert (deleted, inserted) == ([1], [2, 3, 4, 5])
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_item_13_char_semantics_strings_reach_the_changelog_whole(
    source: OracleSource, schema: str
) -> None:
    """A VARCHAR2(5 CHAR) value of 5 characters is 10 bytes in AL32UTF8."""
    table = _unique("GLUON_C")
    _run(source, f"CREATE TABLE {table} (ID NUMBER(10) PRIMARY KEY, NAME VARCHAR2(5 CHAR))")
    try:
        ref, objects = _captured(source, schema, table, "CHANGELOG")
        try:
            _run(source, f"INSERT INTO {table} VALUES (1, 'ÄÖÜßé')")
            spec = source.describe_table(ref)
            changes = changelog.read_changes(source, spec, objects, limit=None)
            assert changes.column("name").to_pylist() == ["ÄÖÜßé"]
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)


def test_item_13_a_changelog_in_another_schema(source: OracleSource, schema: str) -> None:
    """``--incremental-changelog-table`` in the user's own schema, not the hybrid one: the
    trigger's owner (<SCHEMA>_H) is granted INSERT on it, or the trigger never compiles."""
    table = _unique("GLUON_E")
    log = _unique("GLUON_L")
    _run(source, CAPTURE_TABLE.format(table=table))
    try:
        _, objects = _captured(
            source, schema, table, "CHANGELOG", changelog_table=f"{schema}.{log}"
        )
        try:
            found = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TABLE)
            assert (found.schema, found.name) == (schema, log)
            _run(source, f"INSERT INTO {table} (ID, NAME) VALUES (1, 'one')")
            assert changelog.count_changes(source, objects) == 1
        finally:
            capture_objects.drop_source_objects(source, objects)
    finally:
        _drop(source, table)
