"""The three compaction methods: how the merged rows replace the base table.

Each method reads its inputs before it changes any of them, so a re-run after
a crash writes exactly the same rows, even for the insert-only methods (whose
merge is not idempotent):

* in place: the compacted rows of every affected partition are first staged in
  a Delta table of the load schema (the base is untouched until staging is
  complete), then each partition is replaced from the stage, one commit each;
* full and partition-wise full: the new base table is staged inside the base
  table's folder from the old one, which nothing changes until the views are
  switched; the switch publishes the stage as the base table's next version in
  one Delta commit (gluon.lake.publish), so the base keeps one path for life.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gluon.compact.context import CompactionContext
from gluon.compact.options import CompactionMethod
from gluon.faults import fault_point
from gluon.lake import compact_merge, publish, sql, storage, tables
from gluon.methods.base import ViewKind
from gluon.naming import LakeNames, TableRef, lake_names, stable_base_path
from gluon.schema import lake_column

log = logging.getLogger(__name__)


def partition_predicate(context: CompactionContext, values: tuple[Any, ...]) -> str:
    """``col = value AND ...`` for one lake partition (NULL-aware)."""
    return sql.partition_values([p.lake_column for p in context.record.partitioning], values)


def _predicates(context: CompactionContext, template: str) -> list[str]:
    """Predicates of the partitions to write, computed once and kept in the run's progress."""
    if "partitions" in context.run.progress:
        return list(context.run.progress["partitions"])
    rows = context.lake().sql(_partitions_sql(context, template)).collect()
    predicates = sorted(partition_predicate(context, tuple(row)) for row in rows)
    context.save_progress(partitions=predicates)
    return predicates


def _partitions_sql(context: CompactionContext, template: str) -> str:
    """The query listing the lake partitions (their partition column values) to write."""
    return sql.partitions_to_write(
        template,
        partition_columns=[p.lake_column for p in context.record.partitioning],
        partition_expressions=[p.expression for p in context.record.partitioning],
        keys=[lake_column(key) for key in context.state.key_columns],
        base=context.base_relation,
        delta=context.delta_relation,
        low=context.min_partition,
        high=context.max_partition,
    )


PARTITIONS_PER_COMMIT = 100
"""Partitions replaced by one statement. Its predicate ORs one term per partition, and the
engine overflows its stack near 900 terms (measured on Sail 0.7.2); 100, doubled by
:func:`exactly_where`, keeps far below."""


def _batches(predicates: list[str]) -> list[list[str]]:
    return [
        predicates[start : start + PARTITIONS_PER_COMMIT]
        for start in range(0, len(predicates), PARTITIONS_PER_COMMIT)
    ]


def _replace_partitions(
    context: CompactionContext, target: str, source_for: Callable[[str], str]
) -> int:
    """Replace the listed partitions of ``target`` with the rows of ``source_for(predicate)``,
    up to :data:`PARTITIONS_PER_COMMIT` partitions per commit; partitions a previous run
    finished are skipped (replacing a partition again writes the same rows)."""
    done = set(context.run.progress.get("partitions_done", []))
    predicates = list(context.run.progress["partitions"])
    columns = tables.column_names(context.lake(), target)
    for batch in _batches([predicate for predicate in predicates if predicate not in done]):
        predicate = _any_partition(batch)
        fault_point("compact.before_partition")
        statement = sql.replace_where(target, predicate, source_for(predicate), columns)
        context.lake().execute(statement)
        done.update(batch)
        context.save_progress(partitions_done=sorted(done))
        fault_point("compact.after_partition")
        log.info("compacted %d partitions of %s", len(batch), target)
    return len(predicates)


def _write(context: CompactionContext, select: str, location: str) -> None:
    parts = [p.lake_column for p in context.record.partitioning]
    context.lake().write(context.lake().sql(select), location, mode="overwrite", partition_by=parts)


def _names(context: CompactionContext) -> LakeNames:
    return lake_names(TableRef(context.record.lake_schema, context.record.lake_table))


def _load_table(context: CompactionContext, suffix: str) -> tuple[str, str]:
    """Name and location of a per-run table in the load schema."""
    name, location = _names(context).run_table(context.settings.lake_root, suffix, context.run.id)
    return str(name), location


def retained_changes_table(context: CompactionContext) -> tuple[str, str]:
    """Name and location of the copy of the compacted control partitions a run retains."""
    return _load_table(context, "changes_r")


def load_table_location(context: CompactionContext, suffix: str) -> str:
    """Where the run's per-run load-schema table ``suffix`` lives."""
    return _load_table(context, suffix)[1]


def _any_partition(predicates: list[str]) -> str:
    """One predicate for a few partitions (callers batch them: see PARTITIONS_PER_COMMIT)."""
    return sql.any_of(predicates)


def _in_listed_partitions(context: CompactionContext, alias: str, listed: str) -> str:
    """True for rows of ``alias`` in a partition listed in the table ``listed``.

    A semi-join keeps the statement the same size for any number of partitions.
    """
    return sql.exists_in(listed, alias, [p.lake_column for p in context.record.partitioning])


