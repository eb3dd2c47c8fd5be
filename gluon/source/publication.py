"""One replication slot per source database for PG_LOGICAL (issue 33, deliverable 1): the
slot, its publication, and the snapshot a table enabled later starts at.

Every PG_LOGICAL table of a database shares the slot ``gluondb_<database>_<installation>``
(pgoutput) and the publication of the same name, which holds exactly the enabled tables (a
partitioned table's changes arrive under the partition holding the row: see
``create_database_publication.sql.j2`` for why not through the root). The server decodes
each transaction once and sends only the published tables' changes
(:func:`stream_database_slot`, decoded by ``gluon.source.pgoutput``); another database's
WAL, or an unpublished table's, costs a scan of its records, not their decoding and transfer.

A table enabled while the slot exists starts exactly at its offload's snapshot:

1. :func:`publish_table` adds it to the publication, then waits until every transaction that
   held a transaction id when the ``ALTER PUBLICATION`` committed has ended. pgoutput
   decides membership with the catalog as of each change's WAL position, so a change written
   before the ALTER committed is never sent, even if its transaction commits later: the wait
   puts every such transaction in the offload's snapshot (as CREATE INDEX CONCURRENTLY waits).
   It returns the table's start position, read before that wait began: every transaction
   the snapshot does not see commits after it, so the slot is never confirmed past it while
   the table is being enabled (the caller records it before the offload).
2. :func:`offload_snapshot` exports the snapshot the offload reads under and gives it as an
   :class:`OffloadSnapshot`, whose :meth:`OffloadSnapshot.ships` says, transaction by
   transaction, whether the slot's change is the table's to ship (the copy does not hold
   it). Comparing a commit LSN with a WAL position read in the snapshot is not exact (a
   commit record is written before its backend leaves the proc array); the transaction id
   against the snapshot is, until the WAL position read once the snapshot was taken
   (:attr:`OffloadSnapshot.boundary`): every transaction committed from there on is unseen.

The first table of a database goes the same way: the publication is created empty, then
the slot (pgoutput refuses to decode WAL older than the publication it is asked for).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gluon.errors import SourceError, StateError
from gluon.naming import database_slot_name
from gluon.source import pgoutput
from gluon.source.base import SourceDialect

PUBLISH_WAIT_SECONDS = 600.0
"""How long :func:`publish_table` waits for the transactions older than the table's
``ALTER PUBLICATION`` to end before it gives up (naming the one it waited for)."""

SLOT_BUSY_WAIT_SECONDS = 30.0
"""How long a read waits while another process reads the slot (one reader at a time)."""

STREAM_FETCH_ROWS = 10_000
"""Slot messages fetched from the stream's cursor at a time."""

_XID_SPAN = 1 << 32


def parse_lsn(text: str) -> int:
    """A ``pg_lsn`` (``X/Y``, hexadecimal) as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    """``lsn`` as ``pg_lsn`` text."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@dataclass(frozen=True, slots=True)
class DatabaseSlot:
    """The shared slot and the publication of one source database."""

    slot: str
    publication: str

    @classmethod
    def of(cls, source: SourceDialect, installation: str) -> DatabaseSlot:
        """The shared slot of ``source``'s database for ``installation`` (its id)."""
        name = database_slot_name(str(source.engine.url.database or "postgres"), installation)
        return cls(name, name)


@dataclass(frozen=True, slots=True)
class SlotState:
    """The shared slot and publication as the server holds them now."""

    has_publication: bool
    plugin: str | None
    """The slot's output plugin (None: the slot is missing)."""
    confirmed: int | None
    """Where the slot is confirmed to: it sends transactions committed from there on."""
    retained: int | None
    """The WAL bytes the slot makes the server keep."""
    reader: int | None
    """The backend reading the slot now (None: none)."""


def slot_state(source: SourceDialect, shared: DatabaseSlot) -> SlotState:
    """The shared slot and publication now.

    Raises:
        SourceError: the catalog cannot be read.
    """
    params = {"slot": shared.slot, "publication": shared.publication}
    has_publication, plugin, confirmed, retained, reader = source.run_query(
        "database_slot_state", params
    )[0]
    return SlotState(
        bool(has_publication),
        None if plugin is None else str(plugin),
        None if confirmed is None else parse_lsn(str(confirmed)),
        None if retained is None else int(retained),
        None if reader is None else int(reader),
    )


