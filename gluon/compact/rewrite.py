"""The three compaction methods: how the merged rows replace the base table.

Every method reads the base and delta tables pinned to the pre-compaction
snapshot, so a re-run after a crash writes exactly the same rows (even for
the insert-only methods, whose merge is not idempotent).
"""

from __future__ import annotations

import decimal
import logging
from typing import Any

from gluon import templates
from gluon.compact.context import CompactionContext
from gluon.compact.options import CompactionMethod
from gluon.faults import fault_point
from gluon.lake import storage, tables
from gluon.lake.sqllog import record as record_sql
from gluon.naming import TableRef, lake_names
from gluon.repo.compaction import ObsoleteObject
from gluon.repo.incremental import now

log = logging.getLogger(__name__)

PartitionValue = tuple[Any, ...]


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return tables.sql_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    raise TypeError(f"unexpected partition value {value!r}")


def partition_predicate(context: CompactionContext, values: PartitionValue) -> str:
    """``col = value AND ...`` for one lake partition (NULL-aware)."""
    terms = []
    for part, value in zip(context.record.partitioning, values, strict=True):
        column = tables.quote(part.lake_column)
        terms.append(f"{column} IS NULL" if value is None else f"{column} = {_literal(value)}")
    return " AND ".join(terms)


def _partition_list(context: CompactionContext, template: str) -> list[PartitionValue]:
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
    return sorted((tuple(row) for row in rows), key=repr)


def _done(context: CompactionContext) -> list[str]:
    return list(context.run.progress.get("partitions_done", []))


def _replace_partitions(context: CompactionContext, target: str, template: str) -> str:
    """Rewrite each listed partition of ``target`` from the merged rows, one commit each."""
    session = context.lake()
    partitions = _partition_list(context, template)
    done = _done(context)
    for values in partitions:
        label = repr(values)
        if label in done:
            continue
        predicate = partition_predicate(context, values)
        # Only this partition's base rows take part: a key that moved elsewhere is removed here
        # by the merge and written by the partition its latest row lands in.
        base = f"(SELECT * FROM {context.base_relation} WHERE {predicate})"
        session.execute(
            f"INSERT INTO {tables.quote(target)} REPLACE WHERE {predicate} "
            f"SELECT * FROM ({context.merged_select(base)}) gl_compacted WHERE {predicate}"
        )
        done.append(label)
        context.save_progress(partitions_done=done)
        fault_point("compact.after_partition")
        log.info("compacted partition %s of %s", label, target)
    return f"{len(partitions)} partitions rewritten"


def _overwrite(context: CompactionContext, location: str) -> None:
    frame = context.lake().sql(context.merged_select())
    parts = [p.lake_column for p in context.record.partitioning]
    writer = frame.write.format("delta").mode("overwrite")
    if parts:
        writer = writer.partitionBy(*parts)
    record_sql("write", f"overwrite {location} partitionBy={parts}")
    writer.save(location)


def _retain_partitions(context: CompactionContext) -> None:
    """--incremental-retain-obsolete-objects with in-place: copy the partitions first."""
    if "retained_copy" in context.run.progress:
        return
    names = lake_names(TableRef(context.record.lake_schema, context.record.lake_table))
    copy_name = f"{names.load_schema}.{names.table}_data_retained_{context.run.id}"
    location = storage.join(
        context.settings.lake_root, names.schema_dir(names.load_schema), copy_name.split(".")[1]
    )
    partitions = _partition_list(context, "affected_partitions")
    where = " OR ".join(f"({partition_predicate(context, v)})" for v in partitions) or "true"
    frame = context.lake().sql(f"SELECT * FROM {context.base_relation} WHERE {where}")
    record_sql("write", f"overwrite {location}")
    frame.write.format("delta").mode("overwrite").save(location)
    context.repo.compaction.retain(
        ObsoleteObject(
            table_key=context.record.table_key,
            kind="base partitions before compaction",
            name=copy_name,
            location=location,
            retained_at=now(),
            compaction_run_id=context.run.id,
        )
    )
    context.save_progress(retained_copy=location)


def compact_in_place(context: CompactionContext) -> str:
    """Rewrite only the base partitions that hold or receive changed keys."""
    if context.options.retain_obsolete_objects:
        _retain_partitions(context)
    if not context.record.partitioning:
        _overwrite(context, context.record.base_path)
        return "unpartitioned base table rewritten"
    return _replace_partitions(context, context.record.base_table, "affected_partitions")


def new_base_path(context: CompactionContext) -> str:
    names = lake_names(TableRef(context.record.lake_schema, context.record.lake_table))
    return storage.join(
        context.settings.lake_root, names.schema_dir(), f"{names.table}_data_c{context.run.id}"
    )


def compact_full(context: CompactionContext) -> str:
    """A new base table from the merged rows in one write."""
    location = new_base_path(context)
    _overwrite(context, location)
    context.save_progress(new_base_path=location)
    return f"new base table at {location}"


def compact_partition_wise(context: CompactionContext) -> str:
    """A new base table from the merged rows, one partition per commit."""
    if not context.record.partitioning:
        return compact_full(context)
    location = new_base_path(context)
    if "new_base_path" not in context.run.progress:
        empty = context.lake().sql(context.merged_select()).limit(0)
        parts = [p.lake_column for p in context.record.partitioning]
        record_sql("write", f"overwrite {location} partitionBy={parts}")
        empty.write.format("delta").mode("overwrite").partitionBy(*parts).save(location)
        context.save_progress(new_base_path=location)
    target = f"{context.record.lake_schema}_load.gl_new_base_{context.run.id}"
    tables.register_table(context.lake(), target, location)
    detail = _replace_partitions(context, target, "all_partitions")
    return f"new base table at {location}: {detail}"


REWRITES = {
    CompactionMethod.IN_PLACE: compact_in_place,
    CompactionMethod.FULL: compact_full,
    CompactionMethod.PARTITION_WISE_FULL: compact_partition_wise,
}
