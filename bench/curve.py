"""5. Scale curve and the initial offload.

For each table size: generate ``bench.items`` with partitions of a fixed size
(a bigger table has more partitions, as date partitions accumulate), offload
it with the real ``offload`` command (the "initial offload" figure, against a
raw fetch->Arrow->partitioned Delta write of the same table), then apply the
same fixed number of changes, landing in the same number of partitions, and
measure extraction, in-place compaction and full compaction against their raw
baselines (bench/compaction.py). If the cost follows the changes the curve is
flat; if it follows the table it climbs.
"""

from __future__ import annotations

import shutil

from bench import compaction, dataset
from bench.harness import Figure, Results, Workspace
from bench.items import ItemsLake
from bench.scales import Scale


def offload_figure(
    workspace: Workspace, lake: ItemsLake, results: Results, *, curve: bool = False
) -> None:
    """Initial offload rows/s: gluon's ``offload`` against the raw load of the same table."""
    assert lake.offload is not None
    target = workspace.root / "scratch" / "raw_offload"
    raw = lake.raw_offload(target)
    shutil.rmtree(target, ignore_errors=True)
    results.add(
        Figure(
            "offload",
            f"initial offload of {lake.rows:,} rows ({lake.partitions} partitions)",
            "rows/s",
            lake.rows / lake.offload.seconds,
            lake.rows / raw.seconds,
            "raw fetch->Arrow->Delta write",
            higher_is_better=True,
            params={"rows": lake.rows, "partitions": lake.partitions, "curve": curve},
            detail={
                "gluon_wall_s": lake.offload.seconds,
                "gluon_peak_rss_mb": lake.offload.peak_rss_mb,
                "raw_wall_s": raw.seconds,
                "raw_in_process_s": raw.result["seconds"],
                "raw_peak_rss_mb": raw.peak_rss_mb,
                "source_generate_s": lake.create_seconds,
            },
        )
    )


def run(workspace: Workspace, scale: Scale, results: Results) -> None:
    for rows in scale.curve_rows:
        partitions = rows // scale.curve_partition_rows
        lake = ItemsLake.build(workspace, f"curve_{rows}", rows, partitions)
        try:
            offload_figure(workspace, lake, results, curve=True)
            changes = dataset.ChangeSet(
                rows, partitions, scale.curve_changes / rows, scale.curve_change_partitions
            )
            compaction.cell(
                workspace,
                lake,
                changes,
                results,
                group="scale curve",
                repeats=scale.repeats,
                methods=("in-place", "full"),
                label=f"{rows:,} rows",
                measure_extraction=True,
            )
        finally:
            lake.drop()
