"""PG_LOGICAL: PostgreSQL logical decoding; no trigger, no changelog, no cost on the write path."""

from __future__ import annotations

from gluon.methods.base import DML, ChangeReader, ExtractionMethod, OffloadUseCase, SourceObject


class PgLogicalMethod(ExtractionMethod):
    """Reads the committed changes a logical replication slot keeps for the table."""

    name = "PG_LOGICAL"
    summary = "PostgreSQL logical decoding through a replication slot, no trigger"
    is_basic = False
    captured_dml = frozenset(DML)
    offload_use_cases = frozenset({OffloadUseCase.FULL_100_0, OffloadUseCase.FULL_100_10})
    source_objects = (SourceObject.REPLICATION_SLOT,)
    dialects = frozenset({"postgresql"})
    change_reader = ChangeReader.PG_LOGICAL
    fills_added_defaults = True
    when_to_use = (
        "The PostgreSQL table keeps changing after the offload and its writes must not pay "
        "for a trigger; the server runs with wal_level=logical."
    )
