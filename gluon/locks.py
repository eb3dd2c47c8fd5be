"""Per-table, per-operation locks under ``$OFFLOAD_HOME/run/`` (node-local, as the spec says)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import filelock

from gluon.config import Settings
from gluon.errors import ConfigError, LockHeldError


@contextmanager
def table_lock(settings: Settings, table_key: str, operation: str) -> Iterator[None]:
    """Hold the ``operation`` lock of ``table_key``; fail at once if another run holds it.

    Raises:
        LockHeldError: another process holds the lock (exit code 3).
    """
    try:
        settings.run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the lock directory {settings.run_dir}: {exc}") from None
    path = settings.run_dir / f"{table_key.lower()}.{operation}.lock"
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise LockHeldError(
            f"another {operation} of {table_key} is running (lock {path}); "
            "wait for it to finish, this run changed nothing"
        ) from None
    try:
        yield
    finally:
        lock.release()
