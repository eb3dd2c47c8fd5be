"""Start-up shortcuts stay correct: the names ``gluon query`` registers tables for, and the
repository revision every command compares without importing Alembic."""

from __future__ import annotations

import pytest

from gluon.read.catalog import named_objects
from gluon.repo import migrations


@pytest.mark.parametrize(
    ("statement", "names"),
    [
        ("SELECT * FROM sh.products", {"products"}),
        ("select * from SH.Products", {"products"}),
        ("SELECT * FROM `sh`.`my table`", {"my table"}),
        ("SELECT * FROM sh . `odd``name`", {"odd`name"}),
        ("SELECT * FROM spark_catalog.sh.products", {"products"}),
        ("SELECT * FROM products", {"products"}),
        ("SELECT a.x FROM sh.a JOIN sh_load.b_changes ON a.id = b_changes.id", {"a", "b_changes"}),
        # A back quote in a string literal must not hide the names after it.
        ("SELECT '`' AS q FROM sh.products", {"products"}),
        ("WITH t AS (SELECT 1) SELECT * FROM t, (SELECT * FROM sh.other) o", {"other"}),
    ],
)
def test_a_statement_names_the_tables_it_reads(statement: str, names: set[str]) -> None:
    found = named_objects(statement)
    assert found is not None and names <= found


@pytest.mark.parametrize("statement", ["SHOW TABLES IN sh", "  show views"])
def test_a_catalog_listing_needs_every_table(statement: str) -> None:
    assert named_objects(statement) is None


def test_head_is_the_newest_revision_of_the_scripts() -> None:
    """Fails when a revision is added without moving ``HEAD``: every command would then
    import Alembic to find nothing to do."""
    assert migrations.head() == migrations.HEAD
