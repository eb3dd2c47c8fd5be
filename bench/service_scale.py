"""``gluon service`` over many tables of one PostgreSQL database:
``PYTHONPATH=tests python -m bench.service_scale [--tables 200] [--rate 1000] ...``.

Mixed methods and merge modes (one table in five PG_LOGICAL, the rest CHANGELOG; one in
four IMMEDIATE, the rest DEFERRED), one ``gluon service`` process (``--parallel``), and
the figures issue 33 sets goals for:

* **idle cycle**: with no writes, the time one pass of extractions over every table
  takes (the extraction interval is short, so the service is always busy: the cycle is
  the tables over the runs per second it achieves);
* **repository rows per minute** while idle (extraction runs recorded);
* **connections** the service holds (client backends of the bench database, less the
  bench's own: its writer and sampler are named, its enabling commands' dropped engines
  are collected first; autovacuum workers are listed apart), sampled every second, idle
  and under load;
* **resident memory** of the service (``VmRSS``) over time;
* **backlog gauge**: scrapes of ``/metrics`` in which some table had no
  ``gluon_table_backlog_changes`` sample;
* **lag** p50/p95/p99 under a steady writer spread over all tables: a change's lag is
  the finish of the run that shipped it minus its write time (DEFERRED tables: their
  delta table names the run of each change);
* **status report**: the time ``offload_status_report`` takes over every table.

Prints one JSON object and writes it to ``--out``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import BIN, ROOT, save_json, service_home
from bench.service import change_lags, create_tables

WRITE_BATCH = 5
SAMPLE_SECONDS = 1.0


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "OFFLOAD_HOME": str(home), "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}


def method_of(number: int) -> str:
    return "PG_LOGICAL" if number % 5 == 4 else "CHANGELOG"


def merge_mode_of(number: int) -> str:
    return "IMMEDIATE" if number % 4 == 3 else "DEFERRED"


BENCH_APPLICATION = "gluon-bench"
"""The bench's own connections (writer, sampler): not counted as the service's."""
_BENCH_CONNECTIONS = {"application_name": BENCH_APPLICATION}


def _prepare(url: str, home: Path, names: list[str], slot: str = "table") -> None:
    create_tables(url, names)
    os.environ["OFFLOAD_HOME"] = str(home)
    from support.cli import run_cli  # in this process: one start-up for every table

    for number, name in enumerate(names):
        method = method_of(number)
        scope = [f"--incremental-pg-logical-slot={slot}"] if method == "PG_LOGICAL" else []
        result = run_cli(
            "offload",
            "-t",
            f"app.{name}",
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
            f"--incremental-merge-mode={merge_mode_of(number)}",
            *scope,
        )
        if result.exit_code:
            raise RuntimeError(f"enabling app.{name} failed: {result.stderr}")


class _Writer(threading.Thread):
    """Inserts ``rate`` rows a second, spread round-robin over the tables, until halted."""

    def __init__(self, url: str, names: list[str], rate: float) -> None:
        super().__init__(daemon=True)
        import sqlalchemy as sa

        self.engine = sa.create_engine(url, pool_size=1, connect_args=_BENCH_CONNECTIONS)
        self.names, self.rate = names, rate
        self.halt = threading.Event()
        self.written = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        import sqlalchemy as sa

        started = time.monotonic()
        try:
            while not self.halt.is_set():
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
                time.sleep(0.01)
        except BaseException as exc:
            self.failure = exc
        finally:
            self.engine.dispose()


class _Sampler(threading.Thread):
    """Every second: the service's connections, its resident memory and a metrics scrape."""

    def __init__(self, url: str, pid: int, port: int, tables: int) -> None:
        super().__init__(daemon=True)
        import sqlalchemy as sa

        self.engine = sa.create_engine(url, pool_size=1, connect_args=_BENCH_CONNECTIONS)
        self.pid, self.port, self.tables = pid, port, tables
        self.halt = threading.Event()
        self.samples: list[dict[str, Any]] = []

    def run(self) -> None:
        import sqlalchemy as sa

        started = time.monotonic()
        with self.engine.connect() as db:
            while not self.halt.wait(SAMPLE_SECONDS):
                by_type: dict[str, int] = dict(
                    db.execute(
                        sa.text(
                            "SELECT backend_type, COUNT(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() "
                            "AND coalesce(application_name, '') <> :bench GROUP BY backend_type"
                        ),
                        {"bench": BENCH_APPLICATION},
                    ).all()
                )
                db.rollback()
                # Autovacuum workers and walsenders are the server's, not the service's.
                connections = by_type.pop("client backend", 0)
                self.samples.append(
                    {
                        "t": round(time.monotonic() - started, 1),
                        "connections": int(connections),
                        "server_backends": {str(k): int(v) for k, v in by_type.items()},
                        "rss_mb": _rss_mb(self.pid),
                        "backlog_samples": _backlog_samples(self.port),
                    }
                )
        self.engine.dispose()


