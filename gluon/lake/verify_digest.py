"""gluon verify's bucket digests of a Delta table, computed in this process (issue 31 item 6).

The other checksum form (:mod:`gluon.verify.checksums`): per bucket of a single integer key
(``key & mask``), the row count and the MD5 of the bucket's rows' canonical texts in key
order, each row's text followed by ``|`` and the last ``|`` dropped, as the source's
``MD5(STRING_AGG(row_text, '|' ORDER BY key))``
(templates/postgresql/verify_bucket_digests.sql.j2).
One MD5 per bucket instead of one per row: PostgreSQL's per-row MD5 (~600 ns a call) was
the largest cost of a verify. The row text is the same as :mod:`gluon.lake.verify_sql`'s
(a column's text, NULL as ``N``, strings framed by their length, ``|`` between columns);
rows end with ``|`` too, so a row boundary needs no other mark (every row has as many
columns, and no unframed text holds ``|``).

Read with pyarrow from the base table (the lake's latest state when nothing is pending),
not through the engine: its start and a Spark SQL pass cost more CPU than reading the
files, and Spark SQL has no cheap ordered string aggregate (measured: 5.5-5.9 s of CPU
at 5M rows against 4.1 s for the per-row form). Only the kinds :func:`writes_alike` accepts
are written here; a table with any other kind keeps the per-row form.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gluon.lake import storage

LOCAL_KINDS = frozenset({"integer", "text", "decimal", "boolean", "temporal"})
"""Text kinds (gluon.verify.checksums.text_kind) whose text pyarrow writes as the source
does. Floats (exponents, infinities), zoned timestamps, bytes (no hex in pyarrow) and JSON
are written by the engine only."""
DECIMAL_SCALE = 6
"""The largest decimal scale pyarrow writes as plain digits: a value whose exponent would
be below -6 it writes as ``1E-38`` (Arrow's decimal to string), where the source writes
``0.00...01``."""


def writes_alike(kind: str, scale: int) -> bool:
    """Whether pyarrow writes a column of ``kind`` (a decimal: of ``scale``) as the source."""
    return kind in LOCAL_KINDS and (kind != "decimal" or scale <= DECIMAL_SCALE)


READER_FEATURES = frozenset({"timestampNtz"})
"""Delta reader features the pyarrow dataset reads correctly (deletion vectors and column
mapping it does not: such a table is read through the engine)."""


THREADS = max(2, min(4, os.cpu_count() or 2))
"""Threads computing the digests (hashlib and pyarrow's kernels release the GIL)."""
MAX_ROWS = 10_000_000
"""The most rows read into this process's memory (their texts: ~60 bytes a row for the bench
table, twice while they are sorted); a larger table is checksummed by the engine, which
streams it."""


def readable(location: str) -> bool:
    """Whether the Delta table at ``location`` can be read as a plain pyarrow dataset, and
    holds at most :data:`MAX_ROWS` rows by its log's file statistics."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(location)
    if not set(table.protocol().reader_features or ()) <= READER_FEATURES:
        return False
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return True
    counts = actions.column("num_records")
    return counts.null_count == 0 and int(pc.sum(counts).as_py()) <= MAX_ROWS


def _text(column: Any, kind: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "boolean":
        return pc.if_else(column, "1", "0")
    if kind == "text":
        length = pc.cast(pc.utf8_length(column), pa.string())
        return pc.binary_join_element_wise(length, column, ":")
    if kind == "temporal" and pa.types.is_timestamp(column.type):
        # As PostgreSQL writes it: no fraction when it is 0, else without trailing zeros.
        seconds = pc.cast(column, pa.timestamp("s"), safe=False)
        if pc.all(pc.equal(pc.cast(seconds, column.type), column)).as_py() is not False:
            return pc.cast(seconds, pa.string())
        return pc.replace_substring_regex(pc.cast(column, pa.string()), r"\.?0+$", "")
    return pc.cast(column, pa.string())


def row_texts(table: Any, columns: Sequence[tuple[str, str]], pool: Executor) -> Any:
    """Each row's canonical text followed by ``|`` (a chunked large string array): the
    columns' texts, then the rows' in slices, on ``pool``'s threads (pyarrow's kernels
    run on one core each; the engine would have spread the work over every core)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def text_of(column: tuple[str, str]) -> Any:
        name, kind = column
        return pc.fill_null(_text(table.column(name).combine_chunks(), kind), "N")

    fields = list(pool.map(text_of, columns))
    step = -(-table.num_rows // THREADS) or 1

    def join(start: int) -> Any:
        parts = [field.slice(start, step) for field in fields]
        return pc.cast(pc.binary_join_element_wise(*parts, pa.scalar(""), "|"), pa.large_string())

    return pa.chunked_array(pool.map(join, range(0, table.num_rows, step)), pa.large_string())


def _digests(texts: Any, starts: list[int], ends: list[int]) -> list[str]:
    import numpy as np

    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)
    offsets = offsets[texts.offset : texts.offset + len(texts) + 1]
    data = memoryview(texts.buffers()[2])
    # Without the last row's '|' (the source joins the rows with '|').
    return [
        hashlib.md5(data[int(offsets[start]) : int(offsets[end]) - 1]).hexdigest()
        for start, end in zip(starts, ends, strict=True)
    ]


def _mask(digits: int) -> int:
    return -1 if digits >= 16 else 16**digits - 1


@dataclass
class BucketDigests:
    """The table's keys and row texts, kept for every level of one verify's bisection."""

    keys: Any
    """The key of each row (an int64 numpy array), in the order of :attr:`texts`."""
    texts: Any
    sorted_digits: int
    """The rows are in (bucket of this many digits, key) order."""

    @classmethod
    def load(
        cls, location: str, columns: Sequence[tuple[str, str]], key: str, digits: int
    ) -> BucketDigests:
        """Read the base table at ``location`` (the ``columns`` of :data:`LOCAL_KINDS`,
        ``key`` one of them) in the order of the first level's buckets."""
        import numpy as np
        import pyarrow as pa

        table = storage.read_delta(location, columns=[name for name, _ in columns])
        keys = table.column(key).combine_chunks().to_numpy(zero_copy_only=False)
        keys = keys.astype(np.int64, copy=False)
        with ThreadPoolExecutor(THREADS, thread_name_prefix="verify-digest") as pool:
            ordered = pool.submit(np.lexsort, (keys, keys & _mask(digits)))
            texts = row_texts(table, columns, pool)
            del table  # the texts are what is kept: the columns' memory goes back now
            # Texts in file order, then sorted: one take of one array, not of every column.
            order = ordered.result()
        return cls(keys[order], texts.take(pa.array(order)).combine_chunks(), digits)

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[int]
    ) -> dict[int, tuple[int, str]]:
        """Per bucket of ``digits`` hex digits within ``parents`` (residues of
        ``parent_digits`` digits; none: the whole table): its row count and digest."""
        import numpy as np
        import pyarrow as pa

        keys, texts = self.keys, self.texts
        if parents:
            chosen = np.flatnonzero(np.isin(keys & _mask(parent_digits), list(parents)))
            keys, texts = keys[chosen], texts.take(pa.array(chosen))
        if parents or digits != self.sorted_digits:
            order = np.lexsort((keys, keys & _mask(digits)))
            keys, texts = keys[order], texts.take(pa.array(order))
        bucket = keys & _mask(digits)
        if not len(bucket):
            return {}
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]).tolist()
        ends = [*starts[1:], len(bucket)]
        half = (len(starts) + 1) // 2
        with ThreadPoolExecutor(THREADS, thread_name_prefix="verify-digest") as pool:
            halves = pool.map(
                _digests, [texts, texts], [starts[:half], starts[half:]], [ends[:half], ends[half:]]
            )
            digests = [digest for found in halves for digest in found]
        return {
            int(bucket[start]): (end - start, digest)
            for start, end, digest in zip(starts, ends, digests, strict=True)
        }
