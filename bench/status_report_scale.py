"""``offload_status_report`` over many tables of one PostgreSQL database:
``PYTHONPATH=tests python -m bench.status_report_scale [--tables 200]``.

Enables ``--tables`` tables the way ``bench/service_scale.py`` does (one in five
PG_LOGICAL, the rest CHANGELOG; one in four IMMEDIATE), writes a few rows to each
and extracts once, then times ``offload_status_report`` (issue 33 item 4: 200 tables in
at most 10 s), three times. Prints one JSON object. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import BIN, ROOT, service_home
from bench.service_scale import _prepare

RUNS = 3


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "OFFLOAD_HOME": str(home), "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}


def _extract_all(url: str, names: list[str]) -> None:
    """A few rows per table, shipped once, so that every table has runs and a backlog."""
    import sqlalchemy as sa
    from support.cli import run_cli

    engine = sa.create_engine(url)
    with engine.begin() as db:
        for name in names:
            db.execute(sa.text(f"INSERT INTO app.{name} (v) SELECT g FROM generate_series(1, 3) g"))
    engine.dispose()
    for name in names:
        result = run_cli("offload", "-t", f"app.{name}", "--incremental-run-extraction")
        if result.exit_code:
            raise RuntimeError(f"extracting app.{name} failed: {result.stderr}")
    engine = sa.create_engine(url)
    with engine.begin() as db:  # a backlog for the report to count
        for name in names:
            db.execute(sa.text(f"INSERT INTO app.{name} (v) VALUES (1)"))
    engine.dispose()


def time_report(
    home: Path, profile: Path | None, sampled: Path | None = None
) -> tuple[list[float], int]:
    """Seconds of each of ``RUNS`` reports (the first one profiled when asked: cProfile
    to ``profile``, or py-spy's collapsed stacks of every thread to ``sampled``)."""
    seconds: list[float] = []
    code = 0
    for run in range(RUNS):
        command = [sys.executable, str(BIN / "offload_status_report")]
        if profile is not None and run == 0:
            command = [sys.executable, "-m", "cProfile", "-o", str(profile), *command[1:]]
        if sampled is not None and run == 0:
            spy = ["py-spy", "record", "-r", "200", "-f", "raw", "-o", str(sampled), "--"]
            command = [*spy, *command]
        started = time.monotonic()
        report = subprocess.run(
            command, env=_env(home), capture_output=True, text=True, check=False
        )
        seconds.append(round(time.monotonic() - started, 2))
        code = code or report.returncode
        if report.returncode:
            print(report.stderr, file=sys.stderr)
    return seconds, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=200, help="tables (issue 33: 200)")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the first report")
    parser.add_argument("--py-spy", type=Path, default=None, help="py-spy the first report")
    arguments = parser.parse_args()

    names = [f"s{number:03d}" for number in range(arguments.tables)]
    with service_home("bench_status_report") as (url, home):
        began = time.monotonic()
        _prepare(url, home, names)
        _extract_all(url, names)
        print(f"prepared {len(names)} tables in {time.monotonic() - began:.0f} s", flush=True)
        seconds, code = time_report(home, arguments.profile, arguments.py_spy)
    print(
        json.dumps({"tables": len(names), "status_report_s": seconds, "status_report_exit": code}),
        flush=True,
    )


if __name__ == "__main__":
    main()
