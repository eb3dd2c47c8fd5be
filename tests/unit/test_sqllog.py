"""The engine-portability check: forbidden constructs are found, the portable subset passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gluon.lake import sqllog
from gluon.lake.sqllog import FORBIDDEN, violations

# One or more statements per forbidden construct (keys of sqllog.FORBIDDEN).
FORBIDDEN_SAMPLES: list[tuple[str, str]] = [
    ("INSERT OVERWRITE", "INSERT OVERWRITE TABLE sh.sales_data SELECT * FROM sh.sales_new"),
    (
        "INSERT OVERWRITE",
        "insert  overwrite sh.sales_data\n partition (gl_part_id = 1000) select * from s",
    ),
    ("ALTER TABLE ... RENAME", "ALTER TABLE sh.sales_data RENAME TO sh.sales_old"),
    ("ALTER TABLE ... RENAME", "alter table sh.sales_data\nrename column amount to total"),
    ("DESCRIBE HISTORY", "DESCRIBE HISTORY sh.sales_data"),
    ("DESCRIBE HISTORY", "describe   history delta.`/lake/sh.db/sales_data`"),
    ("OPTIMIZE", "OPTIMIZE sh.sales_data ZORDER BY (id)"),
    ("OPTIMIZE", "  optimize delta.`/lake/sh.db/sales_data`"),
    ("VACUUM", "VACUUM sh.sales_data RETAIN 0 HOURS"),
    ("VACUUM", "\nvacuum delta.`/lake/sh.db/sales_data`"),
    ("RESTORE", "RESTORE TABLE sh.sales_data TO VERSION AS OF 3"),
    ("dynamic partition overwrite", "SET spark.sql.sources.partitionOverwriteMode=dynamic"),
    (
        "dynamic partition overwrite",
        "overwrite /lake/sh.db/sales_data partitionOverwriteMode=DYNAMIC",
    ),
    (
        "view over a delta path",
        "CREATE OR REPLACE VIEW sh.sales AS SELECT * FROM delta.`/lake/sh.db/sales_data`",
    ),
    (
        "view over a delta path",
        "create temp view v as\nselect id from Delta.`s3://bucket/lake/sh.db/sales_data`",
    ),
]

PORTABLE: list[str] = [
    "MERGE INTO delta.`/lake/sh.db/sales_data` AS t USING sh_load.sales_changes AS s "
    "ON t.id = s.id WHEN MATCHED AND s.gl_op = 'D' THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "CREATE OR REPLACE VIEW `sh`.`sales` AS SELECT `id`, `amount` FROM `sh`.`sales_data`",
    "CREATE OR REPLACE TEMP VIEW `sh`.`sales_internal_user_view_2` AS "
    "SELECT * FROM `sh`.`sales_data` UNION ALL SELECT * FROM `sh_load`.`sales_changes`",
    "INSERT INTO sh.sales_data REPLACE WHERE gl_part_sold_on = '2024-01' "
    "SELECT * FROM sh.sales_internal_user_view_1 WHERE gl_part_sold_on = '2024-01'",
    "CREATE TABLE `sh`.`sales_data` USING delta LOCATION '/lake/sh.db/sales_data'",
    "CREATE OR REPLACE TABLE sh.sales_data_2 USING delta AS SELECT * FROM sh.sales",
    "CREATE SCHEMA IF NOT EXISTS `sh`",
    "DROP TABLE IF EXISTS `sh`.`sales_data`",
    "DELETE FROM sh_load.sales_changes WHERE gl_control_partition = 1",
    "UPDATE sh.sales_data SET amount = 0 WHERE id = 1",
    "SELECT * FROM sh.sales_data VERSION AS OF 3",
    "SELECT note FROM sh.sales WHERE note = 'please optimize and vacuum, then restore'",
    "ALTER TABLE sh.sales_data ADD COLUMNS (renamed_at TIMESTAMP)",
    "overwrite /lake/sh.db/sales_data partitionBy=['gl_part_sold_on']",
    "append /lake/sh.db/sales_data partitionBy=[]",
]


def test_every_forbidden_construct_has_a_sample() -> None:
    assert {name for name, _ in FORBIDDEN_SAMPLES} == set(FORBIDDEN)


@pytest.mark.parametrize(("construct", "statement"), FORBIDDEN_SAMPLES)
def test_each_forbidden_construct_is_detected(construct: str, statement: str) -> None:
    assert violations(statement) == [construct]


def test_several_constructs_in_one_statement_are_all_named() -> None:
    statement = (
        "CREATE VIEW v AS SELECT * FROM delta.`/lake/t`; "
        "INSERT OVERWRITE t SELECT * FROM v; DESCRIBE HISTORY t"
    )
    assert sorted(violations(statement)) == sorted(
        ["view over a delta path", "INSERT OVERWRITE", "DESCRIBE HISTORY"]
    )


@pytest.mark.parametrize("statement", PORTABLE)
def test_portable_statements_pass(statement: str) -> None:
    assert violations(statement) == []


def test_record_appends_one_json_line_per_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sql.jsonl"
    monkeypatch.setenv("GLUON_RECORD_SQL", str(path))
    sqllog.record("sql", "SELECT 'multi\nline' AS x")
    sqllog.record("write", "append /lake/t partitionBy=[]")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"kind": "sql", "text": "SELECT 'multi\nline' AS x"},
        {"kind": "write", "text": "append /lake/t partitionBy=[]"},
    ]


def test_record_does_nothing_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GLUON_RECORD_SQL")
    monkeypatch.chdir(tmp_path)
    sqllog.record("sql", "SELECT 1")
    assert list(tmp_path.iterdir()) == []
