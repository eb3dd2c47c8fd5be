"""Object names: ``-t`` parsing, hash shortening, source-side and lake names."""

from __future__ import annotations

import pytest

from gluon.errors import ExitCode, UsageError
from gluon.naming import (
    HASH_LENGTH,
    LakeNames,
    QualifiedName,
    SourceObjectNames,
    TableRef,
    lake_identifier,
    lake_names,
    shorten,
    source_object_names,
)

# -- TableRef --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "schema", "table"),
    [
        ("sh.sales", "sh", "sales"),
        ("SH.SALES", "SH", "SALES"),
        ("  main.products ", "main", "products"),
        ("_app.t$1", "_app", "t$1"),
        ("App_Schema.Order#Lines", "App_Schema", "Order#Lines"),
        ('"sh"."sales"', "sh", "sales"),
        ('shop."order items"', "shop", "order items"),
        ('"My Shop"."MixedCase"', "My Shop", "MixedCase"),
        ('shop."say ""hi"""', "shop", 'say "hi"'),
        ("shop.bücher", "shop", "bücher"),
        ('shop."a#b $c"', "shop", "a#b $c"),
    ],
)
def test_parse_accepts_schema_dot_table(text: str, schema: str, table: str) -> None:
    ref = TableRef.parse(text)
    assert (ref.schema, ref.table) == (schema, table)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "sales",
        "a.b.c",
        ".sales",
        "sh.",
        "sh..sales",
        "1sh.sales",
        "sh.9sales",
        "my schema.sales",
        "sh.sales-2024",
        "sh.sales;drop",
        'sh."a.b"',
        'sh."a/b"',
        'sh."a\\b"',
        'sh."a\tb"',
        'sh."unterminated',
        'sh.""',
        'sh."x"y',
    ],
)
def test_parse_refuses_anything_else_as_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        TableRef.parse(text)
    assert caught.value.exit_code == ExitCode.USAGE
    assert int(caught.value.exit_code) == 2
    message = str(caught.value)
    assert "SCHEMA.TABLE" in message
    assert repr(text) in message


def test_key_is_case_insensitive_and_upper_case() -> None:
    lower, upper, mixed = (TableRef.parse(t) for t in ("sh.sales", "SH.SALES", "Sh.SaLeS"))
    assert lower.key == upper.key == mixed.key == "SH.SALES"
    assert str(mixed) == "SH.SALES"
    assert lower != upper  # the ref keeps the user's spelling; compare keys


# -- shorten ---------------------------------------------------------------------------------


def test_shorten_leaves_names_within_the_limit_alone() -> None:
    assert shorten("orders_log", 63) == "orders_log"
    assert shorten("x" * 63, 63) == "x" * 63
    assert shorten("x" * 500, None) == "x" * 500


@pytest.mark.parametrize("limit", [30, 63, 128])
def test_shorten_fits_the_limit_and_keeps_a_readable_prefix(limit: int) -> None:
    name = "customer_order_line_item_history_" * 5
    short = shorten(name, limit)
    assert len(short) == limit
    assert short.startswith(name[: limit - HASH_LENGTH - 1] + "_")
    assert all(ch in "0123456789abcdef" for ch in short[-HASH_LENGTH:])


def test_shorten_is_stable_and_case_insensitive_in_its_hash() -> None:
    name = "A_VERY_LONG_TABLE_NAME_THAT_DOES_NOT_FIT_ORACLE_LIMITS_LOG"
    assert shorten(name, 30) == shorten(name, 30)
    assert shorten(name, 30)[-HASH_LENGTH:] == shorten(name.lower(), 30)[-HASH_LENGTH:]


def test_shorten_distinguishes_long_names_with_the_same_prefix() -> None:
    first = "customer_order_line_item_history_2023_log"
    second = "customer_order_line_item_history_2024_log"
    assert shorten(first, 30) != shorten(second, 30)
    assert shorten(first, 30)[:21] == shorten(second, 30)[:21]  # same readable prefix


# -- source object names ---------------------------------------------------------------------


def all_names(names: SourceObjectNames) -> list[QualifiedName]:
    return [
        names.changelog_table,
        names.changelog_sequence,
        names.changelog_trigger,
        names.updatable_view,
        names.updatable_trigger,
        names.lake_rows_table,
    ]


def test_postgresql_like_names_go_to_the_lower_case_hybrid_schema() -> None:
    names = source_object_names(
        TableRef.parse("Sales.Orders"), max_length=63, has_schemas=True, fold="lower"
    )
    assert names == SourceObjectNames(
        changelog_table=QualifiedName("sales_h", "orders_log"),
        changelog_sequence=QualifiedName("sales_h", "orders_seq"),
        changelog_trigger=QualifiedName("sales_h", "orders_ct"),
        updatable_view=QualifiedName("sales_h", "orders_uv"),
        updatable_trigger=QualifiedName("sales_h", "orders_uv"),
        lake_rows_table=QualifiedName("sales_h", "orders_lk"),
        replication_slot=QualifiedName("sales", "gluon_sales_orders"),
    )
    assert str(names.changelog_table) == "sales_h.orders_log"


