"""Continuous mode: source-to-lake latency at a steady write rate on one table.

``python -m bench.continuous [--rate 500] [--seconds 30]``: for merge modes DEFERRED and
IMMEDIATE, one PostgreSQL CHANGELOG table, a writer inserting ``--rate`` rows a second
(transactions of 10 rows), and ``gluon service --continuous`` on it. A change's
**latency** is the finish of the extraction run that shipped it (the repository's
``finished_at``) minus the time the source wrote it (``written_at``, the source's clock):
DEFERRED matches changes to runs by ``gl_extraction_id`` in the delta table
(``bench.service.change_lags``); IMMEDIATE has no delta table, so the changes in key order
(one writer, one key sequence) are dealt to the runs in run order by each run's
``rows_read``. Folding is off while measuring (it would move DEFERRED's changes out of the
delta table); afterwards the delta table's file count is read, one compaction folds it,
and the count is read again. ``--immediate-fold-files N`` measures IMMEDIATE a second time
with the base's files folded past N batches' files, as the service folds them. Prints one
JSON line per mode and writes ``continuous-bench.json`` to ``--out``. IMMEDIATE also
reports how its base grows over the run, per ``--window`` seconds: merge time, Delta log
size, commits since the newest checkpoint and data files (``bench.base_log``). Not part of
the test command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.base_log import BaseLogSampler, base_path, log_sample, merge_times, windows
from bench.harness import BIN, ROOT, save_json, service_home, settings_of
from bench.service import _Writer, change_lags, create_tables

MODES = ("DEFERRED", "IMMEDIATE")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "OFFLOAD_HOME": str(home), "PYTHONPATH": str(ROOT)}


def _offload(home: Path, *arguments: str) -> None:
    done = subprocess.run(
        [str(BIN / "offload"), *arguments],
        env=_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"offload {' '.join(arguments)} failed: {done.stderr}")


def _backlog(url: str, name: str) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as db:
            return int(db.execute(sa.text(f"SELECT COUNT(*) FROM app_h.{name}_log")).scalar_one())
    finally:
        engine.dispose()


def _immediate_lags(url: str, home: Path, name: str) -> list[float]:
    """Each written change's run finish minus its write time (see the module docstring)."""
    import sqlalchemy as sa

    os.environ["OFFLOAD_HOME"] = str(home)
    from gluon.api import Repository, load_settings

    repo = Repository(load_settings().repo_url)
    runs = sorted(
        (run for run in repo.incremental.extraction_runs(f"APP.{name.upper()}", limit=100_000)),
        key=lambda run: run.id,
    )
    engine = sa.create_engine(url)
    with engine.connect() as db:
        written = [
            float(value)
            for value in db.execute(
                sa.text(f"SELECT written_at FROM app.{name} WHERE id > 100 ORDER BY id")
            ).scalars()
        ]
    engine.dispose()
    lags: list[float] = []
    position = 0
    for run in runs:
        count = run.rows_read or 0
        if run.finished_at is None or count == 0:
            continue
        finished = run.finished_at.replace(tzinfo=dt.UTC).timestamp()
        lags += [finished - moment for moment in written[position : position + count]]
        position += count
    return lags


def _files(home: Path, name: str) -> int:
    from deltalake import DeltaTable

    os.environ["OFFLOAD_HOME"] = str(home)
    from gluon.api import Repository, load_settings

    state = Repository(load_settings().repo_url).incremental.get_state(f"APP.{name.upper()}")
    assert state is not None
    return len(DeltaTable(state.delta_path).file_uris())


def measure(
    url: str,
    home: Path,
    mode: str,
    *,
    rate: float,
    seconds: float,
    window: float = 20.0,
    fold_files: int | None = None,
) -> dict[str, Any]:
    """One mode's figures; ``fold_files`` (IMMEDIATE only): fold the base's files as the
    service does when the batches added that many (None: no folding)."""
    name = f"c_{mode.lower()}" + ("" if fold_files is None else f"_f{fold_files}")
    create_tables(url, [name])
    _offload(
        home,
        "-t",
        f"app.{name}",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        f"--incremental-merge-mode={mode}",
    )
    config = home / "conf" / f"{name}.toml"
    folding = 1_000_000 if fold_files is None else fold_files
    config.write_text(f'[tables."app.{name}"]\ncontinuous = true\nfold_files = {folding}\n')
    with (home / f"{name}-service.out").open("wb") as out:
        service = subprocess.Popen(
            [str(BIN / "gluon"), "service", "--config", str(config)],
            env=_env(home),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        time.sleep(5.0)  # the first (full) run and the engine's start are not measured
        sampler = BaseLogSampler(home, f"APP.{name.upper()}")
        writer = _Writer(url, [name], rate, seconds)
        started = time.time()
        writer.start()
        if mode == "IMMEDIATE":
            sampler.start()
        writer.join()
        sampler.stop.set()
        if writer.failure is not None:
            raise writer.failure
        while _backlog(url, name):
            time.sleep(0.2)
        time.sleep(1.0)  # the last run's bookkeeping
        service.send_signal(signal.SIGTERM)
        if service.wait(timeout=600):
            raise RuntimeError(f"gluon service exited {service.returncode}")
    if mode == "DEFERRED":
        lags = sorted(change_lags(home, [name]))
    else:
        lags = sorted(_immediate_lags(url, home, name))
    figure: dict[str, Any] = {
        "merge_mode": mode,
        "fold_files": fold_files,
        "rate": rate,
        "written": writer.written,
        "changes": len(lags),
        "latency_p50_s": round(lags[len(lags) // 2], 3),
        "latency_p95_s": round(lags[int(0.95 * (len(lags) - 1))], 3),
        "latency_max_s": round(lags[-1], 3),
    }
    if mode == "IMMEDIATE":
        location = base_path(home, f"APP.{name.upper()}")
        assert location is not None
        figure["base_at_end"] = log_sample(location)
        figure["over_time"] = windows(sampler.samples, merge_times(location, started), window)
    if mode == "DEFERRED":
        figure["delta_files_before_fold"] = _files(home, name)
        _offload(
            home,
            "-t",
            f"app.{name}",
            "-x",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
        )
        figure["delta_files_after_fold"] = _files(home, name)
    return figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=500.0, help="inserts per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the writer writes")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument(
        "--immediate-fold-files",
        type=int,
        help="IMMEDIATE: measure again with the base's files folded past this many",
    )
    parser.add_argument(
        "--window", type=float, default=20.0, help="IMMEDIATE: seconds per over-time row"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-continuous"
    )
    arguments = parser.parse_args()

    with service_home("bench_continuous") as (url, home):
        figures = []
        runs: list[tuple[str, int | None]] = [(mode, None) for mode in arguments.modes]
        if "IMMEDIATE" in arguments.modes and arguments.immediate_fold_files is not None:
            runs.append(("IMMEDIATE", arguments.immediate_fold_files))
        for mode, fold_files in runs:
            figure = measure(
                url,
                home,
                mode,
                rate=arguments.rate,
                seconds=arguments.seconds,
                window=arguments.window,
                fold_files=fold_files,
            )
            print(json.dumps(figure), flush=True)
            figures.append(figure)
    save_json(
        arguments.out,
        "continuous-bench.json",
        {"settings": settings_of(arguments), "figures": figures},
    )


if __name__ == "__main__":
    sys.exit(main())
