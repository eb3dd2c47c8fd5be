"""The install: the classic Spark path's missing extra, and scripts/setup.sh's own behaviour.

The default install has the Spark Connect client only (``pyspark-client``); classic Spark
(``GLUON_SPARK_MASTER``) needs the ``classic`` extra and says so in one line when it is
missing. setup.sh's installs themselves are checked by running the README's two commands
from a fresh clone (the integrator's closing note), not here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cli import error_lines
from typer.testing import Result

from gluon.lake.session import classic_installed

RunCli = Callable[..., Result]
REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP = REPO_ROOT / "scripts" / "setup.sh"
WAIT_FOR_APT = REPO_ROOT / "scripts" / "wait_for_apt.py"
SAMPLE_SOURCE = REPO_ROOT / "scripts" / "sample_source.py"


@pytest.mark.skipif(classic_installed(), reason="the classic extra is installed here")
def test_classic_spark_without_the_extra_says_how_to_install_it(
    offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = offload_home / "sample.db"
    subprocess.run([sys.executable, str(SAMPLE_SOURCE), "create", str(sample)], check=True)
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{sample}")
    monkeypatch.setenv("GLUON_SPARK_MASTER", "local[1]")

    result = run_cli("offload", "-t", "main.products", "-x")

    assert result.exit_code == 1, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert "classic Spark (GLUON_SPARK_MASTER) needs the full pyspark and delta-spark" in lines[0]
    assert "pip install -e '.[classic]'" in lines[0]
    assert "Traceback" not in result.stderr


def test_setup_refuses_an_unknown_option_in_one_line() -> None:
    result = subprocess.run(
        ["bash", str(SETUP), "--tests"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "setup: ERROR: unknown option --tests (usage: setup.sh [--test])"
    ]
    assert result.stdout == ""


def test_setup_help_says_what_each_form_installs() -> None:
    result = subprocess.run(
        ["bash", str(SETUP), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Usage: bash scripts/setup.sh [--test]" in result.stdout
    assert "pyspark-client" in result.stdout
    assert "Chromium" in result.stdout
    assert "GLUON_APT_WAIT" in result.stdout


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[Path]:
    """A lock file held with an fcntl lock by another process, as apt holds its locks."""
    path = tmp_path / "lock-frontend"
    path.touch()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            f"lock = open({str(path)!r}, 'a')\n"
            "fcntl.lockf(lock, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "held"
    try:
        yield path
    finally:
        holder.stdin.close()  # the holder exits, which releases its lock
        holder.wait(timeout=30)


def wait_for_apt(seconds: float, *locks: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WAIT_FOR_APT), str(seconds), *map(str, locks)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_apt_wait_gives_up_in_one_line_when_the_lock_stays_held(
    held_lock: Path, tmp_path: Path
) -> None:
    free = tmp_path / "lists-lock"
    free.touch()
    stdout, stderr = wait_for_apt(1, free, held_lock, tmp_path / "absent").communicate(timeout=60)
    assert stdout.splitlines() == [
        f"setup: waiting for another package manager ({held_lock} is locked)"
    ]
    assert stderr.splitlines() == [
        f"setup: ERROR: {held_lock} is still locked by another package manager after 1 s "
        "(set GLUON_APT_WAIT to wait longer)"
    ]


def test_apt_wait_goes_on_once_the_other_package_manager_is_done(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    lock.touch()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, time\n"
            f"lock = open({str(lock)!r}, 'a')\n"
            "fcntl.lockf(lock, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(3)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    waiter = wait_for_apt(120, lock)
    stdout, stderr = waiter.communicate(timeout=120)
    holder.wait(timeout=30)
    assert waiter.returncode == 0, stderr
    assert "waiting for another package manager" in stdout
    assert stderr == ""
