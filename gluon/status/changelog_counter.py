"""What a table's status reads from the source, through one connection for many tables
(``ChangelogCounter``): the changes waiting as the table's feed counts them (read ahead for a
report's tables in one query or decoding), the lag, nullable key columns and schema drift. A
source that cannot be read makes these unknown, remembered after the first failure.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

from gluon import source as sources
from gluon.capture import changelog as capture_changelog
from gluon.capture import existing
from gluon.capture import objects as source_objects
from gluon.config import SourceTimeouts
from gluon.errors import GluonError
from gluon.extract.feeds import FEEDS, Pending, capture_objects, feed_of
from gluon.extract.schema_changes import compare, source_changes
from gluon.methods import get_method
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.status.lag import TableLag, measure_lag
from gluon.status.model import Backlog, SchemaDrift


@dataclass
class ChangelogCounter:
    """Counts changelog rows, connecting to the source once (and remembering a failure)."""

    source_url: str | None
    timeouts: SourceTimeouts | None = None
    _source: SourceDialect | None = field(default=None, init=False)
    _failure: str | None = field(default=None, init=False)
    _counted: dict[str, int] = field(default_factory=dict, init=False)
    """Changelog rows per table key, counted ahead for many tables (``count_ahead``)."""
    _oldest: dict[str, capture_changelog.OldestChange | None] = field(
        default_factory=dict, init=False
    )
    """The oldest pending change per table key, read ahead with the counts (None: none)."""
    _trigger_states: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict, init=False)
    """The capture trigger's ``capture_trigger_state`` rows per table key, read ahead for
    the tables whose changelogs were counted ahead."""
    _described: dict[str, TableSpec | GluonError] = field(default_factory=dict, init=False)
    """Each table's source description now, per table key, read ahead (``describe_ahead``)."""
    _pending: dict[str, Pending] = field(default_factory=dict, init=False)
    """The changes waiting per table key, read ahead by feeds that count many tables in one
    read (``ChangeFeed.pending_ahead``: a shared slot decoded once for all its members)."""

    def _dialect(self) -> SourceDialect:
        if self._failure:
            raise GluonError(self._failure)
        if self._source is None:
            if not self.source_url:
                self._failure = "GLUON_SOURCE_URL is not set"
                raise GluonError(self._failure)
            try:
                self._source = sources.connect(self.source_url, self.timeouts)
                self._source.check_connection()
            except GluonError as exc:
                self._failure = str(exc)
                raise
        return self._source

    def count_ahead(self, repo: Repository, records: list[OffloadedTable]) -> None:
        """Count the changelogs of ``records`` in one query (a report over 200 tables made
        200 round trips); ``backlog`` then uses these counts. Nothing is counted ahead when
        the source cannot be read or one changelog cannot (each table then finds out)."""
        self._pending_ahead(repo, records)
        tables: list[str] = []
        changelogs: list[source_objects.SourceObjectRef] = []
        triggers: dict[str, tuple[TableSpec, source_objects.SourceObjectRef]] = {}
        for record in records:
            state = repo.incremental.get_state(record.table_key)
            if (
                state is None
                or not FEEDS[get_method(state.method).change_reader].counts_changelog_rows
            ):
                continue
            changelog = source_objects.find_object(
                capture_objects(state), SourceObject.CHANGELOG_TABLE
            )
            if changelog is not None:
                tables.append(record.table_key)
                changelogs.append(changelog)
                trigger = source_objects.find_object(
                    capture_objects(state), SourceObject.CHANGELOG_TRIGGER
                )
                if trigger is not None:
                    triggers[record.table_key] = (record.spec(), trigger)
        if not changelogs:
            return
        try:
            source = self._dialect()
            if any(record.source_dialect != source.name for record in records):
                return
            counts = capture_changelog.count_changes_of(source, changelogs)
        except GluonError:
            return
        self._counted.update(zip(tables, counts, strict=True))
        with contextlib.suppress(GluonError):  # each table reads its own trigger's state
            states = existing.capture_trigger_states_of(source, list(triggers.values()))
            self._trigger_states.update(zip(triggers, states, strict=True))
        try:
            oldest = capture_changelog.oldest_changes_of(source, changelogs)
        except GluonError:
            return  # each table reads its own oldest change (and finds out which fails)
        self._oldest.update(zip(tables, oldest, strict=True))

    def _pending_ahead(self, repo: Repository, records: list[OffloadedTable]) -> None:
        """Read ahead what feeds count for many tables at once (``ChangeFeed.pending_ahead``);
        a failure is each such table's reason (reading again per table would fail as well)."""
        by_feed: dict[type[Any], list[tuple[OffloadedTable, IncrementalState]]] = {}
        for record in records:
            state = repo.incremental.get_state(record.table_key)
            if state is not None:
                feed = feed_of(state)
                by_feed.setdefault(feed, []).append((record, state))
        for feed, tables in by_feed.items():
            try:
                source = self._dialect()
                if any(record.source_dialect != source.name for record, _ in tables):
                    continue
                self._pending.update(feed.pending_ahead(source, repo, tables))
            except GluonError as exc:
                failed = Pending(None, None, str(exc))
                self._pending.update((record.table_key, failed) for record, _ in tables)
                if self._failure:
                    return

    def describe_ahead(self, records: list[OffloadedTable]) -> None:
        """Describe the source tables of ``records`` in one catalog query a database (a
        report over 200 tables made four a table); ``schema_drift`` then compares these.
        Nothing is described ahead when the source cannot be read."""
        if not records:
            return
        try:
            source = self._dialect()
        except GluonError:
            return  # each table finds out
        mine = [record for record in records if record.source_dialect == source.name]
        refs = [TableRef(record.source_schema, record.source_table) for record in mine]
        described = source.describe_tables(refs)
        self._described.update(
            (record.table_key, described[ref]) for record, ref in zip(mine, refs, strict=True)
        )

    def backlog(
        self, record: OffloadedTable, state: IncrementalState, repo: Repository | None = None
    ) -> Backlog:
        """The changes waiting in the source, as the table's feed counts them (``repo``: for
        a feed that counts with it, when not read ahead)."""
        feed = feed_of(state)
        name = feed.held_in(capture_objects(state))
        if not feed.counts_pending:
            return Backlog(None, None, f"{state.method} keeps no changelog")
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return Backlog(
                    name,
                    None,
                    f"GLUON_SOURCE_URL is a {source.name} database; "
                    f"the table came from {record.source_dialect}",
                )
            states = self._trigger_states.get(record.table_key)
            ahead = self._pending.get(record.table_key)
            if ahead is None and repo is not None:
                ahead = feed.pending_ahead(source, repo, [(record, state)]).get(record.table_key)
            if ahead is not None:
                return Backlog(name, ahead.count, ahead.unknown_reason, ahead.problems, ahead.slot)
            pending = feed.pending_in(
                source,
                record,
                state,
                counted=self._counted.get(record.table_key),
                oldest=False,
                check_capture=states is None,
            )
            if states is not None:
                # The changelog feed's capture check (its changelog was just counted), with
                # the trigger's state read ahead for every table.
                problems = existing.capture_problems(
                    source,
                    record.spec(),
                    capture_objects(state),
                    changelog_read=True,
                    trigger_states=states,
                )
                pending = replace(pending, problems=tuple(problems))
        except GluonError as exc:
            return Backlog(name, None, str(exc))
        return Backlog(name, pending.count, pending.unknown_reason, pending.problems, pending.slot)

    def lag(self, repo: Repository, state: IncrementalState, backlog: Backlog) -> TableLag:
        """How far the lake is behind (the backlog just counted is not counted again)."""
        if backlog.slot is not None:
            return measure_lag(repo, state, None, slot=backlog.slot)
        if backlog.rows is None:
            return measure_lag(repo, state, None, failure=backlog.reason)
        if state.table_key in self._oldest:
            known = Pending(backlog.rows, self._oldest[state.table_key])
            return measure_lag(repo, state, self._source, known=known)
        return measure_lag(repo, state, self._source, counted=backlog.rows)

    def captures_by_statement(self, record: OffloadedTable, state: IncrementalState) -> bool:
        """Whether the table's changelog trigger is statement triggers, its INSERT and DELETE
        ones beside it, as the source has them (a table enabled before gluon captured by
        statement keeps its row trigger until its capture objects are re-created): seen in
        the trigger states (read ahead for a report); False when the source cannot be read."""
        trigger = source_objects.find_object(capture_objects(state), SourceObject.CHANGELOG_TRIGGER)
        if trigger is None:
            return False
        try:
            source = self._dialect()
            if source.name != record.source_dialect or not source.captures_by_statement:
                return False
            states = self._trigger_states.get(record.table_key)
            if states is None:
                states = existing.capture_trigger_states_of(source, [(record.spec(), trigger)])[0]
            siblings = source_objects.statement_trigger_names(source, trigger).values()
            return any(row[0] in siblings and row[1] is not None for row in states)
        except GluonError:
            return False

    def nullable_keys(self, record: OffloadedTable, state: IncrementalState) -> tuple[str, ...]:
        """The table's key columns that allow NULL (empty: none, or the source is unreadable)."""
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return ()
            return source.nullable_key_columns(record.spec(), state.key_columns)
        except GluonError:
            return ()  # the backlog line already says why the source cannot be read

    def schema_drift(self, record: OffloadedTable) -> SchemaDrift | None:
        """How the source's columns differ from the recorded ones (None: same, or unknown)."""
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return None
            described = self._described.get(record.table_key)
            if isinstance(described, GluonError):
                return None  # as below: the backlog line says why the source cannot be read
            if described is None:
                changes = source_changes(source, record)
            else:
                changes = compare(record.columns, described.columns)
        except GluonError:
            return None  # the backlog line already says why the source cannot be read
        if not changes.changed:
            return None
        return SchemaDrift(changes.summary(), refused=bool(changes.refused))
