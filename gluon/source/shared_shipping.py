"""What each table of a database's shared PG_LOGICAL slot ships (issue 33, deliverable 1):
its position, its offload snapshot, one table's changes out of the slot's stream, and where
the slot may be confirmed to. Pure logic over ``gluon.source.pgoutput``'s transactions; the
server side (slot, publication, snapshot, stream) is ``gluon.source.publication``.

A table ships a transaction iff its commit record starts at or after the table's position
and the table's offload snapshot does not see it (:meth:`OffloadSnapshot.ships`: by
transaction id, exact, until the WAL position read once the snapshot was taken; a commit
LSN compared with a position read in the snapshot is not, a commit record being written
before its backend leaves the proc array). The slot is confirmed to the least position over
the database's tables (:func:`confirm_plan`), a table lagging past a bound left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gluon.source import pgoutput

_XID_SPAN = 1 << 32


def parse_lsn(text: str) -> int:
    """A ``pg_lsn`` (``X/Y``, hexadecimal) as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    """``lsn`` as ``pg_lsn`` text."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@dataclass(frozen=True, slots=True)
class OffloadSnapshot:
    """The snapshot a table's offload read under: which transactions the copy holds."""

    xmin: int
    """Every transaction id below it had ended (committed: seen; aborted: never sent)."""
    xmax: int
    """No transaction id from here on had ended: none is seen."""
    running: frozenset[int]
    """Ids between ``xmin`` and ``xmax`` still running: not seen."""
    boundary: int
    """A WAL position read once the snapshot was taken: every transaction seen committed
    before it, so a transaction committed at or after it is never seen."""

    @classmethod
    def parse(cls, text: str, boundary: int) -> OffloadSnapshot:
        """``xmin:xmax:xip,...`` (``pg_current_snapshot``) and the boundary.

        Raises:
            ValueError: ``text`` is not a snapshot.
        """
        xmin, xmax, running = text.split(":")
        return cls(
            int(xmin), int(xmax), frozenset(int(x) for x in running.split(",") if x), boundary
        )

    def text(self) -> str:
        """As ``pg_current_snapshot`` prints it (to be recorded, and parsed again)."""
        return f"{self.xmin}:{self.xmax}:{','.join(str(x) for x in sorted(self.running))}"

    def full_xid(self, xid: int) -> int:
        """The 64-bit id of ``xid`` (32 bits, as pgoutput's BEGIN gives it): the one within
        2^31 of ``xmax`` (a transaction the slot sends near the snapshot)."""
        candidate = (self.xmax & ~(_XID_SPAN - 1)) | xid
        if candidate > self.xmax + _XID_SPAN // 2:
            candidate -= _XID_SPAN
        elif candidate < self.xmax - _XID_SPAN // 2:
            candidate += _XID_SPAN
        return candidate

    def sees(self, xid: int) -> bool:
        """Whether the committed transaction ``xid`` (32 bits) is in the copy."""
        full = self.full_xid(xid)
        return full < self.xmax and full not in self.running

    def ships(self, xid: int, commit_lsn: int) -> bool:
        """Whether the transaction ``xid`` committed at ``commit_lsn`` is the table's to ship
        (the copy does not hold it)."""
        return commit_lsn >= self.boundary or not self.sees(xid)


@dataclass(frozen=True, slots=True)
class ConfirmPlan:
    """Where the shared slot may be confirmed to, and which tables leave its minimum."""

    target: int | None
    """The least position over the tables kept (None: none: leave the slot alone)."""
    released: dict[str, int]
    """Tables whose position lags the WAL by more than the bound: table -> bytes behind.
    Their changes since are given up (they need a re-offload), with a warning."""


