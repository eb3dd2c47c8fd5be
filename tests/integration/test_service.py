"""``gluon service`` on PostgreSQL: 20 tables, a concurrent writer, compactions inside a
window, a table held by a cron-like lock, SIGTERM, a restart; afterwards every user view
equals its source and no gl_seq is in a delta table twice. Metrics are scraped from the
port over HTTP and parsed with prometheus_client's parser.

The service runs as a child process (as systemd would run it). Every wait below waits
for a behaviour (a completed compaction, an empty changelog) with a generous limit;
nothing asserts how long anything took.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from support.incremental import lake_rows
from support.service import free_port
from support.waiting import wait_until

from gluon.config import load_settings
from gluon.locks import extraction_lock
from gluon.repo import Repository

TABLES = [f"t{number:02d}" for number in range(20)]
WINDOWED = TABLES[:3]
"""Compacted inside a window that opens while the service runs."""
EVERY = TABLES[3:5]
"""Compacted every 20 seconds, at any time."""
LOCKED = TABLES[19]
"""Held by an extraction lock of this process for a while (as a cron command would)."""
METHODS = ["FULL", "IN_PLACE", "PARTITION_WISE_FULL"]
ROWS = 30
LIMIT_SECONDS = 300.0


class Writer(threading.Thread):
    """Inserts, updates and deletes across the tables until stopped."""

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.halt = threading.Event()
        self.statements = 0
        self.failure: BaseException | None = None
        self.next_key = ROWS + 1
        self.rng = random.Random(16)

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                with self.engine.begin() as db:
                    for _ in range(5):
                        self._one(db)
                time.sleep(0.05)
        except BaseException as exc:  # surfaced by the test
            self.failure = exc

    def _one(self, db: sa.Connection) -> None:
        name = f"app.{self.rng.choice(TABLES)}"
        kind = self.rng.random()
        if kind < 0.5:
            db.execute(
                sa.text(f"INSERT INTO {name} VALUES (:k, :v, 'new')"),
                {"k": self.next_key, "v": self.rng.randrange(1000)},
            )
            self.next_key += 1
        elif kind < 0.85:
            db.execute(
                sa.text(f"UPDATE {name} SET v = :v, note = 'upd' WHERE id = :k"),
                {"k": self.rng.randrange(1, self.next_key), "v": self.rng.randrange(1000)},
            )
        else:
            db.execute(
                sa.text(f"DELETE FROM {name} WHERE id = :k"),
                {"k": self.rng.randrange(1, self.next_key)},
            )
        self.statements += 1


@pytest.fixture
def source(pg_url: str, offload_home: Path, run_cli: Callable[..., object]) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        for name in TABLES:
            db.execute(
                sa.text(f"CREATE TABLE app.{name} (id INTEGER PRIMARY KEY, v INTEGER, note TEXT)")
            )
            db.execute(
                sa.text(
                    f"INSERT INTO app.{name} SELECT g, g, 'row' FROM generate_series(1, {ROWS}) g"
                )
            )
    (offload_home / "conf").mkdir()
    (offload_home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={pg_url}\n")
    for name in TABLES:
        result = run_cli(
            "offload",
            "-t",
            f"app.{name}",
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        )
        assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    yield engine
    engine.dispose()


def tables_file(home: Path, window_start: dt.datetime) -> Path:
    window = f"{window_start:%H:%M}-{window_start + dt.timedelta(minutes=10):%H:%M}"
    lines = ["[service]", "parallel = 3", "", "[defaults]", 'extraction_interval = "2s"', ""]
    for number, name in enumerate(TABLES):
        lines.append(f'[tables."app.{name}"]')
        if name in WINDOWED + EVERY:
            lines.append(f'[tables."app.{name}".compaction]')
            lines.append(f'window = "{window}"' if name in WINDOWED else 'every = "20s"')
            lines += [
                f'method = "{METHODS[number % len(METHODS)]}"',
                "wait_minutes = 0",
                'retry_interval = "3s"',
            ]
        lines.append("")
    path = home / "conf" / "tables.toml"
    path.write_text("\n".join(lines))
    return path


def start_service(config: Path, port: int, output: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gluon.cli.app import main; main()",
            "service",
            "--config",
            str(config),
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ],
        stdout=output.open("wb"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ),
    )


def stop_service(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=LIMIT_SECONDS)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def compacted(key: str) -> bool:
    return Repository(load_settings().repo_url).compaction.last_completed(key) is not None


def compaction_starts(key: str) -> list[dt.datetime]:
    runs = Repository(load_settings().repo_url).compaction.runs(key)
    return [run.started_at for run in runs if run.status == "success"]


def changelog_rows(engine: sa.Engine) -> int:
    with engine.connect() as db:
        return sum(
            int(db.execute(sa.text(f"SELECT COUNT(*) FROM app_h.{name}_log")).scalar_one())
            for name in TABLES
        )


def run_lines(output: Path) -> list[str]:
    return [line for line in output.read_text().splitlines() if line.startswith("run: ")]


def test_the_service_keeps_twenty_tables_in_step_through_a_stop_and_a_restart(
    source: sa.Engine, offload_home: Path
) -> None:
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    # The window opens at the next whole minute, at least 40 s away: the service runs
    # extractions only before it, then compacts inside it.
    window_start = (now + dt.timedelta(seconds=100)).replace(second=0, microsecond=0)
    config = tables_file(offload_home, window_start)
    port = free_port()
    first_output = offload_home / "service-1.out"
    writer = Writer(source)
    writer.start()
    settings = load_settings()
    with extraction_lock(settings, f"APP.{LOCKED.upper()}"):
        service = start_service(config, port, first_output)
        try:
            wait_until(
                "a run of the locked table to be skipped",
                lambda: any(
                    f"table=APP.{LOCKED.upper()} action=extraction outcome=skipped_locked" in line
                    for line in run_lines(first_output)
                ),
            )
        except BaseException:
            service.kill()
            raise
    try:
        assert not any(compacted(f"APP.{name.upper()}") for name in WINDOWED), (
            "a windowed compaction ran before its window opened"
        )
        for name in WINDOWED + EVERY:
            wait_until(f"a compaction of {name}", partial(compacted, f"APP.{name.upper()}"))
        for name in WINDOWED:
            starts = compaction_starts(f"APP.{name.upper()}")
            assert starts and min(starts) >= window_start, (
                f"app.{name} compacted at {starts}, before its window opened at {window_start}"
            )
        samples = scrape(port)
        stopped = stop_service(service)
    except BaseException:
        service.kill()
        raise
    first_log = first_output.read_text()
    assert stopped == 0, first_log
    assert "SIGTERM: stopping" in first_log
    assert re.search(r"stopped after \d+ runs \(\d+ failed", first_log), first_log
    assert writer.is_alive() and writer.failure is None

    # Metrics, scraped with a real HTTP client while it ran.
    for name in TABLES:
        key = f"APP.{name.upper()}"
        assert (
            value(
                samples,
                "gluon_service_runs_total",
                table=key,
                action="extraction",
                outcome="success",
            )
            >= 1
        )
        assert ("gluon_table_backlog_changes", (("table", key),)) in samples
        # The writer keeps changes pending: their age is known (status's lag figures).
        assert ("gluon_table_oldest_pending_change_age_seconds", (("table", key),)) in samples
        assert (
            "gluon_service_failures_total",
            (("action", "extraction"), ("table", key)),
        ) in samples
    assert (
        value(
            samples,
            "gluon_service_runs_total",
            table=f"APP.{LOCKED.upper()}",
            action="extraction",
            outcome="skipped_locked",
        )
        >= 1
    )
    assert (
        sum(v for (name, _), v in samples.items() if name == "gluon_service_changes_shipped_total")
        > 0
    )
    for name in WINDOWED + EVERY:
        assert (
            value(
                samples,
                "gluon_service_runs_total",
                table=f"APP.{name.upper()}",
                action="compaction",
                outcome="success",
            )
            >= 1
        )

    # A restart carries on from the repository; the writer stops, the service catches up.
    second_output = offload_home / "service-2.out"
    service = start_service(config, port, second_output)
    try:
        time.sleep(5)  # the writer keeps writing while the restarted service runs
        writer.halt.set()
        writer.join(timeout=60)
        assert writer.failure is None, writer.failure
        wait_until("the changelogs to empty", lambda: changelog_rows(source) == 0)
        stopped = stop_service(service)
    except BaseException:
        service.kill()
        raise
    assert stopped == 0, second_output.read_text()
    assert writer.statements > 0
    failures = [
        line
        for line in run_lines(first_output) + run_lines(second_output)
        if "outcome=failed" in line
    ]
    assert failures == []

    for name in TABLES:
        with source.connect() as db:
            expected = sorted(
                tuple(row) for row in db.execute(sa.text(f"SELECT id, v, note FROM app.{name}"))
            )
        shown = sorted(
            (row["id"], row["v"], row["note"])
            for row in lake_rows(f"SELECT id, v, note FROM app.{name}")
        )
        assert shown == expected, f"the user view of app.{name} differs from its source"
        twice = lake_rows(
            f"SELECT gl_seq, COUNT(*) AS n FROM app_load.{name}_changes "
            "GROUP BY gl_seq HAVING COUNT(*) > 1"
        )
        assert twice == [], f"gl_seq shipped twice in app.{name}: {twice}"
