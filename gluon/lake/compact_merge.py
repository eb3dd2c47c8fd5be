"""In-place compaction of a merging method with deltalake, without starting the engine.

The compacted control partitions hold a batch of changes like an IMMEDIATE extraction's:
each key's latest change (``gl_seq``) is merged into the base table in one deltalake
``MERGE`` commit (a delete deletes the key's row, an insert or update replaces or adds it,
moving it to its new partition), which rewrites only the base files holding changed keys.
The commit records the application transaction ``gluon-compaction`` = run id
(``gluon.lake.publish``), so a re-run after it changes nothing; a run killed before it
merges the same changes again (the compacted partitions no longer change once the
diversion is acknowledged). Starting the engine costs 0.7-0.8 s, more than this merge
of a 1% change to a 2M-row table.

:func:`merge_compacted_changes` says None, and changes nothing, when the rows cannot be
computed exactly as the engine's view would: a partition expression only the engine
evaluates (``gluon.lake.staging``), or a base table whose columns are not the table's
columns and its partition columns (a schema change in flight).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gluon.errors import LakeError
from gluon.faults import fault_point
from gluon.lake import failures, float_stats, merge, publish, staging
from gluon.lake.changes import PARTITION_COLUMN
from gluon.lake.checkpoints import checkpoint_if_due
from gluon.schema import Column, PartitionColumn

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def merge_compacted_changes(
    base_path: str,
    delta_path: str,
    *,
    columns: tuple[Column, ...],
    partitioning: tuple[PartitionColumn, ...],
    keys: Sequence[str],
    low: int,
    high: int,
    run_id: int,
) -> str | None:
    """Merge the latest change of each key in control partitions ``low``..``high`` of the
    delta table into the base table in one commit; return what was done (None: not done
    here, the engine compacts).

    Raises:
        LakeError: the Delta library failed (nothing was committed).
    """
    try:
        return _merge(base_path, delta_path, columns, partitioning, keys, low, high, run_id)
    except Exception as exc:
        if not failures.is_delta_failure(exc):
            raise
        raise LakeError(
            f"merging the compacted changes into the Delta table at {base_path} failed: "
            f"{failures.describe(exc)}"
        ) from exc


def _merge(
    base_path: str,
    delta_path: str,
    columns: tuple[Column, ...],
    partitioning: tuple[PartitionColumn, ...],
    keys: Sequence[str],
    low: int,
    high: int,
    run_id: int,
) -> str | None:
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction

    if publish.published(base_path, run_id):
        return "merged already"
    base = DeltaTable(base_path)
    schema = pa.schema(base.schema().to_arrow())
    names = [column.lake_name for column in columns]
    parts = [part.lake_column for part in partitioning]
    if sorted(schema.names) != sorted([*names, *parts]) or len(set(schema.names)) != len(
        schema.names
    ):
        return None
    float_stats.ensure(base)
    changes = _compacted_changes(delta_path, low, high)
    latest = changes.filter(merge.latest_per_key(changes, keys))
    derived = staging.arrow_partition_values(latest, columns, partitioning)
    if derived is None:
        return None
    for name in parts:
        latest = latest.append_column(name, derived[name])
    source = latest.select([*schema.names, "gl_op"]).cast(
        pa.schema([*schema, pa.field("gl_op", pa.string())])
    )
    if source.num_rows == 0:
        return "no changes to merge"
    properties = CommitProperties(
        app_transactions=[Transaction(publish.COMPACTION_APP, run_id)],
        custom_metadata={"gluon.compaction_run": str(run_id)},
    )
    fault_point("compact.before_partition")
    metrics = merge.latest_change_merge(base, source, schema.names, keys, properties).execute()
    fault_point("compact.after_partition")
    checkpoint_if_due(base_path, int(base.version()))
    log.info("merged %d compacted changes into %s: %s", source.num_rows, base_path, metrics)
    return (
        f"{source.num_rows} changed keys merged in one commit, "
        f"{metrics.get('num_target_files_added', 0)} files written"
    )


def _compacted_changes(delta_path: str, low: int, high: int) -> pa.Table:
    """The changes in control partitions ``low``..``high`` (DataFusion reads only those)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    query = (
        f'SELECT * FROM gl_delta WHERE "{PARTITION_COLUMN}" >= {int(low)} '
        f'AND "{PARTITION_COLUMN}" <= {int(high)}'
    )
    reader = QueryBuilder().register("gl_delta", DeltaTable(delta_path)).execute(query)
    table = pa.RecordBatchReader.from_stream(reader).read_all()
    # DataFusion hands strings over as string views: back to the table's types.
    schema = pa.schema(DeltaTable(delta_path).schema().to_arrow())
    return table.select(schema.names).cast(schema)
