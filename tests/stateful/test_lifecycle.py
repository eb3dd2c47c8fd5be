"""The table lifecycle as a state machine: every interleaving keeps the lake equal to a model.

For each source dialect (SQLite, PostgreSQL) and each extraction method it
supports, hypothesis interleaves source DML (on the application table and
through the updatable view), extractions, compactions of every method started
at the acknowledgement step (``--incremental-terminate-compaction``) and
resumed, partial-offload increments, ``--incremental-stage-lake-rows``,
disable/enable, and kill -9 at the fault points of ``gluon.faults.FAULT_POINTS``
(``GLUON_FAULT=point@n``: the n-th visit, so a step can die half-way); and the
source's own hazards: a second installation enabling the same table, a reset
of the changelog's sequence (refused, then the documented way out), and
source schema changes (a column added, dropped and restored, widened).
On PostgreSQL, TRUNCATE (with inserts in its transaction) empties the model.
Each example draws its table's shape (``support.lifecycle.SHAPES``: composite
key, keyword names, RANGE/HASH and LIST partitioned tables); the first example
of each case has the shape ``FIRST_SHAPE`` names, so the default run covers
them all. After every step the user view must equal the model of
``support.lifecycle`` row for row, with no key shown twice.

Commands run in this process with Typer's CliRunner (one Sail server for all);
a killed command runs in a child process, then is run again here, as a user
would, before the comparison. Where gluon is about to change (overlaps that
may be refused or allowed), either outcome is accepted, but the lake must
still equal the model.

Soak runs: ``GLUON_STATEFUL_EXAMPLES=N`` (examples per dialect and method),
``GLUON_STATEFUL_STEPS=N`` (steps per example) and ``GLUON_STATEFUL_SEED=S``.
A failure prints the shrunk sequence of steps and the seed
(``GLUON_STATEFUL_SHRINK=0``: the sequence as found, unshrunk).
"""

from __future__ import annotations

import os
import shutil
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    precondition,
    rule,
)
from support.cli import GLUON_SETTINGS, run_cli
from support.incremental import methods_for, run_offload_process
from support.lifecycle import (
    COMPOSITE,
    KEYWORDS,
    LIST_PARTITIONED,
    PLAIN,
    RANGE_PARTITIONED,
    Key,
    LifecycleSource,
    Model,
    Row,
    Shape,
    canonical,
    quoted,
    shapes_for,
    show,
    sort_key,
)
from support.postgres import PostgresServer

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE, FAULT_POINTS
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject, ViewKind
from gluon.read.catalog import lake_session
from gluon.repo import Repository

# Hypothesis's first example is its simplest (one rule over and over): the second is random.
EXAMPLES = int(os.environ.get("GLUON_STATEFUL_EXAMPLES", "2"))
STEPS = int(os.environ.get("GLUON_STATEFUL_STEPS", "12"))
SEED = int(os.environ.get("GLUON_STATEFUL_SEED", "20261122"))
SHRINK = os.environ.get("GLUON_STATEFUL_SHRINK", "1") != "0"

NAMES = st.sampled_from(["alpha", "beta", "", "δέλτα", None])
AMOUNTS = st.sampled_from(["0.00", "1.50", "-99.99", "12345.67", None])
PICKS = st.integers(min_value=0, max_value=50)
NTH = st.integers(min_value=1, max_value=2)
Statement = tuple[str, str, int, str | None, str | None]
STATEMENTS = st.tuples(
    st.sampled_from(["table", "view"]),
    st.sampled_from(
        ["insert", "update", "key change", "delete", "no-op update", "insert null key"]
    ),
    PICKS,
    NAMES,
    AMOUNTS,
)
"""One DML statement: (application table or updatable view, kind, which row, name, amount).

View statements run on the application table when the method has no updatable view."""
DML = st.lists(STATEMENTS, max_size=4)
Refill = tuple[str | None, str | None]
REFILL = st.tuples(NAMES, AMOUNTS)
"""A row inserted in a TRUNCATE's transaction: (name, amount)."""
"""The source DML every step starts with."""
COMPACTIONS = {
    "IN_PLACE": ("--incremental-in-place-compaction",),
    "FULL": ("--incremental-full-compaction",),
    "PARTITION_WISE_FULL": ("--incremental-partition-wise-full-compaction",),
}


def _points(*prefixes: str) -> list[str]:
    return [point for point in FAULT_POINTS if point.startswith(prefixes)]


# Where each command can be killed (points it reaches; the others would let it finish).
EXTRACTION_POINTS = _points(
    "extract.", "lake.before_write", "lake.after_write", "repo.before_start_extraction",
    "repo.after_start_extraction", "repo.before_finish_extraction", "repo.after_finish_extraction",
    "repo.before_update_state", "repo.after_update_state", "repo.before_count_batch",
    "repo.after_count_batch", "lake.checkpoint",
)  # fmt: skip
COMPACTION_POINTS = _points(
    "compact.", "lake.", "repo.before_start_run", "repo.after_start_run", "repo.before_update_run",
    "repo.after_update_run", "repo.before_step", "repo.after_step", "repo.before_retain",
    "repo.after_retain", "repo.before_switch_generation", "repo.after_switch_generation",
    "repo.before_update_state", "repo.after_update_state",
)  # fmt: skip
DISABLE_POINTS = _points(
    "capture.before_drop", "capture.after_drop", "lake.before_remove", "lake.after_remove",
    "repo.before_save_state", "repo.after_save_state", "repo.before_delete_state",
    "repo.after_delete_state",
)  # fmt: skip
ENABLE_POINTS = _points(
    "capture.before_create", "capture.after_create", "lake.before_write", "lake.after_write",
    "repo.before_save_state", "repo.after_save_state",
)  # fmt: skip
INCREMENT_POINTS = _points(
    "lake.before_write", "lake.after_write", "repo.before_save_table", "repo.after_save_table",
    "repo.before_start_increment", "repo.after_start_increment",
    "repo.before_finish_increment", "repo.after_finish_increment",
)  # fmt: skip
STAGE_POINTS = _points("stage.")
RESET_POINTS = _points(
    "offload.", "lake.before_write", "lake.after_write", "repo.before_save_table",
    "repo.after_save_table",
)  # fmt: skip
"""``--reset-backend-table`` (alone, or with the enable): the copy staged, published at the
base's path (``offload.*_reset_publish``), then the record saved (the repository update)."""
MEMBER_ENABLE_POINTS = _points("capture.after_publish_table")
MEMBER_DISABLE_POINTS = _points("capture.after_unpublish_table", "capture.after_shared_slot_drop")
"""A member table of the shared slot joins and leaves its publication, the last one dropping
the slot, then the publication (the extraction's
``extract.before_shared_position``/``after_shared_position`` are in EXTRACTION_POINTS)."""


