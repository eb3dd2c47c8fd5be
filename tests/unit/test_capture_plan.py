"""Capture planning and script splitting, without a database."""

from __future__ import annotations

import pytest

from gluon.capture import objects as capture_objects
from gluon.capture.objects import SourceObjectRef
from gluon.methods import get_method
from gluon.methods.base import CREATION_ORDER, OBJECT_TYPES, SourceObject
from gluon.naming import TableRef
from gluon.source import connect
from gluon.source.base import SourceDialect

URLS = {
    "sqlite": "sqlite:///:memory:",
    "postgresql": "postgresql+psycopg://gluon@localhost/source",
    "oracle": "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1",
}


@pytest.fixture(params=sorted(URLS))
def source(request: pytest.FixtureRequest) -> SourceDialect:
    return connect(URLS[request.param])  # no connection is made


def test_objects_are_in_creation_order(source: SourceDialect) -> None:
    method = get_method("UPDATABLE_CHANGELOG")
    objects = capture_objects.named_source_objects(source, TableRef("SH", "PRODUCTS"), method)
    kinds = [item.kind for item in objects]
    assert kinds == sorted(kinds, key=CREATION_ORDER.index)
    assert set(kinds) == set(method.source_objects) - source.implicit_source_objects
    assert all(item.object_type == OBJECT_TYPES[item.kind] for item in objects)


def test_postgresql_names() -> None:
    objects = capture_objects.named_source_objects(
        connect(URLS["postgresql"]), TableRef("SH", "PRODUCTS"), get_method("CHANGELOG")
    )
    assert objects == [
        SourceObjectRef(SourceObject.CHANGELOG_SEQUENCE, "sh_h", "products_seq", "SEQUENCE"),
        SourceObjectRef(SourceObject.CHANGELOG_TABLE, "sh_h", "products_log", "TABLE"),
        SourceObjectRef(SourceObject.CHANGELOG_TRIGGER, "sh_h", "products_ct", "TRIGGER"),
    ]


def test_oracle_names() -> None:
    objects = capture_objects.named_source_objects(
        connect(URLS["oracle"]), TableRef("sh", "products"), get_method("UPDATABLE")
    )
    assert [(item.schema, item.name) for item in objects] == [
        ("SH_H", "PRODUCTS_SEQ"),
        ("SH_H", "PRODUCTS_LOG"),
        ("SH_H", "PRODUCTS_LK"),
        ("SH_H", "PRODUCTS_UV"),
        ("SH_H", "PRODUCTS_UV"),
    ]


def test_sqlite_has_no_sequence_object_and_prefixes_names() -> None:
    objects = capture_objects.named_source_objects(
        connect(URLS["sqlite"]), TableRef("main", "products"), get_method("CHANGELOG_INSERT")
    )
    assert [(item.kind, item.schema, item.name) for item in objects] == [
        (SourceObject.CHANGELOG_TABLE, "main", "main_h_products_log"),
        (SourceObject.CHANGELOG_TRIGGER, "main", "main_h_products_ct"),
    ]


def test_changelog_table_override() -> None:
    objects = capture_objects.named_source_objects(
        connect(URLS["oracle"]),
        TableRef("SH", "PRODUCTS"),
        get_method("CHANGELOG"),
        changelog_table="audit.products_changes",
    )
    log = next(item for item in objects if item.kind is SourceObject.CHANGELOG_TABLE)
    assert (log.schema, log.name) == ("AUDIT", "PRODUCTS_CHANGES")


def test_long_names_fit_the_dialect(source: SourceDialect) -> None:
    objects = capture_objects.named_source_objects(
        source, TableRef("SH", "P" * 200), get_method("UPDATABLE_CHANGELOG")
    )
    limit = source.max_identifier_length
    assert limit is None or all(len(item.name) <= limit for item in objects)
    assert len({(item.kind, item.name) for item in objects}) == len(objects)


def test_ora_rowscn_creates_nothing() -> None:
    method = get_method("ORA_ROWSCN")
    assert (
        capture_objects.named_source_objects(connect(URLS["oracle"]), TableRef("SH", "T"), method)
        == []
    )


@pytest.mark.parametrize(
    ("script", "statements"),
    [
        ("SELECT 1\n", ["SELECT 1"]),
        ("SELECT 1\n/\nSELECT 2\n/\n", ["SELECT 1", "SELECT 2"]),
        ("SELECT 1\n  /  \nSELECT 2", ["SELECT 1", "SELECT 2"]),
        ("\n/\n\n/\nSELECT 1\n/", ["SELECT 1"]),
        (
            "BEGIN\n  x := 1 / 2;\nEND;\n/\nDROP TABLE t",
            ["BEGIN\n  x := 1 / 2;\nEND;", "DROP TABLE t"],
        ),
        ("", []),
    ],
)
def test_split_script(source: SourceDialect, script: str, statements: list[str]) -> None:
    assert source.split_script(script) == statements
