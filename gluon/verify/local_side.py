"""The lake's side of a verify without the engine, where the table allows it (issue 31 item 6).

When the lake's latest state is its base table alone (IMMEDIATE mode, or DEFERRED with no
change pending in the views' partitions), the key is one integer column, every column's
text is one pyarrow writes as the source does (:func:`gluon.lake.verify_digest.writes_alike`)
and the source's SQL has an ordered string aggregate
(:attr:`gluon.source.base.SourceDialect.bucket_digests`), both sides checksum a bucket by
one MD5 of its rows' texts in key order (the digest form): the source in SQL, the lake in
this process from the base table's files (:mod:`gluon.lake.verify_digest`). The engine is
then started only if a bucket differs, to read its rows whole. Any other table keeps the
per-row form on both sides (:mod:`gluon.verify.checksums`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from gluon import source as sources
from gluon.config import EngineKind, Settings, parse_database_url
from gluon.errors import GluonError, LakeError
from gluon.lake import sql, storage, verify_digest
from gluon.lake.session import first_line
from gluon.read.catalog import published_min_partition
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED
from gluon.states import MergeMode
from gluon.verify.buckets import residue_key, residue_name, residue_of
from gluon.verify.checksums import (
    Checksum,
    LakeSide,
    Meter,
    decimal_scale,
    digest_value,
    text_kind,
)
from gluon.verify.sides import Shape

log = logging.getLogger(__name__)


def dialect_digests(settings: Settings) -> bool:
    """Whether the configured source's dialect computes bucket digests (no connection)."""
    try:
        url = parse_database_url(settings.require_source_url(), "GLUON_SOURCE_URL")
        return sources.dialect_class(url.get_backend_name()).bucket_digests
    except GluonError:
        return False  # the source side reports a bad URL itself


def base_alone(settings: Settings, repo: Repository, record: OffloadedTable) -> bool:
    """Whether the lake's latest state of ``record`` is its base table alone, readable as
    files here (the embedded engine's lake; a cluster's engine reads its own storage)."""
    if settings.engine is not EngineKind.SAIL:
        return False
    try:
        return _base_alone(repo, record)
    except Exception:  # a lake that cannot be read: the engine's side says what is wrong
        log.debug("%s: the lake's state not known here", record.table_key, exc_info=True)
        return False


def _base_alone(repo: Repository, record: OffloadedTable) -> bool:
    state = repo.incremental.get_state(record.table_key)
    if state is None or state.status != ENABLED:
        return False  # an offloaded table's view may read the base in part
    if state.merge_mode != MergeMode.IMMEDIATE:
        floor = published_min_partition(repo, record, state)
        pending = storage.partition_files(state.delta_path, sql.CONTROL_PARTITION, at_least=floor)
        if pending is None or pending.files:
            return False
    return verify_digest.readable(record.base_path)


def digest_form(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    kinds: Sequence[str],
    by_residue: bool,
) -> bool:
    """Whether a look at ``record`` uses the digest form (see the module docstring)."""
    return (
        by_residue
        and all(
            verify_digest.writes_alike(kind, decimal_scale(column)[1])
            for column, kind in zip(record.columns, kinds, strict=True)
        )
        and dialect_digests(settings)
        and base_alone(settings, repo, record)
    )


def column_kinds(shape: Shape) -> list[str]:
    """How each of the table's columns is written as text (gluon.verify.checksums)."""
    return [
        text_kind(column, index in shape.json_positions)
        for index, column in enumerate(shape.columns)
    ]


def engine_unneeded(settings: Settings, repo: Repository, record: OffloadedTable) -> bool:
    """Whether a verify of ``record`` will likely checksum without the engine (so starting
    it ahead, gluon.verify.warm, would only take CPU from both sides' passes)."""
    state = repo.incremental.get_state(record.table_key)
    if state is None or state.status != ENABLED:
        return False
    shape = Shape.of(record, state.key_columns)
    kinds = column_kinds(shape)
    by_residue = residue_key(shape.columns, kinds, shape.key_positions)
    return digest_form(settings, repo, record, kinds, by_residue)


@dataclass
class LocalLakeSide:
    """The lake's bucket digests from the base table's files; its rows through the engine."""

    location: str
    columns: Sequence[tuple[str, str]]
    """Each column's name in the base table and its text kind."""
    key: str
    meter: Meter
    open_engine: Callable[[], AbstractContextManager[LakeSide]]
    stack: ExitStack = field(default_factory=ExitStack)
    _digests: verify_digest.BucketDigests | None = None
    _engine: LakeSide | None = None

    def count(self) -> int:
        return storage.delta_row_count(self.location)

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[str]
    ) -> dict[str, Checksum]:
        if self._digests is None:
            try:
                self._digests = verify_digest.BucketDigests.load(
                    self.location, self.columns, self.key, digits
                )
            except Exception as exc:  # a file gone, unreadable: run.py says which
                raise LakeError(f"reading {self.location} failed: {first_line(exc)}") from exc
        residues = [residue_of(parent) for parent in parents]
        found = self._digests.buckets(digits, parent_digits, residues)
        self.meter.lake_bytes += sum(len(residue_name(b, digits)) + 40 for b in found)
        return {
            residue_name(bucket, digits): (count, digest_value(digest))
            for bucket, (count, digest) in found.items()
        }

    def rows(self, digits: int, buckets: Sequence[str]) -> list[list[Any]]:
        if self._engine is None:
            self._engine = self.stack.enter_context(self.open_engine())
        return self._engine.rows(digits, buckets)


@contextmanager
def local_lake_side(
    record: OffloadedTable,
    kinds: Sequence[str],
    key_position: int,
    meter: Meter,
    open_engine: Callable[[], AbstractContextManager[LakeSide]],
) -> Iterator[LocalLakeSide]:
    """The lake's side in the digest form; the engine's session, if a bucket differed and
    it was opened, is closed at the end."""
    columns = [(column.lake_name, kind) for column, kind in zip(record.columns, kinds, strict=True)]
    side = LocalLakeSide(record.base_path, columns, columns[key_position][0], meter, open_engine)
    with side.stack:
        yield side
