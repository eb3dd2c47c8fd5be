"""The PG_LOGICAL feed: whole committed transactions from the table's replication slot
(``pg_logical_slot_peek_changes``, test_decoding), in commit order. ``gl_seq`` is the commit
LSN and the change's position in its transaction, so a re-read gives a change the same value.
The slot is advanced past the batch's last commit after the Delta commit; a crash in between
re-reads the batch, which the already-shipped check leaves out.

Why one module past 400 lines: one feed, one module (the plugin rule); reading, advancing and
counting the slot change together.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gluon.capture import changelog, objects
from gluon.errors import SourceError, StateError, UnsupportedError
from gluon.extract.feeds import shared_slot, unfit
from gluon.extract.feeds import slot as slots
from gluon.extract.feeds.base import REBUILD_HINT, Pending, TableFeed, capture_objects, highest_seq
from gluon.faults import fault_point
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.schema import TableSpec
from gluon.source import logical
from gluon.source.base import SourceDialect
from gluon.source.publication import (
    SLOT_BUSY_WAIT_SECONDS,
    STREAM_FETCH_ROWS,
    generated_columns,
    stream_when_free,
    when_slot_free,
)
from gluon.states import SlotScope

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.source.logical_values import PrintedChanges


POSITION_BITS = 20
"""``gl_seq`` = commit LSN << 20 | position in the transaction: 1,048,576 changes of the
table per transaction, and 8 TiB of WAL in the cluster's life, fit a bigint."""

_OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", logical.TRUNCATE: "T"}


def parse_lsn(text: str) -> int:
    """A ``pg_lsn`` (``X/Y``, hexadecimal) as a number."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    """``lsn`` as ``pg_lsn`` text."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def logical_sequence(commit_lsn: int, position: int) -> int:
    """The ``gl_seq`` of the change at ``position`` of the transaction committed at
    ``commit_lsn``: increasing in commit order, the same at every re-read.

    Raises:
        StateError: the transaction or the LSN is too large for a bigint sequence.
    """
    if position >= 1 << POSITION_BITS:
        raise StateError(
            f"a transaction committed at {format_lsn(commit_lsn)} changed the table more than "
            f"{1 << POSITION_BITS} times: PG_LOGICAL cannot number its changes; {REBUILD_HINT}"
        )
    if commit_lsn >= 1 << (63 - POSITION_BITS):
        raise StateError(
            f"the WAL position {format_lsn(commit_lsn)} is beyond what PG_LOGICAL numbers "
            f"changes with; {REBUILD_HINT}"
        )
    return (commit_lsn << POSITION_BITS) | position


