"""``offload``: offload a table to the lake and keep it in sync (incremental update)."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gluon.cli.actions import Action, refuse_ignored_options
from gluon.cli.common import progress_for, run_command, stderr, stdout
from gluon.cli.options import DebugOption, TableOption, VerboseOption, split_list
from gluon.compact import CompactionMethod, CompactionOptions, CompactionResult, run_compaction
from gluon.compact.abandon import AbandonResult, abandon_compaction
from gluon.compact.options import (
    DEFAULT_DELTA_THRESHOLD,
    DEFAULT_VACUUM_RETENTION_HOURS,
    DEFAULT_WAIT_MINUTES,
)
from gluon.config import Settings
from gluon.discard import DiscardResult, discard_changes
from gluon.errors import UsageError
from gluon.extract import DEFAULT_BATCH_SIZE, ExtractionResult, run_extraction
from gluon.incremental import (
    EnableOptions,
    IncrementalResult,
    disable_incremental,
    enable_incremental,
    repair_capture_objects,
)
from gluon.increments import IncrementRequest
from gluon.insert_only import default_compaction_method
from gluon.naming import TableRef
from gluon.offload import OFFLOADED, OffloadOptions, OffloadResult, offload_table
from gluon.patching import StageOptions, stage_lake_rows
from gluon.repo import Repository

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)


class OffloadType(StrEnum):
    FULL = "FULL"
    INCREMENTAL = "INCREMENTAL"


PROGRAM = "offload"
Result = (
    OffloadResult
    | IncrementalResult
    | ExtractionResult
    | CompactionResult
    | AbandonResult
    | DiscardResult
)


@app.command(
    help=(
        "Offload SCHEMA.TABLE from the source database (GLUON_SOURCE_URL) into the lake and "
        "keep it up to date with incremental update. Without -x, only print the steps it "
        "would run and change nothing."
    )
)
def offload(
    ctx: typer.Context,
    table: TableOption,
    execute: Annotated[
        bool, typer.Option("-x", "--execute", help="Run the steps (without it: show them only).")
    ] = False,
    reset_backend_table: Annotated[
        bool,
        typer.Option(
            "--reset-backend-table",
            help="Offload a table that is already offloaded again, replacing its lake data.",
        ),
    ] = False,
    partition_columns: Annotated[
        str | None,
        typer.Option(
            "--partition-columns",
            help="Comma-separated source columns that partition the lake base table.",
        ),
    ] = None,
    partition_granularity: Annotated[
        str | None,
        typer.Option(
            "--partition-granularity",
            help=(
                "How each partition column is bucketed: Y, M or D for dates (default M), a range "
                "width for numbers (e.g. 1000), a prefix length for strings; one value for all "
                "columns or one per column, comma-separated."
            ),
        ),
    ] = None,
    offload_type: Annotated[
        OffloadType | None,
        typer.Option(
            "--offload-type",
            case_sensitive=False,
            help="FULL: the whole table ends up in the lake (100/0, or 100/10 when offloaded "
            "in parts); INCREMENTAL: only older data is offloaded (90/10). Partial offloads "
            "default to INCREMENTAL.",
        ),
    ] = None,
    offload_predicate: Annotated[
        str | None,
        typer.Option(
            "--offload-predicate",
            help='Offload the rows matching a predicate, e.g. "column(SOLD_ON) < '
            'date(2020-01-01) and column(REGION) = string("EU")" (values: numeric(), '
            "string(), date(), datetime(); and/or/not, parentheses, is [not] null).",
        ),
    ] = None,
    less_than_value: Annotated[
        str | None,
        typer.Option(
            "--less-than-value",
            help="Offload the rows of a RANGE-partitioned table below this partition key value "
            "(and above the previous one).",
        ),
    ] = None,
    older_than_date: Annotated[
        str | None,
        typer.Option(
            "--older-than-date",
            help="Like --less-than-value for a date partition key (YYYY-MM-DD).",
        ),
    ] = None,
    partition_names: Annotated[
        str | None,
        typer.Option(
            "--partition-names",
            help="Offload these source partitions (comma-separated names).",
        ),
    ] = None,
    updates_enabled: Annotated[
        bool,
        typer.Option(
            "--incremental-updates-enabled",
            help="Enable incremental update (with the initial offload, or for an offloaded table).",
        ),
    ] = False,
    extraction_method: Annotated[
        str | None,
        typer.Option(
            "--incremental-extraction-method",
            help=(
                "How changes are captured: CHANGELOG (trigger on the table), UPDATABLE (patch "
                "through the updatable view), UPDATABLE_CHANGELOG (both), CHANGELOG_INSERT and "
                "UPDATABLE_INSERT (insert-only), ORA_ROWSCN (Oracle, no deletes)."
            ),
        ),
    ] = None,
    key_columns: Annotated[
        str | None,
        typer.Option(
            "--incremental-key-columns",
            help="Comma-separated columns identifying a row, for tables without a primary key.",
        ),
    ] = None,
    no_verify_primary_key: Annotated[
        bool,
        typer.Option(
            "--incremental-no-verify-primary-key",
            help="Skip checking that the key columns identify one row each (you guarantee it). "
            "Merging methods: skips the data check of --incremental-key-columns. *_INSERT "
            "methods: enable without a primary key or unique constraint on the key columns; "
            "risk: the lake appends every insert, so a key inserted twice shows twice in the "
            "user view; use it only when the application guarantees unique keys.",
        ),
    ] = False,
    changelog_table: Annotated[
        str | None,
        typer.Option(
            "--incremental-changelog-table",
            help="Name ([SCHEMA.]TABLE) of the changelog table instead of SCHEMA_H.TABLE_LOG.",
        ),
    ] = None,
    take_over_objects: Annotated[
        bool,
        typer.Option(
            "--incremental-take-over-objects",
            help="With -enabled: drop and re-create capture objects and a delta table that "
            "another gluon installation (or a gluon without ownership markers) left behind; "
            "changes waiting in them are discarded. With -disabled: drop such leftovers too. "
            "Objects not shaped like gluon's are never touched.",
        ),
    ] = False,
    recreate_capture_objects: Annotated[
        bool,
        typer.Option(
            "--incremental-recreate-capture-objects",
            help="With -enabled on an enabled table: re-create its capture objects that were "
            "dropped outside gluon and replace its triggers (re-enabling a disabled one), so "
            "the application's DML works and is captured again.",
        ),
    ] = False,
    updates_disabled: Annotated[
        bool,
        typer.Option(
            "--incremental-updates-disabled",
            help="Disable incremental update and drop its objects (nothing may be outstanding).",
        ),
    ] = False,
    run_extraction_flag: Annotated[
        bool,
        typer.Option(
            "--incremental-run-extraction",
            help="Ship the captured changes to the lake (one extraction per table at a time).",
        ),
    ] = False,
    batch_size: Annotated[
        int,
        typer.Option(
            "--incremental-batch-size",
            help="Changes per Delta commit when an extraction has a large backlog.",
        ),
    ] = DEFAULT_BATCH_SIZE,
    run_compaction_flag: Annotated[
        bool,
        typer.Option(
            "--incremental-run-compaction",
            help="Merge the extracted changes into the base table (resumes an unfinished run).",
        ),
    ] = False,
    terminate_compaction: Annotated[
        bool,
        typer.Option(
            "--incremental-terminate-compaction",
            help="Stop (exit 0) when the compaction reaches the change-ingestion acknowledgement "
            "step; run an extraction, then the compaction again (single-session compaction).",
        ),
    ] = False,
    full_compaction: Annotated[
        bool,
        typer.Option(
            "--incremental-full-compaction",
            help="Compact into a new base table written in one go (default for insert-only "
            "methods).",
        ),
    ] = False,
    in_place_compaction: Annotated[
        bool,
        typer.Option(
            "--incremental-in-place-compaction",
            help="Rewrite only the base partitions that changes touch (default, except for "
            "CHANGELOG_INSERT/UPDATABLE_INSERT, whose user view then shows the rows inserted "
            "since the last compaction twice until the run ends).",
        ),
    ] = False,
    partition_wise_full_compaction: Annotated[
        bool,
        typer.Option(
            "--incremental-partition-wise-full-compaction",
            help="Compact into a new base table written one partition at a time.",
        ),
    ] = False,
    delta_threshold: Annotated[
        int,
        typer.Option(
            "--incremental-delta-threshold",
            help="Compact only when the delta table holds at least this many changes.",
        ),
    ] = DEFAULT_DELTA_THRESHOLD,
    wait_time: Annotated[
        float,
        typer.Option(
            "--incremental-wait-time",
            help=(
                "Minutes after the view switch before old objects are dropped, so that "
                "running queries finish (0: none)."
            ),
        ),
    ] = DEFAULT_WAIT_MINUTES,
    retain_obsolete_objects: Annotated[
        bool,
        typer.Option(
            "--incremental-retain-obsolete-objects",
            help="Keep the old base table, partitions and control partitions (no longer "
            "managed by gluon afterwards).",
        ),
    ] = False,
    without_snapshot: Annotated[
        bool,
        typer.Option(
            "--incremental-run-compaction-without-snapshot",
            help="Compact even when the pre-compaction Delta versions cannot be recorded.",
        ),
    ] = False,
    vacuum_retention_hours: Annotated[
        float,
        typer.Option(
            "--incremental-vacuum-retention-hours",
            help="After a compaction, delete Delta files unused for this many hours (older "
            "versions can no longer be read with VERSION AS OF).",
        ),
    ] = DEFAULT_VACUUM_RETENTION_HOURS,
    abandon_compaction_flag: Annotated[
        bool,
        typer.Option(
            "--incremental-abandon-compaction",
            help="End the unfinished compaction run before its views switch: withdraw its "
            "diversion request and delete the tables it wrote (after the switch it must be "
            "finished instead). Without -x: show what it would do.",
        ),
    ] = False,
    discard_changes_flag: Annotated[
        bool,
        typer.Option(
            "--incremental-discard-changes",
            help="Delete the changes not yet compacted (changelog and delta table), e.g. "
            "before disabling when they are not wanted; says how many. Without -x: only count "
            "them.",
        ),
    ] = False,
    stage_lake_rows_predicate: Annotated[
        str | None,
        typer.Option(
            "--incremental-stage-lake-rows",
            help="UPDATABLE methods: copy the lake rows matching a predicate (e.g. "
            "'column(SOLD_ON) >= date(2017-01-01)') into the lake-rows table, so the updatable "
            "view shows them for patching; 'none' empties it. See docs/patching.md.",
        ),
    ] = None,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    actions = [
        updates_enabled,
        updates_disabled,
        run_extraction_flag,
        run_compaction_flag,
        abandon_compaction_flag,
        discard_changes_flag,
    ]

    def body(settings: Settings) -> Result:
        ref = TableRef.parse(table)
        if sum(actions) > 1:
            raise UsageError(
                "use only one of --incremental-updates-enabled, --incremental-updates-disabled, "
                "--incremental-run-extraction, --incremental-run-compaction, "
                "--incremental-abandon-compaction, --incremental-discard-changes"
            )
        if sum([full_compaction, partition_wise_full_compaction, in_place_compaction]) > 1:
            raise UsageError(
                "use only one of --incremental-full-compaction, "
                "--incremental-partition-wise-full-compaction and "
                "--incremental-in-place-compaction"
            )
        if stage_lake_rows_predicate is not None:
            if sum(actions):
                raise UsageError(
                    "--incremental-stage-lake-rows is a command of its own: run it without "
                    "--incremental-updates-enabled/-disabled, -run-extraction, -run-compaction"
                )
            refuse_ignored_options(ctx, Action.STAGE_LAKE_ROWS)
            staging = StageOptions(table=ref, predicate=stage_lake_rows_predicate, execute=execute)
            return stage_lake_rows(settings, staging, progress_for(quiet=False))
        offload_options = OffloadOptions(
            table=ref,
            execute=execute,
            reset_backend_table=reset_backend_table,
            partition_columns=split_list(partition_columns),
            partition_granularity=split_list(partition_granularity),
            increment=IncrementRequest(
                offload_type=offload_type.value if offload_type else None,
                offload_predicate=offload_predicate,
                less_than_value=less_than_value,
                older_than_date=older_than_date,
                partition_names=split_list(partition_names),
            ),
        )
        progress = progress_for(quiet=False)
        if abandon_compaction_flag:
            refuse_ignored_options(ctx, Action.ABANDON_COMPACTION)
            return abandon_compaction(settings, ref, execute=execute)
        if discard_changes_flag:
            refuse_ignored_options(ctx, Action.DISCARD_CHANGES)
            return discard_changes(settings, ref, execute=execute)
        if run_extraction_flag:
            refuse_ignored_options(ctx, Action.EXTRACTION)
            if not execute:
                raise UsageError("--incremental-run-extraction needs -x")
            return run_extraction(settings, ref, batch_size=batch_size, progress=progress)
        if run_compaction_flag:
            refuse_ignored_options(ctx, Action.COMPACTION)
            if not execute:
                raise UsageError("--incremental-run-compaction needs -x")
            method = (
                CompactionMethod.FULL
                if full_compaction
                else CompactionMethod.PARTITION_WISE_FULL
                if partition_wise_full_compaction
                else CompactionMethod.IN_PLACE
                if in_place_compaction
                else default_compaction_method(Repository(settings.repo_url), ref.key)
            )
            compaction = CompactionOptions(
                table=ref,
                method=method,
                terminate_at_acknowledgement=terminate_compaction,
                delta_threshold=delta_threshold,
                wait_minutes=wait_time,
                retain_obsolete_objects=retain_obsolete_objects,
                without_snapshot=without_snapshot,
                vacuum_retention_hours=vacuum_retention_hours,
            )
            return run_compaction(settings, compaction, progress, warn=_warn_now)
        if take_over_objects and not (updates_enabled or updates_disabled):
            raise UsageError(
                "--incremental-take-over-objects goes with --incremental-updates-enabled or "
                "--incremental-updates-disabled"
            )
        if recreate_capture_objects and not updates_enabled:
            raise UsageError(
                "--incremental-recreate-capture-objects goes with --incremental-updates-enabled"
            )
        if updates_disabled:
            refuse_ignored_options(ctx, Action.DISABLE)
            return disable_incremental(
                settings, ref, execute=execute, take_over_objects=take_over_objects
            )
        if updates_enabled:
            initial = _needs_offload(settings, ref, reset_backend_table)
            refuse_ignored_options(ctx, Action.ENABLE_WITH_OFFLOAD if initial else Action.ENABLE)
            if not extraction_method:
                raise UsageError(
                    "--incremental-updates-enabled needs --incremental-extraction-method=METHOD"
                )
            options = EnableOptions(
                table=ref,
                method=extraction_method,
                key_columns=split_list(key_columns),
                no_verify_primary_key=no_verify_primary_key,
                changelog_table=changelog_table,
                execute=execute,
                take_over_objects=take_over_objects,
                recreate_capture_objects=recreate_capture_objects,
            )
            if recreate_capture_objects:
                return repair_capture_objects(settings, options)
            return enable_incremental(
                settings, options, offload_options if initial else None, progress
            )
        refuse_ignored_options(ctx, Action.OFFLOAD)
        return offload_table(settings, offload_options, progress)

    def validate() -> None:
        TableRef.parse(table)
        check_option_values(
            batch_size=batch_size,
            delta_threshold=delta_threshold,
            wait_time=wait_time,
            vacuum_retention_hours=vacuum_retention_hours,
            offload_predicate=offload_predicate,
        )

    result, log_path = run_command(
        PROGRAM,
        body,
        subject=table.replace(".", "_"),
        validate=validate,
        verbose=verbose,
        debug=debug,
    )
    _render(result, log_path)


MAX_BATCH_SIZE = 2**31 - 1
"""The largest batch every source's LIMIT/FETCH FIRST and the DBAPI fetch size accept."""


