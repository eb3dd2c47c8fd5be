"""The engine-portability check parses statements: forbidden ones are refused, the subset passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.portable_sql import FORBIDDEN, violations
from support.sql import violating_statements

# One or more statements per forbidden construct (keys of FORBIDDEN, plus RESTORE, which
# sqlglot has no grammar for).
FORBIDDEN_SAMPLES: list[tuple[str, str, str]] = [
    ("INSERT OVERWRITE", "sql", "INSERT OVERWRITE TABLE sh.sales_data SELECT * FROM sh.sales_new"),
    (
        "INSERT OVERWRITE",
        "sql",
        "insert  overwrite sh.sales_data\n partition (gl_part_id = 1000) select * from s",
    ),
    (
        "INSERT ... PARTITION",
        "sql",
        "INSERT INTO sh.sales_data PARTITION (gl_part_id = 1000) SELECT * FROM s",
    ),
    ("ALTER TABLE ... RENAME", "sql", "ALTER TABLE sh.sales_data RENAME TO sh.sales_old"),
    ("ALTER TABLE ... RENAME", "sql", "alter table sh.sales_data\nrename column amount to total"),
    ("DESCRIBE HISTORY", "sql", "DESCRIBE HISTORY sh.sales_data"),
    ("DESCRIBE HISTORY", "sql", "describe   history delta.`/lake/sh.db/sales_data`"),
    ("OPTIMIZE", "sql", "OPTIMIZE sh.sales_data ZORDER BY (id)"),
    ("OPTIMIZE", "sql", "  optimize delta.`/lake/sh.db/sales_data`"),
    ("VACUUM", "sql", "VACUUM sh.sales_data RETAIN 0 HOURS"),
    ("VACUUM", "sql", "\nvacuum delta.`/lake/sh.db/sales_data`"),
    ("RESTORE", "sql", "RESTORE TABLE sh.sales_data TO VERSION AS OF 3"),
    (
        "dynamic partition overwrite",
        "sql",
        "SET spark.sql.sources.partitionOverwriteMode=dynamic",
    ),
    (
        "dynamic partition overwrite",
        "sql",
        "CREATE OR REPLACE TABLE t USING delta OPTIONS ('partitionOverwriteMode'='dynamic') "
        "AS SELECT * FROM s",
    ),
    (
        "dynamic partition overwrite",
        "sql",
        "CREATE TABLE t USING delta TBLPROPERTIES ('partitionOverwriteMode'='dynamic') "
        "AS SELECT * FROM s",
    ),
    (
        "dynamic partition overwrite",
        "write",
        "overwrite /lake/sh.db/sales_data partitionBy=[] replaceWhere=None "
        "partitionOverwriteMode=DYNAMIC",
    ),
    (
        "view over a delta path",
        "sql",
        "CREATE OR REPLACE VIEW sh.sales AS SELECT * FROM delta.`/lake/sh.db/sales_data`",
    ),
    (
        "view over a delta path",
        "sql",
        "create temp view v as\nselect id from Delta.`s3://bucket/lake/sh.db/sales_data`",
    ),
    (
        "view over a delta path",
        "sql",
        "CREATE VIEW v AS SELECT * FROM sh.t WHERE id IN (SELECT id FROM delta.`/lake/x`)",
    ),
]

# Statements outside the subset that no FORBIDDEN rule names: refused for their kind, or
# because they do not parse (a statement the check cannot read is never waved through).
REFUSED: list[tuple[str, str, str]] = [
    ("sql", "ALTER TABLE sh.sales_data ADD COLUMNS (renamed_at TIMESTAMP)", "kind outside"),
    ("sql", "SET spark.sql.ansi.enabled=true", "kind outside"),
    ("sql", "CREATE FUNCTION f AS 'com.example.F'", "kind outside"),
    ("sql", "TRUNCATE TABLE sh.sales_data", "kind outside"),
    ("sql", "CACHE TABLE sh.sales_data", "kind outside"),
    ("sql", "SELECT * FROM sh.t WHERE", "does not parse"),
    ("sql", "SELEC id FROM sh.t", "does not parse"),
    ("write", "ignore /lake/sh.db/t partitionBy=[] replaceWhere=None", "write mode"),
    ("write", "append /lake/sh.db/t partitionBy=[]", "does not parse"),
    ("write", "append /lake/sh.db/t partitionBy=[gl_part] replaceWhere=None", "does not parse"),
    ("write", "overwrite /lake/sh.db/t partitionBy=[] replaceWhere=a = = 1", "does not parse"),
    ("merge", "anything", "unknown record kind"),
]

PORTABLE: list[tuple[str, str]] = [
    (
        "sql",
        "MERGE INTO delta.`/lake/sh.db/sales_data` AS t USING sh_load.sales_changes AS s "
        "ON t.id = s.id WHEN MATCHED AND s.gl_op = 'D' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    ),
    ("sql", "CREATE OR REPLACE VIEW `sh`.`sales` AS SELECT `id`, `amount` FROM `sh`.`sales_data`"),
    (
        "sql",
        "CREATE OR REPLACE TEMP VIEW `sh`.`sales_internal_user_view_2` AS "
        "SELECT * FROM `sh`.`sales_data` UNION ALL SELECT * FROM `sh_load`.`sales_changes`",
    ),
    (
        "sql",
        "INSERT INTO sh.sales_data REPLACE WHERE gl_part_sold_on = '2024-01' "
        "SELECT * FROM sh.sales_internal_user_view_1 WHERE gl_part_sold_on = '2024-01'",
    ),
    ("sql", "CREATE TABLE `sh`.`sales_data` USING delta LOCATION '/lake/sh.db/sales_data'"),
    ("sql", "CREATE OR REPLACE TABLE sh.sales_data_2 USING delta AS SELECT * FROM sh.sales"),
    ("sql", "CREATE SCHEMA IF NOT EXISTS `sh`"),
    ("sql", "DROP TABLE IF EXISTS `sh`.`sales_data`"),
    ("sql", "DESCRIBE TABLE EXTENDED `sh`.`sales_data`"),
    ("sql", "DELETE FROM sh_load.sales_changes WHERE gl_control_partition = 1"),
    ("sql", "UPDATE sh.sales_data SET amount = 0 WHERE id = 1"),
    ("sql", "SELECT * FROM delta.`/lake/sh.db/sales_data` VERSION AS OF 3"),
    ("sql", "SELECT id, ROW_NUMBER() OVER (PARTITION BY id ORDER BY gl_seq DESC) AS r FROM t"),
    # Forbidden words in a string literal or as identifiers are not forbidden constructs.
    ("sql", "SELECT note FROM sh.sales WHERE note = 'please optimize and vacuum, then restore'"),
    ("sql", "SELECT `rename`, `history` FROM sh.sales WHERE `overwrite` = 'INSERT OVERWRITE x'"),
    ("write", "overwrite /lake/sh.db/sales_data partitionBy=['gl_part_sold_on'] replaceWhere=None"),
    ("write", "append /lake/sh.db/sales_data partitionBy=[] replaceWhere=None"),
    (
        "write",
        "overwrite /lake/sh.db/sales_data partitionBy=['gl_part_id'] "
        "replaceWhere=(gl_part_id = 1000 OR gl_part_id IS NULL)",
    ),
]


def test_every_forbidden_construct_has_a_sample() -> None:
    assert {name for name, _, _ in FORBIDDEN_SAMPLES} == {*FORBIDDEN, "RESTORE"}


@pytest.mark.parametrize(("construct", "kind", "statement"), FORBIDDEN_SAMPLES)
def test_each_forbidden_construct_is_refused_by_name(
    construct: str, kind: str, statement: str
) -> None:
    assert construct in violations(kind, statement)


@pytest.mark.parametrize(("kind", "statement", "reason"), REFUSED)
def test_statements_outside_the_subset_are_refused(kind: str, statement: str, reason: str) -> None:
    found = violations(kind, statement)
    assert any(reason in problem for problem in found), found


def test_several_constructs_in_one_text_are_all_named() -> None:
    statement = (
        "CREATE VIEW v AS SELECT * FROM delta.`/lake/t`; "
        "INSERT OVERWRITE t SELECT * FROM v; DESCRIBE HISTORY t"
    )
    assert sorted(violations("sql", statement)) == sorted(
        ["view over a delta path", "INSERT OVERWRITE", "DESCRIBE HISTORY"]
    )


@pytest.mark.parametrize(("kind", "statement"), PORTABLE)
def test_portable_statements_pass(kind: str, statement: str) -> None:
    assert violations(kind, statement) == []


def test_a_record_file_lists_each_violating_statement(tmp_path: Path) -> None:
    path = tmp_path / "statements.jsonl"
    records = [
        {"kind": "sql", "text": "SELECT 1"},
        {"kind": "sql", "text": "VACUUM sh.t"},
        {"kind": "write", "text": "append /lake/t partitionBy=[] replaceWhere=None"},
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    assert violating_statements(path) == [("VACUUM", "VACUUM sh.t")]
