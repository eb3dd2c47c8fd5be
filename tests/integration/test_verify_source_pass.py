"""What gluon verify's pass over the source costs on PostgreSQL (issue 31 item 6): the first
buckets are sized by the planner's estimate of the rows instead of a count (a whole scan),
and the checksum pass runs without JIT and with parallel workers priced at 0 in its own
transaction, leaving the connection as it was (real PostgreSQL)."""

from __future__ import annotations

import sqlalchemy as sa

from gluon import source as sources
from gluon.schema import Column, TableSpec
from gluon.verify.buckets import mask

ROWS = 3000
SPEC = TableSpec(
    schema="public",
    name="items",
    columns=(
        Column("id", "bigint", "bigint", nullable=False),
        Column("label", "text", "string"),
    ),
    primary_key=("id",),
)


def _create(url: str) -> None:
    with sa.create_engine(url).begin() as db:
        # No autovacuum: its VACUUM or ANALYZE would move the estimate while the test reads it.
        db.execute(
            sa.text(
                "CREATE TABLE items (id bigint PRIMARY KEY, label text) "
                "WITH (autovacuum_enabled = false)"
            )
        )
        db.execute(
            sa.text("INSERT INTO items SELECT i, 'label ' || i FROM generate_series(1, :rows) i"),
            {"rows": ROWS},
        )


def test_the_rows_are_counted_until_analyzed_then_estimated(pg_url: str) -> None:
    _create(pg_url)
    source = sources.connect(pg_url)
    assert source.estimate_rows(SPEC) == ROWS  # never analyzed: counted
    with sa.create_engine(pg_url).begin() as db:
        db.execute(sa.text("DELETE FROM items WHERE id > 1000"))  # the estimate lags the count
        db.execute(sa.text("ANALYZE items"))
        db.execute(sa.text("INSERT INTO items SELECT i, 'x' FROM generate_series(5001, 5100) i"))
    assert source.estimate_rows(SPEC) == 1000  # the planner's, not a count (1100)
    assert source.count_rows(SPEC) == 1100


def test_the_checksum_pass_takes_its_settings_and_leaves_the_connection_as_it_was(
    pg_url: str,
) -> None:
    _create(pg_url)
    source = sources.connect(pg_url)
    columns = [
        {"expr": '"id"', "kind": "integer", "framed": False, "digits": (38, 0)},
        {"expr": '"label"', "kind": "text", "framed": True, "digits": (38, 0)},
    ]
    context = {
        "schema": "public",
        "table": "items",
        "columns": columns,
        "keys": columns[:1],
        "residue_key": True,
        "digits": 1,
        "mask": mask(1),
        "parent_digits": 0,
        "parent_mask": mask(0),
        "buckets": [],
    }
    # The condition holds only where the pass's setting took: every row counts, or none.
    settings = "current_setting('jit') = 'off' AND current_setting('parallel_setup_cost') = '0'"
    rows = source.run_checksum_query("verify_buckets", {}, **context, where=settings)
    assert sum(count for _bucket, count, _sum in rows) == ROWS
    assert source.run_query("verify_buckets", {}, **context, where=settings) == []
    with source.engine.connect() as connection:
        jit = connection.execute(sa.text("SHOW jit")).scalar()
    assert jit == "on"  # local to the pass: the pooled connection keeps the server's default


def test_the_checksum_pass_hashes_its_buckets_instead_of_sorting_every_row(pg_url: str) -> None:
    _create(pg_url)
    source = sources.connect(pg_url)
    columns = [
        {"expr": '"id"', "kind": "integer", "framed": False, "digits": (38, 0)},
        {"expr": '"label"', "kind": "text", "framed": True, "digits": (38, 0)},
    ]
    statement = source.render(
        "verify_buckets",
        schema="public",
        table="items",
        columns=columns,
        keys=columns[:1],
        residue_key=True,
        digits=3,
        mask=mask(3),
        parent_digits=0,
        parent_mask=mask(0),
        buckets=[],
        where=None,
    )
    assert source.checksum_settings is not None
    with source.engine.connect() as connection, connection.begin():
        # A small work_mem makes the planner, which guesses a bucket per row, sort the rows
        # by bucket as it does at millions of rows (its guess of the hash table's size).
        connection.execute(sa.text("SET LOCAL work_mem = '64kB'"))
        connection.execute(sa.text(source.render(source.checksum_settings)))
        plan = "\n".join(row[0] for row in connection.execute(sa.text("EXPLAIN " + statement)))
    assert "HashAggregate" in plan, plan
    assert "Sort" not in plan, plan
