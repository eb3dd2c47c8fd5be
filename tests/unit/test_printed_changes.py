"""PG_LOGICAL's printed values become the lake's Arrow types exactly (``PrintedChanges``, built
from buffers rather than ``pa.array``): quotes, empty and non-ASCII text, NULLs, and the bare
``null`` against the quoted text ``'null'``."""

from __future__ import annotations

import pyarrow as pa

from gluon.capture import objects
from gluon.schema import Column, TableSpec
from gluon.source.logical_values import PrintedChanges

SPEC = TableSpec(
    "s",
    "t",
    (
        Column("id", "integer", "int", False),
        Column("note", "text", "string"),
        Column("amount", "numeric(12,2)", "decimal(12,2)"),
    ),
)
SCHEMA = pa.schema([*SPEC.arrow_schema, *objects.change_fields()])


def test_printed_values_typed_exactly() -> None:
    changes = PrintedChanges()
    changes.extend(
        [
            ("INSERT", "1", "'it''s'", "1.50"),
            ("UPDATE", "2", "''", "null"),
            ("", "3", "'zoë ✓ ''q'''", "-0.01"),
            ("DELETE", "4", None, None),
            ("INSERT", "5", "'null'", "0"),
        ],
        [7, 8, 9, 1 << 40, (1 << 62) + 3],
        ["I", "U", "I", "D", "I"],
    )
    typed = changes.as_arrow(SPEC, SCHEMA)
    assert typed.schema == SCHEMA
    rows = typed.to_pylist()
    assert [row["id"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row["note"] for row in rows] == ["it's", "", "zoë ✓ 'q'", None, "null"]
    assert [None if row["amount"] is None else str(row["amount"]) for row in rows] == [
        "1.50",
        None,
        "-0.01",
        None,
        "0.00",
    ]
    assert [row["gl_seq"] for row in rows] == [7, 8, 9, 1 << 40, (1 << 62) + 3]
    assert [row["gl_op"] for row in rows] == ["I", "U", "I", "D", "I"]


def test_empty_batch_is_empty_table() -> None:
    assert PrintedChanges().as_arrow(SPEC, SCHEMA).num_rows == 0
