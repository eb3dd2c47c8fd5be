"""The lake SQL layer's quoting, literals and statements (gluon/lake/sql.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import time
from pathlib import Path

import pyarrow as pa
import pytest

from gluon.lake import sql, storage
from gluon.lake.session import is_commit_conflict
from gluon.predicates import parse_predicate
from gluon.schema import Column


def test_one_quoting_function_escapes_back_quotes_everywhere() -> None:
    assert sql.quote_part("a`b") == "`a``b`"
    assert sql.quote("sh.sales`x") == "`sh`.`sales``x`"
    assert sql.date_prefix("d`x", 7) == "date_format(CAST(`d``x` AS DATE), 'yyyy-MM')"
    assert sql.version_of_path("/lake/a`b", 3) == "SELECT * FROM delta.`/lake/a``b` VERSION AS OF 3"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "NULL"),
        (True, "true"),
        (7, "7"),
        (decimal.Decimal("1.50"), "1.50"),
        ("it's \\ here", "'it\\'s \\\\ here'"),
        (dt.date(2024, 1, 5), "DATE '2024-01-05'"),
        (dt.datetime(2024, 1, 5, 6, 7), "TIMESTAMP '2024-01-05 06:07:00'"),
    ],
)
def test_literals_are_built_in_one_place(value: object, expected: str) -> None:
    assert sql.literal(value) == expected


def test_every_replace_where_keeps_the_rows_its_predicate_is_null_for() -> None:
    statement = sql.replace_where("sh.t_data", "`p` = 1", "`sh_load`.`stage`", ["id", "p"])
    assert statement == (
        "INSERT INTO `sh`.`t_data` REPLACE WHERE (`p` = 1) AND ((`p` = 1) IS TRUE) "
        "SELECT `id`, `p` FROM `sh_load`.`stage` WHERE `p` = 1"
    )


def test_a_predicate_renders_over_lake_or_view_names() -> None:
    columns = [Column("Sold$On", "date", "date"), Column("NOTE", "text", "string")]
    parsed = parse_predicate(
        'column(Sold$On) >= date(2024-01-01) and not (column(note) = string("a\'b") '
        "or column(note) is null)"
    )
    assert sql.predicate(parsed, columns) == (
        f"({sql.quote_part(columns[0].lake_name)} >= DATE '2024-01-01' AND "
        f"NOT ((`note` = 'a\\'b' OR `note` IS NULL)))"
    )
    over_view = sql.predicate(parsed, columns, over_user_view=True)
    assert over_view.startswith(f"({sql.quote_part(columns[0].view_name)} >= ")


def test_templates_get_values_not_callbacks() -> None:
    merged = sql.merged_rows(
        "union_all", columns=["id"], keys=["id"], base="`b`", delta="`d`", low=2, high=None
    )
    assert "gl_delta.gl_control_partition >= 2 AND gl_delta.gl_op = 'I'" in merged
    listed = sql.partitions_to_write(
        "all_partitions",
        partition_columns=["gl_part_d"],
        partition_expressions=["substring(`d`, 1, 4)"],
        keys=["id"],
        base="`b`",
        delta="`d`",
        low=2,
        high=5,
    )
    assert "gl_delta.gl_control_partition BETWEEN 2 AND 5" in listed


@pytest.mark.parametrize(
    ("message", "conflict"),
    [
        ("Failed to commit transaction: version 4 already exists", True),
        ("Generic DeltaTable error: Missing commit file 00012.json", True),
        ("io.delta.exceptions.ConcurrentAppendException: Files were added", True),
        ("MetadataChangedException: The metadata of the Delta table has been changed", True),
        ("cannot resolve column concurrent_users", False),
        ("too many concurrent connections to the metastore", False),
    ],
)
def test_only_commit_conflicts_are_retried(message: str, conflict: bool) -> None:
    assert is_commit_conflict(RuntimeError(message)) is conflict


def test_a_fractional_vacuum_retention_is_not_truncated_to_nothing(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    location = str(tmp_path / "t")
    write_deltalake(location, pa.table({"a": [1]}))
    write_deltalake(location, pa.table({"a": [2]}), mode="overwrite")
    assert len(DeltaTable(location).file_uris()) == 1
    time.sleep(0.01)  # (the replaced file is a moment old: a 0-hour retention removes it)
    assert storage.vacuum(location, retention_hours=0.5) == 0
    assert storage.vacuum(location, retention_hours=0) == 1


@pytest.mark.parametrize("kind", ["merge", "union_all"])
def test_a_view_looks_for_a_truncate_only_when_told_one_may_be_there(kind: str) -> None:
    """The repository's record (``IncrementalState.truncates_from``) decides: a table never
    truncated reads no 'T' scan, one that was reads the changes' 'T' rows in range only."""

    def view(truncated: bool) -> str:
        return sql.merged_rows(
            kind,
            columns=["k", "v"],
            keys=["k"],
            base="b",
            delta="d",
            low=3,
            high=None,
            truncated=truncated,
        )

    assert "gl_truncate" not in view(False) and "'T'" not in view(False)
    aware = view(True)
    assert "gl_truncate.gl_control_partition >= 3 AND gl_truncate.gl_op = 'T'" in aware
