"""A table joining and leaving its database's shared PG_LOGICAL slot, with its position in
the repository (``gluon.source.publication``, ``gluon.repo.slot_positions``; issue 33 item 1).
What enable (``PgLogicalFeed.capturing``), disable (``PgLogicalFeed.release``) and the
shared slot's feed (``shared_reader``) call.

Every step may be killed and run again:

- joining holds the table at position 0 in the repository before anything else, so no
  other table's extraction confirms the slot while it joins; publishing is idempotent and
  its wait is taken again; the offload snapshot is taken again (the copy is redone); the
  table's start position and snapshot are saved last;
- leaving forgets the table's position first (the slot may move on without it), then takes
  it out of the publication (until then its changes are decoded and ignored), and drops the
  slot and publication once neither the publication nor the repository has a table of it;
- a feed saves a table's position after the lake holds what it shipped, then confirms the
  slot to the least position (:func:`confirm_slot`): a kill between re-reads transactions
  the lake holds, which the already-shipped check leaves out, as for the per-table slot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from gluon.faults import fault_point
from gluon.repo import Repository
from gluon.schema import TableSpec
from gluon.source import publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.publication import DatabaseSlot
from gluon.source.shared_shipping import ConfirmPlan, OffloadSnapshot, TablePosition

log = logging.getLogger(__name__)

OWN_SLOT_OPTION = "--incremental-pg-logical-slot=table (a slot of its own)"
"""How a user gives a table that cannot be a member a slot of its own."""


def generated_problem(source: SourceDialect, spec: TableSpec) -> str | None:
    """The table's stored generated columns, whose values pgoutput does not send (the lake
    would hold NULL for them; None: it has none)."""
    generated = publication.generated_columns(source, spec.schema, spec.name)
    if not generated:
        return None
    return (
        f"{spec.schema}.{spec.name} has generated columns ({', '.join(generated)}) whose "
        "values the shared slot's pgoutput does not send"
    )


def member_problem(source: SourceDialect, repo: Repository, spec: TableSpec) -> str | None:
    """Why the table cannot be a member of its database's shared slot (None: it can): a
    value pgoutput does not send, or a user who may not publish it (a slot of its own needs
    only REPLICATION, which ``slot.check_logical_decoding`` checked). Its replica identity
    was judged there too, for both scopes (``logical.identity_problem``): one that logs the
    key is one a publication can use, so publishing never breaks the application's UPDATEs."""
    return generated_problem(source, spec) or publication.publishing_problem(
        source, shared_slot(source, repo), spec.schema, spec.name
    )


def shared_slot(source: SourceDialect, repo: Repository) -> DatabaseSlot:
    """The shared slot of ``source``'s database for this installation."""
    return DatabaseSlot.of(source, repo.installation_id)


@contextmanager
def joining(
    source: SourceDialect,
    repo: Repository,
    table_key: str,
    enablement_id: int | None,
    schema: str,
    table: str,
) -> Iterator[OffloadSnapshot]:
    """Join ``schema.table`` to the shared slot; inside, every Arrow read of ``source`` sees
    the offload snapshot (yielded): the table ships exactly what it does not see. Its start
    position and snapshot are saved as soon as the snapshot is taken, before the copy: a
    copy that finishes always has its snapshot recorded, so an enable killed after it goes
    on without joining again (:func:`joined`); a failed copy leaves the table holding the
    slot at its start until the enable runs again (a new copy, a new snapshot) or is undone.

    Raises:
        StateError: a transaction older than the table's publication keeps running.
        SourceError: the server refused (no free slot, no REPLICATION privilege).
    """
    shared = shared_slot(source, repo)
    repo.slot_positions.hold(table_key, enablement_id, shared.slot)
    publication.ensure_database_slot(source, shared)
    start = publication.publish_table(source, shared, schema, table)
    fault_point("capture.after_publish_table")
    with publication.offload_snapshot(source) as snapshot:
        repo.slot_positions.save(table_key, start, snapshot.text(), snapshot.boundary)
        log.info("%s joined shared slot %s at %s", table_key, shared.slot, start)
        yield snapshot


def joined(repo: Repository, table_key: str) -> bool:
    """``table_key`` has its start position and snapshot recorded (not held, not released)."""
    row = repo.slot_positions.get(table_key)
    return row is not None and not row.held and row.released_reason is None


