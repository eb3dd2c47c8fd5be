"""Subpartition-based offload on Oracle without a server: HIGH_VALUE texts -> bounds -> the
increment's predicate -> the SQL that reads a subpartition (issue 32).

The dictionary rows are ``support.oracle_composite``'s (a RANGE-LIST and a RANGE-HASH
table); the SELECT each predicate renders to is also in ``golden/select_rows.sql``.
"""

from __future__ import annotations

import pytest
from support.oracle_composite import PLAIN, RANGE_HASH, RANGE_LIST, recorded_oracle

from gluon.errors import UnsupportedError, UsageError
from gluon.offload.increments import IncrementRequest, plan_increment
from gluon.source.base import PartitionBound
from gluon.source.oracle_bounds import high_values, list_bound, range_bounds

JANUARY = "column(SOLD_ON) < datetime(2017-02-01 00:00:00)"
FEBRUARY = (
    "column(SOLD_ON) >= datetime(2017-02-01 00:00:00) and "
    "column(SOLD_ON) < datetime(2017-03-01 00:00:00)"
)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (
            "TO_DATE(' 2017-02-01 00:00:00', 'SYYYY-MM-DD HH24:MI:SS', 'NLS_CALENDAR=GREGORIAN')",
            ["2017-02-01 00:00:00"],
        ),
        ("TIMESTAMP' 2017-02-01 12:30:00.5'", ["2017-02-01 12:30:00.5"]),
        ("100", ["100"]),
        ("-2.5E3", ["-2.5E3"]),
        ("MAXVALUE", ["MAXVALUE"]),
        ("'EMEA', 'O''NEIL', NULL", ["EMEA", "O'NEIL", "NULL"]),
        ("'NULL'", ["NULL"]),  # the string: list_bound tells it from the word by the quote
        ("DEFAULT", ["DEFAULT"]),
        (None, []),
    ],
)
def test_high_values(text: str | None, values: list[str]) -> None:
    assert high_values(text) == values


@pytest.mark.parametrize(
    "text",
    [
        "TO_DATE('-0044-03-15 00:00:00', 'SYYYY-MM-DD HH24:MI:SS', 'NLS_CALENDAR=GREGORIAN')",
        "SYSDATE + 1",
    ],
)
def test_bounds_gluon_cannot_read_are_refused(text: str) -> None:
    with pytest.raises(UnsupportedError, match="use --offload-predicate"):
        high_values(text)


def test_range_bounds_start_at_the_previous_high_value() -> None:
    assert range_bounds([("A", "10"), ("B", "20"), ("C", "MAXVALUE")]) == {
        "A": PartitionBound("A", None, "10"),
        "B": PartitionBound("B", "10", "20"),
        "C": PartitionBound("C", "20", None),
    }
    with pytest.raises(UnsupportedError, match="bounded on 2 columns"):
        range_bounds([("A", "10, 'X'")])


def test_list_bounds() -> None:
    assert list_bound("A", "'X', NULL") == PartitionBound("A", values=("X",), holds_null=True)
    assert list_bound("D", "DEFAULT") == PartitionBound("D")


def test_subpartitions_of_a_range_list_table() -> None:
    found = recorded_oracle().subpartitions(RANGE_LIST)
    assert list(found) == [
        "P2017_01_EMEA",
        "P2017_01_REST",
        "P2017_02_EU",
        "P2017_02_NONE",
        "P2017_02_APAC",
        "PMAX_EMEA",
        "PMAX_REST",
    ]
    eu = found["P2017_02_EU"]
    assert (eu.partition_column, eu.column, eu.kind) == ("SOLD_ON", "REGION", "LIST")
    assert eu.partition == PartitionBound("P2017_02", "2017-02-01 00:00:00", "2017-03-01 00:00:00")
    assert eu.bound == PartitionBound("P2017_02_EU", values=("EMEA", "O'NEIL"))
    assert recorded_oracle().subpartitions(PLAIN) == {}


def plan(spec_name: str, *names: str) -> str:
    spec = RANGE_LIST if spec_name == "SALES_C" else RANGE_HASH
    request = IncrementRequest(subpartition_names=names)
    return plan_increment(recorded_oracle(), spec, request, []).predicate.text


def test_a_subpartition_predicate_is_its_partition_bound_and_its_own() -> None:
    assert (
        plan("SALES_C", "p2017_01_emea") == f'(({JANUARY}) and (column(REGION) = string("EMEA")))'
    )
    assert plan("SALES_C", "P2017_02_EU", "P2017_02_NONE") == (
        f'(({FEBRUARY}) and (column(REGION) = string("EMEA") or '
        'column(REGION) = string("O\'NEIL"))) or '
        f"(({FEBRUARY}) and (column(REGION) is null))"
    )
    assert plan("SALES_C", "PMAX_EMEA") == (
        '((column(SOLD_ON) >= datetime(2017-03-01 00:00:00)) and (column(REGION) = string("EMEA")))'
    )
    # A DEFAULT or HASH subpartition named with all its siblings: its partition's bound.
    assert plan("SALES_C", "P2017_01_EMEA", "P2017_01_REST") == f"({JANUARY})"
    assert plan("SALES_H", "SYS_SUBP102", "SYS_SUBP101") == f"({JANUARY})"


