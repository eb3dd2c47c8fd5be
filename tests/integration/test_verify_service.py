"""The service verifies a table on the schedule its tables file declares (real SQLite
source, Sail, Delta tables; the service runs in this process, as ``gluon service`` runs
it): the result is recorded, shown by status and counted in the metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.incremental import SEED, enable, sqlite_source, workload_for
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository
from gluon.service.config import load_config
from gluon.service.metrics import ServiceMetrics
from gluon.service.runner import Service

LIMIT_SECONDS = 120.0


def test_the_service_verifies_a_table_on_its_schedule_and_records_the_result(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload_for(source, "CHANGELOG", SEED).create(rows=8)
    enable(run_cli, source, "CHANGELOG")
    repo = Repository(load_settings().repo_url)
    record = repo.get_table("MAIN.ITEMS")
    assert record is not None
    config = tmp_path / "tables.toml"
    config.write_text(
        '[tables."main.items"]\nextraction_interval = "1s"\n'
        '[tables."main.items".verify]\nevery = "1s"\nmax_rows_per_second = 1000\n'
    )
    metrics = ServiceMetrics()
    lines: list[str] = []
    service = Service(
        load_settings(), load_config(config), parallel=2, metrics=metrics, announce=lines.append
    )
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()

    def wait_for(what: str, condition: Callable[[], bool]) -> None:
        give_up = time.monotonic() + LIMIT_SECONDS
        while not condition():
            assert thread.is_alive() and time.monotonic() < give_up, (what, lines)
            time.sleep(0.2)

    def verify_lines() -> list[str]:
        return [line for line in list(lines) if "action=verify" in line]

    try:
        wait_for("a verify", lambda: any("MAIN.ITEMS: equal, 8 rows" in x for x in verify_lines()))
        DeltaTable(record.base_path).delete("id = 3")  # a row lost from the lake
        wait_for("the lost row", lambda: any("missing in the lake" in x for x in verify_lines()))
    finally:
        stop.set()
        thread.join(timeout=LIMIT_SECONDS)
    found = next(x for x in verify_lines() if "missing in the lake" in x)
    assert "outcome=success" in found and "1 missing in the lake (keys 3)" in found, found
    latest = Repository(load_settings().repo_url).verify_runs.latest("MAIN.ITEMS")
    assert latest is not None and latest.missing_in_lake == 1
    status = run_cli("display_incremental_status", "-t", source.table)
    assert status.exit_code == 0, status.stderr
    assert "1 missing in the lake" in status.stdout
    runs = metrics.registry.get_sample_value(
        "gluon_service_runs_total",
        {"table": "MAIN.ITEMS", "action": "verify", "outcome": "success"},
    )
    assert runs is not None and runs >= 2
