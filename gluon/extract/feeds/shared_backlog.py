"""What status counts of the tables of a database's shared PG_LOGICAL slot (issue 33 item 1):
each member's changes waiting and the oldest of them, from one decoding of the slot for all
the members asked about (a report over 200 tables decodes it once, not 200 times), bounded
to :data:`PENDING_MESSAGES` messages, by the batch decoder the extraction reads with
(``gluon.source.shared_batches``: no Python object per change or value). Nothing is saved
or confirmed.

A member ships a transaction iff ``TablePosition.ships`` says so at its recorded position;
positions only grow along the stream, so counting from the recorded one is exact without
following each member's position through transactions that do not touch it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gluon.capture import changelog
from gluon.errors import SourceError
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.base import SlotBacklog
from gluon.repo import Repository
from gluon.repo.slot_positions import SlotPosition
from gluon.schema import TableSpec
from gluon.source import key_moves, pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.shared_shipping import TablePosition

if TYPE_CHECKING:
    from gluon.source.pgoutput_batch import Batch

PENDING_MESSAGES = 200_000
"""Status decodes at most this many messages of the shared slot; past them a member's count
is unknown, with the reason."""


@dataclass(frozen=True, slots=True)
class Member:
    """A table of the shared slot whose backlog is asked for."""

    table_key: str
    spec: TableSpec
    keys: Sequence[str]


@dataclass(slots=True)
class _Count:
    member: Member
    start: TablePosition
    leaves: frozenset[int]
    pending: int = 0
    oldest: dt.datetime | None = None
    failure: str | None = None
    names: list[str] = field(default_factory=list)
    dropped: bool = False
    """The table is gone from the source: ``leaves`` are what the slot's RELATION messages
    gave its name (``publication.leaves_named``)."""


def members_backlog(
    source: SourceDialect,
    repo: Repository,
    members: Sequence[Member],
    max_messages: int = PENDING_MESSAGES,
) -> dict[str, SlotBacklog]:
    """Each member's backlog in the shared slot (by table key), from one decoding.

    Raises:
        SourceError: the slot or the catalog cannot be read.
    """
    shared = shared_slot.shared_slot(source, repo)
    state = publication.slot_state(source, shared)
    flushed = publication.wal_flush_position(source)
    figures: dict[str, SlotBacklog] = {}
    counts: list[_Count] = []
    for member in members:
        row = repo.slot_positions.get(member.table_key)
        behind = None if row is None or row.held else max(flushed - row.position, 0)
        figures[member.table_key] = SlotBacklog(
            shared.slot, state.retained, behind, None, None, shared=True
        )
        reason = unknown_reason(state, row, shared.slot)
        position = shared_slot.position_of(repo, member.table_key)
        if reason is not None or position is None:
            figures[member.table_key] = with_unknown_reason(figures[member.table_key], reason or "")
            continue
        leaves = publication.present_table_leaves(source, member.spec.schema, member.spec.name)
        names = [column.name for column in member.spec.columns]
        counts.append(
            _Count(member, position, leaves or frozenset(), names=names, dropped=leaves is None)
        )
    if not counts:
        return figures
    source_now = source.run_query("source_clock")[0][0]
    read_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    budget = [max_messages]
    _count_batches(source, shared, flushed, counts, budget)
    complete = budget[0] > 0
    for count in counts:
        key = count.member.table_key
        oldest = None
        if count.oldest is not None:
            oldest = changelog.OldestChange(count.oldest, source_now, read_at)
        if count.failure is not None:
            figures[key] = with_unknown_reason(figures[key], count.failure)
        elif not complete:
            reason = (
                f"more than the first {max_messages:,} messages of the shared slot hold: not "
                "counted, that means decoding all the WAL the slot retains"
            )
            figures[key] = replace(figures[key], oldest=oldest, unknown_reason=reason)
        else:
            figures[key] = replace(figures[key], pending=count.pending, oldest=oldest)
    return figures


def _count_batches(
    source: SourceDialect,
    shared: publication.DatabaseSlot,
    upto: int,
    counts: list[_Count],
    budget: list[int],
) -> None:
    """Count each member's changes in the slot's stream up to ``upto``, decoded by the batch
    decoder as the extraction decodes it (``shared_batches``: Arrow, a framed batch of whole
    transactions at a time, column at a time), at most ``budget[0]`` messages (counted down
    in place). A member whose next extraction would stop gets the reason instead.

    Raises:
        SourceError: the slot cannot be read, or a message cannot be framed.
    """
    from gluon.source import shared_batches  # loads numpy and pyarrow

    relations: dict[int, pgoutput.Relation] = {}
    spec = counts[0].member.spec  # names the read in its errors
    chunks = shared_batches.slot_messages(source, shared, upto, spec)
    batches = shared_batches.framed_batches(chunks, relations, budget)
    with contextlib.closing(batches):
        while True:
            try:
                batch = next(batches, None)
            except pgoutput.ProtocolError as exc:  # framing: a malformed message
                raise SourceError(f"shared slot {shared.slot}: {exc}") from None
            if batch is None:
                return
            touched = _touched(batch)
            for count in counts:  # a report's 200 members: most touch no batch
                if count.dropped:  # the batch's RELATION messages came before its changes
                    spec = count.member.spec
                    count.leaves = publication.leaves_named(relations, spec.schema, spec.name)
                if count.failure is None and not touched.isdisjoint(count.leaves):
                    _count_batch(batch, relations, count)


def _touched(batch: Batch) -> set[int]:
    """The relations ``batch``'s changes and TRUNCATEs name."""
    import numpy as np

    touched = {int(oid) for oid in np.unique(batch.relation_ids)}
    for _, truncate in batch.truncates:
        touched.update(truncate.relations)
    return touched


def _count_batch(batch: Batch, relations: dict[int, pgoutput.Relation], count: _Count) -> None:
    from gluon.source.shared_batches import Piece

    member = count.member
    try:
        piece = Piece.of(batch, count.leaves, count.start, count.names, member.keys, relations)
    except (
        pgoutput.UnloggedValueError,
        shared_shipping.PartialTruncateError,
        key_moves.KeyNotUniqueError,
        pgoutput.ProtocolError,
    ) as exc:
        count.failure = f"its next extraction stops: {exc}"
        return
    changes = piece.changes
    count.pending += len(changes)
    if count.oldest is None and len(changes):
        committed = int(batch.commit_times[changes.transactions[0]])
        count.oldest = pgoutput.POSTGRES_EPOCH + dt.timedelta(microseconds=committed)


def unknown_reason(state: publication.SlotState, row: SlotPosition | None, slot: str) -> str | None:
    """Why a table's backlog in the shared slot cannot be counted now (None: it can)."""
    if row is None:
        return f"the table has no position in shared slot {slot}"
    if state.plugin is None:
        return f"shared replication slot {slot} is missing: changes were not captured since"
    if row.released_reason is not None:
        return row.released_reason
    if row.held:
        return "the table is joining the shared slot (its enable did not finish)"
    if state.reader is not None:
        return f"process {state.reader} is reading the slot (an extraction): run status again"
    return None


def with_unknown_reason(figures: SlotBacklog, reason: str) -> SlotBacklog:
    """``figures`` with the table's pending changes unknown, for ``reason``."""
    return replace(figures, pending=None, oldest=None, unknown_reason=reason)
