"""3. Compaction: each method against a raw MERGE INTO and a raw full rewrite.

For each grid cell (fraction of the base changed, partitions the changes land
in): restore the pristine lake, apply the change set in the source with SQL
(90% updates, 5% deletes, 5% inserts of new keys), extract it with gluon, and
save that state. Then, from that same state each time:

* gluon, each method: ``--incremental-run-compaction [method]
  --incremental-terminate-compaction``, an extraction (the acknowledgement),
  then ``--incremental-run-compaction [method] --incremental-wait-time=0``; the
  figure is the two compaction commands' wall time (the acknowledging
  extraction is not counted), its peak RSS the larger of the two;
* raw MERGE INTO: a child process registers a copy of the base (copied
  untimed) and the delta table, and runs one ``MERGE INTO`` of the latest
  change per key (delete / update / insert);
* raw rewrite: a child process writes the merged result (base rows without a
  change, plus the latest non-delete change per key) as a new partitioned Delta
  table with ``mode("overwrite")``.

In-place is compared with MERGE INTO (both change the base where it is);
full and partition-wise full with the rewrite (both write a new base). After
every gluon compaction the user view's row count is checked against the
MERGE result.
"""

from __future__ import annotations

import shutil

from bench import dataset
from bench.harness import Figure, Results, Workspace, note
from bench.items import METHOD_FLAGS, Compaction, ItemsLake
from bench.scales import Scale

MERGE = "raw MERGE INTO"
REWRITE = "raw rewrite (overwrite)"
BASELINE_OF = {"in-place": MERGE, "full": REWRITE, "partition-wise full": REWRITE}


def run(workspace: Workspace, lake: ItemsLake, scale: Scale, results: Results) -> None:
    for fraction, spread in scale.compaction_grid:
        changes = dataset.ChangeSet(lake.rows, lake.partitions, fraction, spread)
        cell(workspace, lake, changes, results, group="compaction")


def cell(
    workspace: Workspace,
    lake: ItemsLake,
    changes: dataset.ChangeSet,
    results: Results,
    *,
    group: str,
    methods: tuple[str, ...] = tuple(METHOD_FLAGS),
    label: str | None = None,
    measure_extraction: bool = False,
) -> dict[str, Compaction]:
    """Measure one change set on ``lake`` (restored to pristine first, source reset after)."""
    scratch = workspace.root / "scratch"
    scratch.mkdir(exist_ok=True)
    label = label or changes.label
    lake.home.restore("pristine")
    counts = dataset.apply_changes(lake.url, changes)
    raw_extraction = lake.raw_extract(scratch / "raw_changes") if measure_extraction else None
    shutil.rmtree(scratch / "raw_changes", ignore_errors=True)
    extraction = lake.extract()
    if raw_extraction is not None:
        results.add(
            Figure(
                group,
                f"extraction, {label}",
                "s",
                extraction.seconds,
                raw_extraction.seconds,
                "raw fetch->Arrow->Delta append",
                params={"base_rows": lake.rows, "changes": counts["total"], "step": "extraction"},
                detail={
                    "gluon_in_process_s": lake.last_extraction()["seconds"],
                    "raw_in_process_s": raw_extraction.result["seconds"],
                },
            )
        )
    note(f"{label}: {counts['total']:,} changes {counts}, extracted in {extraction.seconds:.1f} s")
    lake.home.save("extracted")
    merge = lake.raw_merge(scratch)
    rewrite = lake.raw_rewrite(scratch)
    raw = {MERGE: merge, REWRITE: rewrite}
    done: dict[str, Compaction] = {}
    for method in methods:
        lake.home.restore("extracted")
        compaction = lake.compact(method)
        rows = lake.count()
        if rows != merge.result["rows"]:
            raise AssertionError(
                f"{method}: the user view shows {rows} rows, MERGE INTO left {merge.result['rows']}"
            )
        done[method] = compaction
        baseline = raw[BASELINE_OF[method]]
        params = {
            "base_rows": lake.rows,
            "partitions": lake.partitions,
            "fraction": changes.fraction,
            "spread": changes.spread,
            "changes": counts["total"],
            "method": method,
            "step": "compaction",
        }
        results.add(
            Figure(
                group,
                f"{method}, {label}",
                "s",
                compaction.seconds,
                baseline.seconds,
                BASELINE_OF[method],
                params=params,
                detail={
                    "gluon_start_s": compaction.start.seconds,
                    "gluon_finish_s": compaction.finish.seconds,
                    "gluon_acknowledge_s": compaction.acknowledge.seconds,
                    "gluon_steps_s": compaction.steps,
                    "raw_merge_s": merge.seconds,
                    "raw_merge_in_process_s": merge.result["seconds"],
                    "raw_rewrite_s": rewrite.seconds,
                    "raw_rewrite_in_process_s": rewrite.result["seconds"],
                    "extraction_s": extraction.seconds,
                    "rows_after": rows,
                },
            )
        )
        results.add(
            Figure(
                f"{group} memory",
                f"{method}, {label}",
                "MB",
                compaction.peak_rss_mb,
                baseline.peak_rss_mb,
                f"{BASELINE_OF[method]} peak RSS",
                params=params,
                detail={
                    "raw_merge_peak_rss_mb": merge.peak_rss_mb,
                    "raw_rewrite_peak_rss_mb": rewrite.peak_rss_mb,
                },
            )
        )
    dataset.reset_changes(lake.url, changes)
    return done
