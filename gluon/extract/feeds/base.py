"""What every change feed shares: the protocol an extraction drives, and the capture
objects a table's incremental state records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from gluon.capture import changelog
from gluon.capture import objects as source_objects
from gluon.errors import UnsupportedError, UsageError
from gluon.extract.feeds.unfit import SET_ASIDE_OPTION, UnfitChange, UnfitSearch
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState, SourceObjectRecord
from gluon.schema import Column, TableSpec
from gluon.source.base import SourceDialect
from gluon.states import SlotScope

if TYPE_CHECKING:
    import pyarrow as pa


def capture_objects(state: IncrementalState) -> list[source_objects.SourceObjectRef]:
    """The source objects recorded for ``state``, as ``gluon.capture`` takes them."""
    return [
        source_objects.SourceObjectRef(
            kind=SourceObject(item.kind),
            schema=item.schema,
            name=item.name,
            object_type=item.object_type,
        )
        for item in state.source_objects
    ]


def object_records(objects: list[source_objects.SourceObjectRef]) -> tuple[SourceObjectRecord, ...]:
    """``objects`` as the repository stores them."""
    return tuple(
        SourceObjectRecord(
            kind=item.kind.value, schema=item.schema, name=item.name, object_type=item.object_type
        )
        for item in objects
    )


@dataclass(frozen=True, slots=True)
class SlotBacklog:
    """Where a table's replication slot stands (None: unknown, see the reason)."""

    slot: str
    retained_bytes: int | None
    """WAL the slot makes the source keep (from where decoding restarts to now)."""
    unconfirmed_bytes: int | None
    """WAL written since the last position an extraction confirmed."""
    pending: int | None
    """Row changes of the table waiting in the slot (a key change counts once)."""
    oldest: changelog.OldestChange | None
    """The first pending transaction of the table, by its commit time (None: none pending,
    or unknown)."""
    unknown_reason: str | None = None
    """Why ``pending`` and ``oldest`` are unknown."""
    shared: bool = False
    """The slot is the database's, shared by its member tables (not the table's own)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """The changes of a table waiting in the source, as status counts them."""

    count: int | None
    """How many (None: unknown, see ``unknown_reason``)."""
    oldest: changelog.OldestChange | None = None
    """The oldest of them (None: none waits, not asked for, or unknown)."""
    unknown_reason: str | None = None
    problems: tuple[str, ...] = ()
    """What stops changes from being captured now, one line each with the way out."""
    slot: SlotBacklog | None = None
    """A slot's own figures (the WAL it makes the source keep); None: the feed has no slot."""


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
    waits_in: ClassVar[str]
    """Where changes wait to be read, in a message's words."""
    oldest_change_at: dt.datetime | None
    """When the oldest change read so far was captured, on this host's clock, if reading
    tells (a slot's COMMIT does); None: the extraction asks the capture objects."""
    batches_in_order: ClassVar[bool]
    """Every change it reads after a batch has a higher ``gl_seq`` than each of the batch's
    (a slot's stream, in commit order; not a changelog, where a transaction that took a lower
    sequence value may commit later): a batch is recorded as its lowest and highest."""
    merges_batches: ClassVar[bool]
    """Its changes come in numbered batches that merge mode IMMEDIATE merges once each (not
    a feed that re-reads row images)."""
    position_kind: ClassVar[str]
    """What orders the changes it ships, in status's words (``sequence``, ``SCN``)."""
    counts_pending: ClassVar[bool]
    """Status can count the changes waiting (:meth:`pending_in`); False: it cannot tell."""
    counts_changelog_rows: ClassVar[bool]
    """The changes waiting are the rows of its changelog table: status may count many
    tables' changelogs in one query and pass each count to :meth:`pending_in`."""
    exclusive_reads: ClassVar[bool]
    """Counting the changes waiting takes the source resource an extraction advances, which
    one session at a time may hold (a replication slot): a process that does both takes
    turns (``gluon.service.slots``)."""

    @classmethod
    def check_enable(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        key_columns: Sequence[str],
        method: type[ExtractionMethod],
    ) -> None:
        """Refuse to enable ``method`` on ``spec`` when the source cannot give this feed the
        table's changes (raises ``UnsupportedError``, one line with the fix)."""
        ...

    @staticmethod
    def held_in(objects: Sequence[source_objects.SourceObjectRef]) -> str | None:
        """The changelog table the changes wait in, ``SCHEMA.NAME``, as status names it
        (None: the feed keeps none). No database access."""
        ...

    @staticmethod
    def reads_shared_stream(objects: Sequence[source_objects.SourceObjectRef]) -> bool:
        """The table's changes come from one stream with other tables of its database (a
        shared slot): the service extracts those tables in a row from one decoding
        (``gluon.extract.shared_pass``), and reading the stream is not a turn the
        lag reader takes (it does not read it). No database access."""
        ...

    @classmethod
    def placed(
        cls,
        source: SourceDialect,
        repo: Repository,
        objects: list[source_objects.SourceObjectRef],
        spec: TableSpec,
        scope: SlotScope | None,
    ) -> list[source_objects.SourceObjectRef]:
        """The capture objects a new enabling records, ``objects`` as planned placed in
        ``scope`` (``--incremental-pg-logical-slot``; None: not given, the feed chooses and
        logs why when the table cannot take its default).

        Raises:
            UsageError: the feed has no such choice.
        """
        ...

    @classmethod
    def capturing(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        objects: Sequence[source_objects.SourceObjectRef],
        *,
        copying: bool,
    ) -> AbstractContextManager[object]:
        """Around the enable's creation of ``objects`` and its copy (``copying``: this run
        copies the table): joins what the table shares with others (``JOINED_KINDS``); the
        copy reads the snapshot it holds."""
        ...

    @classmethod
    def release(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        objects: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """Leave what ``objects`` (being dropped) share with other tables."""
        ...

    @classmethod
    def rejoin(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        missing: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """Put the table back into what it shares with other tables, where ``missing``
        (``JOINED_KINDS``, dropped outside gluon) says it is gone: the repair
        (``--incremental-recreate-capture-objects``)."""
        ...

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
        """The changes waiting now, for status (``counted``: the count just taken, not taken
        again; ``oldest``: find the oldest; ``check_capture``: also say what stops capture).

        Raises:
            GluonError: the source cannot be read.
        """
        ...

    @classmethod
    def check_placed(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        placed_objects: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """Refuse, before anything is created, a table the ``placed_objects`` it is in
        (:meth:`placed`) cannot capture whole (raises ``UnsupportedError``, one line with
        the fix)."""
        ...

    @classmethod
    def pending_ahead(
        cls,
        source: SourceDialect,
        repo: Repository,
        tables: Sequence[tuple[OffloadedTable, IncrementalState]],
    ) -> dict[str, Pending]:
        """The changes waiting of those of ``tables`` whose feed counts many tables in one
        read (a shared slot decoded once for all its members), by table key; the others are
        left to :meth:`pending_in`.

        Raises:
            GluonError: the source cannot be read.
        """
        ...

    @classmethod
    def read_rows_again(
        cls,
        source: SourceDialect,
        repo: Repository,
        record: OffloadedTable,
        state: IncrementalState,
        added: Sequence[Column],
    ) -> bool:
        """Have the next read ship every row of the table again, as it reads now, when the
        rows unchanged since may read a default of an ``added`` column; False: it is not
        needed, or the feed cannot (its changes are not read from the table's rows). A
        carried ``ADD COLUMN`` asks it of a feed whose rows unchanged since would not show
        the column's default otherwise."""
        ...

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

    def backlog(self) -> int | None:
        """Changes waiting in the source now, which a discard or a disable would drop (None:
        the feed keeps none, it reads the table itself). Exact, however long it takes."""
        ...

    def lost_on_drop(self, droppable: Sequence[source_objects.SourceObjectRef]) -> int:
        """Changes waiting in ``droppable`` (capture objects a disable is about to drop),
        which dropping them would lose: a disable refuses while there are any."""
        ...

    def discard_step(self, count: int | None) -> str:
        """What :meth:`discard` does, for a plan, given ``count`` from :meth:`backlog`."""
        ...

    def discard(self) -> int | None:
        """Drop every change waiting without shipping it; how many were dropped (None: none
        kept, see :meth:`backlog`)."""
        ...

    def find_unfit(self, seqs: list[int], set_aside: set[int]) -> UnfitSearch:
        """Which of the changes ``seqs`` wait (``set_aside``: recorded as set aside already,
        not waiting), and which of those the lake refuses (``gluon.extract.set_aside``)."""
        ...

    def set_aside(self, changes: list[UnfitChange]) -> None:
        """Take ``changes`` (recorded in the repository already) out of what waits."""
        ...


@dataclass(slots=True)
class TableFeed:
    """What every feed holds: the table's source, its record and incremental state, and the
    repository (a feed is made as ``feed_of(state)(source, record, state, repo)``)."""

    source: SourceDialect
    record: OffloadedTable
    state: IncrementalState
    repo: Repository
    oldest_change_at: dt.datetime | None = None
    """See :attr:`ChangeFeed.oldest_change_at` (None until a read tells)."""
    merges_batches: ClassVar[bool] = True
    batches_in_order: ClassVar[bool] = False
    position_kind: ClassVar[str] = "sequence"
    counts_pending: ClassVar[bool] = True
    counts_changelog_rows: ClassVar[bool] = False
    exclusive_reads: ClassVar[bool] = False

    @classmethod
    def check_enable(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        key_columns: Sequence[str],
        method: type[ExtractionMethod],
    ) -> None:
        """See :meth:`ChangeFeed.check_enable` (a feed that needs nothing special refuses
        nothing)."""

    @staticmethod
    def held_in(objects: Sequence[source_objects.SourceObjectRef]) -> str | None:
        """See :meth:`ChangeFeed.held_in`."""
        return None

    @staticmethod
    def reads_shared_stream(objects: Sequence[source_objects.SourceObjectRef]) -> bool:
        """See :meth:`ChangeFeed.reads_shared_stream`."""
        return False

    @classmethod
    def check_placed(
        cls,
        source: SourceDialect,
        spec: TableSpec,
        objects: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """See :meth:`ChangeFeed.check_placed` (the objects a feed plans capture it all)."""

    @classmethod
    def pending_ahead(
        cls,
        source: SourceDialect,
        repo: Repository,
        tables: Sequence[tuple[OffloadedTable, IncrementalState]],
    ) -> dict[str, Pending]:
        """See :meth:`ChangeFeed.pending_ahead` (none: each table counts its own)."""
        return {}

    @classmethod
    def read_rows_again(
        cls,
        source: SourceDialect,
        repo: Repository,
        record: OffloadedTable,
        state: IncrementalState,
        added: Sequence[Column],
    ) -> bool:
        """See :meth:`ChangeFeed.read_rows_again` (a feed reads changes, not the rows)."""
        return False

    @classmethod
    def placed(
        cls,
        source: SourceDialect,
        repo: Repository,
        objects: list[source_objects.SourceObjectRef],
        spec: TableSpec,
        scope: SlotScope | None,
    ) -> list[source_objects.SourceObjectRef]:
        """See :meth:`ChangeFeed.placed` (a feed without a slot has no choice)."""
        if scope is not None and scope is not SlotScope.TABLE:
            raise UsageError(
                f"--incremental-pg-logical-slot={scope.value} is for log-based extraction: "
                "leave it out for this method"
            )
        return objects

    @classmethod
    def capturing(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        objects: Sequence[source_objects.SourceObjectRef],
        *,
        copying: bool,
    ) -> AbstractContextManager[object]:
        """See :meth:`ChangeFeed.capturing` (nothing shared)."""
        return nullcontext()

    @classmethod
    def release(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        objects: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """See :meth:`ChangeFeed.release` (nothing shared)."""

    @classmethod
    def rejoin(
        cls,
        source: SourceDialect,
        repo: Repository,
        state: IncrementalState,
        spec: TableSpec,
        missing: Sequence[source_objects.SourceObjectRef],
    ) -> None:
        """See :meth:`ChangeFeed.rejoin` (nothing shared)."""

    def shipping(self, changes: pa.Table) -> None:
        """Raise the repository's ``shipped_seq`` to the batch's highest ``gl_seq``, before the
        Delta commit: a crash right after it must not leave the mark behind."""
        self.repo.incremental.record_shipping(self.state.table_key, highest_seq(changes))

    def find_unfit(self, seqs: list[int], set_aside: set[int]) -> UnfitSearch:
        """See :meth:`ChangeFeed.find_unfit` (a feed that reads the table keeps no changes)."""
        raise self._keeps_no_changes()

    def set_aside(self, changes: list[UnfitChange]) -> None:
        """See :meth:`ChangeFeed.set_aside`."""
        raise self._keeps_no_changes()

    def _keeps_no_changes(self) -> UnsupportedError:
        return UnsupportedError(
            f"{self.state.table_key} uses {self.state.method}, which keeps no change to set "
            f"aside: {SET_ASIDE_OPTION} works with the changelog methods and PG_LOGICAL"
        )


def highest_seq(changes: pa.Table) -> int:
    """The highest ``gl_seq`` of a non-empty batch, computed in Arrow."""
    import pyarrow.compute as pc

    return int(pc.max(changes.column("gl_seq")).as_py())
