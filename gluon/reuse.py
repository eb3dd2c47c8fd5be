"""Connections a long-running process keeps from one run to the next (the service).

A command opens its repository and source engines once and drops them at exit. The
service runs thousands of extractions in one process: opening both per run cost an
empty run a third of its time (a new engine, the repository's migration check, a new
ADBC database that loads the server's type catalog) and left the old connections open
until the garbage collector came (PostgreSQL sessions piled up to 71).

Inside ``kept_connections()`` the repository (``gluon.repo.Repository``) is opened once
per URL for the process (its engine is a thread-safe pool) and a source
(``gluon.source.connect``) once per URL, timeouts and thread: each of the service's
worker threads keeps its own source, whose pool holds one connection and whose ADBC
database stays open, so a worker never holds more than its own few connections (see
docs/operations.md, "Connections"). Outside it (every command), nothing is kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

_lock = threading.Lock()
_kept: dict[Hashable, Any] | None = None
_closers: list[Callable[[], None]] = []


@contextmanager
def kept_connections() -> Iterator[None]:
    """Keep repositories and sources for reuse until exit, then close them."""
    global _kept
    with _lock:
        _kept = {}
    try:
        yield
    finally:
        with _lock:
            _kept = None
            closers = list(_closers)
            _closers.clear()
        for close in closers:
            try:
                close()
            except Exception:  # closing at exit must not hide why the service ended
                log.debug("closing a kept connection failed", exc_info=True)


def keeping() -> bool:
    """Inside ``kept_connections``."""
    return _kept is not None


def kept(
    key: Hashable,
    make: Callable[[], T],
    *,
    per_thread: bool,
    close: Callable[[T], None] | None = None,
) -> T:
    """The object kept under ``key`` (for this thread with ``per_thread``), made by ``make``
    the first time; just ``make()`` outside ``kept_connections``. ``close`` runs at exit."""
    if _kept is None:
        return make()
    full_key = (threading.get_ident(), key) if per_thread else key
    with _lock:
        found = _kept.get(full_key) if _kept is not None else None
    if found is not None:
        return found  # type: ignore[no-any-return]
    made = make()  # outside the lock: opening may take a while
    with _lock:
        if _kept is None:
            return made
        found = _kept.setdefault(full_key, made)
        if found is made and close is not None:
            _closers.append(lambda: close(made))
    return found
