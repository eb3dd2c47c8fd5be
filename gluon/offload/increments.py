"""Partial offloads: which rows an offload copies (offload types INCREMENTAL and FULL 100/10).

Every increment, whatever option asked for it, is recorded as a predicate in
gluon's predicate language (``gluon/predicates.py``):

* ``--offload-predicate``: the predicate itself;
* ``--less-than-value`` / ``--older-than-date``: ``column(P) >= previous and
  column(P) < value`` on the table's RANGE partition column;
* ``--partition-names``: the named partitions' bounds;
* ``--subpartition-names``: each named subpartition's parent partition bound and its own
  bound (the subpartition key may be another column).

So one overlap rule serves all of them: a new increment may not cover rows the
lake already holds, nor rows an earlier increment covered in the source.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gluon.errors import StateError, UnsupportedError, UsageError
from gluon.methods.base import OffloadUseCase
from gluon.repo.increments import DONE, OffloadIncrement
from gluon.schema import Column, TableSpec
from gluon.source.base import PartitionBound, SourceDialect, Subpartition

if TYPE_CHECKING:
    # The predicate language is parsed only when an offload or a schema change needs it:
    # every command imports this module, a no-op extraction does not parse (issue 14).
    from gluon.predicates import Predicate


class OffloadType(StrEnum):
    """An offload type, as recorded with the table (``OffloadedTable.offload_type``)."""

    FULL = "FULL"
    """The whole table, in one go (100/0)."""
    FULL_100_10 = "FULL_100_10"
    """The whole table, offloaded in parts (100/10): ``--offload-type=FULL`` with an increment."""
    INCREMENTAL = "INCREMENTAL"
    """Only the older rows (90/10)."""

    @property
    def option_value(self) -> OffloadType:
        """How ``--offload-type`` names it."""
        return OffloadType.FULL if self is OffloadType.FULL_100_10 else self

    @property
    def use_case(self) -> OffloadUseCase:
        """The spec's use case, which an extraction method supports or not."""
        return {
            OffloadType.FULL: OffloadUseCase.FULL_100_0,
            OffloadType.FULL_100_10: OffloadUseCase.FULL_100_10,
            OffloadType.INCREMENTAL: OffloadUseCase.INCREMENTAL_90_10,
        }[self]


class RequestedOffloadType(StrEnum):
    """The offload types ``--offload-type`` takes (its choices): ``OffloadType``'s, but not
    FULL_100_10, which an offload in parts records for FULL."""

    FULL = OffloadType.FULL.value
    INCREMENTAL = OffloadType.INCREMENTAL.value


def check_offload_predicate(offload_predicate: str | None) -> None:
    """Refuse an empty ``--offload-predicate`` before anything runs.

    Raises:
        UsageError: the predicate is given but blank.
    """
    if offload_predicate is not None and not offload_predicate.strip():
        raise UsageError(
            "--offload-predicate is empty: give the rows to offload, e.g. "
            "'column(SOLD_ON) < date(2020-01-01)', or leave the option out to offload every row"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementRequest:
    """The partial-offload options of one ``offload`` command."""

    offload_type: str | None = None
    offload_predicate: str | None = None
    less_than_value: str | None = None
    older_than_date: str | None = None
    partition_names: tuple[str, ...] = ()
    subpartition_names: tuple[str, ...] = ()

    @property
    def is_partial(self) -> bool:
        return bool(
            self.offload_predicate
            or self.less_than_value
            or self.older_than_date
            or self.partition_names
            or self.subpartition_names
        )


@dataclass(frozen=True, slots=True)
class PlannedIncrement:
    kind: str
    predicate: Predicate
    boundary: str | None
    offload_type: str
    names: tuple[str, ...] = ()
    """The partitions or subpartitions it offloads, as the source names them."""


def _typed(column: Column, value: str, option: str) -> str:
    """``value`` as a predicate-language value of ``column``'s type."""
    try:
        if column.lake_type == "date":
            return f"date({dt.date.fromisoformat(value[:10]).isoformat()})"
        if column.lake_type.startswith("timestamp"):
            return f"datetime({dt.datetime.fromisoformat(value).isoformat(sep=' ')})"
        if column.lake_type in (
            "tinyint",
            "smallint",
            "int",
            "bigint",
        ) or column.lake_type.startswith("decimal("):
            return f"numeric({decimal.Decimal(value)})"
    except (ValueError, decimal.InvalidOperation):
        raise UsageError(
            f"{option}: {value!r} is not a valid value for column {column.name} "
            f"({column.source_type})"
        ) from None
    if column.lake_type == "string":
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'string("{escaped}")'
    raise UnsupportedError(
        f"{option}: column {column.name} of type {column.source_type} cannot bound an offload"
    )


def _range_column(spec: TableSpec, option: str) -> Column:
    if spec.partition_kind != "RANGE" or len(spec.partition_columns) != 1:
        raise UsageError(
            f"{option} needs a table RANGE-partitioned on one column; {spec.schema}.{spec.name} "
            "is not: use --offload-predicate"
        )
    return spec.column(spec.partition_columns[0])


def _bound_predicate(
    column: Column, bound: PartitionBound, option: str = "--partition-names"
) -> str:
    name = f"column({column.name})"
    if bound.values or bound.holds_null:
        terms = [f"{name} = {_typed(column, v, option)}" for v in bound.values]
        return "(" + " or ".join([*terms, *([f"{name} is null"] if bound.holds_null else [])]) + ")"
    terms = []
    if bound.low is not None:
        terms.append(f"{name} >= {_typed(column, bound.low, option)}")
    if bound.high is not None:
        terms.append(f"{name} < {_typed(column, bound.high, option)}")
    if not terms:
        raise UnsupportedError(
            f"--partition-names: partition {bound.name} has no bounds (a DEFAULT partition); "
            "offload its rows with --offload-predicate"
        )
    return "(" + " and ".join(terms) + ")"


SUBPARTITION_OPTION = "--subpartition-names"
LISTED_NAMES = 12
"""How many valid names an unknown-name message lists (a table may have thousands)."""


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED_NAMES])
    return shown + (f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else "")