def check_option_values(
    *,
    batch_size: int,
    delta_threshold: int,
    wait_time: float,
    vacuum_retention_hours: float,
    offload_predicate: str | None,
) -> None:
    """Refuse option values no code path can take, before anything runs (one line, exit 2;
    Click's own range checks print a usage block instead).

    Raises:
        UsageError: a value out of range, not finite, or an empty predicate.
    """
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise UsageError(
            f"--incremental-batch-size must be between 1 and {MAX_BATCH_SIZE}, found {batch_size}"
        )
    if delta_threshold < 0:
        raise UsageError(
            f"--incremental-delta-threshold must be at least 0, found {delta_threshold}"
        )
    for option, value in (
        ("--incremental-wait-time", wait_time),
        ("--incremental-vacuum-retention-hours", vacuum_retention_hours),
    ):
        if not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{option} must be a finite number of at least 0, found {value}")
    if offload_predicate is not None and not offload_predicate.strip():
        raise UsageError(
            "--offload-predicate is empty: give the rows to offload, e.g. "
            "'column(SOLD_ON) < date(2020-01-01)', or leave the option out to offload every row"
        )


def _warn_now(message: str) -> None:
    stderr.print(f"{PROGRAM}: warning: {message}", markup=False)


def _needs_offload(settings: Settings, ref: TableRef, reset: bool) -> bool:
    record = Repository(settings.repo_url, create=True).get_table(ref.key)
    return reset or record is None or record.status != OFFLOADED


