"""A ``'`` in a table's name (issue 32 item 12): the capture scripts name the table's
objects inside string literals (PostgreSQL's ``nextval('...')``, the updatable trigger's
refusal message), which the quote ended early. Real PostgreSQL and SQLite: the objects
are created, fire, refuse with their message and record the table's images.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from gluon.capture import changelog
from gluon.capture import objects as capture_objects
from gluon.methods import get_method
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.source import SourceDialect, connect

TABLE = "o'brien"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture(params=["sqlite", "postgresql"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> SourceDialect:
    if request.param == "sqlite":
        url, schema = f"sqlite:///{tmp_path / 'app.db'}", "main"
    else:
        url, schema = str(request.getfixturevalue("pg_url")), "app"
    dialect = connect(url)
    with dialect.engine.begin() as db:
        if schema != "main":
            db.execute(sa.text(f"CREATE SCHEMA {schema}"))
        db.execute(
            sa.text(f"CREATE TABLE {schema}.{_quoted(TABLE)} (id integer PRIMARY KEY, name text)")
        )
        db.execute(sa.text(f"INSERT INTO {schema}.{_quoted(TABLE)} VALUES (1, 'one')"))
    request.addfinalizer(dialect.engine.dispose)
    return dialect


def _schema(source: SourceDialect) -> str:
    return "main" if source.name == "sqlite" else "app"


def _run(source: SourceDialect, statement: str) -> None:
    with source.engine.begin() as db:
        db.execute(sa.text(statement))


def test_capture_objects_of_a_table_named_with_a_quote(source: SourceDialect) -> None:
    method = get_method("UPDATABLE_INSERT")  # captures inserts, refuses updates by message
    ref = TableRef(_schema(source), TABLE)
    spec = source.describe_table(ref)
    objects = capture_objects.plan_source_objects(source, ref, method)
    capture_objects.create_source_objects(source, spec, method, objects, ("id",))
    found = {item.kind: item for item in objects}
    view = found[SourceObject.UPDATABLE_VIEW]
    view_name = f"{_quoted(view.schema)}.{_quoted(view.name)}"
    table = f"{_quoted(spec.schema)}.{_quoted(spec.name)}"

    _run(source, f"INSERT INTO {view_name} (id, name) VALUES (2, 'two')")
    with pytest.raises(sa.exc.DatabaseError, match=r"is not captured") as refused:
        _run(source, f"UPDATE {view_name} SET name = 'x' WHERE id = 1")
    assert view.name in str(refused.value)
    assert changelog.count_changes(source, objects) == 1

    # What a schema change records: every row's image, in the changelog.
    context = capture_objects.script_context(source, spec, method, objects, ("id",))
    script = source.render("record_table_images", **context, where="")
    source.execute_in_transaction(
        [(statement, {}) for statement in source.split_script(script)], what="images"
    )
    assert changelog.count_changes(source, objects) == 2  # the insert, then row 1 (2 is staged)
    _run(source, f"DELETE FROM {table} WHERE id = 1")
    capture_objects.drop_source_objects(source, objects)


def test_the_changelog_trigger_of_a_table_named_with_a_quote(source: SourceDialect) -> None:
    method = get_method("CHANGELOG")
    ref = TableRef(_schema(source), TABLE)
    spec = source.describe_table(ref)
    objects = capture_objects.plan_source_objects(source, ref, method)
    try:
        capture_objects.create_source_objects(source, spec, method, objects, ("id",))
        table = f"{_quoted(spec.schema)}.{_quoted(spec.name)}"
        _run(source, f"INSERT INTO {table} VALUES (3, 'three')")
        _run(source, f"UPDATE {table} SET name = 'uno' WHERE id = 1")
        assert changelog.count_changes(source, objects) == 2
    finally:
        capture_objects.drop_source_objects(source, objects)
