"""The actions of ``offload``: one function each, validating its own options, calling one service.

``dispatch`` picks the action the command line names (``actions.ACTION_FLAGS``;
none: an offload) and runs its function from ``HANDLERS``. Each function
refuses the options its action would ignore (``actions.ACCEPTED``), applies
the rules only it has (such as needing ``-x``), builds the service's options
and calls the service. Rules about a service's options live with the service:
compaction in ``gluon/compact/options.py``, the batch size in
``gluon/extract/run.py``, the capture-object flags in ``gluon/lifecycle/``,
the offload predicate in ``gluon/offload/increments.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gluon.cli.actions import ONE_ACTION, chosen_actions, refuse_ignored_options
from gluon.cli.common import progress_for, stderr
from gluon.cli.declare import check_values, declared_options
from gluon.cli.offload_options import Action, OffloadArguments
from gluon.cli.options import split_list
from gluon.compact import options as compaction_rules
from gluon.config import Settings
from gluon.errors import UsageError
from gluon.extract.plan import extraction_plan
from gluon.extract.result import ExtractionResult
from gluon.extract.run import run_extraction
from gluon.naming import TableRef
from gluon.offload.increments import IncrementRequest
from gluon.reuse import kept_connections
from gluon.states import MergeMode, SlotScope, parse_merge_mode, parse_slot_scope


@dataclass(slots=True)
class Sequential:
    """The results of the actions one command ran, shown in order."""

    parts: list[Shows]

    def shown(self) -> list[ShownLine]:
        return [line for part in self.parts for line in part.shown()]


# The other services are imported by the handler that runs them: every run of ``offload``
# imports this module, and an extraction (the command cron runs most, usually with nothing
# to do) must not pay for importing compaction, offload and patching code (issue 14).
if TYPE_CHECKING:
    from gluon.compact import CompactionOptions, CompactionResult
    from gluon.compact.abandon import AbandonResult
    from gluon.extract.discard import DiscardResult
    from gluon.extract.set_aside import SetAsideResult
    from gluon.lifecycle.result import IncrementalResult
    from gluon.offload.copy import OffloadOptions, OffloadResult
    from gluon.progress import ShownLine, Shows

    Result = (
        OffloadResult
        | IncrementalResult
        | ExtractionResult
        | CompactionResult
        | AbandonResult
        | DiscardResult
        | SetAsideResult
        | Sequential
    )
    Handler = Callable[[OffloadArguments, Settings], Result]

PROGRAM = "offload"


def validate(arguments: OffloadArguments) -> None:
    """Refuse values no action can take, before the log file is created (one line, exit 2;
    Click's own range checks print a usage block instead): each option's ``check``.

    Raises:
        UsageError: a bad table name, a value out of range or not finite, an empty predicate,
            a key column named twice.
    """
    check_values(arguments)


def dispatch(arguments: OffloadArguments, settings: Settings) -> Result:
    """Run the one action the command line names.

    Raises:
        UsageError: more than one action, or conflicting compaction methods (named as such,
            whichever the action, rather than as an option the action ignores).
    """
    chosen = chosen_actions(arguments)
    if set(chosen) == {Action.EXTRACTION, Action.COMPACTION}:
        _compaction_method(arguments)
        return extract_and_compact(arguments, settings)
    if len(chosen) > 1:
        raise UsageError(ONE_ACTION)
    _compaction_method(arguments)
    if arguments.stage_lake_rows_predicate is not None:
        if chosen:
            raise UsageError(
                "--incremental-stage-lake-rows is a command of its own: run it without "
                "--incremental-updates-enabled/-disabled, -run-extraction, -run-compaction"
            )
        action = Action.STAGE_LAKE_ROWS
    else:
        action = chosen[0] if chosen else Action.OFFLOAD
    return HANDLERS[action](arguments, settings)


def offload(arguments: OffloadArguments, settings: Settings) -> OffloadResult:
    """Offload the table, or one increment of it (a partial offload)."""
    from gluon.lifecycle.checks import check_capture_object_flags
    from gluon.offload.copy import offload_table

    check_capture_object_flags(
        enabling=False,
        disabling=False,
        take_over_objects=arguments.take_over_objects,
        recreate_capture_objects=arguments.recreate_capture_objects,
    )
    refuse_ignored_options(arguments, Action.OFFLOAD)
    return offload_table(settings, _offload_options(arguments), progress_for(quiet=False))


def enable(arguments: OffloadArguments, settings: Settings) -> IncrementalResult:
    """Enable incremental update (with the initial offload when the table is not offloaded),
    or re-create its capture objects."""
    from gluon.lifecycle.enable import enable_incremental, initial_offload_needed
    from gluon.lifecycle.enable_plan import EnableOptions
    from gluon.lifecycle.repair import repair_capture_objects

    ref = TableRef.parse(arguments.table)
    initial = initial_offload_needed(settings, ref, arguments.reset_backend_table)
    refuse_ignored_options(arguments, Action.ENABLE_WITH_OFFLOAD if initial else Action.ENABLE)
    if not arguments.extraction_method:
        raise UsageError(
            "--incremental-updates-enabled needs --incremental-extraction-method=METHOD"
        )
    options = EnableOptions(
        table=ref,
        method=arguments.extraction_method,
        key_columns=split_list(arguments.key_columns),
        no_verify_primary_key=arguments.no_verify_primary_key,
        changelog_table=arguments.changelog_table,
        merge_mode=_merge_mode(arguments.merge_mode),
        slot_scope=_slot_scope(arguments.pg_logical_slot),
        execute=arguments.execute,
        take_over_objects=arguments.take_over_objects,
        recreate_capture_objects=arguments.recreate_capture_objects,
    )
    if arguments.recreate_capture_objects:
        return repair_capture_objects(settings, options)
    return enable_incremental(
        settings,
        options,
        _offload_options(arguments) if initial else None,
        progress_for(quiet=False),
        warn=warn_now,
    )


def disable(arguments: OffloadArguments, settings: Settings) -> IncrementalResult:
    """Disable incremental update and drop its objects."""
    from gluon.lifecycle.checks import check_capture_object_flags
    from gluon.lifecycle.disable import disable_incremental

    check_capture_object_flags(
        enabling=False,
        disabling=True,
        take_over_objects=arguments.take_over_objects,
        recreate_capture_objects=arguments.recreate_capture_objects,
    )
    refuse_ignored_options(arguments, Action.DISABLE)
    return disable_incremental(
        settings,
        TableRef.parse(arguments.table),
        execute=arguments.execute,
        take_over_objects=arguments.take_over_objects,
    )


def extract(
    arguments: OffloadArguments, settings: Settings
) -> ExtractionResult | IncrementalResult:
    """Ship the captured changes to the lake."""
    refuse_ignored_options(arguments, Action.EXTRACTION)
    return _extraction(arguments, settings)


def _extraction(
    arguments: OffloadArguments, settings: Settings
) -> ExtractionResult | IncrementalResult:
    if not arguments.execute:
        from gluon.lifecycle.result import IncrementalResult
        from gluon.offload.copy import Step

        plan = extraction_plan(
            settings, TableRef.parse(arguments.table), batch_size=arguments.batch_size
        )
        steps = [Step(name, description) for name, description in plan]
        return IncrementalResult(TableRef.parse(arguments.table).key, steps, executed=False)
    return run_extraction(
        settings,
        TableRef.parse(arguments.table),
        batch_size=arguments.batch_size,
        progress=progress_for(quiet=False),
    )


def compact(
    arguments: OffloadArguments, settings: Settings
) -> CompactionResult | IncrementalResult:
    """Merge the extracted changes into the base table (or resume the unfinished run)."""
    refuse_ignored_options(arguments, Action.COMPACTION)
    with kept_connections():  # one repository and source, its acknowledging extraction's too
        return _compaction(arguments, settings)


def _compaction(
    arguments: OffloadArguments, settings: Settings
) -> CompactionResult | IncrementalResult:
    from gluon.compact import run_compaction

    options = _compaction_options(arguments)
    if not arguments.execute:
        from gluon.compact.plan import compaction_plan
        from gluon.lifecycle.result import IncrementalResult
        from gluon.offload.copy import Step

        plan = compaction_plan(settings, options)
        steps = [Step(name, description) for name, description in plan]
        return IncrementalResult(options.table.key, steps, executed=False)
    return run_compaction(
        settings, options, progress_for(quiet=False), warn=warn_now, waiting=say_waiting
    )


def extract_and_compact(arguments: OffloadArguments, settings: Settings) -> Sequential:
    """``--incremental-run-extraction --incremental-run-compaction``: ship the captured
    changes, then merge them into the base, in one process (one Python start, one engine).

    The extraction runs first so the compaction takes the changes captured until now (its
    own acknowledging extraction ships only what arrives meanwhile, into the next control
    partition). Each part is the ordinary action with its crash safety; a failed
    extraction stops the command before the compaction.
    """
    refuse_ignored_options(arguments, Action.EXTRACTION, also=Action.COMPACTION)
    # One repository (its migration check) and one source (engine, connection, ADBC
    # database) for both parts, as the service keeps them: opened three times and twice
    # before, 135 repository statements of which 12 only reopened it.
    with kept_connections():
        extracted = _extraction(arguments, settings)
        return Sequential([extracted, _compaction(arguments, settings)])


def stage(arguments: OffloadArguments, settings: Settings) -> IncrementalResult:
    """Copy the lake rows matching a predicate into the lake-rows table (UPDATABLE methods)."""
    from gluon.lifecycle.patching import StageOptions, stage_lake_rows

    refuse_ignored_options(arguments, Action.STAGE_LAKE_ROWS)
    predicate = arguments.stage_lake_rows_predicate
    if predicate is None:  # dispatch chooses this action only when it is given
        raise UsageError("--incremental-stage-lake-rows needs a predicate, or 'none'")
    staging = StageOptions(
        table=TableRef.parse(arguments.table), predicate=predicate, execute=arguments.execute
    )
    return stage_lake_rows(settings, staging, progress_for(quiet=False))


def abandon(arguments: OffloadArguments, settings: Settings) -> AbandonResult:
    """End the unfinished compaction run before its views switch."""
    from gluon.compact.abandon import abandon_compaction

    refuse_ignored_options(arguments, Action.ABANDON_COMPACTION)
    return abandon_compaction(settings, TableRef.parse(arguments.table), execute=arguments.execute)


def discard(arguments: OffloadArguments, settings: Settings) -> DiscardResult:
    """Delete the changes not yet compacted."""
    from gluon.extract.discard import discard_changes

    refuse_ignored_options(arguments, Action.DISCARD_CHANGES)
    return discard_changes(settings, TableRef.parse(arguments.table), execute=arguments.execute)


def print_grants(arguments: OffloadArguments, settings: Settings) -> IncrementalResult:
    """Print the grant scripts a DBA runs before enabling (nothing is sent to the source)."""
    from gluon.lifecycle.enable_plan import grant_scripts

    refuse_ignored_options(arguments, Action.PRINT_GRANTS)
    if not arguments.extraction_method:
        raise UsageError("--incremental-print-grants needs --incremental-extraction-method=METHOD")
    return grant_scripts(
        settings,
        TableRef.parse(arguments.table),
        arguments.extraction_method,
        arguments.changelog_table,
    )


def set_aside(arguments: OffloadArguments, settings: Settings) -> SetAsideResult:
    """Move changes the lake cannot take out of the changelog into the repository."""
    from gluon.extract.set_aside import parse_seqs, set_aside_changes

    refuse_ignored_options(arguments, Action.SET_ASIDE_CHANGES)
    assert arguments.set_aside_changes is not None  # dispatch chose this action for it
    return set_aside_changes(
        settings,
        TableRef.parse(arguments.table),
        parse_seqs(arguments.set_aside_changes),
        execute=arguments.execute,
    )


HANDLERS: dict[Action, Handler] = {
    Action.OFFLOAD: offload,
    Action.ENABLE_WITH_OFFLOAD: enable,
    Action.ENABLE: enable,
    Action.DISABLE: disable,
    Action.EXTRACTION: extract,
    Action.COMPACTION: compact,
    Action.STAGE_LAKE_ROWS: stage,
    Action.ABANDON_COMPACTION: abandon,
    Action.DISCARD_CHANGES: discard,
    Action.PRINT_GRANTS: print_grants,
    Action.SET_ASIDE_CHANGES: set_aside,
}
"""The function that runs each action (``enable`` tells its two actions apart)."""


def warn_now(message: str) -> None:
    """A warning on stderr as soon as it is known (before a long run's steps)."""
    stderr.print(f"{PROGRAM}: warning: {message}", markup=False)


def say_waiting(message: str) -> None:
    """What a command waits for, on stderr (also without -v: a wait must not look like a hang)."""
    stderr.print(f"{PROGRAM}: {message}", markup=False)


def _compaction_method(arguments: OffloadArguments) -> compaction_rules.CompactionMethod | None:
    return compaction_rules.chosen_method(
        full=arguments.full_compaction,
        partition_wise_full=arguments.partition_wise_full_compaction,
        in_place=arguments.in_place_compaction,
    )


def _compaction_options(arguments: OffloadArguments) -> CompactionOptions:
    """The options the command line gives the compaction: each declared option sets the
    ``CompactionOptions`` field its ``sets`` names; those typed count as given (a resumed run
    notes only those it does not use)."""
    values: dict[str, object] = {"method": _compaction_method(arguments)}
    given = {"method"} if values["method"] is not None else set()
    for declared in declared_options(OffloadArguments):
        field = declared.spec.sets
        if field is None or field == "method":  # the method flags: ``_compaction_method``
            continue
        values[field] = getattr(arguments, declared.name)
        if declared.name in arguments.given:
            given.add(field)
    return compaction_rules.compaction_options(TableRef.parse(arguments.table), values, given=given)


def _offload_options(arguments: OffloadArguments) -> OffloadOptions:
    from gluon.offload.copy import OffloadOptions

    return OffloadOptions(
        table=TableRef.parse(arguments.table),
        execute=arguments.execute,
        reset_backend_table=arguments.reset_backend_table,
        partition_columns=split_list(arguments.partition_columns),
        partition_granularity=split_list(arguments.partition_granularity),
        increment=IncrementRequest(
            offload_type=arguments.offload_type.value if arguments.offload_type else None,
            offload_predicate=arguments.offload_predicate,
            less_than_value=arguments.less_than_value,
            older_than_date=arguments.older_than_date,
            partition_names=split_list(arguments.partition_names),
            subpartition_names=split_list(arguments.subpartition_names),
        ),
    )


def _slot_scope(text: str | None) -> SlotScope | None:
    try:
        return parse_slot_scope(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _merge_mode(text: str | None) -> MergeMode | None:
    if text is None:
        return None  # not given: a new enabling takes the default, a re-run keeps its mode
    try:
        return parse_merge_mode(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
