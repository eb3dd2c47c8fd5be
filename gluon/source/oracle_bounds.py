"""Oracle partition bounds: ``HIGH_VALUE`` texts of the dictionary as :class:`PartitionBound`.

``ALL_TAB_PARTITIONS.HIGH_VALUE`` and ``ALL_TAB_SUBPARTITIONS.HIGH_VALUE`` (LONG columns,
fetched as text) hold the SQL text of a bound: for RANGE the exclusive upper bound
(``TO_DATE(' 2017-02-01 00:00:00', 'SYYYY-MM-DD HH24:MI:SS', 'NLS_CALENDAR=GREGORIAN')``,
``TIMESTAMP' 2017-02-01 00:00:00'``, ``100``, ``'M'`` or ``MAXVALUE``), the lower bound
being the previous (sub)partition's; for LIST the values (``'EMEA', 'APAC'``, ``NULL``,
``DEFAULT``); for HASH nothing. No server runs here: the rows come from the dictionary
queries ``list_partitions`` and ``list_subpartitions``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gluon.errors import UnsupportedError
from gluon.schema import TableSpec
from gluon.source.base import PartitionBound, Subpartition

_TOKEN = re.compile(
    r"""\s*(?:
        TO_DATE\(\s*'(?P<date>[^']*)'[^)]*\) |
        TIMESTAMP\s*'(?P<timestamp>[^']*)' |
        '(?P<string>(?:[^']|'')*)' |
        (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?) |
        (?P<word>MAXVALUE|DEFAULT|NULL)
    )\s*(?:,|$)""",
    re.IGNORECASE | re.VERBOSE,
)

UNBOUNDED = "MAXVALUE"


def high_values(text: str | None) -> list[str | None]:
    """The literals of one ``HIGH_VALUE`` text as source text; ``MAXVALUE``, ``DEFAULT`` and
    ``NULL`` as those words, None for none at all (a HASH subpartition).

    Raises:
        UnsupportedError: a bound gluon cannot read (an expression, a date before year 1).
    """
    if text is None or not text.strip():
        return []
    values: list[str | None] = []
    position, stripped = 0, text.strip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise UnsupportedError(
                f"partition bound {text!r}: gluon cannot read it; use --offload-predicate"
            )
        position = match.end()
        moment = match.group("date") or match.group("timestamp")
        if moment is not None:
            moment = moment.strip()
            if moment.startswith("-"):  # 'SYYYY': a leading minus is a year BC
                raise UnsupportedError(
                    f"partition bound {text!r} is before year 1; use --offload-predicate"
                )
            values.append(moment)
        elif match.group("string") is not None:
            values.append(match.group("string").replace("''", "'"))
        elif match.group("number") is not None:
            values.append(match.group("number"))
        else:
            values.append(match.group("word").upper())
    return values


def range_bounds(rows: Iterable[tuple[str, str | None]]) -> dict[str, PartitionBound]:
    """RANGE (sub)partitions in position order -> bounds: each starts at its predecessor's
    ``HIGH_VALUE``; ``MAXVALUE`` leaves the high end open."""
    bounds: dict[str, PartitionBound] = {}
    low: str | None = None
    for name, text in rows:
        values = high_values(text)
        if len(values) != 1:
            raise UnsupportedError(
                f"partition {name} is bounded on {len(values)} columns: gluon offloads "
                "(sub)partitions by one key column; use --offload-predicate"
            )
        high = None if values[0] == UNBOUNDED else values[0]
        bounds[name] = PartitionBound(name, low, high)
        low = high
    return bounds


def list_bound(name: str, text: str | None) -> PartitionBound:
    """A LIST (sub)partition's values (DEFAULT: none, as a PostgreSQL DEFAULT partition)."""
    values = high_values(text)
    if values == ["DEFAULT"]:
        return PartitionBound(name)
    return PartitionBound(
        name,
        values=tuple(value for value in values if value not in (None, "NULL")),
        holds_null="NULL" in values,
    )


def _bounds(kind: str, rows: list[tuple[str, str | None]]) -> dict[str, PartitionBound]:
    if kind == "RANGE":
        return range_bounds(rows)
    if kind == "LIST":
        return {name: list_bound(name, text) for name, text in rows}
    return {name: PartitionBound(name) for name, _ in rows}  # HASH: no value bound


def partition_bounds_from_dictionary(
    spec: TableSpec, partitions: Iterable[Mapping[str, Any]]
) -> dict[str, PartitionBound]:
    """The partitions of ``spec`` (RANGE or LIST on one column) from the ``list_partitions``
    rows (partition_name, partition_position, high_value), in position order.

    Raises:
        UnsupportedError: another partitioning, a key of several columns, a bound gluon
            cannot read.
    """
    if len(spec.partition_columns) != 1 or spec.partition_kind not in ("RANGE", "LIST"):
        raise UnsupportedError(
            f"{spec.schema}.{spec.name} is not RANGE or LIST partitioned on one column: "
            "use --offload-predicate"
        )
    ordered = sorted(partitions, key=lambda row: int(row["partition_position"]))
    return _bounds(
        str(spec.partition_kind), [(row["partition_name"], row["high_value"]) for row in ordered]
    )


def subpartitions_from_dictionary(
    spec: TableSpec,
    partitions: Iterable[Mapping[str, Any]],
    subpartitions: Iterable[Mapping[str, Any]],
) -> dict[str, Subpartition]:
    """Build the subpartitions of ``spec`` from the dictionary rows (lower-case keys).

    Args:
        spec: the table (its partitioning kind and key column).
        partitions: ``list_partitions`` rows (partition_name, partition_position, high_value).
        subpartitions: ``list_subpartitions`` rows (partition_name, subpartition_name,
            subpartition_position, high_value, subpartitioning_type, subpartition_columns).

    Raises:
        UnsupportedError: a key of several columns, a bound gluon cannot read.
    """
    subs = list(subpartitions)
    if not subs:
        return {}
    keys = str(subs[0]["subpartition_columns"] or "").split(",")
    if len(spec.partition_columns) != 1 or len(keys) != 1 or not keys[0]:
        raise UnsupportedError(
            f"{spec.schema}.{spec.name}: gluon offloads subpartitions of tables partitioned and "
            "subpartitioned on one column each; use --offload-predicate"
        )
    ordered = sorted(partitions, key=lambda row: int(row["partition_position"]))
    parents = _bounds(
        str(spec.partition_kind), [(row["partition_name"], row["high_value"]) for row in ordered]
    )
    kind = str(subs[0]["subpartitioning_type"])
    found: dict[str, Subpartition] = {}
    for parent in parents:
        siblings = sorted(
            (row for row in subs if row["partition_name"] == parent),
            key=lambda row: int(row["subpartition_position"]),
        )
        own = _bounds(kind, [(row["subpartition_name"], row["high_value"]) for row in siblings])
        for name, bound in own.items():
            found[name] = Subpartition(
                name=name,
                partition_column=spec.partition_columns[0],
                partition=parents[parent],
                column=keys[0],
                kind=kind,
                bound=bound,
            )
    return found
