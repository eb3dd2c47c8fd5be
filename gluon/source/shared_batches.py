"""A table's changes out of its database's shared PG_LOGICAL slot, a framed batch at a
time (issue 33, deliverable 2): the slot's stream cut at transaction boundaries and framed
by the batch decoder (``gluon.source.pgoutput_batch``), then one table's changes of the
transactions it ships, column at a time. What ``shared_shipping.table_changes`` gives per
transaction and per value, for ``gluon.extract.feeds.shared_reader``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gluon.source.pgoutput import Relation
from gluon.source.pgoutput_batch import Batch, TableChanges, frame
from gluon.source.shared_shipping import PartialTruncateError, TablePosition, format_lsn

FRAME_MESSAGES = 100_000
"""Messages framed at once (at least: whole transactions): the numpy work per batch is
amortised, memory stays bounded (a transaction larger than this is framed whole)."""
_BEGIN, _COMMIT = ord("B"), ord("C")


def framed_batches(
    chunks: Iterable[list[bytes]], relations: dict[int, Relation], budget: list[int] | None
) -> Generator[Batch]:
    """``chunks`` (the slot's messages, in order) framed into batches of whole
    transactions; a transaction the messages end inside is left out (a later stream reads
    it whole). ``budget`` (one count): stop after that many messages, the count left in it.

    Raises:
        ProtocolError: a message is malformed, or a change comes outside a transaction.
    """
    pending: list[bytes] = []
    carried: list[bytes] = []  # the open transaction's messages so far
    try:
        for chunk in chunks:
            if budget is not None:
                chunk = chunk[: max(budget[0], 0)]
                budget[0] -= len(chunk)
            whole, open_at = _last_open(chunk)
            if whole:
                pending += carried
                pending += chunk[:open_at]
                carried = chunk[open_at:]
            else:
                carried += chunk
            if len(pending) >= FRAME_MESSAGES:
                yield frame(pending, relations)
                pending = []
            if budget is not None and budget[0] <= 0:
                break
        if pending:
            yield frame(pending, relations)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _last_open(chunk: list[bytes]) -> tuple[bool, int]:
    """Whether ``chunk`` ends a transaction (has a COMMIT or BEGIN), and where the
    transaction still open at its end begins (its length: none is open)."""
    for at in range(len(chunk) - 1, -1, -1):
        kind = chunk[at][0] if chunk[at] else 0
        if kind == _COMMIT:
            return True, len(chunk)
        if kind == _BEGIN:
            return True, at
    return False, 0


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
