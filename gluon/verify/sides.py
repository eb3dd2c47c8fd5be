"""The rows each side holds, grouped by key in canonical form.

The source is read through the offload's own conversion into the lake's Arrow types
(:meth:`SourceDialect.read_batches`, one statement: one snapshot); the lake through the
session ``gluon query`` uses, from the user view (the base table itself in IMMEDIATE mode).
Only the rows the lake is meant to hold are read from the source: the offloaded part of a
partially offloaded table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import LakeError
from gluon.lake import sql
from gluon.lake.session import first_line
from gluon.offload.increments import previous_predicate
from gluon.read.catalog import lake_session
from gluon.repo import OffloadedTable, Repository
from gluon.schema import Column
from gluon.verify.canonical import Canonical, canonical_row
from gluon.verify.pace import Pace

BATCH_ROWS = 50_000
Rows = dict[Canonical, list[Canonical]]


@dataclass(frozen=True)
class Shape:
    """What both sides are read as: the columns in order, the key's and JSON's places."""

    columns: tuple[Column, ...]
    key_positions: tuple[int, ...]
    json_positions: frozenset[int]

    @classmethod
    def of(cls, record: OffloadedTable, key_columns: Sequence[str]) -> Shape:
        names = [column.name.lower() for column in record.columns]
        keys = tuple(names.index(name.lower()) for name in key_columns)
        return cls(
            columns=record.columns,
            # A table without a key is compared as a multiset of whole rows.
            key_positions=keys or tuple(range(len(names))),
            json_positions=frozenset(
                i for i, c in enumerate(record.columns) if "json" in c.source_type.lower()
            ),
        )

    def group(self, rows: Iterable[list[Any]]) -> Rows:
        grouped: Rows = defaultdict(list)
        for values in rows:
            row = canonical_row(values, self.json_positions)
            grouped[tuple(row[i] for i in self.key_positions)].append(row)
        return grouped


def source_rows(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    shape: Shape,
    pace: Pace | None = None,
) -> Rows:
    """The source rows the lake is meant to hold (read no faster than ``pace``)."""
    pace = pace or Pace(None)
    source = sources.connect_configured(settings)
    spec = record.spec()
    where: str | None = None
    params: dict[str, Any] = {}
    offloaded = previous_predicate(repo.increments.increments(record.table_key))
    if offloaded is not None:
        where, params = offloaded.to_source_sql(spec.columns, source.quote)
    rows: list[list[Any]] = []
    batches = source.read_batches(
        spec, batch_rows=pace.batch_rows(BATCH_ROWS), where=where, params=params
    )
    for batch in batches:
        pace.read(batch.num_rows)
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        rows.extend(map(list, zip(*columns, strict=True)))
    return shape.group(rows)


def lake_rows(settings: Settings, repo: Repository, record: OffloadedTable, shape: Shape) -> Rows:
    """The rows the lake shows (the user view), in the source's column order."""
    statement = sql.select_all(record.user_view)
    with lake_session(settings, repo, named_in=statement) as session:
        if record.user_view in session.unavailable:
            raise LakeError(
                f"{record.user_view} cannot be read: {session.unavailable[record.user_view]}"
            )
        try:
            table = session.sql(statement).toArrow()
        except Exception as exc:
            raise LakeError(f"reading {record.user_view} failed: {first_line(exc)}") from exc
    by_name = {name.lower(): i for i, name in enumerate(table.column_names)}
    picked = []
    for column in shape.columns:
        index = by_name.get(column.view_name, by_name.get(column.lake_name.lower()))
        if index is None:
            raise LakeError(f"{record.user_view} has no column {column.view_name}")
        picked.append(table.column(index).to_pylist())
    return shape.group(map(list, zip(*picked, strict=True)))
