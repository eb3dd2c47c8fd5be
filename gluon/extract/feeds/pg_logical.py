"""The PG_LOGICAL feed: whole committed transactions from the table's replication slot
(``pg_logical_slot_peek_changes``, test_decoding), in commit order. ``gl_seq`` is the commit
LSN and the change's position in its transaction (``logical_positions``), so a re-read gives a
change the same value. The slot is advanced past the batch's last commit after the Delta commit;
a crash in between re-reads the batch, which the already-shipped check leaves out.

This module holds the feed's hooks: reading the slot batch after batch, advancing, counting and
discarding it, and the shared-slot placement; how its rows become the table's changes is
``slot_decoding``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gluon.capture import objects
from gluon.errors import StateError, UnsupportedError
from gluon.extract.feeds import shared_slot, unfit
from gluon.extract.feeds import slot as slots
from gluon.extract.feeds.base import REBUILD_HINT, Pending, capture_objects, highest_seq
from gluon.extract.feeds.logical_positions import POSITION_BITS, format_lsn, parse_lsn
from gluon.extract.feeds.slot_decoding import SlotDecodingFeed, stream_slot
from gluon.faults import fault_point
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.schema import TableSpec
from gluon.source import logical
from gluon.source.base import SourceDialect
from gluon.states import SlotScope

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.source.logical_values import PrintedChanges

log = logging.getLogger(__name__)


def _slot_of(state: IncrementalState) -> objects.SourceObjectRef:
    found = next(
        (o for o in capture_objects(state) if o.kind is SourceObject.REPLICATION_SLOT), None
    )
    if found is None:
        raise StateError(f"the incremental state of {state.table_key} names no slot")
    return found


def _member_of_shared_slot(objects: Sequence[objects.SourceObjectRef]) -> bool:
    """The table was enabled into its database's shared slot (``--incremental-pg-logical-slot
    =database``): its feed is ``shared_feed.SharedSlotFeed``."""
    return any(item.kind is SourceObject.SHARED_SLOT_TABLE for item in objects)


@dataclass(slots=True)
class PgLogicalFeed(SlotDecodingFeed):
    marks_shipped: ClassVar[str] = "the replication slot is advanced past the transactions read"
    waits_in: ClassVar[str] = "the replication slot"
    exclusive_reads: ClassVar[bool] = True
    batches_in_order: ClassVar[bool] = True
    sequences_are_unique: bool = True
    _confirm: int | None = None
    """The commit LSN the last read ended at: ``done`` advances the slot to it."""
    _stream: Generator[list[Any]] | None = field(default=None, init=False)
    """The extraction's one decoding of the slot (``stream_slot``), up to ``_horizon``, read
    batch after batch; None before the first read and after the rows ended. Dropped with the
    feed (a run that stops early), which closes its cursor."""
    _horizon: int = field(default=0, init=False)
    """The WAL flush position read when ``_stream`` was opened (0: not yet): every transaction
    committed before it is in the stream, and the extraction reads nothing past it."""
    _carried: list[Any] = field(default_factory=list, init=False)
    """Rows fetched past the last batch's end (its last whole transaction): the next batch's."""

    @staticmethod
    def reads_shared_stream(objects: Sequence[objects.SourceObjectRef]) -> bool:
        """See :meth:`ChangeFeed.reads_shared_stream`: a table of its database's shared slot."""
        return _member_of_shared_slot(objects)

    @staticmethod
    def initial_position(source: SourceDialect) -> int | None:
        return None

    @classmethod
    def placed(
        cls,
        source: SourceDialect,
        repo: Repository,
        planned: list[objects.SourceObjectRef],
        spec: TableSpec,
        scope: SlotScope | None,
    ) -> list[objects.SourceObjectRef]:
        """The table's place in its database's shared slot instead of a slot of its own
        (recorded under the table's name): ``scope`` database, or not given (the default)
        when the table can be a member; one that cannot gets its own slot, logged with why.

        Raises:
            UnsupportedError: ``scope`` database, and the table cannot be a member (one line
                with the reason and ``=table``).
        """
        if scope is SlotScope.TABLE:
            return planned
        problem = shared_slot.member_problem(source, repo, spec)
        if problem is not None:
            if scope is SlotScope.DATABASE:
                raise UnsupportedError(f"{problem}: enable it with {shared_slot.OWN_SLOT_OPTION}")
            log.info(
                "%s.%s gets a replication slot of its own, not its database's shared slot: "
                "%s (choose explicitly with --incremental-pg-logical-slot=table or =database)",
                spec.schema,
                spec.name,
                problem,
            )
            return planned
        return [
            objects.SourceObjectRef(
                SourceObject.SHARED_SLOT_TABLE, spec.schema, spec.name, "PUBLICATION TABLE"
            )
            if item.kind is SourceObject.REPLICATION_SLOT
            else item
            for item in planned
        ]

    @classmethod
    def check_placed(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        placed_objects: Sequence[objects.SourceObjectRef],
    ) -> None:
        """A member of the shared slot: refuse a table with generated columns, whose values
        pgoutput does not send (the lake would hold NULL for them); an enable run again
        finds them added since its first run."""
        if not _member_of_shared_slot(placed_objects):
            return
        problem = shared_slot.generated_problem(source, spec)
        if problem is not None:
            raise UnsupportedError(f"{problem}: enable it with {shared_slot.OWN_SLOT_OPTION}")

    @classmethod
    def capturing(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        planned: Sequence[objects.SourceObjectRef],
        *,
        copying: bool,
    ) -> AbstractContextManager[object]:
        """A member of the shared slot joins it; the copy reads its offload snapshot. An
        enable run again without a copy (killed after its copy finished) is joined already:
        joining again would take a snapshot the lake's copy does not hold."""
        if not _member_of_shared_slot(planned):
            return nullcontext()
        if not copying and shared_slot.joined(repo, state.table_key):
            return nullcontext()
        return shared_slot.joining(
            source, repo, state.table_key, state.enablement_id, spec.schema, spec.name
        )

    @classmethod
    def release(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        dropped: Sequence[objects.SourceObjectRef],
    ) -> None:
        """A member of the shared slot leaves it (the last one drops slot and publication)."""
        if _member_of_shared_slot(dropped):
            shared_slot.leave(source, repo, state.table_key, spec.schema, spec.name)

    @classmethod
    def rejoin(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        missing: Sequence[objects.SourceObjectRef],
    ) -> None:
        """A member whose place in the publication was dropped is published again."""
        if _member_of_shared_slot(missing):
            shared_slot.rejoin(source, repo, spec.schema, spec.name)

    @property
    def slot(self) -> objects.SourceObjectRef:
        return _slot_of(self.state)

    @classmethod
    def check_enable(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        key_columns: Sequence[str],
        method: type[ExtractionMethod],
    ) -> None:
        """Refuse a server, user or table logical decoding cannot serve.

        The checks live in ``gluon.extract.feeds.slot``.
        """
        slots.check_logical_decoding(source, spec, key_columns, method.name)

    @classmethod
    def pending_in(
        cls,
        source: SourceDialect,
        record: OffloadedTable,
        state: IncrementalState,
        *,
        counted: int | None = None,
        oldest: bool = True,
        check_capture: bool = False,
    ) -> Pending:
        """The changes of the table the slot keeps, from one bounded peek (``slot_backlog``),
        and the WAL it makes the source keep; a slot that is gone stopped capture."""
        slot = _slot_of(state)
        spec = record.spec()
        figures = slots.slot_backlog(source, slot, spec.schema, spec.name)
        if figures is None:
            missing = f"replication slot {slot.name} is missing"
            return Pending(None, None, missing, (f"{missing}: changes were not captured since",))
        return Pending(figures.pending, figures.oldest, figures.unknown_reason, slot=figures)

    @classmethod
    def pending_ahead(
        cls,
        source: SourceDialect,
        repo: Repository,
        tables: Sequence[tuple[OffloadedTable, IncrementalState]],
    ) -> dict[str, Pending]:
        """The members of the shared slot among ``tables``, from one decoding of it (a table
        with its own slot peeks it in :meth:`pending_in`)."""
        members = [
            (record, state)
            for record, state in tables
            if _member_of_shared_slot(capture_objects(state))
        ]
        if not members:
            return {}
        from gluon.extract.feeds.shared_feed import SharedSlotFeed

        return SharedSlotFeed.pending_of_members(source, repo, members)

    def lost_on_drop(self, droppable: Sequence[objects.SourceObjectRef]) -> int:
        """What the slot keeps of the table, when it is to be dropped (0 otherwise)."""
        if self.slot not in droppable:
            return 0
        return self.backlog() or 0

    def verify(self) -> None:
        """Refuse to read when the slot is gone: the changes it kept are lost."""
        slot = self.slot
        if not objects.object_exists(self.source, slot):
            raise StateError(
                f"replication slot {slot.name} of {self.state.table_key} is missing: changes "
                "since it was dropped were not captured; disable incremental update, re-offload "
                "with --reset-backend-table and enable it again"
            )

    def pending(self) -> int | None:
        return None  # counting means decoding the WAL: the first read finds out

    def read(self, limit: int) -> pa.Table:
        import pyarrow as pa

        spec = self.record.spec()
        schema = pa.schema([*spec.arrow_schema, *objects.change_fields()])
        labels = self._labels()
        self._check_keys_logged(labels)
        # One decoding per extraction: the slot's peek up to the WAL flushed now, read in
        # batches from one cursor. A peek per batch decoded again from the slot's restart
        # point, which stays where a burst began (no running-transactions record in it), so
        # N batches decoded O(N^2) WAL (issue 33; bench/README.md, PG_LOGICAL's figures).
        if self._stream is None:
            if self._horizon:
                # The stream ended: what committed since ships at the next extraction (a
                # further peek would decode from the restart point again for it).
                return schema.empty_table()
            self._horizon = self._flushed()
            self._stream = stream_slot(self.source, self.slot.name, self._horizon)
        out: PrintedChanges | None = None
        confirm: int | None = None
        while True:
            rows, ended = self._next_transactions(limit - (len(out) if out else 0))
            changes, last_commit = self._decode(rows, labels)
            if ended:
                # Every transaction committed before the horizon was in the stream: the slot
                # may skip the WAL up to it (other databases' WAL, which no peek shows and
                # every later peek would decode again).
                last_commit = max(last_commit or 0, self._horizon)
            if last_commit:
                confirm = max(confirm or 0, last_commit)
            if out is None:
                out = changes
            else:
                out.extend(changes.printed, changes.seqs, changes.ops)
            if len(out) >= limit or (out and ended):
                self._confirm = confirm
                return self._checked(out, schema)
            if not out:
                # Only other tables' transactions: confirm them now, nothing of ours is in them.
                if confirm:
                    self._advance(confirm)
                    confirm = None
                if ended:
                    return schema.empty_table()

    def _next_transactions(self, wanted: int) -> tuple[list[Any], bool]:
        """The stream's next rows: whole transactions, at least ``wanted`` rows (a row per
        change, of every table, and a BEGIN and a COMMIT per transaction) unless the stream
        ends; and whether it ended (then closed: the extraction reads no more).
        """
        assert self._stream is not None
        rows, self._carried = self._carried, []
        looked = max(wanted, 1) - 1  # the rows before it are not looked at for a COMMIT
        while True:
            # Cut after the first COMMIT from the wanted-th row on: whole transactions.
            cut = next(
                (at + 1 for at in range(looked, len(rows)) if rows[at][2].startswith("COMMIT")),
                None,
            )
            if cut is not None:
                self._carried = rows[cut:]
                return rows[:cut], False
            looked = max(looked, len(rows))
            fetched = next(self._stream, None)
            if fetched is None:
                self._stream = None
                return rows, True
            rows += fetched

    def _labels(self) -> logical.RelationLabels:
        """How the slot names the table's changes now (its partitions read now, so one
        attached since enable is the table's too).

        Raises:
            StateError: the table is gone.
        """
        spec = self.record.spec()
        labels = logical.relation_labels(self.source, spec.schema, spec.name)
        if labels is None:
            raise StateError(
                f"table {spec.schema}.{spec.name} of {self.state.table_key} is gone from the "
                f"source: its changes in slot {self.slot.name} cannot be read"
            )
        return labels

    def _check_keys_logged(self, labels: logical.RelationLabels) -> None:
        """Refuse to read while a partition (one attached since enable, say) does not log the
        key of an updated or deleted row: its old keys would be missing.

        Raises:
            StateError: one line naming the partition and the fix.
        """
        for relation in labels.relations:
            problem = logical.identity_problem(relation, self.state.key_columns)
            if problem is not None:
                raise StateError(
                    f"{relation.label} (of {self.state.table_key}) does not log the key of an "
                    f"updated or deleted row, so PG_LOGICAL cannot apply its changes: {problem}; "
                    f"changes it made before lack their key: if the extraction still fails, "
                    f"{REBUILD_HINT}"
                )

    def find_unfit(self, seqs: list[int], set_aside: set[int]) -> unfit.UnfitSearch:
        """The slot's changes ``seqs`` (decoding all the WAL it keeps) and which the lake
        refuses; changes set aside already are skipped by the decoding."""
        import pyarrow as pa

        spec = self.record.spec()
        schema = pa.schema([*spec.arrow_schema, *objects.change_fields()])
        rows = self.source.run_query("peek_slot_changes", {"slot": self.slot.name, "limit": None})
        decoded = self._decode(rows, self._labels())[0].texts()
        texts = self._texts(decoded)
        wanted = {seq: row for seq, row in zip(texts, decoded, strict=True) if seq in seqs}
        found, remaining = unfit.narrow(
            list(wanted),
            lambda some: self._typed([wanted[seq] for seq in some], schema),
            lambda seq, column: self._unfit(texts, seq, column),
        )
        return unfit.UnfitSearch(found, remaining, {seq: texts[seq].values for seq in wanted})

    def set_aside(self, changes: list[unfit.UnfitChange]) -> None:
        """Nothing to delete: the repository's record makes every read skip them, and the next
        extraction confirms the slot past them."""

    def done(self, changes: pa.Table) -> None:
        if self._confirm is None:
            # A batch a dead run staged (merge mode IMMEDIATE): its last change's commit.
            self._confirm = highest_seq(changes) >> POSITION_BITS
        fault_point("extract.before_slot_advance")
        self._advance(self._confirm)
        fault_point("extract.after_slot_advance")
        self._confirm = None

    def _flushed(self) -> int:
        """The source's WAL flush position now (read before a peek: see ``read``)."""
        return parse_lsn(str(self.source.run_query("wal_flush_position")[0][0]))

    def _advance(self, lsn: int) -> None:
        self.source.execute_script("advance_slot", slot=self.slot.name, lsn=format_lsn(lsn))

    def _peek_all(self) -> tuple[int, int | None]:
        """How many changes of the table the slot keeps now, and the commit LSN the last
        transaction peeked ends at (None: the slot keeps no transaction).

        Decodes all the WAL the slot retains: for disable and discard, never the
        extraction's no-op path.
        """
        spec = self.record.spec()
        labels = logical.relation_labels(
            self.source, spec.schema, spec.name
        ) or logical.dropped_table_labels(
            self.source, spec.schema, spec.name, [column.name for column in spec.columns]
        )  # disabling a table that is gone drops its slot
        rows = self.source.run_query("peek_slot_changes", {"slot": self.slot.name, "limit": None})
        changes, last_commit = self._decode(rows, labels, strict=False)
        return len(changes), last_commit

    def backlog(self) -> int | None:
        return self._peek_all()[0]

    def discard_step(self, count: int | None) -> str:
        return (
            f"confirm the {count} changes replication slot {self.slot.name} keeps, without "
            "shipping them (the slot advances past them)"
        )

    def discard(self) -> int | None:
        """Confirm every change the slot keeps now without shipping it; return how many of the
        table's it dropped. A transaction committed after the peek stays in the slot."""
        count, last_commit = self._peek_all()
        if last_commit is not None:
            self._advance(last_commit)
        return count
