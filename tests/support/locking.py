"""Hold a real gluon command paused inside its lock while a test runs others against it.

Usage::

    with PausedCommand(tmp_path, "lock.lifecycle_held", "-t", "main.items", "-x", ...) as held:
        held.wait_until(lambda: ...)          # optional: a later point than the lock
        refused = run_cli("offload", ...)     # exits 3
    assert held.returncode == 0, held.stderr  # the paused command finished normally

The child pauses at a fault point (``GLUON_PAUSE``) until the test creates the
release file (``GLUON_PAUSE_RELEASE``), so no test depends on how long a step takes.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from gluon import locks
from gluon.config import load_settings
from gluon.repo import Repository

WAIT_SECONDS = 240.0
_counter = itertools.count()


class PausedCommand:
    """``offload ARGS`` in a child process, paused at ``point`` until the block ends."""

    def __init__(
        self, tmp_path: Path, point: str, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.release = tmp_path / f"release-{next(_counter)}"
        self.args = args
        self.env = {
            **os.environ,
            "GLUON_PAUSE": f"{point}:{WAIT_SECONDS}",
            "GLUON_PAUSE_RELEASE": str(self.release),
            **(env or {}),
        }
        self.returncode: int | None = None
        self.stdout = self.stderr = ""
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> PausedCommand:
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from gluon.cli.offload import main; main()", *self.args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` until it holds; fail if the child exits first."""
        assert self.process is not None
        deadline = time.monotonic() + WAIT_SECONDS
        while not condition():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                raise AssertionError(f"the paused command ended before {what}: {out}{err}")
            if time.monotonic() > deadline:
                raise AssertionError(f"gave up waiting for {what}")
            time.sleep(0.1)

    def wait_for_lock(self, table_key: str, lock_name: str) -> None:
        """Wait until this child holds ``lock_name`` of ``table_key`` (per the repository)."""

        def held() -> bool:
            record = locks.holder(Repository(load_settings().repo_url), table_key, lock_name)
            return record is not None and record.pid == self.pid

        self.wait_until(held, f"it holds the {lock_name} lock of {table_key}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self.process is not None
        self.release.touch()
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=WAIT_SECONDS)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.communicate()
        self.returncode = self.process.returncode
