"""Ownership markers: written, found again wherever a dialect keeps them, and judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from gluon.capture.objects import changelog_type
from gluon.capture.ownership import (
    Marker,
    Ownership,
    classify,
    lake_table_marker,
    mark_lake_table,
    parse_marker,
)

MINE = Marker("0123456789abcdef0123456789abcdef", "APP.ITEMS")
OTHER_ID = "fedcba9876543210fedcba9876543210"


@pytest.mark.parametrize(
    "text",
    [
        MINE.text,  # a PostgreSQL or Oracle COMMENT
        f"CREATE TABLE x /* {MINE.sql_comment} */ (id int)",  # SQLite's CREATE text
        f"  -- {MINE.sql_comment}\n",  # an Oracle trigger body line
        f"CREATE TRIGGER t AFTER INSERT ON x BEGIN /* {MINE.sql_comment} */\n  INSERT ...",
    ],
)
def test_the_marker_is_found_where_each_dialect_keeps_it(text: str) -> None:
    assert parse_marker(text) == MINE


def test_a_table_key_with_quotes_and_comment_ends_survives() -> None:
    odd = Marker(MINE.installation_id, "APP.IT'S */ ODD")
    assert odd.sql_literal == "'gluon:" + MINE.installation_id + ":APP.IT''S */ ODD'"
    assert "*/" not in odd.sql_comment
    assert parse_marker(f"CREATE VIEW v AS /* {odd.sql_comment} */ SELECT 1") == odd


@pytest.mark.parametrize("text", [None, "", "orders of the shop", "gluon:not-hex:APP.ITEMS"])
def test_anything_else_is_no_marker(text: str | None) -> None:
    assert parse_marker(text) is None


def test_classify() -> None:
    assert classify(MINE, MINE) is Ownership.OURS
    assert classify(None, MINE) is Ownership.FOREIGN
    assert classify(Marker(OTHER_ID, "APP.ITEMS"), MINE) is Ownership.OTHER_INSTALLATION
    other_table = Marker(MINE.installation_id, "APP.OTHER")
    assert classify(other_table, MINE) is Ownership.OTHER_TABLE
    assert classify(other_table, MINE, per_table=False) is Ownership.OURS  # a shared schema


def test_lake_marker_round_trip(tmp_path: Path) -> None:
    location = str(tmp_path / "items_changes")
    assert lake_table_marker(location) is None
    mark_lake_table(location, MINE)
    assert lake_table_marker(location) == MINE
    (tmp_path / "items_changes" / "_gluon_owner.json").write_text("{broken")
    assert lake_table_marker(location) is None


@pytest.mark.parametrize(
    ("dialect", "declared", "wide"),
    [
        ("postgresql", "character varying(10)", "text"),
        ("postgresql", "character(3)", "text"),
        ("postgresql", "integer", "bigint"),
        ("postgresql", "smallint", "bigint"),
        ("postgresql", "bigint", "bigint"),
        ("postgresql", "numeric(12,2)", "numeric"),
        ("postgresql", "real", "double precision"),
        ("postgresql", "timestamp(3) without time zone", "timestamp(3) without time zone"),
        ("postgresql", "jsonb", "jsonb"),
        ("oracle", "VARCHAR2(10 CHAR)", "VARCHAR2(4000)"),
        ("oracle", "NUMBER(10)", "NUMBER"),
        ("oracle", "NUMBER(12,2)", "NUMBER"),
        ("oracle", "DATE", "DATE"),
        ("sqlite", "VARCHAR(10)", "VARCHAR(10)"),
    ],
)
def test_changelog_columns_are_typed_wide(dialect: str, declared: str, wide: str) -> None:
    assert changelog_type(dialect, declared) == wide
