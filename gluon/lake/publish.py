"""Publish a staged table as the next version of a base table, in one Delta commit.

A full or partition-wise full compaction writes its merged rows to a staging Delta table
inside the base table's own folder (``<base>/gluon_compacted_r<run>``), in as many
commits as it needs. Publishing then commits, to the base table at its one path, an
overwrite whose add actions name the staged data files (paths relative to the base:
``gluon_compacted_r<run>/...``): no row is copied, and a reader holding the base path
sees either the version before the compaction or the compacted one, never a mixture.

The commit carries the application transaction ``gluon-compaction`` = run id, so a
re-run after a crash knows whether it happened (it is written with the commit, atomically).
A checkpoint follows the commit when one is due (``gluon.lake.checkpoints``: every ten
commits), as after every write of the base: the pre-compaction version stays readable by
deltalake (log entries are kept); the engine cannot time-travel past a checkpoint
(``gluon.lake.storage.version_readability`` says which reads a retained version).

A local stage's add actions are read from its own log, exactly as written; on an object
store deltalake lists them (:func:`snapshot_add_actions`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

from gluon.errors import StateError
from gluon.faults import fault_point
from gluon.lake import float_stats, storage
from gluon.lake.checkpoints import checkpoint_if_due, no_post_commit_hooks

log = logging.getLogger(__name__)

COMPACTION_APP = "gluon-compaction"
"""The Delta application transaction id a publishing commit records its run id under."""

STAGE_PREFIX = "gluon_compacted_r"

RESET_APP = "gluon-reset"
"""The application transaction id an ``offload --reset-backend-table`` publishes under."""

_RUN_KEYS = {COMPACTION_APP: "gluon.compaction_run", RESET_APP: "gluon.reset_run"}
"""The commit-info key naming the run that published a version."""


def stage_location(base_path: str, run_id: int) -> str:
    """Where run ``run_id`` stages the compacted base table: a folder inside the base's."""
    return f"{base_path.rstrip('/')}/{STAGE_PREFIX}{run_id}"


def published(base_path: str, run_id: int, app: str = COMPACTION_APP) -> bool:
    """True once run ``run_id`` (of application ``app``) has published its staged table to
    ``base_path``."""
    from deltalake import DeltaTable

    if storage.delta_version(base_path) is None:
        return False
    version = DeltaTable(base_path).transaction_version(app)
    return version is not None and int(version) >= run_id


def publish(base_path: str, stage_path: str, run_id: int, app: str = COMPACTION_APP) -> int:
    """Make the staged table at ``stage_path`` the current version of ``base_path``;
    return the base table's new version. Re-run after it committed: changes nothing.

    ``app``: the application transaction the commit records ``run_id`` under (a reset's
    run ids are not compaction run ids: :data:`RESET_APP`).

    ``stage_path`` must be a folder inside ``base_path`` (:func:`stage_location`). A base
    folder without a Delta table (an installation whose base moved to ``..._cNN``, coming
    back to its first path) is created by the commit.
    """
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import (
        CommitProperties,
        Transaction,
        create_table_with_add_actions,
    )

    if published(base_path, run_id, app):
        return int(DeltaTable(base_path).version())
    prefix = _relative_prefix(base_path, stage_path)
    stage = DeltaTable(stage_path)
    partition_by = list(stage.metadata().partition_columns)
    actions = staged_add_actions(stage_path, prefix)
    commit = CommitProperties(
        app_transactions=[Transaction(app, run_id)],
        custom_metadata={_RUN_KEYS.get(app, f"{app}.run"): str(run_id)},
    )
    no_checkpoint = no_post_commit_hooks()
    fault_point("compact.before_publish")
    current = None if storage.delta_version(base_path) is None else DeltaTable(base_path)
    if current is None or list(current.metadata().partition_columns) != partition_by:
        # A new base, or a reset that changes the partitioning, which an overwrite commit
        # cannot: one CREATE OR REPLACE commit (it removes every file of the version before).
        create_table_with_add_actions(
            base_path,
            stage.schema(),
            actions,
            mode="error" if current is None else "overwrite",
            partition_by=partition_by or None,
            configuration=float_stats.arrow_properties(pa.schema(stage.schema().to_arrow())),
            commit_properties=commit,
            post_commithook_properties=no_checkpoint,
        )
    else:
        float_stats.ensure(current)
        current.create_write_transaction(
            actions,
            "overwrite",
            stage.schema(),
            partition_by=partition_by or None,
            commit_properties=commit,
            post_commithook_properties=no_checkpoint,
        )
    version = int(DeltaTable(base_path).version())
    checkpoint_if_due(base_path, version)
    log.info("published %d staged files to %s: version %d", len(actions), base_path, version)
    return version


