"""Which ``offload`` options each action takes: an option an action would ignore is refused.

``offload`` is one command with many actions (the spec's single-command
style). Silently ignoring an option misleads: ``--offload-predicate`` given
with ``--incremental-updates-enabled`` on an offloaded table offloads nothing,
and a compaction option given to an extraction changes nothing. The table
below is the single place that says what each action accepts; anything else
given on the command line is refused in one line (exit 2) before any change.
The function that runs each action is in ``gluon/cli/offload_actions.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import typer

from gluon.errors import UsageError
from gluon.increments import RequestedOffloadType

COMMON = frozenset({"table", "execute", "verbose", "debug"})
"""Options every action takes (parameter names of ``gluon.cli.offload.offload``)."""

OFFLOAD = frozenset(
    {
        "reset_backend_table",
        "partition_columns",
        "partition_granularity",
        "offload_type",
        "offload_predicate",
        "less_than_value",
        "older_than_date",
        "partition_names",
        "subpartition_names",
    }
)
ENABLE = frozenset(
    {
        "updates_enabled",
        "extraction_method",
        "key_columns",
        "no_verify_primary_key",
        "changelog_table",
        "merge_mode",
        "take_over_objects",
        "recreate_capture_objects",
    }
)
EXTRACTION = frozenset({"run_extraction_flag", "batch_size"})
COMPACTION = frozenset(
    {
        "run_compaction_flag",
        "terminate_compaction",
        "full_compaction",
        "partition_wise_full_compaction",
        "in_place_compaction",
        "delta_threshold",
        "wait_time",
        "acknowledgement_timeout",
        "retain_obsolete_objects",
        "without_snapshot",
        "vacuum_retention_hours",
    }
)


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


ACCEPTED: dict[Action, frozenset[str]] = {
    Action.OFFLOAD: OFFLOAD,
    Action.ENABLE_WITH_OFFLOAD: ENABLE | OFFLOAD,
    Action.ENABLE: ENABLE,
    Action.DISABLE: frozenset({"updates_disabled", "take_over_objects"}),
    Action.EXTRACTION: EXTRACTION,
    Action.COMPACTION: COMPACTION,
    Action.STAGE_LAKE_ROWS: frozenset({"stage_lake_rows_predicate"}),
    Action.ABANDON_COMPACTION: frozenset({"abandon_compaction_flag"}),
    Action.DISCARD_CHANGES: frozenset({"discard_changes_flag"}),
    Action.PRINT_GRANTS: frozenset({"print_grants", "extraction_method", "changelog_table"}),
    Action.SET_ASIDE_CHANGES: frozenset({"set_aside_changes"}),
}
"""The options each action takes, besides ``COMMON``."""


ACTION_FLAGS: dict[str, Action] = {
    "updates_enabled": Action.ENABLE,
    "updates_disabled": Action.DISABLE,
    "run_extraction_flag": Action.EXTRACTION,
    "run_compaction_flag": Action.COMPACTION,
    "abandon_compaction_flag": Action.ABANDON_COMPACTION,
    "discard_changes_flag": Action.DISCARD_CHANGES,
    "print_grants": Action.PRINT_GRANTS,
    "set_aside_changes": Action.SET_ASIDE_CHANGES,
}
"""The flags that name an action (at most one per command); none names an offload."""

ONE_ACTION = (
    "use only one of --incremental-updates-enabled, --incremental-updates-disabled, "
    "--incremental-run-extraction, --incremental-run-compaction, "
    "--incremental-abandon-compaction, --incremental-discard-changes, "
    "--incremental-print-grants"
    "--incremental-set-aside-changes"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadArguments:
    """Everything one ``offload`` command line holds (the command's parameters, by name)."""

    table: str
    execute: bool
    reset_backend_table: bool
    partition_columns: str | None
    partition_granularity: str | None
    offload_type: RequestedOffloadType | None
    offload_predicate: str | None
    less_than_value: str | None
    older_than_date: str | None
    partition_names: str | None
    subpartition_names: str | None
    updates_enabled: bool
    extraction_method: str | None
    key_columns: str | None
    no_verify_primary_key: bool
    changelog_table: str | None
    take_over_objects: bool
    recreate_capture_objects: bool
    updates_disabled: bool
    run_extraction_flag: bool
    batch_size: int
    run_compaction_flag: bool
    terminate_compaction: bool
    full_compaction: bool
    in_place_compaction: bool
    partition_wise_full_compaction: bool
    delta_threshold: int
    wait_time: float
    acknowledgement_timeout: float | None
    retain_obsolete_objects: bool
    without_snapshot: bool
    vacuum_retention_hours: float
    abandon_compaction_flag: bool
    discard_changes_flag: bool
    stage_lake_rows_predicate: str | None
    given: dict[str, str]
    """The parameters typed on the command line (not defaults), in declaration order: name
    -> the flag that names it in messages."""
    merge_mode: str | None = None
    """``--incremental-merge-mode`` (None: not given, the default mode)."""
    print_grants: bool = False
    """``--incremental-print-grants``."""
    set_aside_changes: str | None = None
    """``--incremental-set-aside-changes`` (None: not given)."""

    def chosen_actions(self) -> list[Action]:
        """The actions the command line names with a flag (an offload has none)."""
        return [action for name, action in ACTION_FLAGS.items() if getattr(self, name)]


def given_options(context: typer.Context) -> list[Any]:
    """The parameters typed on the command line (not defaults), in declaration order."""
    return [
        parameter
        for parameter in context.command.params
        if parameter.name is not None
        and getattr(context.get_parameter_source(parameter.name), "name", None) == "COMMANDLINE"
    ]


def given_flags(context: typer.Context) -> dict[str, str]:
    """``given_options`` as parameter name -> its longest flag (the one messages name)."""
    return {
        parameter.name: max(getattr(parameter, "opts", [parameter.name]), key=len)
        for parameter in given_options(context)
    }


def refuse_ignored_options(arguments: OffloadArguments, action: Action) -> None:
    """Refuse the first option given on the command line that ``action`` does not use.

    Raises:
        UsageError: names the option and the action.
    """
    accepted = COMMON | ACCEPTED[action]
    for name, flag in arguments.given.items():
        if name not in accepted:
            raise UsageError(f"{flag} does nothing with {action.value}: remove it")
