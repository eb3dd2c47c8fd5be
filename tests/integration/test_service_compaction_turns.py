"""A continuous table's fold and its scheduled ``[compaction]`` take turns in the service.

Both compact the same table under its lifecycle lock; a scheduled compaction that came due
while the loop's fold ran met the lock and reported ``skipped_locked``. Now it waits for
the fold and then runs. Real SQLite source, Sail and Delta; the service's runner in this
process, the fold held at its first compaction step (``GLUON_PAUSE``) until the test
lets it go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import enable, sqlite_source
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository
from gluon.service.config import load_config
from gluon.service.runner import Outcome, RunReport, Service
from gluon.service.schedule import Action

LIMIT_SECONDS = 120.0


def _wait_until(what: str, condition: Callable[[], bool]) -> None:
    give_up = time.monotonic() + LIMIT_SECONDS
    while not condition():
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(0.2)


def test_a_scheduled_compaction_waits_for_the_fold_instead_of_skipping(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, v INTEGER)"))
    enable(run_cli, source, "CHANGELOG")
    config_path = offload_home / "tables.toml"
    config_path.write_text(
        f'[tables."{source.table}"]\n'
        "continuous = true\npoll_interval = 0.1\nfold_files = 2\n"
        f'[tables."{source.table}".compaction]\n'
        'window = "00:00-23:59"\nwait_minutes = 0\n'
    )
    release = tmp_path / "release-the-fold"
    monkeypatch.setenv("GLUON_PAUSE", f"compact.before_request_diversion@1:{LIMIT_SECONDS}")
    monkeypatch.setenv("GLUON_PAUSE_RELEASE", str(release))
    settings = load_settings()
    config = load_config(config_path)
    table = config.tables[0]
    runner = Service(settings, config, parallel=1)
    stop = threading.Event()
    loops = runner._start_continuous(stop)
    key = source.table.upper()
    repo = Repository(settings.repo_url)
    scheduled: list[RunReport] = []
    try:
        for number in range(1, 200):  # batches add delta files until the loop folds them
            with source.engine.begin() as db:
                db.execute(sa.text(f"INSERT INTO {source.table} VALUES (:k, 0)"), {"k": number})
            if repo.compaction.open_run(key) is not None:
                break
            time.sleep(0.1)
        _wait_until("the fold to start", lambda: repo.compaction.open_run(key) is not None)

        # The schedule's compaction comes due while the fold holds the table.
        schedule = threading.Thread(
            target=lambda: scheduled.append(
                runner._run(table, Action.COMPACTION, runner.clock(), stop)
            )
        )
        schedule.start()
        schedule.join(timeout=2.0)
        release.touch()  # the fold goes on
        schedule.join(timeout=LIMIT_SECONDS)
        assert not schedule.is_alive()
    finally:
        release.touch()
        stop.set()
        for loop in loops:
            loop.join()
    assert scheduled[0].outcome != Outcome.LOCKED, scheduled[0].detail
    assert scheduled[0].outcome in (Outcome.SUCCESS, Outcome.NOTHING_TO_DO), scheduled[0].line()
    assert loops[0].folds == 1
