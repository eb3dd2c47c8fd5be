"""Checkpoints of the Delta tables gluon writes: one every :data:`CHECKPOINT_INTERVAL` commits.

A reader of a Delta table replays its JSON commits from the newest checkpoint on; a table
without checkpoints is replayed from version 0 by every reader, gluon's and everyone
else's, so each read costs more as the table lives. Every writer of a delta table or a base
table calls :func:`checkpoint_if_due` after its commit; the writes themselves pass
:data:`NO_POST_COMMIT_HOOKS` (deltalake's defaults would checkpoint every 100 commits and
delete log entries older than 30 days, also those of base versions a compaction retained).

A checkpoint is an optimisation: the table is complete without it. deltalake writes the
checkpoint's parquet file first and ``_last_checkpoint`` (the hint readers start from) after
it; a process killed between the two leaves a table that reads as before (fault point
``lake.checkpoint``), and a failed checkpoint is logged, never the write's failure.

Log entries are kept by these commits (only a vacuum removes those older than the table's
``delta.logRetentionDuration``: deltalake 1.6.6's vacuum does, whatever its hook
properties say): the engine (Sail) cannot time-travel past a checkpoint, but deltalake
reads any version whose log entries and files exist, so a retained base version stays
readable (``gluon.lake.storage.version_readability`` says how).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from gluon.faults import fault_point
from gluon.lake import storage

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 10
"""A checkpoint every 10 commits, as the engine writes them to the tables it writes (Spark's
default ``delta.checkpointInterval``; deltalake's own is 100): readers replay at most ten
JSON commits."""


def no_post_commit_hooks() -> Any:
    """deltalake's post-commit properties for gluon's writes: no checkpoint, no log cleanup
    (:func:`checkpoint_if_due` decides the first; log entries are kept)."""
    from deltalake.transaction import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def newest_checkpoint(location: str) -> int | None:
    """The version of the newest checkpoint of the Delta table at ``location`` (its
    ``_last_checkpoint`` hint; None: none)."""
    try:
        text = storage.read_text(location, "_delta_log/_last_checkpoint")
        return None if not text else int(json.loads(text)["version"])
    except (KeyError, ValueError, TypeError, OSError):
        return None  # no hint or an unreadable one: readers replay from version 0


def checkpoint_due(version: int, newest: int | None, interval: int = CHECKPOINT_INTERVAL) -> bool:
    """Whether a table at ``version`` whose newest checkpoint is ``newest`` needs one: at
    least ``interval`` commits since (a writer whose commits skip a multiple of the
    interval, a compaction's optimize and vacuum, still gets one)."""
    return version > 0 and version - (-1 if newest is None else newest) > interval - 1


def checkpoint_if_due(location: str, version: int | None = None) -> bool:
    """Write a checkpoint of the Delta table at ``location`` when :func:`checkpoint_due`;
    True when one was written. ``version``: the table's version after the caller's commit
    (read when not given). A failure is logged: the table is complete without it."""
    from deltalake import DeltaTable

    if version is None:
        version = storage.delta_version(location)
    if version is None or not checkpoint_due(version, newest_checkpoint(location)):
        return False
    try:
        table = DeltaTable(location, version=version)
        fault_point("lake.checkpoint")
        table.create_checkpoint()
    except Exception as exc:  # an optimisation: the commit it follows stands
        if not _is_delta_failure(exc):
            raise
        log.warning("writing a checkpoint of %s failed (next commit retries): %s", location, exc)
        return False
    log.debug("checkpoint of %s at version %d", location, version)
    return True


def _is_delta_failure(exc: Exception) -> bool:
    from gluon.lake import failures

    return failures.is_delta_failure(exc)
