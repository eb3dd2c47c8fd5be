"""Change feeds: where an extraction reads changes, and how it marks them shipped.

One feed per ``ChangeReader`` of the method registry (``FEEDS``):

* changelog: every changelog row visible now, lowest ``gl_seq`` first; shipped
  rows are deleted by their exact ``gl_seq`` values.
* ORA_ROWSCN: rows whose ``ORA_ROWSCN`` lies between the stored SCN and the SCN
  captured before reading; the new SCN is stored after the Delta commit. A
  crash in between re-reads the same row images, which the merging view
  applies idempotently.
* PG_LOGICAL: whole committed transactions from the table's replication slot
  (``pg_logical_slot_peek_changes``, test_decoding), in commit order; ``gl_seq``
  is the commit LSN and the change's position in its transaction, so a re-read
  gives a change the same value. The slot is advanced past the batch's last
  commit after the Delta commit; a crash in between re-reads the batch, which
  the already-shipped check leaves out.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import sqlalchemy as sa

from gluon import capture
from gluon.errors import SourceError, StateError
from gluon.faults import fault_point
from gluon.methods.base import ChangeReader, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState, SourceObjectRecord
from gluon.source import logical
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa


def capture_objects(state: IncrementalState) -> list[capture.SourceObjectRef]:
    """The source objects recorded for ``state``, as ``gluon.capture`` takes them."""
    return [
        capture.SourceObjectRef(
            kind=SourceObject(item.kind),
            schema=item.schema,
            name=item.name,
            object_type=item.object_type,
        )
        for item in state.source_objects
    ]


def object_records(objects: list[capture.SourceObjectRef]) -> tuple[SourceObjectRecord, ...]:
    """``objects`` as the repository stores them."""
    return tuple(
        SourceObjectRecord(
            kind=item.kind.value, schema=item.schema, name=item.name, object_type=item.object_type
        )
        for item in objects
    )


REBUILD_HINT = (
    "rebuild the lake copy from the table (docs/operations.md, 'Changelog sequence reset')"
)
"""The way out once changes cannot be ordered: start the lake copy again from the table."""


class ChangeFeed(Protocol):
    """Where an extraction reads changes from, and how it marks them done."""

    repo: Repository
    sequences_are_unique: bool
    """Each change has its own ``gl_seq`` (so a re-shipped change can be recognised)."""
    marks_shipped: ClassVar[str]
    """How ``done`` marks changes shipped, in the words of an extraction's plan."""
    oldest_change_at: dt.datetime | None
    """When the oldest change read so far was captured, on this host's clock, if reading
    tells (a slot's COMMIT does); None: the extraction asks the capture objects."""

    def verify(self) -> None:
        """Refuse to read when the feed's position went backwards (raises ``StateError``)."""
        ...

    def pending(self) -> int | None:
        """Changes waiting (None: unknown without reading them)."""
        ...

    def read(self, limit: int) -> pa.Table:
        """Up to ``limit`` changes, lowest ``gl_seq`` first (empty: nothing left)."""
        ...

    def shipping(self, changes: pa.Table) -> None:
        """Record that ``changes`` are about to be committed to the lake."""
        ...

    def done(self, changes: pa.Table) -> None:
        """Mark ``changes`` as shipped (called after their Delta commit)."""
        ...


@dataclass(slots=True)
class ChangelogFeed:
    marks_shipped: ClassVar[str] = "the changelog rows read are deleted"
    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    sequences_are_unique: bool = True
    oldest_change_at: dt.datetime | None = None

    @staticmethod
    def initial_position(source: SourceDialect) -> int | None:
        return None

    def verify(self) -> None:
        """Refuse a changelog whose sequence is below the highest ``gl_seq`` already shipped.

        New changes would then reuse values of shipped ones; they cannot be told
        apart from them, and the merging view would order them wrongly.
        """
        shipped = self.state.shipped_seq
        if shipped is None:
            return
        objects = capture_objects(self.state)
        position = capture.sequence_position(self.source, objects)
        if position is None or position >= shipped:
            return
        sequence = next(
            (o for o in objects if o.kind is SourceObject.CHANGELOG_SEQUENCE),
            next(o for o in objects if o.kind is SourceObject.CHANGELOG_TABLE),
        )
        raise StateError(
            f"the changelog sequence {sequence.schema}.{sequence.name} of "
            f"{self.state.table_key} is at {position}, below {shipped}, the highest change "
            "already shipped: it was reset, so new changes cannot be told from shipped ones; "
            f"nothing was extracted. Restart it above {shipped} and {REBUILD_HINT}"
        )

    def pending(self) -> int | None:
        return capture.count_changes(self.source, capture_objects(self.state))

    def read(self, limit: int) -> pa.Table:
        objects = capture_objects(self.state)
        return capture.read_changes(self.source, self.record.spec(), objects, limit=limit)

    def shipping(self, changes: pa.Table) -> None:
        # Before the Delta commit: a crash right after it must not leave the mark behind.
        import pyarrow.compute as pc

        highest = pc.max(changes.column("gl_seq")).as_py()
        self.repo.incremental.record_shipping(self.state.table_key, int(highest))

    def done(self, changes: pa.Table) -> None:
        seqs = changes.column("gl_seq")  # the Arrow column: the delete's runs are computed in it
        fault_point("extract.before_changelog_delete")
        capture.delete_changes(self.source, capture_objects(self.state), seqs)
        fault_point("extract.after_changelog_delete")


