"""7. Log-based extraction: PG_LOGICAL against CHANGELOG, extracting the same changes.

Two copies of ``bench.items`` (same rows, two databases of one cluster), each
offloaded by the real ``offload`` command with incremental update enabled: one
with CHANGELOG (the trigger writes a changelog row per change), one with
PG_LOGICAL (a logical replication slot). For each backlog size N, both lakes are
restored to their pristine copy and get the same changes, N single-row UPDATEs
(``amount + 1``) made as UPDATE statements of at most ``TRANSACTION_ROWS`` rows
each (an application's transactions, not one N-row statement), then extracted
with ``offload -t bench.items -x --incremental-run-extraction``. The figure is N
over the extraction child's wall time (process start to exit), the fastest of
``repeats`` rounds; PG_LOGICAL is "gluon" and CHANGELOG the baseline, so the
ratio is how much slower reading the slot is than reading the changelog.

The slot decodes the cluster's WAL from its restart point, which also holds the
other database's changes: the order (PG_LOGICAL's changes and extraction first,
then CHANGELOG's) keeps the CHANGELOG round's WAL behind the slot's next start
only where it must be. Restoring the lake does not rewind the slot: every round
makes new changes after the slot's position, as a round of the changelog's does.

``ways`` may add a third lake, :data:`SHARED_SLOT`: PG_LOGICAL through the database's
shared pgoutput slot (``--incremental-pg-logical-slot=database``, issue 33), its own figure
against the same CHANGELOG runs (``python -m bench.logical_typed --shared-slot``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import dataset
from bench.harness import Figure, Proc, Results, Workspace, note, runs_detail
from bench.items import ItemsLake
from bench.scales import Scale


@dataclass(frozen=True)
class Way:
    """One lake of the figure: its label, database (and gluon home) name, extraction
    method and further enable options."""

    label: str
    database: str
    method: str
    options: tuple[str, ...] = ()


CHANGELOG = Way("CHANGELOG", "logical_changelog", "CHANGELOG")
WAYS = (Way("PG_LOGICAL", "logical_pg", "PG_LOGICAL"), CHANGELOG)
"""The lakes of ``bench.run``'s figure; PG_LOGICAL first, CHANGELOG last."""
SHARED_SLOT = Way(
    "PG_LOGICAL shared slot",
    "logical_shared",
    "PG_LOGICAL",
    ("--incremental-pg-logical-slot=database",),
)
TRANSACTION_ROWS = 10_000


def run(workspace: Workspace, scale: Scale, results: Results, ways: tuple[Way, ...] = WAYS) -> None:
    """One figure per way but CHANGELOG (which must be the last), each against it; the
    ways' rounds interleaved."""
    assert ways[-1] == CHANGELOG
    lakes = {way.label: _build(workspace, way, scale) for way in ways}
    try:
        for count in scale.extraction_changes:
            runs: dict[str, list[tuple[Proc, float]]] = {label: [] for label in lakes}
            for _ in range(scale.repeats):
                for label, lake in lakes.items():
                    lake.home.restore("pristine")
                    changed = _update(lake.url, count, scale.base_rows)
                    assert changed == count, (label, changed, count)
                    proc = lake.extract()
                    inner = lake.last_extraction()
                    assert inner["rows"] == count, (label, inner, count)
                    runs[label].append((proc, inner["seconds"]))
            best = {
                label: min(pairs, key=lambda pair: pair[0].seconds) for label, pairs in runs.items()
            }
            changelog = best[CHANGELOG.label]
            for label in [way.label for way in ways[:-1]]:
                logical = best[label]
                results.add(
                    Figure(
                        "log-based extraction",
                        f"extract {count:,} changes, {label}",
                        "changes/s",
                        count / logical[0].seconds,
                        count / changelog[0].seconds,
                        "gluon CHANGELOG",
                        higher_is_better=True,
                        params={
                            "changes": count,
                            "repeats": scale.repeats,
                            "rows_per_transaction": TRANSACTION_ROWS,
                        },
                        detail={
                            **runs_detail(
                                "pg_logical", logical[0], logical[1], [p for p, _ in runs[label]]
                            ),
                            **runs_detail(
                                "changelog",
                                changelog[0],
                                changelog[1],
                                [p for p, _ in runs[CHANGELOG.label]],
                            ),
                        },
                    )
                )
    finally:
        for lake in lakes.values():
            _drop_slots(lake.url)
            lake.drop()


def _build(workspace: Workspace, way: Way, scale: Scale) -> ItemsLake:
    """``bench.items`` in the way's database, offloaded with its method enabled; saved as
    ``pristine``."""
    name, method = way.database, way.method
    url = workspace.server.create_database(name)
    created = dataset.create_items(url, scale.base_rows, scale.base_partitions)
    home = workspace.home(name, url)
    lake = ItemsLake(workspace, name, url, home, scale.base_rows, scale.base_partitions, created)
    lake.offload = home.offload(
        "-t",
        dataset.QUALIFIED,
        "-x",
        "--partition-columns=part",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *way.options,
    )
    note(
        f"{name}: {scale.base_rows:,} rows offloaded as {way.label} in {lake.offload.seconds:.1f} s"
    )
    home.save("pristine")
    return lake


def _update(url: str, count: int, rows: int) -> int:
    """``count`` changes: rows 1..count updated (again from row 1 past the table's end), at
    most ``TRANSACTION_ROWS`` in a transaction."""
    changed = 0
    with dataset.connect(url) as conn:
        while changed < count:
            low = changed % rows + 1
            high = low + min(TRANSACTION_ROWS, count - changed, rows - low + 1) - 1
            result = conn.execute(
                f"UPDATE {dataset.QUALIFIED} SET amount = amount + 1 "
                f"WHERE id BETWEEN {low} AND {high}"
            )
            if not result.rowcount:
                break
            changed += result.rowcount
    return changed


def _drop_slots(url: str) -> None:
    """The database cannot be dropped while a slot of it exists."""
    with dataset.connect(url) as conn:
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = current_database()"
        )