def peek_slot(
    source: SourceDialect, slot: str, limit: int, wait_seconds: float = SLOT_BUSY_WAIT_SECONDS
) -> list[Any]:
    """The slot's rows (``peek_slot_changes``), waiting while another process reads it.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    return when_slot_free(
        lambda: source.run_query("peek_slot_changes", {"slot": slot, "limit": limit}),
        wait_seconds,
    )


def stream_slot(
    source: SourceDialect,
    slot: str,
    upto: int,
    rows: int = STREAM_FETCH_ROWS,
    wait_seconds: float = SLOT_BUSY_WAIT_SECONDS,
) -> Generator[list[Any]]:
    """The slot's rows of every transaction committed up to ``upto`` (``stream_slot_changes``:
    one decoding), ``rows`` at a time, waiting while another process reads the slot.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    params = {"slot": slot, "upto": format_lsn(upto)}
    return stream_when_free(source, "stream_slot_changes", params, rows, wait_seconds)


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
class PgLogicalFeed(TableFeed):
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
    _set_aside: set[int] | None = field(default=None, init=False)
    """The ``gl_seq`` of the changes set aside (``gluon.extract.set_aside``), read once: the slot
    still holds them until an extraction confirms past them, and every read skips them."""

    def __new__(cls, *args: Any, **kwargs: Any) -> PgLogicalFeed:
        """A table recorded in its database's shared slot gets the feed that reads it
        (chosen by its recorded objects: ``FEEDS`` has one feed per change reader)."""
        if cls is PgLogicalFeed:
            state = kwargs.get("state", args[2] if len(args) > 2 else None)
            if isinstance(state, IncrementalState) and _member_of_shared_slot(
                capture_objects(state)
            ):
                from gluon.extract.feeds.shared_feed import SharedSlotFeed

                return object.__new__(SharedSlotFeed)
        return object.__new__(cls)

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
        planned: list[objects.SourceObjectRef],
        spec: TableSpec,
        scope: SlotScope,
    ) -> list[objects.SourceObjectRef]:
        """``scope`` database: the table's place in the shared slot instead of a slot of its
        own (recorded under the table's name)."""
        if scope is SlotScope.TABLE:
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
        pgoutput does not send (the lake would hold NULL for them)."""
        if not _member_of_shared_slot(placed_objects):
            return
        generated = generated_columns(source, spec.schema, spec.name)
        if generated:
            raise UnsupportedError(
                f"{spec.schema}.{spec.name} has generated columns ({', '.join(generated)}) "
                "whose values the shared slot's pgoutput does not send: enable it with "
                "--incremental-pg-logical-slot=table (a slot of its own)"
            )

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
        if _member_of_shared_slot(capture_objects(state)):
            from gluon.extract.feeds.shared_feed import SharedSlotFeed

            return SharedSlotFeed.pending_in(source, record, state)
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

    def _decode(
        self, rows: list[Any], labels: logical.RelationLabels, *, strict: bool = True
    ) -> tuple[PrintedChanges, int | None]:
        """The table's changes in ``rows`` as printed, with their gl_seq and gl_op, and the
        last commit LSN. ``strict=False`` (counting, discarding): a TRUNCATE of some
        partitions counts as a change, a row naming the table unexpectedly is passed.

        Raises:
            StateError: a row of the table cannot be read, or names the table in a way
                gluon did not expect (the slot is not advanced past a change not shipped).
        """
        spec = self.record.spec()
        names = [column.name for column in spec.columns]
        keys = list(self.state.key_columns)
        # Matched after the label, which is looked up: as fast for a thousand partitions.
        plain = logical.plain_row_pattern((), [labels.columns.get(name, name) for name in names])
        ours = labels.labels
        from gluon.source.logical_values import PrintedChanges  # loads pyarrow

        out = PrintedChanges()
        # The open transaction's changes of the table: gl_op, and the row as printed (its
        # first item the operation as printed, or "" where the careful reader decoded it).
        ops: list[str] = []
        printed: list[Sequence[str | None]] = []
        truncated = ("", *(None,) * len(names))
        last_commit: int | None = None
        for lsn, _xid, data in rows:
            if data.startswith("BEGIN"):
                ops, printed = [], []
                continue
            if data.startswith("COMMIT"):
                commit = parse_lsn(lsn)
                if ops:
                    if self.oldest_change_at is None:
                        self.oldest_change_at = self._on_host_clock(logical.commit_time(data))
                    self._commit(out, commit, ops, printed)
                ops, printed = [], []
                last_commit = commit
                continue
            if not data.startswith("table "):
                continue  # a message
            # The label ends at the first ": " unless a quoted name holds one (the careful
            # reader below finds those): a slice and a set lookup, whatever the partitions.
            end = data.find(": ", 6)
            if data[6:end] in ours:
                read = logical.plain_printed(data, plain, end)
                if read is not None:
                    ops.append(_OPS[read[0]])
                    printed.append(read)
                    continue
            else:
                found = self._unmatched(data, labels, strict=strict)
                if found:
                    ops.append("T")
                    printed.append(truncated)
                if found is not False:
                    continue  # a TRUNCATE, or another table's change (its key may be unlogged)
            try:
                change = logical.parse_change(data)
            except logical.DecodingError as exc:
                raise StateError(f"slot of {self.state.table_key}: {exc}") from None
            if change is None:
                continue
            if change.op == logical.TRUNCATE:
                if self._unmatched(data, labels, strict=strict):
                    ops.append("T")
                    printed.append(truncated)
                continue
            new = change.new
            if change.old is not None and any(change.old.get(key) != new.get(key) for key in keys):
                ops += ["D", "I"]  # the old key goes, the new one comes
                printed.append(self._in_order(names, change.old))
                printed.append(self._in_order(names, self._complete(new, change.old)))
                continue
            operation = _OPS.get(change.op)
            if operation is None:
                raise StateError(
                    f"slot of {self.state.table_key}: a {change.op} change of {change.table} "
                    "gluon cannot apply: not advancing past it"
                )
            ops.append(operation)
            printed.append(self._in_order(names, self._complete(new, change.old)))
        return out, last_commit

    def _commit(
        self,
        out: PrintedChanges,
        commit: int,
        ops: list[str],
        printed: list[Sequence[str | None]],
    ) -> None:
        """Add the changes of the transaction committed at ``commit`` to ``out``, numbered by
        their position in it, leaving out those set aside.

        Raises:
            StateError: the transaction or the LSN is too large for a bigint sequence.
        """
        logical_sequence(commit, len(ops) - 1)  # the largest position: refused if too large
        first = commit << POSITION_BITS
        seqs: Sequence[int] = range(first, first + len(ops))
        aside = self._aside()
        if aside and not aside.isdisjoint(seqs):
            kept = [at for at, seq in enumerate(seqs) if seq not in aside]
            ops = [ops[at] for at in kept]
            printed = [printed[at] for at in kept]
            seqs = [seqs[at] for at in kept]
        out.extend(printed, seqs, ops)

    def _unmatched(self, data: str, labels: logical.RelationLabels, *, strict: bool) -> bool | None:
        """What change row ``data``, whose label is not plainly one of the table's, is to
        the table: True, a TRUNCATE emptying it; False, a change of one of its relations
        under a label holding ``": "`` (for the careful reader); None, another table's.
        Any other row naming one of the table's relations (spelled another way than the
        server spells it now) or that cannot be read stops the extraction: the slot never
        advances past a change of the table not shipped.

        Raises:
            StateError: the row names the table unexpectedly, cannot be read, or truncates
                some of its partitions only.
        """
        try:
            tables, op, _ = logical.read_header(data)
        except logical.DecodingError as exc:
            raise StateError(
                f"slot of {self.state.table_key}: a change row gluon cannot read ({exc}): "
                "not advancing past it"
            ) from None
        if op == logical.TRUNCATE:
            empties = labels.empties_table(tables)
            if empties is False and strict:
                raise StateError(
                    f"slot of {self.state.table_key}: TRUNCATE of {', '.join(tables)} empties "
                    f"some partitions of {labels.root.label} only, which PG_LOGICAL cannot "
                    f"apply (it ships whole-table truncates); {REBUILD_HINT}"
                )
            if empties is not None:
                return True
        elif len(tables) == 1 and tables[0] in labels.labels:
            return False
        strange = [label for label in tables if labels.names_ours(label)]
        if strange and strict:
            raise StateError(
                f"slot of {self.state.table_key}: a change labelled {strange[0]} names the "
                f"table, which the server labels {' or '.join(sorted(labels.labels))}: not "
                "advancing past a change gluon cannot match; report this to the gluon team"
            )
        return None

    def _aside(self) -> set[int]:
        if self._set_aside is None:
            enablement = self.state.enablement_id
            self._set_aside = (
                set()
                if enablement is None
                else self.repo.set_aside.seqs(self.state.table_key, enablement)
            )
        return self._set_aside

    def _checked(self, changes: PrintedChanges, schema: pa.Schema) -> pa.Table:
        """``changes`` typed, in gluon (no round trip through the source:
        ``gluon.source.logical_values``); one line naming those the lake cannot take, if any."""
        try:
            return changes.as_arrow(self.record.spec(), schema)
        except SourceError as exc:
            from gluon.source.arrow import UnfitValueError  # loaded by the read that failed

            seqs = unfit.refused_seqs(exc) if isinstance(exc, UnfitValueError) else []
            if not seqs:
                raise
            assert isinstance(exc, UnfitValueError)
            texts = self._texts(changes.texts())
            named = [
                self._unfit(texts, seq, exc.column) for seq in seqs[: unfit.LISTED] if seq in texts
            ]
            raise unfit.refusal(self.record, self.state, named, len(seqs) - len(named)) from exc

    def _texts(self, changes: list[list[str | None]]) -> dict[int, changelog.ChangeText]:
        """Decoded ``changes`` (values, gl_seq, gl_op) as texts by ``gl_seq``."""
        names = [column.name for column in self.record.spec().columns]
        return {
            int(str(row[-2])): changelog.ChangeText(
                int(str(row[-2])), str(row[-1]), dict(zip(names, row[:-2], strict=True))
            )
            for row in changes
        }

    def _unfit(
        self, texts: dict[int, changelog.ChangeText], seq: int, lake_column: str
    ) -> unfit.UnfitChange:
        """The change ``seq`` of ``texts``, refused for ``lake_column``, and the next change
        of its key among ``texts``."""
        keys = self.state.key_columns
        key = [texts[seq].values.get(name) for name in keys]
        later = next(
            (
                other
                for other in sorted(texts)
                if other > seq and [texts[other].values.get(name) for name in keys] == key
            ),
            None,
        )
        return unfit.unfit_change(self.record, self.state, texts[seq], lake_column, later)

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

    @staticmethod
    def _in_order(names: list[str], values: dict[str, str | None]) -> list[str | None]:
        """The careful reader's ``values`` in column order, as printed (quoted again; SQL
        NULL as ``null``, a column the change lacks as None), after an empty operation (see
        ``PrintedChanges``)."""
        return ["", *(_printed(values, name) for name in names)]

    def _on_host_clock(self, committed: dt.datetime | None) -> dt.datetime | None:
        """``committed`` (the source's clock, naive UTC) on this host's clock."""
        if committed is None:
            return None
        source_now = self.source.run_query("source_clock")[0][0]
        host_now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return changelog.OldestChange(committed, source_now, host_now).captured_at

    def _complete(
        self, new: dict[str, str | None], old: dict[str, str | None] | None
    ) -> dict[str, str | None]:
        """``new`` with each large value the UPDATE left alone taken from the old row."""
        if logical.UNCHANGED_TOAST not in new.values():
            return new
        missing = [name for name, value in new.items() if value == logical.UNCHANGED_TOAST]
        if old is None or any(old.get(name) in (None, logical.UNCHANGED_TOAST) for name in missing):
            raise StateError(
                f"an UPDATE of {self.state.table_key} left large values of {', '.join(missing)} "
                "out of the WAL: PG_LOGICAL needs them; run ALTER TABLE ... REPLICA IDENTITY "
                f"FULL on the table, then {REBUILD_HINT}"
            )
        return {**new, **{name: old[name] for name in missing}}

    def _typed(self, changes: list[list[str | None]], schema: pa.Schema) -> pa.Table:
        """``changes`` (values as text, gl_seq, gl_op) in the lake's types."""
        from gluon.source.logical_values import changes_as_arrow  # loads pyarrow

        return changes_as_arrow(changes, self.record.spec(), schema)

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


def _printed(values: dict[str, str | None], name: str) -> str | None:
    """Column ``name`` of a decoded change as printed: None when the change lacks it (made
    before the column was added: ``fill_absent`` gives it the column's missing value)."""
    if name not in values:
        return None
    value = values[name]
    return "null" if value is None else logical.printed(value)
