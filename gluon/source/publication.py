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

import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from gluon.errors import SourceError, StateError
from gluon.faults import fault_point
from gluon.naming import database_slot_name
from gluon.source.base import SourceDialect
from gluon.source.pgoutput import Relation
from gluon.source.shared_shipping import OffloadSnapshot, format_lsn, parse_lsn

PUBLISH_WAIT_SECONDS = 600.0
"""How long :func:`publish_table` waits for the transactions older than the table's
``ALTER PUBLICATION`` to end before it gives up (naming the one it waited for)."""

SLOT_BUSY_WAIT_SECONDS = 30.0
"""How long a read waits while another process reads the slot (one reader at a time)."""

STREAM_FETCH_ROWS = 10_000
"""Slot messages fetched from the stream's cursor at a time."""

T = TypeVar("T")


def when_slot_free(action: Callable[[], T], wait_seconds: float = SLOT_BUSY_WAIT_SECONDS) -> T:
    """``action()`` (a read or an advance of a slot), again every 0.2 s while another
    process reads the slot (``... is active for PID ...``), for ``wait_seconds`` at most.

    Raises:
        SourceError: ``action`` failed otherwise, or the slot stayed busy.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return action()
        except SourceError as exc:
            if "is active for PID" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


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
    fault_point("capture.after_shared_slot_drop")
    if state.has_publication:
        source.execute_script("drop_database_publication", publication=shared.publication)


@dataclass(frozen=True, slots=True)
class _Named:
    """What the ``drop_replication_slot`` template reads of a slot: its name."""

    name: str


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
    params = {"slot": shared.slot, "publication": shared.publication, "upto": format_lsn(upto)}
    chunks = stream_when_free(source, "stream_database_slot", params, rows, wait_seconds)
    try:
        for chunk in chunks:
            yield _messages(chunk)
    finally:
        chunks.close()


def stream_when_free(
    source: SourceDialect,
    template: str,
    params: dict[str, Any],
    rows: int = STREAM_FETCH_ROWS,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> Generator[list[Any]]:
    """The rows of a slot read by the ``template`` stream, ``rows`` at a time; started
    again while another process reads the slot (its first fetch is where the server
    decodes, holding the slot), for ``wait_seconds`` at most.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """

    def opened() -> tuple[Generator[list[Any]], list[Any] | None]:
        stream = source.stream_query(template, params, rows=rows)
        return stream, next(stream, None)

    stream, first = when_slot_free(opened, wait_seconds)
    try:
        if first is not None:
            yield first
            yield from stream
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
    when_slot_free(
        lambda: source.execute_script("advance_slot", slot=shared.slot, lsn=format_lsn(lsn)),
        wait_seconds,
    )


def table_leaves(source: SourceDialect, schema: str, table: str) -> frozenset[int]:
    """The oids of the relations holding ``schema.table``'s rows now (the table, or its
    partitions at any depth): what its changes carry in the shared slot's messages.

    Raises:
        SourceError: the table is gone, or the catalog cannot be read.
    """
    leaves = present_table_leaves(source, schema, table)
    if leaves is None:
        raise SourceError(f"table {schema}.{table} is gone from the source")
    return leaves


def present_table_leaves(source: SourceDialect, schema: str, table: str) -> frozenset[int] | None:
    """:func:`table_leaves`, None when the table is gone.

    Raises:
        SourceError: the catalog cannot be read.
    """
    rows = source.run_query("table_leaves", {"schema": schema, "table": table})
    if any(row[0] is None for row in rows):
        return None
    return frozenset(int(row[0]) for row in rows)


def leaves_named(relations: Mapping[int, Relation], schema: str, table: str) -> frozenset[int]:
    """The oids the slot's RELATION messages (``relations``, by oid) gave ``schema.table``:
    how a dropped table's changes still waiting in the slot are found once the catalog
    forgot its oid (the table alone: its partitions are not known any more)."""
    return frozenset(
        oid
        for oid, relation in relations.items()
        if (relation.schema, relation.name) == (schema, table)
    )


def generated_columns(source: SourceDialect, schema: str, table: str) -> list[str]:
    """The stored generated columns of ``schema.table``: the shared slot's pgoutput does not
    send their values.

    Raises:
        SourceError: the table is gone, or the catalog cannot be read.
    """
    rows = source.run_query("generated_columns", {"schema": schema, "table": table})
    return [str(row[0]) for row in rows]


def publishing_problem(
    source: SourceDialect, shared: DatabaseSlot, schema: str, table: str
) -> str | None:
    """Why the user cannot put ``schema.table`` in the shared slot's publication (None: it
    can, or the table is gone, which the offload reports).

    Raises:
        SourceError: the catalog cannot be read.
    """
    rows = source.run_query(
        "publishing_privileges",
        {"schema": schema, "table": table, "publication": shared.publication},
    )
    if not rows:
        return None
    user, owns_table, publication_exists, may_publish = rows[0]
    if not owns_table:
        return (
            f"{user} does not own {schema}.{table}, and adding it to the shared slot's "
            "publication (ALTER PUBLICATION ... ADD TABLE) needs its owner"
        )
    if may_publish:
        return None
    if publication_exists:
        return (
            f"{user} does not own the shared slot's publication {shared.publication}, which "
            "adding a table to it needs"
        )
    return (
        f"{user} may not create the shared slot's publication {shared.publication} (CREATE "
        "on the database)"
    )
