"""Table locks: one lifecycle lock and one extraction lock per table.

Every command that changes a table's lake objects, source capture objects or
repository state holds the table's **lifecycle** lock. Extraction holds the
**extraction** lock. Compaction holds only the lifecycle lock, because a
compaction waits for an extraction to acknowledge its change ingestion
diversion; every other lifecycle command holds both, so nothing else overlaps:

==================  ==========  ==========  ==========
running \\ starting  lifecycle   compaction  extraction
==================  ==========  ==========  ==========
lifecycle command   refused     refused     refused
compaction          refused     refused     allowed
extraction          refused     allowed     refused
==================  ==========  ==========  ==========

A lock is a node-local file under ``$OFFLOAD_HOME/run/`` (an ``flock``, released
by the kernel when its process dies) that also holds its holder (command, pid,
host, since when), and a row in the repository's ``table_locks`` so that nodes
sharing one repository exclude each other. A row left by a dead process of this
host is taken over; a row of another host is refused until cleared with
``gluon unlock``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gluon.config import Settings
from gluon.errors import ConfigError, LockHeldError
from gluon.faults import fault_point
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.locks import LockRecord

LIFECYCLE = "lifecycle"
EXTRACTION = "extraction"
LOCK_NAMES = (LIFECYCLE, EXTRACTION)

# Command names recorded as holders (the first words of the refusal message).
COMPACTION = "compaction"
EXTRACTION_COMMAND = "extraction"

INTERRUPTED = "interrupted"
"""How status shows a run recorded as running whose lock no live process holds."""


def this_host() -> str:
    return socket.gethostname()


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def _stale(record: LockRecord) -> bool:
    """A record of this host whose process is gone (killed, crashed) holds nothing."""
    return record.host == this_host() and not process_alive(record.pid)


def describe(record: LockRecord) -> str:
    since = record.since.strftime("%Y-%m-%d %H:%M:%S")
    return f"{record.command} (pid {record.pid} on {record.host}, since {since} UTC)"


def lock_path(run_dir: Path, table_key: str, lock_name: str) -> Path:
    return run_dir / f"{table_key.lower()}.{lock_name}.lock"


@contextmanager
def lifecycle_lock(
    settings: Settings,
    table_key: str,
    command: str,
    *,
    create_repository: bool = False,
    repo: Repository | None = None,
) -> Iterator[Repository]:
    """Hold both locks of ``table_key``: nothing else may run on the table meanwhile.

    Yields the repository the locks are claimed in (``repo``, or the one they opened).

    ``create_repository``: the command is an offload, which may start a new repository.

    Raises:
        LockHeldError: another command holds either lock (exit code 3).
    """
    with (
        table_lock(settings, table_key, LIFECYCLE, command, create_repository, repo=repo) as opened,
        # The repository the first lock opened (under its file lock) claims the second.
        table_lock(settings, table_key, EXTRACTION, command, create_repository, repo=opened),
    ):
        fault_point("lock.lifecycle_held")
        yield opened


@contextmanager
def compaction_lock(
    settings: Settings, table_key: str, *, repo: Repository | None = None
) -> Iterator[None]:
    """Hold the lifecycle lock only: extractions keep running (they finish a compaction)."""
    with table_lock(settings, table_key, LIFECYCLE, COMPACTION, repo=repo):
        yield


@contextmanager
def extraction_lock(
    settings: Settings, table_key: str, *, repo: Repository | None = None
) -> Iterator[None]:
    """Hold the extraction lock only: it may overlap a compaction, nothing else."""
    with table_lock(settings, table_key, EXTRACTION, EXTRACTION_COMMAND, repo=repo):
        yield


@contextmanager
def table_lock(
    settings: Settings,
    table_key: str,
    lock_name: str,
    command: str,
    create_repository: bool = False,
    *,
    repo: Repository | None = None,
) -> Iterator[Repository]:
    """Hold the ``lock_name`` lock of ``table_key`` as ``command``; fail at once if taken.

    ``repo``: the command's repository, if it opened one already (else the lock opens it).
    Yields the repository the lock is claimed in, for the command to go on with.

    Raises:
        LockHeldError: another process holds the lock (exit code 3).
    """

    def repository() -> Repository:
        return repo or Repository(settings.repo_url, create=create_repository)

    with claim_lock(settings.run_dir, table_key, lock_name, command, repository) as opened:
        yield opened


@contextmanager
def claim_lock(
    run_dir: Path,
    table_key: str,
    lock_name: str,
    command: str,
    repository: Callable[[], Repository],
) -> Iterator[Repository]:
    """:func:`table_lock` from the values it needs: the lock files' folder, and the
    repository to claim the lock in (opened under the file lock, where it may be created).

    Raises:
        LockHeldError: another process holds the lock (exit code 3).
    """
    holder = LockRecord(command, os.getpid(), this_host(), now().replace(microsecond=0))
    path = lock_path(run_dir, table_key, lock_name)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot create the lock file {path}: {exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            running = _read_holder(fd)
            who = f"a running {describe(running)}" if running else "another running command"
            raise LockHeldError(
                f"{table_key} is locked by {who}; wait for it to finish, this run changed "
                f"nothing (lock {path})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_text(holder).encode(), 0)
        try:
            repo = repository()
            _claim_in_repository(repo, table_key, lock_name, holder)
            try:
                yield repo
            finally:
                repo.locks.release(table_key, lock_name, holder)
        finally:
            os.ftruncate(fd, 0)  # an empty file: nobody holds it (status reads this)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _claim_in_repository(
    repo: Repository, table_key: str, lock_name: str, holder: LockRecord
) -> None:
    blocking = repo.locks.claim(table_key, lock_name, holder, stale=_stale)
    if blocking is None:
        return
    if blocking.host != holder.host:
        raise LockHeldError(
            f"{table_key} is locked in the repository by {describe(blocking)}; if no gluon "
            f"command is running on {blocking.host}, clear it with: gluon unlock -t {table_key}"
        )
    raise LockHeldError(
        f"{table_key} is locked in the repository by a running {describe(blocking)}; "
        "wait for it to finish, this run changed nothing"
    )


def _holder_text(holder: LockRecord) -> str:
    return json.dumps(
        {
            "command": holder.command,
            "pid": holder.pid,
            "host": holder.host,
            "since": holder.since.isoformat(),
        }
    )


def _read_holder(fd: int) -> LockRecord | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = json.loads(os.pread(fd, 4096, 0).decode())
        return LockRecord(
            str(data["command"]),
            int(data["pid"]),
            str(data["host"]),
            dt.datetime.fromisoformat(data["since"]),
        )
    return None


def holder(repo: Repository, table_key: str, lock_name: str) -> LockRecord | None:
    """Who holds the lock now, per the repository (None when nobody, or a dead process)."""
    record = repo.locks.get(table_key, lock_name)
    if record is None or _stale(record):
        return None
    return record


def is_held(repo: Repository, table_key: str, lock_name: str, command: str | None = None) -> bool:
    """Whether a live process holds the lock (as ``command``, when given).

    A record of another host counts as held: this node cannot see that process.
    """
    record = holder(repo, table_key, lock_name)
    return record is not None and (command is None or record.command == command)


def unlock(repo: Repository, table_key: str) -> list[str]:
    """Clear the repository records of ``table_key``'s locks; return what was cleared.

    Raises:
        LockHeldError: a live process of this host holds a lock (it would still be running).
    """
    cleared = []
    for lock_name in LOCK_NAMES:
        record = repo.locks.get(table_key, lock_name)
        if record is None:
            continue
        if record.host == this_host() and process_alive(record.pid):
            raise LockHeldError(
                f"{table_key} is locked by a running {describe(record)}: "
                "it is alive on this host, wait for it to finish"
            )
        repo.locks.clear(table_key, lock_name)
        cleared.append(f"{lock_name} lock of {describe(record)}")
    return cleared
