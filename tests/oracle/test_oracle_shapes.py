"""Oracle's part of the table-shape matrix (issue 26, deliverable 4).

No Oracle server runs here, so what gluon would send is checked instead: for a composite
key (NUMBER, VARCHAR2, DATE), a table and columns named by SQL and PL/SQL keywords, and a
(range-)partitioned table, every capture script of every Oracle method renders, each
statement parses as Oracle SQL (sqlfluff), keyword names are never left unquoted, and the
text matches its golden file (``golden_shapes/<shape>.sql``; rewrite on purpose with
``GLUON_UPDATE_GOLDEN=1``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlfluff.core import Linter

from gluon.capture import objects as capture_objects
from gluon.methods import registered_methods
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource

GOLDEN = Path(__file__).parent / "golden_shapes"
UPDATE_GOLDEN = os.environ.get("GLUON_UPDATE_GOLDEN") == "1"
URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"

SHAPES: dict[str, tuple[TableSpec, tuple[str, ...]]] = {
    # shape -> (table, names that must always be quoted)
    "composite_key": (
        TableSpec(
            schema="APP",
            name="ORDER_LINES",
            columns=(
                Column("ORDER_ID", "NUMBER(10)", "decimal(10,0)", nullable=False),
                Column("CODE", "VARCHAR2(10)", "string", nullable=False),
                Column("DAY", "DATE", "timestamp_ntz", nullable=False),
                Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)"),
            ),
            primary_key=("ORDER_ID", "CODE", "DAY"),
        ),
        (),
    ),
    "keywords": (
        TableSpec(
            schema="APP",
            name="ORDER",
            columns=(
                Column("SELECT", "NUMBER(10)", "decimal(10,0)", nullable=False),
                Column("USER", "VARCHAR2(10)", "string", nullable=False),
                Column("FROM", "NUMBER(12,2)", "decimal(12,2)"),
                Column("LEVEL", "DATE", "timestamp_ntz"),
            ),
            primary_key=("SELECT", "USER"),
        ),
        # PL/SQL-only reserved words (END, WHEN...) are issue 32's (wp/oracle): not here.
        ("ORDER", "SELECT", "USER", "FROM", "LEVEL"),
    ),
    "partitioned": (
        TableSpec(
            schema="APP",
            name="SALES",
            columns=(
                Column("SALE_ID", "NUMBER(10)", "decimal(10,0)", nullable=False),
                Column("SOLD_ON", "DATE", "timestamp_ntz", nullable=False),
                Column("REGION", "VARCHAR2(10)", "string"),
            ),
            primary_key=("SALE_ID", "SOLD_ON"),
            partition_columns=("SOLD_ON",),
            partition_kind="RANGE",
        ),
        (),
    ),
}


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _scripts(source: OracleSource, spec: TableSpec) -> dict[str, str]:
    rendered: dict[str, str] = {}
    for name, method in sorted(registered_methods().items()):
        if not method.supports_dialect("oracle"):
            continue
        objects = capture_objects.named_source_objects(
            source, TableRef(spec.schema, spec.name), method
        )
        context = capture_objects.script_context(source, spec, method, objects, spec.primary_key)
        for item in objects:
            for operation in ("create", "drop"):
                template = f"{operation}_{item.kind.value}"
                rendered[f"{name} {template}"] = source.render(
                    template, **context, object=item
                ).strip()
    return rendered


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_capture_scripts_of_each_shape(source: OracleSource, shape: str) -> None:
    spec, keywords = SHAPES[shape]
    scripts = _scripts(source, spec)
    assert scripts, "no Oracle method rendered a script"
    linter = Linter(dialect="oracle")
    for case, text in scripts.items():
        for statement in source.split_script(text):
            parsed = linter.parse_string(statement)
            assert parsed.tree is not None, case
            unparsable = [seg.raw for seg in parsed.tree.recursive_crawl("unparsable")]
            assert unparsable == [], f"{case}:\n{statement}"
        code = re.sub(r"'(?:[^']|'')*'", "''", text)  # messages and comments may name objects
        for keyword in keywords:
            # A keyword as a name is always quoted: unquoted it is the keyword.
            for match in re.finditer(rf'(?<![\w"$#.]){keyword}(?![\w"$#])', code):
                line = (
                    code[: match.start()].rsplit("\n", 1)[-1]
                    + code[match.start() :].split("\n", 1)[0]
                )
                assert not _names_it(line, keyword), f"{case}: {keyword} unquoted in: {line}"
    text = "\n".join(f"-- case: {case}\n{script}\n" for case, script in scripts.items())
    path = GOLDEN / f"{shape}.sql"
    if UPDATE_GOLDEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path.name} is missing: run with GLUON_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{shape} renders differently from {path.name}"


def _names_it(line: str, keyword: str) -> bool:
    """Whether ``keyword`` on ``line`` stands where a name of the table would: after a
    dot (``:NEW.END``), or in a list of the table's columns."""
    return bool(
        re.search(rf"[.:]\s*{keyword}\b", line)
        or re.search(rf"(?:^|[(,])\s*{keyword}\s*(?:[,)]|NUMBER|VARCHAR|DATE)", line)
    )
