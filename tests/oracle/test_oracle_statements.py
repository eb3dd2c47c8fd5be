"""Issue 32 deliverable 4: every Oracle template, as python-oracledb will be sent it
statement by statement, passes gluon's own rule (support/oracle_statements.py): PL/SQL
units end with END; and hold one statement, SQL statements have no ';' or '/'.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.oracle_statements import statement_problems
from test_oracle_sql_parses import CASES, SCRIPTS, as_statement, cases_of, template_names

from gluon.capture.objects import SourceObjectRef
from gluon.source import connect
from gluon.source.oracle import OracleSource

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _views(context: dict[str, object]) -> frozenset[str]:
    view = context.get("view")
    if not isinstance(view, SourceObjectRef):
        return frozenset()
    return frozenset({f"{view.schema}.{view.name}"})


@pytest.mark.parametrize("template", template_names())
def test_every_statement_is_sent_in_the_shape_oracle_takes(
    source: OracleSource, template: str
) -> None:
    for case, context in cases_of(template).items():
        rendered = source.render(template, **context)
        statements = (
            source.split_script(rendered)
            if template in SCRIPTS
            else [as_statement(template, rendered)]
        )
        for statement in statements:
            problems = statement_problems(statement, _views(context))
            assert problems == [], f"{template} ({case}): {problems}\n{statement}"


def test_cases_cover_the_templates() -> None:
    assert set(template_names()) <= set(CASES)


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        (
            "CREATE OR REPLACE TRIGGER S.T AFTER INSERT ON S.X FOR EACH ROW BEGIN NULL; END",
            "a PL/SQL unit that does not end with END;",
        ),
        ("SELECT 1 FROM DUAL;", "a SQL statement ending with ';' (ORA-00933/ORA-00911)"),
        ("CREATE TABLE S.T (X NUMBER)\n/", "a line with only '/' inside a statement"),
        ("CREATE TABLE S.T (X NUMBER) /", "a SQL statement ending with '/'"),
        (
            "BEGIN\n  NULL;\nEND;\nCOMMENT ON TABLE S.T IS 'x'",
            "a PL/SQL unit that does not end with END;",
        ),
        (
            "CREATE OR REPLACE TRIGGER S.T AFTER INSERT ON S.X FOR EACH ROW\nBEGIN NULL; END;\n"
            "CREATE OR REPLACE TRIGGER S.U AFTER INSERT ON S.X FOR EACH ROW\nBEGIN NULL; END;",
            "DDL inside a PL/SQL unit",
        ),
        (
            "CREATE OR REPLACE TRIGGER S.T INSTEAD OF INSERT ON S.X FOR EACH ROW BEGIN NULL; END;",
            "an INSTEAD OF trigger on S.X, which is not a view",
        ),
        ("   ", "an empty statement"),
        # A quoted name may hold what starts a comment or a literal: the ';' is still code.
        ('SELECT "A--B" FROM DUAL;', "a SQL statement ending with ';'"),
        ('SELECT "A/*B" FROM DUAL;', "a SQL statement ending with ';'"),
        (
            'CREATE OR REPLACE TRIGGER S."IT\'S" AFTER INSERT ON S.X FOR EACH ROW\n'
            "BEGIN\n  RAISE_APPLICATION_ERROR(-20001, 'no');\nEND",
            "a PL/SQL unit that does not end with END;",
        ),
    ],
)
def test_the_rule_refuses_what_sqlfluff_accepts(statement: str, problem: str) -> None:
    problems = statement_problems(statement)
    assert problems and problems[0].startswith(problem), problems


@pytest.mark.parametrize(
    "statement",
    [
        "BEGIN\n  EXECUTE IMMEDIATE 'CREATE USER X NO AUTHENTICATION';\nEND;",
        "CREATE OR REPLACE TRIGGER S.T AFTER INSERT ON S.X FOR EACH ROW\nBEGIN\n"
        "  IF INSERTING THEN NULL; END IF;\nEND;",
        "SELECT ';' AS semicolon FROM dual",
        "COMMENT ON TABLE S.T IS 'a; b /'",
        "COMMENT ON TABLE S.\"IT'S\" IS ';'",
        'CREATE OR REPLACE TRIGGER S."order items_UV" INSTEAD OF INSERT ON S."order items_UV"\n'
        "FOR EACH ROW\nBEGIN\n  NULL;\nEND;",
    ],
)
def test_the_rule_accepts_what_oracle_takes(statement: str) -> None:
    assert statement_problems(statement, frozenset({'S."order items_UV"'})) == []
