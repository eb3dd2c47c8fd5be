"""The source table every figure but capture uses, generated in PostgreSQL, and its changes.

``bench.items`` (``id`` bigint primary key, ``part`` int, ``grp`` int,
``amount`` numeric(12,2), ``label`` text, ``updated_at`` timestamp) holds
``rows`` rows made by ``generate_series``: row ``g`` is in partition
``(g - 1) / (rows / partitions)``, so partitions are contiguous key ranges of
equal size. The lake base is partitioned on ``part`` (one lake partition per
value).

A change set of ``fraction`` of the base spread over ``spread`` partitions
picks rows in partitions ``0 .. spread-1`` with a multiplicative hash of the
key (so the picked rows are spread evenly inside each partition) and applies,
with plain SQL in the source so the changelog trigger records them: about 5%
deletes, 5% inserts of new keys (into the same partitions), 90% updates.
:func:`reset_changes` puts the source rows back without firing triggers
(``session_replication_role = replica``), so the next change set starts from
the generated table again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

SCHEMA = "bench"
TABLE = "items"
QUALIFIED = f"{SCHEMA}.{TABLE}"
HASH = 7919  # prime: key * HASH mod 1000 is a permutation of the residues


def libpq_url(sqlalchemy_url: str) -> str:
    return sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://", 1)


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(libpq_url(url), autocommit=True)


def row_select(rows: int, partitions: int) -> str:
    """The generated columns of row ``g`` (of a ``generate_series(...) g``)."""
    per_part = rows // partitions
    return (
        f"g::bigint, ((g - 1) / {per_part})::int, (g % 97)::int, "
        "round(((g * 37) % 1000000) / 100.0, 2)::numeric(12,2), 'item ' || g, "
        "timestamp '2024-01-01' + g * interval '1 second'"
    )


def create_items(url: str, rows: int, partitions: int, table: str = TABLE) -> float:
    """(Re)create ``bench.<table>`` with ``rows`` generated rows; return seconds taken."""
    import time

    if rows % partitions:
        raise ValueError(f"{rows} rows do not split into {partitions} equal partitions")
    started = time.perf_counter()
    with connect(url) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{table} CASCADE")
        conn.execute(
            f"CREATE TABLE {SCHEMA}.{table} (id bigint NOT NULL, part int NOT NULL, "
            "grp int NOT NULL, amount numeric(12,2) NOT NULL, label text, "
            "updated_at timestamp NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO {SCHEMA}.{table} SELECT {row_select(rows, partitions)} "
            f"FROM generate_series(1::bigint, {rows}) g"
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.{table} ADD PRIMARY KEY (id)")
        conn.execute(f"VACUUM ANALYZE {SCHEMA}.{table}")
    return time.perf_counter() - started


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """``fraction`` of a ``rows``-row, ``partitions``-partition table, in ``spread`` partitions."""

    rows: int
    partitions: int
    fraction: float
    spread: int

    @property
    def threshold(self) -> int:
        """Rows picked per 1,000 rows of the affected partitions."""
        share = self.fraction * self.partitions / self.spread
        if share > 1:
            raise ValueError(f"{self} needs more rows than its partitions hold")
        return round(1000 * share)

    def picked(self, column: str = "id") -> str:
        last = self.spread * (self.rows // self.partitions)
        return f"{column} <= {last} AND ({column} * {HASH}) % 1000 < {self.threshold}"

    @property
    def label(self) -> str:
        return f"{self.fraction * 100:g}% over {self.spread} partitions"


def apply_changes(url: str, changes: ChangeSet, table: str = TABLE) -> dict[str, int]:
    """Apply the change set with ordinary DML (the changelog trigger captures it)."""
    name = f"{SCHEMA}.{table}"
    picked = changes.picked()
    counts = {}
    with connect(url) as conn:
        counts["deletes"] = conn.execute(
            f"DELETE FROM {name} WHERE {picked} AND (id / 1000) % 20 = 0"
        ).rowcount
        counts["updates"] = conn.execute(
            f"UPDATE {name} SET amount = amount + 1, label = label || '*', "
            f"updated_at = updated_at + interval '1 day' WHERE {picked} AND (id / 1000) % 20 > 1"
        ).rowcount
        # As many new keys as picked rows left alone, in the same partitions.
        skipped = conn.execute(
            f"SELECT COUNT(*) FROM {name} WHERE {picked} AND (id / 1000) % 20 = 1"
        )
        inserts = int(skipped.fetchone()[0])  # type: ignore[index]
        counts["inserts"] = conn.execute(
            f"INSERT INTO {name} SELECT {changes.rows} + n, (n % {changes.spread})::int, "
            "(n % 97)::int, 1.00, 'new ' || n, timestamp '2025-01-01' "
            f"FROM generate_series(1, {inserts}) n"
        ).rowcount
    counts["total"] = counts["deletes"] + counts["updates"] + counts["inserts"]
    return counts


def update_first(url: str, count: int, table: str = TABLE) -> int:
    """``count`` changes: update rows 1..count (in several passes over the table if needed)."""
    changed = 0
    with connect(url) as conn:
        while changed < count:
            result = conn.execute(
                f"UPDATE {SCHEMA}.{table} SET amount = amount + 1 WHERE id <= {count - changed}"
            )
            if not result.rowcount:
                break
            changed += result.rowcount
    return changed


def update_spread(url: str, low: int, high: int, table: str = TABLE) -> int:
    """Update the rows whose key hash (per 1,000) is in [low, high): spread over every partition."""
    with connect(url) as conn:
        return conn.execute(
            f"UPDATE {SCHEMA}.{table} SET amount = amount + 1 "
            f"WHERE (id * {HASH}) % 1000 >= {int(low)} AND (id * {HASH}) % 1000 < {int(high)}"
        ).rowcount


def reset_changes(url: str, changes: ChangeSet, table: str = TABLE) -> None:
    """Put the generated rows back, firing no trigger (nothing reaches the changelog)."""
    name = f"{SCHEMA}.{table}"
    columns = "id, part, grp, amount, label, updated_at"
    assign = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns.split(", ")[1:])
    with connect(url) as conn, conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(f"DELETE FROM {name} WHERE id > {changes.rows}")
        conn.execute(
            f"INSERT INTO {name} ({columns}) SELECT {row_select(changes.rows, changes.partitions)} "
            f"FROM generate_series(1::bigint, {changes.rows}) g WHERE {changes.picked('g')} "
            f"ON CONFLICT (id) DO UPDATE SET {assign}"
        )


def changelog_rows(url: str, changelog: str) -> int:
    with connect(url) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {changelog}").fetchone()[0])  # type: ignore[index]
