"""Change feeds: where an extraction reads changes, and how it marks them shipped.

One feed per ``ChangeReader`` of the method registry (``FEEDS``):

* changelog: every changelog row visible now, lowest ``gl_seq`` first; shipped
  rows are deleted by their exact ``gl_seq`` values.
* ORA_ROWSCN: rows whose ``ORA_ROWSCN`` lies between the stored SCN and the SCN
  captured before reading; the new SCN is stored after the Delta commit. A
  crash in between re-reads the same row images, which the merging view
  applies idempotently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa

from gluon import capture
from gluon.errors import StateError
from gluon.faults import fault_point
from gluon.methods.base import ChangeReader, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState, SourceObjectRecord
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
    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    sequences_are_unique: bool = True

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
        highest = max(changes.column("gl_seq").to_pylist())
        self.repo.incremental.record_shipping(self.state.table_key, int(highest))

    def done(self, changes: pa.Table) -> None:
        seqs = changes.column("gl_seq").to_pylist()
        fault_point("extract.before_changelog_delete")
        capture.delete_changes(self.source, capture_objects(self.state), seqs)
        fault_point("extract.after_changelog_delete")


@dataclass(slots=True)
class RowscnFeed:
    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    sequences_are_unique: bool = False
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


FEEDS: dict[ChangeReader, type[ChangelogFeed] | type[RowscnFeed]] = {
    ChangeReader.CHANGELOG: ChangelogFeed,
    ChangeReader.ORA_ROWSCN: RowscnFeed,
}
