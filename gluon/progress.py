"""Progress reporting from services to whoever shows it (the CLI draws rich bars), and the
timer every command's steps are logged with."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol


class ProgressTask(Protocol):
    def advance(self, amount: int) -> None: ...


class Progress(Protocol):
    """Something that shows long steps; services call it, never print."""

    def task(self, description: str, total: int | None) -> AbstractContextManager[ProgressTask]: ...


class _NullTask:
    def advance(self, amount: int) -> None:
        pass


class NullProgress:
    """Shows nothing (tests, ``--json``, cron without a terminal)."""

    def task(self, description: str, total: int | None) -> AbstractContextManager[ProgressTask]:
        return nullcontext(_NullTask())


STEP_LOG = logging.getLogger("gluon.steps")
"""Where every step of every command is logged with its duration (docs/operations.md, §7)."""


class StepRecord:
    """What a running step may add to its closing log line (rows copied, changes shipped)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.detail = ""


@contextmanager
def timed_step(name: str) -> Iterator[StepRecord]:
    """Log ``step NAME: started`` and, when the block ends, ``step NAME: done in S.SSSs``
    (or ``failed after``): the one place a command's step is timed, so every log reads alike.

    The names are those of the command's plan (``offload`` without ``-x``), so a plan and the
    log of its run line up.
    """
    record = StepRecord(name)
    started = time.monotonic()
    STEP_LOG.info("step %s: started", name)
    try:
        yield record
    except BaseException as exc:
        STEP_LOG.info(
            "step %s: failed after %.3fs (%s)", name, time.monotonic() - started, type(exc).__name__
        )
        raise
    detail = f" ({record.detail})" if record.detail else ""
    STEP_LOG.info("step %s: done in %.3fs%s", name, time.monotonic() - started, detail)
