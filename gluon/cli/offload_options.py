"""Every ``offload`` option, declared once: a field of ``OffloadArguments`` (``gluon.cli.declare``).

A field's name is the parameter name, its annotation the type, its default the default;
``option(...)`` adds the flags, the help, the check run before anything else, and the
actions that accept it. ``gluon/cli/offload.py`` builds the command's parameters from
these fields, ``gluon/cli/actions.py`` the accepted-options table and the refusal of
ignored options, and a test compares them with the option table of docs/architecture.md
§5. Adding an option is one field here (and its rule with its service, and its row in §5).
"""

# No ``from __future__ import annotations``: the field types are read as objects.

from dataclasses import dataclass, field
from enum import StrEnum

from gluon.cli.declare import option
from gluon.cli.options import split_list
from gluon.compact.options import (
    DEFAULT_DELTA_THRESHOLD,
    DEFAULT_VACUUM_RETENTION_HOURS,
    DEFAULT_WAIT_MINUTES,
    CompactionMethod,
    check_amount,
    check_count,
)
from gluon.errors import UsageError
from gluon.extract.run import DEFAULT_BATCH_SIZE, IMMEDIATE_BATCH_SIZE, check_batch_size
from gluon.methods import method_choices
from gluon.naming import TableRef
from gluon.offload.increments import RequestedOffloadType, check_offload_predicate
from gluon.states import merge_mode_choices


class Action(StrEnum):
    """What one ``offload`` command does; the value names it in messages."""

    OFFLOAD = "an offload (without --incremental-* actions)"
    ENABLE_WITH_OFFLOAD = "--incremental-updates-enabled with the initial offload"
    ENABLE = (
        "--incremental-updates-enabled of a table that is already offloaded (offload options "
        "apply to its initial offload only; run a partial offload as a command of its own)"
    )
    DISABLE = "--incremental-updates-disabled"
    EXTRACTION = "--incremental-run-extraction"
    COMPACTION = "--incremental-run-compaction"
    STAGE_LAKE_ROWS = "--incremental-stage-lake-rows"
    ABANDON_COMPACTION = "--incremental-abandon-compaction"
    DISCARD_CHANGES = "--incremental-discard-changes"
    PRINT_GRANTS = "--incremental-print-grants"
    SET_ASIDE_CHANGES = "--incremental-set-aside-changes"


EVERY_ACTION = frozenset(Action)
OFFLOADING = frozenset({Action.OFFLOAD, Action.ENABLE_WITH_OFFLOAD})
"""The actions that offload the table (options of the offload itself)."""
ENABLING = frozenset({Action.ENABLE_WITH_OFFLOAD, Action.ENABLE})
COMPACTING = frozenset({Action.COMPACTION})


def _table(flag: str, value: str) -> None:
    TableRef.parse(value)


def _predicate(flag: str, value: str | None) -> None:
    check_offload_predicate(value)


def _distinct_columns(flag: str, value: str | None) -> None:
    seen: set[str] = set()
    for name in split_list(value):
        if name.lower() in seen:
            raise UsageError(f"{flag}={value} names {name} twice: name each key column once")
        seen.add(name.lower())


def _batch_size(flag: str, value: int | None) -> None:
    if value is not None:
        check_batch_size(value)


