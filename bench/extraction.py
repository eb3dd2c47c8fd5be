"""2. Extraction: changes per second from the changelog into the delta table, and a no-op run.

For each backlog size N: restore the pristine lake, UPDATE rows 1..N in the
source (in more than one pass when N exceeds the table: the trigger records N
changes either way), then

* raw: a child process reads exactly those changelog rows into Arrow (the ADBC
  PostgreSQL driver, one cast per column) and appends them to a fresh Delta
  table with ``spark.createDataFrame(arrow).write.format("delta").mode("append")``
  on an embedded Sail server, one commit per 100,000 rows (gluon's batch size);
* gluon: ``offload -t bench.items -x --incremental-run-extraction``, which on
  top also checks the batch against what is already in the lake (exactly-once),
  deletes the shipped rows from the changelog and records the run.

The rate is N over the child's wall time (process start to exit, both sides
start Python and Sail), the fastest of ``repeats`` rounds (each round restores
the lake and makes the changes again); the in-process time is kept in the JSON
detail.
The no-op figure is the wall time of the extraction command with an empty
changelog (median of 3) against a process that only counts the changelog rows.
"""

from __future__ import annotations

import shutil
import statistics

from bench import dataset
from bench.harness import Figure, Proc, Results, Workspace, note, runs_detail, worker
from bench.items import ItemsLake
from bench.scales import Scale

NOOP_RUNS = 3


def _best(procs: list[Proc]) -> Proc:
    return min(procs, key=lambda proc: proc.seconds)


def run(workspace: Workspace, lake: ItemsLake, scale: Scale, results: Results) -> None:
    scratch = workspace.root / "scratch"
    for count in scale.extraction_changes:
        raws: list[Proc] = []
        gluons: list[tuple[Proc, dict[str, float]]] = []
        for _ in range(scale.repeats):
            lake.home.restore("pristine")
            changed = dataset.update_first(lake.url, count)
            pending = dataset.changelog_rows(lake.url, lake.changelog)
            assert pending == changed == count, (pending, changed, count)
            target = scratch / f"raw_changes_{count}"
            raw = lake.raw_extract(target)
            shutil.rmtree(target, ignore_errors=True)
            assert raw.result["rows"] == count, raw.result
            raws.append(raw)
            gluon = lake.extract()
            left = dataset.changelog_rows(lake.url, lake.changelog)
            inner = lake.last_extraction()
            assert left == 0 and inner["rows"] == count, (left, inner)
            gluons.append((gluon, inner))
        raw = _best(raws)
        gluon, inner = min(gluons, key=lambda pair: pair[0].seconds)
        results.add(
            Figure(
                "extraction",
                f"extract {count:,} changes",
                "changes/s",
                count / gluon.seconds,
                count / raw.seconds,
                "raw fetch->Arrow->Delta append",
                higher_is_better=True,
                params={"changes": count, "repeats": scale.repeats},
                detail={
                    **runs_detail("gluon", gluon, inner["seconds"], [p for p, _ in gluons]),
                    **runs_detail("raw", raw, raw.result["seconds"], raws),
                    "raw_work_s": raw.result["work_seconds"],
                },
            )
        )
    gluon_runs = [lake.extract().seconds for _ in range(NOOP_RUNS)]
    url = dataset.libpq_url(lake.url)
    raw_runs = [
        worker("noop", "--url", url, "--changelog", lake.changelog).seconds
        for _ in range(NOOP_RUNS)
    ]
    noop = statistics.median(gluon_runs)
    results.add(
        Figure(
            "extraction",
            "no-op extraction (empty changelog), wall",
            "s",
            noop,
            statistics.median(raw_runs),
            "python+psycopg COUNT(*)",
            detail={"gluon_runs_s": gluon_runs, "raw_runs_s": raw_runs, "goal_s": 2.0},
        )
    )
    if noop >= 2.0:
        note(f"WARNING: the no-op extraction took {noop:.2f} s (goal: well under 2 s)")