def ensure_database_slot(source: SourceDialect, shared: DatabaseSlot) -> None:
    """Create the publication (empty), then the slot, whichever is missing.

    Raises:
        StateError: a slot of that name exists with another output plugin.
        SourceError: the server refused (no free slot, no REPLICATION privilege).
    """
    state = slot_state(source, shared)
    if not state.has_publication:
        if state.plugin is not None:
            # A slot older than its publication cannot decode its own WAL with it: pgoutput
            # looks the publication up as of each change's position.
            raise StateError(
                f"replication slot {shared.slot} exists without its publication "
                f"{shared.publication}: drop the slot (SELECT pg_drop_replication_slot("
                f"'{shared.slot}')) once no table uses it, and enable again"
            )
        source.execute_script("create_database_publication", publication=shared.publication)
    if state.plugin is None:
        source.execute_script("create_database_slot", slot=shared.slot)
    elif state.plugin != "pgoutput":
        raise StateError(
            f"replication slot {shared.slot} exists with output plugin {state.plugin}, not "
            "pgoutput: gluon did not create it; drop or rename it, then enable again"
        )


def published_tables(source: SourceDialect, shared: DatabaseSlot) -> dict[tuple[str, str], int]:
    """The publication's tables: (schema, table) -> the table's oid (the relation its
    changes carry in pgoutput's messages).

    Raises:
        SourceError: the catalog cannot be read.
    """
    rows = source.run_query("published_tables", {"publication": shared.publication})
    return {(str(row[0]), str(row[1])): int(row[2]) for row in rows}


def publish_table(
    source: SourceDialect,
    shared: DatabaseSlot,
    schema: str,
    table: str,
    *,
    wait_seconds: float = PUBLISH_WAIT_SECONDS,
) -> int:
    """Add ``schema.table`` to the publication (if it is not in it), wait until every
    transaction that could have written to it unpublished has ended, and return the table's
    start position: every transaction the offload snapshot taken next does not see commits
    at or after it (see the module's text).

    Raises:
        StateError: a transaction older than the ALTER still runs after ``wait_seconds``.
        SourceError: the server refused.
    """
    if (schema, table) not in published_tables(source, shared):
        source.execute_script(
            "publish_table", publication=shared.publication, schema=schema, table=table
        )
    # Read before the id below is given out: a transaction with a later id starts after it.
    start = parse_lsn(str(source.run_query("wal_insert_position")[0][0]))
    wait_for_older_transactions(
        source, int(source.run_query("new_transaction_id")[0][0]), wait_seconds
    )
    return start


