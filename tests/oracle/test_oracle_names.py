"""Oracle capture scripts for tables and columns with odd names (issue 12, reproduction 6).

Oracle allows ``#`` and ``$`` in unquoted names and anything but a double quote in quoted
ones. For a table and a column of each kind, every capture script of every Oracle method
renders, parses as Oracle SQL, quotes each odd name exactly where it must, and matches its
golden file (``golden_names/<kind>.sql``; see ``check_golden``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlfluff.core import Linter
from support.oracle_statements import statement_problems
from test_oracle_sql_parses import check_golden

from gluon.capture import objects as capture_objects
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource

GOLDEN = Path(__file__).parent / "golden_names"
URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"

# kind -> (table as the dictionary spells it, odd column, whether Oracle needs quotes)
KINDS = {
    "hash": ("A#B", "QTY#", False),
    "dollar": ("T$X", "AMT$", False),
    "space": ("order items", "unit price", True),
    "unicode": ("BÜCHER", "GRÖSSE", True),
    "mixed_case": ("MixedCase", "MixedCol", True),
    "quote": ("O'BRIEN", "IT'S", True),  # also inside the scripts' string literals
}


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _scripts(source: OracleSource, table: str, column: str) -> dict[str, str]:
    spec = TableSpec(
        schema="APP",
        name=table,
        columns=(
            Column("ID", "NUMBER(10)", "decimal(10,0)", nullable=False),
            Column(column, "NUMBER(12,2)", "decimal(12,2)"),
        ),
        primary_key=("ID",),
    )
    rendered: dict[str, str] = {}
    for name, method in sorted(registered_methods().items()):
        if not method.supports_dialect("oracle"):
            continue
        objects = capture_objects.named_source_objects(source, TableRef("APP", table), method)
        context = capture_objects.script_context(source, spec, method, objects, spec.primary_key)
        for item in objects:
            for operation in ("create", "drop"):
                template = f"{operation}_{item.kind.value}"
                rendered[f"{name} {template}"] = source.render(
                    template, **context, object=item
                ).strip()
    return rendered


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_capture_scripts_quote_odd_names(source: OracleSource, kind: str) -> None:
    table, column, needs_quotes = KINDS[kind]
    scripts = _scripts(source, table, column)
    updatable = registered_methods()["UPDATABLE"]
    views = frozenset(
        f"{source.quote(item.schema)}.{source.quote(item.name)}"
        for item in capture_objects.named_source_objects(source, TableRef("APP", table), updatable)
        if item.kind is SourceObject.UPDATABLE_VIEW
    )
    linter = Linter(dialect="oracle")
    for case, text in scripts.items():
        for statement in source.split_script(text):
            parsed = linter.parse_string(statement)
            assert parsed.tree is not None, case
            unparsable = [seg.raw for seg in parsed.tree.recursive_crawl("unparsable")]
            assert unparsable == [], f"{case}:\n{statement}"
            # What python-oracledb is sent: gluon's own statement rule, on odd names too.
            problems = statement_problems(statement, views)
            assert problems == [], f"{case}: {problems}\n{statement}"
        if needs_quotes:
            # Never unquoted: an unquoted odd name would be folded or fail to parse.
            code = re.sub(r"'(?:[^']|'')*'", "''", text)  # messages may name objects
            for name in (table, column):
                unquoted = re.search(rf'(?<!["\w]){re.escape(name)}', code)
                assert unquoted is None, f"{case}: {name} unquoted"
    text = "\n".join(f"-- case: {case}\n{script}\n" for case, script in scripts.items())
    check_golden(GOLDEN / f"{kind}.sql", text, what=f"{kind} names")