@dataclass(slots=True)
class RowscnFeed:
    marks_shipped: ClassVar[str] = "the highest ORA_ROWSCN read is recorded in the repository"
    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    sequences_are_unique: bool = False
    oldest_change_at: dt.datetime | None = None
    _upto: int | None = None
    _finished: bool = False

    @staticmethod
    def initial_position(source: SourceDialect) -> int | None:
        """The SCN to extract from, captured when incremental update is enabled."""
        return int(source.run_query("current_scn")[0][0])

    def verify(self) -> None:
        return None

    def pending(self) -> int | None:
        return None

    def read(self, limit: int) -> pa.Table:
        import pyarrow as pa

        spec = self.record.spec()
        schema = pa.schema([*spec.arrow_schema, *capture.change_fields()])
        if self._finished:
            return schema.empty_table()
        # One read per run, bounded by the SCN captured first: later commits wait for the next run.
        self._upto = self.initial_position(self.source)
        sql = self.source.render(
            "read_rowscn_changes",
            schema=spec.schema,
            table=spec.name,
            columns=self.source.select_list(spec),
        )
        params = {"since": self.state.last_scn or 0, "upto": self._upto}
        batches = self.source.read_query_batches(
            spec, sa.text(sql), params, batch_rows=limit, extra_fields=capture.change_fields()
        )
        self._finished = True
        return pa.Table.from_batches(list(batches), schema=schema)

    def shipping(self, changes: pa.Table) -> None:
        return None

    def done(self, changes: pa.Table) -> None:
        self.repo.incremental.update_state(self.state.table_key, last_scn=self._upto)


POSITION_BITS = 20
"""``gl_seq`` = commit LSN << 20 | position in the transaction: 1,048,576 changes of the
table per transaction, and 8 TiB of WAL in the cluster's life, fit a bigint."""

_OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}


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


SLOT_BUSY_WAIT_SECONDS = 30.0
"""How long a read waits for another reader of the slot: status counting the backlog holds
it for a bounded peek (``gluon.status.lag``); a slot has one reader at a time."""


