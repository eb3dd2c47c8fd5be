"""The benchmark entry point: ``python -m bench.run --scale {tiny,small,full} [--only NAME ...]``.

Runs the chosen figures at one scale, prints a table (figure, gluon, raw
baseline, ratio), and writes ``results-<scale>.json`` and PNG charts to
``--out`` (default ``bench/results``). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import capture, charts, compaction, curve, extraction, immediate, logical, reads
from bench.harness import ROOT, Results, Workspace, fmt, note
from bench.items import ItemsLake
from bench.scales import SCALES

FIGURES = ("capture", "extraction", "compaction", "reads", "curve", "immediate", "logical")
GROUP_ORDER = (
    "capture",
    "offload",
    "extraction",
    "compaction",
    "compaction memory",
    "reads",
    "reads CPU",
    "scale curve",
    "scale curve memory",
    "immediate",
    "immediate reads",
    "log-based extraction",
)
PACKAGES = (
    "pysail",
    "pyspark",
    "pyspark-client",  # the default install's Spark Connect client; pyspark with the classic extra
    "deltalake",
    "pyarrow",
    "psycopg",
    "adbc-driver-postgresql",
    "sqlalchemy",
)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:  # pyspark or pyspark-client: one of them
        return None


def machine(workspace: Workspace) -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    postgres = subprocess.run(
        [str(workspace.server.bindir / "postgres"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False, cwd=ROOT)
        return done.stdout.strip()

    return {
        "git_commit": git("rev-parse", "--short", "HEAD"),
        "git_dirty_gluon": bool(git("status", "--porcelain", "--", "gluon", "templates")),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(int(meminfo[1]) / 1024 / 1024, 1),
        "kernel": platform.release(),
        # The machine may be shared: the load when the run began says how quiet it was.
        "load_average_at_start": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
        "postgresql": postgres,
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: version for name in PACKAGES if (version := _version(name))},
    }


def table(results: Results) -> str:
    headers = ("group", "figure", "unit", "gluon", "raw baseline", "ratio")
    rows = [
        (
            f.group,
            f.name,
            f.unit,
            fmt(f.gluon),
            f"{fmt(f.baseline)} ({f.baseline_name})" if f.baseline is not None else "-",
            f"{f.ratio:.2f}x" if f.ratio is not None else "-",
        )
        for f in sorted(results.figures, key=lambda f: GROUP_ORDER.index(f.group))
    ]
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [
            cell.rjust(w) if i in (3, 5) else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="tiny")
    parser.add_argument(
        "--only", nargs="+", choices=FIGURES, metavar="NAME", help=f"any of {', '.join(FIGURES)}"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--work", type=Path, default=None, help="scratch directory (default: a new one in /tmp)"
    )
    parser.add_argument(
        "--explain", action="store_true", help="also write the user view's query plans"
    )
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    selected = tuple(args.only or FIGURES)
    signal.signal(signal.SIGTERM, _terminate)
    work = args.work or Path(tempfile.mkdtemp(prefix="gluon-bench-"))
    results = Results(scale.name)
    started = time.perf_counter()
    command = "python -m bench.run --scale " + scale.name
    if args.only:
        command += " --only " + " ".join(args.only)
    if args.explain:
        command += " --explain"
    note(f"{command}: scratch in {work}")
    extra: dict[str, Any] = {}
    with Workspace(work) as workspace:
        info = machine(workspace)
        if "capture" in selected:
            capture.run(workspace, scale, results)
        if {"extraction", "compaction", "reads", "immediate"} & set(selected):
            lake = ItemsLake.build(workspace, "items", scale.base_rows, scale.base_partitions)
            curve.offload_figure(workspace, lake, results)
            if "extraction" in selected:
                extraction.run(workspace, lake, scale, results)
            if "compaction" in selected:
                compaction.run(workspace, lake, scale, results)
            if "reads" in selected:
                extra["read_plans"] = reads.run(lake, scale, results)
            if "immediate" in selected:
                immediate.run(workspace, lake, scale, results)
            lake.drop()
        if "curve" in selected:
            curve.run(workspace, scale, results)
        if "logical" in selected:
            logical.run(workspace, scale, results)
    wall = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    stem = scale.name if not args.only else "-".join([scale.name, *args.only])
    output = {
        "scale": scale.name,
        "command": command,
        "figures_run": list(selected),
        "wall_seconds": round(wall, 1),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_at_finish": [round(load, 2) for load in os.getloadavg()],
        "machine": info,
        "settings": {name: getattr(scale, name) for name in scale.__slots__},
        "figures": [figure.as_json() for figure in results.figures],
    }
    json_path = args.out / f"results-{stem}.json"
    json_path.write_text(json.dumps(output, indent=1) + "\n")
    if args.explain and "read_plans" in extra:
        plans = args.out / f"read-plans-{stem}.txt"
        plans.write_text(
            "\n\n".join(
                f"== delta {fraction}, {query} ==\n{plan}"
                for fraction, by_query in extra["read_plans"].items()
                for query, plan in by_query.items()
            )
        )
    try:
        pngs = charts.draw(output, args.out, stem)
    except ModuleNotFoundError as exc:  # the figures are in the JSON; charts are extra
        pngs = []
        note(f"no charts: {exc.name} is missing (pip install -e '.[bench]')")
    print()
    print(table(results))
    print()
    note(f"scale {scale.name}: {wall / 60:.1f} min wall; wrote {json_path}")
    for png in pngs:
        note(f"chart {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
