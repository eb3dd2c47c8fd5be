"""What ``--incremental-run-compaction`` would do, without ``-x``: read only, no engine."""

from __future__ import annotations

from dataclasses import replace

from gluon import locks
from gluon.compact.options import (
    CompactionMethod,
    CompactionOptions,
    refuse_method_for_merged_table,
)
from gluon.compact.runner import recorded_options
from gluon.compact.steps import STEPS
from gluon.config import Settings
from gluon.extract.insert_only import default_compaction_method
from gluon.lake import storage
from gluon.lake.changes import PARTITION_COLUMN
from gluon.repo import Repository
from gluon.states import MergeMode

METHOD_TEXT = {
    CompactionMethod.IN_PLACE: "rewrite in place the base partitions that hold or receive "
    "changed keys",
    CompactionMethod.FULL: "stage the merged rows in one write, published to the base table's "
    "path in one commit",
    CompactionMethod.PARTITION_WISE_FULL: "stage the merged rows one partition batch at a "
    "time, published to the base table's path in one commit",
}


def compaction_plan(settings: Settings, options: CompactionOptions) -> list[tuple[str, str]]:
    """The steps a compaction of ``options.table`` would run now: (step name, description).

    Raises:
        StateError: incremental update is not enabled.
    """
    repo = Repository(settings.repo_url)
    key = options.table.key
    record, state = repo.enabled_table(key, otherwise="nothing to compact")
    if state.merge_mode == MergeMode.IMMEDIATE:
        refuse_method_for_merged_table(options)
        return [
            ("compact_files", f"rewrite the small files of {record.base_path} into bigger ones"),
            (
                "vacuum",
                f"remove its files no version of the last {options.vacuum_retention_hours:g} "
                "hours reads",
            ),
        ]
    run = repo.compaction.open_run(key, state.enablement_id)
    done: set[str] = set()
    if run is None:
        changes = storage.delta_row_count(
            state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
        )
        threshold = max(options.delta_threshold, 1)
        if changes < threshold:
            return [
                (
                    "nothing_to_do",
                    f"nothing to compact: {changes} changes in the delta table, below the "
                    f"threshold of {threshold}",
                )
            ]
        method = options.method or default_compaction_method(repo, key)
        compacted, new = state.active_partition, state.active_partition + 1
        first = f"start a compaction run ({method.value}) of {changes} changes"
    else:
        options, _ = recorded_options(run, options)
        method = CompactionMethod(run.method)
        compacted = run.compacted_partition or state.active_partition
        new = run.new_partition or compacted + 1
        done = set(repo.compaction.completed_steps(run.id))
        first = f"resume compaction run {run.id} ({method.value}), with the options it started with"
    options = replace(options, method=method)
    holder = locks.holder(repo, key, locks.EXTRACTION)
    if state.acknowledged_partition == new:
        acknowledge = f"control partition {new} is acknowledged already"
    elif options.terminate_at_acknowledgement:
        acknowledge = (
            "stop here (--incremental-terminate-compaction): an extraction and the same "
            "command finish the run"
        )
    elif holder is not None:
        acknowledge = (
            f"wait for the running {locks.describe(holder)} to acknowledge the diversion, "
            "or acknowledge it with an extraction of its own once that ends" + _limit(options)
        )
    else:
        acknowledge = (
            "no extraction is running: run the acknowledging extraction (ships the pending "
            f"changes into control partition {new})"
        )
    retain = options.retain_obsolete_objects
    descriptions = {
        "request_diversion": (
            f"ask extractions to write to a new control partition {new} "
            f"(compacting partitions {state.view_min_partition} to {compacted})"
        ),
        "await_acknowledgement": acknowledge,
        "record_snapshot": "record the Delta versions of the base and delta tables"
        + (" (or go on without them)" if options.without_snapshot else ""),
        "compact": f"{METHOD_TEXT[method]} ({record.base_table})",
        "switch_views": f"point the user view {record.user_view} at the compacted base",
        "wait_for_queries": f"wait {options.wait_minutes:g} minutes for queries that started "
        "before the switch",
        "drop_obsolete": ("keep" if retain else "drop")
        + f" the replaced base and the compacted control partitions (<= {compacted})",
        "vacuum": f"remove Delta files unused for {options.vacuum_retention_hours:g} hours",
    }
    steps = [("start", first)]
    for step in STEPS:
        if step.name in done:
            continue
        steps.append((step.name, descriptions[step.name]))
        stops = options.terminate_at_acknowledgement and state.acknowledged_partition != new
        if step.name == "await_acknowledgement" and stops:
            break
    return steps


def _limit(options: CompactionOptions) -> str:
    seconds = options.acknowledgement_timeout_seconds
    if seconds is None:
        return ""
    return f"; give up after {seconds:g} seconds (--incremental-acknowledgement-timeout)"
