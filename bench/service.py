"""The service against one process per run: ``python -m bench.service [--tables N] ...``.

The same tables, the same steady stream of inserts, the same parallelism (two runs
at a time) and the same extraction interval, driven two ways:

* ``service``: one ``gluon service`` process (one warm engine);
* ``per-run``: a driver starting one ``offload -t T -x --incremental-run-extraction``
  process per due run, as cron lines would (each pays Python's and the engine's
  start-up).

Each source row carries the time it was written (``written_at``, seconds since the
epoch, from the source's clock); each shipped change is matched with the extraction
run that shipped it (``gl_extraction_id``), so a change's **lag** is its run's finish
(the repository's ``finished_at``) minus ``written_at``. **Changes per second** is
what was shipped over the time from the first write until everything written was in
the lake. Prints one line per mode and writes ``service-bench.json`` to ``--out``.
Not part of the test command; see bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import BIN, ROOT, save_json, service_home, settings_of

WRITE_BATCH = 10


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "OFFLOAD_HOME": str(home), "PYTHONPATH": str(ROOT)}


def create_tables(url: str, names: list[str]) -> None:
    """``app.<name>`` for each name: 100 rows, a key and the write time of each row."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA IF NOT EXISTS app"))
        for name in names:
            db.execute(
                sa.text(
                    f"CREATE TABLE app.{name} (id BIGSERIAL PRIMARY KEY, v INTEGER, "
                    "written_at DOUBLE PRECISION DEFAULT extract(epoch FROM clock_timestamp()))"
                )
            )
            db.execute(
                sa.text(f"INSERT INTO app.{name} (v) SELECT g FROM generate_series(1, 100) g")
            )
    engine.dispose()


def _prepare(url: str, home: Path, names: list[str]) -> None:
    create_tables(url, names)
    for name in names:
        done = subprocess.run(
            [
                str(BIN / "offload"),
                "-t",
                f"app.{name}",
                "-x",
                "--incremental-updates-enabled",
                "--incremental-extraction-method=CHANGELOG",
            ],
            env=_env(home),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"enabling app.{name} failed: {done.stderr}")


