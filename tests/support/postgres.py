"""A throwaway PostgreSQL cluster for tests.

``PostgresServer`` runs ``initdb`` into a fresh temporary directory and starts
the cluster with ``pg_ctl`` on a free port on 127.0.0.1, with durability turned
off (fsync, synchronous_commit, full_page_writes) since the data is disposable.
Authentication is ``trust`` for the superuser ``postgres``, so URLs carry no
password. ``stop()`` kills the server and deletes the directory.

The binaries come from the newest ``/usr/lib/postgresql/<ver>/bin`` (Debian's
layout, installed by ``scripts/setup.sh``); set ``GLUON_TEST_PG_BINDIR`` to use
another directory. ``initdb`` and ``pg_ctl`` refuse to run as root, so under
root they run as the ``postgres`` OS user (via ``runuser``) and the temporary
directory is handed to that user.

Usage::

    server = PostgresServer()
    server.start()
    try:
        url = server.create_database("my_test_db")  # a SQLAlchemy URL string
    finally:
        server.stop()
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["PostgresServer", "PostgresStartError", "find_pg_bindir"]

PG_LIB_ROOT = Path("/usr/lib/postgresql")
BINDIR_ENV = "GLUON_TEST_PG_BINDIR"
OS_USER = "postgres"  # OS user the server runs as when we are root
SUPERUSER = "postgres"  # database superuser created by initdb
HOST = "127.0.0.1"

_START_ATTEMPTS = 3  # a new port each time, in case another process took ours
_START_TIMEOUT_S = 60
_LOG_TAIL_LINES = 40
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PostgresStartError(RuntimeError):
    """The throwaway cluster could not be initialised or started."""


def find_pg_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: the newest installed version."""
    override = os.environ.get(BINDIR_ENV)
    if override:
        bindir = Path(override)
        if not (bindir / "initdb").is_file():
            raise PostgresStartError(f"{BINDIR_ENV}={override} holds no initdb")
        return bindir
    found: list[tuple[tuple[int, ...], Path]] = []
    for initdb in PG_LIB_ROOT.glob("*/bin/initdb"):
        version = initdb.parent.parent.name
        if re.fullmatch(r"\d+(\.\d+)*", version):
            found.append((tuple(int(part) for part in version.split(".")), initdb.parent))
    if found:
        return max(found)[1]
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    raise PostgresStartError(
        f"no PostgreSQL server binaries found under {PG_LIB_ROOT}/<ver>/bin; "
        "run scripts/setup.sh (it installs Debian's postgresql packages)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _is_root() -> bool:
    return os.geteuid() == 0


def _traversable_by_all(path: Path) -> bool:
    """Whether every directory from / down to ``path`` is world-searchable."""
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in (path, *path.parents))


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


