"""Changes decoded from a replication slot as text, turned into the lake's Arrow types here,
without sending them back to PostgreSQL to be cast.

test_decoding prints each value with its type's output function, in the session gluon
pins (``DateStyle=ISO``, ``TimeZone=UTC``, ``IntervalStyle=postgres``: see
``gluon.source.postgresql.PINNED_STYLES``). For every lake type PostgreSQL offloads to,
that text is what Arrow's own string casts read (integers, ``NaN``/``Infinity`` floats,
``true``/``false``, ISO dates, timestamps ending ``+00``, exact decimals), except bytea,
which is decoded here. The casts go through :func:`gluon.source.arrow.conform`, so a value
that does not fit (an infinity, a BC date, a numeric NaN, a rounded decimal) is refused with
the same one-line error, naming the change by its ``gl_seq``, as a read from the table.
Columns read as text from the table (json, uuid, interval, ...) are the same text here:
``column::text`` calls the same output function.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gluon.errors import SourceError
from gluon.schema import Column, TableSpec, arrow_string_scalar
from gluon.source.arrow import conform
from gluon.source.logical import printed, unquote
from gluon.source.pgoutput import ABSENT

_ESCAPE_TOKEN = re.compile(rb"(\\\\)|\\([0-3][0-7]{2})|(\\)|[^\\]+")
"""In bytea's escape format: a doubled backslash, an octal byte, a stray backslash, or a run
of bytes standing for themselves."""


def _bytea(text: str) -> bytes:
    """A bytea value's text (``\\x`` hex, or the older escape format a database may still
    set in ``bytea_output``) as its bytes.

    Raises:
        ValueError: ``text`` is neither form.
    """
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    # Escape format: printable ASCII as itself, ``\\`` for a backslash, ``\ooo`` octal.
    decoded = bytearray()
    for match in _ESCAPE_TOKEN.finditer(text.encode("ascii")):
        backslash, octal, stray = match.groups()
        if stray:
            raise ValueError(f"not a bytea value: {text[:40]!r}")
        decoded += b"\\" if backslash else bytes([int(octal, 8)]) if octal else match[0]
    return bytes(decoded)


def _binary(values: pa.Array, spec: TableSpec, name: str) -> pa.Array:
    try:
        return pa.array(
            [None if v is None else _bytea(v) for v in values.to_pylist()], type=pa.binary()
        )
    except (ValueError, UnicodeEncodeError) as exc:
        raise SourceError(
            f"column {name} of {spec.schema}.{spec.name}: a bytea value in the slot gluon "
            f"cannot read ({exc}); report this to the gluon team"
        ) from None


def _unquoted(printed: pa.Array) -> pa.Array:
    """Printed values (``gluon.source.logical.plain_printed``) as text, one column at once:
    ``'it''s'`` is ``it's``, a bare ``null`` and a value not logged are NULL."""
    quoted = pc.starts_with(printed, "'")
    # Scalars built from bytes: a Python literal here would make pyarrow import pandas.
    null = pa.nulls(1, pa.string())[0]
    bare = pc.if_else(pc.equal(printed, arrow_string_scalar("null")), null, printed)
    if not pc.any(quoted).as_py():
        return bare
    inner = pc.replace_substring(pc.utf8_slice_codeunits(printed, 1, -1), "''", "'")
    return pc.if_else(quoted, inner, bare)


def _typed(
    texts: Sequence[pa.Array], seqs: pa.Array, ops: pa.Array, spec: TableSpec, schema: pa.Schema
) -> pa.Table:
    """The table's columns as text, then ``gl_seq`` and ``gl_op``, in ``schema``'s types."""
    arrays = [
        _binary(values, spec, field.name) if pa.types.is_binary(field.type) else values
        for values, field in zip(texts, schema, strict=False)
    ]
    batch = pa.RecordBatch.from_arrays([*arrays, seqs, ops], names=schema.names)
    return pa.Table.from_batches([conform(batch, schema, spec)], schema=schema)


def typed_value(text: str, column: Column) -> object:
    """``text`` (the source's text of a value of ``column``, as a decoded change holds it)
    as a Python value of the column's Arrow type, typed as a decoded change's value is.

    Raises:
        UnfitValueError: the value does not fit the column's lake type.
    """
    spec = TableSpec(schema="", name="", columns=(column,))
    schema = pa.schema([*spec.arrow_schema, ("seq", pa.int64()), ("op", pa.string())])
    typed = changes_as_arrow([[text, "0", "I"]], spec, schema)
    return typed.column(0)[0].as_py()


def changes_as_arrow(
    changes: Sequence[Sequence[str | None]], spec: TableSpec, schema: pa.Schema
) -> pa.Table:
    """``changes`` (each the table's column values as text, then ``gl_seq`` and ``gl_op``)
    as one Arrow table of ``schema`` (the table's lake columns, then the change fields).

    Raises:
        UnfitValueError: a value does not fit its column's lake type (its rows name the
            changes by ``gl_seq``).
        SourceError: a bytea value is in neither of PostgreSQL's text forms.
    """
    if not changes:
        return schema.empty_table()
    columns = [pa.array(values, type=pa.string()) for values in zip(*changes, strict=True)]
    seqs = pc.cast(columns[-2], pa.int64())
    texts = [
        present_values(values, column.missing_value)
        for values, column in zip(columns[:-2], spec.columns, strict=True)
    ]
    return _typed(texts, seqs, columns[-1], spec, schema)


