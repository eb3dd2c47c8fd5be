"""gluon against what users would do instead: ``python -m bench.alternatives [--scale ...]``.

A PostgreSQL table ``bench.items`` (``rows`` rows in 10 partitions of ``part``) changes
every day by ``fraction`` of its rows, in 2 partitions (90% updates that move
``updated_at`` forward, 5% deletes, 5% inserts of new keys). Each day, from the same
source state, every contender brings a Delta table up to date, each in fresh child
processes (what a cron job pays, start-up included):

* **full reload**: the whole table, ADBC -> Arrow -> ``write_deltalake(mode="overwrite")``;
* **updated_at upsert**: rows past the last ``updated_at`` -> ``DeltaTable.merge``; it
  never sees a delete, so it keeps deleted rows (counted after the last day);
* **gluon DEFERRED**: one command, ``--incremental-run-extraction
  --incremental-run-compaction`` (in-place), that merges the day's changes into the base
  table (what another engine reads); on the last day the two separately instead, with the
  user view read in between (changes pending) and after (nothing pending);
* **gluon IMMEDIATE**: the extraction of a table in merge mode IMMEDIATE (the base is
  current), against a hand-written deltalake merge of the same changelog rows read the
  same way (``bench.worker deltamerge``, on an untimed copy of the base).

Figures are the median day; ratios are gluon's cost over the alternative's (above 1:
gluon is slower). After the last day the row counts of every table are compared with
the source: ``phantom rows`` are keys a table holds that the source deleted.
One run per figure (no repeats): ratios under ~20% apart are noise on a shared machine. Each
day is a round (every contender back to back), so the run also prints, for the IMMEDIATE
sync against the hand merge and the one-command extraction + compaction against the
reload, each day's ratio and their median, by wall time and by the child's CPU time (user +
system, steadier on a shared machine; PostgreSQL's own work for a child is in neither side's
CPU time, so gluon's changelog delete counts only by wall time).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import dataset
from bench.harness import ROOT, Figure, Proc, Results, Workspace, fmt, note, run_process, worker
from bench.items import ItemsLake

PARTITIONS = 10
SPREAD = 2
"""Each day's changes land in this many partitions (recent data changes, old data rests)."""
IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
COMPACT = ("--incremental-run-compaction", "--incremental-wait-time=0")


@dataclass(frozen=True, slots=True)
class Size:
    rows: int
    days: int


SIZES = {"tiny": Size(20_000, 2), "small": Size(200_000, 4), "full": Size(2_000_000, 8)}


def apply_day(url: str, rows: int, fraction: float, day: int) -> int:
    """Day ``day``'s changes in the source (the same in every database given the same day)."""
    per_part = rows // PARTITIONS
    threshold = round(1000 * fraction * PARTITIONS / SPREAD)
    # A different slice of the key hash each day, inside the first SPREAD partitions.
    picked = (
        f"id <= {SPREAD * per_part} AND (id * {dataset.HASH} + {day * 331}) % 1000 < {threshold}"
    )
    stamp = f"timestamp '2030-01-01' + interval '{day} day'"
    name = dataset.QUALIFIED
    with dataset.connect(url) as conn:
        deleted = conn.execute(f"DELETE FROM {name} WHERE {picked} AND (id / 1000) % 20 = 0")
        updated = conn.execute(
            f"UPDATE {name} SET amount = amount + 1, label = label || '*', updated_at = {stamp} "
            f"WHERE {picked} AND (id / 1000) % 20 > 1"
        )
        skipped = conn.execute(
            f"SELECT COUNT(*) FROM {name} WHERE {picked} AND (id / 1000) % 20 = 1"
        )
        inserts = int(skipped.fetchone()[0])  # type: ignore[index]
        inserted = conn.execute(
            f"INSERT INTO {name} SELECT {rows * (day + 1)} + n, (n % {SPREAD})::int, "
            f"(n % 97)::int, 1.00, 'new ' || n, {stamp} FROM generate_series(1, {inserts}) n"
        )
    return deleted.rowcount + updated.rowcount + inserted.rowcount


def users(job: str, *args: str) -> Proc:
    return run_process([sys.executable, "-m", "bench.users", job, *args])


