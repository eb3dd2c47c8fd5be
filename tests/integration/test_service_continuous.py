"""``gluon service --continuous``: a table extracted as its changes commit.

Real SQLite (CHANGELOG, merge modes DEFERRED and IMMEDIATE) and PostgreSQL (PG_LOGICAL),
real Sail and Delta, the service as a
child process. The service is killed after a batch's Delta commit (``GLUON_FAULT``) and
restarted; a writer keeps writing; at each check the writer pauses and the lake read by
gluon must come to equal the source; small files are folded by a compaction while the
loop runs; SIGTERM ends it cleanly; no gl_seq is shipped twice. Every wait is a
convergence with a generous limit, never a latency assertion.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import (
    Source,
    assert_no_duplicate_sequences,
    enable,
    lake_rows,
    postgres_source,
    sqlite_source,
)
from support.waiting import wait_until
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

LIMIT_SECONDS = 240.0
FOLD_FILES = 4
PROGRAM = "from gluon.cli.app import main; main()"


class Writer(threading.Thread):
    """Inserts, updates and deletes rows of ``items`` until stopped; ``paused`` holds it."""

    def __init__(self, source: Source) -> None:
        super().__init__(daemon=True)
        self.engine = source.engine
        self.table = source.table
        self.rng = random.Random(33)
        self.next_key = 21
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.paused.is_set():
                    self.idle.set()
                    time.sleep(0.05)
                    continue
                self.idle.clear()
                self.step()
                time.sleep(0.02)
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def step(self) -> None:
        with self.engine.begin() as db:
            choice = self.rng.random()
            if choice < 0.5:
                db.execute(
                    sa.text(f"INSERT INTO {self.table} VALUES (:k, :v)"),
                    {"k": self.next_key, "v": self.next_key},
                )
                self.next_key += 1
            elif choice < 0.85:
                db.execute(
                    sa.text(f"UPDATE {self.table} SET v = v + 1 WHERE id = :k"),
                    {"k": self.rng.randrange(1, self.next_key)},
                )
            else:
                db.execute(
                    sa.text(f"DELETE FROM {self.table} WHERE id = :k"),
                    {"k": self.rng.randrange(1, self.next_key)},
                )

    def hold(self) -> None:
        self.paused.set()
        wait_until("the writer to pause", self.idle.is_set)

    def go_on(self) -> None:
        self.paused.clear()


def source_rows(source: Source) -> list[tuple[object, ...]]:
    with source.engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT id, v FROM {source.table} ORDER BY id")).all()
    return [tuple(row) for row in rows]


def shown_rows(source: Source) -> list[tuple[object, ...]]:
    rows = lake_rows(f"SELECT id, v FROM {source.table} ORDER BY id")
    return [(row["id"], row["v"]) for row in rows]


def assert_lake_follows(source: Source, writer: Writer) -> None:
    """A check: the writer pauses, the lake comes to equal the source, the writer goes on."""
    writer.hold()
    expected = source_rows(source)
    wait_until("the lake to equal the source", lambda: shown_rows(source) == expected)
    writer.go_on()


def tables_file(home: Path, source: Source) -> Path:
    # The table's compaction options are the fold's; its window never opens during the
    # test, so every compaction seen is a fold.
    closed = dt.datetime.now(dt.UTC) + dt.timedelta(hours=12)
    window = f"{closed:%H:%M}-{closed + dt.timedelta(minutes=10):%H:%M}"
    path = home / "tables.toml"
    path.write_text(
        f'[tables."{source.table}"]\n'
        "continuous = true\n"
        "poll_interval = 0.1\n"
        f"fold_files = {FOLD_FILES}\n"
        f'[tables."{source.table}".compaction]\n'
        f'window = "{window}"\n'
        "wait_minutes = 0\n"
    )
    return path


def start_service(config: Path, output: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gluon.cli.app import main; main()",
            "service",
            "--config",
            str(config),
        ],
        stdout=output.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
    )


@pytest.fixture(
    params=[
        ("sqlite", "CHANGELOG", "DEFERRED"),
        ("sqlite", "CHANGELOG", "IMMEDIATE"),
        ("postgresql", "PG_LOGICAL", "DEFERRED"),
    ],
    ids="-".join,
)
def enabled(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> Source:
    dialect, method, merge_mode = request.param
    if dialect == "sqlite":
        source = sqlite_source(tmp_path / "app.db")
    else:
        source = postgres_source(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, v INTEGER)"))
        for key in range(1, 21):
            db.execute(sa.text(f"INSERT INTO {source.table} VALUES (:k, :k)"), {"k": key})
    enable(run_cli, source, method, f"--incremental-merge-mode={merge_mode}")
    return source


def test_a_continuous_table_follows_a_writer_through_a_crash_a_fold_and_a_stop(
    enabled: Source, offload_home: Path
) -> None:
    source = enabled
    key = source.table.upper()
    config = tables_file(offload_home, source)
    output = offload_home / "service.out"
    writer = Writer(source)
    writer.start()
    try:
        # Killed right after the third batch's Delta commit, before its bookkeeping.
        crashed = start_service(config, output, GLUON_FAULT="extract.after_delta_commit@3")
        assert crashed.wait(timeout=LIMIT_SECONDS) == FAULT_EXIT_CODE, output.read_text()

        service = start_service(config, output)
        try:
            assert_lake_follows(source, writer)
            repo = Repository(load_settings().repo_url)
            state = repo.incremental.get_state(key)
            assert state is not None
            if state.merge_mode == "DEFERRED":  # IMMEDIATE's merges rewrite the small base's
                wait_until(  # few files: they do not pile up here
                    "a fold of the small files",
                    lambda: repo.compaction.last_completed(key) is not None,
                )
            assert_lake_follows(source, writer)
        finally:
            service.send_signal(signal.SIGTERM)
            code = service.wait(timeout=LIMIT_SECONDS)
        assert code == 0, output.read_text()
        assert "stopped after" in output.read_text()
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failure is None, writer.failure

    # What the writer did after the last batch is shipped by the next service.
    service = start_service(config, output)
    try:
        expected = source_rows(source)
        wait_until("the lake to equal the source", lambda: shown_rows(source) == expected)
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=LIMIT_SECONDS) == 0, output.read_text()
    state = Repository(load_settings().repo_url).incremental.get_state(key)
    assert state is not None
    if state.merge_mode == "DEFERRED":  # IMMEDIATE keeps no delta table: a key shown twice
        assert_no_duplicate_sequences(source)  # would have failed the comparisons above