class _Writer(threading.Thread):
    """Inserts ``rate`` rows a second, spread over the tables, for ``seconds``."""

    def __init__(self, url: str, names: list[str], rate: float, seconds: float) -> None:
        super().__init__(daemon=True)
        import sqlalchemy as sa

        self.engine = sa.create_engine(url)
        self.names, self.rate, self.seconds = names, rate, seconds
        self.written = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        import sqlalchemy as sa

        started = time.monotonic()
        try:
            while time.monotonic() - started < self.seconds:
                due = (time.monotonic() - started) * self.rate
                while self.written < due:
                    name = self.names[(self.written // WRITE_BATCH) % len(self.names)]
                    with self.engine.begin() as db:
                        db.execute(
                            sa.text(
                                f"INSERT INTO app.{name} (v) SELECT g FROM generate_series(1, "
                                f"{WRITE_BATCH}) g"
                            )
                        )
                    self.written += WRITE_BATCH
                time.sleep(0.02)
        except BaseException as exc:
            self.failure = exc


def _backlog(url: str, names: list[str]) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as db:
            return sum(
                int(db.execute(sa.text(f"SELECT COUNT(*) FROM app_h.{name}_log")).scalar_one())
                for name in names
            )
    finally:
        engine.dispose()


def _drive_service(
    home: Path, names: list[str], interval: float, parallel: int, stop: threading.Event
) -> None:
    config = home / "conf" / f"tables-{names[0]}.toml"
    lines = ["[defaults]", f"extraction_interval = {interval}", ""]
    lines += [f'[tables."app.{name}"]' for name in names]
    config.write_text("\n".join(lines) + "\n")
    with (home / f"{names[0]}-service.out").open("wb") as out:
        service = subprocess.Popen(
            [str(BIN / "gluon"), "service", "--config", str(config), "--parallel", str(parallel)],
            env=_env(home),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        stop.wait()
        service.send_signal(signal.SIGTERM)
        if service.wait(timeout=600):
            raise RuntimeError(f"gluon service exited {service.returncode}")


def _drive_per_run(
    home: Path, names: list[str], interval: float, parallel: int, stop: threading.Event
) -> None:
    """One process per due run, at most ``parallel`` at a time, each table every ``interval``."""
    due = {name: time.monotonic() for name in names}
    running: dict[str, subprocess.Popen[bytes]] = {}
    while not stop.is_set() or running:
        for name, process in list(running.items()):
            if process.poll() is not None:
                del running[name]
        if not stop.is_set():
            for name in sorted(names, key=due.__getitem__):
                if len(running) >= parallel:
                    break
                if name not in running and time.monotonic() >= due[name]:
                    due[name] = time.monotonic() + interval
                    running[name] = subprocess.Popen(
                        [
                            str(BIN / "offload"),
                            "-t",
                            f"app.{name}",
                            "-x",
                            "--incremental-run-extraction",
                        ],
                        env=_env(home),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
        time.sleep(0.05)


def change_lags(home: Path, names: list[str]) -> list[float]:
    """Seconds from each shipped change's write to the finish of the run that shipped it
    (changes of a run not finished yet are left out)."""
    os.environ["OFFLOAD_HOME"] = str(home)
    from gluon.api import Repository, load_settings, read_delta

    repo = Repository(load_settings().repo_url)
    lags: list[float] = []
    for name in names:
        key = f"APP.{name.upper()}"
        state = repo.incremental.get_state(key)
        assert state is not None
        finished = {
            run.id: run.finished_at.replace(tzinfo=dt.UTC).timestamp()
            for run in repo.incremental.extraction_runs(key, limit=100_000)
            if run.finished_at is not None
        }
        changes = read_delta(state.delta_path, columns=["written_at", "gl_extraction_id"])
        for written, run in zip(
            changes.column("written_at").to_pylist(),
            changes.column("gl_extraction_id").to_pylist(),
            strict=True,
        ):
            if run in finished:
                lags.append(finished[run] - written)
    return lags


def measure(
    mode: str,
    url: str,
    home: Path,
    names: list[str],
    *,
    rate: float,
    seconds: float,
    interval: float,
    parallel: int,
) -> dict[str, Any]:
    drive = _drive_service if mode == "service" else _drive_per_run
    stop = threading.Event()
    driver = threading.Thread(target=drive, args=(home, names, interval, parallel, stop))
    writer = _Writer(url, names, rate, seconds)
    started = time.monotonic()
    driver.start()
    writer.start()
    writer.join()
    if writer.failure is not None:
        raise writer.failure
    while _backlog(url, names):  # until everything written is in the lake
        time.sleep(0.5)
    drained = time.monotonic() - started
    stop.set()
    driver.join()
    lags = sorted(change_lags(home, names))
    return {
        "mode": mode,
        "tables": len(names),
        "changes": len(lags),
        "written": writer.written,
        "seconds_to_drain": round(drained, 1),
        "changes_per_second": round(len(lags) / drained, 1),
        "lag_mean_s": round(statistics.fmean(lags), 2),
        "lag_p95_s": round(lags[int(0.95 * (len(lags) - 1))], 2),
        "lag_max_s": round(lags[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rate", type=float, default=100.0, help="inserts per second, all tables")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the writer writes")
    parser.add_argument("--interval", type=float, default=5.0, help="extraction interval (s)")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-service")
    arguments = parser.parse_args()

    with service_home("bench_service") as (url, home):
        figures = []
        for mode in ("service", "per-run"):
            names = [f"{mode[0]}{number:03d}" for number in range(arguments.tables)]
            _prepare(url, home, names)
            figure = measure(
                mode,
                url,
                home,
                names,
                rate=arguments.rate,
                seconds=arguments.seconds,
                interval=arguments.interval,
                parallel=arguments.parallel,
            )
            print(json.dumps(figure), flush=True)
            figures.append(figure)
    save_json(
        arguments.out,
        "service-bench.json",
        {"settings": settings_of(arguments), "figures": figures},
    )


if __name__ == "__main__":
    main()
