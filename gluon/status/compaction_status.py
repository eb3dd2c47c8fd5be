"""The compaction part of a table's status: runs, their steps, the snapshot, kept objects."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

from gluon import locks
from gluon.lake import sql, storage
from gluon.repo import Repository
from gluon.repo.compaction import RUNNING, SUCCESS, CompactionRun
from gluon.status.model import CompactionRunInfo, CompactionStatus, Snapshot, SnapshotEntry


def _compaction_run(repo: Repository, run: CompactionRun) -> CompactionRunInfo:
    """``run`` with its steps, shown as interrupted if it is recorded as running and no
    process holds the table's lock."""
    if run.status == RUNNING and not locks.is_held(
        repo, run.table_key, locks.LIFECYCLE, locks.COMPACTION
    ):
        run = replace(run, status=locks.INTERRUPTED)
    return CompactionRunInfo(run, tuple(repo.compaction.steps(run.id)))


def deltalake_read(path: str, version: int | str) -> str:
    """Python code reading ``version`` of the Delta table at ``path`` with deltalake's own
    query engine, which reads versions older than the newest checkpoint.

    Not ``DeltaTable.to_pyarrow_table()``: in a short process that read aborted at exit
    ("terminate called without an active exception") 2 times in 3 (deltalake 1.6.6).
    """
    # Double quotes (a JSON string is a Python string): the shell command quotes it in single.
    table = f"deltalake.DeltaTable({json.dumps(path)}, version={version})"
    return f'deltalake.QueryBuilder().register("t", {table}).execute("SELECT * FROM t").read_all()'


def deltalake_command(path: str, version: int) -> str:
    """A shell command printing version ``version`` of the Delta table at ``path``."""
    code = f"import deltalake, pyarrow; print(pyarrow.table({deltalake_read(path, int(version))}))"
    return f"python -c {shlex.quote(code)}"


def _snapshot(run: CompactionRun) -> Snapshot | None:
    entries = []
    for role, item in (run.snapshot or {}).items():
        if not isinstance(item, dict) or item.get("path") is None or item.get("version") is None:
            continue
        path, version = str(item["path"]), int(item["version"])
        readable, reason = storage.version_readability(path, version)
        query = sql.version_of_path(path, version) if readable == storage.ENGINE else ""
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
    snapshot = next((found for run in runs if (found := _snapshot(run))), None)
    return CompactionStatus(
        ongoing=_compaction_run(repo, ongoing) if ongoing else None,
        last_completed=_compaction_run(repo, completed) if completed else None,
        completed_runs=repo.compaction.run_counts(table_key, enablement_id).get(SUCCESS, 0),
        snapshot=snapshot,
        # Retained objects of every enablement (they outlive disabling), while their data exists.
        retained=tuple(
            item
            for item in repo.compaction.retained(table_key)
            if item.location is None or storage.delta_version(item.location) is not None
        ),
        recent_runs=tuple(_compaction_run(repo, run) for run in runs),
    )
