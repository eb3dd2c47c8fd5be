"""A table's replication slot outside extraction: what enabling checks before creating
one, and what status counts in it (``PgLogicalFeed.check_enable`` and ``pending_in``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace

from gluon.capture import changelog, objects
from gluon.errors import UnsupportedError
from gluon.extract.feeds.base import SlotBacklog
from gluon.naming import TableRef, slot_name
from gluon.schema import TableSpec
from gluon.source import logical
from gluon.source.base import SourceDialect

PENDING_PEEK_ROWS = 10_000
"""Decoded rows status reads from a slot at most: decoding costs in the source's CPU and
I/O, so the count stops there (the oldest pending change is usually in the first rows)."""
PENDING_PEEK_WAL_BYTES = 16 * 1024 * 1024
"""WAL status decodes at most past the slot's confirmed position: one huge transaction
would otherwise be decoded whole, however few rows are asked for."""


def check_logical_decoding(
    source: SourceDialect, spec: TableSpec, key_columns: Sequence[str], method: str
) -> None:
    """Refuse a table whose changes logical decoding cannot give with their key, or a
    server or user that cannot give it a slot.

    Raises:
        UnsupportedError: wal_level is not logical, no replication slot is free, the user
            may not use slots, or the table's replica identity does not log the key of an
            updated or deleted row (one line each, with the fix).
    """
    slot = slot_name(TableRef(spec.schema, spec.name), source.engine.url.database)
    rows = source.run_query(
        "logical_decoding_setup", {"schema": spec.schema, "table": spec.name, "slot": slot}
    )
    if not rows:
        return  # the table is gone: the offload says so
    wal_level, max_slots, used_slots, can_replicate, user = rows[0]
    if wal_level != "logical":
        raise UnsupportedError(
            f"{method} needs wal_level=logical (the server runs with {wal_level}): run "
            "ALTER SYSTEM SET wal_level = logical and restart PostgreSQL"
        )
    if not can_replicate:
        raise UnsupportedError(
            f"{method} needs a user allowed to use replication slots: {user} has neither "
            f"the REPLICATION privilege nor superuser: run ALTER ROLE {user} REPLICATION as "
            "a superuser"
        )
    if used_slots >= max_slots:
        raise UnsupportedError(
            f"{method} needs a free replication slot: all {max_slots} the server allows "
            "(max_replication_slots) are in use: drop one no consumer reads "
            "(SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "
            "...), or raise max_replication_slots (ALTER SYSTEM, then restart PostgreSQL)"
        )
    labels = logical.relation_labels(source, spec.schema, spec.name)
    if labels is None:
        return
    for relation in labels.relations:
        problem = logical.identity_problem(relation, key_columns)
        if problem is None:
            continue
        where = "" if relation is labels.root else f" (a partition of {labels.root.label})"
        raise UnsupportedError(
            f"{method} needs the key of every updated or deleted row of {relation.label}"
            f"{where} in the WAL: {problem}"
        )


def slot_backlog(
    source: SourceDialect, slot: objects.SourceObjectRef, schema: str, table: str
) -> SlotBacklog | None:
    """The slot of ``schema.table`` now (None: the slot is missing).

    The pending changes are counted by peeking at most :data:`PENDING_PEEK_ROWS` decoded
    rows and :data:`PENDING_PEEK_WAL_BYTES` of WAL, never while an extraction reads the slot
    (a slot has one reader at a time).

    Raises:
        SourceError: the slot cannot be read.
    """
    rows = source.run_query("slot_retained_wal", {"slot": slot.name})
    if not rows:
        return None
    retained, unconfirmed, reader = rows[0]
    figures = SlotBacklog(
        slot.name,
        None if retained is None else int(retained),
        None if unconfirmed is None else int(unconfirmed),
        None,
        None,
    )
    if reader is not None:
        reason = f"process {reader} is reading the slot (an extraction): run status again"
        return replace(figures, unknown_reason=reason)
    labels = logical.relation_labels(source, schema, table)
    if labels is None:
        reason = f"table {schema}.{table} is gone from the source"
        return replace(figures, unknown_reason=reason)
    # A change row of any partition, or a TRUNCATE naming the table (or a partition) first.
    prefixes = [f"table {r.label}{sep}" for r in labels.relations for sep in (": ", ", ")]
    params = {
        "slot": slot.name,
        "limit": PENDING_PEEK_ROWS,
        "budget": PENDING_PEEK_WAL_BYTES,
        "prefixes": prefixes,
    }
    complete, changes, first_commit, source_now = source.run_query("slot_pending_changes", params)[
        0
    ]
    oldest = None
    if first_commit is not None:
        committed = logical.commit_time(first_commit)
        if committed is None:
            reason = f"the slot printed no commit time ({first_commit})"
            return replace(figures, unknown_reason=reason)
        oldest = changelog.OldestChange(
            committed, source_now, dt.datetime.now(dt.UTC).replace(tzinfo=None)
        )
    if not complete:
        reason = (
            f"more than the first {PENDING_PEEK_ROWS:,} decoded rows or "
            f"{PENDING_PEEK_WAL_BYTES // (1024 * 1024)} MiB of WAL hold: not counted, that "
            "means decoding all the WAL the slot retains"
        )
        return replace(figures, oldest=oldest, unknown_reason=reason)
    return replace(figures, pending=int(changes), oldest=oldest)