def _render(result: Result, log_path: Path | None) -> None:
    if isinstance(result, AbandonResult | DiscardResult):
        _render_plan_or_message(result)
    elif isinstance(result, CompactionResult):
        if result.warning:
            stderr.print(f"offload: warning: {result.warning}", markup=False)
        if result.notice:
            stderr.print(f"offload: note: {result.notice}", markup=False)
        stdout.print(f"{result.table_key}: {result.message}", markup=False)
    elif isinstance(result, ExtractionResult):
        ack = ", acknowledged change ingestion diversion" if result.acknowledged else ""
        stdout.print(
            f"Extracted {result.rows_written} changes of {result.table_key} to control partition "
            f"{result.control_partition} in {result.seconds:.1f}s{ack}"
        )
        for line in result.screen.messages() if result.screen else ():
            stderr.print(f"offload: warning: {result.table_key}: {line}", markup=False)
    elif not result.executed:
        stdout.print(f"Steps for {result.table_key} (nothing was changed; add -x to run them):")
        for number, step in enumerate(result.steps, start=1):
            stdout.print(f"  {number}. {step.description}")
    elif isinstance(result, IncrementalResult):
        stdout.print(result.message[:1].upper() + result.message[1:] if result.message else "Done")
    else:
        stdout.print(
            f"Offloaded {result.table_key}: {result.rows} rows, query it as {result.user_view}"
        )
    stdout.print(f"Log file: {log_path}")


def _render_plan_or_message(result: AbandonResult | DiscardResult) -> None:
    if result.executed:
        stdout.print(result.message[:1].upper() + result.message[1:], markup=False)
        return
    stdout.print(f"Steps for {result.table_key} (nothing was changed; add -x to run them):")
    descriptions = (
        [step.description for step in result.steps]
        if isinstance(result, AbandonResult)
        else result.steps
    )
    for number, description in enumerate(descriptions, start=1):
        stdout.print(f"  {number}. {description}", markup=False)


def main() -> None:
    app(prog_name=PROGRAM)