def wait_for_older_transactions(source: SourceDialect, xid: int, wait_seconds: float) -> None:
    """Return once no transaction with an id below ``xid`` runs.

    Raises:
        StateError: one still runs after ``wait_seconds`` (named, with its backend).
    """
    deadline = time.monotonic() + wait_seconds
    pause = 0.01
    while True:
        rows = source.run_query("transactions_older_than", {"xid": str(xid)})
        if not rows:
            return
        if time.monotonic() >= deadline:
            oldest, pid, state, query = rows[0]
            held = (
                f"backend {pid} ({state}: {query!r})"
                if pid is not None
                else "a prepared transaction (pg_prepared_xacts)"
            )
            raise StateError(
                f"transaction {oldest}, older than the table's addition to the publication, "
                f"still runs after {wait_seconds:.0f} s, held by {held}: its changes to the "
                "table would be missed; end it (commit, roll back, or pg_terminate_backend) "
                "and run the same command again"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def unpublish_table(source: SourceDialect, shared: DatabaseSlot, schema: str, table: str) -> None:
    """Take ``schema.table`` out of the publication (if it is in it).

    Raises:
        SourceError: the server refused.
    """
    if (schema, table) in published_tables(source, shared):
        source.execute_script(
            "unpublish_table", publication=shared.publication, schema=schema, table=table
        )


def drop_database_slot(source: SourceDialect, shared: DatabaseSlot) -> None:
    """Drop the slot, then the publication (when the database's last table goes).

    Raises:
        SourceError: the server refused (the slot is being read).
    """
    state = slot_state(source, shared)
    if state.plugin is not None:
        source.execute_script("drop_replication_slot", object=_Named(shared.slot))
    if state.has_publication:
        source.execute_script("drop_database_publication", publication=shared.publication)


@dataclass(frozen=True, slots=True)
class _Named:
    """What the ``drop_replication_slot`` template reads of a slot: its name."""

    name: str


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


@contextmanager
def offload_snapshot(source: SourceDialect) -> Iterator[OffloadSnapshot]:
    """Every Arrow read of ``source`` inside sees one snapshot taken now (the offload's),
    given as an :class:`OffloadSnapshot` (take it after :func:`publish_table`).

    Raises:
        SourceError: the snapshot cannot be exported.
    """
    with source.exported_snapshot() as text:
        boundary = parse_lsn(str(source.run_query("wal_insert_position")[0][0]))
        try:
            snapshot = OffloadSnapshot.parse(text, boundary)
        except ValueError as exc:
            raise SourceError(f"the server gave a snapshot gluon cannot read: {text!r}") from exc
        yield snapshot


def stream_database_slot(
    source: SourceDialect,
    shared: DatabaseSlot,
    upto: int,
    rows: int = STREAM_FETCH_ROWS,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> Generator[list[bytes]]:
    """The slot's pgoutput messages of every transaction committed up to ``upto`` that
    changed a published table, ``rows`` at a time from one decoding, waiting while another
    process reads the slot.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    deadline = time.monotonic() + wait_seconds
    params = {"slot": shared.slot, "publication": shared.publication, "upto": format_lsn(upto)}
    while True:
        stream = source.stream_query("stream_database_slot", params, rows=rows)
        try:
            first = next(stream, None)  # the server decodes here, holding the slot
        except SourceError as exc:
            if "is active for PID" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
            continue
        try:
            if first is not None:
                yield _messages(first)
                for chunk in stream:
                    yield _messages(chunk)
            return
        finally:
            stream.close()


def _messages(rows: list[Any]) -> list[bytes]:
    return [bytes(row[1]) for row in rows]


def wal_flush_position(source: SourceDialect) -> int:
    """Where the source's WAL is flushed now: a stream up to it sends every transaction
    committed before the call.

    Raises:
        SourceError: the server cannot be asked.
    """
    return parse_lsn(str(source.run_query("wal_flush_position")[0][0]))


def confirm(
    source: SourceDialect,
    shared: DatabaseSlot,
    lsn: int,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> None:
    """Confirm the slot up to ``lsn`` (never backwards): the server may drop the WAL of the
    transactions committed before it. The caller passes :func:`confirm_plan`'s target.
    Waits while another process reads the slot (a status peek): a busy slot is no failure.

    Raises:
        SourceError: the slot cannot be advanced (or stayed busy ``wait_seconds``).
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            source.execute_script("advance_slot", slot=shared.slot, lsn=format_lsn(lsn))
            return
        except SourceError as exc:
            if "is active for PID" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


@dataclass(frozen=True, slots=True)
class ConfirmPlan:
    """Where the shared slot may be confirmed to, and which tables leave its minimum."""

    target: int | None
    """The least position over the tables kept (None: none: leave the slot alone)."""
    released: dict[str, int]
    """Tables whose position lags the WAL by more than the bound: table -> bytes behind.
    Their changes since are given up (they need a re-offload), with a warning."""


def confirm_plan(
    positions: dict[str, int], flushed: int, max_retained_wal: int | None
) -> ConfirmPlan:
    """Plan the slot's confirmation over ``positions`` (table -> position; a table being
    enabled holds 0), the WAL flushed at ``flushed``: a table more than ``max_retained_wal``
    bytes behind is left out of the minimum (None: no bound), so one table that cannot ship
    does not make the source keep WAL without end; a table being enabled is never left out
    (its enable waits for nothing the slot keeps).
    """
    released = {
        table: flushed - position
        for table, position in positions.items()
        if max_retained_wal is not None and position and flushed - position > max_retained_wal
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


def table_leaves(source: SourceDialect, schema: str, table: str) -> frozenset[int]:
    """The oids of the relations holding ``schema.table``'s rows now (the table, or its
    partitions at any depth): what its changes carry in the shared slot's messages.

    Raises:
        SourceError: the table is gone, or the catalog cannot be read.
    """
    rows = source.run_query("table_leaves", {"schema": schema, "table": table})
    return frozenset(int(row[0]) for row in rows)


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
