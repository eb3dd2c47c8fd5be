"""The changelog feed: every changelog row visible now, lowest ``gl_seq`` first; shipped
rows are deleted by their exact ``gl_seq`` values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gluon import capture
from gluon.errors import SourceError, StateError
from gluon.faults import fault_point
from gluon.feeds import unfit
from gluon.feeds.base import REBUILD_HINT, TableFeed, capture_objects
from gluon.methods.base import SourceObject
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class ChangelogFeed(TableFeed):
    marks_shipped: ClassVar[str] = "the changelog rows read are deleted"
    waits_in: ClassVar[str] = "the changelog"
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
        try:
            return capture.read_changes(self.source, self.record.spec(), objects, limit=limit)
        except SourceError as exc:
            from gluon.source.arrow import UnfitValueError  # loaded by the read that failed

            if not isinstance(exc, UnfitValueError):
                raise
            named = unfit.refusal(self.source, self.record, self.state, exc)
            if named is None:
                raise
            raise named from exc

    def done(self, changes: pa.Table) -> None:
        seqs = changes.column("gl_seq")  # the Arrow column: the delete's runs are computed in it
        fault_point("extract.before_changelog_delete")
        capture.delete_changes(self.source, capture_objects(self.state), seqs)
        fault_point("extract.after_changelog_delete")

    def backlog(self) -> int | None:
        return self.pending()

    def discard_step(self, count: int | None) -> str:
        return f"delete {count} changes from the changelog"

    def discard(self) -> int | None:
        objects = capture_objects(self.state)
        waiting = capture.read_changes(self.source, self.record.spec(), objects, limit=None)
        capture.delete_changes(self.source, objects, waiting.column("gl_seq"))
        return int(waiting.num_rows)
