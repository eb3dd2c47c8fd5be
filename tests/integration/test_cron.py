"""The crontab lines of docs/operations.md, run as written through $OFFLOAD_HOME/bin.

A PostgreSQL source with the guide's table ``SH.PRODUCTS``; ``OFFLOAD_HOME``
is laid out as the guide says (``conf/offload.env``, ``log/``, ``bin`` linked to
the checkout). Each job runs under ``/bin/sh`` with a cron-like environment:
``OFFLOAD_HOME`` from the crontab, a minimal ``PATH``, nothing else.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from gluon.config import load_settings
from gluon.repo import Repository

REPO_ROOT = Path(__file__).resolve().parents[2]
GUIDE = REPO_ROOT / "docs" / "operations.md"
TABLE = "SH.PRODUCTS"


@dataclass
class Crontab:
    variables: dict[str, str]
    jobs: list[str]
    """The command part of each job line."""

    def job(self, needle: str) -> str:
        found = [job for job in self.jobs if needle in job]
        assert len(found) == 1, f"expected one crontab line with {needle!r}: {self.jobs}"
        return found[0]


def guide_crontab() -> Crontab:
    blocks = re.findall(r"```crontab\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(blocks) == 1, "docs/operations.md should have one ```crontab block"
    variables: dict[str, str] = {}
    jobs = []
    for line in blocks[0].splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assignment = re.match(r"^([A-Z_]+)=(.*)$", line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, f"not a crontab job line: {line}"
        jobs.append(fields[5])
    return Crontab(variables, jobs)


@dataclass
class CronHome:
    path: Path
    source: sa.Engine

    def env(self, **extra: str) -> dict[str, str]:
        """What cron gives a job: the crontab's variables and little else."""
        return {
            "OFFLOAD_HOME": str(self.path),
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.path),
            "LANG": "C.UTF-8",
            **extra,
        }

    def start(self, command: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["/bin/sh", "-c", command],
            env=self.env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, command: str, **extra: str) -> int:
        process = self.start(command, **extra)
        out, err = process.communicate(timeout=300)
        assert not out and not err, "the crontab line redirects all output"
        return process.returncode

    def change(self, first_key: int) -> None:
        with self.source.begin() as db:
            db.execute(
                sa.text(
                    f"INSERT INTO sh.products VALUES ({first_key}, 'new', 1), "
                    f"({first_key + 1}, 'new', 2)"
                )
            )
            db.execute(sa.text("UPDATE sh.products SET name = 'changed' WHERE id = 1"))