def present_values(values: pa.Array, missing_value: str | None) -> pa.Array:
    """``values`` with each :data:`~gluon.source.pgoutput.ABSENT` (a change made before the
    column was added) as ``missing_value``, the value the source's rows read since."""
    absent = pc.equal(values, arrow_string_scalar(ABSENT))
    if not pc.any(absent).as_py():
        return values
    if missing_value is None:
        return pc.if_else(absent, pa.nulls(len(values), pa.string()), values)
    return pc.if_else(absent, arrow_string_scalar(missing_value), values)


def fill_absent(
    rows: Sequence[Sequence[str | None]], ops: Sequence[str], spec: TableSpec
) -> Sequence[Sequence[str | None]]:
    """Printed ``rows`` (the operation, then the values) with each value of an INSERT or
    an UPDATE the slot did not print (the change was made before its column was added)
    as the column's ``missing_value``, printed: what the source's rows read since."""
    defaults = [
        (at, printed(column.missing_value))
        for at, column in enumerate(spec.columns, start=1)
        if column.missing_value is not None
    ]
    if not defaults:
        return rows
    filled: list[Sequence[str | None]] = []
    for row, op in zip(rows, ops, strict=True):
        if op in ("I", "U") and any(row[at] is None for at, _ in defaults):
            values = list(row)
            for at, value in defaults:
                if values[at] is None:
                    values[at] = value
            row = values
        filled.append(row)
    return filled


@dataclass(slots=True)
class PrintedChanges:
    """A batch of the table's changes as the slot printed them, in order, unquoted and
    typed column by column when the batch is complete: each change's printed row (its
    first item the operation as printed, or empty where the careful reader decoded the
    row; then the column values, ``gluon.source.logical.plain_printed``), its ``gl_seq``
    and its ``gl_op``."""

    printed: list[Sequence[str | None]] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)

    def extend(
        self, printed: Sequence[Sequence[str | None]], seqs: Sequence[int], ops: Sequence[str]
    ) -> None:
        self.printed.extend(printed)
        self.seqs.extend(seqs)
        self.ops.extend(ops)

    def __len__(self) -> int:
        return len(self.seqs)

    def texts(self) -> list[list[str | None]]:
        """Each change as text: its values, then ``gl_seq`` and ``gl_op`` (failure paths)."""
        return [
            [*(unquote(value) for value in row[1:]), str(seq), op]
            for row, seq, op in zip(self.printed, self.seqs, self.ops, strict=True)
        ]

    def as_arrow(self, spec: TableSpec, schema: pa.Schema) -> pa.Table:
        """The batch in ``schema``'s types (see :func:`changes_as_arrow`).

        Raises:
            UnfitValueError: a value does not fit its column's lake type.
            SourceError: a bytea value is in neither of PostgreSQL's text forms.
        """
        if not self.seqs:
            return schema.empty_table()
        # Rows to columns in Arrow, without pa.array on Python values (it makes pyarrow
        # import pandas: a second of a 100k-change extraction, issue 33): every value in one
        # buffer, cut by offsets numpy finds, then every ``width``-th value taken per column.
        width = len(spec.columns) + 1
        rows = fill_absent(self.printed, self.ops, spec)
        flat = _strings(itertools.chain.from_iterable(rows))
        if len(flat) != width * len(rows):
            raise ValueError("printed rows of unequal width")  # a bug, never the data
        texts = [
            _unquoted(pc.cast(flat.take(_int64s(np.arange(column, len(flat), width))), pa.string()))
            for column in range(1, width)
        ]
        seqs = _int64s(np.fromiter(self.seqs, dtype=np.int64, count=len(self.seqs)))
        return _typed(texts, seqs, _strings(self.ops), spec, schema)


_SEPARATOR = "\x00"
"""Between values in :func:`_strings`: no PostgreSQL text holds a NUL."""


def _strings(values: Iterable[str | None]) -> pa.Array:
    """``values`` (printed text; None, a value not logged, as ``null``) as an Arrow string
    array, built from buffers (no pandas)."""
    texts = ["null" if value is None else value for value in values]
    encoded = "".join([_SEPARATOR.join(texts), _SEPARATOR if texts else ""]).encode()
    # Each value ends at a separator; dropping the separators moves the i-th end i bytes.
    ends = np.flatnonzero(np.frombuffer(encoded, dtype=np.uint8) == 0)
    offsets = np.concatenate([np.zeros(1, dtype=np.int64), ends - np.arange(len(ends))])
    data = pa.py_buffer(encoded.replace(_SEPARATOR.encode(), b""))
    if len(data) >= 1 << 31:  # more than int32 offsets reach: cast per column later
        return pa.Array.from_buffers(
            pa.large_string(), len(ends), [None, pa.py_buffer(offsets), data]
        )
    offsets32 = pa.py_buffer(offsets.astype(np.int32))
    return pa.Array.from_buffers(pa.string(), len(ends), [None, offsets32, data])


def _int64s(values: np.ndarray) -> pa.Array:
    """An int64 numpy array as Arrow, sharing its buffer (no pandas)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
