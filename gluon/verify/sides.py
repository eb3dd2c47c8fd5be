"""What both sides of a verify are compared as: the columns, the key's and JSON's places,
and rows grouped by key in canonical form (:mod:`gluon.verify.checksums` reads them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gluon.repo import OffloadedTable
from gluon.schema import Column
from gluon.verify.canonical import Canonical, canonical_row

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