def test_the_increment_records_the_subpartition_names() -> None:
    request = IncrementRequest(subpartition_names=("p2017_01_emea", "P2017_01_EMEA", "pmax_emea"))
    planned = plan_increment(recorded_oracle(), RANGE_LIST, request, [])
    assert (planned.kind, planned.names) == ("subpartitions", ("P2017_01_EMEA", "PMAX_EMEA"))


def test_the_predicate_reads_as_oracle_sql() -> None:
    predicate = plan_increment(
        recorded_oracle(), RANGE_LIST, IncrementRequest(subpartition_names=("P2017_02_EU",)), []
    ).predicate
    where, params = predicate.to_source_sql(RANGE_LIST.columns, recorded_oracle().quote)
    assert where == "((SOLD_ON >= :p0 AND SOLD_ON < :p1) AND (REGION = :p2 OR REGION = :p3))"
    assert [str(value) for value in params.values()] == [
        "2017-02-01 00:00:00",
        "2017-03-01 00:00:00",
        "EMEA",
        "O'NEIL",
    ]


@pytest.mark.parametrize(
    ("spec_name", "names", "message"),
    [
        (
            "SALES_C",
            ("P2017_01_WHO",),
            "--subpartition-names: APP.SALES_C has no subpartition P2017_01_WHO (subpartitions: "
            "P2017_01_EMEA, P2017_01_REST, P2017_02_APAC, P2017_02_EU, P2017_02_NONE, PMAX_EMEA, "
            "PMAX_REST)",
        ),
        (
            "SALES_C",
            ("P2017_01",),
            "--subpartition-names: P2017_01 of APP.SALES_C is a partition, not subpartitions: "
            "name them with --partition-names",
        ),
        (
            "SALES_C",
            ("P2017_01_REST",),
            "--subpartition-names: P2017_01_REST is a DEFAULT subpartition: no value bound tells "
            "its rows from its siblings' in the lake, so it is offloaded only with all of them "
            "(P2017_01_EMEA, P2017_01_REST), or as its partition with --partition-names=P2017_01",
        ),
        (
            "SALES_H",
            ("SYS_SUBP101",),
            "--subpartition-names: SYS_SUBP101 is a HASH subpartition",
        ),
    ],
)
def test_bad_selections_are_one_usage_error(
    spec_name: str, names: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UsageError) as refused:
        plan(spec_name, *names)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_a_table_without_subpartitions_is_refused() -> None:
    with pytest.raises(UsageError, match=r"APP\.PLAIN has no subpartitions"):
        plan_increment(recorded_oracle(), PLAIN, IncrementRequest(subpartition_names=("ANY",)), [])


def test_partition_and_subpartition_names_do_not_mix() -> None:
    request = IncrementRequest(partition_names=("P2017_01",), subpartition_names=("PMAX_EMEA",))
    with pytest.raises(UsageError, match="use only one of --partition-names, --subpartition-names"):
        plan_increment(recorded_oracle(), RANGE_LIST, request, [])


def test_partition_names_read_the_dictionary_bounds() -> None:
    """``--partition-names`` on Oracle: the partitions' HIGH_VALUE bounds (OracleSource had
    no ``partition_bounds``, so every partition offload of an Oracle table was refused)."""
    assert recorded_oracle().partition_bounds(RANGE_LIST) == {
        "P2017_01": PartitionBound("P2017_01", None, "2017-02-01 00:00:00"),
        "P2017_02": PartitionBound("P2017_02", "2017-02-01 00:00:00", "2017-03-01 00:00:00"),
        "PMAX": PartitionBound("PMAX", "2017-03-01 00:00:00", None),
    }
    request = IncrementRequest(partition_names=("P2017_02",))
    planned = plan_increment(recorded_oracle(), RANGE_LIST, request, [])
    assert (planned.kind, planned.names, planned.predicate.text) == (
        "partitions",
        ("P2017_02",),
        f"({FEBRUARY})",
    )
    where, _ = planned.predicate.to_source_sql(RANGE_LIST.columns, recorded_oracle().quote)
    assert where == "(SOLD_ON >= :p0 AND SOLD_ON < :p1)"
    with pytest.raises(UnsupportedError, match="not RANGE or LIST partitioned"):
        recorded_oracle().partition_bounds(PLAIN)