@pytest.fixture
def cron_home(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> CronHome:
    crontab = guide_crontab()
    assert crontab.variables["OFFLOAD_HOME"].startswith("/"), "the crontab sets OFFLOAD_HOME"
    source = sa.create_engine(pg_url)
    with source.begin() as db:
        db.execute(sa.text("CREATE SCHEMA sh"))
        db.execute(
            sa.text(
                "CREATE TABLE sh.products (id INTEGER PRIMARY KEY, name VARCHAR(40), price INT)"
            )
        )
        db.execute(
            sa.text("INSERT INTO sh.products SELECT g, 'p' || g, g FROM generate_series(1, 20) g")
        )
    # The guide's layout: conf/offload.env, log/, bin linked to the checkout.
    (offload_home / "conf").mkdir()
    (offload_home / "log").mkdir()
    (offload_home / "bin").symlink_to(REPO_ROOT / "bin")
    (offload_home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={pg_url}\n")
    home = CronHome(offload_home, source)
    enabled = subprocess.run(
        [
            str(offload_home / "bin" / "offload"),
            "-t",
            TABLE,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        ],
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert enabled.returncode == 0, enabled.stderr
    # The test process reads the repository too (it has no GLUON_SOURCE_URL of its own).
    monkeypatch.setenv("OFFLOAD_HOME", str(offload_home))
    return home


def cron_output(home: CronHome, job: str) -> list[str]:
    target = re.search(r">>\s*\$OFFLOAD_HOME/(\S+)", job)
    assert target, f"the job should append its output to a file under $OFFLOAD_HOME: {job}"
    path = home.path / target.group(1)
    return path.read_text().splitlines() if path.exists() else []


def wait_for_running_extraction(timeout: float = 60.0) -> None:
    """Until an extraction run is recorded as running (it holds the lock by then)."""
    repo = Repository(load_settings().repo_url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = repo.incremental.extraction_runs(TABLE, 1)
        if runs and runs[0].status == "running":
            return
        time.sleep(0.05)
    raise AssertionError("the first extraction never started")


def test_overlapping_extractions_exit_3_and_a_noop_exits_0(cron_home: CronHome) -> None:
    job = guide_crontab().job("--incremental-run-extraction")
    assert job.startswith("$OFFLOAD_HOME/bin/offload -t SH.PRODUCTS ")
    cron_home.change(100)

    release = cron_home.path / "release-first"
    first = cron_home.start(
        job,
        GLUON_PAUSE="extract.before_delta_commit:240",
        GLUON_PAUSE_RELEASE=str(release),
    )
    try:
        wait_for_running_extraction()
        second = cron_home.run(job)
    finally:
        release.touch()
        first.communicate(timeout=300)
    assert (first.returncode, second) == (0, 3)
    lines = cron_output(cron_home, job)
    errors = [line for line in lines if "error" in line]
    assert len(errors) == 1, errors
    assert re.fullmatch(
        rf"offload: error: {TABLE} is locked by a running extraction \(pid [0-9]+ on "
        rf"{re.escape(socket.gethostname())}, since [-0-9]+ [:0-9]+ UTC\); wait for it to "
        rf"finish, this run changed nothing \(lock {re.escape(str(cron_home.path))}"
        r"/run/sh\.products\.extraction\.lock\)",
        errors[0],
    ), errors[0]
    assert any(line.startswith(f"Extracted 3 changes of {TABLE}") for line in lines), lines

    # Nothing left: exit 0 (without starting the engine: test_extraction checks that).
    before = len(cron_output(cron_home, job))
    assert cron_home.run(job) == 0
    assert cron_output(cron_home, job)[before].startswith(f"Extracted 0 changes of {TABLE}")


def test_unforced_overlap_exits_0_or_3_and_ships_everything_once(cron_home: CronHome) -> None:
    job = guide_crontab().job("--incremental-run-extraction")
    cron_home.change(100)
    runs = [cron_home.start(job), cron_home.start(job)]
    codes = {run.wait(timeout=300) for run in runs}
    assert codes in ({0, 3}, {0}), codes
    repo = Repository(load_settings().repo_url)
    shipped = sum(run.rows_written or 0 for run in repo.incremental.extraction_runs(TABLE))
    assert shipped == 3
    with cron_home.source.connect() as db:
        assert db.execute(sa.text("SELECT COUNT(*) FROM sh_h.products_log")).scalar() == 0


def test_report_job_writes_its_report_to_the_log_directory(cron_home: CronHome) -> None:
    job = guide_crontab().job("offload_status_report")
    assert cron_home.run(job) == 0
    lines = cron_output(cron_home, job)
    saved = [line for line in lines if line.startswith("Report saved to ")]
    assert len(saved) == 1
    report = Path(saved[0].removeprefix("Report saved to "))
    assert report.parent == cron_home.path / "log" and report.suffix == ".html"
    assert TABLE in report.read_text()


def test_env_file_values_yield_to_the_environment(cron_home: CronHome) -> None:
    """A variable set on the cron line wins over conf/offload.env (the wrappers keep it)."""
    job = guide_crontab().job("--incremental-run-extraction")
    code = cron_home.run(job, GLUON_SOURCE_URL="postgresql+psycopg://nobody@127.0.0.1:9/none")
    assert code == 1
    errors = [line for line in cron_output(cron_home, job) if "error" in line]
    assert len(errors) == 1, errors
    assert errors[0].startswith("offload: error: ") and "127.0.0.1" in errors[0], errors
    assert os.path.islink(cron_home.path / "bin")
