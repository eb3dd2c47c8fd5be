"""Spark SQL for gluon verify's checksums: the same canonical row text and MD5 as the
source's templates (templates/<dialect>/_verify_hash.sql.j2), so equal rows hash equal.

A column is its text (NULL as ``N``, else its length, ``:`` and the text), columns joined
by ``|``; a bucket is the first hex digits of the MD5 of the key columns' text, and its
checksum two sums of 32 bits of each row's MD5 (no sum overflows a BIGINT).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gluon.lake.sql import quote_part, string_literal

HashedColumn = tuple[str, str]
"""A column's name in the relation read and its text kind (gluon.verify.checksums)."""

_BUCKET = re.compile(r"^[0-9a-f]*$")


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


def key_filter(keys: Sequence[HashedColumn], digits: int, buckets: Sequence[str]) -> str:
    """The rows whose key's hash starts with one of ``buckets`` (each ``digits`` long)."""
    return _in_buckets(f"substr(md5({row_text(keys)}), 1, {digits})", buckets)


def bucket_checksums(
    relation: str,
    columns: Sequence[HashedColumn],
    keys: Sequence[HashedColumn],
    *,
    digits: int,
    parent_digits: int,
    parents: Sequence[str],
) -> str:
    """Per bucket of ``digits`` hex digits within ``parents``: count and two hash sums
    (``relation`` already rendered)."""
    inner = (
        f"SELECT md5({row_text(keys)}) AS key_hash, md5({row_text(columns)}) AS row_hash "
        f"FROM {relation}"
    )
    where = (
        f" WHERE {_in_buckets(f'substr(key_hash, 1, {parent_digits})', parents)}" if parents else ""
    )
    return (
        f"SELECT substr(key_hash, 1, {digits}) AS bucket, count(*) AS row_count, "
        f"sum(cast(conv(substr(row_hash, 1, 8), 16, 10) AS bigint)) AS high_sum, "
        f"sum(cast(conv(substr(row_hash, 9, 8), 16, 10) AS bigint)) AS low_sum "
        f"FROM ({inner}) hashed{where} GROUP BY substr(key_hash, 1, {digits})"
    )
