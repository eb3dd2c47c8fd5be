"""How far the lake is behind the source, per table: the figures operators watch first.

- **backlog**: changes captured in the source's changelog and not in the lake yet;
- **oldest pending change**: when the oldest of them was captured and how long it has
  waited (its ``gl_changed_at`` against the source's clock, read in one query through the
  changelog's key: cheap however long the changelog is);
- **last latency**: how long a committed change took to become visible in the lake: the
  last successful extraction that shipped changes, its finish minus the capture time of
  the oldest change it shipped (recorded by the extraction, on this host's clock).

PG_LOGICAL keeps no changelog: its backlog and oldest pending change come from its
replication slot (:func:`slot_backlog`: the first ``PENDING_PEEK_ROWS`` decoded rows,
peeked, so a count is exact only when the slot holds fewer), and its latency from the
commit time of the first transaction an extraction shipped. A method without either
(``ORA_ROWSCN``) cannot tell: its figures are None ("unknown"), never 0.
Reads the repository and the source; starts no engine. :func:`table_lag` is the entry
point for callers outside status (metrics).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from gluon import capture
from gluon import source as sources
from gluon.config import Settings
from gluon.errors import GluonError
from gluon.feeds import capture_objects
from gluon.methods.base import SourceObject
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState, Shipment
from gluon.source import logical
from gluon.source.base import SourceDialect

PENDING_PEEK_ROWS = 10_000
"""Decoded rows status reads from a slot at most: decoding costs in the source's CPU and
I/O, so the count stops there (the oldest pending change is usually in the first rows)."""
PENDING_PEEK_WAL_BYTES = 16 * 1024 * 1024
"""WAL status decodes at most past the slot's confirmed position: one huge transaction
would otherwise be decoded whole, however few rows are asked for."""


@dataclass(frozen=True, slots=True)
class SlotBacklog:
    """Where a PG_LOGICAL table's replication slot stands (None: unknown, see the reason)."""

    slot: str
    retained_bytes: int | None
    """WAL the slot makes the source keep (from where decoding restarts to now)."""
    unconfirmed_bytes: int | None
    """WAL written since the last position an extraction confirmed."""
    pending: int | None
    """Row changes of the table waiting in the slot (a key change counts once)."""
    oldest: capture.OldestChange | None
    """The first pending transaction of the table, by its commit time (None: none pending,
    or unknown)."""
    unknown_reason: str | None = None
    """Why ``pending`` and ``oldest`` are unknown."""


@dataclass(frozen=True, slots=True)
class TableLag:
    """How far one table's lake copy is behind its source (None: unknown, see the reasons)."""

    table_key: str
    measured_at: dt.datetime
    backlog: int | None
    """Changes captured in the source and not in the lake yet."""
    oldest_pending_at: dt.datetime | None
    """When the oldest pending change was captured (this host's clock; None: none pending,
    or unknown)."""
    oldest_pending_age_seconds: float | None
    """How long the oldest pending change has waited; 0 when nothing is pending."""
    pending_unknown_reason: str | None
    """Why the backlog and the age are unknown."""
    last_latency_seconds: float | None
    """Source commit to lake, for the oldest change of the last extraction that shipped any."""
    last_shipped_at: dt.datetime | None
    """When that extraction finished."""
    last_shipped_run_id: int | None
    latency_unknown_reason: str | None
    """Why the latency is unknown."""


def table_lag(
    settings: Settings,
    table_key: str,
    *,
    repo: Repository | None = None,
    source: SourceDialect | None = None,
) -> TableLag:
    """The lag of ``table_key`` now.

    Args:
        settings: where the repository and the source are.
        table_key: ``SCHEMA.TABLE`` as offloaded.
        repo: an open repository (default: open ``settings.repo_url``).
        source: an open source connection, to share one across tables (default: connect).
    """
    repo = repo or Repository(settings.repo_url)
    state = repo.incremental.get_state(table_key)
    if state is None:
        reason = "incremental update is not enabled"
        return _unknown(table_key, reason, reason)
    failure = None
    if source is None and (_changelog(state) or _slot(state)) is not None:
        if not settings.source_url:
            failure = "GLUON_SOURCE_URL is not set"
        else:
            try:
                connected = sources.connect(settings.source_url, settings.source_timeouts)
                connected.check_connection()
                source = connected
            except GluonError as exc:
                failure = str(exc)
    record = repo.get_table(table_key)
    if source is not None and record is not None and source.name != record.source_dialect:
        failure = (
            f"GLUON_SOURCE_URL is a {source.name} database; "
            f"the table came from {record.source_dialect}"
        )
    return measure_lag(repo, state, source, failure=failure)