def test_slot_names_are_lower_case_plain_and_fit_63() -> None:
    names = source_object_names(
        TableRef("Sales", "Order Lines" + "x" * 70), max_length=63, has_schemas=True, fold="lower"
    )
    slot = names.replication_slot.name
    assert len(slot) == 63
    assert slot.startswith("gluon_sales_order_lines")
    assert slot == slot.lower() and slot.replace("_", "").isalnum()


def test_postgresql_like_long_names_are_shortened_to_63() -> None:
    table = "t" * 61  # 61 fits; 61 + "_LOG" does not
    names = source_object_names(
        TableRef("app", table), max_length=63, has_schemas=True, fold="lower"
    )
    for name in all_names(names):
        assert len(name.name) <= 63
        assert name.schema == "app_h"
        assert name.name == name.name.lower()
    assert names.changelog_trigger.name == shorten(f"{table}_CT", 63).lower()
    assert names.changelog_table.name == shorten(f"{table}_LOG", 63).lower()
    assert names.changelog_table.name.startswith("t" * 54 + "_")
    assert len({n.name for n in all_names(names)}) == 5  # view and its trigger share a name


def test_a_schema_name_at_the_limit_gets_a_hybrid_schema_that_fits() -> None:
    """A 63-byte PostgreSQL schema: "<schema>_H" would be cut by the server and never found."""
    schema = "s" * 63
    names = source_object_names(
        TableRef(schema, "orders"), max_length=63, has_schemas=True, fold="lower"
    )
    hybrids = {name.schema for name in all_names(names)}
    assert hybrids == {shorten(f"{schema}_H", 63).lower()}
    assert len(hybrids.pop()) <= 63


def test_names_do_not_depend_on_how_the_user_typed_the_table() -> None:
    long_table = "Customer_Order_Line_Item_History_Archive_Table_2024"
    spelled = [f"app.{long_table}", f"APP.{long_table.upper()}", f"app.{long_table.lower()}"]
    for fold, limit in (("lower", 63), ("upper", 30)):
        results = {
            source_object_names(TableRef.parse(text), max_length=limit, has_schemas=True, fold=fold)
            for text in spelled
        }
        assert len(results) == 1


@pytest.mark.parametrize("limit", [30, 128])
def test_oracle_like_names_are_upper_case(limit: int) -> None:
    names = source_object_names(
        TableRef.parse("sh.sales"), max_length=limit, has_schemas=True, fold="upper"
    )
    assert names.changelog_table == QualifiedName("SH_H", "SALES_LOG")
    assert names.changelog_sequence == QualifiedName("SH_H", "SALES_SEQ")
    assert names.changelog_trigger == QualifiedName("SH_H", "SALES_CT")
    assert names.updatable_view == QualifiedName("SH_H", "SALES_UV")


def test_oracle_like_long_names_fit_30_and_128() -> None:
    table = "ORDER_LINE_ITEMS_" * 7  # 119 characters
    ref = TableRef("SH", table)
    short = source_object_names(ref, max_length=30, has_schemas=True, fold="upper")
    long = source_object_names(ref, max_length=128, has_schemas=True, fold="upper")
    for name in all_names(short):
        assert len(name.name) == 30
        assert name.name == name.name.upper()
    assert long.changelog_trigger.name == table + "_CT"  # 122 <= 128: kept whole
    assert long.changelog_table.name == table + "_LOG"  # 123 <= 128
    assert len({n.name for n in all_names(short)}) == 5


def test_sqlite_like_names_use_a_prefix_in_the_tables_own_schema() -> None:
    names = source_object_names(
        TableRef.parse("main.Products"), max_length=None, has_schemas=False, fold="lower"
    )
    assert names.changelog_table == QualifiedName("main", "main_h_products_log")
    assert names.changelog_sequence == QualifiedName("main", "main_h_products_seq")
    assert names.changelog_trigger == QualifiedName("main", "main_h_products_ct")
    assert names.updatable_view == QualifiedName("main", "main_h_products_uv")
    assert names.updatable_trigger == QualifiedName("main", "main_h_products_uv")
    assert names.lake_rows_table == QualifiedName("main", "main_h_products_lk")


def test_sqlite_like_names_without_a_limit_are_never_hashed() -> None:
    table = "x" * 300
    names = source_object_names(
        TableRef("main", table), max_length=None, has_schemas=False, fold="lower"
    )
    assert names.changelog_table.name == f"main_h_{table}_log"


def test_prefixed_names_past_a_limit_are_hashed_whole() -> None:
    table = "order_line_items_with_a_very_long_descriptive_name"
    names = source_object_names(
        TableRef("main", table), max_length=40, has_schemas=False, fold="lower"
    )
    for name in all_names(names):
        assert len(name.name) == 40
        assert name.name.startswith("main_h_order_line_items_with_a_")
        assert name.schema == "main"
    expected = shorten(f"main_H_{table}_LOG", 40).lower()
    assert names.changelog_table.name == expected
    assert len({n.name for n in all_names(names)}) == 5


