"""6. Merge mode IMMEDIATE: extraction that merges into the base table, and reading it.

A second ``bench.items`` lake is offloaded with ``--incremental-merge-mode=IMMEDIATE``.
For each batch size N: restore its pristine lake, UPDATE rows 1..N in the source, then

* raw: a child process reads exactly those changelog rows into Arrow (ADBC), keeps the
  latest change per key (an Arrow group-by and join) and merges them into a copy of the
  base table with one deltalake ``merge`` commit (deltalake in-process is the faster
  hand-written path: no engine to start; the copy is not timed);
* gluon: ``offload -t bench.items -x --incremental-run-extraction``, which on top stages
  the batch (one commit of the staging table), records the batch in the merge commit
  (exactly-once), deletes the shipped rows from the changelog and records the run.

The rate is N over the child's wall time, the fastest of ``repeats`` rounds.

Then the read cost at that delta: ``COUNT(*)``, ``SUM(amount)`` and a point lookup of a
changed key on the IMMEDIATE table (the base table itself) against the DEFERRED lake's
user view after extracting the same N changes, not compacted (``bench.worker reads``: one
warm-up, the median of ``read_repeats``). The ratio is IMMEDIATE over DEFERRED: below 1,
the merged base is cheaper to read.
"""

from __future__ import annotations

from pathlib import Path

from bench import dataset
from bench.harness import Figure, Proc, Results, Workspace, note, runs_detail, worker
from bench.items import ItemsLake
from bench.scales import Scale

IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
POINT_KEY = 1000
"""Changed by every batch (batches update ids 1..N, N >= 1000)."""
QUERIES = {"count": "COUNT(*)", "sum": "SUM(amount)", "lookup": "point lookup by key"}


def run(workspace: Workspace, deferred: ItemsLake, scale: Scale, results: Results) -> None:
    immediate = ItemsLake.build(
        workspace, "items_im", scale.base_rows, scale.base_partitions, (IMMEDIATE,)
    )
    scratch = workspace.root / "scratch"
    try:
        for count in scale.immediate_changes:
            _extraction(immediate, scratch, count, scale, results)
            # The IMMEDIATE lake holds the last round's N changes, merged.
            merged = _reads(immediate, scale)
            deferred.home.restore("pristine")
            dataset.update_first(deferred.url, count)
            deferred.extract()
            viewed = _reads(deferred, scale)
            for query, label in QUERIES.items():
                results.add(
                    Figure(
                        "immediate reads",
                        f"{label}, {count:,} changes extracted",
                        "s",
                        merged[query]["view"],
                        viewed[query]["view"],
                        "DEFERRED user view",
                        params={"query": query, "changes": count, "base_rows": deferred.rows},
                    )
                )
    finally:
        immediate.drop()


def _extraction(lake: ItemsLake, scratch: Path, count: int, scale: Scale, results: Results) -> None:
    raws: list[Proc] = []
    gluons: list[tuple[Proc, dict[str, float]]] = []
    for _ in range(scale.repeats):
        lake.home.restore("pristine")
        changed = dataset.update_first(lake.url, count)
        pending = dataset.changelog_rows(lake.url, lake.changelog)
        assert pending == changed == count, (pending, changed, count)
        raw = lake.raw_immediate_merge(scratch)
        assert raw.result["rows"] == count, raw.result
        raws.append(raw)
        gluon = lake.extract()
        left = dataset.changelog_rows(lake.url, lake.changelog)
        inner = lake.last_extraction()
        assert left == 0 and inner["rows"] == count, (left, inner)
        gluons.append((gluon, inner))
    raw = min(raws, key=lambda proc: proc.seconds)
    gluon, inner = min(gluons, key=lambda pair: pair[0].seconds)
    note(f"immediate: {count:,} changes merged in {gluon.seconds:.1f} s (raw {raw.seconds:.1f} s)")
    results.add(
        Figure(
            "immediate",
            f"immediate-merge extract {count:,} changes",
            "changes/s",
            count / gluon.seconds,
            count / raw.seconds,
            "raw fetch->Arrow->deltalake merge",
            higher_is_better=True,
            params={"changes": count, "repeats": scale.repeats},
            detail={
                **runs_detail("gluon", gluon, inner["seconds"], [p for p, _ in gluons]),
                **runs_detail("raw", raw, raw.result["seconds"], raws),
            },
        )
    )


def _reads(lake: ItemsLake, scale: Scale) -> dict[str, dict[str, float]]:
    proc = worker(
        "reads",
        "--table",
        dataset.QUALIFIED,
        "--key",
        str(POINT_KEY),
        "--repeats",
        str(scale.read_repeats),
        env=lake.home.env,
    )
    timings: dict[str, dict[str, float]] = proc.result["timings"]
    return timings