def _listed_partitions(context: CompactionContext, template: str) -> str:
    """Stage the partitions to write in a Delta table of the load schema; return its name.

    Written once per run, before the base is touched, so a resumed run filters by the same
    list as its saved predicates.
    """
    name, location = _load_table(context, "partitions")
    if "partition_list" not in context.run.progress:
        listing = context.lake().sql(_partitions_sql(context, template))
        context.lake().write(listing, location, mode="overwrite")
        context.save_progress(partition_list=location)
    tables.register_table(context.lake(), name, location)
    return sql.quote(name)


def compact_in_place(context: CompactionContext) -> str:
    """Rewrite only the base partitions that hold or receive changed keys."""
    merged = _merge_without_engine(context)
    if merged is not None:
        return merged
    if not context.record.partitioning:
        stage_name, stage_path = _load_table(context, "compacted")
        if "staged" not in context.run.progress:
            if context.options.retain_obsolete_objects:
                # The overwrite below replaces the whole base: keep a copy of it first.
                _retain_partitions(
                    context,
                    sql.select_all(context.base_relation),
                    kind="base table before compaction",
                )
            _write(context, context.merged_select(), stage_path)
            context.save_progress(staged=stage_path)
        tables.register_table(context.lake(), stage_name, stage_path)
        _write(context, sql.select_all(sql.quote(stage_name)), context.record.base_path)
        return "unpartitioned base table rewritten"
    if "staged" in context.run.progress:  # a run an older gluon staged in the load schema
        return _replace_from_load_stage(context)
    stage_path = in_place_stage_path(context)
    if "staged_partitions" not in context.run.progress:
        # A TRUNCATE empties base partitions no changed key touches: every one is rewritten.
        listing = "all_partitions" if context.truncated else "affected_partitions"
        listed = _listed_partitions(context, listing)
        if "partitions" not in context.run.progress:
            rows = context.lake().sql(sql.select_all(listed)).collect()
            predicates = sorted(partition_predicate(context, tuple(row)) for row in rows)
            context.save_progress(partitions=predicates)
        predicates = list(context.run.progress["partitions"])
        if len(predicates) <= PARTITIONS_PER_COMMIT:
            # Partition values as literals: the engine reads only those partitions' files (a
            # semi-join with the listed table reads every file of the base).
            in_base, in_compacted = (_any_partition(predicates),) * 2
        else:
            in_base = _in_listed_partitions(context, "gl_base", listed)
            in_compacted = _in_listed_partitions(context, "gl_compacted", listed)
        base_rows = sql.select_all(context.base_relation, in_base, alias="gl_base")
        if context.options.retain_obsolete_objects:
            _retain_partitions(context, base_rows)
        _write(
            context,
            sql.select_all(
                sql.subquery(context.merged_select(sql.subquery(base_rows)), "gl_compacted"),
                in_compacted,
            ),
            stage_path,
        )
        context.save_progress(staged_partitions=stage_path)
    listed_path = str(context.run.progress["partition_list"])
    count = len(context.run.progress["partitions"])
    fault_point("compact.before_partition")
    # One commit for every partition: a reader holding the base path sees the base before
    # the compaction or after it, never some partitions compacted (issue 28).
    publish.replace_partitions(
        context.record.base_path, stage_path, context.run.id, storage.read_delta(listed_path)
    )
    fault_point("compact.after_partition")
    return f"{count} partitions rewritten in one commit"


def _merge_without_engine(context: CompactionContext) -> str | None:
    """A merging method's changes merged by deltalake in one commit, without the engine
    (``gluon.lake.compact_merge``); None when the engine compacts: a TRUNCATE to apply, a
    copy to retain, a run already begun the engine's way, or rows only the engine derives.
    """
    progress = context.run.progress
    if (
        context.method.view_kind is not ViewKind.MERGE
        or context.truncated
        or context.options.retain_obsolete_objects
        or any(key in progress for key in ("staged", "staged_partitions", "partition_list"))
    ):
        return None
    merged = compact_merge.merge_compacted_changes(
        context.record.base_path,
        context.state.delta_path,
        columns=context.record.columns,
        partitioning=context.record.partitioning,
        keys=[lake_column(key) for key in context.state.key_columns],
        low=context.min_partition,
        high=context.max_partition,
        run_id=context.run.id,
    )
    if merged is not None:
        context.save_progress(merged_without_engine=True)
    return merged


def in_place_stage_path(context: CompactionContext) -> str:
    """Where an in-place run stages the merged rows of the partitions it replaces: a folder
    inside the base table's (current) folder, whose files the replacing commit adds."""
    return publish.stage_location(context.record.base_path, context.run.id)


def _replace_from_load_stage(context: CompactionContext) -> str:
    """Finish a run an older gluon began: its partitions replaced from the load-schema stage,
    :data:`PARTITIONS_PER_COMMIT` per commit."""
    stage_name, stage_path = _load_table(context, "compacted")
    tables.register_table(context.lake(), stage_name, stage_path)
    stage = sql.quote(stage_name)
    count = _replace_partitions(context, context.record.base_table, lambda _: stage)
    return f"{count} partitions rewritten"


