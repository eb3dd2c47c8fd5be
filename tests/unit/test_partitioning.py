"""``--partition-columns`` / ``--partition-granularity`` -> partition column expressions."""

from __future__ import annotations

import pytest

from gluon.errors import ExitCode, UsageError
from gluon.lake import sql
from gluon.offload.partitioning import plan_partitioning
from gluon.schema import Column, PartitionColumn, TableSpec

SPEC = TableSpec(
    schema="sh",
    name="sales",
    columns=(
        Column("ID", "integer", "int", nullable=False),
        Column("Big_Id", "bigint", "bigint"),
        Column("Small", "smallint", "smallint"),
        Column("Tiny", "tinyint", "tinyint"),
        Column("Sold_On", "date", "date"),
        Column("Sold_At", "timestamp", "timestamp_ntz"),
        Column("Sold_At_Tz", "timestamp with time zone", "timestamp"),
        Column("Amount", "numeric(12,2)", "decimal(12,2)"),
        Column("Region", "text", "string"),
        Column("Ratio", "double precision", "double"),
        Column("Flag", "boolean", "boolean"),
        Column("Payload", "bytea", "binary"),
    ),
    primary_key=("ID",),
)


def plan(columns: str, granularities: str = "") -> tuple[PartitionColumn, ...]:
    split = [part for part in granularities.split(",") if part] if granularities else []
    return plan_partitioning(SPEC, columns.split(",") if columns else [], split)


def test_no_partitioning() -> None:
    assert plan("") == ()


def test_granularity_without_columns_is_refused() -> None:
    with pytest.raises(UsageError, match="--partition-granularity needs --partition-columns"):
        plan("", "M")


@pytest.mark.parametrize(
    ("granularity", "length", "stored"),
    [("", 7, ""), ("Y", 4, "Y"), ("M", 7, "M"), ("D", 10, "D"), ("m", 7, "M"), ("y", 4, "Y")],
)
def test_date_columns_partition_by_a_prefix_of_the_iso_date(
    granularity: str, length: int, stored: str
) -> None:
    (part,) = plan("sold_on", granularity)
    assert part == PartitionColumn(
        source_column="Sold_On",
        granularity=stored,
        lake_column="gl_part_sold_on",
        expression=f"date_format(CAST(`sold_on` AS DATE), '{sql.DATE_PATTERNS[length]}')",
    )


@pytest.mark.parametrize("column", ["sold_at", "sold_at_tz"])
def test_timestamps_partition_like_dates(column: str) -> None:
    (part,) = plan(column, "D")
    assert part.expression == f"date_format(CAST(`{column}` AS DATE), 'yyyy-MM-dd')"
    assert part.lake_column == f"gl_part_{column}"


@pytest.mark.parametrize("granularity", ["W", "Q", "1000", "month"])
def test_a_bad_date_granularity_is_refused(granularity: str) -> None:
    with pytest.raises(UsageError) as caught:
        plan("sold_on", granularity)
    message = str(caught.value)
    assert "Sold_On" in message
    assert "Y, M or D" in message
    assert repr(granularity) in message
    assert caught.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("column", ["id", "big_id", "small", "tiny"])
def test_integer_columns_partition_by_value_or_range(column: str) -> None:
    (by_value,) = plan(column)
    assert by_value.expression == f"CAST(`{column}` AS BIGINT)"
    assert by_value.granularity == ""
    (by_range,) = plan(column, "1000")
    assert by_range.expression == f"CAST(floor(`{column}` / 1000) * 1000 AS BIGINT)"
    assert by_range.granularity == "1000"


@pytest.mark.parametrize("granularity", ["0", "-5", "1.5", "abc", "1e3", "M"])
def test_a_range_width_must_be_a_positive_whole_number(granularity: str) -> None:
    with pytest.raises(UsageError, match="positive whole number") as caught:
        plan("id", granularity)
    assert repr(granularity) in str(caught.value)


def test_decimal_columns_need_a_range_width() -> None:
    with pytest.raises(UsageError, match="needed for decimal column Amount"):
        plan("amount")
    (part,) = plan("amount", "100")
    assert part.expression == "CAST(floor(`amount` / 100) * 100 AS DECIMAL(38,0))"


def test_string_columns_partition_by_value_or_prefix() -> None:
    (whole,) = plan("region")
    assert whole.expression == "`region`"
    (prefix,) = plan("region", "2")
    assert prefix.expression == "regexp_extract(`region`, '(?s)^.{0,2}', 0)"


@pytest.mark.parametrize("column", ["ratio", "flag", "payload"])
def test_other_types_cannot_partition(column: str) -> None:
    with pytest.raises(UsageError, match="cannot partition the lake table"):
        plan(column)


def test_an_unknown_column_is_refused_and_the_known_ones_listed() -> None:
    with pytest.raises(UsageError) as caught:
        plan("sold_date")
    message = str(caught.value)
    assert "'sold_date'" in message
    assert "--partition-columns" in message
    for column in SPEC.columns:
        assert column.name in message


def test_column_names_are_case_insensitive() -> None:
    (part,) = plan("SOLD_ON", "Y")
    assert part.source_column == "Sold_On"
    assert part.lake_column == "gl_part_sold_on"


def test_one_granularity_applies_to_every_column() -> None:
    parts = plan("id,big_id", "500")
    assert [p.expression for p in parts] == [
        "CAST(floor(`id` / 500) * 500 AS BIGINT)",
        "CAST(floor(`big_id` / 500) * 500 AS BIGINT)",
    ]


def test_one_granularity_per_column() -> None:
    parts = plan("sold_on,id", "Y,1000")
    assert [(p.lake_column, p.granularity) for p in parts] == [
        ("gl_part_sold_on", "Y"),
        ("gl_part_id", "1000"),
    ]


def test_the_granularity_count_must_match() -> None:
    with pytest.raises(UsageError, match=r"one value or one per partition column \(2\), found 3"):
        plan("sold_on,id", "Y,1000,5")


def test_one_granularity_must_suit_every_column() -> None:
    with pytest.raises(UsageError, match="ID must be a positive whole number"):
        plan("sold_on,id", "M")
