"""The three compaction methods: how the merged rows replace the base table.

Each method reads its inputs before it changes any of them, so a re-run after
a crash writes exactly the same rows, even for the insert-only methods (whose
merge is not idempotent):

* in place: the compacted rows of every affected partition are first staged in
  a Delta table of the load schema (the base is untouched until staging is
  complete), then each partition is replaced from the stage, one commit each;
* full and partition-wise full: the new base table is written from the old
  one, which nothing changes until the views are switched.
"""

from __future__ import annotations

import decimal
import logging
from collections.abc import Callable
from typing import Any

from gluon import templates
from gluon.compact.context import CompactionContext
from gluon.compact.options import CompactionMethod
from gluon.faults import fault_point
from gluon.lake import storage, tables
from gluon.naming import LakeNames, TableRef, lake_names
from gluon.repo.compaction import ObsoleteObject
from gluon.repo.incremental import now

log = logging.getLogger(__name__)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return tables.sql_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    raise TypeError(f"unexpected partition value {value!r}")


def partition_predicate(context: CompactionContext, values: tuple[Any, ...]) -> str:
    """``col = value AND ...`` for one lake partition (NULL-aware)."""
    terms = []
    for part, value in zip(context.record.partitioning, values, strict=True):
        column = tables.quote(part.lake_column)
        terms.append(f"{column} IS NULL" if value is None else f"{column} = {_literal(value)}")
    return " AND ".join(terms)


def _predicates(context: CompactionContext, template: str) -> list[str]:
    """Predicates of the partitions to write, computed once and kept in the run's progress."""
    if "partitions" in context.run.progress:
        return list(context.run.progress["partitions"])
    sql = templates.render(
        "lake",
        template,
        quote=tables.quote,
        part_columns=[tables.quote(p.lake_column) for p in context.record.partitioning],
        part_expressions=[p.expression for p in context.record.partitioning],
        keys=[tables.quote(key.lower()) for key in context.state.key_columns],
        base=context.base_relation,
        delta=context.delta_relation,
        partitions=context.partitions,
    )
    rows = context.lake().sql(sql).collect()
    predicates = sorted(partition_predicate(context, tuple(row)) for row in rows)
    context.save_progress(partitions=predicates)
    return predicates


def _replace_partitions(
    context: CompactionContext, target: str, source_for: Callable[[str], str]
) -> int:
    """Replace each listed partition of ``target`` with the rows of ``source_for(predicate)``,
    one commit each; partitions a previous run finished are skipped."""
    done = set(context.run.progress.get("partitions_done", []))
    predicates = list(context.run.progress["partitions"])
    for predicate in predicates:
        if predicate in done:
            continue
        fault_point("compact.before_partition")
        context.lake().execute(
            f"INSERT INTO {tables.quote(target)} REPLACE WHERE {predicate} "
            f"SELECT * FROM {source_for(predicate)} WHERE {predicate}"
        )
        done.add(predicate)
        context.save_progress(partitions_done=sorted(done))
        fault_point("compact.after_partition")
        log.info("compacted partition %s of %s", predicate, target)
    return len(predicates)


def _write(context: CompactionContext, select: str, location: str) -> None:
    parts = [p.lake_column for p in context.record.partitioning]
    context.lake().write(context.lake().sql(select), location, mode="overwrite", partition_by=parts)


def _names(context: CompactionContext) -> LakeNames:
    return lake_names(TableRef(context.record.lake_schema, context.record.lake_table))


def _load_table(context: CompactionContext, suffix: str) -> tuple[str, str]:
    """Name and location of a per-run table in the load schema."""
    names = _names(context)
    table = f"{names.table}_{suffix}_{context.run.id}"
    location = storage.join(context.settings.lake_root, names.schema_dir(names.load_schema), table)
    return f"{names.load_schema}.{table}", location


def _any_partition(predicates: list[str]) -> str:
    return " OR ".join(f"({predicate})" for predicate in predicates) or "false"


def compact_in_place(context: CompactionContext) -> str:
    """Rewrite only the base partitions that hold or receive changed keys."""
    if not context.record.partitioning:
        stage_name, stage_path = _load_table(context, "compacted")
        if "staged" not in context.run.progress:
            _write(context, context.merged_select(), stage_path)
            context.save_progress(staged=stage_path)
        tables.register_table(context.lake(), stage_name, stage_path)
        _write(context, f"SELECT * FROM {tables.quote(stage_name)}", context.record.base_path)
        return "unpartitioned base table rewritten"
    predicates = _predicates(context, "affected_partitions")
    stage_name, stage_path = _load_table(context, "compacted")
    if "staged" not in context.run.progress:
        affected = _any_partition(predicates)
        if context.options.retain_obsolete_objects:
            _retain_partitions(context, affected)
        base = f"(SELECT * FROM {context.base_relation} WHERE {affected})"
        _write(
            context,
            f"SELECT * FROM ({context.merged_select(base)}) gl_merged WHERE {affected}",
            stage_path,
        )
        context.save_progress(staged=stage_path)
    tables.register_table(context.lake(), stage_name, stage_path)
    stage = tables.quote(stage_name)
    count = _replace_partitions(context, context.record.base_table, lambda _: stage)
    return f"{count} partitions rewritten"


def _retain_partitions(context: CompactionContext, affected: str) -> None:
    """--incremental-retain-obsolete-objects with in-place: copy the partitions first."""
    name, location = _load_table(context, "retained")
    _write(context, f"SELECT * FROM {context.base_relation} WHERE {affected}", location)
    context.repo.compaction.retain(
        ObsoleteObject(
            table_key=context.record.table_key,
            kind="base partitions before compaction",
            name=name,
            location=location,
            retained_at=now(),
            compaction_run_id=context.run.id,
        )
    )


def new_base_path(context: CompactionContext) -> str:
    names = _names(context)
    return storage.join(
        context.settings.lake_root, names.schema_dir(), f"{names.table}_data_c{context.run.id}"
    )


def compact_full(context: CompactionContext) -> str:
    """A new base table from the merged rows in one write."""
    location = new_base_path(context)
    _write(context, context.merged_select(), location)
    context.save_progress(new_base_path=location)
    return f"new base table at {location}"


def compact_partition_wise(context: CompactionContext) -> str:
    """A new base table from the merged rows, one partition per commit."""
    if not context.record.partitioning:
        return compact_full(context)
    location = new_base_path(context)
    _predicates(context, "all_partitions")  # listed once, in the run's progress
    if "new_base_created" not in context.run.progress:
        _write(context, f"SELECT * FROM ({context.merged_select()}) gl_none WHERE false", location)
        context.save_progress(new_base_created=location)
    target = f"{context.record.lake_schema}_load.gl_new_base_{context.run.id}"
    tables.register_table(context.lake(), target, location)

    def merged_partition(predicate: str) -> str:
        # Only this partition's base rows take part: a key that moved elsewhere is removed here
        # by the merge and written by the partition its latest row lands in.
        base = f"(SELECT * FROM {context.base_relation} WHERE {predicate})"
        return f"({context.merged_select(base)}) gl_partition"

    count = _replace_partitions(context, target, merged_partition)
    context.save_progress(new_base_path=location)
    return f"new base table at {location}: {count} partitions written"


def staged_tables(context: CompactionContext) -> list[str]:
    """Locations of this run's staging tables (dropped once the views are switched)."""
    staged = context.run.progress.get("staged")
    return [staged] if staged else []


REWRITES = {
    CompactionMethod.IN_PLACE: compact_in_place,
    CompactionMethod.FULL: compact_full,
    CompactionMethod.PARTITION_WISE_FULL: compact_partition_wise,
}
