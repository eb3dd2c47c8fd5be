"""Spark SQL for gluon verify's checksums: the same canonical row text and MD5 as the
source's templates (templates/<dialect>/_verify_hash.sql.j2), so equal rows hash equal.

A column is its text (NULL as ``N``; a kind in :data:`FRAMED_KINDS` framed by its length
and ``:``), columns joined by ``|``; a bucket is the first hex digits of the MD5 of the key
columns' text, or the low hex digits of a single integer key (``key & mask``,
:mod:`gluon.verify.buckets`), and its checksum the sum of the first 60 bits of each row's
MD5 as a BIGINT: the sum wraps modulo 2**64 (Sail, as Spark without ANSI mode), and both
sides' sums are compared modulo 2**64 (``gluon.verify.checksums.SUM_MODULUS``); a DECIMAL
sum cost Sail 0.7 s of CPU at 5M rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gluon.lake.sql import quote_part, string_literal

HashedColumn = tuple[str, str]
"""A column's name in the relation read and its text kind (gluon.verify.checksums)."""

FRAMED_KINDS = frozenset({"text", "other"})
"""Text kinds whose text may hold the separator ``|`` or be ``N`` (strings, JSON, a type
without a kind of its own): their text is framed by its length. Any other kind's text
(numbers, booleans, dates and timestamps, hex) never is, so it is hashed as it is: a length
and its cast cost each engine as much per row as the MD5 (issue 31 item 6)."""

_BUCKET = re.compile(r"^[0-9a-f]*$")
_RESIDUE_DIGITS = 16
_HASH_SUM_DIGITS = 15


def _text_of(name: str, kind: str) -> str:
    column = quote_part(name)
    if kind == "text":
        return column
    if kind == "boolean":
        return f"CASE WHEN {column} THEN '1' WHEN NOT {column} THEN '0' END"
    if kind == "binary":
        return f"lower(hex({column}))"
    if kind == "float":  # as PostgreSQL writes infinities and exponents (1e+20)
        infinity = "cast('Infinity' AS double)"
        signed = f"replace(replace(cast({column} AS string), 'e', 'e+'), 'e+-', 'e-')"
        return (
            f"CASE WHEN {column} = {infinity} THEN 'Infinity' "
            f"WHEN {column} = -{infinity} THEN '-Infinity' ELSE {signed} END"
        )
    return f"cast({column} AS string)"  # a zoned timestamp: in UTC, the session's zone


def _field(name: str, kind: str) -> str:
    text = _text_of(name, kind)
    if kind not in FRAMED_KINDS:
        return f"coalesce({text}, 'N')"
    length = f"cast(length({text}) AS string)"
    return f"CASE WHEN {quote_part(name)} IS NULL THEN 'N' ELSE concat({length}, ':', {text}) END"


def row_text(columns: Sequence[HashedColumn]) -> str:
    """The canonical text of a row of ``columns``."""
    return "concat_ws('|', " + ", ".join(_field(name, kind) for name, kind in columns) + ")"


def _in_buckets(expression: str, buckets: Sequence[str]) -> str:
    for bucket in buckets:
        if not _BUCKET.match(bucket):
            raise ValueError(f"not a bucket of hex digits: {bucket!r}")
    return f"{expression} IN (" + ", ".join(string_literal(b) for b in buckets) + ")"


def _mask(digits: int) -> str:
    # The key's low `digits` hex digits (16: all 64 bits), as gluon.verify.buckets.mask.
    return "(-1)" if digits >= _RESIDUE_DIGITS else str(16**digits - 1)


def _key_value(keys: Sequence[HashedColumn], by_residue: bool) -> str:
    return quote_part(keys[0][0]) if by_residue else f"md5({row_text(keys)})"


def _bucket_of(value: str, digits: int, by_residue: bool) -> str:
    return f"({value} & {_mask(digits)})" if by_residue else f"substr({value}, 1, {digits})"


def _in_residues(expression: str, residues: Sequence[int]) -> str:
    return f"{expression} IN (" + ", ".join(str(int(residue)) for residue in residues) + ")"


def _in(expression: str, buckets: Sequence[str] | Sequence[int], by_residue: bool) -> str:
    if by_residue:
        return _in_residues(expression, [int(bucket) for bucket in buckets])
    return _in_buckets(expression, [str(bucket) for bucket in buckets])


def key_filter(
    keys: Sequence[HashedColumn],
    digits: int,
    buckets: Sequence[str] | Sequence[int],
    by_residue: bool = False,
) -> str:
    """The rows whose key is in one of ``buckets`` (``digits`` long hash prefixes, or the
    residues of a single integer key)."""
    return _in(_bucket_of(_key_value(keys, by_residue), digits, by_residue), buckets, by_residue)


def bucket_checksums(
    relation: str,
    columns: Sequence[HashedColumn],
    keys: Sequence[HashedColumn],
    *,
    digits: int,
    parent_digits: int,
    parents: Sequence[str] | Sequence[int],
    by_residue: bool = False,
) -> str:
    """Per bucket of ``digits`` hex digits within ``parents``: count and hash sum
    (``relation`` already rendered)."""
    inner = (
        f"SELECT {_key_value(keys, by_residue)} AS key_value, "
        f"md5({row_text(columns)}) AS row_hash FROM {relation}"
    )
    parent = _bucket_of("key_value", parent_digits, by_residue)
    where = f" WHERE {_in(parent, parents, by_residue)}" if parents else ""
    bucket = _bucket_of("key_value", digits, by_residue)
    return (
        f"SELECT {bucket} AS bucket, count(*) AS row_count, "
        f"sum(cast(conv(substr(row_hash, 1, {_HASH_SUM_DIGITS}), 16, 10) AS bigint)) "
        f"AS hash_sum FROM ({inner}) hashed{where} GROUP BY {bucket}"
    )
