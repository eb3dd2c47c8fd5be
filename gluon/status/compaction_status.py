"""The compaction part of a table's status: runs, their steps, the snapshot, kept objects."""

from __future__ import annotations

import shlex

from gluon import locks
from gluon.lake import sql, storage
from gluon.repo import Repository
from gluon.repo.compaction import (
    ABANDONED,
    FAILED,
    RUNNING,
    SUCCESS,
    WAITING,
    CompactionRun,
)
from gluon.status.model import (
    CompactionRunInfo,
    CompactionStatus,
    CompactionStepInfo,
    RetainedObject,
    Snapshot,
    SnapshotEntry,
)

RUN_STATUS_TEXT: dict[str, str] = {
    RUNNING: "running",
    WAITING: "waiting for acknowledgement",
    FAILED: "failed (run the same compaction command again to resume it)",
    SUCCESS: "completed",
    locks.INTERRUPTED: "interrupted (run the same command again to resume)",
    ABANDONED: "abandoned before its views switched (the next compaction starts a new run)",
}


def _live_status(repo: Repository, run: CompactionRun) -> str:
    """``run.status``, or interrupted for a run recorded as running that no process holds."""
    if run.status == RUNNING and not locks.is_held(
        repo, run.table_key, locks.LIFECYCLE, locks.COMPACTION
    ):
        return locks.INTERRUPTED
    return run.status


def snapshot_query(path: str, version: int) -> str:
    """Spark SQL reading version ``version`` of the Delta table at ``path``."""
    return sql.version_of_path(path, version)


def deltalake_command(path: str, version: int) -> str:
    """A shell command reading version ``version`` of the Delta table at ``path`` with
    deltalake (which reads versions older than the newest checkpoint)."""
    code = (
        "import deltalake; "
        f"print(deltalake.DeltaTable({path!r}, version={int(version)}).to_pyarrow_table())"
    )
    return f"python -c {shlex.quote(code)}"


def _compaction_run(repo: Repository, run: CompactionRun) -> CompactionRunInfo:
    status = _live_status(repo, run)
    return CompactionRunInfo(
        id=run.id,
        method=run.method,
        status=status,
        status_text=RUN_STATUS_TEXT.get(status, status),
        current_step=run.current_step,
        started_at=run.started_at,
        finished_at=run.finished_at,
        compacted_partition=run.compacted_partition,
        new_partition=run.new_partition,
        changes=run.changes,
        message=run.message,
        steps=tuple(
            CompactionStepInfo(
                step=step.step,
                status=step.status,
                started_at=step.started_at,
                finished_at=step.finished_at,
                detail=step.detail,
            )
            for step in repo.compaction.steps(run.id)
        ),
    )


def _snapshot(run: CompactionRun) -> Snapshot | None:
    entries = []
    for role, item in (run.snapshot or {}).items():
        if not isinstance(item, dict) or item.get("path") is None or item.get("version") is None:
            continue
        path, version = str(item["path"]), int(item["version"])
        readable, reason = storage.version_readability(path, version)
        query = snapshot_query(path, version) if readable == storage.ENGINE else ""
        if readable == storage.ENGINE:
            command = f"gluon query {shlex.quote(query)}"
        elif readable == storage.DELTALAKE:
            command = deltalake_command(path, version) + f"  # {reason}"
        else:
            command = f"gone: {reason}"
        entries.append(
            SnapshotEntry(
                role=str(role),
                table=str(item.get("table") or ""),
                path=path,
                version=version,
                query=query,
                command=command,
                readable=readable,
            )
        )
    if not entries:
        return None
    return Snapshot(run_id=run.id, run_completed=run.status == SUCCESS, entries=tuple(entries))


def compaction_status(
    repo: Repository, table_key: str, history: int, enablement_id: int | None = None
) -> CompactionStatus:
    """The open run, the last completed one, the latest snapshot and the kept objects
    (of one enablement when ``enablement_id`` is given)."""
    runs = repo.compaction.runs(table_key, limit=history, enablement_id=enablement_id)
    ongoing = repo.compaction.open_run(table_key, enablement_id)
    completed = repo.compaction.last_completed(table_key, enablement_id=enablement_id)
    with_snapshot = next((run for run in runs if _snapshot(run)), None)
    return CompactionStatus(
        ongoing=_compaction_run(repo, ongoing) if ongoing else None,
        last_completed=_compaction_run(repo, completed) if completed else None,
        completed_runs=repo.compaction.run_counts(table_key, enablement_id).get(SUCCESS, 0),
        snapshot=_snapshot(with_snapshot) if with_snapshot else None,
        retained=tuple(
            RetainedObject(
                kind=item.kind,
                name=item.name,
                location=item.location,
                retained_at=item.retained_at,
                compaction_run_id=item.compaction_run_id,
            )
            # Of every enablement (they outlive disabling), while their data exists.
            for item in repo.compaction.retained(table_key)
            if item.location is None or storage.delta_version(item.location) is not None
        ),
        recent_runs=tuple(_compaction_run(repo, run) for run in runs),
    )
