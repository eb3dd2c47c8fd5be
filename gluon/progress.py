"""Progress reporting from services to whoever shows it (the CLI draws rich bars)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
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
