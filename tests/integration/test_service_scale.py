"""``gluon service`` over 30 tables of one PostgreSQL database (CHANGELOG and PG_LOGICAL,
DEFERRED and IMMEDIATE), run in this process so what it sends can be seen:

* idle, its checks leave no extraction run in the repository and describe no table's
  columns again (PG_LOGICAL tables are still run: they ask the catalog version only);
  a run still under way has a row until it ends (discarded then, as it shipped nothing),
  so the idle count leaves those out and checks afterwards that they are gone;
* the connections it holds stay within the bound docs/operations.md gives;
* status still shows when an idle table was last checked (``service_checks``);
* under a writer spread over the tables, every change ends in the lake, counted once
  in the repository and in ``gluon_service_changes_shipped_total`` (no slot race fails a
  run), and every scrape has a backlog sample for every table.

Every wait waits for a behaviour with a generous limit; nothing asserts a duration.
"""

from __future__ import annotations

import gc
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows
from support.service import (
    enable_service_tables,
    free_port,
    metric_samples,
    observer_engine,
    service_connections,
    shipped_metric,
)
from support.waiting import wait_until

from gluon.config import load_settings
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import EXTRACTION_RUNNING, ExtractionRun
from gluon.service.config import load_config
from gluon.service.metrics import ServiceMetrics
from gluon.service.runner import Service, ServiceTotals

TABLES = [f"s{number:02d}" for number in range(30)]
QUIET = TABLES[-1]
"""Never written to: only checked, so its most recent extraction is the service's last check."""
WRITTEN = TABLES[:-1]
ROWS = 10
PARALLEL = 4
CONNECTION_BOUND = PARALLEL + 3
"""docs/operations.md, "Connections": one a worker thread, one for the lag reader, two Arrow
connections shared by the threads."""
LIMIT_SECONDS = 240.0


def method_of(number: int) -> str:
    return "PG_LOGICAL" if number % 5 == 4 else "CHANGELOG"


def merge_mode_of(number: int) -> str:
    return "IMMEDIATE" if number % 4 == 3 else "DEFERRED"


@pytest.fixture
def observer(pg_url: str) -> Iterator[sa.Engine]:
    yield from observer_engine(pg_url)


@pytest.fixture
def tables(
    pg_url: str, offload_home: Path, observer: sa.Engine, run_cli: Callable[..., Any]
) -> Path:
    options = {
        name: [
            f"--incremental-extraction-method={method_of(number)}",
            f"--incremental-merge-mode={merge_mode_of(number)}",
        ]
        for number, name in enumerate(TABLES)
    }
    return enable_service_tables(pg_url, offload_home, observer, run_cli, options, rows=ROWS)


class Statements:
    """Every statement SQLAlchemy sends in this process, counted by what it reads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.described: list[str] = []
        """The tables whose columns were read, in order (named in a failure)."""
        self.catalog_versions = 0

    def __call__(self, *args: Any) -> None:
        statement, parameters = str(args[2]), args[3]
        with self.lock:
            if "format_type(a.atttypid, a.atttypmod) AS formatted_type" in statement:
                table = parameters.get("table") if isinstance(parameters, dict) else parameters
                self.described.append(str(table))
            self.catalog_versions += "AS version" in statement and "pg_attribute" in statement


class EndedRuns:
    """The tables whose runs the service announced as ended (its ``announce`` lines)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tables: set[str] = set()

    def __call__(self, line: str) -> None:
        found = re.search(r"\btable=(\S+) action=extraction\b", line)
        if found:
            with self.lock:
                self.tables.add(found.group(1))

    def every_table_ran(self) -> bool:
        with self.lock:
            return self.tables >= {f"APP.{name.upper()}" for name in TABLES}


def all_runs(repo: Repository) -> list[ExtractionRun]:
    return [
        run for name in TABLES for run in repo.incremental.extraction_runs(f"APP.{name.upper()}")
    ]


def backlog_tables(port: int) -> set[str]:
    samples = metric_samples(port, "gluon_table_backlog_changes")
    return {sample.labels["table"] for sample in samples}


def write_changes(observer: sa.Engine, count: int, changes: list[int]) -> None:
    """``count`` transactions spread over every table: an insert, an update, or an insert
    and a delete; appends the number of row changes they made to ``changes``."""
    rng = random.Random(33)
    made = 0
    next_key = {name: ROWS + 1 for name in TABLES}
    for number in range(count):
        name = WRITTEN[number % len(WRITTEN)]
        kind = rng.random()
        with observer.begin() as db:
            if kind < 0.5:
                db.execute(sa.text(f"INSERT INTO app.{name} VALUES (:k, 0)"), {"k": next_key[name]})
                next_key[name] += 1
                made += 1
            elif kind < 0.8:
                db.execute(
                    sa.text(f"UPDATE app.{name} SET v = v + 1 WHERE id = :k"),
                    {"k": rng.randrange(1, ROWS + 1)},
                )
                made += 1
            else:
                db.execute(sa.text(f"INSERT INTO app.{name} VALUES (:k, 0)"), {"k": next_key[name]})
                db.execute(sa.text(f"DELETE FROM app.{name} WHERE id = :k"), {"k": next_key[name]})
                next_key[name] += 1
                made += 2
        if number % 50 == 49:
            time.sleep(0.2)
    changes.append(made)


