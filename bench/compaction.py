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

Each operation runs ``repeats`` times from the same extracted state (the
machine is shared: the fastest run is the least disturbed one); the peak RSS
is the largest of the runs. In-place is compared with MERGE INTO (both change the base where it is);
full and partition-wise full with the rewrite (both write a new base). After
every gluon compaction the user view's row count is checked against the
MERGE result.
"""

from __future__ import annotations

import shutil

from bench import dataset
from bench.harness import Figure, Proc, Results, Workspace, note
from bench.items import METHOD_FLAGS, Compaction, ItemsLake
from bench.scales import Scale

MERGE = "raw MERGE INTO"
REWRITE = "raw rewrite (overwrite)"
BASELINE_OF = {"in-place": MERGE, "full": REWRITE, "partition-wise full": REWRITE}


def run(workspace: Workspace, lake: ItemsLake, scale: Scale, results: Results) -> None:
    for fraction, spread in scale.compaction_grid:
        changes = dataset.ChangeSet(lake.rows, lake.partitions, fraction, spread)
        cell(workspace, lake, changes, results, group="compaction", repeats=scale.repeats)


def _fastest(procs: list[Proc]) -> Proc:
    return min(procs, key=lambda proc: proc.seconds)


def _prepare(
    workspace: Workspace,
    lake: ItemsLake,
    changes: dataset.ChangeSet,
    results: Results,
    *,
    group: str,
    label: str,
    repeats: int,
    measure_extraction: bool,
) -> dict[str, int]:
    """Pristine lake + the change set, extracted; with ``measure_extraction`` also the
    extraction figure (the change set made and extracted ``repeats`` times, the fastest)."""
    scratch = workspace.root / "scratch"
    raws: list[Proc] = []
    gluons: list[tuple[Proc, float]] = []
    counts: dict[str, int] = {}
    for round_ in range(repeats if measure_extraction else 1):
        lake.home.restore("pristine")
        if round_:
            dataset.reset_changes(lake.url, changes)
        counts = dataset.apply_changes(lake.url, changes)
        if measure_extraction:
            raws.append(lake.raw_extract(scratch / "raw_changes"))
            shutil.rmtree(scratch / "raw_changes", ignore_errors=True)
        gluons.append((lake.extract(), lake.last_extraction()["seconds"]))
    extraction, inner = min(gluons, key=lambda pair: pair[0].seconds)
    note(f"{label}: {counts['total']:,} changes {counts}, extracted in {extraction.seconds:.1f} s")
    if measure_extraction:
        raw = _fastest(raws)
        results.add(
            Figure(
                group,
                f"extraction, {label}",
                "s",
                extraction.seconds,
                raw.seconds,
                "raw fetch->Arrow->Delta append",
                params={"base_rows": lake.rows, "changes": counts["total"], "step": "extraction"},
                detail={
                    "gluon_in_process_s": inner,
                    "raw_in_process_s": raw.result["seconds"],
                    "gluon_runs_s": [proc.seconds for proc, _ in gluons],
                    "raw_runs_s": [proc.seconds for proc in raws],
                },
            )
        )
    lake.home.save("extracted")
    return counts


def cell(
    workspace: Workspace,
    lake: ItemsLake,
    changes: dataset.ChangeSet,
    results: Results,
    *,
    group: str,
    repeats: int = 1,
    methods: tuple[str, ...] = tuple(METHOD_FLAGS),
    label: str | None = None,
    measure_extraction: bool = False,
) -> None:
    """Measure one change set on ``lake`` (restored to pristine first, source reset after).

    Every operation runs ``repeats`` times from the same extracted state; the
    fastest run counts, the peak RSS is the largest seen.
    """
    scratch = workspace.root / "scratch"
    scratch.mkdir(exist_ok=True)
    label = label or changes.label
    counts = _prepare(
        workspace,
        lake,
        changes,
        results,
        group=group,
        label=label,
        repeats=repeats,
        measure_extraction=measure_extraction,
    )
    raws: dict[str, list[Proc]] = {MERGE: [], REWRITE: []}
    runs: dict[str, list[Compaction]] = {method: [] for method in methods}
    rows_after = None
    for _ in range(repeats):
        raws[MERGE].append(lake.raw_merge(scratch))
        raws[REWRITE].append(lake.raw_rewrite(scratch))
        rows_after = raws[MERGE][0].result["rows"]
        for method in methods:
            lake.home.restore("extracted")
            runs[method].append(lake.compact(method))
            if len(runs[method]) == 1:  # the result is the same every time: check it once
                rows = lake.count()
                if rows != rows_after:
                    raise AssertionError(
                        f"{method}: the user view shows {rows} rows, MERGE INTO left {rows_after}"
                    )
    merge, rewrite = _fastest(raws[MERGE]), _fastest(raws[REWRITE])
    peaks = {name: max(proc.peak_rss_mb for proc in procs) for name, procs in raws.items()}
    for method in methods:
        compaction = min(runs[method], key=lambda run: run.seconds)
        baseline = BASELINE_OF[method]
        params = {
            "base_rows": lake.rows,
            "partitions": lake.partitions,
            "fraction": changes.fraction,
            "spread": changes.spread,
            "changes": counts["total"],
            "method": method,
            "step": "compaction",
            "repeats": repeats,
        }
        results.add(
            Figure(
                group,
                f"{method}, {label}",
                "s",
                compaction.seconds,
                (merge if baseline == MERGE else rewrite).seconds,
                baseline,
                params=params,
                detail={
                    "gluon_start_s": compaction.start.seconds,
                    "gluon_finish_s": compaction.finish.seconds,
                    "gluon_acknowledge_s": compaction.acknowledge.seconds,
                    "gluon_steps_s": compaction.steps,
                    "gluon_runs_s": [run.seconds for run in runs[method]],
                    "raw_merge_s": merge.seconds,
                    "raw_merge_in_process_s": merge.result["seconds"],
                    "raw_rewrite_s": rewrite.seconds,
                    "raw_rewrite_in_process_s": rewrite.result["seconds"],
                    "raw_runs_s": [proc.seconds for proc in raws[baseline]],
                    "rows_after": rows_after,
                },
            )
        )
        results.add(
            Figure(
                f"{group} memory",
                f"{method}, {label}",
                "MB",
                max(run.peak_rss_mb for run in runs[method]),
                peaks[baseline],
                f"{baseline} peak RSS",
                params=params,
                detail={
                    "raw_merge_peak_rss_mb": peaks[MERGE],
                    "raw_rewrite_peak_rss_mb": peaks[REWRITE],
                },
            )
        )
    dataset.reset_changes(lake.url, changes)
