"""The changelog feed: every changelog row visible now, lowest ``gl_seq`` first; shipped
rows are deleted by their exact ``gl_seq`` values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from gluon.capture import changelog as capture_changelog
from gluon.capture import existing
from gluon.capture import objects as source_objects
from gluon.errors import SourceError, StateError
from gluon.extract.feeds import unfit
from gluon.extract.feeds.base import REBUILD_HINT, Pending, TableFeed, capture_objects
from gluon.faults import fault_point
from gluon.methods.base import SourceObject
from gluon.repo import OffloadedTable
from gluon.repo.incremental import IncrementalState
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(slots=True)
class ChangelogFeed(TableFeed):
    marks_shipped: ClassVar[str] = "the changelog rows read are deleted"
    waits_in: ClassVar[str] = "the changelog"
    counts_changelog_rows: ClassVar[bool] = True
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
        position = capture_changelog.sequence_position(self.source, objects)
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
        return capture_changelog.count_changes(self.source, capture_objects(self.state))

    def read(self, limit: int) -> pa.Table:
        objects = capture_objects(self.state)
        try:
            return capture_changelog.read_changes(
                self.source, self.record.spec(), objects, limit=limit
            )
        except SourceError as exc:
            from gluon.source.arrow import UnfitValueError  # loaded by the read that failed

            if not isinstance(exc, UnfitValueError) or not unfit.refused_seqs(exc):
                raise
            seqs = unfit.refused_seqs(exc)
            texts = capture_changelog.read_change_texts(
                self.source, self.record.spec(), objects, seqs[: unfit.LISTED]
            )
            named = [self._unfit(texts[seq], exc.column) for seq in sorted(texts)]
            raise unfit.refusal(self.record, self.state, named, len(seqs) - len(named)) from exc

    def _unfit(self, text: capture_changelog.ChangeText, lake_column: str) -> unfit.UnfitChange:
        later = capture_changelog.later_change_of_key(
            self.source,
            self.record.spec(),
            capture_objects(self.state),
            text,
            self.state.key_columns,
        )
        return unfit.unfit_change(self.record, self.state, text, lake_column, later)

    def find_unfit(self, seqs: list[int], set_aside: set[int]) -> unfit.UnfitSearch:
        spec = self.record.spec()
        objects = capture_objects(self.state)
        texts = capture_changelog.read_change_texts(self.source, spec, objects, seqs)
        found, remaining = unfit.narrow(
            list(texts),
            lambda some: capture_changelog.read_changes(
                self.source, spec, objects, limit=None, seqs=some
            ),
            lambda seq, column: self._unfit(texts[seq], column),
        )
        return unfit.UnfitSearch(
            found, remaining, {seq: text.values for seq, text in texts.items()}
        )

    def set_aside(self, changes: list[unfit.UnfitChange]) -> None:
        """Delete exactly ``changes`` from the changelog, in one transaction."""
        fault_point("set_aside.before_changelog_delete")
        try:
            capture_changelog.delete_changes(
                self.source, capture_objects(self.state), [change.gl_seq for change in changes]
            )
        except SourceError as exc:
            raise SourceError(
                f"{exc}; the changes are recorded as set aside: run the same command again"
            ) from exc
        fault_point("set_aside.after_changelog_delete")

    def done(self, changes: pa.Table) -> None:
        seqs = changes.column("gl_seq")  # the Arrow column: the delete's runs are computed in it
        fault_point("extract.before_changelog_delete")
        capture_changelog.delete_changes(self.source, capture_objects(self.state), seqs)
        fault_point("extract.after_changelog_delete")

    def backlog(self) -> int | None:
        return self.pending()

    def lost_on_drop(self, droppable: Sequence[source_objects.SourceObjectRef]) -> int:
        return capture_changelog.count_changes(self.source, list(droppable))

    @staticmethod
    def held_in(objects: Sequence[source_objects.SourceObjectRef]) -> str | None:
        changelog = next((o for o in objects if o.kind is SourceObject.CHANGELOG_TABLE), None)
        return None if changelog is None else f"{changelog.schema}.{changelog.name}"

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
        """The changelog's rows, and the oldest by its ``gl_changed_at`` (one query through
        the changelog's key: cheap however long the changelog is)."""
        objects = capture_objects(state)
        problems: tuple[str, ...] = ()
        if check_capture:
            problems = tuple(
                existing.capture_problems(
                    source, record.spec(), objects, changelog_read=counted is not None
                )
            )
            if any(problem.startswith("changelog table") for problem in problems):
                missing = f"changelog table {cls.held_in(objects)} is missing"
                return Pending(None, None, missing, problems)
        count = capture_changelog.count_changes(source, objects) if counted is None else counted
        first = capture_changelog.oldest_change(source, objects) if oldest else None
        return Pending(count, first, None, problems)

    def discard_step(self, count: int | None) -> str:
        return f"delete {count} changes from the changelog"

    def discard(self) -> int | None:
        objects = capture_objects(self.state)
        waiting = capture_changelog.read_changes(
            self.source, self.record.spec(), objects, limit=None
        )
        capture_changelog.delete_changes(self.source, objects, waiting.column("gl_seq"))
        return int(waiting.num_rows)