def measure_lag(
    repo: Repository,
    state: IncrementalState,
    source: SourceDialect | None,
    *,
    failure: str | None = None,
    counted: int | None = None,
    slot: SlotBacklog | None = None,
) -> TableLag:
    """The lag of the table of ``state``, reading its changelog through ``source``.

    Args:
        repo: the repository.
        state: the table's incremental state.
        source: the source connection (None: unreachable, ``failure`` says why).
        failure: why the source cannot be read.
        counted: the backlog when the caller has just counted it (not counted again).
        slot: a PG_LOGICAL table's slot as the caller has just read it (not read again).
    """
    shipment = repo.incremental.last_shipment(state.table_key, state.enablement_id)
    changelog = _changelog(state)
    if changelog is None and _slot(state) is not None:
        return _slot_lag(repo, state, shipment, source, failure, slot)
    if changelog is None:
        cannot = f"{state.method} keeps no changelog: it cannot tell when a change was made"
        return _unknown(state.table_key, cannot, cannot)
    latency_reason = None if shipment else "no extraction has shipped a change yet"
    backlog: int | None = None
    oldest: capture.OldestChange | None = None
    reason = failure
    if source is not None and failure is None:
        objects = capture_objects(state)
        try:
            backlog = capture.count_changes(source, objects) if counted is None else counted
            oldest = capture.oldest_change(source, objects)
        except GluonError as exc:
            backlog, reason = None, str(exc)
    elif reason is None:
        reason = "the source is not reachable"
    waited = oldest.age.total_seconds() if oldest else 0.0  # nothing pending: no wait
    age = None if backlog is None else waited
    return TableLag(
        table_key=state.table_key,
        measured_at=now(),
        backlog=backlog,
        oldest_pending_at=oldest.captured_at if oldest and backlog is not None else None,
        oldest_pending_age_seconds=age,
        pending_unknown_reason=None if backlog is not None else reason,
        last_latency_seconds=shipment.latency.total_seconds() if shipment else None,
        last_shipped_at=shipment.finished_at if shipment else None,
        last_shipped_run_id=shipment.run_id if shipment else None,
        latency_unknown_reason=latency_reason,
    )


def slot_backlog(
    source: SourceDialect, slot: capture.SourceObjectRef, schema: str, table: str
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
        oldest = capture.OldestChange(
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


def _slot_lag(
    repo: Repository,
    state: IncrementalState,
    shipment: Shipment | None,
    source: SourceDialect | None,
    failure: str | None,
    figures: SlotBacklog | None,
) -> TableLag:
    """The lag of a PG_LOGICAL table, from its slot (read through ``source`` unless given)."""
    reason = failure
    slot = _slot(state)
    if figures is None and reason is None and source is not None and slot is not None:
        try:
            record = repo.offloaded_table(state.table_key)
            spec = record.spec()
            figures = slot_backlog(source, slot, spec.schema, spec.name)
            if figures is None:
                reason = f"replication slot {slot.name} is missing"
        except GluonError as exc:
            reason = str(exc)
    elif figures is None and reason is None:
        reason = "the source is not reachable"
    if figures is not None and figures.pending is None and figures.oldest is None:
        reason = figures.unknown_reason
    oldest = figures.oldest if figures is not None and reason is None else None
    if oldest is not None:
        age: float | None = oldest.age.total_seconds()
    else:
        # Nothing of the table in the decoded rows: none pending only when all were read.
        age = 0.0 if figures is not None and figures.pending is not None else None
    return TableLag(
        table_key=state.table_key,
        measured_at=now(),
        backlog=figures.pending if figures is not None else None,
        oldest_pending_at=oldest.captured_at if oldest else None,
        oldest_pending_age_seconds=age,
        pending_unknown_reason=None if age is not None else reason,
        last_latency_seconds=shipment.latency.total_seconds() if shipment else None,
        last_shipped_at=shipment.finished_at if shipment else None,
        last_shipped_run_id=shipment.run_id if shipment else None,
        latency_unknown_reason=None if shipment else "no extraction has shipped a change yet",
    )


def _slot(state: IncrementalState) -> capture.SourceObjectRef | None:
    return next(
        (item for item in capture_objects(state) if item.kind is SourceObject.REPLICATION_SLOT),
        None,
    )


def _changelog(state: IncrementalState) -> capture.SourceObjectRef | None:
    return next(
        (item for item in capture_objects(state) if item.kind is SourceObject.CHANGELOG_TABLE),
        None,
    )


def _unknown(table_key: str, pending_reason: str, latency_reason: str) -> TableLag:
    return TableLag(
        table_key=table_key,
        measured_at=now(),
        backlog=None,
        oldest_pending_at=None,
        oldest_pending_age_seconds=None,
        pending_unknown_reason=pending_reason,
        last_latency_seconds=None,
        last_shipped_at=None,
        last_shipped_run_id=None,
        latency_unknown_reason=latency_reason,
    )