class PostgresServer:
    """One disposable PostgreSQL cluster; see the module docstring."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_pg_bindir()
        self.port: int | None = None
        self.base_dir: Path | None = None
        self._running = False

    # -- paths ---------------------------------------------------------------

    def _base(self) -> Path:
        if self.base_dir is None:
            raise RuntimeError("PostgresServer is not started")
        return self.base_dir

    @property
    def data_dir(self) -> Path:
        return self._base() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._base() / "sock"

    @property
    def log_file(self) -> Path:
        return self._base() / "postgres.log"

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Initialise and start the cluster; raises ``PostgresStartError`` on failure."""
        if self._running:
            return
        self.base_dir = self._make_base_dir()
        try:
            self._initdb()
            self._start_server()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the server (``-m immediate``) and remove its directory. Idempotent."""
        if self.base_dir is None:
            return
        if self._running or (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._pg("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        self._running = False
        shutil.rmtree(self.base_dir, ignore_errors=True)
        self.base_dir = None
        self.port = None

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- connections ---------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3 driver) for ``dbname`` on this server."""
        if self.port is None:
            raise RuntimeError("PostgresServer is not started")
        return f"postgresql+psycopg://{SUPERUSER}@{HOST}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        """A raw autocommit psycopg connection as the superuser."""
        if self.port is None:
            raise RuntimeError("PostgresServer is not started")
        return psycopg.connect(
            host=HOST,
            port=self.port,
            user=SUPERUSER,
            dbname=dbname,
            autocommit=True,
            connect_timeout=10,
        )

    def create_database(self, name: str) -> str:
        """Create a fresh, empty database ``name`` (dropping any old one); return its URL."""
        _check_identifier(name)
        with self.connect() as conn:
            _drop_database(conn, name)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, terminating any sessions still connected to it."""
        _check_identifier(name)
        with self.connect() as conn:
            _drop_database(conn, name)

    # -- internals -----------------------------------------------------------

    def _make_base_dir(self) -> Path:
        tmp_root = Path(tempfile.gettempdir()).resolve()
        owner = None
        if _is_root():
            try:
                owner = pwd.getpwnam(OS_USER)
            except KeyError:
                raise PostgresStartError(
                    f"running as root but there is no {OS_USER!r} OS user to run "
                    "PostgreSQL as; run scripts/setup.sh"
                ) from None
            # The postgres user must be able to reach the directory.
            if not _traversable_by_all(tmp_root):
                tmp_root = Path("/tmp")
        base = Path(tempfile.mkdtemp(prefix="gluon-pg-", dir=tmp_root))
        (base / "sock").mkdir()
        if owner is not None:
            for path in (base, base / "sock"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        return base

    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL tool (as the postgres user if we are root)."""
        cmd = [str(self.bindir / tool), *args]
        if _is_root():
            cmd = ["runuser", "-u", OS_USER, "--", *cmd]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        # Plain English messages whatever the caller's locale (which may not even be
        # installed); the cluster's own locale is set explicitly by initdb.
        env["LC_ALL"] = "C"
        return subprocess.run(
            cmd,
            cwd=self._base(),  # the caller's cwd may be unreadable for the postgres user
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_S + 30,
            check=False,
        )

    def _initdb(self) -> None:
        common = ["-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8"]
        common.append("--no-sync")  # throwaway data: skip the final fsync of every file
        failures = []
        for locale_args in (["--locale=C.UTF-8"], ["--no-locale"]):
            shutil.rmtree(self.data_dir, ignore_errors=True)
            result = self._pg("initdb", *common, *locale_args)
            if result.returncode == 0:
                return
            failures.append(
                f"$ initdb {' '.join(locale_args)} (exit {result.returncode})\n"
                f"{result.stdout}{result.stderr}".rstrip()
            )
        raise PostgresStartError("initdb failed:\n" + "\n\n".join(failures))

    def _start_server(self) -> None:
        failures = []
        for _ in range(_START_ATTEMPTS):
            port = _free_port()
            with contextlib.suppress(FileNotFoundError):
                self.log_file.unlink()  # so the tail shows this attempt only
            options = " ".join(
                [
                    f"-c listen_addresses={HOST}",
                    f"-p {port}",
                    f"-k {self.socket_dir}",
                    "-c fsync=off",
                    # synchronous_commit stays on: logical decoding reads only flushed WAL,
                    # so a change committed asynchronously would reach the slot late.
                    "-c full_page_writes=off",
                    "-c max_connections=200",
                    # Logical decoding for the PG_LOGICAL method (one slot per enabled table).
                    "-c wal_level=logical",
                    "-c max_replication_slots=64",
                    "-c max_wal_senders=16",
                ]
            )
            result = self._pg(
                "pg_ctl",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
                "-o",
                options,
                "start",
            )
            if result.returncode == 0:
                self.port = port
                self._running = True
                return
            log_tail = _tail(self.log_file)
            failures.append(
                f"pg_ctl start on port {port} failed (exit {result.returncode}):\n"
                f"{result.stdout}{result.stderr}".rstrip()
                + f"\n--- {self.log_file} (last {_LOG_TAIL_LINES} lines) ---\n{log_tail}"
            )
            # Make sure a half-started postmaster is gone before retrying.
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._pg("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
            if "already in use" not in log_tail and "could not bind" not in log_tail:
                break  # not a port clash: retrying will not help
        raise PostgresStartError(
            f"could not start PostgreSQL from {self.bindir}:\n" + "\n\n".join(failures)
        )


def _drop_database(conn: psycopg.Connection[Any], name: str) -> None:
    # A logical replication slot (method PG_LOGICAL) blocks DROP DATABASE, even WITH (FORCE).
    conn.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
        "WHERE database = %s AND NOT active",
        (name,),
    )
    if conn.info.server_version >= 130000:  # WITH (FORCE) ends other sessions first
        stmt = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
    else:
        stmt = sql.SQL("DROP DATABASE IF EXISTS {}")
    conn.execute(stmt.format(sql.Identifier(name)))


def _check_identifier(name: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a plain SQL identifier (letters, digits, _; <= 63): {name!r}")