def _gl_seqs(flag: str, value: str | None) -> None:
    if value is not None:
        from gluon.extract.set_aside import parse_seqs  # only when given: an extraction skips it

        parse_seqs(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadArguments:
    """Everything one ``offload`` command line holds (the command's parameters, by name)."""

    table: str = option(
        "-t",
        "--table",
        help=(
            "The table as SCHEMA.TABLE (case-insensitive); quote a part with spaces or "
            'other characters: shop."Order Items".'
        ),
        accepted_by=EVERY_ACTION,
        check=_table,
        show_default=False,
    )
    execute: bool = option(
        "-x",
        "--execute",
        default=False,
        help="Run the steps (without it: show them only).",
        accepted_by=EVERY_ACTION,
    )
    reset_backend_table: bool = option(
        "--reset-backend-table",
        default=False,
        help="Offload a table that is already offloaded again, replacing its lake data.",
        accepted_by=OFFLOADING,
    )
    partition_columns: str | None = option(
        "--partition-columns",
        default=None,
        help="Comma-separated source columns that partition the lake base table.",
        accepted_by=OFFLOADING,
    )
    partition_granularity: str | None = option(
        "--partition-granularity",
        default=None,
        help=(
            "How each partition column is bucketed: Y, M or D for dates (default M), a range "
            "width for numbers (e.g. 1000), a prefix length for strings; one value for all "
            "columns or one per column, comma-separated."
        ),
        accepted_by=OFFLOADING,
    )
    # ``option`` makes a dataclass field (ruff takes the enum type for a mutable default).
    offload_type: RequestedOffloadType | None = option(  # noqa: RUF009
        "--offload-type",
        default=None,
        help="FULL: the whole table ends up in the lake (100/0, or 100/10 when offloaded "
        "in parts); INCREMENTAL: only older data is offloaded (90/10). Partial offloads "
        "default to INCREMENTAL.",
        accepted_by=OFFLOADING,
        case_sensitive=False,
    )
    offload_predicate: str | None = option(
        "--offload-predicate",
        default=None,
        help='Offload the rows matching a predicate, e.g. "column(SOLD_ON) < '
        'date(2020-01-01) and column(REGION) = string("EU")" (values: numeric(), '
        "string(), date(), datetime(); and/or/not, parentheses, is [not] null).",
        accepted_by=OFFLOADING,
        check=_predicate,
    )
    less_than_value: str | None = option(
        "--less-than-value",
        default=None,
        help="Offload the rows of a RANGE-partitioned table below this partition key value "
        "(and above the previous one).",
        accepted_by=OFFLOADING,
    )
    older_than_date: str | None = option(
        "--older-than-date",
        default=None,
        help="Like --less-than-value for a date partition key (YYYY-MM-DD).",
        accepted_by=OFFLOADING,
    )
    partition_names: str | None = option(
        "--partition-names",
        default=None,
        help="Offload these source partitions (comma-separated names).",
        accepted_by=OFFLOADING,
    )
    subpartition_names: str | None = option(
        "--subpartition-names",
        default=None,
        help="Offload these subpartitions of a two-level (composite) partitioned table "
        "(comma-separated names; subpartition-based offload).",
        accepted_by=OFFLOADING,
    )
    updates_enabled: bool = option(
        "--incremental-updates-enabled",
        default=False,
        help="Enable incremental update (with the initial offload, or for an offloaded table).",
        accepted_by=ENABLING,
        names_action=Action.ENABLE,
    )
    extraction_method: str | None = option(
        "--incremental-extraction-method",
        default=None,
        help=lambda: f"How changes are captured: {method_choices()}.",
        accepted_by=ENABLING | {Action.PRINT_GRANTS},
    )
    key_columns: str | None = option(
        "--incremental-key-columns",
        default=None,
        help="Comma-separated columns identifying a row, for tables without a primary key "
        "(each named once).",
        accepted_by=ENABLING,
        check=_distinct_columns,
    )
    no_verify_primary_key: bool = option(
        "--incremental-no-verify-primary-key",
        default=False,
        help="Skip checking that the key columns identify one row each (you guarantee it). "
        "Merging methods: skips the data check of --incremental-key-columns. *_INSERT "
        "methods: enable without a primary key or unique constraint on the key columns; "
        "risk: the lake appends every insert, so a key inserted twice shows twice in the "
        "user view; use it only when the application guarantees unique keys.",
        accepted_by=ENABLING,
    )
    changelog_table: str | None = option(
        "--incremental-changelog-table",
        default=None,
        help="Name ([SCHEMA.]TABLE) of the changelog table instead of SCHEMA_H.TABLE_LOG.",
        accepted_by=ENABLING | {Action.PRINT_GRANTS},
    )
    merge_mode: str | None = option(
        "--incremental-merge-mode",
        default=None,
        help=lambda: f"With -enabled: {merge_mode_choices()}.",
        accepted_by=ENABLING,
    )
    pg_logical_slot: str | None = option(
        "--incremental-pg-logical-slot",
        default=None,
        help="With -enabled and PG_LOGICAL: database (the default: the table joins the one "
        "pgoutput slot and publication its database's tables share, decoded once per "
        "extraction for all of them; a table that cannot be a member, with stored generated "
        "columns, no replica identity a publication can use or not owned by the user, gets a "
        "slot of its own and the log says why) or "
        "table (a replication slot of the table's own, decoding all the WAL; "
        "docs/operations.md, 'One slot per database').",
        accepted_by=ENABLING,
    )
    take_over_objects: bool = option(
        "--incremental-take-over-objects",
        default=False,
        help="With -enabled: drop and re-create capture objects and a delta table that "
        "another gluon installation (or a gluon without ownership markers) left behind; "
        "changes waiting in them are discarded. With -disabled: drop such leftovers too. "
        "Objects not shaped like gluon's are never touched.",
        accepted_by=ENABLING | {Action.DISABLE},
    )
    recreate_capture_objects: bool = option(
        "--incremental-recreate-capture-objects",
        default=False,
        help="With -enabled on an enabled table: re-create its capture objects that were "
        "dropped outside gluon and replace its triggers (re-enabling a disabled one), so "
        "the application's DML works and is captured again.",
        accepted_by=ENABLING,
    )
    updates_disabled: bool = option(
        "--incremental-updates-disabled",
        default=False,
        help="Disable incremental update and drop its objects (nothing may be outstanding).",
        accepted_by={Action.DISABLE},
        names_action=Action.DISABLE,
    )
    run_extraction_flag: bool = option(
        "--incremental-run-extraction",
        default=False,
        help="Ship the captured changes to the lake (one extraction per table at a time).",
        accepted_by={Action.EXTRACTION},
        names_action=Action.EXTRACTION,
    )
    batch_size: int | None = option(
        "--incremental-batch-size",
        default=None,
        help=(
            "Changes per Delta commit when an extraction has a large backlog (default "
            f"{DEFAULT_BATCH_SIZE}; {IMMEDIATE_BATCH_SIZE} in merge mode IMMEDIATE, where "
            "each commit is a merge rewriting the base files its keys touch)."
        ),
        accepted_by={Action.EXTRACTION},
        check=_batch_size,
    )
    run_compaction_flag: bool = option(
        "--incremental-run-compaction",
        default=False,
        help="Merge the extracted changes into the base table (resumes an unfinished run).",
        accepted_by=COMPACTING,
        names_action=Action.COMPACTION,
    )
    terminate_compaction: bool = option(
        "--incremental-terminate-compaction",
        default=False,
        help="Stop (exit 0) when the compaction reaches the change-ingestion acknowledgement "
        "step; run an extraction, then the compaction again (single-session compaction).",
        accepted_by=COMPACTING,
        sets="terminate_at_acknowledgement",
    )
    full_compaction: bool = option(
        "--incremental-full-compaction",
        default=False,
        help=f"Compaction method {CompactionMethod.FULL}: compact into a new base table "
        "written in one go (default for insert-only methods).",
        accepted_by=COMPACTING,
        sets="method",
    )
    in_place_compaction: bool = option(
        "--incremental-in-place-compaction",
        default=False,
        help=f"Compaction method {CompactionMethod.IN_PLACE}: rewrite only the base partitions "
        "that changes touch (default, except for CHANGELOG_INSERT/UPDATABLE_INSERT, whose "
        "user view then shows the rows inserted since the last compaction twice until the "
        "run ends).",
        accepted_by=COMPACTING,
        sets="method",
    )
    partition_wise_full_compaction: bool = option(
        "--incremental-partition-wise-full-compaction",
        default=False,
        help=f"Compaction method {CompactionMethod.PARTITION_WISE_FULL}: compact into a new "
        "base table written one partition at a time.",
        accepted_by=COMPACTING,
        sets="method",
    )
    delta_threshold: int = option(
        "--incremental-delta-threshold",
        default=DEFAULT_DELTA_THRESHOLD,
        help="Compact only when the delta table holds at least this many changes.",
        accepted_by=COMPACTING,
        check=check_count,
        sets="delta_threshold",
    )
    wait_time: float = option(
        "--incremental-wait-time",
        default=DEFAULT_WAIT_MINUTES,
        help="Minutes after the view switch before old objects are dropped, so that "
        "running queries finish (0: none).",
        accepted_by=COMPACTING,
        check=check_amount,
        sets="wait_minutes",
    )
    acknowledgement_timeout: float | None = option(
        "--incremental-acknowledgement-timeout",
        default=None,
        help="Seconds a compaction waits for a running extraction to acknowledge its change "
        "ingestion diversion before it fails (default: no limit; with no extraction "
        "running, the compaction acknowledges it itself).",
        accepted_by=COMPACTING,
        check=check_amount,
        sets="acknowledgement_timeout_seconds",
    )
    retain_obsolete_objects: bool = option(
        "--incremental-retain-obsolete-objects",
        default=False,
        help="Keep the old base table, partitions and control partitions (no longer "
        "managed by gluon afterwards).",
        accepted_by=COMPACTING,
        sets="retain_obsolete_objects",
    )
    without_snapshot: bool = option(
        "--incremental-run-compaction-without-snapshot",
        default=False,
        help="Compact even when the pre-compaction Delta versions cannot be recorded.",
        accepted_by=COMPACTING,
        sets="without_snapshot",
    )
    vacuum_retention_hours: float = option(
        "--incremental-vacuum-retention-hours",
        default=DEFAULT_VACUUM_RETENTION_HOURS,
        help="After a compaction, delete Delta files unused for this many hours (older "
        "versions can no longer be read with VERSION AS OF).",
        accepted_by=COMPACTING,
        check=check_amount,
        sets="vacuum_retention_hours",
    )
    abandon_compaction_flag: bool = option(
        "--incremental-abandon-compaction",
        default=False,
        help="End the unfinished compaction run before its views switch: withdraw its "
        "diversion request and delete the tables it wrote (after the switch it must be "
        "finished instead). Without -x: show what it would do.",
        accepted_by={Action.ABANDON_COMPACTION},
        names_action=Action.ABANDON_COMPACTION,
    )
    discard_changes_flag: bool = option(
        "--incremental-discard-changes",
        default=False,
        help="Delete the changes not yet compacted (changelog and delta table), e.g. "
        "before disabling when they are not wanted; says how many. Without -x: only count "
        "them.",
        accepted_by={Action.DISCARD_CHANGES},
        names_action=Action.DISCARD_CHANGES,
    )
    set_aside_changes: str | None = option(
        "--incremental-set-aside-changes",
        default=None,
        help="Move the named changes, which an extraction refused because the lake cannot "
        "take a value of theirs, out of the changelog (PG_LOGICAL: the slot's reads skip "
        "them) into a repository record that status and the report list, so the later "
        "changes ship. Only a change the extraction refuses can be set aside. Without -x: "
        "show what it would do.",
        accepted_by={Action.SET_ASIDE_CHANGES},
        names_action=Action.SET_ASIDE_CHANGES,
        check=_gl_seqs,
        metavar="GL_SEQ[,GL_SEQ...]",
    )
    stage_lake_rows_predicate: str | None = option(
        "--incremental-stage-lake-rows",
        default=None,
        help="UPDATABLE methods: copy the lake rows matching a predicate (e.g. "
        "'column(SOLD_ON) >= date(2017-01-01)') into the lake-rows table, so the updatable "
        "view shows them for patching; 'none' empties it. See docs/patching.md.",
        accepted_by={Action.STAGE_LAKE_ROWS},
    )
    print_grants: bool = option(
        "--incremental-print-grants",
        default=False,
        help="Oracle: print the GRANT statements a DBA runs so gluon's user can enable "
        "--incremental-extraction-method on the table (19c and 23ai); sends nothing.",
        accepted_by={Action.PRINT_GRANTS},
        names_action=Action.PRINT_GRANTS,
    )
    given: dict[str, str] = field(default_factory=dict)
    """The parameters typed on the command line (not defaults), in declaration order: name
    -> the flag that names it in messages."""