def source_rows(url: str) -> int:
    with dataset.connect(url) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {dataset.QUALIFIED}").fetchone()[0])  # type: ignore[index]


def gluon_deferred_day(lake: ItemsLake) -> Proc:
    """The day's changes into the base table in one command: extraction, then in-place
    compaction (``--incremental-run-extraction --incremental-run-compaction``)."""
    proc = lake.home.offload(
        "-t", dataset.QUALIFIED, "-x", "--incremental-run-extraction", *COMPACT
    )
    if "complete" not in proc.stdout:
        raise RuntimeError(f"compaction did not complete: {proc.stdout}")
    return proc


def one_fraction(
    workspace: Workspace, size: Size, fraction: float, results: Results
) -> dict[str, Any]:
    tag = f"{fraction * 100:g}%"
    deferred = ItemsLake.build(workspace, "alt_deferred", size.rows, PARTITIONS)
    immediate = ItemsLake.build(workspace, "alt_immediate", size.rows, PARTITIONS, (IMMEDIATE,))
    scratch = workspace.root / "scratch"
    scratch.mkdir(exist_ok=True)
    url = dataset.libpq_url(deferred.url)
    reload_target, upsert_target = str(scratch / "reload"), str(scratch / "upsert")
    watermark = users("upsert", "--url", url, "--target", upsert_target).result["watermark"]
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    reads: dict[str, Any] = {}

    def took(name: str, proc: Proc) -> None:
        times.setdefault(name, []).append(proc.seconds)
        cpu.setdefault(name, []).append(proc.cpu_seconds)

    try:
        for day in range(1, size.days + 1):
            changes = apply_day(deferred.url, size.rows, fraction, day)
            assert apply_day(immediate.url, size.rows, fraction, day) == changes
            took("full reload", users("reload", "--url", url, "--target", reload_target))
            upsert = users(
                "upsert", "--url", url, "--target", upsert_target, "--watermark", watermark
            )
            watermark = upsert.result["watermark"]
            took("updated_at upsert", upsert)
            took("hand deltalake merge", immediate.raw_immediate_merge(scratch))
            took("gluon IMMEDIATE sync", immediate.extract())
            if day == size.days:  # the view with the day's changes pending, then compacted
                took("gluon extraction", deferred.extract())
                reads["pending"] = _reads(deferred)
                compact = deferred.home.offload("-t", dataset.QUALIFIED, "-x", *COMPACT)
                if "complete" not in compact.stdout:
                    raise RuntimeError(f"compaction did not complete: {compact.stdout}")
                took("gluon in-place compaction alone", compact)
                reads["compacted"] = _reads(deferred)
            else:
                took("gluon extraction + compaction", gluon_deferred_day(deferred))
            note(
                f"{tag} day {day}: {changes:,} changes; "
                + ", ".join(f"{name} {fmt(values[-1])} s" for name, values in times.items())
            )
        truth = source_rows(deferred.url)
        counts = {
            "source": truth,
            "gluon DEFERRED view": deferred.count(),
            "gluon IMMEDIATE base": immediate.count(),
        }
        upserted = users("phantoms", "--url", url, "--target", upsert_target).result
        reloaded = users("phantoms", "--url", url, "--target", reload_target).result
        counts["updated_at upsert"] = upserted["rows"]
        counts["full reload"] = reloaded["rows"]
    finally:
        deferred.drop()
        immediate.drop()
        shutil.rmtree(scratch, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in times.items()}
    params = {"base_rows": size.rows, "fraction": fraction, "days": size.days, "spread": SPREAD}
    reload = median["full reload"]
    for name in (
        "updated_at upsert",
        "gluon extraction",
        "gluon IMMEDIATE sync",
        "gluon extraction + compaction",
    ):
        results.add(
            Figure(f"{tag} daily", name, "s", median[name], reload, "full reload", params=params)
        )
    results.add(
        Figure(
            f"{tag} daily",
            "gluon IMMEDIATE sync vs hand merge",
            "s",
            median["gluon IMMEDIATE sync"],
            median["hand deltalake merge"],
            "hand deltalake merge",
            params=params,
        )
    )
    for query in ("count", "sum", "lookup"):
        for state in ("pending", "compacted"):
            timing = reads[state][query]
            pending = "changes pending" if state == "pending" else "nothing pending"
            results.add(
                Figure(
                    f"{tag} reads",
                    f"{query}, view with {pending}",
                    "s",
                    timing["view"],
                    timing["base"],
                    "the base Delta table",
                    params=params,
                )
            )
    phantoms = {"updated_at upsert": upserted["phantoms"], "full reload": reloaded["phantoms"]}
    for name, rows in counts.items():
        note(f"{tag} after {size.days} days: {name} holds {rows:,} rows (source {truth:,})")
    return {"times": times, "cpu_seconds": cpu, "counts": counts, "phantoms": phantoms}


