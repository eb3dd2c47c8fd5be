"""4. Reading the user view (base merged with the delta table) vs the base table alone.

From the pristine lake, the delta grows in steps (0.1%, 1%, 10% of the base:
updates of keys spread over every partition, extracted, not compacted). At
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

POINT_KEY = 1000  # 1000 * HASH % 1000 == 0: changed at every step
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
    for fraction in scale.read_fractions:
        upto = round(fraction * 1000)
        dataset.update_spread(lake.url, done, upto)
        done = upto
        extraction = lake.extract()
        delta_rows = round(fraction * lake.rows)
        note(f"reads: delta at {fraction:.1%} of the base, extracted in {extraction.seconds:.1f} s")
        proc = worker(
            "reads",
            "--table",
            dataset.QUALIFIED,
            "--key",
            str(POINT_KEY),
            "--repeats",
            str(scale.read_repeats),
            "--explain",
            env=lake.home.env,
        )
        plans[f"{fraction:g}"] = proc.result["plans"]
        for query, label in QUERIES.items():
            timing = proc.result["timings"][query]
            results.add(
                Figure(
                    "reads",
                    f"{label}, delta {fraction:.1%} of base",
                    "s",
                    timing["view"],
                    timing["base"],
                    "base table alone",
                    params={
                        "query": query,
                        "fraction": fraction,
                        "delta_rows": delta_rows,
                        "base_rows": lake.rows,
                    },
                )
            )
    reset = dataset.ChangeSet(lake.rows, lake.partitions, done / 1000, lake.partitions)
    dataset.reset_changes(lake.url, reset)
    return plans
