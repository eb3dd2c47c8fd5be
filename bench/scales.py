"""What each scale measures (bench/README.md explains the choices)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scale:
    name: str
    repeats: int
    """Extractions, compactions and their baselines run this often; the fastest run counts."""
    # 1. capture overhead
    pgbench_scale: int
    """pgbench -i -s: 100,000 pgbench_accounts rows per unit."""
    pgbench_seconds: int
    """Length of each pgbench run (-T); every configuration runs twice, interleaved."""
    pgbench_clients: int
    sqlite_rows: int
    sqlite_updates: int
    """Single-row UPDATEs per SQLite run, each in its own transaction."""
    # 2. extraction
    extraction_changes: tuple[int, ...]
    # 3. compaction (and the base of 4.)
    base_rows: int
    base_partitions: int
    compaction_grid: tuple[tuple[float, int], ...]
    """(fraction of the base changed, number of partitions the changes land in)."""
    # 4. reads through the user view
    read_fractions: tuple[float, ...]
    read_repeats: int
    # 5. scale curve
    curve_rows: tuple[int, ...]
    curve_partition_rows: int
    """Rows per partition: a bigger table has more partitions of the same size (like dates)."""
    curve_changes: int
    curve_change_partitions: int
    """The fixed changes land in this many partitions of every curve table."""
    # 6. merge mode IMMEDIATE
    immediate_changes: tuple[int, ...]


def full_grid(partitions: int) -> tuple[tuple[float, int], ...]:
    """1%, 5%, 20% over 2, 10, 50 partitions: the cells that fit (changes <= their rows)."""
    return tuple(
        (fraction, spread)
        for fraction in (0.01, 0.05, 0.20)
        for spread in (2, 10, 50)
        if spread <= partitions and fraction <= spread / partitions
    )


SCALES: dict[str, Scale] = {
    "tiny": Scale(
        name="tiny",
        repeats=1,
        pgbench_scale=1,
        pgbench_seconds=5,
        pgbench_clients=2,
        sqlite_rows=10_000,
        sqlite_updates=2_000,
        extraction_changes=(1_000, 10_000, 50_000),
        base_rows=50_000,
        base_partitions=5,
        compaction_grid=((0.01, 2), (0.20, 5)),
        read_fractions=(0.001, 0.01, 0.1),
        read_repeats=3,
        curve_rows=(20_000, 50_000, 100_000),
        curve_partition_rows=10_000,
        curve_changes=1_000,
        curve_change_partitions=2,
        immediate_changes=(1_000, 10_000),
    ),
    "small": Scale(
        name="small",
        repeats=2,
        pgbench_scale=2,
        pgbench_seconds=15,
        pgbench_clients=2,
        sqlite_rows=100_000,
        sqlite_updates=10_000,
        extraction_changes=(10_000, 100_000, 1_000_000),
        base_rows=500_000,
        base_partitions=10,
        compaction_grid=((0.01, 2), (0.01, 10), (0.05, 10), (0.20, 10)),
        read_fractions=(0.001, 0.01, 0.1),
        read_repeats=5,
        curve_rows=(100_000, 250_000, 500_000, 1_000_000),
        curve_partition_rows=25_000,
        curve_changes=10_000,
        curve_change_partitions=2,
        immediate_changes=(10_000, 100_000),
    ),
    "full": Scale(
        name="full",
        repeats=1,
        pgbench_scale=10,
        pgbench_seconds=30,
        pgbench_clients=2,
        sqlite_rows=1_000_000,
        sqlite_updates=50_000,
        extraction_changes=(10_000, 100_000, 1_000_000),
        base_rows=5_000_000,
        base_partitions=50,
        compaction_grid=full_grid(50),
        read_fractions=(0.001, 0.01, 0.1),
        read_repeats=5,
        curve_rows=(1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000),
        curve_partition_rows=100_000,
        curve_changes=100_000,
        curve_change_partitions=2,
        immediate_changes=(10_000, 100_000),
    ),
}
