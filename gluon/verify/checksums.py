"""Both sides' checksums per bucket of the key, computed inside each engine.

A bucket is the set of rows whose key's MD5 (of its canonical text) starts with the same
hex digits, or whose integer key has the same low hex digits (:mod:`gluon.verify.buckets`):
it needs no order on the key, so text keys, composite keys and keys that collate
differently in the two engines split alike. Each side returns per bucket the row count and
the sum of the first 60 bits of each row's MD5 (modulo 2**64); only buckets that differ
are split further or read whole (:mod:`gluon.verify.bisect`).

A type whose text the two engines write differently (floats' exponents, zoned timestamps)
makes its rows' buckets differ: they are then read whole and compared by
:mod:`gluon.verify.canonical`'s rules, so such a type costs bytes, never a wrong verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import LakeError
from gluon.lake import sql, verify_sql
from gluon.lake.session import LakeSession, first_line
from gluon.offload.increments import previous_predicate
from gluon.read.catalog import lake_session
from gluon.repo import OffloadedTable, Repository
from gluon.schema import Column
from gluon.source.base import SourceDialect
from gluon.verify.buckets import mask, residue_name, residue_of
from gluon.verify.pace import Pace

Checksum = tuple[int, int]
"""A bucket's row count and its hash sum modulo :data:`SUM_MODULUS`."""
SUM_MODULUS = 2**64
"""Hash sums are compared modulo 2**64: the lake's engine adds them as a BIGINT that wraps
(gluon.lake.verify_sql), the source's exactly."""
BIND_CHUNK = 500
"""Buckets per statement (Oracle takes at most 1000 values in an IN list)."""

_INTEGER_TYPES = ("tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte")


def text_kind(column: Column, is_json: bool) -> str:
    """How a column is written as text in the checksum (the same on both sides)."""
    lake_type = column.lake_type.lower()
    if is_json:
        return "other"
    declared = column.source_type.lower()
    if declared.startswith("timestamptz") or (
        declared.startswith("timestamp") and "with time zone" in declared
    ):
        return "zoned"
    if lake_type in _INTEGER_TYPES:
        return "integer"
    if lake_type == "string" or lake_type.startswith(("varchar", "char")):
        return "text"
    if lake_type == "boolean":
        return "boolean"
    if lake_type == "binary":
        return "binary"
    if lake_type in ("double", "float"):
        return "float"
    if lake_type in ("date", "timestamp_ntz"):
        return "temporal"
    if lake_type.startswith("decimal("):
        return "decimal"
    return "other"


def decimal_scale(column: Column) -> tuple[int, int]:
    """A decimal column's precision and scale (its text has exactly ``scale`` decimals)."""
    found = re.match(r"decimal\((\d+),\s*(\d+)\)", column.lake_type.lower())
    return (int(found.group(1)), int(found.group(2))) if found else (38, 0)


@dataclass
class Meter:
    """Bytes moved from the source into gluon: checksum rows and the rows read whole."""

    source_bytes: int = 0
    lake_bytes: int = 0
    buckets_compared: int = 0


def _checksum_bytes(rows: Sequence[Sequence[Any]]) -> int:
    # A bucket's name and two numbers (a count and a sum of up to 16 bytes).
    return sum(len(str(row[0])) + 24 for row in rows)


def _bucket_values(buckets: Sequence[str], by_residue: bool) -> list[Any]:
    """Buckets as the engines' SQL compares them: residues, or hash prefixes as they are."""
    return [residue_of(bucket) for bucket in buckets] if by_residue else list(buckets)


def _bucket_name(value: Any, digits: int, by_residue: bool) -> str:
    return residue_name(int(value), digits) if by_residue else str(value)


def _chunks(buckets: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(buckets), BIND_CHUNK):
        yield list(buckets[start : start + BIND_CHUNK])


