"""Fault injection for crash tests.

``GLUON_FAULT=<point>`` kills the process at that point with ``os._exit`` (no
cleanup, like ``kill -9``); ``GLUON_FAULT=<point>@<n>`` kills it the n-th time
the point is reached, in the middle of a step that did part of its work (after
the first of several partition commits, say). ``GLUON_PAUSE=<point>:<seconds>``
(``<point>@<n>:<seconds>``: its n-th visit only) sleeps there (to hold a lock
while another run starts; with ``GLUON_PAUSE_RELEASE=<path>`` the pause ends as
soon as that file exists, so a test can hold a command exactly as long as it
needs). Points are named ``<operation>.<moment>``
(``extract.after_delta_commit``...) and every one is listed in ``FAULT_POINTS``,
so a test can draw from them. Unset, a fault point costs two dictionary lookups.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

FAULT_EXIT_CODE = 137

P = ParamSpec("P")
R = TypeVar("R")

# Compaction steps, in the order of gluon.compact.steps.STEPS (a unit test checks they match):
# the runner reaches compact.before_<step> and compact.after_<step> for each.
COMPACTION_STEPS = (
    "request_diversion",
    "await_acknowledgement",
    "record_snapshot",
    "compact",
    "switch_views",
    "wait_for_queries",
    "drop_obsolete",
    "vacuum",
)

# Repository writes decorated with ``repository_write``: repo.before_<name> / repo.after_<name>.
REPOSITORY_WRITES = (
    "save_table",
    "switch_generation",
    "delete_table",
    "save_state",
    "update_state",
    "delete_state",
    "start_extraction",
    "finish_extraction",
    "start_run",
    "update_run",
    "step_started",
    "step_finished",
    "retain",
    "start_increment",
    "finish_increment",
    "delete_increments",
    "update_columns",
    "record_shipping",
    "record_truncate",
    "new_enablement",
    "enablement_finished",
    "claim",
    "delete",
    "record",
    "clear",
    "record_set_aside",
    "discard_empty_extraction",
    "count_batch",
    "record_empty_checks",
    "record_verify",
    "save_verify_progress",
    "clear_verify_progress",
    # the shared slot's table positions (gluon/repo/slot_positions.py; issue 33)
    "hold_slot_position",
    "save_slot_position",
    "release_slot_position",
    "forget_slot_position",
)


def _around(prefix: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{prefix}.{moment}_{name}" for name in names for moment in ("before", "after"))


FAULT_POINTS: tuple[str, ...] = (
    # extraction (gluon/extract/run.py, gluon/extract/shipping.py, gluon/extract/feeds/)
    "extract.before_delta_commit",
    "extract.after_delta_commit",
    # merge mode IMMEDIATE (gluon/extract/shipping.py): batch staged, merge into the base table
    "extract.after_stage",
    "extract.before_merge_commit",
    "extract.after_merge_commit",
    "extract.before_changelog_delete",
    "extract.after_changelog_delete",
    # PG_LOGICAL (gluon/extract/feeds/pg_logical.py): the slot confirms what the lake holds
    "extract.before_slot_advance",
    "extract.after_slot_advance",
    # a table of the shared slot (gluon/extract/feeds/shared_reader.py): its position saved
    # after the Delta commit, then the slot confirmed
    "extract.before_shared_position",
    "extract.after_shared_position",
    "extract.before_repository_update",
    # compaction (gluon/compact/runner.py, rewrite.py): every step, and each partition commit
    *_around("compact", COMPACTION_STEPS),
    "compact.before_partition",
    "compact.after_partition",
    # full compactions (gluon/lake/publish.py): the staged base published in one Delta commit,
    # recorded, before the views switch
    "compact.before_publish",
    "compact.after_publish",
    # offload --reset-backend-table (gluon/offload/copy.py): its staged copy published at the
    # base's one path in one overwrite commit
    "offload.before_reset_publish",
    "offload.after_reset_publish",
    # merge mode IMMEDIATE: a compaction is one step, rewriting small files and vacuuming
    "compact.before_compact_files",
    # every Delta commit and table removal (gluon/lake/session.py, gluon/lake/storage.py)
    "lake.before_write",
    "lake.after_write",
    "lake.before_execute",
    "lake.after_execute",
    "lake.before_remove_table",
    "lake.after_remove_table",
    # a checkpoint of a delta or base table, after the commit it follows (gluon/lake/checkpoints.py)
    "lake.checkpoint",
    # source capture objects, created by enable and dropped by disable (gluon/capture/objects.py)
    "capture.before_create_object",
    "capture.after_create_object",
    "capture.before_drop_object",
    "capture.after_drop_object",
    # a table joining or leaving its database's shared slot (gluon/extract/feeds/shared_slot.py)
    "capture.after_publish_table",
    "capture.after_unpublish_table",
    # the last member's leave: the shared slot dropped, its publication not yet
    # (gluon/source/publication.py)
    "capture.after_shared_slot_drop",
    # setting aside changes the lake cannot take (gluon/extract/set_aside.py): the repository
    # records them (repo.*_record_set_aside), then one changelog delete removes them
    "set_aside.before_changelog_delete",
    "set_aside.after_changelog_delete",
    # staging lake rows for patching (gluon/lifecycle/patching.py): one source transaction
    "stage.before_source_commit",
    "stage.after_source_commit",
    # the lifecycle lock is held (gluon/locks.py): a test kills or pauses a holder here
    "lock.lifecycle_held",
    # carrying a source schema change (gluon/extract/schema_changes.py)
    "schema.after_capture_objects",
    "schema.after_row_images",
    "schema.after_delta_evolution",
    "schema.after_fill_stored_defaults",
    # gluon verify (gluon/verify/run.py): a bisection level done and its progress recorded
    "verify.after_level",
    # every repository write (gluon/repo/*.py)
    *_around("repo", REPOSITORY_WRITES),
)
"""Every fault point gluon reaches (tests draw kills from this list)."""


def fault_raise(name: str, error: type[Exception] = OSError) -> None:
    """Raise ``error`` here if ``GLUON_FAULT`` names this point (an unavailable resource)."""
    if os.environ.get("GLUON_FAULT") == name:
        raise error(f"injected fault at {name}")


_reached: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Die (or pause) here if the environment names this point (``@n``: its n-th visit)."""
    fault = os.environ.get("GLUON_FAULT")
    if fault:
        point, _, nth = fault.partition("@")
        if point == name:
            _reached[name] = _reached.get(name, 0) + 1
            if not nth or _reached[name] >= int(nth):
                os._exit(FAULT_EXIT_CODE)
    pause = os.environ.get("GLUON_PAUSE", "")
    if pause.startswith(name + ":") or pause.startswith(name + "@"):
        where, _, seconds = pause.rpartition(":")
        nth = where.partition("@")[2]
        visit = f"pause {name}"
        _reached[visit] = _reached.get(visit, 0) + 1
        if not nth or _reached[visit] == int(nth):
            _pause(float(seconds), os.environ.get("GLUON_PAUSE_RELEASE"))


def _pause(seconds: float, release: str | None) -> None:
    if not release:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not os.path.exists(release):
        time.sleep(0.05)


def repository_write(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a repository write with ``repo.before_<name>`` and ``repo.after_<name>``."""

    def decorate(write: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(write)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            fault_point(f"repo.before_{name}")
            result = write(*args, **kwargs)
            fault_point(f"repo.after_{name}")
            return result

        return wrapper

    return decorate
