"""Changes the lake cannot take: naming them, and the command that sets them aside.

A change in the changelog may hold a value its column's lake type cannot hold (PostgreSQL's
``timestamptz 'infinity'``, a ``numeric`` NaN, a year beyond 9999, text in a SQLite INTEGER
column). The table may no longer hold it (the row was updated back), so blaming the table
helps nobody: the extraction names each such change (``gl_seq``, operation, key, column and
the value as the source prints it) and the exact command that sets just those changes aside
(``gluon.extract.set_aside``), so the others can ship.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gluon.capture import changelog
from gluon.errors import SourceError
from gluon.repo import OffloadedTable
from gluon.repo.incremental import IncrementalState
from gluon.schema import Column

if TYPE_CHECKING:
    from gluon.source.arrow import UnfitValueError  # pyarrow: only once rows were read

SET_ASIDE_OPTION = "--incremental-set-aside-changes"
DOCS = "docs/operations.md, 'A change the lake cannot take'"
LISTED = 20
"""Changes a message names at most (the command it prints sets aside this many)."""
VALUE_CHARS = 40
"""Characters of a value a message shows."""

OPERATIONS = {"I": "insert", "U": "update", "D": "delete"}


@dataclass(frozen=True, slots=True)
class UnfitChange:
    """One change the lake cannot take."""

    gl_seq: int
    op: str
    key: dict[str, str | None]
    """The key's values as the source prints them, by source column name."""
    column: str
    """The source column whose value does not fit."""
    value_kind: str
    """The lake type and the value, e.g. ``timestamp infinity``."""
    later_seq: int | None = None
    """The first later change of the same key still waiting (None: none)."""

    def label(self) -> str:
        """``gl_seq 12 (update of id=1, column at: timestamp infinity)``."""
        key = ", ".join(f"{name}={value}" for name, value in self.key.items())
        later = (
            f"; change gl_seq {self.later_seq} of the same key follows"
            if self.later_seq is not None
            else ""
        )
        operation = OPERATIONS.get(self.op, self.op)
        return (
            f"gl_seq {self.gl_seq} ({operation} of {key}, column {self.column}: "
            f"{self.value_kind}{later})"
        )


class UnfitChangeError(SourceError):
    """Changes waiting in the changelog that the lake cannot take (one line, names them)."""

    def __init__(self, message: str, changes: list[UnfitChange]) -> None:
        super().__init__(message)
        self.changes = changes


def table_option(record: OffloadedTable) -> str:
    """The ``-t`` value of ``record``'s source table."""
    return f"{record.source_schema}.{record.source_table}"


def set_aside_command(record: OffloadedTable, seqs: list[int]) -> str:
    """The command that sets exactly ``seqs`` aside."""
    listed = ",".join(str(seq) for seq in seqs)
    return f"offload -t {table_option(record)} -x {SET_ASIDE_OPTION}={listed}"


def value_kind(column: Column, text: str | None) -> str:
    """``timestamp infinity``: the column's lake type (without its size) and the value."""
    kind = column.lake_type.split("(")[0].removesuffix("_ntz")
    if text is None:
        return f"{kind} value"
    shown = text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."
    return f"{kind} {shown}"


def column_of(record: OffloadedTable, lake_name: str) -> Column:
    """The column whose lake name is ``lake_name``."""
    return next(column for column in record.columns if column.lake_name == lake_name)


@dataclass(frozen=True, slots=True)
class UnfitSearch:
    """What a feed found of the changes a set-aside names."""

    unfit: list[UnfitChange]
    """Waiting, and refused by the lake."""
    fitting: list[int]
    """Waiting, and the lake takes them."""
    rows: dict[int, dict[str, str | None]]
    """Every value of each waiting change named, as the source prints it."""


def unfit_change(
    record: OffloadedTable,
    state: IncrementalState,
    text: changelog.ChangeText,
    lake_column: str,
    later_seq: int | None,
) -> UnfitChange:
    """``text`` (a change whose value in ``lake_column`` the lake refuses) as an UnfitChange."""
    column = column_of(record, lake_column)
    return UnfitChange(
        gl_seq=text.gl_seq,
        op=text.gl_op,
        key={key: text.values.get(key) for key in state.key_columns},
        column=column.name,
        value_kind=value_kind(column, text.values.get(column.name)),
        later_seq=later_seq,
    )


def refused_seqs(error: UnfitValueError) -> list[int]:
    """The ``gl_seq`` of the changes ``error`` found unfit (none: its rows are not changes)."""
    return [int(row["gl_seq"]) for row in error.rows if row.get("gl_seq") is not None]


def refusal(
    record: OffloadedTable, state: IncrementalState, changes: list[UnfitChange], more: int
) -> UnfitChangeError:
    """The one-line error naming ``changes`` (and ``more`` unnamed ones of the same batch)."""
    named = "; ".join(change.label() for change in changes)
    also = f" (and {more} more of this batch, named once these are set aside)" if more > 0 else ""
    return UnfitChangeError(
        f"{state.table_key}: the lake cannot take {len(changes)} waiting change(s): {named}"
        f"{also}; nothing was extracted. Fix the row in the source if it still holds the "
        f"value, then set just these changes aside (they are recorded, not lost): "
        f"{set_aside_command(record, [change.gl_seq for change in changes])} ({DOCS})",
        changes,
    )


def narrow(
    seqs: list[int],
    convert: Callable[[list[int]], object],
    found: Callable[[int, str], UnfitChange],
) -> tuple[list[UnfitChange], list[int]]:
    """Which changes of ``seqs`` the lake refuses, and those it takes: ``convert`` types the
    changes given, raising ``UnfitValueError`` for those that do not fit; each refusal is
    named by ``found(gl_seq, lake column)`` and the rest tried again until they all fit.

    Raises:
        UnfitValueError: a conversion failed without naming a change of ``seqs``.
    """
    from gluon.source.arrow import UnfitValueError  # pyarrow: the changes were read

    remaining = sorted(seqs)
    refusals: list[UnfitChange] = []
    while remaining:
        try:
            convert(remaining)
        except UnfitValueError as exc:
            refused = [seq for seq in refused_seqs(exc) if seq in remaining]
            if not refused:
                raise
            refusals += [found(seq, exc.column) for seq in refused]
            remaining = [seq for seq in remaining if seq not in refused]
            continue
        break
    return sorted(refusals, key=lambda change: change.gl_seq), remaining