def _chosen_subpartitions(
    source: SourceDialect, spec: TableSpec, names: tuple[str, ...]
) -> list[Subpartition]:
    """The named subpartitions of ``spec``, each once, in the order given.

    Raises:
        UsageError: the table has no subpartitions, a name is not one of them, or one has no
            value bound a predicate can state (HASH, DEFAULT).
    """
    table = f"{spec.schema}.{spec.name}"
    found = source.subpartitions(spec)
    if not found:
        raise UsageError(
            f"{SUBPARTITION_OPTION}: {table} has no subpartitions: offload its partitions with "
            "--partition-names, or its rows with --offload-predicate"
        )
    by_lower = {name.lower(): item for name, item in found.items()}
    unknown = [name for name in names if name.lower() not in by_lower]
    if unknown:
        parents = {item.partition.name.lower() for item in found.values()}
        if all(name.lower() in parents for name in unknown):
            raise UsageError(
                f"{SUBPARTITION_OPTION}: {', '.join(unknown)} of {table} "
                f"{'is a partition' if len(unknown) == 1 else 'are partitions'}, not "
                "subpartitions: name them with --partition-names"
            )
        raise UsageError(
            f"{SUBPARTITION_OPTION}: {table} has no subpartition {', '.join(unknown)} "
            f"(subpartitions: {_listed(sorted(found))})"
        )
    chosen = list({name.lower(): by_lower[name.lower()] for name in names}.values())
    siblings: dict[str, list[str]] = {}
    for item in found.values():
        siblings.setdefault(item.partition.name, []).append(item.name)
    named = {item.name for item in chosen}
    for item in chosen:
        if not _has_values(item.partition):
            raise UsageError(
                f"{SUBPARTITION_OPTION}: the partition {item.partition.name} holding "
                f"{item.name} has no value bounds (a HASH or DEFAULT partition), so no predicate "
                "the lake can check selects its rows: use --offload-predicate"
            )
        if not _has_values(item.bound) and not named.issuperset(siblings[item.partition.name]):
            what = "a HASH" if item.kind == "HASH" else "a DEFAULT"
            raise UsageError(
                f"{SUBPARTITION_OPTION}: {item.name} is {what} subpartition: no value bound "
                "tells its rows from its siblings' in the lake, so it is offloaded only with "
                f"all of them ({', '.join(siblings[item.partition.name])}), or as its partition "
                f"with --partition-names={item.partition.name}"
            )
    return [
        replace(item, bound=PartitionBound(item.name))  # all of its partition: no own bound
        if named.issuperset(siblings[item.partition.name])
        else item
        for item in chosen
    ]


def _has_values(bound: PartitionBound) -> bool:
    return bool(bound.values) or bound.holds_null or bound.low is not None or bound.high is not None


