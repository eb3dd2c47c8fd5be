"""Spark SQL is written in one place: gluon/lake/ (issue 13, one lake SQL layer).

Scans the string constants and f-strings of every module outside gluon/lake/ for
SQL text: a statement keyword at the start, or a clause only SQL has. Source-dialect
SQL lives in templates/<dialect>/ and gluon/source/ (excluded here); the repository
(gluon/repo/) speaks SQLAlchemy, not Spark.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

GLUON = Path(__file__).resolve().parents[2] / "gluon"
OUTSIDE_THE_SCAN = ("lake", "source", "repo")
"""gluon/lake/ renders lake SQL; gluon/source/ is the source dialects; gluon/repo/ SQLAlchemy."""

SOURCE_SQL = {
    # Predicate.to_source_sql: the source database's null test (bind parameters elsewhere).
    ("predicates.py", "IS NOT NULL"),
    ("predicates.py", "IS NULL"),
}

_STATEMENT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|CREATE|DROP|DELETE|MERGE|UPDATE|ALTER|DESCRIBE|SHOW|WITH|"
    r"TRUNCATE|OPTIMIZE|VACUUM|RESTORE)\s"
)
_CLAUSE = re.compile(
    r"\b(REPLACE WHERE|VERSION AS OF\s+[\dx]|IS NOT NULL|IS NULL|BETWEEN|CAST\()|\bgl_op\s*="
)


def _text(node: ast.JoinedStr) -> str:
    """An f-string's text with each placeholder replaced by ``x``."""
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value)
        else:
            parts.append("x")
    return "".join(parts)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))
    return found


def sql_texts(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string in ``source`` that reads as SQL."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inside_fstrings = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and id(node) not in inside_fstrings
        ):
            text = node.value
        else:
            continue
        if _STATEMENT.match(text) or _CLAUSE.search(text):
            found.append((node.lineno, text))
    return found


def test_the_scan_finds_sql_in_strings_and_f_strings() -> None:
    source = (
        '"""SELECT in a docstring is prose."""\n'
        'a = f"SELECT * FROM {t} WHERE {p}"\n'
        "b = 'DELETE FROM t'\n"
        'c = f"{column} IS NULL"\n'
        'd = f"INSERT INTO {t} REPLACE WHERE {p} " f"SELECT 1"\n'
        'e = "select the rows you want"\n'
    )
    assert [line for line, _ in sql_texts(source)] == [2, 3, 4, 5]


def _modules() -> list[Path]:
    return [
        path
        for path in sorted(GLUON.rglob("*.py"))
        if path.relative_to(GLUON).parts[0] not in OUTSIDE_THE_SCAN
    ]


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(GLUON)))
def test_no_spark_sql_outside_the_lake_layer(path: Path) -> None:
    relative = str(path.relative_to(GLUON))
    found = [
        f"{relative}:{line}: {text!r}"
        for line, text in sql_texts(path.read_text(encoding="utf-8"))
        if (relative, text) not in SOURCE_SQL
    ]
    assert not found, "SQL text outside gluon/lake/ (build it there):\n" + "\n".join(found)