def leave(source: SourceDialect, repo: Repository, table_key: str, schema: str, table: str) -> None:
    """Take ``schema.table`` out of the shared slot; drop the slot and publication when it
    was the last.

    Raises:
        SourceError: the server refused (the slot is being read).
    """
    shared = shared_slot(source, repo)
    repo.slot_positions.forget(table_key)
    publication.unpublish_table(source, shared, schema, table)
    fault_point("capture.after_unpublish_table")
    if not publication.published_tables(source, shared) and not repo.slot_positions.of_slot(
        shared.slot
    ):
        log.info("dropping shared slot %s and its publication: no table uses them", shared.slot)
        publication.drop_database_slot(source, shared)


def rejoin(source: SourceDialect, repo: Repository, schema: str, table: str) -> None:
    """Publish ``schema.table`` again after its place was dropped outside gluon (the
    repair). Its position stays: the slot did not decode its changes meanwhile, which the
    repair's message says (a resync brings the lake back in step).

    Raises:
        StateError: a transaction older than the publishing still runs.
        SourceError: the server refused.
    """
    shared = shared_slot(source, repo)
    publication.ensure_database_slot(source, shared)
    publication.publish_table(source, shared, schema, table)
    log.info("%s.%s published again in shared slot %s", schema, table, shared.slot)


def position_of(repo: Repository, table_key: str) -> TablePosition | None:
    """Where ``table_key`` stands in its shared slot (None: not in one, or still joining)."""
    row = repo.slot_positions.get(table_key)
    if row is None or row.held:
        return None
    snapshot = None
    if row.offload_snapshot is not None and row.snapshot_boundary is not None:
        snapshot = OffloadSnapshot.parse(row.offload_snapshot, row.snapshot_boundary)
    return TablePosition(row.position, snapshot)


def save_position(repo: Repository, table_key: str, position: TablePosition) -> None:
    """Record ``table_key``'s position once the lake holds what it shipped before it."""
    snapshot = position.snapshot
    repo.slot_positions.save(
        table_key,
        position.position,
        None if snapshot is None else snapshot.text(),
        None if snapshot is None else snapshot.boundary,
    )


def left_out_reason(table_key: str, slot: str, behind: int, bound: int) -> str:
    """Why ``table_key`` was left out of ``slot``, and the way back: its changes since are
    gone from the slot, so only a new copy catches it up (disable, then offload again)."""
    return (
        f"{table_key} was left out of shared slot {slot}: it was {behind / 2**20:.1f} MiB "
        f"behind, past GLUON_PG_LOGICAL_MAX_RETAINED_WAL ({bound / 2**20:g} MiB), and the "
        f"slot no longer keeps its changes; rebuild it: run offload -t {table_key} -x "
        f"--incremental-updates-disabled, then offload -t {table_key} -x --reset-backend-table "
        "--incremental-updates-enabled --incremental-extraction-method=PG_LOGICAL "
        "--incremental-pg-logical-slot=database"
    )


def confirm_slot(
    source: SourceDialect,
    repo: Repository,
    max_retained_wal: int | None,
    shipping: str | None = None,
) -> ConfirmPlan:
    """Confirm the shared slot to the least position over its tables not released; a table
    lagging the WAL by more than ``max_retained_wal`` bytes is released first (recorded,
    with a warning: it needs a re-offload), except ``shipping``, the table whose extraction
    confirms (it is catching up).

    Raises:
        SourceError: the slot cannot be advanced.
    """
    shared = shared_slot(source, repo)
    rows = [row for row in repo.slot_positions.of_slot(shared.slot) if row.released_reason is None]
    flushed = publication.wal_flush_position(source)
    plan = shared_shipping.confirm_plan(
        {row.table_key: row.position for row in rows}, flushed, max_retained_wal, shipping
    )
    for table_key, behind in plan.released.items():
        reason = left_out_reason(table_key, shared.slot, behind, max_retained_wal or 0)
        log.warning("%s: %s", table_key, reason)
        repo.slot_positions.release(table_key, reason)
    if plan.target and _moves(source, shared, plan.target):  # None/HELD: the slot stays
        publication.confirm(source, shared, plan.target)
    return plan


def _moves(source: SourceDialect, shared: DatabaseSlot, target: int) -> bool:
    """Whether confirming the slot to ``target`` moves it: an advance decodes the WAL again
    from the slot's restart point even to where the slot stands, which an extraction that
    shipped nothing, or whose table another one holds back, need not pay (issue 33 item 2).
    A missing slot is not advanced either (there is nothing to advance)."""
    confirmed = publication.slot_state(source, shared).confirmed
    return confirmed is not None and target > confirmed
