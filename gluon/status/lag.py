"""How far the lake is behind the source, per table: the figures operators watch first.

- **backlog**: changes captured in the source's changelog and not in the lake yet;
- **oldest pending change**: when the oldest of them was captured and how long it has
  waited (its ``gl_changed_at`` against the source's clock, read in one query through the
  changelog's key: cheap however long the changelog is);
- **last latency**: how long a committed change took to become visible in the lake: the
  last successful extraction that shipped changes, its finish minus the capture time of
  the oldest change it shipped (recorded by the extraction, on this host's clock).

Each method's feed counts its own backlog and oldest pending change
(``ChangeFeed.pending_in``): a feed with a replication slot peeks it (the first decoded
rows, so a count is exact only when the slot holds fewer, ``gluon.extract.feeds.slot``) and its
latency comes from the commit time of the first transaction an extraction shipped. A feed
that cannot count (``counts_pending`` False: it reads the table itself) makes the figures
None ("unknown"), never 0.
Reads the repository and the source; starts no engine. :func:`table_lag` is the entry
point for callers outside status (metrics).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import GluonError
from gluon.extract.feeds import FEEDS, Pending, SlotBacklog, feed_of
from gluon.methods import get_method
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState
from gluon.source.base import SourceDialect

__all__ = ["SlotBacklog", "TableLag", "measure_lag", "table_lag"]


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
    if source is None and FEEDS[get_method(state.method).change_reader].counts_pending:
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
    known: Pending | None = None,
) -> TableLag:
    """The lag of the table of ``state``, counted by its feed through ``source``.

    Args:
        repo: the repository.
        state: the table's incremental state.
        source: the source connection (None: unreachable, ``failure`` says why).
        failure: why the source cannot be read.
        counted: the backlog when the caller has just counted it (not counted again).
        slot: the table's slot as the caller has just read it (not read again).
        known: the pending changes and the oldest of them as the caller has just read them
            (a report reads every changelog's oldest change in one query; not read again).
    """
    shipment = repo.incremental.last_shipment(state.table_key, state.enablement_id)
    feed = feed_of(state)
    if not feed.counts_pending:
        cannot = f"{state.method} keeps no changelog: it cannot tell when a change was made"
        return _unknown(state.table_key, cannot, cannot)
    reason = failure
    pending = known
    if slot is not None:
        pending = Pending(slot.pending, slot.oldest, slot.unknown_reason)
    if pending is None and reason is None and source is not None:
        try:
            record = repo.offloaded_table(state.table_key)
            # A feed that counts with the repository (a member of a shared slot) first.
            pending = feed.pending_ahead(source, repo, [(record, state)]).get(state.table_key)
            if pending is None:
                pending = feed.pending_in(source, record, state, counted=counted)
        except GluonError as exc:
            reason = str(exc)
    elif pending is None and reason is None:
        reason = "the source is not reachable"
    if pending is not None and pending.count is None and pending.oldest is None:
        reason = pending.unknown_reason
    oldest = pending.oldest if pending is not None and reason is None else None
    if oldest is not None:
        age: float | None = oldest.age.total_seconds()
    else:
        # None found: none pending only when all were counted (nothing pending: no wait).
        age = 0.0 if pending is not None and pending.count is not None else None
    return TableLag(
        table_key=state.table_key,
        measured_at=now(),
        backlog=pending.count if pending is not None else None,
        oldest_pending_at=oldest.captured_at if oldest else None,
        oldest_pending_age_seconds=age,
        pending_unknown_reason=None if age is not None else reason,
        last_latency_seconds=shipment.latency.total_seconds() if shipment else None,
        last_shipped_at=shipment.finished_at if shipment else None,
        last_shipped_run_id=shipment.run_id if shipment else None,
        latency_unknown_reason=None if shipment else "no extraction has shipped a change yet",
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
