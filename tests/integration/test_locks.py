"""One lifecycle lock per table: which commands may overlap, and who is named when refused.

Real commands are held inside their locks by ``GLUON_PAUSE`` (``support.locking``)
while the test starts the others; nothing here depends on how long a step takes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli, lake_rows
from support.locking import PausedCommand

from gluon import locks
from gluon.config import load_settings
from gluon.errors import LockHeldError
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.locks import LockRecord

KEY = "MAIN.ORDERS"
FIRST = "column(placed) < datetime(2020-03-01 00:00:00)"
SECOND = "column(placed) >= datetime(2020-03-01 00:00:00) and column(id) <= numeric(120)"
FAST_ACK = {"GLUON_ACK_POLL_SECONDS": "0.2"}


def _orders(path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, region TEXT, placed TIMESTAMP, "
                "total NUMERIC(10,2))"
            )
        )
        for i in range(1, 151):
            db.execute(
                sa.text("INSERT INTO orders VALUES (:i, :r, :p, :t)"),
                {
                    "i": i,
                    "r": ["EU", "US", "APAC"][i % 3],
                    "p": dt.datetime(2020, 1, 1) + dt.timedelta(days=i),
                    "t": f"{i}.50",
                },
            )
    return engine


def _offloaded_with_changes(engine: sa.Engine, run_cli: RunCli) -> None:
    """Part of ``orders`` offloaded (FULL 100/10), CHANGELOG enabled, changes extracted."""
    first = run_cli(
        "offload", "-t", "main.orders", "-x", "--offload-type=FULL", f"--offload-predicate={FIRST}"
    )
    assert first.exit_code == 0, first.stderr
    enabled = run_cli(
        "offload",
        "-t",
        "main.orders",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    _change(engine, 1)
    extracted = run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr


def _change(engine: sa.Engine, round_: int) -> None:
    """Updates and a delete among the offloaded rows (ids below 59 were placed before March)."""
    with engine.begin() as db:
        db.execute(
            sa.text("UPDATE orders SET total = total + :n WHERE id % 7 = :m AND id < 50"),
            {"n": round_, "m": round_ % 7},
        )
        db.execute(sa.text("DELETE FROM orders WHERE id = :i"), {"i": 10 + round_})


def _lake(view: str = "main.orders") -> list[tuple[int, str, Decimal]]:
    rows = lake_rows(f"SELECT id, region, total FROM {view}")
    return sorted(
        (int(str(r["id"])), str(r["region"]), Decimal(str(r["total"])).quantize(Decimal("0.01")))
        for r in rows
    )


def _source(engine: sa.Engine, where: str) -> list[tuple[int, str, Decimal]]:
    with engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT id, region, total FROM orders WHERE {where}"))
        return sorted(
            (int(r[0]), str(r[1]), Decimal(str(r[2])).quantize(Decimal("0.01"))) for r in rows
        )


def _holder(lock_name: str) -> LockRecord | None:
    return locks.holder(Repository(load_settings().repo_url), KEY, lock_name)


def _compaction_at_wait(tmp_path: Path) -> PausedCommand:
    return PausedCommand(
        tmp_path,
        "compact.before_wait_for_queries",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-compaction",
        "--incremental-full-compaction",
        "--incremental-wait-time=0",
        env=FAST_ACK,
    )


def _compaction_reached_wait() -> bool:
    repo = Repository(load_settings().repo_url)
    runs = repo.compaction.runs(KEY)
    return bool(runs) and "compact" in repo.compaction.completed_steps(runs[0].id)


def _assert_refused(result: object, holder: str) -> None:
    lines = error_lines(result)  # type: ignore[arg-type]
    assert result.exit_code == 3, result.stderr  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert f"{KEY} is locked by a running {holder} (pid " in lines[0], lines[0]
    assert f"on {socket.gethostname()}, since " in lines[0] and "changed nothing" in lines[0]


def test_increment_during_full_compaction_is_refused_and_rows_stay_right(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11, reproduction 1: it lost 13 rows; now the increment exits 3 and waits its turn."""
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    repo = Repository(load_settings().repo_url)
    increment = ("offload", "-t", "main.orders", "-x", f"--offload-predicate={SECOND}")
    _change(engine, 2)  # shipped by the extraction the compaction runs to acknowledge
    with _compaction_at_wait(tmp_path) as compaction:
        compaction.wait_until(_compaction_reached_wait, "the compaction reaches its wait")
        refused = run_cli(*increment)
        _assert_refused(refused, "compaction")
        assert len(repo.increments.increments(KEY)) == 1
    assert compaction.returncode == 0, compaction.stderr
    offloaded = run_cli(*increment)
    assert offloaded.exit_code == 0, offloaded.stderr
    _change(engine, 3)
    assert (
        run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-extraction").exit_code == 0
    )
    expected = _source(engine, "placed < '2020-03-01' OR id <= 120")
    assert _lake() == expected


