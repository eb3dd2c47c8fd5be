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
from typing import Any, Generic, TypeVar

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


class SharedPool(Generic[T]):
    """At most ``size`` objects made by ``make``, lent to one thread at a time, for a whole
    process's threads (the service's Arrow connections: ``gluon.source.postgresql``).

    A thread that holds one and borrows again gets the same one (reads nest in a thread as
    they did on its own connection), so a holder never waits for a second: a thread waits
    only when it holds none, and holders wait for nothing of the pool's. One whose use
    raised is closed and made anew by the next borrower (a failed read may leave it broken).
    """

    def __init__(self, make: Callable[[], T], close: Callable[[T], None], size: int) -> None:
        self._make, self._close, self._size = make, close, size
        self._condition = threading.Condition()
        self._idle: list[T] = []
        self._made = 0
        self._lent: dict[int, tuple[T, int]] = {}
        """By thread: the object it holds and how many borrows deep."""
        self._closed = False

    @contextmanager
    def borrow(self, wait_seconds: float) -> Iterator[T]:
        """One of the pool's objects until exit.

        Raises:
            TimeoutError: none was free for ``wait_seconds``.
        """
        me = threading.get_ident()
        with self._condition:
            held = self._lent.get(me)
            if held is not None:
                self._lent[me] = (held[0], held[1] + 1)
        if held is not None:
            try:
                yield held[0]
            finally:
                with self._condition:
                    item, depth = self._lent[me]
                    self._lent[me] = (item, depth - 1)
            return
        item = self._take(wait_seconds)
        with self._condition:
            self._lent[me] = (item, 1)
        broken = False
        try:
            yield item
        except Exception:
            broken = True
            raise
        finally:
            self._give_back(me, item, broken)

    def _take(self, wait_seconds: float) -> T:
        with self._condition:
            if not self._condition.wait_for(
                lambda: bool(self._idle) or self._made < self._size, wait_seconds
            ):
                raise TimeoutError(f"no free connection of {self._size} in {wait_seconds:.0f} s")
            if self._idle:
                return self._idle.pop()
            self._made += 1
        try:
            return self._make()
        except BaseException:
            with self._condition:
                self._made -= 1
                self._condition.notify()
            raise

    def _give_back(self, me: int, item: T, broken: bool) -> None:
        with self._condition:
            del self._lent[me]
            keep = not broken and not self._closed
            if keep:
                self._idle.append(item)
            else:
                self._made -= 1
            self._condition.notify()
        if not keep:
            self._close_quietly(item)

    def close(self) -> None:
        """Close the idle objects; the lent ones are closed as they come back."""
        with self._condition:
            self._closed = True
            idle, self._idle = self._idle, []
            self._made -= len(idle)
        for item in idle:
            self._close_quietly(item)

    def _close_quietly(self, item: T) -> None:
        try:
            self._close(item)
        except Exception:  # closing must not hide why a read failed
            log.debug("closing a pooled connection failed", exc_info=True)


def shared_pool(
    key: Hashable, make: Callable[[], T], close: Callable[[T], None], size: int
) -> SharedPool[T] | None:
    """The process's pool under ``key`` inside ``kept_connections`` (None outside it)."""
    if _kept is None:
        return None
    return kept(
        key, lambda: SharedPool(make, close, size), per_thread=False, close=SharedPool.close
    )
