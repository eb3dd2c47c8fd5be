"""Issue 32 item 12, what the Oracle dialect decides without a server: how zoned timestamps
are selected (python-oracledb's Arrow fetch types a TIMESTAMP by its described fractional
precision: 7-9 digits as nanoseconds in int64, which 9999-12-31 overflows), how a number
key without precision reaches the lake, and that a BC year's sign survives the read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.arrow import converter_for
from gluon.source.oracle import OracleSource
from gluon.source.oracle_types import column_from_dictionary

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)  # builds the engine; nothing connects
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _dictionary_row(name: str, data_type: str, scale: int | None = None) -> dict[str, object]:
    return {
        "COLUMN_NAME": name,
        "DATA_TYPE": data_type,
        "DATA_TYPE_OWNER": None,
        "DATA_LENGTH": 13,
        "DATA_PRECISION": None,
        "DATA_SCALE": scale,
        "NULLABLE": "Y",
    }


ZONED = [
    f"TIMESTAMP({digits}) WITH{local} TIME ZONE" for digits in range(7) for local in ("", " LOCAL")
]


@pytest.mark.parametrize("data_type", ZONED)
def test_zoned_timestamps_are_selected_at_microseconds(
    source: OracleSource, data_type: str
) -> None:
    """SYS_EXTRACT_UTC's result is described by the server, not by the column: pinned to
    TIMESTAMP(6), the driver reads it as microseconds (int64 covers every Oracle year)."""
    column = column_from_dictionary(_dictionary_row("ZONED_AT", data_type))
    assert column is not None and column.lake_type == "timestamp"
    spec = TableSpec("APP", "T", (column,), ())
    (expression,) = source.select_list(spec)
    assert re.fullmatch(r"CAST\(SYS_EXTRACT_UTC\(ZONED_AT\) AS TIMESTAMP\(6\)\)", expression)


@pytest.mark.parametrize("digits", [7, 8, 9])
def test_zoned_nanosecond_timestamps_are_read_as_text_in_utc(
    source: OracleSource, digits: int
) -> None:
    column = column_from_dictionary(
        _dictionary_row("ZONED_AT", f"TIMESTAMP({digits}) WITH TIME ZONE")
    )
    assert column is not None and column.read_as_text and column.lake_type == "string"
    (expression,) = source.select_list(TableSpec("APP", "T", (column,), ()))
    assert "SYS_EXTRACT_UTC(ZONED_AT), 'SYYYY-" in expression  # the sign of a BC year kept


def test_a_bc_year_read_as_text_reaches_the_lake_unchanged() -> None:
    """The reader side of 'SYYYY': a text column's value is kept as it is, sign included."""
    column = Column("AT", "TIMESTAMP(9)", "string", read_as_text=True)
    value = "-0044-03-15T12:00:00.123456789"
    assert converter_for(column)(value) == value


def test_a_number_key_without_precision_is_exact_text_on_both_sides(
    source: OracleSource,
) -> None:
    """NUMBER without precision holds any scale, so no decimal(p,s) holds it: the lake keeps
    it as text, rendered alike from the table (offload) and from the changelog (whose
    column is NUMBER too), so a key's changes meet its row exactly."""
    column = column_from_dictionary(_dictionary_row("ID", "NUMBER"))
    assert column is not None
    assert (column.lake_type, column.read_as_text) == ("string", True)
    spec = TableSpec("APP", "T", (column,), ("ID",))
    (expression,) = source.select_list(spec)
    assert "TO_CHAR(ID, 'TM9', 'NLS_NUMERIC_CHARACTERS=''.,''')" in expression
    offload = source.render("select_rows", schema="APP", table="T", columns=[expression])
    changes = source.render(
        "read_changes", schema="APP_H", table="T_LOG", columns=[expression], limit=None
    )
    assert expression in offload and expression in changes
