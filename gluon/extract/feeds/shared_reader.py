"""One table's changes read from its database's shared PG_LOGICAL slot, batch after batch,
as an extraction ships them (issue 33 item 1): what a feed of a table opted in to the shared
slot (``--incremental-pg-logical-slot=database``) reads and marks done, through
``shared_feed.SharedSlotFeed``.

An extraction decodes the slot once, up to the WAL flushed when it starts (``_horizon``), and
hands out whole transactions of the table, numbered as the per-table feed numbers them
(``gl_seq`` = commit LSN << 20 | position in the transaction: a re-read gives a change the
same number). After each batch's Delta commit, :meth:`SharedSlotReader.done` saves the
table's position past the batch's last transaction (``extract.before_shared_position``,
``extract.after_shared_position``); once the stream ended the slot is confirmed to the
least position of its tables (``confirm_slot``): a run killed between the Delta commit and
the save reads the batch again at the next run, with the same numbers, which the
extraction's already-shipped check leaves out. A read that finds nothing more of the table
saves its position past the other tables' transactions at once (nothing of the table lies
between).

The stream is decoded by the batch decoder (issue 33 item 2): the slot's messages read as
Arrow, framed a batch of whole transactions at a time, the table's changes taken column at
a time (``gluon.source.shared_batches``); no Python object per change or value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gluon.errors import SourceError, StateError
from gluon.extract import shared_pass
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.base import REBUILD_HINT, SlotBacklog
from gluon.extract.feeds.logical_positions import POSITION_BITS, logical_sequence
from gluon.extract.feeds.shared_backlog import unknown_reason, with_unknown_reason
from gluon.faults import fault_point
from gluon.repo import Repository
from gluon.schema import TableSpec
from gluon.source import key_moves, pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.shared_shipping import TablePosition

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gluon.source.pgoutput_batch import Batch
    from gluon.source.shared_batches import Piece


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
    _batches: Iterator[Batch] | None = field(default=None, init=False)
    _piece: Piece | None = field(default=None, init=False)
    """The table's changes in the batch being handed out (None: read the next batch)."""
    _relations: dict[int, pgoutput.Relation] = field(default_factory=dict, init=False)
    _leaves: frozenset[int] = field(default=frozenset(), init=False)
    _dropped: bool = field(default=False, init=False)
    """The table is gone from the source: its leaves are the oids the slot's RELATION
    messages gave its name (counting and discarding its changes; reading refuses)."""
    _counting: bool = field(default=False, init=False)
    """Reading to count (status, discard): a transaction that left two rows under one key
    is counted as it came, not refused (a discard moves past it)."""
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
        import numpy as np
        import pyarrow as pa

        from gluon.capture.objects import change_fields
        from gluon.source.logical_values import _int64s, _typed, present_values  # loads pyarrow

        schema = pa.schema([*self.spec.arrow_schema, *change_fields()])
        if self._batches is None:
            if self._horizon:
                return _empty(schema)  # the stream ended: the rest is the next run's
            self._read_to = self.start()
            self._open()
        taken = self._take(limit)
        if not taken:
            self._save_and_confirm()  # only other tables' transactions: let the slot go on
            return _empty(schema)
        ops = pa.concat_arrays([part.changes.ops for part in taken])
        columns = [  # a change made before a column was added reads its stored default
            present_values(
                pa.concat_arrays([part.changes.columns[at] for part in taken]),
                column.missing_value,
            )
            for at, column in enumerate(self.spec.columns)
        ]
        seqs = np.concatenate([self._sequences(part) for part in taken])
        return _typed(columns, _int64s(seqs), ops, self.spec, schema)

    def _take(self, limit: int) -> list[Piece]:
        """Whole transactions of the table, at least ``limit`` changes unless the stream
        ends; :attr:`_read_to` moves past them (and past other tables' transactions)."""
        taken: list[Piece] = []
        count = 0
        while count < limit:
            piece = self._current()
            if piece is None:
                break
            part = self._hand_out(piece, limit - count)
            taken.append(part)
            count += len(part.changes)
        return taken

    def _hand_out(self, piece: Piece, wanted: int) -> Piece:
        assert self._read_to is not None
        part, self._read_to = piece.take(wanted, self._read_to)
        return part

    @staticmethod
    def _sequences(part: Piece) -> np.ndarray:
        """``gl_seq`` of ``part``'s changes: commit LSN << POSITION_BITS | position."""
        import numpy as np

        commits = part.commit_lsns[part.changes.transactions]
        positions = part.changes.positions
        at = int(np.argmax(positions))
        logical_sequence(int(commits[at]), int(positions[at]))  # refused if too large
        logical_sequence(int(commits.max()), 0)
        sequences: np.ndarray = (commits << POSITION_BITS) | positions
        return sequences

    def done(self) -> None:
        """Record the table's position past what :meth:`read` returned (call after the Delta
        commit holds it); confirm the slot once the stream ended (the read that finds the
        end confirms it otherwise). Confirming advances the slot, which decodes the WAL up
        to there again: once per extraction, not once per batch (2.9 s of a 1M-change
        extraction in ten batches). A run that stops early leaves the slot where it was:
        the saved positions say what each table shipped, the next run confirms.

        Raises:
            SourceError: the slot cannot be confirmed (the position stays saved).
        """
        self._save_and_confirm(confirm=self._batches is None)

    def _open(self, budget: list[int] | None = None, *, dropped_ok: bool = False) -> None:
        """Open the extraction's one decoding; ``budget`` (one count, for status): stop after
        that many messages, the count left in it (0: stopped early). ``dropped_ok``: a table
        gone from the source is found by its name in the slot's RELATION messages.

        Raises:
            StateError: the table is gone, and not ``dropped_ok``.
        """
        shared = shared_slot.shared_slot(self.source, self.repo)
        leaves = publication.present_table_leaves(self.source, self.spec.schema, self.spec.name)
        if leaves is None and not dropped_ok:
            raise StateError(
                f"table {self.spec.schema}.{self.spec.name} of {self.table_key} is gone from "
                f"the source: its changes in shared slot {shared.slot} cannot be read"
            )
        self._dropped = leaves is None
        self._leaves = leaves or frozenset()
        from gluon.source import shared_batches  # loads numpy and pyarrow

        self._horizon, chunks = shared_pass.stream(  # a replay inside a service pass
            shared.slot,
            lambda: publication.wal_flush_position(self.source),
            lambda horizon: shared_batches.slot_messages(self.source, shared, horizon, self.spec),
        )
        self._batches = shared_batches.framed_batches(chunks, self._relations, budget)
        self._piece = None

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
        figures = SlotBacklog(shared.slot, state.retained, behind, None, None, shared=True)
        reason = unknown_reason(state, row, shared.slot)
        if reason is not None:
            return with_unknown_reason(figures, reason)
        try:
            self._read_to = self.start()
        except StateError as exc:
            return with_unknown_reason(figures, str(exc))
        budget = [max_messages]
        self._open(budget, dropped_ok=True)
        self._counting = True
        count = 0
        while (piece := self._current()) is not None:
            part = self._hand_out(piece, len(piece.changes))
            count += len(part.changes)
        if not budget[0]:
            return with_unknown_reason(
                figures,
                f"more than the first {max_messages:,} messages of the shared slot hold: not "
                "counted, that means decoding all the WAL the slot retains",
            )
        return SlotBacklog(shared.slot, state.retained, behind, count, None, shared=True)

    def _current(self) -> Piece | None:
        """The table's changes not yet handed out in the batch being read, the next batch's
        once they are all out; None once the stream ended (the position then passes the
        horizon)."""
        assert self._batches is not None and self._read_to is not None
        while self._piece is None or not self._piece.left():
            if self._piece is not None:  # every change handed out: past the whole batch
                self._read_to = self._piece.end(self._read_to)
            try:
                batch = next(self._batches, None)
            except pgoutput.ProtocolError as exc:  # framing: a malformed message
                raise SourceError(f"shared slot of {self.table_key}: {exc}") from None
            if batch is None:
                self._batches = self._piece = None
                self._read_to = self._read_to.past(self._horizon)
                return None
            self._piece = self._table_piece(batch)
        return self._piece

    def _table_piece(self, batch: Batch) -> Piece:
        from gluon.source.shared_batches import Piece

        assert self._read_to is not None
        names = [column.name for column in self.spec.columns]
        if self._dropped:  # the batch's RELATION messages came before its changes
            self._leaves = publication.leaves_named(
                self._relations, self.spec.schema, self.spec.name
            )
        try:
            try:
                return Piece.of(
                    batch, self._leaves, self._read_to, names, self.keys, self._relations
                )
            except key_moves.KeyNotUniqueError:
                if not self._counting:
                    raise
                # Counted without the key: each UPDATE one change, none refused.
                return Piece.of(batch, self._leaves, self._read_to, names, (), self._relations)
        except pgoutput.UnloggedValueError as exc:
            raise StateError(
                f"an UPDATE of {self.table_key} left large values of {exc} out of the WAL: "
                "the shared slot needs them; run ALTER TABLE ... REPLICA IDENTITY FULL on "
                f"the table, then {REBUILD_HINT}"
            ) from None
        except key_moves.KeyNotUniqueError as exc:
            raise StateError(
                f"shared slot of {self.table_key}: {key_moves.refusal(self.keys, exc)} "
                f"{REBUILD_HINT}"
            ) from None
        except shared_shipping.PartialTruncateError as exc:
            raise StateError(
                f"shared slot of {self.table_key}: {exc}, which the lake cannot apply (it "
                f"ships whole-table truncates); {REBUILD_HINT}"
            ) from None
        except pgoutput.ProtocolError as exc:
            raise SourceError(f"shared slot of {self.table_key}: {exc}") from None

    def _save_and_confirm(self, *, confirm: bool = True) -> None:
        if self._read_to is None:
            return
        fault_point("extract.before_shared_position")
        shared_slot.save_position(self.repo, self.table_key, self._read_to)
        fault_point("extract.after_shared_position")
        if confirm:
            shared_slot.confirm_slot(
                self.source, self.repo, self.max_retained_wal, shipping=self.table_key
            )


def _empty(schema: pa.Schema) -> pa.Table:
    """No changes, in ``schema``: ``Schema.empty_table`` would make pyarrow import pandas
    (0.5 s of the read that closes every extraction)."""
    import pyarrow as pa

    return pa.Table.from_batches([], schema=schema)