def shipped_in_repository(repo: Repository) -> int:
    return sum(
        repo.incremental.extraction_totals(f"APP.{name.upper()}").changes_shipped for name in TABLES
    )


def test_the_service_over_thirty_tables_is_quiet_when_idle_and_exact_under_load(
    tables: Path, observer: sa.Engine
) -> None:
    settings = load_settings()
    repo = Repository(settings.repo_url)
    started = now()
    runs_before = len(all_runs(repo))
    gc.collect()  # the enabling commands' engines, dropped, close their connections
    baseline = service_connections(observer)
    statements = Statements()
    sa.event.listen(sa.Engine, "before_cursor_execute", statements)
    metrics = ServiceMetrics()
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    ended_runs = EndedRuns()
    service = Service(
        settings, load_config(tables), parallel=PARALLEL, metrics=metrics, announce=ended_runs
    )
    stop = threading.Event()
    ended: list[ServiceTotals] = []
    thread = threading.Thread(target=lambda: ended.append(service.run(stop)), daemon=True)
    peak = 0
    problems: list[str] = []
    try:
        thread.start()
        # Every table's first run (a full one: it describes the table) has ended: a count of
        # runs is not enough, a slow first run can still be under way after 30 others ended.
        wait_until("a first pass over every table", ended_runs.every_table_ran)
        described_in_first_pass = len(statements.described)
        versions_after_first_pass = statements.catalog_versions
        runs_after_first_pass = service.totals.runs
        wait_until(
            "three more passes",
            lambda: service.totals.runs >= runs_after_first_pass + 3 * len(TABLES),
        )
        peak = max(peak, service_connections(observer) - baseline)

        # Idle: no row per check, no table described again (PG_LOGICAL tables were run).
        # A run under way (a PG_LOGICAL table's, at any moment) is not left: it is checked
        # below to be gone once it ended.
        idle_runs = all_runs(repo)
        under_way = {run.id for run in idle_runs if run.status == EXTRACTION_RUNNING}
        left = [
            (run.table_key, run.status, run.rows_read)
            for run in idle_runs
            if run.status != EXTRACTION_RUNNING
        ]
        if len(left) != runs_before:
            problems.append(f"idle checks left {len(left) - runs_before} extraction runs: {left}")
        described_again = statements.described[described_in_first_pass:]
        if described_again:
            problems.append(f"idle: tables described again: {described_again}")
        if statements.catalog_versions <= versions_after_first_pass:
            problems.append("idle: no catalog version read (no PG_LOGICAL table was run)")

        # Load: every change counted once, every scrape with every table's backlog.
        wait_until("a backlog sample of every table", lambda: len(backlog_tables(port)) == 30)
        written: list[int] = []
        writer = threading.Thread(target=write_changes, args=(observer, 600, written), daemon=True)
        writer.start()
        scrapes_missing = 0
        while writer.is_alive():
            scrapes_missing += len(backlog_tables(port)) < len(TABLES)
            peak = max(peak, service_connections(observer) - baseline)
            time.sleep(0.5)
        writer.join()
        (changes,) = written
        wait_until("every change shipped", lambda: shipped_in_repository(repo) >= changes)
        counted = {"repository": shipped_in_repository(repo), "metric": shipped_metric(port)}
        for where, figure in counted.items():
            if figure != changes:
                problems.append(f"{changes} changes written, {figure} counted in the {where}")
        if scrapes_missing:
            problems.append(f"{scrapes_missing} scrapes had no backlog sample of some table")
        if service.totals.failures:
            problems.append(f"{service.totals.failures} runs failed")
    finally:
        stop.set()
        thread.join(timeout=LIMIT_SECONDS)
        sa.event.remove(sa.Engine, "before_cursor_execute", statements)
        metrics.close()
    kept = [run.id for run in all_runs(repo) if run.id in under_way]
    if kept:
        problems.append(f"idle runs under way at the count were kept once ended: {kept}")
    if peak > CONNECTION_BOUND:
        problems.append(f"the service held {peak} connections (bound {CONNECTION_BOUND})")
    # The quiet table: no run row, and status's most recent extraction is the last check.
    quiet = repo.incremental.extraction_totals(f"APP.{QUIET.upper()}")
    if quiet.runs or quiet.last_success_at is None or quiet.last_success_at < started:
        problems.append(f"{QUIET}: {quiet.runs} runs, last extraction {quiet.last_success_at}")
    assert not problems
    for name in TABLES:
        with observer.connect() as db:
            source = sorted(
                tuple(row) for row in db.execute(sa.text(f"SELECT id, v FROM app.{name}"))
            )
        lake = sorted((row["id"], row["v"]) for row in lake_rows(f"SELECT id, v FROM app.{name}"))
        assert lake == source, f"app.{name} differs from its source"
