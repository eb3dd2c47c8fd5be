"""A table's changes out of its database's shared PG_LOGICAL slot, a framed batch at a
time (issue 33, deliverable 2): the slot's stream cut at transaction boundaries and framed
by the batch decoder (``gluon.source.pgoutput_batch``), then one table's changes of the
transactions it ships, column at a time. What ``shared_shipping.table_changes`` gives per
transaction and per value, for ``gluon.extract.feeds.shared_reader``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gluon.source.pgoutput import Relation
from gluon.source.pgoutput_batch import Batch, TableChanges, frame
from gluon.source.publication import (
    SLOT_BUSY_WAIT_SECONDS,
    DatabaseSlot,
    stream_database_slot,
    when_slot_free,
)
from gluon.source.shared_shipping import PartialTruncateError, TablePosition, format_lsn

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.schema import TableSpec
    from gluon.source.base import SourceDialect

FRAME_MESSAGES = 100_000
"""Messages framed at once (at least: whole transactions): the numpy work per batch is
amortised, memory stays bounded (a transaction larger than this is framed whole)."""
_BEGIN, _COMMIT = ord("B"), ord("C")


def slot_messages(
    source: SourceDialect,
    shared: DatabaseSlot,
    upto: int,
    spec: TableSpec,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> Generator[pa.Array]:
    """The slot's pgoutput messages (``stream_database_slot``: one decoding up to
    ``upto``), as Arrow binary arrays: through the driver's Arrow stream where the source
    has one (one buffer per batch, no Python object per message), else the rows' bytes.
    Started again while another process reads the slot; ``spec`` names the read in errors.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    import pyarrow as pa
    import sqlalchemy as sa

    params = {"slot": shared.slot, "publication": shared.publication, "upto": format_lsn(upto)}
    statement = sa.text(source.render("stream_database_slot"))

    def opened() -> tuple[Iterator[pa.RecordBatch] | None, pa.RecordBatch | None]:
        batches = source.arrow_batches(spec, statement, params)
        if batches is None:
            return None, None
        try:
            return batches, next(batches, None)
        except BaseException:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # a stream that met a busy slot: closed before the retry
            raise

    batches, first = when_slot_free(opened, wait_seconds)
    if batches is None:  # no Arrow stream: the rows, as bytes
        for chunk in stream_database_slot(source, shared, upto, wait_seconds=wait_seconds):
            yield pa.array(chunk, type=pa.binary())
        return
    try:
        if first is not None:
            yield first.column("data")
            for batch in batches:
                yield batch.column("data")
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def framed_batches(
    chunks: Iterable[pa.Array], relations: dict[int, Relation], budget: list[int] | None
) -> Generator[Batch]:
    """``chunks`` (the slot's messages, in order) framed into batches of whole
    transactions; a transaction the messages end inside is left out (a later stream reads
    it whole). ``budget`` (one count): stop after that many messages, the count left in it.

    Raises:
        ProtocolError: a message is malformed, or a change comes outside a transaction.
    """
    pending: list[pa.Array] = []
    pending_count = 0
    carried: list[pa.Array] = []  # the open transaction's messages so far
    try:
        for chunk in chunks:
            if budget is not None:
                chunk = chunk.slice(0, max(budget[0], 0))
                budget[0] -= len(chunk)
            whole, open_at = _last_open(chunk)
            if whole:
                pending += [*carried, chunk.slice(0, open_at)]
                pending_count += sum(len(part) for part in carried) + open_at
                carried = [chunk.slice(open_at)]
            else:
                carried.append(chunk)
            if pending_count >= FRAME_MESSAGES:
                yield frame(_chunked(pending), relations)
                pending, pending_count = [], 0
            if budget is not None and budget[0] <= 0:
                break
        if pending_count:
            yield frame(_chunked(pending), relations)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _chunked(arrays: list[pa.Array]) -> pa.ChunkedArray:
    import pyarrow as pa

    return pa.chunked_array([array for array in arrays if len(array)], type=arrays[0].type)


