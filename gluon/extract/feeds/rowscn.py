"""The ORA_ROWSCN feed: rows whose ``ORA_ROWSCN`` lies between the stored SCN and the SCN
captured before reading, in SCN order, streamed one batch of the extraction's size at a time
(one query per run, never more than two batches in memory). After each batch's Delta commit
the SCN below which every row has been read is stored: one below the next batch's first SCN
(rows of one transaction share its SCN, and a batch may end between them), the captured SCN
after the last batch. A crash in between re-reads row images from that SCN on, which the
merging view applies idempotently."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import sqlalchemy as sa

from gluon.capture import objects
from gluon.extract.feeds.base import Pending, TableFeed
from gluon.naming import TableRef
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.schema import Column
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class RowscnFeed(TableFeed):
    marks_shipped: ClassVar[str] = (
        "the ORA_ROWSCN up to which every row was read is recorded in the repository"
    )
    waits_in: ClassVar[str] = "the table (rows changed since the SCN recorded)"
    merges_batches: ClassVar[bool] = False
    """Re-reads row images, no numbered batch: merge mode IMMEDIATE cannot merge them once."""
    position_kind: ClassVar[str] = "SCN"
    counts_pending: ClassVar[bool] = False
    """Rows changed since the SCN are found only by reading the table."""
    sequences_are_unique: bool = False
    _upto: int | None = None
    _batches: Iterator[pa.RecordBatch] | None = None
    _ahead: pa.RecordBatch | None = None
    """The batch after the one handed out, read ahead to know where that one ends."""
    _position: int | None = None
    """The SCN to store once the batch handed out last is in the lake."""

    @staticmethod
    def initial_position(source: SourceDialect) -> int | None:
        """The SCN to extract from, captured when incremental update is enabled."""
        return int(source.run_query("current_scn")[0][0])

    @classmethod
    def read_rows_again(
        cls,
        source: SourceDialect,
        repo: Repository,
        record: OffloadedTable,
        state: IncrementalState,
        added: Sequence[Column],
    ) -> bool:
        """Every row's ORA_ROWSCN is above 0: the next read ships them all, as images the
        merging view applies like any other (a row shipped before at the same SCN: the
        later run's image shows). Oracle keeps an added column's default as metadata
        (NOT NULL since 11g, any since 12c), which moves no row's ORA_ROWSCN. Columns added
        without a default read NULL in those rows, as the lake shows them: no re-read."""
        with_defaults = source.columns_with_defaults(
            TableRef(record.source_schema, record.source_table)
        )
        if not any(column.name in with_defaults for column in added):
            return False
        repo.incremental.update_state(state.table_key, last_scn=0)
        return True

    def verify(self) -> None:
        return None

    def pending(self) -> int | None:
        return None

    def read(self, limit: int) -> pa.Table:
        import pyarrow as pa

        spec = self.record.spec()
        schema = pa.schema([*spec.arrow_schema, *objects.change_fields()])
        if self._batches is None:
            self._batches = self._query(limit)
            self._ahead = next(self._batches, None)
        batch, self._ahead = self._ahead, None
        if batch is None:
            return schema.empty_table()
        self._ahead = next(self._batches, None)
        # Every row below the next batch's first SCN has been read (SCN order).
        self._position = self._upto if self._ahead is None else _first_scn(self._ahead) - 1
        return pa.Table.from_batches([batch], schema=schema)

    def _query(self, limit: int) -> Iterator[pa.RecordBatch]:
        """One read per run, bounded by the SCN captured first: later commits wait for the
        next run."""
        spec = self.record.spec()
        self._upto = self.initial_position(self.source)
        sql = self.source.render(
            "read_rowscn_changes",
            schema=spec.schema,
            table=spec.name,
            columns=self.source.select_list(spec),
        )
        # Read under the lock, not taken from the state the run started with: this run's
        # schema carry may have moved it back (read_rows_again).
        current = self.repo.incremental.get_state(self.state.table_key) or self.state
        params = {"since": current.last_scn or 0, "upto": self._upto}
        return iter(
            self.source.read_query_batches(
                spec, sa.text(sql), params, batch_rows=limit, extra_fields=objects.change_fields()
            )
        )

    def shipping(self, changes: pa.Table) -> None:
        return None  # row images carry no unique gl_seq to skip a re-read by: nothing to mark

    def done(self, changes: pa.Table) -> None:
        if self._position is None:
            return  # no batch read since the last one was marked
        self.repo.incremental.update_state(self.state.table_key, last_scn=self._position)
        self._position = None

    def backlog(self) -> int | None:
        return None

    def lost_on_drop(self, droppable: Sequence[objects.SourceObjectRef]) -> int:
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


def _first_scn(batch: pa.RecordBatch) -> int:
    return int(batch.column(batch.schema.get_field_index("gl_seq"))[0].as_py())