@pytest.mark.parametrize(
    ("has_schemas", "fold", "override", "expected"),
    [
        (True, "upper", "audit.sales_changes", QualifiedName("AUDIT", "SALES_CHANGES")),
        (True, "upper", "sales_changes", QualifiedName("SH_H", "SALES_CHANGES")),
        (True, "lower", "AUDIT.Sales_Changes", QualifiedName("audit", "sales_changes")),
        (False, "lower", "Sales_Changes", QualifiedName("sh", "sales_changes")),
    ],
)
def test_the_changelog_table_can_be_overridden(
    has_schemas: bool, fold: str, override: str, expected: QualifiedName
) -> None:
    names = source_object_names(
        TableRef.parse("sh.sales"),
        max_length=63,
        has_schemas=has_schemas,
        fold=fold,
        changelog_table=override,
    )
    assert names.changelog_table == expected
    default = source_object_names(
        TableRef.parse("sh.sales"), max_length=63, has_schemas=has_schemas, fold=fold
    )
    # Only the changelog table moves; everything else keeps its name.
    assert names.changelog_sequence == default.changelog_sequence
    assert names.changelog_trigger == default.changelog_trigger
    assert names.updatable_view == default.updatable_view


SUFFIXES = ("_LOG", "_SEQ", "_UV", "_LK", "_CT", "")
"""Every suffix gluon's names use, and none: a table named like another's object."""


@pytest.mark.parametrize(
    ("max_length", "has_schemas", "fold"),
    [(128, True, "upper"), (30, True, "upper"), (63, True, "lower"), (None, False, "lower")],
    ids=["oracle", "oracle-30", "postgresql", "sqlite"],
)
@pytest.mark.parametrize("suffix", [s for s in SUFFIXES if s])
def test_two_tables_never_share_an_object_name(
    suffix: str, max_length: int | None, has_schemas: bool, fold: str
) -> None:
    """Table X_UV's changelog trigger was X's updatable trigger (both X_UV): on PostgreSQL
    re-creating one dropped the other's function with CASCADE, on SQLite its triggers."""
    first = source_object_names(
        TableRef("app", "x"), max_length=max_length, has_schemas=has_schemas, fold=fold
    )
    second = source_object_names(
        TableRef("app", f"x{suffix}"), max_length=max_length, has_schemas=has_schemas, fold=fold
    )
    assert not set(all_names(first)) & set(all_names(second))


# -- lake names ------------------------------------------------------------------------------


def test_lake_names_are_lower_case() -> None:
    names = lake_names(TableRef.parse("SH.Sales"))
    assert names == LakeNames("sh", "sales")
    assert names.load_schema == "sh_load"
    assert names.user_view == QualifiedName("sh", "sales")
    assert names.base_table == QualifiedName("sh", "sales_data")
    assert names.delta_table == QualifiedName("sh_load", "sales_changes")
    assert names.internal_view(1) == QualifiedName("sh", "sales_internal_user_view_1")
    assert names.internal_view(12) == QualifiedName("sh", "sales_internal_user_view_12")
    assert names.schema_dir() == "sh.db"
    assert names.schema_dir(names.load_schema) == "sh_load.db"


def test_lake_names_are_the_same_however_the_table_is_typed() -> None:
    assert lake_names(TableRef.parse("sh.sales")) == lake_names(TableRef.parse("SH.SALES"))


@pytest.mark.parametrize(
    "override, message",
    [
        ("audit.logs.extra", "expects TABLE or SCHEMA.TABLE"),
        ("bad name; drop", "expects TABLE or SCHEMA.TABLE"),
        ("X" * 31, "longer than the 30 characters"),
    ],
)
def test_changelog_table_override_is_validated(override: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        source_object_names(
            TableRef("SH", "SALES"),
            max_length=30,
            has_schemas=True,
            fold="upper",
            changelog_table=override,
        )


@pytest.mark.parametrize("name", ["sales", "order_lines_2", "_x"])
def test_plain_lake_identifiers_stay_as_they_are(name: str) -> None:
    assert lake_identifier(name) == name
    assert lake_identifier(name.upper()) == name


@pytest.mark.parametrize("name", ["a#b", "t$x", "order items", "bücher", "a%2fb", "1st", "a.b"])
def test_other_lake_identifiers_are_plain_readable_and_distinct(name: str) -> None:
    stored = lake_identifier(name)
    assert all(c.isascii() and (c.isalnum() or c == "_") for c in stored)
    assert stored[0].isalpha()
    assert lake_identifier(name.upper()) == stored
    others = {lake_identifier(other) for other in ("a_b", "t_x", "order_items", "b_cher")}
    assert stored not in others


def test_odd_table_names_keep_their_user_view_name_and_plain_internal_names() -> None:
    names = lake_names(TableRef.parse('"My Shop"."t$x"'))
    assert names.user_view == QualifiedName("my shop", "t$x")
    stored_schema, stem = lake_identifier("my shop"), lake_identifier("t$x")
    assert names.base_table == QualifiedName(stored_schema, f"{stem}_data")
    assert names.delta_table == QualifiedName(f"{stored_schema}_load", f"{stem}_changes")
    assert names.schema_dir() == f"{stored_schema}.db"
