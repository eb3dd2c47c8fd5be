"""PG_LOGICAL decodes the slot's WAL once per extraction, however many batches it ships
(issue 33, item 2): real PostgreSQL and Sail, the source's queries counted as they run.

A peek per batch decoded from the slot's restart point each time, and the restart point
stays where a burst of changes began, so N batches decoded O(N^2) WAL.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import (
    SEED,
    Source,
    assert_no_duplicate_sequences,
    enable,
    lake_state,
    postgres_source,
    workload_for,
)
from typer.testing import Result

from gluon.source.base import SourceDialect

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""
SLOT_DECODINGS = {"peek_slot_changes", "stream_slot_changes"}
"""The templates that decode a slot's WAL for an extraction."""


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


@pytest.fixture
def decodings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each query that decoded a slot's WAL, by template, as the real source ran it."""
    ran: list[str] = []
    run_query, stream_query = SourceDialect.run_query, SourceDialect.stream_query

    def counted_run(
        self: SourceDialect, template: str, params: dict[str, Any] | None = None, **context: Any
    ) -> list[Any]:
        if template in SLOT_DECODINGS:
            ran.append(template)
        return run_query(self, template, params, **context)

    def counted_stream(
        self: SourceDialect, template: str, params: dict[str, Any], *, rows: int
    ) -> Generator[list[Any]]:
        if template in SLOT_DECODINGS:
            ran.append(template)
        return stream_query(self, template, params, rows=rows)

    monkeypatch.setattr(SourceDialect, "run_query", counted_run)
    monkeypatch.setattr(SourceDialect, "stream_query", counted_stream)
    return ran


def test_an_extraction_of_many_batches_decodes_the_slot_once(
    source: Source, run_cli: Callable[..., Result], decodings: list[str]
) -> None:
    workload = workload_for(source, METHOD, SEED + 7)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    for remainder in range(4):  # four transactions, each more changes than a batch holds
        with source.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE app.items SET amount = amount + 1 WHERE id % 4 = {remainder}")
            )
    with source.engine.begin() as db:  # another table's changes: read past, never shipped
        db.execute(sa.text("CREATE TABLE app.elsewhere (id int PRIMARY KEY)"))
        db.execute(sa.text("INSERT INTO app.elsewhere SELECT generate_series(1, 20)"))
    decodings.clear()
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-extraction",
        "--incremental-batch-size=2",
    )
    assert result.exit_code == 0, result.stderr
    assert len(decodings) == 1, f"the slot's WAL was decoded {len(decodings)} times: {decodings}"
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)

    # Changes committed after that extraction ship at the next one, once.
    with source.engine.begin() as db:
        db.execute(sa.text("UPDATE app.items SET amount = amount + 1 WHERE id % 2 = 0"))
    decodings.clear()
    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    assert len(decodings) == 1, decodings
    assert lake_state(source.schema) == workload.source_rows()
    assert_no_duplicate_sequences(source)