def _reads(lake: ItemsLake) -> dict[str, dict[str, float]]:
    proc = worker(
        "reads", "--table", dataset.QUALIFIED, "--key", "1000", "--repeats", "3", env=lake.home.env
    )
    timings: dict[str, dict[str, float]] = proc.result["timings"]
    return timings


ROUND_RATIOS = (
    ("gluon IMMEDIATE sync", "hand deltalake merge"),
    ("gluon extraction + compaction", "full reload"),
)
"""The goals of issue 28 (items 4-5), read as rounds: each day runs both sides back to back."""


def round_ratios(times: dict[str, list[float]], gluon_name: str, other: str) -> list[float]:
    """Each day's ratio of ``gluon_name`` over ``other`` (days both ran): on a shared machine
    the median of these is steadier than the ratio of the two medians."""
    pairs = zip(times[gluon_name], times[other], strict=False)
    return [mine / theirs for mine, theirs in pairs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternatives", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SIZES), default="small")
    parser.add_argument("--days", type=int, default=None, help="days of changes (scale's default)")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.10])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    size = SIZES[args.scale]
    if args.days:
        if args.days < 2:
            parser.error("--days must be at least 2 (the last day is measured apart)")
        size = Size(size.rows, args.days)
    results = Results(args.scale)
    work = Path(tempfile.mkdtemp(prefix="gluon-alternatives-"))
    started = time.perf_counter()
    outcome: dict[str, Any] = {}
    with Workspace(work) as workspace:
        for fraction in args.fractions:
            outcome[f"{fraction:g}"] = one_fraction(workspace, size, fraction, results)
    print()
    for figure in results.figures:
        ratio = f"{figure.ratio:.2f}x" if figure.ratio is not None else "-"
        print(
            f"{figure.group:12} {figure.name:48} {fmt(figure.gluon):>7} s  "
            f"{figure.baseline_name:22} {fmt(figure.baseline):>7} s  {ratio:>6}"
        )
    for fraction, data in outcome.items():
        for gluon_name, other in ROUND_RATIOS:
            ratios = round_ratios(data["times"], gluon_name, other)
            print(
                f"{float(fraction) * 100:g}%: {gluon_name} / {other}, day by day: "
                + ", ".join(f"{ratio:.2f}x" for ratio in ratios)
                + f"; median {statistics.median(ratios):.2f}x"
            )
            cpu_ratios = round_ratios(data["cpu_seconds"], gluon_name, other)
            print(
                f"{float(fraction) * 100:g}%: the same by process CPU time, day by day: "
                + ", ".join(f"{ratio:.2f}x" for ratio in cpu_ratios)
                + f"; median {statistics.median(cpu_ratios):.2f}x"
            )
        truth = data["counts"]["source"]
        for name, rows in data["phantoms"].items():
            print(
                f"{float(fraction) * 100:g}% after {size.days} days: {name} keeps "
                f"{rows:,} phantom rows "
                f"({rows / truth:.2%} of the source's {truth:,})"
            )
        wrong = {name: rows - truth for name, rows in data["counts"].items() if rows != truth}
        print(f"{float(fraction) * 100:g}%: row counts off the source: {wrong or 'none'}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"alternatives-{args.scale}.json"
    path.write_text(
        json.dumps(
            {
                "scale": args.scale,
                "rows": size.rows,
                "days": size.days,
                "wall_seconds": round(time.perf_counter() - started, 1),
                "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                "figures": [figure.as_json() for figure in results.figures],
                "outcome": outcome,
            },
            indent=1,
        )
        + "\n"
    )
    note(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