def peek_slot(
    source: SourceDialect, slot: str, limit: int, wait_seconds: float = SLOT_BUSY_WAIT_SECONDS
) -> list[Any]:
    """The slot's rows (``peek_slot_changes``), waiting while another process reads it.

    Raises:
        SourceError: the slot cannot be read (or stayed busy ``wait_seconds``).
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return source.run_query("peek_slot_changes", {"slot": slot, "limit": limit})
        except SourceError as exc:
            if "is active for PID" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


@dataclass(slots=True)
class PgLogicalFeed:
    marks_shipped: ClassVar[str] = "the replication slot is advanced past the transactions read"
    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    sequences_are_unique: bool = True
    _confirm: int | None = None
    """The commit LSN the last read ended at: ``done`` advances the slot to it."""
    oldest_change_at: dt.datetime | None = None
    """When the first transaction read with a change of the table committed, on this host's
    clock (None: none read yet): the extraction records it for the source-to-lake latency."""
    _label: str = field(default="", init=False)

    @staticmethod
    def initial_position(source: SourceDialect) -> int | None:
        return None

    @property
    def slot(self) -> capture.SourceObjectRef:
        objects = capture_objects(self.state)
        found = next((o for o in objects if o.kind is SourceObject.REPLICATION_SLOT), None)
        if found is None:
            raise StateError(f"the incremental state of {self.state.table_key} names no slot")
        return found

    def verify(self) -> None:
        """Refuse to read when the slot is gone: the changes it kept are lost."""
        slot = self.slot
        if not capture.object_exists(self.source, slot):
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
        schema = pa.schema([*spec.arrow_schema, *capture.change_fields()])
        label = logical.table_label(spec.schema, spec.name)
        slot = self.slot.name
        # The slot's rows count BEGIN, COMMIT and other tables' changes too: peek further
        # (from the slot's position again) until the batch holds ``limit`` changes of the
        # table or the stream ends, so a short batch means nothing is left.
        wanted = limit
        while True:
            rows = peek_slot(self.source, slot, wanted)
            if not rows:
                return schema.empty_table()
            changes, last_commit = self._decode(rows, label)
            ended = len(rows) < wanted
            if len(changes) >= limit or (changes and ended):
                self._confirm = last_commit
                return self._typed(changes, schema)
            if not changes:
                # Only other tables' transactions: confirm them now, nothing of ours is in them.
                if last_commit is not None:
                    self._advance(last_commit)
                if ended:
                    return schema.empty_table()
                continue
            wanted *= 2

    def _decode(self, rows: list[Any], label: str) -> tuple[list[list[str | None]], int | None]:
        """The table's changes in ``rows`` as text rows (values, gl_seq, gl_op) and the
        last commit LSN."""
        spec = self.record.spec()
        names = [column.name for column in spec.columns]
        keys = list(self.state.key_columns)
        plain = logical.plain_row_pattern(label, names)
        out: list[list[str | None]] = []
        pending: list[tuple[str, list[str | None]]] = []
        last_commit: int | None = None
        ours = f"table {label}: "  # test_decoding's prefix of this table's change rows
        for lsn, _xid, data in rows:
            if data.startswith("BEGIN"):
                pending = []
                continue
            if data.startswith("COMMIT"):
                commit = parse_lsn(lsn)
                if pending and self.oldest_change_at is None:
                    self.oldest_change_at = self._on_host_clock(logical.commit_time(data))
                for position, (op, values) in enumerate(pending):
                    values.append(str(logical_sequence(commit, position)))
                    values.append(op)
                    out.append(values)
                pending = []
                last_commit = commit
                continue
            if not data.startswith(ours):
                continue  # another table's change (which may not even log its key) or a message
            read = logical.plain_values(data, plain)
            if read is not None:
                pending.append((_OPS[read[0]], read[1]))
                continue
            try:
                change = logical.parse_change(data)
            except logical.DecodingError as exc:
                raise StateError(f"slot of {self.state.table_key}: {exc}") from None
            if change is None or change.table != label:
                continue
            new = change.new
            if change.old is not None and any(change.old.get(key) != new.get(key) for key in keys):
                pending.append(("D", self._in_order(names, change.old)))  # the old key goes
                pending.append(("I", self._in_order(names, self._complete(new, change.old))))
                continue
            completed = self._complete(new, change.old)
            pending.append((_OPS[change.op], self._in_order(names, completed)))
        return out, last_commit

    @staticmethod
    def _in_order(names: list[str], values: dict[str, str | None]) -> list[str | None]:
        return [values.get(name) for name in names]

    def _on_host_clock(self, committed: dt.datetime | None) -> dt.datetime | None:
        """``committed`` (the source's clock, naive UTC) on this host's clock."""
        if committed is None:
            return None
        source_now = self.source.run_query("source_clock")[0][0]
        host_now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return capture.OldestChange(committed, source_now, host_now).captured_at

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
        import pyarrow as pa

        spec = self.record.spec()
        sql = self.source.render(
            "slot_changes_as_rows",
            columns=self.source.select_list(spec),
            table_columns=spec.columns,
        )
        batches = self.source.read_query_batches(
            spec,
            sa.text(sql),
            {"changes": json.dumps(changes)},
            batch_rows=max(len(changes), 1),
            extra_fields=capture.change_fields(),
        )
        return pa.Table.from_batches(list(batches), schema=schema)

    def shipping(self, changes: pa.Table) -> None:
        highest = max(changes.column("gl_seq").to_pylist())
        self.repo.incremental.record_shipping(self.state.table_key, int(highest))

    def done(self, changes: pa.Table) -> None:
        if self._confirm is None:
            # A batch a dead run staged (merge mode IMMEDIATE): its last change's commit.
            highest = max(changes.column("gl_seq").to_pylist())
            self._confirm = int(highest) >> POSITION_BITS
        fault_point("extract.before_slot_advance")
        self._advance(self._confirm)
        fault_point("extract.after_slot_advance")
        self._confirm = None

    def _advance(self, lsn: int) -> None:
        self.source.execute_script("advance_slot", slot=self.slot.name, lsn=format_lsn(lsn))

    def backlog(self) -> tuple[int, int | None]:
        """How many changes of the table the slot keeps now, and the commit LSN the last
        transaction peeked ends at (None: the slot keeps no transaction).

        Decodes all the WAL the slot retains: for disable and discard, never the
        extraction's no-op path.
        """
        spec = self.record.spec()
        rows = self.source.run_query("peek_slot_changes", {"slot": self.slot.name, "limit": None})
        changes, last_commit = self._decode(rows, logical.table_label(spec.schema, spec.name))
        return len(changes), last_commit

    def discard(self) -> int:
        """Confirm every change the slot keeps now without shipping it; return how many of the
        table's it dropped. A transaction committed after the peek stays in the slot."""
        count, last_commit = self.backlog()
        if last_commit is not None:
            self._advance(last_commit)
        return count


FEEDS: dict[ChangeReader, type[ChangelogFeed] | type[RowscnFeed] | type[PgLogicalFeed]] = {
    ChangeReader.CHANGELOG: ChangelogFeed,
    ChangeReader.ORA_ROWSCN: RowscnFeed,
    ChangeReader.PG_LOGICAL: PgLogicalFeed,
}
