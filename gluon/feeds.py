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
from typing import Protocol

import pyarrow as pa
import sqlalchemy as sa

from gluon import capture
from gluon.faults import fault_point
from gluon.methods.base import ChangeReader, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState, SourceObjectRecord
from gluon.source.base import SourceDialect


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


class ChangeFeed(Protocol):
    """Where an extraction reads changes from, and how it marks them done."""

    sequences_are_unique: bool
    """Each change has its own ``gl_seq`` (so a re-shipped change can be recognised)."""

    def pending(self) -> int | None:
        """Changes waiting (None: unknown without reading them)."""
        ...

    def read(self, limit: int) -> pa.Table:
        """Up to ``limit`` changes, lowest ``gl_seq`` first (empty: nothing left)."""
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

    def pending(self) -> int | None:
        return capture.count_changes(self.source, capture_objects(self.state))

    def read(self, limit: int) -> pa.Table:
        objects = capture_objects(self.state)
        return capture.read_changes(self.source, self.record.spec(), objects, limit=limit)

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

    def pending(self) -> int | None:
        return None

    def read(self, limit: int) -> pa.Table:
        spec = self.record.spec()
        schema = pa.schema([*spec.arrow_schema, *capture.CHANGE_FIELDS])
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
            spec, sa.text(sql), params, batch_rows=limit, extra_fields=capture.CHANGE_FIELDS
        )
        self._finished = True
        return pa.Table.from_batches(list(batches), schema=schema)

    def done(self, changes: pa.Table) -> None:
        self.repo.incremental.update_state(self.state.table_key, last_scn=self._upto)


FEEDS: dict[ChangeReader, type[ChangelogFeed] | type[RowscnFeed]] = {
    ChangeReader.CHANGELOG: ChangelogFeed,
    ChangeReader.ORA_ROWSCN: RowscnFeed,
}
