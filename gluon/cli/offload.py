"""``offload``: offload a table to the lake and keep it in sync (incremental update)."""

# No ``from __future__ import annotations`` here: typer reads the options from the
# annotations of ``offload``, and string annotations cost it an eval each at every start
# (about 0.02 s of CPU for this command's 38 options; issue 14).

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gluon.cli.actions import OffloadArguments, given_flags
from gluon.cli.common import run_command, say, stderr, stdout
from gluon.cli.offload_actions import PROGRAM, dispatch, validate
from gluon.cli.options import DebugOption, TableOption, VerboseOption
from gluon.compact.options import (
    DEFAULT_DELTA_THRESHOLD,
    DEFAULT_VACUUM_RETENTION_HOURS,
    DEFAULT_WAIT_MINUTES,
)
from gluon.extract import DEFAULT_BATCH_SIZE, ExtractionResult
from gluon.increments import RequestedOffloadType

if TYPE_CHECKING:
    from gluon.cli.offload_actions import Result
    from gluon.compact import CompactionResult
    from gluon.compact.abandon import AbandonResult
    from gluon.discard import DiscardResult
    from gluon.incremental import IncrementalResult
    from gluon.offload import OffloadResult
    from gluon.set_aside import SetAsideResult

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)


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
        RequestedOffloadType | None,
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
    merge_mode: Annotated[
        str | None,
        typer.Option(
            "--incremental-merge-mode",
            help="With -enabled: DEFERRED (default: changes go to a delta table read through "
            "views until a compaction merges them) or IMMEDIATE (each extraction merges its "
            "changes into the base table, a plain Delta table any Delta reader sees current).",
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
    acknowledgement_timeout: Annotated[
        float | None,
        typer.Option(
            "--incremental-acknowledgement-timeout",
            help=(
                "Seconds a compaction waits for a running extraction to acknowledge its change "
                "ingestion diversion before it fails (default: no limit; with no extraction "
                "running, the compaction acknowledges it itself)."
            ),
        ),
    ] = None,
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
    set_aside_changes: Annotated[
        str | None,
        typer.Option(
            "--incremental-set-aside-changes",
            metavar="GL_SEQ[,GL_SEQ...]",
            help="Move the named changes, which an extraction refused because the lake cannot "
            "take a value of theirs, out of the changelog (PG_LOGICAL: the slot's reads skip "
            "them) into a repository record that status and the report list, so the later "
            "changes ship. Only a change the extraction refuses can be set aside. Without -x: "
            "show what it would do.",
        ),
    ] = None,
    stage_lake_rows_predicate: Annotated[
        str | None,
        typer.Option(
            "--incremental-stage-lake-rows",
            help="UPDATABLE methods: copy the lake rows matching a predicate (e.g. "
            "'column(SOLD_ON) >= date(2017-01-01)') into the lake-rows table, so the updatable "
            "view shows them for patching; 'none' empties it. See docs/patching.md.",
        ),
    ] = None,
    print_grants: Annotated[
        bool,
        typer.Option(
            "--incremental-print-grants",
            help="Oracle: print the GRANT statements a DBA runs so gluon's user can enable "
            "--incremental-extraction-method on the table (19c and 23ai); sends nothing.",
        ),
    ] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    arguments = OffloadArguments(
        table=table,
        execute=execute,
        reset_backend_table=reset_backend_table,
        partition_columns=partition_columns,
        partition_granularity=partition_granularity,
        offload_type=offload_type,
        offload_predicate=offload_predicate,
        less_than_value=less_than_value,
        older_than_date=older_than_date,
        partition_names=partition_names,
        updates_enabled=updates_enabled,
        extraction_method=extraction_method,
        key_columns=key_columns,
        no_verify_primary_key=no_verify_primary_key,
        changelog_table=changelog_table,
        merge_mode=merge_mode,
        take_over_objects=take_over_objects,
        recreate_capture_objects=recreate_capture_objects,
        updates_disabled=updates_disabled,
        run_extraction_flag=run_extraction_flag,
        batch_size=batch_size,
        run_compaction_flag=run_compaction_flag,
        terminate_compaction=terminate_compaction,
        full_compaction=full_compaction,
        in_place_compaction=in_place_compaction,
        partition_wise_full_compaction=partition_wise_full_compaction,
        delta_threshold=delta_threshold,
        wait_time=wait_time,
        acknowledgement_timeout=acknowledgement_timeout,
        retain_obsolete_objects=retain_obsolete_objects,
        without_snapshot=without_snapshot,
        vacuum_retention_hours=vacuum_retention_hours,
        abandon_compaction_flag=abandon_compaction_flag,
        discard_changes_flag=discard_changes_flag,
        stage_lake_rows_predicate=stage_lake_rows_predicate,
        print_grants=print_grants,
        set_aside_changes=set_aside_changes,
        given=given_flags(ctx),
    )
    result, log_path = run_command(
        PROGRAM,
        partial(dispatch, arguments),
        subject=table.replace(".", "_"),
        validate=partial(validate, arguments),
        verbose=verbose,
        debug=debug,
    )
    _render(result, log_path)


def _render(result: "Result", log_path: Path | None) -> None:
    # An extraction's lines are plain (``say``): a no-op run, scheduled every few minutes,
    # does not import rich (issue 14).
    if isinstance(result, ExtractionResult):
        ack = ", acknowledged change ingestion diversion" if result.acknowledged else ""
        say(result.summary() + ack)
        for line in result.screen.messages() if result.screen else ():
            say(f"offload: warning: {result.table_key}: {line}", err=True)
        if result.row_counts is not None and result.row_counts.dropped:
            line = result.row_counts.warning(result.table_key, "at the end of this extraction")
            say(f"offload: warning: {line}", err=True)
    else:
        _render_other(result)
    say(f"Log file: {log_path}")


def _render_other(
    result: "OffloadResult | IncrementalResult | CompactionResult | AbandonResult | DiscardResult"
    " | SetAsideResult",
) -> None:
    # Imported here, after the action that made the result has imported its service: an
    # extraction renders above without importing the other services (issue 14).
    from gluon.compact import CompactionResult
    from gluon.compact.abandon import AbandonResult
    from gluon.discard import DiscardResult
    from gluon.incremental import IncrementalResult
    from gluon.set_aside import SetAsideResult

    if isinstance(result, AbandonResult | DiscardResult | SetAsideResult):
        _render_plan_or_message(result)
    elif isinstance(result, CompactionResult):
        if result.warning:
            stderr.print(f"offload: warning: {result.warning}", markup=False)
        if result.notice:
            stderr.print(f"offload: note: {result.notice}", markup=False)
        stdout.print(f"{result.table_key}: {result.message}", markup=False)
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


def _render_plan_or_message(result: "AbandonResult | DiscardResult | SetAsideResult") -> None:
    from gluon.compact.abandon import AbandonResult

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
