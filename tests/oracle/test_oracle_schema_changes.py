"""Issue 32 item 9: source schema changes never narrow the Oracle changelog.

The changelog holds wide types (NUMBER, VARCHAR2(4000), ...): a widened application column
must not be written over them with its declared type (NUMBER to NUMBER(20,2) fails with
ORA-01440 on a changelog holding rows; a narrowed VARCHAR2 fails the trigger on the next
widening). Where MAX_STRING_SIZE=EXTENDED the wide VARCHAR2 is 32767 bytes, not 4000.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from gluon.capture import objects as capture_objects
from gluon.extract.schema_changes import SchemaChanges, _alter_capture_tables
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"
ID = Column("ID", "NUMBER(10)", "decimal(10,0)", nullable=False)
LOG = capture_objects.SourceObjectRef(SourceObject.CHANGELOG_TABLE, "APP_H", "T_LOG", "TABLE")
STAGED = capture_objects.SourceObjectRef(SourceObject.LAKE_ROWS_TABLE, "APP_H", "T_LK", "TABLE")


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _server(
    source: OracleSource,
    monkeypatch: pytest.MonkeyPatch,
    present: Mapping[str, tuple[Column, ...]],
    max_string_size: str = "STANDARD",
) -> list[tuple[str, str, str]]:
    """The source as a server whose capture tables have ``present`` columns; returns the
    (template, table, column type) of each ALTER gluon sends."""
    sent: list[tuple[str, str, str]] = []

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[str]]:
        answers = {"compatible": "19.0.0", "max_string_size": max_string_size}
        return [(answers[template],)] if template in answers else []

    def describe_table(ref: TableRef) -> TableSpec:
        return TableSpec(ref.schema, ref.table, present[ref.table])

    def execute_script(template: str, **context: Any) -> None:
        sent.append((template, context["object"].name, context["column_type"]))

    monkeypatch.setattr(source, "run_query", run_query)
    monkeypatch.setattr(source, "describe_table", describe_table)
    monkeypatch.setattr(source, "execute_script", execute_script)
    return sent


def test_a_widened_number_leaves_the_changelog_wide(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    widened = Column("AMOUNT", "NUMBER(20,2)", "decimal(20,2)")
    present = {
        "T_LOG": (ID, Column("AMOUNT", "NUMBER", "string", read_as_text=True)),
        "T_LK": (ID, Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)")),
    }
    sent = _server(source, monkeypatch, present)
    changes = SchemaChanges(columns=(ID, widened), widened=(widened,))
    _alter_capture_tables(source, [LOG, STAGED], changes)
    # The changelog's NUMBER already holds NUMBER(20,2): only the lake-rows copy follows.
    assert sent == [("alter_column_type", "T_LK", "NUMBER(20,2)")]


def test_an_added_column_gets_the_wide_type_in_the_changelog(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = Column("CODE", "VARCHAR2(20)", "string")
    sent = _server(source, monkeypatch, {"T_LOG": (ID,), "T_LK": (ID,)})
    _alter_capture_tables(source, [LOG, STAGED], SchemaChanges(columns=(ID, added), added=(added,)))
    assert sent == [
        ("alter_add_column", "T_LOG", "VARCHAR2(4000)"),
        ("alter_add_column", "T_LK", "VARCHAR2(20)"),
    ]


def test_extended_strings_widen_the_changelog_to_32767(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    widened = Column("NOTE", "VARCHAR2(8000)", "string")
    present = {"T_LOG": (ID, Column("NOTE", "VARCHAR2(4000)", "string"))}
    sent = _server(source, monkeypatch, present, max_string_size="EXTENDED")
    _alter_capture_tables(source, [LOG], SchemaChanges(columns=(ID, widened), widened=(widened,)))
    assert sent == [("alter_column_type", "T_LOG", "VARCHAR2(32767)")]


@pytest.mark.parametrize(
    ("declared", "standard", "extended"),
    [
        ("VARCHAR2(10 CHAR)", "VARCHAR2(4000)", "VARCHAR2(32767)"),
        ("VARCHAR2(32767)", "VARCHAR2(4000)", "VARCHAR2(32767)"),
        ("NVARCHAR2(30)", "NVARCHAR2(2000)", "NVARCHAR2(16383)"),
        ("RAW(16)", "RAW(2000)", "RAW(32767)"),
        ("NUMBER(12,2)", "NUMBER", "NUMBER"),
    ],
)
def test_wide_types_by_max_string_size(declared: str, standard: str, extended: str) -> None:
    assert capture_objects.changelog_type("oracle", declared) == standard
    assert capture_objects.changelog_type("oracle", declared, extended_strings=True) == extended


def test_enable_on_an_extended_server_creates_32767_byte_columns(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server(source, monkeypatch, {}, max_string_size="EXTENDED")
    method = registered_methods()["CHANGELOG"]
    objects = capture_objects.plan_source_objects(source, TableRef("APP", "T"), method)
    assert source.extended_strings
    spec = TableSpec("APP", "T", (ID, Column("NOTE", "VARCHAR2(8000)", "string")), ("ID",))
    context = capture_objects.script_context(source, spec, method, objects, ("ID",))
    assert context["log_types"] == {"ID": "NUMBER", "NOTE": "VARCHAR2(32767)"}
