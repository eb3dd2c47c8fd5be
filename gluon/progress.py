"""Progress reporting from services to whoever shows it (the CLI draws rich bars), the
timer every command's steps are logged with, and the lines a result shows at the end."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class ShownLine:
    """One line of what a command shows when a service returns (the result renders itself:
    ``Shows``; the command prints)."""

    text: str
    label: str = ""
    """Empty: a result line, on stdout. ``warning`` or ``note``: on stderr, after the
    program's name (``offload: warning: ...``)."""


class Shows(Protocol):
    """A service's result that says what the command shows for it."""

    def shown(self) -> list[ShownLine]: ...


def plan_lines(table_key: str, descriptions: Iterable[str]) -> list[ShownLine]:
    """The steps a command would run without ``-x``, numbered."""
    lines = [ShownLine(f"Steps for {table_key} (nothing was changed; add -x to run them):")]
    lines += [
        ShownLine(f"  {number}. {description}")
        for number, description in enumerate(descriptions, start=1)
    ]
    return lines


def sentence(message: str, otherwise: str = "") -> ShownLine:
    """``message`` as a result line that starts with a capital letter."""
    return ShownLine(message[:1].upper() + message[1:] if message else otherwise)