STARTERS: dict[str, tuple[str, ...]] = {
    "offload increment": (f"--offload-predicate={SECOND}",),
    "reset": ("--reset-backend-table",),
    "enable": ("--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG"),
    "disable": ("--incremental-updates-disabled",),
    "stage lake rows": ("--incremental-stage-lake-rows=column(id) = numeric(1)",),
    "compaction": (
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-terminate-compaction",
    ),
    "extraction": ("--incremental-run-extraction",),
}


def _start(run_cli: RunCli, starter: str) -> object:
    return run_cli("offload", "-t", "main.orders", "-x", *STARTERS[starter])


def test_overlap_matrix(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an extraction and a compaction may overlap; everything else exits 3 naming who runs."""
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)

    # A lifecycle command (a partial-offload increment) holds the table: nothing may start.
    with PausedCommand(
        tmp_path, "lock.lifecycle_held", "-t", "main.orders", "-x", f"--offload-predicate={SECOND}"
    ) as increment:
        increment.wait_for_lock(KEY, locks.EXTRACTION)
        for starter in STARTERS:
            _assert_refused(_start(run_cli, starter), "offload (partial offload increment)")
    assert increment.returncode == 0, increment.stderr

    # An extraction holds the table: only a compaction may start.
    _change(engine, 2)
    with PausedCommand(
        tmp_path,
        "extract.before_delta_commit",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-extraction",
    ) as extraction:
        extraction.wait_for_lock(KEY, locks.EXTRACTION)
        for starter in STARTERS:
            result = _start(run_cli, starter)
            if starter == "compaction":  # stops at the acknowledgement step, as asked
                assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
                assert "stopped at the acknowledgement step" in result.stdout  # type: ignore[attr-defined]
            else:
                _assert_refused(result, "extraction")
    assert extraction.returncode == 0, extraction.stderr

    # A compaction holds the table: only an extraction may start. (With none running, the
    # compaction acknowledged its diversion by extracting itself, holding the extraction lock
    # meanwhile; at its wait it holds the lifecycle lock only.)
    with _compaction_at_wait(tmp_path) as compaction:
        compaction.wait_until(_compaction_reached_wait, "the compaction reaches its wait")
        assert _holder(locks.EXTRACTION) is None
        _change(engine, 3)
        assert _start(run_cli, "extraction").exit_code == 0  # type: ignore[attr-defined]
        for starter in STARTERS:
            if starter != "extraction":
                _assert_refused(_start(run_cli, starter), "compaction")
    assert compaction.returncode == 0, compaction.stderr
    assert _holder(locks.LIFECYCLE) is None and _holder(locks.EXTRACTION) is None
    assert _start(run_cli, "extraction").exit_code == 0  # type: ignore[attr-defined]
    assert _lake() == _source(engine, "placed < '2020-03-01' OR id <= 120")


def test_repository_lock_of_another_host_is_refused_and_can_be_cleared(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    repo = Repository(load_settings().repo_url)
    since = now().replace(microsecond=0)
    other = LockRecord("compaction", 4242, "node-b.example", since)
    assert repo.locks.claim(KEY, locks.LIFECYCLE, other, stale=lambda _: False) is None
    refused = run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-compaction")
    assert refused.exit_code == 3 and len(error_lines(refused)) == 1, refused.stderr
    assert "locked in the repository by compaction (pid 4242 on node-b.example" in refused.stderr
    assert "gluon unlock -t MAIN.ORDERS" in refused.stderr
    assert repo.compaction.runs(KEY) == []
    # The lock file is free again after the refusal: nothing was left behind on this node.
    assert _holder(locks.EXTRACTION) is None
    cleared = run_cli("gluon", "unlock", "-t", "main.orders")
    assert cleared.exit_code == 0 and "cleared the lifecycle lock of compaction" in cleared.stdout
    compacted = run_cli(
        "offload",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-terminate-compaction",
    )
    assert compacted.exit_code == 0, compacted.stderr


def test_repository_lock_of_a_dead_process_here_is_taken_over(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    # A process that was killed holding the lock (kill -9 leaves its repository row).
    crashed = PausedCommand(
        tmp_path, "lock.lifecycle_held", "-t", "main.orders", "-x", f"--offload-predicate={SECOND}"
    )
    with crashed:
        crashed.wait_for_lock(KEY, locks.EXTRACTION)
        os.kill(crashed.pid, 9)
    assert crashed.returncode == -9
    repo = Repository(load_settings().repo_url)
    left = repo.locks.get(KEY, locks.LIFECYCLE)
    assert left is not None and left.pid == crashed.pid
    assert not locks.is_held(repo, KEY, locks.LIFECYCLE)
    offloaded = run_cli("offload", "-t", "main.orders", "-x", f"--offload-predicate={SECOND}")
    assert offloaded.exit_code == 0, offloaded.stderr
    assert repo.locks.get(KEY, locks.LIFECYCLE) is None
    # A live holder of this host is not cleared by gluon unlock.
    with locks.compaction_lock(load_settings(), KEY):
        refused = run_cli("gluon", "unlock", "-t", "main.orders")
        assert refused.exit_code == 3 and "alive on this host" in refused.stderr
    assert repo.locks.get(KEY, locks.LIFECYCLE) is None


def test_lock_file_names_its_holder(offload_home: Path) -> None:
    settings = load_settings()
    Repository(settings.repo_url, create=True)  # as the table's first offload made it
    with locks.compaction_lock(settings, KEY):
        text = locks.lock_path(settings.run_dir, KEY, locks.LIFECYCLE).read_text()
        assert f'"pid": {os.getpid()}' in text and '"command": "compaction"' in text
        refused = pytest.raises(LockHeldError, match=r"locked by a running compaction \(pid")
        with refused, locks.lifecycle_lock(settings, KEY, "offload"):
            pass
        with locks.extraction_lock(settings, KEY):  # the designed overlap
            pass
    assert locks.lock_path(settings.run_dir, KEY, locks.LIFECYCLE).read_text() == ""
    assert Repository(settings.repo_url).locks.get(KEY, locks.LIFECYCLE) is None


def _status(run_cli: RunCli) -> dict[str, Any]:
    result = run_cli("display_incremental_status", "-t", "main.orders", "--json")
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _status_text(run_cli: RunCli) -> str:
    result = run_cli("display_incremental_status", "-t", "main.orders")
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def _report_findings(run_cli: RunCli, tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "reports"
    result = run_cli("offload_status_report", "--output-format=json", f"--output-dir={out}")
    assert result.exit_code == 0, result.stderr
    (path,) = out.glob("*.json")
    path.rename(out / "read.json")
    findings: list[dict[str, Any]] = json.loads((out / "read.json").read_text())["findings"]
    (out / "read.json").unlink()
    return findings


def test_a_killed_compaction_shows_as_interrupted_and_resumes(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11, point 6: a compaction killed during its wait showed 'running' forever."""
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    with _compaction_at_wait(tmp_path) as compaction:
        # No extraction runs: the compaction acknowledges its diversion itself.
        compaction.wait_until(_compaction_reached_wait, "the compaction reaches its wait")
        alive = _status(run_cli)["compaction"]["ongoing"]
        assert alive["status"] == "running" and alive["status_text"] == "running"
        os.kill(compaction.pid, 9)
    assert compaction.returncode == -9
    ongoing = _status(run_cli)["compaction"]["ongoing"]
    assert ongoing["status"] == "interrupted"
    assert ongoing["status_text"] == "interrupted (run the same command again to resume)"
    assert "status: interrupted (run the same command again to resume)" in _status_text(run_cli)
    codes = {(f["table_key"], f["code"]) for f in _report_findings(run_cli, tmp_path)}
    assert (KEY, "compaction_interrupted") in codes
    resumed = run_cli(
        "offload",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-compaction",
        "--incremental-full-compaction",
        "--incremental-wait-time=0",
    )
    assert resumed.exit_code == 0, resumed.stderr
    assert _status(run_cli)["compaction"]["ongoing"] is None
    assert _lake() == _source(engine, "placed < '2020-03-01'")


def test_a_killed_extraction_shows_as_interrupted(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    _change(engine, 2)
    with PausedCommand(
        tmp_path,
        "extract.before_delta_commit",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-extraction",
    ) as extraction:
        extraction.wait_for_lock(KEY, locks.EXTRACTION)
        extraction.wait_until(
            lambda: _status(run_cli)["extraction"]["last_run"]["id"] == 2, "the run is recorded"
        )
        assert _status(run_cli)["extraction"]["last_run"]["status"] == "running"
        os.kill(extraction.pid, 9)
    extraction_status = _status(run_cli)["extraction"]
    assert extraction_status["interrupted"] == 1
    last = extraction_status["last_run"]
    assert last["status"] == "interrupted"
    assert "run the same command again to resume" in last["message"]
    assert "extraction run 2 interrupted" in _status_text(run_cli)
    codes = {(f["table_key"], f["code"]) for f in _report_findings(run_cli, tmp_path)}
    assert (KEY, "extraction_interrupted") in codes
    assert (
        run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-extraction").exit_code == 0
    )
    after = _status(run_cli)["extraction"]
    assert after["last_run"]["status"] == "success" and after["interrupted"] == 1
    assert _lake() == _source(engine, "placed < '2020-03-01'")


def test_a_lifecycle_command_is_refused_at_once_while_the_extraction_lock_is_held(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lifecycle lock takes the extraction lock too (issue 26, item 10): a disable while an
    extraction holds the table exits 3 at once and changes nothing. The extraction lock is held
    by this process, so the command, in a child process, has nothing else to wait for: a
    lifecycle lock without the extraction lock would disable the table here (exit 0), not hang.
    """
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    _offloaded_with_changes(engine, run_cli)
    with locks.extraction_lock(load_settings(), KEY):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from gluon.cli.offload import main; main()",
                *("-t", "main.orders", "-x", "--incremental-updates-disabled"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{KEY} is locked by a running extraction (pid " in lines[0], lines
    state = Repository(load_settings().repo_url).incremental.get_state(KEY)
    assert state is not None and state.status == "enabled"


def test_a_running_immediate_compaction_shows_as_running_until_killed(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Merge mode IMMEDIATE's compaction held the lifecycle lock under another command name
    than the one status looks for, so status called it interrupted while it ran."""
    engine = _orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    enabled = run_cli(
        "offload",
        "-t",
        "main.orders",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-merge-mode=IMMEDIATE",
    )
    assert enabled.exit_code == 0, enabled.stderr
    _change(engine, 1)
    extracted = run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    compacting = PausedCommand(
        tmp_path,
        "compact.before_compact_files",
        "-t",
        "main.orders",
        "-x",
        "--incremental-run-compaction",
    )
    with compacting as compaction:
        compaction.wait_for_lock(KEY, locks.LIFECYCLE)
        assert _status(run_cli)["compaction"]["ongoing"]["status"] == "running"
        os.kill(compaction.pid, 9)
    assert compaction.returncode == -9
    assert _status(run_cli)["compaction"]["ongoing"]["status"] == "interrupted"
    resumed = run_cli("offload", "-t", "main.orders", "-x", "--incremental-run-compaction")
    assert resumed.exit_code == 0, resumed.stderr
    assert _status(run_cli)["compaction"]["ongoing"] is None
    assert _lake() == _source(engine, "1 = 1")
