"""Reading, counting and deleting the changes a changelog captured."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gluon.capture.objects import SourceObjectRef, change_fields, find_object
from gluon.methods.base import (
    SourceObject,
)
from gluon.schema import TableSpec, arrow_int_scalar
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa

ARRAY_DELETE_CHUNK = 100_000
"""Runs of sequence values per DELETE where the dialect binds arrays (see ``sequence_runs``)."""

RUNS_PER_DELETE = 250
"""Runs of sequence values per DELETE where each run is two bind parameters (SQLite, Oracle).

The runs are OR-ed ``BETWEEN`` terms, and SQLite parses an OR chain as an expression at most
1,000 levels deep (SQLITE_MAX_EXPR_DEPTH): 250 runs keep well under it, and 500 binds far
under either database's bind limit (SQLite 32,766, Oracle 65,535)."""


def count_changes(source: SourceDialect, objects: list[SourceObjectRef]) -> int:
    """Rows waiting in the changelog (0 when the method keeps none).

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return 0
    rows = source.run_query("count_changes", schema=changelog.schema, table=changelog.name)
    return int(rows[0][0])


def count_changes_of(source: SourceDialect, changelogs: Sequence[SourceObjectRef]) -> list[int]:
    """Rows waiting in each of ``changelogs``, in their order, from one query.

    Raises:
        SourceError: one of them cannot be read (count them one by one to find which).
    """
    rows = _one_query_for_each(source, "count_changes_of", changelogs)
    counts = {int(row[0]): int(row[1]) for row in rows}
    return [counts[number] for number in range(len(changelogs))]


def _one_query_for_each(
    source: SourceDialect, template: str, changelogs: Sequence[SourceObjectRef]
) -> list[Any]:
    """The rows of ``template``, a ``UNION ALL`` over ``changelogs`` whose rows each start
    with the changelog's number in ``changelogs`` (bound as ``:n<number>``)."""
    if not changelogs:
        return []
    params = {f"n{number}": number for number in range(len(changelogs))}
    return source.run_query(template, params, changelogs=list(changelogs))


@dataclass(frozen=True, slots=True)
class OldestChange:
    """The oldest change waiting in a changelog, timed on the source's clock."""

    changed_at: dt.datetime
    """When it was captured (``gl_changed_at``, naive UTC, the source's clock)."""
    source_now: dt.datetime
    """The source's clock when it was read (naive UTC)."""
    read_at: dt.datetime
    """This host's clock when it was read (naive UTC)."""

    @property
    def age(self) -> dt.timedelta:
        """How long it has waited (never negative: both times come from one clock)."""
        return max(self.source_now - self.changed_at, dt.timedelta(0))

    @property
    def captured_at(self) -> dt.datetime:
        """Its capture time on this host's clock: the source's clock may differ from this
        host's, the age does not."""
        return self.read_at - self.age


