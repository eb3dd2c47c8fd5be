"""No min/max statistics for float columns in the Delta log of the tables gluon writes.

The engine (Sail 0.7) reads a float column from the per-file statistics of the Delta log
when they say min = max with no NULLs, and a NaN is ignored by those statistics: a file
holding ``NaN`` and ``2.5`` is logged with min = max = 2.5, and every reader through the
engine (the user view, queries, compaction, verify) got 2.5 for the NaN row. A
compaction then wrote the wrong value into the base table for every other reader too.
deltalake, Polars and pyarrow read the file itself and were right.

So every Delta table gluon writes that has a float column lists its statistics columns
(``delta.dataSkippingStatsColumns``: every column but the float ones; deltalake and the
engine both honour it, at creation and on every later write): float columns lose data
skipping, nothing else changes. A table created before this is given the property at its
next write (one metadata commit); files written before keep their statistics until they
are rewritten (docs/operations.md says how).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

STATS_COLUMNS = "delta.dataSkippingStatsColumns"
INDEXED_COLUMNS = "delta.dataSkippingNumIndexedCols"
_FLOAT_TYPE_NAMES = frozenset({"float", "double"})


def stats_properties(columns: Iterable[tuple[str, bool]]) -> dict[str, str]:
    """The table properties for ``columns`` (each a name and whether it is a float): none
    without a float column, else the statistics columns without the floats (no statistics
    at all when every column is a float)."""
    columns = list(columns)
    if not any(is_float for _, is_float in columns):
        return {}
    kept = [_quoted(name) for name, is_float in columns if not is_float]
    if not kept:
        return {INDEXED_COLUMNS: "0"}
    return {STATS_COLUMNS: ",".join(kept)}


def arrow_properties(schema: Any) -> dict[str, str]:
    """:func:`stats_properties` of a pyarrow schema."""
    import pyarrow as pa

    return stats_properties((field.name, pa.types.is_floating(field.type)) for field in schema)


def spark_properties(schema: Any) -> dict[str, str]:
    """:func:`stats_properties` of a Spark ``StructType`` (a DataFrame's schema)."""
    return stats_properties(
        (field.name, field.dataType.typeName() in _FLOAT_TYPE_NAMES) for field in schema.fields
    )


def missing(configuration: dict[str, str], wanted: dict[str, str]) -> dict[str, str]:
    """The properties of ``wanted`` the table's ``configuration`` does not hold yet."""
    return {name: value for name, value in wanted.items() if configuration.get(name) != value}


def ensure(table: Any, wanted: dict[str, str] | None = None) -> bool:
    """Give the deltalake ``table`` the properties its columns (or ``wanted``, for a write
    that changes its schema) call for, in one metadata commit if it lacks them; whether it
    committed. The ``table`` object then reads its new version."""
    import pyarrow as pa

    from gluon.lake.checkpoints import no_post_commit_hooks

    if wanted is None:
        wanted = arrow_properties(pa.schema(table.schema().to_arrow()))
    needed = missing(dict(table.metadata().configuration), wanted)
    if not needed:
        return False
    table.alter.set_table_properties(
        needed, raise_if_not_exists=False, post_commithook_properties=no_post_commit_hooks()
    )
    return True


def engine_write_options(location: str, schema: Any) -> dict[str, str]:
    """Before the engine writes a frame of Spark ``schema`` to ``location``: an existing
    table is given its properties now (:func:`ensure`); for a table the write creates, the
    writer options that set them (the engine applies them at creation only)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    wanted = spark_properties(schema)
    if not wanted:
        return {}
    try:
        table = DeltaTable(location)
    except TableNotFoundError:
        return wanted
    ensure(table, wanted)
    return {}


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