def _last_open(chunk: pa.Array) -> tuple[bool, int]:
    """Whether ``chunk`` (binary messages) has a BEGIN or COMMIT, and where the transaction
    still open at its end begins (its length: none is open)."""
    import pyarrow as pa

    if not len(chunk):
        return False, 0
    wide = pa.types.is_large_binary(chunk.type)
    _, offsets_buffer, data_buffer = chunk.buffers()
    every: np.ndarray = np.frombuffer(offsets_buffer, dtype=np.int64 if wide else np.int32)
    offsets = every[chunk.offset : chunk.offset + len(chunk) + 1].astype(np.int64)
    if data_buffer is None or not len(data_buffer):
        return False, 0
    data = np.frombuffer(data_buffer, dtype=np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    kinds = np.where(ends > starts, data[np.minimum(starts, len(data) - 1)], 0)
    marks = np.flatnonzero((kinds == _BEGIN) | (kinds == _COMMIT))
    if not len(marks):
        return False, 0
    last = int(marks[-1])
    return True, len(chunk) if kinds[last] == _COMMIT else last


@dataclass(slots=True)
class Piece:
    """One table's changes in a framed batch's transactions it ships, handed out in
    whole transactions."""

    changes: TableChanges
    commit_lsns: np.ndarray
    """The batch's transactions' commit LSNs (``changes.transactions`` index them)."""
    end_lsns: np.ndarray
    handed: int = 0
    """Changes handed out so far."""

    @classmethod
    def of(
        cls,
        batch: Batch,
        leaves: frozenset[int],
        start: TablePosition,
        names: list[str],
        keys: Sequence[str],
        relations: dict[int, Relation],
    ) -> Piece:
        """The changes of the table whose rows the relations ``leaves`` hold that
        ``start`` ships in ``batch`` (a TRUNCATE of every leaf is the table's ``T``).

        Raises:
            PartialTruncateError: a shipped transaction truncated some partitions only.
            pgoutput.UnloggedValueError: an UPDATE left a large value out and no old row
                holds it.
            pgoutput.ProtocolError: a change names a relation the slot never described.
        """
        shipped = _shipped(batch, start)
        for at, truncate in batch.truncates:
            if batch.transaction[at] < 0 or not shipped[batch.transaction[at]]:
                continue
            emptied = leaves.intersection(truncate.relations)
            if emptied and emptied != leaves:
                named = ", ".join(
                    sorted(relations[oid].name for oid in emptied if oid in relations)
                )
                commit = int(batch.commit_lsns[batch.transaction[at]])
                raise PartialTruncateError(
                    f"a TRUNCATE committed at {format_lsn(commit)} emptied some partitions "
                    f"only ({named})"
                )
        changes = batch.table(set(leaves), names, keys, shipped)
        return cls(changes, batch.commit_lsns, batch.end_lsns)

    def left(self) -> bool:
        return self.handed < len(self.changes)

    def take(self, wanted: int, position: TablePosition) -> tuple[Piece, TablePosition]:
        """The next whole transactions, at least ``wanted`` changes unless none are left
        (``wanted`` >= 1), and ``position`` past them (past the whole batch once every
        change is out)."""
        changes = self.changes
        first = self.handed
        last = first + wanted - 1
        if last >= len(changes) - 1:
            stop = len(changes)
            position = self.end(position)
        else:
            transaction = changes.transactions[last]
            stop = int(np.searchsorted(changes.transactions, transaction, side="right"))
            position = position.past(int(self.end_lsns[transaction]))
        self.handed = stop
        count = stop - first
        part = TableChanges(
            ops=changes.ops.slice(first, count),
            columns=[column.slice(first, count) for column in changes.columns],
            transactions=changes.transactions[first:stop],
            positions=changes.positions[first:stop],
        )
        return Piece(part, self.commit_lsns, self.end_lsns, count), position

    def end(self, position: TablePosition) -> TablePosition:
        """``position`` past every transaction of the batch."""
        if not len(self.end_lsns):
            return position
        return position.past(int(self.end_lsns[-1]))


def _shipped(batch: Batch, start: TablePosition) -> np.ndarray:
    """Per whole transaction of ``batch``: whether the table ships it from ``start`` (a
    position met later in the same stream ships the same ones: it moves past transactions
    committed before, and drops the snapshot only past its boundary)."""
    commits = batch.commit_lsns
    ships: np.ndarray = commits >= start.position
    snapshot = start.snapshot
    if snapshot is not None:
        for at in np.flatnonzero(ships & (commits < snapshot.boundary)):
            ships[at] = not snapshot.sees(int(batch.xids[at]))
    return ships