def oldest_change(source: SourceDialect, objects: list[SourceObjectRef]) -> OldestChange | None:
    """The oldest change in the changelog, by ``gl_seq`` (None: nothing pending, or no changelog).

    Reads one row through the changelog's key: cheap however long the changelog is.

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return None
    rows = source.run_query("oldest_change", schema=changelog.schema, table=changelog.name)
    if not rows:
        return None
    return OldestChange(_utc(rows[0][0]), _utc(rows[0][1]), _utc(dt.datetime.now(dt.UTC)))


def oldest_changes_of(
    source: SourceDialect, changelogs: Sequence[SourceObjectRef]
) -> list[OldestChange | None]:
    """The oldest change waiting in each of ``changelogs``, in their order, from one query
    (None: nothing pending there).

    Raises:
        SourceError: one of them cannot be read (read them one by one to find which).
    """
    rows = _one_query_for_each(source, "oldest_changes_of", changelogs)
    read_at = _utc(dt.datetime.now(dt.UTC))
    found = {int(row[0]): OldestChange(_utc(row[1]), _utc(row[2]), read_at) for row in rows}
    return [found.get(number) for number in range(len(changelogs))]


def _utc(value: dt.datetime | str) -> dt.datetime:
    """A naive UTC time from a driver's value (SQLite returns the text its default wrote)."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def sequence_position(source: SourceDialect, objects: list[SourceObjectRef]) -> int | None:
    """The last ``gl_seq`` the changelog's sequence handed out (None: no changelog).

    SQLite has no sequence object: AUTOINCREMENT keeps its position in
    ``sqlite_sequence`` under the changelog's name.

    Raises:
        SourceError: the sequence cannot be read.
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return None
    sequence = find_object(objects, SourceObject.CHANGELOG_SEQUENCE) or changelog
    rows = source.run_query(
        "sequence_position",
        {"schema": sequence.schema, "name": sequence.name},
        schema=sequence.schema,
        table=sequence.name,
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def read_changes(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[SourceObjectRef],
    *,
    limit: int | None,
    seqs: Sequence[int] = (),
) -> pa.Table:
    """The changelog rows visible now, lowest ``gl_seq`` first.

    Args:
        source: the source dialect.
        spec: the application table (the changelog has its columns).
        objects: the table's source objects.
        limit: at most this many rows (None: all of them).
        seqs: only the changes of these ``gl_seq`` values (empty: every change).

    Returns:
        The table's columns (lake names and types, ``spec`` order), then
        ``gl_seq`` (int64) and ``gl_op`` (``I``/``U``/``D``). A ``D`` row holds
        only the key columns.

    Raises:
        SourceError: the changelog cannot be read or holds a value that does not fit.
    """
    import pyarrow as pa

    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return schema.empty_table()
    sql = source.render(
        "read_changes",
        schema=changelog.schema,
        table=changelog.name,
        columns=source.select_list(spec),
        limit=limit,
        seqs=[int(seq) for seq in seqs],
    )
    params = {} if limit is None else {"limit": limit}
    batches = source.read_query_batches(
        spec,
        sa.text(sql),
        params,
        batch_rows=limit or source.fetch_rows,
        extra_fields=change_fields(),
    )
    return pa.Table.from_batches(list(batches), schema=schema)


@dataclass(frozen=True, slots=True)
class ChangeText:
    """One changelog row as the source prints it: every value as text (None: NULL)."""

    gl_seq: int
    gl_op: str
    values: dict[str, str | None]
    """By source column name."""


def read_change_texts(
    source: SourceDialect, spec: TableSpec, objects: list[SourceObjectRef], seqs: Sequence[int]
) -> dict[int, ChangeText]:
    """The changelog rows of ``seqs`` (those still there), every value printed by the source.

    Text needs no conversion, so this reads a change whose values the lake cannot take.

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None or not seqs:
        return {}
    names = [column.name for column in spec.columns]
    texts = [
        source.render("cast_to_text", column=name, source_type=column.source_type).strip()
        for name, column in zip(names, spec.columns, strict=True)
    ]
    rows = source.run_query(
        "read_changes",
        schema=changelog.schema,
        table=changelog.name,
        columns=texts,
        limit=None,
        seqs=[int(seq) for seq in seqs],
    )
    found: dict[int, ChangeText] = {}
    for row in rows:
        *values, seq, op = tuple(row)
        found[int(seq)] = ChangeText(
            int(seq),
            str(op),
            {
                name: None if value is None else str(value)
                for name, value in zip(names, values, strict=True)
            },
        )
    return found


def later_change_of_key(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[SourceObjectRef],
    change: ChangeText,
    keys: Sequence[str],
) -> int | None:
    """The ``gl_seq`` of the first change after ``change`` of the same key (None: none waits).

    Keys compare as the source prints them (a failure path: a scan is fine).

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    values = [change.values.get(key) for key in keys]
    if changelog is None or not keys or any(value is None for value in values):
        return None
    types = {column.name: column.source_type for column in spec.columns}
    texts = [
        source.render("cast_to_text", column=key, source_type=types.get(key, "")).strip()
        for key in keys
    ]
    params: dict[str, Any] = {"seq": change.gl_seq}
    params.update({f"key_{index}": value for index, value in enumerate(values)})
    rows = source.run_query(
        "later_change_of_key",
        params,
        schema=changelog.schema,
        table=changelog.name,
        key_texts=texts,
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def values_the_lake_cannot_take(
    source: SourceDialect, spec: TableSpec, keys: Sequence[str]
) -> list[str]:
    """For each column holding a value its lake type cannot take, one example: the column,
    the value and its row's key (empty: every value fits, as far as the dialect can tell).

    Enabling runs it before it creates any capture object: a copy that failed on such a
    value would leave them behind, and they would capture the value again.

    Raises:
        SourceError: the table cannot be read.
    """
    types = {column.name: column.source_type for column in spec.columns}
    key_texts = [
        source.render("cast_to_text", column=key, source_type=types.get(key, "")).strip()
        for key in keys
    ]
    found: list[str] = []
    for column in spec.columns:
        sql = source.render(
            "find_unfit_value",
            schema=spec.schema,
            table=spec.name,
            column=column,
            key_texts=key_texts,
        ).strip()
        if not sql:
            continue
        rows = source.run_query(
            "find_unfit_value",
            schema=spec.schema,
            table=spec.name,
            column=column,
            key_texts=key_texts,
        )
        if not rows:
            continue
        *key_values, value = tuple(rows[0])
        key = ", ".join(f"{name}={item}" for name, item in zip(keys, key_values, strict=True))
        kind = column.lake_type.split("(")[0].removesuffix("_ntz")
        found.append(f"column {column.name} ({kind}) holds {value} in the row {key}")
    return found


def sequence_runs(seqs: Sequence[int] | pa.Array | pa.ChunkedArray) -> list[tuple[int, int]]:
    """``seqs`` as the fewest (low, high) runs of consecutive integers that together hold
    exactly its values, in ascending order (duplicates count once). Vectorized: a batch
    holds up to millions of values, so an extraction passes its Arrow column as it is (a
    Python list of 1M values and back cost 0.1-0.3 s)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(seqs, pa.ChunkedArray):
        seqs = seqs.combine_chunks()
    values = seqs.cast(pa.int64()) if isinstance(seqs, pa.Array) else pa.array(seqs, pa.int64())
    count = len(values)
    if count == 0:
        return []
    if pc.any(pc.less_equal(values.slice(1), values.slice(0, count - 1))).as_py():
        # Out of order or repeated. A batch read in gl_seq order is neither, and skips this
        # pass (1M values: 0.39 s -> 0.15 s).
        unique = pc.unique(values)
        values = unique.take(pc.array_sort_indices(unique))
        count = len(values)
    steps = pc.subtract(values.slice(1), values.slice(0, count - 1))
    # Not the literal 1: a Python value made Arrow imports pandas (gluon.schema).
    ends = pc.indices_nonzero(pc.not_equal(steps, arrow_int_scalar(1)))  # where the next skips
    after_ends = pc.add(ends, arrow_int_scalar(1, ends.type))
    lows = [values[0].as_py(), *values.take(after_ends).to_pylist()]
    highs = [*values.take(ends).to_pylist(), values[count - 1].as_py()]
    return list(zip(lows, highs, strict=True))


