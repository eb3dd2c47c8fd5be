"""``offload_status_report`` over many tables after load:
``PYTHONPATH=tests python -m bench.status_report_loaded [--tables 200] [--rounds 3]``.

``bench/status_report_scale.py`` times the report over tables that were extracted once,
quiet. The 12.1 s issue 33 measured was right after a loaded service: many runs per table,
longer Delta logs, PG_LOGICAL slots holding the WAL of the load. This variant enables the
same tables (one in five PG_LOGICAL, one in four IMMEDIATE), then runs ``--rounds``
extraction passes over all of them while a writer inserts ``--rate`` rows a second spread
over the tables, leaves the writer's last changes waiting (a backlog, WAL the slots keep),
and times the report three times (issue 33 item 4: 200 tables in at most 10 s). Prints one
JSON object. Not part of the test command.

``--against DIR`` (another gluon checkout, e.g. the main branch's) times it six times over
the same loaded tables instead, alternating this checkout's report and that one's (this,
that, that, this, this, that: the first, cold report is this checkout's), each with the
report process's CPU time (user + system) beside its wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import BIN, ROOT, service_home
from bench.service_scale import _prepare, _Writer
from bench.status_report_scale import time_report


def _extract_rounds(names: list[str], rounds: int) -> int:
    """``rounds`` extraction passes over every table, in this process; the runs made."""
    from support.cli import run_cli

    runs = 0
    for _ in range(rounds):
        for name in names:
            result = run_cli("offload", "-t", f"app.{name}", "-x", "--incremental-run-extraction")
            if result.exit_code:
                raise RuntimeError(f"extracting app.{name} failed: {result.stderr}")
            runs += 1
    return runs


def _timed_report(home: Path, checkout: Path) -> tuple[float, float, int]:
    """One report with ``checkout``'s gluon first on the path: wall s, CPU s, exit code."""
    env = {
        **os.environ,
        "OFFLOAD_HOME": str(home),
        "PYTHONPATH": f"{checkout}:{checkout / 'tests'}",
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    report = subprocess.run(
        [sys.executable, str(BIN / "offload_status_report")],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if report.returncode:
        print(report.stderr, file=sys.stderr)
    return round(wall, 2), round(cpu, 2), report.returncode


def interleaved(home: Path, against: Path) -> dict[str, object]:
    """This checkout's report and ``against``'s, three each, alternating."""
    figures: dict[str, dict[str, list[float]]] = {
        side: {"wall_s": [], "cpu_s": []} for side in ("this", "against")
    }
    code = 0
    for side in ("this", "against", "against", "this", "this", "against"):
        wall, cpu, exit_code = _timed_report(home, ROOT if side == "this" else against)
        figures[side]["wall_s"].append(wall)
        figures[side]["cpu_s"].append(cpu)
        code = code or exit_code
    return {"this": figures["this"], "against": figures["against"], "status_report_exit": code}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=200, help="tables (issue 33: 200)")
    parser.add_argument("--rounds", type=int, default=3, help="extraction passes under load")
    parser.add_argument("--rate", type=float, default=200.0, help="rows a second written")
    parser.add_argument("--py-spy", type=Path, default=None, help="py-spy the first report")
    parser.add_argument(
        "--against", type=Path, default=None, help="another gluon checkout, timed alternately"
    )
    arguments = parser.parse_args()

    names = [f"s{number:03d}" for number in range(arguments.tables)]
    try:
        with service_home("bench_status_loaded") as (url, home):
            began = time.monotonic()
            _prepare(url, home, names)
            enabled = time.monotonic() - began
            print(f"enabled {len(names)} tables in {enabled:.0f} s", flush=True)
            writer = _Writer(url, names, arguments.rate)
            writer.start()
            try:
                runs = _extract_rounds(names, arguments.rounds)
            finally:
                writer.halt.set()
                writer.join()
            if writer.failure is not None:
                raise writer.failure
            loaded = time.monotonic() - began - enabled
            print(f"loaded {loaded:.0f} s ({runs} extraction runs)", flush=True)
            if arguments.against is not None:
                reports = interleaved(home, arguments.against.resolve())
            else:
                seconds, code = time_report(home, None, arguments.py_spy)
                reports = {"status_report_s": seconds, "status_report_exit": code}
    finally:
        os.environ.pop("OFFLOAD_HOME", None)
    print(
        json.dumps(
            {
                "tables": len(names),
                "extraction_runs": runs,
                "rows_written": writer.written,
                "enable_s": round(enabled, 1),
                **reports,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
