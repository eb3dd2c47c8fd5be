"""The PG_LOGICAL feed of a table enabled into its database's shared slot
(``--incremental-pg-logical-slot=database``; issue 33 item 1): the registry's ``feed_of``
gives a table whose recorded objects hold ``SourceObject.SHARED_SLOT_TABLE`` this feed, which reads
through ``shared_reader.SharedSlotReader`` (one decoding per extraction, the table's position
saved after each batch's Delta commit, then the slot confirmed to the least position).

Discarding its changes moves its position past them; setting some aside is not offered yet
(refused in one line naming the discard or a rebuild).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from gluon.capture import objects
from gluon.config import DEFAULT_MAX_RETAINED_WAL_MB, load_settings
from gluon.errors import ConfigError, StateError, UnsupportedError
from gluon.extract.feeds import shared_backlog, shared_slot, unfit
from gluon.extract.feeds.base import REBUILD_HINT, Pending, highest_seq
from gluon.extract.feeds.logical_positions import POSITION_BITS
from gluon.extract.feeds.pg_logical import PgLogicalFeed
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.methods.base import SourceObject
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.source import publication
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa

NOT_YET = "is not offered yet for a table of its database's shared slot"


def _reader(
    source: SourceDialect, repo: Repository, record: OffloadedTable, state: IncrementalState
) -> SharedSlotReader:
    return SharedSlotReader(
        source, repo, state.table_key, record.spec(), state.key_columns, _max_retained_wal()
    )


def _max_retained_wal() -> int | None:
    """GLUON_PG_LOGICAL_MAX_RETAINED_WAL in bytes (the command checked it when it started;
    outside a command's settings, the default)."""
    try:
        return load_settings().max_retained_wal
    except ConfigError:
        return int(DEFAULT_MAX_RETAINED_WAL_MB * 2**20)


@dataclass(slots=True)
class SharedSlotFeed(PgLogicalFeed):
    marks_shipped: ClassVar[str] = (
        "the table's position in its database's shared slot is saved past the transactions "
        "read, and the slot confirmed to the least position of its tables"
    )
    waits_in: ClassVar[str] = "its database's shared replication slot"
    _shared: SharedSlotReader | None = field(default=None, init=False)
    _read_any: bool = field(default=False, init=False)

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
        """Unknown, with the reason: the table's position is in the repository, which this
        call does not have (status and the report count through :meth:`pending_of_members`,
        ``PgLogicalFeed.pending_ahead``)."""
        return Pending(
            None,
            None,
            "a table of its database's shared slot: counted with the repository only "
            "(display_incremental_status counts it)",
        )

    @classmethod
    def pending_of_members(
        cls,
        source: SourceDialect,
        repo: Repository,
        tables: Sequence[tuple[OffloadedTable, IncrementalState]],
    ) -> dict[str, Pending]:
        """The changes waiting of each member table in ``tables``, from one bounded decoding
        of the shared slot (``shared_backlog``), with the WAL the slot keeps; a member left
        out of the slot (``[pg_logical]`` WAL bound) says what to run.

        Raises:
            SourceError: the slot or the catalog cannot be read.
        """
        members = [
            shared_backlog.Member(state.table_key, record.spec(), state.key_columns)
            for record, state in tables
        ]
        figures = shared_backlog.members_backlog(source, repo, members)
        pending: dict[str, Pending] = {}
        for key, slot in figures.items():
            problems: tuple[str, ...] = ()
            row = repo.slot_positions.get(key)
            if row is not None and row.released_reason is not None:
                problems = (row.released_reason,)
            pending[key] = Pending(slot.pending, slot.oldest, slot.unknown_reason, problems, slot)
        return pending

    def _reading(self) -> SharedSlotReader:
        if self._shared is None:
            self._shared = _reader(self.source, self.repo, self.record, self.state)
        return self._shared

    def lost_on_drop(self, droppable: Sequence[objects.SourceObjectRef]) -> int:
        """What the shared slot keeps of the table, when it is to leave it (0 otherwise): its
        place dropped, or gone already (the table dropped: its changes stay in the slot)."""
        spec = self.record.spec()
        shared = shared_slot.shared_slot(self.source, self.repo)
        if not any(item.kind is SourceObject.SHARED_SLOT_TABLE for item in droppable) and (
            spec.schema,
            spec.name,
        ) in publication.published_tables(self.source, shared):
            return 0  # its place stays (not this installation's): the table does not leave
        row = self.repo.slot_positions.get(self.state.table_key)
        if row is None or row.released_reason is not None:
            return 0  # never joined, or released: the slot keeps nothing for it
        return self.backlog() or 0

    def verify(self) -> None:
        """Refuse to read when the table has no position, or was released from the slot."""
        self._reading().start()

    def read(self, limit: int) -> pa.Table:
        self._read_any = True
        return self._reading().read(limit)

    def done(self, changes: pa.Table) -> None:
        reader = self._reading()
        if not self._read_any:
            # A batch a dead run staged (merge mode IMMEDIATE): past its last commit.
            commit = highest_seq(changes) >> POSITION_BITS
            start = reader.start()
            shared_slot.save_position(self.repo, self.state.table_key, start.past(commit + 1))
            return
        reader.done()

    def backlog(self) -> int | None:
        figures = _reader(self.source, self.repo, self.record, self.state).backlog(1 << 62)
        if figures.pending is None:
            raise StateError(f"{self.state.table_key}: {figures.unknown_reason}")
        return figures.pending

    def discard_step(self, count: int | None) -> str:
        slot = shared_slot.shared_slot(self.source, self.repo).slot
        return (
            f"move the table's position in shared slot {slot} past the {count} changes of it "
            "the slot keeps, without shipping them (the slot is confirmed to the least "
            "position of its tables)"
        )

    def discard(self) -> int | None:
        """Move the table's position past every change of it the slot keeps up to the WAL
        flushed now, without shipping them; return how many. One saved position: a kill
        before it discards nothing (run the discard again), after it all of them."""
        reader = _reader(self.source, self.repo, self.record, self.state)
        figures = reader.backlog(1 << 62)  # decodes up to the WAL flushed now, all of it
        if figures.pending is None:
            raise StateError(
                f"{self.state.table_key}: cannot discard its changes now: {figures.unknown_reason}"
            )
        reader.done()  # its position past the horizon, then the slot confirmed
        return figures.pending

    def find_unfit(self, seqs: list[int], set_aside: set[int]) -> unfit.UnfitSearch:
        raise UnsupportedError(
            f"{unfit.SET_ASIDE_OPTION} {NOT_YET}: skip every change of the table waiting in "
            "the slot with --incremental-discard-changes -x (the lake misses them until each "
            f"row changes again), or {REBUILD_HINT}"
        )