@dataclass
class SourceSide:
    """The source's buckets, through templates/<dialect>/verify_*.sql.j2."""

    source: SourceDialect
    record: OffloadedTable
    kinds: Sequence[str]
    key_positions: Sequence[int]
    pace: Pace
    meter: Meter
    by_residue: bool = False
    where: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        settings: Settings,
        repo: Repository,
        record: OffloadedTable,
        kinds: Sequence[str],
        key_positions: Sequence[int],
        pace: Pace,
        meter: Meter,
        by_residue: bool = False,
    ) -> SourceSide:
        source = sources.connect_configured(settings)
        source.prepare_checksums()
        side = cls(source, record, kinds, key_positions, pace, meter, by_residue)
        offloaded = previous_predicate(repo.increments.increments(record.table_key))
        if offloaded is not None:
            side.where, side.params = offloaded.to_source_sql(record.spec().columns, source.quote)
        return side

    def _context(self) -> dict[str, Any]:
        spec = self.record.spec()
        expressions = self.source.select_list(spec)
        columns = [
            {
                "expr": expression,
                "kind": kind,
                "framed": kind in verify_sql.FRAMED_KINDS,
                "digits": decimal_scale(column),
            }
            for expression, kind, column in zip(expressions, self.kinds, spec.columns, strict=True)
        ]
        return {
            "schema": spec.schema,
            "table": spec.name,
            "columns": columns,
            "keys": [columns[i] for i in self.key_positions],
            "residue_key": self.by_residue,
        }

    def count(self) -> int:
        """The rows to size the first buckets by: the whole table's estimate (the first
        level's counts are the exact figure), or the offloaded part's count."""
        spec = self.record.spec()
        if self.where is None:
            return self.source.estimate_rows(spec)
        return self.source.count_matching(spec, self.where, self.params)

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[str]
    ) -> dict[str, Checksum]:
        found: dict[str, Checksum] = {}
        for chunk in _chunks(parents) if parents else [[]]:
            values = _bucket_values(chunk, self.by_residue)
            binds = {f"vb{i}": bucket for i, bucket in enumerate(values)}
            rows = self.source.run_checksum_query(
                "verify_buckets",
                self.source.adapt_params({**self.params, **binds}),
                **self._context(),
                where=self.where,
                digits=digits,
                mask=mask(digits),
                parent_digits=parent_digits,
                parent_mask=mask(parent_digits),
                buckets=chunk,
            )
            self.meter.source_bytes += _checksum_bytes(rows)
            for bucket, count, total in rows:
                name = _bucket_name(bucket, digits, self.by_residue)
                found[name] = (int(count), int(total or 0) % SUM_MODULUS)
                self.pace.read(int(count))
        self.meter.buckets_compared += len(found)
        return found

    def rows(self, digits: int, buckets: Sequence[str]) -> list[list[Any]]:
        spec = self.record.spec()
        rows: list[list[Any]] = []
        for chunk in _chunks(buckets):
            values = _bucket_values(chunk, self.by_residue)
            binds = {f"vb{i}": bucket for i, bucket in enumerate(values)}
            condition = self.source.render(
                "verify_key_filter",
                **self._context(),
                digits=digits,
                mask=mask(digits),
                buckets=chunk,
            ).strip()
            where = f"({self.where}) AND ({condition})" if self.where else condition
            for batch in self.source.read_batches(
                spec,
                batch_rows=self.pace.batch_rows(50_000),
                where=where,
                params={**self.params, **binds},
            ):
                self.pace.read(batch.num_rows)
                self.meter.source_bytes += batch.nbytes
                columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                rows.extend(map(list, zip(*columns, strict=True)))
        return rows


@dataclass
class LakeSide:
    """The lake's buckets over the user view (the base table itself in IMMEDIATE mode)."""

    session: LakeSession
    relation: str
    columns: Sequence[tuple[str, str]]
    key_positions: Sequence[int]
    meter: Meter
    by_residue: bool = False

    @property
    def keys(self) -> list[tuple[str, str]]:
        return [self.columns[i] for i in self.key_positions]

    def _run(self, statement: str) -> list[dict[str, Any]]:
        try:
            rows: list[dict[str, Any]] = self.session.sql(statement).toArrow().to_pylist()
        except LakeError:
            raise
        except Exception as exc:
            raise LakeError(f"reading {self.relation} failed: {first_line(exc)}") from exc
        return rows

    def count(self) -> int:
        [row] = self._run(sql.select_expressions(self.relation, ["count(*) AS row_count"]))
        return int(row["row_count"])

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[str]
    ) -> dict[str, Checksum]:
        found: dict[str, Checksum] = {}
        for chunk in _chunks(parents) if parents else [[]]:
            statement = verify_sql.bucket_checksums(
                self.relation,
                self.columns,
                self.keys,
                digits=digits,
                parent_digits=parent_digits,
                parents=_bucket_values(chunk, self.by_residue),
                by_residue=self.by_residue,
            )
            rows = self._run(statement)
            self.meter.lake_bytes += _checksum_bytes([[row["bucket"]] for row in rows])
            for row in rows:
                name = _bucket_name(row["bucket"], digits, self.by_residue)
                found[name] = (int(row["row_count"]), int(row["hash_sum"] or 0) % SUM_MODULUS)
        return found

    def rows(self, digits: int, buckets: Sequence[str]) -> list[list[Any]]:
        rows: list[list[Any]] = []
        for chunk in _chunks(buckets):
            condition = verify_sql.key_filter(
                self.keys, digits, _bucket_values(chunk, self.by_residue), self.by_residue
            )
            statement = sql.select_all(self.relation, condition)
            try:
                table = self.session.sql(statement).toArrow()
            except Exception as exc:
                raise LakeError(f"reading {self.relation} failed: {first_line(exc)}") from exc
            self.meter.lake_bytes += table.nbytes
            picked = [table.column(name).to_pylist() for name, _ in self.columns]
            rows.extend(map(list, zip(*picked, strict=True)))
        return rows


def rebuild_hint(table_key: str) -> str:
    """What to do when the lake lost something --repair cannot re-ship (a file, a column)."""
    return (
        f"rebuild the lake copy (offload -t {table_key} -x --incremental-updates-disabled, "
        "then offload again with --reset-backend-table and enable incremental update again)"
    )


@contextmanager
def lake_side(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    kinds: Sequence[str],
    key_positions: Sequence[int],
    meter: Meter,
    by_residue: bool = False,
) -> Iterator[LakeSide]:
    """The lake's side, its session open for the whole bisection."""
    relation = record.user_view
    with lake_session(settings, repo, named_in=sql.select_all(relation)) as session:
        if relation in session.unavailable:
            raise LakeError(f"{relation} cannot be read: {session.unavailable[relation]}")
        by_name = {name.lower(): name for name in session.columns(relation)}
        names = []
        for column in record.columns:
            name = by_name.get(column.view_name, by_name.get(column.lake_name.lower()))
            if name is None:
                raise LakeError(
                    f"{record.table_key}: the lake's table {relation} has no column "
                    f"{column.view_name}: {rebuild_hint(record.table_key)}"
                )
            names.append(name)
        columns = list(zip(names, kinds, strict=True))
        yield LakeSide(session, relation, columns, key_positions, meter, by_residue)
