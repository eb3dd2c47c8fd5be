"""``gluon service --parallel 2`` over tables of one PostgreSQL database: six in the
database's shared slot, one with its own slot, five CHANGELOG (DEFERRED and IMMEDIATE),
run in this process (issue 33 item 4):

* the shared slot's members are extracted in passes from one decoding each (some member
  replayed another's decoding), and every change written ends in the lake once, counted
  once (repository and ``gluon_service_changes_shipped_total``), with no failed run;
* the PostgreSQL client backends the service holds never exceed the bound
  docs/operations.md gives: ``--parallel`` + 3 (one SQLAlchemy connection a worker and
  one for the lag reader, two Arrow connections shared by the threads).

Every wait waits for a behaviour with a generous limit; nothing asserts a duration.
"""

from __future__ import annotations

import gc
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
    observer_engine,
    service_connections,
    shipped_metric,
)
from support.waiting import wait_until

from gluon.config import load_settings
from gluon.extract import shared_pass
from gluon.repo import Repository
from gluon.service.config import load_config
from gluon.service.metrics import ServiceMetrics
from gluon.service.runner import Service, ServiceTotals

PARALLEL = 2
CONNECTION_BOUND = PARALLEL + 3
"""docs/operations.md, "Connections"."""
SHARED = [f"m{number}" for number in range(6)]
TABLES = {
    **{name: ["--incremental-pg-logical-slot=database"] for name in SHARED},
    "own_slot": [],
    **{f"c{number}": [] for number in range(5)},
}
IMMEDIATE = {"m1", "m4", "c2"}
LIMIT_SECONDS = 240.0


@pytest.fixture
def observer(pg_url: str) -> Iterator[sa.Engine]:
    yield from observer_engine(pg_url)


@pytest.fixture
def tables(
    pg_url: str, offload_home: Path, observer: sa.Engine, run_cli: Callable[..., Any]
) -> Path:
    options = {
        name: [
            f"--incremental-merge-mode={'IMMEDIATE' if name in IMMEDIATE else 'DEFERRED'}",
            "--incremental-extraction-method="
            + ("CHANGELOG" if name.startswith("c") else "PG_LOGICAL"),
            *extra,
        ]
        for name, extra in TABLES.items()
    }
    return enable_service_tables(pg_url, offload_home, observer, run_cli, options, rows=5)


def write_changes(observer: sa.Engine, rounds: int) -> int:
    """Each round: one transaction per table (an insert, an update of a copied row);
    returns the row changes made."""
    made = 0
    for round_ in range(rounds):
        for name in TABLES:
            with observer.begin() as db:
                db.execute(sa.text(f"INSERT INTO app.{name} VALUES (:k, 0)"), {"k": 100 + round_})
                db.execute(sa.text(f"UPDATE app.{name} SET v = v + 1 WHERE id = 1"))
            made += 2
        time.sleep(0.1)
    return made


def shipped_in_repository(repo: Repository) -> int:
    return sum(
        repo.incremental.extraction_totals(f"APP.{name.upper()}").changes_shipped for name in TABLES
    )


def test_shared_slot_members_ship_from_one_decoding_within_the_connection_bound(
    tables: Path, observer: sa.Engine
) -> None:
    settings = load_settings()
    repo = Repository(settings.repo_url)
    gc.collect()  # the enabling commands' engines, dropped, close their connections
    baseline = service_connections(observer)
    replayed_before = shared_pass.totals()["replayed"]
    metrics = ServiceMetrics()
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    service = Service(settings, load_config(tables), parallel=PARALLEL, metrics=metrics)
    stop = threading.Event()
    ended: list[ServiceTotals] = []
    thread = threading.Thread(target=lambda: ended.append(service.run(stop)), daemon=True)
    peak = 0
    problems: list[str] = []
    try:
        thread.start()
        wait_until("two passes over every table", lambda: service.totals.runs >= 2 * len(TABLES))
        written: list[int] = []
        writer = threading.Thread(
            target=lambda: written.append(write_changes(observer, 40)), daemon=True
        )
        writer.start()
        while writer.is_alive():
            peak = max(peak, service_connections(observer) - baseline)
            time.sleep(0.2)
        writer.join()
        (changes,) = written

        def all_shipped() -> bool:
            nonlocal peak
            peak = max(peak, service_connections(observer) - baseline)
            return shipped_in_repository(repo) >= changes

        wait_until("every change shipped", all_shipped)
        counted = {"repository": shipped_in_repository(repo), "metric": shipped_metric(port)}
        for where, figure in counted.items():
            if figure != changes:
                problems.append(f"{changes} changes written, {figure} counted in the {where}")
        if service.totals.failures:
            problems.append(f"{service.totals.failures} runs failed")
    finally:
        stop.set()
        thread.join(timeout=LIMIT_SECONDS)
        metrics.close()
    if shared_pass.totals()["replayed"] <= replayed_before:
        problems.append("no member of the shared slot replayed another's decoding")
    if peak > CONNECTION_BOUND:
        problems.append(f"the service held {peak} connections (bound {CONNECTION_BOUND})")
    assert not problems
    for name in TABLES:
        with observer.connect() as db:
            source = sorted(
                tuple(row) for row in db.execute(sa.text(f"SELECT id, v FROM app.{name}"))
            )
        lake = sorted((row["id"], row["v"]) for row in lake_rows(f"SELECT id, v FROM app.{name}"))
        assert lake == source, f"app.{name} differs from its source"
