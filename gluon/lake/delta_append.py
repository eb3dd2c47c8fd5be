"""Appending a batch of changes to the delta table with deltalake, without the engine.

Starting the embedded engine and its Spark Connect client costs more (0.7-0.8 s) than
appending a batch of tens of thousands of changes; an extraction that only appends (the
usual one: nothing of the batch is in the lake yet, no insert-only screen) needs nothing
else from it. The rows are the engine's: the table's columns, ``gl_seq``, ``gl_op``,
``gl_extraction_id`` and the control partition, written to the table's own schema; when
that schema is not exactly the one these rows have (a table written by an older gluon, a
column whose type the engine maps otherwise), :func:`append_without_engine` says False
and the engine appends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gluon.errors import LakeError
from gluon.faults import fault_point
from gluon.lake import failures, float_stats
from gluon.lake.checkpoints import checkpoint_if_due, no_post_commit_hooks
from gluon.lake.session import is_commit_conflict
from gluon.schema import arrow_int_scalar, arrow_repeat

if TYPE_CHECKING:
    import pyarrow as pa


def with_change_columns(
    changes: pa.Table, extraction_id: int, partition: int, partition_column: str
) -> pa.Table:
    """``changes`` with ``gl_extraction_id`` and the control partition column (built from
    bytes: a Python value made Arrow imports pandas, see gluon.schema)."""
    import pyarrow as pa

    count = changes.num_rows
    return changes.append_column(
        "gl_extraction_id", arrow_repeat(arrow_int_scalar(extraction_id), count)
    ).append_column(partition_column, arrow_repeat(arrow_int_scalar(partition, pa.int32()), count))


def append_without_engine(location: str, rows: pa.Table, partition_column: str) -> bool:
    """Append ``rows`` to the Delta table at ``location`` in one deltalake commit; False
    (nothing written) when there is no table there or its schema is not ``rows``'."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    # One open of the log for the check, the write and the checkpoint (each open replays
    # the log from its last checkpoint: three of them were a tenth of a loaded service run).
    try:
        table = DeltaTable(location)
    except TableNotFoundError:
        return False
    schema = pa.schema(table.schema().to_arrow())
    if list(table.metadata().partition_columns) != [partition_column]:
        return False
    if schema.names != rows.schema.names or any(
        field.type != rows.schema.field(field.name).type for field in schema
    ):
        return False
    float_stats.ensure(table)
    fault_point("lake.before_write")
    try:
        write_deltalake(
            table,
            rows.cast(schema),
            mode="append",
            partition_by=[partition_column],
            post_commithook_properties=no_post_commit_hooks(),
        )
    except Exception as exc:
        if is_commit_conflict(exc) or not failures.is_delta_failure(exc):
            raise  # a lost race is the caller's to retry (gluon.lake.session.retry_commit)
        raise LakeError(
            f"writing the Delta table at {location} failed: {failures.describe(exc)}"
        ) from exc
    fault_point("lake.after_write")
    # The write moved this table object to its own commit: no second log read.
    checkpoint_if_due(location, table.version())  # as the engine checkpoints its tables
    return True