def _rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return round(int(found.group(1)) / 1024, 1) if found else None


def _cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` (all its threads) so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _slot_decoding(url: str) -> dict[str, int]:
    """What the server's logical decoding sent the output plugins of every slot, summed over
    the slots and every decoding (``pg_stat_replication_slots``, PostgreSQL 14+): N readers
    decoding the same WAL count it N times. Read once the service's sessions ended (each
    reports its counts at exit at the latest)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, pool_size=1, connect_args=_BENCH_CONNECTIONS)
    try:
        with engine.connect() as db:
            txns, size = db.execute(
                sa.text(
                    "SELECT coalesce(sum(total_txns), 0), coalesce(sum(total_bytes), 0) "
                    "FROM pg_stat_replication_slots"
                )
            ).one()
    finally:
        engine.dispose()
    return {"transactions": int(txns), "bytes": int(size)}


def _backlog_samples(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    return sum(1 for line in text.splitlines() if line.startswith("gluon_table_backlog_changes{"))


def _run_lines(output: Path) -> int:
    try:
        return sum(1 for line in output.read_text().splitlines() if line.startswith("run: "))
    except OSError:
        return 0


def _repository_runs(home: Path) -> int:
    import sqlite3

    with sqlite3.connect(home / "repo" / "gluon.db") as db:
        # A run under way has a row until it ends (then discarded if it shipped nothing).
        query = "SELECT COUNT(*) FROM extraction_runs WHERE status <> 'running'"
        return int(db.execute(query).fetchone()[0])


def _most_of_each(counts: list[dict[str, int]]) -> dict[str, int]:
    """The highest count of each backend type over the samples."""
    most: dict[str, int] = {}
    for sample in counts:
        for kind, count in sample.items():
            most[kind] = max(most.get(kind, 0), count)
    return most


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[int(fraction * (len(ordered) - 1))], 2)


def _gaps(scrapes: list[int], tables: int) -> int:
    """Scrapes short of a table's backlog sample, after the first that had them all."""
    first = next((number for number, count in enumerate(scrapes) if count >= tables), None)
    return 0 if first is None else sum(1 for count in scrapes[first:] if count < tables)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure(
    url: str, home: Path, names: list[str], arguments: argparse.Namespace
) -> dict[str, Any]:
    config = home / "conf" / "tables.toml"
    lines = ["[defaults]", f'extraction_interval = "{arguments.interval}s"', ""]
    lines += [f'[tables."app.{name}"]' for name in names]
    config.write_text("\n".join(lines) + "\n")
    port = _free_port()
    output = home / "service.out"
    service = subprocess.Popen(
        [
            str(BIN / "gluon"),
            "service",
            "--config",
            str(config),
            "--parallel",
            str(arguments.parallel),
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ],
        env=_env(home),
        stdout=output.open("wb"),
        stderr=subprocess.STDOUT,
    )
    gc.collect()  # the enabling commands' dropped engines close their connections (not ours)
    sampler = _Sampler(url, service.pid, port, len(names))
    sampler.start()
    try:
        # Idle: the first pass ships the enablement's leftovers, if any; measure after it.
        give_up = time.monotonic() + 600
        while _run_lines(output) < len(names) and time.monotonic() < give_up:
            time.sleep(0.5)
        runs_before, rows_before, idle_started = (
            _run_lines(output),
            _repository_runs(home),
            time.monotonic(),
        )
        time.sleep(arguments.idle_seconds)
        idle_seconds = time.monotonic() - idle_started
        idle_runs = _run_lines(output) - runs_before
        idle_rows = _repository_runs(home) - rows_before
        idle_samples = len(sampler.samples)

        writer = _Writer(url, names, arguments.rate)
        load_cpu, load_started = _cpu_seconds(service.pid), time.monotonic()
        writer.start()
        time.sleep(arguments.seconds)
        writer.halt.set()
        writer.join()
        if writer.failure is not None:
            raise writer.failure
        # Until every DEFERRED table's delta table holds what was written to it.
        deferred = [
            name for number, name in enumerate(names) if merge_mode_of(number) != "IMMEDIATE"
        ]
        expected = writer.written * len(deferred) // len(names) * 0.99
        give_up = time.monotonic() + 600
        lags: list[float] = []
        while time.monotonic() < give_up:
            lags = change_lags(home, deferred)
            if len(lags) >= expected:
                break
            time.sleep(2)
        load_cpu_end, load_seconds = _cpu_seconds(service.pid), time.monotonic() - load_started
    finally:
        sampler.halt.set()
        sampler.join()
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=600)
    decoded = _slot_decoding(url)
    started = time.monotonic()
    profile = (
        ["-m", "cProfile", "-o", str(arguments.profile_report)] if arguments.profile_report else []
    )
    report = subprocess.run(
        [sys.executable, *profile, str(BIN / "offload_status_report")],
        env=_env(home),
        capture_output=True,
        text=True,
        check=False,
    )
    report_seconds = time.monotonic() - started
    idle, loaded = sampler.samples[:idle_samples], sampler.samples[idle_samples:]
    rss = [sample["rss_mb"] for sample in sampler.samples if sample["rss_mb"] is not None]
    scrapes = [s["backlog_samples"] for s in sampler.samples if s["backlog_samples"] is not None]
    failed = sum(1 for line in output.read_text().splitlines() if "outcome=failed" in line)
    return {
        "tables": len(names),
        "parallel": arguments.parallel,
        "interval_s": arguments.interval,
        "idle_cycle_s": round(len(names) * idle_seconds / idle_runs, 2) if idle_runs else None,
        "idle_repository_rows_per_minute": round(idle_rows * 60 / idle_seconds, 1),
        "connections_idle_max": max((s["connections"] for s in idle), default=None),
        "connections_load_max": max((s["connections"] for s in loaded), default=None),
        "server_backends_max": _most_of_each([s["server_backends"] for s in sampler.samples]),
        "rss_mb_first_last_max": [rss[0], rss[-1], max(rss)] if rss else None,
        "rss_mb_over_time": rss[:: max(len(rss) // 20, 1)],
        "scrapes": len(scrapes),
        # From the first scrape with every table's backlog (the lag reader's first round).
        "scrapes_missing_a_backlog_sample": _gaps(scrapes, len(names)),
        "written": writer.written,
        "rate": arguments.rate,
        "lag_p50_s": _percentile(lags, 0.50),
        "lag_p95_s": _percentile(lags, 0.95),
        "lag_p99_s": _percentile(lags, 0.99),
        "failed_runs": failed,
        # Every slot's decoded transactions and bytes, over the whole run (enable included).
        "slots_decoded_transactions": decoded["transactions"],
        "slots_decoded_mb": round(decoded["bytes"] / 2**20, 1),
        # The service's CPU (all threads) from the writer's start to the lake holding it all.
        "load_wall_s": round(load_seconds, 1),
        "load_service_cpu_s": (
            None if load_cpu is None or load_cpu_end is None else round(load_cpu_end - load_cpu, 1)
        ),
        "status_report_s": round(report_seconds, 2),
        "status_report_exit": report.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=20, help="tables (issue 33: 200)")
    parser.add_argument("--rate", type=float, default=200.0, help="inserts per second, all tables")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the writer writes")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle measurement (s)")
    parser.add_argument("--interval", type=float, default=1.0, help="extraction interval (s)")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument(
        "--pg-logical-slot",
        choices=("table", "database"),
        default="table",
        help="the PG_LOGICAL tables' slots: one each, or their database's shared slot",
    )
    parser.add_argument(
        "--profile-report", type=Path, default=None, help="cProfile offload_status_report here"
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-service")
    arguments = parser.parse_args()

    with service_home("bench_service_scale") as (url, home):
        names = [f"s{number:03d}" for number in range(arguments.tables)]
        began = time.monotonic()
        _prepare(url, home, names, arguments.pg_logical_slot)
        print(f"prepared {len(names)} tables in {time.monotonic() - began:.0f} s", flush=True)
        figure = measure(url, home, names, arguments)
    print(json.dumps(figure), flush=True)
    save_json(arguments.out, "service-scale.json", figure)


if __name__ == "__main__":
    main()
