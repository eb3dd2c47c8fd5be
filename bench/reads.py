"""4. Reading the user view (base merged with the delta table) vs the base table alone.

From the pristine lake (first measured with the delta empty: nothing extracted, the
case a session reads from the base alone), the delta grows in steps (0.1%, 1%, 10% of the base:
updates of keys spread over every partition, extracted, not compacted). Then the
clustered steps: from the pristine lake each time, the same fractions as a change set in
a tenth of the partitions (deletes, updates and inserts of new keys, as
``bench.dataset.apply_changes`` makes them for compaction: real workloads change recent
rows), extracted, not compacted. At
each step a child process opens ``gluon.read.catalog.lake_session`` and times four
queries on the user view and on the base table: ``COUNT(*)``, ``SUM(amount)``,
a point lookup of a changed key and ``SUM(amount)`` of one partition (``WHERE
part = 3``: a filter on the partition column's source; one warm-up, then the
median of ``read_repeats`` runs each). The ratio is view time over base time.
"""

from __future__ import annotations

from typing import Any

from bench import dataset
from bench.harness import Figure, Results, note, worker
from bench.items import ItemsLake
from bench.scales import Scale

POINT_KEY = 1000  # 1000 * HASH % 1000 == 0: changed at every spread step
CLUSTERED_KEY = 2000  # hash 0 and (2000 / 1000) % 20 > 1: updated by every clustered set
CLUSTERED_SHARE = 10  # clustered changes land in a tenth of the partitions (5 of 50)
QUERIES = {
    "count": "COUNT(*)",
    "sum": "SUM(amount)",
    "lookup": "point lookup by key",
    "filter": "SUM(amount) of one partition",
}


def run(lake: ItemsLake, scale: Scale, results: Results) -> dict[str, Any]:
    lake.home.restore("pristine")
    plans: dict[str, Any] = {}
    done = 0
    for fraction in (0.0, *scale.read_fractions):
        if fraction:
            upto = round(fraction * 1000)
            dataset.update_spread(lake.url, done, upto)
            done = upto
            extraction = lake.extract()
            note(
                f"reads: delta at {fraction:.1%} of the base, "
                f"extracted in {extraction.seconds:.1f} s"
            )
        else:
            note("reads: delta empty (nothing extracted since the offload)")
        plans[f"{fraction:g}"] = measure(lake, scale, results, fraction, "spread", POINT_KEY)
    reset = dataset.ChangeSet(lake.rows, lake.partitions, done / 1000, lake.partitions)
    dataset.reset_changes(lake.url, reset)
    spread = max(1, lake.partitions // CLUSTERED_SHARE)
    for fraction in scale.read_fractions:
        changes = dataset.ChangeSet(lake.rows, lake.partitions, fraction, spread)
        lake.home.restore("pristine")
        counts = dataset.apply_changes(lake.url, changes)
        extraction = lake.extract()
        note(
            f"reads: {counts['total']:,} changes ({changes.label}), "
            f"extracted in {extraction.seconds:.1f} s"
        )
        plans[f"clustered {fraction:g}"] = measure(
            lake, scale, results, fraction, f"in {spread} partitions", CLUSTERED_KEY
        )
        dataset.reset_changes(lake.url, changes)
    return plans


def measure(
    lake: ItemsLake, scale: Scale, results: Results, fraction: float, layout: str, key: int
) -> Any:
    """Time the queries in a child; add one figure per query; return the view's plans.

    ``layout``: "spread", or where clustered changes are ("in 5 partitions")."""
    proc = worker(
        "reads",
        "--table",
        dataset.QUALIFIED,
        "--key",
        str(key),
        "--repeats",
        str(scale.read_repeats),
        "--explain",
        env=lake.home.env,
    )
    where = "" if layout == "spread" else f" {layout}"
    for query, label in QUERIES.items():
        timing = proc.result["timings"][query]
        results.add(
            Figure(
                "reads",
                f"{label}, delta {fraction:.1%} of base{where}",
                "s",
                timing["view"],
                timing["base"],
                "base table alone",
                params={
                    "query": query,
                    "fraction": fraction,
                    "layout": layout,
                    "delta_rows": round(fraction * lake.rows),
                    "base_rows": lake.rows,
                },
            )
        )
        # The engine's CPU time (it runs in the child): steadier than wall time under load.
        results.add(
            Figure(
                "reads CPU",
                f"{label}, delta {fraction:.1%} of base{where}",
                "s CPU",
                timing["view_cpu"],
                timing["base_cpu"],
                "base table alone",
                params={"query": query, "fraction": fraction, "layout": layout},
            )
        )
    return proc.result["plans"]