def _array_literal(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers (``{1,2,3}``)."""
    return "{" + ",".join(map(str, values)) + "}"


def _bound_runs_delete(
    source: SourceDialect, changelog: SourceObjectRef, runs: Sequence[tuple[int, int]]
) -> tuple[str, dict[str, Any]]:
    """One DELETE of ``runs`` with two bind parameters per run, and its parameters."""
    names = [(f"low_{index}", f"high_{index}") for index in range(len(runs))]
    sql = source.render("delete_changes", schema=changelog.schema, table=changelog.name, runs=names)
    params: dict[str, Any] = {}
    for (low_name, high_name), (low, high) in zip(names, runs, strict=True):
        params[low_name] = low
        params[high_name] = high
    return sql, params


def delete_changes(
    source: SourceDialect,
    objects: list[SourceObjectRef],
    seqs: Sequence[int] | pa.Array | pa.ChunkedArray,
) -> int:
    """Delete exactly the changelog rows whose ``gl_seq`` is in ``seqs``, in one transaction.

    Never "everything up to the highest value read": a transaction that drew a
    lower sequence value may commit after the read, and its rows must survive.

    Returns:
        The number of rows deleted.

    Raises:
        SourceError: the delete failed (nothing is deleted).
    """
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None or len(seqs) == 0:
        return 0
    statements: list[tuple[str, dict[str, Any]]] = []
    runs = sequence_runs(seqs)
    if source.binds_arrays:
        # Runs of consecutive values, each one index range scan: a batch is usually a single
        # run, where one index lookup per value cost 3x more (ten batches of 100k from a 1M-row
        # changelog: 14.7 s -> 4.4 s). The arrays go as text literals: psycopg's per-element
        # array adaptation in Python cost 0.6 s per 100k. The template's last statement is the
        # delete; any before it set up the transaction.
        *setup, sql = source.split_script(
            source.render("delete_changes", schema=changelog.schema, table=changelog.name)
        )
        statements.extend((statement, {}) for statement in setup)
        for start in range(0, len(runs), ARRAY_DELETE_CHUNK):
            some_runs = runs[start : start + ARRAY_DELETE_CHUNK]
            statements.append(
                (
                    sql,
                    {
                        "lows": _array_literal(low for low, _ in some_runs),
                        "highs": _array_literal(high for _, high in some_runs),
                    },
                )
            )
    else:
        # The same runs as bound pairs: one short statement for the usual one-run batch, where
        # 500-value IN lists took 2,000 statements per 1M changes, each rendered and parsed
        # for its binds in Python (SQLite, 1M of a 1M-row changelog: 22 s -> 2.0 s, now
        # mostly SQLite's own b-tree work; python -m bench.changelog_deletes).
        for start in range(0, len(runs), RUNS_PER_DELETE):
            statements.append(
                _bound_runs_delete(source, changelog, runs[start : start + RUNS_PER_DELETE])
            )
    return source.execute_in_transaction(
        statements, what=f"deleting extracted changes from {changelog.schema}.{changelog.name}"
    )
