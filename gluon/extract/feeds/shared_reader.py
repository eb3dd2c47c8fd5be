"""One table's changes read from its database's shared PG_LOGICAL slot, batch after batch,
as an extraction ships them (issue 33 item 1): what a feed of a table opted in to the shared
slot (``--incremental-pg-logical-slot=database``) reads and marks done, through
``shared_feed.SharedSlotFeed``.

An extraction decodes the slot once, up to the WAL flushed when it starts (``_horizon``), and
hands out whole transactions of the table, numbered as the per-table feed numbers them
(``gl_seq`` = commit LSN << 20 | position in the transaction: a re-read gives a change the
same number). After each batch's Delta commit, :meth:`SharedSlotReader.done` saves the
table's position past the batch's last transaction (``extract.before_shared_position``,
``extract.after_shared_position``), then confirms the slot to the least position of its
tables (``confirm_slot``): a run killed between the Delta commit and the save reads the
batch again at the next run, with the same numbers, which the extraction's already-shipped
check leaves out. A read that finds nothing more of the table saves its position past the
other tables' transactions at once (nothing of the table lies between).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gluon.errors import SourceError, StateError
from gluon.extract import shared_pass
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.base import REBUILD_HINT, SlotBacklog
from gluon.extract.feeds.pg_logical import POSITION_BITS, logical_sequence
from gluon.faults import fault_point
from gluon.repo import Repository
from gluon.repo.slot_positions import SlotPosition
from gluon.schema import TableSpec
from gluon.source import pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.shared_shipping import ShippedTransaction, TablePosition

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class SharedSlotReader:
    """Reads ``table_key``'s changes from the shared slot for one extraction."""

    source: SourceDialect
    repo: Repository
    table_key: str
    spec: TableSpec
    keys: Sequence[str]
    max_retained_wal: int | None = None
    """``confirm_slot``'s bound: a table lagging further is left out of the slot's minimum."""
    _transactions: Iterator[pgoutput.Transaction] | None = field(default=None, init=False)
    _relations: dict[int, pgoutput.Relation] = field(default_factory=dict, init=False)
    _leaves: frozenset[int] = field(default=frozenset(), init=False)
    _horizon: int = field(default=0, init=False)
    """The WAL flushed when the stream opened (0: not yet): the extraction reads no further."""
    _read_to: TablePosition | None = field(default=None, init=False)
    """The table's position past everything read so far (saved by :meth:`done`)."""

    def start(self) -> TablePosition:
        """The table's recorded position.

        Raises:
            StateError: the table is not in the shared slot, still joining, or released.
        """
        row = self.repo.slot_positions.get(self.table_key)
        if row is not None and row.released_reason is not None:
            raise StateError(f"{self.table_key}: {row.released_reason}")
        position = shared_slot.position_of(self.repo, self.table_key)
        if position is None:
            raise StateError(
                f"{self.table_key} has no position in its database's shared slot (not "
                f"enabled with it, or its enable did not finish): run the enable again, or "
                f"{REBUILD_HINT}"
            )
        return position

    def read(self, limit: int) -> pa.Table:
        """The next whole transactions of the table, at least ``limit`` changes unless the
        stream ends (empty: nothing more this extraction).

        Raises:
            StateError: the table is not in the slot, or a change cannot be shipped.
            SourceError: the slot cannot be read.
        """
        import pyarrow as pa

        from gluon.capture.objects import change_fields
        from gluon.source.logical_values import changes_as_arrow  # loads pyarrow

        schema = pa.schema([*self.spec.arrow_schema, *change_fields()])
        if self._transactions is None:
            if self._horizon:
                return schema.empty_table()  # the stream ended: the rest is the next run's
            self._read_to = self.start()
            self._open()
        wanted: list[ShippedTransaction] = []
        count = 0
        while count < limit:
            transaction = self._next()
            if transaction is None:
                break
            wanted.append(transaction)
            count += len(transaction.ops)
        if not wanted:
            self._save_and_confirm()  # only other tables' transactions: let the slot go on
            return schema.empty_table()
        rows: list[list[str | None]] = []
        for shipped in wanted:
            logical_sequence(shipped.commit_lsn, len(shipped.ops) - 1)  # refused if too large
            first = shipped.commit_lsn << POSITION_BITS
            for at, (op, values) in enumerate(zip(shipped.ops, shipped.rows, strict=True)):
                rows.append([*values, str(first + at), op])
        return changes_as_arrow(rows, self.spec, schema)

    def done(self) -> None:
        """Record the table's position past what :meth:`read` returned (call after the Delta
        commit holds it), then confirm the slot.

        Raises:
            SourceError: the slot cannot be confirmed (the position stays saved).
        """
        self._save_and_confirm()

    def _open(self, budget: list[int] | None = None) -> None:
        """Open the extraction's one decoding; ``budget`` (one count, for status): stop after
        that many messages, the count left in it (0: stopped early)."""
        shared = shared_slot.shared_slot(self.source, self.repo)
        self._leaves = publication.table_leaves(self.source, self.spec.schema, self.spec.name)
        self._horizon, chunks = shared_pass.stream(  # a replay inside a service pass
            shared.slot,
            lambda: publication.wal_flush_position(self.source),
            lambda horizon: publication.stream_database_slot(self.source, shared, horizon),
        )
        messages: Iterable[bytes] = (message for chunk in chunks for message in chunk)
        if budget is not None:
            messages = _within(messages, budget)
        self._transactions = pgoutput.transactions(messages, self._relations)

    def backlog(self, max_messages: int) -> SlotBacklog:
        """The table's changes waiting in the shared slot, counted by decoding at most
        ``max_messages`` of its messages (status; nothing is saved or confirmed), or why
        they are unknown.

        Raises:
            SourceError: the slot or the catalog cannot be read.
        """
        shared = shared_slot.shared_slot(self.source, self.repo)
        state = publication.slot_state(self.source, shared)
        flushed = publication.wal_flush_position(self.source)
        row = self.repo.slot_positions.get(self.table_key)
        behind = None if row is None or row.held else max(flushed - row.position, 0)
        figures = SlotBacklog(shared.slot, state.retained, behind, None, None)
        reason = _unknown_reason(state, row, shared.slot)
        if reason is not None:
            return _with_reason(figures, reason)
        try:
            self._read_to = self.start()
        except StateError as exc:
            return _with_reason(figures, str(exc))
        budget = [max_messages]
        self._open(budget)
        count = 0
        while (shipped := self._next()) is not None:
            count += len(shipped.ops)
        if not budget[0]:
            return _with_reason(
                figures,
                f"more than the first {max_messages:,} messages of the shared slot hold: not "
                "counted, that means decoding all the WAL the slot retains",
            )
        return SlotBacklog(shared.slot, state.retained, behind, count, None)

    def _next(self) -> ShippedTransaction | None:
        """The table's next shipped transaction; None once the stream ended (the position
        then passes the horizon)."""
        assert self._transactions is not None and self._read_to is not None
        names = [column.name for column in self.spec.columns]
        for transaction in self._transactions:
            try:
                shipped, self._read_to = shared_shipping.table_changes(
                    (transaction,), self._relations, self._leaves, self._read_to, names, self.keys
                )
            except pgoutput.UnloggedValueError as exc:
                raise StateError(
                    f"an UPDATE of {self.table_key} left large values of {exc} out of the WAL: "
                    "the shared slot needs them; run ALTER TABLE ... REPLICA IDENTITY FULL on "
                    f"the table, then {REBUILD_HINT}"
                ) from None
            except shared_shipping.PartialTruncateError as exc:
                raise StateError(
                    f"shared slot of {self.table_key}: {exc}, which the lake cannot apply (it "
                    f"ships whole-table truncates); {REBUILD_HINT}"
                ) from None
            except pgoutput.ProtocolError as exc:
                raise SourceError(f"shared slot of {self.table_key}: {exc}") from None
            if shipped:
                return shipped[0]
        self._transactions = None
        self._read_to = self._read_to.past(self._horizon)
        return None

    def _save_and_confirm(self) -> None:
        if self._read_to is None:
            return
        fault_point("extract.before_shared_position")
        shared_slot.save_position(self.repo, self.table_key, self._read_to)
        fault_point("extract.after_shared_position")
        shared_slot.confirm_slot(self.source, self.repo, self.max_retained_wal)


def _within(messages: Iterable[bytes], budget: list[int]) -> Iterator[bytes]:
    """``messages`` until ``budget[0]`` of them passed (counted down in place)."""
    for message in messages:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        yield message


def _unknown_reason(
    state: publication.SlotState, row: SlotPosition | None, slot: str
) -> str | None:
    """Why a table's backlog in the shared slot cannot be counted now (None: it can)."""
    if row is None:
        return f"the table has no position in shared slot {slot}"
    if state.plugin is None:
        return f"shared replication slot {slot} is missing: changes were not captured since"
    if row.released_reason is not None:
        return row.released_reason
    if row.held:
        return "the table is joining the shared slot (its enable did not finish)"
    if state.reader is not None:
        return f"process {state.reader} is reading the slot (an extraction): run status again"
    return None


def _with_reason(figures: SlotBacklog, reason: str) -> SlotBacklog:
    return SlotBacklog(
        figures.slot, figures.retained_bytes, figures.unconfirmed_bytes, None, None, reason
    )
