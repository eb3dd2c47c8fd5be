"""A user's statement as the engine gets it, and what the engine's errors name
(gluon.lake.user_sql)."""

from __future__ import annotations

import pytest

from gluon.lake.user_sql import engine_form, missing_column, relations


@pytest.mark.parametrize(
    ("statement", "sent"),
    [
        ("DESCRIBE main.products", "DESCRIBE TABLE main.products"),
        ("  desc `main`.`select`", "  DESCRIBE TABLE `main`.`select`"),
        ("DESC FORMATTED main.t", "DESCRIBE TABLE EXTENDED main.t"),
        ("describe extended main.t", "DESCRIBE TABLE EXTENDED main.t"),
        # Already the TABLE form, or not a table: as written.
        ("DESCRIBE TABLE main.t", "DESCRIBE TABLE main.t"),
        ("DESCRIBE QUERY SELECT 1", "DESCRIBE QUERY SELECT 1"),
        ("DESCRIBE SELECT 1", "DESCRIBE SELECT 1"),
        ("DESCRIBE (SELECT 1)", "DESCRIBE (SELECT 1)"),
        ("DESCRIBE SCHEMA main", "DESCRIBE SCHEMA main"),
        ("DESCRIBE FUNCTION upper", "DESCRIBE FUNCTION upper"),
        ("SELECT 'DESCRIBE x'", "SELECT 'DESCRIBE x'"),
    ],
)
def test_describe_is_sent_in_the_table_form(statement: str, sent: str) -> None:
    assert engine_form(statement) == sent


def test_the_missing_column_is_read_from_the_engine_error() -> None:
    error = (
        'attribute ObjectName([Identifier("p"), Identifier("bogus")]) is missing from the '
        "schema: cannot resolve attribute"
    )
    assert missing_column(error) == "p.bogus"
    assert missing_column("Table not found: [TABLE_OR_VIEW_NOT_FOUND] nothing") is None


def test_relations_are_the_names_after_from_and_join_once() -> None:
    statement = (
        "SELECT * FROM main.a x JOIN `select` . orders o ON x.id = o.id "
        "WHERE x.id IN (SELECT id FROM main.a)"
    )
    assert relations(statement) == ["main.a", "`select`.orders"]
