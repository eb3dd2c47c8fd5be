"""GLUON_RECORD_SQL records every statement gluon sends to Spark (checked: test_portable_sql)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gluon.lake import sqllog


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
