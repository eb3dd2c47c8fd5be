"""Repository records of incremental update: per-table state and extraction runs."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import RecordMapping, json_tuple, now, upsert
from gluon.states import ExtractionStatus, IncrementalStatus

ENABLING = IncrementalStatus.ENABLING
ENABLED = IncrementalStatus.ENABLED
DISABLING = IncrementalStatus.DISABLING

# Extraction run statuses.
EXTRACTION_RUNNING = ExtractionStatus.RUNNING
EXTRACTION_SUCCESS = ExtractionStatus.SUCCESS
EXTRACTION_FAILED = ExtractionStatus.FAILED
EXTRACTION_INTERRUPTED = ExtractionStatus.INTERRUPTED


@dataclass(frozen=True, slots=True)
class SourceObjectRecord:
    """A source object gluon created (kind from ``gluon.methods.base.SourceObject``)."""

    kind: str
    schema: str
    name: str
    object_type: str


@dataclass(frozen=True, slots=True)
class IncrementalState:
    """Incremental update of one table: method, objects and change-ingestion state."""

    table_key: str
    method: str
    status: str
    key_columns: tuple[str, ...]
    source_objects: tuple[SourceObjectRecord, ...]
    delta_table: str
    delta_path: str
    view_generation: int = 0
    active_partition: int = 0
    view_min_partition: int = 0
    """The lowest control partition the delta views read (older ones are compacted)."""
    requested_partition: int | None = None
    requested_at: dt.datetime | None = None
    acknowledged_partition: int | None = None
    acknowledged_at: dt.datetime | None = None
    last_scn: int | None = None
    enabled_at: dt.datetime | None = None
    shipped_seq: int | None = None
    """The highest ``gl_seq`` sent to the lake (recorded before its Delta commit)."""
    enablement_id: int | None = None
    """This enabling of incremental update (runs and kept objects carry it)."""
    merge_mode: str | None = "DEFERRED"
    """``DEFERRED`` (delta table, views, compaction) or ``IMMEDIATE`` (each batch merged into
    the base table): ``gluon.states.MergeMode``; None (a row no revision 0011 default
    reached) is DEFERRED."""
    truncate_partition: int | None = None
    """The highest control partition an extraction shipped a TRUNCATE (``gl_op`` 'T') to,
    recorded before its Delta commit (so it may name one whose commit never happened)."""

    def with_changes(self, **changes: Any) -> IncrementalState:
        return replace(self, **changes)

    @property
    def diverting(self) -> bool:
        """A compaction requested a control partition no extraction has acknowledged yet."""
        return (
            self.requested_partition is not None
            and self.acknowledged_partition != self.requested_partition
        )

    def truncates_from(self, low: int) -> bool:
        """Whether control partitions from ``low`` may hold a TRUNCATE: only then do the
        views and compactions reading them render the SELECT that applies one."""
        return self.truncate_partition is not None and self.truncate_partition >= low

    @property
    def ingestion_partition(self) -> int | None:
        """Where the next extraction writes: the requested partition while diverting."""
        return self.requested_partition if self.diverting else self.active_partition


@dataclass(frozen=True, slots=True)
class ExtractionRun:
    id: int
    table_key: str
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    rows_read: int | None
    rows_written: int | None
    min_seq: int | None
    max_seq: int | None
    control_partition: int | None
    scn: int | None
    message: str | None
    enablement_id: int | None = None
    source_rows: int | None = None
    """Rows of the source table at the run's end, where the capture cannot see a TRUNCATE
    (``gluon.extract.truncation``; None: not counted)."""
    lake_rows: int | None = None
    """The fewest rows the lake can show once the changes waiting then are applied."""


STATES = RecordMapping(
    IncrementalState,
    key_columns=json_tuple("key_columns_json"),
    source_objects=json_tuple("source_objects_json", of=SourceObjectRecord),
)
"""Rows of ``incremental_state`` <-> :class:`IncrementalState`."""
EXTRACTION_RUNS = RecordMapping(ExtractionRun)
"""Rows of ``extraction_runs`` -> :class:`ExtractionRun`."""


def of_enablement(table: sa.Table, enablement_id: int | None) -> list[sa.ColumnElement[bool]]:
    """The condition selecting rows of one enablement (none: every row)."""
    return [] if enablement_id is None else [table.c.enablement_id == enablement_id]


def latest_runs(
    table: sa.Table, table_key: str, limit: int, enablement_id: int | None
) -> sa.Select[Any]:
    """The newest ``limit`` rows of a run table for ``table_key`` (of one enablement if given)."""
    return (
        sa.select(table)
        .where(table.c.table_key == table_key, *of_enablement(table, enablement_id))
        .order_by(table.c.id.desc())
        .limit(limit)
    )


@dataclass(frozen=True, slots=True)
class ExtractionTotals:
    """Every extraction run of one table, summed up."""

    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: int = 0
    changes_shipped: int = 0
    """Changes the runs took from the source (their ``rows_read``): a failed run's too, for
    the batches it confirmed before it failed."""
    max_seq: int | None = None
    """The highest ``gl_seq`` a run recorded (None: no run recorded one)."""
    last_success_at: dt.datetime | None = None
    first_started_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class EmptyChecks:
    """The service's checks of one table that found nothing to extract, since the last
    time it wrote them (``record_empty_checks``)."""

    table_key: str
    enablement_id: int | None
    checked_at: dt.datetime
    count: int


@dataclass(frozen=True, slots=True)
class Shipment:
    """The latest successful extraction that shipped changes with a known capture time."""

    run_id: int
    finished_at: dt.datetime
    """When its changes were in the lake (its Delta commits precede this)."""
    oldest_change_at: dt.datetime
    """When the oldest change it shipped was captured (this host's clock)."""

    @property
    def latency(self) -> dt.timedelta:
        """How long that change took from its commit in the source to the lake."""
        return max(self.finished_at - self.oldest_change_at, dt.timedelta(0))


class IncrementalRepository:
    """Incremental-update records, over the repository's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def get_state(self, table_key: str) -> IncrementalState | None:
        table = models.incremental_state
        with self.engine.connect() as connection:
            row = (
                connection.execute(sa.select(table).where(table.c.table_key == table_key))
                .mappings()
                .first()
            )
        return STATES.from_row(row) if row else None

    @repository_write("save_state")
    def save_state(self, state: IncrementalState) -> None:
        row = {**STATES.to_row(state), "updated_at": now()}
        upsert(self.engine, models.incremental_state, state.table_key, row)

    @repository_write("update_state")
    def update_state(self, table_key: str, **fields: Any) -> None:
        """Change only ``fields`` of a table's state (concurrent runs own different fields)."""
        allowed = {f.name for f in models.incremental_state.columns} - {"table_key"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"not incremental_state columns: {sorted(unknown)}")
        table = models.incremental_state
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.table_key == table_key)
                .values(**fields, updated_at=now())
            )

    @repository_write("record_shipping")
    def record_shipping(self, table_key: str, highest_seq: int) -> None:
        """Raise the table's ``shipped_seq`` to ``highest_seq`` (never lowers it)."""
        self._raise_to(table_key, "shipped_seq", highest_seq)

    @repository_write("record_truncate")
    def record_truncate(self, table_key: str, partition: int) -> None:
        """Raise the table's ``truncate_partition`` to ``partition`` (never lowers it): a
        batch holding a TRUNCATE is about to be committed there."""
        self._raise_to(table_key, "truncate_partition", partition)

    def _raise_to(self, table_key: str, column_name: str, value: int) -> None:
        """Set the state's ``column_name`` to ``value`` where it is NULL or lower, in one
        statement (a concurrent writer's higher value is never lowered)."""
        table = models.incremental_state
        column = table.c[column_name]
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.table_key == table_key, sa.or_(column.is_(None), column < value))
                .values({column_name: value, "updated_at": now()})
            )

    @repository_write("delete_state")
    def delete_state(self, table_key: str) -> None:
        table = models.incremental_state
        with self.engine.begin() as connection:
            connection.execute(table.delete().where(table.c.table_key == table_key))

    # -- enablements -----------------------------------------------------------------------

    @repository_write("new_enablement")
    def new_enablement(self, table_key: str, method: str) -> int:
        """Record the start of an enabling; its id scopes everything it does."""
        table = models.enablements
        with self.engine.begin() as connection:
            key = (
                connection.execute(
                    table.insert().values(table_key=table_key, method=method, started_at=now())
                )
            ).inserted_primary_key
        assert key is not None
        return int(key[0])

    @repository_write("enablement_finished")
    def enablement_finished(self, enablement_id: int | None, **values: dt.datetime) -> None:
        """Set ``enabled_at`` or ``disabled_at`` of an enablement."""
        if enablement_id is None:
            return
        table = models.enablements
        with self.engine.begin() as connection:
            connection.execute(table.update().where(table.c.id == enablement_id).values(**values))

    def enablements(self, table_key: str) -> list[dict[str, Any]]:
        """Every enablement of ``table_key``, newest first."""
        table = models.enablements
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(table).where(table.c.table_key == table_key).order_by(table.c.id.desc())
            ).mappings()
            return [dict(row) for row in rows]

    # -- extraction runs -------------------------------------------------------------------

    @repository_write("start_extraction")
    def start_extraction(self, table_key: str, enablement_id: int | None = None) -> int:
        """Record a new run; runs still 'running' were cut short (the caller holds the lock)."""
        table = models.extraction_runs
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.table_key == table_key, table.c.status == ExtractionStatus.RUNNING)
                .values(status=ExtractionStatus.INTERRUPTED)
            )
            result = connection.execute(
                table.insert().values(
                    table_key=table_key,
                    status=ExtractionStatus.RUNNING,
                    started_at=now(),
                    enablement_id=enablement_id,
                )
            )
            key = result.inserted_primary_key
            assert key is not None
            return int(key[0])

    @repository_write("finish_extraction")
    def finish_extraction(self, run_id: int, *, status: str, **values: Any) -> None:
        table = models.extraction_runs
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.id == run_id)
                .values(status=status, finished_at=now(), **values)
            )

    @repository_write("discard_empty_extraction")
    def discard_empty_extraction(self, table_key: str, run_id: int) -> bool:
        """Delete run ``run_id``, which shipped nothing, when no run before it awaits
        confirmation (``unconfirmed_extractions``: the runs after the last success would
        otherwise lose the success that confirms them). Returns whether it was deleted.
        """
        table = models.extraction_runs
        with self.engine.begin() as connection:
            last_success = _last_success(connection, table_key)
            others = connection.execute(
                sa.select(sa.func.count()).where(
                    table.c.table_key == table_key,
                    table.c.id > (last_success or 0),
                    table.c.id != run_id,
                )
            ).scalar_one()
            if others:
                return False
            connection.execute(table.delete().where(table.c.id == run_id))
            return True

    @repository_write("record_empty_checks")
    def record_empty_checks(self, checks: list[EmptyChecks]) -> None:
        """Add the service's checks that found nothing (one transaction for all tables)."""
        table = models.service_checks
        keys = [check.table_key for check in checks]
        with self.engine.begin() as connection:
            known = {
                row.table_key: row
                for row in connection.execute(sa.select(table).where(table.c.table_key.in_(keys)))
            }
            for check in checks:
                before = known.get(check.table_key)
                values = {
                    "enablement_id": check.enablement_id,
                    "checked_at": check.checked_at,
                    "empty_checks": check.count,
                }
                if before is None:
                    connection.execute(table.insert().values(table_key=check.table_key, **values))
                    continue
                if before.enablement_id == check.enablement_id:
                    values["empty_checks"] += before.empty_checks
                connection.execute(
                    table.update().where(table.c.table_key == check.table_key).values(**values)
                )

    @repository_write("count_batch")
    def count_batch(
        self,
        run_id: int,
        *,
        rows_read: int,
        rows_written: int,
        min_seq: int | None,
        max_seq: int | None,
        counted_seqs: list[tuple[int, int]] | None,
    ) -> None:
        """Record the run's counts so far and the ``gl_seq`` ranges of the batch it just
        counted (``gluon.extract.counting``), in one statement, before the source lets go of
        the batch: a run killed later keeps them."""
        table = models.extraction_runs
        ranges = None if counted_seqs is None else json.dumps([list(r) for r in counted_seqs])
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.id == run_id)
                .values(
                    rows_read=rows_read,
                    rows_written=rows_written,
                    min_seq=min_seq,
                    max_seq=max_seq,
                    counted_seqs=ranges,
                )
            )

    def counted_unconfirmed(self, table_key: str, run_id: int) -> list[tuple[int, int]]:
        """The ``gl_seq`` ranges the last batch of each run after the last success (other
        than ``run_id``) counted, ascending: those changes may still wait in the source
        (``unconfirmed_extractions``), and a run reading them again must not count them."""
        table = models.extraction_runs
        with self.engine.connect() as connection:
            last_success = _last_success(connection, table_key)
            texts = connection.execute(
                sa.select(table.c.counted_seqs).where(
                    table.c.table_key == table_key,
                    table.c.id > (last_success or 0),
                    table.c.id != run_id,
                    table.c.counted_seqs.is_not(None),
                )
            ).scalars()
            ranges = [(int(low), int(high)) for text in texts for low, high in json.loads(text)]
        return sorted(ranges)

    def unconfirmed_extractions(self, table_key: str) -> set[int]:
        """Runs whose shipped changes may still be in the changelog.

        A run that succeeded deleted every change it shipped, and read the
        changelog until it was empty, so the leftovers of every run before it
        are gone too. Only the runs after the last success (failed, interrupted
        or the running one) may have committed changes to the lake without
        deleting them from the changelog.
        """
        table = models.extraction_runs
        with self.engine.connect() as connection:
            last_success = _last_success(connection, table_key)
            rows = connection.execute(
                sa.select(table.c.id).where(
                    table.c.table_key == table_key, table.c.id > (last_success or 0)
                )
            )
            return {int(row[0]) for row in rows}

    def extraction_runs(
        self, table_key: str, limit: int = 50, *, enablement_id: int | None = None
    ) -> list[ExtractionRun]:
        """The latest runs of ``table_key``; of one enablement when ``enablement_id`` is given."""
        statement = latest_runs(models.extraction_runs, table_key, limit, enablement_id)
        with self.engine.connect() as connection:
            rows = connection.execute(statement).mappings()
            return [EXTRACTION_RUNS.from_row(row) for row in rows]

    def last_shipment(self, table_key: str, enablement_id: int | None = None) -> Shipment | None:
        """The latest successful run of ``table_key`` that recorded when its oldest change
        was captured (None: none has; the method cannot tell, or nothing was shipped yet)."""
        runs = models.extraction_runs
        query = (
            sa.select(runs.c.id, runs.c.finished_at, runs.c.oldest_change_at)
            .where(
                runs.c.table_key == table_key,
                runs.c.status == EXTRACTION_SUCCESS,
                runs.c.oldest_change_at.is_not(None),
                *of_enablement(runs, enablement_id),
            )
            .order_by(runs.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).first()
        if row is None or row[1] is None:
            return None
        return Shipment(int(row[0]), row[1], row[2])

    def extraction_totals(
        self, table_key: str, enablement_id: int | None = None
    ) -> ExtractionTotals:
        """Counts by status, rows shipped, and the latest successful finish of ``table_key``."""
        runs = models.extraction_runs
        is_status = {
            name: sa.case((runs.c.status == name, 1), else_=0)
            for name in (EXTRACTION_SUCCESS, EXTRACTION_FAILED, EXTRACTION_INTERRUPTED)
        }
        succeeded = runs.c.status == EXTRACTION_SUCCESS
        query = sa.select(
            sa.func.count(runs.c.id),
            sa.func.sum(is_status[EXTRACTION_SUCCESS]),
            sa.func.sum(is_status[EXTRACTION_FAILED]),
            sa.func.sum(is_status[EXTRACTION_INTERRUPTED]),
            # Every run's: a run that failed after some batches left the source counted them
            # (the next run never sees them again); a batch it read but did not confirm is not
            # in its count, and the next run that confirms it counts it.
            sa.func.coalesce(sa.func.sum(runs.c.rows_read), 0),
            sa.func.max(runs.c.max_seq),
            sa.func.max(sa.case((succeeded, runs.c.finished_at), else_=None)),
            sa.func.min(runs.c.started_at),
        ).where(runs.c.table_key == table_key, *of_enablement(runs, enablement_id))
        checks = models.service_checks
        checked = sa.select(checks.c.checked_at).where(
            checks.c.table_key == table_key, *of_enablement(checks, enablement_id)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).one()
            empty_check_at = connection.execute(checked).scalar()
        last_success = row[6]
        if empty_check_at is not None and (last_success is None or empty_check_at > last_success):
            last_success = empty_check_at  # the service's latest check that found nothing
        return ExtractionTotals(
            runs=int(row[0] or 0),
            succeeded=int(row[1] or 0),
            failed=int(row[2] or 0),
            interrupted=int(row[3] or 0),
            changes_shipped=int(row[4] or 0),
            max_seq=None if row[5] is None else int(row[5]),
            last_success_at=last_success,
            first_started_at=row[7],
        )


def _last_success(connection: sa.Connection, table_key: str) -> int | None:
    """The id of the table's last successful extraction run (None: none yet)."""
    table = models.extraction_runs
    last: int | None = connection.execute(
        sa.select(sa.func.max(table.c.id)).where(
            table.c.table_key == table_key, table.c.status == ExtractionStatus.SUCCESS
        )
    ).scalar()
    return last