def _subpartition_predicate(spec: TableSpec, item: Subpartition) -> str:
    """Rows of one subpartition: its parent partition's bound and its own (the parent's
    alone for a subpartition named with all its siblings)."""
    parent = _bound_predicate(
        spec.column(item.partition_column), item.partition, SUBPARTITION_OPTION
    )
    if not _has_values(item.bound):
        return parent
    own = _bound_predicate(spec.column(item.column), item.bound, SUBPARTITION_OPTION)
    return f"({parent} and {own})"


def _previous_boundary(previous: list[OffloadIncrement]) -> str | None:
    boundaries = [i.boundary for i in previous if i.kind == "less_than" and i.status == DONE]
    return boundaries[-1] if boundaries else None


def plan_increment(
    source: SourceDialect,
    spec: TableSpec,
    request: IncrementRequest,
    previous: list[OffloadIncrement],
) -> PlannedIncrement:
    """Turn the options into one increment, checked against the table.

    Raises:
        UsageError: conflicting options, bad values, a boundary not above the last one.
    """
    chosen = [
        name
        for name, value in (
            ("--offload-predicate", request.offload_predicate),
            ("--less-than-value", request.less_than_value),
            ("--older-than-date", request.older_than_date),
            ("--partition-names", request.partition_names),
            (SUBPARTITION_OPTION, request.subpartition_names),
        )
        if value
    ]
    if len(chosen) != 1:
        raise UsageError(f"use only one of {', '.join(chosen)} in one offload")
    offload_type = (
        OffloadType.INCREMENTAL
        if (request.offload_type or OffloadType.INCREMENTAL) == OffloadType.INCREMENTAL
        else OffloadType.FULL_100_10
    )
    boundary: str | None = None
    names: tuple[str, ...] = ()
    if request.offload_predicate:
        kind, text = "predicate", request.offload_predicate
    elif request.subpartition_names:
        selected = _chosen_subpartitions(source, spec, request.subpartition_names)
        kind, names = "subpartitions", tuple(item.name for item in selected)
        text = " or ".join(dict.fromkeys(_subpartition_predicate(spec, item) for item in selected))
    elif request.partition_names:
        bounds = source.partition_bounds(spec)
        unknown = [
            name
            for name in request.partition_names
            if name.lower() not in {b.lower() for b in bounds}
        ]
        if unknown:
            raise UsageError(
                f"--partition-names: {spec.name} has no partition {', '.join(unknown)} "
                f"(partitions: {', '.join(sorted(bounds))})"
            )
        by_lower = {name.lower(): bound for name, bound in bounds.items()}
        column = spec.column(spec.partition_columns[0])
        kind = "partitions"
        names = tuple(
            dict.fromkeys(by_lower[name.lower()].name for name in request.partition_names)
        )
        text = " or ".join(_bound_predicate(column, by_lower[name.lower()]) for name in names)
    else:
        option = "--less-than-value" if request.less_than_value else "--older-than-date"
        value = request.less_than_value or request.older_than_date
        assert value is not None
        column = _range_column(spec, option)
        if request.older_than_date and column.lake_type not in (
            "date",
            "timestamp_ntz",
            "timestamp",
        ):
            raise UsageError(f"--older-than-date needs a date partition column, not {column.name}")
        upper = _typed(column, value, option)
        last = _previous_boundary(previous)
        kind, boundary = "less_than", value
        text = f"column({column.name}) < {upper}"
        if last is not None:
            lower = _typed(column, last, option)
            if _parse_value(upper) <= _parse_value(lower):
                raise StateError(
                    f"{option}={value} is not above the last boundary offloaded ({last}): "
                    "those rows are already in the lake"
                )
            text = f"column({column.name}) >= {lower} and {text}"
    from gluon.predicates import parse_predicate

    predicate = parse_predicate(text)
    predicate.check_columns(spec.columns)
    return PlannedIncrement(kind, predicate, boundary, offload_type, names)


def _parse_value(text: str) -> Any:
    """The comparable Python value of a typed predicate value such as ``date(2020-01-01)``."""
    from gluon.predicates import Compare, parse_predicate

    root = parse_predicate(f"column(x) = {text}").root
    assert isinstance(root, Compare)
    return root.value


def previous_predicate(previous: list[OffloadIncrement]) -> Predicate | None:
    """Everything earlier increments covered, as one predicate."""
    from gluon.predicates import parse_predicate

    done = [f"({i.predicate})" for i in previous if i.status == DONE]
    return parse_predicate(" or ".join(done)) if done else None
