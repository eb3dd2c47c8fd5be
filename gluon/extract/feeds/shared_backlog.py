"""What status counts of the tables of a database's shared PG_LOGICAL slot (issue 33 item 1):
each member's changes waiting and the oldest of them, from one decoding of the slot for all
the members asked about (a report over 200 tables decodes it once, not 200 times), bounded
to :data:`PENDING_MESSAGES` messages. Nothing is saved or confirmed.

A member ships a transaction iff ``TablePosition.ships`` says so at its recorded position;
positions only grow along the stream, so counting from the recorded one is exact without
following each member's position through transactions that do not touch it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from gluon.capture import changelog
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.base import SlotBacklog
from gluon.repo import Repository
from gluon.repo.slot_positions import SlotPosition
from gluon.schema import TableSpec
from gluon.source import pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.shared_shipping import TablePosition

PENDING_MESSAGES = 200_000
"""Status decodes at most this many messages of the shared slot (a few seconds in Python);
past them a member's count is unknown, with the reason."""


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
        leaves = publication.table_leaves(source, member.spec.schema, member.spec.name)
        names = [column.name for column in member.spec.columns]
        counts.append(_Count(member, position, leaves, names=names))
    if not counts:
        return figures
    source_now = source.run_query("source_clock")[0][0]
    read_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    budget = [max_messages]
    relations: dict[int, pgoutput.Relation] = {}
    with contextlib.closing(publication.stream_database_slot(source, shared, flushed)) as chunks:
        messages = _within((message for chunk in chunks for message in chunk), budget)
        for transaction in pgoutput.transactions(messages, relations):
            _count_transaction(transaction, relations, counts)
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


def _count_transaction(
    transaction: pgoutput.Transaction,
    relations: dict[int, pgoutput.Relation],
    counts: list[_Count],
) -> None:
    touched: set[int] = set()
    for change in transaction.changes:
        if isinstance(change, pgoutput.Truncate):
            touched.update(change.relations)
        else:
            touched.add(change.relation)
    for count in counts:
        if count.failure is not None or not count.leaves & touched:
            continue
        try:
            shipped, _ = shared_shipping.table_changes(
                (transaction,),
                relations,
                count.leaves,
                count.start,
                count.names,
                count.member.keys,
            )
        except (
            pgoutput.UnloggedValueError,
            shared_shipping.PartialTruncateError,
            pgoutput.ProtocolError,
        ) as exc:
            count.failure = f"its next extraction stops: {exc}"
            continue
        for one in shipped:
            count.pending += len(one.ops)
            if count.oldest is None:
                count.oldest = one.committed_at


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


def _within(messages: Iterable[bytes], budget: list[int]) -> Iterator[bytes]:
    """``messages`` until ``budget[0]`` of them passed (counted down in place)."""
    for message in messages:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        yield message
