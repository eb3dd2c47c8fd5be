"""PG_LOGICAL against CHANGELOG at chosen backlog sizes, in one run (issue 33).

The ``logical`` figure of ``bench.run`` (``bench/logical.py``: two copies of
``bench.items``, one per method, the same N single-row UPDATEs extracted by the real
``offload`` command), for the sizes given rather than the scale's three, so one size can be
measured before and after a change to the PG_LOGICAL read without the 1M round::

    python -m bench.logical_typed --scale small --changes 100000

prints both methods' figures and their ratio, and writes
``bench/results/results-<scale>-logical-<N>.json``. ``--shared-slot`` adds a third lake,
PG_LOGICAL through the database's shared pgoutput slot (issue 33 item 2), its rounds
interleaved with the other two and its figure against the same CHANGELOG runs
(``...-logical-shared-<N>.json``); each side's wall and process CPU seconds are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import logical
from bench.harness import ROOT, Results, Workspace, note
from bench.run import machine
from bench.scales import SCALES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.logical_typed", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--changes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--shared-slot", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    scale = dataclasses.replace(SCALES[args.scale], extraction_changes=tuple(args.changes))
    results = Results(scale.name)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gluon-bench-"))
    with Workspace(work) as workspace:
        info = machine(workspace)
        ways = logical.WAYS
        if args.shared_slot:
            ways = (ways[0], logical.SHARED_SLOT, logical.CHANGELOG)
        logical.run(workspace, scale, results, ways)
    shared = ["shared"] if args.shared_slot else []
    stem = "-".join([scale.name, "logical", *shared, *(str(n) for n in args.changes)])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"results-{stem}.json"
    output = {
        "scale": scale.name,
        "command": " ".join(["python -m bench.logical_typed", *(argv or sys.argv[1:])]),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_at_finish": [round(load, 2) for load in os.getloadavg()],
        "machine": info,
        "figures": [figure.as_json() for figure in results.figures],
    }
    path.write_text(json.dumps(output, indent=1) + "\n")
    for figure in results.figures:
        detail = figure.detail
        note(
            f"{figure.name}: {detail['pg_logical_wall_s']:.2f} s (CPU "
            f"{detail['pg_logical_cpu_s']:.2f} s), CHANGELOG {detail['changelog_wall_s']:.2f} s "
            f"(CPU {detail['changelog_cpu_s']:.2f} s), ratio {figure.ratio:.2f}, CPU ratio "
            f"{detail['pg_logical_cpu_s'] / max(detail['changelog_cpu_s'], 1e-9):.2f}"
        )
    note(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
