"""The service's extractions of a busy table (one whose last run shipped changes) skip what
a run with changes known to wait does not need: the count before the run, and the capture
check, which a busy table gets every ``FULL_RUN_SECONDS`` (as an idle one does), not every
run. The changes still ship exactly; a capture that stopped is still reported."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows

from gluon.config import load_settings
from gluon.service import runner
from gluon.service.config import load_config
from gluon.service.runner import Outcome, Service
from gluon.service.schedule import Action

TABLE = "app.busy"


def _insert(url: str, first: int, count: int) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(
            sa.text(
                f"INSERT INTO {TABLE} SELECT g, g FROM "
                "generate_series(CAST(:a AS INTEGER), CAST(:b AS INTEGER)) g"
            ),
            {"a": first, "b": first + count - 1},
        )
    engine.dispose()


@pytest.fixture
def service(pg_url: str, offload_home: Path, run_cli: Callable[..., Any]) -> Service:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        db.execute(sa.text(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, v INTEGER)"))
    engine.dispose()
    (offload_home / "conf").mkdir()
    (offload_home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={pg_url}\n")
    enabled = run_cli(
        "offload",
        "-t",
        TABLE,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    config = offload_home / "conf" / "tables.toml"
    config.write_text(f'[defaults]\nextraction_interval = "1s"\n\n[tables."{TABLE}"]\n')
    return Service(load_settings(), load_config(config), parallel=1)


def _lake_ids() -> list[int]:
    return sorted(int(str(row["id"])) for row in lake_rows(f"SELECT id FROM {TABLE}"))


def _extract(service: Service) -> runner.RunReport:
    table = service.config.tables[0]
    return service._run(table, Action.EXTRACTION, dt.datetime.now(dt.UTC), threading.Event())


def test_a_busy_tables_capture_is_checked_at_its_full_runs_only(
    service: Service, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _insert(pg_url, 1, 5)
    first = _extract(service)  # a full run: columns compared, capture checked
    assert first.outcome == Outcome.SUCCESS and first.shipped == 5, first.line()

    _insert(pg_url, 6, 5)
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:  # capture stops; the five changes above wait in the changelog
        db.execute(sa.text(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER"))
    engine.dispose()
    busy = _extract(service)  # within FULL_RUN_SECONDS of the full run: not checked
    assert busy.outcome == Outcome.SUCCESS and busy.shipped == 5, busy.line()

    monkeypatch.setattr(runner, "FULL_RUN_SECONDS", 0.0)
    service._full_run_at.clear()  # the next full run is due now
    full = _extract(service)
    assert full.outcome == Outcome.FAILED, full.line()
    assert "trigger" in full.detail and "disabled" in full.detail, full.detail
    assert _lake_ids() == list(range(1, 11))


def test_a_run_that_ships_then_finds_capture_stopped_counts_what_it_shipped(
    service: Service, pg_url: str
) -> None:
    """The run fails (capture stopped), but its changes are in the lake: the service's totals
    and ``gluon_service_changes_shipped_total`` count them (they counted 0)."""
    _insert(pg_url, 1, 4)
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text(f"ALTER TABLE {TABLE} DISABLE TRIGGER USER"))
    engine.dispose()
    report = _extract(service)
    assert report.outcome == Outcome.FAILED and "disabled" in report.detail, report.line()
    assert report.shipped == 4, report.line()
    assert _lake_ids() == [1, 2, 3, 4]