def _retain_partitions(
    context: CompactionContext, base_rows: str, kind: str = "base partitions before compaction"
) -> None:
    """--incremental-retain-obsolete-objects with in-place: copy the partitions first (a
    Delta table of its own, queryable by its name; a vacuum of the base cannot remove it)."""
    name, location = _load_table(context, "retained")
    _write(context, base_rows, location)
    context.record_retained(kind, name, location)


def staged_base_path(context: CompactionContext) -> str:
    """Where a full compaction stages the new base: a folder inside the base table's
    (stable) folder, whose files the switch publishes as the base's next version."""
    return publish.stage_location(stable_base_path(context.record.base_path), context.run.id)


def compact_full(context: CompactionContext) -> str:
    """Stage the merged rows in one write; the switch publishes them in one commit."""
    location = staged_base_path(context)
    if "staged_base" not in context.run.progress:
        _write(context, context.merged_select(), location)
        context.save_progress(staged_base=location)
    return f"compacted base table staged at {location}"


def compact_partition_wise(context: CompactionContext) -> str:
    """Stage the merged rows one partition batch per commit (bounded work per step); the
    switch publishes them in one commit."""
    if not context.record.partitioning:
        return compact_full(context)
    older = context.run.progress.get("new_base_created")  # a run an older gluon began
    location = str(older) if older else staged_base_path(context)
    predicates = _predicates(context, "all_partitions")  # listed once, in the run's progress
    if not older and "stage_created" not in context.run.progress:
        nothing = sql.select_all(sql.subquery(context.merged_select(), "gl_none"), "false")
        _write(context, nothing, location)
        context.save_progress(stage_created=location)
    target = str(_names(context).new_base_table(context.run.id))
    tables.register_table(context.lake(), target, location)
    # One batch computes the latest changes once anyway: staging them pays off from two.
    several = len(predicates) > PARTITIONS_PER_COMMIT or "latest_changes" in context.run.progress
    merging = context.method.view_kind is ViewKind.MERGE
    # The staged latest changes know no TRUNCATE: with one, each partition merges from the
    # changes themselves (rare, and correct).
    staging = merging and several and not context.truncated
    latest = _staged_latest_changes(context) if staging else None

    def merged_partition(predicate: str) -> str:
        # Only this partition's base rows take part: a key that moved elsewhere is removed here
        # by the merge and written by the partition its latest row lands in.
        base = sql.subquery(sql.select_all(context.base_relation, predicate))
        if latest is None:  # one batch, or insert-only (the union has no per-key work)
            return sql.subquery(context.merged_select(base), "gl_partition")
        return sql.subquery(_merged_with_latest(context, base, latest), "gl_partition")

    count = _replace_partitions(context, target, merged_partition)
    # An older gluon's run finishes its way: the switch moves the base to its new folder.
    context.save_progress(**{"new_base_path" if older else "staged_base": location})
    return f"compacted base table staged at {location}: {count} partitions written"


def _staged_latest_changes(context: CompactionContext) -> str:
    """Stage each changed key's latest change in a Delta table of the load schema; return its
    name.

    Computed once per run, not once per partition batch (the aggregate over every change is
    the merge's costly part). Re-run: the compacted control partitions no longer change once
    diversion is acknowledged, so the overwrite writes the same rows.
    """
    name, location = _load_table(context, "latest")
    if "latest_changes" not in context.run.progress:
        select = sql.latest_changes(
            keys=[lake_column(key) for key in context.state.key_columns],
            delta=context.delta_relation,
            low=context.min_partition,
            high=context.max_partition,
        )
        context.lake().write(context.lake().sql(select), location, mode="overwrite")
        context.save_progress(latest_changes=location)
    tables.register_table(context.lake(), name, location)
    return sql.quote(name)


def _merged_with_latest(context: CompactionContext, base: str, latest: str) -> str:
    """:meth:`CompactionContext.merged_select` of ``base`` from the staged latest changes."""
    merged = sql.merged_with_latest(
        columns=[column.lake_name for column in context.record.columns],
        keys=[lake_column(key) for key in context.state.key_columns],
        base=base,
        latest=latest,
    )
    derived = [(part.expression, part.lake_column) for part in context.record.partitioning]
    return sql.with_columns(sql.subquery(merged, "gl_merged"), derived)


STAGED_TABLES = ("staged", "partition_list", "latest_changes")
"""Keys of the run's progress naming its staging tables."""


def staged_tables(context: CompactionContext) -> list[str]:
    """Locations of this run's staging tables (dropped once the views are switched)."""
    progress = context.run.progress
    return [progress[key] for key in STAGED_TABLES if progress.get(key)]


REWRITES = {
    CompactionMethod.IN_PLACE: compact_in_place,
    CompactionMethod.FULL: compact_full,
    CompactionMethod.PARTITION_WISE_FULL: compact_partition_wise,
}
