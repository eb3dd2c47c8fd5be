"""Repository records of compactions: runs, their steps, and retained obsolete objects."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import Converted, RecordMapping, json_text, now
from gluon.repo.incremental import latest_runs, of_enablement
from gluon.states import CompactionStatus

RUNNING = CompactionStatus.RUNNING
WAITING = CompactionStatus.WAITING
"""Stopped at the acknowledgement step (--incremental-terminate-compaction)."""
FAILED = CompactionStatus.FAILED
SUCCESS = CompactionStatus.SUCCESS
ABANDONED = CompactionStatus.ABANDONED
"""Ended before its views switched (--incremental-abandon-compaction); never resumed."""
OPEN_STATUSES = (RUNNING, WAITING, FAILED)
"""A run in one of these states is resumed by the next compaction of its table."""


@dataclass(frozen=True, slots=True)
class CompactionRun:
    id: int
    table_key: str
    method: str
    status: str
    current_step: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    options: dict[str, Any]
    compacted_partition: int | None
    new_partition: int | None
    changes: int | None
    snapshot: dict[str, Any] | None
    progress: dict[str, Any]
    message: str | None
    enablement_id: int | None = None


@dataclass(frozen=True, slots=True)
class CompactionStep:
    run_id: int
    step: str
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class ObsoleteObject:
    table_key: str
    kind: str
    name: str
    location: str | None
    retained_at: dt.datetime
    compaction_run_id: int | None
    enablement_id: int | None = None
    delta_version: int | None = None
    """A version of the Delta table at ``location`` (the base table before a full
    compaction), not the whole table; vacuum keeps its files (revision 0016)."""


RUNS = RecordMapping(
    CompactionRun,
    options=json_text("options_json"),
    # Written by update_run; a run not yet that far has NULL (read as none / nothing yet).
    snapshot=Converted(
        "snapshot_json", load=lambda text: json.loads(text) if text else None, dump=json.dumps
    ),
    progress=Converted(
        "progress_json", load=lambda text: json.loads(text) if text else {}, dump=json.dumps
    ),
)
"""Rows of ``compaction_runs`` -> :class:`CompactionRun`."""
STEPS = RecordMapping(CompactionStep)
"""Rows of ``compaction_steps`` -> :class:`CompactionStep`."""
OBSOLETE_OBJECTS = RecordMapping(ObsoleteObject)
"""Rows of ``obsolete_objects`` <-> :class:`ObsoleteObject`."""


class CompactionRepository:
    """Compaction records, over the repository's engine."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("start_run")
    def start_run(
        self,
        table_key: str,
        method: str,
        options: dict[str, Any],
        enablement_id: int | None = None,
    ) -> CompactionRun:
        table = models.compaction_runs
        with self.engine.begin() as connection:
            result = connection.execute(
                table.insert().values(
                    table_key=table_key,
                    method=method,
                    status=RUNNING,
                    started_at=now(),
                    options_json=json.dumps(options),
                    enablement_id=enablement_id,
                )
            )
            key = result.inserted_primary_key
        assert key is not None
        run = self.get_run(int(key[0]))
        assert run is not None
        return run

    def get_run(self, run_id: int) -> CompactionRun | None:
        table = models.compaction_runs
        with self.engine.connect() as connection:
            row = (
                connection.execute(sa.select(table).where(table.c.id == run_id)).mappings().first()
            )
        return RUNS.from_row(row) if row else None

    def open_run(self, table_key: str, enablement_id: int | None = None) -> CompactionRun | None:
        """The unfinished run of ``table_key`` a new compaction resumes, if any (of one
        enablement when ``enablement_id`` is given: a run of an earlier one is never resumed)."""
        table = models.compaction_runs
        with self.engine.connect() as connection:
            row = (
                connection.execute(
                    sa.select(table)
                    .where(
                        table.c.table_key == table_key,
                        table.c.status.in_(OPEN_STATUSES),
                        *of_enablement(table, enablement_id),
                    )
                    .order_by(table.c.id.desc())
                )
                .mappings()
                .first()
            )
        return RUNS.from_row(row) if row else None

    def runs(
        self, table_key: str, limit: int = 50, *, enablement_id: int | None = None
    ) -> list[CompactionRun]:
        statement = latest_runs(models.compaction_runs, table_key, limit, enablement_id)
        with self.engine.connect() as connection:
            rows = connection.execute(statement).mappings()
            return [RUNS.from_row(row) for row in rows]

    def run_counts(self, table_key: str, enablement_id: int | None = None) -> dict[str, int]:
        """Compaction runs of ``table_key`` by status."""
        runs = models.compaction_runs
        query = (
            sa.select(runs.c.status, sa.func.count(runs.c.id))
            .where(runs.c.table_key == table_key, *of_enablement(runs, enablement_id))
            .group_by(runs.c.status)
        )
        with self.engine.connect() as connection:
            return {str(status): int(count) for status, count in connection.execute(query)}

    def last_completed(
        self, table_key: str, *, enablement_id: int | None = None
    ) -> CompactionRun | None:
        runs = self.runs(table_key, enablement_id=enablement_id)
        return next((run for run in runs if run.status == SUCCESS), None)

    @repository_write("update_run")
    def update_run(self, run_id: int, **values: Any) -> None:
        """Change columns of a run; ``snapshot`` and ``progress`` are stored as JSON."""
        table = models.compaction_runs
        if "snapshot" in values:
            values["snapshot_json"] = json.dumps(values.pop("snapshot"))
        if "progress" in values:
            values["progress_json"] = json.dumps(values.pop("progress"))
        if values.get("status") in (SUCCESS, ABANDONED):
            values.setdefault("finished_at", now())
        if values.get("status") == SUCCESS:
            values.setdefault("message", None)  # an error of an earlier attempt is over
        with self.engine.begin() as connection:
            connection.execute(table.update().where(table.c.id == run_id).values(**values))

    # -- steps -----------------------------------------------------------------------------

    @repository_write("step_started")
    def step_started(self, run_id: int, step: str) -> None:
        table = models.compaction_steps
        with self.engine.begin() as connection:
            connection.execute(
                table.insert().values(run_id=run_id, step=step, status=RUNNING, started_at=now())
            )
            connection.execute(
                models.compaction_runs.update()
                .where(models.compaction_runs.c.id == run_id)
                .values(current_step=step, status=RUNNING)
            )

    @repository_write("step_finished")
    def step_finished(self, run_id: int, step: str, detail: str = "") -> None:
        table = models.compaction_steps
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.run_id == run_id, table.c.step == step, table.c.status == RUNNING)
                .values(status=SUCCESS, finished_at=now(), detail=detail)
            )

    def steps(self, run_id: int) -> list[CompactionStep]:
        table = models.compaction_steps
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(table).where(table.c.run_id == run_id).order_by(table.c.id)
            ).mappings()
            return [STEPS.from_row(row) for row in rows]

    def completed_steps(self, run_id: int) -> set[str]:
        return {step.step for step in self.steps(run_id) if step.status == SUCCESS}

    # -- obsolete objects ------------------------------------------------------------------

    @repository_write("retain")
    def retain(self, obsolete: ObsoleteObject) -> None:
        """Record a kept object once (a resumed run records the same object again)."""
        table = models.obsolete_objects
        with self.engine.begin() as connection:
            recorded = connection.execute(
                sa.select(table.c.id).where(
                    table.c.table_key == obsolete.table_key,
                    table.c.kind == obsolete.kind,
                    table.c.name == obsolete.name,
                    table.c.location == obsolete.location
                    if obsolete.location is not None
                    else table.c.location.is_(None),
                )
            ).first()
            if recorded is not None:
                return
            connection.execute(table.insert().values(**OBSOLETE_OBJECTS.to_row(obsolete)))

    def retained(self, table_key: str, *, enablement_id: int | None = None) -> list[ObsoleteObject]:
        table = models.obsolete_objects
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(table)
                .where(table.c.table_key == table_key, *of_enablement(table, enablement_id))
                .order_by(table.c.id)
            ).mappings()
            return [OBSOLETE_OBJECTS.from_row(row) for row in rows]
