"""Safe defaults (issue 30): what gluon writes is its user's alone unless GLUON_UMASK says
otherwise, and the service's metrics listen on 127.0.0.1 unless told otherwise. The modes
are those of real files: the repository, the Delta tables Sail and deltalake write, logs,
reports and lock files."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from typer.testing import Result

RunCli = Callable[..., Result]


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The test process' umask as a careless login's (022): gluon must not inherit it."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def written_by_gluon(home: Path) -> list[Path]:
    """Everything under ``home`` but ``home`` itself (the test made it)."""
    return sorted(home.rglob("*"))


def run_the_lifecycle(home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offload and enable a SQLite table (IMMEDIATE: deltalake merges), ship a change, save
    a report: every kind of file gluon writes."""
    path = home.parent / "app.db"
    url = f"sqlite:///{path}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        db.exec_driver_sql("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    enabled = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-merge-mode=IMMEDIATE",
    )
    assert enabled.exit_code == 0, enabled.stderr
    with engine.begin() as db:
        db.exec_driver_sql("INSERT INTO items VALUES (3, 'c')")
    extracted = run_cli("offload", "-t", "main.items", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    report = run_cli("offload_status_report")
    assert report.exit_code == 0, report.stderr
    engine.dispose()


def modes(paths: list[Path]) -> dict[str, set[Path]]:
    found: dict[str, set[Path]] = {"file": set(), "dir": set()}
    for path in paths:
        found["dir" if path.is_dir() else "file"].add(path)
    return found


def test_what_gluon_writes_is_readable_by_its_user_only(
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    loose_umask: None,
) -> None:
    run_the_lifecycle(offload_home, run_cli, monkeypatch)
    paths = written_by_gluon(offload_home)
    kinds = {path.relative_to(offload_home).parts[0] for path in paths}
    assert kinds >= {"repo", "lake", "log", "run"}, kinds
    assert any(path.suffix == ".parquet" for path in paths)
    assert any(path.name.startswith("gluon_offload_status_report_") for path in paths)
    open_to_others = {
        f"{stat.S_IMODE(path.stat().st_mode):o} {path.relative_to(offload_home)}"
        for path in paths
        if path.stat().st_mode & 0o077
    }
    assert open_to_others == set()
    assert os.umask(0o022) == 0o022  # the command gave the process its umask back


def test_gluon_umask_shares_the_lake_with_a_group(
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    loose_umask: None,
) -> None:
    monkeypatch.setenv("GLUON_UMASK", "027")
    run_the_lifecycle(offload_home, run_cli, monkeypatch)
    found = modes(sorted((offload_home / "lake").rglob("*")))
    assert {stat.S_IMODE(path.stat().st_mode) for path in found["dir"]} == {0o750}
    assert {stat.S_IMODE(path.stat().st_mode) for path in found["file"]} == {0o640}
    logs = list((offload_home / "log").glob("*.log"))
    assert logs and {stat.S_IMODE(path.stat().st_mode) for path in logs} == {0o600}


@pytest.mark.parametrize("value", ["0o77", "888", "1777", "group"])
def test_a_malformed_gluon_umask_is_refused(
    offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GLUON_UMASK", value)
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{offload_home.parent / 'app.db'}")
    result = run_cli("offload", "-t", "main.items", "-x")
    lines = error_lines(result)
    assert len(lines) == 1 and "GLUON_UMASK must be an octal umask" in lines[0], result.stderr
    assert result.exit_code == 2
    assert list(offload_home.iterdir()) == []


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses with a socket listening on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_service_under_tee_stopped_by_ctrl_c_exits_130_quietly_and_served_loopback(
    offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gluon service ... | tee``, then Ctrl-C: tee is gone when the service says it stops.
    The metrics endpoint listened on 127.0.0.1 only (no --metrics-address given)."""
    import signal
    import socket
    import subprocess
    import sys

    url = f"sqlite:///{offload_home.parent / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    with sa.create_engine(url).begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
    enabled = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    config = offload_home / "tables.toml"
    config.write_text('[tables."main.items"]\nextraction_interval = "1h"\n')
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [sys.executable, "-c", "from gluon.cli.app import main; main()", "service"]
    service = subprocess.Popen(
        [*command, "--config", str(config), "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=offload_home.parent,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as at a terminal
    )
    try:
        assert service.stdout is not None
        first = service.stdout.readline().decode()
        assert f"metrics on 127.0.0.1:{port}" in first, first
        assert listening_addresses(port) == {"127.0.0.1"}
        service.stdout.close()  # tee ended by the same Ctrl-C
        service.send_signal(signal.SIGINT)
        _, stderr = service.communicate(timeout=120)
    finally:
        if service.poll() is None:
            service.kill()
    assert service.returncode == 130, stderr.decode()
    assert stderr.decode() == ""


DISK_FULL_SCRIPT = r"""
set -e
mount -t tmpfs -o size=8m tmpfs "$LAKE"
offload() { "$PYTHON" -c 'from gluon.cli.offload import main; main()' "$@"; }
offload -t main.items -x --incremental-updates-enabled --incremental-extraction-method=CHANGELOG \
    --incremental-merge-mode=IMMEDIATE > /dev/null
"$PYTHON" -c "
import os, sqlite3
db = sqlite3.connect('$SOURCE')
rows = [(k, os.urandom(100).hex()) for k in range(2, 2000)]
db.executemany('INSERT INTO items VALUES (?, ?)', rows)
db.commit()"
log="$LAKE/main_load.db/items_changes/_delta_log"
before=$(ls "$log" | grep -c json)
GLUON_PAUSE=extract.before_merge_commit:120 GLUON_PAUSE_RELEASE="$HOME_DIR/release" \
    offload -t main.items -x --incremental-run-extraction > "$HOME_DIR/out" 2> "$HOME_DIR/err" &
until [ "$(ls "$log" | grep -c json)" -gt "$before" ]; do sleep 0.1; done
sleep 0.5
dd if=/dev/zero of="$LAKE/filler" bs=64k 2> /dev/null || true
touch "$HOME_DIR/release"
set +e
wait $!
echo $? > "$HOME_DIR/rc"
"""


def test_a_full_disk_during_an_immediate_merge_is_one_line_saying_so(
    offload_home: Path, tmp_path: Path
) -> None:
    """The staged batch is written, then the file system fills up before the merge into the
    base table (a real tmpfs in a user and mount namespace: no root needed)."""
    import subprocess
    import sys

    if subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available here (unshare -Urm)")
    source = tmp_path / "app.db"
    with sa.create_engine(f"sqlite:///{source}").begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        db.exec_driver_sql("INSERT INTO items VALUES (1, 'a')")
    lake = tmp_path / "full"
    lake.mkdir()
    env = {
        **os.environ,
        "GLUON_SOURCE_URL": f"sqlite:///{source}",
        "OFFLOAD_LAKE_ROOT": str(lake),
        "LAKE": str(lake),
        "SOURCE": str(source),
        "HOME_DIR": str(tmp_path),
        "PYTHON": sys.executable,
    }
    env.pop("RUST_BACKTRACE", None)  # as an operator's environment has it
    done = subprocess.run(
        ["unshare", "-Urm", "bash", "-c", DISK_FULL_SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "rc").read_text().strip() == "1"
    stderr = (tmp_path / "err").read_text()
    ours = [line for line in stderr.splitlines() if line.startswith("offload:")]
    assert len(ours) == 1, stderr
    assert ours[0].startswith("offload: error: merging into the Delta table at "), ours[0]
    assert "no space left on device: free space where the lake is" in ours[0], ours[0]
    assert "unexpected" not in stderr and "Traceback" not in stderr, stderr


def test_ctrl_c_ends_a_command_with_exit_130_and_one_line(
    offload_home: Path, tmp_path: Path
) -> None:
    """SIGINT while an offload holds the table's lock (paused there, before the engine
    starts: an embedded engine reached by the same SIGINT can hang the session's stop, the
    ``gluon shell`` part of issue 30)."""
    import signal
    import subprocess
    import sys
    import time

    source = tmp_path / "app.db"
    with sa.create_engine(f"sqlite:///{source}").begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        db.exec_driver_sql("INSERT INTO items VALUES (1, 'a')")
    env = {
        **os.environ,
        "GLUON_SOURCE_URL": f"sqlite:///{source}",
        "GLUON_PAUSE": "lock.lifecycle_held:120",
    }
    command = [sys.executable, "-c", "from gluon.cli.offload import main; main()"]
    offload = subprocess.Popen(
        [*command, "-t", "main.items", "-x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        # As at a terminal: a test runner started in the background ignores SIGINT, and a
        # child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(offload_home.glob("run/*.lock")):
            time.sleep(0.1)
        time.sleep(0.5)  # into the pause
        offload.send_signal(signal.SIGINT)
        _, stderr = offload.communicate(timeout=120)
    finally:
        if offload.poll() is None:
            offload.kill()
    assert offload.returncode == 130, stderr.decode()
    assert stderr.decode().splitlines() == ["offload: error: interrupted"]
    assert not (offload_home / "lake").exists()