def replace_partitions(base_path: str, stage_path: str, run_id: int, partitions: Any) -> int:
    """Replace the partitions listed in ``partitions`` (a pyarrow table, one row per
    partition: the base's partition columns' values, in order) of the base table at
    ``base_path`` with the staged table's rows, in one commit; return the base table's new
    version. Re-run after it committed: changes nothing.

    The commit removes every data file of those partitions and adds the stage's (``stage_path``
    is a folder inside ``base_path``: no row is copied), under the application transaction
    :data:`COMPACTION_APP` = ``run_id``. An in-place compaction over any number of
    partitions is so one version of the base: a reader holding its path sees it before the
    compaction or after it.
    """
    from deltalake import DeltaTable
    from deltalake.transaction import (
        CommitProperties,
        RemoveAction,
        Transaction,
    )

    if published(base_path, run_id):
        return int(DeltaTable(base_path).version())
    base = DeltaTable(base_path)
    columns = list(base.metadata().partition_columns)
    replaced = {tuple(row.values()) for row in partitions.to_pylist()}
    if any(len(values) != len(columns) for values in replaced):
        raise StateError(f"the partitions to replace do not match {base_path}'s {columns}")
    deleted_at = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    removes = [
        RemoveAction(
            unquote(str(row["path"])),
            True,
            deleted_at,
            int(row["size_bytes"]),
            {name: partition_text(row[f"partition.{name}"]) for name in columns},
        )
        for row in _base_files(base, columns)
        if tuple(row[f"partition.{name}"] for name in columns) in replaced
    ]
    adds = staged_add_actions(stage_path, _relative_prefix(base_path, stage_path))
    commit = CommitProperties(
        app_transactions=[Transaction(COMPACTION_APP, run_id)],
        custom_metadata={"gluon.compaction_run": str(run_id)},
    )
    fault_point("compact.before_publish")
    float_stats.ensure(base)
    base.create_write_transaction(
        [*removes, *adds],
        "append",
        base.schema(),
        partition_by=columns or None,
        commit_properties=commit,
        post_commithook_properties=no_post_commit_hooks(),
    )
    version = int(DeltaTable(base_path).version())
    checkpoint_if_due(base_path, version)
    log.info(
        "replaced %d partitions of %s (%d files out, %d in): version %d",
        len(replaced),
        base_path,
        len(removes),
        len(adds),
        version,
    )
    return version


def _base_files(base: Any, columns: list[str]) -> list[dict[str, Any]]:
    """The current version's data files: path, size and typed partition values."""
    import pyarrow as pa

    files = pa.table(base.get_add_actions(flatten=True))
    rows: list[dict[str, Any]] = files.select(
        ["path", "size_bytes", *(f"partition.{name}" for name in columns)]
    ).to_pylist()
    return rows


def staged_add_actions(stage_path: str, prefix: str) -> list[Any]:
    """The add actions of the staged table's current version, their paths under ``prefix``.

    Read from the staged table's JSON commits (it has no checkpoint: a handful of commits),
    keeping each file's partition values and statistics exactly as written.
    """
    from deltalake.transaction import AddAction

    if not storage.is_local(stage_path):
        return snapshot_add_actions(stage_path, prefix)
    log_dir = storage.local_path(stage_path) / "_delta_log"
    files: dict[str, dict[str, Any]] = {}
    for entry in sorted(log_dir.glob("*.json"), key=lambda path: int(path.name.split(".")[0])):
        for line in entry.read_text(encoding="utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                files[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    # The log holds paths URL-encoded; an add action takes the path itself (the commit
    # encodes it again: passed encoded, a partition value with a space named no file).
    return [
        AddAction(
            f"{prefix}/{unquote(path)}",
            int(add["size"]),
            dict(add.get("partitionValues") or {}),
            int(add["modificationTime"]),
            True,
            add.get("stats") or "",
        )
        for path, add in sorted(files.items())
    ]


def snapshot_add_actions(stage_path: str, prefix: str) -> list[Any]:
    """The add actions of the staged table's current version as deltalake lists them (an
    object store, whose log gluon does not read itself): partition values written back to
    Delta's text form, statistics reduced to the row count (readers skip fewer files)."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    rows = pa.table(DeltaTable(stage_path).get_add_actions(flatten=True)).to_pylist()
    return [
        AddAction(
            f"{prefix}/{unquote(str(row['path']))}",
            int(row["size_bytes"]),
            {
                name.removeprefix("partition."): partition_text(value)
                for name, value in row.items()
                if name.startswith("partition.")
            },
            int(row["modification_time"]),
            True,
            json.dumps({"numRecords": int(row["num_records"])})
            if row.get("num_records") is not None
            else "",
        )
        for row in sorted(rows, key=lambda row: str(row["path"]))
    ]


def partition_text(value: object) -> str | None:
    """A typed partition value in the text form Delta's log keeps it in."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _relative_prefix(base_path: str, stage_path: str) -> str:
    base = PurePosixPath(str(storage.local_path(base_path)))
    stage = PurePosixPath(str(storage.local_path(stage_path)))
    try:
        return str(stage.relative_to(base))
    except ValueError as exc:
        raise StateError(f"the staged table {stage_path} is not inside {base_path}") from exc


def remove_stage_log(stage_path: str) -> None:
    """Drop a published stage's own Delta log: its data files now belong to the base table
    (its vacuum removes them once no kept version uses them)."""
    storage.remove_table(f"{stage_path.rstrip('/')}/_delta_log")
