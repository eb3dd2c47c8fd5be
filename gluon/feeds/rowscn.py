"""The ORA_ROWSCN feed: rows whose ``ORA_ROWSCN`` lies between the stored SCN and the SCN
captured before reading; the new SCN is stored after the Delta commit. A crash in between
re-reads the same row images, which the merging view applies idempotently."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import sqlalchemy as sa

from gluon import capture
from gluon.feeds.base import Pending, TableFeed
from gluon.repo import OffloadedTable
from gluon.repo.incremental import IncrementalState
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class RowscnFeed(TableFeed):
    marks_shipped: ClassVar[str] = "the highest ORA_ROWSCN read is recorded in the repository"
    waits_in: ClassVar[str] = "the table (rows changed since the SCN recorded)"
    merges_batches: ClassVar[bool] = False
    """Re-reads row images, no numbered batch: merge mode IMMEDIATE cannot merge them once."""
    position_kind: ClassVar[str] = "SCN"
    counts_pending: ClassVar[bool] = False
    """Rows changed since the SCN are found only by reading the table."""
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
        return None  # row images carry no unique gl_seq to skip a re-read by: nothing to mark

    def done(self, changes: pa.Table) -> None:
        self.repo.incremental.update_state(self.state.table_key, last_scn=self._upto)

    def backlog(self) -> int | None:
        return None

    def lost_on_drop(self, droppable: Sequence[capture.SourceObjectRef]) -> int:
        return 0  # nothing is kept: the table itself holds the changed rows

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
        return Pending(None, None, f"{state.method} keeps no changelog: it cannot tell")

    def discard_step(self, count: int | None) -> str:
        return "skip the row changes made since the last extraction (ORA_ROWSCN)"

    def discard(self) -> int | None:
        position = self.initial_position(self.source)
        self.repo.incremental.update_state(self.state.table_key, last_scn=position)
        return None
