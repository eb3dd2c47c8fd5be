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
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench.harness import service_home
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=200, help="tables (issue 33: 200)")
    parser.add_argument("--rounds", type=int, default=3, help="extraction passes under load")
    parser.add_argument("--rate", type=float, default=200.0, help="rows a second written")
    parser.add_argument("--py-spy", type=Path, default=None, help="py-spy the first report")
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
            seconds, code = time_report(home, None, arguments.py_spy)
    finally:
        os.environ.pop("OFFLOAD_HOME", None)
    print(
        json.dumps(
            {
                "tables": len(names),
                "extraction_runs": runs,
                "rows_written": writer.written,
                "enable_s": round(enabled, 1),
                "status_report_s": seconds,
                "status_report_exit": code,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