def confirm_plan(
    positions: dict[str, int],
    flushed: int,
    max_retained_wal: int | None,
    shipping: str | None = None,
) -> ConfirmPlan:
    """Plan the slot's confirmation over ``positions`` (table -> position; a table being
    enabled holds 0), the WAL flushed at ``flushed``: a table more than ``max_retained_wal``
    bytes behind is left out of the minimum (None: no bound), so one table that cannot ship
    does not make the source keep WAL without end; a table being enabled is never left out
    (its enable waits for nothing the slot keeps), nor the table ``shipping`` now (the one
    whose extraction confirms: it is catching up).
    """
    released = {
        table: flushed - position
        for table, position in positions.items()
        if max_retained_wal is not None
        and position
        and table != shipping
        and flushed - position > max_retained_wal
    }
    kept = [position for table, position in positions.items() if table not in released]
    return ConfirmPlan(min(kept, default=None), released)


@dataclass(frozen=True, slots=True)
class TablePosition:
    """Where one table of the shared slot stands: it ships the transactions committed at or
    after :attr:`position` (the start of their commit record, as the slot skips them once
    confirmed past it), those its offload's snapshot does not see while it matters."""

    position: int
    snapshot: OffloadSnapshot | None = None
    """The table's offload snapshot, until :attr:`position` passes its boundary."""

    def ships(self, transaction: pgoutput.Transaction) -> bool:
        """Whether the table ships ``transaction`` (a whole one: it has its commit)."""
        assert transaction.commit is not None
        commit_lsn = transaction.commit.commit_lsn
        if commit_lsn < self.position:
            return False  # shipped already: the slot is confirmed to the minimum table only
        return self.snapshot is None or self.snapshot.ships(transaction.begin.xid, commit_lsn)

    def past(self, lsn: int) -> TablePosition:
        """The position once every transaction committed before ``lsn`` is shipped (the end
        of the last one's commit record, or the end of a stream)."""
        position = max(self.position, lsn)
        snapshot = self.snapshot
        if snapshot is not None and position >= snapshot.boundary:
            snapshot = None
        return TablePosition(position, snapshot)


@dataclass(slots=True)
class ShippedTransaction:
    """One transaction's changes of a table, as ``pgoutput.table_rows`` gives them."""

    commit_lsn: int
    committed_at: dt.datetime
    ops: list[str]
    rows: list[list[str | None]]


class PartialTruncateError(ValueError):
    """A TRUNCATE emptied some partitions of a table only: the lake cannot apply it (it
    ships whole-table truncates)."""


def table_changes(
    transactions: Iterable[pgoutput.Transaction],
    relations: dict[int, pgoutput.Relation],
    leaves: frozenset[int],
    start: TablePosition,
    names: list[str],
    keys: Sequence[str],
) -> tuple[list[ShippedTransaction], TablePosition]:
    """The changes of the table whose rows the relations ``leaves`` hold that ``start``
    ships among ``transactions`` (whole ones, in commit order), and the table's position
    after them. A TRUNCATE of every leaf is the table's (``T``).

    Raises:
        PartialTruncateError: a shipped transaction truncated some partitions only.
        pgoutput.UnloggedValueError: an UPDATE left a large value out and no old row holds it.
        pgoutput.ProtocolError: a change names a relation the slot never described.
    """
    shipped: list[ShippedTransaction] = []
    position = start
    for transaction in transactions:
        commit = transaction.commit
        assert commit is not None
        if position.ships(transaction):
            for change in transaction.changes:
                if isinstance(change, pgoutput.Truncate):
                    emptied = leaves.intersection(change.relations)
                    if emptied and emptied != leaves:
                        named = ", ".join(
                            sorted(relations[oid].name for oid in emptied if oid in relations)
                        )
                        raise PartialTruncateError(
                            f"a TRUNCATE committed at {format_lsn(commit.commit_lsn)} emptied "
                            f"some partitions only ({named})"
                        )
            ops, rows = pgoutput.table_rows(transaction, relations, set(leaves), names, keys)
            if ops:
                shipped.append(
                    ShippedTransaction(commit.commit_lsn, commit.committed_at, ops, rows)
                )
        position = position.past(commit.end_lsn)
    return shipped, position