VERBOSE = bool(os.environ.get("GLUON_STATEFUL_VERBOSE"))


def trace(line: str) -> None:
    if VERBOSE:
        print(" ", " ".join(line.replace("Log file:", "").split())[:300])


def user_view(source: LifecycleSource) -> list[Row]:
    with lake_session(load_settings()) as session:
        rows = session.sql(f"SELECT * FROM {source.user_view}").toArrow().to_pylist()
    # No DML of the model sets the added column: a value there came from another column (an
    # in-place compaction once wrote the partition value into it, soak seed 913).
    noted = [row for row in rows if {k.lower(): v for k, v in row.items()}.get("note") is not None]
    assert not noted, f"the user view shows values the source never had in note: {noted[:3]}"
    return [canonical(row, source.shape) for row in rows]


class Nothing:
    """No key was deleted (``None`` is a key)."""


NOTHING = Nothing()


class Outcome:
    """What a command did, in the machine's terms."""

    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def __repr__(self) -> str:
        return f"exit {self.code}: {self.stdout.strip()} {self.stderr.strip()}"


def lifecycle_machine(
    dialect: str,
    method_name: str,
    make_url: Callable[[], str],
    merge_modes: tuple[str, ...] = ("DEFERRED",),
    shapes: tuple[Shape, ...] = (),
    slot_scope: str = "table",
) -> type:
    """The state machine class for one dialect and method; the model enables with one of
    ``merge_modes`` (``--incremental-merge-mode``) for the whole example, on a table of
    one of ``shapes`` (default: every shape of the dialect; the first is the simplest
    example's); PG_LOGICAL with ``slot_scope`` ``database``: the table is a member of its
    database's shared slot (the default: no ``--incremental-pg-logical-slot``), killed also
    where it joins and leaves the publication; ``table``: a slot of its own (``=table``)."""
    shapes = shapes or shapes_for(dialect)
    member = slot_scope == "database"
    enable_points = ENABLE_POINTS + (MEMBER_ENABLE_POINTS if member else [])
    disable_points = DISABLE_POINTS + (MEMBER_DISABLE_POINTS if member else [])
    reset_points = sorted({*enable_points, *RESET_POINTS}, key=FAULT_POINTS.index)
    method = registered_methods()[method_name]
    triggers = method.has_object(SourceObject.CHANGELOG_TRIGGER)
    logged = method.has_object(SourceObject.REPLICATION_SLOT)
    """Log-based capture (PG_LOGICAL): every committed change of the table, no trigger."""
    sequenced = method.has_object(SourceObject.CHANGELOG_TABLE)
    owns_source_objects = bool(method.source_objects)
    patches = method.has_object(SourceObject.UPDATABLE_VIEW)
    insert_only = method.view_kind is ViewKind.UNION_ALL
    records_images = triggers and not insert_only and not patches
    """Carrying a column added to the source records every offloaded row's current image
    in the changelog (``gluon.extract.schema_changes``): the lake then shows the table's rows, also
    those changed while capture was off (disabled)."""

    class Lifecycle(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.home = Path(os.environ["GLUON_STATEFUL_TMP"]) / uuid.uuid4().hex[:10]
            self.saved_env = {
                name: os.environ.get(name) for name in (*GLUON_SETTINGS, "OFFLOAD_HOME")
            }
            for name in GLUON_SETTINGS:
                os.environ.pop(name, None)
            os.environ["OFFLOAD_HOME"] = str(self.home)
            self.source: LifecycleSource
            self.enabled = False
            self.compaction: tuple[str, ...] | None = None
            """The flags of the unfinished compaction run (None: none)."""
            self.compaction_method = ""
            self.captured_since_extraction = False
            self.offload_flags: tuple[str, ...] = ()
            self.note = "absent"
            """The ``note`` column the source gains: absent, added, carried (to the lake: the
            repository's record has it)."""
            self.widened = False
            self.immediate = False
            """Merge mode IMMEDIATE: the user view is the base table, merged by each
            extraction; a compaction only rewrites small files and vacuums."""

        def teardown(self) -> None:
            for name, value in self.saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            shutil.rmtree(self.home, ignore_errors=True)
            if logged and hasattr(self, "source"):
                # A slot is cluster-wide and outlives the example: free it for the next one.
                self.ddl(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE database = current_database() AND NOT active"
                )
            if hasattr(self, "source"):
                self.source.engine.dispose()

        # -- setup ---------------------------------------------------------------------------

        @initialize(
            shape=st.sampled_from(shapes),
            partitioned=st.booleans(),
            nullable_key=st.booleans(),
            partial=st.booleans(),
            merge_mode=st.sampled_from(merge_modes),
        )
        def offload_and_enable(
            self,
            shape: Shape,
            partitioned: bool,
            nullable_key: bool,
            partial: bool,
            merge_mode: str = "DEFERRED",
        ) -> None:
            self.immediate = merge_mode == "IMMEDIATE"
            url = make_url()
            os.environ["GLUON_SOURCE_URL"] = url
            nullable_key = nullable_key and shape.nullable
            trace(f"shape {shape.label}, nullable key {nullable_key}, partial {partial}")
            self.source = LifecycleSource(dialect, url, shape, nullable_key, partial)
            self.source.create()
            key = shape.key[0]
            if logged and nullable_key:
                # PG_LOGICAL needs the key of deleted rows in the WAL: a UNIQUE column is no
                # replica identity, the whole old row is (docs/operations.md, PG_LOGICAL).
                assert self.ddl(f"ALTER TABLE {self.source.table} REPLICA IDENTITY FULL") is None
            self.key_flags: tuple[str, ...] = (
                (f"--incremental-key-columns={key}",) if nullable_key else ()
            )
            if nullable_key and insert_only:
                # A UNIQUE column that allows NULL is no key constraint for an insert-only
                # method; the model never inserts a NULL key there, so the user may vouch.
                self.key_flags += ("--incremental-no-verify-primary-key",)
            self.offload_flags = (
                (f"--partition-columns={key}", "--partition-granularity=10") if partitioned else ()
            )
            if partial:
                first = self.offload(
                    "--offload-type=FULL",
                    f"--offload-predicate={self.source.first_predicate}",
                    *self.offload_flags,
                )
                assert first.code == 0, first
                self.enable_expecting_success()
            else:
                self.enable_expecting_success(*self.offload_flags)

        # -- commands ------------------------------------------------------------------------

        def offload(self, *args: str) -> Outcome:
            result = run_cli("offload", "-t", self.source.table, "-x", *args)
            done = Outcome(result.exit_code, result.stdout, result.stderr)
            trace(f"offload {' '.join(args)} -> {done}")
            self.follow_carry()
            return done

        def follow_carry(self) -> None:
            """After a command: if it carried the added column (an extraction does, unless a
            compaction is under way; a killed one before any of its fault points), the
            images it recorded ship with its changes."""
            if self.note != "added":
                return
            record = Repository(load_settings().repo_url).get_table(self.source.key)
            if record is None or "note" not in [column.name.lower() for column in record.columns]:
                return
            self.note = "carried"
            if records_images:
                self.source.pending.update(self.source.offloaded_rows())

        def killed(self, point: str, nth: int, *args: str) -> Outcome | None:
            """Run ``offload ARGS`` in a child killed at ``point@nth``.

            Returns None if it died there, else how it ended (the point was not reached).
            """
            run = run_offload_process(
                "-t", self.source.table, "-x", *args, env={"GLUON_FAULT": f"{point}@{nth}"}
            )
            trace(f"offload {' '.join(args)} killed at {point}@{nth} -> {run.returncode}")
            self.follow_carry()
            if run.returncode == FAULT_EXIT_CODE:
                return None
            return Outcome(run.returncode, run.stdout, run.stderr)

        def enable_args(self) -> tuple[str, ...]:
            return (
                "--incremental-updates-enabled",
                f"--incremental-extraction-method={method_name}",
                *self.key_flags,
                *(("--incremental-merge-mode=IMMEDIATE",) if self.immediate else ()),
                # A member by default (the shared slot); the own-slot cases say =table.
                *(("--incremental-pg-logical-slot=table",) if logged and not member else ()),
            )

        def enable_expecting_success(self, *extra: str) -> None:
            self.enabled_by(self.offload(*self.enable_args(), *extra))

        def enabled_by(self, done: Outcome) -> None:
            assert done.code == 0, done
            self.enabled = True
            self.captured_since_extraction = False
            self.source.pending = dict(self.source.lake)
            if patches:
                self.source.view = self.updatable_view()

        def updatable_view(self) -> str:
            state = Repository(load_settings().repo_url).incremental.get_state(self.source.key)
            assert state is not None
            view = next(o for o in state.source_objects if o.kind == "updatable_view")
            return f"{quoted(view.schema)}.{quoted(view.name)}"

        # -- checks --------------------------------------------------------------------------

        def check(self, *allowed: Model, label: str = "") -> None:
            """The user view equals one of ``allowed`` (default: the lake model), no key twice."""
            rows = user_view(self.source)
            keys = [row[0] for row in rows]
            shown = {row[0]: row for row in rows}
            models = allowed or (self.source.lake,)
            twice = sorted({key for key in keys if keys.count(key) > 1}, key=sort_key)
            if twice and self.showing_twice_is_documented():
                rows = sorted(set(rows), key=lambda row: sort_key(row[0]))
                keys = [row[0] for row in rows]
                twice = sorted({key for key in keys if keys.count(key) > 1}, key=sort_key)
            assert not twice, f"{label}: the user view shows keys {twice} twice"
            if not any(shown == model for model in models):
                missing = {k: v for k, v in models[0].items() if shown.get(k) != v}
                extra = {k: v for k, v in shown.items() if models[0].get(k) != v}
                raise AssertionError(
                    f"{label}: the user view differs from the model\n"
                    f"  expected but not shown:\n{show(missing)}\n"
                    f"  shown but not expected:\n{show(extra)}"
                )

        def has_chunks(self) -> bool:
            return hasattr(self, "source") and bool(self.source.chunks)

        def showing_twice_is_documented(self) -> bool:
            # The spec's in-place compaction of an insert-only table shows rows inserted since
            # the last compaction twice until it finishes (it warns to treat it as offline).
            return (
                insert_only and self.compaction is not None and self.compaction_method == "IN_PLACE"
            )

        @invariant()
        def lake_equals_model(self) -> None:
            if hasattr(self, "source"):
                self.check(label="after the step")
                if VERBOSE:
                    print(
                        f"  ok: {len(self.source.lake)} rows, enabled={self.enabled}, "
                        f"compaction={self.compaction_method if self.compaction else None}"
                    )

        # -- source DML ----------------------------------------------------------------------

        def captured(self, row: Row | None = None, *, deleted: Key | Nothing = NOTHING) -> None:
            if not isinstance(deleted, Nothing):
                self.source.pending.pop(deleted, None)
            if row is not None:
                self.source.pending[row[0]] = row
            self.captured_since_extraction = True

        @rule(dml=st.lists(STATEMENTS, min_size=1, max_size=6))
        def source_dml(self, dml: list[Statement]) -> None:
            """DML alone, one transaction per statement."""
            self.run_dml(dml)

        @precondition(lambda self: dialect == "postgresql" and hasattr(self, "source"))
        @rule(dml=DML, refill=st.lists(REFILL, max_size=2))
        def truncate(
            self, dml: list[Statement], refill: list[tuple[str | None, str | None]]
        ) -> None:
            """TRUNCATE, and inserts in the same transaction: the model empties (the
            source's row of every method that captures it) and holds the new rows."""
            self.run_dml(dml)
            source = self.source
            rows = source.truncate(refill)
            trace(f"source: TRUNCATE {source.table}, then {len(rows)} inserts")
            source.app = {row[0]: row for row in rows}
            # The rows of later increments are gone too: an increment copies none.
            source.chunks = [(predicate, {}) for predicate, _ in source.chunks]
            if self.enabled and (triggers or logged):
                source.pending.clear()
                self.captured_since_extraction = True
                for row in rows:
                    self.captured(row)

        def run_dml(self, dml: list[Statement]) -> None:
            for target, *statement in dml:
                if target == "view" and patches and self.enabled:
                    self.view_statement(*statement)  # type: ignore[arg-type]
                else:
                    self.application_statement(*statement)  # type: ignore[arg-type]

        def application_statement(
            self, kind: str, pick: int, name: str | None, amount: str | None
        ) -> None:
            source, table = self.source, self.source.table
            capture = self.enabled and (triggers or logged)
            if insert_only:
                kind = "insert"  # an insert-only method captures nothing else
            if kind in ("insert", "insert null key"):
                null_key = kind == "insert null key" and source.null_keys and not insert_only
                if null_key and (None in source.app or None in source.pending):
                    null_key = False  # a key is unique, NULL included
                row = source.insert(table, name, amount, null_key=null_key)
                source.app[row[0]] = row
                if capture:
                    self.captured(row)
                return
            key = source.pick(table, pick)
            if key == "none":
                return
            if kind == "no-op update":
                source.noop_update(table, key)
                if capture and logged:
                    # The WAL records every updated row, changed or not (the triggers skip
                    # an unchanged row): the source's row ships, also where DML while
                    # disabled left the lake behind.
                    self.captured(source.app[key])
            elif kind == "update":
                row = source.update(table, key, name, amount)
                if source.app[key] != row:
                    source.app[key] = row
                    if capture:
                        self.captured(row)
            elif kind == "key change":
                row = source.change_key(table, key)
                del source.app[key]
                source.app[row[0]] = row
                if capture:
                    self.captured(row, deleted=key)
            else:
                source.delete(table, key)
                del source.app[key]
                if capture:
                    self.captured(deleted=key)

        # -- DML through the updatable view (patches: the application table is unchanged) ----

        def view_statement(
            self, kind: str, pick: int, name: str | None, amount: str | None
        ) -> None:
            source = self.source
            view = source.view
            assert view is not None
            if insert_only or kind in ("insert", "insert null key"):
                self.captured(source.insert(view, name, amount, null_key=False))
                return
            key = source.pick(view, pick, with_null=False)
            if key == "none":
                return
            if kind == "no-op update":
                source.noop_update(view, key)
            elif kind == "update":
                before = source.row_in(view, key)
                row = source.update(view, key, name, amount)
                # The view shows the application's row: setting it to what it shows is no
                # change there, and is not recorded, even where the lake shows other values
                # (an application change UPDATABLE does not capture; docs/patching.md).
                if row != before:
                    self.captured(row)
            elif kind == "key change":
                self.captured(source.change_key(view, key), deleted=key)
            else:
                source.delete(view, key)
                self.captured(deleted=key)

        # -- extraction ----------------------------------------------------------------------

        def extracted(self, done: Outcome) -> None:
            assert done.code == 0, done
            self.source.lake = dict(self.source.pending)
            self.captured_since_extraction = False

        @precondition(lambda self: self.enabled)
        @rule(dml=DML)
        def extract(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            self.extracted(self.offload("--incremental-run-extraction"))

        @precondition(lambda self: self.enabled)
        @rule(dml=DML, point=st.sampled_from(EXTRACTION_POINTS), nth=NTH)
        def extract_killed(self, dml: list[Statement], point: str, nth: int) -> None:
            self.run_dml(dml)
            finished = self.killed(point, nth, "--incremental-run-extraction")
            if finished:
                self.extracted(finished)
                return
            # One batch is one Delta commit: the lake shows all of it or none of it.
            self.check(self.source.lake, self.source.pending, label=f"killed at {point}@{nth}")
            self.extract(dml=[])  # run again, as a user would

        # -- compaction ----------------------------------------------------------------------

        def compaction_flags(self, method: str, retain: bool) -> tuple[str, ...]:
            if self.compaction is not None:
                return self.compaction  # resume with the options it started with
            if self.immediate:  # optimize + vacuum (retention 0: every old file goes)
                return ("--incremental-run-compaction", "--incremental-vacuum-retention-hours=0")
            return (
                "--incremental-run-compaction",
                "--incremental-wait-time=0",
                "--incremental-terminate-compaction",
                *COMPACTIONS[method],
                *(("--incremental-retain-obsolete-objects",) if retain else ()),
            )

        def compacted(self, done: Outcome, flags: tuple[str, ...], method: str) -> None:
            assert done.code == 0, done
            if self.immediate:
                assert "merge mode IMMEDIATE: no delta table to merge" in done.stdout, done
                self.compaction = None
                return
            if "stopped at the acknowledgement step" in done.stdout:
                if self.compaction is None:
                    self.compaction, self.compaction_method = flags, method
            else:
                assert "nothing to compact" in done.stdout or "complete" in done.stdout, done
                self.compaction = None

        @precondition(lambda self: self.enabled)
        @rule(dml=DML, method=st.sampled_from(sorted(COMPACTIONS)), retain=st.booleans())
        def compact(self, dml: list[Statement], method: str, retain: bool) -> None:
            """Start a compaction (it stops at the acknowledgement step), or resume the open one."""
            self.run_dml(dml)
            flags = self.compaction_flags(method, retain)
            self.compacted(self.offload(*flags), flags, method)

        @precondition(lambda self: self.enabled)
        @rule(
            dml=DML,
            method=st.sampled_from(sorted(COMPACTIONS)),
            retain=st.booleans(),
            point=st.sampled_from(COMPACTION_POINTS),
            nth=NTH,
        )
        def compact_killed(
            self, dml: list[Statement], method: str, retain: bool, point: str, nth: int
        ) -> None:
            self.run_dml(dml)
            flags = self.compaction_flags(method, retain)
            if self.compaction is not None:
                method = self.compaction_method
            finished = self.killed(point, nth, *flags)
            if finished:
                self.compacted(finished, flags, method)
                return
            if self.compaction is None:  # it may have started a run: the next compact resumes it
                self.compaction, self.compaction_method = flags, method
            # A compaction never changes what the user view shows. The user runs it again
            # later (the compact rule), after whatever other steps come first.
            self.check(label=f"killed at {point}@{nth}")

        @precondition(lambda self: self.enabled)
        @rule(
            dml=DML,
            method=st.sampled_from(sorted(COMPACTIONS)),
            retain=st.booleans(),
            during=DML,
        )
        def compaction_cycle(
            self, dml: list[Statement], method: str, retain: bool, during: list[Statement]
        ) -> None:
            """Example 6: start (stops at the acknowledgement), DML, extract, finish.

            An unfinished run (a killed one) is finished first, as a user would.
            """
            self.run_dml(dml)
            self.extract(dml=[])
            for _ in range(2):  # killed before it asked for the acknowledgement: twice
                if self.compaction is not None:
                    flags, method = self.compaction, self.compaction_method
                    self.compacted(self.offload(*flags), flags, method)
                    self.extract(dml=[])
            assert self.compaction is None, "the unfinished compaction did not finish"
            flags = self.compaction_flags(method, retain)
            self.compacted(self.offload(*flags), flags, method)
            if self.compaction is None:
                return  # nothing to compact
            self.check(label="compaction at the acknowledgement step")
            self.run_dml(during)
            self.extract(dml=[])
            self.check(label="extraction during the compaction")
            self.compacted(self.offload(*flags), flags, method)
            assert self.compaction is None, "the compaction did not finish"

        # -- disable / enable ----------------------------------------------------------------

        def disabled(self, done: Outcome) -> None:
            if self.captured_since_extraction:
                # Changes still in the changelog: refused, nothing changed.
                assert done.code == 1, f"disable with changes in the changelog: {done}"
                return
            # Changes extracted but not compacted, or an unfinished compaction: refusing is
            # right; a disable that goes ahead must not lose them (the lake check after the step).
            assert done.code in (0, 1, 3), done
            if done.code == 0:
                self.enabled = False
                self.compaction = None
                self.source.view = None
                self.source.pending = dict(self.source.lake)

        @precondition(lambda self: self.enabled)
        @rule(dml=DML)
        def disable(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            self.disabled(self.offload("--incremental-updates-disabled"))

        @precondition(lambda self: self.enabled)
        @rule(dml=DML, point=st.sampled_from(disable_points), nth=NTH)
        def disable_killed(self, dml: list[Statement], point: str, nth: int) -> None:
            self.run_dml(dml)
            finished = self.killed(point, nth, "--incremental-updates-disabled")
            if finished:
                self.disabled(finished)
                return
            self.check(label=f"killed at {point}@{nth}")
            again = self.offload("--incremental-updates-disabled")
            if again.code == 1 and "is not enabled" in again.stderr:
                again = Outcome(0, again.stdout, "")  # it died after its last step: done
            self.disabled(again)

        @precondition(lambda self: not self.enabled)
        @rule(dml=DML)
        def enable(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            self.enable_expecting_success()

        @precondition(lambda self: not self.enabled)
        @rule(dml=DML, point=st.sampled_from(enable_points), nth=NTH)
        def enable_killed(self, dml: list[Statement], point: str, nth: int) -> None:
            self.run_dml(dml)
            finished = self.killed(point, nth, *self.enable_args())
            if finished:
                self.enabled_by(finished)
                return
            self.enable(dml=[])

        @precondition(lambda self: not self.has_chunks())
        @rule(dml=DML, point=st.sampled_from(reset_points), nth=NTH, enable=st.booleans())
        def reset_killed(self, dml: list[Statement], point: str, nth: int, enable: bool) -> None:
            """``--reset-backend-table`` (with the enable, or alone) killed, then run again: the
            lake is a new copy of the source. An enabled table is first disabled the way
            docs/operations.md gives (extract, compact, disable)."""
            self.run_dml(dml)
            if self.enabled:
                self.compaction_cycle(dml=[], method="FULL", retain=False, during=[])
                self.disabled(self.offload("--incremental-updates-disabled"))
                assert not self.enabled, "the disable before a reset was refused"
            args = ("--reset-backend-table", *(self.enable_args() if enable else ()))
            args += self.offload_flags
            done = self.killed(point, nth, *args)
            if done is None:
                # The reset publishes its whole copy in one commit: the old copy or the new one.
                self.check(self.source.lake, self.source.app, label=f"killed at {point}@{nth}")
                done = self.offload(*args)
            assert done.code == 0, done
            self.source.lake = dict(self.source.app)
            if self.note == "added":
                self.note = "carried"  # the copy is made with the source's columns
            if enable:
                self.enabled_by(done)
            else:
                self.source.pending = dict(self.source.lake)

        @precondition(lambda self: self.enabled)
        @rule(dml=DML)
        def enable_again_is_refused(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            done = self.offload(*self.enable_args())
            assert done.code in (1, 2) and len(done.stderr.strip().splitlines()) == 1, done

        # -- partial offload increments --------------------------------------------------------

        def offloaded_increment(self, done: Outcome) -> None:
            if self.compaction is not None and done.code in (1, 3):
                return  # refusing an increment while a compaction is unfinished is right
            assert done.code == 0, done
            _, rows = self.source.chunks.pop(0)
            for model in (self.source.lake, self.source.pending):
                model.update(rows)

        @precondition(lambda self: self.has_chunks())
        @rule(dml=DML)
        def offload_increment(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            predicate, _ = self.source.chunks[0]
            self.offloaded_increment(self.offload(f"--offload-predicate={predicate}"))

        @precondition(lambda self: self.has_chunks())
        @rule(dml=DML, point=st.sampled_from(INCREMENT_POINTS), nth=NTH)
        def offload_increment_killed(self, dml: list[Statement], point: str, nth: int) -> None:
            self.run_dml(dml)
            predicate, rows = self.source.chunks[0]
            finished = self.killed(point, nth, f"--offload-predicate={predicate}")
            if finished:
                self.offloaded_increment(finished)
                return
            with_rows = {**self.source.lake, **rows}
            self.check(self.source.lake, with_rows, label=f"killed at {point}@{nth}")
            again = self.offload(f"--offload-predicate={predicate}")
            if again.code == 1 and "overlap data already offloaded" in again.stderr:
                # Killed after the increment was recorded: a re-run is refused as an overlap
                # (exit 1, nothing changed), and the rows are in the lake.
                _, rows = self.source.chunks.pop(0)
                for model in (self.source.lake, self.source.pending):
                    model.update(rows)
                return
            self.offloaded_increment(again)

        @precondition(
            lambda self: (
                hasattr(self, "source") and self.source.partial and len(self.source.chunks) < 2
            )
        )
        @rule(dml=DML)
        def offload_increment_again_is_refused(self, dml: list[Statement]) -> None:
            self.run_dml(dml)
            done = self.offload(f"--offload-predicate={self.source.first_predicate}")
            assert done.code != 0, done

        # -- staging lake rows for patching ----------------------------------------------------

        @precondition(lambda self: patches and self.enabled)
        @rule(dml=DML, bound=st.sampled_from([5, 50, 2000, None]))
        def stage_lake_rows(self, dml: list[Statement], bound: int | None) -> None:
            self.run_dml(dml)
            key = self.source.shape.key[0]
            predicate = "none" if bound is None else f"column({key}) < numeric({bound})"
            done = self.offload(f"--incremental-stage-lake-rows={predicate}")
            # Refused while patches await extraction; it never changes the lake either way.
            assert done.code in (0, 1), done

        @precondition(lambda self: patches and self.enabled)
        @rule(dml=DML, point=st.sampled_from(STAGE_POINTS), nth=NTH)
        def stage_lake_rows_killed(self, dml: list[Statement], point: str, nth: int) -> None:
            self.run_dml(dml)
            predicate = f"column({self.source.shape.key[0]}) < numeric(2000)"
            finished = self.killed(point, nth, f"--incremental-stage-lake-rows={predicate}")
            if finished:
                assert finished.code in (0, 1), finished
                return
            self.stage_lake_rows(dml=[], bound=2000)

        # -- the source's own hazards ----------------------------------------------------------

        def source_object(self, kind: SourceObject) -> tuple[str, str]:
            """The (schema, name) of one of the method's source objects."""
            state = Repository(load_settings().repo_url).incremental.get_state(self.source.key)
            assert state is not None
            item = next(o for o in state.source_objects if o.kind == kind.value)
            return item.schema, item.name

        def quoted_object(self, kind: SourceObject) -> str:
            schema, name = self.source_object(kind)
            return f"{quoted(schema)}.{quoted(name)}"

        def shipped_seq(self) -> int:
            state = Repository(load_settings().repo_url).incremental.get_state(self.source.key)
            assert state is not None
            return state.shipped_seq or 0

        def ddl(self, statement: str) -> str | None:
            """Run a DBA's statement on the source; the database's refusal, if any."""
            trace(f"source: {statement}")
            try:
                with self.source.engine.begin() as db:
                    db.execute(sa.text(statement))
            except sa.exc.DBAPIError as exc:
                return str(exc.orig)
            return None

        @precondition(lambda self: self.enabled and owns_source_objects)
        @rule(dml=DML)
        def second_installation_is_refused(self, dml: list[Statement]) -> None:
            """Another OFFLOAD_HOME enabling the table is refused (a shared-slot member: it
            has the table in its own slot, then leaves it); this one loses nothing."""
            self.run_dml(dml)
            second = self.home.with_name(f"{self.home.name}_second")
            os.environ["OFFLOAD_HOME"] = str(second)
            try:
                done = self.offload(*self.enable_args(), *self.offload_flags)
                if member:
                    # Each installation has its own shared slot and publication
                    # (test_shared_slot_owners.py): the second one's enable works, and its
                    # disable leaves this installation's publication as it was.
                    assert done.code == 0, done
                    left = self.offload("--incremental-updates-disabled")
                    assert left.code == 0, left
            finally:
                os.environ["OFFLOAD_HOME"] = str(self.home)
                shutil.rmtree(second, ignore_errors=True)
            if member:
                return
            assert done.code != 0 and len(done.stderr.strip().splitlines()) == 1, done
            # A slot carries no ownership mark: gluon cannot tell whose it is, only that it is
            # not recorded here (tests/integration/test_pg_logical.py).
            refusal = "already exists" if logged else "another gluon installation"
            assert refusal in done.stderr, done

        def set_sequence(self, value: int) -> None:
            """Make the changelog hand out ``value + 1`` next (what a DBA's RESTART does)."""
            if dialect == "sqlite":
                _, changelog = self.source_object(SourceObject.CHANGELOG_TABLE)
                self.ddl(f"UPDATE sqlite_sequence SET seq = {value} WHERE name = '{changelog}'")
            else:
                sequence = self.quoted_object(SourceObject.CHANGELOG_SEQUENCE)
                self.ddl(f"ALTER SEQUENCE {sequence} RESTART WITH {value + 1}")

        def sequence_position(self) -> int:
            """The last value the changelog's sequence handed out (0: none)."""
            with self.source.engine.connect() as db:
                if dialect == "sqlite":
                    _, changelog = self.source_object(SourceObject.CHANGELOG_TABLE)
                    statement = "SELECT seq FROM sqlite_sequence WHERE name = :name"
                    value = db.execute(sa.text(statement), {"name": changelog}).scalar()
                    return int(value or 0)
                sequence = self.quoted_object(SourceObject.CHANGELOG_SEQUENCE)
                row = db.execute(sa.text(f"SELECT last_value, is_called FROM {sequence}")).one()
                return int(row[0]) if row[1] else int(row[0]) - 1

        @precondition(
            lambda self: (
                sequenced and self.enabled and self.compaction is None and not self.has_chunks()
            )
        )
        @rule(dml=DML, after=DML)
        def sequence_reset(self, dml: list[Statement], after: list[Statement]) -> None:
            """The changelog's sequence restarts at 1: refused, then the documented way out."""
            self.extract(dml)
            shipped = self.shipped_seq()
            self.set_sequence(0)
            self.run_dml(after)
            climbed_back = self.sequence_position() >= shipped
            done = self.offload("--incremental-run-extraction")
            if shipped == 0:  # nothing shipped yet: nothing to confuse the new changes with
                self.extracted(done)
                return
            if climbed_back and done.code == 0:
                # The new changes took the sequence back to what was shipped: a reused gl_seq
                # is refused while the change it repeats is in the delta table, but one that
                # only repeats a compacted change orders right (the check after the step).
                self.extracted(done)
                return
            assert done.code == 1 and len(done.stderr.strip().splitlines()) == 1, done
            assert "reset" in done.stderr and "Changelog sequence reset" in done.stderr, done
            self.check(label="extraction refused after a sequence reset")
            # docs/operations.md, "Changelog sequence reset": restart above what was shipped,
            # empty the changelog, ship, compact, disable, offload again from the table.
            self.set_sequence(shipped)
            changelog = self.quoted_object(SourceObject.CHANGELOG_TABLE)
            assert self.ddl(f"DELETE FROM {changelog}") is None
            self.source.pending = dict(self.source.lake)  # the rebuild brings their effect
            self.captured_since_extraction = False
            self.compaction_cycle(dml=[], method="FULL", retain=False, during=[])
            done = self.offload("--incremental-updates-disabled")
            assert done.code == 0, done
            self.enabled = False
            rebuilt = self.offload(
                "--reset-backend-table", *self.enable_args(), *self.offload_flags
            )
            self.source.lake = dict(self.source.app)
            self.enabled_by(rebuilt)
            if self.note == "added":
                self.note = "carried"  # the copy is made with the source's columns

        def extract_carrying(self, label: str) -> bool:
            """Extract; True if the source's columns reached the lake (not postponed)."""
            self.extract(dml=[])
            if self.compaction is not None:
                return False  # carried after the compaction under way
            with lake_session(load_settings()) as session:
                names = session.sql(f"SELECT * FROM {self.source.user_view}").columns
            if self.immediate:
                # The user-facing table is the base table itself: it stores the lake partition
                # column a partitioned offload derives (gl_part_<column>), no view hides it.
                names = [name for name in names if not name.lower().startswith("gl_part_")]
            own = len(self.source.shape.columns)
            assert [name.lower() for name in names][own:] == ["note"] * (self.note != "absent"), (
                f"{label}: the user view has columns {names}"
            )
            return True

        @precondition(lambda self: self.enabled and self.note == "absent")
        @rule(dml=DML)
        def add_column(self, dml: list[Statement]) -> None:
            """ADD COLUMN: application DML goes on, the next extraction carries it."""
            assert self.ddl(f"ALTER TABLE {self.source.table} ADD COLUMN note VARCHAR(20)") is None
            self.note = "added"
            self.run_dml(dml)
            if self.extract_carrying("after ADD COLUMN"):
                self.note = "carried"

        @precondition(lambda self: dialect == "postgresql" and self.enabled)
        @precondition(lambda self: self.note == "carried")
        @rule(dml=DML)
        def drop_column_is_refused(self, dml: list[Statement]) -> None:
            """DROP COLUMN: application DML goes on, extraction refuses until it is restored."""
            refused = self.ddl(f"ALTER TABLE {self.source.table} DROP COLUMN note")
            if refused is not None:  # a view of gluon's depends on it: the DBA is told so
                assert "depend" in refused, refused
                return
            self.run_dml(dml)
            done = self.offload("--incremental-run-extraction")
            assert done.code == 1 and len(done.stderr.strip().splitlines()) == 1, done
            assert "restore the column" in done.stderr, done
            self.check(label="extraction refused after DROP COLUMN")
            assert self.ddl(f"ALTER TABLE {self.source.table} ADD COLUMN note VARCHAR(20)") is None
            self.extract_carrying("after the column was restored")

        @precondition(lambda self: dialect == "postgresql" and self.enabled and not self.widened)
        @rule(dml=DML)
        def widen_column(self, dml: list[Statement]) -> None:
            """A longer varchar: application DML goes on, the next extraction carries it."""
            name = quoted(self.source.shape.name)
            statement = f"ALTER TABLE {self.source.table} ALTER COLUMN {name} TYPE VARCHAR(80)"
            refused = self.ddl(statement)
            if refused is not None:  # a view of gluon's depends on it: the DBA is told so
                assert "depend" in refused, refused
                return
            self.widened = True
            self.run_dml(dml)
            self.extract_carrying("after widening a column")

    Lifecycle.__name__ = f"Lifecycle_{dialect}_{method_name}"
    return Lifecycle


def _machine_settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        print_blob=True,
        verbosity=Verbosity.verbose
        if os.environ.get("GLUON_STATEFUL_VERBOSE")
        else Verbosity.normal,
        suppress_health_check=list(HealthCheck),
        # A failure found late in a soak can take an hour to shrink: SHRINK=0 reports it as found.
        phases=[phase for phase in Phase if phase is not Phase.shrink or SHRINK],
    )


MERGE_MODES = ("DEFERRED",)
MODEL_CHOOSES = ("IMMEDIATE", "DEFERRED")
"""The merge-mode cases: the model chooses at enable (its first, simplest example: IMMEDIATE)."""


FIRST_SHAPE = {
    "sqlite-CHANGELOG": KEYWORDS,
    "sqlite-CHANGELOG_INSERT": COMPOSITE,
    "sqlite-UPDATABLE": COMPOSITE,
    "sqlite-UPDATABLE_CHANGELOG": KEYWORDS,
    "sqlite-UPDATABLE_INSERT": KEYWORDS,
    "sqlite-CHANGELOG-merge-mode": COMPOSITE,
    "postgresql-CHANGELOG": RANGE_PARTITIONED,
    "postgresql-CHANGELOG_INSERT": COMPOSITE,
    "postgresql-PG_LOGICAL-own-slot": KEYWORDS,
    "postgresql-UPDATABLE": LIST_PARTITIONED,
    "postgresql-UPDATABLE_CHANGELOG": KEYWORDS,
    "postgresql-UPDATABLE_INSERT": RANGE_PARTITIONED,
    "postgresql-CHANGELOG-merge-mode": LIST_PARTITIONED,
    "postgresql-PG_LOGICAL-own-slot-merge-mode": RANGE_PARTITIONED,
    "postgresql-PG_LOGICAL-member": COMPOSITE,
}
"""The shape of each case's first, simplest example (its second draws any shape): the
default run covers every shape, and each on a trigger method and on PG_LOGICAL or
IMMEDIATE."""


def _case_id(dialect: str, method: str, merge_modes: tuple[str, ...], slot_scope: str) -> str:
    if slot_scope == "database":
        return f"{dialect}-{method}-member"
    own_slot = "-own-slot" if method == "PG_LOGICAL" else ""
    return f"{dialect}-{method}{own_slot}" + ("" if merge_modes == MERGE_MODES else "-merge-mode")


def _case(
    dialect: str, method: str, merge_modes: tuple[str, ...], slot_scope: str = "table"
) -> Any:
    case = _case_id(dialect, method, merge_modes, slot_scope)
    first = FIRST_SHAPE.get(case, PLAIN)
    shapes = (first, *(shape for shape in shapes_for(dialect) if shape != first))
    return pytest.param(dialect, method, merge_modes, shapes, slot_scope, id=case)


def _cases() -> list[Any]:
    return (
        [
            _case(dialect, method, MERGE_MODES)
            for dialect in ("sqlite", "postgresql")
            for method in methods_for(dialect)
        ]
        + [_case(dialect, "CHANGELOG", MODEL_CHOOSES) for dialect in ("sqlite", "postgresql")]
        + [_case("postgresql", "PG_LOGICAL", MODEL_CHOOSES)]
        # A member of its database's shared slot, in either merge mode.
        + [_case("postgresql", "PG_LOGICAL", MODEL_CHOOSES, "database")]
    )


@pytest.mark.timeout(3600)  # shrinking a failure re-runs many sequences
@pytest.mark.parametrize(("dialect", "method", "merge_modes", "shapes", "slot_scope"), _cases())
def test_lifecycle_keeps_the_lake_equal_to_the_model(
    dialect: str,
    method: str,
    merge_modes: tuple[str, ...],
    shapes: tuple[Shape, ...],
    slot_scope: str,
    stateful_tmp: Path,
    request: pytest.FixtureRequest,
) -> None:
    if dialect == "sqlite":

        def make_url() -> str:
            return f"sqlite:///{stateful_tmp / uuid.uuid4().hex[:8]}.db"

    else:
        server: PostgresServer = request.getfixturevalue("pg_server")

        def make_url() -> str:
            return server.create_database(f"lifecycle_{uuid.uuid4().hex[:12]}")

    machine = lifecycle_machine(dialect, method, make_url, merge_modes, shapes, slot_scope)
    test = get_state_machine_test(machine, settings=_machine_settings(), _min_steps=STEPS)
    # Each case draws its own sequences from the one seed (a soak run varies the seed).
    case = _case_id(dialect, method, merge_modes, slot_scope)
    case_seed = SEED + zlib.crc32(case.encode())
    try:
        seed(case_seed)(test)()
    except BaseException as exc:
        exc.add_note(f"GLUON_STATEFUL_SEED={SEED} (this case: hypothesis seed {case_seed})")
        raise
