"""Facts about Delta tables read from their logs with deltalake (no Spark, no data scan).

Row counts come from the per-file statistics in the log (``numRecords``);
only files written without statistics are counted by reading them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from gluon.lake import storage


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One value of a partition column: its live rows, files and bytes."""

    value: str | None
    rows: int
    files: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class DeltaStats:
    """The current version of a Delta table, or ``exists=False`` when there is none."""

    location: str
    exists: bool
    version: int | None = None
    rows: int = 0
    files: int = 0
    size_bytes: int = 0
    committed_at: dt.datetime | None = None
    """When the current version was committed (naive UTC)."""
    partitions: tuple[PartitionStats, ...] = ()
    """Per value of the requested partition column, lowest value first."""
    max_values: tuple[tuple[str, Any], ...] = ()
    """The largest value of each requested column, from the file statistics."""
    error: str | None = None
    """Why the table could not be read (it exists but its log or files are unreadable)."""

    def max_value(self, column: str) -> Any:
        return dict(self.max_values).get(column)


def _sort_key(value: str | None) -> tuple[int, float | str]:
    if value is None:
        return (2, "")
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


def delta_stats(
    location: str,
    *,
    partition_column: str | None = None,
    max_columns: tuple[str, ...] = (),
    version: int | None = None,
) -> DeltaStats:
    """Rows, files and bytes of the Delta table at ``location``, from its log.

    Args:
        location: the table's path or URI.
        partition_column: also break the numbers down by this partition column.
        max_columns: columns whose largest value to report (from file statistics).
        version: read this version instead of the latest.

    Returns:
        The statistics; ``exists=False`` when no Delta table is there, and
        ``error`` set when it is there but cannot be read. Never raises for
        a missing or unreadable table (status commands must always answer).
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        table = DeltaTable(location, version=version)
        # deltalake's own Arrow table (arro3): read as is, so status never loads pyarrow
        # (and pa.table() on it would import pandas: half a second for nothing).
        actions = table.get_add_actions(flatten=True)
        history = table.history(1)
    except TableNotFoundError:
        return DeltaStats(location=location, exists=False)
    except (DeltaError, OSError, ValueError) as exc:
        return DeltaStats(location=location, exists=True, error=str(exc).splitlines()[0])
    records = _values(actions, "num_records")
    if any(count is None for count in records):
        # Files without statistics: count the rows of every file by reading them.
        records = _count_rows_per_file(
            location, version, [str(path) for path in _values(actions, "path")]
        )
    sizes = _values(actions, "size_bytes")
    partitions: dict[str | None, list[int]] = {}
    if partition_column:
        name = f"partition.{partition_column}"
        values = _values(actions, name) if name in actions.column_names else []
        for value, count, size in zip(values, records, sizes, strict=True):
            key = None if value is None else str(value)
            totals = partitions.setdefault(key, [0, 0, 0])
            totals[0] += int(count)
            totals[1] += 1
            totals[2] += int(size)
    maxima = []
    for column in max_columns:
        name = f"max.{column}"
        found = (
            [v for v in actions.column(name).to_pylist() if v is not None]
            if (name in actions.column_names)
            else []
        )
        maxima.append((column, max(found) if found else None))
    committed_at = None
    if history and history[0].get("timestamp") is not None:
        stamp = dt.datetime.fromtimestamp(int(history[0]["timestamp"]) / 1000, dt.UTC)
        committed_at = stamp.replace(tzinfo=None)
    return DeltaStats(
        location=location,
        exists=True,
        version=int(table.version()),
        rows=sum(int(count) for count in records),
        files=actions.num_rows,
        size_bytes=sum(int(size) for size in sizes),
        committed_at=committed_at,
        partitions=tuple(
            PartitionStats(value, rows, files, size)
            for value, (rows, files, size) in sorted(
                partitions.items(), key=lambda item: _sort_key(item[0])
            )
        ),
        max_values=tuple(maxima),
    )


def _values(actions: Any, column: str) -> list[Any]:
    """The values of one column of deltalake's add actions, as Python objects."""
    return list(actions.column(column).to_pylist()) if actions.num_rows else []


def _count_rows_per_file(location: str, version: int | None, paths: list[str]) -> list[int]:
    import pyarrow.dataset as ds

    dataset = storage.delta_dataset(location, version)
    counts = []
    for fragment_path in paths:
        fragments = [
            fragment
            for fragment in dataset.get_fragments()
            if isinstance(fragment, ds.FileFragment) and fragment.path.endswith(fragment_path)
        ]
        counts.append(sum(fragment.count_rows() for fragment in fragments))
    return counts
